// See include/rain_curl.h. Each function is looked up once with dlsym; a missing one fails the
// load, so a loaded table never holds a NULL.
#include "rain_curl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static CURLcode (*p_curl_global_init)(long flags);
static CURL *(*p_curl_easy_init)(void);
static void (*p_curl_easy_cleanup)(CURL *curl);
static CURLcode (*p_curl_easy_perform)(CURL *curl);
static const char *(*p_curl_easy_strerror)(CURLcode code);
static struct curl_slist *(*p_curl_slist_append)(struct curl_slist *list, const char *value);
static void (*p_curl_slist_free_all)(struct curl_slist *list);
static CURLcode (*p_curl_easy_setopt)(CURL *curl, CURLoption option, ...);
static CURLcode (*p_curl_easy_getinfo)(CURL *curl, CURLINFO info, ...);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure = "libcurl was not loaded";
static char load_message[512];

#define RAIN_CURL_LOOKUP(name)                                                                        \
    *(void **)(&p_##name) = dlsym(handle, #name);                                                     \
    if (p_##name == NULL) {                                                                           \
        snprintf(load_message, sizeof load_message, "libcurl.so.4 has no %s (too old a libcurl)", #name); \
        load_failure = load_message;                                                                  \
        return;                                                                                       \
    }

static void load(void) {
    void *handle = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        snprintf(load_message, sizeof load_message, "%s", why ? why : "libcurl.so.4 could not be loaded");
        load_failure = load_message;
        return;
    }
    RAIN_CURL_LOOKUP(curl_global_init)
    RAIN_CURL_LOOKUP(curl_easy_init)
    RAIN_CURL_LOOKUP(curl_easy_cleanup)
    RAIN_CURL_LOOKUP(curl_easy_perform)
    RAIN_CURL_LOOKUP(curl_easy_strerror)
    RAIN_CURL_LOOKUP(curl_slist_append)
    RAIN_CURL_LOOKUP(curl_slist_free_all)
    RAIN_CURL_LOOKUP(curl_easy_setopt)
    RAIN_CURL_LOOKUP(curl_easy_getinfo)
    if (p_curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        load_failure = "curl_global_init failed";
        return;
    }
    load_failure = NULL;
}

const char *rain_curl_load(void) {
    pthread_once(&load_once, load);
    return load_failure;
}

CURL *rain_curl_easy_init(void) { return p_curl_easy_init(); }
void rain_curl_easy_cleanup(CURL *curl) { p_curl_easy_cleanup(curl); }
CURLcode rain_curl_easy_perform(CURL *curl) { return p_curl_easy_perform(curl); }
const char *rain_curl_easy_strerror(CURLcode code) { return p_curl_easy_strerror(code); }
struct curl_slist *rain_curl_slist_append(struct curl_slist *list, const char *value) {
    return p_curl_slist_append(list, value);
}
void rain_curl_slist_free_all(struct curl_slist *list) { p_curl_slist_free_all(list); }

CURLcode rain_curl_setopt_long(CURL *curl, CURLoption option, long value) {
    return p_curl_easy_setopt(curl, option, value);
}
CURLcode rain_curl_setopt_string(CURL *curl, CURLoption option, const char *value) {
    return p_curl_easy_setopt(curl, option, value);
}
CURLcode rain_curl_setopt_pointer(CURL *curl, CURLoption option, void *value) {
    return p_curl_easy_setopt(curl, option, value);
}
CURLcode rain_curl_setopt_off(CURL *curl, CURLoption option, curl_off_t value) {
    return p_curl_easy_setopt(curl, option, value);
}
CURLcode rain_curl_setopt_io(CURL *curl, CURLoption option, rain_curl_io_callback value) {
    return p_curl_easy_setopt(curl, option, value);
}
CURLcode rain_curl_getinfo_long(CURL *curl, CURLINFO info, long *value) {
    return p_curl_easy_getinfo(curl, info, value);
}

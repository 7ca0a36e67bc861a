// libcurl, loaded when first needed instead of linked: a daemon whose code sender is the outbox or
// a command never maps libcurl and its dependencies (LDAP, Kerberos, GnuTLS through librtmp, SSH).
//
// The types and constants come from curl/curl.h. Call rain_curl_load() first; it returns NULL once
// libcurl.so.4 is loaded with every function below and curl_global_init has succeeded, or a
// message saying why it could not be. The rain_curl_* functions then call libcurl's functions of
// the same name. (The curl_* declarations of curl/curl.h are visible too, but nothing links them:
// calling one fails at link time.)
#ifndef RAIN_CURL_H
#define RAIN_CURL_H

#include <curl/curl.h>

/// Loads libcurl and initializes it once (thread-safe). NULL on success, else why it failed (a
/// static string).
const char *rain_curl_load(void);

CURL *rain_curl_easy_init(void);
void rain_curl_easy_cleanup(CURL *curl);
CURLcode rain_curl_easy_perform(CURL *curl);
const char *rain_curl_easy_strerror(CURLcode code);
struct curl_slist *rain_curl_slist_append(struct curl_slist *list, const char *value);
void rain_curl_slist_free_all(struct curl_slist *list);

// curl_easy_setopt and curl_easy_getinfo are variadic: Swift cannot call a C variadic function,
// so each argument type gets one typed wrapper.
CURLcode rain_curl_setopt_long(CURL *curl, CURLoption option, long value);
CURLcode rain_curl_setopt_string(CURL *curl, CURLoption option, const char *value);
CURLcode rain_curl_setopt_pointer(CURL *curl, CURLoption option, void *value);
CURLcode rain_curl_setopt_off(CURL *curl, CURLoption option, curl_off_t value);
typedef size_t (*rain_curl_io_callback)(char *buffer, size_t size, size_t count, void *context);
CURLcode rain_curl_setopt_io(CURL *curl, CURLoption option, rain_curl_io_callback value);
CURLcode rain_curl_getinfo_long(CURL *curl, CURLINFO info, long *value);

#endif

#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic macros-in-spirit: Swift cannot call a C
// variadic function, so each argument type gets one typed wrapper.
static inline CURLcode rain_curl_setopt_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode rain_curl_setopt_string(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode rain_curl_setopt_pointer(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode rain_curl_setopt_off(CURL *curl, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(curl, option, value);
}
typedef size_t (*rain_curl_io_callback)(char *buffer, size_t size, size_t count, void *context);
static inline CURLcode rain_curl_setopt_io(CURL *curl, CURLoption option, rain_curl_io_callback value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode rain_curl_getinfo_long(CURL *curl, CURLINFO info, long *value) {
    return curl_easy_getinfo(curl, info, value);
}

// CCurl: the system-library module for libcurl (pkg-config `libcurl`, apt `libcurl4-openssl-dev`; Debian 12
// ships 7.88). Only `FanoutWire` imports it. libcurl's setters and getters are variadic, which Swift cannot
// call: each `CCurl_*` helper below passes one argument of one type. Nothing else lives here.
#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <curl/curl.h>

static inline CURLcode CCurl_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode CCurl_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode CCurl_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode CCurl_easy_setopt_off(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode CCurl_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode CCurl_easy_setopt_write(CURL *easy, curl_write_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback);
}

static inline CURLcode CCurl_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode CCurl_easy_getinfo_off(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}

/// `CURLOPT_PREREQFUNCTION` (libcurl 7.80+): called once the connection is made or reused, right before the
/// request is sent.
static inline CURLcode CCurl_easy_setopt_prereq(CURL *easy, curl_prereq_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, callback);
}

static inline CURLMcode CCurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode CCurl_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode CCurl_multi_setopt_socket(CURLM *multi, curl_socket_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback);
}

static inline CURLMcode CCurl_multi_setopt_timer(CURLM *multi, curl_multi_timer_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback);
}

/// libcurl's process-wide setup (`curl_global_init(CURL_GLOBAL_DEFAULT)`), called once before any handle.
static inline CURLcode CCurl_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }

/// The running libcurl's version (`curl_version_info(CURLVERSION_NOW)`).
static inline curl_version_info_data *CCurl_version_info(void) { return curl_version_info(CURLVERSION_NOW); }

/// The socket number `curl_multi_socket_action` takes for "a timeout expired" (CURL_SOCKET_TIMEOUT).
static inline curl_socket_t CCurl_socket_timeout(void) { return CURL_SOCKET_TIMEOUT; }

#endif // CCURL_SHIM_H

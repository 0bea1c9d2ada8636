/* SPDX-License-Identifier: Apache-2.0 */
/* curl.h: the table of libcurl functions src/kube calls, filled by kube__curl_load (curl.c)
 * from a libcurl opened with dlopen on the first kube_client_new. Only client.c, watch.c and
 * curl.c include it: gpuslice itself never links libcurl. Types and constants still come
 * from <curl/curl.h>. */
#ifndef GS_KUBE_CURL_H
#define GS_KUBE_CURL_H

#include <curl/curl.h>

/* One pointer per libcurl function, named after it without the curl_ prefix. The variadic
 * setopt/getinfo lose curl.h's gcc type checks: pass longs as 0L/1L, pointers as pointers. */
struct kube_curl {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *e);
    CURLcode (*easy_setopt)(CURL *e, CURLoption opt, ...);
    CURLcode (*easy_getinfo)(CURL *e, CURLINFO info, ...);
    CURLcode (*easy_perform)(CURL *e);
    const char *(*easy_strerror)(CURLcode code);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *m);
    CURLMcode (*multi_add_handle)(CURLM *m, CURL *e);
    CURLMcode (*multi_remove_handle)(CURLM *m, CURL *e);
    CURLMcode (*multi_perform)(CURLM *m, int *running);
    CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd extra_fds[], unsigned int n_extra_fds,
                            int timeout_ms, int *ret);
    CURLMcode (*multi_wakeup)(CURLM *m);
    CURLMsg *(*multi_info_read)(CURLM *m, int *msgs_in_queue);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
    void (*slist_free_all)(struct curl_slist *list);
};

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* curl.c: loads libcurl at run time (dlopen) the first time a Kubernetes API client is made,
 * resolves the functions of struct kube_curl and runs curl_global_init once. Linking libcurl
 * instead would map its ~25 dependencies (OpenSSL, GnuTLS, Kerberos, p11-kit, ...) into the
 * daemon, about 5.5 MiB resident, even on nodes that never talk to the API server. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kube/curl.h"
#include "kube/internal.h"

#define KUBE_CURL_HINT                                                                             \
    "install libcurl4 (Debian: libcurl4-openssl-dev for building, libcurl4 at run time) or run "   \
    "without --kubeconfig/in-cluster config"

#define SYM(f) DL_SYMBOL(struct kube_curl, f, "curl_" #f)
static const struct dl_symbol symbols[] = {
    SYM(global_init),    SYM(easy_init),        SYM(easy_cleanup),        SYM(easy_setopt),
    SYM(easy_getinfo),   SYM(easy_perform),     SYM(easy_strerror),       SYM(multi_init),
    SYM(multi_cleanup),  SYM(multi_add_handle), SYM(multi_remove_handle), SYM(multi_perform),
    SYM(multi_poll),     SYM(multi_wakeup),     SYM(multi_info_read),     SYM(slist_append),
    SYM(slist_free_all),
};
#undef SYM

int kube__curl_open(const char *library, struct kube_curl *ret, struct error *err)
{
    struct error e = {0};
    int r =
        dl_load_table(&library, 1, symbols, GS_ARRAY_SIZE(symbols), ret, sizeof(*ret), NULL, &e);

    if (r < 0)
        return error_set(err, r, "%s%s; " KUBE_CURL_HINT, e.msg,
                         r == -ELIBBAD ? " (libcurl 7.68 or newer is needed)" : "");
    return 0;
}

/* The process-wide state of the one load: written once under pthread_once, read-only after. */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct kube_curl loaded;
static struct error load_err;

static void load(void)
{
    const char *library = getenv("GPUSLICE_LIBCURL");
    CURLcode res;
    int r;

    library = library && *library ? library : "libcurl.so.4";
    r = kube__curl_open(library, &loaded, &load_err);
    if (r < 0)
        return;
    /* The handle is never dlclose'd: curl_global_cleanup is not thread-safe, OpenSSL cannot
     * be unloaded and initialised again in one process, and clients, watches and their
     * threads may hold curl handles until exit. Reopening on every client would also redo
     * the global init. So the library stays mapped for the process lifetime. */
    res = loaded.global_init(CURL_GLOBAL_DEFAULT);
    if (res != CURLE_OK)
        error_set(&load_err, -EIO, "%s: curl_global_init failed: %s", library,
                  loaded.easy_strerror(res));
}

int kube__curl_load(const struct kube_curl **ret, struct error *err)
{
    pthread_once(&load_once, load);
    if (load_err.code < 0)
        return error_set(err, load_err.code, "%s", load_err.msg);
    *ret = &loaded;
    return 0;
}

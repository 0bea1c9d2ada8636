/* SPDX-License-Identifier: Apache-2.0 */
/* dl.c: the one way gpuslice loads a library at run time (base.h): the first of a list of
 * names that dlopen accepts, every symbol of a table resolved into a struct of function
 * pointers, all or nothing. Used for the libraries a daemon should only pay for when it
 * uses them (libcurl, libmicrohttpd) and for NVML's plain symbol tables. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int dl_load_table(const char *const *names, size_t n_names, const struct dl_symbol *syms,
                  size_t n_syms, void *table, size_t table_size, void **ret_handle,
                  struct error *err)
{
    const char *why = NULL, *name = NULL;
    char *t = calloc(1, table_size ? table_size : 1);
    void *h = NULL;
    int r = 0;

    if (!t)
        return error_set(err, -ENOMEM, "out of memory");
    (void)dlerror();
    for (size_t i = 0; i < n_names && !h; i++) {
        name = names[i];
        h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            why = dlerror();
    }
    if (!h) {
        r = error_set(err, -ELIBACC, "cannot load %s: %s", name ? name : "(no name)",
                      why ? why : "unknown error");
        goto out;
    }
    for (size_t i = 0; i < n_syms; i++) {
        void *sym = dlsym(h, syms[i].name);
        if (!sym) {
            r = error_set(err, -ELIBBAD, "cannot load %s: it has no %s", name, syms[i].name);
            goto out;
        }
        if (syms[i].offset + sizeof(sym) > table_size) {
            r = error_set(err, -EINVAL, "%s: %s lies outside the table", name, syms[i].name);
            goto out;
        }
        /* POSIX guarantees that a dlsym result converts to a function pointer */
        memcpy(t + syms[i].offset, &sym, sizeof(sym));
    }
    memcpy(table, t, table_size);
    if (ret_handle)
        *ret_handle = h;
    h = NULL; /* the caller's now, or loaded for the life of the process */
out:
    if (h)
        dlclose(h);
    free(t);
    return r;
}

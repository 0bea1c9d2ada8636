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

int dl_load_table_opt(const char *const *names, size_t n_names, const struct dl_symbol *syms,
                      size_t n_syms, void *table, size_t table_size, void **ret_handle,
                      struct dl_load *opt, struct error *err)
{
    const char *why = NULL, *name = NULL;
    void **slots = calloc(n_syms ? n_syms : 1, sizeof(*slots));
    void *h = NULL;
    int r = 0;

    if (!slots)
        return error_set(err, -ENOMEM, "out of memory");
    (void)dlerror();
    for (size_t i = 0; i < n_names && !h; i++) {
        name = names[i];
        h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            why = dlerror();
    }
    if (!h) {
        if (opt)
            str_copy(opt->why, why ? why : "unknown error", sizeof(opt->why));
        r = error_set(err, -ELIBACC, "cannot load %s: %s", name ? name : "(no name)",
                      why ? why : "unknown error");
        goto out;
    }
    for (size_t i = 0; i < n_syms; i++) {
        if (syms[i].offset + sizeof(void *) > table_size) {
            r = error_set(err, -EINVAL, "%s: %s lies outside the table", name, syms[i].name);
            goto out;
        }
        slots[i] = dlsym(h, syms[i].name);
        if (slots[i] || syms[i].optional)
            continue;
        if (opt)
            opt->lacking = syms[i].name;
        r = error_set(err, -ELIBBAD, "cannot load %s: it has no %s", name, syms[i].name);
        goto out;
    }
    /* POSIX guarantees that a dlsym result converts to a function pointer */
    for (size_t i = 0; i < n_syms; i++)
        memcpy((char *)table + syms[i].offset, &slots[i], sizeof(slots[i]));
    for (size_t i = 0; i < n_syms && opt && opt->missing; i++)
        if (!slots[i])
            opt->missing(opt->ctx, syms[i].name);
    if (ret_handle)
        *ret_handle = h;
    h = NULL; /* the caller's now, or loaded for the life of the process */
out:
    if (h)
        dlclose(h);
    free(slots);
    return r;
}

int dl_load_table(const char *const *names, size_t n_names, const struct dl_symbol *syms,
                  size_t n_syms, void *table, size_t table_size, void **ret_handle,
                  struct error *err)
{
    return dl_load_table_opt(names, n_names, syms, n_syms, table, table_size, ret_handle, NULL,
                             err);
}

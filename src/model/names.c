/* SPDX-License-Identifier: Apache-2.0 */
/* names.c: resource names, socket names and patterns. The kubelet refuses extended resource
 * names that break IsExtendedResourceName (kubelet facts §2.1); we refuse them here, while
 * building the model, so a bad name is a config error and not a registration failure.
 * Pure: no I/O. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model/internal.h"

#define QUALIFIED_NAME_MAX 63
#define DNS1123_SUBDOMAIN_MAX 253

int model__grow(void **arr, size_t *alloc, size_t n, size_t elem_size)
{
    size_t want;
    void *p;

    if (n < *alloc)
        return 0;
    want = *alloc ? *alloc * 2 : 8;
    if (want > SIZE_MAX / elem_size)
        return -ENOMEM;
    p = realloc(*arr, want * elem_size);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *alloc = want;
    return 0;
}

bool model__glob_match(const char *pattern, const char *s)
{
    return cfg_pattern_match(pattern, s);
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters. */
static bool qualified_name_part_valid(const char *s)
{
    size_t len = strlen(s);

    if (len == 0 || len > QUALIFIED_NAME_MAX)
        return false;
    if (!is_alnum(s[0]) || !is_alnum(s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

bool model_resource_name_valid(const char *name, struct error *err)
{
    const char *slash;
    char prefix[DNS1123_SUBDOMAIN_MAX + 16];
    size_t plen;

    if (!name || !*name) {
        error_set(err, -EINVAL, "the resource name is empty");
        return false;
    }
    slash = strchr(name, '/');
    if (!slash) {
        error_set(err, -EINVAL,
                  "'%s' has no domain prefix (like nvidia.com/), so the kubelet "
                  "takes it for a native resource",
                  name);
        return false;
    }
    if (strstr(name, "kubernetes.io/")) {
        error_set(err, -EINVAL, "'%s' uses the reserved kubernetes.io domain", name);
        return false;
    }
    if (str_startswith(name, "requests.")) {
        error_set(err, -EINVAL, "'%s' starts with the reserved 'requests.'", name);
        return false;
    }
    if (strchr(slash + 1, '/')) {
        error_set(err, -EINVAL, "'%s' has more than one '/'", name);
        return false;
    }
    /* the kubelet checks "requests." + name as a qualified name */
    plen = (size_t)(slash - name);
    if (plen + 9 >= sizeof(prefix)) {
        error_set(err, -EINVAL, "the domain of '%s' is longer than %d characters", name,
                  DNS1123_SUBDOMAIN_MAX);
        return false;
    }
    memcpy(prefix, "requests.", 9);
    memcpy(prefix + 9, name, plen);
    prefix[9 + plen] = '\0';
    if (!str_dns_subdomain_valid(prefix, 9 + plen)) {
        error_set(err, -EINVAL, "the domain of '%s' is not a lowercase DNS subdomain", name);
        return false;
    }
    if (!qualified_name_part_valid(slash + 1)) {
        error_set(err, -EINVAL,
                  "the part of '%s' after '/' must be 1-63 characters of "
                  "[A-Za-z0-9-_.] that start and end alphanumeric",
                  name);
        return false;
    }
    return true;
}

char *model_mig_resource_name(const char *profile)
{
    struct strbuf sb = STRBUF_INIT;

    if (strbuf_puts(&sb, "nvidia.com/mig-") < 0)
        goto fail;
    for (const char *p = profile; *p; p++)
        if (strbuf_putc(&sb, *p == '+' ? '.' : *p) < 0)
            goto fail;
    return strbuf_take(&sb);
fail:
    strbuf_release(&sb);
    return NULL;
}

char *model__socket_name(const char *resource_name)
{
    struct strbuf sb = STRBUF_INIT;
    const char *slash = strrchr(resource_name, '/');
    char *s = NULL;

    if (strbuf_printf(&sb, "nvidia-%s.sock", slash ? slash + 1 : resource_name) == 0)
        s = strbuf_take(&sb);
    strbuf_release(&sb);
    return s;
}

bool model__profile_is_subslice(const char *profile)
{
    /* "<C>c.<G>g.<mem>" has a 'c' right after the leading digits */
    const char *p = profile;

    while (*p >= '0' && *p <= '9')
        p++;
    return p != profile && *p == 'c';
}

int model__diag(struct model *m, enum model_diag_level level, const char *fmt, ...)
{
    struct strbuf sb = STRBUF_INIT;
    size_t alloc = m->n_diags; /* exact-size array: grow by one each time */
    struct model_diag *d;
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = strbuf_vprintf(&sb, fmt, ap);
    va_end(ap);
    if (r < 0)
        goto out;
    d = realloc(m->diags, (alloc + 1) * sizeof(*d));
    if (!d) {
        r = -ENOMEM;
        goto out;
    }
    m->diags = d;
    d[m->n_diags].level = level;
    d[m->n_diags].message = strbuf_take(&sb);
    if (!d[m->n_diags].message) {
        r = -ENOMEM;
        goto out;
    }
    m->n_diags++;
    if (level == MODEL_DIAG_ERROR)
        m->n_errors++;
out:
    strbuf_release(&sb);
    return r;
}

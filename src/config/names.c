/* SPDX-License-Identifier: Apache-2.0 */
/* names.c: the syntax of the names and values a config holds — extended resource names,
 * ConfigMap keys (named configs), `devices` entries and Go durations. Pure: no I/O. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/internal.h"

bool cfg_resource_name_valid(const char *name, struct error *err)
{
    const char *slash = strchr(name, '/');
    size_t n = strlen(name);

    if (n > CFG_RESOURCE_NAME_MAX) {
        error_set(err, -EINVAL,
                  "'%.80s' is %zu characters long; a fully-qualified resource "
                  "name must be %u characters or less",
                  name, n, CFG_RESOURCE_NAME_MAX);
        return false;
    }
    if (!slash) {
        error_set(err, -EINVAL, "'%s' has no domain prefix; write it as 'nvidia.com/%s'", name,
                  name);
        return false;
    }
    if (strchr(slash + 1, '/')) {
        error_set(err, -EINVAL,
                  "'%s' has more than one '/'; a resource name is "
                  "<domain>/<name>, e.g. 'nvidia.com/gpu.shared'",
                  name);
        return false;
    }
    if (!str_dns_subdomain_valid(name, (size_t)(slash - name))) {
        error_set(err, -EINVAL,
                  "'%s' has an invalid domain prefix; use a lowercase domain "
                  "such as 'nvidia.com'",
                  name);
        return false;
    }
    if (str_eq(name, "kubernetes.io") ||
        (slash - name >= 14 && strncmp(slash - 14, ".kubernetes.io", 14) == 0) ||
        strncmp(name, "kubernetes.io/", 14) == 0) {
        error_set(err, -EINVAL,
                  "'%s' is in the kubernetes.io domain, which extended "
                  "resources may not use; use e.g. 'nvidia.com'",
                  name);
        return false;
    }
    if (!str_dns_subdomain_valid(slash + 1, strlen(slash + 1))) {
        error_set(err, -EINVAL,
                  "'%s' is not a valid resource name: after the '/' use "
                  "lowercase letters, digits, '-' and '.', starting and ending with a letter "
                  "or digit (e.g. 'nvidia.com/gpu.shared')",
                  name);
        return false;
    }
    return true;
}

bool cfg_config_name_valid(const char *name, struct error *err)
{
    size_t n = strlen(name);

    if (n == 0) {
        error_set(err, -EINVAL, "empty config name");
        return false;
    }
    if (n > CFG_NAME_MAX) {
        error_set(err, -EINVAL,
                  "config name '%.40s...' is %zu characters long; ConfigMap "
                  "keys are at most %u",
                  name, n, CFG_NAME_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!isalnum(ch) && ch != '-' && ch != '.' && ch != '_') {
            error_set(err, -EINVAL,
                      "config name '%.80s' contains '%c'; a name is a ConfigMap "
                      "key made of letters, digits, '-', '_' and '.'",
                      name, isprint(ch) ? ch : '?');
            return false;
        }
    }
    if (name[0] == '.' || strstr(name, "..")) {
        error_set(err, -EINVAL,
                  "config name '%.80s' starts with '.' or contains '..'; such "
                  "entries are ConfigMap internals, not configs",
                  name);
        return false;
    }
    return true;
}

/* 8-4-4-4-12 hex digits. Returns the length consumed (36) or 0. */
static size_t uuid_len(const char *s)
{
    static const unsigned groups[] = {8, 4, 4, 4, 12};
    size_t i = 0;

    for (size_t g = 0; g < GS_ARRAY_SIZE(groups); g++) {
        if (g > 0 && s[i++] != '-')
            return 0;
        for (unsigned k = 0; k < groups[g]; k++, i++)
            if (!isxdigit((unsigned char)s[i]))
                return 0;
    }
    return i;
}

/* "<digits>" in s[0..n) into *ret. */
static bool parse_uint_n(const char *s, size_t n, unsigned *ret)
{
    char buf[16];

    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return parse_uint(buf, ret) == 0;
}

int cfg_device_ref_parse(const char *s, struct cfg_device_ref *ret, struct error *err)
{
    struct cfg_device_ref d = {0};
    const char *colon = strchr(s, ':');
    size_t n;

    if (str_startswith(s, "MIG-GPU-")) {
        /* legacy MIG UUID: MIG-GPU-<uuid>/<gi>/<ci> */
        const char *p = s + 8, *slash2 = NULL;
        unsigned gi, ci;
        n = uuid_len(p);
        if (n > 0 && p[n] == '/')
            slash2 = strchr(p + n + 1, '/');
        if (!slash2 || !parse_uint_n(p + n + 1, (size_t)(slash2 - p - n - 1), &gi) ||
            parse_uint(slash2 + 1, &ci) < 0)
            goto bad;
        d.kind = CFG_DEVREF_MIG_UUID;
    } else if (str_startswith(s, "GPU-") || str_startswith(s, "MIG-")) {
        n = uuid_len(s + 4);
        if (n == 0 || s[4 + n] != '\0')
            goto bad;
        d.kind = s[0] == 'G' ? CFG_DEVREF_GPU_UUID : CFG_DEVREF_MIG_UUID;
    } else if (colon) {
        if (!parse_uint_n(s, (size_t)(colon - s), &d.gpu_index) ||
            parse_uint(colon + 1, &d.mig_index) < 0)
            goto bad;
        d.kind = CFG_DEVREF_MIG_INDEX;
    } else {
        if (parse_uint(s, &d.gpu_index) < 0)
            goto bad;
        d.kind = CFG_DEVREF_GPU_INDEX;
    }
    if (d.kind == CFG_DEVREF_GPU_UUID || d.kind == CFG_DEVREF_MIG_UUID) {
        d.uuid = strdup(s);
        if (!d.uuid)
            return error_set(err, -ENOMEM, "out of memory");
    }
    *ret = d;
    return 0;
bad:
    return error_set(err, -EINVAL,
                     "'%.80s' is not a device: use a GPU index (0), a MIG index "
                     "(\"0:1\"), a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) or a MIG "
                     "UUID (MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>)",
                     s);
}

/* ---- durations --------------------------------------------------------------------------- */

static int64_t unit_ns(const char *s, size_t *ret_len)
{
    static const struct {
        const char *name;
        int64_t ns;
    } units[] = {
        {"ns", 1},       {"us", 1000},      {"\xc2\xb5s", 1000},      {"\xce\xbcs", 1000},
        {"ms", 1000000}, {"s", 1000000000}, {"m", 60LL * 1000000000}, {"h", 3600LL * 1000000000},
    };
    size_t best = 0;
    int64_t ns = 0;

    for (size_t i = 0; i < GS_ARRAY_SIZE(units); i++) {
        size_t n = strlen(units[i].name);
        if (n > best && strncmp(s, units[i].name, n) == 0) {
            best = n;
            ns = units[i].ns;
        }
    }
    *ret_len = best;
    return ns;
}

int cfg_duration_parse_ms(const char *s, int64_t *ret_ms, struct error *err)
{
    const char *p = s;
    int64_t total_ns = 0;
    uint64_t plain;

    if (strcmp(s, "infinite") == 0) {
        *ret_ms = -1;
        return 0;
    }
    if (parse_uint64(s, &plain) == 0) { /* a bare number is nanoseconds, like Go's */
        *ret_ms = (int64_t)(plain / 1000000u);
        return 0;
    }
    if (*p == '+')
        p++;
    if (*p == '\0')
        goto bad;
    while (*p) {
        int64_t whole = 0, frac = 0, frac_scale = 1, unit, part;
        size_t ulen;
        bool digits = false;

        for (; *p >= '0' && *p <= '9'; p++, digits = true)
            if (__builtin_mul_overflow(whole, 10, &whole) ||
                __builtin_add_overflow(whole, *p - '0', &whole))
                goto range;
        if (*p == '.') {
            for (p++; *p >= '0' && *p <= '9'; p++, digits = true)
                if (frac_scale < 1000000000000LL) {
                    frac = frac * 10 + (*p - '0');
                    frac_scale *= 10;
                }
        }
        if (!digits)
            goto bad;
        unit = unit_ns(p, &ulen);
        if (ulen == 0)
            goto bad;
        p += ulen;
        if (__builtin_mul_overflow(whole, unit, &part) ||
            __builtin_add_overflow(
                part, (int64_t)((double)frac * (double)unit / (double)frac_scale), &part) ||
            __builtin_add_overflow(total_ns, part, &total_ns))
            goto range;
    }
    *ret_ms = total_ns / 1000000;
    return 0;
bad:
    return error_set(err, -EINVAL,
                     "'%.80s' is not a duration; use e.g. '60s', '1m30s', "
                     "'500ms', a number of nanoseconds, or 'infinite'",
                     s);
range:
    return error_set(err, -ERANGE, "duration '%.80s' is too long", s);
}

bool cfg_pattern_match(const char *pattern, const char *s)
{
    const char *star = NULL, *resume = NULL;

    while (*s) {
        if (*pattern == '*') {
            star = pattern++;
            resume = s;
        } else if (*pattern == *s) {
            pattern++;
            s++;
        } else if (star) {
            pattern = star + 1;
            s = ++resume;
        } else {
            return false;
        }
    }
    while (*pattern == '*')
        pattern++;
    return *pattern == '\0';
}

const char *cfg_gpu_resource_name(const struct cfg_config *cfg, const char *product_name)
{
    for (size_t i = 0; cfg && product_name && i < cfg->n_gpus; i++)
        if (cfg->gpus[i].pattern && cfg->gpus[i].name &&
            cfg_pattern_match(cfg->gpus[i].pattern, product_name))
            return cfg->gpus[i].name;
    return "nvidia.com/gpu";
}

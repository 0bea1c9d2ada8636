/* SPDX-License-Identifier: Apache-2.0 */
/* config.c: the opaque device configs of driver gpu.nvidia.com (resource.nvidia.com/v1beta1
 * GpuConfig and MigDeviceConfig), decoded as strictly as NVIDIA's StrictDecoder does, and
 * validated like its Validate() — but sharing needs no feature gate here. A value C cannot
 * hold as written (a string with "\u0000") is refused naming its field. Also Kubernetes
 * quantity parsing for the MPS memory limits. Pure. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "dra/dra.h"

/* ---- quantities --------------------------------------------------------------------------- */

struct suffix {
    const char *name;
    unsigned base; /* 2 or 10 */
    int exp;       /* power of 1024 (base 2) or of 10 (base 10) */
};

static const struct suffix suffixes[] = {
    {"Ki", 2, 1},  {"Mi", 2, 2},  {"Gi", 2, 3},  {"Ti", 2, 4},  {"Pi", 2, 5}, {"Ei", 2, 6},
    {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"", 10, 0},   {"k", 10, 3}, {"M", 10, 6},
    {"G", 10, 9},  {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18},
};

/* Exponent suffix "e<n>"/"E<n>" (E alone is exa, handled by the table). */
static bool exponent_suffix(const char *s, int *ret)
{
    int64_t v;

    if ((s[0] != 'e' && s[0] != 'E') || s[1] == '\0' || parse_int64(s + 1, &v) < 0 || v < -30 ||
        v > 30)
        return false;
    *ret = (int)v;
    return true;
}

static int quantity_bad(const char *text, struct error *err)
{
    return error_set(err, -EINVAL,
                     "'%s' is not a quantity; write a number with an optional suffix such as "
                     "'10Gi', '512Mi' or '1G'",
                     text);
}

/* Scales num/den (den a power of 10) by base^exp and rounds up; false on overflow. */
static bool scale(unsigned __int128 num, unsigned __int128 den, unsigned base, int exp,
                  uint64_t *ret)
{
    unsigned __int128 mul = base == 2 ? 1024 : 10;

    for (int i = 0; i < (exp < 0 ? -exp : exp); i++) {
        if (exp > 0 && num > ((unsigned __int128)1 << 100))
            return false;
        if (exp > 0)
            num *= mul;
        else
            den *= mul;
    }
    num = (num + den - 1) / den;
    if (num > INT64_MAX)
        return false;
    *ret = (uint64_t)num;
    return true;
}

int dra_quantity_parse(const char *text, uint64_t *ret, struct error *err)
{
    unsigned __int128 num = 0, den = 1;
    const struct suffix *sfx = NULL;
    struct suffix expsfx = {"", 10, 0};
    const char *p = text;
    bool digits = false, dot = false;

    if (!p)
        return quantity_bad("", err);
    if (*p == '+')
        p++;
    for (; (*p >= '0' && *p <= '9') || (*p == '.' && !dot); p++) {
        if (*p == '.') {
            dot = true;
            continue;
        }
        digits = true;
        if (num > ((unsigned __int128)1 << 100))
            return quantity_bad(text, err);
        num = num * 10 + (unsigned)(*p - '0');
        if (dot)
            den *= 10;
    }
    for (size_t i = 0; digits && !sfx && i < GS_ARRAY_SIZE(suffixes); i++)
        if (strcmp(p, suffixes[i].name) == 0)
            sfx = &suffixes[i];
    if (digits && !sfx && exponent_suffix(p, &expsfx.exp))
        sfx = &expsfx;
    if (!sfx)
        return quantity_bad(text, err);
    if (!scale(num, den, sfx->base, sfx->exp, ret))
        return error_set(err, -EINVAL, "quantity '%s' is too large", text);
    return 0;
}

/* ---- strict decoding ---------------------------------------------------------------------- */

#define CONFIG_MAX_DEPTH 16 /* GpuConfig nests 4 levels; deeper is refused by name */

/* The first string below v holding "\u0000" (C would read "Long\u0000" as "Long"), or
 * nesting past CONFIG_MAX_DEPTH: -EINVAL naming the field. path is v's ("" at the top). */
static int check_values(const json_t *v, const char *path, unsigned depth, const char *where,
                        struct error *err)
{
    char sub[256];
    const char *key;
    json_t *m;
    size_t i;
    int r = 0;

    if (depth > CONFIG_MAX_DEPTH)
        return error_set(err, -EINVAL,
                         "%s: %s: nested more than %d levels deep; GpuConfig and "
                         "MigDeviceConfig have no such field",
                         where, path, CONFIG_MAX_DEPTH);
    if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v))
        return error_set(err, -EINVAL,
                         "%s: %s: \"%s\\u0000...\" contains a NUL character (\\u0000), "
                         "which no field takes; remove it",
                         where, *path ? path : "parameters", json_string_value(v));
    if (json_is_object(v))
        json_object_foreach((json_t *)v, key, m)
        {
            snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", key);
            r = check_values(m, sub, depth + 1, where, err);
            if (r < 0)
                return r;
        }
    if (json_is_array(v))
        json_array_foreach(v, i, m)
        {
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            r = check_values(m, sub, depth + 1, where, err);
            if (r < 0)
                return r;
        }
    return 0;
}

/* Unknown fields are errors, as with NVIDIA's strict decoder. */
static int check_fields(json_t *obj, const char *const *allowed, const char *path,
                        const char *where, struct error *err)
{
    const char *key;
    const json_t *v;
    char list[256] = "", owner[64];
    size_t n = strlen(path);

    /* "sharing.mpsConfig." names its object as "sharing.mpsConfig" */
    snprintf(owner, sizeof(owner), "%.*s", n ? (int)n - 1 : 0, path);
    json_object_foreach(obj, key, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i]; i++)
            ok = ok || strcmp(key, allowed[i]) == 0;
        if (ok)
            continue;
        for (size_t i = 0; allowed[i]; i++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", allowed[i]);
        }
        return error_set(err, -EINVAL,
                         "%s: unknown field \"%s%s\"; %s takes only %s (the decoder is strict, "
                         "as NVIDIA's: remove or rename the field)",
                         where, path, key, n ? owner : "the config", list);
    }
    return 0;
}

/* A member that must be an object when present (null counts as absent). */
static int object_member(const json_t *obj, const char *key, const char *path, const char *where,
                         json_t **ret, struct error *err)
{
    json_t *v = json_object_get(obj, key);

    *ret = json_is_null(v) ? NULL : v;
    if (*ret && !json_is_object(*ret))
        return error_set(err, -EINVAL, "%s: %s%s must be an object", where, path, key);
    return 0;
}

static int quantity_member(const json_t *v, const char *field, const char *where, uint64_t *ret,
                           struct error *err)
{
    char num[32];
    const char *text = json_string_value(v);
    int r;

    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
        text = num;
    }
    if (!text)
        return error_set(err, -EINVAL, "%s: %s must be a quantity string such as \"10Gi\"", where,
                         field);
    r = dra_quantity_parse(text, ret, err);
    if (r < 0) {
        error_prefix(err, "%s: %s", where, field);
        return r;
    }
    if (*ret < (1u << 20))
        return error_set(err, -EINVAL,
                         "%s: %s is %s, less than 1Mi; MPS takes limits in whole MiB, so set at "
                         "least \"1Mi\"",
                         where, field, text);
    return 0;
}

static int decode_per_device(json_t *map, const char *where, struct dra_mps_config *mps,
                             struct error *err)
{
    static const char *const field = "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit";
    const char *key;
    const json_t *v;
    char fname[160];
    int r;

    if (!json_is_object(map))
        return error_set(err, -EINVAL,
                         "%s: %s must map device indexes or UUIDs to quantities, like "
                         "{\"0\": \"10Gi\"}",
                         where, field);
    json_object_foreach(map, key, v)
    {
        struct dra_pinned_limit *l = &mps->per_device[mps->n_per_device];
        if (mps->n_per_device >= DRA_MAX_PINNED_LIMITS || strlen(key) >= sizeof(l->key))
            return error_set(err, -EINVAL, "%s: %s has more than %d entries or a key too long",
                             where, field, DRA_MAX_PINNED_LIMITS);
        snprintf(fname, sizeof(fname), "%s[\"%s\"]", field, key);
        r = quantity_member(v, fname, where, &l->bytes, err);
        if (r < 0)
            return r;
        str_copy(l->key, key, sizeof(l->key));
        mps->n_per_device++;
    }
    return 0;
}

static int decode_mps(json_t *m, const char *where, struct dra_mps_config *mps, struct error *err)
{
    static const char *const fields[] = {"defaultActiveThreadPercentage",
                                         "defaultPinnedDeviceMemoryLimit",
                                         "defaultPerDevicePinnedMemoryLimit", NULL};
    json_t *v;
    int r;

    mps->active_thread_percentage = -1;
    if (!m)
        return 0;
    r = check_fields(m, fields, "sharing.mpsConfig.", where, err);
    if (r < 0)
        return r;
    v = json_object_get(m, "defaultActiveThreadPercentage");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v))
            return error_set(err, -EINVAL,
                             "%s: sharing.mpsConfig.defaultActiveThreadPercentage must be a "
                             "whole number from 0 to 100",
                             where);
        if (json_integer_value(v) < 0)
            return error_set(err, -EINVAL,
                             "%s: active thread percentage must not be negative "
                             "(sharing.mpsConfig.defaultActiveThreadPercentage); use 0 to 100",
                             where);
        if (json_integer_value(v) > 100)
            return error_set(err, -EINVAL,
                             "%s: active thread percentage must not be greater "
                             "than 100 (sharing.mpsConfig.defaultActiveThreadPercentage)",
                             where);
        mps->active_thread_percentage = (int)json_integer_value(v);
    }
    v = json_object_get(m, "defaultPinnedDeviceMemoryLimit");
    if (v && !json_is_null(v)) {
        r = quantity_member(v, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit", where,
                            &mps->pinned_limit_bytes, err);
        if (r < 0)
            return r;
        mps->has_pinned_limit = true;
    }
    v = json_object_get(m, "defaultPerDevicePinnedMemoryLimit");
    if (v && !json_is_null(v))
        return decode_per_device(v, where, mps, err);
    return 0;
}

static int decode_interval(json_t *ts, const char *where, enum dra_timeslice *ret,
                           struct error *err)
{
    static const char *const fields[] = {"interval", NULL};
    static const char *const names[] = {"Default", "Short", "Medium", "Long"};
    const json_t *v;
    int r;

    *ret = DRA_TIMESLICE_DEFAULT;
    if (!ts)
        return 0;
    r = check_fields(ts, fields, "sharing.timeSlicingConfig.", where, err);
    if (r < 0)
        return r;
    v = json_object_get(ts, "interval");
    if (!v || json_is_null(v))
        return 0;
    for (size_t i = 0; i < GS_ARRAY_SIZE(names); i++)
        if (str_eq(json_string_value(v), names[i])) {
            *ret = (enum dra_timeslice)i;
            return 0;
        }
    return error_set(err, -EINVAL,
                     "%s: unknown time-slice interval: %s (sharing.timeSlicingConfig.interval); "
                     "use Default, Short, Medium or Long",
                     where, json_is_string(v) ? json_string_value(v) : "(not a string)");
}

/* "TimeSlicing or MPS": the strategies the rows name, for messages. */
static void strategy_list(char *buf, size_t size)
{
    size_t n = 0, k = 0;

    for (int i = 0; i < CFG_SHARING__N; i++)
        n += cfg_sharing_mode((enum cfg_sharing_strategy)i)->dra_name != NULL;
    buf[0] = '\0';
    for (int i = 0; i < CFG_SHARING__N; i++) {
        const char *name = cfg_sharing_mode((enum cfg_sharing_strategy)i)->dra_name;
        size_t len = strlen(buf);
        if (!name)
            continue;
        k++;
        snprintf(buf + len, size - len, "%s%s", k == 1 ? "" : k == n ? " or " : ", ", name);
    }
}

static int decode_strategy(const json_t *sharing, const char *where,
                           const struct cfg_sharing_mode **ret, struct error *err)
{
    const json_t *v = json_object_get(sharing, "strategy");
    const char *s = json_string_value(v);
    char list[128];

    strategy_list(list, sizeof(list));
    if (v && !json_is_null(v) && !s)
        return error_set(err, -EINVAL, "%s: sharing.strategy is not a string; use %s", where, list);
    *ret = cfg_sharing_mode_by_dra_name(s);
    if (!*ret)
        return error_set(err, -EINVAL,
                         "%s: unknown GPU sharing strategy: %s (sharing.strategy); use %s", where,
                         s ? s : "(none)", list);
    return 0;
}

/* The settings blocks a config of kind may carry: each row's dra_config_key (on MIG only
 * the rows whose block a MigDeviceConfig takes), after "strategy". */
static void sharing_fields(enum dra_config_kind kind, const char **fields, size_t size)
{
    size_t n = 0;

    fields[n++] = "strategy";
    for (int i = 0; i < CFG_SHARING__N && n + 1 < size; i++) {
        const struct cfg_sharing_mode *m = cfg_sharing_mode((enum cfg_sharing_strategy)i);
        if (m->dra_config_key && (kind == DRA_CONFIG_GPU || m->dra_config_on_mig))
            fields[n++] = m->dra_config_key;
    }
    fields[n] = NULL;
}

/* A block of another mode than the chosen one: "cannot use MpsConfig with the 'TimeSlicing'
 * strategy" (NVIDIA's text names the Go type: the key with a capital). */
static int other_blocks(const json_t *sharing, const struct cfg_sharing_mode *mode,
                        const char *where, struct error *err)
{
    for (int i = 0; i < CFG_SHARING__N; i++) {
        const struct cfg_sharing_mode *m = cfg_sharing_mode((enum cfg_sharing_strategy)i);
        const json_t *v = m->dra_config_key ? json_object_get(sharing, m->dra_config_key) : NULL;
        if (m == mode || !v || json_is_null(v))
            continue;
        if (!m->dra_name)
            return error_set(err, -EINVAL,
                             "%s: cannot use sharing.%s with the '%s' strategy; remove it", where,
                             m->dra_config_key, mode->dra_name);
        return error_set(err, -EINVAL,
                         "%s: cannot use %c%s with the '%s' strategy; remove sharing.%s or set "
                         "sharing.strategy to %s",
                         where, m->dra_config_key[0] - 'a' + 'A', m->dra_config_key + 1,
                         mode->dra_name, m->dra_config_key, m->dra_name);
    }
    return 0;
}

static int decode_sharing(json_t *sharing, enum dra_config_kind kind, const char *where,
                          struct dra_opaque_config *c, struct error *err)
{
    const char *fields[CFG_SHARING__N + 2];
    json_t *ts = NULL, *mps = NULL;
    int r;

    sharing_fields(kind, fields, GS_ARRAY_SIZE(fields));
    r = check_fields(sharing, fields, "sharing.", where, err);
    if (r == 0)
        r = decode_strategy(sharing, where, &c->mode, err);
    for (int i = 0; r == 0 && i < CFG_SHARING__N; i++) {
        const struct cfg_sharing_mode *m = cfg_sharing_mode((enum cfg_sharing_strategy)i);
        json_t **slot = m->dra_time_slice ? &ts : m->control_daemon ? &mps : NULL;
        if (m->dra_config_key && slot)
            r = object_member(sharing, m->dra_config_key, "sharing.", where, slot, err);
    }
    if (r == 0)
        r = other_blocks(sharing, c->mode, where, err);
    if (r == 0)
        r = decode_interval(ts, where, &c->interval, err);
    if (r == 0)
        r = decode_mps(mps, where, &c->mps, err);
    return r;
}

static int decode_kind(const json_t *p, const char *where, enum dra_config_kind *ret,
                       struct error *err)
{
    const char *api = json_string_value(json_object_get(p, "apiVersion"));
    const char *kind = json_string_value(json_object_get(p, "kind"));

    if (!api)
        return error_set(err, -EINVAL, "%s: Object 'apiVersion' is missing; set apiVersion: %s",
                         where, DRA_CONFIG_API_VERSION);
    if (!kind)
        return error_set(err, -EINVAL,
                         "%s: Object 'Kind' is missing; set kind: GpuConfig or MigDeviceConfig",
                         where);
    if (strcmp(api, DRA_CONFIG_API_VERSION) != 0)
        return error_set(err, -EINVAL,
                         "%s: no kind \"%s\" is registered for version \"%s\"; driver %s "
                         "takes apiVersion %s",
                         where, kind, api, DRA_DRIVER_NAME, DRA_CONFIG_API_VERSION);
    if (strcmp(kind, "GpuConfig") == 0)
        *ret = DRA_CONFIG_GPU;
    else if (strcmp(kind, "MigDeviceConfig") == 0)
        *ret = DRA_CONFIG_MIG;
    else
        return error_set(err, -EINVAL,
                         "%s: kind %s is not a config for GPUs or MIG devices; use GpuConfig or "
                         "MigDeviceConfig",
                         where, kind);
    return 0;
}

int dra_opaque_config_decode(json_t *parameters, const char *where, struct dra_opaque_config *ret,
                             struct error *err)
{
    static const char *const fields[] = {"apiVersion", "kind", "sharing", NULL};
    struct dra_opaque_config c;
    json_t *sharing = NULL;
    int r;

    memset(&c, 0, sizeof(c));
    c.mode = cfg_sharing_mode(CFG_SHARING_NONE);
    c.mps.active_thread_percentage = -1;
    where = where ? where : "opaque config";
    if (!json_is_object(parameters))
        return error_set(err, -EINVAL,
                         "%s: parameters must be an object with apiVersion %s and kind "
                         "GpuConfig or MigDeviceConfig",
                         where, DRA_CONFIG_API_VERSION);
    r = check_values(parameters, "", 0, where, err);
    if (r == 0)
        r = decode_kind(parameters, where, &c.kind, err);
    if (r == 0)
        r = check_fields(parameters, fields, "", where, err);
    if (r == 0)
        r = object_member(parameters, "sharing", "", where, &sharing, err);
    if (r == 0 && sharing)
        r = decode_sharing(sharing, c.kind, where, &c, err);
    if (r < 0)
        return r;
    *ret = c;
    return 0;
}

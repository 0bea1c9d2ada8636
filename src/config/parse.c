/* SPDX-License-Identifier: Apache-2.0 */
/* parse.c: walks a libfyaml document (YAML or JSON) into struct cfg_config, checking
 * every key and value as it goes and recording each problem with its line:col and field
 * path. Unknown keys are warnings with the nearest known key. Pure: the text is given. */
#include <errno.h>
#include <libfyaml.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/internal.h"

#define PATH_MAX_LEN 256 /* paths are built from known keys and list indices only */

/* ---- nodes: position, kind, scalar text --------------------------------------------------- */

static struct cfg_pos node_pos(struct fy_node *n, struct cfg_pos fallback)
{
    struct yaml_pos p = yaml_pos(n);

    return p.line ? (struct cfg_pos){p.line, p.col} : fallback;
}

/* The scalar's text (NUL-terminated, owned by the document), or NULL for a non-scalar or a
 * scalar holding a NUL byte (c->oom when out of memory). */
static const char *scalar_text(struct cfg__ctx *c, struct fy_node *n)
{
    return yaml_text(c->doc, n, &c->oom);
}

static bool is_null(struct cfg__ctx *c, struct fy_node *n)
{
    const char *s;

    if (!n)
        return true;
    if (fy_node_get_type(n) != FYNT_SCALAR || !yaml_is_plain(n))
        return false;
    s = scalar_text(c, n);
    return s && (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
                 !strcmp(s, "NULL"));
}

/* YAML 1.1 booleans, as the Go YAML library NVIDIA uses accepts them (plain only). */
static int plain_bool(const char *s, bool *ret)
{
    static const char *const t[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                    "y",    "Y",    "on",   "On",  "ON",  NULL};
    static const char *const f[] = {"false", "False", "FALSE", "no",  "No",  "NO",
                                    "n",     "N",     "off",   "Off", "OFF", NULL};
    if (cfg__lookup(t, s) >= 0) {
        *ret = true;
        return 0;
    }
    if (cfg__lookup(f, s) >= 0) {
        *ret = false;
        return 0;
    }
    return -EINVAL;
}

static bool looks_numeric(const char *s)
{
    char *end;

    if (!*s)
        return false;
    (void)strtod(s, &end); /* only to classify text for a message, never to read a value */
    return *end == '\0';
}

/* Describes what was found, for "expected X, got Y" messages. */
static const char *kind_name(struct cfg__ctx *c, struct fy_node *n)
{
    const char *s;
    bool b;

    if (fy_node_is_alias(n))
        return "an alias";
    switch (fy_node_get_type(n)) {
    case FYNT_MAPPING:
        return "a mapping";
    case FYNT_SEQUENCE:
        return "a list";
    default:
        break;
    }
    s = scalar_text(c, n);
    if (!s)
        return "a string with a NUL byte";
    if (!yaml_is_plain(n))
        return "a quoted string";
    if (plain_bool(s, &b) == 0)
        return "a boolean";
    if (looks_numeric(s))
        return "a number";
    return "a string";
}

/* The value as the user wrote it, for the diagnostics' value field. */
static const char *shown(struct cfg__ctx *c, struct fy_node *n)
{
    const char *s = scalar_text(c, n);
    return s ? s : kind_name(c, n);
}

static void path_join(char *dst, const char *parent, const char *key)
{
    if (parent && *parent)
        snprintf(dst, PATH_MAX_LEN, "%s.%s", parent, key);
    else
        snprintf(dst, PATH_MAX_LEN, "%s", key);
}

static void path_index(char *dst, const char *parent, size_t i)
{
    snprintf(dst, PATH_MAX_LEN, "%s[%zu]", parent, i);
}

/* ---- typed values ------------------------------------------------------------------------ */

static bool want_string(struct cfg__ctx *c, struct fy_node *n, const char *path, struct cfg_pos pos,
                        const char **ret)
{
    const char *s = scalar_text(c, n);
    bool b;

    if (!s || (yaml_is_plain(n) && (plain_bool(s, &b) == 0 || looks_numeric(s)))) {
        cfg__diag(c, CFG_SEV_ERROR, pos, path, shown(c, n), "expected a string, got %s%s",
                  kind_name(c, n), s ? "; put it in quotes if you mean the text" : "");
        return false;
    }
    *ret = s;
    return true;
}

static bool want_string_into(struct cfg__ctx *c, struct fy_node *n, const char *path,
                             struct cfg_pos pos, char **dst)
{
    const char *s;

    if (!want_string(c, n, path, pos, &s))
        return false;
    if (!cfg__set_str(dst, s)) {
        c->oom = true;
        return false;
    }
    return true;
}

static bool want_bool(struct cfg__ctx *c, struct fy_node *n, const char *path, struct cfg_pos pos,
                      bool *dst)
{
    const char *s = scalar_text(c, n);
    bool b;

    if (s && yaml_is_plain(n) && plain_bool(s, &b) == 0) {
        *dst = b;
        return true;
    }
    if (s && !yaml_is_plain(n) && plain_bool(s, &b) == 0)
        cfg__diag(c, CFG_SEV_ERROR, pos, path, s,
                  "expected a boolean, got the quoted string \"%s\"; write %s without quotes", s,
                  b ? "true" : "false");
    else
        cfg__diag(c, CFG_SEV_ERROR, pos, path, shown(c, n),
                  "expected a boolean (true or false), got %s", kind_name(c, n));
    return false;
}

static bool want_enum(struct cfg__ctx *c, struct fy_node *n, const char *path, struct cfg_pos pos,
                      const char *const *table, int *dst)
{
    struct strbuf allowed = STRBUF_INIT;
    const char *s = scalar_text(c, n);
    int idx = s ? cfg__lookup(table, s) : -1;

    if (idx >= 0) {
        *dst = idx;
        return true;
    }
    cfg__join_allowed(table, &allowed);
    if (s)
        cfg__diag(c, CFG_SEV_ERROR, pos, path, s, "'%s' is not allowed; use one of %s", s,
                  strbuf_str(&allowed));
    else
        cfg__diag(c, CFG_SEV_ERROR, pos, path, shown(c, n), "expected one of %s, got %s",
                  strbuf_str(&allowed), kind_name(c, n));
    strbuf_release(&allowed);
    return false;
}

/* A whole number written without quotes. Returns 0, or -EINVAL (wrong type; diagnosed
 * unless `what` is NULL), -ERANGE. */
static int want_int(struct cfg__ctx *c, struct fy_node *n, const char *path, struct cfg_pos pos,
                    const char *what, int64_t *ret)
{
    const char *s = scalar_text(c, n);
    int r;

    if (!s || !yaml_is_plain(n)) {
        if (what)
            cfg__diag(c, CFG_SEV_ERROR, pos, path, shown(c, n), "expected %s, got %s%s", what,
                      kind_name(c, n), s && looks_numeric(s) ? "; remove the quotes" : "");
        return -EINVAL;
    }
    r = parse_int64(s, ret);
    if (r == -ERANGE && what)
        cfg__diag(c, CFG_SEV_ERROR, pos, path, s, "%s is out of range", s);
    else if (r < 0 && what)
        cfg__diag(c, CFG_SEV_ERROR, pos, path, s, "expected %s, got %s '%s'", what,
                  looks_numeric(s) ? "the fractional number" : kind_name(c, n), s);
    return r;
}

/* ---- mappings ---------------------------------------------------------------------------- */

/* Every key of the schema with its full path, for "belongs under" hints. */
static const char *const all_paths[] = {
    "version",
    "flags",
    "resources",
    "sharing",
    "imex",
    "flags.migStrategy",
    "flags.failOnInitError",
    "flags.mpsRoot",
    "flags.nvidiaDriverRoot",
    "flags.nvidiaDevRoot",
    "flags.gdrcopyEnabled",
    "flags.gdsEnabled",
    "flags.mofedEnabled",
    "flags.useNodeFeatureAPI",
    "flags.deviceDiscoveryStrategy",
    "flags.plugin",
    "flags.gfd",
    "flags.plugin.passDeviceSpecs",
    "flags.plugin.deviceListStrategy",
    "flags.plugin.deviceIDStrategy",
    "flags.plugin.cdiAnnotationPrefix",
    "flags.plugin.nvidiaCTKPath",
    "flags.plugin.containerDriverRoot",
    "flags.plugin.sharedDevicesAllocationPolicy",
    "flags.gfd.oneshot",
    "flags.gfd.noTimestamp",
    "flags.gfd.sleepInterval",
    "flags.gfd.outputFile",
    "flags.gfd.machineTypeFile",
    "resources.gpus",
    "resources.mig",
    /* sharing.<mode>: from the mode rows (unknown_key) */
    "sharing.timeSlicing.renameByDefault",
    "sharing.timeSlicing.failRequestsGreaterThanOne",
    "sharing.timeSlicing.resources",
    "imex.channelIDs",
    "imex.required",
    NULL,
};

static const char *last_component(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

static void unknown_key(struct cfg__ctx *c, const char *key, const char *const *keys,
                        const char *path, struct cfg_pos pos)
{
    const char *best = NULL, *elsewhere = NULL;
    char mode_path[64];
    unsigned best_d = (unsigned)strlen(key) / 3 + 2;

    for (size_t i = 0; keys[i]; i++) {
        unsigned d = str_distance(key, keys[i]);
        if (d < best_d) {
            best_d = d;
            best = keys[i];
        }
    }
    for (size_t i = 0; !best && all_paths[i]; i++)
        if (strcasecmp(last_component(all_paths[i]), key) == 0)
            elsewhere = all_paths[i];
    for (int s = 0; !best && !elsewhere && s < CFG_SHARING__N; s++) {
        const struct cfg_sharing_mode *m = cfg_sharing_mode((enum cfg_sharing_strategy)s);
        if (m->config_key && strcasecmp(m->config_key, key) == 0) {
            snprintf(mode_path, sizeof(mode_path), "sharing.%s", m->config_key);
            elsewhere = mode_path;
        }
    }
    if (best)
        cfg__diag(c, CFG_SEV_WARNING, pos, path, key,
                  "unknown key '%s', ignoring it; did you mean '%s'?", key, best);
    else if (elsewhere)
        cfg__diag(c, CFG_SEV_WARNING, pos, path, key,
                  "unknown key '%s' here, ignoring it; it belongs at '%s'", key, elsewhere);
    else
        cfg__diag(c, CFG_SEV_WARNING, pos, path, key, "unknown key '%s', ignoring it", key);
}

typedef void (*field_fn)(struct cfg__ctx *c, int key, struct fy_node *val, const char *path,
                         struct cfg_pos pos, void *ud);

/* Checks that `map` is a mapping and hands each known key's non-null value to fn. Keys
 * match case-insensitively as in NVIDIA's (Go) decoder, with a warning. */
static void walk_map(struct cfg__ctx *c, struct fy_node *map, const char *path, struct cfg_pos pos,
                     const char *const *keys, field_fn fn, void *ud)
{
    struct fy_node_pair *p;
    void *it = NULL;
    uint32_t seen = 0; /* keys tables are short: one bit per known key */

    if (fy_node_get_type(map) != FYNT_MAPPING || fy_node_is_alias(map)) {
        cfg__diag(c, CFG_SEV_ERROR, pos, path && *path ? path : NULL, shown(c, map),
                  "expected a mapping (key: value lines), got %s", kind_name(c, map));
        return;
    }
    for (p = fy_node_mapping_iterate(map, &it); p && !c->oom;
         p = fy_node_mapping_iterate(map, &it)) {
        struct fy_node *k = fy_node_pair_key(p), *v = fy_node_pair_value(p);
        struct cfg_pos kpos = node_pos(k, pos);
        const char *key = scalar_text(c, k);
        char child[PATH_MAX_LEN];
        int idx = key ? cfg__lookup(keys, key) : -1;

        if (!key) {
            cfg__diag(c, CFG_SEV_ERROR, kpos, path && *path ? path : NULL, NULL,
                      "a key must be a plain string, got %s", k ? kind_name(c, k) : "nothing");
            continue;
        }
        for (int i = 0; idx < 0 && keys[i]; i++)
            if (strcasecmp(keys[i], key) == 0) {
                idx = i;
                path_join(child, path, keys[i]);
                cfg__diag(c, CFG_SEV_WARNING, kpos, child, key,
                          "key '%s' matched '%s' ignoring case; write it as '%s'", key, keys[i],
                          keys[i]);
            }
        if (idx < 0) {
            unknown_key(c, key, keys, path && *path ? path : NULL, kpos);
            continue;
        }
        path_join(child, path, keys[idx]);
        if (seen & (1u << idx)) {
            /* "devices" and "Devices": the same field twice, as Go's decoder sees it */
            cfg__diag(c, CFG_SEV_ERROR, kpos, child, key,
                      "duplicate key '%s' (keys match "
                      "ignoring case); keep one",
                      key);
            continue;
        }
        seen |= 1u << idx;
        if (v && fy_node_is_alias(v)) {
            cfg__diag(c, CFG_SEV_ERROR, kpos, child, NULL,
                      "YAML aliases (*name) are not supported; write the value out");
            continue;
        }
        if (is_null(c, v))
            continue; /* like NVIDIA: an empty value is the same as a missing key */
        fn(c, idx, v, child, node_pos(v, kpos), ud);
    }
}

/* Checks a list node and its length; returns its item count or -1. */
static long want_list(struct cfg__ctx *c, struct fy_node *n, const char *path, struct cfg_pos pos,
                      const char *what)
{
    int count;

    if (fy_node_get_type(n) != FYNT_SEQUENCE || fy_node_is_alias(n)) {
        cfg__diag(c, CFG_SEV_ERROR, pos, path, shown(c, n), "expected a list of %s, got %s", what,
                  kind_name(c, n));
        return -1;
    }
    count = fy_node_sequence_item_count(n);
    if (count < 0 || (unsigned)count > CFG_MAX_LIST_ITEMS) {
        cfg__diag(c, CFG_SEV_ERROR, pos, path, NULL,
                  "%d entries is too many; at most %u are allowed", count, CFG_MAX_LIST_ITEMS);
        return -1;
    }
    return count;
}

/* A resource name as written: "gpu" means "nvidia.com/gpu". Returns an owned full name
 * or NULL (diagnosed, or c->oom). */
static char *resource_name(struct cfg__ctx *c, struct fy_node *n, const char *path,
                           struct cfg_pos pos)
{
    struct strbuf sb = STRBUF_INIT;
    struct error e = {0};
    const char *s;
    char *full;

    if (!want_string(c, n, path, pos, &s))
        return NULL;
    if (!*s) {
        cfg__diag(c, CFG_SEV_ERROR, pos, path, s,
                  "empty resource name; use e.g. "
                  "'nvidia.com/gpu'");
        return NULL;
    }
    if (strchr(s, '/'))
        strbuf_puts(&sb, s);
    else
        strbuf_printf(&sb, "nvidia.com/%s", s);
    full = strbuf_take(&sb);
    if (!full) {
        c->oom = true;
        return NULL;
    }
    if (!cfg_resource_name_valid(full, &e)) {
        cfg__diag(c, CFG_SEV_ERROR, pos, path, s, "%s", e.msg);
        free(full);
        return NULL;
    }
    return full;
}

/* ---- flags ------------------------------------------------------------------------------- */

static void list_strategy_entry(struct cfg__ctx *c, struct fy_node *n, const char *path,
                                struct cfg_pos pos, unsigned *bits)
{
    struct strbuf allowed = STRBUF_INIT;
    const char *s, *bad;
    size_t bad_len;
    unsigned b;

    if (!want_string(c, n, path, pos, &s))
        return;
    if (cfg__list_strategies_parse(s, &b, &bad, &bad_len) == 0) {
        *bits |= b;
        return;
    }
    cfg__join_allowed(cfg__list_strategies, &allowed);
    cfg__diag(c, CFG_SEV_ERROR, pos, path, s, "invalid strategy '%.*s'; use %s", (int)bad_len, bad,
              strbuf_str(&allowed));
    strbuf_release(&allowed);
}

/* deviceListStrategy: a string ("envvar,cdi-cri") or a list of them. */
static void list_strategies_field(struct cfg__ctx *c, struct fy_node *v, const char *path,
                                  struct cfg_pos pos, unsigned *out)
{
    unsigned bits = 0;
    void *it = NULL;
    struct fy_node *item;
    size_t i = 0;

    if (fy_node_get_type(v) != FYNT_SEQUENCE) {
        list_strategy_entry(c, v, path, pos, &bits);
    } else if (want_list(c, v, path, pos, "strategies") == 0) {
        cfg__diag(c, CFG_SEV_ERROR, pos, path, NULL,
                  "empty list; give at least one "
                  "strategy, e.g. [envvar]");
    } else {
        for (item = fy_node_sequence_iterate(v, &it); item;
             item = fy_node_sequence_iterate(v, &it)) {
            char ipath[PATH_MAX_LEN];
            path_index(ipath, path, i++);
            list_strategy_entry(c, item, ipath, node_pos(item, pos), &bits);
        }
    }
    if (bits)
        *out = bits;
}

static void duration_field(struct cfg__ctx *c, struct fy_node *v, const char *path,
                           struct cfg_pos pos, int64_t *out)
{
    const char *s = scalar_text(c, v);
    struct error e = {0};
    int64_t ms;

    if (!s)
        cfg__diag(c, CFG_SEV_ERROR, pos, path, shown(c, v),
                  "expected a duration such as "
                  "'60s', got %s",
                  kind_name(c, v));
    else if (cfg_duration_parse_ms(s, &ms, &e) < 0)
        cfg__diag(c, CFG_SEV_ERROR, pos, path, s, "%s", e.msg);
    else
        *out = ms;
}

/* One key of a descriptor-table section (fields.c): parsed by its type. */
static void section_field(struct cfg__ctx *c, int key, struct fy_node *v, const char *path,
                          struct cfg_pos pos, void *ud)
{
    const struct cfg__section *sec = ud;
    const struct cfg__field *f = &sec->fields[key];
    void *p = cfg__field_ptr(f, c->cfg);
    int e;

    if (f->pos_off)
        *(struct cfg_pos *)((char *)c + f->pos_off - 1) = pos;
    switch (f->type) {
    case CFG__F_BOOL:
        want_bool(c, v, path, pos, p);
        break;
    case CFG__F_STR:
    case CFG__F_STR_EMPTY_NULL:
        want_string_into(c, v, path, pos, p);
        break;
    case CFG__F_ENUM:
        if (want_enum(c, v, path, pos, f->values, &e))
            *(int *)p = e;
        break;
    case CFG__F_DURATION:
        duration_field(c, v, path, pos, p);
        break;
    case CFG__F_LIST_STRATEGIES:
        list_strategies_field(c, v, path, pos, p);
        break;
    case CFG__F_SECTION:
        walk_map(c, v, path, pos, cfg__section_keys(f->sub), section_field, (void *)f->sub);
        break;
    }
}

/* ---- resources.gpus / resources.mig ------------------------------------------------------ */

static const char *const pattern_keys[] = {"pattern", "name", NULL};

struct pattern_ud {
    struct cfg_resource_pattern *p;
};

static void pattern_field(struct cfg__ctx *c, int key, struct fy_node *v, const char *path,
                          struct cfg_pos pos, void *ud)
{
    struct cfg_resource_pattern *p = ((struct pattern_ud *)ud)->p;
    const char *s;

    if (key == 0) {
        if (!want_string(c, v, path, pos, &s))
            return;
        if (!*s)
            cfg__diag(c, CFG_SEV_ERROR, pos, path, s,
                      "empty pattern; use '*' to match every "
                      "device");
        else if (!cfg__set_str(&p->pattern, s))
            c->oom = true;
    } else {
        free(p->name);
        p->name = resource_name(c, v, path, pos);
    }
}

static void pattern_list(struct cfg__ctx *c, struct fy_node *v, const char *path,
                         struct cfg_pos pos, struct cfg_resource_pattern **ret, size_t *ret_n)
{
    long count = want_list(c, v, path, pos, "{pattern, name} entries");
    struct fy_node *item;
    void *it = NULL;
    size_t i = 0;

    if (count <= 0)
        return;
    *ret = calloc((size_t)count, sizeof(**ret));
    if (!*ret) {
        c->oom = true;
        return;
    }
    for (item = fy_node_sequence_iterate(v, &it); item && !c->oom;
         item = fy_node_sequence_iterate(v, &it)) {
        struct cfg_resource_pattern *p = &(*ret)[i];
        struct pattern_ud ud = {p};
        char ipath[PATH_MAX_LEN];
        size_t before = c->n_errors;

        path_index(ipath, path, i);
        p->pos = node_pos(item, pos);
        *ret_n = ++i;
        walk_map(c, item, ipath, p->pos, pattern_keys, pattern_field, &ud);
        if (c->n_errors == before && !p->pattern)
            cfg__diag(c, CFG_SEV_ERROR, p->pos, ipath, NULL,
                      "missing 'pattern'; each entry "
                      "needs a pattern (e.g. '*T4*') and a name");
        if (c->n_errors == before && !p->name)
            cfg__diag(c, CFG_SEV_ERROR, p->pos, ipath, NULL,
                      "missing 'name'; each entry "
                      "needs a pattern and a resource name (e.g. 'nvidia.com/gpu')");
    }
}

static const char *const resources_keys[] = {"gpus", "mig", NULL};

static void resources_field(struct cfg__ctx *c, int key, struct fy_node *v, const char *path,
                            struct cfg_pos pos, void *ud)
{
    struct cfg_config *cfg = c->cfg;

    if (key == 0)
        pattern_list(c, v, path, pos, &cfg->gpus, &cfg->n_gpus);
    else
        pattern_list(c, v, path, pos, &cfg->mig, &cfg->n_mig);
}

/* ---- sharing ----------------------------------------------------------------------------- */

static void devices_field(struct cfg__ctx *c, struct fy_node *v, const char *path,
                          struct cfg_pos pos, struct cfg_replicated_resource *r)
{
    struct fy_node *item;
    void *it = NULL;
    long count;
    int64_t n;

    if (fy_node_get_type(v) == FYNT_SCALAR) {
        const char *s = scalar_text(c, v);
        if (s && yaml_is_plain(v) && want_int(c, v, path, pos, NULL, &n) == 0) {
            if (n <= 0 || n > (int64_t)CFG_MAX_LIST_ITEMS)
                cfg__diag(c, CFG_SEV_ERROR, pos, path, s,
                          "%s is not a valid count of devices; "
                          "a count must be > 0 (or use 'all')",
                          s);
            else {
                r->devices_kind = CFG_DEVICES_COUNT;
                r->devices_count = (unsigned)n;
            }
        } else if (s && strcmp(s, "all") == 0) {
            r->devices_kind = CFG_DEVICES_ALL;
        } else {
            cfg__diag(c, CFG_SEV_ERROR, pos, path, shown(c, v),
                      "devices set as '%s' but the only "
                      "valid string is 'all'; use 'all', a count, or a list of devices",
                      shown(c, v));
        }
        return;
    }
    count = want_list(c, v, path, pos, "devices");
    if (count < 0)
        return;
    if (count == 0) {
        cfg__diag(c, CFG_SEV_ERROR, pos, path, NULL,
                  "empty devices list; list at least one "
                  "device, or remove the key to share all devices");
        return;
    }
    for (size_t i = 0; i < r->n_devices; i++)
        free(r->devices[i].uuid);
    free(r->devices);
    r->n_devices = 0;
    r->devices = calloc((size_t)count, sizeof(*r->devices));
    if (!r->devices) {
        c->oom = true;
        return;
    }
    r->devices_kind = CFG_DEVICES_LIST;
    item = fy_node_sequence_iterate(v, &it);
    for (size_t idx = 0; item && !c->oom; idx++, item = fy_node_sequence_iterate(v, &it)) {
        struct cfg_device_ref *d = &r->devices[r->n_devices];
        struct cfg_pos ipos = node_pos(item, pos);
        char ipath[PATH_MAX_LEN];
        const char *s = scalar_text(c, item);
        struct error e = {0};
        int ret;

        path_index(ipath, path, idx);
        if (!s) {
            cfg__diag(c, CFG_SEV_ERROR, ipos, ipath, shown(c, item),
                      "expected a device (index "
                      "or UUID), got %s",
                      kind_name(c, item));
            continue;
        }
        if (yaml_is_plain(item) && s[0] == '-') {
            cfg__diag(c, CFG_SEV_ERROR, ipos, ipath, s,
                      "%s is not a device index; indices "
                      "start at 0",
                      s);
            continue;
        }
        ret = cfg_device_ref_parse(s, d, &e);
        if (ret == -ENOMEM) {
            c->oom = true;
            return;
        }
        if (ret < 0) {
            cfg__diag(c, CFG_SEV_ERROR, ipos, ipath, s, "%s", e.msg);
            continue;
        }
        d->pos = ipos;
        r->n_devices++;
    }
}

static const char *const replicated_keys[] = {
    "name", "rename", "devices", "replicas", "memoryLimit", "threadPercentage", NULL};

/* "8Gi", "8192Mi", "8G", "8192M" or a plain number of MiB. 0 on anything else. */
static uint64_t memory_mib(const char *s)
{
    char *end;
    unsigned long long v;
    if (!s || *s < '0' || *s > '9')
        return 0;
    v = strtoull(s, &end, 10);
    if (!*end || strcmp(end, "Mi") == 0 || strcmp(end, "M") == 0)
        return v;
    if ((strcmp(end, "Gi") == 0 || strcmp(end, "G") == 0) && v < (1ull << 40))
        return v * 1024;
    return 0;
}

struct replicated_ud {
    struct cfg_replicated_resource *r;
    bool has_replicas;
    const struct cfg_sharing_mode *mode; /* the block's: its replica rule */
};

static void replicated_field(struct cfg__ctx *c, int key, struct fy_node *v, const char *path,
                             struct cfg_pos pos, void *udp)
{
    struct replicated_ud *ud = udp;
    struct cfg_replicated_resource *r = ud->r;
    const char *s = scalar_text(c, v);
    int64_t n;
    int ret;

    switch (key) {
    case 0:
        free(r->name);
        r->name = resource_name(c, v, path, pos);
        break;
    case 1:
        free(r->rename);
        r->rename = resource_name(c, v, path, pos);
        r->rename_pos = pos;
        break;
    case 2:
        devices_field(c, v, path, pos, r);
        r->devices_pos = pos;
        break;
    case 3:
        ud->has_replicas = true;
        r->replicas_pos = pos;
        ret = want_int(c, v, path, pos, NULL, &n);
        if (ret == 0 && n >= 1 && n <= (int64_t)ud->mode->max_replicas) {
            r->replicas = (unsigned)n;
        } else if (ret == 0 && n > (int64_t)ud->mode->max_replicas) {
            cfg__diag(c, CFG_SEV_ERROR, pos, path, s,
                      "%s replicas is too many; at most %u "
                      "are allowed%s",
                      s, ud->mode->max_replicas, ud->mode->max_replicas_why);
        } else if (s && yaml_is_plain(v) && (ret == 0 || looks_numeric(s) || ret == -ERANGE)) {
            cfg__diag(c, CFG_SEV_ERROR, pos, path, s,
                      "%s is not a valid replica count; use a "
                      "whole number >= 1 (1 means not shared)",
                      s);
        } else {
            cfg__diag(c, CFG_SEV_ERROR, pos, path, shown(c, v),
                      "expected a whole number of "
                      "replicas >= 1, got %s%s",
                      kind_name(c, v), s && looks_numeric(s) ? "; remove the quotes" : "");
        }
        break;
    case 4:
        r->limit_pos = pos;
        r->memory_limit_mib = memory_mib(s);
        if (!r->memory_limit_mib)
            cfg__diag(c, CFG_SEV_ERROR, pos, path, shown(c, v),
                      "memoryLimit is the pinned memory each MPS client may use, e.g. 8Gi or "
                      "8192Mi (a plain number is MiB), not %s",
                      s ? s : kind_name(c, v));
        break;
    case 5:
        if (!r->memory_limit_mib) /* the limit named first is memoryLimit's */
            r->limit_pos = pos;
        ret = want_int(c, v, path, pos, NULL, &n);
        if (ret == 0 && n >= 1 && n <= 100)
            r->thread_percentage = (unsigned)n;
        else if (ret == 0)
            cfg__diag(c, CFG_SEV_ERROR, pos, path, s,
                      "threadPercentage is the share of the GPU's threads each MPS client "
                      "may use: 1 to 100, not %s",
                      s);
        break;
    }
}

struct sharing_ud {
    struct cfg_sharing *s;
    const struct cfg_sharing_mode *mode;
    bool fail_set;
    bool has_resources;
};

static void sharing_resources(struct cfg__ctx *c, struct fy_node *v, const char *path,
                              struct cfg_pos pos, struct sharing_ud *ud)
{
    struct cfg_sharing *sh = ud->s;
    long count = want_list(c, v, path, pos, "resources");
    struct fy_node *item;
    void *it = NULL;

    if (count < 0)
        return;
    ud->has_resources = true;
    if (count == 0)
        return;
    sh->resources = calloc((size_t)count, sizeof(*sh->resources));
    if (!sh->resources) {
        c->oom = true;
        return;
    }
    for (item = fy_node_sequence_iterate(v, &it); item && !c->oom;
         item = fy_node_sequence_iterate(v, &it)) {
        struct cfg_replicated_resource *r = &sh->resources[sh->n_resources];
        struct replicated_ud rud = {r, false, ud->mode};
        char ipath[PATH_MAX_LEN];
        size_t before = c->n_errors;

        path_index(ipath, path, sh->n_resources++);
        r->pos = node_pos(item, pos);
        walk_map(c, item, ipath, r->pos, replicated_keys, replicated_field, &rud);
        if (fy_node_get_type(item) != FYNT_MAPPING)
            continue;
        if (!r->name && c->n_errors == before)
            cfg__diag(c, CFG_SEV_ERROR, r->pos, ipath, NULL,
                      "no resource name specified; add "
                      "'name: nvidia.com/gpu' (or the resource to share)");
        if (!rud.has_replicas && ud->mode->max_replicas == 1)
            r->replicas = 1; /* a mode without replicas (fractions) */
        else if (!rud.has_replicas)
            cfg__diag(c, CFG_SEV_ERROR, r->pos, ipath, NULL,
                      "no replicas specified; add "
                      "'replicas: N' (N >= 1, 1 means not shared)");
    }
}

static void sharing_rename_by_default(struct cfg__ctx *c, struct fy_node *v, const char *path,
                                      struct cfg_pos pos, struct sharing_ud *ud)
{
    want_bool(c, v, path, pos, &ud->s->rename_by_default);
}

static void sharing_fail_requests(struct cfg__ctx *c, struct fy_node *v, const char *path,
                                  struct cfg_pos pos, struct sharing_ud *ud)
{
    if (want_bool(c, v, path, pos, &ud->s->fail_requests_greater_than_one))
        ud->fail_set = true;
}

/* The keys of every sharing.<mode> block, one row each. */
static const struct sharing_row {
    const char *key;
    void (*parse)(struct cfg__ctx *c, struct fy_node *v, const char *path, struct cfg_pos pos,
                  struct sharing_ud *ud);
} sharing_rows[] = {
    {"renameByDefault", sharing_rename_by_default},
    {"failRequestsGreaterThanOne", sharing_fail_requests},
    {"resources", sharing_resources},
};

static void sharing_block_field(struct cfg__ctx *c, int key, struct fy_node *v, const char *path,
                                struct cfg_pos pos, void *ud)
{
    sharing_rows[key].parse(c, v, path, pos, ud);
}

static void sharing_release(struct cfg_sharing *s)
{
    for (size_t i = 0; i < s->n_resources; i++)
        cfg__replicated_release(&s->resources[i]);
    free(s->resources);
    *s = (struct cfg_sharing){0};
}

/* The sharing: keys, one per mode with a config block, and the rows they name. */
struct sharing_keys {
    const char *keys[CFG_SHARING__N + 1];
    const struct cfg_sharing_mode *modes[CFG_SHARING__N];
};

static void sharing_keys_init(struct sharing_keys *k)
{
    size_t n = 0;

    for (int s = 0; s < CFG_SHARING__N; s++) {
        const struct cfg_sharing_mode *m = cfg_sharing_mode((enum cfg_sharing_strategy)s);
        if (!m->config_key)
            continue;
        k->keys[n] = m->config_key;
        k->modes[n++] = m;
    }
    k->keys[n] = NULL;
}

/* A second block: NVIDIA's plugin keeps the mode of highest precedence, silently; we keep
 * it too and say so. Returns whether the new block replaces the one kept so far. */
static bool sharing_conflict(struct cfg__ctx *c, const struct cfg_sharing_mode *kept,
                             const struct cfg_sharing_mode *m, const char *path, struct cfg_pos pos)
{
    const struct cfg_sharing_mode *first = kept->strategy < m->strategy ? kept : m;
    const struct cfg_sharing_mode *second = first == m ? kept : m;
    const struct cfg_sharing_mode *wins = m->precedence > kept->precedence ? m : kept;

    c->both_sharing = true;
    cfg__diag(c, CFG_SEV_ERROR, pos, path, NULL,
              "both sharing.%s and sharing.%s are set; keep only one (NVIDIA's plugin would "
              "silently use %s)",
              first->config_key, second->config_key, wins->config_key);
    return wins == m;
}

static void sharing_field(struct cfg__ctx *c, int key, struct fy_node *v, const char *path,
                          struct cfg_pos pos, void *udp)
{
    const struct sharing_keys *keys = udp;
    const struct cfg_sharing_mode *mode = keys->modes[key];
    struct cfg_config *cfg = c->cfg;
    struct cfg_sharing parsed = {0};
    struct sharing_ud ud = {&parsed, mode, false, false};
    const char *block_keys[GS_ARRAY_SIZE(sharing_rows) + 1] = {NULL};
    size_t before = c->n_errors;

    for (size_t i = 0; i < GS_ARRAY_SIZE(sharing_rows); i++)
        block_keys[i] = sharing_rows[i].key;
    walk_map(c, v, path, pos, block_keys, sharing_block_field, &ud);
    if (c->n_errors == before && (!ud.has_resources || parsed.n_resources == 0))
        cfg__diag(c, CFG_SEV_ERROR, pos, path, NULL,
                  "no resources specified; add a "
                  "'resources' list such as [{name: nvidia.com/gpu, replicas: 2}]");
    if (!ud.fail_set)
        parsed.fail_requests_greater_than_one = mode->fail_requests_default;

    if (cfg_sharing_mode_shares(cfg_sharing_mode(cfg->sharing_strategy))) {
        if (!sharing_conflict(c, cfg_sharing_mode(cfg->sharing_strategy), mode, path, pos)) {
            sharing_release(&parsed);
            return;
        }
        sharing_release(&cfg->sharing);
    }
    cfg->sharing = parsed;
    cfg->sharing_strategy = mode->strategy;
    c->fail_requests_set = ud.fail_set;
    c->pos_sharing = pos;
}

/* ---- imex and the top level -------------------------------------------------------------- */

static const char *const imex_keys[] = {"channelIDs", "required", NULL};

static void imex_field(struct cfg__ctx *c, int key, struct fy_node *v, const char *path,
                       struct cfg_pos pos, void *ud)
{
    struct cfg_imex *im = &c->cfg->imex;
    struct fy_node *item;
    void *it = NULL;
    long count;

    if (key == 1) {
        want_bool(c, v, path, pos, &im->required);
        return;
    }
    count = want_list(c, v, path, pos, "channel IDs");
    if (count <= 0)
        return;
    im->channel_ids = calloc((size_t)count, sizeof(*im->channel_ids));
    if (!im->channel_ids) {
        c->oom = true;
        return;
    }
    for (item = fy_node_sequence_iterate(v, &it); item; item = fy_node_sequence_iterate(v, &it)) {
        char ipath[PATH_MAX_LEN];
        struct cfg_pos ipos = node_pos(item, pos);
        int64_t id;

        path_index(ipath, path, im->n_channel_ids);
        if (want_int(c, item, ipath, ipos, "a channel ID (0)", &id) < 0)
            continue;
        if (id != 0 || count > 1) {
            cfg__diag(c, CFG_SEV_ERROR, ipos, path, scalar_text(c, item),
                      "channelIDs must be [] or [0]");
            break;
        }
        im->channel_ids[im->n_channel_ids++] = 0;
    }
}

static const char *const top_keys[] = {"version", "flags", "resources", "sharing", "imex", NULL};

static void top_field(struct cfg__ctx *c, int key, struct fy_node *v, const char *path,
                      struct cfg_pos pos, void *ud)
{
    const char *s;

    switch (key) {
    case 0:
        if (!want_string(c, v, path, pos, &s))
            break;
        if (strcmp(s, "v1") != 0)
            cfg__diag(c, CFG_SEV_ERROR, pos, path, s,
                      "unknown version '%s'; the only "
                      "supported version is 'v1'",
                      s);
        break;
    case 1:
        walk_map(c, v, path, pos, cfg__section_keys(&cfg__flags_section), section_field,
                 (void *)&cfg__flags_section);
        break;
    case 2:
        walk_map(c, v, path, pos, resources_keys, resources_field, NULL);
        break;
    case 3: {
        struct sharing_keys keys;
        sharing_keys_init(&keys);
        walk_map(c, v, path, pos, keys.keys, sharing_field, &keys);
        break;
    }
    case 4:
        walk_map(c, v, path, pos, imex_keys, imex_field, NULL);
        break;
    }
}

void cfg__parse_document(struct cfg__ctx *c, struct fy_node *root)
{
    struct cfg_pos start = {1, 1};

    if (is_null(c, root)) {
        cfg__diag(c, CFG_SEV_WARNING, start, NULL, NULL,
                  "the config is empty; using the "
                  "built-in defaults (write at least 'version: v1' to silence this)");
        return;
    }
    walk_map(c, root, "", node_pos(root, start), top_keys, top_field, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* print.c: the effective config as YAML or JSON (one emitter, two syntaxes), and the
 * one-line summary `gpuslice config validate` prints. Every field is written with its
 * effective value, so the output parses back to the same config. Pure: appends to a
 * strbuf. */
#include <errno.h>
#include <stdio.h>
#include <strings.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config/internal.h"

#define EMIT_DEPTH 8

struct level {
    bool is_list;
    bool pending;      /* header ("key:") not written yet */
    bool dash_pending; /* a map inside a list: its first line starts with "- " */
    const char *key;   /* NULL inside a list */
    size_t count;
    unsigned ind; /* YAML: indentation of this level's lines */
};

struct emit {
    struct strbuf *out;
    enum cfg_format fmt;
    struct level lv[EMIT_DEPTH];
    int depth; /* index of the current level */
    int r;
};

static void put(struct emit *e, const char *s)
{
    if (e->r >= 0)
        e->r = strbuf_puts(e->out, s);
}

static void indent(struct emit *e, unsigned n)
{
    for (unsigned i = 0; i < n && e->r >= 0; i++)
        e->r = strbuf_putc(e->out, ' ');
}

static void quoted(struct emit *e, const char *s)
{
    put(e, "\"");
    for (; *s && e->r >= 0; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            e->r = strbuf_printf(e->out, "\\%c", ch);
        else if (ch < 0x20)
            e->r = strbuf_printf(e->out, "\\u%04x", ch);
        else
            e->r = strbuf_putc(e->out, (char)ch);
    }
    put(e, "\"");
}

/* YAML: writes the line prefix for a new line in level l ("  ", "- "). */
static void yaml_prefix(struct emit *e, struct level *l)
{
    if (l->dash_pending) {
        indent(e, l->ind - 2);
        put(e, "- ");
        l->dash_pending = false;
    } else {
        indent(e, l->ind);
    }
}

static void flush(struct emit *e, int d)
{
    struct level *l = &e->lv[d], *p;

    if (!l->pending || d == 0)
        return;
    flush(e, d - 1);
    p = &e->lv[d - 1];
    l->pending = false;
    if (e->fmt == CFG_FORMAT_JSON) {
        put(e, p->count ? ",\n" : "\n");
        indent(e, 2 * (unsigned)d);
        if (l->key) {
            quoted(e, l->key);
            put(e, ": ");
        }
        put(e, l->is_list ? "[" : "{");
        return;
    }
    if (l->key) {
        yaml_prefix(e, p);
        put(e, l->key);
        put(e, ":\n");
    }
}

/* Starts a scalar child line: "key: " / "- " in YAML, the comma and key in JSON. */
static void child(struct emit *e, const char *key)
{
    struct level *l = &e->lv[e->depth];

    flush(e, e->depth);
    if (e->fmt == CFG_FORMAT_JSON) {
        put(e, l->count ? ",\n" : "\n");
        indent(e, 2 * (unsigned)(e->depth + 1));
        if (key) {
            quoted(e, key);
            put(e, ": ");
        }
    } else if (l->is_list) {
        indent(e, l->ind);
        put(e, "- ");
    } else {
        yaml_prefix(e, l);
        put(e, key);
        put(e, ": ");
    }
    l->count++;
}

static void begin(struct emit *e, const char *key, bool is_list)
{
    struct level *p = &e->lv[e->depth], *l;

    if (e->depth + 1 >= EMIT_DEPTH) {
        e->r = -E2BIG;
        return;
    }
    l = &e->lv[++e->depth];
    *l = (struct level){.is_list = is_list, .pending = true, .key = p->is_list ? NULL : key};
    l->ind = p->ind + 2;
    if (p->is_list && !is_list)
        l->dash_pending = true; /* map item: "- first: x" then "  second: y" */
    if (p->is_list && !is_list) {
        /* a map inside a list needs no header line; mark its parent as having content */
        flush(e, e->depth - 1);
        if (e->fmt == CFG_FORMAT_JSON) {
            put(e, p->count ? ",\n" : "\n");
            indent(e, 2 * (unsigned)e->depth);
            put(e, "{");
        }
        l->pending = false;
    }
}

static void end(struct emit *e)
{
    struct level *l = &e->lv[e->depth];
    struct level *p = &e->lv[e->depth - 1];
    bool headless = !l->pending && !l->key && !l->is_list && p->is_list;

    if (l->count == 0) {
        if (e->fmt == CFG_FORMAT_JSON) {
            if (l->pending) {
                flush(e, e->depth);
            }
            put(e, l->is_list ? "]" : "}");
        } else {
            flush(e, e->depth - 1);
            if (headless) {
                indent(e, p->ind);
                put(e, "- {}\n");
            } else {
                yaml_prefix(e, p);
                put(e, l->key);
                put(e, l->is_list ? ": []\n" : ": {}\n");
            }
        }
    } else if (e->fmt == CFG_FORMAT_JSON) {
        put(e, "\n");
        indent(e, 2 * (unsigned)e->depth);
        put(e, l->is_list ? "]" : "}");
    }
    e->depth--;
    p->count++;
}

static void kv_str(struct emit *e, const char *key, const char *v)
{
    child(e, key);
    if (v)
        quoted(e, v);
    else
        put(e, "null");
    if (e->fmt == CFG_FORMAT_YAML)
        put(e, "\n");
}

static void kv_raw(struct emit *e, const char *key, const char *v)
{
    child(e, key);
    put(e, v);
    if (e->fmt == CFG_FORMAT_YAML)
        put(e, "\n");
}

static void kv_bool(struct emit *e, const char *key, bool v)
{
    kv_raw(e, key, v ? "true" : "false");
}

static void kv_uint(struct emit *e, const char *key, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    kv_raw(e, key, buf);
}

/* ---- the config -------------------------------------------------------------------------- */

static void emit_patterns(struct emit *e, const char *key, const struct cfg_resource_pattern *p,
                          size_t n)
{
    begin(e, key, true);
    for (size_t i = 0; i < n; i++) {
        begin(e, NULL, false);
        kv_str(e, "pattern", p[i].pattern);
        kv_str(e, "name", p[i].name);
        end(e);
    }
    end(e);
}

static void emit_devices(struct emit *e, const struct cfg_replicated_resource *r)
{
    char buf[32];

    switch (r->devices_kind) {
    case CFG_DEVICES_ALL:
        kv_str(e, "devices", "all");
        return;
    case CFG_DEVICES_COUNT:
        kv_uint(e, "devices", r->devices_count);
        return;
    case CFG_DEVICES_LIST:
        break;
    }
    begin(e, "devices", true);
    for (size_t i = 0; i < r->n_devices; i++) {
        const struct cfg_device_ref *d = &r->devices[i];
        if (d->kind == CFG_DEVREF_GPU_INDEX) {
            kv_uint(e, NULL, d->gpu_index);
        } else if (d->kind == CFG_DEVREF_MIG_INDEX) {
            snprintf(buf, sizeof(buf), "%u:%u", d->gpu_index, d->mig_index);
            kv_str(e, NULL, buf);
        } else {
            kv_str(e, NULL, d->uuid);
        }
    }
    end(e);
}

/* A descriptor-table section (fields.c), in table order. */
static void emit_section(struct emit *e, const struct cfg_config *cfg, const char *key,
                         const struct cfg__section *sec)
{
    char buf[32];

    begin(e, key, false);
    for (size_t i = 0; i < sec->n; i++) {
        const struct cfg__field *f = &sec->fields[i];
        const void *p = cfg__field_ptr(f, (struct cfg_config *)cfg);
        int64_t ms;
        switch (f->type) {
        case CFG__F_BOOL:
            kv_bool(e, f->key, *(const bool *)p);
            break;
        case CFG__F_STR:
        case CFG__F_STR_EMPTY_NULL:
            kv_str(e, f->key, *(char *const *)p);
            break;
        case CFG__F_ENUM:
            kv_str(e, f->key, f->values[*(const int *)p]);
            break;
        case CFG__F_DURATION:
            ms = *(const int64_t *)p;
            if (ms < 0)
                snprintf(buf, sizeof(buf), "infinite");
            else if (ms % 1000 == 0)
                snprintf(buf, sizeof(buf), "%" PRId64 "s", ms / 1000);
            else
                snprintf(buf, sizeof(buf), "%" PRId64 "ms", ms);
            kv_str(e, f->key, buf);
            break;
        case CFG__F_LIST_STRATEGIES:
            begin(e, f->key, true);
            for (unsigned b = 0; cfg__list_strategies[b]; b++)
                if (*(const unsigned *)p & (1u << b))
                    kv_str(e, NULL, cfg__list_strategies[b]);
            end(e);
            break;
        case CFG__F_SECTION:
            emit_section(e, cfg, f->key, f->sub);
            break;
        }
    }
    end(e);
}

static void emit_sharing(struct emit *e, const struct cfg_config *cfg)
{
    const struct cfg_sharing *s = &cfg->sharing;
    const struct cfg_sharing_mode *mode = cfg_sharing_mode(cfg->sharing_strategy);

    begin(e, "sharing", false);
    if (mode->config_key) {
        begin(e, mode->config_key, false);
        kv_bool(e, "renameByDefault", s->rename_by_default);
        kv_bool(e, "failRequestsGreaterThanOne", s->fail_requests_greater_than_one);
        begin(e, "resources", true);
        for (size_t i = 0; i < s->n_resources; i++) {
            const struct cfg_replicated_resource *r = &s->resources[i];
            begin(e, NULL, false);
            kv_str(e, "name", r->name);
            if (r->rename)
                kv_str(e, "rename", r->rename);
            emit_devices(e, r);
            kv_uint(e, "replicas", r->replicas);
            if (r->memory_limit_mib) {
                char q[32];
                snprintf(q, sizeof(q), "%lluMi", (unsigned long long)r->memory_limit_mib);
                kv_str(e, "memoryLimit", q);
            }
            if (r->thread_percentage)
                kv_uint(e, "threadPercentage", r->thread_percentage);
            end(e);
        }
        end(e);
        end(e);
    }
    end(e);
}

int cfg_print(const struct cfg_config *cfg, enum cfg_format format, struct strbuf *out)
{
    struct emit e = {.out = out, .fmt = format};

    if (format == CFG_FORMAT_JSON)
        put(&e, "{");
    kv_str(&e, "version", cfg->version ? cfg->version : "v1");
    emit_section(&e, cfg, "flags", &cfg__flags_section);
    begin(&e, "resources", false);
    emit_patterns(&e, "gpus", cfg->gpus, cfg->n_gpus);
    emit_patterns(&e, "mig", cfg->mig, cfg->n_mig);
    end(&e);
    emit_sharing(&e, cfg);
    begin(&e, "imex", false);
    begin(&e, "channelIDs", true);
    for (size_t i = 0; i < cfg->imex.n_channel_ids; i++)
        kv_uint(&e, NULL, cfg->imex.channel_ids[i]);
    end(&e);
    kv_bool(&e, "required", cfg->imex.required);
    end(&e);
    if (format == CFG_FORMAT_JSON)
        put(&e, "\n}\n");
    return e.r < 0 ? e.r : 0;
}

int cfg_format_parse(const char *s, enum cfg_format *ret)
{
    if (strcmp(s, "yaml") == 0 || strcmp(s, "yml") == 0)
        *ret = CFG_FORMAT_YAML;
    else if (strcmp(s, "json") == 0)
        *ret = CFG_FORMAT_JSON;
    else
        return -EINVAL;
    return 0;
}

/* Summaries stay one line: list at most this many resources. */
#define SUMMARY_MAX_RESOURCES 8

int cfg_summary(const struct cfg_config *cfg, struct strbuf *out)
{
    const struct cfg_sharing *s = &cfg->sharing;
    int r;

    r = strbuf_printf(out, "config '%s'", cfg->config_name ? cfg->config_name : "-");
    if (r >= 0 && cfg->source_path)
        r = strbuf_printf(out, " (%s)", cfg->source_path);
    if (r >= 0)
        r = strbuf_printf(out, ": migStrategy %s, sharing %s",
                          cfg_mig_strategy_name(cfg->flags.mig_strategy),
                          cfg_sharing_strategy_name(cfg->sharing_strategy));
    for (size_t i = 0; r >= 0 && i < s->n_resources && i < SUMMARY_MAX_RESOURCES; i++) {
        const struct cfg_replicated_resource *res = &s->resources[i];
        r = strbuf_printf(out, "%s%s", i ? ", " : ": ", res->name);
        if (r >= 0 && res->rename)
            r = strbuf_printf(out, " as %s", res->rename);
        else if (r >= 0 && s->rename_by_default && res->replicas > 1)
            r = strbuf_printf(out, " as %s.shared", res->name);
        if (r >= 0 && res->devices_kind == CFG_DEVICES_COUNT)
            r = strbuf_printf(out, " (first %u devices)", res->devices_count);
        else if (r >= 0 && res->devices_kind == CFG_DEVICES_LIST)
            r = strbuf_printf(out, " (%zu device%s)", res->n_devices,
                              res->n_devices == 1 ? "" : "s");
        if (r >= 0)
            r = strbuf_printf(out, " x%u", res->replicas);
    }
    if (r >= 0 && s->n_resources > SUMMARY_MAX_RESOURCES)
        r = strbuf_printf(out, ", and %zu more", s->n_resources - SUMMARY_MAX_RESOURCES);
    return r < 0 ? r : 0;
}

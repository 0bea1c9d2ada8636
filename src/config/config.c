/* SPDX-License-Identifier: Apache-2.0 */
/* config.c: the config struct's life cycle (built-in defaults, free), the enum name
 * tables and the diagnostics list. Pure: no I/O. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "config/internal.h"

const char *const cfg__mig_strategies[] = {"none", "single", "mixed", NULL};
const char *const cfg__device_id_strategies[] = {"uuid", "index", NULL};
const char *const cfg__alloc_policies[] = {"distributed", "packed", NULL};
const char *const cfg__discovery_strategies[] = {"auto", "nvml", "tegra", NULL};
const char *const cfg__list_strategies[] = {"envvar", "volume-mounts", "cdi-annotations", "cdi-cri",
                                            NULL};

int cfg__lookup(const char *const *table, const char *s)
{
    for (int i = 0; table[i]; i++)
        if (strcmp(table[i], s) == 0)
            return i;
    return -1;
}

int cfg__join_allowed(const char *const *table, struct strbuf *out)
{
    int r = 0;

    for (size_t i = 0; table[i] && r >= 0; i++) {
        const char *sep = i == 0 ? "" : table[i + 1] ? ", " : " or ";
        r = strbuf_printf(out, "%s'%s'", sep, table[i]);
    }
    return r;
}

int cfg__list_strategies_parse(const char *s, unsigned *ret_bits, const char **ret_bad,
                               size_t *ret_bad_len)
{
    unsigned bits = 0;
    const char *p = s;

    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        int idx = -1;

        for (int i = 0; cfg__list_strategies[i]; i++)
            if (strlen(cfg__list_strategies[i]) == n && strncmp(cfg__list_strategies[i], p, n) == 0)
                idx = i;
        if (idx < 0) {
            *ret_bad = p;
            *ret_bad_len = n;
            return -EINVAL;
        }
        bits |= 1u << idx;
        if (!end)
            break;
        p = end + 1;
    }
    *ret_bits = bits;
    return 0;
}

const char *cfg_mig_strategy_name(enum cfg_mig_strategy s)
{
    return (unsigned)s < 3 ? cfg__mig_strategies[s] : "?";
}

bool cfg__set_str(char **dst, const char *s)
{
    char *copy = NULL;

    if (s) {
        copy = strdup(s);
        if (!copy)
            return false;
    }
    free(*dst);
    *dst = copy;
    return true;
}

/* ---- life cycle -------------------------------------------------------------------------- */

void cfg__resource_pattern_release(struct cfg_resource_pattern *p)
{
    free(p->pattern);
    free(p->name);
}

void cfg__replicated_release(struct cfg_replicated_resource *r)
{
    free(r->name);
    free(r->rename);
    for (size_t i = 0; i < r->n_devices; i++)
        free(r->devices[i].uuid);
    free(r->devices);
}

void cfg_free(struct cfg_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->version);
    free(cfg->flags.mps_root);
    free(cfg->flags.nvidia_driver_root);
    free(cfg->flags.nvidia_dev_root);
    free(cfg->flags.plugin.cdi_annotation_prefix);
    free(cfg->flags.plugin.nvidia_ctk_path);
    free(cfg->flags.plugin.container_driver_root);
    free(cfg->flags.gfd.output_file);
    free(cfg->flags.gfd.machine_type_file);
    for (size_t i = 0; i < cfg->n_gpus; i++)
        cfg__resource_pattern_release(&cfg->gpus[i]);
    free(cfg->gpus);
    for (size_t i = 0; i < cfg->n_mig; i++)
        cfg__resource_pattern_release(&cfg->mig[i]);
    free(cfg->mig);
    for (size_t i = 0; i < cfg->sharing.n_resources; i++)
        cfg__replicated_release(&cfg->sharing.resources[i]);
    free(cfg->sharing.resources);
    free(cfg->imex.channel_ids);
    free(cfg->source_path);
    free(cfg->config_name);
    free(cfg);
}

int cfg_new_default(struct cfg_config **ret_cfg, struct error *err)
{
    struct cfg_config *c = calloc(1, sizeof(*c));
    int r = -ENOMEM;

    if (!c)
        goto out;
    c->flags.fail_on_init_error = true;
    c->flags.plugin.device_list_strategies = CFG_LIST_ENVVAR;
    c->flags.gfd.sleep_interval_ms = CFG_GFD_SLEEP_INTERVAL_MS;
    c->flags.gfd.use_node_feature_api = true;
    if (!cfg__set_str(&c->version, "v1") || !cfg__set_str(&c->flags.nvidia_driver_root, "/") ||
        !cfg__set_str(&c->flags.plugin.cdi_annotation_prefix, "cdi.k8s.io/") ||
        !cfg__set_str(&c->flags.plugin.nvidia_ctk_path, "/usr/bin/nvidia-ctk") ||
        !cfg__set_str(&c->flags.plugin.container_driver_root, "/driver-root") ||
        !cfg__set_str(&c->flags.gfd.output_file,
                      "/etc/kubernetes/node-feature-discovery/features.d/gfd") ||
        !cfg__set_str(&c->flags.gfd.machine_type_file, "/sys/class/dmi/id/product_name"))
        goto out;
    *ret_cfg = c;
    c = NULL;
    r = 0;
out:
    cfg_free(c);
    if (r < 0)
        error_set(err, r, "out of memory building the default config");
    return r;
}

/* ---- diagnostics ------------------------------------------------------------------------- */

static void diag_release(struct cfg_diag *d)
{
    free(d->file);
    free(d->path);
    free(d->value);
    free(d->message);
}

void cfg_diags_release(struct cfg_diags *diags)
{
    if (!diags)
        return;
    for (size_t i = 0; i < diags->n_items; i++)
        diag_release(&diags->items[i]);
    free(diags->items);
    *diags = (struct cfg_diags)CFG_DIAGS_INIT;
}

/* Values are shown as written but cut, so one bad line cannot flood the output. */
#define DIAG_VALUE_MAX 80

void cfg__diag(struct cfg__ctx *c, enum cfg_severity sev, struct cfg_pos pos, const char *path,
               const char *value, const char *fmt, ...)
{
    struct cfg_diags *ds = c->diags;
    struct cfg_diag d = {.severity = sev, .line = pos.line, .col = pos.col};
    struct strbuf sb = STRBUF_INIT;
    va_list ap;

    if (sev == CFG_SEV_ERROR)
        c->n_errors++;
    if (!ds)
        return;
    if (sev == CFG_SEV_ERROR)
        ds->n_errors++;
    else
        ds->n_warnings++;
    if (ds->n_items >= CFG_MAX_DIAGS) {
        ds->truncated = true;
        return;
    }
    va_start(ap, fmt);
    strbuf_vprintf(&sb, fmt, ap);
    va_end(ap);
    d.message = strbuf_take(&sb);
    d.file = str_dup(c->file);
    d.path = str_dup(path);
    if (value) {
        size_t n = strlen(value);
        d.value = strndup(value, n > DIAG_VALUE_MAX ? DIAG_VALUE_MAX : n);
    }
    if (ds->n_items % 16 == 0) {
        struct cfg_diag *p = realloc(ds->items, (ds->n_items + 16) * sizeof(*p));
        if (!p) {
            c->oom = true;
            diag_release(&d);
            return;
        }
        ds->items = p;
    }
    if (!d.message || (c->file && !d.file) || (path && !d.path) || (value && !d.value)) {
        c->oom = true;
        diag_release(&d);
        return;
    }
    ds->items[ds->n_items++] = d;
}

int cfg_diag_format(const struct cfg_diag *d, struct strbuf *out)
{
    int r = 0;

    if (d->file)
        r = strbuf_printf(out, "%s:", d->file);
    if (r >= 0 && d->line)
        r = strbuf_printf(out, "%u:%u:", d->line, d->col);
    if (r >= 0 && (d->file || d->line))
        r = strbuf_putc(out, ' ');
    if (r >= 0 && d->severity == CFG_SEV_WARNING)
        r = strbuf_puts(out, "warning: ");
    if (r >= 0 && d->path)
        r = strbuf_printf(out, "%s: ", d->path);
    if (r >= 0)
        r = strbuf_puts(out, d->message);
    return r;
}

int cfg_diags_format(const struct cfg_diags *diags, enum cfg_severity severity, struct strbuf *out)
{
    int r = 0;

    for (size_t i = 0; i < diags->n_items && r >= 0; i++) {
        if (diags->items[i].severity != severity)
            continue;
        r = cfg_diag_format(&diags->items[i], out);
        if (r >= 0)
            r = strbuf_putc(out, '\n');
    }
    if (r >= 0 && diags->truncated && severity == CFG_SEV_ERROR)
        r = strbuf_printf(out, "(more problems not shown: %zu errors, %zu warnings in all)\n",
                          diags->n_errors, diags->n_warnings);
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* validate.c: the checks that look at several entries at once — two sharing entries that
 * can claim the same device, renames that collide with other resource names, MPS limits —
 * and those that need the values after flags and env vars were applied, among them
 * --strict-nvidia-schema's (what NVIDIA's plugin would refuse or read differently). Syntax and
 * self-consistency only: whether a device exists on this node is the model's business.
 * Pure: no I/O. Sorting keeps it O(n log n) for 100k entries. */
#include <errno.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

#include "config/internal.h"

struct entry_ref {
    size_t idx;         /* index in sharing.resources */
    const char *name;   /* sort key */
    const char *source; /* the entry's own resource name */
    const struct cfg_device_ref *dev;
};

static int cmp_name(const void *a, const void *b)
{
    const struct entry_ref *x = a, *y = b;
    int r = strcmp(x->name, y->name);
    if (r)
        return r;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int dev_cmp(const struct cfg_device_ref *a, const struct cfg_device_ref *b)
{
    if (a->kind != b->kind)
        return (int)a->kind - (int)b->kind;
    switch (a->kind) {
    case CFG_DEVREF_GPU_INDEX:
        return a->gpu_index < b->gpu_index ? -1 : a->gpu_index > b->gpu_index;
    case CFG_DEVREF_MIG_INDEX:
        if (a->gpu_index != b->gpu_index)
            return a->gpu_index < b->gpu_index ? -1 : 1;
        return a->mig_index < b->mig_index ? -1 : a->mig_index > b->mig_index;
    default:
        return strcasecmp(a->uuid, b->uuid);
    }
}

static int cmp_dev(const void *a, const void *b)
{
    const struct entry_ref *x = a, *y = b;
    int r = dev_cmp(x->dev, y->dev);
    if (r)
        return r;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void entry_path(char *dst, size_t size, const struct cfg_config *cfg, size_t i,
                       const char *field)
{
    const struct cfg_sharing_mode *m = cfg_sharing_mode(cfg->sharing_strategy);

    snprintf(dst, size, "sharing.%s.resources[%zu]%s%s", m->config_key ? m->config_key : m->name, i,
             field ? "." : "", field ? field : "");
}

static void device_text(const struct cfg_device_ref *d, char *dst, size_t size)
{
    if (d->kind == CFG_DEVREF_GPU_INDEX)
        snprintf(dst, size, "%u", d->gpu_index);
    else if (d->kind == CFG_DEVREF_MIG_INDEX)
        snprintf(dst, size, "%u:%u", d->gpu_index, d->mig_index);
    else
        snprintf(dst, size, "%s", d->uuid);
}

/* Within a group of entries sharing one resource name (refs[0..n), sorted by index),
 * every pair must have disjoint device lists, and no list names a device twice. */
static void check_group(struct cfg__ctx *c, const struct entry_ref *group, size_t n)
{
    const struct cfg_config *cfg = c->cfg;
    const struct cfg_replicated_resource *res = cfg->sharing.resources;
    struct entry_ref *devs = NULL;
    size_t n_devs = 0, total = 0, open = SIZE_MAX;
    char path[256], text[128];

    for (size_t k = 0; k < n; k++) {
        const struct cfg_replicated_resource *r = &res[group[k].idx];
        if (r->devices_kind != CFG_DEVICES_LIST) {
            if (open == SIZE_MAX)
                open = k;
        }
        total += r->devices_kind == CFG_DEVICES_LIST ? r->n_devices : 0;
    }
    if (open != SIZE_MAX && n > 1) {
        /* an entry without a device list claims any device of the resource */
        size_t first = group[open == 0 ? 1 : 0].idx, other = group[open].idx;
        size_t later = first > other ? first : other, earlier = first > other ? other : first;
        entry_path(path, sizeof(path), cfg, later, NULL);
        cfg__diag(c, CFG_SEV_ERROR, res[later].pos, path, res[later].name,
                  "'%s' is also shared by resources[%zu] (line %u) and the two can claim the "
                  "same device; give each entry a disjoint 'devices' list, or merge them",
                  res[later].name, earlier, res[earlier].pos.line);
        return;
    }
    if (total == 0)
        return;
    devs = calloc(total ? total : 1, sizeof(*devs));
    if (!devs) {
        c->oom = true;
        return;
    }
    for (size_t k = 0; k < n; k++) {
        const struct cfg_replicated_resource *r = &res[group[k].idx];
        for (size_t d = 0; d < r->n_devices; d++)
            devs[n_devs++] = (struct entry_ref){group[k].idx, NULL, NULL, &r->devices[d]};
    }
    qsort(devs, n_devs, sizeof(*devs), cmp_dev);
    for (size_t k = 1; k < n_devs; k++) {
        const struct entry_ref *a = &devs[k - 1], *b = &devs[k];
        if (dev_cmp(a->dev, b->dev) != 0)
            continue;
        device_text(b->dev, text, sizeof(text));
        entry_path(path, sizeof(path), cfg, b->idx, "devices");
        if (a->idx == b->idx)
            cfg__diag(c, CFG_SEV_WARNING, b->dev->pos, path, text,
                      "device %s is listed twice; remove one", text);
        else
            cfg__diag(c, CFG_SEV_ERROR, b->dev->pos, path, text,
                      "device %s of '%s' is also claimed by resources[%zu] (line %u); each "
                      "device may be listed by one entry only",
                      text, res[b->idx].name, a->idx, a->dev->pos.line);
    }
    free(devs);
}

static void check_overlaps(struct cfg__ctx *c, struct entry_ref *by_name, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && strcmp(by_name[j].name, by_name[i].name) == 0)
            j++;
        check_group(c, &by_name[i], j - i);
        i = j;
    }
}

static bool name_in(const struct entry_ref *sorted, size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(sorted[mid].name, name);
        if (r == 0)
            return true;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* The names of resources.gpus and resources.mig, sorted, for name_in(). */
struct pattern_names {
    struct entry_ref *refs;
    size_t n;
};

static bool pattern_names_build(struct pattern_names *pn, const struct cfg_config *cfg)
{
    pn->n = 0;
    pn->refs = calloc(cfg->n_gpus + cfg->n_mig + 1, sizeof(*pn->refs));
    if (!pn->refs)
        return false;
    for (size_t i = 0; i < cfg->n_gpus; i++)
        if (cfg->gpus[i].name)
            pn->refs[pn->n++] = (struct entry_ref){i, cfg->gpus[i].name, NULL, NULL};
    for (size_t i = 0; i < cfg->n_mig; i++)
        if (cfg->mig[i].name)
            pn->refs[pn->n++] = (struct entry_ref){i, cfg->mig[i].name, NULL, NULL};
    qsort(pn->refs, pn->n, sizeof(*pn->refs), cmp_name);
    return true;
}

/* Renames: an explicit rename may not take another resource's name, and two entries of
 * different resources may not end up advertised under one name. */
static void check_renames(struct cfg__ctx *c, const struct entry_ref *by_name, size_t n,
                          const struct pattern_names *pn)
{
    const struct cfg_config *cfg = c->cfg;
    const struct cfg_replicated_resource *res = cfg->sharing.resources;
    struct entry_ref *adv = calloc(n ? n : 1, sizeof(*adv));
    char **owned = calloc(n ? n : 1, sizeof(*owned));
    char path[256];

    if (!adv || !owned) {
        c->oom = true;
        goto out;
    }
    for (size_t k = 0; k < n; k++) {
        const struct cfg_replicated_resource *r = &res[by_name[k].idx];
        const char *name = r->name;

        if (r->rename) {
            entry_path(path, sizeof(path), cfg, by_name[k].idx, "rename");
            if (str_eq(r->rename, r->name))
                cfg__diag(c, CFG_SEV_WARNING, r->pos, path, r->rename,
                          "rename is the same "
                          "as name; remove it");
            else if (name_in(by_name, n, r->rename) || name_in(pn->refs, pn->n, r->rename))
                cfg__diag(c, CFG_SEV_ERROR, r->pos, path, r->rename,
                          "rename '%s' collides "
                          "with another resource of that name; pick a name no other resource "
                          "uses (e.g. '%s.shared')",
                          r->rename, r->name);
            name = r->rename;
        } else if (cfg->sharing.rename_by_default && r->replicas > 1) {
            struct strbuf sb = STRBUF_INIT;
            strbuf_printf(&sb, "%s.shared", r->name);
            owned[k] = strbuf_take(&sb);
            if (!owned[k]) {
                c->oom = true;
                goto out;
            }
            name = owned[k];
        }
        adv[k] = (struct entry_ref){by_name[k].idx, name, r->name, NULL};
    }
    qsort(adv, n, sizeof(*adv), cmp_name);
    for (size_t k = 1; k < n; k++) {
        const struct entry_ref *a = &adv[k - 1], *b = &adv[k];
        if (strcmp(a->name, b->name) != 0 || strcmp(a->source, b->source) == 0)
            continue;
        entry_path(path, sizeof(path), cfg, b->idx, NULL);
        cfg__diag(c, CFG_SEV_ERROR, res[b->idx].pos, path, b->name,
                  "'%s' (from '%s') would be advertised under the same name as resources[%zu] "
                  "(from '%s'); rename one of them",
                  b->name, b->source, a->idx, a->source);
    }
out:
    for (size_t k = 0; owned && k < n; k++)
        free(owned[k]);
    free(owned);
    free(adv);
}

static bool shares_mig(const struct cfg_sharing_mode *m)
{
    return m->on_mig;
}

static bool has_client_limits(const struct cfg_sharing_mode *m)
{
    return m->client_limits;
}

/* The block of the first sharing mode that can do what `can` asks: what to suggest instead
 * of one that cannot. */
static const char *suggest_mode(bool (*can)(const struct cfg_sharing_mode *m))
{
    for (int s = 0; s < CFG_SHARING__N; s++) {
        const struct cfg_sharing_mode *m = cfg_sharing_mode((enum cfg_sharing_strategy)s);
        if (cfg_sharing_mode_shares(m) && can(m))
            return m->config_key;
    }
    return "?";
}

/* A mode that cannot share MIG devices (mode->on_mig false): entries naming them. */
static void check_no_mig(struct cfg__ctx *c, const struct cfg_sharing_mode *mode)
{
    const struct cfg_config *cfg = c->cfg;
    const char *alt = suggest_mode(shares_mig);
    char path[256];

    for (size_t i = 0; i < cfg->sharing.n_resources; i++) {
        const struct cfg_replicated_resource *r = &cfg->sharing.resources[i];
        if (r->name && str_startswith(r->name, "nvidia.com/mig-")) {
            entry_path(path, sizeof(path), cfg, i, "name");
            cfg__diag(c, CFG_SEV_ERROR, r->pos, path, r->name,
                      "sharing with %s is not "
                      "supported for MIG devices; use sharing.%s for '%s'",
                      mode->title, alt, r->name);
        }
        for (size_t d = 0; d < r->n_devices; d++) {
            const struct cfg_device_ref *ref = &r->devices[d];
            if (ref->kind != CFG_DEVREF_MIG_INDEX && ref->kind != CFG_DEVREF_MIG_UUID)
                continue;
            entry_path(path, sizeof(path), cfg, i, "devices");
            cfg__diag(c, CFG_SEV_ERROR, ref->pos, path, NULL,
                      "sharing with %s is not "
                      "supported for MIG devices; list whole GPUs or use sharing.%s",
                      mode->title, alt);
        }
    }
}

/* A mode without replicas (fractions, served through DRA): a rename would rename GPUs the
 * device plugin serves whole. */
static void check_no_rename(struct cfg__ctx *c, const struct cfg_sharing_mode *mode)
{
    const struct cfg_config *cfg = c->cfg;
    char path[256];

    for (size_t i = 0; i < cfg->sharing.n_resources; i++) {
        const struct cfg_replicated_resource *r = &cfg->sharing.resources[i];
        if (!r->rename)
            continue;
        entry_path(path, sizeof(path), cfg, i, "rename");
        cfg__diag(c, CFG_SEV_ERROR, r->rename_pos.line ? r->rename_pos : r->pos, path, r->rename,
                  "sharing with %s publishes the GPUs of '%s' through DRA under their own "
                  "names; rename has no meaning there: remove it",
                  mode->title, r->name ? r->name : "");
    }
}

/* true when some device can be advertised under `name` by this config: a resources.gpus
 * or resources.mig name, or a default name when those lists are left out. */
static bool name_is_advertised(const struct cfg_config *cfg, const struct pattern_names *pn,
                               const char *name)
{
    if (name_in(pn->refs, pn->n, name))
        return true;
    if (cfg->n_gpus == 0 && str_eq(name, "nvidia.com/gpu"))
        return true;
    return cfg->n_mig == 0 && str_startswith(name, "nvidia.com/mig-");
}

/* NVIDIA skips such an entry silently; a warning says why nothing gets shared. */
static void check_names_exist(struct cfg__ctx *c, const struct pattern_names *pn)
{
    const struct cfg_config *cfg = c->cfg;
    char path[256];

    for (size_t i = 0; i < cfg->sharing.n_resources; i++) {
        const struct cfg_replicated_resource *r = &cfg->sharing.resources[i];
        if (!r->name || name_is_advertised(cfg, pn, r->name))
            continue;
        entry_path(path, sizeof(path), cfg, i, "name");
        cfg__diag(c, CFG_SEV_WARNING, r->pos, path, r->name,
                  "no device is advertised as '%s' (it is not the default 'nvidia.com/gpu' "
                  "or a MIG name, nor a name in resources.gpus/mig); this entry shares "
                  "nothing",
                  r->name);
    }
}

void cfg__validate_sharing(struct cfg__ctx *c)
{
    const struct cfg_config *cfg = c->cfg;
    const struct cfg_sharing_mode *mode = cfg_sharing_mode(cfg->sharing_strategy);
    struct pattern_names pn = {NULL, 0};
    struct entry_ref *by_name = NULL;
    size_t n = 0;

    if (!cfg_sharing_mode_shares(mode) || cfg->sharing.n_resources == 0)
        return;
    by_name = calloc(cfg->sharing.n_resources, sizeof(*by_name));
    if (!by_name || !pattern_names_build(&pn, cfg)) {
        c->oom = true;
        goto out;
    }
    for (size_t i = 0; i < cfg->sharing.n_resources; i++) {
        const struct cfg_replicated_resource *r = &cfg->sharing.resources[i];
        if (r->name)
            by_name[n++] = (struct entry_ref){i, r->name, r->name, NULL};
    }
    qsort(by_name, n, sizeof(*by_name), cmp_name);
    check_overlaps(c, by_name, n);
    if (!c->oom)
        check_renames(c, by_name, n, &pn);
    if (!mode->on_mig)
        check_no_mig(c, mode);
    if (mode->dra_shareable)
        check_no_rename(c, mode);
    check_names_exist(c, &pn);
out:
    free(pn.refs);
    free(by_name);
}

/* The MPS limit extension of an entry: its field name, or NULL. */
static const char *mps_limit_field(const struct cfg_replicated_resource *r)
{
    return r->memory_limit_mib ? "memoryLimit" : r->thread_percentage ? "threadPercentage" : NULL;
}

/* resources.gpus exactly as NVIDIA's default (one "*" -> nvidia.com/gpu): read the same. */
static bool gpus_are_nvidia_default(const struct cfg_config *cfg)
{
    return cfg->n_gpus == 0 || (cfg->n_gpus == 1 && str_eq(cfg->gpus[0].pattern, "*") &&
                                str_eq(cfg->gpus[0].name, "nvidia.com/gpu"));
}

static void nvidia_resources(struct cfg__ctx *c, const struct cfg_resource_pattern *p, size_t n,
                             const char *key)
{
    char path[64];

    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "resources.%s[%zu]", key, i);
        cfg__diag(c, CFG_SEV_ERROR, p[i].pos, path, p[i].name,
                  "NVIDIA's plugin ignores resources.%s (\"Customizing the 'resources' field "
                  "is not yet supported in the config. Ignoring...\") and would advertise "
                  "these devices under its default name; remove it before rolling back",
                  key);
    }
}

/* Where a field of an entry was written, else the entry's own position. */
static struct cfg_pos at(const struct cfg_replicated_resource *r, struct cfg_pos field)
{
    return field.line ? field : r->pos;
}

/* --strict-nvidia-schema (`config validate --nvidia`): what NVIDIA's plugin would refuse,
 * or read differently than gpuslice does, is an error, so a config that passes behaves the
 * same after a rollback to NVIDIA's plugin. NVIDIA's own message is quoted where it has
 * one. */
static void check_nvidia_schema(struct cfg__ctx *c)
{
    const struct cfg_config *cfg = c->cfg;
    const struct cfg_sharing_mode *mode = cfg_sharing_mode(cfg->sharing_strategy);
    const char *block = mode->config_key;
    char path[256], shared[CFG_RESOURCE_NAME_MAX + 16];

    if (mode->dra_shareable) {
        cfg__diag(c, CFG_SEV_ERROR, c->pos_sharing, "sharing", block,
                  "sharing.%s is a gpuslice extension NVIDIA's plugin does not know (it would "
                  "ignore the block) and --strict-nvidia-schema is set; remove it",
                  block);
        return;
    }
    if (!gpus_are_nvidia_default(cfg))
        nvidia_resources(c, cfg->gpus, cfg->n_gpus, "gpus");
    nvidia_resources(c, cfg->mig, cfg->n_mig, "mig");
    for (size_t i = 0; i < cfg->sharing.n_resources; i++) {
        const struct cfg_replicated_resource *r = &cfg->sharing.resources[i];
        const char *limit = mps_limit_field(r);

        entry_path(path, sizeof(path), cfg, i, "replicas");
        if (r->replicas == 1)
            cfg__diag(c, CFG_SEV_ERROR, at(r, r->replicas_pos), path, "1",
                      "NVIDIA's plugin refuses replicas: 1 (\"number of replicas must be >= "
                      "2\"); remove the entry to leave the resource unshared");
        snprintf(shared, sizeof(shared), "%s.shared", r->name ? r->name : "");
        entry_path(path, sizeof(path), cfg, i, "rename");
        if (r->rename && !(cfg->sharing.rename_by_default && str_eq(r->rename, shared)))
            cfg__diag(c, CFG_SEV_ERROR, at(r, r->rename_pos), path, r->rename,
                      "NVIDIA's plugin ignores rename (\"Setting the 'rename' field in "
                      "sharing.%s.resources is not yet supported in the config. "
                      "Ignoring...\") and would advertise '%s'; remove it",
                      block, cfg->sharing.rename_by_default ? shared : r->name);
        entry_path(path, sizeof(path), cfg, i, "devices");
        if (r->devices_kind != CFG_DEVICES_ALL)
            cfg__diag(c, CFG_SEV_ERROR, at(r, r->devices_pos), path, NULL,
                      "NVIDIA's plugin shares every device of '%s' (\"Customizing the "
                      "'devices' field in sharing.%s.resources is not yet supported in the "
                      "config. Ignoring...\"); remove devices, or keep gpuslice",
                      r->name ? r->name : "", block);
        entry_path(path, sizeof(path), cfg, i, limit);
        if (limit && mode->client_limits)
            cfg__diag(c, CFG_SEV_ERROR, at(r, r->limit_pos), path, NULL,
                      "%s is a gpuslice extension of the v1 schema and "
                      "--strict-nvidia-schema is set; remove it (NVIDIA's plugin gives every "
                      "client memory/replicas and 100/replicas threads)",
                      limit);
    }
}

void cfg__validate_overlaid(struct cfg__ctx *c, const struct cfg_overrides *o)
{
    const struct cfg_config *cfg = c->cfg;
    const struct cfg_sharing_mode *mode = cfg_sharing_mode(cfg->sharing_strategy);
    const char *mig_src = o ? cfg_overrides_get(o, CFG_OPT_MIG_STRATEGY) : NULL;
    const char *strict = o ? cfg_overrides_get(o, CFG_OPT_STRICT_NVIDIA_SCHEMA) : NULL;
    struct cfg_pos none = {0, 0};

    /* the MPS limit extension: modes with per-client limits only */
    for (size_t i = 0; i < cfg->sharing.n_resources; i++) {
        const struct cfg_replicated_resource *r = &cfg->sharing.resources[i];
        const char *field = mps_limit_field(r);
        char path[96];
        if (!field || mode->client_limits)
            continue;
        entry_path(path, sizeof(path), cfg, i, field);
        cfg__diag(c, CFG_SEV_ERROR, r->pos, path, NULL,
                  "%s limits MPS clients; %s has no per-client limits (use "
                  "sharing.%s, or remove it)",
                  field, mode->title, suggest_mode(has_client_limits));
    }
    if (strict && strcmp(strict, "true") == 0)
        check_nvidia_schema(c);
    if (!mode->on_mig && cfg->flags.mig_strategy == CFG_MIG_MIXED)
        cfg__diag(c, CFG_SEV_ERROR, mig_src ? none : c->pos_mig_strategy, "flags.migStrategy",
                  "mixed",
                  "migStrategy 'mixed'%s%s is not supported with %s; use 'none' or "
                  "'single', or share with sharing.%s",
                  mig_src ? " set by " : "", mig_src ? o->v[CFG_OPT_MIG_STRATEGY].source : "",
                  mode->title, suggest_mode(shares_mig));
    if (mode->needs_mps_root && (!cfg->flags.mps_root || !*cfg->flags.mps_root))
        cfg__diag(c, CFG_SEV_ERROR, c->pos_sharing, "flags.mpsRoot", NULL,
                  "using MPS requires an MPS root; set flags.mpsRoot, --mps-root or MPS_ROOT "
                  "(the Helm chart uses /run/nvidia/mps)");
}

/* SPDX-License-Identifier: Apache-2.0 */
/* build.c: model_build(), from (inventory, config) to the resources the kubelet sees.
 * Steps: physical units per MIG strategy (facts §4) -> base resource names (patterns) ->
 * sharing rules (replicas, rename, device subsets) -> MPS checks (facts §5) -> resources
 * with their devices, then name checks and warnings. Pure: no I/O, no logging. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "model/internal.h"

#define MPS_MAX_CLIENTS_VOLTA 48u
#define MPS_MAX_CLIENTS_OLD 16u

/* A physical device that may be advertised: a whole GPU or a MIG device. */
struct unit {
    const struct inv_gpu *gpu;
    const struct inv_mig_device *mig; /* NULL for a whole GPU */
    char *base_name;                  /* resource before sharing (owned) */
    char *out_name;                   /* resource after sharing (owned) */
    long rule;                        /* sharing rule that claimed it, -1 none */
    unsigned replicas;
    bool dropped; /* invalid, left out (keep_valid) */
};

struct builder {
    const struct inv_inventory *inv;
    const struct cfg_config *cfg;
    bool keep_valid;
    struct model *m;
    struct unit *units;
    size_t n_units, alloc_units;
};

/* The rules' block: sharing.<key> (rules are read only when some mode is set). */
static const char *sharing_key(const struct cfg_config *cfg)
{
    const struct cfg_sharing_mode *m = cfg_sharing_mode(cfg->sharing_strategy);
    return m->config_key ? m->config_key : m->name;
}

static void unit_describe(const struct unit *u, char *buf, size_t size)
{
    struct strbuf sb = STRBUF_INIT;

    if (u->mig)
        strbuf_printf(&sb, "MIG device %u:%u (%s, %s)", u->gpu->index, u->mig->index,
                      u->mig->profile, u->mig->uuid);
    else
        strbuf_printf(&sb, "GPU %u (%s, %s)", u->gpu->index, u->gpu->name, u->gpu->uuid);
    str_copy(buf, strbuf_str(&sb), size);
    strbuf_release(&sb);
}

static void rule_describe(const struct cfg_config *cfg, size_t i, char *buf, size_t size)
{
    struct strbuf sb = STRBUF_INIT;
    const struct cfg_replicated_resource *rr = &cfg->sharing.resources[i];

    strbuf_printf(&sb, "sharing.%s.resources[%zu] (\"%s\"", sharing_key(cfg), i,
                  rr->name ? rr->name : "");
    if (rr->pos.line)
        strbuf_printf(&sb, " at line %u", rr->pos.line);
    strbuf_puts(&sb, ")");
    str_copy(buf, strbuf_str(&sb), size);
    strbuf_release(&sb);
}

static int add_unit(struct builder *b, const struct inv_gpu *gpu, const struct inv_mig_device *mig)
{
    int r = model__grow((void **)&b->units, &b->alloc_units, b->n_units, sizeof(*b->units));
    if (r < 0)
        return r;
    b->units[b->n_units++] = (struct unit){.gpu = gpu, .mig = mig, .rule = -1, .replicas = 1};
    return 0;
}

static int add_whole_gpus(struct builder *b, bool only_mig_disabled)
{
    for (size_t i = 0; i < b->inv->n_gpus; i++) {
        const struct inv_gpu *g = &b->inv->gpus[i];
        if (only_mig_disabled && g->mig_enabled)
            continue;
        int r = add_unit(b, g, NULL);
        if (r < 0)
            return r;
    }
    return 0;
}

static int add_migs(struct builder *b, const struct inv_gpu *g, const char *only_profile)
{
    for (size_t j = 0; j < g->n_migs; j++) {
        if (only_profile && strcmp(g->migs[j].profile, only_profile) != 0)
            continue;
        int r = add_unit(b, g, &g->migs[j]);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The profile most MIG devices have (ties: the first seen): what keep_valid keeps. Also
 * counts the distinct profiles on the node. */
static int dominant_profile(const struct inv_inventory *inv, const char **ret_profile,
                            size_t *ret_n_profiles)
{
    const char **names = NULL;
    size_t *counts = NULL, n = 0, total = 0, best = 0;
    int r = -ENOMEM;

    for (size_t i = 0; i < inv->n_gpus; i++)
        total += inv->gpus[i].n_migs;
    names = calloc(total + 1, sizeof(*names));
    counts = calloc(total + 1, sizeof(*counts));
    if (!names || !counts)
        goto out;
    for (size_t i = 0; i < inv->n_gpus; i++)
        for (size_t j = 0; j < inv->gpus[i].n_migs; j++) {
            const char *p = inv->gpus[i].migs[j].profile;
            size_t k = 0;
            while (k < n && strcmp(names[k], p) != 0)
                k++;
            if (k == n)
                names[n++] = p;
            counts[k]++;
        }
    for (size_t k = 1; k < n; k++)
        if (counts[k] > counts[best])
            best = k;
    *ret_profile = n ? names[best] : NULL;
    *ret_n_profiles = n;
    r = 0;
out:
    free(names);
    free(counts);
    return r;
}

/* migStrategy=single: every GPU MIG-enabled with one profile, or none MIG-enabled. */
static int collect_single(struct builder *b)
{
    const struct inv_inventory *inv = b->inv;
    size_t n_mig = 0, n_profiles = 0;
    const char *keep_profile = NULL;
    int r;

    for (size_t i = 0; i < inv->n_gpus; i++)
        n_mig += inv->gpus[i].mig_enabled;
    if (n_mig == 0)
        return add_whole_gpus(b, false);
    if (n_mig != inv->n_gpus) {
        r = model__diag(b->m, MODEL_DIAG_ERROR,
                        "all devices on the node must be configured "
                        "with the same migEnabled value (migStrategy single: %zu of %zu GPUs "
                        "have MIG enabled; enable MIG on all of them or use migStrategy mixed)",
                        n_mig, inv->n_gpus);
        if (r < 0)
            return r;
    }
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        if (g->mig_enabled && g->n_migs == 0) {
            r = model__diag(b->m, MODEL_DIAG_ERROR,
                            "device %u has no MIG devices configured "
                            "(migStrategy single; create MIG devices on GPU %u or disable MIG)",
                            g->index, g->index);
            if (r < 0)
                return r;
        }
    }
    r = dominant_profile(inv, &keep_profile, &n_profiles);
    if (r < 0)
        return r;
    if (n_profiles > 1) {
        r = model__diag(b->m, MODEL_DIAG_ERROR,
                        "invalid MIG configuration: more than one MIG "
                        "device type present on node (migStrategy single needs one profile on "
                        "every GPU; use migStrategy mixed)");
        if (r < 0)
            return r;
    }
    if (b->m->n_errors > 0 && !b->keep_valid)
        return 0;
    /* the valid part: the MIG devices of the dominant profile */
    for (size_t i = 0; i < inv->n_gpus; i++) {
        if (!inv->gpus[i].mig_enabled)
            continue;
        r = add_migs(b, &inv->gpus[i], keep_profile);
        if (r < 0)
            return r;
    }
    return 0;
}

static int collect_units(struct builder *b)
{
    int r;

    switch (b->cfg->flags.mig_strategy) {
    case CFG_MIG_NONE:
        /* NVIDIA exposes MIG-enabled GPUs whole under `none` (facts §11.7) */
        return add_whole_gpus(b, false);
    case CFG_MIG_SINGLE:
        return collect_single(b);
    case CFG_MIG_MIXED:
        for (size_t i = 0; i < b->inv->n_gpus; i++) {
            const struct inv_gpu *g = &b->inv->gpus[i];
            if (!g->mig_enabled) {
                r = add_unit(b, g, NULL);
            } else if (g->n_migs == 0) {
                r = model__diag(b->m, MODEL_DIAG_WARNING,
                                "GPU %u (%s) has MIG enabled but no "
                                "MIG devices; it is not advertised",
                                g->index, g->name);
            } else {
                r = add_migs(b, g, NULL);
            }
            if (r < 0)
                return r;
        }
        return 0;
    }
    return error_set(NULL, -EINVAL, "unknown MIG strategy");
}

static const char *match_patterns(const struct cfg_resource_pattern *pats, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (pats[i].pattern && pats[i].name && model__glob_match(pats[i].pattern, s))
            return pats[i].name;
    return NULL;
}

/* resources.gpus[] matches the product name, resources.mig[] the profile; the first match
 * wins and NVIDIA's defaults apply to what no pattern matches. */
static int assign_base_names(struct builder *b)
{
    const struct cfg_config *cfg = b->cfg;
    int r;

    for (size_t i = 0; i < b->n_units; i++) {
        struct unit *u = &b->units[i];
        const char *name;
        char *owned = NULL;

        if (!u->mig) {
            name = match_patterns(cfg->gpus, cfg->n_gpus, u->gpu->name);
            if (!name)
                name = "nvidia.com/gpu";
        } else {
            name = match_patterns(cfg->mig, cfg->n_mig, u->mig->profile);
            if (!name && cfg->flags.mig_strategy == CFG_MIG_SINGLE)
                name = "nvidia.com/gpu";
            if (!name && model__profile_is_subslice(u->mig->profile)) {
                r = model__diag(b->m, MODEL_DIAG_ERROR,
                                "MIG profile '%s' does not match any "
                                "resource patterns (MIG device %u:%u; add a resources.mig "
                                "pattern for it or recreate it as a full GPU instance)",
                                u->mig->profile, u->gpu->index, u->mig->index);
                if (r < 0)
                    return r;
                u->dropped = true;
                continue;
            }
            if (!name) {
                owned = model_mig_resource_name(u->mig->profile);
                if (!owned)
                    return -ENOMEM;
                name = owned;
            }
        }
        u->base_name = owned ? owned : strdup(name);
        if (!u->base_name)
            return -ENOMEM;
    }
    return 0;
}

static bool ref_matches(const struct cfg_device_ref *ref, const struct unit *u)
{
    struct strbuf legacy = STRBUF_INIT;
    bool eq;

    switch (ref->kind) {
    case CFG_DEVREF_GPU_INDEX:
        return u->gpu->index == ref->gpu_index;
    case CFG_DEVREF_MIG_INDEX:
        return u->mig && u->gpu->index == ref->gpu_index && u->mig->index == ref->mig_index;
    case CFG_DEVREF_GPU_UUID:
        return ref->uuid && strcmp(u->gpu->uuid, ref->uuid) == 0;
    case CFG_DEVREF_MIG_UUID:
        if (!u->mig || !ref->uuid)
            return false;
        if (strcmp(u->mig->uuid, ref->uuid) == 0)
            return true;
        /* legacy form: MIG-GPU-<uuid>/<gi>/<ci> */
        eq = strbuf_printf(&legacy, "MIG-%s/%u/%u", u->gpu->uuid, u->mig->gi_id, u->mig->ci_id) ==
                 0 &&
             strcmp(strbuf_str(&legacy), ref->uuid) == 0;
        strbuf_release(&legacy);
        return eq;
    }
    return false;
}

static void ref_describe(const struct cfg_device_ref *ref, char *buf, size_t size)
{
    struct strbuf sb = STRBUF_INIT;

    switch (ref->kind) {
    case CFG_DEVREF_GPU_INDEX:
        strbuf_printf(&sb, "GPU %u", ref->gpu_index);
        break;
    case CFG_DEVREF_MIG_INDEX:
        strbuf_printf(&sb, "MIG device %u:%u", ref->gpu_index, ref->mig_index);
        break;
    default:
        strbuf_printf(&sb, "device %s", ref->uuid ? ref->uuid : "(none)");
        break;
    }
    str_copy(buf, strbuf_str(&sb), size);
    strbuf_release(&sb);
}

static int claim(struct builder *b, size_t rule, struct unit *u)
{
    const struct cfg_replicated_resource *rr = &b->cfg->sharing.resources[rule];
    char dev[256], first[256], second[256];
    struct strbuf sb = STRBUF_INIT;
    int r = 0;

    if (u->rule == (long)rule)
        return 0;
    if (u->rule >= 0) {
        unit_describe(u, dev, sizeof(dev));
        rule_describe(b->cfg, (size_t)u->rule, first, sizeof(first));
        rule_describe(b->cfg, rule, second, sizeof(second));
        return model__diag(b->m, MODEL_DIAG_ERROR,
                           "%s is selected by both %s and %s; a device "
                           "can belong to only one resource: narrow the 'devices' of one rule",
                           dev, first, second);
    }
    u->rule = (long)rule;
    u->replicas = rr->replicas ? rr->replicas : 1;
    free(u->out_name);
    u->out_name = NULL;
    if (rr->rename)
        u->out_name = strdup(rr->rename);
    else if (u->replicas > 1 && b->cfg->sharing.rename_by_default) {
        if (strbuf_printf(&sb, "%s.shared", rr->name) == 0)
            u->out_name = strbuf_take(&sb);
    } else {
        u->out_name = strdup(rr->name);
    }
    if (!u->out_name)
        r = -ENOMEM;
    strbuf_release(&sb);
    return r;
}

/* Units a rule's `devices: [...]` list selects; refs this node cannot honour are warnings,
 * because one config is usually shared by many different nodes. */
static int select_list(struct builder *b, size_t rule)
{
    const struct cfg_replicated_resource *rr = &b->cfg->sharing.resources[rule];
    char rdesc[256], ddesc[128];
    int r;

    for (size_t k = 0; k < rr->n_devices; k++) {
        const struct cfg_device_ref *ref = &rr->devices[k];
        bool found = false, elsewhere = false;
        const char *other = NULL;

        for (size_t i = 0; i < b->n_units; i++) {
            struct unit *u = &b->units[i];
            if (u->dropped || !ref_matches(ref, u))
                continue;
            if (strcmp(u->base_name, rr->name) != 0) {
                elsewhere = true;
                other = u->base_name;
                continue;
            }
            found = true;
            r = claim(b, rule, u);
            if (r < 0)
                return r;
        }
        if (found)
            continue;
        rule_describe(b->cfg, rule, rdesc, sizeof(rdesc));
        ref_describe(ref, ddesc, sizeof(ddesc));
        if (elsewhere)
            r = model__diag(b->m, MODEL_DIAG_WARNING,
                            "%s: %s is advertised as \"%s\" on this "
                            "node, not \"%s\", ignoring",
                            rdesc, ddesc, other, rr->name);
        else
            r = model__diag(b->m, MODEL_DIAG_WARNING, "%s: this node has no %s, ignoring", rdesc,
                            ddesc);
        if (r < 0)
            return r;
    }
    return 0;
}

static int apply_sharing(struct builder *b)
{
    const struct cfg_sharing *sh = &b->cfg->sharing;
    char rdesc[256];
    int r;

    if (!cfg_sharing_mode_shares(cfg_sharing_mode(b->cfg->sharing_strategy)))
        return 0;
    for (size_t i = 0; i < sh->n_resources; i++) {
        const struct cfg_replicated_resource *rr = &sh->resources[i];
        size_t n_match = 0, n_taken = 0;

        if (!rr->name)
            continue;
        rule_describe(b->cfg, i, rdesc, sizeof(rdesc));
        if (rr->replicas > MODEL_MAX_REPLICAS) {
            r = model__diag(b->m, MODEL_DIAG_ERROR,
                            "%s: %u replicas is more than the %u this "
                            "plugin serves per device",
                            rdesc, rr->replicas, MODEL_MAX_REPLICAS);
            if (r < 0)
                return r;
            continue;
        }
        for (size_t j = 0; j < b->n_units; j++)
            n_match += !b->units[j].dropped && str_eq(b->units[j].base_name, rr->name);
        if (n_match == 0) {
            r = model__diag(b->m, MODEL_DIAG_WARNING,
                            "%s: no device on this node is "
                            "advertised as \"%s\", ignoring",
                            rdesc, rr->name);
            if (r < 0)
                return r;
            continue;
        }
        if (rr->devices_kind == CFG_DEVICES_LIST) {
            r = select_list(b, i);
            if (r < 0)
                return r;
            continue;
        }
        for (size_t j = 0; j < b->n_units; j++) {
            struct unit *u = &b->units[j];
            if (u->dropped || !str_eq(u->base_name, rr->name))
                continue;
            if (rr->devices_kind == CFG_DEVICES_COUNT && n_taken >= rr->devices_count)
                break;
            n_taken++;
            r = claim(b, i, u);
            if (r < 0)
                return r;
        }
        if (rr->devices_kind == CFG_DEVICES_COUNT && n_taken < rr->devices_count) {
            r = model__diag(b->m, MODEL_DIAG_WARNING,
                            "%s: asks for %u devices but this node "
                            "has %zu, sharing those",
                            rdesc, rr->devices_count, n_taken);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

static unsigned mps_max_clients(const struct inv_gpu *g)
{
    bool volta_mps = g->cc_major > 7 || (g->cc_major == 7 && g->cc_minor >= 5);
    return volta_mps ? MPS_MAX_CLIENTS_VOLTA : MPS_MAX_CLIENTS_OLD;
}

/* The mode's rules over the shared units, in NVIDIA's words for MPS (facts §2.2/§5.2): no
 * mixed, mpsRoot required, no MIG, replicas within the client limit. */
static int check_mode(struct builder *b)
{
    const struct cfg_config *cfg = b->cfg;
    const struct cfg_sharing_mode *mode = cfg_sharing_mode(cfg->sharing_strategy);
    bool any = false, global_err = false;
    char dev[256];
    int r;

    if (mode->on_mig && !mode->needs_mps_root && !mode->replicas_by_client_limit)
        return 0;
    for (size_t i = 0; i < b->n_units; i++)
        any |= !b->units[i].dropped && b->units[i].replicas > 1;
    if (!any)
        return 0;
    if (!mode->on_mig && cfg->flags.mig_strategy == CFG_MIG_MIXED) {
        r = model__diag(b->m, MODEL_DIAG_ERROR,
                        "using --mig-strategy=mixed is not supported "
                        "with %s",
                        mode->title);
        if (r < 0)
            return r;
        global_err = true;
    }
    if (mode->needs_mps_root && (!cfg->flags.mps_root || !*cfg->flags.mps_root)) {
        r = model__diag(b->m, MODEL_DIAG_ERROR,
                        "using %s requires --mps-root to be specified "
                        "(flags.mpsRoot or MPS_ROOT, usually /run/nvidia/mps)",
                        mode->title);
        if (r < 0)
            return r;
        global_err = true;
    }
    for (size_t i = 0; i < b->n_units; i++) {
        struct unit *u = &b->units[i];
        unsigned max;
        if (u->dropped || u->replicas <= 1)
            continue;
        if (global_err) {
            u->dropped = true;
            continue;
        }
        unit_describe(u, dev, sizeof(dev));
        max = u->mig || !mode->replicas_by_client_limit ? UINT_MAX : mps_max_clients(u->gpu);
        if (u->mig && !mode->on_mig) {
            r = model__diag(b->m, MODEL_DIAG_ERROR,
                            "sharing using %s is not supported for "
                            "MIG devices (%s)",
                            mode->title, dev);
            u->dropped = true;
        } else if (u->replicas > max) {
            r = model__diag(b->m, MODEL_DIAG_ERROR,
                            "invalid device maximum allowed replicas "
                            "exceeded: %u > %u (%s, compute capability %d.%d)",
                            u->replicas, max, dev, u->gpu->cc_major, u->gpu->cc_minor);
            u->dropped = true;
        } else {
            r = 0;
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *unit_name(const struct unit *u)
{
    return u->out_name ? u->out_name : u->base_name;
}

/* The advertised ID is always UUID-based (NVIDIA's contract: "<uuid>" or "<uuid>::<n>", for
 * every --device-id-strategy), so replica IDs stay stable when GPUs are re-enumerated and the
 * kubelet's checkpoint survives a switch from NVIDIA's plugin. The strategy only decides
 * base_id, the value Allocate hands to the container runtime ("0", "0:1" for MIG). */
static int device_ids(const struct builder *b, const struct unit *u, unsigned replica,
                      struct model_device *d)
{
    const char *uuid = u->mig ? u->mig->uuid : u->gpu->uuid;
    struct strbuf sb = STRBUF_INIT;
    int r;

    if (b->cfg->flags.plugin.device_id_strategy == CFG_DEVICE_ID_INDEX)
        r = u->mig ? strbuf_printf(&sb, "%u:%u", u->gpu->index, u->mig->index)
                   : strbuf_printf(&sb, "%u", u->gpu->index);
    else
        r = strbuf_puts(&sb, uuid);
    if (r < 0)
        goto out;
    d->base_id = strbuf_take(&sb);
    r = u->replicas > 1 ? strbuf_printf(&sb, "%s::%u", uuid, replica) : strbuf_puts(&sb, uuid);
    if (r < 0)
        goto out;
    d->id = strbuf_take(&sb);
    if (!d->id || !d->base_id)
        r = -ENOMEM;
out:
    strbuf_release(&sb);
    return r;
}

static void device_fill(const struct unit *u, unsigned replica, struct model_device *d)
{
    d->gpu_index = u->gpu->index;
    d->mig_index = u->mig ? (int)u->mig->index : -1;
    d->replica = replica;
    d->replicas = u->replicas;
    d->healthy = true;
    d->numa_node = u->gpu->numa_node;
    str_copy(d->uuid, u->mig ? u->mig->uuid : u->gpu->uuid, sizeof(d->uuid));
    str_copy(d->gpu_uuid, u->gpu->uuid, sizeof(d->gpu_uuid));
    d->minor = u->gpu->minor;
    d->gi_id = u->mig ? u->mig->gi_id : INV_ID_NONE;
    d->ci_id = u->mig ? u->mig->ci_id : INV_ID_NONE;
    str_copy(d->profile, u->mig ? u->mig->profile : "", sizeof(d->profile));
    d->memory_mib = u->mig ? u->mig->memory_mib : u->gpu->memory_mib;
    d->memory_unknown = !u->mig && u->gpu->memory_unknown;
    d->cc_major = u->gpu->cc_major;
    d->cc_minor = u->gpu->cc_minor;
}

static int cmp_dev_id(const void *a, const void *b, void *arg)
{
    const struct model_resource *res = arg;
    return strcmp(res->devices[*(const size_t *)a].id, res->devices[*(const size_t *)b].id);
}

/* Sorted index for model_resource_find_device(); duplicate IDs (two GPUs with one uuid in a
 * broken inventory) would make lookups ambiguous, so they are refused. */
int model__index_by_id(struct model_resource *res)
{
    free(res->by_id);
    res->by_id = calloc(res->n_devices ? res->n_devices : 1, sizeof(*res->by_id));
    if (!res->by_id)
        return -ENOMEM;
    for (size_t i = 0; i < res->n_devices; i++)
        res->by_id[i] = i;
    qsort_r(res->by_id, res->n_devices, sizeof(*res->by_id), cmp_dev_id, res);
    for (size_t i = 1; i < res->n_devices; i++)
        if (strcmp(res->devices[res->by_id[i - 1]].id, res->devices[res->by_id[i]].id) == 0)
            return -ENOTUNIQ;
    return 0;
}

/* MPS on a GPU whose memory NVML does not report (unified memory, GB10): an equal share
 * of an unknown size cannot be computed, so the config must name the limit; a limit it
 * names is applied as given, its fit unchecked. NVIDIA's control daemon would start such a
 * GPU without any pinned-memory limit. */
static int mps_unknown_memory(const struct builder *b, const char *name, const struct unit *u,
                              const struct model_mps_limit *l)
{
    char dev[256];

    unit_describe(u, dev, sizeof(dev));
    if (l->pinned_memory_limit_mib == 0)
        return model__diag(b->m, MODEL_DIAG_ERROR,
                           "%s: %s does not report its memory (unified memory), so MPS cannot "
                           "give each of its %u replicas an equal share; set memoryLimit for "
                           "%s in sharing.mps.resources",
                           name, dev, u->replicas, name);
    return model__diag(b->m, MODEL_DIAG_WARNING,
                       "%s: %s does not report its memory (unified memory); memoryLimit %llu MiB "
                       "x %u replicas is applied unchecked",
                       name, dev, (unsigned long long)l->pinned_memory_limit_mib, u->replicas);
}

static int fill_resource(const struct builder *b, const char *name, struct model_resource *res)
{
    size_t n_dev = 0, n_phys = 0;
    int r;

    res->name = strdup(name);
    res->socket_name = model__socket_name(name);
    if (!res->name || !res->socket_name)
        return -ENOMEM;
    for (size_t i = 0; i < b->n_units; i++) {
        const struct unit *u = &b->units[i];
        if (u->dropped || strcmp(unit_name(u), name) != 0)
            continue;
        n_dev += u->replicas;
        n_phys++;
    }
    if (n_dev > MODEL_MAX_DEVICES)
        return -E2BIG;
    res->devices = calloc(n_dev ? n_dev : 1, sizeof(*res->devices));
    if (!res->devices)
        return -ENOMEM;
    if (cfg_sharing_mode(b->cfg->sharing_strategy)->control_daemon) {
        res->mps_limits = calloc(n_phys ? n_phys : 1, sizeof(*res->mps_limits));
        if (!res->mps_limits)
            return -ENOMEM;
    }
    res->fail_requests_greater_than_one = b->cfg->sharing.fail_requests_greater_than_one;
    for (size_t i = 0; i < b->n_units; i++) {
        const struct unit *u = &b->units[i];
        if (u->dropped || strcmp(unit_name(u), name) != 0)
            continue;
        if (res->n_devices > 0 && u->replicas != res->replicas)
            res->mixed_replicas = true;
        if (u->replicas > res->replicas)
            res->replicas = u->replicas;
        res->is_mig |= u->mig != NULL;
        if (res->mps_limits && u->replicas > 1) {
            const struct cfg_replicated_resource *rule =
                u->rule >= 0 ? &b->cfg->sharing.resources[u->rule] : NULL;
            struct model_mps_limit *l = &res->mps_limits[res->n_mps_limits++];
            l->gpu_index = u->gpu->index;
            str_copy(l->uuid, u->gpu->uuid, sizeof(l->uuid));
            /* NVIDIA's equal shares, unless the config gives per-client limits */
            l->pinned_memory_limit_mib = rule && rule->memory_limit_mib
                                             ? rule->memory_limit_mib
                                             : u->gpu->memory_mib / u->replicas;
            l->active_thread_percentage =
                rule && rule->thread_percentage ? rule->thread_percentage : 100 / u->replicas;
            if (u->gpu->memory_unknown) {
                r = mps_unknown_memory(b, name, u, l);
                if (r < 0)
                    return r;
            } else if (l->pinned_memory_limit_mib * u->replicas > u->gpu->memory_mib) {
                r = model__diag(b->m, MODEL_DIAG_ERROR,
                                "%s: memoryLimit %llu MiB x %u replicas does not fit GPU %u "
                                "(%s, %llu MiB); lower memoryLimit to at most %llu MiB or the "
                                "replicas",
                                name, (unsigned long long)l->pinned_memory_limit_mib, u->replicas,
                                u->gpu->index, u->gpu->name, (unsigned long long)u->gpu->memory_mib,
                                (unsigned long long)(u->gpu->memory_mib / u->replicas));
                if (r < 0)
                    return r;
            }
        }
        for (unsigned k = 0; k < u->replicas; k++) {
            struct model_device *d = &res->devices[res->n_devices++];
            device_fill(u, k, d);
            r = device_ids(b, u, k, d);
            if (r < 0)
                return r;
        }
    }
    if (res->replicas == 0)
        res->replicas = 1;
    if (res->replicas > 1)
        res->sharing = b->cfg->sharing_strategy;
    res->mode = cfg_sharing_mode(res->sharing);
    return model__index_by_id(res);
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 128) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t decimal_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Upper bound of the encoded ListAndWatchResponse of a resource (all devices Unhealthy,
 * with topology): the kubelet's gRPC client refuses messages over 4 MiB. */
static uint64_t list_and_watch_bytes(const struct builder *b, const char *name)
{
    uint64_t total = 0;

    for (size_t i = 0; i < b->n_units; i++) {
        const struct unit *u = &b->units[i];
        size_t id_len;
        if (u->dropped || strcmp(unit_name(u), name) != 0)
            continue;
        id_len = strlen(u->mig ? u->mig->uuid : u->gpu->uuid); /* IDs are always UUIDs */
        for (unsigned k = 0; k < u->replicas; k++) {
            uint64_t idk = id_len + (u->replicas > 1 ? 2 + decimal_len(k) : 0);
            uint64_t dev = 1 + varint_len(idk) + idk + 2 + strlen(MODEL_UNHEALTHY) + 6;
            total += 1 + varint_len(dev) + dev;
        }
    }
    return total;
}

static void drop_name(struct builder *b, const char *name)
{
    for (size_t k = 0; k < b->n_units; k++)
        if (!b->units[k].dropped && strcmp(unit_name(&b->units[k]), name) == 0)
            b->units[k].dropped = true;
}

/* Problems that would make the kubelet refuse a resource: its name, or a device list too
 * large for one ListAndWatch message. Returns 0 when fine, 1 when reported, <0 on ENOMEM. */
static int check_resource(struct builder *b, const char *name)
{
    struct error nerr = {0};
    uint64_t bytes;

    if (!model_resource_name_valid(name, &nerr))
        return model__diag(b->m, MODEL_DIAG_ERROR,
                           "resource name \"%s\" would be refused by "
                           "the kubelet: %s",
                           name, nerr.msg) < 0
                   ? -ENOMEM
                   : 1;
    bytes = list_and_watch_bytes(b, name);
    if (bytes > MODEL_LIST_AND_WATCH_MAX_BYTES)
        return model__diag(b->m, MODEL_DIAG_ERROR,
                           "\"%s\" has too many devices: its device "
                           "list takes up to %llu bytes, over the %u the kubelet accepts in one "
                           "message; lower the replicas or split it with a rename",
                           name, (unsigned long long)bytes, MODEL_LIST_AND_WATCH_MAX_BYTES) < 0
                   ? -ENOMEM
                   : 1;
    return 0;
}

/* Groups units by final name, sorted by name; resources the kubelet would refuse are
 * errors (and left out with keep_valid). */
static int emit_resources(struct builder *b)
{
    const char **names = NULL;
    size_t n_names = 0;
    int r = 0;

    names = calloc(b->n_units ? b->n_units : 1, sizeof(*names));
    if (!names)
        return -ENOMEM;
    for (size_t i = 0; i < b->n_units; i++) {
        const struct unit *u = &b->units[i];
        bool seen = false;
        if (u->dropped)
            continue;
        for (size_t k = 0; k < n_names && !seen; k++)
            seen = strcmp(names[k], unit_name(u)) == 0;
        if (seen)
            continue;
        r = check_resource(b, unit_name(u));
        if (r < 0)
            goto out;
        if (r > 0) {
            drop_name(b, unit_name(u));
            r = 0;
            continue;
        }
        names[n_names++] = unit_name(u);
    }
    qsort(names, n_names, sizeof(*names), cmp_str_ptr);
    b->m->resources = calloc(n_names ? n_names : 1, sizeof(*b->m->resources));
    if (!b->m->resources) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t k = 0; k < n_names; k++) {
        b->m->n_resources++;
        r = fill_resource(b, names[k], &b->m->resources[k]);
        if (r < 0)
            goto out;
    }
out:
    free(names);
    return r;
}

static const struct inv_process *largest_process(const struct unit *u)
{
    const struct inv_process *best = NULL;

    for (size_t i = 0; i < u->gpu->n_procs; i++) {
        const struct inv_process *p = &u->gpu->procs[i];
        if (u->mig && (p->gi_id != u->mig->gi_id || p->ci_id != u->mig->ci_id))
            continue;
        if (!best || p->used_mib > best->used_mib)
            best = p;
    }
    return best;
}

/* Legal but likely wrong: say so in the plan. */
static int add_warnings(struct builder *b)
{
    const struct cfg_sharing *sh = &b->cfg->sharing;
    bool any_shared = false, hidden = false;
    char dev[256];
    int r;

    for (size_t i = 0; i < b->n_units; i++) {
        const struct unit *u = &b->units[i];
        const struct inv_process *p;
        uint64_t mem, per;
        if (u->dropped || u->replicas <= 1)
            continue;
        any_shared = true;
        if (u->rule >= 0 && !sh->resources[u->rule].rename &&
            strcmp(unit_name(u), u->base_name) == 0)
            hidden = true;
        mem = u->mig ? u->mig->memory_mib : u->gpu->memory_mib;
        per = mem / u->replicas;
        p = largest_process(u);
        /* unknown memory (unified): no share to compare the process with */
        if (p && p->used_mib > per && (u->mig || !u->gpu->memory_unknown)) {
            unit_describe(u, dev, sizeof(dev));
            r = model__diag(b->m, MODEL_DIAG_WARNING,
                            "%s: %u replicas leave ~%llu MiB each, "
                            "less than the %llu MiB process %u uses now; lower the replicas",
                            dev, u->replicas, (unsigned long long)per,
                            (unsigned long long)p->used_mib, p->pid);
            if (r < 0)
                return r;
        }
    }
    if (!any_shared)
        return 0;
    if (cfg_sharing_mode(b->cfg->sharing_strategy)->warn_fail_requests_false &&
        !sh->fail_requests_greater_than_one) {
        r = model__diag(b->m, MODEL_DIAG_WARNING,
                        "failRequestsGreaterThanOne is false: a pod "
                        "asking for N shared replicas gets access to up to N GPUs, not N times "
                        "the share of one; set it to true");
        if (r < 0)
            return r;
    }
    if (hidden && !sh->rename_by_default) {
        r = model__diag(b->m, MODEL_DIAG_WARNING,
                        "renameByDefault is false: shared replicas "
                        "are advertised under the whole-GPU name, so pods cannot tell a share "
                        "from a GPU; set renameByDefault: true (<name>.shared) or a rename");
        if (r < 0)
            return r;
    }
    for (size_t k = 0; k < b->m->n_resources; k++) {
        const struct model_resource *res = &b->m->resources[k];
        if (!res->mixed_replicas)
            continue;
        r = model__diag(b->m, MODEL_DIAG_WARNING,
                        "\"%s\" mixes devices with different replica "
                        "counts (up to %u); pods cannot choose which they get, use a rename",
                        res->name, res->replicas);
        if (r < 0)
            return r;
    }
    return 0;
}

static int copy_settings(const struct cfg_config *cfg, struct model_settings *s)
{
    const struct cfg_flags *f = &cfg->flags;
    const char *dev_root = f->nvidia_dev_root && *f->nvidia_dev_root         ? f->nvidia_dev_root
                           : f->nvidia_driver_root && *f->nvidia_driver_root ? f->nvidia_driver_root
                                                                             : "/";

    s->mig_strategy = f->mig_strategy;
    s->device_id_strategy = f->plugin.device_id_strategy;
    s->allocation_policy = f->plugin.shared_devices_allocation_policy;
    s->device_list_strategies =
        f->plugin.device_list_strategies ? f->plugin.device_list_strategies : CFG_LIST_ENVVAR;
    s->pass_device_specs = f->plugin.pass_device_specs;
    s->gdrcopy_enabled = f->gdrcopy_enabled;
    s->gds_enabled = f->gds_enabled;
    s->mofed_enabled = f->mofed_enabled;
    s->cdi_annotation_prefix =
        strdup(f->plugin.cdi_annotation_prefix ? f->plugin.cdi_annotation_prefix : "cdi.k8s.io/");
    s->dev_root = strdup(dev_root);
    s->mps_root = str_dup(f->mps_root && *f->mps_root ? f->mps_root : NULL);
    if (!s->cdi_annotation_prefix || !s->dev_root || (f->mps_root && *f->mps_root && !s->mps_root))
        return -ENOMEM;
    if (cfg->imex.n_channel_ids) {
        s->imex_channel_ids = calloc(cfg->imex.n_channel_ids, sizeof(unsigned));
        if (!s->imex_channel_ids)
            return -ENOMEM;
        memcpy(s->imex_channel_ids, cfg->imex.channel_ids,
               cfg->imex.n_channel_ids * sizeof(unsigned));
        s->n_imex_channel_ids = cfg->imex.n_channel_ids;
    }
    return 0;
}

static int first_error(const struct model *m, struct error *err)
{
    for (size_t i = 0; i < m->n_diags; i++) {
        if (m->diags[i].level != MODEL_DIAG_ERROR)
            continue;
        if (m->n_errors > 1)
            return error_set(err, -EINVAL, "%s (and %zu more errors)", m->diags[i].message,
                             m->n_errors - 1);
        return error_set(err, -EINVAL, "%s", m->diags[i].message);
    }
    return error_set(err, -EINVAL, "invalid model");
}

int model_build(const struct inv_inventory *inv, const struct cfg_config *cfg,
                const struct model_options *opts, struct model **ret_model, struct error *err)
{
    struct builder b = {.inv = inv, .cfg = cfg, .keep_valid = opts && opts->keep_valid};
    int r;

    if (!inv || !cfg || !ret_model)
        return error_set(err, -EINVAL, "model_build: missing inventory or config");
    b.m = calloc(1, sizeof(*b.m));
    if (!b.m) {
        r = -ENOMEM;
        goto out;
    }
    r = copy_settings(cfg, &b.m->settings);
    if (r < 0)
        goto out;
    r = collect_units(&b);
    if (r < 0)
        goto out;
    r = assign_base_names(&b);
    if (r < 0)
        goto out;
    r = apply_sharing(&b);
    if (r < 0)
        goto out;
    r = check_mode(&b);
    if (r < 0)
        goto out;
    if (b.m->n_errors > 0 && !b.keep_valid) {
        r = first_error(b.m, err);
        goto out;
    }
    r = emit_resources(&b);
    if (r < 0)
        goto out;
    if (b.m->n_errors > 0 && !b.keep_valid) {
        r = first_error(b.m, err);
        goto out;
    }
    r = add_warnings(&b);
    if (r < 0)
        goto out;
    if (inv->n_gpus > 0 && b.m->n_resources == 0) {
        r = model__diag(b.m, MODEL_DIAG_WARNING, "no device of this node is advertised");
        if (r < 0)
            goto out;
    }
    *ret_model = b.m;
    b.m = NULL;
out:
    if (r == -ENOMEM)
        error_set(err, r, "out of memory while building the resource model");
    else if (r == -ENOTUNIQ)
        error_set(err, r,
                  "two devices of the inventory have the same id; check the GPU and "
                  "MIG uuids the driver reports");
    else if (r == -E2BIG)
        error_set(err, r, "the config asks for more than %u devices in one resource",
                  MODEL_MAX_DEVICES);
    for (size_t i = 0; i < b.n_units; i++) {
        free(b.units[i].base_name);
        free(b.units[i].out_name);
    }
    free(b.units);
    model_free(b.m);
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* apply.c: a mig-parted config applied to a node, GPU by GPU. Unlike mig-parted, each GPU's
 * layout is planned first (exact planner, explicit placements, so a valid layout never
 * fails on creation order), only GPUs whose layout differs are touched, and the state of a
 * GPU is checkpointed before it is touched and restored if anything fails — a failed apply
 * never leaves a GPU with MIG on and no devices. Library gs_mig_apply (over gpu/). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mig/apply.h"

bool mig_state_want(const struct mig_gpu_model *m, const struct gpu_mig_state *s,
                    struct mig_want *ret)
{
    memset(ret, 0, sizeof(*ret));
    for (size_t k = 0; k < s->n_gis; k++) {
        const struct mig_profile *p = mig_profile_by_id(m, s->gis[k].profile_id);
        size_t i = p ? (size_t)(p - m->profiles) : MIG_MAX_PROFILES;
        if (!p || i >= MIG_MAX_PROFILES || s->gis[k].n_cis == 0)
            return false;
        for (size_t c = 0; c < s->gis[k].n_cis; c++) {
            unsigned size = s->gis[k].cis[c].size;
            if (size == p->compute_slices && s->gis[k].n_cis == 1)
                ret->counts[i]++;
            else if (size >= 1 && size < p->compute_slices && size < MIG_MAX_CI)
                ret->ci[i][size]++;
            else
                return false;
        }
    }
    return true;
}

int mig_node_plan(struct gpu_nvml *n, const struct mig_config_set *set, bool mode_only,
                  struct mig_node *ret, struct error *err)
{
    struct mig_node node = {0};
    unsigned count = 0;
    int r = gpu_mig_count(n, &count, err);

    if (r < 0)
        return r;
    if (count > MIG_NODE_MAX_GPUS)
        return error_set(err, -E2BIG, "%u GPUs: at most %d are handled", count, MIG_NODE_MAX_GPUS);
    node.n = count;
    for (unsigned i = 0; i < count; i++) {
        struct mig_gpu_plan *p = &node.gpus[i];
        const struct mig_config_entry *e;
        struct mig_want cur;
        struct strbuf why = STRBUF_INIT;

        r = gpu_mig_state_read(n, i, &p->cur, err);
        if (r < 0)
            return r;
        p->index = i;
        e = set ? mig_config_for_gpu(set, i, p->cur.pci_device_id) : NULL;
        if (!e)
            continue; /* no entry selects it: left alone */
        p->selected = true;
        p->enable = e->mig_enabled;
        if (!p->cur.capable) {
            if (e->mig_enabled && !e->all_devices)
                return error_set(err, -EINVAL,
                                 "GPU %u (%s): cannot set MIG mode on non "
                                 "MIG-capable GPU",
                                 i, p->cur.name);
            p->selected = false; /* "devices: all" skips GPUs without MIG, as mig-parted */
            continue;
        }
        p->model = mig_model_find(p->cur.name);
        if (!p->model) {
            char id[16];
            snprintf(id, sizeof(id), "0x%08X", p->cur.pci_device_id);
            p->model = mig_model_find(id);
        }
        if (!p->model)
            return error_set(err, -EOPNOTSUPP,
                             "GPU %u: %s (0x%08X) has no MIG profile table here; gpuslice "
                             "knows A100, A30, H100, H200, H20 and GH200",
                             i, p->cur.name, p->cur.pci_device_id);
        p->change_mode = p->cur.enabled != p->enable;
        if (!p->enable || mode_only) {
            p->change_layout = !p->enable && p->cur.n_gis > 0;
            continue;
        }
        r = mig_config_want(e, p->model, &p->want, err);
        if (r < 0) {
            error_prefix(err, "GPU %u", i);
            return r;
        }
        r = mig_plan_want(p->model, &p->want, &p->layout, &why);
        if (r < 0) {
            error_set(err, r, "GPU %u (%s): the layout does not fit: %s", i, p->model->name,
                      strbuf_str(&why));
            strbuf_release(&why);
            return r;
        }
        strbuf_release(&why);
        p->change_layout =
            !mig_state_want(p->model, &p->cur, &cur) || !mig_want_equal(&cur, &p->want);
        if (p->change_mode)
            p->change_layout = true;
    }
    *ret = node;
    return 0;
}

bool mig_node_applied(const struct mig_node *node, bool mode_only)
{
    for (size_t i = 0; i < node->n; i++) {
        const struct mig_gpu_plan *p = &node->gpus[i];
        if (p->selected && (p->change_mode || (!mode_only && p->change_layout)))
            return false;
    }
    return true;
}

/* The layout of p onto its GPU: mode, clear, create. No rollback here. */
static int apply_steps(struct gpu_nvml *n, const struct mig_gpu_plan *p, bool mode_only,
                       const struct gpu_mig_ops *ops, struct error *err)
{
    bool pending = false;
    int r = 0;

    if (p->cur.enabled && (p->change_layout || p->change_mode) && p->cur.n_gis > 0)
        r = gpu_mig_clear(n, p->index, &p->cur, ops, err);
    if (r == 0 && p->change_mode)
        r = gpu_mig_set_mode(n, p->index, p->enable, ops, &pending, err);
    if (r == 0 && pending)
        return error_set(err, -EINPROGRESS,
                         "GPU %u: the MIG mode change is pending until the GPU is reset (it is "
                         "in use, or the platform needs a reset); reset it (nvidia-smi -r) or "
                         "reboot, then apply again",
                         p->index);
    for (size_t k = 0; r == 0 && p->enable && !mode_only && k < p->layout.n; k++) {
        const struct mig_placement *it = &p->layout.items[k];
        struct gpu_mig_gi gi = {.profile_id = it->p->id, .start = it->start, .size = it->p->slices};
        for (size_t c = 0; c < it->n_ci && c < GPU_MIG_MAX_CI; c++)
            gi.cis[gi.n_cis++] =
                (struct gpu_mig_ci){.start = it->ci_start[c], .size = it->ci_size[c]};
        if (!it->n_ci) /* one compute instance spanning it */
            gi.cis[gi.n_cis++] = (struct gpu_mig_ci){.size = it->p->compute_slices};
        r = gpu_mig_create(n, p->index, &gi, ops, err);
    }
    return r;
}

int mig_apply_gpu(struct gpu_nvml *n, const struct mig_gpu_plan *p, bool mode_only,
                  const struct gpu_mig_ops *ops, struct error *err)
{
    struct error rb = {0};
    int r;

    if (!p->selected || !(p->change_mode || (!mode_only && p->change_layout)))
        return 0;
    /* p->cur is the checkpoint taken before anything is touched */
    r = apply_steps(n, p, mode_only, ops, err);
    if (r == 0 || (ops && ops->dry_run) || r == -EINPROGRESS)
        return r;
    if (gpu_mig_restore(n, &p->cur, NULL, &rb) < 0) {
        error_prefix(err, "GPU %u", p->index);
        size_t len = strlen(err->msg);
        snprintf(err->msg + len, sizeof(err->msg) - len,
                 "; restoring the previous layout failed too: %s", rb.msg);
        return r;
    }
    error_prefix(err, "GPU %u", p->index);
    size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof(err->msg) - len,
             "; the previous layout was restored (%zu GPU instance%s)", p->cur.n_gis,
             p->cur.n_gis == 1 ? "" : "s");
    return r;
}

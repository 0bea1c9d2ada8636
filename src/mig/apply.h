/* SPDX-License-Identifier: Apache-2.0 */
/* apply.h: a mig-parted config set applied to this node through NVML (library
 * gs_mig_apply, over gpu/): per GPU a plan (planned placements, what changes), then an apply
 * that touches only the GPUs that change, with explicit placements, and restores a GPU's
 * previous state when anything fails on it. */
#ifndef GS_MIG_APPLY_H
#define GS_MIG_APPLY_H

#include "gpu/gpu.h"
#include "mig/config.h"

#define MIG_NODE_MAX_GPUS 64

struct mig_gpu_plan {
    unsigned index;
    bool selected; /* an entry of the config decides this GPU (and it can do MIG) */
    const struct mig_gpu_model *model;
    bool enable;
    struct mig_want want;     /* what the config asks of this GPU */
    struct mig_layout layout; /* planned placements, with compute instances (enable) */
    bool change_mode, change_layout;
    struct gpu_mig_state cur; /* read before anything changed: the checkpoint */
};

struct mig_node {
    struct mig_gpu_plan gpus[MIG_NODE_MAX_GPUS];
    size_t n;
};

/* What a GPU's current instances amount to, as a config would ask for them; false when no
 * config can describe it (a GPU instance without compute instances, an unknown profile). */
bool mig_state_want(const struct mig_gpu_model *m, const struct gpu_mig_state *s,
                    struct mig_want *ret);
/* Reads every GPU and plans set on it. An invalid layout for any GPU is an error naming the
 * GPU and the planner's explanation; nothing is changed. set NULL: only read. */
int mig_node_plan(struct gpu_nvml *nvml, const struct mig_config_set *set, bool mode_only,
                  struct mig_node *ret, struct error *err);
/* Nothing to change on any selected GPU (mig-parted's assert, with mode_only its -m). */
bool mig_node_applied(const struct mig_node *node, bool mode_only);
/* Applies p (no-op when it changes nothing). On failure the GPU gets p->cur back and err
 * says what failed and whether the restore worked. -EINPROGRESS: the mode change waits for
 * a GPU reset. */
int mig_apply_gpu(struct gpu_nvml *nvml, const struct mig_gpu_plan *p, bool mode_only,
                  const struct gpu_mig_ops *ops, struct error *err);

/* ---- the record of an apply in progress (intent.c) ------------------------------------- */

/* Where `gpuslice mig apply` records what it is changing; GPUSLICE_MIG_INTENT_FILE moves it. */
#define MIG_INTENT_DEFAULT_PATH "/var/lib/gpuslice/mig-apply.intent"

struct mig_intent {
    long pid;
    long long started_s; /* wall clock, seconds since the epoch */
    char config[512];
    char selected[128];
    unsigned gpus[MIG_NODE_MAX_GPUS]; /* the GPUs the apply changes */
    char uuids[MIG_NODE_MAX_GPUS][INV_UUID_MAX];
    size_t n_gpus;
};

/* The record's path (borrowed: the environment's or the default). */
const char *mig_intent_path(void);
/* Writes the record atomically (its folder made when missing). */
int mig_intent_write(const char *path, const struct mig_intent *in, struct error *err);
/* -ENOENT: none (no apply was interrupted); -EBADMSG: not a record. */
int mig_intent_read(const char *path, struct mig_intent *ret, struct error *err);
void mig_intent_clear(const char *path);
/* Its process is alive (an apply in progress now, not an interrupted one). */
bool mig_intent_running(const struct mig_intent *in);
/* "an apply of 'all-1g.10gb' (config.yaml) by pid 42, started …, did not finish: GPUs 0
 * (GPU-…), 1 (GPU-…) may be between layouts", appended to out. */
int mig_intent_describe(const struct mig_intent *in, struct strbuf *out);

#endif

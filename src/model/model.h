/* SPDX-License-Identifier: Apache-2.0 */
/* model: the pure heart of gpuslice. (inventory, effective config) -> the resources and
 * devices this node advertises to the kubelet, the allocation policies
 * (GetPreferredAllocation) and the Allocate responses. Pure: no I/O, no NVML, no sockets,
 * no threads, no logging above debug. Everything the shell needs (device-node existence,
 * MIG capability paths, random ids) comes in through callbacks. */
#ifndef GS_MODEL_H
#define GS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "config/config.h"
#include "gpu/inventory.h"

#define MODEL_HEALTHY "Healthy"
#define MODEL_UNHEALTHY "Unhealthy"
/* Bounds on what a config can make us build (replicas × devices). */
#define MODEL_MAX_REPLICAS CFG_MAX_REPLICAS /* 4096, as the config allows */
#define MODEL_MAX_DEVICES (1u << 20)
/* The kubelet's gRPC client takes messages of at most 4 MiB (kubelet facts §2.10): a
 * resource whose ListAndWatch would be larger is an error. */
#define MODEL_LIST_AND_WATCH_MAX_BYTES (4u * 1024u * 1024u)

/* ---- the model ---------------------------------------------------------------------------- */

/* One advertised device: a whole GPU, a MIG device, or a replica of either. */
struct model_device {
    char *id;           /* advertised ID, UUID-based under every strategy: "<uuid>" or
                         * "<uuid>::<n>" (owned) */
    char *base_id;      /* what NVIDIA_VISIBLE_DEVICES carries: the uuid, or "<gpu>" /
                         * "<gpu>:<mig>" under --device-id-strategy=index (owned) */
    unsigned gpu_index; /* parent GPU index */
    int mig_index;      /* MIG device index under the parent, -1 for a whole GPU */
    unsigned replica;   /* replica number, 0..replicas-1 (0 when not shared) */
    unsigned replicas;  /* replicas of this physical device in its resource (1 = not shared) */
    bool healthy;
    int numa_node; /* -1 when unknown (no topology sent) */
    /* the underlying physical device */
    char uuid[INV_UUID_MAX];       /* GPU or MIG uuid */
    char gpu_uuid[INV_UUID_MAX];   /* parent GPU uuid */
    unsigned minor;                /* parent GPU /dev/nvidia<minor> */
    unsigned gi_id, ci_id;         /* MIG only, INV_ID_NONE otherwise */
    char profile[INV_PROFILE_MAX]; /* MIG profile, "" for a whole GPU */
    uint64_t memory_mib;           /* of the physical device (GPU or MIG) */
    bool memory_unknown;           /* NVML reports none (unified memory): memory_mib is 0 */
    int cc_major, cc_minor;
};

/* MPS per-physical-device limits (facts §5.1: memory = total/replicas, threads = 100/replicas,
 * integer division), computed here for the MPS daemon to apply. */
struct model_mps_limit {
    unsigned gpu_index;
    char uuid[INV_UUID_MAX];
    uint64_t pinned_memory_limit_mib;
    unsigned active_thread_percentage;
};

struct model_resource {
    char *name;        /* "nvidia.com/gpu", "nvidia.com/mig-1g.10gb.shared" (owned) */
    char *socket_name; /* "nvidia-gpu.sock": basename under the device-plugin dir (owned) */
    enum cfg_sharing_strategy sharing;   /* NONE unless some device has replicas > 1 */
    const struct cfg_sharing_mode *mode; /* sharing's row (static, never NULL): ask it */
    unsigned replicas;                   /* the largest replica count among its devices */
    bool mixed_replicas;                 /* devices with different replica counts */
    bool fail_requests_greater_than_one;
    bool is_mig;                  /* devices are MIG devices */
    struct model_device *devices; /* owned, in GPU/MIG/replica order */
    size_t n_devices;
    struct model_mps_limit *mps_limits; /* owned, when mode->control_daemon */
    size_t n_mps_limits;
    size_t *by_id; /* private: device indices sorted by id, for lookups */
};

enum model_diag_level { MODEL_DIAG_ERROR = 0, MODEL_DIAG_WARNING };

struct model_diag {
    enum model_diag_level level;
    char *message; /* owned; lowercase, no final full stop */
};

/* What Allocate needs from the config, copied so the model stands on its own. */
struct model_settings {
    enum cfg_mig_strategy mig_strategy;
    enum cfg_device_id_strategy device_id_strategy;
    enum cfg_alloc_policy allocation_policy;
    unsigned device_list_strategies; /* CFG_LIST_* bits */
    bool pass_device_specs;
    bool gdrcopy_enabled, gds_enabled, mofed_enabled;
    char *cdi_annotation_prefix; /* owned */
    char *dev_root;              /* owned: nvidiaDevRoot, else nvidiaDriverRoot, else "/" */
    char *mps_root;              /* owned, NULL when unset */
    unsigned *imex_channel_ids;  /* owned */
    size_t n_imex_channel_ids;
};

struct model {
    struct model_resource *resources; /* owned, sorted by name */
    size_t n_resources;
    struct model_diag *diags; /* owned, in the order found */
    size_t n_diags;
    size_t n_errors;
    struct model_settings settings;
};

struct model_options {
    /* Where NVIDIA refuses to start (facts §4), keep serving the valid part: the errors stay
     * in diags (n_errors > 0) and model_build() succeeds. */
    bool keep_valid;
};

/* Builds the model. On success *ret_model is owned by the caller (model_free()). Without
 * keep_valid, any error diag makes this fail with -EINVAL and the first error (plus a count
 * of the others) in err; *ret_model is untouched. Inputs are not modified. */
int model_build(const struct inv_inventory *inv, const struct cfg_config *cfg,
                const struct model_options *opts, struct model **ret_model, struct error *err);

/* Frees everything; accepts NULL and half-built models. */
void model_free(struct model *m);

/* Lookups; NULL when not found. Pointers are borrowed from the model. */
const struct model_resource *model_find_resource(const struct model *m, const char *name);
const struct model_device *model_resource_find_device(const struct model_resource *res,
                                                      const char *id);

/* For the daemon's diff of an old and a new model: true when the kubelet would see the same
 * thing (name, device IDs in order, health, NUMA) and Allocate would answer the same
 * (sharing, replicas, failRequestsGreaterThanOne, physical devices). NULL-safe. */
bool model_resource_equal(const struct model_resource *a, const struct model_resource *b);
/* True when every Allocate setting (strategies, ID strategy, roots, policy, ...) matches. */
bool model_settings_equal(const struct model_settings *a, const struct model_settings *b);

/* Health from events. `uuid` is a GPU uuid (with gi_id/ci_id INV_ID_NONE: the GPU and all its
 * MIG devices; with a gi/ci: that MIG device of the GPU, or the GPU itself when it is
 * advertised whole) or a MIG uuid. Marks the device and
 * all its replicas. Returns the number of devices whose health changed (≥0), or -ENOENT when
 * no device of the model matches. */
int model_set_health(struct model *m, const char *uuid, unsigned gi_id, unsigned ci_id,
                     bool healthy);
/* Whether an event for (uuid, gi_id, ci_id) hits device d, by model_set_health()'s rule. */
bool model_device_matches(const struct model_device *d, const char *uuid, unsigned gi_id,
                          unsigned ci_id);

/* Kubelet rules for an extended resource name (kubelet facts §2.1, IsExtendedResourceName).
 * Returns true when accepted; otherwise false and a reason in err (may be NULL). */
bool model_resource_name_valid(const char *name, struct error *err);

/* "nvidia.com/mig-<profile>" with '+' replaced by '.'. Owned by the caller, NULL on ENOMEM. */
char *model_mig_resource_name(const char *profile);

/* ---- allocation policies (GetPreferredAllocation) ------------------------------------------- */

/* Picks `size` IDs among `available` that include every `must_include` ID.
 * Whole-GPU resources without replicas: the set that maximises interconnect quality over all
 * pairs (NVLink links first, then PCIe closeness): exact (branch and bound; verified
 * against brute force up to 16 GPUs), with a search budget that bounds the time beyond. Replicas
 * and MIG devices: the settings' policy (distributed/packed, facts §3.4) with NVIDIA's tie-break;
 * distributed also prefers distinct physical devices. `topology` may be NULL (then whole GPUs fall
 * back to the distributed order). On success *ret_ids is an owned NULL-terminated strv
 * (strv_free()), must-include first. Errors: -EINVAL for an unknown ID, or not enough devices for a
 * shared or MIG resource (NVIDIA's text); not enough whole GPUs is an empty list, as NVIDIA
 * answers. */
int model_preferred_allocation(const struct model *m, const struct model_resource *res,
                               const char *const *available, size_t n_available,
                               const char *const *must_include, size_t n_must, size_t size,
                               const struct inv_inventory *topology, char ***ret_ids,
                               struct error *err);

/* The interconnect score of a set of GPU indices (sum over pairs: nvlinks*16384 + PCIe
 * closeness 0..5). Exposed for tests and benchmarks. */
uint64_t model_topology_score(const struct inv_inventory *topology, const unsigned *gpus, size_t n);

/* ---- Allocate --------------------------------------------------------------------------- */

struct model_kv {
    char *key;
    char *value;
};

struct model_mount {
    char *container_path;
    char *host_path;
    bool read_only;
};

struct model_device_spec {
    char *container_path;
    char *host_path;
    char *permissions; /* "rw" */
};

/* One ContainerAllocateResponse. All owned; model_alloc_response_free(). Keys of envs and
 * annotations are unique (a later write replaces the value, as a Go map does). */
struct model_alloc_response {
    struct model_kv *envs;
    size_t n_envs;
    struct model_mount *mounts;
    size_t n_mounts;
    struct model_device_spec *devices;
    size_t n_devices;
    struct model_kv *annotations;
    size_t n_annotations;
    char **cdi_devices; /* fully qualified CDI names */
    size_t n_cdi_devices;
};

/* The shell's view of the filesystem, so the model stays pure. Any callback may be NULL. */
struct model_alloc_env {
    /* Does this container path (/dev/nvidiactl, ...) exist in the plugin's container? NULL
     * callback: assume yes. */
    bool (*device_exists)(void *userdata, const char *container_path);
    /* The /dev/nvidia-caps/nvidia-capN path for a MIG capability access file
     * (/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<g>[/ci<c>]/access). Returns an
     * owned string or NULL when it cannot be resolved (the node is then skipped). */
    char *(*mig_cap_path)(void *userdata, unsigned gpu_minor, unsigned gi_id, unsigned ci_id,
                          bool compute_instance);
    /* A fresh random id (a UUID string) for the CDI annotation key; owned by the caller.
     * NULL callback or NULL result: the allocation fails with -EIO. */
    char *(*new_id)(void *userdata);
    void *userdata;
};

/* Validates a ContainerAllocateRequest and builds its response (facts §3.2, §3.3, §5.2).
 * Errors (-EINVAL) carry NVIDIA's texts, prefixed "invalid allocation request for \"<name>\": ".
 * On success *ret is owned by the caller. */
int model_allocate(const struct model *m, const struct model_resource *res, const char *const *ids,
                   size_t n_ids, const struct model_alloc_env *env,
                   struct model_alloc_response **ret, struct error *err);

void model_alloc_response_free(struct model_alloc_response *r);
/* Value of an env in the response, or NULL. Borrowed. */
const char *model_alloc_response_env(const struct model_alloc_response *r, const char *key);

/* ---- plan --------------------------------------------------------------------------------- */

/* The `gpuslice plan` report: a table of resources, then errors and warnings (the JSON
 * form is built by cli/ from the model itself). `inv` gives GPU names and memory for the
 * GPUS column. *ret_text is owned by the caller. */
int model_plan_report(const struct model *m, const struct inv_inventory *inv, char **ret_text,
                      struct error *err);
/* The GPUS column of a resource ("8 × NVIDIA L20 (46068 MiB)"), appended to sb. */
int model_resource_gpus_text(const struct model_resource *res, const struct inv_inventory *inv,
                             struct strbuf *sb);

/* ---- replica sizing (sizing.c) ------------------------------------------------------------ */

struct model_sizing {
    uint64_t total_mib, per_process_mib, usable_mib;
    unsigned headroom_pct;
    uint64_t ratio_x100; /* usable / per process, x100, for showing the arithmetic */
    unsigned replicas;   /* floor(usable / per process), at least 1 */
};

/* Replicas of a GPU of total_mib for processes of per_process_mib, keeping headroom_pct %
 * free. -EINVAL for a zero size or headroom >= 100. */
int model_size_replicas(uint64_t total_mib, uint64_t per_process_mib, unsigned headroom_pct,
                        struct model_sizing *ret);

/* ---- retiring devices (daemon live reload; retire.c) ------------------------------------- */

/* The IDs of old_res that m's resource of the same name does not list (all of them when m has
 * no such resource), in old_res's order. *ret_ids is an owned strv, possibly empty. */
int model_removed_ids(const struct model *m, const struct model_resource *old_res, char ***ret_ids,
                      struct error *err);

/* Adds the devices `ids` of old_res to m as Unhealthy, so pods holding them keep them while
 * nothing new lands on them: appended to m's resource of the same name, or to a new resource
 * with old_res's name, socket and sharing (no MPS limits) inserted in name order. IDs m
 * already lists or old_res lacks are skipped. Returns the number added, or -ENOMEM (m stays
 * freeable with model_free()). */
int model_retire_devices(struct model *m, const struct model_resource *old_res,
                         const char *const *ids, size_t n_ids, struct error *err);

/* For a new process (a rollout, a restart): the devices of `resource` that pods hold (ids,
 * as an earlier process advertised them) but m does not list are added to m as Unhealthy,
 * described from inv: "<uuid>" or "<uuid>::<n>" of a GPU or MIG device inv has. IDs of
 * devices inv lacks, and IDs m already lists, are skipped. The resource is created when m
 * has none (time-slicing when an ID is a replica). Returns the number added, or -ENOMEM. */
int model_keep_held(struct model *m, const struct inv_inventory *inv, const char *resource,
                    const char *const *ids, size_t n_ids, struct error *err);

#endif

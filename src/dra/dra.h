/* SPDX-License-Identifier: Apache-2.0 */
/* dra: the pure side of Kubernetes DRA for driver gpu.nvidia.com, as NVIDIA's
 * k8s-dra-driver-gpu v25.12 does it (facts/dra.md). Inventory -> the devices of this node's
 * ResourceSlice (NVIDIA's names, attributes, capacities) and the slice JSON; a
 * ResourceClaim's JSON + its opaque GpuConfig/MigDeviceConfig -> a prepare plan; the
 * checkpoint that keeps prepared claims across restarts. Pure: no I/O, no NVML, no gRPC. */
#ifndef GS_DRA_H
#define GS_DRA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/base.h"
#include "config/config.h"
#include "gpu/inventory.h"

#define DRA_DRIVER_NAME "gpu.nvidia.com"
#define DRA_CONFIG_API_VERSION "resource.nvidia.com/v1beta1"
#define DRA_CDI_KIND "k8s.gpu.nvidia.com/claim"
#define DRA_PCI_BUS_ID_ATTR "resource.kubernetes.io/pciBusID"
#define DRA_PCIE_ROOT_ATTR "resource.kubernetes.io/pcieRoot"

#define DRA_NAME_MAX 64      /* "gpu-15-mig-1c3g40gb-19-4" fits; DNS labels are <= 63 */
#define DRA_ATTR_NAME_MAX 48 /* "resource.kubernetes.io/pciBusID" */
#define DRA_ATTR_VALUE_MAX INV_NAME_MAX
#define DRA_MAX_ATTRS 16
#define DRA_MAX_CAPACITIES 24 /* 7 + memorySlice0..15 */
#define DRA_MAX_PINNED_LIMITS 64
#define DRA_SLICE_MAX_DEVICES 128 /* resource.k8s.io/v1 ResourceSliceMaxDevices */

/* ---- fractions: a GPU shared by memory (KEP-5075 consumable capacity, config
 * sharing.fractions) --------------------------------------------------------------------------
 * A shareable GPU is published with allowMultipleAllocations: true and these capacities, each
 * with a request policy. The scheduler writes what a claim consumed into its result's
 * consumedCapacity under the same names, with a shareID; prepare makes the share real (MPS).
 *
 * memory: value = the GPU's memory (NVIDIA's value, "81559Mi"); policy default = the whole
 *   value (a request without a memory amount takes the whole GPU, so old claims keep whole
 *   GPUs), validRange {min: 1Gi, step: 1Mi}. The API wants default on the grid min + k*step:
 *   NVML gives whole MiB, so a 1Mi step puts every GPU's total on it, and a request is kept to
 *   the MiB (10Gi consumes 10Gi). A 1Gi step would not (81559Mi - 1Gi is no whole number of
 *   GiB). Requests below 1Gi are rounded up to it: a CUDA context alone takes hundreds of MiB.
 * computePercent: value 100; policy default 0, validRange {min: 0, max: 100, step: 1}: a share
 *   that names none consumes none and gets no ceiling; one that names N gets the MPS active
 *   thread percentage N, and the scheduler keeps the named ceilings of a GPU at <= 100. */
#define DRA_CAPACITY_MEMORY "memory"
#define DRA_CAPACITY_COMPUTE "computePercent"
#define DRA_SHARE_MIN_MEMORY_MIB 1024u
#define DRA_SHARE_MEMORY_STEP_MIB 1u
#define DRA_COMPUTE_PERCENT_TOTAL 100u
#define DRA_SHARE_ID_MAX 64 /* a UID (36 characters) with room */

/* ---- slice devices ------------------------------------------------------------------------ */

enum dra_attr_kind { DRA_ATTR_STRING = 0, DRA_ATTR_INT, DRA_ATTR_BOOL, DRA_ATTR_VERSION };

struct dra_attr {
    char name[DRA_ATTR_NAME_MAX];
    enum dra_attr_kind kind;
    char str[DRA_ATTR_VALUE_MAX]; /* STRING and VERSION ("8.9.0") */
    int64_t i;
    bool b;
};

/* A capacity's requestPolicy (published only on a shareable device): quantities as text,
 * "" when the field is left out. */
struct dra_request_policy {
    char default_value[32];
    char min[32], max[32], step[32]; /* validRange */
};

struct dra_capacity {
    char name[DRA_ATTR_NAME_MAX];
    char value[32]; /* a Kubernetes quantity in canonical BinarySI form: "46068Mi", "15Gi" */
    bool has_policy;
    struct dra_request_policy policy;
};

enum dra_device_type { DRA_DEVICE_GPU = 0, DRA_DEVICE_MIG };

/* What prepare needs to know of a device (and what the checkpoint keeps). */
struct dra_device_info {
    char name[DRA_NAME_MAX]; /* "gpu-0", "gpu-0-mig-1g10gb-19-2" */
    enum dra_device_type type;
    char uuid[INV_UUID_MAX];        /* GPU-… or MIG-… */
    char parent_uuid[INV_UUID_MAX]; /* the GPU's uuid (= uuid for a whole GPU) */
    unsigned gpu_index;             /* NVML index of the (parent) GPU */
    unsigned minor;                 /* /dev/nvidia<minor> of the (parent) GPU */
    int mig_index;                  /* MIG device index under its parent, -1 for a GPU */
    unsigned gi_id, ci_id;          /* MIG only; INV_ID_NONE for a GPU */
    char profile[INV_PROFILE_MAX];  /* MIG only: "1g.10gb" */
};

struct dra_device {
    struct dra_device_info info;
    bool healthy; /* unhealthy devices are kept (prepare refuses them) but not published */
    /* allowMultipleAllocations: a whole GPU that sharing.fractions selects, with the
     * DRA_CAPACITY_* capacities and their policies (never a MIG device or a GPU in MIG mode) */
    bool shareable;
    struct dra_attr attrs[DRA_MAX_ATTRS];
    size_t n_attrs;
    struct dra_capacity capacities[DRA_MAX_CAPACITIES];
    size_t n_capacities;
};

/* The devices of a node, GPUs by index and each MIG-enabled GPU's MIG devices in their order;
 * plain values, one allocation. */
struct dra_devices {
    struct dra_device *devices;
    size_t n_devices;
};

/* What the shell knows beyond the inventory. Borrowed for the call; NULL means none. */
struct dra_devices_options {
    /* uuids of GPUs or MIG devices to mark unhealthy (a GPU's marks its MIG devices too) */
    char *const *unhealthy_uuids; /* NULL-terminated */
    /* per GPU index (inventory order, n_gpus entries): the PCIe root the shell resolved
     * under sysfs ("pci0000:00"), published as resource.kubernetes.io/pcieRoot on the GPU
     * and its MIG devices; NULL or "" when unknown (the attribute is left out) */
    const char *const *pcie_roots;
    /* the config whose sharing.fractions entries make GPUs shareable (their resource name
     * from resources.gpus, then all, the first N of that name, or those listed by index or
     * uuid); NULL or another sharing mode: none */
    const struct cfg_config *cfg;
};

/* Builds the devices NVIDIA's driver would offer for `inv`: a GPU with MIG off (MIG-capable
 * or not) is `gpu-<minor>`; a MIG-enabled GPU is replaced by its MIG devices. GPUs that
 * opts->cfg's sharing.fractions selects are shareable (a GPU in MIG mode stays as it is:
 * its MIG devices are published unshared). -EINVAL
 * (naming the GPU) for what cannot be expressed (a version or bus id of a shape NVIDIA
 * would refuse, too many memory slices), -ENOMEM. *ret owned: dra_devices_free. */
int dra_devices_build(const struct inv_inventory *inv, const struct dra_devices_options *opts,
                      struct dra_devices **ret, struct error *err);
void dra_devices_free(struct dra_devices *devs);
/* Whether dra-plugin can take cfg (NULL: yes): no sharing block, or sharing.fractions. A
 * timeSlicing or mps block is the device plugin's (a claim asks for those with its GpuConfig):
 * -EINVAL saying so. */
int dra_config_check(const struct cfg_config *cfg, struct error *err);

/* True when both lists publish the same slice (the same healthy devices, in order, with
 * the same attributes and capacities): the plugin updates its slice only when not. NULL is
 * an empty list. */
bool dra_devices_same_slice(const struct dra_devices *a, const struct dra_devices *b);

/* Lookups: NULL when absent. Borrowed from devs. */
const struct dra_device *dra_devices_find(const struct dra_devices *devs, const char *name);
const struct dra_attr *dra_device_attr(const struct dra_device *d, const char *name);
const struct dra_capacity *dra_device_capacity(const struct dra_device *d, const char *name);

/* Helpers NVIDIA's names depend on, exported for the CLI and tests. All return -EINVAL on
 * input of another shape and -ENAMETOOLONG when buf is too small. */
/* Kubernetes' canonical BinarySI text of a byte count: 48305799168 -> "46068Mi",
 * 16106127360 -> "15Gi", 1 -> "1", 1536 -> "1536" (largest power of 1024 that divides it). */
int dra_quantity_binary(uint64_t value, char *buf, size_t size);
/* Masterminds semver as NVIDIA's driver uses it: "570.158.01" -> "570.158.1",
 * "8.9" -> "8.9.0", "12.8" -> "12.8.0". */
int dra_semver(const char *version, char *buf, size_t size);
/* go-nvlib's GetPCIBusID: "00000000:3B:00.0" -> "0000:3b:00.0". */
int dra_pci_bus_id(const char *nvml_bus_id, char *buf, size_t size);
/* go-nvlib names from inventory's: "NVIDIA" -> "Nvidia", "ada-lovelace" -> "Ada Lovelace";
 * "Unknown" for anything it does not know. Static strings. */
const char *dra_brand_name(const char *inv_brand);
const char *dra_architecture_name(const char *inv_arch);

/* ---- ResourceSlice ------------------------------------------------------------------------ */

enum dra_api_version { DRA_API_V1 = 0, DRA_API_V1BETA2, DRA_API_V1BETA1 };

/* "resource.k8s.io/v1", …; NULL for a bad value. */
const char *dra_api_version_string(enum dra_api_version v);

/* Borrowed for the call. */
struct dra_slice_meta {
    const char *node_name;        /* required: pool name and nodeName */
    const char *node_uid;         /* the Node's uid for the owner reference; NULL: no reference */
    const char *name;             /* set when updating an existing slice; NULL: generateName */
    const char *resource_version; /* with name, for an update; may be NULL */
    int64_t generation;           /* spec.pool.generation, >= 1 */
};

/* The ResourceSlice object for the healthy devices of devs: metadata (generateName
 * "<node>-gpu.nvidia.com-" or name, ownerReferences to the Node), spec.driver, nodeName,
 * pool {name: node, generation, resourceSliceCount: 1}, devices. v1 and v1beta2 devices are
 * flat ({name, attributes, capacity}); v1beta1 nests attributes and capacity under `basic`.
 * Attribute values are {"string"|"int"|"bool"|"version": …}, capacities {"value": "<q>"}.
 * -EINVAL without node name or with a bad version, -E2BIG for more than
 * DRA_SLICE_MAX_DEVICES devices (the API server refuses such a slice), -ENOMEM. *ret is a
 * new reference. */
int dra_slice_json(const struct dra_devices *devs, const struct dra_slice_meta *meta,
                   enum dra_api_version version, json_t **ret, struct error *err);

/* ---- ResourceClaim -------------------------------------------------------------------------- */

struct dra_result {
    char *request, *driver, *pool, *device; /* owned */
    bool admin_access;
    /* consumable capacity (resource.k8s.io/v1 DeviceRequestAllocationResult): set when the
     * device was allocated as a share of a device that allows several allocations */
    char *share_id;                 /* shareID (owned), NULL when absent */
    uint64_t consumed_memory_bytes; /* consumedCapacity.memory, 0 when absent */
    int64_t consumed_compute_pct;   /* consumedCapacity.compute (0..100), -1 when absent */
};

enum dra_config_source { DRA_SOURCE_CLASS = 0, DRA_SOURCE_CLAIM };

struct dra_claim_config {
    enum dra_config_source source;
    char **requests;    /* owned strv, empty: applies to every request */
    char *driver;       /* opaque.driver (owned); NULL when the config is not opaque */
    json_t *parameters; /* opaque.parameters (own reference); NULL when not opaque */
};

struct dra_pod_ref {
    char *name, *uid; /* owned */
};

struct dra_claim {
    char *uid, *name, *namespace; /* owned */
    bool allocated;               /* status.allocation present */
    struct dra_result *results;
    size_t n_results;
    struct dra_claim_config *configs; /* in the API's order */
    size_t n_configs;
    struct dra_pod_ref *reserved_for; /* status.reservedFor entries with resource "pods" */
    size_t n_reserved_for;
};

/* Parses a ResourceClaim object (any of v1, v1beta2, v1beta1: the fields read are the same).
 * -EINVAL with the JSON path of what is missing or of the wrong type (metadata.uid,
 * status.allocation.devices.results[2].device, config[0].source …). *ret owned. */
int dra_claim_parse(const json_t *obj, struct dra_claim **ret, struct error *err);
/* Same from text (length n). */
int dra_claim_parse_text(const char *text, size_t n, struct dra_claim **ret, struct error *err);
void dra_claim_free(struct dra_claim *claim);

/* ---- opaque config (GpuConfig, MigDeviceConfig) ------------------------------------------- */

enum dra_config_kind { DRA_CONFIG_GPU = 0, DRA_CONFIG_MIG };

/* nvidia-smi compute-policy --set-timeslice values */
enum dra_timeslice {
    DRA_TIMESLICE_DEFAULT = 0,
    DRA_TIMESLICE_SHORT = 1,
    DRA_TIMESLICE_MEDIUM = 2,
    DRA_TIMESLICE_LONG = 3
};

struct dra_pinned_limit {
    char key[INV_UUID_MAX]; /* as written: a uuid, or an index into the config's devices
                             * sorted by uuid ("0"), as NVIDIA's driver reads it */
    uint64_t bytes;
};

struct dra_mps_config {
    int active_thread_percentage; /* 0..100, -1 when not set */
    bool has_pinned_limit;
    uint64_t pinned_limit_bytes; /* defaultPinnedDeviceMemoryLimit */
    struct dra_pinned_limit per_device[DRA_MAX_PINNED_LIMITS];
    size_t n_per_device; /* defaultPerDevicePinnedMemoryLimit */
};

struct dra_opaque_config {
    enum dra_config_kind kind;
    /* sharing.strategy's row (cfg_sharing_mode_by_dra_name); the none row when `sharing` is
     * absent. Static, never NULL. */
    const struct cfg_sharing_mode *mode;
    enum dra_timeslice interval; /* dra_time_slice: Default unless set */
    struct dra_mps_config mps;   /* control_daemon */
};

/* Decodes opaque parameters strictly, as NVIDIA's StrictDecoder: apiVersion must be
 * resource.nvidia.com/v1beta1, kind GpuConfig or MigDeviceConfig, unknown fields anywhere
 * are errors (MigDeviceConfig has no timeSlicingConfig), values are validated (interval,
 * 0 <= defaultActiveThreadPercentage <= 100, quantities, MPS limits of at least 1 MiB,
 * a config for one strategy may not carry the other's settings). Sharing needs no feature
 * gate. `where` names the config in messages ("claim config[1]"); -EINVAL with what, where
 * and how to fix. *ret written on success only. */
int dra_opaque_config_decode(json_t *parameters, const char *where, struct dra_opaque_config *ret,
                             struct error *err);

/* Kubernetes quantity text -> bytes, rounded up ("10Gi", "512M", "1.5Gi", "1e9", "100").
 * -EINVAL for anything else, negative values or more than INT64_MAX. */
int dra_quantity_parse(const char *text, uint64_t *ret, struct error *err);

/* ---- prepare plan ------------------------------------------------------------------------- */

struct dra_plan_sharing {
    const struct cfg_sharing_mode *mode; /* the none row when not shared; never NULL */
    /* dra_time_slice: the interval to set on a whole GPU. On a MIG device TimeSlicing sets
     * nothing (MIG devices have no time-slice of their own; NVIDIA sets none either). */
    enum dra_timeslice interval;
    int active_thread_percentage; /* MPS, -1 when not set */
    uint64_t pinned_limit_mib;    /* MPS, 0 when not set */
};

/* A share of a GPU (a result with a shareID): the claim's containers are clients of the
 * GPU's one MPS control daemon, held to the consumed memory and compute. */
struct dra_plan_share {
    char id[DRA_SHARE_ID_MAX]; /* the result's shareID; "" when the device is not a share */
    uint64_t memory_mib;       /* the consumed memory, rounded down to whole MiB (>= 1) */
    int thread_pct;            /* the consumed compute (1..100), -1 when none was consumed */
};

struct dra_plan_device {
    char *request, *pool; /* owned */
    struct dra_device_info device;
    char *cdi_device_id;   /* "k8s.gpu.nvidia.com/claim=<uid>-<device>" (owned) */
    char *cdi_device_name; /* "<uid>-<device>": the device's name in the claim's spec */
    char **device_nodes;   /* owned strv: "/dev/nvidia<minor>"; MIG cap nodes are the
                            * caller's (it resolves gi/ci ids under /proc) */
    struct dra_plan_sharing sharing;
    struct dra_plan_share share;
    unsigned group; /* devices with one config share one group (one MPS daemon) */
    bool admin_access;
};

struct dra_plan {
    char *claim_uid, *claim_name, *claim_namespace; /* owned */
    struct dra_plan_device *devices;
    size_t n_devices;
    unsigned n_groups;
};

struct dra_checkpoint;

/* The plan for preparing `claim` on node `pool` (its pool name): every result whose driver
 * is gpu.nvidia.com and pool is this node, in order; other drivers' and pools' results are
 * skipped. Configs for gpu.nvidia.com are decoded strictly; the one that applies to a result
 * is, as in NVIDIA's driver, the last one in [class configs…, claim configs…] that either
 * names its request (a main request also names its subrequests "<main>/<sub>") or names no
 * request and is of the device's kind (GpuConfig for gpu, MigDeviceConfig for mig); none
 * means no sharing. Refusals (-EINVAL unless said), with NVIDIA's texts first:
 * "claim not yet allocated"; "requested device is not allocatable: <name>" (-ENODEV);
 * "requested device is not healthy: <name>" (-EIO); "requested device <name> is already
 * allocated to different claim <uid>" (-EBUSY, checked against claims of `prepared` in
 * PrepareCompleted state, admin access exempt); "cannot apply GpuConfig to device type mig
 * (request: <r>)" and the MigDeviceConfig one; decode errors; an MPS per-device key that
 * names no device of its group. `prepared` may be NULL. *ret owned: dra_plan_free. */
int dra_plan_build(const struct dra_claim *claim, const char *pool, const struct dra_devices *devs,
                   const struct dra_checkpoint *prepared, struct dra_plan **ret, struct error *err);
void dra_plan_free(struct dra_plan *plan);
/* Deep copy; NULL on out of memory. */
struct dra_plan *dra_plan_dup(const struct dra_plan *plan);

/* ---- checkpoint --------------------------------------------------------------------------- */

enum dra_claim_state { DRA_PREPARE_STARTED = 0, DRA_PREPARE_COMPLETED };

struct dra_checkpoint_claim {
    enum dra_claim_state state;
    struct dra_plan *plan; /* owned; claim uid, name, namespace and prepared devices */
};

#define DRA_BOOT_ID_MAX 64 /* /proc/sys/kernel/random/boot_id: a UUID (36 characters) */

struct dra_checkpoint {
    struct dra_checkpoint_claim *claims;
    size_t n_claims;
    /* the node's boot the claims were prepared in ("": not known), as NVIDIA's v0.4.0
     * checkpoint's nodeBootID: after a reboot nothing prepared is in place any more */
    char boot_id[DRA_BOOT_ID_MAX];
};

struct dra_checkpoint *dra_checkpoint_new(void); /* empty; NULL on out of memory */
void dra_checkpoint_free(struct dra_checkpoint *cp);
/* The claim's entry, or NULL. Borrowed. */
const struct dra_checkpoint_claim *dra_checkpoint_find(const struct dra_checkpoint *cp,
                                                       const char *claim_uid);
/* Adds or replaces the entry of plan->claim_uid; takes ownership of plan (also on error). */
int dra_checkpoint_put(struct dra_checkpoint *cp, enum dra_claim_state state, struct dra_plan *plan,
                       struct error *err);
/* Removes the claim's entry; false when there was none. */
bool dra_checkpoint_remove(struct dra_checkpoint *cp, const char *claim_uid);

/* {"checksum": <FNV-1a 32 of the compact, key-sorted "v1" text>, "v1": {"preparedClaims":
 * {<uid>: {"checkpointState": "PrepareStarted"|"PrepareCompleted", "name", "namespace",
 * "preparedDevices": [...]}}, "nodeBootID" (when known)}}. *ret owned (free()). */
int dra_checkpoint_encode(const struct dra_checkpoint *cp, char **ret, struct error *err);
/* Refuses text that is not such a document or whose checksum does not match (-EBADMSG,
 * saying the file was changed or cut short and that removing it forgets prepared claims). */
int dra_checkpoint_decode(const char *text, size_t n, struct dra_checkpoint **ret,
                          struct error *err);
/* The checkpoint for this boot (boot_id "" or NULL: not known, nothing is decided). One written
 * in another boot is emptied, as NVIDIA's driver does since v0.4.0 (after a reboot no CDI
 * spec, MPS daemon or time-slice of it is in place, and the kubelet prepares its pods'
 * claims again): returns the number of claims forgotten. One without a boot is adopted.
 * Either way it is stamped with boot_id, so the next save records it. */
size_t dra_checkpoint_for_boot(struct dra_checkpoint *cp, const char *boot_id);

/* ---- the prepare transaction (prepare.c) ---------------------------------------------------- */

struct cdi_claim;

/* Every effect of a prepare or unprepare, so that prepare.c stays pure (the daemon's are in
 * daemon/dra_effects.c, the tests' are fakes). Each returns 0 or a negative errno with err
 * filled; ctx is dra_prepare_ops.ctx. Called from the calling (rpc worker) thread; effects
 * of different claims may run at the same time, never two of the same claim. */
struct dra_prepare_ops {
    /* The ResourceClaim ns/name as the API has it now, as JSON text (*ret owned). -ENOENT:
     * it does not exist; any other failure: the API could not be asked. No lock held. */
    int (*claim_read)(void *ctx, const char *ns, const char *name, char **ret, struct error *err);
    /* Sets the time-slice of a whole GPU (first the compute mode to DEFAULT, as NVIDIA's
     * driver does), or with `reset` puts it back to Default. */
    int (*timeslice)(void *ctx, const char *gpu_uuid, enum dra_timeslice interval, bool reset,
                     struct error *err);
    /* Starts the MPS control daemons of the plan's MPS groups (dra_mps_daemon_name) and
     * returns 0 only once each serves: fail closed, err says why one does not. */
    int (*mps_start)(void *ctx, const struct dra_plan *plan, struct error *err);
    /* Stops the claim's MPS daemons; none running is success. */
    int (*mps_stop)(void *ctx, const char *claim_uid, struct error *err);
    /* Makes the plan's shares real: each GPU's one MPS control daemon (dra_share_daemon_name,
     * started with the GPU's first share) serving, with limits that hold the shares on it.
     * 0 only once that is so (fail closed: a daemon that does not serve or refuses a limit
     * fails it, err says which); on failure nothing of this claim's shares is left. */
    int (*share_start)(void *ctx, const struct dra_plan *plan, struct error *err);
    /* Releases the claim's shares; a GPU's daemon stops with its last share. None: 0. */
    int (*share_stop)(void *ctx, const char *claim_uid, struct error *err);
    /* Writes the claim's CDI spec (replacing one already there) / removes it (none: 0). */
    int (*cdi_write)(void *ctx, const struct cdi_claim *claim, struct error *err);
    int (*cdi_remove)(void *ctx, const char *claim_uid, struct error *err);
    /* Saves the checkpoint (called with the state's lock held: keep it short). */
    int (*checkpoint_save)(void *ctx, const struct dra_checkpoint *cp, struct error *err);
    void *ctx;
};

/* What prepare.c needs beside the ops. Strings borrowed for the state's life. */
struct dra_state_options {
    const char *node_name; /* this node's pool */
    const char *mps_root;  /* MPS daemons' folders: <root>/<daemon name>/pipe */
};

/* The prepared claims (the checkpoint) and the node's devices, under one lock: the only
 * state the DRA calls share with the loop. Thread-safe. */
struct dra_state;

/* Takes cp (also on error). *ret owned: dra_state_free. */
int dra_state_new(const struct dra_state_options *o, struct dra_checkpoint *cp,
                  struct dra_state **ret, struct error *err);
void dra_state_free(struct dra_state *s);
/* Hands the state the node's devices now (taken; NULL: none) and the driver version for
 * the CDI specs (copied). */
int dra_state_set_devices(struct dra_state *s, struct dra_devices *devs, const char *driver_version,
                          struct error *err);
size_t dra_state_n_claims(struct dra_state *s);
/* A copy of the prepared claims (owned: dra_checkpoint_free), NULL when out of memory. */
struct dra_checkpoint *dra_state_checkpoint(struct dra_state *s);
/* Which claim a DRA call names (borrowed). */
struct dra_claim_ref {
    const char *ns, *name, *uid;
};

/* A failure that is the whole call's, not the claim's (the rpc status to answer with). */
enum dra_call_failure {
    DRA_CALL_OK = 0,
    DRA_CALL_NOT_FOUND,   /* the claim is not in the API */
    DRA_CALL_UID_CHANGED, /* the API's claim of that name has another uid */
    DRA_CALL_UNAVAILABLE, /* the API could not be asked: the kubelet retries */
};

/* What dra_prepare answers: on success the prepared plan (owned) and the claim as read
 * (owned, for its pods); on failure `call` says whether the whole call fails. */
struct dra_prepared {
    struct dra_plan *plan;
    struct dra_claim *claim;
    enum dra_call_failure call;
};
void dra_prepared_release(struct dra_prepared *p);

/* NodePrepareResources for one claim: the claim read (no lock), the plan (under the lock),
 * PrepareStarted saved, the effects (no lock: time-slice, MPS daemons serving, CDI spec),
 * PrepareCompleted saved. A claim prepared completely is answered again as it was. A
 * failed effect is undone (the entry goes, nothing leaks); where the undo fails too the
 * entry stays PrepareStarted for unprepare or the next prepare. A crash leaves
 * PrepareStarted at worst: the next prepare redoes the effects (each replaces what is
 * there). Refused: a sharing config on an admin-access result (-EPERM). Errors name the
 * claim; ret->call != DRA_CALL_OK when the whole call should fail. */
int dra_prepare(struct dra_state *s, const struct dra_prepare_ops *ops,
                const struct dra_claim_ref *ref, struct dra_prepared *ret, struct error *err);

/* NodeUnprepareResources for one claim: the effects undone (CDI spec, time-slice reset, MPS
 * daemons), then the entry removed and saved. Unknown claims succeed. A failure keeps the
 * entry (as PrepareStarted) so that the kubelet's retry finishes the job. */
int dra_unprepare(struct dra_state *s, const struct dra_prepare_ops *ops, const char *claim_uid,
                  struct error *err);

/* The MPS control daemon of a GPU whose memory is shared: "share-<gpu uuid>" (its folder's
 * name), one for all the claims holding shares of it. */
int dra_share_daemon_name(const char *gpu_uuid, char *buf, size_t size);

/* The MPS control daemon of group g of a claim: "claim-<uid>-<g>" (its folder's name). */
int dra_mps_daemon_name(const struct dra_plan *plan, unsigned group, char *buf, size_t size);

/* A deep copy (NULL on out of memory). */
struct dra_devices *dra_devices_dup(const struct dra_devices *devs);

#endif

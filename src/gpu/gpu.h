/* SPDX-License-Identifier: Apache-2.0 */
/* gpu.h: the public face of gpu/ — finding and loading libnvidia-ml.so.1 at run time
 * (never linked, so the binary starts on machines without GPUs) and reading the node
 * snapshot (gpu/inventory.h) through it. No NVML types leak out of this header: callers
 * see a `struct gpu_nvml` context and plain inventory structs. */
#ifndef GS_GPU_H
#define GS_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "gpu/inventory.h"

#define GPU_NVML_LIBRARY "libnvidia-ml.so.1"
#define GPU_DEFAULT_DRIVER_ROOT "/"
#define GPU_DEFAULT_DRIVER_ROOT_CTR_PATH "/driver-root"
#define GPU_DEFAULT_SYSFS_ROOT "/sys"

/* Where to find NVML. All strings are borrowed for the duration of the call. NULL means
 * the default. */
struct gpu_nvml_options {
    const char *library_path;         /* --nvml-library / GPUSLICE_NVML_LIBRARY: only this */
    const char *driver_root;          /* --driver-root / NVIDIA_DRIVER_ROOT: "/" */
    const char *driver_root_ctr_path; /* --driver-root-ctr-path / DRIVER_ROOT_CTR_PATH or
                                       * CONTAINER_DRIVER_ROOT: "/driver-root" */
    const char *sysfs_root;           /* NUMA fallback reads <sysfs_root>/bus/pci/...: "/sys" */
};

/* Fills the fields that are still NULL from the environment (GPUSLICE_NVML_LIBRARY,
 * NVIDIA_DRIVER_ROOT, DRIVER_ROOT_CTR_PATH, CONTAINER_DRIVER_ROOT), so that flags set
 * before the call win over the environment. The pointers borrow from environ. */
void gpu_nvml_options_from_env(struct gpu_nvml_options *opts);

/* Pure: the paths the loader tries, in order. With library_path set, only that path.
 * Otherwise <driver_root_ctr_path><dir>/libnvidia-ml.so.1, then <driver_root><dir>/...,
 * for dir in /usr/lib64, /usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /lib64,
 * /lib/x86_64-linux-gnu, /lib/aarch64-linux-gnu (duplicates dropped), and last the bare
 * name "libnvidia-ml.so.1" for the dynamic linker's own search. *ret is an owned strv. */
int gpu_nvml_candidates(const struct gpu_nvml_options *opts, char ***ret, struct error *err);

/* The first candidate that exists as a file, or the bare name when none does (or the
 * explicit library_path, which must exist: -ENOENT otherwise). *ret_path is owned. */
int gpu_nvml_locate(const struct gpu_nvml_options *opts, char **ret_path, struct error *err);

/* A loaded and initialised NVML. Owns the dlopen handle; not thread-safe. */
struct gpu_nvml;

/* Locates and dlopens NVML (RTLD_NOW|RTLD_LOCAL), resolves its symbols and calls
 * nvmlInit_v2. A missing required symbol fails with a message naming the symbol and the
 * library; a missing optional one degrades a feature (see gpu_nvml_load_warnings).
 * Errors: -ENOENT/-ENODEV (no library, or NVML reports no driver), -ENOEXEC (unusable
 * library or missing symbol), -EIO/-EPERM (nvmlInit_v2 failed). *ret written on success. */
int gpu_nvml_open(const struct gpu_nvml_options *opts, struct gpu_nvml **ret, struct error *err);

/* nvmlShutdown + dlclose; accepts NULL. */
void gpu_nvml_close(struct gpu_nvml *nvml);

/* The path that was dlopened. Borrowed, valid until gpu_nvml_close. */
const char *gpu_nvml_library_path(const struct gpu_nvml *nvml);

/* Features degraded because optional symbols are missing from this driver, one line each
 * ("nvmlDeviceGetNumaNodeId missing in /usr/lib64/libnvidia-ml.so.1: NUMA node read from
 * sysfs"). NULL-terminated, never NULL; borrowed until gpu_nvml_close. The caller logs
 * them (library code does not log above debug). */
char *const *gpu_nvml_load_warnings(const struct gpu_nvml *nvml);

/* Fields the last gpu_inventory_read could not fill (a non-fatal NVML failure), one line
 * each with the call, the device and NVML's error string. NULL-terminated, never NULL;
 * borrowed until the next read or gpu_nvml_close. */
char *const *gpu_nvml_read_warnings(const struct gpu_nvml *nvml);

/* Reads the node snapshot. Fatal (returns an error, *ret untouched): any failure reading
 * what decides the advertised devices — device count/handles, UUID, name, minor number,
 * memory, PCI info, MIG mode, MIG devices and their profiles — and the driver version.
 * Degraded (field set to its "unknown" value, a read warning recorded): CUDA driver
 * version (0), brand/architecture ("unknown"), compute capability (0.0), NUMA node (-1),
 * topology (0 NVLinks, PCIe level SYSTEM), running processes (none). A GPU whose MIG mode
 * reads NOT_SUPPORTED is simply not MIG capable; one whose memory query reads NOT_SUPPORTED
 * (unified memory, GB10) has memory_unknown set and memory_mib 0, without a warning (fatal
 * only if its MIG mode is on). Errors name the call, the device
 * ("GPU 1 (GPU-…)") and NVML's error string. *ret is owned by the caller (inv_free). */
int gpu_inventory_read(struct gpu_nvml *nvml, struct inv_inventory **ret, struct error *err);

/* failOnInitError semantics (NVIDIA's --fail-on-init-error): opens NVML, reads the
 * snapshot and closes NVML. When locating, loading or initialising NVML fails and
 * fail_on_init_error is false, this returns 0 with an empty inventory and a warning that
 * says so ("..., no GPUs, keep running"); with true it returns that error. Read failures
 * after a successful init are errors either way. *ret_warnings collects everything the
 * caller should log (that warning, gpu_nvml_load_warnings, gpu_nvml_read_warnings): an
 * owned NULL-terminated strv, possibly empty. Outputs written only on success. */
int gpu_inventory_open_and_read(const struct gpu_nvml_options *opts, bool fail_on_init_error,
                                struct inv_inventory **ret, char ***ret_warnings,
                                struct error *err);

/* ---- pure helpers, shared with the CLI and tests ------------------------------------------ */

/* go-nvlib's MIG memory figure in GB: round(ceil(mem·8 / total) / 8 · ceil(total / 1 GiB)),
 * mem being the profile's memorySizeMB (MiB) and total the parent's total memory in bytes.
 * Returns 0 when total is 0. */
unsigned gpu_mig_memory_gb(uint64_t profile_memory_mib, uint64_t total_bytes);

/* The canonical MIG profile name: "<G>g.<GB>gb" when ci_slices == gi_slices, else
 * "<C>c.<G>g.<GB>gb", followed by the attribute suffix ("+me", "+me.all", "+gfx", "-me",
 * or "" ). Returns -EINVAL for zero slices or C > G, -ENAMETOOLONG when it does not fit. */
int gpu_mig_profile_name(unsigned ci_slices, unsigned gi_slices, unsigned memory_gb,
                         const char *suffix, char *buf, size_t size);

/* The nvidia-smi topo -m cell for a pair: "X" for a GPU with itself, "NV<n>" for n
 * NVLinks (formatted into buf), else "PIX", "PXB", "PHB", "NODE", "SYS" ("SAME" for two
 * GPUs on one board). Returns buf or a static string. */
const char *gpu_link_label(const struct inv_link *link, bool self, char *buf, size_t size);

/* "00000000:3B:00.0" → "0000:3b:00.0" (the sysfs device directory name). -EINVAL when the
 * id is not of that shape. */
int gpu_pci_sysfs_name(const char *bus_id, char *buf, size_t size);
/* The PCIe root of the GPU at bus_id as Kubernetes' deviceattribute package finds it: the
 * "pci<dom>:<bus>" directory its sysfs device resolves under; "" when sysfs lacks it. */
void gpu_pcie_root(const char *sysfs_root, const char *bus_id, char *buf, size_t size);

/* ---- health events (events.c; used by the device plugin daemon) -------------------------- */

/* An NVML event set with XID critical errors registered on every GPU of a snapshot. */
struct gpu_events;

struct gpu_event {
    char uuid[INV_UUID_MAX]; /* the GPU the event is for */
    unsigned long long type; /* NVML event type bits */
    bool is_xid;             /* an XID critical error (the only kind acted on) */
    unsigned long long xid;  /* the XID */
    unsigned gi_id, ci_id;   /* MIG attribution, INV_ID_NONE when none */
};

/* Registers XidCriticalError (masked by each GPU's supported types) on every GPU of `inv`.
 * A GPU that cannot do events is a warning in *ret_warnings (owned strv), not an error.
 * -EOPNOTSUPP when the library has no event API. `nvml` must outlive the set, which must
 * be used from one thread. Owned: gpu_events_close(). */
int gpu_events_open(struct gpu_nvml *nvml, const struct inv_inventory *inv, struct gpu_events **ret,
                    char ***ret_warnings, struct error *err);
/* Waits up to timeout_ms for the next event: 1 with *ret filled, 0 on timeout, or a
 * negative errno when NVML fails (NVIDIA then marks every device unhealthy). */
int gpu_events_wait(struct gpu_events *ev, int timeout_ms, struct gpu_event *ret,
                    struct error *err);
/* Accepts NULL. */
void gpu_events_close(struct gpu_events *ev);
/* Does NVML answer for the GPU? 1 yes, 0 when it reports the GPU lost (fallen off the bus)
 * or gone, a negative errno for any other failure. */
int gpu_device_answers(struct gpu_nvml *nvml, const char *uuid, struct error *err);

/* ---- telemetry for the metrics sampler (samples.c) ----------------------------------------- */

#define GPU_SAMPLE_MAX_PROCS 64

struct gpu_sample_proc {
    unsigned pid;
    uint64_t used_bytes;
    unsigned gi_id, ci_id; /* INV_ID_NONE outside MIG */
    int sm_util;           /* %, -1 unknown */
};

#define GPU_SAMPLE_MAX_GIS 8 /* GPU instances per GPU: 7 on every MIG-capable part */

/* One GPU instance's framebuffer (read through its first MIG device's handle; compute
 * instances of one GPU instance share its memory). */
struct gpu_sample_gi {
    unsigned gi_id;
    char profile[INV_PROFILE_MAX]; /* "1g.10gb" */
    uint64_t fb_total_mib, fb_used_mib, fb_free_mib;
};

/* The per-GPU readings, dcgm-exporter's default fields that plain NVML answers (the
 * DCGM_FI_PROF_* profiling fields need DCGM itself). Units are dcgm's. */
enum gpu_field {
    GPU_FIELD_GPU_UTIL,         /* % */
    GPU_FIELD_MEM_COPY_UTIL,    /* % */
    GPU_FIELD_ENC_UTIL,         /* % */
    GPU_FIELD_DEC_UTIL,         /* % */
    GPU_FIELD_FB_FREE,          /* MiB */
    GPU_FIELD_FB_USED,          /* MiB, the driver's reservation included (NVML v1) */
    GPU_FIELD_FB_RESERVED,      /* MiB used by no process: driver, contexts (v2) */
    GPU_FIELD_GPU_TEMP,         /* C */
    GPU_FIELD_MEMORY_TEMP,      /* C */
    GPU_FIELD_POWER_USAGE,      /* W */
    GPU_FIELD_TOTAL_ENERGY,     /* mJ since the driver loaded */
    GPU_FIELD_SM_CLOCK,         /* MHz */
    GPU_FIELD_MEM_CLOCK,        /* MHz */
    GPU_FIELD_PCIE_REPLAYS,     /* count */
    GPU_FIELD_ECC_SBE_VOL,      /* count */
    GPU_FIELD_ECC_DBE_VOL,      /* count */
    GPU_FIELD_REMAPPED_COR,     /* rows */
    GPU_FIELD_REMAPPED_UNC,     /* rows */
    GPU_FIELD_REMAP_FAILURE,    /* 0/1 */
    GPU_FIELD_NVLINK_BANDWIDTH, /* KiB, TX + RX with protocol overhead, every link */
    GPU_FIELD_VGPU_LICENSE,     /* 1 licensed / 0 not, in a vGPU guest only */
    GPU_FIELD_COUNT
};

/* One GPU's reading; a field is < 0 where NVML does not tell (utilization with MIG on, ECC
 * on consumer parts, NVLink without links, licensing outside a vGPU guest). */
struct gpu_sample {
    char uuid[INV_UUID_MAX];
    unsigned index;
    double field[GPU_FIELD_COUNT];
    uint64_t fb_total_mib;
    struct gpu_sample_proc procs[GPU_SAMPLE_MAX_PROCS];
    size_t n_procs;
    struct gpu_sample_gi gis[GPU_SAMPLE_MAX_GIS]; /* MIG on: one per GPU instance */
    size_t n_gis;
};

/* Reads only the compute processes of the GPU `uuid` into out (procs and n_procs; the fields
 * stay -1): a live answer for one GPU, cheaper than gpu_sample_read. -ENODEV-like errors
 * from NVML when the GPU cannot be found. */
int gpu_sample_procs(struct gpu_nvml *nvml, const char *uuid, struct gpu_sample *out,
                     struct error *err);
/* Reads every GPU of inv into out[inv->n_gpus]. Fails only when a GPU cannot be found. */
int gpu_sample_read(struct gpu_nvml *nvml, const struct inv_inventory *inv, struct gpu_sample *out,
                    struct error *err);

/* ---- MIG layout: read and change (mig.c) ---------------------------------------------------
 * What mig-parted's checkpoint holds: the mode and every GPU instance with its placement and
 * compute instances. Mutations go through ops: with dry_run they only log the NVML calls
 * they would make (one line each, through ops->log). */
#define GPU_MIG_MAX_GI 16
#define GPU_MIG_MAX_CI 8

struct gpu_mig_ci {
    unsigned profile_id; /* NVML_COMPUTE_INSTANCE_PROFILE_* (equal to its id) */
    unsigned eng_profile_id;
    unsigned start, size; /* compute slices within the GPU instance */
    unsigned ci_id;
};

struct gpu_mig_gi {
    unsigned profile_id;  /* GPU instance profile id (19 for 1g on A100), as create takes */
    unsigned start, size; /* memory slices */
    unsigned gi_id;
    struct gpu_mig_ci cis[GPU_MIG_MAX_CI];
    size_t n_cis;
};

struct gpu_mig_state {
    unsigned index;
    char uuid[INV_UUID_MAX];
    char name[INV_NAME_MAX];
    char bus_id[INV_BUS_ID_MAX];
    uint32_t pci_device_id;
    bool capable, enabled, pending_enabled;
    struct gpu_mig_gi gis[GPU_MIG_MAX_GI];
    size_t n_gis;
};

struct gpu_mig_ops {
    bool dry_run;
    void (*log)(void *userdata, const char *line); /* may be NULL */
    void *userdata;
};

int gpu_mig_count(struct gpu_nvml *nvml, unsigned *ret, struct error *err);
int gpu_mig_state_read(struct gpu_nvml *nvml, unsigned index, struct gpu_mig_state *ret,
                       struct error *err);
/* *ret_pending: the change waits for a GPU reset (the GPU is in use, or the platform needs
 * one). */
int gpu_mig_set_mode(struct gpu_nvml *nvml, unsigned index, bool enable,
                     const struct gpu_mig_ops *ops, bool *ret_pending, struct error *err);
/* Destroys every compute instance, then every GPU instance of cur. */
int gpu_mig_clear(struct gpu_nvml *nvml, unsigned index, const struct gpu_mig_state *cur,
                  const struct gpu_mig_ops *ops, struct error *err);
/* GPU instance g (profile_id at start:size memory slices) with its compute instances: each
 * of cis[].size slices at cis[].start (the profile of that size), or, with size 0, of
 * cis[].profile_id unplaced (a mig-parted checkpoint). When any fails, what was made of it
 * is destroyed. */
int gpu_mig_create(struct gpu_nvml *nvml, unsigned index, const struct gpu_mig_gi *g,
                   const struct gpu_mig_ops *ops, struct error *err);
/* Compute mode EXCLUSIVE_PROCESS (the MPS control daemon's) or DEFAULT on GPU uuid;
 * *ret_was_exclusive (may be NULL) says what it was. */
int gpu_compute_mode_set(struct gpu_nvml *nvml, const char *uuid, bool exclusive_process,
                         bool *ret_was_exclusive, struct error *err);
/* Puts GPU want->index back in state want: mode, then its instances at their placements. */
int gpu_mig_restore(struct gpu_nvml *nvml, const struct gpu_mig_state *want,
                    const struct gpu_mig_ops *ops, struct error *err);

#endif

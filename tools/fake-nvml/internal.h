/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h: the fake NVML's own model of a machine — catalog of known GPU models, the
 * parsed machine description, per-GPU MIG state with stable handle storage — shared by the
 * files of tools/fake-nvml only. Nothing here is exported from libnvidia-ml.so.1. */
#ifndef GS_FAKE_NVML_INTERNAL_H
#define GS_FAKE_NVML_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "gpu/nvml.h"
#include "mig/mig.h"

#define FAKE_MAX_GPUS 64
#define FAKE_MAX_ENTRY_COUNT 64
#define FAKE_MAX_PROCS 64
#define FAKE_MAX_GI 8 /* slot = GI id - 1; ids are 1..8 */
#define FAKE_MAX_CI 8 /* slot = CI id; ids are 0..7 within a GI */
#define FAKE_MACHINE_MAX_BYTES (1024 * 1024)
#define FAKE_LINK_NONE 0xFFFFFFFFu
#define FAKE_LINK_SWITCH 0xFFFFFFFEu
#define FAKE_NO_START 0xFFFFFFFFu

/* First word of every object an nvmlDevice_t can point to. */
enum fake_kind { FAKE_KIND_GPU = 0x47505521, FAKE_KIND_MIG = 0x4d494721 };

/* One GPU-instance profile row (facts A.3). */

struct fake_model {
    const char *name;
    uint64_t memory_mib;
    int cc_major, cc_minor;
    unsigned arch;  /* NVML_DEVICE_ARCH_* */
    unsigned brand; /* nvmlBrandType_t */
    unsigned pci_device_id;
    unsigned nvlinks; /* links the part has; 0: no NVLink */
    unsigned sms;
    unsigned mem_slices;     /* 8 or 4; 0: not MIG capable */
    unsigned compute_slices; /* 7 or 4 */
    const struct mig_profile *profiles;
    size_t n_profiles;
};

/* catalog.c */
const struct fake_model *fake_catalog_find(const char *name);
const struct mig_profile *fake_profile_by_id(const struct fake_model *m, unsigned id);
const struct mig_profile *fake_profile_by_index(const struct fake_model *m, unsigned index);
const struct mig_profile *fake_profile_by_name(const struct fake_model *m, const char *name);

struct fake_process {
    unsigned pid;
    uint64_t used_mib;
    unsigned sm_util; /* % of the SMs this process used (nvmlDeviceGetProcessUtilization) */
    unsigned gi_id;   /* INVALID_GPU_INSTANCE_ID outside MIG */
    unsigned ci_id;
};

struct fake_gi;

/* A compute instance; its address is also the MIG device handle. */
struct fake_ci {
    unsigned kind; /* FAKE_KIND_MIG */
    bool in_use;
    struct fake_gi *gi;
    unsigned id;
    unsigned profile_index; /* NVML_COMPUTE_INSTANCE_PROFILE_* */
    unsigned start, slices; /* compute slices within the GI */
};

struct fake_gpu;

struct fake_gi {
    bool in_use;
    struct fake_gpu *gpu;
    unsigned id;
    const struct mig_profile *profile;
    unsigned start; /* memory slice */
    struct fake_ci cis[FAKE_MAX_CI];
};

struct fake_mig_request {
    const struct mig_profile *profile;
    unsigned start; /* FAKE_NO_START: pick like CreateGpuInstance does */
};

/* What the NVML samplers read of a GPU (units in the names; FAKE_NOT_APPLICABLE: the GPU
 * has no such reading, and NVML answers NOT_SUPPORTED). */
#define FAKE_NOT_APPLICABLE UINT64_MAX
struct fake_telemetry {
    uint64_t gpu_util, mem_util, enc_util, dec_util;
    uint64_t temperature_c, memory_temp_c, power_mw, energy_mj;
    uint64_t sm_clock_mhz, mem_clock_mhz, pcie_replays;
    uint64_t ecc_corrected, ecc_uncorrected;
    uint64_t remapped_correctable, remapped_uncorrectable, remap_failed;
    uint64_t fb_reserved_mib; /* used framebuffer that belongs to no process */
    uint64_t nvlink_raw_kib;  /* TX + RX over every link; only GPUs with NVLinks */
    uint64_t vgpu_licensed;   /* 1/0 in a vGPU guest; FAKE_NOT_APPLICABLE elsewhere */
};

/* One key of `telemetry:`: its limit, where it goes in struct fake_telemetry and the factor
 * from the key's unit to the field's (power_w -> power_mw: 1000). */
struct fake_telemetry_key {
    const char *name; /* gpu_util, mem_util, temperature_c, power_w, sm_clock_mhz, ecc_... */
    uint64_t max;
    size_t offset;
    uint64_t scale;
};

struct fake_gpu {
    unsigned kind; /* FAKE_KIND_GPU */
    unsigned index;
    struct fake_model model; /* copy: an unknown model is filled from the machine file */
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE]; /* model.name points here */
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    unsigned numa_node;
    unsigned pci_domain, pci_bus;
    struct fake_process procs[FAKE_MAX_PROCS];
    size_t n_procs;
    bool lost; /* fallen off the bus (`gpu <n> lost` event line): queries fail GPU_IS_LOST */
    unsigned mig_current, mig_pending;
    struct fake_gi gis[FAKE_MAX_GI];
    unsigned links[NVML_NVLINK_MAX_LINKS]; /* peer GPU index, FAKE_LINK_SWITCH or _NONE */
    unsigned compute_mode;                 /* nvmlComputeMode_t, kept in the state file like MIG */
    bool mig_needs_reset; /* MIG mode changes stay pending until FAKE_NVML_REBOOT (a reboot) */
    /* unified memory (machine file `unified_memory: true`, GB10 / DGX Spark): no framebuffer
     * of its own, so nvmlDeviceGetMemoryInfo[_v2] answer NOT_SUPPORTED */
    bool unified_memory;
    /* telemetry (machine file `telemetry:`, `telemetry` event lines); has_telemetry false:
     * derived from whether processes run (fake_telemetry_of) */
    bool has_telemetry;
    struct fake_telemetry tele;
    bool fabric; /* attached to an NVLink fabric (machine file `fabric:`) */
    unsigned char fabric_cluster[16];
    unsigned fabric_clique;
};

struct fake_machine {
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    int cuda;
    struct fake_gpu *gpus; /* owned, n_gpus entries */
    size_t n_gpus;
    uint64_t signature; /* hash of the machine file: ties a state file to it */
    /* FAKE_NVML_EVENTS bytes applied by fake_live_refresh */
    off_t live_offset;
};

/* events.c: consumes the complete lines of path after *offset, calling fn on each until it
 * returns true (then returns true); a file shorter than *offset is read again from its start
 * (truncated, as tail -f); an over-long line is skipped. */
bool fake_lines_next(const char *path, off_t *offset, bool (*fn)(void *ctx, const char *line),
                     void *ctx);

/* telemetry.c. The keys of `telemetry:` and of `telemetry` lines, with their limits
 * (NULL-named at the end); the defaults of an explicit block; setting one key (-ENOENT
 * unknown, -ERANGE past its limit); a GPU's telemetry, explicit or derived (busy when
 * processes run). */
extern const struct fake_telemetry_key fake_telemetry_keys[];
extern const struct fake_telemetry fake_telemetry_defaults;
int fake_telemetry_set(struct fake_telemetry *t, const char *key, uint64_t v);
struct fake_telemetry fake_telemetry_of(const struct fake_gpu *g);
/* Applies the `telemetry`, `proc` and `gpu` lines appended to FAKE_NVML_EVENTS since the last
 * call (the caller holds the library lock). */
void fake_live_refresh(struct fake_machine *m);

/* machine.c: parses `path`; on failure *ret_m is untouched and err says file:line. */
int fake_machine_load(const char *path, struct fake_machine **ret_m, struct error *err);
void fake_machine_free(struct fake_machine *m);
uint64_t fake_hash(uint64_t h, const void *data, size_t len); /* FNV-1a; start with 0 */
/* "GPU-xxxxxxxx-xxxx-..." / "MIG-..." from two hash words. */
void fake_uuid_format(char *buf, size_t size, const char *prefix, uint64_t a, uint64_t b);

/* mig.c: MIG rules on one GPU. Return NVML codes; outputs written only on success. */
nvmlReturn_t fake_gi_create(struct fake_gpu *g, const struct mig_profile *p, unsigned start,
                            struct fake_gi **ret);
nvmlReturn_t fake_gi_destroy(struct fake_gi *gi);
unsigned fake_gi_remaining(const struct fake_gpu *g, const struct mig_profile *p);
/* The CI shape for a CI profile index inside gi; false when not offered there. */
bool fake_ci_shape(const struct fake_gi *gi, unsigned ci_index, unsigned *ret_slices,
                   unsigned *ret_align);
unsigned fake_ci_full_index(const struct fake_gi *gi);
unsigned fake_ci_placements(const struct fake_gi *gi, unsigned ci_index, unsigned *starts,
                            unsigned max);
unsigned fake_ci_sms(const struct fake_ci *ci);
nvmlReturn_t fake_ci_create(struct fake_gi *gi, unsigned ci_index, unsigned start,
                            struct fake_ci **ret);
nvmlReturn_t fake_ci_destroy(struct fake_ci *ci);
unsigned fake_ci_remaining(const struct fake_gi *gi, unsigned ci_index);
void fake_mig_clear(struct fake_gpu *g);
/* MIG devices in index order (by GI start, then CI start); returns the count. */
size_t fake_mig_devices(struct fake_gpu *g, struct fake_ci **out, size_t max);
void fake_mig_uuid(const struct fake_ci *ci, char *buf, size_t size);
void fake_mig_profile_name(const struct fake_ci *ci, char *buf, size_t size);

/* state.c: the MIG state file. */
/* nvml_caps.c: with FAKE_NVML_PROC_ROOT set, rewrites the driver's MIG capability files
 * (mig-minors and the per-instance access files) under it to match m. Best effort. */
void fake_caps_sync(const struct fake_machine *m);

int fake_state_save(const struct fake_machine *m, const char *path, struct error *err);
/* Applies the file to m; -ENOENT when absent, -ESTALE when written for another machine. */
int fake_state_load(struct fake_machine *m, const char *path, struct error *err);

/* nvml.c: entry and exit of every exported call. fake_enter() checks nvmlInit, re-reads the
 * state file when another process changed it, resolves `dev` into the GPU and, for a MIG
 * handle, its compute instance (only when ret_g is not NULL; then a NULL or foreign `dev` is
 * NVML_ERROR_INVALID_ARGUMENT), applies FAKE_NVML_FAIL, and returns with the library
 * lock held (and, with `mutate`, the state file lock) — only on NVML_SUCCESS. fake_leave()
 * saves a mutation that succeeded, drops the locks and returns rc. */
nvmlReturn_t fake_enter(const char *fn, nvmlDevice_t dev, bool mutate, struct fake_gpu **ret_g,
                        struct fake_ci **ret_ci);
nvmlReturn_t fake_leave(nvmlReturn_t rc);
/* FAKE_NVML_FAIL: true (and *rc set) when fn (on GPU `gpu`, -1: none) must fail. */
bool fake_fault(const char *fn, int gpu, nvmlReturn_t *rc);
struct fake_machine *fake_current(void); /* valid between fake_enter and fake_leave */
/* The GPU or MIG device a UUID names, or NULL. */
struct fake_gpu *fake_find_uuid(const char *uuid, struct fake_ci **ret_ci);

/* nvml_tools.c: NVML_GPU_INSTANCE_PROFILE_COUNT of the NVML m's CUDA version stands for
 * (profile indexes from there on are INVALID_ARGUMENT, before it a missing profile is
 * NOT_SUPPORTED). And the exported calls gpuslice does not make, so src/gpu/nvml.h does not
 * declare them: mig-parted's. */
unsigned fake_gi_profile_count(const struct fake_machine *m);
NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId,
                                                          nvmlDevice_t *device);
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);

/* NVIDIA's DRA driver (gpu-kubelet-plugin) reads the addressing mode (HMM/ATS) of every GPU
 * and does not start on a library without the symbol. NVML's versioned struct. */
typedef struct {
    unsigned int version;
    unsigned int value; /* NVML_DEVICE_ADDRESSING_MODE_NONE 0, _HMM 1, _ATS 2 */
} nvmlDeviceAddressingMode_t;
NVML_EXPORT nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device,
                                                     nvmlDeviceAddressingMode_t *mode);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* inventory.h: a snapshot of a node's GPUs as plain structs — what gpu/ reads through
 * NVML and what the pure layers (model, labels, mig planner) consume. No NVML types here:
 * this header may be included by pure modules. Building a snapshot is gpu/gpu.h's job. */
#ifndef GS_GPU_INVENTORY_H
#define GS_GPU_INVENTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* NVML's own buffer sizes bound these strings (NVML_DEVICE_UUID_V2_BUFFER_SIZE etc.). */
#define INV_UUID_MAX 96
#define INV_NAME_MAX 96
#define INV_PROFILE_MAX 32
#define INV_BUS_ID_MAX 32
#define INV_VERSION_MAX 80

#define INV_ID_NONE 0xFFFFFFFFu /* gi/ci id of a process or event outside MIG */

struct inv_process {
    unsigned pid;
    uint64_t used_mib;
    unsigned gi_id; /* INV_ID_NONE when not in a MIG device */
    unsigned ci_id;
};

struct inv_mig_device {
    unsigned index; /* MIG device index under its parent (nvmlDeviceGetMigDeviceHandleByIndex) */
    char uuid[INV_UUID_MAX];
    unsigned gi_id;
    unsigned ci_id;
    /* Profile ids as nvidia-smi shows them and create/placement calls take (GI info.id,
     * 19 for 1g on A100), not the NVML_GPU_INSTANCE_PROFILE_* index; for compute
     * instances id and NVML_COMPUTE_INSTANCE_PROFILE_* index coincide. */
    unsigned gi_profile_id;
    unsigned ci_profile_id;
    /* Canonical name: "1g.10gb", "1g.10gb+me", or "1c.2g.20gb" for a compute-instance
     * sub-slice (fewer compute slices than the GPU instance). */
    char profile[INV_PROFILE_MAX];
    uint64_t memory_mib;
    unsigned multiprocessors;
    unsigned placement_start; /* memory slices */
    unsigned placement_size;
    unsigned gi_slices, ci_slices; /* compute slices of the GPU / compute instance */
    /* engines the compute instance shares (NVML's CI profile shared* counts) */
    unsigned copy_engines, decoders, encoders, jpeg_engines, ofa_engines;
    /* The GPU-instance profile's own figures (nvmlGpuInstanceProfileInfo_t), which NVIDIA's
     * DRA driver publishes as the MIG device's capacities. */
    struct {
        uint64_t memory_mib; /* memorySizeMB (MiB despite the name) */
        unsigned multiprocessors, copy_engines, decoders, encoders, jpeg_engines, ofa_engines;
    } gi_profile;
};

struct inv_gpu {
    unsigned index;
    unsigned minor; /* /dev/nvidia<minor> */
    char uuid[INV_UUID_MAX];
    char name[INV_NAME_MAX]; /* "NVIDIA L20", "Tesla T4" */
    char brand[32];          /* "Tesla", "NVIDIA", ... */
    char architecture[32];   /* "turing", "ampere", "ada-lovelace", "hopper", ... */
    int cc_major, cc_minor;  /* CUDA compute capability */
    /* Total memory. memory_unknown is true where NVML answers the memory query
     * NOT_SUPPORTED (unified-memory GPUs such as GB10 / DGX Spark: no framebuffer of their
     * own); memory_mib is 0 then and must not be used as a size. A flag for "unknown" rather
     * than one for "known" so that zeroed, hand-built inventories read as known. */
    uint64_t memory_mib;
    bool memory_unknown;
    char pci_bus_id[INV_BUS_ID_MAX]; /* "00000000:3B:00.0" */
    uint32_t pci_device_id;          /* 0x20B010DE */
    int numa_node;                   /* -1 when unknown */
    bool mig_capable;
    bool mig_enabled;            /* current mode */
    bool mig_pending;            /* pending mode (differs from current until reset) */
    struct inv_mig_device *migs; /* owned; valid when mig_enabled */
    size_t n_migs;
    struct inv_process *procs; /* owned */
    size_t n_procs;
    /* NVLink fabric (multi-node NVLink): the cluster UUID ("" when not fabric-attached) and
     * the clique within it (nvmlDeviceGetGpuFabricInfo). */
    char fabric_cluster[40];
    unsigned fabric_clique;
};

/* PCIe path between two GPUs, NVML's nvmlGpuTopologyLevel_t order: smaller is closer. */
enum inv_pcie_level {
    INV_PCIE_SAME = 0,        /* same board (NVML_TOPOLOGY_INTERNAL) */
    INV_PCIE_SINGLE = 10,     /* one PCIe switch */
    INV_PCIE_MULTIPLE = 20,   /* several switches, no host bridge */
    INV_PCIE_HOSTBRIDGE = 30, /* same host bridge */
    INV_PCIE_NODE = 40,       /* same NUMA node, across host bridges */
    INV_PCIE_SYSTEM = 50,     /* across NUMA nodes (SMP interconnect) */
};

struct inv_link {
    unsigned nvlinks; /* active NVLink links between the pair (0 = none) */
    enum inv_pcie_level pcie;
};

struct inv_inventory {
    char driver_version[INV_VERSION_MAX]; /* "570.158.01" */
    int cuda_version;                     /* 12080 = 12.8 */
    struct inv_gpu *gpus;                 /* owned, by index */
    size_t n_gpus;
    /* n_gpus × n_gpus, row-major: links[i * n_gpus + j]. Owned; NULL when n_gpus == 0. */
    struct inv_link *links;
};

/* Frees the contents and the struct; accepts NULL and half-built snapshots. */
void inv_free(struct inv_inventory *inv);

/* Deep copy; returns NULL on out of memory. */
struct inv_inventory *inv_dup(const struct inv_inventory *inv);

static inline const struct inv_link *inv_link_between(const struct inv_inventory *inv, size_t a,
                                                      size_t b)
{
    return &inv->links[a * inv->n_gpus + b];
}

#endif

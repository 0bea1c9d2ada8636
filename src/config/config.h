/* SPDX-License-Identifier: Apache-2.0 */
/* config: the device plugin configuration, `version: v1`, compatible with NVIDIA's schema.
 * Parses YAML or JSON with source positions, validates, applies defaults and the
 * flag > env > file > default precedence, and selects among named configs (a ConfigMap
 * mount directory). Pure apart from reading the config files; never logs. */
#ifndef GS_CONFIG_H
#define GS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* ---- the schema as plain structs ------------------------------------------------------------
 * Every string is owned by the struct that holds it; cfg_free() releases everything.
 * `pos` fields give where an item came from (line/col 0 when it came from a default,
 * a flag or an env var). */

struct cfg_pos {
    unsigned line; /* 1-based, 0 = not from a file */
    unsigned col;  /* 1-based */
};

enum cfg_mig_strategy { CFG_MIG_NONE = 0, CFG_MIG_SINGLE, CFG_MIG_MIXED };
enum cfg_sharing_strategy { CFG_SHARING_NONE = 0, CFG_SHARING_TIME_SLICING, CFG_SHARING_MPS };
enum cfg_device_id_strategy { CFG_DEVICE_ID_UUID = 0, CFG_DEVICE_ID_INDEX };
enum cfg_alloc_policy { CFG_ALLOC_DISTRIBUTED = 0, CFG_ALLOC_PACKED };
enum cfg_discovery { CFG_DISCOVERY_AUTO = 0, CFG_DISCOVERY_NVML, CFG_DISCOVERY_TEGRA };

/* deviceListStrategy is a set: a bit per strategy. */
#define CFG_LIST_ENVVAR (1u << 0)
#define CFG_LIST_VOLUME_MOUNTS (1u << 1)
#define CFG_LIST_CDI_ANNOTATIONS (1u << 2)
#define CFG_LIST_CDI_CRI (1u << 3)

struct cfg_plugin_flags {
    bool pass_device_specs;                      /* false */
    unsigned device_list_strategies;             /* CFG_LIST_ENVVAR */
    enum cfg_device_id_strategy device_id_strategy; /* uuid */
    char *cdi_annotation_prefix;                 /* "cdi.k8s.io/" */
    char *nvidia_ctk_path;                       /* "/usr/bin/nvidia-ctk" */
    char *container_driver_root;                 /* "/driver-root" */
    enum cfg_alloc_policy shared_devices_allocation_policy; /* distributed */
};

struct cfg_gfd_flags {
    bool oneshot;
    bool no_timestamp;
    int64_t sleep_interval_ms; /* 60000; -1 = "infinite" */
    char *output_file;         /* "/etc/kubernetes/node-feature-discovery/features.d/gfd" */
    char *machine_type_file;   /* "/sys/class/dmi/id/product_name" */
    bool use_node_feature_api; /* true */
};

struct cfg_flags {
    enum cfg_mig_strategy mig_strategy; /* none */
    bool fail_on_init_error;            /* true */
    char *mps_root;                     /* NULL */
    char *nvidia_driver_root;           /* "/" */
    char *nvidia_dev_root;              /* NULL = same as driver root */
    bool gdrcopy_enabled, gds_enabled, mofed_enabled;
    enum cfg_discovery device_discovery_strategy;
    struct cfg_plugin_flags plugin;
    struct cfg_gfd_flags gfd;
};

/* resources.gpus[] / resources.mig[]: which devices a resource name covers. NVIDIA parses
 * and ignores these; we honour them. `pattern` is a glob with '*' (anchored): for gpus it
 * matches the product name ("NVIDIA L20", "*T4*"), for mig the profile ("1g.10gb"). */
struct cfg_resource_pattern {
    char *pattern;
    char *name; /* full resource name, "nvidia.com/" prepended when no '/' was given */
    struct cfg_pos pos;
};

enum cfg_devices_kind { CFG_DEVICES_ALL = 0, CFG_DEVICES_COUNT, CFG_DEVICES_LIST };
enum cfg_device_ref_kind {
    CFG_DEVREF_GPU_INDEX = 0, /* 0 */
    CFG_DEVREF_MIG_INDEX,     /* "0:1" = GPU 0, MIG device 1 */
    CFG_DEVREF_GPU_UUID,      /* "GPU-..." */
    CFG_DEVREF_MIG_UUID,      /* "MIG-..." or legacy "MIG-GPU-.../gi/ci" */
};

struct cfg_device_ref {
    enum cfg_device_ref_kind kind;
    unsigned gpu_index; /* GPU_INDEX, MIG_INDEX */
    unsigned mig_index; /* MIG_INDEX */
    char *uuid;         /* GPU_UUID, MIG_UUID */
    struct cfg_pos pos;
};

/* sharing.{timeSlicing,mps}.resources[] */
struct cfg_replicated_resource {
    char *name;   /* full resource name this entry shares ("nvidia.com/gpu") */
    char *rename; /* full name to advertise instead, or NULL */
    enum cfg_devices_kind devices_kind;
    unsigned devices_count;         /* CFG_DEVICES_COUNT: the first N matching devices */
    struct cfg_device_ref *devices; /* CFG_DEVICES_LIST */
    size_t n_devices;
    unsigned replicas; /* ≥ 1; 1 means "not shared" (NVIDIA requires ≥ 2) */
    struct cfg_pos pos;
};

struct cfg_sharing {
    bool rename_by_default;
    /* Effective value after defaults: time-slicing defaults to false, MPS to true. */
    bool fail_requests_greater_than_one;
    struct cfg_replicated_resource *resources;
    size_t n_resources;
};

struct cfg_imex {
    unsigned *channel_ids; /* only [] or [0] are valid */
    size_t n_channel_ids;
    bool required;
};

struct cfg_config {
    char *version; /* "v1" */
    struct cfg_flags flags;
    struct cfg_resource_pattern *gpus; /* empty = the default (* -> nvidia.com/gpu) */
    size_t n_gpus;
    struct cfg_resource_pattern *mig;  /* empty = defaults derived from the MIG strategy */
    size_t n_mig;
    enum cfg_sharing_strategy sharing_strategy; /* which of timeSlicing / mps was given */
    struct cfg_sharing sharing;                 /* the one that was given */
    struct cfg_imex imex;
    char *source_path; /* file the config came from, or NULL for built-in defaults */
    char *config_name; /* named config chosen from a directory, or NULL */
};

/* Frees the contents and the struct; accepts NULL. */
void cfg_free(struct cfg_config *cfg);

/* A config holding only the built-in defaults (NVIDIA's). Owned by the caller. */
int cfg_new_default(struct cfg_config **ret_cfg, struct error *err);

#endif

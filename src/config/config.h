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
/* The sharing modes; what each one means is its row in cfg_sharing_modes (sharing.c). */
enum cfg_sharing_strategy {
    CFG_SHARING_NONE = 0,
    CFG_SHARING_TIME_SLICING,
    CFG_SHARING_MPS,
    CFG_SHARING_FRACTIONS,
    CFG_SHARING__N /* the number of modes, not a mode */
};
enum cfg_device_id_strategy { CFG_DEVICE_ID_UUID = 0, CFG_DEVICE_ID_INDEX };
enum cfg_alloc_policy { CFG_ALLOC_DISTRIBUTED = 0, CFG_ALLOC_PACKED };
enum cfg_discovery { CFG_DISCOVERY_AUTO = 0, CFG_DISCOVERY_NVML, CFG_DISCOVERY_TEGRA };

/* deviceListStrategy is a set: a bit per strategy. */
#define CFG_LIST_ENVVAR (1u << 0)
#define CFG_LIST_VOLUME_MOUNTS (1u << 1)
#define CFG_LIST_CDI_ANNOTATIONS (1u << 2)
#define CFG_LIST_CDI_CRI (1u << 3)

struct cfg_plugin_flags {
    bool pass_device_specs;                                 /* false */
    unsigned device_list_strategies;                        /* CFG_LIST_ENVVAR */
    enum cfg_device_id_strategy device_id_strategy;         /* uuid */
    char *cdi_annotation_prefix;                            /* "cdi.k8s.io/" */
    char *nvidia_ctk_path;                                  /* "/usr/bin/nvidia-ctk" */
    char *container_driver_root;                            /* "/driver-root" */
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
    /* gpuslice's MPS extension (docs/mps.md): per-client limits instead of equal shares;
     * 0 = NVIDIA's (memory / replicas, 100 / replicas) */
    uint64_t memory_limit_mib;
    unsigned thread_percentage;
    struct cfg_pos pos;
    /* where rename, devices, replicas and an MPS limit were written (line 0: not in a file) */
    struct cfg_pos rename_pos, devices_pos, replicas_pos, limit_pos;
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
    struct cfg_resource_pattern *mig; /* empty = defaults derived from the MIG strategy */
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

/* ---- limits: anything a user can make grow is bounded ------------------------------------- */

#define CFG_MAX_INPUT_BYTES (4u * 1024u * 1024u) /* config file size */
/* GFD's --sleep-interval default (60 s): how often node labels are rewritten. */
#define CFG_GFD_SLEEP_INTERVAL_MS 60000
#define CFG_MAX_LIST_ITEMS 100000u /* resources, patterns, devices per entry */
#define CFG_MAX_REPLICAS 4096u     /* per device, time-slicing */
#define CFG_MAX_MPS_REPLICAS 48u   /* MPS clients per GPU (compute cap >= 7.5) */
#define CFG_MAX_DIAGS 1000u        /* diagnostics kept per load */
#define CFG_NAME_MAX 253u          /* ConfigMap key length */
#define CFG_RESOURCE_NAME_MAX 63u  /* fully-qualified resource name */

/* ---- diagnostics: every problem found, not only the first --------------------------------- */

enum cfg_severity { CFG_SEV_ERROR = 0, CFG_SEV_WARNING };

struct cfg_diag {
    enum cfg_severity severity;
    char *file;    /* where the config came from ("config.yaml", "--mig-strategy"), or NULL */
    unsigned line; /* 1-based; 0 when the problem has no position */
    unsigned col;
    char *path;    /* field path ("sharing.timeSlicing.resources[0].replicas"), or NULL */
    char *value;   /* the offending value as written, or NULL */
    char *message; /* what is wrong and how to fix it */
};

/* A list of diagnostics, filled by cfg_parse_buffer()/cfg_load(). Zero-initialise it
 * (CFG_DIAGS_INIT); cfg_diags_release() frees the contents. Holds at most CFG_MAX_DIAGS
 * items; `truncated` says more were found. */
struct cfg_diags {
    struct cfg_diag *items; /* owned */
    size_t n_items;
    size_t n_errors;
    size_t n_warnings;
    bool truncated;
};

#define CFG_DIAGS_INIT                                                                             \
    {                                                                                              \
        NULL, 0, 0, 0, false                                                                       \
    }

void cfg_diags_release(struct cfg_diags *diags);
/* The diagnostic path of the warning that a ConfigMap directory with several configs fell
 * back to the built-in defaults because nothing named one (the daemon posts an Event). */
#define CFG_DIAG_NO_CONFIG_NAME "configName"
/* Orders the diagnostics by position (line, column; errors first on a tie). */
void cfg_diags_sort(struct cfg_diags *diags);

/* ---- ConfigMap manifests ------------------------------------------------------------------ */

/* One data key of a ConfigMap manifest, and where its value starts in the manifest. */
struct cfg_manifest_config {
    char *name; /* the data key: the config's name (owned) */
    char *text; /* the value (owned, NUL-terminated) */
    size_t len;
    unsigned line, col; /* 1-based start of the value's text in the manifest */
    bool block;         /* a block scalar (|, >): its lines map one to one */
    bool not_a_string;  /* the value is a mapping or list, not the config text */
};

struct cfg_manifest {
    struct cfg_manifest_config *configs; /* owned, in file order */
    size_t n_configs;
};

/* 1 when data is a ConfigMap manifest (kind: ConfigMap, a kind: List of them, or several
 * documents), with its data keys in *ret (cfg_manifest_release()); 0 when it is not one
 * (a plain config: parse it as such); -ENOMEM. */
int cfg_manifest_parse(const char *data, size_t len, struct cfg_manifest *ret, struct error *err);
void cfg_manifest_release(struct cfg_manifest *m);
/* Moves the positions of diagnostics found in c->text to the manifest (file replaces each
 * diagnostic's file name when not NULL). */
void cfg_manifest_place(const struct cfg_manifest_config *c, const char *file,
                        struct cfg_diags *diags);
/* One line, no newline:
 *   "config.yaml:12:7: sharing.timeSlicing.resources[0].replicas: 0 is not a valid ..."
 * Warnings carry "warning: " after the position. */
int cfg_diag_format(const struct cfg_diag *d, struct strbuf *out);
/* Appends every diagnostic of the given severity, one per line. */
int cfg_diags_format(const struct cfg_diags *diags, enum cfg_severity severity, struct strbuf *out);

/* ---- names ------------------------------------------------------------------------------- */

/* true when `name` is a valid fully-qualified extended resource name ("nvidia.com/gpu"):
 * at most 63 characters, a domain prefix, and after the '/' a DNS-1123 subdomain. On false,
 * err says why and what a valid name looks like. */
bool cfg_resource_name_valid(const char *name, struct error *err);
/* true when `name` may be a ConfigMap key / named config: [-._a-zA-Z0-9]+, at most 253
 * characters, not starting with '.' and without "..". Such names never become paths
 * otherwise. */
bool cfg_config_name_valid(const char *name, struct error *err);
/* resources.gpus[]/mig[] pattern matching: a '*'-glob anchored at both ends ("*T4*",
 * "1g.10gb"); no other character is special. */
bool cfg_pattern_match(const char *pattern, const char *s);
/* The resource name a whole GPU of product `product_name` is advertised under: the name of
 * the first resources.gpus pattern that matches, else NVIDIA's default "nvidia.com/gpu".
 * Borrowed from cfg (or static). */
const char *cfg_gpu_resource_name(const struct cfg_config *cfg, const char *product_name);
/* Parses one `devices` list entry written as a string ("0", "0:1", "GPU-<uuid>",
 * "MIG-<uuid>", "MIG-GPU-<uuid>/<gi>/<ci>"). On success fills *ret (ret->uuid owned by the
 * caller, free it with free()). */
int cfg_device_ref_parse(const char *s, struct cfg_device_ref *ret, struct error *err);
/* Go duration ("60s", "1m30s", "500ms"), a plain number of nanoseconds, or "infinite"
 * (-1). Result in milliseconds, truncated. */
int cfg_duration_parse_ms(const char *s, int64_t *ret_ms, struct error *err);

/* ---- flags and environment variables (NVIDIA's names) ------------------------------------ */

enum cfg_value_type {
    CFG_VAL_STRING = 0,
    CFG_VAL_BOOL,
    CFG_VAL_ENUM,        /* one of `allowed` */
    CFG_VAL_ENUM_LIST,   /* comma-separated subset of `allowed` */
    CFG_VAL_DURATION,    /* cfg_duration_parse_ms() */
    CFG_VAL_INT_LIST,    /* comma-separated unsigned integers */
    CFG_VAL_STRING_LIST, /* comma-separated strings */
};

enum cfg_option_id {
    CFG_OPT_MIG_STRATEGY = 0,
    CFG_OPT_FAIL_ON_INIT_ERROR,
    CFG_OPT_DRIVER_ROOT,
    CFG_OPT_DEV_ROOT,
    CFG_OPT_PASS_DEVICE_SPECS,
    CFG_OPT_DEVICE_LIST_STRATEGY,
    CFG_OPT_DEVICE_ID_STRATEGY,
    CFG_OPT_GDRCOPY_ENABLED,
    CFG_OPT_GDS_ENABLED,
    CFG_OPT_MOFED_ENABLED,
    CFG_OPT_CDI_ANNOTATION_PREFIX,
    CFG_OPT_NVIDIA_CDI_HOOK_PATH,
    CFG_OPT_CONTAINER_DRIVER_ROOT,
    CFG_OPT_MPS_ROOT,
    CFG_OPT_SHARED_DEVICES_ALLOCATION_POLICY,
    CFG_OPT_DEVICE_DISCOVERY_STRATEGY,
    CFG_OPT_IMEX_CHANNEL_IDS,
    CFG_OPT_IMEX_REQUIRED,
    CFG_OPT_KUBELET_SOCKET,    /* no config key */
    CFG_OPT_CONFIG_FILE,       /* no config key */
    CFG_OPT_CDI_FEATURE_FLAGS, /* no config key */
    CFG_OPT_CDI_DISABLE_HOOKS, /* no config key */
    CFG_OPT_GFD_ONESHOT,
    CFG_OPT_GFD_NO_TIMESTAMP,
    CFG_OPT_GFD_SLEEP_INTERVAL,
    CFG_OPT_GFD_OUTPUT_FILE,
    CFG_OPT_GFD_MACHINE_TYPE_FILE,
    CFG_OPT_USE_NODE_FEATURE_API,
    CFG_OPT_STRICT_NVIDIA_SCHEMA, /* no config key */
    CFG_OPT__COUNT
};

/* Which binary accepts an option: the device plugin's flags, GPU feature discovery's. */
#define CFG_BIN_PLUGIN (1u << 0)
#define CFG_BIN_GFD (1u << 1)

/* One row of the static option table: a flag with its aliases, its env vars, the config
 * key it overrides (NULL: command-line only), its type and default. */
struct cfg_option {
    enum cfg_option_id id;
    const char *flags[3];   /* without "--", NULL-terminated; flags[0] is the main name */
    const char *envs[4];    /* NULL-terminated, first match wins */
    const char *config_key; /* "flags.migStrategy", or NULL */
    enum cfg_value_type type;
    const char *const *allowed; /* ENUM / ENUM_LIST values, NULL-terminated */
    const char *default_value;  /* as text, for help output */
    unsigned binaries;          /* CFG_BIN_* */
    const char *help;
};

/* The whole table (static, borrowed). */
const struct cfg_option *cfg_options(size_t *ret_n);
/* Finds an option by flag ("mig-strategy", "--mig-strategy", an alias) or env name, among
 * those accepted by `binaries`. NULL when unknown. *ret_is_env tells which it was. */
const struct cfg_option *cfg_option_find(const char *flag_or_env, unsigned binaries,
                                         bool *ret_is_env);

/* Values set from the command line and the environment, to overlay on a config file.
 * Precedence: a flag beats an env var, whatever the order they are set in; both beat the
 * file, which beats the built-in default. Zero-init with cfg_overrides_init(). */
struct cfg_override {
    bool set;
    bool from_flag;
    char *value;  /* owned, as given */
    char *source; /* owned: "--mig-strategy" or "MIG_STRATEGY" */
};

struct cfg_overrides {
    unsigned binaries; /* which binary's options are accepted */
    struct cfg_override v[CFG_OPT__COUNT];
};

void cfg_overrides_init(struct cfg_overrides *o, unsigned binaries);
void cfg_overrides_release(struct cfg_overrides *o);
/* Sets one value by flag name ("--mig-strategy", "mig-strategy", an alias) or env name
 * ("MIG_STRATEGY"). The value is checked now: a bad one gives -EINVAL with a message naming
 * the flag or env var and the allowed values. -ENOENT for an unknown name. */
int cfg_overrides_set(struct cfg_overrides *o, const char *flag_or_env_name, const char *value,
                      struct error *err);
/* Reads every env var of the table (for o->binaries) through getenv_fn; empty values count
 * as unset. Stops at the first bad value. */
int cfg_overrides_from_env(struct cfg_overrides *o, const char *(*getenv_fn)(const char *),
                           struct error *err);
/* The value set for an option, or NULL. Borrowed from o. */
const char *cfg_overrides_get(const struct cfg_overrides *o, enum cfg_option_id id);
/* Writes the set values into cfg. Values were checked when set; only -ENOMEM is possible. */
int cfg_overrides_apply(const struct cfg_overrides *o, struct cfg_config *cfg, struct error *err);

/* ---- parsing, named configs, loading ------------------------------------------------------ */

/* Parses YAML or JSON text (`display_name` is what diagnostics call it, e.g. the file
 * name), applies defaults and then `overrides` (may be NULL), and validates. Every problem
 * goes to `diags` (may be NULL). Returns 0 and sets *ret_cfg (owned by the caller) when
 * there is no error (warnings are fine); -EINVAL when diags got at least one error (err
 * says how many); -E2BIG when larger than CFG_MAX_INPUT_BYTES; -ENOMEM. */
int cfg_parse_buffer(const char *data, size_t len, const char *display_name,
                     const struct cfg_overrides *overrides, struct cfg_config **ret_cfg,
                     struct cfg_diags *diags, struct error *err);

/* Fallback strategies when no name is given (NVIDIA's config-manager): */
enum cfg_fallback {
    CFG_FALLBACK_NAMED = 0, /* the key called "default" */
    CFG_FALLBACK_SINGLE,    /* the only key */
    CFG_FALLBACK_EMPTY,     /* built-in defaults */
};

int cfg_fallback_parse(const char *s, enum cfg_fallback *ret);

struct cfg_load_options {
    const char *path;         /* a config file or a ConfigMap directory; NULL = defaults */
    const char *config_name;  /* explicit name (node label), or NULL */
    const char *default_name; /* used when no explicit name, or NULL */
    const enum cfg_fallback *fallbacks; /* tried in order after the default name */
    size_t n_fallbacks;
    const struct cfg_overrides *overrides; /* may be NULL */
};

/* Lists the named configs of a ConfigMap directory: regular files (symlinks followed),
 * skipping dot entries ("..data", ".hidden") and names that are not valid ConfigMap keys.
 * Sorted. *ret_names is an owned strv. -ENOTDIR when dir is not a directory. */
int cfg_list_names(const char *dir, char ***ret_names, struct error *err);

/* Picks the named config in `dir` per opts (explicit > default > fallbacks). On success
 * *ret_name is the chosen key (owned), or NULL for the "empty" fallback. -ENOENT with the
 * available names when the explicit/default name does not exist or nothing matched;
 * -EINVAL for a name that is not a valid ConfigMap key. */
int cfg_select_name(const char *dir, const struct cfg_load_options *opts, char **ret_name,
                    struct error *err);

/* Loads the effective config: select (when opts->path is a directory), read, parse, apply
 * overrides, validate. A file path is a config of its own: an explicit config_name must
 * then equal the file's base name (a ConfigMap key mounted as a file), otherwise -ENOENT;
 * default_name and fallbacks do not apply to a file. Returns 0 and *ret_cfg (owned) when
 * valid; -EINVAL with every problem in diags; other negative errno with err set for I/O
 * and selection failures. */
int cfg_load(const struct cfg_load_options *opts, struct cfg_config **ret_cfg,
             struct cfg_diags *diags, struct error *err);

/* ---- output ------------------------------------------------------------------------------ */

enum cfg_format { CFG_FORMAT_YAML = 0, CFG_FORMAT_JSON };

int cfg_format_parse(const char *s, enum cfg_format *ret);
/* Appends the config, every field with its effective value, as YAML or JSON. The output
 * parses back to the same config. */
int cfg_print(const struct cfg_config *cfg, enum cfg_format format, struct strbuf *out);
/* One line: "config 'l20' (file.yaml): time-slicing, nvidia.com/gpu x8" */
int cfg_summary(const struct cfg_config *cfg, struct strbuf *out);

/* Names for enum values (static strings). */
const char *cfg_mig_strategy_name(enum cfg_mig_strategy s);
/* cfg_sharing_mode(s)->name */
const char *cfg_sharing_strategy_name(enum cfg_sharing_strategy s);

/* ---- sharing modes: one descriptor each (sharing.c, docs/internals/sharing.md) ------------ */

/* What Allocate adds for a shared device of a mode, besides the devices (model/allocate.c
 * keeps one function per value). */
enum cfg_sharing_env {
    CFG_SHARING_ENV_NONE = 0,
    CFG_SHARING_ENV_MPS, /* the resource's MPS control daemon: pipe and log dirs, shm mount */
};

/* One sharing mode: everything that differs between modes, in one row, so that code asks
 * the row (looked up once per config or resource: cfg_sharing_mode, model_resource.mode)
 * instead of testing the enum. Adding a mode is a row, the mode's own files and the docs. */
struct cfg_sharing_mode {
    enum cfg_sharing_strategy strategy;
    const char *name;       /* "none", "time-slicing", "mps": GFD's sharing-strategy label
                             * value, logs, plans, `config show` */
    const char *title;      /* in messages: "time-slicing", "MPS" */
    const char *config_key; /* the block under sharing: ("timeSlicing", "mps"); NULL for none */
    unsigned precedence;    /* when several blocks are written NVIDIA keeps the highest */
    /* the replica rule */
    unsigned max_replicas;         /* per config entry, checked while parsing */
    const char *max_replicas_why;  /* after "at most N are allowed": "" or why */
    bool replicas_by_client_limit; /* also at most the GPU's MPS client limit (model) */
    /* checks */
    bool fail_requests_default;    /* failRequestsGreaterThanOne when the block leaves it out */
    bool warn_fail_requests_false; /* warn that N replicas then give up to N devices */
    bool client_limits;            /* entries may set memoryLimit / threadPercentage */
    bool on_mig;                   /* MIG devices may be shared, migStrategy mixed used */
    bool needs_mps_root;           /* flags.mpsRoot is required */
    /* DRA's opaque GpuConfig / MigDeviceConfig (NVIDIA's resource.nvidia.com/v1beta1) */
    const char *dra_name;       /* sharing.strategy: "TimeSlicing", "MPS"; NULL for none */
    const char *dra_config_key; /* its settings block: "timeSlicingConfig", "mpsConfig" */
    bool dra_config_on_mig;     /* a MigDeviceConfig may carry that block */
    bool dra_time_slice;        /* prepare sets a whole GPU's time-slice interval */
    /* DRA consumable capacity (docs/dra.md, fractions): dra-plugin publishes the entries' whole
     * GPUs as shareable by memory (allowMultipleAllocations, capacity.memory with a request
     * policy); entries name GPUs, not replicas (replicas optional and 1, no rename), so the
     * device plugin serves those GPUs whole */
    bool dra_shareable;
    /* effects */
    bool control_daemon; /* one MPS control daemon per resource (daemon/mps.c): devices healthy
                          * while it answers, GFD's mps.capable=true */
    enum cfg_sharing_env alloc_env;
};

/* The row of s (the none row for a value out of range); static, never NULL. */
const struct cfg_sharing_mode *cfg_sharing_mode(enum cfg_sharing_strategy s);
/* True for every mode but none. */
bool cfg_sharing_mode_shares(const struct cfg_sharing_mode *m);
/* The sharing mode a DRA config's sharing.strategy names ("TimeSlicing"), or NULL. */
const struct cfg_sharing_mode *cfg_sharing_mode_by_dra_name(const char *name);

#endif

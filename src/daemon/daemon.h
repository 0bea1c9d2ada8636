/* SPDX-License-Identifier: Apache-2.0 */
/* daemon: `gpuslice device-plugin` and `gpuslice dra-plugin` — flags (NVIDIA-compatible), the
 * XID health policy and the one event loop whose units (docs/internals/daemon.md) build the
 * node state from config + inventory and serve it: the device-plugin API, DRA, labels, MIG,
 * MPS, metrics, health recovery. The only module besides cli/ that logs above debug. */
#ifndef GS_DAEMON_H
#define GS_DAEMON_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "config/config.h"
#include "gpu/gpu.h"

#define DAEMON_DEFAULT_PLUGIN_DIR "/var/lib/kubelet/device-plugins"
#define DAEMON_REGISTER_TIMEOUT_MS 5000
#define DAEMON_DEFAULT_INVENTORY_INTERVAL_MS 30000
#define DAEMON_DEFAULT_RETIRE_CHECK_MS 5000
#define DAEMON_DEFAULT_HEALTH_RECOVERY_MS (5 * 60 * 1000)
#define DAEMON_DEFAULT_MIG_DRAIN_TIMEOUT_MS (5 * 60 * 1000)
#define DAEMON_DEFAULT_MPS_PROBE_MS 10000
#define DAEMON_DEFAULT_METRICS_SAMPLE_MS 10000

/* Who runs the MPS control daemons: another container (NVIDIA's chart), or this process. */
enum daemon_mps_control { DAEMON_MPS_EXTERNAL = 0, DAEMON_MPS_INTERNAL };
#define DAEMON_DEFAULT_NODE_LABEL "nvidia.com/device-plugin.config"
#define DAEMON_DEFAULT_POD_RESOURCES_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
/* Config file events are applied this long after the first one (kubelet's ConfigMap swap is
 * several events). */
#define DAEMON_CONFIG_DEBOUNCE_MS 100
#define DAEMON_MAX_FALLBACKS 8

/* ---- options ------------------------------------------------------------------------------ */

/* Parsed command line + environment. Strings borrow from argv/environ. */
/* Where the daemon writes the node's labels (--labels). */
enum daemon_labels_mode {
    DAEMON_LABELS_OFF = 0,      /* default: drop-in, GFD runs beside us */
    DAEMON_LABELS_NFD_FILE,     /* NFD local-source file (--labels-output-file) */
    DAEMON_LABELS_NODE_FEATURE, /* nfd.k8s-sigs.io NodeFeature object */
    DAEMON_LABELS_NODE,         /* the Node's own labels (no NFD needed) */
};

/* `gpuslice dra-plugin` (NVIDIA's gpu-kubelet-plugin flags and env vars, facts/dra.md §2):
 * the DRA feature serves the node's GPUs as ResourceSlices instead of the device-plugin API.
 * Strings borrow from argv/environ. */
struct daemon_dra_options {
    bool enabled;                         /* dra-plugin: DRA on, the device-plugin API off */
    const char *namespace;                /* --namespace / NAMESPACE: "default" */
    const char *cdi_root;                 /* --cdi-root / CDI_ROOT: "/etc/cdi" */
    const char *host_driver_root;         /* --nvidia-driver-root / NVIDIA_DRIVER_ROOT: "/" */
    const char *container_driver_root;    /* --container-driver-root / DRIVER_ROOT_CTR_PATH */
    const char *cdi_hook_path;            /* --nvidia-cdi-hook-path / NVIDIA_CDI_HOOK_PATH */
    const char *image_name;               /* --image-name / IMAGE_NAME: accepted, unused */
    const char *registrar_dir;            /* --kubelet-registrar-directory-path */
    const char *plugins_dir;              /* --kubelet-plugins-directory-path */
    int64_t healthcheck_port;             /* --healthcheck-port / HEALTHCHECK_PORT: -1 (off) */
    const char *feature_gates;            /* --feature-gates / FEATURE_GATES: accepted */
    const char *nvidia_smi;               /* --nvidia-smi / GPUSLICE_NVIDIA_SMI */
    int64_t kube_api_qps, kube_api_burst; /* accepted (the client has no rate limiter) */
};

#define DAEMON_DRA_DEFAULT_CDI_ROOT "/etc/cdi"
#define DAEMON_DRA_DEFAULT_REGISTRAR_DIR "/var/lib/kubelet/plugins_registry"
#define DAEMON_DRA_DEFAULT_PLUGINS_DIR "/var/lib/kubelet/plugins"

struct daemon_options {
    struct daemon_dra_options dra; /* dra-plugin only */
    const char *config_file;       /* --config-file / CONFIG_FILE, NULL = built-in defaults */
    const char *config_name;       /* --config-name / CONFIG_NAME */
    const char *default_config;    /* --default-config / DEFAULT_CONFIG */
    enum cfg_fallback fallbacks[DAEMON_MAX_FALLBACKS]; /* --fallback-strategies /
                                                        * FALLBACK_STRATEGIES, default
                                                        * named,single,empty */
    size_t n_fallbacks;
    const char *node_label;           /* --node-label / NODE_LABEL (DAEMON_DEFAULT_NODE_LABEL) */
    const char *kubeconfig;           /* --kubeconfig / KUBECONFIG; NULL: in-cluster */
    const char *node_name;            /* NODE_NAME: the node whose label selects the config */
    const char *kube_api_server;      /* --kube-api-server / GPUSLICE_KUBE_API_SERVER (tests) */
    int64_t inventory_interval_ms;    /* --inventory-interval / INVENTORY_INTERVAL, 0 = never */
    bool inventory_interval_set;      /* given by flag or env (daemon_inventory_interval_ms) */
    int64_t retire_check_ms;          /* --retire-check-interval / RETIRE_CHECK_INTERVAL */
    const char *pod_resources_socket; /* --pod-resources-socket / POD_RESOURCES_SOCKET */
    const char *plugin_dir;           /* --device-plugin-dir, default DAEMON_DEFAULT_PLUGIN_DIR */
    const char *kubelet_socket; /* --kubelet-socket / KUBELET_SOCKET; NULL = <dir>/kubelet.sock,
                                 * "" = do not register */
    const char *disable_healthchecks;    /* DP_DISABLE_HEALTHCHECKS */
    const char *enable_healthchecks;     /* DP_ENABLE_HEALTHCHECKS */
    struct gpu_nvml_options nvml;        /* --nvml-library, --driver-root, ... */
    bool keep_serving_valid;             /* --keep-serving-valid */
    enum daemon_labels_mode labels;      /* --labels / GPUSLICE_LABELS */
    const char *labels_output_file;      /* --labels-output-file / GFD_OUTPUT_FILE (nfd-file) */
    const char *labels_namespace;        /* NodeFeature namespace: NAMESPACE, else "default" */
    const char *pod_name;                /* POD_NAME: owner of the NodeFeature */
    const char *metrics_address;         /* --metrics-address / GPUSLICE_METRICS_ADDRESS */
    int64_t metrics_sample_ms;           /* --metrics-sample-interval, default 10s, 0: off */
    const char *host_proc;               /* --host-proc / GPUSLICE_HOST_PROC: the host's /proc */
    int64_t health_recovery_ms;          /* --health-recovery-after, 0 = never (NVIDIA's) */
    const char *cdi_spec_dir;            /* --cdi-spec-dir / CDI_SPEC_DIR; NULL: /var/run/cdi */
    const char *mig_config_file;         /* --mig-config-file / MIG_CONFIG_FILE; NULL: off */
    enum daemon_mps_control mps_control; /* --mps-control / GPUSLICE_MPS_CONTROL_MODE */
    const char *mps_control_binary;      /* --mps-control-binary / GPUSLICE_MPS_CONTROL */
    int64_t mps_probe_interval_ms;       /* --mps-probe-interval, default 10s, 0: off */
    bool mps_mount_shm;                  /* --mps-mount-shm / GPUSLICE_MPS_MOUNT_SHM (internal) */
    int64_t mig_drain_timeout_ms;        /* --mig-drain-timeout, default 5m */
    const char *proc_root;               /* GPUSLICE_PROC_ROOT: the driver's /proc (tests) */
    enum log_level log_level;
    enum log_format log_format;
    bool help;
    struct cfg_overrides overrides; /* every NVIDIA flag/env that maps to the config */
};

/* Parses argv (argv[0] is the command name) and the environment through getenv_fn.
 * Flags beat env vars. Returns 0, or -EINVAL with a usage message in err (unknown flag,
 * missing or bad value). Call daemon_options_release() either way. */
int daemon_options_parse(struct daemon_options *o, int argc, char **argv,
                         const char *(*getenv_fn)(const char *), struct error *err);
void daemon_options_release(struct daemon_options *o);
/* The --help text (static). */
const char *daemon_usage(void);
/* How often the GPUs are read again (0: never, only at start, on SIGHUP and when a lost GPU
 * is back): --inventory-interval / INVENTORY_INTERVAL when given; otherwise 30 s for the
 * device plugin and never for dra-plugin, which, like NVIDIA's DRA driver, does not poll. */
int64_t daemon_inventory_interval_ms(const struct daemon_options *o);
/* `gpuslice dra-plugin` / gpu-kubelet-plugin: NVIDIA's flags (one or two dashes, "=value" or
 * the next argument) and env vars, flags winning; the device-plugin env vars that mean the
 * same (NVML, driver root, log level) apply too. -EINVAL with a usage message; release with
 * daemon_options_release either way. */
int daemon_dra_options_parse(struct daemon_options *o, int argc, char **argv,
                             const char *(*getenv_fn)(const char *), struct error *err);
const char *daemon_dra_usage(void);

/* ---- XID health policy (NVIDIA facts §6) -------------------------------------------------- */

#define DAEMON_XID_LIST_MAX 128

struct daemon_xid_policy {
    bool disabled;    /* DP_DISABLE_HEALTHCHECKS=all or containing "xids": no health checks */
    bool all_enabled; /* DP_ENABLE_HEALTHCHECKS=all: every XID is critical */
    unsigned long long ignored[DAEMON_XID_LIST_MAX]; /* defaults + DP_DISABLE_HEALTHCHECKS */
    size_t n_ignored;
    unsigned long long enabled[DAEMON_XID_LIST_MAX]; /* DP_ENABLE_HEALTHCHECKS */
    size_t n_enabled;
};

/* Pure. Builds the policy from the two env values (NULL = unset). Malformed entries are
 * skipped and described in *ret_warnings (an owned strv, possibly empty). */
int daemon_xid_policy_init(struct daemon_xid_policy *p, const char *disable, const char *enable,
                           char ***ret_warnings, struct error *err);
/* Does this XID make the device unhealthy? False whenever the policy is disabled. */
bool daemon_xid_is_critical(const struct daemon_xid_policy *p, unsigned long long xid);

/* ---- the daemon -------------------------------------------------------------------------- */

/* Runs until SIGTERM/SIGINT/SIGQUIT (returns 0) or a startup error (negative errno, err
 * says what failed). Blocks those signals and SIGHUP in the calling thread. */
int daemon_run(const struct daemon_options *o, struct error *err);

/* The MPS control daemons a model needs: one per MPS resource, with its GPUs (device index
 * order) and NVIDIA's limits, into specs[MPS_MAX_DAEMONS]. Returns how many, or -E2BIG when
 * the config has more MPS resources than that (err says so). Shared with
 * `gpuslice mps-control-daemon`. */
struct mps_daemon_spec;
struct model;
int daemon_mps_specs(const struct model *m, struct mps_daemon_spec *specs, struct error *err);
/* mps_options.report for the supervisor's events: one log line, "MPS: <msg>". */
void daemon_mps_report(void *ctx, enum log_level level, const char *msg);

#endif

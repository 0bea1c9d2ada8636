/* SPDX-License-Identifier: Apache-2.0 */
/* options.c: the device plugin's command line and environment. Our own flags are handled
 * here; every other --flag goes through config/'s NVIDIA option table (cfg_overrides), so
 * existing nvidia-device-plugin manifests keep working. Pure apart from getenv_fn. */
#include <errno.h>
#include <string.h>

#include "cdi/cdi.h"
#include "daemon/daemon.h"

static const char usage_text[] =
    "Usage: gpuslice device-plugin [options]\n"
    "       nvidia-device-plugin [options]\n\n"
    "Serve this node's GPUs to the kubelet (device plugin API v1beta1), one socket per\n"
    "resource, as NVIDIA's k8s-device-plugin does, with its flags and env vars.\n\n"
    "Options:\n"
    "      --config-file PATH        config file or ConfigMap directory (env CONFIG_FILE)\n"
    "      --config-name NAME        named config in a directory (env CONFIG_NAME)\n"
    "      --node-label KEY          node label naming the config, read from the\n"
    "                                Kubernetes API when NODE_NAME is set (env NODE_LABEL;\n"
    "                                default nvidia.com/device-plugin.config)\n"
    "      --kubeconfig PATH         Kubernetes credentials (env KUBECONFIG; default\n"
    "                                in-cluster service account)\n"
    "      --default-config NAME     config used when no name is given (env DEFAULT_CONFIG)\n"
    "      --fallback-strategies L   then: named, single, empty (env FALLBACK_STRATEGIES;\n"
    "                                default named,single,empty)\n"
    "      --inventory-interval D    re-read the GPUs every D (env INVENTORY_INTERVAL;\n"
    "                                default 30s, 0: only on SIGHUP)\n"
    "      --health-recovery-after D a device an XID made Unhealthy is Healthy again after\n"
    "                                D without a new XID, unless the XID needs a reset (env\n"
    "                                GPUSLICE_HEALTH_RECOVERY_AFTER; default 5m, 0: never)\n"
    "      --cdi-spec-dir DIR        where the CDI spec goes with a cdi-* device list\n"
    "                                strategy (env CDI_SPEC_DIR; default /var/run/cdi)\n"
    "      --mig-config-file P       a mig-parted config (file or ConfigMap directory):\n"
    "                                apply the layout the node label nvidia.com/mig.config\n"
    "                                names, live (env MIG_CONFIG_FILE; docs/mig.md)\n"
    "      --mig-drain-timeout D     how long a changing GPU may stay held by pods before\n"
    "                                the change fails (env MIG_DRAIN_TIMEOUT; default 5m)\n"
    "      --mps-control MODE        who runs the MPS control daemons: external (default,\n"
    "                                NVIDIA's mps-control-daemon container; we wait for its\n"
    "                                .ready) or internal (this process, supervised)\n"
    "                                (env GPUSLICE_MPS_CONTROL_MODE; docs/mps.md)\n"
    "      --mps-control-binary P    nvidia-cuda-mps-control to run (env GPUSLICE_MPS_CONTROL)\n"
    "      --mps-mount-shm BOOL      internal: mount the tmpfs <mps root>/shm first, as\n"
    "                                NVIDIA's init container does (env GPUSLICE_MPS_MOUNT_SHM)\n"
    "      --metrics-address H:P     serve /metrics, /healthz, /readyz on HOST:PORT, e.g.\n"
    "                                :9400 (env GPUSLICE_METRICS_ADDRESS; default off)\n"
    "      --metrics-sample-interval D  GPU telemetry and per-pod attribution for /metrics\n"
    "                                every D (env GPUSLICE_METRICS_SAMPLE_INTERVAL; default\n"
    "                                10s, 0: off)\n"
    "      --host-proc DIR           the host's /proc, to find GPU processes' pods (env\n"
    "                                GPUSLICE_HOST_PROC; default /proc)\n"
    "      --labels MODE             label the node from what is served: off (default),\n"
    "                                nfd-file, node-feature or node (env GPUSLICE_LABELS)\n"
    "      --labels-output-file P    NFD file for --labels=nfd-file (env GFD_OUTPUT_FILE;\n"
    "                                default /etc/kubernetes/node-feature-discovery/\n"
    "                                features.d/gfd)\n"
    "      --pod-resources-socket P  kubelet pod-resources API, asked before devices are\n"
    "                                removed (env POD_RESOURCES_SOCKET; default\n"
    "                                /var/lib/kubelet/pod-resources/kubelet.sock)\n"
    "      --retire-check-interval D how often devices still held by pods are re-checked\n"
    "                                (env RETIRE_CHECK_INTERVAL; default 5s)\n"
    "      --device-plugin-dir DIR   kubelet device plugin directory\n"
    "                                (default /var/lib/kubelet/device-plugins)\n"
    "      --kubelet-socket PATH     registration socket, empty: do not register\n"
    "                                (env KUBELET_SOCKET; default <dir>/kubelet.sock)\n"
    "      --nvml-library PATH       load this libnvidia-ml.so.1 (env GPUSLICE_NVML_LIBRARY)\n"
    "      --keep-serving-valid      serve the valid resources of a config with errors\n"
    "      --strict-nvidia-schema    refuse what NVIDIA's plugin would reject or read\n"
    "                                differently: replicas 1, resources.gpus, rename,\n"
    "                                devices, MPS limits (env GPUSLICE_STRICT_NVIDIA_SCHEMA;\n"
    "                                the rollback check: gpuslice config validate --nvidia)\n"
    "      --log-format text|json    log line format (env GPUSLICE_LOG_FORMAT)\n"
    "  -v, --log-level LEVEL         error, warn, info or debug; -v alone: debug\n"
    "  -h, --help                    show this help\n\n"
    "NVIDIA flags (env var in brackets; flag > env > config file > default):\n"
    "      --mig-strategy [MIG_STRATEGY], --fail-on-init-error [FAIL_ON_INIT_ERROR],\n"
    "      --driver-root [NVIDIA_DRIVER_ROOT], --dev-root [NVIDIA_DEV_ROOT],\n"
    "      --pass-device-specs [PASS_DEVICE_SPECS], --device-list-strategy\n"
    "      [DEVICE_LIST_STRATEGY], --device-id-strategy [DEVICE_ID_STRATEGY],\n"
    "      --gdrcopy-enabled, --gds-enabled, --mofed-enabled, --cdi-annotation-prefix,\n"
    "      --nvidia-cdi-hook-path, --driver-root-ctr-path, --mps-root,\n"
    "      --shared-devices-allocation-policy, --device-discovery-strategy,\n"
    "      --imex-channel-ids, --imex-required, --cdi-feature-flags, --cdi-disable-hooks\n"
    "Health: DP_DISABLE_HEALTHCHECKS (all | xids | XID list), DP_ENABLE_HEALTHCHECKS\n"
    "(XID list | all). See docs/device-plugin.md.\n";

const char *daemon_usage(void)
{
    return usage_text;
}

/* Our own flags that take a value. */
enum own_flag {
    OWN_CONFIG_NAME = 0,
    OWN_PLUGIN_DIR,
    OWN_NVML_LIBRARY,
    OWN_LOG_FORMAT,
    OWN_LOG_LEVEL,
    OWN_V,
    OWN_DEFAULT_CONFIG,
    OWN_FALLBACKS,
    OWN_NODE_LABEL,
    OWN_KUBECONFIG,
    OWN_KUBE_API_SERVER,
    OWN_INVENTORY_INTERVAL,
    OWN_RETIRE_CHECK,
    OWN_POD_RESOURCES,
    OWN_LABELS,
    OWN_LABELS_OUTPUT,
    OWN_METRICS_ADDRESS,
    OWN_HEALTH_RECOVERY,
    OWN_CDI_SPEC_DIR,
    OWN_MIG_CONFIG_FILE,
    OWN_MIG_DRAIN_TIMEOUT,
    OWN_MPS_CONTROL,
    OWN_MPS_CONTROL_BINARY,
    OWN_MPS_PROBE_INTERVAL,
    OWN_MPS_MOUNT_SHM,
    OWN_METRICS_SAMPLE,
    OWN_HOST_PROC,
};

static const struct {
    const char *name;
    enum own_flag id;
} own_flags[] = {
    {"config-name", OWN_CONFIG_NAME},
    {"device-plugin-dir", OWN_PLUGIN_DIR},
    {"nvml-library", OWN_NVML_LIBRARY},
    {"log-format", OWN_LOG_FORMAT},
    {"log-level", OWN_LOG_LEVEL},
    {"v", OWN_V},
    {"default-config", OWN_DEFAULT_CONFIG},
    {"fallback-strategies", OWN_FALLBACKS},
    {"node-label", OWN_NODE_LABEL},
    {"kubeconfig", OWN_KUBECONFIG},
    {"kube-api-server", OWN_KUBE_API_SERVER},
    {"inventory-interval", OWN_INVENTORY_INTERVAL},
    {"retire-check-interval", OWN_RETIRE_CHECK},
    {"pod-resources-socket", OWN_POD_RESOURCES},
    {"labels", OWN_LABELS},
    {"labels-output-file", OWN_LABELS_OUTPUT},
    {"metrics-address", OWN_METRICS_ADDRESS},
    {"health-recovery-after", OWN_HEALTH_RECOVERY},
    {"cdi-spec-dir", OWN_CDI_SPEC_DIR},
    {"mig-config-file", OWN_MIG_CONFIG_FILE},
    {"mig-drain-timeout", OWN_MIG_DRAIN_TIMEOUT},
    {"mps-control", OWN_MPS_CONTROL},
    {"mps-control-binary", OWN_MPS_CONTROL_BINARY},
    {"mps-probe-interval", OWN_MPS_PROBE_INTERVAL},
    {"mps-mount-shm", OWN_MPS_MOUNT_SHM},
    {"metrics-sample-interval", OWN_METRICS_SAMPLE},
    {"host-proc", OWN_HOST_PROC},
};

/* "named,single,empty" into o->fallbacks; "" means none. */
static int parse_fallbacks(struct daemon_options *o, const char *flag, const char *v,
                           struct error *err)
{
    size_t n = 0;

    while (*v) {
        size_t len = strcspn(v, ",");
        char word[16];

        if (len == 0 || len >= sizeof(word) || n >= DAEMON_MAX_FALLBACKS)
            return error_set(err, -EINVAL, "%s: bad list '%s' (named, single, empty)", flag, v);
        str_copy(word, v, len + 1);
        if (cfg_fallback_parse(word, &o->fallbacks[n]) < 0)
            return error_set(err, -EINVAL, "%s: unknown strategy '%s' (named, single, empty)", flag,
                             word);
        n++;
        v += len + (v[len] == ',');
    }
    o->n_fallbacks = n;
    return 0;
}

/* A Go duration for an interval: 0 or "infinite" disable it (0 returned). */
static int parse_interval(const char *flag, const char *v, int64_t *ret, struct error *err)
{
    int64_t ms;

    if (cfg_duration_parse_ms(v, &ms, NULL) < 0)
        return error_set(err, -EINVAL, "%s takes a duration like 30s, 500ms or 1m, not '%s'", flag,
                         v);
    *ret = ms < 0 ? 0 : ms;
    return 0;
}

static int parse_labels_mode(struct daemon_options *o, const char *flag, const char *v,
                             struct error *err)
{
    static const struct {
        const char *name;
        enum daemon_labels_mode mode;
    } modes[] = {{"off", DAEMON_LABELS_OFF},
                 {"", DAEMON_LABELS_OFF},
                 {"nfd-file", DAEMON_LABELS_NFD_FILE},
                 {"node-feature", DAEMON_LABELS_NODE_FEATURE},
                 {"node", DAEMON_LABELS_NODE}};

    for (size_t i = 0; i < GS_ARRAY_SIZE(modes); i++)
        if (strcmp(v, modes[i].name) == 0) {
            o->labels = modes[i].mode;
            return 0;
        }
    return error_set(err, -EINVAL, "%s must be off, nfd-file, node-feature or node, not '%s'", flag,
                     v);
}

static int parse_mps_control(struct daemon_options *o, const char *flag, const char *v,
                             struct error *err)
{
    if (strcmp(v, "internal") == 0)
        o->mps_control = DAEMON_MPS_INTERNAL;
    else if (strcmp(v, "external") == 0)
        o->mps_control = DAEMON_MPS_EXTERNAL;
    else
        return error_set(err, -EINVAL, "%s must be internal or external, not '%s'", flag, v);
    return 0;
}

static int set_own(struct daemon_options *o, enum own_flag id, const char *flag, const char *v,
                   struct error *err)
{
    switch (id) {
    case OWN_CONFIG_NAME:
        o->config_name = v;
        break;
    case OWN_PLUGIN_DIR:
        if (!*v)
            return error_set(err, -EINVAL, "--device-plugin-dir must not be empty");
        o->plugin_dir = v;
        break;
    case OWN_NVML_LIBRARY:
        o->nvml.library_path = v;
        break;
    case OWN_LOG_FORMAT:
        if (log_format_parse(v, &o->log_format) < 0)
            return error_set(err, -EINVAL, "--log-format must be text or json, not '%s'", v);
        break;
    case OWN_LOG_LEVEL:
    case OWN_V:
        if (log_level_parse(v, &o->log_level) < 0)
            return error_set(err, -EINVAL, "%s must be error, warn, info, debug or 0..10, not '%s'",
                             flag, v);
        break;
    case OWN_DEFAULT_CONFIG:
        o->default_config = *v ? v : NULL;
        break;
    case OWN_FALLBACKS:
        return parse_fallbacks(o, flag, v, err);
    case OWN_NODE_LABEL:
        o->node_label = v;
        break;
    case OWN_KUBECONFIG:
        o->kubeconfig = *v ? v : NULL;
        break;
    case OWN_KUBE_API_SERVER:
        o->kube_api_server = *v ? v : NULL;
        break;
    case OWN_INVENTORY_INTERVAL:
        o->inventory_interval_set = true;
        return parse_interval(flag, v, &o->inventory_interval_ms, err);
    case OWN_RETIRE_CHECK:
        if (parse_interval(flag, v, &o->retire_check_ms, err) < 0)
            return -EINVAL;
        if (o->retire_check_ms == 0)
            return error_set(err, -EINVAL, "%s must be positive", flag);
        break;
    case OWN_POD_RESOURCES:
        o->pod_resources_socket = v;
        break;
    case OWN_LABELS:
        return parse_labels_mode(o, flag, v, err);
    case OWN_LABELS_OUTPUT:
        o->labels_output_file = v;
        break;
    case OWN_METRICS_ADDRESS:
        o->metrics_address = *v ? v : NULL;
        break;
    case OWN_HEALTH_RECOVERY:
        return parse_interval(flag, v, &o->health_recovery_ms, err);
    case OWN_CDI_SPEC_DIR:
        o->cdi_spec_dir = *v ? v : NULL;
        break;
    case OWN_MIG_CONFIG_FILE:
        o->mig_config_file = *v ? v : NULL;
        break;
    case OWN_MPS_CONTROL:
        return parse_mps_control(o, flag, v, err);
    case OWN_MPS_CONTROL_BINARY:
        o->mps_control_binary = *v ? v : NULL;
        break;
    case OWN_METRICS_SAMPLE:
        return parse_interval(flag, v, &o->metrics_sample_ms, err);
    case OWN_HOST_PROC:
        o->host_proc = *v ? v : NULL;
        break;
    case OWN_MPS_MOUNT_SHM:
        if (parse_bool(v, &o->mps_mount_shm) < 0)
            return error_set(err, -EINVAL, "%s must be true or false, not '%s'", flag, v);
        break;
    case OWN_MPS_PROBE_INTERVAL:
        return parse_interval(flag, v, &o->mps_probe_interval_ms, err);
    case OWN_MIG_DRAIN_TIMEOUT:
        if (parse_interval(flag, v, &o->mig_drain_timeout_ms, err) < 0)
            return -EINVAL;
        break;
    }
    return 0;
}

static int own_flag_find(const char *name)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(own_flags); i++)
        if (strcmp(own_flags[i].name, name) == 0)
            return (int)own_flags[i].id;
    return -1;
}

/* One "--name[=value]" at argv[*i]; consumes the next argument as the value when needed. */
static int parse_long(struct daemon_options *o, int argc, char **argv, int *i, struct error *err)
{
    const char *arg = argv[*i] + 2;
    const char *eq = strchr(arg, '=');
    const char *value = eq ? eq + 1 : NULL;
    const struct cfg_option *opt;
    char name[64];
    bool is_env = false;
    int own;

    if ((eq ? (size_t)(eq - arg) : strlen(arg)) >= sizeof(name))
        return error_set(err, -EINVAL, "unknown flag '%.80s'", argv[*i]);
    str_copy(name, arg, eq ? (size_t)(eq - arg) + 1 : sizeof(name));
    if (strcmp(name, "help") == 0) {
        o->help = true;
        return 0;
    }
    if (strcmp(name, "keep-serving-valid") == 0) {
        if (value && parse_bool(value, &o->keep_serving_valid) < 0)
            return error_set(err, -EINVAL, "--keep-serving-valid takes a bool, not '%s'", value);
        if (!value)
            o->keep_serving_valid = true;
        return 0;
    }
    own = own_flag_find(name);
    opt = own < 0 ? cfg_option_find(name, CFG_BIN_PLUGIN, &is_env) : NULL;
    if (own < 0 && (!opt || is_env))
        return error_set(err, -EINVAL, "unknown flag '--%s'", name);
    if (!value && opt && opt->type == CFG_VAL_BOOL) {
        value = "true"; /* urfave/cli: a bare bool flag means true */
    } else if (!value) {
        if (*i + 1 >= argc)
            return error_set(err, -EINVAL, "flag '--%s' needs a value", name);
        value = argv[++*i];
    }
    if (own >= 0)
        return set_own(o, (enum own_flag)own, argv[*i], value, err);
    return cfg_overrides_set(&o->overrides, name, value, err);
}

/* The defaults, then the environment (NVIDIA's variables and ours). */
static int options_from_env(struct daemon_options *o, const char *(*getenv_fn)(const char *),
                            struct error *err)
{
    /* env values go through the flag parser: same checks, same messages */
    static const struct {
        const char *env;
        enum own_flag id;
    } env_own[] = {
        {"DEFAULT_CONFIG", OWN_DEFAULT_CONFIG},
        {"FALLBACK_STRATEGIES", OWN_FALLBACKS},
        {"NODE_LABEL", OWN_NODE_LABEL},
        {"KUBECONFIG", OWN_KUBECONFIG},
        {"GPUSLICE_KUBE_API_SERVER", OWN_KUBE_API_SERVER},
        {"INVENTORY_INTERVAL", OWN_INVENTORY_INTERVAL},
        {"RETIRE_CHECK_INTERVAL", OWN_RETIRE_CHECK},
        {"POD_RESOURCES_SOCKET", OWN_POD_RESOURCES},
        {"GPUSLICE_LABELS", OWN_LABELS},
        {"GFD_OUTPUT_FILE", OWN_LABELS_OUTPUT},
        {"GPUSLICE_METRICS_ADDRESS", OWN_METRICS_ADDRESS},
        {"GPUSLICE_HEALTH_RECOVERY_AFTER", OWN_HEALTH_RECOVERY},
        {"CDI_SPEC_DIR", OWN_CDI_SPEC_DIR},
        {"MIG_CONFIG_FILE", OWN_MIG_CONFIG_FILE},
        {"MIG_DRAIN_TIMEOUT", OWN_MIG_DRAIN_TIMEOUT},
        {"GPUSLICE_MPS_CONTROL_MODE", OWN_MPS_CONTROL},
        {"GPUSLICE_MPS_CONTROL", OWN_MPS_CONTROL_BINARY},
        {"GPUSLICE_MPS_PROBE_INTERVAL", OWN_MPS_PROBE_INTERVAL},
        {"GPUSLICE_MPS_MOUNT_SHM", OWN_MPS_MOUNT_SHM},
        {"GPUSLICE_METRICS_SAMPLE_INTERVAL", OWN_METRICS_SAMPLE},
        {"GPUSLICE_HOST_PROC", OWN_HOST_PROC},
    };
    int r;

    memset(o, 0, sizeof(*o));
    o->log_level = LOG_LEVEL_INFO;
    o->log_format = LOG_FORMAT_KLOG;
    cfg_overrides_init(&o->overrides, CFG_BIN_PLUGIN);
    r = cfg_overrides_from_env(&o->overrides, getenv_fn, err);
    if (r < 0)
        return r;
    o->config_name = getenv_fn("CONFIG_NAME");
    o->inventory_interval_ms = DAEMON_DEFAULT_INVENTORY_INTERVAL_MS;
    o->retire_check_ms = DAEMON_DEFAULT_RETIRE_CHECK_MS;
    o->health_recovery_ms = DAEMON_DEFAULT_HEALTH_RECOVERY_MS;
    o->mig_drain_timeout_ms = DAEMON_DEFAULT_MIG_DRAIN_TIMEOUT_MS;
    o->mps_probe_interval_ms = DAEMON_DEFAULT_MPS_PROBE_MS;
    o->metrics_sample_ms = DAEMON_DEFAULT_METRICS_SAMPLE_MS;
    o->fallbacks[0] = CFG_FALLBACK_NAMED;
    o->fallbacks[1] = CFG_FALLBACK_SINGLE;
    o->fallbacks[2] = CFG_FALLBACK_EMPTY;
    o->n_fallbacks = 3;
    o->node_name = getenv_fn("NODE_NAME");
    o->labels_namespace = getenv_fn("NAMESPACE");
    o->pod_name = getenv_fn("POD_NAME");
    for (size_t i = 0; i < GS_ARRAY_SIZE(env_own); i++) {
        const char *v = getenv_fn(env_own[i].env);
        r = v ? set_own(o, env_own[i].id, env_own[i].env, v, err) : 0;
        if (r < 0)
            return r;
    }
    o->nvml.library_path = getenv_fn("GPUSLICE_NVML_LIBRARY");
    o->disable_healthchecks = getenv_fn("DP_DISABLE_HEALTHCHECKS");
    o->enable_healthchecks = getenv_fn("DP_ENABLE_HEALTHCHECKS");
    if (getenv_fn("GPUSLICE_LOG_LEVEL"))
        (void)log_level_parse(getenv_fn("GPUSLICE_LOG_LEVEL"), &o->log_level);
    if (getenv_fn("GPUSLICE_LOG_FORMAT"))
        (void)log_format_parse(getenv_fn("GPUSLICE_LOG_FORMAT"), &o->log_format);

    return 0;
}

/* What follows from the flags and env once both are read: empty means unset, defaults, the
 * CDI lists checked. */
static int options_finish(struct daemon_options *o, const char *(*getenv_fn)(const char *),
                          struct error *err)
{
    unsigned cdi_bits;
    int r;

    o->config_file = cfg_overrides_get(&o->overrides, CFG_OPT_CONFIG_FILE);
    if (o->config_file && !*o->config_file)
        o->config_file = NULL;
    if (o->config_name && !*o->config_name)
        o->config_name = NULL;
    o->kubelet_socket = cfg_overrides_get(&o->overrides, CFG_OPT_KUBELET_SOCKET);
    /* where a DRA plugin for the same GPUs would register (the one-API check, serve.c) */
    o->dra.registrar_dir = getenv_fn("KUBELET_REGISTRAR_DIRECTORY_PATH");
    if (!o->dra.registrar_dir || !*o->dra.registrar_dir)
        o->dra.registrar_dir = DAEMON_DRA_DEFAULT_REGISTRAR_DIR;
    if (!o->plugin_dir)
        o->plugin_dir = DAEMON_DEFAULT_PLUGIN_DIR;
    if (!o->node_label || !*o->node_label)
        o->node_label = DAEMON_DEFAULT_NODE_LABEL;
    if (!o->pod_resources_socket || !*o->pod_resources_socket)
        o->pod_resources_socket = DAEMON_DEFAULT_POD_RESOURCES_SOCKET;
    if (o->node_name && !*o->node_name)
        o->node_name = NULL;
    o->nvml.driver_root = cfg_overrides_get(&o->overrides, CFG_OPT_DRIVER_ROOT);
    o->nvml.driver_root_ctr_path = cfg_overrides_get(&o->overrides, CFG_OPT_CONTAINER_DRIVER_ROOT);
    o->proc_root = getenv_fn("GPUSLICE_PROC_ROOT");
    /* NVIDIA passes these lists to its toolkit, which ignores what it does not know; a typo
     * there silently changes a spec, so an unknown name is a usage error here */
    r = cdi_parse_feature_flags(cfg_overrides_get(&o->overrides, CFG_OPT_CDI_FEATURE_FLAGS),
                                &cdi_bits, err);
    if (r == 0)
        r = cdi_parse_disabled_hooks(cfg_overrides_get(&o->overrides, CFG_OPT_CDI_DISABLE_HOOKS),
                                     &cdi_bits, err);
    return r;
}

int daemon_options_parse(struct daemon_options *o, int argc, char **argv,
                         const char *(*getenv_fn)(const char *), struct error *err)
{
    int r = options_from_env(o, getenv_fn, err);

    if (r < 0)
        return r;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "-h") == 0) {
            o->help = true;
        } else if (strcmp(a, "-v") == 0) {
            o->log_level = LOG_LEVEL_DEBUG;
        } else if (str_startswith(a, "--") && a[2]) {
            r = parse_long(o, argc, argv, &i, err);
            if (r < 0)
                return r;
        } else {
            return error_set(err, -EINVAL, "unexpected argument '%s'", a);
        }
    }
    return options_finish(o, getenv_fn, err);
}

int64_t daemon_inventory_interval_ms(const struct daemon_options *o)
{
    /* dra-plugin: a re-read every 30 s cost it as much CPU as everything else it does idle
     * (an NVML open and a full read, issue 28), and what it would catch comes otherwise: a
     * GPU lost or back through the health thread, a MIG layout changed by the operator's MIG
     * manager with the plugin paused and started again, anything else on SIGHUP */
    return o->dra.enabled && !o->inventory_interval_set ? 0 : o->inventory_interval_ms;
}

void daemon_options_release(struct daemon_options *o)
{
    if (o)
        cfg_overrides_release(&o->overrides);
}

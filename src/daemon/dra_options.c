/* SPDX-License-Identifier: Apache-2.0 */
/* dra_options.c: the command line of `gpuslice dra-plugin`, also run as NVIDIA's
 * gpu-kubelet-plugin: its flags and env vars (facts/dra.md §2; v0.4.0 of
 * kubernetes-sigs/dra-driver-nvidia-gpu adds --http-endpoint and --metrics-path) into struct
 * daemon_options, with the device-plugin options at their defaults and the device-plugin API
 * off. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"

enum dra_kind {
    DRA_STR,
    DRA_INT,
    DRA_NVML_LIB,
    DRA_VERBOSITY,
    DRA_XIDS,
    DRA_KUBECONFIG,
    DRA_NODE,
    DRA_API_SERVER,
    DRA_HOST_ROOT,
    DRA_CTR_ROOT,
    DRA_METRICS,
    DRA_HTTP_ENDPOINT,
    DRA_METRICS_PATH,
    DRA_DP_DIR,
    DRA_RECOVERY,
    DRA_CONFIG
};

/* One flag: its names (NVIDIA's first), env vars, and where it goes. */
struct dra_flag {
    const char *names[3];
    const char *envs[3];
    enum dra_kind kind;
    size_t offset; /* into struct daemon_dra_options, for DRA_STR and DRA_INT */
};

#define DRA_OFF(field) offsetof(struct daemon_dra_options, field)

/* What one parse has seen of the metrics flags: NVIDIA's --http-endpoint and --metrics-path
 * are settled against our --metrics-address once every flag and env var is read. */
struct dra_parse {
    struct daemon_options *o;
    const char *http_endpoint; /* NULL: not given */
    const char *metrics_path;  /* NULL: not given (NVIDIA's default /metrics) */
    bool metrics_address_set;  /* --metrics-address / GPUSLICE_METRICS_ADDRESS given: it wins */
};

static const struct dra_flag dra_flags[] = {
    {{"node-name"}, {"NODE_NAME"}, DRA_NODE, 0},
    {{"namespace"}, {"NAMESPACE"}, DRA_STR, DRA_OFF(namespace)},
    {{"cdi-root"}, {"CDI_ROOT"}, DRA_STR, DRA_OFF(cdi_root)},
    {{"nvidia-driver-root", "host_driver-root", "host-driver-root"},
     {"NVIDIA_DRIVER_ROOT", "HOST_DRIVER_ROOT"},
     DRA_HOST_ROOT,
     0},
    {{"container-driver-root"}, {"DRIVER_ROOT_CTR_PATH"}, DRA_CTR_ROOT, 0},
    {{"nvidia-cdi-hook-path"}, {"NVIDIA_CDI_HOOK_PATH"}, DRA_STR, DRA_OFF(cdi_hook_path)},
    {{"image-name"}, {"IMAGE_NAME"}, DRA_STR, DRA_OFF(image_name)},
    {{"kubelet-registrar-directory-path"},
     {"KUBELET_REGISTRAR_DIRECTORY_PATH"},
     DRA_STR,
     DRA_OFF(registrar_dir)},
    {{"kubelet-plugins-directory-path"},
     {"KUBELET_PLUGINS_DIRECTORY_PATH"},
     DRA_STR,
     DRA_OFF(plugins_dir)},
    {{"healthcheck-port"}, {"HEALTHCHECK_PORT"}, DRA_INT, DRA_OFF(healthcheck_port)},
    {{"additional-xids-to-ignore"}, {"ADDITIONAL_XIDS_TO_IGNORE"}, DRA_XIDS, 0},
    {{"kubeconfig"}, {"KUBECONFIG"}, DRA_KUBECONFIG, 0},
    {{"kube-api-qps"}, {"KUBE_API_QPS"}, DRA_INT, DRA_OFF(kube_api_qps)},
    {{"kube-api-burst"}, {"KUBE_API_BURST"}, DRA_INT, DRA_OFF(kube_api_burst)},
    {{"feature-gates"}, {"FEATURE_GATES"}, DRA_STR, DRA_OFF(feature_gates)},
    {{"v"}, {"LOG_VERBOSITY"}, DRA_VERBOSITY, 0},
    /* v0.4.0 (kubernetes-sigs/dra-driver-nvidia-gpu): its chart sets both, metrics on */
    {{"http-endpoint"}, {"HTTP_ENDPOINT"}, DRA_HTTP_ENDPOINT, 0},
    {{"metrics-path"}, {"METRICS_PATH"}, DRA_METRICS_PATH, 0},
    /* ours: test hooks and what NVIDIA's driver finds by other means */
    {{"nvidia-smi"}, {"GPUSLICE_NVIDIA_SMI"}, DRA_STR, DRA_OFF(nvidia_smi)},
    {{"nvml-library"}, {"GPUSLICE_NVML_LIBRARY"}, DRA_NVML_LIB, 0},
    {{"kube-api-server"}, {"GPUSLICE_KUBE_API_SERVER"}, DRA_API_SERVER, 0},
    {{"metrics-address"}, {"GPUSLICE_METRICS_ADDRESS"}, DRA_METRICS, 0},
    {{"device-plugin-dir"}, {NULL}, DRA_DP_DIR, 0}, /* the one-API check looks there */
    {{"health-recovery-after"}, {"GPUSLICE_HEALTH_RECOVERY_AFTER"}, DRA_RECOVERY, 0},
    /* the device plugin's config: resources.gpus and sharing.fractions (docs/dra.md) */
    {{"config-file", "config"}, {"CONFIG_FILE"}, DRA_CONFIG, 0},
};

static const char usage[] =
    "usage: gpuslice dra-plugin [flags]   (also run as gpu-kubelet-plugin)\n"
    "Serves this node's GPUs through Kubernetes DRA as NVIDIA's gpu-kubelet-plugin does\n"
    "(driver gpu.nvidia.com): ResourceSlices that follow the GPUs live, NodePrepareResources\n"
    "with CDI specs, and GPU sharing (TimeSlicing, MPS) without feature gates.\n\n"
    "  --node-name NAME                        NODE_NAME (required)\n"
    "  --namespace NS                          NAMESPACE (default)\n"
    "  --cdi-root DIR                          CDI_ROOT (/etc/cdi)\n"
    "  --nvidia-driver-root DIR                NVIDIA_DRIVER_ROOT, HOST_DRIVER_ROOT (/)\n"
    "  --container-driver-root DIR             DRIVER_ROOT_CTR_PATH (/driver-root)\n"
    "  --nvidia-cdi-hook-path PATH             NVIDIA_CDI_HOOK_PATH\n"
    "  --image-name IMAGE                      IMAGE_NAME (accepted; MPS daemons run here)\n"
    "  --kubelet-registrar-directory-path DIR  (/var/lib/kubelet/plugins_registry)\n"
    "  --kubelet-plugins-directory-path DIR    (/var/lib/kubelet/plugins)\n"
    "  --healthcheck-port N                    HEALTHCHECK_PORT (-1: off; gRPC health service)\n"
    "  --additional-xids-to-ignore LIST        ADDITIONAL_XIDS_TO_IGNORE\n"
    "  --kubeconfig FILE                       KUBECONFIG (in-cluster when unset)\n"
    "  --kube-api-qps N, --kube-api-burst N    accepted\n"
    "  --feature-gates LIST                    FEATURE_GATES (accepted: sharing needs none)\n"
    "  -v N                                    LOG_VERBOSITY (>= 4: debug)\n"
    "  --http-endpoint ADDR                    HTTP_ENDPOINT (\"\": off; e.g. :8080): /metrics,\n"
    "                                          /healthz, /readyz (--metrics-address wins)\n"
    "  --metrics-path PATH                     METRICS_PATH (/metrics, the only one served;\n"
    "                                          \"\": no server on --http-endpoint)\n"
    "  --nvidia-smi PATH                       GPUSLICE_NVIDIA_SMI (time-slicing; default\n"
    "                                          <container driver root>/usr/bin/nvidia-smi)\n"
    "  --nvml-library PATH, --kube-api-server URL, --metrics-address ADDR,\n"
    "  --device-plugin-dir DIR (where a device plugin would serve; ours)\n"
    "  --health-recovery-after DURATION        a GPU an XID took out comes back (5m; 0: never)\n"
    "  --config-file PATH                      CONFIG_FILE: the device plugin's config file or\n"
    "                                          ConfigMap folder; sharing.fractions publishes\n"
    "                                          GPUs shareable by memory (followed live)\n"
    "  env INVENTORY_INTERVAL=DURATION         re-read the GPUs every DURATION (unset: never;\n"
    "                                          SIGHUP re-reads them, XIDs come by events)\n"
    "docs/dra.md tells more.\n";

const char *daemon_dra_usage(void)
{
    return usage;
}

static const struct dra_flag *find_flag(const char *name)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(dra_flags); i++)
        for (size_t k = 0; k < 3 && dra_flags[i].names[k]; k++)
            if (strcmp(dra_flags[i].names[k], name) == 0)
                return &dra_flags[i];
    return NULL;
}

/* klog's -v: 0-3 info, 4 and more debug. */
static int set_verbosity(struct daemon_options *o, const char *v, struct error *err)
{
    int64_t n;

    if (parse_int64(v, &n) < 0 || n < 0)
        return error_set(err, -EINVAL, "-v must be a verbosity level (0, 4, ...), not '%s'", v);
    o->log_level = n >= 4 ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO;
    return 0;
}

static int set_value(struct dra_parse *p, const struct dra_flag *f, const char *name, const char *v,
                     struct error *err)
{
    struct daemon_options *o = p->o;
    char *base = (char *)&o->dra;

    switch (f->kind) {
    case DRA_STR:
        memcpy(base + f->offset, &v, sizeof(v));
        return 0;
    case DRA_INT:
        if (parse_int64(v, (int64_t *)(void *)(base + f->offset)) < 0)
            return error_set(err, -EINVAL, "%s must be a number, not '%s'", name, v);
        return 0;
    case DRA_NVML_LIB:
        o->nvml.library_path = *v ? v : NULL;
        return 0;
    case DRA_VERBOSITY:
        return set_verbosity(o, v, err);
    case DRA_XIDS: /* the XID policy's list of XIDs to ignore, as DP_DISABLE_HEALTHCHECKS */
        o->disable_healthchecks = *v ? v : NULL;
        return 0;
    case DRA_KUBECONFIG:
        o->kubeconfig = *v ? v : NULL;
        return 0;
    case DRA_NODE:
        o->node_name = *v ? v : NULL;
        return 0;
    case DRA_API_SERVER:
        o->kube_api_server = *v ? v : NULL;
        return 0;
    case DRA_HOST_ROOT:
        o->nvml.driver_root = v;
        o->dra.host_driver_root = v;
        return 0;
    case DRA_CTR_ROOT:
        o->nvml.driver_root_ctr_path = v;
        o->dra.container_driver_root = v;
        return 0;
    case DRA_METRICS:
        o->metrics_address = *v ? v : NULL;
        p->metrics_address_set = true;
        return 0;
    case DRA_HTTP_ENDPOINT:
        p->http_endpoint = v;
        return 0;
    case DRA_METRICS_PATH:
        p->metrics_path = v;
        return 0;
    case DRA_DP_DIR:
        o->plugin_dir = v;
        return 0;
    case DRA_CONFIG:
        o->config_file = *v ? v : NULL;
        return 0;
    case DRA_RECOVERY: {
        int64_t ms;
        if (cfg_duration_parse_ms(v, &ms, NULL) < 0)
            return error_set(err, -EINVAL, "%s takes a duration like 5m or 30s, not '%s'", name, v);
        o->health_recovery_ms = ms < 0 ? 0 : ms;
        return 0;
    }
    }
    return 0;
}

static int from_env(struct dra_parse *p, const char *(*getenv_fn)(const char *), struct error *err)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(dra_flags); i++) {
        const struct dra_flag *f = &dra_flags[i];
        for (size_t k = 0; k < 3 && f->envs[k]; k++) {
            const char *v = getenv_fn(f->envs[k]);
            if (v && set_value(p, f, f->envs[k], v, err) < 0)
                return -EINVAL;
            if (v)
                break;
        }
    }
    return 0;
}

/* "--name=value", "--name value", "-name value" (Go's flag syntax takes one dash too). */
static int parse_flag(struct dra_parse *p, int argc, char **argv, int *i, struct error *err)
{
    const char *a = argv[*i] + (argv[*i][1] == '-' ? 2 : 1);
    const char *eq = strchr(a, '=');
    char name[64];
    const struct dra_flag *f;

    str_copy(name, a, eq && (size_t)(eq - a) < sizeof(name) ? (size_t)(eq - a) + 1 : sizeof(name));
    if (strcmp(name, "h") == 0 || strcmp(name, "help") == 0) {
        p->o->help = true;
        return 0;
    }
    f = find_flag(name);
    if (!f)
        return error_set(err, -EINVAL, "unknown flag '%s' (gpuslice dra-plugin --help lists them)",
                         argv[*i]);
    char shown[80];
    snprintf(shown, sizeof(shown), "--%s", name);
    if (eq)
        return set_value(p, f, shown, eq + 1, err);
    if (*i + 1 >= argc)
        return error_set(err, -EINVAL, "flag '%s' needs a value", argv[*i]);
    return set_value(p, f, shown, argv[++*i], err);
}

/* NVIDIA's path.Join("/", path) == "/metrics": "metrics", "/metrics/", "//metrics". */
static bool is_metrics_path(const char *path)
{
    size_t n;

    while (*path == '/')
        path++;
    n = strlen(path);
    while (n > 0 && path[n - 1] == '/')
        n--;
    return n == strlen("metrics") && strncmp(path, "metrics", n) == 0;
}

/* NVIDIA's metrics server: on --http-endpoint when it and --metrics-path are not empty. Ours
 * serves /metrics, /healthz and /readyz on one address: --metrics-address, when given, wins;
 * else --http-endpoint is that address. A path other than /metrics is refused rather than
 * scraped in vain. */
static int settle_metrics(struct dra_parse *p, struct error *err)
{
    const char *path = p->metrics_path ? p->metrics_path : "/metrics";

    if (p->metrics_address_set || !p->http_endpoint || !*p->http_endpoint || !*path)
        return 0;
    if (!is_metrics_path(path))
        return error_set(err, -EINVAL,
                         "--metrics-path (METRICS_PATH) '%s': gpuslice serves Prometheus metrics "
                         "at /metrics only; set it to /metrics (NVIDIA's chart value "
                         "kubeletPlugin.metrics.metricsPath defaults to it) or leave it unset",
                         path);
    p->o->metrics_address = p->http_endpoint;
    return 0;
}

int daemon_dra_options_parse(struct daemon_options *o, int argc, char **argv,
                             const char *(*getenv_fn)(const char *), struct error *err)
{
    char *none[] = {argv[0], NULL};
    struct dra_parse p = {.o = o};
    int r = daemon_options_parse(o, 1, none, getenv_fn, err); /* the device plugin's defaults */

    if (r < 0)
        return r;
    o->dra = (struct daemon_dra_options){
        .enabled = true,
        .namespace = "default",
        .cdi_root = DAEMON_DRA_DEFAULT_CDI_ROOT,
        .registrar_dir = DAEMON_DRA_DEFAULT_REGISTRAR_DIR,
        .plugins_dir = DAEMON_DRA_DEFAULT_PLUGINS_DIR,
        .healthcheck_port = -1,
    };
    o->config_file = NULL; /* only --config-file: sharing.fractions, resources.gpus */
    o->labels = DAEMON_LABELS_OFF;
    o->mig_config_file = NULL;
    r = from_env(&p, getenv_fn, err);
    for (int i = 1; r == 0 && i < argc; i++) {
        if (argv[i][0] != '-' || !argv[i][1])
            r = error_set(err, -EINVAL, "unexpected argument '%s'", argv[i]);
        else
            r = parse_flag(&p, argc, argv, &i, err);
    }
    if (r == 0)
        r = settle_metrics(&p, err);
    if (r == 0 && !o->help && !o->node_name)
        r = error_set(err, -EINVAL,
                      "--node-name (NODE_NAME) is required: the node whose GPUs this plugin "
                      "publishes (in a DaemonSet: env NODE_NAME from fieldRef spec.nodeName)");
    return r;
}

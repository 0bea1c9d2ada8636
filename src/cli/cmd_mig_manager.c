/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_mig_manager.c: `gpuslice mig-manager`, also run as `nvidia-mig-manager`, the GPU
 * Operator's MIG manager since mig-parted v0.13: its flags and env vars (mig-parted v0.15.0
 * cmd/nvidia-mig-manager) mapped onto gpuslice's MIG agent (daemon/mig.c: the layout the
 * node label nvidia.com/mig.config names, per-GPU drain, rollback, mig.config.state), run
 * as a daemon that serves no kubelet. Only wiring; docs/operator.md, docs/mig.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "cli/cli.h"
#include "mig/config.h"

/* mig-parted's defaults (cmd/nvidia-mig-manager/main.go) */
#define MGR_DEFAULT_HOST_ROOT "/host"
#define MGR_GENERATED_CONFIG "/etc/nvidia-mig-manager/generated-config.yaml"
/* where the host's kubelet serves pod-resources, under the host root the Operator mounts */
#define MGR_POD_RESOURCES "/var/lib/kubelet/pod-resources/kubelet.sock"
/* the agent's own device-plugin sockets: private, it registers with no kubelet */
#define MGR_PLUGIN_DIR "/tmp/gpuslice-mig-manager"

enum mgr_flag {
    F_KUBECONFIG,
    F_NODE_NAME,
    F_CONFIG_FILE,
    F_RECONFIGURE_SCRIPT,
    F_HOST_ROOT_MOUNT,
    F_HOST_NVIDIA_DIR,
    F_HOST_STATE_FILE,
    F_HOST_KUBELET_SERVICE,
    F_GPU_CLIENTS_FILE,
    F_WITH_REBOOT,
    F_WITH_SHUTDOWN_HOST_GPU_CLIENTS,
    F_DEFAULT_GPU_CLIENTS_NAMESPACE,
    F_DRIVER_ROOT,
    F_DRIVER_ROOT_CTR_PATH,
    F_CDI_ENABLED,
    F_DEV_ROOT,
    F_DEV_ROOT_CTR_PATH,
    F_CDI_HOOK_PATH,
    F_COUNT
};

/* NVIDIA's table: name, aliases (one letter, or a second name), env vars, bool or string. */
static const struct mgr_flag_def {
    const char *name;
    const char *alias[2];
    const char *env[2];
    bool is_bool;
} flag_defs[F_COUNT] = {
    [F_KUBECONFIG] = {"kubeconfig", {NULL}, {"KUBECONFIG"}, false},
    [F_NODE_NAME] = {"node-name", {"n"}, {"NODE_NAME"}, false},
    [F_CONFIG_FILE] = {"config-file", {"f"}, {"CONFIG_FILE"}, false},
    [F_RECONFIGURE_SCRIPT] = {"reconfigure-script", {"s"}, {"RECONFIGURE_SCRIPT"}, false},
    [F_HOST_ROOT_MOUNT] = {"host-root-mount", {"m"}, {"HOST_ROOT_MOUNT"}, false},
    [F_HOST_NVIDIA_DIR] = {"host-nvidia-dir", {"i"}, {"HOST_NVIDIA_DIR"}, false},
    [F_HOST_STATE_FILE] = {"host-mig-manager-state-file",
                           {"o"},
                           {"HOST_MIG_MANAGER_STATE_FILE"},
                           false},
    [F_HOST_KUBELET_SERVICE] = {"host-kubelet-systemd-service",
                                {"k"},
                                {"HOST_KUBELET_SYSTEMD_SERVICE"},
                                false},
    [F_GPU_CLIENTS_FILE] = {"gpu-clients-file", {"g"}, {"GPU_CLIENTS_FILE"}, false},
    [F_WITH_REBOOT] = {"with-reboot", {"r"}, {"WITH_REBOOT"}, true},
    [F_WITH_SHUTDOWN_HOST_GPU_CLIENTS] = {"with-shutdown-host-gpu-clients",
                                          {"d"},
                                          {"WITH_SHUTDOWN_HOST_GPU_CLIENTS"},
                                          true},
    [F_DEFAULT_GPU_CLIENTS_NAMESPACE] = {"default-gpu-clients-namespace",
                                         {"p"},
                                         {"DEFAULT_GPU_CLIENTS_NAMESPACE"},
                                         false},
    [F_DRIVER_ROOT] = {"nvidia-driver-root",
                       {"driver-root", "t"},
                       {"NVIDIA_DRIVER_ROOT", "DRIVER_ROOT"},
                       false},
    [F_DRIVER_ROOT_CTR_PATH] = {"driver-root-ctr-path", {"a"}, {"DRIVER_ROOT_CTR_PATH"}, false},
    [F_CDI_ENABLED] = {"cdi-enabled", {NULL}, {"CDI_ENABLED"}, true},
    [F_DEV_ROOT] = {"dev-root", {"b"}, {"NVIDIA_DEV_ROOT"}, false},
    [F_DEV_ROOT_CTR_PATH] = {"dev-root-ctr-path", {"j"}, {"DEV_ROOT_CTR_PATH"}, false},
    [F_CDI_HOOK_PATH] = {"nvidia-cdi-hook-path", {NULL}, {"NVIDIA_CDI_HOOK_PATH"}, false},
};

struct mgr_args {
    const char *value[F_COUNT]; /* borrowed from argv/environ; NULL: not given */
    bool help;
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: nvidia-mig-manager [options]      (gpuslice mig-manager)\n\n"
               "The GPU Operator's MIG manager: applies the layout the node label\n"
               "nvidia.com/mig.config names, through gpuslice's MIG agent: per-GPU drain (pods\n"
               "from the kubelet's pod-resources under the host root), explicit placements,\n"
               "rollback, nvidia.com/mig.config.state, and the operand labels NVIDIA's manager\n"
               "pauses (nvidia.com/gpu.deploy.{device-plugin,gpu-feature-discovery,\n"
               "dcgm-exporter,dcgm,nvsm,client}).\n\n"
               "Options (mig-parted v0.15.0's; one or two dashes, =VALUE or the next argument):\n"
               "  -n, --node-name NAME            (env NODE_NAME; required)\n"
               "      --kubeconfig PATH           (env KUBECONFIG; empty: in-cluster)\n"
               "  -f, --config-file PATH          mig-parted config (env CONFIG_FILE); without it\n"
               "                                  one is generated for this node's GPUs into\n"
               "                                  " MGR_GENERATED_CONFIG ",\n"
               "                                  else DEFAULT_CONFIG_FILE is used\n"
               "  -m, --host-root-mount DIR       (env HOST_ROOT_MOUNT; default /host)\n"
               "  -t, --nvidia-driver-root DIR    (env NVIDIA_DRIVER_ROOT, DRIVER_ROOT)\n"
               "  -a, --driver-root-ctr-path DIR  (env DRIVER_ROOT_CTR_PATH)\n"
               "Accepted, with a log line saying what gpuslice does instead: -s/--reconfigure-\n"
               "script, -i/--host-nvidia-dir, -o/--host-mig-manager-state-file, -k/--host-\n"
               "kubelet-systemd-service, -g/--gpu-clients-file, -r/--with-reboot, -d/--with-\n"
               "shutdown-host-gpu-clients, -p/--default-gpu-clients-namespace, --cdi-enabled,\n"
               "-b/--dev-root, -j/--dev-root-ctr-path, --nvidia-cdi-hook-path.\n"
               "  -h, --help\n"
               "docs/operator.md, docs/mig.md.\n");
}

static const struct mgr_flag_def *find_flag(const char *name, size_t len, enum mgr_flag *ret)
{
    for (size_t i = 0; i < F_COUNT; i++) {
        const struct mgr_flag_def *d = &flag_defs[i];
        bool hit = strlen(d->name) == len && strncmp(d->name, name, len) == 0;
        for (size_t k = 0; !hit && k < 2 && d->alias[k]; k++)
            hit = strlen(d->alias[k]) == len && strncmp(d->alias[k], name, len) == 0;
        if (hit) {
            *ret = (enum mgr_flag)i;
            return d;
        }
    }
    return NULL;
}

/* urfave/cli's syntax: -x, --x, -x=v, --x v; a bool flag takes no separate value. */
static int parse_args(struct mgr_args *a, int argc, char **argv)
{
    for (size_t i = 0; i < F_COUNT; i++)
        for (size_t k = 0; k < 2 && flag_defs[i].env[k] && !a->value[i]; k++)
            a->value[i] = getenv(flag_defs[i].env[k]);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const struct mgr_flag_def *d;
        enum mgr_flag f;

        if (s[0] != '-' || s[1] == '\0')
            return cli_usage_error("mig-manager", "unexpected argument '%s'", s);
        s += s[1] == '-' ? 2 : 1;
        const char *eq = strchr(s, '=');
        size_t len = eq ? (size_t)(eq - s) : strlen(s);
        if ((len == 1 && s[0] == 'h') || (len == 4 && strncmp(s, "help", 4) == 0)) {
            a->help = true;
            return -1;
        }
        d = find_flag(s, len, &f);
        if (!d)
            return cli_usage_error("mig-manager", "flag provided but not defined: -%.*s", (int)len,
                                   s);
        if (eq)
            a->value[f] = eq + 1;
        else if (d->is_bool)
            a->value[f] = "true";
        else if (i + 1 < argc)
            a->value[f] = argv[++i];
        else
            return cli_usage_error("mig-manager", "flag needs an argument: -%s", d->name);
        if (d->is_bool) {
            bool b;
            if (parse_bool(a->value[f], &b) < 0)
                return cli_usage_error("mig-manager", "invalid value \"%s\" for flag -%s",
                                       a->value[f], d->name);
        }
    }
    return -1;
}

static bool flag_true(const struct mgr_args *a, enum mgr_flag f)
{
    bool b = false;
    return a->value[f] && *a->value[f] && parse_bool(a->value[f], &b) == 0 && b;
}

static bool is_file(const char *path)
{
    struct stat st;
    return path && *path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether a generated config holds any MIG layout (all-balanced comes with every MIG-capable
 * GPU model): NVIDIA's ErrNoProfilesDiscovered otherwise. */
static bool has_layouts(const char *path)
{
    struct mig_config *cfg = NULL;
    bool ok = mig_config_load(path, &cfg, NULL) == 0 && mig_config_find(cfg, "all-balanced", NULL);
    mig_config_free(cfg);
    return ok;
}

/* mig-parted's setupMigConfig: the custom config, else one generated from the hardware,
 * else DEFAULT_CONFIG_FILE. Returns the path (borrowed or static) or NULL after printing. */
static const char *pick_config(const struct mgr_args *a)
{
    const char *custom = a->value[F_CONFIG_FILE];
    const char *fallback = getenv("DEFAULT_CONFIG_FILE");
    char *gen_argv[] = {(char *)"mig", (char *)"generate-config", (char *)"-f",
                        (char *)MGR_GENERATED_CONFIG, NULL};

    if (custom && *custom) {
        if (!is_file(custom)) {
            fprintf(stderr, "nvidia-mig-manager: failed to read custom config %s: %s\n", custom,
                    strerror(errno ? errno : ENOENT));
            return NULL;
        }
        log_info("mig-manager: using custom config: %s", custom);
        return custom;
    }
    log_info("mig-manager: generating MIG configuration from hardware...");
    if (mkdir("/etc/nvidia-mig-manager", 0755) < 0 && errno != EEXIST)
        log_warn("mig-manager: cannot create /etc/nvidia-mig-manager: %s", strerror(errno));
    else if (cmd_mig(4, gen_argv) == CLI_EXIT_OK && has_layouts(MGR_GENERATED_CONFIG)) {
        log_info("mig-manager: generated config: %s", MGR_GENERATED_CONFIG);
        return MGR_GENERATED_CONFIG;
    }
    log_warn("mig-manager: no MIG profiles discovered; checking for a default config");
    if (is_file(fallback)) {
        log_info("mig-manager: using default config: %s", fallback);
        return fallback;
    }
    fprintf(stderr,
            "nvidia-mig-manager: failed to setup MIG config: dynamic generation found no "
            "MIG-capable GPU and no default config is available (DEFAULT_CONFIG_FILE=%s): "
            "give -f/CONFIG_FILE, or check the driver root (NVML)\n",
            fallback ? fallback : "");
    return NULL;
}

/* What NVIDIA's manager does that gpuslice does otherwise: one line each, when asked for. */
static void report_differences(const struct mgr_args *a)
{
    if (flag_true(a, F_WITH_REBOOT))
        log_info("mig-manager: WITH_REBOOT: gpuslice never reboots the node; a MIG mode change "
                 "the driver leaves pending sets nvidia.com/mig.config.state=rebooting with a "
                 "MigRebootRequired Event");
    if (flag_true(a, F_WITH_SHUTDOWN_HOST_GPU_CLIENTS) && a->value[F_GPU_CLIENTS_FILE])
        log_info("mig-manager: WITH_SHUTDOWN_HOST_GPU_CLIENTS: host systemd services in %s are "
                 "not stopped; each GPU is repartitioned once no pod holds it, and a GPU still "
                 "in use by a host process is rolled back to its layout (state failed)",
                 a->value[F_GPU_CLIENTS_FILE]);
    if (flag_true(a, F_CDI_ENABLED))
        log_info("mig-manager: CDI_ENABLED: the device plugin writes the CDI specs of the new "
                 "MIG devices itself; no management spec is generated here");
    if (a->value[F_RECONFIGURE_SCRIPT] && *a->value[F_RECONFIGURE_SCRIPT])
        log_info("mig-manager: --reconfigure-script %s ignored: gpuslice applies layouts itself",
                 a->value[F_RECONFIGURE_SCRIPT]);
}

int cmd_mig_manager(int argc, char **argv)
{
    struct mgr_args a = {0};
    struct strbuf podres = STRBUF_INIT;
    const char *host_root, *config;
    int rc = parse_args(&a, argc, argv);

    if (rc >= 0)
        return rc;
    if (a.help) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!a.value[F_NODE_NAME] || !*a.value[F_NODE_NAME]) {
        fprintf(stderr, "nvidia-mig-manager: invalid -n <node-name> flag: must not be empty "
                        "string (set NODE_NAME from spec.nodeName)\n");
        return CLI_EXIT_FAILURE;
    }
    /* the agent reads its node from the environment, as the device plugin does */
    if (setenv("NODE_NAME", a.value[F_NODE_NAME], 1) < 0)
        return CLI_EXIT_FAILURE;
    config = pick_config(&a);
    if (!config)
        return CLI_EXIT_FAILURE;
    report_differences(&a);
    host_root = a.value[F_HOST_ROOT_MOUNT] && *a.value[F_HOST_ROOT_MOUNT]
                    ? a.value[F_HOST_ROOT_MOUNT]
                    : MGR_DEFAULT_HOST_ROOT;
    if (strbuf_printf(&podres, "%s%s", strcmp(host_root, "/") == 0 ? "" : host_root,
                      MGR_POD_RESOURCES) < 0 ||
        (mkdir(MGR_PLUGIN_DIR, 0700) < 0 && errno != EEXIST)) {
        fprintf(stderr, "nvidia-mig-manager: cannot set up %s: %s\n", MGR_PLUGIN_DIR,
                strerror(errno));
        strbuf_release(&podres);
        return CLI_EXIT_FAILURE;
    }
    /* The agent without a kubelet: CONFIG_FILE means the MIG config here, so the plugin's
     * config is the built-in one (mixed: every MIG device is known by its UUID, whatever
     * strategy the cluster's plugin serves). */
    if (unsetenv("CONFIG_FILE") < 0 || unsetenv("MIG_STRATEGY") < 0) {
        strbuf_release(&podres);
        return CLI_EXIT_FAILURE;
    }
    char *dargv[16];
    int n = 0;
    dargv[n++] = (char *)"device-plugin";
    dargv[n++] = (char *)"--mig-config-file";
    dargv[n++] = (char *)config;
    dargv[n++] = (char *)"--mig-strategy=mixed";
    dargv[n++] = (char *)"--kubelet-socket=";
    dargv[n++] = (char *)"--device-plugin-dir";
    dargv[n++] = (char *)MGR_PLUGIN_DIR;
    dargv[n++] = (char *)"--pod-resources-socket";
    dargv[n++] = (char *)strbuf_str(&podres);
    if (a.value[F_KUBECONFIG] && *a.value[F_KUBECONFIG]) {
        dargv[n++] = (char *)"--kubeconfig";
        dargv[n++] = (char *)a.value[F_KUBECONFIG];
    }
    dargv[n] = NULL;
    log_info("mig-manager: node %s, layouts from %s, pods from %s", a.value[F_NODE_NAME], config,
             strbuf_str(&podres));
    rc = cmd_device_plugin(n, dargv);
    strbuf_release(&podres);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_mps_control_daemon.c: `gpuslice mps-control-daemon`, also run as `mps-control-daemon`
 * (NVIDIA's chart's entry point): reads the same config as the plugin (--config-file /
 * CONFIG_FILE, --mig-strategy, every plugin flag), runs and supervises one MPS control daemon
 * per MPS resource (mps/), writes .ready, applies a new config on SIGHUP (the config-manager
 * sidecar's signal), stops them all on SIGTERM. `mount-shm` sets up the tmpfs the daemons
 * share with workloads at <mps root>/shm, as NVIDIA's init container does. docs/mps.md. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/cli.h"
#include "daemon/daemon.h"
#include "mps/mps.h"

/* --mps-probe-interval's default: how often each control daemon is asked if it lives. */
#define MPSD_PROBE_DEFAULT_MS 10000
/* The root when none is given: NVIDIA's (cmd/mps-control-daemon), where its chart and the
 * GPU Operator mount the host's MPS folder. */
#define MPSD_DEFAULT_ROOT "/mps"
/* NVIDIA's chart's and the Operator's host MPS folder, mounted at /mps */
#define MPSD_DEFAULT_HOST_ROOT "/run/nvidia/mps"

enum { OPT_BINARY = 0x1d00, OPT_PROBE };

struct mpsd_args {
    const char *binary;
    int64_t probe_ms;
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: gpuslice mps-control-daemon [mount-shm] [options]\n"
            "       mps-control-daemon [mount-shm] [options]\n\n"
            "Run one nvidia-cuda-mps-control per MPS resource of the config, with NVIDIA's\n"
            "limits (pinned memory and active threads per replica), supervised: a daemon\n"
            "that dies or hangs is restarted with its limits. <mps root>/.ready tells the\n"
            "device plugin they run. SIGHUP re-reads the config; SIGTERM stops them.\n"
            "mount-shm: mount the tmpfs <mps root>/shm (half the RAM) the daemons share.\n\n"
            "Options:\n"
            "      --config-file PATH        config (env CONFIG_FILE)\n"
            "      --mig-strategy S          (env MIG_STRATEGY)\n"
            "      --mps-root DIR            (env MPS_ROOT; flags.mpsRoot; default /mps)\n"
            "      --mps-control-binary P    nvidia-cuda-mps-control (env GPUSLICE_MPS_CONTROL)\n"
            "      --mps-probe-interval D    wedge probe period, 0 off (env\n"
            "                                GPUSLICE_MPS_PROBE_INTERVAL; default 10s)\n"
            "      --nvml-library PATH       (env GPUSLICE_NVML_LIBRARY)\n"
            "  -h, --help\n"
            "Every device plugin flag and env var is accepted. docs/mps.md.\n");
}

/* The probe period from the flag or the env var: a duration that fits the supervisor's. */
static bool parse_probe(const char *v, int64_t *ret)
{
    return cfg_duration_parse_ms(v, ret, NULL) == 0 && *ret >= 0 && *ret <= UINT32_MAX;
}

static int on_option(struct cli_node_args *a, int c, const char *arg, void *ctx)
{
    struct mpsd_args *x = ctx;
    (void)a;
    if (c == OPT_BINARY)
        x->binary = arg;
    else if (c == OPT_PROBE && !parse_probe(arg, &x->probe_ms))
        return cli_usage_error("mps-control-daemon",
                               "--mps-probe-interval takes a duration like 10s or 500ms");
    return -1;
}

/* SIGHUP: config-manager switched the config; start/stop daemons to match. */
static void reload(struct cli_node_args *a, struct mps_supervisor *sup,
                   struct mps_daemon_spec *specs)
{
    struct cli_node fresh = {0};
    struct error err = {0};
    int n;

    if (cli_node_load(a, false, true, &fresh) < 0)
        return;
    n = daemon_mps_specs(fresh.model, specs, &err);
    if (n < 0)
        log_error("mps-control-daemon: %s; keeping the running daemons", err.msg);
    else if (mps_supervisor_set(sup, specs, (size_t)n, &err) < 0)
        log_error("mps-control-daemon: %s (retrying)", err.msg);
    cli_node_release_node(&fresh);
}

/* Supervises until SIGTERM or SIGINT (signals on sfd). */
static void serve(struct cli_node_args *a, struct mps_supervisor *sup,
                  struct mps_daemon_spec *specs, int sfd)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = sfd, .events = POLLIN},
                              {.fd = mps_supervisor_fd(sup), .events = POLLIN}};
        struct signalfd_siginfo si;
        bool changed;

        if (poll(p, 2, -1) < 0)
            continue;
        if (p[1].revents)
            mps_supervisor_dispatch(sup, &changed);
        if (!p[0].revents || read(sfd, &si, sizeof(si)) != sizeof(si))
            continue;
        if (si.ssi_signo != SIGHUP)
            return;
        reload(a, sup, specs);
    }
}

/* SIGTERM, SIGINT and SIGHUP blocked and read from a signalfd: the fd, or -1 with errno. */
static int signals_fd(void)
{
    sigset_t mask;

    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        return -1;
    return signalfd(-1, &mask, SFD_CLOEXEC);
}

int cmd_mps_control_daemon(int argc, char **argv)
{
    static const struct option opts[] = {
        {"mps-control-binary", required_argument, NULL, OPT_BINARY},
        {"mps-probe-interval", required_argument, NULL, OPT_PROBE},
        {NULL, 0, NULL, 0},
    };
    struct mpsd_args x = {.binary = getenv("GPUSLICE_MPS_CONTROL"),
                          .probe_ms = MPSD_PROBE_DEFAULT_MS};
    struct mps_daemon_spec *specs = calloc(MPS_MAX_DAEMONS, sizeof(*specs));
    const char *probe_env = getenv("GPUSLICE_MPS_PROBE_INTERVAL");
    struct mps_supervisor *sup = NULL;
    struct gpu_nvml *nvml = NULL;
    struct cli_node_args a;
    struct cli_node node = {0};
    struct error err = {0};
    bool shm = false;
    int sfd = -1, rc;

    if (!specs)
        return CLI_EXIT_FAILURE;
    if (probe_env && *probe_env && !parse_probe(probe_env, &x.probe_ms)) {
        free(specs);
        return cli_usage_error("mps-control-daemon",
                               "GPUSLICE_MPS_PROBE_INTERVAL takes a duration like 10s or 500ms");
    }
    if (argc >= 2 && strcmp(argv[1], "mount-shm") == 0) {
        shm = true;
        argc--;
        argv++;
    }
    rc = cli_node_init(&a, "mps-control-daemon", CFG_BIN_PLUGIN);
    if (rc >= 0) {
        free(specs);
        return rc;
    }
    rc = cli_node_parse(&a, argc, argv, opts, on_option, &x, usage);
    if (rc >= 0)
        goto out;
    rc = CLI_EXIT_FAILURE;
    /* NVIDIA's daemon needs no root (its /mps is fixed) and neither its chart nor the GPU
     * Operator passes one, while the shared config refuses MPS sharing without one: when
     * neither a flag, MPS_ROOT nor the file gives one, the chart's host root (which
     * mps_local_root turns into /mps where the host's folder is mounted). */
    if (!cfg_overrides_get(&a.overrides, CFG_OPT_MPS_ROOT) && !cli_node_config_loads(&a) &&
        cfg_overrides_set(&a.overrides, "MPS_ROOT", MPSD_DEFAULT_HOST_ROOT, NULL) < 0)
        goto out;
    if (cli_node_load(&a, false, true, &node) < 0)
        goto out;
    /* NVIDIA's daemon has its root fixed at /mps, and neither its chart nor the GPU Operator
     * passes one: the same default here (a --mps-root/flags.mpsRoot still moves it) */
    const char *root = node.model->settings.mps_root ? mps_local_root(node.model->settings.mps_root)
                                                     : MPSD_DEFAULT_ROOT;
    if (shm) {
        rc = mps_mount_shm(root, &err) < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
        if (rc != CLI_EXIT_OK)
            fprintf(stderr, "gpuslice mps-control-daemon: %s\n", err.msg);
        goto out;
    }
    sfd = signals_fd();
    if (sfd < 0) {
        fprintf(stderr, "gpuslice mps-control-daemon: cannot take SIGTERM/SIGINT/SIGHUP: %s\n",
                strerror(errno));
        goto out;
    }
    signal(SIGPIPE, SIG_IGN);
    if (gpu_nvml_open(&a.nvml, &nvml, &err) < 0)
        log_warn("mps-control-daemon: no NVML (%s): compute modes are left as they are", err.msg);
    struct mps_options o = {.root = root,
                            .binary = x.binary,
                            .nvml = nvml,
                            .timeout_ms = MPS_DEFAULT_TIMEOUT_MS,
                            .probe_interval_ms = (unsigned)x.probe_ms,
                            .report = daemon_mps_report};
    if (mps_supervisor_new(&o, &sup, &err) < 0) {
        fprintf(stderr, "gpuslice mps-control-daemon: %s\n", err.msg);
        goto out;
    }
    int n = daemon_mps_specs(node.model, specs, &err);
    if (n < 0) {
        fprintf(stderr, "gpuslice mps-control-daemon: %s\n", err.msg);
        goto out;
    }
    if (n == 0)
        log_warn("mps-control-daemon: the config shares no resource with MPS: nothing to run");
    if (mps_supervisor_set(sup, specs, (size_t)n, &err) < 0)
        log_error("mps-control-daemon: %s (retrying)", err.msg);
    serve(&a, sup, specs, sfd);
    rc = CLI_EXIT_OK;
out:
    mps_supervisor_free(sup);
    gpu_nvml_close(nvml);
    if (sfd >= 0)
        close(sfd);
    free(specs);
    cli_node_release_node(&node);
    cli_node_release(&a);
    return rc;
}

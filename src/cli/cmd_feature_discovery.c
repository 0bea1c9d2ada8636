/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_feature_discovery.c: `gpuslice feature-discovery`, also run as NVIDIA's
 * gpu-feature-discovery: GFD's flags and env, the labels of `gpuslice labels` written to
 * NFD's local-source file or a NodeFeature object, once (--oneshot) or every
 * --sleep-interval ("infinite": once, then only on SIGHUP). SIGHUP re-reads config and GPUs
 * at once; SIGTERM/SIGINT stop. Unlike NVIDIA's, stopping leaves the labels in place
 * (NVIDIA #796): a restart must not unlabel a node whose GPUs are still there. */
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
#include "kube/kube.h"
#include "labels/labels.h"
#include "labels/write.h"

/* The longest single wait (a day; poll takes an int). */
#define GFD_WAIT_MAX_MS 86400000

#define DEFAULT_OUTPUT "/etc/kubernetes/node-feature-discovery/features.d/gfd"

enum {
    OPT_KUBECONFIG = 0x1900,
    OPT_NAMESPACE,
    OPT_NODE_NAME,
    OPT_POD_NAME,
    OPT_API_SERVER,
};

struct fd_args {
    const char *kubeconfig, *namespace_, *node_name, *pod_name, *api_server;
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: gpu-feature-discovery [options]   (also: gpuslice feature-discovery)\n\n"
            "Label this node's GPUs for Kubernetes, as NVIDIA's GPU feature discovery does,\n"
            "with the labels of `gpuslice labels`: to NFD's local-source file, or to a\n"
            "NodeFeature object (nfd.k8s-sigs.io/v1alpha1) through the API.\n\n"
            "Options (NVIDIA's names; each also from its env var):\n"
            "      --oneshot                 label once and exit (GFD_ONESHOT)\n"
            "      --no-timestamp            no nvidia.com/gfd.timestamp (GFD_NO_TIMESTAMP)\n"
            "      --sleep-interval D        relabel every D (60s), or 'infinite'\n"
            "      --output-file PATH        NFD file (default " DEFAULT_OUTPUT "; '' = stdout)\n"
            "      --use-node-feature-api[=B] write a NodeFeature object (default true)\n"
            "      --machine-type-file PATH  DMI product name\n"
            "      --mig-strategy S          none, single or mixed\n"
            "      --config-file PATH        device plugin config (file or ConfigMap dir)\n"
            "      --kubeconfig PATH         (KUBECONFIG; default in-cluster)\n"
            "      --namespace NS            of the NodeFeature (NAMESPACE; default default)\n"
            "      --node-name NAME          (NODE_NAME; needed for the NodeFeature API)\n"
            "      --pod-name NAME           owner of the NodeFeature (POD_NAME)\n"
            "      --nvml-library PATH, --driver-root PATH, -h/--help\n");
}

static int on_extra(struct cli_node_args *a, int c, const char *arg, void *ctx)
{
    struct fd_args *f = ctx;
    (void)a;
    switch (c) {
    case OPT_KUBECONFIG:
        f->kubeconfig = arg;
        return -1;
    case OPT_NAMESPACE:
        f->namespace_ = arg;
        return -1;
    case OPT_NODE_NAME:
        f->node_name = arg;
        return -1;
    case OPT_POD_NAME:
        f->pod_name = arg;
        return -1;
    case OPT_API_SERVER:
        f->api_server = arg;
        return -1;
    default:
        return CLI_EXIT_USAGE;
    }
}

static bool flag_true(const struct cli_node_args *a, enum cfg_option_id id, bool def)
{
    const char *v = cfg_overrides_get(&a->overrides, id);
    return v ? strcmp(v, "true") == 0 : def;
}

static const char *env_or(const char *v, const char *env, const char *def)
{
    const char *e = getenv(env);
    return v ? v : e && *e ? e : def;
}

/* One labelling pass: read config + GPUs, compute, write. 0 or <0 (logged). */
static int label_once(const struct cli_node_args *a, const struct fd_args *f,
                      struct kube_client *kc)
{
    const char *output = cfg_overrides_get(&a->overrides, CFG_OPT_GFD_OUTPUT_FILE);
    struct cli_node node = {0};
    struct labels_set *set = NULL;
    struct error err = {0};
    bool changed = false;
    int r;

    r = cli_node_load(a, true, true, &node);
    if (r == 0)
        r = cli_node_labels(a, &node, &set);
    if (r < 0)
        goto out;
    if (kc) {
        r = labels_write_nodefeature(kc, f->namespace_, f->node_name, f->pod_name, set, &changed,
                                     &err);
        if (r < 0)
            log_error("cannot write NodeFeature for node %s: %s", f->node_name, err.msg);
        else
            log_info("labels: %zu on node %s (NodeFeature %s)", set->n_labels, f->node_name,
                     changed ? "written" : "unchanged");
    } else {
        r = labels_write_file(set, output ? output : DEFAULT_OUTPUT, &err);
        if (r < 0)
            log_error("cannot write the labels: %s", err.msg);
        else if (output && *output)
            log_info("labels: %zu written to %s", set->n_labels, output);
    }
out:
    labels_set_free(set);
    cli_node_release_node(&node);
    return r;
}

static int signal_fd(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    return signalfd(-1, &set, SFD_CLOEXEC);
}

/* Waits for the interval (-1: for ever) or a signal: 1 = relabel, 0 = stop. */
static int wait_next(int sfd, int64_t interval_ms)
{
    struct pollfd p = {.fd = sfd, .events = POLLIN};
    struct signalfd_siginfo si;
    int n = poll(&p, 1,
                 interval_ms < 0
                     ? -1
                     : (int)(interval_ms > GFD_WAIT_MAX_MS ? GFD_WAIT_MAX_MS : interval_ms));

    if (n == 0)
        return 1;
    if (n < 0 || read(sfd, &si, sizeof(si)) != sizeof(si))
        return n < 0 && errno == EINTR ? 1 : 0;
    if (si.ssi_signo == SIGHUP) {
        log_info("SIGHUP: re-reading the config and GPUs");
        return 1;
    }
    log_info("signal %u: stopping, labels stay in place", si.ssi_signo);
    return 0;
}

int cmd_feature_discovery(int argc, char **argv)
{
    static const struct option extra[] = {
        {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
        {"namespace", required_argument, NULL, OPT_NAMESPACE},
        {"node-name", required_argument, NULL, OPT_NODE_NAME},
        {"pod-name", required_argument, NULL, OPT_POD_NAME},
        {"api-server", required_argument, NULL, OPT_API_SERVER},
        {NULL, 0, NULL, 0},
    };
    struct fd_args f = {0};
    struct cli_node_args a;
    struct kube_client *kc = NULL;
    struct error err = {0};
    int64_t interval_ms = CFG_GFD_SLEEP_INTERVAL_MS;
    const char *interval;
    int sfd = -1, rc;

    rc = cli_node_init(&a, "feature-discovery", CFG_BIN_GFD | CFG_BIN_PLUGIN);
    if (rc >= 0)
        return rc;
    a.output_is_file = true;
    rc = cli_node_parse(&a, argc, argv, extra, on_extra, &f, usage);
    if (rc >= 0)
        goto out;
    f.namespace_ = env_or(f.namespace_, "NAMESPACE", "default");
    f.node_name = env_or(f.node_name, "NODE_NAME", NULL);
    f.pod_name = env_or(f.pod_name, "POD_NAME", NULL);
    /* the API server stand-in every other command takes from the environment (tests) */
    f.api_server = env_or(f.api_server, "GPUSLICE_KUBE_API_SERVER", NULL);
    interval = cfg_overrides_get(&a.overrides, CFG_OPT_GFD_SLEEP_INTERVAL);
    if (interval && cfg_duration_parse_ms(interval, &interval_ms, &err) < 0) {
        rc = cli_usage_error(a.cmd, "--sleep-interval: %s", err.msg);
        goto out;
    }
    if (flag_true(&a, CFG_OPT_USE_NODE_FEATURE_API, true)) {
        struct kube_options ko = {
            .kubeconfig = f.kubeconfig, .node_name = f.node_name, .api_server = f.api_server};
        if (!f.node_name) {
            rc = cli_usage_error(a.cmd, "the NodeFeature API needs the node name: set "
                                        "NODE_NAME (downward API spec.nodeName) or "
                                        "--node-name, or use --use-node-feature-api=false "
                                        "for the NFD file");
            goto out;
        }
        if (kube_client_new(&ko, &kc, &err) < 0) {
            fprintf(stderr, "gpuslice %s: %s\n", a.cmd, err.msg);
            rc = CLI_EXIT_FAILURE;
            goto out;
        }
    }
    rc = CLI_EXIT_FAILURE;
    if (flag_true(&a, CFG_OPT_GFD_ONESHOT, false)) {
        rc = label_once(&a, &f, kc) < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
        goto out;
    }
    sfd = signal_fd();
    if (sfd < 0) {
        fprintf(stderr, "gpuslice %s: signalfd: %s\n", a.cmd, strerror(-sfd));
        goto out;
    }
    do {
        if (label_once(&a, &f, kc) < 0)
            log_warn("labelling failed, keeping the labels written before; retrying");
    } while (wait_next(sfd, interval_ms) == 1);
    rc = CLI_EXIT_OK;
out:
    if (sfd >= 0)
        close(sfd);
    kube_client_free(kc);
    cli_node_release(&a);
    return rc;
}

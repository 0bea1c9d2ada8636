/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_plan.c: `gpuslice plan` — what this node will advertise to the kubelet with a given
 * config, before anything is rolled out: resources, device counts, sharing and memory per
 * replica, with the model's errors and warnings; with --dra, the ResourceSlice the DRA
 * plugin would publish. Only wiring: config from config/, the snapshot from gpu/, the
 * decision and the report from model/ and dra/. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "cli/cli.h"
#include "config/config.h"
#include "dra/dra.h"
#include "gpu/gpu.h"
#include "model/model.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: gpuslice plan [options]\n\n"
            "Show what this node will advertise to the kubelet: resources, device counts,\n"
            "sharing, replicas and memory per replica, with errors and warnings. Reads the\n"
            "GPUs through NVML and the same config the device plugin would use (none: the\n"
            "built-in defaults). Exits 1 when the config has errors on this node.\n\n"
            "Options:\n"
            "      --config-file PATH     config file or ConfigMap directory (alias --config;\n"
            "                             env CONFIG_FILE)\n"
            "      --config-name NAME     named config in a directory (else 'default', or the\n"
            "                             only one)\n"
            "      --mig-strategy S       none, single or mixed (env MIG_STRATEGY)\n"
            "  -o, --output FORMAT        text (default) or json (--size too)\n"
            "      --nvml-library PATH    load this libnvidia-ml.so.1 (env "
            "GPUSLICE_NVML_LIBRARY)\n"
            "      --driver-root PATH     host driver root (env NVIDIA_DRIVER_ROOT; default /)\n"
            "      --driver-root-ctr-path PATH  driver root in this container (default "
            "/driver-root)\n"
            "      --size                 replicas that fit the largest process seen on each GPU\n"
            "                             (NVML), with the arithmetic and a config fragment\n"
            "      --per-process-memory M size for processes of M (4621MiB) instead\n"
            "      --metrics-address H:P  size from the most one pod used on each GPU since the\n"
            "                             running daemon started (its /metrics at H:P, as given\n"
            "                             to it; --from-metrics is the old name)\n"
            "      --headroom P           memory kept free when sizing (default 10%%)\n"
            "      --dra                  print the ResourceSlice (resource.k8s.io/v1, JSON) the\n"
            "                             DRA plugin would publish for this node, offline: no\n"
            "                             owner reference, every device counted healthy;\n"
            "                             GPUs that sharing.fractions selects are shareable\n"
            "                             by memory (a summary on stderr)\n"
            "      --node-name NAME       node (and pool) name for --dra (env NODE_NAME; default\n"
            "                             the host name)\n"
            "      --checkpoint PATH      with --dra: what the running plugin has already sold,\n"
            "                             from its checkpoint (/var/lib/kubelet/plugins/\n"
            "                             gpu.nvidia.com/checkpoint.json)\n"
            "  -h, --help                 show this help\n"
            "Every NVIDIA device plugin flag and env var is accepted (--mps-root,\n"
            "--device-id-strategy, ...), as the daemon takes them.\n");
}

enum {
    OPT_SIZE = 0x1900,
    OPT_PER_PROCESS,
    OPT_HEADROOM,
    OPT_FROM_METRICS,
    OPT_DRA,
    OPT_NODE_NAME,
    OPT_SYSFS_ROOT,
    OPT_CHECKPOINT
};

struct size_args {
    bool size;
    uint64_t per_process_mib;
    unsigned headroom_pct;
    const char *from_metrics;
    bool dra;
    const char *node_name;
    const char *checkpoint; /* --dra: the plugin's checkpoint, for what is sold */
};

static int on_size_option(struct cli_node_args *a, int c, const char *arg, void *ctx)
{
    struct size_args *z = ctx;
    unsigned v;

    switch (c) {
    case OPT_SIZE:
        z->size = true;
        return -1;
    case OPT_DRA:
        z->dra = true;
        return -1;
    case OPT_NODE_NAME:
        z->node_name = arg;
        return -1;
    case OPT_CHECKPOINT:
        z->checkpoint = arg;
        return -1;
    case OPT_SYSFS_ROOT: /* tests: where --dra resolves PCIe roots */
        a->nvml.sysfs_root = arg;
        return -1;
    case OPT_PER_PROCESS:
        z->size = true;
        if (cli_parse_mib(arg, &z->per_process_mib) < 0)
            return cli_usage_error(a->cmd,
                                   "--per-process-memory '%s': give MiB, e.g. 4621MiB "
                                   "or 5GiB",
                                   arg);
        return -1;
    case OPT_FROM_METRICS:
        z->size = true;
        z->from_metrics = arg;
        return -1;
    case OPT_HEADROOM: {
        char num[16];
        size_t n = strcspn(arg, "%");
        if (n == 0 || n >= sizeof(num) || (arg[n] && strcmp(arg + n, "%") != 0))
            return cli_usage_error(a->cmd, "--headroom '%s': give a percentage, e.g. 10%%", arg);
        memcpy(num, arg, n);
        num[n] = '\0';
        if (parse_uint(num, &v) < 0 || v >= 100)
            return cli_usage_error(a->cmd, "--headroom '%s': give a percentage below 100", arg);
        z->headroom_pct = v;
        return -1;
    }
    default:
        return CLI_EXIT_USAGE;
    }
}

/* What the checkpoint's claims took of one device: the memory and named compute of its
 * shares, and whether a claim holds it whole. */
struct sold {
    uint64_t memory_mib;
    unsigned compute_pct, n_shares;
    bool whole;
};

static struct sold sold_of(const struct dra_checkpoint *cp, const char *device)
{
    struct sold s = {0};

    for (size_t c = 0; cp && c < cp->n_claims; c++)
        for (size_t i = 0; i < cp->claims[c].plan->n_devices; i++) {
            const struct dra_plan_device *pd = &cp->claims[c].plan->devices[i];
            if (strcmp(pd->device.name, device) != 0 || pd->admin_access)
                continue;
            if (!pd->share.id[0]) {
                s.whole = true;
                continue;
            }
            s.memory_mib += pd->share.memory_mib;
            s.compute_pct += pd->share.thread_pct > 0 ? (unsigned)pd->share.thread_pct : 0;
            s.n_shares++;
        }
    return s;
}

/* On stderr, beside the slice: the GPUs sold by memory (sharing.fractions), their policies
 * and, with the running plugin's checkpoint (cp, may be NULL), what each can still sell. */
static void print_shareable(const struct dra_devices *devs, const struct dra_checkpoint *cp)
{
    size_t n = 0;

    for (size_t i = 0; i < devs->n_devices; i++) {
        const struct dra_device *d = &devs->devices[i];
        const struct dra_capacity *mem = dra_device_capacity(d, DRA_CAPACITY_MEMORY);
        const struct dra_capacity *cpu = dra_device_capacity(d, DRA_CAPACITY_COMPUTE);
        uint64_t total = 0;
        if (!d->shareable || !mem || !cpu)
            continue;
        if (n++ == 0)
            fprintf(stderr, "shareable by memory (sharing.fractions), what each can sell:\n");
        fprintf(stderr,
                "  %-8s %s memory: shares of %s to %s in %s steps (no amount: the whole GPU); "
                "%s %s: MPS thread ceilings of the shares that name one (none named: no "
                "ceiling)\n",
                d->info.name, mem->value, mem->policy.min, mem->value, mem->policy.step,
                DRA_CAPACITY_COMPUTE, cpu->value);
        if (!cp || dra_quantity_parse(mem->value, &total, NULL) < 0)
            continue;
        struct sold s = sold_of(cp, d->info.name);
        uint64_t total_mib = total >> 20,
                 left = s.memory_mib < total_mib ? total_mib - s.memory_mib : 0;
        if (s.whole)
            fprintf(stderr, "           sold: held whole by a claim; left: nothing\n");
        else
            fprintf(stderr,
                    "           sold: %lluMi in %u share%s (computePercent %u named); left: "
                    "%lluMi%s\n",
                    (unsigned long long)s.memory_mib, s.n_shares, s.n_shares == 1 ? "" : "s",
                    s.compute_pct, (unsigned long long)left, s.n_shares ? "" : " (the whole GPU)");
    }
    if (n && !cp)
        fprintf(stderr, "  (the whole capacity: --checkpoint PATH reads what the running plugin "
                        "has sold)\n");
}

/* The running plugin's checkpoint at path; NULL path: none. 0, or -1 with the error printed. */
static int read_checkpoint(const char *path, struct dra_checkpoint **ret)
{
    struct error err = {0};
    char *text = NULL;
    size_t len = 0;
    int r;

    *ret = NULL;
    if (!path)
        return 0;
    r = file_read_all(path, 64u << 20, &text, &len, NULL);
    if (r < 0) {
        fprintf(stderr, "gpuslice plan --dra: --checkpoint %s: %s\n", path, strerror(-r));
        return -1;
    }
    r = len ? dra_checkpoint_decode(text, len, ret, &err) : 0;
    if (r == 0 && !*ret)
        *ret = dra_checkpoint_new();
    free(text);
    if (r < 0 || !*ret) {
        fprintf(stderr, "gpuslice plan --dra: --checkpoint %s: %s\n", path,
                r < 0 ? err.msg : "out of memory");
        return -1;
    }
    return 0;
}

/* The ResourceSlice of this node, as `gpuslice dra-plugin` would create it. */
static int plan_dra(const struct cli_node *node, const char *sysfs_root, const char *node_name,
                    const char *checkpoint)
{
    struct dra_checkpoint *cp = NULL;
    char host[256];
    char(*roots)[64] = calloc(node->inv->n_gpus + 1, sizeof(*roots));
    const char **root_ptrs = calloc(node->inv->n_gpus + 1, sizeof(*root_ptrs));
    struct dra_devices_options opts = {.pcie_roots = root_ptrs, .cfg = node->cfg};
    struct dra_devices *devs = NULL;
    struct dra_slice_meta meta = {.generation = 1};
    json_t *slice = NULL;
    char *text = NULL;
    struct error err = {0};
    int rc = CLI_EXIT_FAILURE;

    if (!node_name || !*node_name)
        node_name = getenv("NODE_NAME");
    if ((!node_name || !*node_name) && gethostname(host, sizeof(host)) == 0) {
        host[sizeof(host) - 1] = '\0';
        node_name = host;
    }
    meta.node_name = node_name;
    if (read_checkpoint(checkpoint, &cp) < 0)
        goto out;
    if (!roots || !root_ptrs) {
        fprintf(stderr, "gpuslice plan --dra: out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < node->inv->n_gpus; i++) {
        gpu_pcie_root(sysfs_root ? sysfs_root : GPU_DEFAULT_SYSFS_ROOT,
                      node->inv->gpus[i].pci_bus_id, roots[i], sizeof(roots[i]));
        root_ptrs[i] = roots[i];
    }
    if (dra_config_check(node->cfg, &err) < 0 ||
        dra_devices_build(node->inv, &opts, &devs, &err) < 0 ||
        dra_slice_json(devs, &meta, DRA_API_V1, &slice, &err) < 0) {
        fprintf(stderr, "gpuslice plan --dra: %s\n", err.msg);
        goto out;
    }
    text = json_dumps(slice, JSON_INDENT(2));
    if (!text) {
        fprintf(stderr, "gpuslice plan --dra: out of memory\n");
        goto out;
    }
    printf("%s\n", text);
    print_shareable(devs, cp);
    rc = CLI_EXIT_OK;
out:
    free(text);
    json_decref(slice);
    dra_devices_free(devs);
    dra_checkpoint_free(cp);
    free(roots);
    free(root_ptrs);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    static const struct option size_opts[] = {
        {"size", no_argument, NULL, OPT_SIZE},
        {"per-process-memory", required_argument, NULL, OPT_PER_PROCESS},
        {"headroom", required_argument, NULL, OPT_HEADROOM},
        {"metrics-address", required_argument, NULL, OPT_FROM_METRICS},
        {"from-metrics", required_argument, NULL, OPT_FROM_METRICS}, /* its name before 0.2 */
        {"dra", no_argument, NULL, OPT_DRA},
        {"node-name", required_argument, NULL, OPT_NODE_NAME},
        {"sysfs-root", required_argument, NULL, OPT_SYSFS_ROOT}, /* tests */
        {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
        {NULL, 0, NULL, 0},
    };
    struct size_args z = {.headroom_pct = 10};
    struct cli_node_args a;
    struct cli_node node = {0};
    char *text = NULL;
    struct error err = {0};
    int rc;

    if (cli_admission_params_requested(argc, argv))
        return cli_plan_admission_params(argc, argv);
    rc = cli_node_init(&a, "plan", CFG_BIN_PLUGIN);
    if (rc >= 0)
        return rc;
    rc = cli_node_parse(&a, argc, argv, size_opts, on_size_option, &z, usage);
    if (rc >= 0)
        goto out;
    rc = CLI_EXIT_FAILURE;
    /* keep_valid: show every problem (in the report), and what is left */
    if (cli_node_load(&a, true, false, &node) < 0)
        goto out;
    if (z.dra) {
        rc = plan_dra(&node, a.nvml.sysfs_root, z.node_name, z.checkpoint);
        goto out;
    }
    if (z.size) {
        char *metrics = NULL;
        if (z.from_metrics && cli_metrics_fetch(z.from_metrics, &metrics, &err) < 0) {
            fprintf(stderr, "gpuslice plan: --metrics-address: %s\n", err.msg);
            goto out;
        }
        rc = cli_plan_size(&node, z.per_process_mib, z.headroom_pct, metrics, a.json, stdout);
        free(metrics);
        goto out;
    }
    if (a.json) {
        struct strbuf sb = STRBUF_INIT;
        if (cli_plan_json(node.model, node.inv, &sb) < 0) {
            strbuf_release(&sb);
            fprintf(stderr, "gpuslice plan: out of memory\n");
            goto out;
        }
        text = strbuf_take(&sb);
    } else if (model_plan_report(node.model, node.inv, &text, &err) < 0) {
        fprintf(stderr, "gpuslice plan: %s\n", err.msg);
        goto out;
    }
    fputs(text ? text : "", stdout);
    rc = node.model->n_errors > 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
out:
    free(text);
    cli_node_release_node(&node);
    cli_node_release(&a);
    return rc;
}

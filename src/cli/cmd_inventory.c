/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_inventory.c: `gpuslice inventory` — the survey operators do with `nvidia-smi -q` and
 * `nvidia-smi topo -m` in a privileged pod, in one command: GPUs, MIG devices, processes
 * and the topology matrix as a table, or as JSON with the stable field names documented in
 * docs/inventory.md. Only wiring and printing: the snapshot comes from gpu/gpu.h. */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/base.h"
#include "cli/cli.h"
#include "gpu/gpu.h"

enum { OPT_SYSFS_ROOT = 0x1b00 };

static void usage(FILE *f)
{
    fprintf(f, "Usage: gpuslice inventory [options]\n\n"
               "Survey this node's GPUs through NVML: model, memory, compute capability, MIG\n"
               "mode and devices, NUMA node, running processes and the GPU topology matrix.\n\n"
               "Options:\n"
               "  -o, --output FORMAT             text (default) or json\n"
               "      --nvml-library PATH         load this libnvidia-ml.so.1 (env "
               "GPUSLICE_NVML_LIBRARY)\n"
               "      --driver-root PATH          host driver root (env NVIDIA_DRIVER_ROOT; "
               "default /)\n"
               "      --driver-root-ctr-path PATH driver root as mounted in this container\n"
               "                                  (env DRIVER_ROOT_CTR_PATH; default "
               "/driver-root)\n"
               "      --fail-on-init-error[=BOOL] fail when NVML cannot be loaded or initialised\n"
               "                                  (env FAIL_ON_INIT_ERROR; default true); with\n"
               "                                  false, report no GPUs and exit 0\n"
               "      --config-file PATH          config file: its flags (failOnInitError, roots)\n"
               "                                  apply, as every device plugin flag and env var\n"
               "  -h, --help                      show this help\n\n"
               "Topology legend: X = self, NV# = # NVLinks, PIX = one PCIe switch, PXB = several\n"
               "PCIe switches, PHB = a PCIe host bridge, NODE = across host bridges within a NUMA\n"
               "node, SYS = across NUMA nodes, SAME = one board.\n");
}

/* ---- text ------------------------------------------------------------------------------- */

static const char *mig_mode_text(const struct inv_gpu *g)
{
    if (!g->mig_capable)
        return "n/a";
    if (g->mig_enabled == g->mig_pending)
        return g->mig_enabled ? "enabled" : "disabled";
    return g->mig_enabled ? "enabled (disable pending)" : "disabled (enable pending)";
}

/* Width of the widest value of a GPU string field (at least the header's). */
static int column_width(const struct inv_inventory *inv, size_t offset, size_t min)
{
    size_t w = min;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const char *s = (const char *)&inv->gpus[i] + offset;
        if (strlen(s) > w)
            w = strlen(s);
    }
    return (int)w;
}

static void print_gpus(FILE *f, const struct inv_inventory *inv)
{
    int nw = column_width(inv, offsetof(struct inv_gpu, name), 4);
    int bw = column_width(inv, offsetof(struct inv_gpu, brand), 5);
    int aw = column_width(inv, offsetof(struct inv_gpu, architecture), 4);
    int mw = 3;

    for (size_t i = 0; i < inv->n_gpus; i++)
        if ((int)strlen(mig_mode_text(&inv->gpus[i])) > mw)
            mw = (int)strlen(mig_mode_text(&inv->gpus[i]));

    fprintf(f, "%-4s %-*s %-*s %-12s %-5s %-*s %-*s %-5s %-17s %s\n", "GPU", nw, "NAME", bw,
            "BRAND", "MEMORY", "CC", aw, "ARCH", mw, "MIG", "NUMA", "BUS ID", "UUID");
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        char mem[32], cc[16], numa[16];

        if (g->memory_unknown) /* unified memory (GB10): NVML reports none */
            str_copy(mem, "unknown", sizeof(mem));
        else
            snprintf(mem, sizeof(mem), "%llu MiB", (unsigned long long)g->memory_mib);
        snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
        if (g->numa_node >= 0)
            snprintf(numa, sizeof(numa), "%d", g->numa_node);
        else
            str_copy(numa, "-", sizeof(numa));
        fprintf(f, "%-4u %-*s %-*s %-12s %-5s %-*s %-*s %-5s %-17s %s\n", g->index, nw, g->name, bw,
                g->brand, mem, cc, aw, g->architecture, mw, mig_mode_text(g), numa, g->pci_bus_id,
                g->uuid);
    }
}

static void print_migs(FILE *f, const struct inv_inventory *inv)
{
    bool any = false;

    for (size_t i = 0; i < inv->n_gpus; i++)
        any = any || inv->gpus[i].n_migs > 0;
    if (!any)
        return;
    fprintf(f, "\nMIG devices:\n%-4s %-4s %-14s %-4s %-4s %-12s %-4s %-9s %s\n", "GPU", "MIG",
            "PROFILE", "GI", "CI", "MEMORY", "SMS", "PLACEMENT", "UUID");
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        for (size_t k = 0; k < g->n_migs; k++) {
            const struct inv_mig_device *m = &g->migs[k];
            char mem[32], place[24];

            snprintf(mem, sizeof(mem), "%llu MiB", (unsigned long long)m->memory_mib);
            snprintf(place, sizeof(place), "%u:%u", m->placement_start, m->placement_size);
            fprintf(f, "%-4u %-4u %-14s %-4u %-4u %-12s %-4u %-9s %s\n", g->index, m->index,
                    m->profile, m->gi_id, m->ci_id, mem, m->multiprocessors, place, m->uuid);
        }
    }
}

static void format_id(char *buf, size_t size, unsigned id)
{
    if (id == INV_ID_NONE)
        str_copy(buf, "-", size);
    else
        snprintf(buf, size, "%u", id);
}

static void print_processes(FILE *f, const struct inv_inventory *inv)
{
    bool any = false;

    for (size_t i = 0; i < inv->n_gpus; i++)
        any = any || inv->gpus[i].n_procs > 0;
    fprintf(f, "\nProcesses:\n");
    if (!any) {
        fprintf(f, "  none\n");
        return;
    }
    fprintf(f, "%-4s %-4s %-4s %-10s %s\n", "GPU", "GI", "CI", "PID", "MEMORY");
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        for (size_t k = 0; k < g->n_procs; k++) {
            const struct inv_process *p = &g->procs[k];
            char gi[16], ci[16];

            format_id(gi, sizeof(gi), p->gi_id);
            format_id(ci, sizeof(ci), p->ci_id);
            fprintf(f, "%-4u %-4s %-4s %-10u %llu MiB\n", g->index, gi, ci, p->pid,
                    (unsigned long long)p->used_mib);
        }
    }
}

static void print_topology(FILE *f, const struct inv_inventory *inv)
{
    if (inv->n_gpus == 0)
        return;
    fprintf(f, "\nTopology:\n%-7s", "");
    for (size_t b = 0; b < inv->n_gpus; b++) {
        char h[32];
        snprintf(h, sizeof(h), "GPU%zu", b);
        fprintf(f, "%-7s", h);
    }
    fprintf(f, "NUMA\n");
    for (size_t a = 0; a < inv->n_gpus; a++) {
        char h[32];
        snprintf(h, sizeof(h), "GPU%zu", a);
        fprintf(f, "%-7s", h);
        for (size_t b = 0; b < inv->n_gpus; b++) {
            char buf[16];
            fprintf(f, "%-7s",
                    gpu_link_label(inv_link_between(inv, a, b), a == b, buf, sizeof(buf)));
        }
        if (inv->gpus[a].numa_node >= 0)
            fprintf(f, "%d\n", inv->gpus[a].numa_node);
        else
            fprintf(f, "-\n");
    }
    fprintf(f, "\nLegend: X = self, NV# = # NVLinks, PIX = one PCIe switch, PXB = several PCIe "
               "switches,\n  PHB = a PCIe host bridge, NODE = across host bridges within a "
               "NUMA node,\n  SYS = across NUMA nodes, SAME = one board\n");
}

static void print_text(FILE *f, const struct inv_inventory *inv)
{
    if (inv->cuda_version > 0)
        fprintf(f, "Driver version: %s   CUDA driver version: %d.%d   GPUs: %zu\n\n",
                inv->driver_version, inv->cuda_version / 1000, inv->cuda_version % 1000 / 10,
                inv->n_gpus);
    else
        fprintf(f, "Driver version: %s   CUDA driver version: unknown   GPUs: %zu\n\n",
                inv->driver_version[0] ? inv->driver_version : "none", inv->n_gpus);
    if (inv->n_gpus == 0) {
        fprintf(f, "No GPUs found.\n");
        return;
    }
    print_gpus(f, inv);
    print_migs(f, inv);
    print_processes(f, inv);
    print_topology(f, inv);
}

/* ---- JSON ------------------------------------------------------------------------------- */

static json_t *id_or_null(unsigned id)
{
    return id == INV_ID_NONE ? json_null() : json_integer(id);
}

static json_t *mig_json(const struct inv_mig_device *m)
{
    return json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:{s:I, s:I}}", "index",
                     (json_int_t)m->index, "uuid", m->uuid, "profile", m->profile, "gi_id",
                     (json_int_t)m->gi_id, "ci_id", (json_int_t)m->ci_id, "gi_profile_id",
                     (json_int_t)m->gi_profile_id, "ci_profile_id", (json_int_t)m->ci_profile_id,
                     "memory_mib", (json_int_t)m->memory_mib, "multiprocessors",
                     (json_int_t)m->multiprocessors, "placement", "start",
                     (json_int_t)m->placement_start, "size", (json_int_t)m->placement_size);
}

static json_t *gpu_json(const struct inv_gpu *g)
{
    json_t *migs = json_array(), *procs = json_array();
    char cc[16], dev_id[16];

    snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
    snprintf(dev_id, sizeof(dev_id), "0x%08X", (unsigned)g->pci_device_id);
    for (size_t k = 0; migs && k < g->n_migs; k++)
        if (json_array_append_new(migs, mig_json(&g->migs[k])) < 0) {
            json_decref(migs);
            migs = NULL;
        }
    for (size_t k = 0; procs && k < g->n_procs; k++) {
        const struct inv_process *p = &g->procs[k];
        json_t *o = json_pack("{s:I, s:I, s:o, s:o}", "pid", (json_int_t)p->pid, "used_memory_mib",
                              (json_int_t)p->used_mib, "gi_id", id_or_null(p->gi_id), "ci_id",
                              id_or_null(p->ci_id));
        if (json_array_append_new(procs, o) < 0) {
            json_decref(procs);
            procs = NULL;
        }
    }
    /* "o" steals the references, also when packing fails. memory_mib is null where NVML
     * reports no memory (unified memory), as numa_node is where there is none. */
    return json_pack("{s:I, s:I, s:s, s:s, s:s, s:s, s:s, s:o, s:{s:s, s:s}, s:o, "
                     "s:{s:b, s:b, s:b, s:o}, s:o}",
                     "index", (json_int_t)g->index, "minor", (json_int_t)g->minor, "uuid", g->uuid,
                     "name", g->name, "brand", g->brand, "architecture", g->architecture,
                     "compute_capability", cc, "memory_mib",
                     g->memory_unknown ? json_null() : json_integer((json_int_t)g->memory_mib),
                     "pci", "bus_id", g->pci_bus_id, "device_id", dev_id, "numa_node",
                     g->numa_node >= 0 ? json_integer(g->numa_node) : json_null(), "mig", "capable",
                     g->mig_capable, "enabled", g->mig_enabled, "pending_enabled", g->mig_pending,
                     "devices", migs, "processes", procs);
}

static json_t *topology_json(const struct inv_inventory *inv)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < inv->n_gpus; i++)
        for (size_t j = i + 1; a && j < inv->n_gpus; j++) {
            const struct inv_link *l = inv_link_between(inv, i, j);
            struct inv_link pcie_only = {0, l->pcie};
            char buf[16], pbuf[16];
            json_t *o = json_pack("{s:I, s:I, s:I, s:s, s:s}", "gpu_a", (json_int_t)i, "gpu_b",
                                  (json_int_t)j, "nvlinks", (json_int_t)l->nvlinks, "pcie",
                                  gpu_link_label(&pcie_only, false, pbuf, sizeof(pbuf)), "label",
                                  gpu_link_label(l, false, buf, sizeof(buf)));
            if (json_array_append_new(a, o) < 0) {
                json_decref(a);
                a = NULL;
            }
        }
    return a;
}

static int print_json(FILE *f, const struct inv_inventory *inv, char *const *warnings)
{
    json_t *gpus = json_array(), *warn = json_array(), *root;
    char cuda[16];
    int r = 0;

    snprintf(cuda, sizeof(cuda), "%d.%d", inv->cuda_version / 1000, inv->cuda_version % 1000 / 10);
    for (size_t i = 0; gpus && i < inv->n_gpus; i++)
        if (json_array_append_new(gpus, gpu_json(&inv->gpus[i])) < 0) {
            json_decref(gpus);
            gpus = NULL;
        }
    for (size_t i = 0; warn && warnings && warnings[i]; i++)
        if (json_array_append_new(warn, json_string(warnings[i])) < 0) {
            json_decref(warn);
            warn = NULL;
        }
    root = json_pack("{s:s, s:o, s:I, s:o, s:o, s:o}", "driver_version", inv->driver_version,
                     "cuda_driver_version", inv->cuda_version > 0 ? json_string(cuda) : json_null(),
                     "cuda_driver_version_int", (json_int_t)inv->cuda_version, "gpus", gpus,
                     "topology", topology_json(inv), "warnings", warn);
    if (!root || json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
        r = -ENOMEM;
    else
        fputc('\n', f);
    json_decref(root);
    return r;
}

/* ---- command ------------------------------------------------------------------------------ */

static int on_option(struct cli_node_args *a, int c, const char *arg, void *ctx)
{
    (void)ctx;
    if (c != OPT_SYSFS_ROOT)
        return CLI_EXIT_USAGE;
    a->nvml.sysfs_root = arg;
    return -1;
}

int cmd_inventory(int argc, char **argv)
{
    static const struct option opts[] = {
        {"sysfs-root", required_argument, NULL, OPT_SYSFS_ROOT}, /* tests */
        {NULL, 0, NULL, 0},
    };
    struct cli_node_args a;
    struct cfg_config *cfg = NULL;
    struct inv_inventory *inv = NULL;
    char **warnings = NULL;
    struct error err = {0};
    int r = cli_node_init(&a, "inventory", CFG_BIN_PLUGIN);

    if (r >= 0)
        return r;
    r = cli_node_parse(&a, argc, argv, opts, on_option, NULL, usage);
    if (r >= 0)
        goto out;
    /* --fail-on-init-error, FAIL_ON_INIT_ERROR and failOnInitError mean what they mean to the
     * daemon: the config (file, env, flags) decides */
    r = cli_node_load_config(&a, &cfg);
    if (r < 0) {
        r = CLI_EXIT_FAILURE;
        goto out;
    }
    r = gpu_inventory_open_and_read(&a.nvml, cfg->flags.fail_on_init_error, &inv, &warnings, &err);
    if (r < 0) {
        fprintf(stderr, "gpuslice inventory: %s\n", err.msg);
        r = CLI_EXIT_FAILURE;
        goto out;
    }
    for (size_t i = 0; warnings[i]; i++)
        log_warn("%s", warnings[i]);
    if (a.json) {
        r = print_json(stdout, inv, warnings);
        if (r < 0)
            fprintf(stderr, "gpuslice inventory: out of memory writing JSON\n");
    } else {
        print_text(stdout, inv);
    }
    if (fflush(stdout) != 0 && r >= 0) {
        fprintf(stderr, "gpuslice inventory: cannot write output: %s\n", strerror(errno));
        r = -EIO;
    }
    r = r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
out:
    inv_free(inv);
    strv_free(warnings);
    cfg_free(cfg);
    cli_node_release(&a);
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_labels.c: `gpuslice labels` — this node's GPU feature discovery labels, from the same
 * config, inventory and model the device plugin serves. Wiring only: what the labels are is
 * labels/; this file reads the few host facts labels/ takes as input (DMI product name, PCI
 * class) and prints. cli_node_labels() is shared with feature-discovery. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cli/cli.h"
#include "labels/labels.h"
#include "labels/write.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: gpuslice labels [options]\n\n"
            "Print this node's GPU labels (NVIDIA GPU feature discovery's, plus per-model and\n"
            "per-resource labels), one key=value a line sorted by key, computed from the\n"
            "same config and GPUs the device plugin serves.\n\n"
            "Options:\n"
            "      --config-file PATH     config file or ConfigMap directory (alias --config;\n"
            "                             env CONFIG_FILE)\n"
            "      --config-name NAME     named config in a directory\n"
            "      --mig-strategy S       none, single or mixed (env MIG_STRATEGY)\n"
            "      --machine-type-file P  DMI product name (default " LABELS_MACHINE_TYPE_FILE ")\n"
            "      --no-timestamp         leave out nvidia.com/gfd.timestamp\n"
            "  -o, --output FORMAT        text (default) or json\n"
            "      --nvml-library PATH    load this libnvidia-ml.so.1 (env GPUSLICE_NVML_LIBRARY)\n"
            "      --driver-root PATH     host driver root (env NVIDIA_DRIVER_ROOT; default /)\n"
            "  -h, --help                 show this help\n"
            "Every device plugin and GFD flag and env var is accepted (docs/labels.md).\n");
}

int cli_node_labels(const struct cli_node_args *a, const struct cli_node *node,
                    struct labels_set **ret_set)
{
    const char *machine_file = cfg_overrides_get(&a->overrides, CFG_OPT_GFD_MACHINE_TYPE_FILE);
    const char *no_ts = cfg_overrides_get(&a->overrides, CFG_OPT_GFD_NO_TIMESTAMP);
    struct labels_options o = {.timestamp = (int64_t)time(NULL)};
    struct labels_host host;
    struct error err = {0};
    int r;

    o.no_timestamp = no_ts && strcmp(no_ts, "true") == 0;
    r = labels_host_read(node->inv, a->nvml.sysfs_root, machine_file, &host);
    if (r < 0) {
        fprintf(stderr, "gpuslice %s: out of memory\n", a->cmd);
        return r;
    }
    if (host.vgpu_unreadable && !host.vgpu_present)
        fprintf(stderr,
                "gpuslice %s: warning: the PCI config space of NVIDIA devices is not fully "
                "readable (run privileged, as GFD's chart does): vgpu.present may be wrong\n",
                a->cmd);
    labels_host_apply(&host, &o);
    r = labels_compute(node->inv, node->model, &o, ret_set, &err);
    if (r < 0)
        fprintf(stderr, "gpuslice %s: %s\n", a->cmd, err.msg);
    labels_host_release(&host);
    return r;
}

int cli_labels_print(const struct labels_set *set, bool json, FILE *f)
{
    if (!json) {
        for (size_t i = 0; i < set->n_labels; i++)
            fprintf(f, "%s=%s\n", set->labels[i].key, set->labels[i].value);
        return 0;
    }
    json_t *o = json_object();
    char *text;
    int r = o ? 0 : -ENOMEM;

    for (size_t i = 0; i < set->n_labels && r == 0; i++)
        if (json_object_set_new(o, set->labels[i].key, json_string(set->labels[i].value)) < 0)
            r = -ENOMEM;
    text = r == 0 ? json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (text)
        fprintf(f, "%s\n", text);
    else
        r = -ENOMEM;
    free(text);
    json_decref(o);
    return r;
}

int cmd_labels(int argc, char **argv)
{
    struct cli_node_args a;
    struct cli_node node = {0};
    struct labels_set *set = NULL;
    int rc = cli_node_init(&a, "labels", CFG_BIN_PLUGIN | CFG_BIN_GFD);

    if (rc >= 0)
        return rc;
    rc = cli_node_parse(&a, argc, argv, NULL, NULL, NULL, usage);
    if (rc >= 0)
        goto out;
    rc = CLI_EXIT_FAILURE;
    /* as GFD does, label what the node has even where the plugin would refuse the config
     * (an invalid single strategy becomes -MIG-INVALID) */
    if (cli_node_load(&a, true, true, &node) < 0 || cli_node_labels(&a, &node, &set) < 0)
        goto out;
    rc = cli_labels_print(set, a.json, stdout) < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
out:
    labels_set_free(set);
    cli_node_release_node(&node);
    cli_node_release(&a);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_compute_domain.c: the names of NVIDIA's ComputeDomain programs (compute-domain-
 * kubelet-plugin, -controller, -daemon: multi-node NVLink/IMEX), which NVIDIA's DRA chart
 * v25.12.0 starts by default. gpuslice does not provide them: called, each fails at once
 * and names the chart value that turns them off, instead of a bare "command not found".
 * --help explains and exits 0. docs/operator.md, docs/dra.md. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* NVIDIA's chart value that gates every ComputeDomain component (templates/controller.yaml,
 * templates/kubeletplugin.yaml's compute-domains container). */
#define CD_CHART_VALUE "resources.computeDomains.enabled"

static void explain(FILE *f, const char *name)
{
    fprintf(f,
            "%s: gpuslice does not provide NVIDIA's ComputeDomain support (multi-node "
            "NVLink through IMEX daemons); only GPUs (gpu-kubelet-plugin) are served.\n"
            "Install NVIDIA's DRA chart with --set %s=false (the kubelet plugin then "
            "runs only its 'gpus' container, and no compute-domain controller is deployed), "
            "or keep NVIDIA's image for ComputeDomains. docs/operator.md.\n",
            name, CD_CHART_VALUE);
}

int cmd_compute_domain(int argc, char **argv)
{
    const char *name = strcmp(argv[0], "compute-domain") == 0 ? "gpuslice compute-domain" : argv[0];

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            explain(stdout, name);
            return CLI_EXIT_OK;
        }
    explain(stderr, name);
    return CLI_EXIT_FAILURE;
}

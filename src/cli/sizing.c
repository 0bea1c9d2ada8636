/* SPDX-License-Identifier: Apache-2.0 */
/* sizing.c: `gpuslice plan --size` — replicas per GPU model from the largest process seen
 * on its GPUs through NVML, the most one pod used there as the running daemon recorded it
 * (--from-metrics), or --per-process-memory, with --headroom kept free, the
 * arithmetic shown, and a config fragment to paste into the ConfigMap. The arithmetic is
 * model_size_replicas(); this file reads the node and prints. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* "4621", "4621MiB", "4621Mi", "5GiB", "5Gi": MiB. */
int cli_parse_mib(const char *s, uint64_t *ret)
{
    char num[32];
    size_t n = strspn(s, "0123456789");
    const char *unit = s + n;
    uint64_t v;

    if (n == 0 || n >= sizeof(num))
        return -EINVAL;
    memcpy(num, s, n);
    num[n] = '\0';
    if (parse_uint64(num, &v) < 0)
        return -EINVAL;
    if (!*unit || !strcmp(unit, "MiB") || !strcmp(unit, "Mi") || !strcmp(unit, "M"))
        *ret = v;
    else if (!strcmp(unit, "GiB") || !strcmp(unit, "Gi") || !strcmp(unit, "G"))
        *ret = v * 1024;
    else
        return -EINVAL;
    return *ret ? 0 : -EINVAL;
}

/* The largest process on a GPU (MiB and pid), 0 when none was seen. */
static uint64_t largest_process(const struct inv_gpu *g, unsigned *ret_pid)
{
    uint64_t best = 0;

    for (size_t i = 0; i < g->n_procs; i++)
        if (g->procs[i].used_mib > best) {
            best = g->procs[i].used_mib;
            *ret_pid = g->procs[i].pid;
        }
    return best;
}

/* The daemon's recorded peak for the GPU (MiB, the pod in *ret_pod), 0 when none. */
static uint64_t recorded_peak(const char *metrics, const char *uuid, char *ret_pod, size_t size)
{
    struct cli_metric_sample smp;
    char u[INV_UUID_MAX], ns[128], pod[128];

    for (const char *l = cli_metrics_next(metrics, &smp); l; l = cli_metrics_next(l, &smp)) {
        if (strcmp(smp.name, "gpuslice_gpu_pod_memory_peak_bytes") != 0)
            continue;
        cli_metrics_label(smp.labels, "UUID", u, sizeof(u));
        if (strcmp(u, uuid) != 0 || smp.value < (1 << 20))
            continue;
        cli_metrics_label(smp.labels, "namespace", ns, sizeof(ns));
        cli_metrics_label(smp.labels, "pod", pod, sizeof(pod));
        if (!*pod)
            cli_metrics_label(smp.labels, "pod_uid", pod, sizeof(pod));
        snprintf(ret_pod, size, "%s%s%s", ns, *ns ? "/" : "", pod);
        return (uint64_t)(smp.value / (1 << 20));
    }
    return 0;
}

int cli_plan_size(const struct cli_node *node, uint64_t per_process_mib, unsigned headroom_pct,
                  const char *metrics, FILE *out)
{
    const struct inv_inventory *inv = node->inv;
    char **models = strv_new();
    unsigned *replicas = NULL;
    size_t n_models = 0;
    int rc = CLI_EXIT_OK;

    replicas = calloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*replicas));
    if (!models || !replicas) {
        fprintf(stderr, "gpuslice plan: out of memory\n");
        rc = CLI_EXIT_FAILURE;
        goto out;
    }
    fprintf(out, "Sizing time-slicing replicas from measured memory (headroom %u%%):\n",
            headroom_pct);
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        struct model_sizing s;
        unsigned pid = 0;
        char pod[300] = "";
        uint64_t per = per_process_mib ? per_process_mib
                       : metrics       ? recorded_peak(metrics, g->uuid, pod, sizeof(pod))
                                       : largest_process(g, &pid);
        size_t k;

        if (g->mig_enabled) {
            fprintf(out, "  GPU %u %s: MIG enabled, size its MIG devices instead\n", g->index,
                    g->name);
            continue;
        }
        if (!per) {
            fprintf(out,
                    "  GPU %u %s: %s; pass --per-process-memory (the "
                    "peak of one workload, e.g. 4621MiB from nvidia-smi)\n",
                    g->index, g->name,
                    metrics ? "the daemon recorded no pod's memory on it" : "no process running");
            rc = CLI_EXIT_FAILURE;
            continue;
        }
        if (model_size_replicas(g->memory_mib, per, headroom_pct, &s) < 0)
            continue;
        fprintf(out,
                "  GPU %u %s: %llu MiB x (100%% - %u%%) = %llu MiB usable / %llu MiB per "
                "process",
                g->index, g->name, (unsigned long long)s.total_mib, headroom_pct,
                (unsigned long long)s.usable_mib, (unsigned long long)s.per_process_mib);
        if (!per_process_mib && metrics)
            fprintf(out, " (most one pod used since the daemon started: %s)", pod);
        else if (!per_process_mib)
            fprintf(out, " (largest seen: pid %u)", pid);
        fprintf(out, " = %llu.%02llu -> %u replica%s\n", (unsigned long long)(s.ratio_x100 / 100),
                (unsigned long long)(s.ratio_x100 % 100), s.replicas, s.replicas == 1 ? "" : "s");
        for (k = 0; k < n_models && strcmp(models[k], g->name) != 0; k++)
            ;
        if (k == n_models) {
            if (strv_push(&models, g->name) < 0) {
                rc = CLI_EXIT_FAILURE;
                goto out;
            }
            replicas[n_models++] = s.replicas;
        } else if (s.replicas < replicas[k]) {
            replicas[k] = s.replicas; /* every GPU of the model must fit it */
        }
    }
    for (size_t k = 0; k < n_models; k++) {
        fprintf(out, "\nSuggested config%s%s (paste under a ConfigMap key):\n",
                n_models > 1 ? " for nodes with " : "", n_models > 1 ? models[k] : "");
        fprintf(out,
                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                "      - name: nvidia.com/gpu\n        replicas: %u\n",
                replicas[k]);
    }
out:
    strv_free(models);
    free(replicas);
    return rc;
}

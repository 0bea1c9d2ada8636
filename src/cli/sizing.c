/* SPDX-License-Identifier: Apache-2.0 */
/* sizing.c: `gpuslice plan --size` — replicas per GPU model from the largest process seen
 * on its GPUs through NVML, the most one pod used there as the running daemon recorded it
 * (--metrics-address), or --per-process-memory, with --headroom kept free, the
 * arithmetic shown, and a config fragment to paste into the ConfigMap. The arithmetic is
 * model_size_replicas(); this file reads the node and prints. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

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

/* One GPU's sizing: status "sized" with the arithmetic and where the size came from, "mig"
 * (size its MIG devices instead), "memory-unknown" (NVML reports no memory: unified-memory
 * GPUs) or "no-data" (nothing measured). NULL when out of memory. */
static json_t *size_gpu(const struct inv_gpu *g, uint64_t per_process_mib, unsigned headroom_pct,
                        const char *metrics)
{
    struct model_sizing s;
    unsigned pid = 0;
    char pod[300] = "";
    uint64_t per = per_process_mib ? per_process_mib
                   : metrics       ? recorded_peak(metrics, g->uuid, pod, sizeof(pod))
                                   : largest_process(g, &pid);
    json_t *o = json_pack("{s:i,s:s,s:s}", "index", g->index, "name", g->name, "uuid", g->uuid);

    if (!o)
        return NULL;
    if (g->mig_enabled)
        json_object_set_new(o, "status", json_string("mig"));
    else if (g->memory_unknown) /* nothing to divide: refuse rather than guess */
        json_object_set_new(o, "status", json_string("memory-unknown"));
    else if (!per || model_size_replicas(g->memory_mib, per, headroom_pct, &s) < 0)
        json_object_set_new(o, "status", json_string("no-data"));
    else {
        json_t *r = json_pack("{s:s,s:I,s:I,s:I,s:f,s:i}", "status", "sized", "total_mib",
                              (json_int_t)s.total_mib, "usable_mib", (json_int_t)s.usable_mib,
                              "per_process_mib", (json_int_t)s.per_process_mib, "ratio",
                              (double)s.ratio_x100 / 100.0, "replicas", s.replicas);
        json_object_update(o, r);
        json_decref(r);
        if (per_process_mib)
            json_object_set_new(o, "source", json_string("per-process-memory"));
        else if (metrics)
            json_object_set_new(o, "source", json_pack("{s:s}", "pod", pod));
        else
            json_object_set_new(o, "source", json_pack("{s:i}", "pid", pid));
        json_object_set_new(o, "ratio_x100", json_integer((json_int_t)s.ratio_x100));
    }
    return o;
}

static void print_gpu(const json_t *o, unsigned headroom_pct, bool metrics, FILE *out)
{
    const char *status = json_string_value(json_object_get(o, "status"));
    const char *name = json_string_value(json_object_get(o, "name"));
    long long index = json_integer_value(json_object_get(o, "index"));
    const json_t *src = json_object_get(o, "source");
    long long x100 = json_integer_value(json_object_get(o, "ratio_x100"));
    long long replicas = json_integer_value(json_object_get(o, "replicas"));

    if (strcmp(status, "mig") == 0) {
        fprintf(out, "  GPU %lld %s: MIG enabled, size its MIG devices instead\n", index, name);
        return;
    }
    if (strcmp(status, "memory-unknown") == 0) {
        fprintf(out,
                "  GPU %lld %s: NVML does not report its memory (Not Supported: unified memory), "
                "so its replicas cannot be sized from memory; choose them yourself\n",
                index, name);
        return;
    }
    if (strcmp(status, "no-data") == 0) {
        fprintf(out,
                "  GPU %lld %s: %s; pass --per-process-memory (the peak of one workload, e.g. "
                "4621MiB from nvidia-smi)\n",
                index, name,
                metrics ? "the daemon recorded no pod's memory on it" : "no process running");
        return;
    }
    fprintf(out,
            "  GPU %lld %s: %lld MiB x (100%% - %u%%) = %lld MiB usable / %lld MiB per process",
            index, name, json_integer_value(json_object_get(o, "total_mib")), headroom_pct,
            json_integer_value(json_object_get(o, "usable_mib")),
            json_integer_value(json_object_get(o, "per_process_mib")));
    if (json_object_get(src, "pod"))
        fprintf(out, " (most one pod used since the daemon started: %s)",
                json_string_value(json_object_get(src, "pod")));
    else if (json_object_get(src, "pid"))
        fprintf(out, " (largest seen: pid %lld)", json_integer_value(json_object_get(src, "pid")));
    fprintf(out, " = %lld.%02lld -> %lld replica%s\n", x100 / 100, x100 % 100, replicas,
            replicas == 1 ? "" : "s");
}

/* Per model, the replicas every GPU of it fits (the fewest), in order of first GPU. */
static json_t *suggested_configs(const json_t *gpus)
{
    json_t *out = json_array(), *g;
    size_t i;

    json_array_foreach(gpus, i, g)
    {
        const char *name = json_string_value(json_object_get(g, "name"));
        json_int_t r = json_integer_value(json_object_get(g, "replicas"));
        json_t *c = NULL, *x;
        size_t k;
        if (strcmp(json_string_value(json_object_get(g, "status")), "sized") != 0)
            continue;
        json_array_foreach(out, k, x)
        {
            if (strcmp(json_string_value(json_object_get(x, "model")), name) == 0)
                c = x;
        }
        if (!c)
            json_array_append_new(out, json_pack("{s:s,s:I}", "model", name, "replicas", r));
        else if (r < json_integer_value(json_object_get(c, "replicas")))
            json_object_set_new(c, "replicas", json_integer(r));
    }
    json_array_foreach(out, i, g)
    {
        char text[256];
        snprintf(text, sizeof(text),
                 "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                 "      - name: nvidia.com/gpu\n        replicas: %lld\n",
                 (long long)json_integer_value(json_object_get(g, "replicas")));
        json_object_set_new(g, "config", json_string(text));
    }
    return out;
}

int cli_plan_size(const struct cli_node *node, uint64_t per_process_mib, unsigned headroom_pct,
                  const char *metrics, bool json, FILE *out)
{
    const struct inv_inventory *inv = node->inv;
    json_t *gpus = json_array(), *configs = NULL, *g;
    int rc = CLI_EXIT_OK;
    size_t i;

    for (i = 0; gpus && i < inv->n_gpus; i++) {
        json_t *o = size_gpu(&inv->gpus[i], per_process_mib, headroom_pct, metrics);
        if (!o || json_array_append_new(gpus, o) < 0) {
            json_decref(gpus);
            gpus = NULL;
        }
    }
    configs = gpus ? suggested_configs(gpus) : NULL;
    if (!configs) {
        fprintf(stderr, "gpuslice plan: out of memory\n");
        json_decref(gpus);
        return CLI_EXIT_FAILURE;
    }
    json_array_foreach(gpus, i, g)
    {
        const char *status = json_string_value(json_object_get(g, "status"));
        /* a GPU nothing was measured on, or one whose size is unknown */
        if (strcmp(status, "no-data") == 0 || strcmp(status, "memory-unknown") == 0)
            rc = CLI_EXIT_FAILURE;
        if (json)
            json_object_del(g, "ratio_x100"); /* the text's exact figure; JSON has "ratio" */
    }
    if (json) {
        json_t *root = json_pack("{s:i,s:O,s:O}", "headroom_pct", headroom_pct, "gpus", gpus,
                                 "configs", configs);
        char *text =
            root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6))
                 : NULL;
        fprintf(out, "%s\n", text ? text : "{}");
        free(text);
        json_decref(root);
    } else {
        fprintf(out, "Sizing time-slicing replicas from measured memory (headroom %u%%):\n",
                headroom_pct);
        json_array_foreach(gpus, i, g) print_gpu(g, headroom_pct, metrics != NULL, out);
        json_array_foreach(configs, i, g)
        {
            size_t n = json_array_size(configs);
            fprintf(out, "\nSuggested config%s%s (paste under a ConfigMap key):\n%s",
                    n > 1 ? " for nodes with " : "",
                    n > 1 ? json_string_value(json_object_get(g, "model")) : "",
                    json_string_value(json_object_get(g, "config")));
        }
    }
    json_decref(gpus);
    json_decref(configs);
    return rc;
}

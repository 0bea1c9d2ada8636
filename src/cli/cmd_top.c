/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_top.c: `gpuslice top` — a kubectl-top-like view of this node's GPUs and the pods on
 * them, read from the running daemon's /metrics (its sampler's dcgm-compatible series and
 * per-pod attribution): per GPU the model, utilization, memory, temperature and power, the
 * pods with their memory and SM share, and the replicas that fit from the largest pod
 * (the arithmetic of `plan --size`). Refreshes in place on a terminal; -o json is one shot. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define TOP_MAX_GPUS 64
#define TOP_MAX_PODS 256

struct top_pod {
    char ns[128], name[128], resource[128];
    unsigned gpu;
    double bytes, sm, replicas;
};

struct top_gpu {
    bool seen;
    char uuid[INV_UUID_MAX], model[INV_NAME_MAX];
    double util, fb_used, fb_free, temp, power;
    double pod_peak;  /* the most one pod used here since the daemon started */
    double unhealthy; /* devices of it advertised Unhealthy */
};

struct top_view {
    struct top_gpu gpus[TOP_MAX_GPUS];
    struct top_pod pods[TOP_MAX_PODS];
    size_t n_pods;
    double host_bytes[TOP_MAX_GPUS];
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: gpuslice top [--metrics-address HOST:PORT] [-o text|json] [--once]\n\n"
               "This node's GPUs and the pods on them, from the running device plugin's\n"
               "/metrics (start it with --metrics-address; our manifests do, on :9400):\n"
               "utilization, memory, temperature, power per GPU; memory and SM share per pod;\n"
               "the replicas that fit the largest pod's memory (its peak since the daemon\n"
               "started) with 10%% headroom.\n\n"
               "      --metrics-address HOST:PORT\n"
               "                           the daemon's endpoint, as given to it (env\n"
               "                           GPUSLICE_METRICS_ADDRESS; default 127.0.0.1:9400;\n"
               "                           --address is the old name)\n"
               "  -o, --output FORMAT      text (default, refreshed every 2 s on a terminal)\n"
               "                           or json (one shot)\n"
               "      --once               print once and exit\n"
               "  -h, --help\n");
}

static void parse(const char *text, struct top_view *v)
{
    struct cli_metric_sample smp;

    memset(v, 0, sizeof(*v));
    for (const char *l = cli_metrics_next(text, &smp); l; l = cli_metrics_next(l, &smp)) {
        const char *name = smp.name, *labels = smp.labels;
        double val = smp.value;
        char s[64];
        unsigned g;
        cli_metrics_label(labels, "gpu", s, sizeof(s));
        if (parse_uint(s, &g) < 0 || g >= TOP_MAX_GPUS)
            continue;
        struct top_gpu *gpu = &v->gpus[g];
        if (strcmp(name, "gpuslice_gpu_pod_memory_peak_bytes") == 0) {
            v->gpus[g].pod_peak = val;
        } else if (strcmp(name, "gpuslice_gpu_unhealthy_devices") == 0) {
            v->gpus[g].unhealthy = val;
        } else if (str_startswith(name, "DCGM_FI_DEV_")) {
            char gi[16];
            cli_metrics_label(labels, "GPU_I_ID", gi, sizeof(gi));
            /* a MIG GPU's framebuffer comes per GPU instance only (as dcgm-exporter's):
             * summed, it is the GPU's; its instances' other series are not top's */
            bool fb_used = strcmp(name, "DCGM_FI_DEV_FB_USED") == 0;
            if (*gi && (fb_used || strcmp(name, "DCGM_FI_DEV_FB_FREE") == 0)) {
                *(fb_used ? &gpu->fb_used : &gpu->fb_free) += val;
                continue;
            }
            if (*gi)
                continue;
            gpu->seen = true;
            cli_metrics_label(labels, "UUID", gpu->uuid, sizeof(gpu->uuid));
            cli_metrics_label(labels, "modelName", gpu->model, sizeof(gpu->model));
            if (strcmp(name, "DCGM_FI_DEV_GPU_UTIL") == 0)
                gpu->util = val;
            else if (strcmp(name, "DCGM_FI_DEV_FB_USED") == 0)
                gpu->fb_used = val;
            else if (strcmp(name, "DCGM_FI_DEV_FB_FREE") == 0)
                gpu->fb_free = val;
            else if (strcmp(name, "DCGM_FI_DEV_GPU_TEMP") == 0)
                gpu->temp = val;
            else if (strcmp(name, "DCGM_FI_DEV_POWER_USAGE") == 0)
                gpu->power = val;
        } else if (strcmp(name, "gpuslice_host_gpu_memory_used_bytes") == 0) {
            v->host_bytes[g] += val;
        } else if (str_startswith(name, "gpuslice_pod_gpu_")) {
            char ns[128], pod[128], uid[64];
            cli_metrics_label(labels, "namespace", ns, sizeof(ns));
            cli_metrics_label(labels, "pod", pod, sizeof(pod));
            cli_metrics_label(labels, "pod_uid", uid, sizeof(uid));
            if (!*pod)
                snprintf(pod, sizeof(pod), "uid:%.60s", uid);
            size_t k = 0;
            while (k < v->n_pods && !(v->pods[k].gpu == g && strcmp(v->pods[k].ns, ns) == 0 &&
                                      strcmp(v->pods[k].name, pod) == 0))
                k++;
            if (k == v->n_pods) {
                if (k == TOP_MAX_PODS)
                    continue;
                memset(&v->pods[k], 0, sizeof(v->pods[k]));
                str_copy(v->pods[k].ns, ns, sizeof(v->pods[k].ns));
                str_copy(v->pods[k].name, pod, sizeof(v->pods[k].name));
                cli_metrics_label(labels, "resource", v->pods[k].resource,
                                  sizeof(v->pods[k].resource));
                v->pods[k].gpu = g;
                v->pods[k].sm = -1;
                v->n_pods++;
            }
            /* a pod's containers have series of their own: summed */
            if (strcmp(name, "gpuslice_pod_gpu_memory_used_bytes") == 0)
                v->pods[k].bytes += val;
            else if (strcmp(name, "gpuslice_pod_gpu_sm_utilization_ratio") == 0)
                v->pods[k].sm = (v->pods[k].sm < 0 ? 0 : v->pods[k].sm) + val;
            else if (strcmp(name, "gpuslice_pod_gpu_replicas") == 0)
                v->pods[k].replicas += val;
        }
    }
}

/* Replicas that fit the largest pod on GPU g, now or at its recorded peak (plan --size's
 * arithmetic, 10 % headroom). */
static unsigned fit(const struct top_view *v, unsigned g, uint64_t *ret_peak_mib)
{
    double peak = v->gpus[g].pod_peak;
    struct model_sizing z;
    for (size_t k = 0; k < v->n_pods; k++)
        if (v->pods[k].gpu == g && v->pods[k].bytes > peak)
            peak = v->pods[k].bytes;
    *ret_peak_mib = (uint64_t)(peak / (1 << 20));
    uint64_t total = (uint64_t)(v->gpus[g].fb_used + v->gpus[g].fb_free);
    if (!*ret_peak_mib || !total || model_size_replicas(total, *ret_peak_mib, 10, &z) < 0)
        return 0;
    return z.replicas;
}

static int print_json(const struct top_view *v)
{
    json_t *gpus = json_array();
    for (unsigned g = 0; g < TOP_MAX_GPUS; g++) {
        const struct top_gpu *x = &v->gpus[g];
        if (!x->seen)
            continue;
        uint64_t peak;
        unsigned fits = fit(v, g, &peak);
        json_t *pods = json_array();
        for (size_t k = 0; k < v->n_pods; k++) {
            const struct top_pod *p = &v->pods[k];
            if (p->gpu != g)
                continue;
            json_array_append_new(pods, json_pack("{s:s,s:s,s:s,s:I,s:f,s:i}", "namespace", p->ns,
                                                  "pod", p->name, "resource", p->resource,
                                                  "memory_bytes", (json_int_t)p->bytes, "sm_ratio",
                                                  p->sm, "replicas", (int)p->replicas));
        }
        json_array_append_new(
            gpus, json_pack("{s:i,s:s,s:s,s:f,s:I,s:I,s:f,s:f,s:I,s:i,s:o,s:{s:I,s:i}}", "gpu", g,
                            "uuid", x->uuid, "model", x->model, "utilization", x->util,
                            "memory_used_mib", (json_int_t)x->fb_used, "memory_total_mib",
                            (json_int_t)(x->fb_used + x->fb_free), "temperature_c", x->temp,
                            "power_w", x->power, "host_process_bytes", (json_int_t)v->host_bytes[g],
                            "unhealthy_devices", (int)x->unhealthy, "pods", pods, "sizing",
                            "largest_pod_mib", (json_int_t)peak, "replicas_that_fit", fits));
    }
    char *text = json_dumps(gpus, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    printf("%s\n", text ? text : "[]");
    free(text);
    json_decref(gpus);
    return CLI_EXIT_OK;
}

static void print_text(const struct top_view *v)
{
    printf("%-4s %-26s %5s %17s %6s %7s  %s\n", "GPU", "MODEL", "UTIL", "MEMORY", "TEMP", "POWER",
           "FITS");
    for (unsigned g = 0; g < TOP_MAX_GPUS; g++) {
        const struct top_gpu *x = &v->gpus[g];
        char mem[32];
        uint64_t peak;
        if (!x->seen)
            continue;
        unsigned fits = fit(v, g, &peak);
        snprintf(mem, sizeof(mem), "%.0f/%.0f MiB", x->fb_used, x->fb_used + x->fb_free);
        printf("%-4u %-26.26s %4.0f%% %17s %5.0fC %6.0fW  ", g, x->model, x->util, mem, x->temp,
               x->power);
        if (fits)
            printf("%u replicas of the largest pod (%llu MiB)\n", fits, (unsigned long long)peak);
        else
            printf("-\n");
        if (x->unhealthy > 0)
            printf("     UNHEALTHY: %.0f device%s (the daemon's log and node Events say why)\n",
                   x->unhealthy, x->unhealthy == 1 ? "" : "s");
        for (size_t k = 0; k < v->n_pods; k++) {
            const struct top_pod *p = &v->pods[k];
            if (p->gpu != g)
                continue;
            printf("     %s/%s  %.0f MiB", p->ns, p->name, p->bytes / (1 << 20));
            if (p->sm >= 0)
                printf("  SM %.0f%%", p->sm * 100);
            if (p->replicas)
                printf("  %.0f replica%s of %s", p->replicas, p->replicas == 1 ? "" : "s",
                       p->resource);
            printf("\n");
        }
        if (v->host_bytes[g] > 0)
            printf("     (host processes)  %.0f MiB\n", v->host_bytes[g] / (1 << 20));
    }
}

int cmd_top(int argc, char **argv)
{
    static const struct option opts[] = {
        {"metrics-address", required_argument, NULL, 'a'},
        {"address", required_argument, NULL, 'a'}, /* its name before 0.2 */
        {"output", required_argument, NULL, 'o'},
        {"once", no_argument, NULL, '1'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *address = getenv("GPUSLICE_METRICS_ADDRESS");
    bool json = false, once = !isatty(STDOUT_FILENO);
    int c;

    if (!address || !*address)
        address = "127.0.0.1:9400";
    if (address[0] == ':') { /* ":9400", as the daemon takes it: this host */
        static char local[64];
        snprintf(local, sizeof(local), "127.0.0.1%s", address);
        address = local;
    }
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'a':
            address = optarg;
            break;
        case 'o':
            if (cli_output_option("top", optarg, &json) >= 0)
                return CLI_EXIT_USAGE;
            break;
        case '1':
            once = true;
            break;
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        default:
            return cli_getopt_error("top", c, argv);
        }
    }
    for (;;) {
        char *text = NULL;
        struct error err = {0};
        struct top_view *v = calloc(1, sizeof(*v));
        if (!v || cli_metrics_fetch(address, &text, &err) < 0) {
            fprintf(stderr, "gpuslice top: %s\n", v ? err.msg : "out of memory");
            free(v);
            return CLI_EXIT_FAILURE;
        }
        parse(text, v);
        free(text);
        if (json) {
            print_json(v);
            free(v);
            return CLI_EXIT_OK;
        }
        if (!once)
            printf("\033[H\033[2J"); /* refresh in place */
        print_text(v);
        free(v);
        if (once)
            return CLI_EXIT_OK;
        fflush(stdout);
        sleep(2);
    }
}

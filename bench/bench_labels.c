/* SPDX-License-Identifier: Apache-2.0 */
/* bench_labels.c: labels_compute() on a large node — 16 H100s × 7 MIG devices under the
 * mixed strategy, and 16 whole GPUs time-sliced ×64 — against the issue's < 1 ms target.
 * Pure CPU work, no NVML; JSON lines like the other benches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "config/config.h"
#include "gpu/inventory.h"
#include "labels/labels.h"
#include "model/model.h"

#define N_GPUS 16
#define N_MIGS 7
#define ITERS 2000

static struct inv_inventory *node(bool mig)
{
    struct inv_inventory *inv = calloc(1, sizeof(*inv));

    if (!inv)
        return NULL;
    inv->gpus = calloc(N_GPUS, sizeof(*inv->gpus));
    inv->links = calloc(N_GPUS * N_GPUS, sizeof(*inv->links));
    if (!inv->gpus || !inv->links)
        goto fail;
    str_copy(inv->driver_version, "570.158.01", sizeof(inv->driver_version));
    inv->cuda_version = 12080;
    inv->n_gpus = N_GPUS;
    for (unsigned i = 0; i < N_GPUS; i++) {
        struct inv_gpu *g = &inv->gpus[i];
        g->index = g->minor = i;
        snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-0000-4000-8000-%012x", i + 1, i + 1);
        str_copy(g->name, "NVIDIA H100 80GB HBM3", sizeof(g->name));
        g->memory_mib = 81559;
        g->cc_major = 9;
        g->mig_capable = g->mig_enabled = mig;
        if (!mig)
            continue;
        g->migs = calloc(N_MIGS, sizeof(*g->migs));
        if (!g->migs)
            goto fail;
        g->n_migs = N_MIGS;
        for (unsigned k = 0; k < N_MIGS; k++) {
            struct inv_mig_device *m = &g->migs[k];
            m->index = k;
            m->gi_id = 7 + k;
            snprintf(m->uuid, sizeof(m->uuid), "MIG-%08x-1111-4000-8000-%012x", i + 1, k);
            str_copy(m->profile, "1g.10gb", sizeof(m->profile));
            m->memory_mib = 9856;
            m->multiprocessors = 16;
            m->gi_slices = m->ci_slices = 1;
            m->copy_engines = 1;
        }
    }
    return inv;
fail:
    inv_free(inv);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int run(const char *what, bool mig, unsigned replicas)
{
    static uint64_t ns[ITERS];
    struct inv_inventory *inv = node(mig);
    struct cfg_config *cfg = NULL;
    struct model *m = NULL;
    struct cfg_replicated_resource rule = {0};
    struct labels_options o = {.no_timestamp = true};
    struct error err = {0};
    size_t n_labels = 0;
    int r = -ENOMEM;

    if (!inv || cfg_new_default(&cfg, &err) < 0)
        goto out;
    cfg->flags.mig_strategy = mig ? CFG_MIG_MIXED : CFG_MIG_NONE;
    if (replicas > 1) {
        rule.name = (char *)"nvidia.com/gpu";
        rule.replicas = replicas;
        cfg->sharing_strategy = CFG_SHARING_TIME_SLICING;
        cfg->sharing.resources = &rule;
        cfg->sharing.n_resources = 1;
    }
    r = model_build(inv, cfg, NULL, &m, &err);
    if (replicas > 1) { /* the rule is ours, not the config's */
        cfg->sharing.resources = NULL;
        cfg->sharing.n_resources = 0;
    }
    if (r < 0)
        goto out;
    for (size_t i = 0; i < ITERS; i++) {
        struct labels_set *s = NULL;
        uint64_t t0 = time_now_ns();
        r = labels_compute(inv, m, &o, &s, &err);
        ns[i] = time_now_ns() - t0;
        if (r < 0)
            goto out;
        n_labels = s->n_labels;
        labels_set_free(s);
    }
    qsort(ns, ITERS, sizeof(*ns), cmp_u64);
    printf("{\"bench\":\"labels\",\"case\":\"%s\",\"labels\":%zu,\"iterations\":%d,"
           "\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"target_us\":1000,"
           "\"pass\":%s,\"conditions\":{\"gpus\":%d,\"mig_per_gpu\":%d,\"replicas\":%u}}\n",
           what, n_labels, ITERS, ns[ITERS / 2] / 1000.0, ns[ITERS * 99 / 100] / 1000.0,
           ns[ITERS - 1] / 1000.0, ns[ITERS / 2] < 1000000 ? "true" : "false", N_GPUS,
           mig ? N_MIGS : 0, replicas);
    fflush(stdout);
out:
    if (r < 0)
        fprintf(stderr, "bench_labels %s: %s\n", what, err.msg);
    model_free(m);
    cfg_free(cfg);
    inv_free(inv);
    return r;
}

int main(void)
{
    int r = run("16x H100, 7 MIG each, mixed", true, 1);
    if (r == 0)
        r = run("16x H100, time-slicing x64", false, 64);
    return r < 0 ? 1 : 0;
}

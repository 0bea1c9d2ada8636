/* SPDX-License-Identifier: Apache-2.0 */
/* bench_model.c: the resource model at its largest realistic size — 16 GPUs × 7 MIG
 * instances × 64 time-slicing replicas (7,168 devices): model build, preferred allocation
 * (distributed, packed), whole-GPU topology search on 16 and 8 GPUs, and Allocate. Prints
 * one JSON line per case with p50/p99 and the conditions it ran under. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "config/config.h"
#include "gpu/inventory.h"
#include "model/model.h"

#define N_GPUS 16
#define N_MIGS 7
#define REPLICAS 64

static struct inv_inventory *big_node(bool mig)
{
    struct inv_inventory *inv = calloc(1, sizeof(*inv));

    if (!inv)
        return NULL;
    inv->n_gpus = N_GPUS;
    inv->gpus = calloc(N_GPUS, sizeof(*inv->gpus));
    inv->links = calloc(N_GPUS * N_GPUS, sizeof(*inv->links));
    if (!inv->gpus || !inv->links)
        goto fail;
    for (unsigned i = 0; i < N_GPUS; i++) {
        struct inv_gpu *g = &inv->gpus[i];
        g->index = g->minor = i;
        snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-0000-4000-8000-%012x", i + 1, i + 1);
        str_copy(g->name, "NVIDIA H100 80GB HBM3", sizeof(g->name));
        g->memory_mib = 81559;
        g->cc_major = 9;
        g->numa_node = (int)(i / 8);
        g->mig_capable = g->mig_enabled = mig;
        if (mig) {
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
            }
        }
        /* two 8-GPU NVSwitch islands; pairs inside a quad also share a PCIe switch */
        for (unsigned j = 0; j < N_GPUS; j++) {
            struct inv_link *l = &inv->links[i * N_GPUS + j];
            l->nvlinks = i != j && i / 8 == j / 8 ? 18 : 0;
            l->pcie = i == j           ? INV_PCIE_SAME
                      : i / 2 == j / 2 ? INV_PCIE_SINGLE
                      : i / 8 == j / 8 ? INV_PCIE_NODE
                                       : INV_PCIE_SYSTEM;
        }
    }
    return inv;
fail:
    inv_free(inv);
    return NULL;
}

/* Replaces the links by a random, unstructured topology (fixed seed): the search's hard case. */
static void randomize_links(struct inv_inventory *inv, uint32_t seed)
{
    for (unsigned i = 0; i < N_GPUS; i++)
        for (unsigned j = i + 1; j < N_GPUS; j++) {
            struct inv_link l;
            seed = seed * 1664525u + 1013904223u;
            l.nvlinks = (seed >> 8) % 4 == 0 ? (seed >> 12) % 6 : 0;
            l.pcie = (enum inv_pcie_level)(10 * (1 + (seed >> 16) % 5));
            inv->links[i * N_GPUS + j] = inv->links[j * N_GPUS + i] = l;
        }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, const char *conditions, uint64_t *ns, size_t n)
{
    qsort(ns, n, sizeof(*ns), cmp_u64);
    printf("{\"bench\":\"model\",\"case\":\"%s\",\"iterations\":%zu,\"p50_us\":%.1f,"
           "\"p99_us\":%.1f,\"max_us\":%.1f,\"conditions\":{%s}}\n",
           what, n, ns[n / 2] / 1000.0, ns[n * 99 / 100] / 1000.0, ns[n - 1] / 1000.0, conditions);
    fflush(stdout);
}

static int bench_build(const struct inv_inventory *inv, const struct cfg_config *cfg, size_t iters)
{
    uint64_t *ns = calloc(iters, sizeof(*ns));
    struct error err = {0};

    if (!ns)
        return -ENOMEM;
    for (size_t i = 0; i < iters; i++) {
        struct model *m = NULL;
        uint64_t t0 = time_now_ns();
        if (model_build(inv, cfg, NULL, &m, &err) < 0) {
            fprintf(stderr, "bench_model: %s\n", err.msg);
            free(ns);
            return -EINVAL;
        }
        ns[i] = time_now_ns() - t0;
        model_free(m);
    }
    report("model_build", "\"gpus\":16,\"migs_per_gpu\":7,\"replicas\":64,\"devices\":7168", ns,
           iters);
    free(ns);
    return 0;
}

/* Preferred allocation of `size` among all devices but the first `used` of each MIG device
 * (so allocated counts differ per device and the policy has to rank them). */
static int bench_preferred(const struct model *m, const struct model_resource *res,
                           const char *what, size_t size, size_t iters)
{
    const char **avail = calloc(res->n_devices, sizeof(*avail));
    uint64_t *ns = calloc(iters, sizeof(*ns));
    size_t n = 0;
    char cond[256];
    int r = -ENOMEM;

    if (!avail || !ns)
        goto out;
    for (size_t i = 0; i < res->n_devices; i++)
        if (res->devices[i].replica >= (i / REPLICAS) % 5) /* 0..4 replicas in use */
            avail[n++] = res->devices[i].id;
    for (size_t i = 0; i < iters; i++) {
        char **ids = NULL;
        struct error err = {0};
        uint64_t t0 = time_now_ns();
        r = model_preferred_allocation(m, res, avail, n, NULL, 0, size, NULL, &ids, &err);
        ns[i] = time_now_ns() - t0;
        strv_free(ids);
        if (r < 0) {
            fprintf(stderr, "bench_model: %s\n", err.msg);
            goto out;
        }
    }
    snprintf(cond, sizeof(cond), "\"devices\":%zu,\"available\":%zu,\"size\":%zu", res->n_devices,
             n, size);
    report(what, cond, ns, iters);
    r = 0;
out:
    free(avail);
    free(ns);
    return r;
}

/* The baseline the search is compared with in the same run: every subset of the size. */
static uint64_t brute_force_ns(const struct inv_inventory *inv, size_t n_gpus, size_t size)
{
    unsigned gpus[N_GPUS];
    uint64_t best = 0, t0 = time_now_ns();
    volatile uint64_t sink;

    for (uint32_t set = 0; set < (1u << n_gpus); set++) {
        size_t n = 0;
        if ((size_t)__builtin_popcount(set) != size)
            continue;
        for (unsigned i = 0; i < n_gpus; i++)
            if (set & (1u << i))
                gpus[n++] = i;
        uint64_t sc = model_topology_score(inv, gpus, n);
        if (sc > best)
            best = sc;
    }
    sink = best;
    (void)sink;
    return time_now_ns() - t0;
}

static int bench_topology(const struct inv_inventory *inv, const char *label, size_t n_gpus,
                          size_t size, size_t iters)
{
    struct cfg_config cfg = {0};
    struct model *m = NULL;
    const struct model_resource *res;
    const char *avail[N_GPUS];
    uint64_t *ns = calloc(iters, sizeof(*ns));
    struct error err = {0};
    char what[64], cond[160];
    int r = -ENOMEM;

    if (!ns)
        goto out;
    cfg.flags.plugin.device_list_strategies = CFG_LIST_ENVVAR;
    r = model_build(inv, &cfg, NULL, &m, &err);
    if (r < 0)
        goto out;
    res = model_find_resource(m, "nvidia.com/gpu");
    for (size_t i = 0; i < n_gpus; i++)
        avail[i] = res->devices[i].id;
    for (size_t i = 0; i < iters; i++) {
        char **ids = NULL;
        uint64_t t0 = time_now_ns();
        r = model_preferred_allocation(m, res, avail, n_gpus, NULL, 0, size, inv, &ids, &err);
        ns[i] = time_now_ns() - t0;
        strv_free(ids);
        if (r < 0)
            goto out;
    }
    {
        uint64_t brute = brute_force_ns(inv, n_gpus, size);
        uint64_t sorted_p50;
        qsort(ns, iters, sizeof(*ns), cmp_u64);
        sorted_p50 = ns[iters / 2] ? ns[iters / 2] : 1;
        snprintf(what, sizeof(what), "preferred_topology_%s_%zugpus_size%zu", label, n_gpus, size);
        snprintf(cond, sizeof(cond),
                 "\"gpus\":%zu,\"size\":%zu,\"exact\":true,"
                 "\"brute_force_us\":%.1f,\"speedup_vs_brute_force\":%.0f",
                 n_gpus, size, brute / 1000.0, (double)brute / (double)sorted_p50);
        report(what, cond, ns, iters);
    }
out:
    if (r < 0)
        fprintf(stderr, "bench_model: topology: %s\n", err.msg);
    model_free(m);
    free(ns);
    return r;
}

static char *fixed_id(void *userdata)
{
    (void)userdata;
    return strdup("00000000-0000-4000-8000-000000000000");
}

static int bench_allocate(const struct model *m, const struct model_resource *res, size_t iters)
{
    const struct model_alloc_env env = {.new_id = fixed_id};
    uint64_t *ns = calloc(iters, sizeof(*ns));
    int r = 0;

    if (!ns)
        return -ENOMEM;
    for (size_t i = 0; i < iters && r == 0; i++) {
        const char *ids[] = {res->devices[(i * 7919) % res->n_devices].id};
        struct model_alloc_response *resp = NULL;
        struct error err = {0};
        uint64_t t0 = time_now_ns();
        r = model_allocate(m, res, ids, 1, &env, &resp, &err);
        ns[i] = time_now_ns() - t0;
        model_alloc_response_free(resp);
        if (r < 0)
            fprintf(stderr, "bench_model: %s\n", err.msg);
    }
    if (r == 0)
        report("allocate",
               "\"devices\":7168,\"ids\":1,\"strategies\":\"envvar,cdi-annotations\","
               "\"pass_device_specs\":true",
               ns, iters);
    free(ns);
    return r;
}

int main(void)
{
    struct inv_inventory *mig = big_node(true), *whole = big_node(false);
    struct cfg_replicated_resource rule = {.name = "nvidia.com/mig-1g.10gb", .replicas = REPLICAS};
    struct cfg_config cfg = {0};
    struct model *m = NULL;
    const struct model_resource *res;
    struct error err = {0};
    int r = 1;

    if (!mig || !whole)
        goto out;
    cfg.flags.mig_strategy = CFG_MIG_MIXED;
    cfg.flags.plugin.device_list_strategies = CFG_LIST_ENVVAR | CFG_LIST_CDI_ANNOTATIONS;
    cfg.flags.plugin.pass_device_specs = true;
    cfg.sharing_strategy = CFG_SHARING_TIME_SLICING;
    cfg.sharing.resources = &rule;
    cfg.sharing.n_resources = 1;
    if (bench_build(mig, &cfg, 50) < 0)
        goto out;
    if (model_build(mig, &cfg, NULL, &m, &err) < 0) {
        fprintf(stderr, "bench_model: %s\n", err.msg);
        goto out;
    }
    res = model_find_resource(m, "nvidia.com/mig-1g.10gb");
    if (!res || res->n_devices != N_GPUS * N_MIGS * REPLICAS)
        goto out;
    if (bench_preferred(m, res, "preferred_distributed_size1", 1, 200) < 0 ||
        bench_preferred(m, res, "preferred_distributed_size8", 8, 200) < 0)
        goto out;
    m->settings.allocation_policy = CFG_ALLOC_PACKED;
    if (bench_preferred(m, res, "preferred_packed_size8", 8, 200) < 0)
        goto out;
    if (bench_topology(whole, "nvswitch", 16, 4, 200) < 0 ||
        bench_topology(whole, "nvswitch", 16, 8, 200) < 0 ||
        bench_topology(whole, "nvswitch", 8, 4, 1000) < 0)
        goto out;
    randomize_links(whole, 42);
    if (bench_topology(whole, "random", 16, 4, 200) < 0 ||
        bench_topology(whole, "random", 16, 8, 200) < 0 ||
        bench_topology(whole, "random", 8, 4, 1000) < 0)
        goto out;
    if (bench_allocate(m, res, 2000) < 0)
        goto out;
    r = 0;
out:
    model_free(m);
    inv_free(mig);
    inv_free(whole);
    return r;
}

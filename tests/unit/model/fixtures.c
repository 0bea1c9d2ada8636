/* SPDX-License-Identifier: Apache-2.0 */
/* fixtures.c: the machines the model tests run on (see fixtures.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"

static struct inv_inventory *inv_new(size_t n)
{
    struct inv_inventory *inv = calloc(1, sizeof(*inv));

    assert_non_null(inv);
    str_copy(inv->driver_version, "570.158.01", sizeof(inv->driver_version));
    inv->cuda_version = 12080;
    inv->n_gpus = n;
    inv->gpus = calloc(n, sizeof(*inv->gpus));
    inv->links = calloc(n * n, sizeof(*inv->links));
    assert_non_null(inv->gpus);
    assert_non_null(inv->links);
    for (size_t i = 0; i < n; i++) {
        struct inv_gpu *g = &inv->gpus[i];
        g->index = (unsigned)i;
        g->minor = (unsigned)i;
        snprintf(g->uuid, sizeof(g->uuid), "GPU-%08zx-0000-4000-8000-%012zx", i + 1, i + 1);
        snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "00000000:%02zX:00.0", 0x10 + i);
        g->numa_node = 0;
        for (size_t j = 0; j < n; j++)
            inv->links[i * n + j].pcie = i == j ? INV_PCIE_SAME : INV_PCIE_HOSTBRIDGE;
    }
    return inv;
}

static void gpu_set(struct inv_gpu *g, const char *name, uint64_t mib, int ccmaj, int ccmin)
{
    str_copy(g->name, name, sizeof(g->name));
    g->memory_mib = mib;
    g->cc_major = ccmaj;
    g->cc_minor = ccmin;
}

static void add_proc(struct inv_gpu *g, unsigned pid, uint64_t mib)
{
    g->procs = realloc(g->procs, (g->n_procs + 1) * sizeof(*g->procs));
    assert_non_null(g->procs);
    g->procs[g->n_procs++] = (struct inv_process){pid, mib, INV_ID_NONE, INV_ID_NONE};
}

void fx_add_mig(struct inv_gpu *g, const char *profile, uint64_t memory_mib, unsigned gi,
                unsigned ci)
{
    struct inv_mig_device *m;

    g->mig_capable = g->mig_enabled = true;
    g->migs = realloc(g->migs, (g->n_migs + 1) * sizeof(*g->migs));
    assert_non_null(g->migs);
    m = &g->migs[g->n_migs];
    memset(m, 0, sizeof(*m));
    m->index = (unsigned)g->n_migs;
    snprintf(m->uuid, sizeof(m->uuid), "MIG-%08x-1111-4000-8000-%04x%08zx", g->index + 1, gi,
             g->n_migs);
    m->gi_id = gi;
    m->ci_id = ci;
    str_copy(m->profile, profile, sizeof(m->profile));
    m->memory_mib = memory_mib;
    g->n_migs++;
}

struct inv_inventory *fx_l20(void)
{
    struct inv_inventory *inv = inv_new(1);
    gpu_set(&inv->gpus[0], "NVIDIA L20", 46068, 8, 9);
    add_proc(&inv->gpus[0], 1001, 4621);
    return inv;
}

struct inv_inventory *fx_t4(void)
{
    struct inv_inventory *inv = inv_new(1);
    gpu_set(&inv->gpus[0], "Tesla T4", 15360, 7, 5);
    add_proc(&inv->gpus[0], 2002, 4401);
    return inv;
}

struct inv_inventory *fx_l20_t4(void)
{
    struct inv_inventory *inv = inv_new(2);
    gpu_set(&inv->gpus[0], "NVIDIA L20", 46068, 8, 9);
    gpu_set(&inv->gpus[1], "Tesla T4", 15360, 7, 5);
    inv->gpus[1].numa_node = 1;
    return inv;
}

struct inv_inventory *fx_generic(size_t n)
{
    struct inv_inventory *inv = inv_new(n);
    for (size_t i = 0; i < n; i++) {
        gpu_set(&inv->gpus[i], "NVIDIA A100-SXM4-80GB", 81920, 8, 0);
        inv->gpus[i].mig_capable = true;
        inv->gpus[i].numa_node = (int)(i * 2 / n);
    }
    return inv;
}

struct inv_inventory *fx_a100_1g10gb(size_t n)
{
    struct inv_inventory *inv = fx_generic(n);
    for (size_t i = 0; i < n; i++)
        for (unsigned k = 0; k < 7; k++)
            fx_add_mig(&inv->gpus[i], "1g.10gb", 9856, 7 + k, 0);
    return inv;
}

struct inv_inventory *fx_a100_balanced(void)
{
    struct inv_inventory *inv = fx_generic(1);
    fx_add_mig(&inv->gpus[0], "1g.10gb", 9856, 13, 0);
    fx_add_mig(&inv->gpus[0], "1g.10gb", 9856, 14, 0);
    fx_add_mig(&inv->gpus[0], "2g.20gb", 19968, 5, 0);
    fx_add_mig(&inv->gpus[0], "3g.40gb", 40192, 1, 0);
    return inv;
}

struct inv_inventory *fx_h20_1g12gb(void)
{
    struct inv_inventory *inv = inv_new(1);
    gpu_set(&inv->gpus[0], "NVIDIA H20", 97871, 9, 0);
    for (unsigned k = 0; k < 7; k++)
        fx_add_mig(&inv->gpus[0], "1g.12gb", 11008, 7 + k, 0);
    return inv;
}

struct inv_inventory *fx_h200_1g18gb(size_t n_me)
{
    struct inv_inventory *inv = inv_new(1);
    gpu_set(&inv->gpus[0], "NVIDIA H200", 143771, 9, 0);
    for (unsigned k = 0; k < 7; k++)
        fx_add_mig(&inv->gpus[0], k < n_me ? "1g.18gb+me" : "1g.18gb", 16384, 9 + k, 0);
    return inv;
}

static void link_set(struct inv_inventory *inv, size_t a, size_t b, unsigned nvl,
                     enum inv_pcie_level pcie)
{
    inv->links[a * inv->n_gpus + b] = (struct inv_link){nvl, pcie};
    inv->links[b * inv->n_gpus + a] = (struct inv_link){nvl, pcie};
}

struct inv_inventory *fx_h100_nvswitch(void)
{
    struct inv_inventory *inv = inv_new(8);
    for (size_t i = 0; i < 8; i++) {
        gpu_set(&inv->gpus[i], "NVIDIA H100 80GB HBM3", 81559, 9, 0);
        inv->gpus[i].numa_node = (int)(i / 4);
        for (size_t j = i + 1; j < 8; j++)
            link_set(inv, i, j, 18, i / 4 == j / 4 ? INV_PCIE_NODE : INV_PCIE_SYSTEM);
    }
    return inv;
}

struct inv_inventory *fx_pcie_2socket(void)
{
    struct inv_inventory *inv = inv_new(8);
    for (size_t i = 0; i < 8; i++) {
        gpu_set(&inv->gpus[i], "NVIDIA L40S", 46068, 8, 9);
        inv->gpus[i].numa_node = (int)(i / 4);
        for (size_t j = i + 1; j < 8; j++) {
            enum inv_pcie_level l = i / 2 == j / 2   ? INV_PCIE_SINGLE
                                    : i / 4 == j / 4 ? INV_PCIE_HOSTBRIDGE
                                                     : INV_PCIE_SYSTEM;
            link_set(inv, i, j, 0, l);
        }
    }
    link_set(inv, 0, 1, 4, INV_PCIE_SINGLE);
    link_set(inv, 2, 3, 4, INV_PCIE_SINGLE);
    link_set(inv, 4, 5, 2, INV_PCIE_SINGLE);
    link_set(inv, 6, 7, 2, INV_PCIE_SINGLE);
    link_set(inv, 1, 2, 1, INV_PCIE_HOSTBRIDGE);
    link_set(inv, 5, 6, 1, INV_PCIE_HOSTBRIDGE);
    return inv;
}

struct inv_inventory *fx_mixed_mig(void)
{
    struct inv_inventory *inv = fx_generic(2);
    for (unsigned k = 0; k < 7; k++)
        fx_add_mig(&inv->gpus[0], "1g.10gb", 9856, 7 + k, 0);
    return inv;
}

void fx_cfg_init(struct cfg_config *c)
{
    memset(c, 0, sizeof(*c));
    c->version = "v1";
    c->flags.mig_strategy = CFG_MIG_NONE;
    c->flags.fail_on_init_error = true;
    c->flags.nvidia_driver_root = "/";
    c->flags.plugin.device_list_strategies = CFG_LIST_ENVVAR;
    c->flags.plugin.cdi_annotation_prefix = "cdi.k8s.io/";
    c->flags.plugin.nvidia_ctk_path = "/usr/bin/nvidia-ctk";
    c->flags.plugin.container_driver_root = "/driver-root";
}

void fx_cfg_sharing(struct cfg_config *c, enum cfg_sharing_strategy s,
                    struct cfg_replicated_resource *rules, size_t n, bool rename_by_default,
                    bool fail_requests)
{
    c->sharing_strategy = s;
    c->sharing.resources = rules;
    c->sharing.n_resources = n;
    c->sharing.rename_by_default = rename_by_default;
    c->sharing.fail_requests_greater_than_one = fail_requests;
}

struct cfg_replicated_resource fx_rule(char *name, unsigned replicas)
{
    struct cfg_replicated_resource r = {0};
    r.name = name; /* test storage: literals, never freed or written */
    r.replicas = replicas;
    return r;
}

struct model *fx_build(const struct inv_inventory *inv, const struct cfg_config *cfg)
{
    struct model *m = NULL;
    struct error err = {0};
    int r = model_build(inv, cfg, NULL, &m, &err);
    if (r < 0)
        fail_msg("model_build: %s", err.msg);
    return m;
}

long fx_count(const struct model *m, const char *name)
{
    const struct model_resource *res = model_find_resource(m, name);
    return res ? (long)res->n_devices : -1;
}

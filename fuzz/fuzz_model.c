/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_model.c: libFuzzer target for the resource model. The bytes are decoded into a
 * config (strategies, patterns, sharing rules with renames, device lists and replicas),
 * which is built into a model on four machines
 * (single GPU, MIG + whole, 8 GPUs with NVLink, MIG with two profiles) with and without
 * keep_valid, then reported (text, JSON), asked for a preferred allocation and allocated.
 * No crash, no leak, no broken invariant (IDs unique and found, sizes honoured). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "gpu/inventory.h"
#include "model/model.h"

static struct inv_inventory *machine(size_t n, unsigned n_mig_gpus, bool two_profiles)
{
    struct inv_inventory *inv = calloc(1, sizeof(*inv));

    if (!inv)
        abort();
    inv->n_gpus = n;
    inv->gpus = calloc(n, sizeof(*inv->gpus));
    inv->links = calloc(n * n, sizeof(*inv->links));
    if (!inv->gpus || !inv->links)
        abort();
    for (unsigned i = 0; i < n; i++) {
        struct inv_gpu *g = &inv->gpus[i];
        g->index = g->minor = i;
        snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-0000-4000-8000-%012x", i + 1, i);
        str_copy(g->name, i % 2 ? "Tesla T4" : "NVIDIA A100-SXM4-80GB", sizeof(g->name));
        g->memory_mib = 15360 + 1000 * i;
        g->cc_major = 7 + (int)(i % 2);
        g->cc_minor = 5;
        g->numa_node = (int)(i / 4);
        g->n_procs = 1;
        g->procs = calloc(1, sizeof(*g->procs));
        if (!g->procs)
            abort();
        g->procs[0] = (struct inv_process){100 + i, 4000, INV_ID_NONE, INV_ID_NONE};
        if (i < n_mig_gpus) {
            g->mig_capable = g->mig_enabled = true;
            g->n_migs = 3;
            g->migs = calloc(3, sizeof(*g->migs));
            if (!g->migs)
                abort();
            for (unsigned k = 0; k < 3; k++) {
                struct inv_mig_device *m = &g->migs[k];
                m->index = k;
                m->gi_id = 7 + k;
                snprintf(m->uuid, sizeof(m->uuid), "MIG-%08x-1111-4000-8000-%012x", i, k);
                str_copy(m->profile, two_profiles && k == 2 ? "1c.2g.20gb" : "1g.10gb",
                         sizeof(m->profile));
                m->memory_mib = 9856;
            }
        }
        for (unsigned j = 0; j < n; j++)
            inv->links[i * n + j] = (struct inv_link){i != j && i / 2 == j / 2 ? 4 : 0,
                                                      i == j ? INV_PCIE_SAME : INV_PCIE_NODE};
    }
    return inv;
}

static char *cap_path(void *userdata, unsigned minor, unsigned gi, unsigned ci, bool compute)
{
    char buf[64];
    (void)userdata;
    snprintf(buf, sizeof(buf), "/dev/nvidia-caps/nvidia-cap%u", minor + gi + ci + compute);
    return strdup(buf);
}

static char *new_id(void *userdata)
{
    (void)userdata;
    return strdup("00000000-0000-4000-8000-000000000000");
}

static void exercise(const struct model *m, const struct inv_inventory *inv)
{
    const struct model_alloc_env env = {.mig_cap_path = cap_path, .new_id = new_id};
    char *text = NULL;

    if (model_plan_report(m, inv, &text, NULL) < 0)
        abort();
    free(text);
    text = NULL;
    for (size_t k = 0; k < m->n_resources; k++) {
        const struct model_resource *res = &m->resources[k];
        size_t n = res->n_devices < 64 ? res->n_devices : 64, size = n < 3 ? n : 3;
        const char *ids[64];
        char **pick = NULL;
        struct model_alloc_response *resp = NULL;

        for (size_t i = 0; i < res->n_devices; i++)
            if (model_resource_find_device(res, res->devices[i].id) != &res->devices[i])
                abort(); /* IDs unique and indexed */
        for (size_t i = 0; i < n; i++)
            ids[i] = res->devices[i].id;
        if (model_preferred_allocation(m, res, ids, n, NULL, 0, size, inv, &pick, NULL) < 0 ||
            strv_length(pick) != size)
            abort();
        if (model_allocate(m, res, ids, 1, &env, &resp, NULL) < 0)
            abort();
        model_alloc_response_free(resp);
        strv_free(pick);
    }
}

/* ---- a config decoded from the bytes (structured: the model, not the YAML parser) ---------- */

struct reader {
    const uint8_t *p;
    size_t n;
};

static unsigned take(struct reader *r, unsigned mod)
{
    unsigned v = 0;
    if (r->n) {
        v = *r->p++;
        r->n--;
    }
    return mod ? v % mod : v;
}

static char *const names[] = {
    "nvidia.com/gpu",        "nvidia.com/t4", "nvidia.com/mig-1g.10gb",  "nvidia.com/mig-small",
    "nvidia.com/gpu.shared", "gpu",           "example.kubernetes.io/x", "nvidia.com/a/b",
    "nvidia.com/-x",         "requests.x/y"};
static char *const patterns[] = {"*", "*T4*", "NVIDIA*", "1g.10gb", "1c.2g.20gb", "", "**"};

#define MAX_RULES 4
#define MAX_REFS 4

struct fuzz_cfg {
    struct cfg_config cfg;
    struct cfg_resource_pattern gpus[2], mig[2];
    struct cfg_replicated_resource rules[MAX_RULES];
    struct cfg_device_ref refs[MAX_RULES][MAX_REFS];
    unsigned imex[1];
    char uuids[MAX_RULES][MAX_REFS][96];
};

static void decode(struct reader *r, struct fuzz_cfg *f, struct inv_inventory *const *machines)
{
    struct cfg_config *c = &f->cfg;

    c->flags.mig_strategy = (enum cfg_mig_strategy)take(r, 3);
    c->flags.plugin.device_id_strategy = (enum cfg_device_id_strategy)take(r, 2);
    c->flags.plugin.shared_devices_allocation_policy = (enum cfg_alloc_policy)take(r, 2);
    c->flags.plugin.device_list_strategies = take(r, 16);
    c->flags.plugin.pass_device_specs = take(r, 2);
    c->flags.mps_root = take(r, 2) ? "/run/nvidia/mps" : NULL;
    c->flags.gds_enabled = take(r, 2);
    c->flags.nvidia_driver_root = take(r, 2) ? "/run/nvidia/driver" : "/";
    if (take(r, 2)) {
        c->imex.channel_ids = f->imex;
        c->imex.n_channel_ids = 1;
    }
    c->n_gpus = take(r, 3);
    c->gpus = f->gpus;
    for (size_t i = 0; i < c->n_gpus; i++)
        f->gpus[i] =
            (struct cfg_resource_pattern){patterns[take(r, 7)], names[take(r, 10)], {0, 0}};
    c->n_mig = take(r, 3);
    c->mig = f->mig;
    for (size_t i = 0; i < c->n_mig; i++)
        f->mig[i] = (struct cfg_resource_pattern){patterns[take(r, 7)], names[take(r, 10)], {0, 0}};
    c->sharing_strategy = (enum cfg_sharing_strategy)take(r, 3);
    c->sharing.rename_by_default = take(r, 2);
    c->sharing.fail_requests_greater_than_one = take(r, 2);
    c->sharing.n_resources = take(r, MAX_RULES + 1);
    c->sharing.resources = f->rules;
    for (size_t i = 0; i < c->sharing.n_resources; i++) {
        struct cfg_replicated_resource *rr = &f->rules[i];
        rr->name = names[take(r, 5)];
        rr->rename = take(r, 3) == 0 ? names[take(r, 10)] : NULL;
        rr->replicas = 1 + take(r, 70);
        rr->devices_kind = (enum cfg_devices_kind)take(r, 3);
        rr->devices_count = take(r, 8);
        rr->n_devices = take(r, MAX_REFS + 1);
        rr->devices = f->refs[i];
        for (size_t k = 0; k < rr->n_devices; k++) {
            struct cfg_device_ref *ref = &f->refs[i][k];
            const struct inv_inventory *inv = machines[take(r, 4)];
            const struct inv_gpu *g = &inv->gpus[take(r, (unsigned)inv->n_gpus)];
            ref->kind = (enum cfg_device_ref_kind)take(r, 4);
            ref->gpu_index = take(r, 10);
            ref->mig_index = take(r, 4);
            str_copy(f->uuids[i][k], g->n_migs && take(r, 2) ? g->migs[0].uuid : g->uuid,
                     sizeof(f->uuids[i][k]));
            ref->uuid = f->uuids[i][k];
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct inv_inventory *machines[4];
    struct reader rd = {data, size};
    struct fuzz_cfg f;

    if (!machines[0]) {
        machines[0] = machine(1, 0, false);
        machines[1] = machine(2, 1, false);
        machines[2] = machine(8, 0, false);
        machines[3] = machine(2, 2, true);
    }
    memset(&f, 0, sizeof(f));
    decode(&rd, &f, machines);
    for (size_t i = 0; i < 4; i++)
        for (int keep = 0; keep < 2; keep++) {
            struct model_options opts = {.keep_valid = keep};
            struct model *m = NULL;
            int r = model_build(machines[i], &f.cfg, &opts, &m, NULL);
            if ((r == 0) != (m != NULL) || (r == 0 && !keep && m->n_errors))
                abort();
            if (m)
                exercise(m, machines[i]);
            model_free(m);
        }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* fixtures.h: inventories of the seed and reference machines, built in C for the model's
 * tests (shapes mirror examples/machines/), and a config builder that needs no parser. */
#ifndef GS_TEST_MODEL_FIXTURES_H
#define GS_TEST_MODEL_FIXTURES_H

#include "config/config.h"
#include "gpu/inventory.h"
#include "model/model.h"

/* Every fixture is owned by the caller: inv_free(). */
struct inv_inventory *fx_l20(void);             /* seed 000: NVIDIA L20, 46068 MiB, 4621 MiB proc */
struct inv_inventory *fx_t4(void);              /* seed 000: Tesla T4, 15360 MiB, 4401 MiB proc */
struct inv_inventory *fx_generic(size_t n);     /* n × A100-SXM4-80GB, MIG off, PCIe only */
struct inv_inventory *fx_a100_1g10gb(size_t n); /* n × A100-80GB, all-1g.10gb (7 each) */
struct inv_inventory *fx_a100_balanced(void);   /* 1 × A100-80GB, 2×1g.10gb 2g.20gb 3g.40gb */
struct inv_inventory *fx_h20_1g12gb(void);      /* 1 × H20, 7 × 1g.12gb */
/* 1 × H200, 7 × 1g.18gb of which the first n_me are 1g.18gb+me (media extensions) */
struct inv_inventory *fx_h200_1g18gb(size_t n_me);
struct inv_inventory *fx_h100_nvswitch(void); /* 8 × H100, all pairs 18 NVLinks, 2 sockets */
struct inv_inventory *fx_pcie_2socket(void);  /* 8 GPUs, PCIe switches, NVLink pairs */
struct inv_inventory *fx_mixed_mig(void);     /* GPU 0 all-1g.10gb, GPU 1 MIG off */
struct inv_inventory *fx_l20_t4(void);        /* one node with an L20 (0) and a T4 (1) */

/* Appends a MIG device to a GPU of a fixture. */
void fx_add_mig(struct inv_gpu *g, const char *profile, uint64_t memory_mib, unsigned gi,
                unsigned ci);

/* A config with NVIDIA's defaults; strings point to literals, nothing to free. */
void fx_cfg_init(struct cfg_config *c);
/* Sets time-slicing (or MPS) with the given rule array (caller storage). */
void fx_cfg_sharing(struct cfg_config *c, enum cfg_sharing_strategy s,
                    struct cfg_replicated_resource *rules, size_t n, bool rename_by_default,
                    bool fail_requests);
struct cfg_replicated_resource fx_rule(char *name, unsigned replicas);

/* model_build with keep_valid false; fails the test on error. */
struct model *fx_build(const struct inv_inventory *inv, const struct cfg_config *cfg);
/* Count of devices in a resource, or -1 when absent. */
long fx_count(const struct model *m, const char *name);

#endif

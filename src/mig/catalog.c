/* SPDX-License-Identifier: Apache-2.0 */
/* catalog.c: the MIG GPU-instance profile tables of the GPU models we know (facts A.2-A.4:
 * ids, memory and compute slices, engines, placements) and their PCI ids (facts B.7). The
 * fake NVML serves these same tables, so what the planner assumes is what the fake
 * enforces. Rows marked UNVERIFIED in the facts are noted in docs/fake-nvml.md. */
#include <string.h>
#include <stdlib.h>
#include <strings.h>

#include "mig/mig.h"

/* Placement start masks (facts A.3 "canonical placement tables"). */
#define S_1G 0x7Fu  /* 0..6 */
#define S_1G2 0x55u /* 0,2,4,6 */
#define S_2G 0x15u  /* 0,2,4 */
#define S_3G 0x11u  /* 0,4 */
#define S_0 0x01u   /* 0 */
#define S_A30_1G 0x0Fu
#define S_A30_2G 0x05u

/* One 8-memory-slice table: 1g, 1g+me, 1g 2x memory, 2g, 3g, 4g, 7g. Arguments are the SM
 * counts, the memory sizes (MiB) and the names that differ per part. */
#define P_ID(i, id, sl, cs, sm, mem, d, e, c, j, o, mx, st, nm)                                    \
    {                                                                                              \
        i, id, sl, cs, sm, mem, d, e, c, j, o, mx, st, nm                                          \
    }

static const struct mig_profile a100_40[] = {
    P_ID(0x0, 19, 1, 1, 14, 4864, 0, 0, 1, 0, 0, 7, S_1G, "1g.5gb"),
    P_ID(0x7, 20, 1, 1, 14, 4864, 1, 0, 1, 1, 1, 1, S_1G, "1g.5gb+me"),
    P_ID(0x9, 15, 2, 1, 14, 9984, 1, 0, 1, 0, 0, 4, S_1G2, "1g.10gb"),
    P_ID(0x1, 14, 2, 2, 28, 9984, 1, 0, 2, 0, 0, 3, S_2G, "2g.10gb"),
    P_ID(0x2, 9, 4, 3, 42, 20096, 2, 0, 3, 0, 0, 2, S_3G, "3g.20gb"),
    P_ID(0x3, 5, 4, 4, 56, 20096, 2, 0, 4, 0, 0, 1, S_0, "4g.20gb"),
    P_ID(0x4, 0, 8, 7, 98, 40448, 5, 0, 7, 1, 1, 1, S_0, "7g.40gb"),
};

static const struct mig_profile a100_80[] = {
    P_ID(0x0, 19, 1, 1, 14, 9728, 0, 0, 1, 0, 0, 7, S_1G, "1g.10gb"),
    P_ID(0x7, 20, 1, 1, 14, 9728, 1, 0, 1, 1, 1, 1, S_1G, "1g.10gb+me"),
    P_ID(0x9, 15, 2, 1, 14, 19968, 1, 0, 1, 0, 0, 4, S_1G2, "1g.20gb"),
    P_ID(0x1, 14, 2, 2, 28, 19968, 1, 0, 2, 0, 0, 3, S_2G, "2g.20gb"),
    P_ID(0x2, 9, 4, 3, 42, 40192, 2, 0, 3, 0, 0, 2, S_3G, "3g.40gb"),
    P_ID(0x3, 5, 4, 4, 56, 40192, 2, 0, 4, 0, 0, 1, S_0, "4g.40gb"),
    P_ID(0x4, 0, 8, 7, 98, 80640, 5, 0, 7, 1, 1, 1, S_0, "7g.80gb"),
};

/* Hopper-style engines: 1g 1/0/1/1/0, +me adds OFA, 7g has 8 CEs. */
#define HOPPER_TABLE(sm1, sm1b, sm2, sm3, sm4, sm7, m1, m2, m3, m7, n1, n1me, n1b, n2, n3, n4, n7) \
    {                                                                                              \
        P_ID(0x0, 19, 1, 1, sm1, m1, 1, 0, 1, 1, 0, 7, S_1G, n1),                                  \
            P_ID(0x7, 20, 1, 1, sm1, m1, 1, 0, 1, 1, 1, 1, S_1G, n1me),                            \
            P_ID(0x9, 15, 2, 1, sm1b, m2, 1, 0, 1, 1, 0, 4, S_1G2, n1b),                           \
            P_ID(0x1, 14, 2, 2, sm2, m2, 2, 0, 2, 2, 0, 3, S_2G, n2),                              \
            P_ID(0x2, 9, 4, 3, sm3, m3, 3, 0, 3, 3, 0, 2, S_3G, n3),                               \
            P_ID(0x3, 5, 4, 4, sm4, m3, 4, 0, 4, 4, 0, 1, S_0, n4),                                \
            P_ID(0x4, 0, 8, 7, sm7, m7, 7, 0, 8, 7, 1, 1, S_0, n7)                                 \
    }

static const struct mig_profile h100_sxm[] =
    HOPPER_TABLE(16, 26, 32, 60, 64, 132, 9984, 20096, 40448, 81152, "1g.10gb", "1g.10gb+me",
                 "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb");
static const struct mig_profile h100_pcie[] =
    HOPPER_TABLE(14, 14, 30, 46, 62, 114, 9984, 20096, 40448, 81152, "1g.10gb", "1g.10gb+me",
                 "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb");
static const struct mig_profile h100_nvl[] =
    HOPPER_TABLE(16, 26, 32, 60, 64, 132, 11008, 22144, 47488, 95360, "1g.12gb", "1g.12gb+me",
                 "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb");
static const struct mig_profile gh200_96[] =
    HOPPER_TABLE(16, 26, 32, 60, 64, 132, 11264, 23552, 47616, 95232, "1g.12gb", "1g.12gb+me",
                 "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb");
/* H20: names from mig-parted's 96GB group; SM counts are UNVERIFIED (78 SMs in total). */
static const struct mig_profile h20[] =
    HOPPER_TABLE(10, 16, 20, 30, 40, 78, 11264, 23552, 47616, 95232, "1g.12gb", "1g.12gb+me",
                 "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb");
/* H200: as a real H200 reports them (facts real-h200.md, driver 580.159.04); the -lgip
 * GiB column of facts A.3 (32.25/69.50/139.75) is a quarter GiB short of these. */
static const struct mig_profile h200[] =
    HOPPER_TABLE(16, 26, 32, 60, 64, 132, 16384, 33280, 71424, 143360, "1g.18gb", "1g.18gb+me",
                 "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb");

static const struct mig_profile a30[] = {
    P_ID(0x0, 14, 1, 1, 14, 5952, 1, 0, 1, 0, 0, 4, S_A30_1G, "1g.6gb"),
    P_ID(0x7, 21, 1, 1, 14, 5952, 1, 0, 1, 1, 1, 1, S_A30_1G, "1g.6gb+me"),
    P_ID(0x1, 5, 2, 2, 28, 11968, 2, 0, 2, 0, 0, 2, S_A30_2G, "2g.12gb"),
    P_ID(0x8, 6, 2, 2, 28, 11968, 2, 0, 2, 1, 1, 1, S_A30_2G, "2g.12gb+me"),
    P_ID(0x3, 0, 4, 4, 56, 24000, 4, 0, 4, 1, 1, 1, S_0, "4g.24gb"),
};

static const uint32_t ids_a100_40[] = {0x20B010DE, 0x20B110DE, 0x20F110DE, 0x20F610DE, 0};
static const uint32_t ids_a100_80[] = {0x20B210DE, 0x20B510DE, 0x20F310DE, 0x20F510DE, 0};
static const uint32_t ids_a30[] = {0x20B710DE, 0};
static const uint32_t ids_h100_sxm[] = {0x233010DE, 0x232410DE, 0x233910DE, 0};
static const uint32_t ids_h100_pcie[] = {0x233110DE, 0x232210DE, 0};
static const uint32_t ids_h100_nvl[] = {0x232110DE, 0x233A10DE, 0};
static const uint32_t ids_h200[] = {0x233510DE, 0x233B10DE, 0};
static const uint32_t ids_h20[] = {0x232910DE, 0};
static const uint32_t ids_gh200[] = {0x234210DE, 0};

#define MODEL(name, ids, mib, ms, cs, t)                                                           \
    {                                                                                              \
        name, ids, mib, ms, cs, t, sizeof(t) / sizeof((t)[0])                                      \
    }

static const struct mig_gpu_model models[] = {
    MODEL("NVIDIA A100-SXM4-40GB", ids_a100_40, 40960, 8, 7, a100_40),
    MODEL("NVIDIA A100-PCIE-40GB", ids_a100_40, 40960, 8, 7, a100_40),
    MODEL("NVIDIA A100-SXM4-80GB", ids_a100_80, 81920, 8, 7, a100_80),
    MODEL("NVIDIA A100 80GB PCIe", ids_a100_80, 81920, 8, 7, a100_80),
    MODEL("NVIDIA A30", ids_a30, 24576, 4, 4, a30),
    MODEL("NVIDIA H100 80GB HBM3", ids_h100_sxm, 81559, 8, 7, h100_sxm),
    MODEL("NVIDIA H100 PCIe", ids_h100_pcie, 81559, 8, 7, h100_pcie),
    MODEL("NVIDIA H100 NVL", ids_h100_nvl, 95830, 8, 7, h100_nvl),
    MODEL("NVIDIA H200", ids_h200, 143771, 8, 7, h200),
    MODEL("NVIDIA H200 NVL", ids_h200, 143771, 8, 7, h200), /* facts A.3: one table */
    MODEL("NVIDIA H20", ids_h20, 97871, 8, 7, h20),
    MODEL("NVIDIA GH200 480GB", ids_gh200, 97871, 8, 7, gh200_96),
};

const struct mig_gpu_model *mig_model_get(size_t i)
{
    return i < sizeof(models) / sizeof(models[0]) ? &models[i] : NULL;
}

const struct mig_gpu_model *mig_model_find(const char *name)
{
    unsigned long long id;
    char *end;

    if (!name || !*name)
        return NULL;
    if ((name[0] == '0' && (name[1] == 'x' || name[1] == 'X'))) {
        id = strtoull(name, &end, 16);
        for (size_t i = 0; !*end && i < sizeof(models) / sizeof(models[0]); i++)
            for (const uint32_t *p = models[i].pci_ids; *p; p++)
                if (*p == id)
                    return &models[i];
        return NULL;
    }
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        const char *n = models[i].name;
        if (strcasecmp(n, name) == 0 || strcasecmp(n + strlen("NVIDIA "), name) == 0)
            return &models[i];
    }
    return NULL;
}

const struct mig_profile *mig_profile_by_name(const struct mig_gpu_model *m, const char *name)
{
    for (size_t i = 0; m && i < m->n_profiles; i++)
        if (strcmp(m->profiles[i].name, name) == 0)
            return &m->profiles[i];
    return NULL;
}

const struct mig_profile *mig_profile_by_id(const struct mig_gpu_model *m, unsigned id)
{
    for (size_t i = 0; m && i < m->n_profiles; i++)
        if (m->profiles[i].id == id)
            return &m->profiles[i];
    return NULL;
}

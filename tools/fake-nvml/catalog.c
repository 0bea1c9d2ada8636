/* SPDX-License-Identifier: Apache-2.0 */
/* catalog.c: the GPU models the fake NVML knows — NVML names, memory, compute capability,
 * architecture, PCI device ids and MIG GPU-instance profile tables (facts A.2–A.4). Pure
 * constant data plus lookups. Rows marked UNVERIFIED in the facts are documented in
 * docs/fake-nvml.md. */
#include <math.h>
#include <string.h>

#include "internal.h"

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

static const struct fake_gi_profile a100_40[] = {
    P_ID(0x0, 19, 1, 1, 14, 4864, 0, 0, 1, 0, 0, 7, S_1G, "1g.5gb"),
    P_ID(0x7, 20, 1, 1, 14, 4864, 1, 0, 1, 1, 1, 1, S_1G, "1g.5gb+me"),
    P_ID(0x9, 15, 2, 1, 14, 9984, 1, 0, 1, 0, 0, 4, S_1G2, "1g.10gb"),
    P_ID(0x1, 14, 2, 2, 28, 9984, 1, 0, 2, 0, 0, 3, S_2G, "2g.10gb"),
    P_ID(0x2, 9, 4, 3, 42, 20096, 2, 0, 3, 0, 0, 2, S_3G, "3g.20gb"),
    P_ID(0x3, 5, 4, 4, 56, 20096, 2, 0, 4, 0, 0, 1, S_0, "4g.20gb"),
    P_ID(0x4, 0, 8, 7, 98, 40448, 5, 0, 7, 1, 1, 1, S_0, "7g.40gb"),
};

static const struct fake_gi_profile a100_80[] = {
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

static const struct fake_gi_profile h100_sxm[] =
    HOPPER_TABLE(16, 26, 32, 60, 64, 132, 9984, 20096, 40448, 81152, "1g.10gb", "1g.10gb+me",
                 "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb");
static const struct fake_gi_profile h100_pcie[] =
    HOPPER_TABLE(14, 14, 30, 46, 62, 114, 9984, 20096, 40448, 81152, "1g.10gb", "1g.10gb+me",
                 "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb");
static const struct fake_gi_profile h100_nvl[] =
    HOPPER_TABLE(16, 26, 32, 60, 64, 132, 11008, 22144, 47488, 95360, "1g.12gb", "1g.12gb+me",
                 "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb");
static const struct fake_gi_profile gh200_96[] =
    HOPPER_TABLE(16, 26, 32, 60, 64, 132, 11264, 23552, 47616, 95232, "1g.12gb", "1g.12gb+me",
                 "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb");
/* H20: names from mig-parted's 96GB group; SM counts are UNVERIFIED (78 SMs in total). */
static const struct fake_gi_profile h20[] =
    HOPPER_TABLE(10, 16, 20, 30, 40, 78, 11264, 23552, 47616, 95232, "1g.12gb", "1g.12gb+me",
                 "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb");
static const struct fake_gi_profile h200[] =
    HOPPER_TABLE(16, 26, 32, 60, 64, 132, 16384, 33024, 71168, 143104, "1g.18gb", "1g.18gb+me",
                 "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb");

static const struct fake_gi_profile a30[] = {
    P_ID(0x0, 14, 1, 1, 14, 5952, 1, 0, 1, 0, 0, 4, S_A30_1G, "1g.6gb"),
    P_ID(0x7, 21, 1, 1, 14, 5952, 1, 0, 1, 1, 1, 1, S_A30_1G, "1g.6gb+me"),
    P_ID(0x1, 5, 2, 2, 28, 11968, 2, 0, 2, 0, 0, 2, S_A30_2G, "2g.12gb"),
    P_ID(0x8, 6, 2, 2, 28, 11968, 2, 0, 2, 1, 1, 1, S_A30_2G, "2g.12gb+me"),
    P_ID(0x3, 0, 4, 4, 56, 24000, 4, 0, 4, 1, 1, 1, S_0, "4g.24gb"),
};

#define MIG8(t) 8, 7, t, GS_ARRAY_SIZE(t)
#define NO_MIG 0, 0, NULL, 0

static const struct fake_model catalog[] = {
    {"Tesla T4", 15360, 7, 5, NVML_DEVICE_ARCH_TURING, NVML_BRAND_NVIDIA, 0x1EB810DE, 0, 40,
     NO_MIG},
    {"NVIDIA L20", 46068, 8, 9, NVML_DEVICE_ARCH_ADA, NVML_BRAND_NVIDIA, 0x26BA10DE, 0, 92, NO_MIG},
    {"NVIDIA A100-SXM4-40GB", 40960, 8, 0, NVML_DEVICE_ARCH_AMPERE, NVML_BRAND_NVIDIA, 0x20B010DE,
     12, 108, MIG8(a100_40)},
    {"NVIDIA A100-SXM4-80GB", 81920, 8, 0, NVML_DEVICE_ARCH_AMPERE, NVML_BRAND_NVIDIA, 0x20B210DE,
     12, 108, MIG8(a100_80)},
    {"NVIDIA A30", 24576, 8, 0, NVML_DEVICE_ARCH_AMPERE, NVML_BRAND_NVIDIA, 0x20B710DE, 4, 56, 4, 4,
     a30, GS_ARRAY_SIZE(a30)},
    {"NVIDIA H100 80GB HBM3", 81559, 9, 0, NVML_DEVICE_ARCH_HOPPER, NVML_BRAND_NVIDIA, 0x233010DE,
     18, 132, MIG8(h100_sxm)},
    {"NVIDIA H100 PCIe", 81559, 9, 0, NVML_DEVICE_ARCH_HOPPER, NVML_BRAND_NVIDIA, 0x233110DE, 12,
     114, MIG8(h100_pcie)},
    {"NVIDIA H100 NVL", 95830, 9, 0, NVML_DEVICE_ARCH_HOPPER, NVML_BRAND_NVIDIA, 0x232110DE, 12,
     132, MIG8(h100_nvl)},
    {"NVIDIA H200", 143771, 9, 0, NVML_DEVICE_ARCH_HOPPER, NVML_BRAND_NVIDIA, 0x233510DE, 18, 132,
     MIG8(h200)},
    {"NVIDIA H20", 97871, 9, 0, NVML_DEVICE_ARCH_HOPPER, NVML_BRAND_NVIDIA, 0x232910DE, 18, 78,
     MIG8(h20)},
    {"NVIDIA GH200 480GB", 97871, 9, 0, NVML_DEVICE_ARCH_HOPPER, NVML_BRAND_NVIDIA, 0x234210DE, 18,
     132, MIG8(gh200_96)},
};

const struct fake_model *fake_catalog_get(size_t i)
{
    return i < GS_ARRAY_SIZE(catalog) ? &catalog[i] : NULL;
}

const struct fake_model *fake_catalog_find(const char *name)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(catalog); i++)
        if (strcmp(catalog[i].name, name) == 0)
            return &catalog[i];
    return NULL;
}

const struct fake_gi_profile *fake_profile_by_id(const struct fake_model *m, unsigned id)
{
    for (size_t i = 0; i < m->n_profiles; i++)
        if (m->profiles[i].id == id)
            return &m->profiles[i];
    return NULL;
}

const struct fake_gi_profile *fake_profile_by_index(const struct fake_model *m, unsigned index)
{
    for (size_t i = 0; i < m->n_profiles; i++)
        if (m->profiles[i].index == index)
            return &m->profiles[i];
    return NULL;
}

const struct fake_gi_profile *fake_profile_by_name(const struct fake_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_profiles; i++)
        if (strcmp(m->profiles[i].name, name) == 0)
            return &m->profiles[i];
    return NULL;
}

unsigned fake_profile_name_gb(uint64_t profile_mib, uint64_t total_mib)
{
    /* GB = round(ceil(mem / total * 8) / 8 * ceil(total_bytes / 2^30)) */
    double eighths = ceil((double)profile_mib / (double)total_mib * 8.0);
    double total_gib = ceil((double)total_mib / 1024.0);
    return (unsigned)round(eighths / 8.0 * total_gib);
}

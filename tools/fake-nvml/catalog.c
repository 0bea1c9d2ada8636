/* SPDX-License-Identifier: Apache-2.0 */
/* catalog.c: the GPU models the fake NVML knows — NVML names, memory, compute capability,
 * architecture, PCI device ids and MIG GPU-instance profile tables (facts A.2–A.4). Pure
 * constant data plus lookups; the MIG profile tables are mig/'s (src/mig/catalog.c). Rows marked
 * UNVERIFIED in the facts are documented in docs/fake-nvml.md. */
#include <string.h>

#include "internal.h"

/* MIG-capable models take their profile tables from mig/'s catalog (fake_catalog_find). */
#define MIG8(t) 0, 0, NULL, 0
#define NO_MIG 0, 0, NULL, 0

static struct fake_model catalog[] = {
    {"Tesla T4", 15360, 7, 5, NVML_DEVICE_ARCH_TURING, NVML_BRAND_NVIDIA, 0x1EB810DE, 0, 40,
     NO_MIG},
    {"NVIDIA L20", 46068, 8, 9, NVML_DEVICE_ARCH_ADA, NVML_BRAND_NVIDIA, 0x26BA10DE, 0, 92, NO_MIG},
    {"NVIDIA A100-SXM4-40GB", 40960, 8, 0, NVML_DEVICE_ARCH_AMPERE, NVML_BRAND_NVIDIA, 0x20B010DE,
     12, 108, MIG8(a100_40)},
    {"NVIDIA A100-SXM4-80GB", 81920, 8, 0, NVML_DEVICE_ARCH_AMPERE, NVML_BRAND_NVIDIA, 0x20B210DE,
     12, 108, MIG8(a100_80)},
    {"NVIDIA A30", 24576, 8, 0, NVML_DEVICE_ARCH_AMPERE, NVML_BRAND_NVIDIA, 0x20B710DE, 4, 56, 0, 0,
     NULL, 0},
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

/* The MIG columns of the catalog come from mig/ (one table for planner and fake). */
static void fill_mig(void)
{
    static bool done;

    if (done)
        return;
    for (size_t i = 0; i < GS_ARRAY_SIZE(catalog); i++) {
        const struct mig_gpu_model *m = mig_model_find(catalog[i].name);
        if (!m)
            continue;
        catalog[i].mem_slices = m->mem_slices;
        catalog[i].compute_slices = m->compute_slices;
        catalog[i].profiles = m->profiles;
        catalog[i].n_profiles = m->n_profiles;
    }
    done = true;
}

const struct fake_model *fake_catalog_find(const char *name)
{
    fill_mig();
    for (size_t i = 0; i < GS_ARRAY_SIZE(catalog); i++)
        if (strcmp(catalog[i].name, name) == 0)
            return &catalog[i];
    return NULL;
}

const struct mig_profile *fake_profile_by_id(const struct fake_model *m, unsigned id)
{
    for (size_t i = 0; i < m->n_profiles; i++)
        if (m->profiles[i].id == id)
            return &m->profiles[i];
    return NULL;
}

const struct mig_profile *fake_profile_by_index(const struct fake_model *m, unsigned index)
{
    for (size_t i = 0; i < m->n_profiles; i++)
        if (m->profiles[i].index == index)
            return &m->profiles[i];
    return NULL;
}

const struct mig_profile *fake_profile_by_name(const struct fake_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_profiles; i++)
        if (strcmp(m->profiles[i].name, name) == 0)
            return &m->profiles[i];
    return NULL;
}

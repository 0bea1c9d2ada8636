/* SPDX-License-Identifier: Apache-2.0 */
/* test_names.c: the pure naming rules of src/gpu/names.c — go-nvlib's MIG memory figure
 * and profile names against real nvidia-smi names, topology labels, PCI sysfs names. */
#include <errno.h>
#include <string.h>

#include "gpu/gpu.h"
#include "tests.h"

#define MIB (UINT64_C(1) << 20)

static void test_gpu_mig_memory_gb_matches_nvidia_names(void **state)
{
    /* Profile memory (MiB, from -lgip GiB × 1024) and the GPU's total (MiB) against the
     * GB figure in nvidia-smi's profile name (facts A.3, A.6). */
    static const struct {
        uint64_t profile_mib, total_mib;
        unsigned want_gb;
    } cases[] = {
        {4864, 40960, 5},                  /* A100-40GB 1g.5gb */
        {9984, 40960, 10},                 /* A100-40GB 2g.10gb (9.75 GiB) */
        {19968, 40960, 20},                /* A100-40GB 3g.20gb */
        {40192, 40960, 40},                /* A100-40GB 7g.40gb (39.25 GiB) */
        {9728, 81920, 10},                 /* A100-80GB 1g.10gb (9.5 GiB) */
        {19968, 81920, 20},                /* A100-80GB 1g.20gb / 2g.20gb */
        {40192, 81920, 40},                /* A100-80GB 3g.40gb */
        {80640, 81920, 80},                /* A100-80GB 7g.80gb */
        {9984, 81559, 10},                 /* H100 80GB HBM3 1g.10gb */
        {40448, 81559, 40},                /* H100 80GB HBM3 3g.40gb */
        {11008, 95830, 12},                /* H100 NVL 1g.12gb */
        {47488, 95830, 47},                /* H100 NVL 3g.47gb */
        {95355, 95830, 94},                /* H100 NVL 7g.94gb (93.12 GiB) */
        {16384, 143771, 18},               /* H200 1g.18gb */
        {71168, 143771, 71},               /* H200 3g.71gb */
        {5952, 24576, 6},                  /* A30 1g.6gb */
        {11971, 24576, 12},                /* A30 2g.12gb */
        {0, 40960, 0},       {4864, 0, 0}, /* no total: no figure */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned got = gpu_mig_memory_gb(cases[i].profile_mib, cases[i].total_mib * MIB);
        if (got != cases[i].want_gb)
            fail_msg("case %zu: %llu MiB of %llu MiB gave %u GB, want %u", i,
                     (unsigned long long)cases[i].profile_mib,
                     (unsigned long long)cases[i].total_mib, got, cases[i].want_gb);
    }
}

static void test_gpu_mig_profile_name_formats(void **state)
{
    static const struct {
        unsigned c, g, gb;
        const char *suffix;
        size_t size;
        int want_r;
        const char *want;
    } cases[] = {
        {1, 1, 10, "", 32, 0, "1g.10gb"},
        {1, 1, 10, NULL, 32, 0, "1g.10gb"},
        {1, 1, 10, "+me", 32, 0, "1g.10gb+me"},
        {7, 7, 80, "", 32, 0, "7g.80gb"},
        {1, 2, 20, "", 32, 0, "1c.2g.20gb"},
        {2, 3, 40, "", 32, 0, "2c.3g.40gb"},
        {1, 1, 24, "+me.all", 32, 0, "1g.24gb+me.all"},
        {2, 2, 24, "-me", 32, 0, "2g.24gb-me"},
        {2, 1, 10, "", 32, -EINVAL, NULL}, /* more compute than the GPU instance */
        {0, 1, 10, "", 32, -EINVAL, NULL},
        {1, 0, 10, "", 32, -EINVAL, NULL},
        {1, 1, 10, "", 7, -ENAMETOOLONG, NULL}, /* "1g.10gb" needs 8 bytes */
        {1, 1, 10, "", 8, 0, "1g.10gb"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32] = "";
        int r = gpu_mig_profile_name(cases[i].c, cases[i].g, cases[i].gb, cases[i].suffix, buf,
                                     cases[i].size);
        if (r != cases[i].want_r)
            fail_msg("case %zu: r=%d, want %d", i, r, cases[i].want_r);
        if (cases[i].want && strcmp(buf, cases[i].want) != 0)
            fail_msg("case %zu: '%s', want '%s'", i, buf, cases[i].want);
    }
}

static void test_gpu_link_label_like_nvidia_smi_topo(void **state)
{
    static const struct {
        struct inv_link link;
        bool self;
        const char *want;
    } cases[] = {
        {{0, INV_PCIE_SAME}, true, "X"},        {{12, INV_PCIE_SYSTEM}, true, "X"},
        {{4, INV_PCIE_SYSTEM}, false, "NV4"},   {{18, INV_PCIE_NODE}, false, "NV18"},
        {{0, INV_PCIE_SAME}, false, "SAME"},    {{0, INV_PCIE_SINGLE}, false, "PIX"},
        {{0, INV_PCIE_MULTIPLE}, false, "PXB"}, {{0, INV_PCIE_HOSTBRIDGE}, false, "PHB"},
        {{0, INV_PCIE_NODE}, false, "NODE"},    {{0, INV_PCIE_SYSTEM}, false, "SYS"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[16];
        const char *got = gpu_link_label(&cases[i].link, cases[i].self, buf, sizeof(buf));
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("case %zu: '%s', want '%s'", i, got, cases[i].want);
    }
}

static void test_gpu_pci_sysfs_name_normalises_and_rejects(void **state)
{
    static const struct {
        const char *in;
        int want_r;
        const char *want;
    } cases[] = {
        {"00000000:3B:00.0", 0, "0000:3b:00.0"},
        {"0000:3b:00.0", 0, "0000:3b:00.0"},
        {"00000001:C1:1F.1", 0, "0001:c1:1f.1"},
        {"", -EINVAL, NULL},
        {"3B:00.0", -EINVAL, NULL},
        {"0000:3B:00", -EINVAL, NULL},
        {"0000:3G:00.0", -EINVAL, NULL},
        {"000:3B:00.0", -EINVAL, NULL},
        {"0000:3B:00.00", -EINVAL, NULL},
        {"0000:3B:000.0", -EINVAL, NULL},
        {"0000000000:3B:00.0", -EINVAL, NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32] = "";
        int r = gpu_pci_sysfs_name(cases[i].in, buf, sizeof(buf));
        if (r != cases[i].want_r)
            fail_msg("case %zu ('%s'): r=%d, want %d", i, cases[i].in, r, cases[i].want_r);
        if (cases[i].want && strcmp(buf, cases[i].want) != 0)
            fail_msg("case %zu: '%s', want '%s'", i, buf, cases[i].want);
    }
}

int run_names_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_mig_memory_gb_matches_nvidia_names),
        cmocka_unit_test(test_gpu_mig_profile_name_formats),
        cmocka_unit_test(test_gpu_link_label_like_nvidia_smi_topo),
        cmocka_unit_test(test_gpu_pci_sysfs_name_normalises_and_rejects),
    };
    return cmocka_run_group_tests_name("gpu_names", tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_catalog.c: every row of mig/'s profile catalog (src/mig/catalog.c) against an
 * independent transcription of the published tables: facts mig-and-nvml.md A.3 (-lgip's
 * GiB column x 1024, SMs, engines, max instances, -lgipp starts) and, for the H200, what a
 * real H200 answered (facts real-h200.md). The H20's SMs are unverified and not listed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "mig/mig.h"

struct row {
    const char *model, *name;
    unsigned id, index, slices, compute_slices, sms, memory_mib;
    unsigned dec, enc, ce, jpeg, ofa, max_instances, starts_mask;
};

#define S1 0x7Fu  /* 0..6 */
#define S1B 0x55u /* 0,2,4,6 */
#define S2 0x15u  /* 0,2,4 */
#define S3 0x11u  /* 0,4 */
#define S0 0x01u  /* 0 */

static const struct row rows[] = {
    {"NVIDIA A100-SXM4-40GB", "1g.5gb", 19, 0x0, 1, 1, 14, 4864, 0, 0, 1, 0, 0, 7, S1},
    {"NVIDIA A100-SXM4-40GB", "1g.5gb+me", 20, 0x7, 1, 1, 14, 4864, 1, 0, 1, 1, 1, 1, S1},
    {"NVIDIA A100-SXM4-40GB", "1g.10gb", 15, 0x9, 2, 1, 14, 9984, 1, 0, 1, 0, 0, 4, S1B},
    {"NVIDIA A100-SXM4-40GB", "2g.10gb", 14, 0x1, 2, 2, 28, 9984, 1, 0, 2, 0, 0, 3, S2},
    {"NVIDIA A100-SXM4-40GB", "3g.20gb", 9, 0x2, 4, 3, 42, 20096, 2, 0, 3, 0, 0, 2, S3},
    {"NVIDIA A100-SXM4-40GB", "4g.20gb", 5, 0x3, 4, 4, 56, 20096, 2, 0, 4, 0, 0, 1, S0},
    {"NVIDIA A100-SXM4-40GB", "7g.40gb", 0, 0x4, 8, 7, 98, 40448, 5, 0, 7, 1, 1, 1, S0},
    {"NVIDIA A100-SXM4-80GB", "1g.10gb", 19, 0x0, 1, 1, 14, 9728, 0, 0, 1, 0, 0, 7, S1},
    {"NVIDIA A100-SXM4-80GB", "1g.10gb+me", 20, 0x7, 1, 1, 14, 9728, 1, 0, 1, 1, 1, 1, S1},
    {"NVIDIA A100-SXM4-80GB", "1g.20gb", 15, 0x9, 2, 1, 14, 19968, 1, 0, 1, 0, 0, 4, S1B},
    {"NVIDIA A100-SXM4-80GB", "2g.20gb", 14, 0x1, 2, 2, 28, 19968, 1, 0, 2, 0, 0, 3, S2},
    {"NVIDIA A100-SXM4-80GB", "3g.40gb", 9, 0x2, 4, 3, 42, 40192, 2, 0, 3, 0, 0, 2, S3},
    {"NVIDIA A100-SXM4-80GB", "4g.40gb", 5, 0x3, 4, 4, 56, 40192, 2, 0, 4, 0, 0, 1, S0},
    {"NVIDIA A100-SXM4-80GB", "7g.80gb", 0, 0x4, 8, 7, 98, 80640, 5, 0, 7, 1, 1, 1, S0},
    {"NVIDIA A30", "1g.6gb", 14, 0x0, 1, 1, 14, 5952, 1, 0, 1, 0, 0, 4, 0x0F},
    {"NVIDIA A30", "1g.6gb+me", 21, 0x7, 1, 1, 14, 5952, 1, 0, 1, 1, 1, 1, 0x0F},
    {"NVIDIA A30", "2g.12gb", 5, 0x1, 2, 2, 28, 11968, 2, 0, 2, 0, 0, 2, 0x05},
    {"NVIDIA A30", "2g.12gb+me", 6, 0x8, 2, 2, 28, 11968, 2, 0, 2, 1, 1, 1, 0x05},
    {"NVIDIA A30", "4g.24gb", 0, 0x3, 4, 4, 56, 24000, 4, 0, 4, 1, 1, 1, S0},
    {"NVIDIA H100 80GB HBM3", "1g.10gb", 19, 0x0, 1, 1, 16, 9984, 1, 0, 1, 1, 0, 7, S1},
    {"NVIDIA H100 80GB HBM3", "1g.10gb+me", 20, 0x7, 1, 1, 16, 9984, 1, 0, 1, 1, 1, 1, S1},
    {"NVIDIA H100 80GB HBM3", "1g.20gb", 15, 0x9, 2, 1, 26, 20096, 1, 0, 1, 1, 0, 4, S1B},
    {"NVIDIA H100 80GB HBM3", "2g.20gb", 14, 0x1, 2, 2, 32, 20096, 2, 0, 2, 2, 0, 3, S2},
    {"NVIDIA H100 80GB HBM3", "3g.40gb", 9, 0x2, 4, 3, 60, 40448, 3, 0, 3, 3, 0, 2, S3},
    {"NVIDIA H100 80GB HBM3", "4g.40gb", 5, 0x3, 4, 4, 64, 40448, 4, 0, 4, 4, 0, 1, S0},
    {"NVIDIA H100 80GB HBM3", "7g.80gb", 0, 0x4, 8, 7, 132, 81152, 7, 0, 8, 7, 1, 1, S0},
    {"NVIDIA H100 PCIe", "1g.10gb", 19, 0x0, 1, 1, 14, 9984, 1, 0, 1, 1, 0, 7, S1},
    {"NVIDIA H100 PCIe", "1g.10gb+me", 20, 0x7, 1, 1, 14, 9984, 1, 0, 1, 1, 1, 1, S1},
    {"NVIDIA H100 PCIe", "1g.20gb", 15, 0x9, 2, 1, 14, 20096, 1, 0, 1, 1, 0, 4, S1B},
    {"NVIDIA H100 PCIe", "2g.20gb", 14, 0x1, 2, 2, 30, 20096, 2, 0, 2, 2, 0, 3, S2},
    {"NVIDIA H100 PCIe", "3g.40gb", 9, 0x2, 4, 3, 46, 40448, 3, 0, 3, 3, 0, 2, S3},
    {"NVIDIA H100 PCIe", "4g.40gb", 5, 0x3, 4, 4, 62, 40448, 4, 0, 4, 4, 0, 1, S0},
    {"NVIDIA H100 PCIe", "7g.80gb", 0, 0x4, 8, 7, 114, 81152, 7, 0, 8, 7, 1, 1, S0},
    {"NVIDIA H100 NVL", "1g.12gb", 19, 0x0, 1, 1, 16, 11008, 1, 0, 1, 1, 0, 7, S1},
    {"NVIDIA H100 NVL", "1g.12gb+me", 20, 0x7, 1, 1, 16, 11008, 1, 0, 1, 1, 1, 1, S1},
    {"NVIDIA H100 NVL", "1g.24gb", 15, 0x9, 2, 1, 26, 22144, 1, 0, 1, 1, 0, 4, S1B},
    {"NVIDIA H100 NVL", "2g.24gb", 14, 0x1, 2, 2, 32, 22144, 2, 0, 2, 2, 0, 3, S2},
    {"NVIDIA H100 NVL", "3g.47gb", 9, 0x2, 4, 3, 60, 47488, 3, 0, 3, 3, 0, 2, S3},
    {"NVIDIA H100 NVL", "4g.47gb", 5, 0x3, 4, 4, 64, 47488, 4, 0, 4, 4, 0, 1, S0},
    {"NVIDIA H100 NVL", "7g.94gb", 0, 0x4, 8, 7, 132, 95360, 7, 0, 8, 7, 1, 1, S0},
    {"NVIDIA GH200 480GB", "1g.12gb", 19, 0x0, 1, 1, 16, 11264, 1, 0, 1, 1, 0, 7, S1},
    {"NVIDIA GH200 480GB", "1g.12gb+me", 20, 0x7, 1, 1, 16, 11264, 1, 0, 1, 1, 1, 1, S1},
    {"NVIDIA GH200 480GB", "1g.24gb", 15, 0x9, 2, 1, 26, 23552, 1, 0, 1, 1, 0, 4, S1B},
    {"NVIDIA GH200 480GB", "2g.24gb", 14, 0x1, 2, 2, 32, 23552, 2, 0, 2, 2, 0, 3, S2},
    {"NVIDIA GH200 480GB", "3g.48gb", 9, 0x2, 4, 3, 60, 47616, 3, 0, 3, 3, 0, 2, S3},
    {"NVIDIA GH200 480GB", "4g.48gb", 5, 0x3, 4, 4, 64, 47616, 4, 0, 4, 4, 0, 1, S0},
    {"NVIDIA GH200 480GB", "7g.96gb", 0, 0x4, 8, 7, 132, 95232, 7, 0, 8, 7, 1, 1, S0},
    /* a real H200, driver 580.159.04 (GetGpuInstanceProfileInfoV, possible placements) */
    {"NVIDIA H200", "1g.18gb", 19, 0x0, 1, 1, 16, 16384, 1, 0, 1, 1, 0, 7, S1},
    {"NVIDIA H200", "1g.18gb+me", 20, 0x7, 1, 1, 16, 16384, 1, 0, 1, 1, 1, 1, S1},
    {"NVIDIA H200", "1g.35gb", 15, 0x9, 2, 1, 26, 33280, 1, 0, 1, 1, 0, 4, S1B},
    {"NVIDIA H200", "2g.35gb", 14, 0x1, 2, 2, 32, 33280, 2, 0, 2, 2, 0, 3, S2},
    {"NVIDIA H200", "3g.71gb", 9, 0x2, 4, 3, 60, 71424, 3, 0, 3, 3, 0, 2, S3},
    {"NVIDIA H200", "4g.71gb", 5, 0x3, 4, 4, 64, 71424, 4, 0, 4, 4, 0, 1, S0},
    {"NVIDIA H200", "7g.141gb", 0, 0x4, 8, 7, 132, 143360, 7, 0, 8, 7, 1, 1, S0},
};

static void check_row(const struct row *r)
{
    const struct mig_gpu_model *m = mig_model_find(r->model);
    const struct mig_profile *p = mig_profile_by_name(m, r->name);

    if (!p)
        fail_msg("%s: no profile %s", r->model, r->name);
    assert_int_equal(p->id, r->id);
    assert_int_equal(p->index, r->index);
    assert_int_equal(p->slices, r->slices);
    assert_int_equal(p->compute_slices, r->compute_slices);
    if (p->sms != r->sms || p->memory_mib != r->memory_mib)
        fail_msg("%s %s: %u SMs %u MiB, the tables say %u SMs %u MiB", r->model, r->name, p->sms,
                 p->memory_mib, r->sms, r->memory_mib);
    assert_int_equal(p->dec, r->dec);
    assert_int_equal(p->enc, r->enc);
    assert_int_equal(p->ce, r->ce);
    assert_int_equal(p->jpeg, r->jpeg);
    assert_int_equal(p->ofa, r->ofa);
    assert_int_equal(p->max_instances, r->max_instances);
    assert_int_equal(p->starts_mask, r->starts_mask);
}

static void test_catalog_rows_match_the_published_tables(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        check_row(&rows[i]);
}

/* Nothing in the catalog that the tables do not list (H20: names only, unverified). */
static void test_catalog_has_no_unlisted_rows(void **state)
{
    (void)state;
    for (size_t i = 0; mig_model_get(i); i++) {
        const struct mig_gpu_model *m = mig_model_get(i);
        const struct mig_gpu_model *canon = mig_model_find(m->name);
        size_t listed = 0;

        if (strcmp(m->name, "NVIDIA H20") == 0)
            continue;
        for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++)
            listed += mig_model_find(rows[k].model)->profiles == canon->profiles;
        if (listed != m->n_profiles)
            fail_msg("%s: %zu profiles, the tables list %zu", m->name, m->n_profiles, listed);
    }
}

/* The H200's memory sizes, as the GPU reports them (issue 20: 33024/71168/143104 were the
 * -lgip GiB column's rounding, not what NVML says). */
static void test_catalog_h200_memory_is_the_hardware_s(void **state)
{
    const struct mig_gpu_model *m = mig_model_find("0x233510DE");

    (void)state;
    assert_non_null(m);
    assert_string_equal(m->name, "NVIDIA H200");
    assert_int_equal(m->memory_mib, 143771);
    assert_int_equal(mig_profile_by_name(m, "1g.35gb")->memory_mib, 33280);
    assert_int_equal(mig_profile_by_name(m, "2g.35gb")->memory_mib, 33280);
    assert_int_equal(mig_profile_by_name(m, "3g.71gb")->memory_mib, 71424);
    assert_int_equal(mig_profile_by_name(m, "4g.71gb")->memory_mib, 71424);
    assert_int_equal(mig_profile_by_name(m, "7g.141gb")->memory_mib, 143360);
    /* the NVL part (its own NVML name) has the same table */
    assert_ptr_equal(mig_model_find("NVIDIA H200 NVL")->profiles, m->profiles);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalog_rows_match_the_published_tables),
        cmocka_unit_test(test_catalog_has_no_unlisted_rows),
        cmocka_unit_test(test_catalog_h200_memory_is_the_hardware_s),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

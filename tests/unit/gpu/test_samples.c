/* SPDX-License-Identifier: Apache-2.0 */
/* test_samples.c: src/gpu/samples.c through the fake NVML (production loader): every field
 * of enum gpu_field read from a machine's telemetry, what a GPU does not have left unknown
 * (-1: NVLink without links, licensing outside a vGPU guest, utilization in MIG mode), a MIG
 * GPU's framebuffer per GPU instance, and a driver with only the required symbols (no
 * handle by UUID, none of the telemetry calls) sampled without a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "tests.h"

/* Opens lib (with FAKE_NVML_MACHINE at machine when not NULL), reads the inventory and one
 * sample into *ret_smp (owned, inv->n_gpus entries). */
static struct inv_inventory *sample(const char *lib, struct gpu_sample **ret_smp)
{
    struct gpu_nvml_options o = {.library_path = lib};
    struct gpu_nvml *n = NULL;
    struct inv_inventory *inv = NULL;
    struct error err = {0};

    if (gpu_nvml_open(&o, &n, &err) < 0 || gpu_inventory_read(n, &inv, &err) < 0)
        fail_msg("%s", err.msg);
    *ret_smp = calloc(inv->n_gpus, sizeof(**ret_smp));
    assert_non_null(*ret_smp);
    if (gpu_sample_read(n, inv, *ret_smp, &err) < 0)
        fail_msg("%s", err.msg);
    gpu_nvml_close(n);
    return inv;
}

static void test_gpu_sample_read_every_field(void **state)
{
    static const char machine[] =
        "gpus:\n"
        "  - model: NVIDIA H200\n"
        "    telemetry: {gpu_util: 87, mem_util: 41, enc_util: 12, dec_util: 7,\n"
        "                temperature_c: 59, memory_temp_c: 51, power_w: 676, energy_mj: 9000,\n"
        "                sm_clock_mhz: 1980, mem_clock_mhz: 2619, pcie_replays: 4,\n"
        "                ecc_corrected: 3, ecc_uncorrected: 1, remapped_correctable: 2,\n"
        "                remapped_uncorrectable: 1, remap_failed: 1, fb_reserved_mib: 620,\n"
        "                nvlink_raw_kib: 4096, vgpu_licensed: 0}\n"
        "    processes: [{pid: 7, used_mib: 5318}]\n"
        "  - model: NVIDIA L20\n"
        "  - model: NVIDIA A100-SXM4-80GB\n"
        "    count: 2\n"
        "    mig: {enabled: true, instances: [{profile: 1g.10gb, start: 0},\n"
        "                                     {profile: 3g.40gb, start: 4}]}\n"
        "    processes: [{pid: 9, used_mib: 2048, gi: 2, ci: 0}]\n"
        "topology:\n"
        "  nvlink: [[0, 2, 2]]\n";
    char *dir = tmpdir_make(), path[512], st[512];
    struct gpu_sample *smp = NULL;

    (void)state;
    write_under(dir, "m.yaml", machine);
    snprintf(path, sizeof(path), "%s/m.yaml", dir);
    snprintf(st, sizeof(st), "%s/state", dir);
    setenv("FAKE_NVML_MACHINE", path, 1);
    setenv("FAKE_NVML_STATE", st, 1);
    char lib[512];
    snprintf(lib, sizeof(lib), "%s/tools/fake-nvml/libnvidia-ml.so.1", GS_BINARY_DIR);
    struct inv_inventory *inv = sample(lib, &smp);
    const double *f = smp[0].field;
    static const struct {
        enum gpu_field field;
        double want;
    } want[] = {
        {GPU_FIELD_GPU_UTIL, 87},           {GPU_FIELD_MEM_COPY_UTIL, 41},
        {GPU_FIELD_ENC_UTIL, 12},           {GPU_FIELD_DEC_UTIL, 7},
        {GPU_FIELD_FB_USED, 5318 + 620},    {GPU_FIELD_FB_RESERVED, 620},
        {GPU_FIELD_GPU_TEMP, 59},           {GPU_FIELD_MEMORY_TEMP, 51},
        {GPU_FIELD_POWER_USAGE, 676},       {GPU_FIELD_TOTAL_ENERGY, 9000},
        {GPU_FIELD_SM_CLOCK, 1980},         {GPU_FIELD_MEM_CLOCK, 2619},
        {GPU_FIELD_PCIE_REPLAYS, 4},        {GPU_FIELD_ECC_SBE_VOL, 3},
        {GPU_FIELD_ECC_DBE_VOL, 1},         {GPU_FIELD_REMAPPED_COR, 2},
        {GPU_FIELD_REMAPPED_UNC, 1},        {GPU_FIELD_REMAP_FAILURE, 1},
        {GPU_FIELD_NVLINK_BANDWIDTH, 4096}, {GPU_FIELD_VGPU_LICENSE, 0},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(want); i++)
        if (f[want[i].field] != want[i].want)
            fail_msg("field %d: %g, want %g", (int)want[i].field, f[want[i].field], want[i].want);
    assert_true(f[GPU_FIELD_FB_FREE] == (double)(smp[0].fb_total_mib - 5318 - 620));
    /* an L20: no NVLink, no vGPU guest, nothing reserved */
    assert_true(smp[1].field[GPU_FIELD_NVLINK_BANDWIDTH] < 0);
    assert_true(smp[1].field[GPU_FIELD_VGPU_LICENSE] < 0);
    assert_true(smp[1].field[GPU_FIELD_FB_RESERVED] == 0);
    /* MIG on: no utilization; the framebuffer per GPU instance */
    assert_true(smp[2].field[GPU_FIELD_GPU_UTIL] < 0);
    assert_int_equal(smp[2].n_gis, 2);
    assert_true(smp[2].gis[0].fb_used_mib + smp[2].gis[1].fb_used_mib == 2048);
    assert_true(smp[2].field[GPU_FIELD_FB_USED] == 2048);
    free(smp);
    inv_free(inv);
    unsetenv("FAKE_NVML_MACHINE");
    unsetenv("FAKE_NVML_STATE");
    tmpdir_remove(dir);
    free(dir);
}

/* A driver without nvmlDeviceGetHandleByUUID and every telemetry call: the sample has the
 * framebuffer (a required call) and nothing else, instead of calling a NULL pointer. */
static void test_gpu_sample_read_old_driver(void **state)
{
    struct gpu_sample *smp = NULL;
    struct inv_inventory *inv;

    (void)state;
    inv = sample(GS_TEST_NVML_MINIMAL, &smp);
    assert_true(inv->n_gpus > 0);
    for (size_t f = 0; f < GPU_FIELD_COUNT; f++)
        if (f != GPU_FIELD_FB_USED && f != GPU_FIELD_FB_FREE && smp[0].field[f] >= 0)
            fail_msg("field %zu: %g from a driver that cannot tell", f, smp[0].field[f]);
    assert_true(smp[0].field[GPU_FIELD_FB_USED] >= 0);
    free(smp);
    inv_free(inv);
}

int run_samples_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_sample_read_every_field),
        cmocka_unit_test(test_gpu_sample_read_old_driver),
    };
    return cmocka_run_group_tests_name("gpu_samples", tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_fakenvml_telemetry.c: the fake NVML's reads behind dcgm-exporter's default fields
 * (nvml_telemetry.c, telemetry.c): the values a machine file's telemetry: gives, what an
 * idle GPU reports without one, the reserved framebuffer in memory v1/v2, NVLink throughput
 * only with links, vGPU licensing only in a "guest", and MIG handles refused. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/base.h"
#include "gpu/nvml.h"

#define OK(call) assert_int_equal((call), NVML_SUCCESS)
#define MIB (1ull << 20)

static char tmpdir[256];

static int setup(void **state)
{
    /* GPU 0: everything set; GPU 1: defaults; GPUs 2-3: an NVLink pair, MIG on GPU 2 */
    static const char machine[] =
        "gpus:\n"
        "  - model: NVIDIA H200\n"
        "    telemetry: {enc_util: 12, dec_util: 7, memory_temp_c: 51, energy_mj: 123456789012,\n"
        "                mem_clock_mhz: 2619, pcie_replays: 4, remapped_correctable: 2,\n"
        "                remapped_uncorrectable: 1, remap_failed: 1, fb_reserved_mib: 620,\n"
        "                vgpu_licensed: 1}\n"
        "    processes: [{pid: 100, used_mib: 5318}]\n"
        "  - model: NVIDIA L20\n"
        "  - model: NVIDIA A100-SXM4-80GB\n"
        "    count: 2\n"
        "    telemetry: {nvlink_raw_kib: 5001}\n"
        "    mig: {enabled: true, instances: [{profile: 1g.10gb, start: 0}]}\n"
        "topology:\n"
        "  nvlink: [[2, 3, 4]]\n";
    char path[512], st[512];
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gs-faketele-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    snprintf(path, sizeof(path), "%s/m.yaml", tmpdir);
    assert_int_equal(file_write_atomic(path, machine, sizeof(machine) - 1, 0644, NULL), 0);
    snprintf(st, sizeof(st), "%s/state", tmpdir);
    setenv("FAKE_NVML_MACHINE", path, 1);
    setenv("FAKE_NVML_STATE", st, 1);
    unsetenv("FAKE_NVML_FAIL");
    unsetenv("FAKE_NVML_EVENTS");
    OK(nvmlInit_v2());
    return 0;
}

static int teardown(void **state)
{
    char cmd[300];
    (void)state;
    nvmlShutdown();
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d = NULL;
    OK(nvmlDeviceGetHandleByIndex_v2(i, &d));
    return d;
}

static void test_values_from_the_machine_file(void **state)
{
    unsigned v, period, cor, unc, pending, failed;
    unsigned long long e;
    (void)state;
    OK(nvmlDeviceGetEncoderUtilization(dev(0), &v, &period));
    assert_int_equal(v, 12);
    assert_true(period > 0);
    OK(nvmlDeviceGetDecoderUtilization(dev(0), &v, &period));
    assert_int_equal(v, 7);
    OK(nvmlDeviceGetTotalEnergyConsumption(dev(0), &e));
    assert_true(e == 123456789012ull);
    OK(nvmlDeviceGetClockInfo(dev(0), NVML_CLOCK_MEM, &v));
    assert_int_equal(v, 2619);
    OK(nvmlDeviceGetPcieReplayCounter(dev(0), &v));
    assert_int_equal(v, 4);
    OK(nvmlDeviceGetRemappedRows(dev(0), &cor, &unc, &pending, &failed));
    assert_int_equal(cor, 2);
    assert_int_equal(unc, 1);
    assert_int_equal(pending, 0);
    assert_int_equal(failed, 1);
    assert_int_equal(nvmlDeviceGetRemappedRows(dev(0), &cor, &unc, NULL, &failed),
                     NVML_ERROR_INVALID_ARGUMENT);
    nvmlFieldValue_t f = {.fieldId = NVML_FI_DEV_MEMORY_TEMP};
    OK(nvmlDeviceGetFieldValues(dev(0), 1, &f));
    assert_int_equal(f.nvmlReturn, NVML_SUCCESS);
    assert_int_equal(f.valueType, NVML_VALUE_TYPE_UNSIGNED_INT);
    assert_int_equal(f.value.uiVal, 51);
}

static void test_idle_defaults(void **state)
{
    unsigned v, period;
    unsigned long long e;
    (void)state;
    OK(nvmlDeviceGetEncoderUtilization(dev(1), &v, &period));
    assert_int_equal(v, 0);
    OK(nvmlDeviceGetClockInfo(dev(1), NVML_CLOCK_MEM, &v));
    assert_int_equal(v, 1593);
    OK(nvmlDeviceGetTotalEnergyConsumption(dev(1), &e));
    assert_true(e == 0);
    assert_int_equal(nvmlDeviceGetClockInfo(dev(1), NVML_CLOCK_GRAPHICS, &v),
                     NVML_ERROR_INVALID_ARGUMENT);
}

/* v1 counts the driver's reservation as used (as nvidia-smi shows it); v2 gives it apart. */
static void test_reserved_framebuffer(void **state)
{
    nvmlMemory_t m1;
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    (void)state;
    OK(nvmlDeviceGetMemoryInfo(dev(0), &m1));
    assert_true(m1.used == (5318 + 620) * MIB);
    assert_true(m1.free == m1.total - m1.used);
    OK(nvmlDeviceGetMemoryInfo_v2(dev(0), &m2));
    assert_true(m2.reserved == 620 * MIB);
    assert_true(m2.used == 5318 * MIB);
    assert_true(m2.total == m2.used + m2.reserved + m2.free);
    OK(nvmlDeviceGetMemoryInfo_v2(dev(1), &m2));
    assert_true(m2.reserved == 0);
}

static void test_nvlink_throughput_only_with_links(void **state)
{
    nvmlFieldValue_t f[2] = {
        {.fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX, .scopeId = UINT_MAX},
        {.fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX, .scopeId = UINT_MAX}};
    (void)state;
    OK(nvmlDeviceGetFieldValues(dev(3), 2, f));
    assert_int_equal(f[0].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(f[1].nvmlReturn, NVML_SUCCESS);
    assert_true(f[0].value.ullVal + f[1].value.ullVal == 5001);
    OK(nvmlDeviceGetFieldValues(dev(1), 2, f)); /* an L20 has no NVLink */
    assert_int_equal(f[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(f[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    f[0].fieldId = 9999;
    OK(nvmlDeviceGetFieldValues(dev(3), 1, f));
    assert_int_equal(f[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetFieldValues(dev(3), 0, f), NVML_ERROR_INVALID_ARGUMENT);
}

static void test_vgpu_license_only_in_a_guest(void **state)
{
    nvmlGridLicensableFeatures_t lic;
    (void)state;
    OK(nvmlDeviceGetGridLicensableFeatures_v4(dev(0), &lic));
    assert_int_equal(lic.isGridLicenseSupported, 1);
    assert_int_equal(lic.licensableFeaturesCount, 1);
    assert_int_equal(lic.gridLicensableFeatures[0].featureState, 1);
    OK(nvmlDeviceGetGridLicensableFeatures_v4(dev(1), &lic));
    assert_int_equal(lic.isGridLicenseSupported, 0);
}

static void test_mig_device_handles_refused(void **state)
{
    nvmlDevice_t mig = NULL;
    unsigned v, period;
    (void)state;
    OK(nvmlDeviceGetMigDeviceHandleByIndex(dev(2), 0, &mig));
    assert_int_equal(nvmlDeviceGetEncoderUtilization(mig, &v, &period), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetPcieReplayCounter(mig, &v), NVML_ERROR_NOT_SUPPORTED);
    nvmlFieldValue_t f = {.fieldId = NVML_FI_DEV_MEMORY_TEMP};
    OK(nvmlDeviceGetFieldValues(mig, 1, &f));
    assert_int_equal(f.nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_from_the_machine_file),
        cmocka_unit_test(test_idle_defaults),
        cmocka_unit_test(test_reserved_framebuffer),
        cmocka_unit_test(test_nvlink_throughput_only_with_links),
        cmocka_unit_test(test_vgpu_license_only_in_a_guest),
        cmocka_unit_test(test_mig_device_handles_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

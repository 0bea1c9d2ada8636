/* SPDX-License-Identifier: Apache-2.0 */
/* test_fakenvml_live.c: telemetry and processes changed at run time through `telemetry` and
 * `proc` lines appended to FAKE_NVML_EVENTS (tools/fake-nvml/telemetry_live.c): seen on the
 * next call without nvmlInit again; derived values kept when a GPU's first line sets one key;
 * processes start, change and exit, also inside a MIG device; bad lines change nothing. */
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

static char tmpdir[256], events[300];

static void write_file(const char *path, const char *text, const char *mode)
{
    FILE *f = fopen(path, mode);
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void use_machine(const char *yaml)
{
    char path[300], state[300];

    snprintf(path, sizeof(path), "%s/machine.yaml", tmpdir);
    snprintf(state, sizeof(state), "%s/state", tmpdir);
    remove(state);
    remove(events);
    write_file(path, yaml, "w");
    setenv("FAKE_NVML_MACHINE", path, 1);
    setenv("FAKE_NVML_STATE", state, 1);
    setenv("FAKE_NVML_EVENTS", events, 1);
    unsetenv("FAKE_NVML_FAIL");
}

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d = NULL;
    OK(nvmlDeviceGetHandleByIndex_v2(i, &d));
    return d;
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gs-fakelive-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    snprintf(events, sizeof(events), "%s/events", tmpdir);
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

static void test_telemetry_changes(void **state)
{
    nvmlUtilization_t u;
    unsigned v = 0;
    unsigned long long ecc = 0;
    (void)state;

    use_machine("gpus:\n  - model: NVIDIA L20\n"
                "    processes: [{pid: 100, used_mib: 4621}]\n"
                "  - model: NVIDIA L20\n"
                "    telemetry: {gpu_util: 87, temperature_c: 66}\n");
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetUtilizationRates(dev(0), &u));
    assert_int_equal(u.gpu, 30); /* derived: busy */
    write_file(events,
               "telemetry 0 temperature_c 71\ntelemetry 1 gpu_util 12\nxid 0 31\n"
               "telemetry 1 gpu_util 101\ntelemetry 1 no_such_key 3\ntelemetry 9 gpu_util 1\n"
               "telemetry 1 power_w 250\ntelemetry 1 ecc_uncorrected 4\n",
               "a");
    OK(nvmlDeviceGetTemperature(dev(0), NVML_TEMPERATURE_GPU, &v));
    assert_int_equal(v, 71);
    OK(nvmlDeviceGetUtilizationRates(dev(0), &u));
    assert_int_equal(u.gpu, 30); /* the other derived values are kept */
    assert_int_equal(u.memory, 10);
    OK(nvmlDeviceGetPowerUsage(dev(0), &v));
    assert_int_equal(v, 150000);
    OK(nvmlDeviceGetUtilizationRates(dev(1), &u));
    assert_int_equal(u.gpu, 12); /* 101 was skipped */
    OK(nvmlDeviceGetTemperature(dev(1), NVML_TEMPERATURE_GPU, &v));
    assert_int_equal(v, 66);
    OK(nvmlDeviceGetPowerUsage(dev(1), &v));
    assert_int_equal(v, 250000);
    OK(nvmlDeviceGetTotalEccErrors(dev(1), NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                                   &ecc));
    assert_int_equal(ecc, 4);
    nvmlShutdown();
}

/* `gpu <n> lost|back`: a GPU that fell off the bus fails its queries with GPU_IS_LOST (the
 * handle is still found), the others answer; after `back` it answers again. */
static void test_gpu_lost_and_back(void **state)
{
    nvmlMemory_t mem;
    nvmlDevice_t d1 = NULL;
    char uuid[96];
    (void)state;

    use_machine("gpus:\n  - model: NVIDIA L20\n    count: 2\n");
    OK(nvmlInit_v2());
    d1 = dev(1);
    OK(nvmlDeviceGetUUID(d1, uuid, sizeof(uuid)));
    write_file(events, "gpu 1 lost\ngpu 7 lost\ngpu 0 sideways\n", "a");
    assert_int_equal(nvmlDeviceGetMemoryInfo(d1, &mem), NVML_ERROR_GPU_IS_LOST);
    OK(nvmlDeviceGetMemoryInfo(dev(0), &mem)); /* the others answer */
    nvmlDevice_t again = NULL;
    OK(nvmlDeviceGetHandleByUUID(uuid, &again));
    assert_ptr_equal(again, d1);
    write_file(events, "gpu 1 back\n", "a");
    OK(nvmlDeviceGetMemoryInfo(d1, &mem));
    OK(nvmlShutdown());
}

static void test_processes_change(void **state)
{
    nvmlProcessInfo_t p[8];
    nvmlMemory_t mem;
    nvmlProcessUtilizationSample_t s[8];
    unsigned n = 8;
    (void)state;

    use_machine("gpus:\n  - model: NVIDIA L20\n"
                "    processes: [{pid: 100, used_mib: 4621}, {pid: 200, used_mib: 1024}]\n");
    OK(nvmlInit_v2());
    write_file(events,
               "proc 0 100 exit\nproc 0 200 3000 70\nproc 0 300 512 10\n"
               "proc 0 400 notanumber\nproc 0 500 100 101\n",
               "a");
    OK(nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, p));
    assert_int_equal(n, 2);
    assert_int_equal(p[0].pid + p[1].pid, 500); /* 200 and 300 */
    OK(nvmlDeviceGetMemoryInfo(dev(0), &mem));
    assert_int_equal(mem.used, (3000ull + 512) << 20);
    n = 8;
    OK(nvmlDeviceGetProcessUtilization(dev(0), s, &n, 0));
    assert_int_equal(n, 2);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(s[i].smUtil, s[i].pid == 200 ? 70 : 10);
    nvmlShutdown();
}

static void test_process_in_mig_device(void **state)
{
    char path[512], state_path[300], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], line[256];
    nvmlDevice_t mig = NULL;
    nvmlProcessInfo_t p[4];
    unsigned n = 4, gi = 0;
    (void)state;

    snprintf(path, sizeof(path), "%s/examples/machines/a100-80gb-all-balanced.yaml", GS_SOURCE_DIR);
    snprintf(state_path, sizeof(state_path), "%s/state", tmpdir);
    remove(state_path);
    remove(events);
    setenv("FAKE_NVML_MACHINE", path, 1);
    setenv("FAKE_NVML_STATE", state_path, 1);
    setenv("FAKE_NVML_EVENTS", events, 1);
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetMigDeviceHandleByIndex(dev(0), 0, &mig));
    OK(nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)));
    OK(nvmlDeviceGetGpuInstanceId(mig, &gi));
    snprintf(line, sizeof(line), "proc %s 4242 1000 50\n", uuid);
    write_file(events, line, "a");
    OK(nvmlDeviceGetComputeRunningProcesses_v3(mig, &n, p));
    assert_int_equal(n, 1);
    assert_int_equal(p[0].pid, 4242);
    assert_int_equal(p[0].gpuInstanceId, gi);
    nvmlShutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_telemetry_changes),
        cmocka_unit_test(test_gpu_lost_and_back),
        cmocka_unit_test(test_processes_change),
        cmocka_unit_test(test_process_in_mig_device),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_fakenvml_mps.c: the fake NVML's compute mode (nvml_mps.c), which MPS tests read back:
 * set and read back, kept in the state file so another process sees it, DEFAULT leaves no
 * line, invalid modes refused, FAKE_NVML_FAIL applies. */
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

static char tmpdir[256];
static char statefile[512];

static int setup(void **state)
{
    static const char machine[] = "gpus:\n  - model: NVIDIA L20\n    count: 2\n";
    char path[512];
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gs-fakemps-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    snprintf(path, sizeof(path), "%s/l20x2.yaml", tmpdir);
    assert_int_equal(file_write_atomic(path, machine, sizeof(machine) - 1, 0644, NULL), 0);
    snprintf(statefile, sizeof(statefile), "%s/state", tmpdir);
    setenv("FAKE_NVML_MACHINE", path, 1);
    setenv("FAKE_NVML_STATE", statefile, 1);
    unsetenv("FAKE_NVML_FAIL");
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

static bool state_has(const char *needle)
{
    char *data = NULL;
    bool found;
    if (file_read_all(statefile, 1 << 20, &data, NULL, NULL) < 0)
        return false;
    found = strstr(data, needle) != NULL;
    free(data);
    return found;
}

static void test_compute_mode_round_trip(void **state)
{
    nvmlComputeMode_t mode = NVML_COMPUTEMODE_PROHIBITED;
    (void)state;
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetComputeMode(dev(1), &mode));
    assert_int_equal(mode, NVML_COMPUTEMODE_DEFAULT);
    OK(nvmlDeviceSetComputeMode(dev(1), NVML_COMPUTEMODE_EXCLUSIVE_PROCESS));
    assert_true(state_has("cm 1 3\n"));
    /* A new session (another process) reads it back from the state file. */
    OK(nvmlShutdown());
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetComputeMode(dev(1), &mode));
    assert_int_equal(mode, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
    OK(nvmlDeviceGetComputeMode(dev(0), &mode));
    assert_int_equal(mode, NVML_COMPUTEMODE_DEFAULT);
    OK(nvmlDeviceSetComputeMode(dev(1), NVML_COMPUTEMODE_DEFAULT));
    assert_false(state_has("cm 1"));
    OK(nvmlShutdown());
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetComputeMode(dev(1), &mode));
    assert_int_equal(mode, NVML_COMPUTEMODE_DEFAULT);
}

static void test_compute_mode_bad_arguments(void **state)
{
    (void)state;
    OK(nvmlInit_v2());
    assert_int_equal(nvmlDeviceSetComputeMode(dev(0), (nvmlComputeMode_t)4),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceSetComputeMode(dev(0), (nvmlComputeMode_t)-1),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetComputeMode(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceSetComputeMode(NULL, NVML_COMPUTEMODE_DEFAULT),
                     NVML_ERROR_INVALID_ARGUMENT);
    setenv("FAKE_NVML_FAIL", "nvmlDeviceSetComputeMode=4", 1);
    OK(nvmlShutdown());
    OK(nvmlInit_v2());
    assert_int_equal(nvmlDeviceSetComputeMode(dev(0), NVML_COMPUTEMODE_EXCLUSIVE_PROCESS),
                     NVML_ERROR_NO_PERMISSION);
    unsetenv("FAKE_NVML_FAIL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_compute_mode_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compute_mode_bad_arguments, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_fakenvml_attrs.c: the fake NVML where it must match the real library for NVIDIA's
 * own tools (issue: plugin and GFD died with "undefined symbol" on MIG nodes):
 * nvmlDeviceGetAttributes(_v2), GPU-instance sliceCount in compute slices, instance queries
 * with MIG off, and the driver's capability files under FAKE_NVML_PROC_ROOT; mig-parted's
 * calls (nvml_tools.c: GetHandleByPciBusId, SystemGetNVMLVersion) and what a real H200 with
 * MIG disabled answered (facts real-h200.md), call for call (issue 20). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <cmocka.h>

#include "base/base.h"
#include "gpu/nvml.h"

/* Exported by the fake (and the real library); gpuslice does not call them, so
 * src/gpu/nvml.h does not declare them. */
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);
typedef struct {
    unsigned int version;
    unsigned int value;
} nvmlDeviceAddressingMode_t;
nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, nvmlDeviceAddressingMode_t *mode);

#define OK(call) assert_int_equal((call), NVML_SUCCESS)

static char tmpdir[256];

static void use_machine(const char *name)
{
    char path[512], state[512];

    snprintf(path, sizeof(path), "%s/examples/machines/%s", GS_SOURCE_DIR, name);
    snprintf(state, sizeof(state), "%s/state", tmpdir);
    remove(state);
    setenv("FAKE_NVML_MACHINE", path, 1);
    setenv("FAKE_NVML_STATE", state, 1);
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
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/gs-fakeattrs-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown(void **state)
{
    char cmd[300];
    (void)state;
    nvmlShutdown();
    unsetenv("FAKE_NVML_PROC_ROOT");
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* Both names are exported, as the real library does (NVIDIA's plugin resolves them). */
static void test_attributes_symbols_exported(void **state)
{
    void *h = dlopen(NULL, RTLD_NOW);
    (void)state;
    assert_non_null(h);
    assert_non_null(dlsym(h, "nvmlDeviceGetAttributes_v2"));
    assert_non_null(dlsym(h, "nvmlDeviceGetAttributes"));
    dlclose(h);
}

/* A100-80GB balanced: a 3g.40gb instance has 3 compute slices, 42 SMs, 40 GB. */
static void test_attributes_of_mig_device(void **state)
{
    nvmlDevice_t mig = NULL;
    nvmlDeviceAttributes_t a;
    unsigned found = 0;
    (void)state;

    use_machine("a100-80gb-all-balanced.yaml");
    OK(nvmlInit_v2());
    for (unsigned i = 0; i < 7; i++) {
        if (nvmlDeviceGetMigDeviceHandleByIndex(dev(0), i, &mig) != NVML_SUCCESS)
            continue;
        OK(nvmlDeviceGetAttributes_v2(mig, &a));
        assert_true(a.gpuInstanceSliceCount == 1 || a.gpuInstanceSliceCount == 2 ||
                    a.gpuInstanceSliceCount == 3);
        assert_int_equal(a.computeInstanceSliceCount, a.gpuInstanceSliceCount);
        if (a.gpuInstanceSliceCount == 3) {
            found++;
            assert_int_equal(a.multiprocessorCount, 42);
            assert_true(a.memorySizeMB > 39000 && a.memorySizeMB < 41000);
        }
        OK(nvmlDeviceGetAttributes(mig, &a)); /* the unversioned name answers the same */
    }
    assert_int_equal(found, 1);
    /* whole GPUs: NVML documents MIG device handles only */
    assert_int_equal(nvmlDeviceGetAttributes_v2(dev(0), &a), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetAttributes_v2(mig, NULL), NVML_ERROR_INVALID_ARGUMENT);
    OK(nvmlShutdown());
}

/* sliceCount is compute slices (the "3" of 3g.40gb), not the placement's memory slices. */
static void test_gi_profile_slice_count_is_compute_slices(void **state)
{
    nvmlGpuInstanceProfileInfo_t info;
    (void)state;

    use_machine("a100-80gb-all-balanced.yaml");
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetGpuInstanceProfileInfo(dev(0), NVML_GPU_INSTANCE_PROFILE_3_SLICE, &info));
    assert_int_equal(info.sliceCount, 3);
    OK(nvmlDeviceGetGpuInstanceProfileInfo(dev(0), NVML_GPU_INSTANCE_PROFILE_7_SLICE, &info));
    assert_int_equal(info.sliceCount, 7);
    OK(nvmlShutdown());
}

/* A capable GPU with MIG off, as a real H200 answers (facts real-h200.md; the header's
 * prose suggests NOT_SUPPORTED, the hardware says otherwise): GetGpuInstances SUCCESS with
 * none, every profile readable through the V call, placements listed, no MIG devices. */
static void test_gi_queries_with_mig_off(void **state)
{
    nvmlGpuInstanceProfileInfo_v2_t v2 = {.version = nvmlGpuInstanceProfileInfo_v2};
    nvmlGpuInstance_t gis[8];
    unsigned count = 8, cur = 0, pend = 0, seen = 0;
    nvmlDevice_t d;
    (void)state;

    use_machine("h100-nvswitch-8.yaml");
    OK(nvmlInit_v2());
    d = dev(0);
    OK(nvmlDeviceGetMigMode(d, &cur, &pend));
    assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
    OK(nvmlDeviceGetGpuInstances(d, 19, gis, &count));
    assert_int_equal(count, 0);
    count = 0;
    OK(nvmlDeviceGetGpuInstances(d, 0, NULL, &count));
    assert_int_equal(count, 0);
    for (unsigned idx = 0; idx < 0xD; idx++) {
        nvmlReturn_t rc = nvmlDeviceGetGpuInstanceProfileInfoV(d, idx, &v2);
        if (rc == NVML_ERROR_NOT_SUPPORTED)
            continue;
        OK(rc);
        seen++;
    }
    assert_int_equal(seen, 7);
    count = 0;
    OK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 9, NULL, &count));
    assert_int_equal(count, 2);
    OK(nvmlDeviceGetMaxMigDeviceCount(d, &count));
    assert_int_equal(count, 0);
    /* not measured on the hardware: stays what the header says */
    assert_int_equal(nvmlDeviceGetGpuInstanceById(d, 1, gis), NVML_ERROR_NOT_SUPPORTED);
    OK(nvmlShutdown());
}

static char *slurp(const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    if (file_read_all(path, 1 << 20, &buf, &len, NULL) < 0)
        return NULL;
    return buf;
}

/* mig-minors beside the access files, in step with the instances. */
static void test_caps_files_follow_instances(void **state)
{
    char root[300], path[512];
    char *text;
    (void)state;

    snprintf(root, sizeof(root), "%s/proc", tmpdir);
    setenv("FAKE_NVML_PROC_ROOT", root, 1);
    use_machine("a100-80gb-all-balanced.yaml");
    OK(nvmlInit_v2());
    snprintf(path, sizeof(path), "%s/driver/nvidia-caps/mig-minors", root);
    text = slurp(path);
    assert_non_null(text);
    assert_non_null(
        strstr(text, "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n"));
    assert_non_null(strstr(text, "gpu1/gi0/access 138\n"));
    free(text);
    /* GPU instance 1 exists on GPU 0 of this machine: its access file names minor 12 */
    snprintf(path, sizeof(path), "%s/driver/nvidia/capabilities/gpu0/mig/gi1/access", root);
    text = slurp(path);
    assert_non_null(text);
    assert_non_null(strstr(text, "DeviceFileMinor: 12\n"));
    free(text);
    snprintf(path, sizeof(path), "%s/driver/nvidia/capabilities/gpu0/mig/gi1/ci0/access", root);
    text = slurp(path);
    assert_non_null(text);
    assert_non_null(strstr(text, "DeviceFileMinor: 13\n"));
    free(text);
    snprintf(path, sizeof(path), "%s/driver/nvidia/capabilities/gpu0/mig/gi14/access", root);
    assert_null(slurp(path)); /* no such instance, no file */
    OK(nvmlShutdown());
}

/* mig-parted resolves these at start; without them it dies with a symbol lookup error. */
static void test_mig_parted_symbols_exported(void **state)
{
    void *h = dlopen(NULL, RTLD_NOW);
    (void)state;
    assert_non_null(h);
    assert_non_null(dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    assert_non_null(dlsym(h, "nvmlDeviceGetHandleByPciBusId"));
    assert_non_null(dlsym(h, "nvmlSystemGetNVMLVersion"));
    dlclose(h);
}

/* NVIDIA's DRA driver reads it on every GPU and does not start without the symbol; x86
 * answers NOT_SUPPORTED, a bad handle or NULL output INVALID_ARGUMENT, like the real one. */
static void test_addressing_mode_not_supported(void **state)
{
    nvmlDeviceAddressingMode_t mode = {0};
    void *h = dlopen(NULL, RTLD_NOW);
    (void)state;

    assert_non_null(h);
    assert_non_null(dlsym(h, "nvmlDeviceGetAddressingMode"));
    dlclose(h);
    use_machine("a100-80gb-all-1g.yaml");
    OK(nvmlInit_v2());
    assert_int_equal(nvmlDeviceGetAddressingMode(dev(0), &mode), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetAddressingMode(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetAddressingMode(NULL, &mode), NVML_ERROR_INVALID_ARGUMENT);
    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetAddressingMode@0=3", 1);
    assert_int_equal(nvmlDeviceGetAddressingMode(dev(0), &mode), 3);
    unsetenv("FAKE_NVML_FAIL");
    OK(nvmlShutdown());
}

static void test_get_handle_by_pci_bus_id(void **state)
{
    nvmlPciInfo_t pci;
    nvmlDevice_t d = NULL;
    (void)state;

    use_machine("h100-nvswitch-8.yaml");
    OK(nvmlInit_v2());
    for (unsigned i = 0; i < 8; i++) {
        OK(nvmlDeviceGetPciInfo_v3(dev(i), &pci));
        OK(nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &d));
        assert_ptr_equal(d, dev(i));
        OK(nvmlDeviceGetHandleByPciBusId(pci.busIdLegacy, &d));
        assert_ptr_equal(d, dev(i));
    }
    OK(nvmlDeviceGetHandleByPciBusId_v2("00000000:18:00.0", &d)); /* lower case, GPU 1 */
    assert_ptr_equal(d, dev(1));
    OK(nvmlDeviceGetHandleByPciBusId_v2("18:00.0", &d)); /* no domain */
    assert_ptr_equal(d, dev(1));
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("00000000:11:00.0", &d),
                     NVML_ERROR_NOT_FOUND);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("00000000:10:00.1", &d),
                     NVML_ERROR_NOT_FOUND);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("GPU 0", &d), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2(NULL, &d), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("10:00.0", NULL),
                     NVML_ERROR_INVALID_ARGUMENT);
    OK(nvmlShutdown());
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("10:00.0", &d), NVML_ERROR_UNINITIALIZED);
}

static void test_system_nvml_version(void **state)
{
    char v[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    (void)state;

    use_machine("h200-node.yaml");
    OK(nvmlInit_v2());
    OK(nvmlSystemGetNVMLVersion(v, sizeof(v)));
    assert_string_equal(v, "13.580.159.04");
    assert_int_equal(nvmlSystemGetNVMLVersion(v, 5), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(nvmlSystemGetNVMLVersion(NULL, sizeof(v)), NVML_ERROR_INVALID_ARGUMENT);
    OK(nvmlShutdown());
}

/* The GPU-instance profile table of facts real-h200.md, read with MIG disabled. */
struct h200_row {
    unsigned index, id;
    const char *name;
    unsigned slices, instances, sms, ce, dec, enc, jpeg, ofa, memory_mb, n_starts, size;
};

static const struct h200_row h200[] = {
    {0, 19, "MIG 1g.18gb", 1, 7, 16, 1, 1, 0, 1, 0, 16384, 7, 1},
    {1, 14, "MIG 2g.35gb", 2, 3, 32, 2, 2, 0, 2, 0, 33280, 3, 2},
    {2, 9, "MIG 3g.71gb", 3, 2, 60, 3, 3, 0, 3, 0, 71424, 2, 4},
    {3, 5, "MIG 4g.71gb", 4, 1, 64, 4, 4, 0, 4, 0, 71424, 1, 4},
    {4, 0, "MIG 7g.141gb", 7, 1, 132, 8, 7, 0, 7, 1, 143360, 1, 8},
    {7, 20, "MIG 1g.18gb+me", 1, 1, 16, 1, 1, 0, 1, 1, 16384, 7, 1},
    {9, 15, "MIG 1g.35gb", 1, 4, 26, 1, 1, 0, 1, 0, 33280, 4, 2},
};

static void test_h200_with_mig_off_like_the_hardware(void **state)
{
    nvmlGpuInstancePlacement_t pl[8];
    nvmlGpuInstance_t gis[8];
    unsigned cur = 1, pend = 1, count, row = 0;
    nvmlDevice_t d;
    (void)state;

    use_machine("h200-node.yaml");
    OK(nvmlInit_v2());
    d = dev(0);
    OK(nvmlDeviceGetMigMode(d, &cur, &pend));
    assert_int_equal(cur, 0);
    assert_int_equal(pend, 0);
    count = 8;
    OK(nvmlDeviceGetGpuInstances(d, 19, gis, &count));
    assert_int_equal(count, 0);
    OK(nvmlDeviceGetMaxMigDeviceCount(d, &count));
    assert_int_equal(count, 0);
    for (unsigned idx = 0; idx < 17; idx++) {
        nvmlGpuInstanceProfileInfo_v2_t info = {.version = nvmlGpuInstanceProfileInfo_v2};
        nvmlReturn_t rc = nvmlDeviceGetGpuInstanceProfileInfoV(d, idx, &info);
        const struct h200_row *r = row < GS_ARRAY_SIZE(h200) ? &h200[row] : NULL;

        if (!r || r->index != idx) {
            assert_int_equal(rc, NVML_ERROR_NOT_SUPPORTED); /* a profile it lacks */
            continue;
        }
        OK(rc);
        assert_int_equal(info.id, r->id);
        assert_string_equal(info.name, r->name);
        assert_int_equal(info.sliceCount, r->slices);
        assert_int_equal(info.instanceCount, r->instances);
        assert_int_equal(info.multiprocessorCount, r->sms);
        assert_int_equal(info.copyEngineCount, r->ce);
        assert_int_equal(info.decoderCount, r->dec);
        assert_int_equal(info.encoderCount, r->enc);
        assert_int_equal(info.jpegCount, r->jpeg);
        assert_int_equal(info.ofaCount, r->ofa);
        assert_int_equal(info.memorySizeMB, r->memory_mb);
        count = 8;
        OK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, r->id, pl, &count));
        assert_int_equal(count, r->n_starts);
        assert_int_equal(pl[0].size, r->size);
        row++;
    }
    assert_int_equal(row, GS_ARRAY_SIZE(h200));
    /* past the last index of a 580 driver's NVML (13.0): INVALID_ARGUMENT */
    {
        nvmlGpuInstanceProfileInfo_v2_t info = {.version = nvmlGpuInstanceProfileInfo_v2};
        assert_int_equal(nvmlDeviceGetGpuInstanceProfileInfoV(d, 17, &info),
                         NVML_ERROR_INVALID_ARGUMENT);
    }
    OK(nvmlShutdown());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attributes_symbols_exported),
        cmocka_unit_test(test_mig_parted_symbols_exported),
        cmocka_unit_test_setup_teardown(test_addressing_mode_not_supported, setup, teardown),
        cmocka_unit_test(test_get_handle_by_pci_bus_id),
        cmocka_unit_test(test_system_nvml_version),
        cmocka_unit_test(test_h200_with_mig_off_like_the_hardware),
        cmocka_unit_test_setup_teardown(test_attributes_of_mig_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gi_profile_slice_count_is_compute_slices, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gi_queries_with_mig_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_caps_files_follow_instances, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_fakenvml.c: the fake libnvidia-ml.so.1 through its NVML ABI — machine files and
 * their errors, device fields, every MIG rule (placements per model, overlap, capacity,
 * destroy order, compute instances), state persistence across init cycles and processes,
 * XID events, fault injection. Each test uses its own state file under a temp directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/base.h"
#include "gpu/nvml.h"

static char tmpdir[256];
static unsigned serial;

#define OK(call) assert_int_equal((call), NVML_SUCCESS)

static void path_in_tmp(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", tmpdir, name);
}

static void write_text(const char *path, const char *text, const char *mode)
{
    FILE *f = fopen(path, mode);
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Points the library at a machine file and a fresh state file; clears faults and events. */
static void use_machine_path(const char *path)
{
    char state[512];

    snprintf(state, sizeof(state), "%s/state-%u", tmpdir, serial++);
    setenv("FAKE_NVML_MACHINE", path, 1);
    setenv("FAKE_NVML_STATE", state, 1);
    unsetenv("FAKE_NVML_FAIL");
    unsetenv("FAKE_NVML_EVENTS");
}

static void use_example(const char *name)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/examples/machines/%s", GS_SOURCE_DIR, name);
    use_machine_path(path);
}

/* Writes an inline machine file and uses it. */
static void use_yaml(const char *yaml)
{
    char path[512];
    char name[64];

    snprintf(name, sizeof(name), "machine-%u.yaml", serial++);
    path_in_tmp(path, sizeof(path), name);
    write_text(path, yaml, "w");
    use_machine_path(path);
}

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d = NULL;
    OK(nvmlDeviceGetHandleByIndex_v2(i, &d));
    return d;
}

static unsigned mig_count(nvmlDevice_t d)
{
    unsigned max = 0, n = 0;
    OK(nvmlDeviceGetMaxMigDeviceCount(d, &max));
    for (unsigned i = 0; i < max; i++) {
        nvmlDevice_t m;
        if (nvmlDeviceGetMigDeviceHandleByIndex(d, i, &m) == NVML_SUCCESS)
            n++;
    }
    return n;
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_fakenvml.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    char cmd[300];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    while (nvmlShutdown() == NVML_SUCCESS && nvmlDeviceGetCount_v2(&(unsigned){0}) == NVML_SUCCESS)
        ;
    return 0;
}

/* ---- lifecycle --------------------------------------------------------------------------- */

static void test_nvmlInit_refcounted(void **state)
{
    unsigned n = 0;
    (void)state;

    use_example("l20-node.yaml");
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    OK(nvmlShutdown()); /* more shutdowns than inits report success */
    OK(nvmlInit_v2());
    OK(nvmlInit_v2());
    OK(nvmlShutdown());
    OK(nvmlDeviceGetCount_v2(&n));
    assert_int_equal(n, 1);
    OK(nvmlShutdown());
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
}

static void test_nvmlInit_without_machine_is_driver_not_loaded(void **state)
{
    (void)state;
    use_example("l20-node.yaml");
    unsetenv("FAKE_NVML_MACHINE");
    assert_int_equal(nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
}

static void test_bad_handles_are_invalid_argument(void **state)
{
    char name[96];
    unsigned v;
    long not_a_handle[8] = {0};
    nvmlGpuInstance_t gi = (nvmlGpuInstance_t)not_a_handle;
    (void)state;

    use_example("a100-80gb-all-balanced.yaml");
    OK(nvmlInit_v2());
    assert_int_equal(nvmlDeviceGetName(NULL, name, sizeof(name)), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetName((nvmlDevice_t)not_a_handle, name, sizeof(name)),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetMigMode(NULL, &v, &v), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(
        nvmlDeviceRegisterEvents(NULL, nvmlEventTypeXidCriticalError, (nvmlEventSet_t)not_a_handle),
        NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlGpuInstanceDestroy(NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlGpuInstanceDestroy(gi), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlComputeInstanceDestroy(NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(4, &(nvmlDevice_t){0}),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetHandleByUUID("GPU-nope", &(nvmlDevice_t){0}),
                     NVML_ERROR_NOT_FOUND);
    OK(nvmlShutdown());
}

static void test_examples_all_load(void **state)
{
    char dir[512];
    DIR *d;
    struct dirent *e;
    unsigned loaded = 0;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/examples/machines", GS_SOURCE_DIR);
    d = opendir(dir);
    assert_non_null(d);
    while ((e = readdir(d))) {
        char uuids[64][NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        unsigned n = 0;
        if (!str_endswith(e->d_name, ".yaml"))
            continue;
        use_example(e->d_name);
        OK(nvmlInit_v2());
        OK(nvmlDeviceGetCount_v2(&n));
        assert_true(n > 0 && n <= 64);
        for (unsigned i = 0; i < n; i++) {
            char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
            OK(nvmlDeviceGetName(dev(i), name, sizeof(name)));
            assert_true(strlen(name) > 3);
            OK(nvmlDeviceGetUUID(dev(i), uuids[i], sizeof(uuids[i])));
            assert_true(str_startswith(uuids[i], "GPU-"));
            assert_int_equal(strlen(uuids[i]), 40);
            for (unsigned j = 0; j < i; j++)
                assert_string_not_equal(uuids[i], uuids[j]);
        }
        OK(nvmlShutdown());
        loaded++;
    }
    closedir(d);
    assert_true(loaded >= 8);
}

static void test_uuid_deterministic_across_runs_and_paths(void **state)
{
    char a[96], b[96], copy[512], *data = NULL;
    char src[512];
    size_t len = 0;
    (void)state;

    use_example("h100-nvswitch-8.yaml");
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetUUID(dev(5), a, sizeof(a)));
    OK(nvmlShutdown());
    snprintf(src, sizeof(src), "%s/examples/machines/h100-nvswitch-8.yaml", GS_SOURCE_DIR);
    assert_int_equal(file_read_all(src, 1 << 20, &data, &len, NULL), 0);
    path_in_tmp(copy, sizeof(copy), "elsewhere.yaml");
    write_text(copy, data, "w");
    free(data);
    use_machine_path(copy);
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetUUID(dev(5), b, sizeof(b)));
    assert_string_equal(a, b);
    OK(nvmlShutdown());
}

/* ---- device fields ----------------------------------------------------------------------- */

struct seed_row {
    const char *machine, *name;
    unsigned long long memory_mib, used_mib;
    int cc_major, cc_minor;
    unsigned arch, pci_device_id, pid;
};

static const struct seed_row seed_rows[] = {
    {"l20-node.yaml", "NVIDIA L20", 46068, 4621, 8, 9, NVML_DEVICE_ARCH_ADA, 0x26BA10DE, 4242},
    {"t4-node.yaml", "Tesla T4", 15360, 4401, 7, 5, NVML_DEVICE_ARCH_TURING, 0x1EB810DE, 4243},
};

static void test_device_fields_seed_nodes(void **state)
{
    (void)state;
    for (size_t i = 0; i < GS_ARRAY_SIZE(seed_rows); i++) {
        const struct seed_row *row = &seed_rows[i];
        char buf[96];
        int major, minor, cuda;
        unsigned arch, node, cur, pend, count = 0, minorn;
        nvmlBrandType_t brand;
        nvmlMemory_t mem;
        nvmlMemory_v2_t mem2 = {.version = nvmlMemory_v2};
        nvmlPciInfo_t pci;
        nvmlProcessInfo_t procs[2];
        nvmlGpuInstanceProfileInfo_t info;

        use_example(row->machine);
        OK(nvmlInit_v2());
        OK(nvmlSystemGetDriverVersion(buf, sizeof(buf)));
        assert_string_equal(buf, "570.158.01");
        assert_int_equal(nvmlSystemGetDriverVersion(buf, 5), NVML_ERROR_INSUFFICIENT_SIZE);
        OK(nvmlSystemGetCudaDriverVersion_v2(&cuda));
        assert_int_equal(cuda, 12080);
        OK(nvmlDeviceGetName(dev(0), buf, sizeof(buf)));
        assert_string_equal(buf, row->name);
        assert_int_equal(nvmlDeviceGetUUID(dev(0), buf, 10), NVML_ERROR_INSUFFICIENT_SIZE);
        OK(nvmlDeviceGetMemoryInfo(dev(0), &mem));
        assert_int_equal(mem.total, row->memory_mib << 20);
        assert_int_equal(mem.used, row->used_mib << 20);
        assert_int_equal(mem.free, mem.total - mem.used);
        OK(nvmlDeviceGetMemoryInfo_v2(dev(0), &mem2));
        assert_int_equal(mem2.total, row->memory_mib << 20);
        OK(nvmlDeviceGetCudaComputeCapability(dev(0), &major, &minor));
        assert_int_equal(major, row->cc_major);
        assert_int_equal(minor, row->cc_minor);
        OK(nvmlDeviceGetArchitecture(dev(0), &arch));
        assert_int_equal(arch, row->arch);
        OK(nvmlDeviceGetBrand(dev(0), &brand));
        assert_int_equal(brand, NVML_BRAND_NVIDIA);
        OK(nvmlDeviceGetPciInfo_v3(dev(0), &pci));
        assert_int_equal(pci.pciDeviceId, row->pci_device_id);
        assert_string_equal(pci.busId, "00000000:10:00.0");
        assert_string_equal(pci.busIdLegacy, "0000:10:00.0");
        OK(nvmlDeviceGetNumaNodeId(dev(0), &node));
        assert_int_equal(node, 0);
        OK(nvmlDeviceGetMinorNumber(dev(0), &minorn));
        assert_int_equal(minorn, 0);
        assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &count, NULL),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(count, 1);
        count = 2;
        OK(nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &count, procs));
        assert_int_equal(count, 1);
        assert_int_equal(procs[0].pid, row->pid);
        assert_int_equal(procs[0].usedGpuMemory, row->used_mib << 20);
        assert_int_equal(procs[0].gpuInstanceId, INVALID_GPU_INSTANCE_ID);
        /* Not MIG capable: NOT_SUPPORTED, which callers read as "no MIG". */
        assert_int_equal(nvmlDeviceGetMigMode(dev(0), &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(nvmlDeviceGetGpuInstanceProfileInfo(dev(0), 0, &info),
                         NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(nvmlDeviceSetMigMode(dev(0), 1, (nvmlReturn_t[]){0}),
                         NVML_ERROR_NOT_SUPPORTED);
        count = 9;
        OK(nvmlDeviceGetMaxMigDeviceCount(dev(0), &count));
        assert_int_equal(count, 0);
        assert_int_equal(nvmlDeviceGetNvLinkState(dev(0), 0, (nvmlEnableState_t[]){0}),
                         NVML_ERROR_NOT_SUPPORTED);
        OK(nvmlShutdown());
    }
}

static void test_unknown_model_all_fields(void **state)
{
    char name[96];
    int major, minor;
    unsigned sms_arch;
    nvmlPciInfo_t pci;
    nvmlMemory_t mem;
    (void)state;

    use_example("mixed-models.yaml");
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetName(dev(5), name, sizeof(name)));
    assert_string_equal(name, "NVIDIA RTX 6000 Ada Generation");
    OK(nvmlDeviceGetMemoryInfo(dev(5), &mem));
    assert_int_equal(mem.total, 49140ULL << 20);
    OK(nvmlDeviceGetCudaComputeCapability(dev(5), &major, &minor));
    assert_int_equal(major * 10 + minor, 89);
    OK(nvmlDeviceGetArchitecture(dev(5), &sms_arch));
    assert_int_equal(sms_arch, NVML_DEVICE_ARCH_ADA);
    OK(nvmlDeviceGetPciInfo_v3(dev(5), &pci));
    assert_int_equal(pci.pciDeviceId, 0x26B110DE);
    OK(nvmlShutdown());
}

/* unified_memory: true (GB10): both memory queries NOT_SUPPORTED, as driver 580 answers on
 * a DGX Spark; the rest of the GPU and its processes answer as usual; a catalog model can
 * take the flag, memory_mib may be left out. */
static void test_unified_memory_not_supported(void **state)
{
    nvmlMemory_t mem;
    nvmlMemory_v2_t mem2 = {.version = nvmlMemory_v2};
    nvmlProcessInfo_t procs[2];
    unsigned count = 2, mode = 0, pending = 0;
    char name[96];
    int major, minor;
    (void)state;

    use_example("gb10-spark.yaml");
    OK(nvmlInit_v2());
    assert_int_equal(nvmlDeviceGetMemoryInfo(dev(0), &mem), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetMemoryInfo_v2(dev(0), &mem2), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetMemoryInfo(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    OK(nvmlDeviceGetName(dev(0), name, sizeof(name)));
    assert_string_equal(name, "NVIDIA GB10");
    OK(nvmlDeviceGetCudaComputeCapability(dev(0), &major, &minor));
    assert_int_equal(major * 10 + minor, 121);
    assert_int_equal(nvmlDeviceGetMigMode(dev(0), &mode, &pending), NVML_ERROR_NOT_SUPPORTED);
    OK(nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &count, procs));
    assert_int_equal(count, 1);
    assert_int_equal(procs[0].usedGpuMemory, 43ULL << 20);
    OK(nvmlShutdown());

    use_yaml("gpus:\n  - model: NVIDIA L20\n    unified_memory: true\n  - model: NVIDIA L20\n");
    OK(nvmlInit_v2());
    assert_int_equal(nvmlDeviceGetMemoryInfo(dev(0), &mem), NVML_ERROR_NOT_SUPPORTED);
    OK(nvmlDeviceGetMemoryInfo(dev(1), &mem));
    assert_int_equal(mem.total, 46068ULL << 20);
    OK(nvmlShutdown());
}

static void test_topology_nvswitch_and_pairs(void **state)
{
    nvmlEnableState_t on;
    nvmlGpuTopologyLevel_t lvl;
    nvmlPciInfo_t remote, peer;
    (void)state;

    use_example("h100-nvswitch-8.yaml");
    OK(nvmlInit_v2());
    for (unsigned l = 0; l < 18; l++) {
        OK(nvmlDeviceGetNvLinkState(dev(3), l, &on));
        assert_int_equal(on, NVML_FEATURE_ENABLED);
    }
    assert_int_equal(nvmlDeviceGetNvLinkState(dev(3), 18, &on), NVML_ERROR_INVALID_ARGUMENT);
    OK(nvmlDeviceGetNvLinkRemotePciInfo_v2(dev(3), 0, &remote));
    assert_int_equal(remote.pciDeviceId, 0x22A310DE);
    OK(nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(0), &lvl));
    assert_int_equal(lvl, NVML_TOPOLOGY_INTERNAL);
    OK(nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(3), &lvl));
    assert_int_equal(lvl, NVML_TOPOLOGY_NODE);
    OK(nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(4), &lvl));
    assert_int_equal(lvl, NVML_TOPOLOGY_SYSTEM);
    OK(nvmlShutdown());

    use_example("pcie-2socket-nvlink-pairs.yaml");
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetPciInfo_v3(dev(3), &peer));
    for (unsigned l = 0; l < 12; l++) {
        OK(nvmlDeviceGetNvLinkState(dev(2), l, &on));
        assert_int_equal(on, NVML_FEATURE_ENABLED);
        OK(nvmlDeviceGetNvLinkRemotePciInfo_v2(dev(2), l, &remote));
        assert_string_equal(remote.busId, peer.busId);
    }
    assert_int_equal(nvmlDeviceGetNvLinkState(dev(2), 12, &on), NVML_ERROR_NOT_SUPPORTED);
    OK(nvmlShutdown());
}

/* ---- MIG: profiles and placements ------------------------------------------------------- */

static const char *const all_mig_models =
    "gpus:\n"
    "  - {model: NVIDIA A100-SXM4-40GB, mig: {enabled: true}}\n"
    "  - {model: NVIDIA A100-SXM4-80GB, mig: {enabled: true}}\n"
    "  - {model: NVIDIA H100 80GB HBM3, mig: {enabled: true}}\n"
    "  - {model: NVIDIA H100 PCIe, mig: {enabled: true}}\n"
    "  - {model: NVIDIA H100 NVL, mig: {enabled: true}}\n"
    "  - {model: NVIDIA H200, mig: {enabled: true}}\n"
    "  - {model: NVIDIA H20, mig: {enabled: true}}\n"
    "  - {model: NVIDIA GH200 480GB, mig: {enabled: true}}\n"
    "  - {model: NVIDIA A30, mig: {enabled: true}}\n";
#define N_EIGHT_SLICE 8
#define A30_INDEX 8

struct placement_row {
    unsigned id, size, n;
    unsigned starts[8];
};

static const struct placement_row eight_slice[] = {
    {19, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
    {20, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
    {15, 2, 4, {0, 2, 4, 6}},
    {14, 2, 3, {0, 2, 4}},
    {9, 4, 2, {0, 4}},
    {5, 4, 1, {0}},
    {0, 8, 1, {0}},
};

static const struct placement_row a30_rows[] = {
    {14, 1, 4, {0, 1, 2, 3}}, {21, 1, 4, {0, 1, 2, 3}}, {5, 2, 2, {0, 2}},
    {6, 2, 2, {0, 2}},        {0, 4, 1, {0}},
};

static void check_placements(nvmlDevice_t d, const struct placement_row *rows, size_t n_rows)
{
    for (size_t r = 0; r < n_rows; r++) {
        nvmlGpuInstancePlacement_t pl[8];
        unsigned count = 0;
        OK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, rows[r].id, NULL, &count));
        assert_int_equal(count, rows[r].n);
        count = 1;
        if (rows[r].n > 1)
            assert_int_equal(
                nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, rows[r].id, pl, &count),
                NVML_ERROR_INSUFFICIENT_SIZE);
        count = 8;
        OK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, rows[r].id, pl, &count));
        assert_int_equal(count, rows[r].n);
        for (unsigned i = 0; i < count; i++) {
            assert_int_equal(pl[i].start, rows[r].starts[i]);
            assert_int_equal(pl[i].size, rows[r].size);
        }
    }
}

static void test_possible_placements_per_model(void **state)
{
    unsigned count = 0;
    (void)state;

    use_yaml(all_mig_models);
    OK(nvmlInit_v2());
    for (unsigned g = 0; g < N_EIGHT_SLICE; g++)
        check_placements(dev(g), eight_slice, GS_ARRAY_SIZE(eight_slice));
    check_placements(dev(A30_INDEX), a30_rows, GS_ARRAY_SIZE(a30_rows));
    /* ID 9 (3g) does not exist on an A30. */
    assert_int_equal(nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev(A30_INDEX), 9, NULL, &count),
                     NVML_ERROR_INVALID_ARGUMENT);
    OK(nvmlShutdown());
}

#define PROFILE_COUNT_NVML_12_8 0xD /* NVML_GPU_INSTANCE_PROFILE_COUNT in NVML 12.8 (facts A.2) */

/* go-nvlib's formula, written again here so the catalog is checked independently. */
static unsigned name_gb(unsigned long long mem_mib, unsigned long long total_mib)
{
    unsigned long long eighths = (mem_mib * 8 + total_mib - 1) / total_mib;
    unsigned long long total_gib = (total_mib + 1023) / 1024;
    return (unsigned)((eighths * total_gib * 2 + 8) / 16); /* round(eighths/8 * gib) */
}

static void test_profile_info_names_match_go_nvlib_formula(void **state)
{
    (void)state;
    use_yaml(all_mig_models);
    OK(nvmlInit_v2());
    for (unsigned g = 0; g <= A30_INDEX; g++) {
        nvmlMemory_t mem;
        unsigned seen = 0;
        OK(nvmlDeviceGetMemoryInfo(dev(g), &mem));
        for (unsigned idx = 0; idx < NVML_GPU_INSTANCE_PROFILE_COUNT + 1; idx++) {
            nvmlGpuInstanceProfileInfo_v2_t v2 = {.version = nvmlGpuInstanceProfileInfo_v2};
            nvmlGpuInstanceProfileInfo_t v1;
            char want[32];
            nvmlReturn_t rc = nvmlDeviceGetGpuInstanceProfileInfoV(dev(g), idx, &v2);
            /* the machine's default CUDA 12.8 stands for NVML 12.8: 0xD profile indexes */
            if (idx >= PROFILE_COUNT_NVML_12_8) {
                assert_int_equal(rc, NVML_ERROR_INVALID_ARGUMENT);
                continue;
            }
            if (rc == NVML_ERROR_NOT_SUPPORTED)
                continue;
            OK(rc);
            OK(nvmlDeviceGetGpuInstanceProfileInfo(dev(g), idx, &v1));
            assert_int_equal(v1.id, v2.id);
            {
                nvmlGpuInstanceProfileInfo_v2_t by_id = {.version = nvmlGpuInstanceProfileInfo_v2};
                OK(nvmlDeviceGetGpuInstanceProfileInfoByIdV(dev(g), v2.id, &by_id));
                assert_string_equal(by_id.name, v2.name);
            }
            assert_int_equal(v1.memorySizeMB, v2.memorySizeMB);
            snprintf(want, sizeof(want), ".%ugb", name_gb(v2.memorySizeMB, mem.total >> 20));
            assert_non_null(strstr(v2.name, want));
            assert_true(str_startswith(v2.name, "MIG "));
            seen++;
        }
        assert_int_equal(seen, g == A30_INDEX ? 5 : 7);
    }
    OK(nvmlShutdown());
}

/* ---- MIG: GPU instances ------------------------------------------------------------------ */

struct create_row {
    unsigned id, start, size;
    nvmlReturn_t want;
};

static void test_create_with_placement_rules(void **state)
{
    static const struct create_row rows[] = {
        {9, 4, 4, NVML_SUCCESS},
        {9, 4, 4, NVML_ERROR_INSUFFICIENT_RESOURCES},  /* taken */
        {9, 2, 4, NVML_ERROR_INVALID_ARGUMENT},        /* not a 3g start */
        {9, 0, 2, NVML_ERROR_INVALID_ARGUMENT},        /* wrong size */
        {19, 7, 1, NVML_ERROR_INVALID_ARGUMENT},       /* slot 7 is never a 1g start */
        {19, 5, 1, NVML_ERROR_INSUFFICIENT_RESOURCES}, /* overlaps 3g@4 */
        {14, 0, 2, NVML_SUCCESS},
        {15, 2, 2, NVML_SUCCESS},
        {15, 2, 2, NVML_ERROR_INSUFFICIENT_RESOURCES},
        {0, 0, 8, NVML_ERROR_INSUFFICIENT_RESOURCES},
        {77, 0, 1, NVML_ERROR_INVALID_ARGUMENT}, /* no such profile */
    };
    unsigned left = 9;
    (void)state;

    use_yaml(all_mig_models);
    OK(nvmlInit_v2());
    for (size_t i = 0; i < GS_ARRAY_SIZE(rows); i++) {
        nvmlGpuInstancePlacement_t pl = {rows[i].start, rows[i].size};
        nvmlGpuInstance_t gi = NULL;
        assert_int_equal(nvmlDeviceCreateGpuInstanceWithPlacement(dev(1), rows[i].id, &pl, &gi),
                         rows[i].want);
        if (rows[i].want == NVML_SUCCESS) {
            nvmlGpuInstanceInfo_t info;
            OK(nvmlGpuInstanceGetInfo(gi, &info));
            assert_int_equal(info.placement.start, rows[i].start);
            assert_int_equal(info.placement.size, rows[i].size);
            assert_int_equal(info.profileId, rows[i].id);
            assert_ptr_equal(info.device, dev(1));
        }
    }
    OK(nvmlDeviceGetGpuInstanceRemainingCapacity(dev(1), 19, &left));
    assert_int_equal(left, 0);
    OK(nvmlShutdown());
}

/* Every profile at every start 0..7 on a fresh GPU: created exactly at the listed starts. */
static void test_create_each_start_per_model(void **state)
{
    (void)state;
    use_yaml(all_mig_models);
    OK(nvmlInit_v2());
    for (unsigned g = 0; g <= A30_INDEX; g++) {
        const struct placement_row *rows = g == A30_INDEX ? a30_rows : eight_slice;
        size_t n_rows = g == A30_INDEX ? GS_ARRAY_SIZE(a30_rows) : GS_ARRAY_SIZE(eight_slice);
        for (size_t r = 0; r < n_rows; r++)
            for (unsigned start = 0; start < 8; start++) {
                nvmlGpuInstancePlacement_t pl = {start, rows[r].size};
                nvmlGpuInstance_t gi;
                bool listed = false;
                for (unsigned k = 0; k < rows[r].n; k++)
                    listed = listed || rows[r].starts[k] == start;
                assert_int_equal(
                    nvmlDeviceCreateGpuInstanceWithPlacement(dev(g), rows[r].id, &pl, &gi),
                    listed ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT);
                if (listed)
                    OK(nvmlGpuInstanceDestroy(gi));
            }
    }
    OK(nvmlShutdown());
}

/* Counts maximal non-overlapping layouts through the API (facts A.5 enumerates them). */
struct layouts {
    nvmlDevice_t d;
    const unsigned *ids;
    size_t n_ids;
    unsigned count;         /* maximal layouts */
    char multisets[64][32]; /* distinct profile multisets */
    unsigned n_multisets;
    unsigned used[8]; /* instances per profile in the current layout */
};

static bool layout_full(struct layouts *L)
{
    for (size_t i = 0; i < L->n_ids; i++) {
        unsigned left = 0;
        OK(nvmlDeviceGetGpuInstanceRemainingCapacity(L->d, L->ids[i], &left));
        if (left > 0)
            return false;
    }
    return true;
}

static void layout_dfs(struct layouts *L, unsigned min_key)
{
    bool extended = false;

    for (unsigned start = 0; start < 8; start++)
        for (size_t i = 0; i < L->n_ids; i++) {
            unsigned key = start * 8 + (unsigned)i + 1, size = 0, n_pls = 8;
            nvmlGpuInstancePlacement_t pl, pls[8];
            nvmlGpuInstance_t gi;
            if (key <= min_key)
                continue;
            /* the placement size is in memory slices: take it from the placements, not
             * from the profile's sliceCount (compute slices) */
            if (nvmlDeviceGetGpuInstancePossiblePlacements_v2(L->d, L->ids[i], pls, &n_pls) !=
                NVML_SUCCESS)
                continue;
            for (unsigned k = 0; k < n_pls; k++)
                if (pls[k].start == start)
                    size = pls[k].size;
            if (!size)
                continue;
            pl = (nvmlGpuInstancePlacement_t){start, size};
            if (nvmlDeviceCreateGpuInstanceWithPlacement(L->d, L->ids[i], &pl, &gi) != NVML_SUCCESS)
                continue;
            extended = true;
            L->used[i]++;
            layout_dfs(L, key);
            L->used[i]--;
            OK(nvmlGpuInstanceDestroy(gi));
        }
    if (!extended && layout_full(L)) {
        char ms[32] = "";
        size_t k;
        L->count++;
        for (size_t i = 0; i < L->n_ids; i++)
            snprintf(ms + strlen(ms), sizeof(ms) - strlen(ms), "%u,", L->used[i]);
        for (k = 0; k < L->n_multisets && strcmp(L->multisets[k], ms) != 0; k++)
            ;
        if (k == L->n_multisets && k < GS_ARRAY_SIZE(L->multisets))
            str_copy(L->multisets[L->n_multisets++], ms, sizeof(ms));
    }
}

static void test_maximal_layouts_match_the_facts(void **state)
{
    static const unsigned a100_five[] = {19, 14, 9, 5, 0};
    static const unsigned a100_six[] = {19, 15, 14, 9, 5, 0};
    static const unsigned a30_three[] = {14, 5, 0};
    static const struct {
        unsigned gpu;
        const unsigned *ids;
        size_t n_ids;
        unsigned layouts, multisets;
    } rows[] = {
        {0, a100_five, GS_ARRAY_SIZE(a100_five), 19, 14},
        {0, a100_six, GS_ARRAY_SIZE(a100_six), 78, 38},
        {A30_INDEX, a30_three, GS_ARRAY_SIZE(a30_three), 5, 4}, /* 2g+1g+1g twice */
    };
    (void)state;

    use_yaml(all_mig_models);
    OK(nvmlInit_v2());
    for (size_t r = 0; r < GS_ARRAY_SIZE(rows); r++) {
        struct layouts L = {.d = dev(rows[r].gpu), .ids = rows[r].ids, .n_ids = rows[r].n_ids};
        layout_dfs(&L, 0);
        assert_int_equal(L.count, rows[r].layouts);
        assert_int_equal(L.n_multisets, rows[r].multisets);
        assert_int_equal(mig_count(L.d), 0);
    }
    OK(nvmlShutdown());
}

struct capacity_row {
    unsigned id, fresh, after_3g_at_4;
};

static void test_remaining_capacity(void **state)
{
    static const struct capacity_row rows[] = {
        {19, 7, 4}, {20, 1, 1}, {15, 4, 2}, {14, 3, 2}, {9, 2, 1}, {5, 1, 1}, {0, 1, 0},
    };
    nvmlGpuInstancePlacement_t pl = {4, 4};
    nvmlGpuInstance_t gi;
    unsigned n;
    (void)state;

    use_yaml(all_mig_models);
    OK(nvmlInit_v2());
    for (size_t i = 0; i < GS_ARRAY_SIZE(rows); i++) {
        OK(nvmlDeviceGetGpuInstanceRemainingCapacity(dev(2), rows[i].id, &n));
        assert_int_equal(n, rows[i].fresh);
    }
    OK(nvmlDeviceCreateGpuInstanceWithPlacement(dev(2), 9, &pl, &gi));
    for (size_t i = 0; i < GS_ARRAY_SIZE(rows); i++) {
        OK(nvmlDeviceGetGpuInstanceRemainingCapacity(dev(2), rows[i].id, &n));
        assert_int_equal(n, rows[i].after_3g_at_4);
    }
    OK(nvmlShutdown());
}

static void test_create_auto_order_matters_like_the_driver(void **state)
{
    static const unsigned bad[] = {19, 19, 14, 9}, good[] = {9, 19, 14, 19};
    nvmlGpuInstance_t gis[4];
    (void)state;

    use_yaml(all_mig_models);
    OK(nvmlInit_v2());
    /* The MIG guide's known issue: "-cgi 19,19,14,9" fails, "-cgi 9,19,14,19" works. */
    for (size_t i = 0; i < 3; i++)
        OK(nvmlDeviceCreateGpuInstance(dev(0), bad[i], &gis[i]));
    assert_int_equal(nvmlDeviceCreateGpuInstance(dev(0), bad[3], &gis[3]),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    for (size_t i = 0; i < 3; i++)
        OK(nvmlGpuInstanceDestroy(gis[i]));
    for (size_t i = 0; i < 4; i++)
        OK(nvmlDeviceCreateGpuInstance(dev(0), good[i], &gis[i]));
    /* +me allows one instance even with slices free. */
    OK(nvmlDeviceCreateGpuInstance(dev(3), 20, &gis[0]));
    assert_int_equal(nvmlDeviceCreateGpuInstance(dev(3), 20, &gis[1]),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    OK(nvmlShutdown());
}

static void test_get_gpu_instances_and_by_id(void **state)
{
    nvmlGpuInstance_t gis[8], by_id;
    unsigned count = 7;
    (void)state;

    use_example("a100-80gb-all-balanced.yaml");
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetGpuInstances(dev(0), 0, gis, &count)); /* none: SUCCESS with 0 */
    assert_int_equal(count, 0);
    count = 1;
    assert_int_equal(nvmlDeviceGetGpuInstances(dev(0), 19, gis, &count),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(count, 2);
    count = 7;
    OK(nvmlDeviceGetGpuInstances(dev(0), 19, gis, &count));
    assert_int_equal(count, 2);
    OK(nvmlDeviceGetGpuInstanceById(dev(0), 1, &by_id));
    assert_int_equal(nvmlDeviceGetGpuInstanceById(dev(0), 6, &by_id), NVML_ERROR_NOT_FOUND);
    OK(nvmlShutdown());
}

/* ---- MIG: compute instances and MIG devices --------------------------------------------- */

static void test_compute_instances_in_7g(void **state)
{
    static const nvmlReturn_t profile_rc[] = {
        NVML_SUCCESS,
        NVML_SUCCESS,
        NVML_SUCCESS,
        NVML_SUCCESS,
        NVML_SUCCESS,
        NVML_ERROR_NOT_SUPPORTED,
        NVML_ERROR_NOT_SUPPORTED,
        NVML_ERROR_NOT_SUPPORTED,
        NVML_ERROR_NOT_SUPPORTED,
        NVML_ERROR_INVALID_ARGUMENT,
    };
    static const unsigned instances[] = {7, 3, 2, 1, 1};
    nvmlGpuInstancePlacement_t pl = {0, 8};
    nvmlComputeInstancePlacement_t cpl;
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t cis[6];
    nvmlComputeInstanceProfileInfo_t info;
    nvmlComputeInstanceInfo_t cinfo;
    nvmlDevice_t mig;
    char name[96];
    unsigned n;
    (void)state;

    use_yaml(all_mig_models);
    OK(nvmlInit_v2());
    OK(nvmlDeviceCreateGpuInstanceWithPlacement(dev(1), 0, &pl, &gi));
    for (unsigned p = 0; p < GS_ARRAY_SIZE(profile_rc); p++) {
        assert_int_equal(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, p, 0, &info),
                         profile_rc[p]);
        if (profile_rc[p] == NVML_SUCCESS)
            assert_int_equal(info.instanceCount, instances[p]);
    }
    assert_int_equal(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 1, &info),
                     NVML_ERROR_INVALID_ARGUMENT);
    OK(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 0, &info));
    assert_int_equal(info.multiprocessorCount, 14);
    {
        nvmlComputeInstancePlacement_t cp[8];
        unsigned cn = 8;
        OK(nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, 2, cp, &cn)); /* 3c */
        assert_int_equal(cn, 2);
        assert_int_equal(cp[0].start, 0);
        assert_int_equal(cp[1].start, 4);
        assert_int_equal(cp[1].size, 3);
        cn = 0;
        OK(nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, 1, NULL, &cn)); /* 2c */
        assert_int_equal(cn, 3);
    }
    OK(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 4, 0, &info));
    assert_int_equal(info.multiprocessorCount, 98);
    for (int i = 0; i < 3; i++)
        OK(nvmlGpuInstanceCreateComputeInstance(gi, 1, &cis[i])); /* 2c at 0, 2, 4 */
    assert_int_equal(nvmlGpuInstanceCreateComputeInstance(gi, 1, &cis[3]),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    OK(nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 0, &n));
    assert_int_equal(n, 1);
    cpl = (nvmlComputeInstancePlacement_t){1, 2};
    assert_int_equal(nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, 1, &cpl, &cis[3]),
                     NVML_ERROR_INVALID_ARGUMENT);
    cpl = (nvmlComputeInstancePlacement_t){6, 1};
    OK(nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, 0, &cpl, &cis[3]));
    assert_int_equal(nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, 0, &cpl, &cis[4]),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    OK(nvmlComputeInstanceGetInfo_v2(cis[1], &cinfo));
    assert_int_equal(cinfo.placement.start, 2);
    assert_int_equal(cinfo.placement.size, 2);
    assert_int_equal(cinfo.id, 1);
    assert_ptr_equal(cinfo.gpuInstance, gi);
    assert_int_equal(mig_count(dev(1)), 4);
    OK(nvmlDeviceGetMigDeviceHandleByIndex(dev(1), 3, &mig));
    OK(nvmlDeviceGetName(mig, name, sizeof(name)));
    assert_string_equal(name, "NVIDIA A100-SXM4-80GB MIG 1c.7g.80gb");
    OK(nvmlDeviceGetMigDeviceHandleByIndex(dev(1), 0, &mig));
    OK(nvmlDeviceGetName(mig, name, sizeof(name)));
    assert_string_equal(name, "NVIDIA A100-SXM4-80GB MIG 2c.7g.80gb");
    /* Destroy order: a GI with compute instances is IN_USE. */
    assert_int_equal(nvmlGpuInstanceDestroy(gi), NVML_ERROR_IN_USE);
    for (int i = 0; i < 4; i++)
        OK(nvmlComputeInstanceDestroy(cis[i]));
    n = 5;
    OK(nvmlGpuInstanceGetComputeInstances(gi, 1, cis, &n));
    assert_int_equal(n, 0);
    OK(nvmlGpuInstanceDestroy(gi));
    assert_int_equal(nvmlGpuInstanceGetInfo(gi, &(nvmlGpuInstanceInfo_t){0}),
                     NVML_ERROR_INVALID_ARGUMENT);
    OK(nvmlShutdown());
}

static void test_compute_instance_in_double_memory_1g(void **state)
{
    nvmlGpuInstancePlacement_t pl = {2, 2};
    nvmlComputeInstanceProfileInfo_t info;
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    nvmlDevice_t mig;
    char name[96];
    (void)state;

    use_yaml(all_mig_models);
    OK(nvmlInit_v2());
    OK(nvmlDeviceCreateGpuInstanceWithPlacement(dev(2), 15, &pl, &gi));
    /* 1_SLICE (mig-parted asks for it) and 1_SLICE_REV1 (nvidia-smi -C), one shape */
    for (unsigned profile = 0; profile <= 7; profile += 7) {
        OK(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, profile, 0, &info));
        assert_int_equal(info.id, profile);
        assert_int_equal(info.sliceCount, 1);
        assert_int_equal(info.instanceCount, 1);
        assert_int_equal(info.multiprocessorCount, 26);
    }
    assert_int_equal(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 1, 0, &info),
                     NVML_ERROR_NOT_SUPPORTED);
    OK(nvmlGpuInstanceCreateComputeInstance(gi, 7, &ci));
    /* one compute slice: the other profile no longer fits */
    assert_int_equal(nvmlGpuInstanceCreateComputeInstance(gi, 0, &ci),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    OK(nvmlDeviceGetMigDeviceHandleByIndex(dev(2), 0, &mig));
    OK(nvmlDeviceGetName(mig, name, sizeof(name)));
    assert_string_equal(name, "NVIDIA H100 80GB HBM3 MIG 1g.20gb");
    /* profile 0 on a second 1g.20gb: the same MIG device */
    pl.start = 4;
    OK(nvmlDeviceCreateGpuInstanceWithPlacement(dev(2), 15, &pl, &gi));
    OK(nvmlGpuInstanceCreateComputeInstance(gi, 0, &ci));
    OK(nvmlDeviceGetMigDeviceHandleByIndex(dev(2), 1, &mig));
    OK(nvmlDeviceGetName(mig, name, sizeof(name)));
    assert_string_equal(name, "NVIDIA H100 80GB HBM3 MIG 1g.20gb");
    OK(nvmlShutdown());
}

struct migdev_row {
    const char *profile;
    unsigned gi_id, mem_mib;
};

static void test_mig_devices_all_balanced(void **state)
{
    static const struct migdev_row rows[] = {
        {"2g.20gb", 2, 19968},
        {"1g.10gb", 3, 9728},
        {"1g.10gb", 4, 9728},
        {"3g.40gb", 1, 40192},
    };
    unsigned max = 0, v;
    (void)state;

    use_example("a100-80gb-all-balanced.yaml");
    OK(nvmlInit_v2());
    for (unsigned g = 0; g < 4; g++) {
        unsigned cur = 0, pend = 0;
        OK(nvmlDeviceGetMigMode(dev(g), &cur, &pend));
        assert_int_equal(cur, 1);
        assert_int_equal(pend, 1);
        OK(nvmlDeviceGetMaxMigDeviceCount(dev(g), &max));
        assert_int_equal(max, 7);
        for (unsigned i = 0; i < GS_ARRAY_SIZE(rows); i++) {
            char name[96], want[96], uuid[96];
            nvmlDevice_t mig, back, parent;
            nvmlMemory_t mem;
            OK(nvmlDeviceGetMigDeviceHandleByIndex(dev(g), i, &mig));
            OK(nvmlDeviceGetName(mig, name, sizeof(name)));
            snprintf(want, sizeof(want), "NVIDIA A100-SXM4-80GB MIG %s", rows[i].profile);
            assert_string_equal(name, want);
            OK(nvmlDeviceGetMemoryInfo(mig, &mem));
            assert_int_equal(mem.total, (unsigned long long)rows[i].mem_mib << 20);
            OK(nvmlDeviceGetGpuInstanceId(mig, &v));
            assert_int_equal(v, rows[i].gi_id);
            OK(nvmlDeviceGetComputeInstanceId(mig, &v));
            assert_int_equal(v, 0);
            OK(nvmlDeviceIsMigDeviceHandle(mig, &v));
            assert_int_equal(v, 1);
            OK(nvmlDeviceGetIndex(mig, &v));
            assert_int_equal(v, i);
            OK(nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)));
            assert_true(str_startswith(uuid, "MIG-"));
            assert_int_equal(strlen(uuid), 40);
            OK(nvmlDeviceGetHandleByUUID(uuid, &back));
            assert_ptr_equal(back, mig);
            OK(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &parent));
            assert_ptr_equal(parent, dev(g));
        }
        assert_int_equal(nvmlDeviceGetMigDeviceHandleByIndex(dev(g), 4, &(nvmlDevice_t){0}),
                         NVML_ERROR_NOT_FOUND);
        assert_int_equal(nvmlDeviceGetMigDeviceHandleByIndex(dev(g), 7, &(nvmlDevice_t){0}),
                         NVML_ERROR_INVALID_ARGUMENT);
        OK(nvmlDeviceIsMigDeviceHandle(dev(g), &v));
        assert_int_equal(v, 0);
        assert_int_equal(nvmlDeviceGetGpuInstanceId(dev(g), &v), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(nvmlDeviceGetUtilizationRates(dev(g), &(nvmlUtilization_t){0}),
                         NVML_ERROR_NOT_SUPPORTED);
    }
    OK(nvmlShutdown());
}

static void test_mig_processes_block_destroy(void **state)
{
    nvmlDevice_t mig;
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    nvmlMemory_t mem;
    unsigned n = 4;
    nvmlProcessInfo_t procs[4];
    (void)state;

    use_example("mixed-models.yaml");
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetMigDeviceHandleByIndex(dev(0), 0, &mig)); /* 4g.20gb, GI 1 */
    OK(nvmlDeviceGetMemoryInfo(mig, &mem));
    assert_int_equal(mem.used, 2048ULL << 20);
    OK(nvmlDeviceGetComputeRunningProcesses_v3(mig, &n, procs));
    assert_int_equal(n, 1);
    assert_int_equal(procs[0].gpuInstanceId, 1);
    OK(nvmlDeviceGetGpuInstanceById(dev(0), 1, &gi));
    OK(nvmlGpuInstanceGetComputeInstanceById(gi, 0, &ci));
    assert_int_equal(nvmlComputeInstanceDestroy(ci), NVML_ERROR_IN_USE);
    assert_int_equal(nvmlGpuInstanceDestroy(gi), NVML_ERROR_IN_USE);
    OK(nvmlShutdown());
}

static void test_mig_mode_changes(void **state)
{
    nvmlReturn_t status = NVML_ERROR_UNKNOWN;
    nvmlGpuInstance_t gi;
    unsigned cur = 9, pend = 9, count = 0;
    (void)state;

    use_example("mixed-models.yaml");
    OK(nvmlInit_v2());
    /* The A30 is MIG capable but off: placements are listed, nothing can be created. */
    OK(nvmlDeviceGetMigMode(dev(1), &cur, &pend));
    assert_int_equal(cur, 0);
    assert_int_equal(pend, 0);
    OK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev(1), 14, NULL, &count));
    assert_int_equal(count, 4);
    assert_int_equal(nvmlDeviceCreateGpuInstance(dev(1), 14, &gi), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetGpuInstanceRemainingCapacity(dev(1), 14, &count),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceSetMigMode(dev(1), 2, &status), NVML_ERROR_INVALID_ARGUMENT);
    OK(nvmlDeviceSetMigMode(dev(1), NVML_DEVICE_MIG_ENABLE, &status));
    assert_int_equal(status, NVML_SUCCESS);
    OK(nvmlDeviceGetMigMode(dev(1), &cur, &pend));
    assert_int_equal(cur, 1);
    assert_int_equal(pend, 1);
    OK(nvmlDeviceCreateGpuInstance(dev(1), 14, &gi));
    /* Disabling drops every instance. */
    OK(nvmlDeviceSetMigMode(dev(1), NVML_DEVICE_MIG_DISABLE, &status));
    OK(nvmlDeviceSetMigMode(dev(1), NVML_DEVICE_MIG_ENABLE, &status));
    assert_int_equal(mig_count(dev(1)), 0);
    OK(nvmlShutdown());

    /* A GPU busy outside MIG keeps the change pending. */
    use_yaml("gpus:\n  - model: NVIDIA A100-SXM4-40GB\n    processes: [{pid: 7, used_mib: 1}]\n");
    OK(nvmlInit_v2());
    OK(nvmlDeviceSetMigMode(dev(0), NVML_DEVICE_MIG_ENABLE, &status));
    assert_int_equal(status, NVML_ERROR_IN_USE);
    OK(nvmlDeviceGetMigMode(dev(0), &cur, &pend));
    assert_int_equal(cur, 0);
    assert_int_equal(pend, 1);
    OK(nvmlShutdown());
}

/* ---- state ------------------------------------------------------------------------------- */

static void destroy_gi(nvmlDevice_t d, unsigned gi_id)
{
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    OK(nvmlDeviceGetGpuInstanceById(d, gi_id, &gi));
    OK(nvmlGpuInstanceGetComputeInstanceById(gi, 0, &ci));
    OK(nvmlComputeInstanceDestroy(ci));
    OK(nvmlGpuInstanceDestroy(gi));
}

static void test_state_persists_across_init_cycles(void **state)
{
    (void)state;
    use_example("a100-80gb-all-balanced.yaml");
    OK(nvmlInit_v2());
    destroy_gi(dev(0), 4);
    assert_int_equal(mig_count(dev(0)), 3);
    OK(nvmlShutdown());
    OK(nvmlInit_v2());
    assert_int_equal(mig_count(dev(0)), 3);
    assert_int_equal(mig_count(dev(1)), 4);
    OK(nvmlShutdown());
}

static void test_state_saved_even_without_the_lock_file(void **state)
{
    char lock[600];
    (void)state;

    use_example("a100-80gb-all-balanced.yaml");
    snprintf(lock, sizeof(lock), "%s.lock", getenv("FAKE_NVML_STATE"));
    assert_int_equal(mkdir(lock, 0755), 0); /* open() of the lock file now fails */
    OK(nvmlInit_v2());
    destroy_gi(dev(1), 2);
    OK(nvmlShutdown());
    OK(nvmlInit_v2());
    assert_int_equal(mig_count(dev(1)), 3);
    OK(nvmlShutdown());
}

static void test_state_seen_by_another_process(void **state)
{
    pid_t pid;
    int status = -1;
    nvmlReturn_t mode_status;
    (void)state;

    use_example("a100-80gb-all-balanced.yaml");
    OK(nvmlInit_v2());
    assert_int_equal(mig_count(dev(2)), 4);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* The child starts as a separate NVML user (refcount inherited: shut it down). */
        nvmlShutdown();
        if (nvmlInit_v2() != NVML_SUCCESS)
            _exit(1);
        nvmlDevice_t d;
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        if (nvmlDeviceGetHandleByIndex_v2(2, &d) || nvmlDeviceGetGpuInstanceById(d, 1, &gi) ||
            nvmlGpuInstanceGetComputeInstanceById(gi, 0, &ci) || nvmlComputeInstanceDestroy(ci) ||
            nvmlGpuInstanceDestroy(gi) || nvmlDeviceGetHandleByIndex_v2(3, &d) ||
            nvmlDeviceSetMigMode(d, NVML_DEVICE_MIG_DISABLE, &mode_status))
            _exit(2);
        nvmlShutdown();
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* Still the same init in this process: the change is picked up from the state file. */
    assert_int_equal(mig_count(dev(2)), 3);
    assert_int_equal(mig_count(dev(3)), 0);
    assert_int_equal(mig_count(dev(1)), 4);
    OK(nvmlShutdown());
}

static void test_state_file_foreign_or_damaged_is_ignored(void **state)
{
    const char *st;
    (void)state;

    /* Written for another machine file: ignored, the machine file's layout is used. */
    use_example("a100-80gb-all-balanced.yaml");
    st = getenv("FAKE_NVML_STATE");
    write_text(st, "fake-nvml-state 1 0123456789abcdef\ngpu 0 0 0\n", "w");
    OK(nvmlInit_v2());
    assert_int_equal(mig_count(dev(0)), 4);
    destroy_gi(dev(0), 1); /* ... and overwritten by the next change */
    OK(nvmlShutdown());
    OK(nvmlInit_v2());
    assert_int_equal(mig_count(dev(0)), 3);
    OK(nvmlShutdown());

    /* Damaged: a line that names a profile the GPU lacks. Nothing of it is applied. */
    use_example("a100-80gb-all-balanced.yaml");
    st = getenv("FAKE_NVML_STATE");
    OK(nvmlInit_v2());
    destroy_gi(dev(0), 1);
    OK(nvmlShutdown());
    write_text(st, "gi 0 5 77 0\n", "a");
    OK(nvmlInit_v2());
    assert_int_equal(mig_count(dev(0)), 4);
    OK(nvmlShutdown());
}

/* ---- events ------------------------------------------------------------------------------ */

struct appender {
    const char *path, *line;
    unsigned delay_ms;
};

static void *append_later(void *arg)
{
    const struct appender *a = arg;
    struct timespec ts = {0, (long)a->delay_ms * 1000000L};
    nanosleep(&ts, NULL); /* the stimulus must land while Wait is blocked */
    write_text(a->path, a->line, "a");
    return NULL;
}

static void test_events_delivered_once_and_fast(void **state)
{
    char events[512], line[160], uuid[96];
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    pthread_t th;
    uint64_t t0, waited_ms;
    struct appender ap;
    (void)state;

    use_example("a100-80gb-all-balanced.yaml");
    path_in_tmp(events, sizeof(events), "events");
    write_text(events, "xid 0 13\n", "w"); /* before the set exists: never delivered */
    setenv("FAKE_NVML_EVENTS", events, 1);
    OK(nvmlInit_v2());
    OK(nvmlEventSetCreate(&set));
    OK(nvmlDeviceRegisterEvents(dev(0), nvmlEventTypeXidCriticalError, set));
    OK(nvmlDeviceRegisterEvents(dev(1), nvmlEventTypeXidCriticalError, set));
    assert_int_equal(nvmlDeviceRegisterEvents(dev(1), 1ULL << 40, set), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlEventSetWait_v2(set, &ev, 0), NVML_ERROR_TIMEOUT);

    write_text(events, "xid 1 79\n", "a");
    OK(nvmlEventSetWait_v2(set, &ev, 1000));
    assert_ptr_equal(ev.device, dev(1));
    assert_int_equal(ev.eventType, nvmlEventTypeXidCriticalError);
    assert_int_equal(ev.eventData, 79);
    assert_int_equal(ev.gpuInstanceId, INVALID_GPU_INSTANCE_ID);
    assert_int_equal(nvmlEventSetWait_v2(set, &ev, 20), NVML_ERROR_TIMEOUT); /* once */

    /* By UUID, an unregistered GPU (skipped), garbage (skipped), then a MIG device. */
    OK(nvmlDeviceGetUUID(dev(0), uuid, sizeof(uuid)));
    snprintf(line, sizeof(line), "xid 3 31\nnot an event\nxid %s 48\nxid 0 94 1 0\n", uuid);
    write_text(events, line, "a");
    OK(nvmlEventSetWait_v2(set, &ev, 1000));
    assert_ptr_equal(ev.device, dev(0));
    assert_int_equal(ev.eventData, 48);
    OK(nvmlEventSetWait_v2(set, &ev, 1000));
    assert_int_equal(ev.eventData, 94);
    assert_int_equal(ev.gpuInstanceId, 1);
    assert_int_equal(ev.computeInstanceId, 0);

    /* While Wait blocks: woken within milliseconds, not at the timeout. */
    ap = (struct appender){events, "xid 1 63\n", 30};
    assert_int_equal(pthread_create(&th, NULL, append_later, &ap), 0);
    t0 = time_now_ms();
    OK(nvmlEventSetWait_v2(set, &ev, 5000));
    waited_ms = time_now_ms() - t0;
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(ev.eventData, 63);
    assert_true(waited_ms < 1000);
    print_message("event latency: waited %llu ms for an event appended after 30 ms\n",
                  (unsigned long long)waited_ms);
    OK(nvmlEventSetFree(set));
    OK(nvmlShutdown());
}

/* Voluntary context switches of the calling thread: how often it went to sleep. */
static long thread_sleeps(void)
{
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_THREAD, &ru), 0);
    return ru.ru_nvcsw;
}

/* An event set following <tmp>/<name>/events (made empty, alone in its directory: no other
 * file changes there), with GPU 0 registered for XIDs. */
static void set_in_own_dir(const char *name, char *dir, size_t n_dir, char *events, size_t n_events,
                           nvmlEventSet_t *ret_set)
{
    use_example("a100-80gb-all-balanced.yaml");
    path_in_tmp(dir, n_dir, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(events, n_events, "%s/events", dir);
    write_text(events, "", "w");
    setenv("FAKE_NVML_EVENTS", events, 1);
    OK(nvmlInit_v2());
    OK(nvmlEventSetCreate(ret_set));
    OK(nvmlDeviceRegisterEvents(dev(0), nvmlEventTypeXidCriticalError, *ret_set));
}

/* The real nvmlEventSetWait blocks in the driver: an idle wait sleeps once, to its timeout,
 * however long it is (it used to look at the file every second: issue 28's idle cost). */
static void test_idle_wait_sleeps_once_to_its_timeout(void **state)
{
    char dir[512], events[600];
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    uint64_t t0, waited_ms;
    long sleeps;
    (void)state;

    set_in_own_dir("idle-events", dir, sizeof(dir), events, sizeof(events), &set);
    sleeps = thread_sleeps();
    t0 = time_now_ms();
    assert_int_equal(nvmlEventSetWait_v2(set, &ev, 3500), NVML_ERROR_TIMEOUT);
    waited_ms = time_now_ms() - t0;
    sleeps = thread_sleeps() - sleeps;
    print_message("idle wait of 3500 ms: %llu ms, %ld sleep(s)\n", (unsigned long long)waited_ms,
                  sleeps);
    assert_true(waited_ms >= 3500);
    /* one sleep; a second allowed for a page fault on a loaded machine; the old wait slept 4 */
    assert_true(sleeps <= 2);
    OK(nvmlEventSetFree(set));
    OK(nvmlShutdown());
}

/* The events file's directory removed and made again (a test's temp tree): the set watches
 * the new one, and a line written there is still delivered at once. */
static void test_events_followed_after_the_directory_is_replaced(void **state)
{
    char dir[512], events[600];
    struct appender ap;
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    pthread_t th;
    uint64_t t0, waited_ms;
    (void)state;

    set_in_own_dir("replaced-events", dir, sizeof(dir), events, sizeof(events), &set);
    assert_int_equal(unlink(events), 0);
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(mkdir(dir, 0700), 0);
    write_text(events, "", "w");
    /* the wait sees the old watch go and watches the new directory */
    assert_int_equal(nvmlEventSetWait_v2(set, &ev, 10), NVML_ERROR_TIMEOUT);
    ap = (struct appender){events, "xid 0 43\n", 30};
    assert_int_equal(pthread_create(&th, NULL, append_later, &ap), 0);
    t0 = time_now_ms();
    OK(nvmlEventSetWait_v2(set, &ev, 5000));
    waited_ms = time_now_ms() - t0;
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(ev.eventData, 43);
    assert_true(waited_ms < 1000);
    OK(nvmlEventSetFree(set));
    OK(nvmlShutdown());
}

struct waiter {
    nvmlEventSet_t set;
    unsigned long long xid;
    nvmlReturn_t rc;
};

static void *wait_for_event(void *arg)
{
    struct waiter *w = arg;
    nvmlEventData_t ev;

    w->rc = nvmlEventSetWait_v2(w->set, &ev, 10000);
    if (w->rc == NVML_SUCCESS)
        w->xid = ev.eventData;
    return NULL;
}

static void test_wait_in_a_thread_while_mig_changes(void **state)
{
    char events[512];
    struct waiter w = {0};
    pthread_t th;
    (void)state;

    use_yaml(all_mig_models);
    path_in_tmp(events, sizeof(events), "events-threads");
    setenv("FAKE_NVML_EVENTS", events, 1);
    OK(nvmlInit_v2());
    OK(nvmlEventSetCreate(&w.set));
    OK(nvmlDeviceRegisterEvents(dev(4), nvmlEventTypeXidCriticalError, w.set));
    assert_int_equal(pthread_create(&th, NULL, wait_for_event, &w), 0);
    /* The waiting thread must not hold up the other calls. */
    for (int i = 0; i < 200; i++) {
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        char name[96];
        OK(nvmlDeviceCreateGpuInstance(dev(1), 9, &gi));
        OK(nvmlGpuInstanceCreateComputeInstance(gi, 2, &ci));
        OK(nvmlDeviceGetName(dev(1), name, sizeof(name)));
        assert_int_equal(mig_count(dev(1)), 1);
        OK(nvmlComputeInstanceDestroy(ci));
        OK(nvmlGpuInstanceDestroy(gi));
    }
    write_text(events, "xid 4 45\n", "a");
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(w.rc, NVML_SUCCESS);
    assert_int_equal(w.xid, 45);
    OK(nvmlEventSetFree(w.set));
    OK(nvmlShutdown());
}

/* ---- faults ------------------------------------------------------------------------------ */

static void test_fault_injection(void **state)
{
    nvmlMemory_t mem;
    nvmlDevice_t d;
    nvmlGpuInstance_t gi;
    (void)state;

    use_example("a100-80gb-all-balanced.yaml");
    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetMemoryInfo=999,nvmlInit_v2=9", 1);
    assert_int_equal(nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetMemoryInfo=999", 1);
    OK(nvmlInit_v2());
    assert_int_equal(nvmlDeviceGetMemoryInfo(dev(0), &mem), NVML_ERROR_UNKNOWN);
    OK(nvmlShutdown());

    setenv("FAKE_NVML_FAIL",
           "nvmlDeviceGetMemoryInfo@1=15,nvmlDeviceGetHandleByIndex_v2@3=15,"
           "nvmlGpuInstanceDestroy@2=19,nvmlDeviceCreateGpuInstance=4",
           1);
    OK(nvmlInit_v2());
    OK(nvmlDeviceGetMemoryInfo(dev(0), &mem));
    assert_int_equal(nvmlDeviceGetMemoryInfo(dev(1), &mem), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(3, &d), NVML_ERROR_GPU_IS_LOST);
    OK(nvmlDeviceGetGpuInstanceById(dev(2), 1, &gi));
    assert_int_equal(nvmlGpuInstanceDestroy(gi), NVML_ERROR_IN_USE);
    assert_int_equal(nvmlDeviceCreateGpuInstance(dev(0), 19, &gi), NVML_ERROR_NO_PERMISSION);
    OK(nvmlShutdown());

    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetMemoryInfo", 1);
    assert_int_equal(nvmlInit_v2(), NVML_ERROR_UNKNOWN);
    unsetenv("FAKE_NVML_FAIL");
}

static void test_error_strings(void **state)
{
    (void)state;
    assert_string_equal(nvmlErrorString(NVML_ERROR_IN_USE), "In use by another client");
    assert_string_equal(nvmlErrorString(NVML_ERROR_INSUFFICIENT_RESOURCES),
                        "Insufficient Resources");
    assert_string_equal(nvmlErrorString(NVML_ERROR_NOT_FOUND), "Not Found");
    assert_string_equal(nvmlErrorString((nvmlReturn_t)12345), "Unknown Error");
}

/* ---- machine file errors ----------------------------------------------------------------- */

struct bad_machine {
    const char *yaml, *want1, *want2;
};

static const struct bad_machine bad_machines[] = {
    {"gpus:\n  - model: NVIDIA L20\n    cont: 2\n", ":3: unknown key 'cont'",
     "did you mean 'count'"},
    {"gpus:\n  - model: Foo GPU\n", ":2:", "not in the catalog"},
    {"gpus:\n  - model: NVIDIA A100-SXM4-80GB\n    unified_memory: true\n",
     ":3:", "is MIG capable; unified-memory GPUs (GB10) are not"},
    {"gpus:\n  - model: Foo GPU\n    unified_memory: false\n    compute_capability: '8.9'\n"
     "    architecture: ada\n",
     ":2:", "memory_mib must be at least 1"},
    {"gpus:\n  - model: Tesla T4\n    mig: {enabled: true}\n", ":3:", "not MIG capable"},
    {"gpus:\n  - model: NVIDIA A100-SXM4-80GB\n    mig:\n      enabled: true\n"
     "      instances:\n        - {profile: 3g.40gb, start: 4}\n"
     "        - {profile: 4g.40gb, start: 0}\n        - {profile: 1g.10gb, start: 0}\n",
     ":8:", "Insufficient Resources"},
    {"gpus:\n  - model: NVIDIA A100-SXM4-80GB\n    mig:\n      enabled: true\n"
     "      instances:\n        - {profile: 3g.40gb, start: 2}\n",
     ":6:", "Invalid Argument"},
    {"gpus:\n  - model: NVIDIA A100-SXM4-80GB\n    mig:\n      enabled: true\n"
     "      instances:\n        - {profile: 3g.20gb}\n",
     ":6:", "is not a GPU-instance profile"},
    {"gpus:\n  - model: NVIDIA L20\n    count: many\n", ":3:", "not a non-negative integer"},
    {"gpus:\n  - {model: NVIDIA L20, count: 2}\ntopology:\n  nvlink: [[0, 1, 4]]\n",
     ":4:", "more links than the GPU has"},
    {"gpus:\n  - {model: NVIDIA H100 80GB HBM3, count: 2}\ntopology:\n  nvlink: [[0, 5, 4]]\n",
     ":4:", "two different GPU indexes"},
    {"driver: \"1\"\n", "machine", "needs a gpus list"},
    {"gpus:\n  - model: NVIDIA L20\n    architecture: hopper\n",
     ":3:", "only for models outside the catalog"},
    {"gpus: [\n  {model: x\n", ":3:1: error", "missing comma"},
};

static void test_machine_errors_name_file_and_line(void **state)
{
    char errpath[512];
    (void)state;

    path_in_tmp(errpath, sizeof(errpath), "stderr.txt");
    for (size_t i = 0; i < GS_ARRAY_SIZE(bad_machines); i++) {
        char *text = NULL;
        int saved = dup(STDERR_FILENO);
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        nvmlReturn_t rc;

        assert_true(saved >= 0 && fd >= 0);
        use_yaml(bad_machines[i].yaml);
        fflush(stderr);
        dup2(fd, STDERR_FILENO);
        rc = nvmlInit_v2();
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        close(fd);
        assert_int_equal(rc, NVML_ERROR_UNKNOWN);
        assert_int_equal(file_read_all(errpath, 1 << 16, &text, NULL, NULL), 0);
        if (!strstr(text, bad_machines[i].want1) || !strstr(text, bad_machines[i].want2))
            fail_msg("row %zu: stderr was '%s'", i, text);
        assert_non_null(strstr(text, "machine-"));
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_nvmlInit_refcounted, teardown),
        cmocka_unit_test_teardown(test_nvmlInit_without_machine_is_driver_not_loaded, teardown),
        cmocka_unit_test_teardown(test_bad_handles_are_invalid_argument, teardown),
        cmocka_unit_test_teardown(test_examples_all_load, teardown),
        cmocka_unit_test_teardown(test_uuid_deterministic_across_runs_and_paths, teardown),
        cmocka_unit_test_teardown(test_device_fields_seed_nodes, teardown),
        cmocka_unit_test_teardown(test_unknown_model_all_fields, teardown),
        cmocka_unit_test_teardown(test_unified_memory_not_supported, teardown),
        cmocka_unit_test_teardown(test_topology_nvswitch_and_pairs, teardown),
        cmocka_unit_test_teardown(test_possible_placements_per_model, teardown),
        cmocka_unit_test_teardown(test_profile_info_names_match_go_nvlib_formula, teardown),
        cmocka_unit_test_teardown(test_create_with_placement_rules, teardown),
        cmocka_unit_test_teardown(test_create_each_start_per_model, teardown),
        cmocka_unit_test_teardown(test_maximal_layouts_match_the_facts, teardown),
        cmocka_unit_test_teardown(test_remaining_capacity, teardown),
        cmocka_unit_test_teardown(test_create_auto_order_matters_like_the_driver, teardown),
        cmocka_unit_test_teardown(test_get_gpu_instances_and_by_id, teardown),
        cmocka_unit_test_teardown(test_compute_instances_in_7g, teardown),
        cmocka_unit_test_teardown(test_compute_instance_in_double_memory_1g, teardown),
        cmocka_unit_test_teardown(test_mig_devices_all_balanced, teardown),
        cmocka_unit_test_teardown(test_mig_processes_block_destroy, teardown),
        cmocka_unit_test_teardown(test_mig_mode_changes, teardown),
        cmocka_unit_test_teardown(test_state_persists_across_init_cycles, teardown),
        cmocka_unit_test_teardown(test_state_saved_even_without_the_lock_file, teardown),
        cmocka_unit_test_teardown(test_state_seen_by_another_process, teardown),
        cmocka_unit_test_teardown(test_state_file_foreign_or_damaged_is_ignored, teardown),
        cmocka_unit_test_teardown(test_events_delivered_once_and_fast, teardown),
        cmocka_unit_test_teardown(test_idle_wait_sleeps_once_to_its_timeout, teardown),
        cmocka_unit_test_teardown(test_events_followed_after_the_directory_is_replaced, teardown),
        cmocka_unit_test_teardown(test_wait_in_a_thread_while_mig_changes, teardown),
        cmocka_unit_test_teardown(test_fault_injection, teardown),
        cmocka_unit_test(test_error_strings),
        cmocka_unit_test_teardown(test_machine_errors_name_file_and_line, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

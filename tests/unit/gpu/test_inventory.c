/* SPDX-License-Identifier: Apache-2.0 */
/* test_inventory.c: src/gpu/inventory.c through the fake NVML, loaded by the production
 * loader from GS_BINARY_DIR/tools/fake-nvml: every field on every example machine (the
 * invariants on all of them, exact values per machine), fault injection over every NVML
 * call the read makes, the sysfs NUMA fallback and failOnInitError. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "gpu/internal.h" /* the NVML function table, to change MIG through the fake */
#include "tests.h"

struct fixture {
    char *dir; /* temp: state file, fake sysfs */
    struct strbuf lib, machine, state;
};

static const char *fake_lib(struct fixture *f)
{
    strbuf_reset(&f->lib);
    strbuf_printf(&f->lib, "%s/tools/fake-nvml/libnvidia-ml.so.1", GS_BINARY_DIR);
    return strbuf_str(&f->lib);
}

/* examples/machines, or GS_TEST_MACHINES to try other machine files. */
static void machines_dir(struct strbuf *sb)
{
    const char *env = getenv("GS_TEST_MACHINES");

    if (env && *env)
        strbuf_puts(sb, env);
    else
        strbuf_printf(sb, "%s/examples/machines", GS_SOURCE_DIR);
}

/* Points the fake at <machines>/<name>.yaml with a fresh state file. */
static void use_machine(struct fixture *f, const char *name)
{
    strbuf_reset(&f->machine);
    strbuf_reset(&f->state);
    machines_dir(&f->machine);
    strbuf_printf(&f->machine, "/%s.yaml", name);
    strbuf_printf(&f->state, "%s/%s.state", f->dir, name);
    remove(strbuf_str(&f->state));
    setenv("FAKE_NVML_MACHINE", strbuf_str(&f->machine), 1);
    setenv("FAKE_NVML_STATE", strbuf_str(&f->state), 1);
    unsetenv("FAKE_NVML_FAIL");
    unsetenv("FAKE_NVML_EVENTS");
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    f->dir = tmpdir_make();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    unsetenv("FAKE_NVML_FAIL");
    tmpdir_remove(f->dir);
    free(f->dir);
    strbuf_release(&f->lib);
    strbuf_release(&f->machine);
    strbuf_release(&f->state);
    free(f);
    return 0;
}

/* Opens the fake and reads; returns read's result, the warnings in *ret_warnings (owned
 * strv: load and read warnings). */
static int read_fake(struct fixture *f, const char *sysfs_root, struct inv_inventory **ret,
                     char ***ret_warnings, struct error *err)
{
    struct gpu_nvml_options o = {.library_path = fake_lib(f), .sysfs_root = sysfs_root};
    struct gpu_nvml *n = NULL;
    char **w = strv_new();
    int r;

    r = gpu_nvml_open(&o, &n, err);
    if (r < 0) {
        *ret_warnings = w;
        return r;
    }
    for (char *const *p = gpu_nvml_load_warnings(n); *p; p++)
        strv_push(&w, *p);
    r = gpu_inventory_read(n, ret, err);
    for (char *const *p = gpu_nvml_read_warnings(n); *p; p++)
        strv_push(&w, *p);
    gpu_nvml_close(n);
    *ret_warnings = w;
    return r;
}

static bool warned(char *const *w, const char *needle)
{
    for (size_t i = 0; w && w[i]; i++)
        if (strstr(w[i], needle))
            return true;
    return false;
}

/* ---- invariants every snapshot of every machine must satisfy ---------------------------- */

static void check_invariants(const char *machine, const struct inv_inventory *inv)
{
    char name[64];

    if (inv->n_gpus == 0)
        fail_msg("%s: no GPUs", machine);
    if (!inv->driver_version[0] || inv->cuda_version < 10000)
        fail_msg("%s: driver '%s' cuda %d", machine, inv->driver_version, inv->cuda_version);
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];

        if (g->index != i || !str_startswith(g->uuid, "GPU-") || !g->name[0])
            fail_msg("%s GPU %zu: index %u uuid '%s' name '%s'", machine, i, g->index, g->uuid,
                     g->name);
        if (strcmp(g->brand, "unknown") == 0 || strcmp(g->architecture, "unknown") == 0)
            fail_msg("%s GPU %zu: brand '%s' arch '%s'", machine, i, g->brand, g->architecture);
        if (g->cc_major < 7 || (g->memory_unknown ? g->memory_mib != 0 : g->memory_mib < 8192) ||
            g->numa_node < -1)
            fail_msg("%s GPU %zu: cc %d.%d memory %llu numa %d", machine, i, g->cc_major,
                     g->cc_minor, (unsigned long long)g->memory_mib, g->numa_node);
        if (gpu_pci_sysfs_name(g->pci_bus_id, name, sizeof(name)) < 0 ||
            (g->pci_device_id & 0xFFFF) != 0x10DE)
            fail_msg("%s GPU %zu: bus id '%s' device id 0x%08X", machine, i, g->pci_bus_id,
                     g->pci_device_id);
        for (size_t j = 0; j < i; j++)
            if (strcmp(inv->gpus[j].uuid, g->uuid) == 0 || inv->gpus[j].minor == g->minor ||
                strcmp(inv->gpus[j].pci_bus_id, g->pci_bus_id) == 0)
                fail_msg("%s: GPUs %zu and %zu share uuid, minor or bus id", machine, j, i);
        if ((g->mig_enabled || g->mig_pending) && !g->mig_capable)
            fail_msg("%s GPU %zu: MIG enabled but not capable", machine, i);
        if (!g->mig_enabled && g->n_migs)
            fail_msg("%s GPU %zu: MIG devices with MIG off", machine, i);
        for (size_t k = 0; k < g->n_migs; k++) {
            const struct inv_mig_device *m = &g->migs[k];
            if (!str_startswith(m->uuid, "MIG-") || !strstr(m->profile, "g.") ||
                !strstr(m->profile, "gb") || m->memory_mib == 0 || m->memory_mib >= g->memory_mib ||
                m->multiprocessors == 0 || m->placement_size == 0 ||
                m->placement_start + m->placement_size > 8 || m->ci_id == INV_ID_NONE)
                fail_msg("%s GPU %zu MIG %zu: uuid '%s' profile '%s' mem %llu sms %u at %u:%u",
                         machine, i, k, m->uuid, m->profile, (unsigned long long)m->memory_mib,
                         m->multiprocessors, m->placement_start, m->placement_size);
            if (k > 0 && m->index <= g->migs[k - 1].index)
                fail_msg("%s GPU %zu: MIG indexes not increasing", machine, i);
            for (size_t l = 0; l < k; l++) {
                const struct inv_mig_device *o = &g->migs[l];
                bool same_gi = o->gi_id == m->gi_id;
                bool overlap = m->placement_start < o->placement_start + o->placement_size &&
                               o->placement_start < m->placement_start + m->placement_size;
                if (same_gi ? o->ci_id == m->ci_id : overlap)
                    fail_msg("%s GPU %zu: MIG %zu and %zu collide", machine, i, l, k);
            }
        }
        for (size_t k = 0; k < g->n_procs; k++)
            if (g->procs[k].pid == 0 ||
                (!g->memory_unknown && g->procs[k].used_mib > g->memory_mib) ||
                (!g->mig_enabled && g->procs[k].gi_id != INV_ID_NONE))
                fail_msg("%s GPU %zu: bad process %zu (pid %u)", machine, i, k, g->procs[k].pid);
    }
    for (size_t a = 0; a < inv->n_gpus; a++)
        for (size_t b = 0; b < inv->n_gpus; b++) {
            const struct inv_link *l = inv_link_between(inv, a, b);
            const struct inv_link *r = inv_link_between(inv, b, a);
            if (a == b ? (l->nvlinks || l->pcie != INV_PCIE_SAME)
                       : (l->nvlinks != r->nvlinks || l->pcie != r->pcie))
                fail_msg("%s: link %zu-%zu inconsistent", machine, a, b);
        }
}

static void test_gpu_inventory_read_every_example_machine(void **state)
{
    struct fixture *f = *state;
    struct strbuf dirpath = STRBUF_INIT;
    struct dirent *de;
    DIR *d;
    size_t n = 0;

    machines_dir(&dirpath);
    d = opendir(strbuf_str(&dirpath));
    assert_non_null(d);
    while ((de = readdir(d))) {
        struct inv_inventory *inv = NULL, *copy = NULL;
        struct error err = {0};
        char **w = NULL;
        char name[256];

        if (!str_endswith(de->d_name, ".yaml"))
            continue;
        str_copy(name, de->d_name, sizeof(name));
        name[strlen(name) - 5] = '\0';
        use_machine(f, name);
        if (read_fake(f, NULL, &inv, &w, &err) < 0)
            fail_msg("%s: %s", name, err.msg);
        if (strv_length(w) != 0)
            fail_msg("%s: unexpected warning: %s", name, w[0]);
        check_invariants(name, inv);
        /* The copy the daemon keeps as "last good" is equal field by field. */
        copy = inv_dup(inv);
        assert_non_null(copy);
        assert_int_equal(copy->n_gpus, inv->n_gpus);
        for (size_t i = 0; i < inv->n_gpus; i++) {
            assert_string_equal(copy->gpus[i].uuid, inv->gpus[i].uuid);
            assert_int_equal(copy->gpus[i].n_migs, inv->gpus[i].n_migs);
            if (inv->gpus[i].n_migs)
                assert_memory_equal(copy->gpus[i].migs, inv->gpus[i].migs,
                                    inv->gpus[i].n_migs * sizeof(*inv->gpus[i].migs));
        }
        inv_free(copy);
        inv_free(inv);
        strv_free(w);
        n++;
    }
    closedir(d);
    strbuf_release(&dirpath);
    assert_true(n >= 5);
}

/* ---- exact values per example machine ---------------------------------------------------- */

struct want_mig {
    const char *profile;
    uint64_t memory_mib;
    unsigned sms, start, size;
    unsigned gi_profile_id, ci_profile_id; /* nvidia-smi's ids (facts A.2, A.4) */
};

/* What each example machine must read as (GPU 0 in full, the rest by count and links). */
static const struct {
    const char *machine;
    size_t n_gpus;
    const char *name, *brand, *arch; /* brand NULL: not checked */
    uint64_t memory_mib;
    int cc_major, cc_minor;
    uint32_t pci_device_id; /* 0: not checked */
    bool mig_capable, mig_enabled;
    struct want_mig migs[8];     /* GPU 0, in MIG index order */
    unsigned pid, pid_mib;       /* GPU 0's first process, 0: none */
    int numa_last;               /* NUMA node of the last GPU */
    const char *link01, *link02; /* topology labels, NULL: not checked */
} machines[] = {
    {"a100-80gb-all-1g",
     4,
     "NVIDIA A100-SXM4-80GB",
     "NVIDIA",
     "ampere",
     81920,
     8,
     0,
     0x20B210DE,
     true,
     true,
     {{"1g.10gb", 9728, 14, 0, 1, 19, 0},
      {"1g.10gb", 9728, 14, 1, 1, 19, 0},
      {"1g.10gb", 9728, 14, 2, 1, 19, 0},
      {"1g.10gb", 9728, 14, 3, 1, 19, 0},
      {"1g.10gb", 9728, 14, 4, 1, 19, 0},
      {"1g.10gb", 9728, 14, 5, 1, 19, 0},
      {"1g.10gb", 9728, 14, 6, 1, 19, 0}},
     0,
     0,
     0,
     "NV4",
     "NV4"},
    {"a100-80gb-all-balanced",
     4,
     "NVIDIA A100-SXM4-80GB",
     "NVIDIA",
     "ampere",
     81920,
     8,
     0,
     0x20B210DE,
     true,
     true,
     {{"2g.20gb", 19968, 28, 0, 2, 14, 1},
      {"1g.10gb", 9728, 14, 2, 1, 19, 0},
      {"1g.10gb", 9728, 14, 3, 1, 19, 0},
      {"3g.40gb", 40192, 42, 4, 4, 9, 2}},
     0,
     0,
     0,
     "NV4",
     "NV4"},
    {"h100-nvswitch-8",
     8,
     "NVIDIA H100 80GB HBM3",
     "NVIDIA",
     "hopper",
     81559,
     9,
     0,
     0x233010DE,
     true,
     false,
     {{NULL, 0, 0, 0, 0, 0, 0}},
     0,
     0,
     1,
     "NV18",
     "NV18"},
    {"h20-mig-7x1g",
     8,
     "NVIDIA H20",
     "NVIDIA",
     "hopper",
     97871,
     9,
     0,
     0x232910DE,
     true,
     true,
     {{"1g.12gb", 11264, 10, 0, 1, 19, 0},
      {"1g.12gb", 11264, 10, 1, 1, 19, 0},
      {"1g.12gb", 11264, 10, 2, 1, 19, 0},
      {"1g.12gb", 11264, 10, 3, 1, 19, 0},
      {"1g.12gb", 11264, 10, 4, 1, 19, 0},
      {"1g.12gb", 11264, 10, 5, 1, 19, 0},
      {"1g.12gb", 11264, 10, 6, 1, 19, 0}},
     0,
     0,
     1,
     "NV18",
     "NV18"},
    {"l20-node",
     1,
     "NVIDIA L20",
     NULL,
     "ada-lovelace",
     46068,
     8,
     9,
     0,
     false,
     false,
     {{NULL, 0, 0, 0, 0, 0, 0}},
     4242,
     4621,
     0,
     NULL,
     NULL},
    {"t4-node",
     1,
     "Tesla T4",
     NULL,
     "turing",
     15360,
     7,
     5,
     0,
     false,
     false,
     {{NULL, 0, 0, 0, 0, 0, 0}},
     4243,
     4401,
     0,
     NULL,
     NULL},
    {"mixed-models",
     6,
     "NVIDIA A100-SXM4-40GB",
     "NVIDIA",
     "ampere",
     40960,
     8,
     0,
     0x20B010DE,
     true,
     true,
     {{"4g.20gb", 20096, 56, 0, 4, 5, 3}, {"3g.20gb", 20096, 42, 4, 4, 9, 2}},
     5001,
     2048,
     1,
     "NODE",
     "SYS"},
    {"pcie-2socket-nvlink-pairs",
     8,
     "NVIDIA H100 NVL",
     "NVIDIA",
     "hopper",
     95830,
     9,
     0,
     0x232110DE,
     true,
     false,
     {{NULL, 0, 0, 0, 0, 0, 0}},
     0,
     0,
     1,
     "NV12",
     "NODE"},
};

static void check_machine(size_t k, const struct inv_inventory *inv)
{
    const char *m = machines[k].machine;
    const struct inv_gpu *g = &inv->gpus[0];
    size_t n_migs = 0;
    char buf[16];

    if (inv->n_gpus != machines[k].n_gpus)
        fail_msg("%s: %zu GPUs, want %zu", m, inv->n_gpus, machines[k].n_gpus);
    if (strcmp(inv->driver_version, "570.158.01") != 0 || inv->cuda_version != 12080)
        fail_msg("%s: driver %s cuda %d", m, inv->driver_version, inv->cuda_version);
    if (strcmp(g->name, machines[k].name) != 0 || strcmp(g->architecture, machines[k].arch) ||
        (machines[k].brand && strcmp(g->brand, machines[k].brand)))
        fail_msg("%s: name '%s' arch '%s' brand '%s'", m, g->name, g->architecture, g->brand);
    if (g->memory_mib != machines[k].memory_mib || g->cc_major != machines[k].cc_major ||
        g->cc_minor != machines[k].cc_minor)
        fail_msg("%s: memory %llu cc %d.%d", m, (unsigned long long)g->memory_mib, g->cc_major,
                 g->cc_minor);
    if (machines[k].pci_device_id && g->pci_device_id != machines[k].pci_device_id)
        fail_msg("%s: device id 0x%08X", m, g->pci_device_id);
    if (g->mig_capable != machines[k].mig_capable || g->mig_enabled != machines[k].mig_enabled ||
        g->mig_pending != g->mig_enabled)
        fail_msg("%s: MIG capable %d enabled %d pending %d", m, g->mig_capable, g->mig_enabled,
                 g->mig_pending);
    while (n_migs < 8 && machines[k].migs[n_migs].profile)
        n_migs++;
    if (g->n_migs != n_migs)
        fail_msg("%s: %zu MIG devices, want %zu", m, g->n_migs, n_migs);
    for (size_t i = 0; i < n_migs; i++) {
        const struct want_mig *w = &machines[k].migs[i];
        const struct inv_mig_device *d = &g->migs[i];
        /* G and C come from the profile indexes as in go-nvlib: 3g.40gb although the
         * profile spans 4 memory slices. */
        if (strcmp(d->profile, w->profile) != 0 || d->memory_mib != w->memory_mib ||
            d->multiprocessors != w->sms || d->placement_start != w->start ||
            d->placement_size != w->size || d->gi_profile_id != w->gi_profile_id ||
            d->ci_profile_id != w->ci_profile_id)
            fail_msg("%s MIG %zu: '%s' %llu MiB %u SMs at %u:%u ids %u/%u, want '%s' %llu MiB "
                     "%u SMs at %u:%u ids %u/%u",
                     m, i, d->profile, (unsigned long long)d->memory_mib, d->multiprocessors,
                     d->placement_start, d->placement_size, d->gi_profile_id, d->ci_profile_id,
                     w->profile, (unsigned long long)w->memory_mib, w->sms, w->start, w->size,
                     w->gi_profile_id, w->ci_profile_id);
    }
    if (machines[k].pid) {
        if (g->n_procs < 1 || g->procs[0].pid != machines[k].pid ||
            g->procs[0].used_mib != machines[k].pid_mib)
            fail_msg("%s: first process %u (%llu MiB)", m, g->n_procs ? g->procs[0].pid : 0,
                     g->n_procs ? (unsigned long long)g->procs[0].used_mib : 0ULL);
    } else if (g->n_procs) {
        fail_msg("%s: unexpected process %u", m, g->procs[0].pid);
    }
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *o = &inv->gpus[i];
        bool mixed = strcmp(m, "mixed-models") == 0;
        if (o->minor != i ||
            (!mixed && (strcmp(o->name, g->name) != 0 || o->memory_mib != g->memory_mib ||
                        o->n_migs != g->n_migs || o->n_procs != g->n_procs)))
            fail_msg("%s GPU %zu differs from GPU 0 (minor %u, '%s')", m, i, o->minor, o->name);
    }
    if (inv->gpus[inv->n_gpus - 1].numa_node != machines[k].numa_last)
        fail_msg("%s: last GPU NUMA %d", m, inv->gpus[inv->n_gpus - 1].numa_node);
    if (machines[k].link01 &&
        strcmp(gpu_link_label(inv_link_between(inv, 0, 1), false, buf, sizeof(buf)),
               machines[k].link01) != 0)
        fail_msg("%s: GPU0-GPU1 %s, want %s", m, buf, machines[k].link01);
    if (machines[k].link02 &&
        strcmp(gpu_link_label(inv_link_between(inv, 0, 2), false, buf, sizeof(buf)),
               machines[k].link02) != 0)
        fail_msg("%s: GPU0-GPU2 %s, want %s", m, buf, machines[k].link02);
}

static void test_gpu_inventory_read_exact_values_per_machine(void **state)
{
    struct fixture *f = *state;

    if (getenv("GS_TEST_MACHINES"))
        skip();
    for (size_t k = 0; k < GS_ARRAY_SIZE(machines); k++) {
        struct inv_inventory *inv = NULL;
        struct error err = {0};
        char **w = NULL;

        use_machine(f, machines[k].machine);
        if (read_fake(f, NULL, &inv, &w, &err) < 0)
            fail_msg("%s: %s", machines[k].machine, err.msg);
        check_machine(k, inv);
        inv_free(inv);
        strv_free(w);
    }
}

/* ---- fault injection ----------------------------------------------------------------------- */

enum fault_effect { FATAL, DEGRADED };

/* Every NVML call gpu_inventory_read makes on a MIG machine with processes, and what its
 * failure does (the contract documented in gpu.h and docs/inventory.md). */
static const struct {
    const char *call;
    enum fault_effect effect;
} faults[] = {
    {"nvmlSystemGetDriverVersion", FATAL},
    {"nvmlSystemGetCudaDriverVersion_v2", DEGRADED},
    {"nvmlDeviceGetCount_v2", FATAL},
    {"nvmlDeviceGetHandleByIndex_v2", FATAL},
    {"nvmlDeviceGetUUID", FATAL},
    {"nvmlDeviceGetName", FATAL},
    {"nvmlDeviceGetMinorNumber", FATAL},
    {"nvmlDeviceGetMemoryInfo", FATAL},
    {"nvmlDeviceGetPciInfo_v3", FATAL},
    {"nvmlDeviceGetCudaComputeCapability", DEGRADED},
    {"nvmlDeviceGetBrand", DEGRADED},
    {"nvmlDeviceGetArchitecture", DEGRADED},
    {"nvmlDeviceGetNumaNodeId", DEGRADED},
    {"nvmlDeviceGetMigMode", FATAL},
    {"nvmlDeviceGetMaxMigDeviceCount", FATAL},
    {"nvmlDeviceGetMigDeviceHandleByIndex", FATAL},
    {"nvmlDeviceGetGpuInstanceId", FATAL},
    {"nvmlDeviceGetComputeInstanceId", FATAL},
    {"nvmlDeviceGetGpuInstanceById", FATAL},
    {"nvmlGpuInstanceGetInfo", FATAL},
    {"nvmlGpuInstanceGetComputeInstanceById", FATAL},
    {"nvmlComputeInstanceGetInfo_v2", FATAL},
    {"nvmlDeviceGetGpuInstanceProfileInfo", FATAL},
    {"nvmlGpuInstanceGetComputeInstanceProfileInfo", FATAL},
    {"nvmlDeviceGetComputeRunningProcesses_v3", DEGRADED},
    {"nvmlDeviceGetNvLinkState", DEGRADED},
    {"nvmlDeviceGetNvLinkRemotePciInfo_v2", DEGRADED},
    {"nvmlDeviceGetTopologyCommonAncestor", DEGRADED},
    /* Not here: nvmlShutdown (gpu_nvml_close ignores its result; a failing shutdown keeps
     * the fake's machine allocated, as it would keep a real driver's state). */
};

static void check_degraded(const char *call, const struct inv_inventory *inv)
{
    const struct inv_gpu *g = &inv->gpus[0];

    if (strcmp(call, "nvmlSystemGetCudaDriverVersion_v2") == 0)
        assert_int_equal(inv->cuda_version, 0);
    else if (strcmp(call, "nvmlDeviceGetCudaComputeCapability") == 0)
        assert_true(g->cc_major == 0 && g->cc_minor == 0);
    else if (strcmp(call, "nvmlDeviceGetBrand") == 0)
        assert_string_equal(g->brand, "unknown");
    else if (strcmp(call, "nvmlDeviceGetArchitecture") == 0)
        assert_string_equal(g->architecture, "unknown");
    else if (strcmp(call, "nvmlDeviceGetNumaNodeId") == 0)
        assert_int_equal(g->numa_node, -1); /* no sysfs entry in the test's sysfs root */
    else if (strcmp(call, "nvmlDeviceGetComputeRunningProcesses_v3") == 0)
        for (size_t i = 0; i < inv->n_gpus; i++)
            assert_int_equal(inv->gpus[i].n_procs, 0);
    else if (strcmp(call, "nvmlDeviceGetTopologyCommonAncestor") == 0)
        assert_int_equal(inv_link_between(inv, 0, 1)->pcie, INV_PCIE_SYSTEM);
    else if (strstr(call, "NvLink"))
        assert_int_equal(inv_link_between(inv, 0, 1)->nvlinks, 0);
}

/* The machine that exercises every call: MIG devices, processes, NVLink, several GPUs. */
#define FAULT_MACHINE "a100-80gb-all-balanced"

static void test_gpu_inventory_read_every_call_failing(void **state)
{
    struct fixture *f = *state;
    struct strbuf sysfs = STRBUF_INIT;

    strbuf_printf(&sysfs, "%s/empty-sysfs", f->dir);
    for (size_t i = 0; i < GS_ARRAY_SIZE(faults); i++) {
        struct inv_inventory *inv = NULL;
        struct error err = {0};
        struct strbuf spec = STRBUF_INIT;
        char **w = NULL;
        int r;

        use_machine(f, FAULT_MACHINE);
        strbuf_printf(&spec, "%s=999", faults[i].call);
        setenv("FAKE_NVML_FAIL", strbuf_str(&spec), 1);
        r = read_fake(f, strbuf_str(&sysfs), &inv, &w, &err);
        switch (faults[i].effect) {
        case FATAL:
            if (r >= 0)
                fail_msg("%s failing: read succeeded", faults[i].call);
            assert_null(inv);
            if (!strstr(err.msg, faults[i].call) || !strstr(err.msg, "Unknown Error"))
                fail_msg("%s failing: unclear error '%s'", faults[i].call, err.msg);
            /* Per-device calls name the device. */
            if ((strstr(faults[i].call, "Device") || strstr(faults[i].call, "Instance")) &&
                !strstr(faults[i].call, "GetCount"))
                if (!strstr(err.msg, "GPU 0"))
                    fail_msg("%s failing: no device in '%s'", faults[i].call, err.msg);
            break;
        case DEGRADED:
            if (r < 0)
                fail_msg("%s failing: read failed: %s", faults[i].call, err.msg);
            if (!warned(w, faults[i].call) || !warned(w, "Unknown Error"))
                fail_msg("%s failing: no warning naming it", faults[i].call);
            check_degraded(faults[i].call, inv);
            break;
        }
        inv_free(inv);
        strv_free(w);
        strbuf_release(&spec);
    }
    strbuf_release(&sysfs);
}

static void test_gpu_nvml_open_init_failure(void **state)
{
    struct fixture *f = *state;
    struct gpu_nvml_options o = {.library_path = fake_lib(f)};
    struct gpu_nvml *n = NULL;
    struct error err = {0};

    use_machine(f, FAULT_MACHINE);
    setenv("FAKE_NVML_FAIL", "nvmlInit_v2=9", 1);
    assert_int_equal(gpu_nvml_open(&o, &n, &err), -ENODEV);
    assert_null(n);
    assert_non_null(strstr(err.msg, "nvmlInit_v2 failed"));
    assert_non_null(strstr(err.msg, "Driver Not Loaded"));
    assert_non_null(strstr(err.msg, o.library_path));
}

static void test_gpu_inventory_open_and_read_fail_on_init_error(void **state)
{
    struct fixture *f = *state;
    struct gpu_nvml_options o = {.library_path = fake_lib(f)};
    struct inv_inventory *inv = NULL;
    struct error err = {0};
    char **w = NULL;

    use_machine(f, FAULT_MACHINE);
    setenv("FAKE_NVML_FAIL", "nvmlInit_v2=9", 1);
    /* false: no GPUs, keep running */
    assert_int_equal(gpu_inventory_open_and_read(&o, false, &inv, &w, &err), 0);
    assert_non_null(inv);
    assert_int_equal(inv->n_gpus, 0);
    assert_null(inv->gpus);
    assert_int_equal(strv_length(w), 1);
    assert_non_null(strstr(w[0], "Driver Not Loaded"));
    assert_non_null(strstr(w[0], "keep running"));
    inv_free(inv);
    strv_free(w);
    inv = NULL;
    w = NULL;
    /* true: the error, outputs untouched */
    assert_int_equal(gpu_inventory_open_and_read(&o, true, &inv, &w, &err), -ENODEV);
    assert_null(inv);
    assert_null(w);
    assert_non_null(strstr(err.msg, "nvmlInit_v2 failed"));
    /* A read failure after a good init is an error even with false. */
    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetUUID=999", 1);
    assert_int_equal(gpu_inventory_open_and_read(&o, false, &inv, &w, &err), -EIO);
    assert_null(inv);
    assert_non_null(strstr(err.msg, "nvmlDeviceGetUUID failed for GPU 0"));
    /* And the good path. */
    unsetenv("FAKE_NVML_FAIL");
    assert_int_equal(gpu_inventory_open_and_read(&o, true, &inv, &w, &err), 0);
    assert_true(inv->n_gpus > 0);
    assert_int_equal(strv_length(w), 0);
    inv_free(inv);
    strv_free(w);
}

static void test_gpu_inventory_read_numa_from_sysfs(void **state)
{
    struct fixture *f = *state;
    struct inv_inventory *inv = NULL;
    struct strbuf sysfs = STRBUF_INIT, rel = STRBUF_INIT;
    struct error err = {0};
    char **w = NULL;
    char dev[32];

    /* First learn GPU 0's bus id, then hide NVML's NUMA answer (NOT_SUPPORTED, as on x86
     * hosts) and give the node through a fake sysfs. */
    use_machine(f, FAULT_MACHINE);
    assert_int_equal(read_fake(f, NULL, &inv, &w, &err), 0);
    assert_int_equal(gpu_pci_sysfs_name(inv->gpus[0].pci_bus_id, dev, sizeof(dev)), 0);
    inv_free(inv);
    strv_free(w);
    strbuf_printf(&sysfs, "%s/sysfs", f->dir);
    strbuf_printf(&rel, "sysfs/bus/pci/devices/%s/numa_node", dev);
    write_under(f->dir, strbuf_str(&rel), "3\n");

    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetNumaNodeId=3", 1);
    assert_int_equal(read_fake(f, strbuf_str(&sysfs), &inv, &w, &err), 0);
    assert_int_equal(inv->gpus[0].numa_node, 3);
    if (inv->n_gpus > 1)
        assert_int_equal(inv->gpus[1].numa_node, -1); /* no sysfs entry */
    assert_int_equal(strv_length(w), 0);              /* NOT_SUPPORTED is normal, not a warning */
    inv_free(inv);
    strv_free(w);
    strbuf_release(&sysfs);
    strbuf_release(&rel);
}

/* An unprivileged daemon gets NO_PERMISSION on GPU-instance queries: the read used to fail
 * outright; now each such GPU is served whole, with a warning that says how to fix it. */
static void test_gpu_inventory_mig_no_permission_degrades(void **state)
{
    struct fixture *f = *state;
    struct inv_inventory *inv = NULL;
    struct error err = {0};
    char **w = NULL;

    use_machine(f, FAULT_MACHINE);
    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetGpuInstanceById=4", 1);
    assert_int_equal(read_fake(f, NULL, &inv, &w, &err), 0);
    assert_true(inv->n_gpus > 0);
    for (size_t i = 0; i < inv->n_gpus; i++) {
        assert_true(inv->gpus[i].mig_capable);
        assert_false(inv->gpus[i].mig_enabled);
        assert_int_equal(inv->gpus[i].n_migs, 0);
    }
    assert_int_equal(strv_length(w), inv->n_gpus);
    assert_non_null(strstr(w[0], "Insufficient Permissions"));
    assert_non_null(strstr(w[0], "serving it as a whole GPU"));
    assert_non_null(strstr(w[0], "CAP_SYS_ADMIN"));
    inv_free(inv);
    strv_free(w);
    unsetenv("FAKE_NVML_FAIL");
}

/* NVIDIA's plugin reads sysfs; both must agree on real hardware: sysfs wins when NVML
 * answers too, NVML fills in where sysfs has nothing. */
static void test_gpu_inventory_numa_sysfs_before_nvml(void **state)
{
    struct fixture *f = *state;
    struct inv_inventory *inv = NULL;
    struct strbuf sysfs = STRBUF_INIT, rel = STRBUF_INIT;
    struct error err = {0};
    char **w = NULL;
    char dev[32];
    int nvml_node;

    use_machine(f, FAULT_MACHINE);
    assert_int_equal(read_fake(f, NULL, &inv, &w, &err), 0);
    assert_int_equal(gpu_pci_sysfs_name(inv->gpus[0].pci_bus_id, dev, sizeof(dev)), 0);
    nvml_node = inv->gpus[0].numa_node; /* what the fake NVML says */
    inv_free(inv);
    strv_free(w);
    strbuf_printf(&sysfs, "%s/sysfs2", f->dir);
    strbuf_printf(&rel, "sysfs2/bus/pci/devices/%s/numa_node", dev);
    write_under(f->dir, strbuf_str(&rel), nvml_node == 5 ? "6\n" : "5\n");
    assert_int_equal(read_fake(f, strbuf_str(&sysfs), &inv, &w, &err), 0);
    assert_int_equal(inv->gpus[0].numa_node, nvml_node == 5 ? 6 : 5);
    inv_free(inv);
    strv_free(w);
    strbuf_release(&sysfs);
    strbuf_release(&rel);
}

static void test_gpu_inventory_read_twice_replaces_warnings(void **state)
{
    struct fixture *f = *state;
    struct gpu_nvml_options o = {.library_path = fake_lib(f)};
    struct inv_inventory *a = NULL, *b = NULL;
    struct gpu_nvml *n = NULL;
    size_t n_first;

    /* The fake reads FAKE_NVML_FAIL at init, so both reads see the same failure: the
     * second read's warnings replace the first's instead of piling up. */
    use_machine(f, FAULT_MACHINE);
    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetBrand=999", 1);
    assert_int_equal(gpu_nvml_open(&o, &n, NULL), 0);
    assert_string_equal(gpu_nvml_library_path(n), o.library_path);
    assert_int_equal(gpu_inventory_read(n, &a, NULL), 0);
    n_first = strv_length(gpu_nvml_read_warnings(n));
    assert_int_equal(n_first, a->n_gpus); /* one per GPU */
    assert_int_equal(gpu_inventory_read(n, &b, NULL), 0);
    assert_int_equal(strv_length(gpu_nvml_read_warnings(n)), n_first);
    assert_int_equal(a->n_gpus, b->n_gpus);
    for (size_t i = 0; i < a->n_gpus; i++) {
        assert_string_equal(a->gpus[i].uuid, b->gpus[i].uuid);
        assert_string_equal(b->gpus[i].brand, "unknown");
    }
    inv_free(a);
    inv_free(b);
    gpu_nvml_close(n);
}

/* Compute-instance sub-slices and media-extension profiles, made through the fake's MIG
 * calls (as nvidia-smi mig -dci/-cci/-dgi/-cgi would): GI 1 (3g.40gb@4) split into three
 * 1c CIs, the 1g.10gb at slice 2 replaced by a 1g.10gb+me (profile id 20). */
static void test_gpu_inventory_read_ci_subslices_and_me(void **state)
{
    struct fixture *f = *state;
    struct gpu_nvml_options o = {.library_path = fake_lib(f)};
    static const nvmlGpuInstancePlacement_t slot2 = {2, 1};
    static const char *const want[] = {"2g.20gb",    "1g.10gb+me", "1g.10gb",
                                       "1c.3g.40gb", "1c.3g.40gb", "1c.3g.40gb"};
    struct inv_inventory *inv = NULL;
    struct gpu_nvml *n = NULL;
    nvmlDevice_t dev = NULL;
    nvmlGpuInstance_t gi = NULL;
    nvmlComputeInstance_t ci = NULL;
    struct error err = {0};

    use_machine(f, "a100-80gb-all-balanced");
    assert_int_equal(gpu_nvml_open(&o, &n, NULL), 0);
    assert_int_equal(n->nvmlDeviceGetHandleByIndex_v2(0, &dev), NVML_SUCCESS);
    /* GI 1 = 3g.40gb@4: its full CI out, three 1-slice CIs in */
    assert_int_equal(n->nvmlDeviceGetGpuInstanceById(dev, 1, &gi), NVML_SUCCESS);
    assert_int_equal(n->nvmlGpuInstanceGetComputeInstanceById(gi, 0, &ci), NVML_SUCCESS);
    assert_int_equal(n->nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            n->nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci),
            NVML_SUCCESS);
    /* GI 3 = 1g.10gb@2 out, 1g.10gb+me (id 20) in at the same slice */
    assert_int_equal(n->nvmlDeviceGetGpuInstanceById(dev, 3, &gi), NVML_SUCCESS);
    assert_int_equal(n->nvmlGpuInstanceGetComputeInstanceById(gi, 0, &ci), NVML_SUCCESS);
    assert_int_equal(n->nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
    assert_int_equal(n->nvmlGpuInstanceDestroy(gi), NVML_SUCCESS);
    assert_int_equal(n->nvmlDeviceCreateGpuInstanceWithPlacement(dev, 20, &slot2, &gi),
                     NVML_SUCCESS);
    assert_int_equal(
        n->nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci),
        NVML_SUCCESS);

    if (gpu_inventory_read(n, &inv, &err) < 0)
        fail_msg("%s", err.msg);
    check_invariants("a100-80gb-all-balanced (changed)", inv);
    assert_int_equal(inv->gpus[0].n_migs, GS_ARRAY_SIZE(want));
    for (size_t i = 0; i < GS_ARRAY_SIZE(want); i++)
        if (strcmp(inv->gpus[0].migs[i].profile, want[i]) != 0)
            fail_msg("MIG %zu: '%s', want '%s'", i, inv->gpus[0].migs[i].profile, want[i]);
    assert_int_equal(inv->gpus[0].migs[1].gi_profile_id, 20);
    for (size_t i = 3; i < 6; i++) {
        const struct inv_mig_device *m = &inv->gpus[0].migs[i];
        assert_int_equal(m->gi_id, 1);
        assert_int_equal(m->ci_profile_id, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE);
        assert_int_equal(m->multiprocessors, 14);
        assert_int_equal(m->placement_start, 4);
        assert_int_equal(m->placement_size, 4);
        /* the GPU instance's own profile (what DRA publishes), not the sub-slice's */
        assert_int_equal(m->gi_profile.multiprocessors, 42);
        assert_int_equal(m->gi_profile.memory_mib, 40192);
        assert_int_equal(m->gi_profile.copy_engines, 3);
        assert_int_equal(m->gi_profile.decoders, 2);
        assert_int_equal(m->gi_profile.encoders, 0);
    }
    /* GPU 1 is untouched */
    assert_string_equal(inv->gpus[1].migs[3].profile, "3g.40gb");
    inv_free(inv);
    gpu_nvml_close(n);
}

/* MIG mode change pending (the GPU is busy): current off, pending on, no MIG devices. */
static void test_gpu_inventory_read_mig_pending(void **state)
{
    struct fixture *f = *state;
    struct gpu_nvml_options o = {.library_path = fake_lib(f)};
    struct strbuf machine = STRBUF_INIT;
    struct inv_inventory *inv = NULL;
    struct gpu_nvml *n = NULL;
    nvmlDevice_t dev = NULL;
    nvmlReturn_t activation = NVML_SUCCESS;

    use_machine(f, "t4-node"); /* resets env and state path */
    write_under(f->dir, "busy-a100.yaml",
                "driver: \"570.158.01\"\ncuda: 12080\ngpus:\n"
                "  - model: NVIDIA A100-SXM4-40GB\n    count: 1\n"
                "    processes: [{pid: 77, used_mib: 100}]\n");
    strbuf_printf(&machine, "%s/busy-a100.yaml", f->dir);
    setenv("FAKE_NVML_MACHINE", strbuf_str(&machine), 1);

    assert_int_equal(gpu_nvml_open(&o, &n, NULL), 0);
    assert_int_equal(n->nvmlDeviceGetHandleByIndex_v2(0, &dev), NVML_SUCCESS);
    assert_int_equal(n->nvmlDeviceSetMigMode(dev, NVML_DEVICE_MIG_ENABLE, &activation),
                     NVML_SUCCESS);
    assert_int_equal(activation, NVML_ERROR_IN_USE);
    assert_int_equal(gpu_inventory_read(n, &inv, NULL), 0);
    assert_true(inv->gpus[0].mig_capable);
    assert_false(inv->gpus[0].mig_enabled);
    assert_true(inv->gpus[0].mig_pending);
    assert_int_equal(inv->gpus[0].n_migs, 0);
    assert_int_equal(inv->gpus[0].n_procs, 1);
    assert_int_equal(inv->gpus[0].procs[0].gi_id, INV_ID_NONE);
    inv_free(inv);
    gpu_nvml_close(n);
    strbuf_release(&machine);
}

/* The whole production path: the library found by the driver-root search (here a
 * container driver root holding a symlink to the fake, as the driver's .so.1 link is). */
static void test_gpu_nvml_open_found_under_driver_root(void **state)
{
    struct fixture *f = *state;
    struct strbuf link = STRBUF_INIT, ctr = STRBUF_INIT;
    struct gpu_nvml_options o = {.driver_root = "/nonexistent-host-root"};
    struct inv_inventory *inv = NULL;
    struct gpu_nvml *n = NULL;
    struct error err = {0};

    strbuf_printf(&ctr, "%s/driver-root", f->dir);
    free(mkdir_under(f->dir, "driver-root/usr/lib/x86_64-linux-gnu"));
    strbuf_printf(&link, "%s/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", strbuf_str(&ctr));
    assert_int_equal(symlink(fake_lib(f), strbuf_str(&link)), 0);
    o.driver_root_ctr_path = strbuf_str(&ctr);

    use_machine(f, "t4-node");
    if (gpu_nvml_open(&o, &n, &err) < 0)
        fail_msg("%s", err.msg);
    assert_string_equal(gpu_nvml_library_path(n), strbuf_str(&link));
    assert_int_equal(strv_length(gpu_nvml_load_warnings(n)), 0);
    assert_int_equal(gpu_inventory_read(n, &inv, &err), 0);
    assert_int_equal(inv->n_gpus, 1);
    assert_string_equal(inv->gpus[0].name, "Tesla T4");
    inv_free(inv);
    gpu_nvml_close(n);
    strbuf_release(&link);
    strbuf_release(&ctr);
}

/* A unified-memory GPU (GB10 / DGX Spark) answers the memory query NOT_SUPPORTED: memory
 * unknown, not a failed read, and no warning (it is what the hardware is); NVIDIA's DRA
 * driver v0.4.0 and device plugin serve it so. */
static void test_gpu_inventory_read_unified_memory_is_unknown(void **state)
{
    struct fixture *f = *state;
    struct inv_inventory *inv = NULL, *copy = NULL;
    struct error err = {0};
    char **w = NULL;

    use_machine(f, "gb10-spark");
    if (read_fake(f, NULL, &inv, &w, &err) < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(strv_length(w), 0);
    assert_int_equal(inv->n_gpus, 1);
    assert_string_equal(inv->gpus[0].name, "NVIDIA GB10");
    assert_string_equal(inv->gpus[0].architecture, "blackwell");
    assert_true(inv->gpus[0].memory_unknown);
    assert_int_equal(inv->gpus[0].memory_mib, 0);
    assert_false(inv->gpus[0].mig_capable);
    assert_int_equal(inv->gpus[0].n_procs, 1);
    assert_int_equal(inv->gpus[0].procs[0].used_mib, 43);
    copy = inv_dup(inv);
    assert_non_null(copy);
    assert_true(copy->gpus[0].memory_unknown);
    inv_free(copy);
    inv_free(inv);
    strv_free(w);

    /* A discrete GPU reads as known. */
    use_machine(f, "l20-node");
    assert_int_equal(read_fake(f, NULL, &inv, &w, &err), 0);
    assert_false(inv->gpus[0].memory_unknown);
    assert_int_equal(inv->gpus[0].memory_mib, 46068);
    inv_free(inv);
    strv_free(w);
}

/* Only NOT_SUPPORTED means "unknown": on one GPU of several, the others keep their memory;
 * any other error still fails the read; and a MIG-enabled GPU cannot be read without its
 * memory (its profile names come from it). */
static void test_gpu_inventory_read_memory_not_supported_only(void **state)
{
    struct fixture *f = *state;
    struct inv_inventory *inv = NULL;
    struct error err = {0};
    char **w = NULL;

    use_machine(f, "h100-nvswitch-8");
    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetMemoryInfo@1=3", 1);
    if (read_fake(f, NULL, &inv, &w, &err) < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(strv_length(w), 0);
    assert_false(inv->gpus[0].memory_unknown);
    assert_int_equal(inv->gpus[0].memory_mib, 81559);
    assert_true(inv->gpus[1].memory_unknown);
    assert_int_equal(inv->gpus[1].memory_mib, 0);
    inv_free(inv);
    strv_free(w);
    inv = NULL;
    w = NULL;

    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetMemoryInfo@1=999", 1);
    assert_true(read_fake(f, NULL, &inv, &w, &err) < 0);
    assert_null(inv);
    assert_non_null(strstr(err.msg, "nvmlDeviceGetMemoryInfo failed for GPU 1"));
    assert_non_null(strstr(err.msg, "Unknown Error"));
    strv_free(w);
    w = NULL;

    use_machine(f, FAULT_MACHINE);
    setenv("FAKE_NVML_FAIL", "nvmlDeviceGetMemoryInfo@0=3", 1);
    assert_int_equal(read_fake(f, NULL, &inv, &w, &err), -EOPNOTSUPP);
    assert_null(inv);
    assert_non_null(strstr(err.msg, "GPU 0 ("));
    assert_non_null(strstr(err.msg, "MIG enabled"));
    assert_non_null(strstr(err.msg, "Not Supported"));
    strv_free(w);
}

int run_inventory_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gpu_inventory_read_every_example_machine, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_read_exact_values_per_machine, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_read_unified_memory_is_unknown, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_read_memory_not_supported_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_read_every_call_failing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_read_ci_subslices_and_me, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_read_mig_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_nvml_open_init_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_nvml_open_found_under_driver_root, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_open_and_read_fail_on_init_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_mig_no_permission_degrades, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_numa_sysfs_before_nvml, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_read_numa_from_sysfs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_inventory_read_twice_replaces_warnings, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("gpu_inventory", tests, NULL, NULL);
}

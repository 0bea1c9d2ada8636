/* SPDX-License-Identifier: Apache-2.0 */
/* test_devices.c: src/dra/devices.c — every example machine through the fake NVML into the
 * devices NVIDIA's DRA driver publishes (invariants on all, exact names, attributes and
 * capacities per machine), health marking, and the formatters (quantities, semver, PCI bus
 * ids, go-nvlib brand and architecture names). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

static const char *const common_attrs[] = {
    "type",
    "uuid",
    "productName",
    "brand",
    "architecture",
    "cudaComputeCapability",
    "driverVersion",
    "cudaDriverVersion",
    DRA_PCI_BUS_ID_ATTR,
};

/* What holds on every machine: names unique and of NVIDIA's shapes, one device per GPU
 * with MIG off and one per MIG device otherwise, every attribute and capacity present. */
static void check_invariants(const char *machine, const struct inv_inventory *inv,
                             const struct dra_devices *devs)
{
    size_t want = 0, k = 0;

    for (size_t i = 0; i < inv->n_gpus; i++)
        want += inv->gpus[i].mig_enabled ? inv->gpus[i].n_migs : 1;
    if (devs->n_devices != want)
        fail_msg("%s: %zu devices, want %zu", machine, devs->n_devices, want);
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        size_t n = g->mig_enabled ? g->n_migs : 1;
        for (size_t m = 0; m < n; m++, k++) {
            const struct dra_device *d = &devs->devices[k];
            char name[DRA_NAME_MAX];
            assert_true(d->healthy);
            for (size_t a = 0; a < GS_ARRAY_SIZE(common_attrs); a++)
                if (!tx_attr(d, common_attrs[a]))
                    fail_msg("%s: %s has no %s", machine, d->info.name, common_attrs[a]);
            assert_int_equal(d->info.minor, g->minor);
            assert_int_equal(d->info.gpu_index, g->index);
            assert_string_equal(d->info.parent_uuid, g->uuid);
            if (!g->mig_enabled) {
                snprintf(name, sizeof(name), "gpu-%u", g->minor);
                assert_string_equal(d->info.name, name);
                assert_string_equal(tx_attr(d, "type"), "gpu");
                assert_string_equal(tx_attr(d, "uuid"), g->uuid);
                assert_int_equal(d->n_attrs, GS_ARRAY_SIZE(common_attrs));
                /* no memory capacity where NVML reports no memory (gb10-spark), as NVIDIA's
                 * v0.4.0 */
                assert_int_equal(d->n_capacities, g->memory_unknown ? 0 : 1);
                assert_int_equal(d->info.mig_index, -1);
                continue;
            }
            assert_string_equal(tx_attr(d, "type"), "mig");
            assert_string_equal(tx_attr(d, "uuid"), g->migs[m].uuid);
            assert_string_equal(tx_attr(d, "parentUUID"), g->uuid);
            assert_string_equal(tx_attr(d, "profile"), g->migs[m].profile);
            assert_int_equal(d->n_attrs, GS_ARRAY_SIZE(common_attrs) + 2);
            assert_int_equal(d->n_capacities, 7 + g->migs[m].placement_size);
            assert_int_equal(d->info.gi_id, g->migs[m].gi_id);
            assert_int_equal(d->info.ci_id, g->migs[m].ci_id);
            assert_true(strncmp(d->info.name, "gpu-", 4) == 0 && strstr(d->info.name, "-mig-"));
        }
    }
    for (size_t i = 0; i < devs->n_devices; i++)
        for (size_t j = i + 1; j < devs->n_devices; j++)
            if (strcmp(devs->devices[i].info.name, devs->devices[j].info.name) == 0)
                fail_msg("%s: two devices named %s", machine, devs->devices[i].info.name);
}

static void test_dra_devices_every_example_machine(void **state)
{
    char dir[1024];
    DIR *d;
    struct dirent *e;
    size_t n = 0;
    (void)state;

    snprintf(dir, sizeof(dir), "%s/examples/machines", GS_SOURCE_DIR);
    d = opendir(dir);
    assert_non_null(d);
    while ((e = readdir(d))) {
        char name[256];
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0 || len - 5 >= sizeof(name))
            continue;
        memcpy(name, e->d_name, len - 5);
        name[len - 5] = '\0';
        struct inv_inventory *inv = tx_machine(name);
        struct dra_devices *devs = tx_devices(inv);
        check_invariants(name, inv, devs);
        dra_devices_free(devs);
        inv_free(inv);
        n++;
    }
    closedir(d);
    assert_true(n >= 10);
}

/* The attributes every device of a machine shares. */
struct want_gpu {
    const char *product, *brand, *arch, *cc;
};

static void check_gpu_attrs(const struct dra_device *d, const struct want_gpu *w,
                            const char *bus_id)
{
    assert_string_equal(tx_attr(d, "productName"), w->product);
    assert_string_equal(tx_attr(d, "brand"), w->brand);
    assert_string_equal(tx_attr(d, "architecture"), w->arch);
    assert_string_equal(tx_attr(d, "cudaComputeCapability"), w->cc);
    assert_int_equal(dra_device_attr(d, "cudaComputeCapability")->kind, DRA_ATTR_VERSION);
    assert_string_equal(tx_attr(d, "driverVersion"), "570.158.1");
    assert_int_equal(dra_device_attr(d, "driverVersion")->kind, DRA_ATTR_VERSION);
    assert_string_equal(tx_attr(d, "cudaDriverVersion"), "12.8.0");
    assert_string_equal(tx_attr(d, DRA_PCI_BUS_ID_ATTR), bus_id);
    assert_int_equal(dra_device_attr(d, DRA_PCI_BUS_ID_ATTR)->kind, DRA_ATTR_STRING);
}

static void test_dra_devices_h100(void **state)
{
    static const struct want_gpu h100 = {"NVIDIA H100 80GB HBM3", "Nvidia", "Hopper", "9.0.0"};
    struct inv_inventory *inv = tx_machine("h100-nvswitch-8");
    struct dra_devices *devs = tx_devices(inv);
    (void)state;

    assert_int_equal(devs->n_devices, 8);
    for (size_t i = 0; i < 8; i++) {
        const struct dra_device *d = &devs->devices[i];
        char name[16], bus[32];
        snprintf(name, sizeof(name), "gpu-%zu", i);
        assert_string_equal(d->info.name, name);
        assert_int_equal(d->info.type, DRA_DEVICE_GPU);
        assert_string_equal(tx_cap(d, "memory"), "81559Mi");
        assert_int_equal(dra_pci_bus_id(inv->gpus[i].pci_bus_id, bus, sizeof(bus)), 0);
        check_gpu_attrs(d, &h100, bus);
    }
    assert_string_equal(tx_attr(&devs->devices[0], DRA_PCI_BUS_ID_ATTR), "0000:10:00.0");
    dra_devices_free(devs);
    inv_free(inv);
}

static void test_dra_devices_l20_t4(void **state)
{
    static const struct want_gpu l20 = {"NVIDIA L20", "Nvidia", "Ada Lovelace", "8.9.0"};
    static const struct want_gpu t4 = {"Tesla T4", "Nvidia", "Turing", "7.5.0"};
    struct inv_inventory *inv = tx_machine("l20-node");
    struct dra_devices *devs = tx_devices(inv);
    (void)state;

    assert_int_equal(devs->n_devices, 1);
    assert_string_equal(devs->devices[0].info.name, "gpu-0");
    check_gpu_attrs(&devs->devices[0], &l20, "0000:10:00.0");
    assert_string_equal(tx_cap(&devs->devices[0], "memory"), "46068Mi");
    dra_devices_free(devs);
    inv_free(inv);

    inv = tx_machine("t4-node");
    devs = tx_devices(inv);
    assert_int_equal(devs->n_devices, 1);
    check_gpu_attrs(&devs->devices[0], &t4, "0000:10:00.0");
    assert_string_equal(tx_cap(&devs->devices[0], "memory"), "15Gi"); /* 15360 MiB */
    dra_devices_free(devs);
    inv_free(inv);
}

static void test_dra_devices_a100_all_1g(void **state)
{
    static const struct want_gpu a100 = {"NVIDIA A100-SXM4-80GB", "Nvidia", "Ampere", "8.0.0"};
    static const char *const caps[][2] = {
        {"multiprocessors", "14"}, {"copyEngines", "1"}, {"decoders", "0"},    {"encoders", "0"},
        {"jpegEngines", "0"},      {"ofaEngines", "0"},  {"memory", "9728Mi"},
    };
    struct inv_inventory *inv = tx_machine("a100-80gb-all-1g");
    struct dra_devices *devs = tx_devices(inv);
    (void)state;

    assert_int_equal(devs->n_devices, 7 * inv->n_gpus);
    for (size_t i = 0; i < devs->n_devices; i++) {
        const struct dra_device *d = &devs->devices[i];
        const struct inv_gpu *g = &inv->gpus[i / 7];
        char name[DRA_NAME_MAX], slice[32];
        snprintf(name, sizeof(name), "gpu-%zu-mig-1g10gb-19-%zu", i / 7, i % 7);
        assert_string_equal(d->info.name, name);
        assert_int_equal(d->info.type, DRA_DEVICE_MIG);
        assert_int_equal(d->info.mig_index, (int)(i % 7));
        assert_string_equal(tx_attr(d, "profile"), "1g.10gb");
        assert_string_equal(tx_attr(d, "parentUUID"), g->uuid);
        assert_string_equal(tx_attr(d, "uuid"), g->migs[i % 7].uuid);
        check_gpu_attrs(d, &a100, tx_attr(d, DRA_PCI_BUS_ID_ATTR));
        for (size_t c = 0; c < GS_ARRAY_SIZE(caps); c++)
            assert_string_equal(tx_cap(d, caps[c][0]), caps[c][1]);
        snprintf(slice, sizeof(slice), "memorySlice%zu", i % 7);
        assert_string_equal(tx_cap(d, slice), "1");
        assert_int_equal(d->n_capacities, 8);
    }
    assert_string_equal(tx_attr(&devs->devices[7], DRA_PCI_BUS_ID_ATTR),
                        tx_attr(&devs->devices[13], DRA_PCI_BUS_ID_ATTR));
    dra_devices_free(devs);
    inv_free(inv);
}

static void test_dra_devices_h20_mig(void **state)
{
    struct inv_inventory *inv = tx_machine("h20-mig-7x1g");
    struct dra_devices *devs = tx_devices(inv);
    const struct dra_device *d;
    (void)state;

    assert_int_equal(devs->n_devices, 56);
    d = dra_devices_find(devs, "gpu-7-mig-1g12gb-19-6");
    assert_non_null(d);
    assert_string_equal(tx_attr(d, "productName"), "NVIDIA H20");
    assert_string_equal(tx_attr(d, "architecture"), "Hopper");
    assert_string_equal(tx_attr(d, "profile"), "1g.12gb");
    assert_string_equal(tx_cap(d, "memory"), "11Gi"); /* 11264 MiB */
    assert_string_equal(tx_cap(d, "multiprocessors"), "10");
    assert_string_equal(tx_cap(d, "decoders"), "1");
    assert_string_equal(tx_cap(d, "jpegEngines"), "1");
    assert_string_equal(tx_cap(d, "memorySlice6"), "1");
    assert_null(tx_cap(d, "memorySlice5"));
    assert_int_equal(d->info.minor, 7);
    assert_null(dra_devices_find(devs, "gpu-7"));
    dra_devices_free(devs);
    inv_free(inv);
}

/* GPU 0 with MIG (4g.20gb at 0, 3g.20gb at 4), whole GPUs of four other models. */
static void test_dra_devices_mixed(void **state)
{
    struct inv_inventory *inv = tx_machine("mixed-models");
    struct dra_devices *devs = tx_devices(inv);
    const struct dra_device *d;
    (void)state;

    d = dra_devices_find(devs, "gpu-0-mig-4g20gb-5-0");
    assert_non_null(d);
    assert_string_equal(tx_cap(d, "multiprocessors"), "56");
    assert_string_equal(tx_cap(d, "copyEngines"), "4");
    assert_string_equal(tx_cap(d, "memory"), "20096Mi");
    for (int s = 0; s < 4; s++) {
        char name[32];
        snprintf(name, sizeof(name), "memorySlice%d", s);
        assert_string_equal(tx_cap(d, name), "1");
    }
    d = dra_devices_find(devs, "gpu-0-mig-3g20gb-9-4");
    assert_non_null(d);
    assert_string_equal(tx_cap(d, "multiprocessors"), "42");
    assert_string_equal(tx_cap(d, "memorySlice7"), "1");
    assert_null(dra_devices_find(devs, "gpu-0"));
    d = dra_devices_find(devs, "gpu-1");
    assert_string_equal(tx_attr(d, "productName"), "NVIDIA A30");
    assert_string_equal(tx_cap(d, "memory"), "24Gi");
    d = dra_devices_find(devs, "gpu-4");
    assert_string_equal(tx_attr(d, "productName"), "Tesla T4");
    assert_string_equal(tx_attr(d, "architecture"), "Turing");
    d = dra_devices_find(devs, "gpu-5");
    assert_string_equal(tx_attr(d, "productName"), "NVIDIA RTX 6000 Ada Generation");
    assert_string_equal(tx_attr(d, "brand"), "NvidiaRTX");
    assert_string_equal(tx_attr(d, "architecture"), "Ada Lovelace");
    assert_string_equal(tx_cap(d, "memory"), "49140Mi");
    assert_string_equal(tx_attr(d, DRA_PCI_BUS_ID_ATTR), "0000:38:00.0");
    dra_devices_free(devs);
    inv_free(inv);
}

/* An unhealthy GPU, and the parent of MIG devices, mark what they hold; a MIG device alone. */
static void test_dra_devices_unhealthy(void **state)
{
    struct inv_inventory *inv = tx_machine("mixed-models");
    struct dra_devices *devs = NULL;
    char **bad = strv_new();
    (void)state;

    assert_int_equal(strv_push(&bad, inv->gpus[1].uuid), 0);
    assert_int_equal(strv_push(&bad, inv->gpus[0].migs[1].uuid), 0);
    assert_int_equal(
        dra_devices_build(inv, &(struct dra_devices_options){.unhealthy_uuids = bad}, &devs, NULL),
        0);
    assert_true(dra_devices_find(devs, "gpu-0-mig-4g20gb-5-0")->healthy);
    assert_false(dra_devices_find(devs, "gpu-0-mig-3g20gb-9-4")->healthy);
    assert_false(dra_devices_find(devs, "gpu-1")->healthy);
    assert_true(dra_devices_find(devs, "gpu-2")->healthy);
    dra_devices_free(devs);
    strv_free(bad);

    bad = strv_new();
    assert_int_equal(strv_push(&bad, inv->gpus[0].uuid), 0);
    assert_int_equal(
        dra_devices_build(inv, &(struct dra_devices_options){.unhealthy_uuids = bad}, &devs, NULL),
        0);
    assert_false(dra_devices_find(devs, "gpu-0-mig-4g20gb-5-0")->healthy);
    assert_false(dra_devices_find(devs, "gpu-0-mig-3g20gb-9-4")->healthy);
    dra_devices_free(devs);
    strv_free(bad);
    inv_free(inv);
}

/* A PCIe root the shell found goes on the GPU and on its MIG devices; none, no attribute. */
static void test_dra_devices_pcie_root(void **state)
{
    struct inv_inventory *inv = tx_machine("mixed-models");
    const char *roots[8] = {"pci0000:00", NULL, "", "pci0000:80"};
    struct dra_devices_options o = {.pcie_roots = roots};
    struct dra_devices *devs = NULL;
    (void)state;

    assert_true(inv->n_gpus <= GS_ARRAY_SIZE(roots));
    assert_int_equal(dra_devices_build(inv, &o, &devs, NULL), 0);
    assert_string_equal(tx_attr(dra_devices_find(devs, "gpu-0-mig-4g20gb-5-0"), DRA_PCIE_ROOT_ATTR),
                        "pci0000:00");
    assert_string_equal(tx_attr(dra_devices_find(devs, "gpu-0-mig-3g20gb-9-4"), DRA_PCIE_ROOT_ATTR),
                        "pci0000:00");
    assert_null(tx_attr(dra_devices_find(devs, "gpu-1"), DRA_PCIE_ROOT_ATTR));
    assert_null(tx_attr(dra_devices_find(devs, "gpu-2"), DRA_PCIE_ROOT_ATTR));
    assert_string_equal(tx_attr(dra_devices_find(devs, "gpu-3"), DRA_PCIE_ROOT_ATTR), "pci0000:80");
    assert_int_equal(dra_devices_find(devs, "gpu-3")->n_attrs, GS_ARRAY_SIZE(common_attrs) + 1);
    dra_devices_free(devs);
    inv_free(inv);
}

/* The slice changes with the MIG layout and with health, not with a rebuild of the same. */
static void test_dra_devices_same_slice(void **state)
{
    struct inv_inventory *inv = tx_machine("mixed-models");
    struct dra_devices *a = tx_devices(inv), *b = tx_devices(inv);
    (void)state;

    assert_true(dra_devices_same_slice(a, b));
    assert_true(dra_devices_same_slice(NULL, NULL));
    assert_false(dra_devices_same_slice(a, NULL));
    b->devices[2].healthy = false;
    assert_false(dra_devices_same_slice(a, b));
    a->devices[2].healthy = false;
    assert_true(dra_devices_same_slice(a, b)); /* unhealthy devices are not published */
    str_copy(b->devices[0].capacities[0].value, "15", sizeof(b->devices[0].capacities[0].value));
    assert_false(dra_devices_same_slice(a, b));
    dra_devices_free(b);
    inv->gpus[0].n_migs = 1; /* a MIG device gone */
    b = tx_devices(inv);
    a->devices[2].healthy = true;
    assert_false(dra_devices_same_slice(a, b));
    dra_devices_free(a);
    dra_devices_free(b);
    inv_free(inv);
}

/* Shapes NVIDIA's driver refuses (semver.MustParse would panic) are errors naming them. */
static void test_dra_devices_bad_inventory(void **state)
{
    struct inv_inventory *inv = tx_machine("l20-node");
    struct dra_devices *devs = NULL;
    struct error err = {0};
    (void)state;

    str_copy(inv->driver_version, "570.x", sizeof(inv->driver_version));
    assert_int_equal(dra_devices_build(inv, NULL, &devs, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "driver version '570.x'"));
    assert_null(devs);
    str_copy(inv->driver_version, "570.158.01", sizeof(inv->driver_version));
    str_copy(inv->gpus[0].pci_bus_id, "", sizeof(inv->gpus[0].pci_bus_id));
    assert_int_equal(dra_devices_build(inv, NULL, &devs, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "PCI bus id"));
    inv_free(inv);
}

static void test_dra_quantity_binary(void **state)
{
    static const struct {
        uint64_t v;
        const char *want;
    } t[] = {
        {0, "0"},
        {1, "1"},
        {14, "14"},
        {1023, "1023"},
        {1024, "1Ki"},
        {1536, "1536"},
        {46068ull << 20, "46068Mi"},
        {15360ull << 20, "15Gi"},
        {81920ull << 20, "80Gi"},
        {9728ull << 20, "9728Mi"},
        {1ull << 40, "1Ti"},
        {1ull << 60, "1Ei"},
        {1ull << 62, "4Ei"},
    };
    char buf[32];
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(t); i++) {
        assert_int_equal(dra_quantity_binary(t[i].v, buf, sizeof(buf)), 0);
        assert_string_equal(buf, t[i].want);
    }
    assert_int_equal(dra_quantity_binary(46068ull << 20, buf, 4), -ENAMETOOLONG);
}

static void test_dra_semver(void **state)
{
    static const char *const t[][2] = {
        {"570.158.01", "570.158.1"}, {"8.9", "8.9.0"},    {"12.8", "12.8.0"},
        {"535.54.03", "535.54.3"},   {"v1.2.3", "1.2.3"}, {"7", "7.0.0"},
        {"580.65.06", "580.65.6"},
    };
    static const char *const bad[] = {"", "x", "1.", "1.2.3.4", "1..2", "-1", "1.2a", NULL};
    char buf[64];
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(t); i++) {
        assert_int_equal(dra_semver(t[i][0], buf, sizeof(buf)), 0);
        assert_string_equal(buf, t[i][1]);
    }
    for (size_t i = 0; bad[i]; i++)
        if (dra_semver(bad[i], buf, sizeof(buf)) != -EINVAL)
            fail_msg("'%s' accepted as a version", bad[i]);
    assert_int_equal(dra_semver(NULL, buf, sizeof(buf)), -EINVAL);
}

static void test_dra_pci_bus_id(void **state)
{
    char buf[32];
    (void)state;

    assert_int_equal(dra_pci_bus_id("00000000:3B:00.0", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "0000:3b:00.0");
    assert_int_equal(dra_pci_bus_id("00000001:AF:00.0", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "0001:af:00.0");
    assert_int_equal(dra_pci_bus_id("0000:10:00.0", buf, sizeof(buf)), 0);
    assert_string_equal(buf, ":10:00.0"); /* go-nvlib trims "0000" whatever follows */
    assert_int_equal(dra_pci_bus_id("", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(dra_pci_bus_id("nonsense", buf, sizeof(buf)), -EINVAL);
}

static void test_dra_brand_and_architecture_names(void **state)
{
    static const char *const brands[][2] = {
        {"NVIDIA", "Nvidia"},
        {"NVIDIA RTX", "NvidiaRTX"},
        {"Tesla", "Tesla"},
        {"Quadro", "Quadro"},
        {"GeForce", "GeForce"},
        {"GeForce RTX", "GeForceRTX"},
        {"GRID", "Grid"},
        {"Titan RTX", "TitanRTX"},
        {"Quadro RTX", "QuadroRTX"},
        {"NVIDIA Virtual PC", "NvidiaVPC"},
        {"unknown", "Unknown"},
        {"NVIDIA Cloud Gaming", "NvidiaCloudGaming"},
    };
    static const char *const archs[][2] = {
        {"turing", "Turing"},   {"ampere", "Ampere"},       {"ada-lovelace", "Ada Lovelace"},
        {"hopper", "Hopper"},   {"blackwell", "Blackwell"}, {"volta", "Volta"},
        {"unknown", "Unknown"}, {"orin", "Unknown"},
    };
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(brands); i++)
        assert_string_equal(dra_brand_name(brands[i][0]), brands[i][1]);
    for (size_t i = 0; i < GS_ARRAY_SIZE(archs); i++)
        assert_string_equal(dra_architecture_name(archs[i][0]), archs[i][1]);
    assert_string_equal(dra_brand_name(NULL), "Unknown");
}

int run_devices_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_devices_every_example_machine),
        cmocka_unit_test(test_dra_devices_h100),
        cmocka_unit_test(test_dra_devices_l20_t4),
        cmocka_unit_test(test_dra_devices_a100_all_1g),
        cmocka_unit_test(test_dra_devices_h20_mig),
        cmocka_unit_test(test_dra_devices_mixed),
        cmocka_unit_test(test_dra_devices_unhealthy),
        cmocka_unit_test(test_dra_devices_pcie_root),
        cmocka_unit_test(test_dra_devices_same_slice),
        cmocka_unit_test(test_dra_devices_bad_inventory),
        cmocka_unit_test(test_dra_quantity_binary),
        cmocka_unit_test(test_dra_semver),
        cmocka_unit_test(test_dra_pci_bus_id),
        cmocka_unit_test(test_dra_brand_and_architecture_names),
    };
    return cmocka_run_group_tests_name("dra devices", tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_loader.c: src/gpu/loader.c — the candidate list (pure, table-driven), locating the
 * library with temp dirs standing in for the driver roots, and open failures (no library,
 * not a library, a library without NVML's symbols) that must fail with a clear message. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "gpu/internal.h"
#include "tests.h"

#define LIB "libnvidia-ml.so.1"

static void test_gpu_nvml_candidates_order_and_roots(void **state)
{
    static const struct {
        struct gpu_nvml_options opts;
        size_t want_n;
        /* index → expected path; checked entries only */
        struct {
            size_t i;
            const char *path;
        } want[4];
    } cases[] = {
        /* defaults: /driver-root first, then "/", then the bare name */
        {{NULL, NULL, NULL, NULL},
         13,
         {{0, "/driver-root/usr/lib64/" LIB},
          {5, "/driver-root/lib/aarch64-linux-gnu/" LIB},
          {6, "/usr/lib64/" LIB},
          {12, LIB}}},
        /* empty strings mean the defaults too */
        {{"", "", "", NULL}, 13, {{0, "/driver-root/usr/lib64/" LIB}, {6, "/usr/lib64/" LIB}}},
        /* explicit library: only that */
        {{"/opt/nvml/" LIB, "/x", "/y", NULL}, 1, {{0, "/opt/nvml/" LIB}}},
        /* trailing slashes on roots collapse */
        {{NULL, "/run/nvidia/driver/", "/host//", NULL},
         13,
         {{0, "/host/usr/lib64/" LIB},
          {1, "/host/usr/lib/x86_64-linux-gnu/" LIB},
          {6, "/run/nvidia/driver/usr/lib64/" LIB},
          {11, "/run/nvidia/driver/lib/aarch64-linux-gnu/" LIB}}},
        /* the same root twice: no duplicates */
        {{NULL, "/", "/", NULL}, 7, {{0, "/usr/lib64/" LIB}, {3, "/lib64/" LIB}, {6, LIB}}},
    };

    (void)state;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char **v = NULL;
        struct error err = {0};

        assert_int_equal(gpu_nvml_candidates(&cases[c].opts, &v, &err), 0);
        if (strv_length(v) != cases[c].want_n)
            fail_msg("case %zu: %zu candidates, want %zu", c, strv_length(v), cases[c].want_n);
        for (size_t k = 0; k < 4 && cases[c].want[k].path; k++)
            if (strcmp(v[cases[c].want[k].i], cases[c].want[k].path) != 0)
                fail_msg("case %zu: [%zu] = '%s', want '%s'", c, cases[c].want[k].i,
                         v[cases[c].want[k].i], cases[c].want[k].path);
        strv_free(v);
    }
}

static void test_gpu_nvml_candidates_null_options(void **state)
{
    char **v = NULL;

    (void)state;
    assert_int_equal(gpu_nvml_candidates(NULL, &v, NULL), 0);
    assert_int_equal(strv_length(v), 13);
    assert_string_equal(v[0], "/driver-root/usr/lib64/" LIB);
    strv_free(v);
}

/* Table: which files exist under the two temp roots, and which one must be found. */
static void test_gpu_nvml_locate_with_temp_roots(void **state)
{
    static const struct {
        const char *ctr_files[3];
        const char *host_files[3];
        const char *ctr_dirs[2]; /* directories named like the library: not a match */
        const char *want;        /* "ctr:<rel>", "host:<rel>" or the bare name */
    } cases[] = {
        {{NULL}, {"lib/x86_64-linux-gnu/" LIB}, {NULL}, "host:lib/x86_64-linux-gnu/" LIB},
        {{"usr/lib64/" LIB}, {"usr/lib64/" LIB}, {NULL}, "ctr:usr/lib64/" LIB},
        {{"lib64/" LIB, "usr/lib/aarch64-linux-gnu/" LIB},
         {NULL},
         {NULL},
         "ctr:usr/lib/aarch64-linux-gnu/" LIB},
        {{NULL}, {"lib64/" LIB, "lib/aarch64-linux-gnu/" LIB}, {NULL}, "host:lib64/" LIB},
        {{NULL}, {NULL}, {NULL}, LIB},
        {{NULL}, {"usr/lib/" LIB}, {NULL}, LIB}, /* not one of the searched dirs */
        {{NULL}, {"lib64/" LIB}, {"usr/lib64/" LIB}, "host:lib64/" LIB},
    };

    (void)state;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char *ctr = tmpdir_make(), *host = tmpdir_make();
        struct gpu_nvml_options o = {.driver_root = host, .driver_root_ctr_path = ctr};
        struct strbuf want = STRBUF_INIT;
        struct error err = {0};
        char *got = NULL;

        for (size_t k = 0; k < 3 && cases[c].ctr_files[k]; k++)
            free(touch_under(ctr, cases[c].ctr_files[k]));
        for (size_t k = 0; k < 3 && cases[c].host_files[k]; k++)
            free(touch_under(host, cases[c].host_files[k]));
        for (size_t k = 0; k < 2 && cases[c].ctr_dirs[k]; k++)
            free(mkdir_under(ctr, cases[c].ctr_dirs[k]));
        if (str_startswith(cases[c].want, "ctr:"))
            strbuf_printf(&want, "%s/%s", ctr, cases[c].want + 4);
        else if (str_startswith(cases[c].want, "host:"))
            strbuf_printf(&want, "%s/%s", host, cases[c].want + 5);
        else
            strbuf_puts(&want, cases[c].want);

        assert_int_equal(gpu_nvml_locate(&o, &got, &err), 0);
        if (strcmp(got, strbuf_str(&want)) != 0)
            fail_msg("case %zu: located '%s', want '%s'", c, got, strbuf_str(&want));
        free(got);
        strbuf_release(&want);
        tmpdir_remove(ctr);
        tmpdir_remove(host);
        free(ctr);
        free(host);
    }
}

static void test_gpu_nvml_locate_follows_symlink(void **state)
{
    char *root = tmpdir_make();
    char *real = touch_under(root, "usr/lib64/libnvidia-ml.so.570.158.01");
    char *link = NULL, *got = NULL;
    struct strbuf sb = STRBUF_INIT;
    struct gpu_nvml_options o = {.driver_root = root, .driver_root_ctr_path = root};

    (void)state;
    strbuf_printf(&sb, "%s/usr/lib64/" LIB, root);
    link = strbuf_take(&sb);
    assert_int_equal(symlink("libnvidia-ml.so.570.158.01", link), 0);
    assert_int_equal(gpu_nvml_locate(&o, &got, NULL), 0);
    assert_string_equal(got, link);
    free(got);
    free(link);
    free(real);
    tmpdir_remove(root);
    free(root);
}

static void test_gpu_nvml_locate_explicit_path(void **state)
{
    char *root = tmpdir_make();
    char *lib = touch_under(root, "custom/" LIB);
    struct strbuf missing = STRBUF_INIT;
    struct gpu_nvml_options o = {.library_path = lib};
    struct error err = {0};
    char *got = NULL;

    (void)state;
    assert_int_equal(gpu_nvml_locate(&o, &got, &err), 0);
    assert_string_equal(got, lib);
    free(got);

    strbuf_printf(&missing, "%s/nope/" LIB, root);
    o.library_path = strbuf_str(&missing);
    got = NULL;
    assert_int_equal(gpu_nvml_locate(&o, &got, &err), -ENOENT);
    assert_null(got);
    assert_non_null(strstr(err.msg, strbuf_str(&missing)));
    assert_non_null(strstr(err.msg, "--nvml-library"));

    /* a bare name is the dynamic linker's business */
    o.library_path = "libfoo.so.1";
    assert_int_equal(gpu_nvml_locate(&o, &got, &err), 0);
    assert_string_equal(got, "libfoo.so.1");
    free(got);

    strbuf_release(&missing);
    free(lib);
    tmpdir_remove(root);
    free(root);
}

static void test_gpu_nvml_options_from_env_fills_only_unset(void **state)
{
    struct gpu_nvml_options o = {.driver_root = "/flag"};

    (void)state;
    setenv("GPUSLICE_NVML_LIBRARY", "/env/" LIB, 1);
    setenv("NVIDIA_DRIVER_ROOT", "/env-root", 1);
    unsetenv("DRIVER_ROOT_CTR_PATH");
    setenv("CONTAINER_DRIVER_ROOT", "/env-ctr", 1);
    gpu_nvml_options_from_env(&o);
    assert_string_equal(o.library_path, "/env/" LIB);
    assert_string_equal(o.driver_root, "/flag");
    assert_string_equal(o.driver_root_ctr_path, "/env-ctr");

    setenv("DRIVER_ROOT_CTR_PATH", "/env-ctr-first", 1);
    o.driver_root_ctr_path = NULL;
    gpu_nvml_options_from_env(&o);
    assert_string_equal(o.driver_root_ctr_path, "/env-ctr-first");
    unsetenv("GPUSLICE_NVML_LIBRARY");
    unsetenv("NVIDIA_DRIVER_ROOT");
    unsetenv("DRIVER_ROOT_CTR_PATH");
    unsetenv("CONTAINER_DRIVER_ROOT");
}

static void test_gpu_nvml_open_no_library_found(void **state)
{
    char *ctr = tmpdir_make(), *host = tmpdir_make();
    struct gpu_nvml_options o = {.driver_root = host, .driver_root_ctr_path = ctr};
    struct gpu_nvml *n = NULL;
    struct error err = {0};
    int r;

    (void)state;
    r = gpu_nvml_open(&o, &n, &err);
    /* This machine has no NVIDIA driver: the dynamic linker cannot find it either. */
    assert_int_equal(r, -ENOENT);
    assert_null(n);
    assert_non_null(strstr(err.msg, LIB));
    assert_non_null(strstr(err.msg, ctr));
    assert_non_null(strstr(err.msg, host));
    assert_non_null(strstr(err.msg, "--driver-root"));
    tmpdir_remove(ctr);
    tmpdir_remove(host);
    free(ctr);
    free(host);
}

static void test_gpu_nvml_open_not_a_library(void **state)
{
    char *root = tmpdir_make();
    char *lib = NULL;
    struct gpu_nvml_options o = {0};
    struct gpu_nvml *n = NULL;
    struct error err = {0};

    (void)state;
    lib = touch_under(root, "usr/lib64/" LIB);
    write_under(root, "usr/lib64/" LIB, "this is not an ELF file\n");
    o.driver_root = root;
    o.driver_root_ctr_path = root;
    assert_int_equal(gpu_nvml_open(&o, &n, &err), -ENOEXEC);
    assert_null(n);
    assert_non_null(strstr(err.msg, lib));
    assert_non_null(strstr(err.msg, "cannot load NVML library"));
    free(lib);
    tmpdir_remove(root);
    free(root);
}

static void test_gpu_nvml_open_missing_required_symbol(void **state)
{
    /* libc is a real shared library without a single NVML symbol. */
    struct gpu_nvml_options o = {.library_path = "libc.so.6"};
    struct gpu_nvml *n = NULL;
    struct error err = {0};

    (void)state;
    assert_int_equal(gpu_nvml_open(&o, &n, &err), -ENOEXEC);
    assert_null(n);
    assert_non_null(strstr(err.msg, "libc.so.6"));
    assert_non_null(strstr(err.msg, "required symbol nvmlInit_v2"));
}

/* An old driver: only the required symbols. Every missing optional one is a load warning
 * naming it, and the read fills the fields those symbols would have given with "unknown". */
static void test_gpu_nvml_open_old_driver_degrades(void **state)
{
    static const char *const optional[] = {
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetNumaNodeId",
        "nvmlDeviceGetArchitecture",
        "nvmlDeviceGetTopologyCommonAncestor",
        "nvmlDeviceGetNvLinkState",
        "nvmlDeviceGetNvLinkRemotePciInfo_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetMigMode",
    };
    char *sysfs = tmpdir_make();
    struct gpu_nvml_options o = {.library_path = GS_TEST_NVML_MINIMAL, .sysfs_root = sysfs};
    struct inv_inventory *inv = NULL;
    struct gpu_nvml *n = NULL;
    struct error err = {0};
    char *const *w;

    (void)state;
    write_under(sysfs, "bus/pci/devices/0000:1a:00.0/numa_node", "1\n");
    write_under(sysfs, "bus/pci/devices/0000:1b:00.0/numa_node", "-1\n");
    if (gpu_nvml_open(&o, &n, &err) < 0)
        fail_msg("%s", err.msg);
    w = gpu_nvml_load_warnings(n);
    assert_int_equal(strv_length(w), GS_ARRAY_SIZE(optional));
    for (size_t i = 0; i < GS_ARRAY_SIZE(optional); i++) {
        bool found = false;
        for (size_t k = 0; w[k]; k++)
            found = found || (strstr(w[k], optional[i]) && strstr(w[k], GS_TEST_NVML_MINIMAL));
        if (!found)
            fail_msg("no load warning for %s", optional[i]);
    }

    if (gpu_inventory_read(n, &inv, &err) < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(strv_length(gpu_nvml_read_warnings(n)), 0);
    assert_string_equal(inv->driver_version, "418.226.00");
    assert_int_equal(inv->cuda_version, 10010); /* through the v1 call */
    assert_int_equal(inv->n_gpus, 2);
    assert_string_equal(inv->gpus[0].name, "Tesla V100-SXM2-16GB");
    assert_string_equal(inv->gpus[0].brand, "Tesla");
    assert_string_equal(inv->gpus[0].architecture, "unknown");
    assert_int_equal(inv->gpus[0].memory_mib, 16160);
    assert_int_equal(inv->gpus[1].minor, 1);
    assert_int_equal(inv->gpus[0].numa_node, 1); /* sysfs */
    assert_int_equal(inv->gpus[1].numa_node, -1);
    assert_false(inv->gpus[0].mig_capable);
    assert_int_equal(inv->gpus[0].n_procs, 0);
    assert_int_equal(inv_link_between(inv, 0, 1)->nvlinks, 0);
    assert_int_equal(inv_link_between(inv, 0, 1)->pcie, INV_PCIE_SYSTEM);
    assert_int_equal(inv_link_between(inv, 1, 0)->pcie, INV_PCIE_SYSTEM);
    inv_free(inv);
    gpu_nvml_close(n);
    tmpdir_remove(sysfs);
    free(sysfs);
}

static void test_gpu__nvml_errno_maps_codes(void **state)
{
    static const struct {
        nvmlReturn_t rc;
        int want;
    } cases[] = {
        {NVML_ERROR_NOT_SUPPORTED, -EOPNOTSUPP},
        {NVML_ERROR_NO_PERMISSION, -EPERM},
        {NVML_ERROR_NOT_FOUND, -ENOENT},
        {NVML_ERROR_DRIVER_NOT_LOADED, -ENODEV},
        {NVML_ERROR_LIBRARY_NOT_FOUND, -ENODEV},
        {NVML_ERROR_MEMORY, -ENOMEM},
        {NVML_ERROR_INVALID_ARGUMENT, -EINVAL},
        {NVML_ERROR_GPU_IS_LOST, -EIO},
        {NVML_ERROR_UNKNOWN, -EIO},
        {(nvmlReturn_t)12345, -EIO},
    };

    (void)state;
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++)
        if (gpu__nvml_errno(cases[i].rc) != cases[i].want)
            fail_msg("rc %d: %d, want %d", cases[i].rc, gpu__nvml_errno(cases[i].rc),
                     cases[i].want);
    /* Without a library, the text still says something. */
    assert_string_equal(gpu__nvml_strerror(NULL, NVML_ERROR_UNKNOWN), "Unknown Error");
    assert_string_equal(gpu__nvml_strerror(NULL, NVML_ERROR_IN_USE), "unknown NVML error");
}

static void test_gpu__warn_is_bounded(void **state)
{
    char **w = strv_new();

    (void)state;
    for (int i = 0; i < 3 * GPU__MAX_WARNINGS; i++)
        assert_int_equal(gpu__warn(&w, "warning %d", i), 0);
    assert_int_equal(strv_length(w), GPU__MAX_WARNINGS);
    assert_string_equal(w[0], "warning 0");
    strv_free(w);
}

static void test_gpu_nvml_close_accepts_null(void **state)
{
    (void)state;
    gpu_nvml_close(NULL);
}

int run_loader_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_nvml_candidates_order_and_roots),
        cmocka_unit_test(test_gpu_nvml_candidates_null_options),
        cmocka_unit_test(test_gpu_nvml_locate_with_temp_roots),
        cmocka_unit_test(test_gpu_nvml_locate_follows_symlink),
        cmocka_unit_test(test_gpu_nvml_locate_explicit_path),
        cmocka_unit_test(test_gpu_nvml_options_from_env_fills_only_unset),
        cmocka_unit_test(test_gpu_nvml_open_no_library_found),
        cmocka_unit_test(test_gpu_nvml_open_not_a_library),
        cmocka_unit_test(test_gpu_nvml_open_missing_required_symbol),
        cmocka_unit_test(test_gpu_nvml_open_old_driver_degrades),
        cmocka_unit_test(test_gpu__nvml_errno_maps_codes),
        cmocka_unit_test(test_gpu__warn_is_bounded),
        cmocka_unit_test(test_gpu_nvml_close_accepts_null),
    };
    return cmocka_run_group_tests_name("gpu_loader", tests, NULL, NULL);
}

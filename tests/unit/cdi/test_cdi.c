/* SPDX-License-Identifier: Apache-2.0 */
/* test_cdi.c: the CDI spec over fake driver roots (device nodes as plain files, libraries,
 * an ld.so.cache or none, the driver's mig-minors): device names per id strategy, host path
 * rewriting, hooks and their switches, the errors for what is missing, ld.so.cache parsing,
 * and the atomic write. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cdi/cdi.h"
#include "fixture.h"

static json_t *build(struct fx *f)
{
    char *text = NULL;
    struct error err = {0};
    int r = cdi_spec_build(&f->inv, &f->o, &text, &err);
    if (r < 0)
        fail_msg("cdi_spec_build: %s", err.msg);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    free(text);
    assert_non_null(j);
    return j;
}

static int build_error(struct fx *f, struct error *err)
{
    char *text = NULL;
    int r = cdi_spec_build(&f->inv, &f->o, &text, err);
    assert_null(text);
    return r;
}

/* the hook whose args[1] is name (NULL if absent) */
static json_t *hook(json_t *spec, const char *name)
{
    size_t i;
    json_t *h;
    json_array_foreach(json_object_get(json_object_get(spec, "containerEdits"), "hooks"), i, h)
    {
        json_t *args = json_object_get(h, "args");
        if (strcmp(json_string_value(json_array_get(args, 1)), name) == 0)
            return h;
    }
    return NULL;
}

static void test_uuid_names_and_edits(void **state)
{
    struct fx *f = *state;
    json_t *s = build(f);
    char buf[512];

    assert_string_equal(json_string_value(json_object_get(s, "cdiVersion")), "0.5.0");
    assert_string_equal(json_string_value(json_object_get(s, "kind")),
                        "k8s.device-plugin.nvidia.com/gpu");
    /* 2 GPUs + 2 MIG devices + all */
    assert_int_equal(json_array_size(json_object_get(s, "devices")), 5);
    json_t *g0 = fx_device(s, f->gpus[0].uuid);
    assert_non_null(g0);
    fx_node_paths(json_object_get(g0, "containerEdits"), buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia0");
    json_t *mig = fx_device(s, f->migs[1].uuid);
    assert_non_null(mig);
    fx_node_paths(json_object_get(mig, "containerEdits"), buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia1,/dev/nvidia-caps/nvidia-cap156,"
                             "/dev/nvidia-caps/nvidia-cap157");
    json_t *all = fx_device(s, "all");
    assert_non_null(all);
    fx_node_paths(json_object_get(all, "containerEdits"), buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia0,/dev/nvidia1,/dev/nvidia-caps/nvidia-cap147,"
                             "/dev/nvidia-caps/nvidia-cap148,/dev/nvidia-caps/nvidia-cap156,"
                             "/dev/nvidia-caps/nvidia-cap157");
    /* common: control nodes that exist (no modeset here), host dev root "/" */
    json_t *edits = json_object_get(s, "containerEdits");
    fx_node_paths(edits, buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidiactl,/dev/nvidia-uvm");
    json_t *ctl = json_array_get(json_object_get(edits, "deviceNodes"), 0);
    assert_string_equal(json_string_value(json_object_get(ctl, "hostPath")), "/dev/nvidiactl");
    /* libraries of this version only, host paths under the host driver root */
    assert_true(fx_has_mount(s, "/usr/lib/x86_64-linux-gnu/libcuda.so." VER,
                             "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so." VER));
    assert_true(fx_has_mount(s, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so." VER,
                             "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so." VER));
    assert_false(fx_has_mount(s, "/usr/lib/x86_64-linux-gnu/libcuda.so.535.1",
                              "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.535.1"));
    assert_true(fx_has_mount(s, "/usr/bin/nvidia-smi", "/run/nvidia/driver/usr/bin/nvidia-smi"));
    assert_true(fx_has_mount(s, "/lib/firmware/nvidia/" VER "/gsp_ga10x.bin",
                             "/run/nvidia/driver/lib/firmware/nvidia/" VER "/gsp_ga10x.bin"));
    assert_true(fx_has_mount(s, "/run/nvidia-persistenced/socket",
                             "/run/nvidia/driver/run/nvidia-persistenced/socket"));
    assert_int_equal(json_array_size(json_object_get(edits, "mounts")), 5);
    /* env */
    json_t *env = json_object_get(edits, "env");
    assert_string_equal(json_string_value(json_array_get(env, 0)), "NVIDIA_VISIBLE_DEVICES=void");
    assert_string_equal(json_string_value(json_array_get(env, 1)),
                        "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu");
    /* hooks, nvidia-cdi-hook style (no "hook" word) */
    json_t *h = hook(s, "update-ldcache");
    assert_non_null(h);
    assert_string_equal(json_string_value(json_object_get(h, "hookName")), "createContainer");
    assert_string_equal(json_string_value(json_object_get(h, "path")), "/usr/bin/nvidia-cdi-hook");
    json_t *args = json_object_get(h, "args");
    assert_string_equal(json_string_value(json_array_get(args, 0)), "nvidia-cdi-hook");
    assert_string_equal(json_string_value(json_array_get(args, 2)), "--folder");
    assert_string_equal(json_string_value(json_array_get(args, 3)), "/usr/lib/x86_64-linux-gnu");
    h = hook(s, "create-symlinks");
    assert_non_null(h);
    assert_string_equal(json_string_value(json_array_get(json_object_get(h, "args"), 3)),
                        "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so");
    h = hook(s, "enable-cuda-compat");
    assert_non_null(h);
    assert_string_equal(json_string_value(json_array_get(json_object_get(h, "args"), 2)),
                        "--host-driver-version=" VER);
    assert_non_null(hook(s, "disable-device-node-modification"));
    json_decref(s);
}

static void test_index_names(void **state)
{
    struct fx *f = *state;
    f->o.index_names = true;
    json_t *s = build(f);
    assert_non_null(fx_device(s, "0"));
    assert_non_null(fx_device(s, "1"));
    assert_non_null(fx_device(s, "1:0"));
    assert_non_null(fx_device(s, "1:1"));
    assert_null(fx_device(s, f->gpus[0].uuid));
    json_decref(s);
}

static void test_nvidia_ctk_hook_and_disabled_hooks(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    f->o.hook_path = "/usr/local/nvidia/toolkit/nvidia-ctk";
    assert_int_equal(
        cdi_parse_disabled_hooks("update-ldcache, enable-cuda-compat", &f->o.disabled_hooks, &err),
        0);
    json_t *s = build(f);
    json_t *h = hook(s, "hook"); /* args: nvidia-ctk hook <name> */
    assert_non_null(h);
    assert_string_equal(json_string_value(json_array_get(json_object_get(h, "args"), 0)),
                        "nvidia-ctk");
    size_t i;
    json_t *x;
    unsigned n = 0;
    json_array_foreach(json_object_get(json_object_get(s, "containerEdits"), "hooks"), i, x)
    {
        const char *name = json_string_value(json_array_get(json_object_get(x, "args"), 2));
        assert_string_not_equal(name, "update-ldcache");
        assert_string_not_equal(name, "enable-cuda-compat");
        n++;
    }
    assert_int_equal(n, 2);
    json_decref(s);

    assert_int_equal(cdi_parse_disabled_hooks("all", &f->o.disabled_hooks, &err), 0);
    s = build(f);
    assert_null(json_object_get(json_object_get(s, "containerEdits"), "hooks"));
    json_decref(s);
}

static void test_lists_reject_unknown_names(void **state)
{
    (void)state;
    struct error err = {0};
    unsigned bits = 0;
    assert_int_equal(cdi_parse_feature_flags("foo", &bits, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--cdi-feature-flags: unknown CDI feature flag \"foo\""));
    assert_non_null(strstr(err.msg, "disable-ipc-discoverer"));
    assert_int_equal(cdi_parse_feature_flags("", &bits, &err), 0);
    assert_int_equal(bits, 0);
    assert_int_equal(cdi_parse_feature_flags(NULL, &bits, &err), 0);
    assert_int_equal(
        cdi_parse_feature_flags("disable-ipc-discoverer,enable-coherent-annotations", &bits, &err),
        0);
    assert_int_equal(bits, CDI_FEATURE_DISABLE_IPC | CDI_FEATURE_COHERENT_ANNOTATIONS);
    assert_int_equal(cdi_parse_disabled_hooks("create-symlinks,bogus", &bits, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "\"bogus\""));
}

static void test_disable_ipc(void **state)
{
    struct fx *f = *state;
    f->o.feature_flags = CDI_FEATURE_DISABLE_IPC;
    json_t *s = build(f);
    assert_false(fx_has_mount(s, "/run/nvidia-persistenced/socket",
                              "/run/nvidia/driver/run/nvidia-persistenced/socket"));
    json_decref(s);
}

static void test_missing_device_node(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    char p[256];
    snprintf(p, sizeof(p), "%s/dev/nvidia1", f->root);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(build_error(f, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "GPU 1 (GPU-1"));
    assert_non_null(strstr(err.msg, "/dev/nvidia1 not found"));
}

static void test_missing_control_node(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    char p[256];
    snprintf(p, sizeof(p), "%s/dev/nvidiactl", f->root);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(build_error(f, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "/dev/nvidiactl not found"));
}

static void test_missing_libraries(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    str_copy(f->inv.driver_version, "999.1", sizeof(f->inv.driver_version));
    assert_int_equal(build_error(f, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "no libraries of NVIDIA driver 999.1"));
    assert_non_null(strstr(err.msg, "--driver-root-ctr-path"));
}

/* Issue 29: dra-plugin's errors name its own flags, not the device plugin's. */
static void test_missing_driver_names_dra_plugin_flags(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    char p[256];
    f->o.flag_names = CDI_FLAGS_DRA_PLUGIN;
    str_copy(f->inv.driver_version, "999.1", sizeof(f->inv.driver_version));
    assert_int_equal(build_error(f, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "no libraries of NVIDIA driver 999.1"));
    assert_non_null(strstr(err.msg, "at --container-driver-root (default /driver-root)"));
    assert_non_null(strstr(err.msg, "set --nvidia-driver-root to where the host has it"));
    assert_null(strstr(err.msg, "--driver-root-ctr-path"));
    assert_null(strstr(err.msg, " --driver-root "));
    str_copy(f->inv.driver_version, VER, sizeof(f->inv.driver_version));
    snprintf(p, sizeof(p), "%s/dev/nvidia1", f->root);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(build_error(f, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "--container-driver-root does not hold"));
    assert_null(strstr(err.msg, "--dev-root"));
}

/* The device plugin's spec keeps the host's capability nodes (as nvcdi does) even where
 * /proc/devices could describe them. */
static void test_mig_nodes_stay_host_nodes(void **state)
{
    struct fx *f = *state;
    static const char devices[] = "Character devices:\n508 nvidia-caps\n\nBlock devices:\n";
    char p[256];
    snprintf(p, sizeof(p), "%s/devices", f->proc);
    fx_write_file(p, devices, sizeof(devices) - 1);
    json_t *s = build(f);
    json_t *d = fx_device(s, "MIG-10000000-0000-0000-0000-000000000000");
    assert_non_null(d);
    json_t *n =
        json_array_get(json_object_get(json_object_get(d, "containerEdits"), "deviceNodes"), 2);
    assert_string_equal(json_string_value(json_object_get(n, "path")),
                        "/dev/nvidia-caps/nvidia-cap157");
    assert_string_equal(json_string_value(json_object_get(n, "hostPath")),
                        "/dev/nvidia-caps/nvidia-cap157");
    assert_null(json_object_get(n, "type"));
    json_decref(s);
}

static void test_missing_mig_minors(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    char p[256];
    snprintf(p, sizeof(p), "%s/driver/nvidia-caps/mig-minors", f->proc);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(build_error(f, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "MIG devices need the driver's capability minors"));
    /* and a layout the file does not know */
    fx_write_file(p, "gpu1/gi1/access 147\n", 20);
    assert_true(build_error(f, &err) < 0);
    assert_non_null(strstr(err.msg, "gpu1/gi1/ci0/access"));
}

/* A glibc "new format" cache with the given (flags, path) entries, optionally after an old
 * table; keys equal values (the soname is what ld.so looks up; we only read paths). */
static void write_ldcache(const char *path, bool with_old, const uint32_t *flags,
                          const char *const *paths, size_t n)
{
    unsigned char buf[4096] = {0};
    size_t off = 0;
    if (with_old) {
        memcpy(buf, "ld.so-1.7.0", 11);
        uint32_t zero = 0;
        memcpy(buf + 12, &zero, 4); /* no old entries */
        off = 16;
    }
    unsigned char *h = buf + off;
    memcpy(h, "glibc-ld.so.cache1.1", 20);
    uint32_t nlibs = (uint32_t)n;
    memcpy(h + 20, &nlibs, 4);
    size_t str = 48 + 24 * n, s = str;
    for (size_t i = 0; i < n; i++) {
        unsigned char *e = h + 48 + 24 * i;
        uint32_t off32 = (uint32_t)s;
        memcpy(e, &flags[i], 4);
        memcpy(e + 4, &off32, 4);
        memcpy(e + 8, &off32, 4);
        memcpy(h + s, paths[i], strlen(paths[i]) + 1);
        s += strlen(paths[i]) + 1;
    }
    uint32_t len_strings = (uint32_t)(s - str);
    memcpy(h + 24, &len_strings, 4);
    fx_write_file(path, buf, off + s);
}

static void test_ldcache_formats(void **state)
{
    struct fx *f = *state;
    char p[256];
    char **paths = NULL;
    struct error err = {0};
    const uint32_t flags[] = {0x0303, 0x0003, 0x0a03};
    const char *const libs[] = {"/opt/a/libcuda.so.1", "/usr/lib32/libcuda.so.1",
                                "/opt/b/libnvidia-ml.so.1"};
    snprintf(p, sizeof(p), "%s/cache", f->dir);
    for (int old = 0; old < 2; old++) {
        write_ldcache(p, old, flags, libs, 3);
        assert_int_equal(cdi_ldcache_read(p, &paths, &err), 0);
        /* the 32-bit entry is left out */
        assert_int_equal(strv_length(paths), 2);
        assert_string_equal(paths[0], "/opt/a/libcuda.so.1");
        assert_string_equal(paths[1], "/opt/b/libnvidia-ml.so.1");
        strv_free(paths);
        paths = NULL;
    }
    fx_write_file(p, "not a cache at all, no sir", 26);
    assert_int_equal(cdi_ldcache_read(p, &paths, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "not an ld.so cache"));
    /* an entry pointing past the end */
    unsigned char bad[48 + 24] = {0};
    memcpy(bad, "glibc-ld.so.cache1.1", 20);
    uint32_t one = 1, fl = 0x0303, far = 100000;
    memcpy(bad + 20, &one, 4);
    memcpy(bad + 48, &fl, 4);
    memcpy(bad + 56, &far, 4);
    fx_write_file(p, bad, sizeof(bad));
    assert_int_equal(cdi_ldcache_read(p, &paths, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "outside the cache"));
    snprintf(p, sizeof(p), "%s/none", f->dir);
    assert_int_equal(cdi_ldcache_read(p, &paths, &err), -ENOENT);
}

static void test_ldcache_picks_the_driver_folder(void **state)
{
    struct fx *f = *state;
    char p[256];
    /* the driver lives in /opt/nvidia/lib, listed by the cache; the standard folder's
     * libraries are not the driver's then */
    fx_touch(f, "/opt/nvidia/lib/libcuda.so." VER);
    fx_touch(f, "/opt/nvidia/lib/libnvidia-ml.so." VER);
    fx_touch(f, "/etc/ld.so.cache");
    snprintf(p, sizeof(p), "%s/etc/ld.so.cache", f->root);
    const uint32_t flags[] = {0x0303, 0x0303};
    const char *const libs[] = {"/opt/nvidia/lib/libcuda.so.1", "/usr/lib/libz.so.1"};
    write_ldcache(p, false, flags, libs, 2);
    json_t *s = build(f);
    assert_true(fx_has_mount(s, "/opt/nvidia/lib/libcuda.so." VER,
                             "/run/nvidia/driver/opt/nvidia/lib/libcuda.so." VER));
    assert_false(fx_has_mount(s, "/usr/lib/x86_64-linux-gnu/libcuda.so." VER,
                              "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so." VER));
    json_t *h = hook(s, "update-ldcache");
    assert_string_equal(json_string_value(json_array_get(json_object_get(h, "args"), 3)),
                        "/opt/nvidia/lib");
    json_decref(s);
    /* a broken cache is an error, not a silent fallback */
    fx_write_file(p, "garbage", 7);
    struct error err = {0};
    assert_int_equal(build_error(f, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "ld.so.cache"));
}

static void test_no_gpus(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    f->inv.n_gpus = 0;
    assert_int_equal(build_error(f, &err), -ENODEV);
}

static void test_write_atomic_0644(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    char *path = NULL;
    assert_int_equal(cdi_spec_write(f->out, NULL, "{\"a\":1}", &path, &err), 0);
    char want[256];
    snprintf(want, sizeof(want), "%s/k8s.device-plugin.nvidia.com-gpu.json", f->out);
    assert_string_equal(path, want);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(st.st_size, 7);
    /* a rewrite replaces it */
    assert_int_equal(cdi_spec_write(f->out, NULL, "{\"a\":22}", NULL, &err), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 8);
    free(path);
}

static json_t *class_spec(struct fx *f, const char *cls, const unsigned *ch, size_t n,
                          struct error *err)
{
    char *text = NULL;
    if (cdi_class_spec_build(cls, &f->o, ch, n, &text, err) < 0)
        return NULL;
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(j);
    return j;
}

static void test_additional_classes(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    char buf[512];

    /* nothing loaded: each feature says what is missing */
    const char *const classes[] = {"gdrcopy", "gds", "mofed"};
    for (size_t i = 0; i < 3; i++) {
        assert_null(class_spec(f, classes[i], NULL, 0, &err));
        assert_int_equal(err.code, -ENOENT);
        assert_non_null(strstr(err.msg, classes[i]));
        assert_non_null(strstr(err.msg, "has no device node"));
    }
    fx_touch(f, "/dev/gdrdrv");
    fx_touch(f, "/dev/nvidia-fs0");
    fx_touch(f, "/dev/nvidia-fs1");
    fx_touch(f, "/dev/infiniband/uverbs0");
    fx_touch(f, "/dev/infiniband/rdma_cm");
    json_t *s = class_spec(f, "gdrcopy", NULL, 0, &err);
    assert_non_null(s);
    assert_string_equal(json_string_value(json_object_get(s, "kind")),
                        "k8s.device-plugin.nvidia.com/gdrcopy");
    fx_node_paths(json_object_get(fx_device(s, "all"), "containerEdits"), buf, sizeof(buf));
    assert_string_equal(buf, "/dev/gdrdrv");
    json_decref(s);
    s = class_spec(f, "gds", NULL, 0, &err);
    fx_node_paths(json_object_get(fx_device(s, "all"), "containerEdits"), buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia-fs0,/dev/nvidia-fs1");
    json_decref(s);
    s = class_spec(f, "mofed", NULL, 0, &err);
    fx_node_paths(json_object_get(fx_device(s, "all"), "containerEdits"), buf, sizeof(buf));
    assert_string_equal(buf, "/dev/infiniband/rdma_cm,/dev/infiniband/uverbs0");
    json_decref(s);

    /* IMEX: a device per configured channel, each must exist */
    const unsigned ch[] = {0};
    assert_null(class_spec(f, "imex-channel", ch, 1, &err));
    assert_non_null(strstr(err.msg, "/dev/nvidia-caps-imex-channels/channel0 not found"));
    fx_touch(f, "/dev/nvidia-caps-imex-channels/channel0");
    s = class_spec(f, "imex-channel", ch, 1, &err);
    assert_non_null(s);
    fx_node_paths(json_object_get(fx_device(s, "0"), "containerEdits"), buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia-caps-imex-channels/channel0");
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_uuid_names_and_edits, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_index_names, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_nvidia_ctk_hook_and_disabled_hooks, fx_setup,
                                        fx_teardown),
        cmocka_unit_test(test_lists_reject_unknown_names),
        cmocka_unit_test_setup_teardown(test_disable_ipc, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_missing_device_node, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_missing_control_node, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_missing_libraries, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_missing_driver_names_dra_plugin_flags, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_mig_nodes_stay_host_nodes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_missing_mig_minors, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_ldcache_formats, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_ldcache_picks_the_driver_folder, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_no_gpus, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_write_atomic_0644, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_additional_classes, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_claim.c: DRA's per-claim CDI specs over the fake driver root of fixture.c: a GPU
 * claim, a MIG claim (capability nodes: the host's, or character devices the runtime
 * creates), the caller's extra env and mounts, what is
 * refused (bad uid, names, edits, a missing capability minor), and write/remove. */
#include <errno.h>
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

#define UID "3f2504e0-4f89-11d3-9a0c-0305e82c3301"

static json_t *build_claim(struct fx *f, const struct cdi_claim *claim)
{
    char *text = NULL;
    struct error err = {0};
    if (cdi_claim_spec_build(claim, &f->o, &text, &err) < 0)
        fail_msg("cdi_claim_spec_build: %s", err.msg);
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(j);
    return j;
}

static int build_claim_error(struct fx *f, const struct cdi_claim *claim, struct error *err)
{
    char *text = NULL;
    int r = cdi_claim_spec_build(claim, &f->o, &text, err);
    assert_null(text);
    return r;
}

/* the index-th string of edits' key array */
static const char *str_at(json_t *edits, const char *key, size_t index)
{
    return json_string_value(json_array_get(json_object_get(edits, key), index));
}

/* the mount of edits at container path ctr, or NULL */
static json_t *mount_at(json_t *edits, const char *ctr)
{
    size_t i;
    json_t *m, *found = NULL;
    json_array_foreach(json_object_get(edits, "mounts"), i, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "containerPath")), ctr) == 0) {
            assert_null(found); /* never twice */
            found = m;
        }
    }
    return found;
}

static void test_claim_spec_build_gpu(void **state)
{
    struct fx *f = *state;
    const struct cdi_claim_device dev = {.name = UID "-gpu-0", .minor = 0};
    const struct cdi_claim claim = {
        .uid = UID, .driver_version = VER, .devices = &dev, .n_devices = 1};
    json_t *s = build_claim(f, &claim);
    char buf[512];

    assert_string_equal(json_string_value(json_object_get(s, "cdiVersion")), "0.5.0");
    assert_string_equal(json_string_value(json_object_get(s, "kind")), "k8s.gpu.nvidia.com/claim");
    assert_int_equal(json_array_size(json_object_get(s, "devices")), 1);
    json_t *d = fx_device(s, UID "-gpu-0");
    assert_non_null(d);
    fx_node_paths(json_object_get(d, "containerEdits"), buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia0");
    /* the common edits of the device plugin's spec */
    json_t *edits = json_object_get(s, "containerEdits");
    fx_node_paths(edits, buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidiactl,/dev/nvidia-uvm");
    assert_true(fx_has_mount(s, "/usr/lib/x86_64-linux-gnu/libcuda.so." VER,
                             "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so." VER));
    assert_string_equal(str_at(edits, "env", 0), "NVIDIA_VISIBLE_DEVICES=void");
    assert_true(json_array_size(json_object_get(edits, "hooks")) > 0);
    json_decref(s);
}

static void test_claim_spec_build_mig(void **state)
{
    struct fx *f = *state;
    const struct cdi_claim_device devs[] = {
        {.name = UID "-gpu-1-mig-1g10gb-19-4", .minor = 1, .is_mig = true, .gi_id = 2},
        {.name = UID "-gpu-0", .minor = 0},
    };
    const struct cdi_claim claim = {
        .uid = UID, .driver_version = VER, .devices = devs, .n_devices = 2};
    json_t *s = build_claim(f, &claim);
    char buf[512];

    assert_int_equal(json_array_size(json_object_get(s, "devices")), 2);
    json_t *d = fx_device(s, UID "-gpu-1-mig-1g10gb-19-4");
    assert_non_null(d);
    fx_node_paths(json_object_get(d, "containerEdits"), buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia1,/dev/nvidia-caps/nvidia-cap156,"
                             "/dev/nvidia-caps/nvidia-cap157");
    json_t *node =
        json_array_get(json_object_get(json_object_get(d, "containerEdits"), "deviceNodes"), 2);
    assert_string_equal(json_string_value(json_object_get(node, "hostPath")),
                        "/dev/nvidia-caps/nvidia-cap157");
    json_decref(s);
}

static void test_claim_spec_build_extra_edits(void **state)
{
    struct fx *f = *state;
    fx_touch(f, "/tmp/nvidia-mps"); /* the common edits mount the host's pipe folder */
    static const char *const claim_env[] = {"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", NULL};
    static const char *const ro[] = {"ro", "bind", NULL};
    const struct cdi_mount claim_mounts[] = {
        {.host_path = "/var/lib/kubelet/plugins/gpu.nvidia.com/mps/" UID "/pipe",
         .container_path = "/tmp/nvidia-mps"},
        {.host_path = "/var/lib/kubelet/plugins/gpu.nvidia.com/mps/" UID "/shm",
         .container_path = "/dev/shm",
         .options = ro},
    };
    static const char *const dev_env[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", NULL};
    const struct cdi_claim_device dev = {
        .name = UID "-gpu-0", .minor = 0, .edits = {.env = dev_env}};
    const struct cdi_claim claim = {
        .uid = UID,
        .driver_version = VER,
        .devices = &dev,
        .n_devices = 1,
        .edits = {.env = claim_env, .mounts = claim_mounts, .n_mounts = 2},
    };
    json_t *s = build_claim(f, &claim);
    json_t *edits = json_object_get(s, "containerEdits");

    assert_string_equal(str_at(edits, "env", 0), "NVIDIA_VISIBLE_DEVICES=void");
    size_t n_env = json_array_size(json_object_get(edits, "env"));
    assert_string_equal(str_at(edits, "env", n_env - 1), "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps");
    /* the claim's pipe folder replaces the host's /tmp/nvidia-mps */
    json_t *pipe = mount_at(edits, "/tmp/nvidia-mps");
    assert_non_null(pipe);
    assert_string_equal(json_string_value(json_object_get(pipe, "hostPath")),
                        "/var/lib/kubelet/plugins/gpu.nvidia.com/mps/" UID "/pipe");
    assert_string_equal(str_at(pipe, "options", 0), "rw");
    assert_string_equal(str_at(pipe, "options", 3), "bind");
    json_t *shm = mount_at(edits, "/dev/shm");
    assert_non_null(shm);
    assert_string_equal(str_at(shm, "options", 0), "ro");
    assert_int_equal(json_array_size(json_object_get(shm, "options")), 2);
    /* the device's own env sits in its edits */
    json_t *d = json_object_get(fx_device(s, UID "-gpu-0"), "containerEdits");
    assert_string_equal(str_at(d, "env", 0), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50");
    assert_null(json_object_get(d, "mounts"));
    json_decref(s);
}

static void test_claim_spec_build_missing_cap_minor(void **state)
{
    struct fx *f = *state;
    struct error err = {0};
    const struct cdi_claim_device dev = {
        .name = UID "-gpu-1-mig-x", .minor = 1, .is_mig = true, .gi_id = 9};
    const struct cdi_claim claim = {
        .uid = UID, .driver_version = VER, .devices = &dev, .n_devices = 1};
    assert_int_equal(build_claim_error(f, &claim, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "gpu1/gi9/access"));
    assert_non_null(strstr(err.msg, UID "-gpu-1-mig-x"));
}

/* <proc>/driver/nvidia/capabilities/<rel> holding "DeviceFileMinor: <minor>" */
static void write_access_file(struct fx *f, const char *rel, unsigned minor)
{
    char p[512], text[64];
    snprintf(p, sizeof(p), "%s/driver/nvidia/capabilities/%s", f->proc, rel);
    for (char *s = strchr(p + strlen(f->proc) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        (void)mkdir(p, 0755);
        *s = '/';
    }
    int n = snprintf(text, sizeof(text), "DeviceFileMinor: %u\nDeviceFileMode: 292\n", minor);
    fx_write_file(p, text, (size_t)n);
}

/* Without mig-minors (or when it lacks an instance) the access files NVIDIA's DRA driver
 * reads give the minors. */
static void test_claim_spec_build_mig_access_files(void **state)
{
    struct fx *f = *state;
    char p[256], buf[512];
    const struct cdi_claim_device dev = {
        .name = UID "-gpu-1-mig-2", .minor = 1, .is_mig = true, .gi_id = 2};
    const struct cdi_claim claim = {
        .uid = UID, .driver_version = VER, .devices = &dev, .n_devices = 1};
    write_access_file(f, "gpu1/mig/gi2/access", 156);
    write_access_file(f, "gpu1/mig/gi2/ci0/access", 157);
    snprintf(p, sizeof(p), "%s/driver/nvidia-caps/mig-minors", f->proc);
    fx_write_file(p, "config 1\nmonitor 2\n", 18); /* lists no instance */
    json_t *s = build_claim(f, &claim);
    fx_node_paths(json_object_get(fx_device(s, UID "-gpu-1-mig-2"), "containerEdits"), buf,
                  sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia1,/dev/nvidia-caps/nvidia-cap156,"
                             "/dev/nvidia-caps/nvidia-cap157");
    json_decref(s);
    assert_int_equal(unlink(p), 0);
    s = build_claim(f, &claim);
    json_decref(s);
    /* neither: the error names both places */
    snprintf(p, sizeof(p), "%s/driver/nvidia/capabilities/gpu1/mig/gi2/ci0/access", f->proc);
    assert_int_equal(unlink(p), 0);
    struct error err = {0};
    assert_int_equal(build_claim_error(f, &claim, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "mig-minors"));
    assert_non_null(strstr(err.msg, "gpu1/mig/gi2/ci0/access"));
}

/* <proc>/devices as the kernel writes it, nvidia-caps at major 508 */
static void write_proc_devices(struct fx *f)
{
    static const char text[] = "Character devices:\n  1 mem\n195 nvidia-frontend\n"
                               "508 nvidia-caps\n509 nvidia-caps-imex-channels\n"
                               "\nBlock devices:\n  8 sd\n510 nvidia-caps\n";
    char p[256];
    snprintf(p, sizeof(p), "%s/devices", f->proc);
    fx_write_file(p, text, sizeof(text) - 1);
}

static void drop_host_cap_nodes(struct fx *f)
{
    char p[256];
    for (unsigned n = 156; n <= 157; n++) {
        snprintf(p, sizeof(p), "%s/dev/nvidia-caps/nvidia-cap%u", f->root, n);
        assert_int_equal(unlink(p), 0);
    }
}

/* Issue 29: a node whose host has no /dev/nvidia-caps nodes (they are made on demand) still
 * prepares MIG claims: the capability nodes are character devices the runtime creates, as
 * NVIDIA's DRA driver writes them (major from /proc/devices, minor and mode from the
 * capability's access file), with no host path. */
static void test_claim_spec_build_mig_char_nodes(void **state)
{
    struct fx *f = *state;
    const struct cdi_claim_device dev = {
        .name = UID "-gpu-1-mig-2", .minor = 1, .is_mig = true, .gi_id = 2};
    const struct cdi_claim claim = {
        .uid = UID, .driver_version = VER, .devices = &dev, .n_devices = 1};
    char buf[512];

    write_proc_devices(f);
    write_access_file(f, "gpu1/mig/gi2/access", 156);
    write_access_file(f, "gpu1/mig/gi2/ci0/access", 157);
    drop_host_cap_nodes(f);
    json_t *s = build_claim(f, &claim);
    json_t *edits = json_object_get(fx_device(s, UID "-gpu-1-mig-2"), "containerEdits");
    fx_node_paths(edits, buf, sizeof(buf));
    assert_string_equal(buf, "/dev/nvidia1,/dev/nvidia-caps/nvidia-cap156,"
                             "/dev/nvidia-caps/nvidia-cap157");
    json_t *nodes = json_object_get(edits, "deviceNodes");
    for (size_t i = 1; i <= 2; i++) {
        json_t *n = json_array_get(nodes, i);
        assert_string_equal(json_string_value(json_object_get(n, "type")), "c");
        assert_int_equal(json_integer_value(json_object_get(n, "major")), 508);
        assert_int_equal(json_integer_value(json_object_get(n, "minor")), 155 + i);
        assert_int_equal(json_integer_value(json_object_get(n, "fileMode")), 292);
        assert_null(json_object_get(n, "hostPath"));
    }
    /* the parent GPU's node is still the host's */
    assert_non_null(json_object_get(json_array_get(nodes, 0), "hostPath"));
    json_decref(s);

    /* a minor known only from mig-minors: no mode to give (the runtime's default) */
    char p[256];
    snprintf(p, sizeof(p), "%s/driver/nvidia/capabilities/gpu1/mig/gi2/ci0/access", f->proc);
    assert_int_equal(unlink(p), 0);
    s = build_claim(f, &claim);
    json_t *n = json_array_get(
        json_object_get(json_object_get(fx_device(s, UID "-gpu-1-mig-2"), "containerEdits"),
                        "deviceNodes"),
        2);
    assert_int_equal(json_integer_value(json_object_get(n, "minor")), 157);
    assert_null(json_object_get(n, "fileMode"));
    json_decref(s);
}

/* Without the nvidia-caps major the host's node is used when there is one; with neither,
 * the error names both. */
static void test_claim_spec_build_mig_no_caps_major(void **state)
{
    struct fx *f = *state;
    const struct cdi_claim_device dev = {
        .name = UID "-gpu-1-mig-2", .minor = 1, .is_mig = true, .gi_id = 2};
    const struct cdi_claim claim = {
        .uid = UID, .driver_version = VER, .devices = &dev, .n_devices = 1};
    struct error err = {0};
    char p[256];

    /* /proc/devices without nvidia-caps among the character devices */
    snprintf(p, sizeof(p), "%s/devices", f->proc);
    static const char no_caps[] =
        "Character devices:\n  1 mem\n\nBlock devices:\n508 nvidia-caps\n";
    fx_write_file(p, no_caps, sizeof(no_caps) - 1);
    json_t *s = build_claim(f, &claim);
    json_t *n = json_array_get(
        json_object_get(json_object_get(fx_device(s, UID "-gpu-1-mig-2"), "containerEdits"),
                        "deviceNodes"),
        1);
    assert_string_equal(json_string_value(json_object_get(n, "hostPath")),
                        "/dev/nvidia-caps/nvidia-cap156");
    assert_null(json_object_get(n, "type"));
    json_decref(s);

    drop_host_cap_nodes(f);
    assert_int_equal(build_claim_error(f, &claim, &err), -ENOENT);
    assert_non_null(strstr(err.msg, UID "-gpu-1-mig-2"));
    assert_non_null(strstr(err.msg, "nvidia-cap156"));
    assert_non_null(strstr(err.msg, "has no \"nvidia-caps\" character device"));
    assert_non_null(strstr(err.msg, "the host has no such node (looked at "));
}

static void test_claim_spec_build_refuses_bad_input(void **state)
{
    struct fx *f = *state;
    static const char *const bad_uids[] = {"", "../etc", "a/b", "a b", "a.b", "a_b"};
    static const char *const bad_env[] = {"NOEQUALS", NULL};
    const struct cdi_mount rel = {.host_path = "tmp/x", .container_path = "/x"};
    struct cdi_claim_device dev = {.name = UID "-gpu-0", .minor = 0};
    struct cdi_claim claim = {.uid = UID, .driver_version = VER, .devices = &dev, .n_devices = 1};
    struct error err = {0};

    for (size_t i = 0; i < sizeof(bad_uids) / sizeof(*bad_uids); i++) {
        claim.uid = bad_uids[i];
        error_clear(&err);
        assert_int_equal(build_claim_error(f, &claim, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "claim uid"));
    }
    claim.uid = UID;
    dev.name = "other-gpu-0";
    error_clear(&err);
    assert_int_equal(build_claim_error(f, &claim, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "does not start with the claim's uid"));
    dev.name = UID "-gpu-0";
    claim.edits.env = bad_env;
    error_clear(&err);
    assert_int_equal(build_claim_error(f, &claim, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "NOEQUALS"));
    claim.edits.env = NULL;
    dev.edits.mounts = &rel;
    dev.edits.n_mounts = 1;
    error_clear(&err);
    assert_int_equal(build_claim_error(f, &claim, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "absolute"));
    dev.edits.n_mounts = 0;
    claim.n_devices = 0;
    error_clear(&err);
    assert_int_equal(build_claim_error(f, &claim, &err), -EINVAL);
}

static void test_claim_spec_write_and_remove(void **state)
{
    struct fx *f = *state;
    char *path = NULL, want[256];
    struct error err = {0};
    struct stat st;

    assert_int_equal(cdi_claim_spec_write(f->out, UID, "{\"a\":1}", &path, &err), 0);
    snprintf(want, sizeof(want), "%s/k8s.gpu.nvidia.com-claim_%s.yaml", f->out, UID);
    assert_string_equal(path, want);
    free(path);
    assert_int_equal(stat(want, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    /* rewritten in place */
    assert_int_equal(cdi_claim_spec_write(f->out, UID, "{\"a\":2}", NULL, &err), 0);
    json_t *j = json_load_file(want, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "a")), 2);
    json_decref(j);
    assert_int_equal(cdi_claim_spec_remove(f->out, UID, &err), 0);
    assert_int_equal(access(want, F_OK), -1);
    /* absent: success */
    assert_int_equal(cdi_claim_spec_remove(f->out, UID, &err), 0);
    /* a uid that would leave the folder is refused before anything is touched */
    assert_int_equal(cdi_claim_spec_write(f->out, "../escape", "{}", &path, &err), -EINVAL);
    assert_int_equal(cdi_claim_spec_remove(f->out, "../escape", &err), -EINVAL);
    snprintf(want, sizeof(want), "%s/../k8s.gpu.nvidia.com-claim_.._escape.yaml", f->out);
    assert_int_equal(access(want, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_claim_spec_build_gpu, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_claim_spec_build_mig, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_claim_spec_build_extra_edits, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_claim_spec_build_mig_char_nodes, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_claim_spec_build_mig_no_caps_major, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_claim_spec_build_mig_access_files, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_claim_spec_build_missing_cap_minor, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_claim_spec_build_refuses_bad_input, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_claim_spec_write_and_remove, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

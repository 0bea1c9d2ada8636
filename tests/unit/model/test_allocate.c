/* SPDX-License-Identifier: Apache-2.0 */
/* test_allocate.c: model_allocate() — validation with NVIDIA's texts, replica de-duplication
 * and the response for each device-list strategy, passDeviceSpecs (with MIG caps), MPS,
 * IMEX and GDS/GDRCopy/MOFED (facts §3.2, §3.3, §5.2). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"

struct alloc_fx {
    struct inv_inventory *inv;
    struct cfg_config cfg;
    struct cfg_replicated_resource rule;
    struct model *m;
    const struct model_resource *res;
};

static void fx_setup(struct alloc_fx *f, struct inv_inventory *inv, unsigned replicas,
                     bool fail_requests)
{
    memset(f, 0, sizeof(*f));
    f->inv = inv;
    fx_cfg_init(&f->cfg);
    if (replicas > 1) {
        f->rule = fx_rule("nvidia.com/gpu", replicas);
        fx_cfg_sharing(&f->cfg, CFG_SHARING_TIME_SLICING, &f->rule, 1, false, fail_requests);
    }
}

static void fx_model(struct alloc_fx *f, const char *resource)
{
    f->m = fx_build(f->inv, &f->cfg);
    f->res = model_find_resource(f->m, resource);
    assert_non_null(f->res);
}

static void fx_teardown(struct alloc_fx *f)
{
    model_free(f->m);
    inv_free(f->inv);
}

static char *fixed_id(void *userdata)
{
    (void)userdata;
    return strdup("1b3c5d7e-0000-4000-8000-000000000001");
}

static bool no_modeset(void *userdata, const char *path)
{
    (void)userdata;
    return strcmp(path, "/dev/nvidia-modeset") != 0;
}

static char *cap_path(void *userdata, unsigned minor, unsigned gi, unsigned ci, bool compute)
{
    char buf[64];
    (void)userdata;
    (void)ci; /* every test MIG device has ci 0 */
    snprintf(buf, sizeof(buf), "/dev/nvidia-caps/nvidia-cap%u", minor * 100 + gi * 2 + compute);
    return strdup(buf);
}

static const struct model_alloc_env test_env = {
    .device_exists = no_modeset, .mig_cap_path = cap_path, .new_id = fixed_id};

static struct model_alloc_response *alloc_ok(const struct alloc_fx *f, const char *const *ids,
                                             size_t n)
{
    struct model_alloc_response *r = NULL;
    struct error err = {0};
    if (model_allocate(f->m, f->res, ids, n, &test_env, &r, &err) < 0)
        fail_msg("model_allocate: %s", err.msg);
    return r;
}

static bool has_mount(const struct model_alloc_response *r, const char *host, const char *ctr)
{
    for (size_t i = 0; i < r->n_mounts; i++)
        if (strcmp(r->mounts[i].host_path, host) == 0 &&
            strcmp(r->mounts[i].container_path, ctr) == 0)
            return true;
    return false;
}

/* ---- validation -------------------------------------------------------------------------------
 */

static void test_model_allocate_fail_requests_greater_than_one(void **state)
{
    struct alloc_fx f;
    struct model_alloc_response *r = NULL;
    struct error err = {0};
    char a[128], b[128];
    const char *ids[] = {a, b};

    (void)state;
    fx_setup(&f, fx_l20(), 2, true);
    fx_model(&f, "nvidia.com/gpu");
    snprintf(a, sizeof(a), "%s::0", f.inv->gpus[0].uuid);
    snprintf(b, sizeof(b), "%s::1", f.inv->gpus[0].uuid);
    assert_int_equal(model_allocate(f.m, f.res, ids, 2, &test_env, &r, &err), -EINVAL);
    assert_string_equal(err.msg, "invalid allocation request for \"nvidia.com/gpu\": invalid "
                                 "request: maximum request size for shared resources is 1; "
                                 "found 2");
    assert_null(r);
    /* one replica is fine */
    r = alloc_ok(&f, ids, 1);
    assert_string_equal(model_alloc_response_env(r, "NVIDIA_VISIBLE_DEVICES"), f.inv->gpus[0].uuid);
    model_alloc_response_free(r);
    fx_teardown(&f);
}

static void test_model_allocate_unknown_device(void **state)
{
    struct alloc_fx f;
    struct model_alloc_response *r = NULL;
    struct error err = {0};
    const char *ids[] = {"GPU-does-not-exist"};

    (void)state;
    fx_setup(&f, fx_generic(2), 1, false);
    fx_model(&f, "nvidia.com/gpu");
    assert_int_equal(model_allocate(f.m, f.res, ids, 1, &test_env, &r, &err), -EINVAL);
    assert_string_equal(err.msg, "invalid allocation request for \"nvidia.com/gpu\": invalid "
                                 "request: unknown device: GPU-does-not-exist");
    fx_teardown(&f);
}

static void test_model_allocate_dedups_replicas(void **state)
{
    struct alloc_fx f;
    struct model_alloc_response *r;
    char a[128], b[128], c[128], want[256];
    const char *ids[] = {a, b, c};

    (void)state;
    fx_setup(&f, fx_generic(2), 4, false);
    fx_model(&f, "nvidia.com/gpu");
    snprintf(a, sizeof(a), "%s::0", f.inv->gpus[1].uuid);
    snprintf(b, sizeof(b), "%s::3", f.inv->gpus[0].uuid);
    snprintf(c, sizeof(c), "%s::2", f.inv->gpus[1].uuid);
    r = alloc_ok(&f, ids, 3);
    snprintf(want, sizeof(want), "%s,%s", f.inv->gpus[1].uuid, f.inv->gpus[0].uuid);
    assert_string_equal(model_alloc_response_env(r, "NVIDIA_VISIBLE_DEVICES"), want);
    assert_int_equal(r->n_envs, 1);
    assert_int_equal(r->n_mounts, 0);
    assert_int_equal(r->n_devices, 0);
    assert_int_equal(r->n_annotations, 0);
    assert_int_equal(r->n_cdi_devices, 0);
    model_alloc_response_free(r);
    fx_teardown(&f);
}

/* ---- strategies --------------------------------------------------------------------------------
 */

struct strategy_case {
    const char *what;
    unsigned strategies;
    const char *visible; /* NVIDIA_VISIBLE_DEVICES, "$0" = GPU 0's uuid, NULL = unset */
    size_t n_mounts;
    size_t n_annotations;
    size_t n_cdi;
};

static const struct strategy_case strategy_cases[] = {
    {"envvar", CFG_LIST_ENVVAR, "$0", 0, 0, 0},
    {"volume-mounts", CFG_LIST_VOLUME_MOUNTS, "/var/run/nvidia-container-devices", 1, 0, 0},
    {"envvar+volume-mounts", CFG_LIST_ENVVAR | CFG_LIST_VOLUME_MOUNTS,
     "/var/run/nvidia-container-devices", 1, 0, 0},
    {"cdi-annotations", CFG_LIST_CDI_ANNOTATIONS, NULL, 0, 1, 0},
    {"cdi-cri", CFG_LIST_CDI_CRI, NULL, 0, 0, 1},
    {"cdi-annotations+cdi-cri", CFG_LIST_CDI_ANNOTATIONS | CFG_LIST_CDI_CRI, NULL, 0, 1, 1},
    {"envvar+cdi-cri", CFG_LIST_ENVVAR | CFG_LIST_CDI_CRI, "$0", 0, 0, 1},
};

static void test_model_allocate_strategies(void **state)
{
    (void)state;
    for (size_t c = 0; c < GS_ARRAY_SIZE(strategy_cases); c++) {
        const struct strategy_case *sc = &strategy_cases[c];
        struct alloc_fx f;
        struct model_alloc_response *r;
        const char *ids[1];
        const char *env;
        char cdi[160], mnt[160];

        fx_setup(&f, fx_l20(), 1, false);
        f.cfg.flags.plugin.device_list_strategies = sc->strategies;
        f.cfg.flags.plugin.pass_device_specs = true;
        fx_model(&f, "nvidia.com/gpu");
        ids[0] = f.inv->gpus[0].uuid;
        r = alloc_ok(&f, ids, 1);
        env = model_alloc_response_env(r, "NVIDIA_VISIBLE_DEVICES");
        if (!sc->visible)
            assert_null(env);
        else
            assert_string_equal(env, strcmp(sc->visible, "$0") == 0 ? ids[0] : sc->visible);
        if (r->n_mounts != sc->n_mounts || r->n_annotations != sc->n_annotations ||
            r->n_cdi_devices != sc->n_cdi)
            fail_msg("%s: mounts %zu annotations %zu cdi %zu", sc->what, r->n_mounts,
                     r->n_annotations, r->n_cdi_devices);
        snprintf(cdi, sizeof(cdi), "k8s.device-plugin.nvidia.com/gpu=%s", ids[0]);
        snprintf(mnt, sizeof(mnt), "/var/run/nvidia-container-devices/%s", ids[0]);
        if (sc->n_mounts) {
            assert_true(has_mount(r, "/dev/null", mnt));
            assert_false(r->mounts[0].read_only); /* NVIDIA sets none */
        }
        if (sc->n_annotations) {
            assert_string_equal(r->annotations[0].key, "cdi.k8s.io/nvidia-device-plugin_"
                                                       "1b3c5d7e-0000-4000-8000-000000000001");
            assert_string_equal(r->annotations[0].value, cdi);
        }
        if (sc->n_cdi)
            assert_string_equal(r->cdi_devices[0], cdi);
        /* passDeviceSpecs only with a non-CDI strategy */
        if (sc->strategies & (CFG_LIST_ENVVAR | CFG_LIST_VOLUME_MOUNTS))
            assert_int_equal(r->n_devices, 4); /* ctl, uvm, uvm-tools, nvidia0 */
        else
            assert_int_equal(r->n_devices, 0);
        model_alloc_response_free(r);
        fx_teardown(&f);
    }
}

static void test_model_allocate_index_ids_and_prefix(void **state)
{
    struct alloc_fx f;
    struct model_alloc_response *r;
    const char *ids[2];

    (void)state;
    fx_setup(&f, fx_generic(2), 1, false);
    /* advertised IDs are the UUIDs; the runtime gets the indices */
    ids[0] = f.inv->gpus[1].uuid;
    ids[1] = f.inv->gpus[0].uuid;
    f.cfg.flags.plugin.device_id_strategy = CFG_DEVICE_ID_INDEX;
    f.cfg.flags.plugin.device_list_strategies = CFG_LIST_ENVVAR | CFG_LIST_CDI_ANNOTATIONS;
    f.cfg.flags.plugin.cdi_annotation_prefix = "example.com/";
    fx_model(&f, "nvidia.com/gpu");
    r = alloc_ok(&f, ids, 2);
    assert_string_equal(model_alloc_response_env(r, "NVIDIA_VISIBLE_DEVICES"), "1,0");
    assert_true(str_startswith(r->annotations[0].key, "example.com/nvidia-device-plugin_"));
    assert_string_equal(r->annotations[0].value, "k8s.device-plugin.nvidia.com/gpu=1,"
                                                 "k8s.device-plugin.nvidia.com/gpu=0");
    model_alloc_response_free(r);
    fx_teardown(&f);
}

static void test_model_allocate_cdi_needs_id(void **state)
{
    struct alloc_fx f;
    struct model_alloc_response *r = NULL;
    struct model_alloc_env no_id = {0};
    struct error err = {0};
    const char *ids[1];

    (void)state;
    fx_setup(&f, fx_l20(), 1, false);
    f.cfg.flags.plugin.device_list_strategies = CFG_LIST_CDI_ANNOTATIONS;
    fx_model(&f, "nvidia.com/gpu");
    ids[0] = f.inv->gpus[0].uuid;
    assert_int_equal(model_allocate(f.m, f.res, ids, 1, &no_id, &r, &err), -EIO);
    assert_null(r);
    fx_teardown(&f);
}

static void test_model_allocate_device_specs_mig(void **state)
{
    struct alloc_fx f;
    struct model_alloc_response *r;
    const char *ids[2];
    static const char *const want[][2] = {
        {"/dev/nvidiactl", "/run/nvidia/driver/dev/nvidiactl"},
        {"/dev/nvidia-uvm", "/run/nvidia/driver/dev/nvidia-uvm"},
        {"/dev/nvidia-uvm-tools", "/run/nvidia/driver/dev/nvidia-uvm-tools"},
        {"/dev/nvidia0", "/run/nvidia/driver/dev/nvidia0"},
        {"/dev/nvidia-caps/nvidia-cap14", "/run/nvidia/driver/dev/nvidia-caps/nvidia-cap14"},
        {"/dev/nvidia-caps/nvidia-cap15", "/run/nvidia/driver/dev/nvidia-caps/nvidia-cap15"},
        {"/dev/nvidia-caps/nvidia-cap16", "/run/nvidia/driver/dev/nvidia-caps/nvidia-cap16"},
        {"/dev/nvidia-caps/nvidia-cap17", "/run/nvidia/driver/dev/nvidia-caps/nvidia-cap17"},
    };

    (void)state;
    fx_setup(&f, fx_a100_1g10gb(1), 1, false);
    f.cfg.flags.mig_strategy = CFG_MIG_MIXED;
    f.cfg.flags.plugin.pass_device_specs = true;
    f.cfg.flags.nvidia_driver_root = "/run/nvidia/driver/";
    fx_model(&f, "nvidia.com/mig-1g.10gb");
    ids[0] = f.inv->gpus[0].migs[0].uuid; /* gi 7 */
    ids[1] = f.inv->gpus[0].migs[1].uuid; /* gi 8 */
    r = alloc_ok(&f, ids, 2);
    assert_int_equal(r->n_devices, GS_ARRAY_SIZE(want));
    for (size_t i = 0; i < GS_ARRAY_SIZE(want); i++) {
        assert_string_equal(r->devices[i].container_path, want[i][0]);
        assert_string_equal(r->devices[i].host_path, want[i][1]);
        assert_string_equal(r->devices[i].permissions, "rw");
    }
    model_alloc_response_free(r);
    fx_teardown(&f);
}

static void test_model_allocate_mps(void **state)
{
    struct alloc_fx f;
    struct model_alloc_response *r;
    char a[128];
    const char *ids[] = {a};

    (void)state;
    fx_setup(&f, fx_l20(), 1, false);
    f.rule = fx_rule("nvidia.com/gpu", 4);
    fx_cfg_sharing(&f.cfg, CFG_SHARING_MPS, &f.rule, 1, false, true);
    f.cfg.flags.mps_root = "/run/nvidia/mps";
    fx_model(&f, "nvidia.com/gpu");
    snprintf(a, sizeof(a), "%s::2", f.inv->gpus[0].uuid);
    r = alloc_ok(&f, ids, 1);
    assert_string_equal(model_alloc_response_env(r, "CUDA_MPS_PIPE_DIRECTORY"),
                        "/mps/nvidia.com/gpu/pipe");
    assert_true(has_mount(r, "/run/nvidia/mps/nvidia.com/gpu/pipe", "/mps/nvidia.com/gpu/pipe"));
    assert_true(has_mount(r, "/run/nvidia/mps/shm", "/dev/shm"));
    assert_string_equal(model_alloc_response_env(r, "NVIDIA_VISIBLE_DEVICES"), f.inv->gpus[0].uuid);
    model_alloc_response_free(r);
    fx_teardown(&f);
}

static void test_model_allocate_imex_and_extras(void **state)
{
    struct alloc_fx f;
    struct model_alloc_response *r;
    unsigned channels[] = {0};
    const char *ids[1];
    char cdi[160];

    (void)state;
    fx_setup(&f, fx_l20(), 1, false);
    f.cfg.flags.plugin.device_list_strategies =
        CFG_LIST_ENVVAR | CFG_LIST_VOLUME_MOUNTS | CFG_LIST_CDI_CRI;
    f.cfg.flags.plugin.pass_device_specs = true;
    f.cfg.flags.gds_enabled = f.cfg.flags.gdrcopy_enabled = f.cfg.flags.mofed_enabled = true;
    f.cfg.imex.channel_ids = channels;
    f.cfg.imex.n_channel_ids = 1;
    fx_model(&f, "nvidia.com/gpu");
    ids[0] = f.inv->gpus[0].uuid;
    r = alloc_ok(&f, ids, 1);
    assert_string_equal(model_alloc_response_env(r, "NVIDIA_IMEX_CHANNELS"), "0");
    assert_string_equal(model_alloc_response_env(r, "NVIDIA_GDS"), "enabled");
    assert_string_equal(model_alloc_response_env(r, "NVIDIA_GDRCOPY"), "enabled");
    assert_string_equal(model_alloc_response_env(r, "NVIDIA_MOFED"), "enabled");
    assert_true(has_mount(r, "/dev/null", "/var/run/nvidia-container-devices/imex/0"));
    assert_string_equal(r->devices[r->n_devices - 1].container_path,
                        "/dev/nvidia-caps-imex-channels/channel0");
    snprintf(cdi, sizeof(cdi), "k8s.device-plugin.nvidia.com/gpu=%s", ids[0]);
    assert_int_equal(r->n_cdi_devices, 5);
    assert_string_equal(r->cdi_devices[0], cdi);
    assert_string_equal(r->cdi_devices[1], "k8s.device-plugin.nvidia.com/imex-channel=0");
    assert_string_equal(r->cdi_devices[2], "k8s.device-plugin.nvidia.com/gdrcopy=all");
    assert_string_equal(r->cdi_devices[3], "k8s.device-plugin.nvidia.com/gds=all");
    assert_string_equal(r->cdi_devices[4], "k8s.device-plugin.nvidia.com/mofed=all");
    model_alloc_response_free(r);
    fx_teardown(&f);

    /* only CDI: the extras' envs stay, NVIDIA_VISIBLE_DEVICES and device specs go */
    fx_setup(&f, fx_l20(), 1, false);
    f.cfg.flags.plugin.device_list_strategies = CFG_LIST_CDI_CRI;
    f.cfg.flags.plugin.pass_device_specs = true;
    f.cfg.flags.gds_enabled = true;
    fx_model(&f, "nvidia.com/gpu");
    ids[0] = f.inv->gpus[0].uuid;
    r = alloc_ok(&f, ids, 1);
    assert_null(model_alloc_response_env(r, "NVIDIA_VISIBLE_DEVICES"));
    assert_string_equal(model_alloc_response_env(r, "NVIDIA_GDS"), "enabled");
    assert_int_equal(r->n_devices, 0);
    model_alloc_response_free(r);
    fx_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_allocate_fail_requests_greater_than_one),
        cmocka_unit_test(test_model_allocate_unknown_device),
        cmocka_unit_test(test_model_allocate_dedups_replicas),
        cmocka_unit_test(test_model_allocate_strategies),
        cmocka_unit_test(test_model_allocate_index_ids_and_prefix),
        cmocka_unit_test(test_model_allocate_cdi_needs_id),
        cmocka_unit_test(test_model_allocate_device_specs_mig),
        cmocka_unit_test(test_model_allocate_mps),
        cmocka_unit_test(test_model_allocate_imex_and_extras),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_plan.c: src/dra/plan.c on the plan node (gpu-0: an L20; GPU 1: A100 all-1g.10gb) —
 * claims without and with opaque configs (class vs claim precedence, requests, subrequests,
 * default per device kind), MPS limits per device, and every refusal with NVIDIA's text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

#define MIG0 "gpu-1-mig-1g10gb-19-0"
#define MIG2 "gpu-1-mig-1g10gb-19-2"
#define API "\"apiVersion\": \"resource.nvidia.com/v1beta1\", "

/* A claim "ml/c" (uid-1) allocated on node-a with these results and configs (JSON lists). */
static struct dra_claim *claim(const char *results, const char *configs)
{
    char text[8192];

    snprintf(text, sizeof(text),
             "{\"metadata\": {\"name\": \"c\", \"namespace\": \"ml\", \"uid\": \"uid-1\"},"
             " \"status\": {\"allocation\": {\"devices\": {\"results\": %s, \"config\": %s}}}}",
             results, configs);
    return tx_claim(text);
}

static struct dra_plan *plan_ok(const struct dra_claim *c, const struct dra_checkpoint *cp)
{
    struct dra_plan *p = NULL;
    struct error err = {0};

    if (dra_plan_build(c, "node-a", tx_plan_devices(), cp, &p, &err) < 0)
        fail_msg("dra_plan_build: %s", err.msg);
    return p;
}

static void plan_fails(const struct dra_claim *c, const struct dra_devices *devs,
                       const struct dra_checkpoint *cp, int code, const char *want)
{
    struct dra_plan *p = NULL;
    struct error err = {0};
    int r = dra_plan_build(c, "node-a", devs ? devs : tx_plan_devices(), cp, &p, &err);

    if (r != code)
        fail_msg("got %d (%s), want %d '%s'", r, err.msg, code, want);
    if (!strstr(err.msg, want))
        fail_msg("'%s' lacks '%s'", err.msg, want);
    assert_null(p);
}

static const char *const two_results =
    "[{\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
    "  \"device\": \"gpu-0\"},"
    " {\"request\": \"other\", \"driver\": \"nic.example.com\", \"pool\": \"node-a\","
    "  \"device\": \"nic-0\"},"
    " {\"request\": \"mig\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
    "  \"device\": \"" MIG2 "\"},"
    " {\"request\": \"far\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-b\","
    "  \"device\": \"gpu-9\"}]";

/* No config: the results of this driver and pool, in order, without sharing. */
static void test_dra_plan_build_without_config(void **state)
{
    struct dra_claim *c = claim(two_results, "[]");
    struct dra_plan *p = plan_ok(c, NULL);
    const struct dra_plan_device *d;
    (void)state;

    assert_string_equal(p->claim_uid, "uid-1");
    assert_string_equal(p->claim_name, "c");
    assert_string_equal(p->claim_namespace, "ml");
    assert_int_equal(p->n_devices, 2);
    d = &p->devices[0];
    assert_string_equal(d->request, "gpu");
    assert_string_equal(d->pool, "node-a");
    assert_string_equal(d->device.name, "gpu-0");
    assert_int_equal(d->device.type, DRA_DEVICE_GPU);
    assert_string_equal(d->cdi_device_id, "k8s.gpu.nvidia.com/claim=uid-1-gpu-0");
    assert_string_equal(d->cdi_device_name, "uid-1-gpu-0");
    assert_string_equal(d->device_nodes[0], "/dev/nvidia0");
    assert_null(d->device_nodes[1]);
    assert_ptr_equal(d->sharing.mode, cfg_sharing_mode(CFG_SHARING_NONE));
    assert_int_equal(d->sharing.active_thread_percentage, -1);
    d = &p->devices[1];
    assert_string_equal(d->device.name, MIG2);
    assert_int_equal(d->device.type, DRA_DEVICE_MIG);
    assert_string_equal(d->cdi_device_id, "k8s.gpu.nvidia.com/claim=uid-1-" MIG2);
    assert_string_equal(d->device_nodes[0], "/dev/nvidia1");
    assert_int_equal(d->device.minor, 1);
    assert_int_equal(d->device.mig_index, 2);
    assert_int_not_equal(d->device.gi_id, INV_ID_NONE);
    assert_int_equal(d->device.ci_id, 0);
    assert_string_equal(d->device.profile, "1g.10gb");
    assert_int_equal(p->n_groups, 2); /* the default GpuConfig and MigDeviceConfig */
    assert_int_not_equal(p->devices[0].group, p->devices[1].group);
    dra_plan_free(p);
    dra_claim_free(c);
}

/* Claim configs win over class configs; a GpuConfig for all requests leaves MIG devices to
 * the MIG configs; configs of other drivers are skipped unread. */
static void test_dra_plan_build_precedence(void **state)
{
    struct dra_claim *c = claim(
        two_results,
        "[{\"source\": \"FromClass\", \"opaque\": {\"driver\": \"gpu.nvidia.com\", \"parameters\":"
        "   {" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\","
        "    \"timeSlicingConfig\": {\"interval\": \"Long\"}}}}},"
        " {\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"gpu.nvidia.com\", \"parameters\":"
        "   {" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\","
        "    \"timeSlicingConfig\": {\"interval\": \"Short\"}}}}},"
        " {\"source\": \"FromClass\", \"opaque\": {\"driver\": \"gpu.nvidia.com\", \"parameters\":"
        "   {" API "\"kind\": \"MigDeviceConfig\", \"sharing\": {\"strategy\": \"MPS\","
        "    \"mpsConfig\": {\"defaultActiveThreadPercentage\": 30}}}}},"
        " {\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"nic.example.com\","
        "   \"parameters\": {\"anything\": true}}}]");
    struct dra_plan *p = plan_ok(c, NULL);
    (void)state;

    assert_int_equal(p->n_devices, 2);
    assert_ptr_equal(p->devices[0].sharing.mode, cfg_sharing_mode(CFG_SHARING_TIME_SLICING));
    assert_int_equal(p->devices[0].sharing.interval, DRA_TIMESLICE_SHORT);
    assert_ptr_equal(p->devices[1].sharing.mode, cfg_sharing_mode(CFG_SHARING_MPS));
    assert_int_equal(p->devices[1].sharing.active_thread_percentage, 30);
    assert_int_equal(p->devices[1].sharing.pinned_limit_mib, 0);
    dra_plan_free(p);
    dra_claim_free(c);
}

/* A config naming another request is skipped; a main request name covers its subrequests;
 * as in NVIDIA's driver a later config for all requests beats an earlier one naming it. */
static void test_dra_plan_build_requests(void **state)
{
    struct dra_claim *c = claim(
        "[{\"request\": \"gpu/big\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
        "  \"device\": \"gpu-0\"}]",
        "[{\"source\": \"FromClaim\", \"requests\": [\"gpu\"], \"opaque\": {\"driver\":"
        "   \"gpu.nvidia.com\", \"parameters\": {" API "\"kind\": \"GpuConfig\", \"sharing\":"
        "   {\"strategy\": \"TimeSlicing\", \"timeSlicingConfig\": {\"interval\": \"Medium\"}}}}},"
        " {\"source\": \"FromClaim\", \"requests\": [\"other\"], \"opaque\": {\"driver\":"
        "   \"gpu.nvidia.com\", \"parameters\": {" API "\"kind\": \"GpuConfig\", \"sharing\":"
        "   {\"strategy\": \"MPS\"}}}}]");
    struct dra_plan *p = plan_ok(c, NULL);
    (void)state;

    assert_ptr_equal(p->devices[0].sharing.mode, cfg_sharing_mode(CFG_SHARING_TIME_SLICING));
    assert_int_equal(p->devices[0].sharing.interval, DRA_TIMESLICE_MEDIUM);
    dra_plan_free(p);
    dra_claim_free(c);

    c = claim("[{\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
              "  \"device\": \"gpu-0\"}]",
              "[{\"source\": \"FromClass\", \"requests\": [\"gpu\"], \"opaque\": {\"driver\":"
              "   \"gpu.nvidia.com\", \"parameters\": {" API "\"kind\": \"GpuConfig\", \"sharing\":"
              "   {\"strategy\": \"MPS\"}}}},"
              " {\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"gpu.nvidia.com\","
              "   \"parameters\": {" API "\"kind\": \"GpuConfig\"}}}]");
    p = plan_ok(c, NULL);
    assert_ptr_equal(p->devices[0].sharing.mode, cfg_sharing_mode(CFG_SHARING_NONE));
    dra_plan_free(p);
    dra_claim_free(c);
}

static const char *const three_migs =
    "[{\"request\": \"m\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
    "  \"device\": \"" MIG0 "\"},"
    " {\"request\": \"m\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
    "  \"device\": \"" MIG2 "\"},"
    " {\"request\": \"n\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
    "  \"device\": \"gpu-1-mig-1g10gb-19-3\"}]";

/* MPS limits: the default for every device of the config, overridden by index (into the
 * config's devices) or by uuid; devices of one config share a group. */
static void test_dra_plan_build_mps_limits(void **state)
{
    const struct dra_device *m0 = dra_devices_find(tx_plan_devices(), MIG0);
    const struct dra_device *m2 = dra_devices_find(tx_plan_devices(), MIG2);
    /* indexes count the config's devices in uuid order, as NVIDIA's driver does */
    const char *m0_index = strcmp(m0->info.uuid, m2->info.uuid) < 0 ? "0" : "1";
    char configs[2048];
    struct dra_claim *c;
    struct dra_plan *p;
    (void)state;

    snprintf(configs, sizeof(configs),
             "[{\"source\": \"FromClaim\", \"requests\": [\"m\"], \"opaque\": {\"driver\":"
             "  \"gpu.nvidia.com\", \"parameters\": {" API "\"kind\": \"MigDeviceConfig\","
             "  \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": {"
             "  \"defaultActiveThreadPercentage\": 25, \"defaultPinnedDeviceMemoryLimit\": \"2Gi\","
             "  \"defaultPerDevicePinnedMemoryLimit\": {\"%s\": \"1Gi\", \"%s\": \"3Gi\"}}}}}}]",
             m0_index, m2->info.uuid);
    c = claim(three_migs, configs);
    p = plan_ok(c, NULL);
    assert_int_equal(p->n_devices, 3);
    assert_ptr_equal(p->devices[0].sharing.mode, cfg_sharing_mode(CFG_SHARING_MPS));
    assert_int_equal(p->devices[0].sharing.active_thread_percentage, 25);
    assert_int_equal(p->devices[0].sharing.pinned_limit_mib, 1024);
    assert_int_equal(p->devices[1].sharing.pinned_limit_mib, 3072);
    assert_int_equal(p->devices[0].group, p->devices[1].group);
    assert_ptr_equal(p->devices[2].sharing.mode, cfg_sharing_mode(CFG_SHARING_NONE));
    assert_int_not_equal(p->devices[2].group, p->devices[0].group);
    assert_int_equal(p->n_groups, 2);
    dra_plan_free(p);
    dra_claim_free(c);

    /* the default alone */
    c = claim(three_migs, "[{\"source\": \"FromClass\", \"opaque\": {\"driver\":"
                          "  \"gpu.nvidia.com\", \"parameters\": {" API
                          "\"kind\": \"MigDeviceConfig\", \"sharing\": {\"strategy\": \"MPS\","
                          "  \"mpsConfig\": {\"defaultPinnedDeviceMemoryLimit\": \"1536Mi\"}}}}}]");
    p = plan_ok(c, NULL);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(p->devices[i].sharing.pinned_limit_mib, 1536);
    assert_int_equal(p->n_groups, 1);
    dra_plan_free(p);
    dra_claim_free(c);
}

static void test_dra_plan_build_mps_bad_keys(void **state)
{
    static const char *const t[][2] = {
        {"GPU-not-here", "invalid device: unable to parse key as an integer: GPU-not-here"},
        {"2", "invalid device index: 2"},
    };
    char configs[2048];
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(t); i++) {
        snprintf(configs, sizeof(configs),
                 "[{\"source\": \"FromClaim\", \"requests\": [\"m\"], \"opaque\": {\"driver\":"
                 "  \"gpu.nvidia.com\", \"parameters\": {" API "\"kind\": \"MigDeviceConfig\","
                 "  \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": {"
                 "  \"defaultPerDevicePinnedMemoryLimit\": {\"%s\": \"3Gi\"}}}}}}]",
                 t[i][0]);
        struct dra_claim *c = claim(three_migs, configs);
        plan_fails(c, NULL, NULL, -EINVAL, t[i][1]);
        dra_claim_free(c);
    }
}

/* NVIDIA's texts for every refusal, with what to do. */
static void test_dra_plan_build_refusals(void **state)
{
    static const char *const gpu0 =
        "[{\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
        "  \"device\": \"gpu-0\"}]";
    static const char *const mig2 =
        "[{\"request\": \"mig\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
        "  \"device\": \"" MIG2 "\"}]";
    struct dra_claim *c;
    (void)state;

    c = tx_claim("{\"metadata\": {\"name\": \"c\", \"uid\": \"u\"}}");
    plan_fails(c, NULL, NULL, -EINVAL, "claim not yet allocated");
    dra_claim_free(c);

    c = claim("[{\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
              "  \"device\": \"gpu-7\"}]",
              "[]");
    plan_fails(c, NULL, NULL, -ENODEV, "requested device is not allocatable: gpu-7; ");
    dra_claim_free(c);

    c = claim(mig2, "[{\"source\": \"FromClaim\", \"requests\": [\"mig\"], \"opaque\":"
                    " {\"driver\": \"gpu.nvidia.com\", \"parameters\": {" API
                    "\"kind\": \"GpuConfig\"}}}]");
    plan_fails(c, NULL, NULL, -EINVAL,
               "cannot apply GpuConfig to device type mig (request: mig); use MigDeviceConfig");
    dra_claim_free(c);

    c = claim(gpu0, "[{\"source\": \"FromClass\", \"requests\": [\"gpu\"], \"opaque\":"
                    " {\"driver\": \"gpu.nvidia.com\", \"parameters\": {" API
                    "\"kind\": \"MigDeviceConfig\"}}}]");
    plan_fails(c, NULL, NULL, -EINVAL,
               "cannot apply MigDeviceConfig to device type gpu (request: gpu); use GpuConfig");
    dra_claim_free(c);

    c = claim(gpu0, "[{\"source\": \"FromClaim\"}]");
    plan_fails(c, NULL, NULL, -EINVAL,
               "ResourceClaim ml/c: status.allocation.devices.config[0] (FromClaim): only "
               "opaque parameters are supported by this driver");
    dra_claim_free(c);

    c = claim(gpu0, "[{\"source\": \"FromClass\", \"opaque\": {\"driver\": \"gpu.nvidia.com\","
                    " \"parameters\": {" API "\"kind\": \"GpuConfig\", \"sharing\":"
                    " {\"strategy\": \"Exclusive\"}}}}]");
    plan_fails(c, NULL, NULL, -EINVAL,
               "ResourceClaim ml/c: status.allocation.devices.config[0] (FromClass): unknown GPU "
               "sharing strategy: Exclusive");
    dra_claim_free(c);
}

static void test_dra_plan_build_unhealthy(void **state)
{
    const struct dra_devices *all = tx_plan_devices();
    struct dra_devices devs = {malloc(all->n_devices * sizeof(*all->devices)), all->n_devices};
    struct dra_claim *c = claim(two_results, "[]");
    (void)state;

    assert_non_null(devs.devices);
    memcpy(devs.devices, all->devices, all->n_devices * sizeof(*all->devices));
    devs.devices[dra_devices_find(all, MIG2) - all->devices].healthy = false;
    plan_fails(c, &devs, NULL, -EIO, "requested device is not healthy: " MIG2 "; ");
    free(devs.devices);
    dra_claim_free(c);
}

/* A device that a completely prepared claim of another uid holds is refused (NVIDIA's text);
 * a claim only started, the same claim, or admin access are not. */
static void test_dra_plan_build_already_prepared(void **state)
{
    struct dra_checkpoint *cp = dra_checkpoint_new();
    struct dra_claim *other = claim(two_results, "[]");
    struct dra_claim *c =
        claim("[{\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
              "  \"device\": \"gpu-0\"}]",
              "[]");
    struct dra_claim *admin =
        claim("[{\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
              "  \"device\": \"gpu-0\", \"adminAccess\": true}]",
              "[]");
    struct dra_plan *p = plan_ok(other, NULL);
    (void)state;

    free(p->claim_uid);
    p->claim_uid = str_dup("uid-other");
    assert_int_equal(dra_checkpoint_put(cp, DRA_PREPARE_STARTED, dra_plan_dup(p), NULL), 0);
    dra_plan_free(plan_ok(c, cp));
    assert_int_equal(dra_checkpoint_put(cp, DRA_PREPARE_COMPLETED, p, NULL), 0);
    plan_fails(c, NULL, cp, -EBUSY,
               "requested device gpu-0 is already allocated to different claim uid-other; ");
    dra_plan_free(plan_ok(admin, cp));
    /* the claim itself, prepared before: no overlap with itself */
    assert_int_equal(dra_checkpoint_put(cp, DRA_PREPARE_COMPLETED, plan_ok(c, NULL), NULL), 0);
    assert_true(dra_checkpoint_remove(cp, "uid-other"));
    dra_plan_free(plan_ok(c, cp));
    dra_claim_free(admin);
    dra_claim_free(c);
    dra_claim_free(other);
    dra_checkpoint_free(cp);
}

#define SHARE(dev, extra)                                                                          \
    "[{\"request\": \"r\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","                  \
    "  \"device\": \"" dev "\"" extra "}]"

/* Shares: the share's limits in the plan; a share is refused without consumed memory, on a
 * MIG device or with a sharing config; shares of one GPU live side by side, but not with
 * the GPU held whole, either way round. */
static void test_dra_plan_build_shares(void **state)
{
    struct dra_claim *a =
        claim(SHARE("gpu-0", ", \"shareID\": \"s-a\", \"consumedCapacity\":"
                             " {\"memory\": \"1536Mi\", \"computePercent\": \"30\"}"),
              "[]");
    struct dra_claim *b = claim(
        SHARE("gpu-0", ", \"shareID\": \"s-b\", \"consumedCapacity\": {\"memory\": \"10Gi\"}"),
        "[]");
    struct dra_claim *whole = claim(SHARE("gpu-0", ""), "[]");
    struct dra_claim *nomem = claim(SHARE("gpu-0", ", \"shareID\": \"s-n\""), "[]");
    struct dra_claim *mig = claim(
        SHARE(MIG0, ", \"shareID\": \"s-m\", \"consumedCapacity\": {\"memory\": \"1Gi\"}"), "[]");
    struct dra_claim *cfg =
        claim(SHARE("gpu-0", ", \"shareID\": \"s-c\", \"consumedCapacity\": {\"memory\": "
                             "\"1Gi\"}"),
              "[{\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"gpu.nvidia.com\","
              " \"parameters\": {" API "\"kind\": \"GpuConfig\", \"sharing\": "
              "{\"strategy\": \"TimeSlicing\"}}}}]");
    struct dra_checkpoint *cp = dra_checkpoint_new();
    struct dra_plan *p = plan_ok(a, NULL);
    (void)state;

    assert_string_equal(p->devices[0].share.id, "s-a");
    assert_int_equal(p->devices[0].share.memory_mib, 1536);
    assert_int_equal(p->devices[0].share.thread_pct, 30);
    assert_ptr_equal(p->devices[0].sharing.mode, cfg_sharing_mode(CFG_SHARING_NONE));
    assert_string_equal(p->devices[0].cdi_device_id, "k8s.gpu.nvidia.com/claim=uid-1-gpu-0-s-a");
    {
        /* two shares of one GPU in one claim: two CDI devices; a shareID that is no UID */
        struct dra_claim *two =
            claim("[{\"request\": \"a\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
                  " \"device\": \"gpu-0\", \"shareID\": \"s-1\", \"consumedCapacity\": {\"memory\":"
                  " \"1Gi\"}}, {\"request\": \"b\", \"driver\": \"gpu.nvidia.com\", \"pool\":"
                  " \"node-a\", \"device\": \"gpu-0\", \"shareID\": \"s-2\", \"consumedCapacity\":"
                  " {\"memory\": \"2Gi\"}}]",
                  "[]");
        struct dra_claim *bad = claim(
            SHARE("gpu-0", ", \"shareID\": \"../x\", \"consumedCapacity\": {\"memory\": \"1Gi\"}"),
            "[]");
        struct dra_plan *q = plan_ok(two, NULL);
        assert_string_equal(q->devices[0].cdi_device_name, "uid-1-gpu-0-s-1");
        assert_string_equal(q->devices[1].cdi_device_name, "uid-1-gpu-0-s-2");
        plan_fails(bad, NULL, NULL, -EINVAL, "shareID '../x' is not a UID");
        dra_plan_free(q);
        dra_claim_free(two);
        dra_claim_free(bad);
    }
    plan_fails(nomem, NULL, NULL, -EINVAL, "has no consumedCapacity.memory");
    plan_fails(mig, NULL, NULL, -EINVAL, "only whole GPUs are shared by memory");
    plan_fails(cfg, NULL, NULL, -EINVAL, "has a TimeSlicing sharing config");
    /* a share of gpu-0 prepared for uid-a */
    free(p->claim_uid);
    p->claim_uid = str_dup("uid-a");
    assert_int_equal(dra_checkpoint_put(cp, DRA_PREPARE_COMPLETED, p, NULL), 0);
    dra_plan_free(plan_ok(b, cp));
    plan_fails(whole, NULL, cp, -EBUSY, "is held in shares by claim uid-a (share s-a)");
    /* gpu-0 prepared whole for uid-w: no share of it */
    assert_true(dra_checkpoint_remove(cp, "uid-a"));
    p = plan_ok(whole, NULL);
    free(p->claim_uid);
    p->claim_uid = str_dup("uid-w");
    assert_int_equal(dra_checkpoint_put(cp, DRA_PREPARE_COMPLETED, p, NULL), 0);
    plan_fails(b, NULL, cp, -EBUSY, "(share s-b) is already allocated whole to different claim");
    dra_checkpoint_free(cp);
    dra_claim_free(a);
    dra_claim_free(b);
    dra_claim_free(whole);
    dra_claim_free(nomem);
    dra_claim_free(mig);
    dra_claim_free(cfg);
}

int run_plan_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_plan_build_without_config),
        cmocka_unit_test(test_dra_plan_build_precedence),
        cmocka_unit_test(test_dra_plan_build_requests),
        cmocka_unit_test(test_dra_plan_build_mps_limits),
        cmocka_unit_test(test_dra_plan_build_mps_bad_keys),
        cmocka_unit_test(test_dra_plan_build_refusals),
        cmocka_unit_test(test_dra_plan_build_unhealthy),
        cmocka_unit_test(test_dra_plan_build_already_prepared),
        cmocka_unit_test(test_dra_plan_build_shares),
    };
    return cmocka_run_group_tests_name("dra plan", tests, NULL, NULL);
}

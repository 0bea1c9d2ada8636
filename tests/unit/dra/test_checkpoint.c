/* SPDX-License-Identifier: Apache-2.0 */
/* test_checkpoint.c: src/dra/checkpoint.c — prepared claims through encode and decode
 * unchanged (devices, CDI ids, sharing, states), put/find/remove, and the refusals: a
 * changed checksum, text that is not a checkpoint, a malformed claim. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

static struct dra_plan *plan_of(const char *uid, const char *results, const char *configs)
{
    char text[4096];
    struct dra_claim *c;
    struct dra_plan *p = NULL;
    struct error err = {0};

    snprintf(text, sizeof(text),
             "{\"metadata\": {\"name\": \"n-%s\", \"namespace\": \"ns\", \"uid\": \"%s\"},"
             " \"status\": {\"allocation\": {\"devices\": {\"results\": %s, \"config\": %s}}}}",
             uid, uid, results, configs);
    c = tx_claim(text);
    if (dra_plan_build(c, "node-a", tx_plan_devices(), NULL, &p, &err) < 0)
        fail_msg("%s", err.msg);
    dra_claim_free(c);
    return p;
}

static struct dra_checkpoint *sample(void)
{
    struct dra_checkpoint *cp = dra_checkpoint_new();

    assert_non_null(cp);
    assert_int_equal(
        dra_checkpoint_put(
            cp, DRA_PREPARE_COMPLETED,
            plan_of("u1",
                    "[{\"request\": \"g\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
                    " \"device\": \"gpu-0\"}, {\"request\": \"m\", \"driver\": "
                    "\"gpu.nvidia.com\", \"pool\": \"node-a\", \"device\": "
                    "\"gpu-1-mig-1g10gb-19-4\", \"adminAccess\": true}]",
                    "[{\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"gpu.nvidia.com\","
                    " \"parameters\": {\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\":"
                    " \"MigDeviceConfig\", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\":"
                    " {\"defaultActiveThreadPercentage\": 40, \"defaultPinnedDeviceMemoryLimit\":"
                    " \"4Gi\"}}}}}]"),
            NULL),
        0);
    assert_int_equal(
        dra_checkpoint_put(
            cp, DRA_PREPARE_STARTED,
            plan_of("u2",
                    "[{\"request\": \"g\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
                    " \"device\": \"gpu-1-mig-1g10gb-19-5\"}]",
                    "[]"),
            NULL),
        0);
    return cp;
}

static void same_plan(const struct dra_plan *a, const struct dra_plan *b)
{
    assert_string_equal(a->claim_uid, b->claim_uid);
    assert_string_equal(a->claim_name, b->claim_name);
    assert_string_equal(a->claim_namespace, b->claim_namespace);
    assert_int_equal(a->n_devices, b->n_devices);
    assert_int_equal(a->n_groups, b->n_groups);
    for (size_t i = 0; i < a->n_devices; i++) {
        const struct dra_plan_device *x = &a->devices[i], *y = &b->devices[i];
        assert_string_equal(x->request, y->request);
        assert_string_equal(x->pool, y->pool);
        assert_memory_equal(&x->device, &y->device, sizeof(x->device));
        assert_string_equal(x->cdi_device_id, y->cdi_device_id);
        assert_string_equal(x->cdi_device_name, y->cdi_device_name);
        assert_string_equal(x->device_nodes[0], y->device_nodes[0]);
        assert_null(y->device_nodes[1]);
        assert_memory_equal(&x->sharing, &y->sharing, sizeof(x->sharing));
        assert_memory_equal(&x->share, &y->share, sizeof(x->share));
        assert_int_equal(x->group, y->group);
        assert_int_equal(x->admin_access, y->admin_access);
    }
}

static void test_dra_checkpoint_round_trip(void **state)
{
    struct dra_checkpoint *cp = sample(), *back = NULL;
    char *text = NULL, *again = NULL;
    struct error err = {0};
    (void)state;

    assert_int_equal(dra_checkpoint_encode(cp, &text, &err), 0);
    assert_non_null(strstr(text, "\"checkpointState\":\"PrepareCompleted\""));
    assert_non_null(strstr(text, "\"checkpointState\":\"PrepareStarted\""));
    assert_non_null(strstr(text, "k8s.gpu.nvidia.com/claim=u1-gpu-0"));
    if (dra_checkpoint_decode(text, strlen(text), &back, &err) < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(back->n_claims, 2);
    for (size_t i = 0; i < 2; i++) {
        const struct dra_checkpoint_claim *a = &cp->claims[i];
        const struct dra_checkpoint_claim *b = dra_checkpoint_find(back, a->plan->claim_uid);
        assert_non_null(b);
        assert_int_equal(a->state, b->state);
        same_plan(a->plan, b->plan);
    }
    assert_int_equal(dra_checkpoint_find(back, "u1")->plan->devices[1].sharing.pinned_limit_mib,
                     4096);
    assert_true(dra_checkpoint_find(back, "u1")->plan->devices[1].admin_access);
    assert_int_equal(dra_checkpoint_encode(back, &again, &err), 0);
    assert_string_equal(text, again);
    free(again);
    free(text);
    dra_checkpoint_free(back);
    dra_checkpoint_free(cp);
}

static void test_dra_checkpoint_put_find_remove(void **state)
{
    struct dra_checkpoint *cp = sample();
    char *text = NULL;
    struct dra_checkpoint *back = NULL;
    (void)state;

    assert_null(dra_checkpoint_find(cp, "u3"));
    assert_int_equal(dra_checkpoint_find(cp, "u2")->state, DRA_PREPARE_STARTED);
    assert_int_equal(dra_checkpoint_put(cp, DRA_PREPARE_COMPLETED,
                                        dra_plan_dup(dra_checkpoint_find(cp, "u2")->plan), NULL),
                     0);
    assert_int_equal(cp->n_claims, 2);
    assert_int_equal(dra_checkpoint_find(cp, "u2")->state, DRA_PREPARE_COMPLETED);
    assert_true(dra_checkpoint_remove(cp, "u1"));
    assert_false(dra_checkpoint_remove(cp, "u1"));
    assert_int_equal(cp->n_claims, 1);
    assert_true(dra_checkpoint_remove(cp, "u2"));
    assert_int_equal(dra_checkpoint_encode(cp, &text, NULL), 0);
    assert_int_equal(dra_checkpoint_decode(text, strlen(text), &back, NULL), 0);
    assert_int_equal(back->n_claims, 0);
    free(text);
    dra_checkpoint_free(back);
    dra_checkpoint_free(cp);
}

/* A share keeps its id and limits across a restart; files without shares have no "share". */
static void test_dra_checkpoint_share_round_trip(void **state)
{
    struct dra_checkpoint *cp = sample(), *back = NULL;
    char *text = NULL;
    struct error err = {0};
    (void)state;

    assert_int_equal(dra_checkpoint_encode(cp, &text, &err), 0);
    assert_null(strstr(text, "\"share\""));
    free(text);
    assert_int_equal(
        dra_checkpoint_put(
            cp, DRA_PREPARE_COMPLETED,
            plan_of("u3",
                    "[{\"request\": \"g\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
                    " \"device\": \"gpu-0\", \"shareID\": \"s-3\", \"consumedCapacity\":"
                    " {\"memory\": \"10Gi\", \"computePercent\": \"20\"}}]",
                    "[]"),
            NULL),
        0);
    assert_int_equal(dra_checkpoint_encode(cp, &text, &err), 0);
    assert_non_null(
        strstr(text, "\"share\":{\"id\":\"s-3\",\"memoryMiB\":10240,\"threadPercentage\":20}"));
    if (dra_checkpoint_decode(text, strlen(text), &back, &err) < 0)
        fail_msg("%s", err.msg);
    same_plan(dra_checkpoint_find(cp, "u3")->plan, dra_checkpoint_find(back, "u3")->plan);
    free(text);
    dra_checkpoint_free(back);
    dra_checkpoint_free(cp);
}

static void test_dra_checkpoint_decode_refusals(void **state)
{
    struct dra_checkpoint *cp = sample(), *back = NULL;
    char *text = NULL, *p;
    struct error err = {0};
    char bad[256];
    uint32_t sum = 0;
    (void)state;

    assert_int_equal(dra_checkpoint_encode(cp, &text, NULL), 0);
    /* a changed value under the checksum */
    p = strstr(text, "\"minor\":1");
    assert_non_null(p);
    p[8] = '2';
    assert_int_equal(dra_checkpoint_decode(text, strlen(text), &back, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "checksum mismatch"));
    assert_non_null(strstr(err.msg, "removing it makes the plugin forget"));
    assert_null(back);
    /* cut short */
    assert_int_equal(dra_checkpoint_decode(text, strlen(text) / 2, &back, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "not JSON"));
    assert_int_equal(dra_checkpoint_decode("{\"v2\": {}}", 10, &back, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "not a checkpoint"));
    /* a checksum that matches a malformed claim: the claim is named */
    {
        json_t *v1 = json_pack("{s:{s:{s:s}}}", "preparedClaims", "u9", "checkpointState", "Done");
        char *t = json_dumps(v1, JSON_COMPACT | JSON_SORT_KEYS);
        sum = 2166136261u;
        for (const char *s = t; *s; s++)
            sum = (sum ^ (unsigned char)*s) * 16777619u;
        snprintf(bad, sizeof(bad), "{\"checksum\": %u, \"v1\": %s}", sum, t);
        free(t);
        json_decref(v1);
    }
    assert_int_equal(dra_checkpoint_decode(bad, strlen(bad), &back, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "claim u9 is malformed"));
    free(text);
    dra_checkpoint_free(cp);
}

/* NVIDIA's v0.4.0 nodeBootID: the boot is kept through a save, a checkpoint of another boot
 * is emptied (and says how many claims went), one without a boot is adopted, an unknown boot
 * decides nothing. */
static void test_dra_checkpoint_for_boot(void **state)
{
    struct dra_checkpoint *cp = sample(), *back = NULL;
    char *text = NULL, *old = NULL;
    struct error err = {0};
    (void)state;

    assert_int_equal(dra_checkpoint_encode(cp, &old, &err), 0);
    assert_null(strstr(old, "nodeBootID")); /* unknown: files stay as they were */
    assert_int_equal(dra_checkpoint_for_boot(cp, NULL), 0);
    assert_int_equal(dra_checkpoint_for_boot(cp, ""), 0);
    assert_int_equal(cp->n_claims, 2);
    assert_string_equal(cp->boot_id, "");
    /* adopted and stamped */
    assert_int_equal(dra_checkpoint_for_boot(cp, "boot-a"), 0);
    assert_int_equal(cp->n_claims, 2);
    assert_int_equal(dra_checkpoint_encode(cp, &text, &err), 0);
    assert_non_null(strstr(text, "\"nodeBootID\":\"boot-a\""));
    if (dra_checkpoint_decode(text, strlen(text), &back, &err) < 0)
        fail_msg("%s", err.msg);
    assert_string_equal(back->boot_id, "boot-a");
    /* the same boot: kept */
    assert_int_equal(dra_checkpoint_for_boot(back, "boot-a"), 0);
    assert_int_equal(back->n_claims, 2);
    /* another boot: forgotten, stamped with the new one */
    assert_int_equal(dra_checkpoint_for_boot(back, "boot-b"), 2);
    assert_int_equal(back->n_claims, 0);
    assert_string_equal(back->boot_id, "boot-b");
    dra_checkpoint_free(back);
    back = NULL;
    /* a file without the field (older gpuslice) decodes as unknown */
    if (dra_checkpoint_decode(old, strlen(old), &back, &err) < 0)
        fail_msg("%s", err.msg);
    assert_string_equal(back->boot_id, "");
    free(text);
    free(old);
    dra_checkpoint_free(back);
    dra_checkpoint_free(cp);
}

int run_checkpoint_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_checkpoint_round_trip),
        cmocka_unit_test(test_dra_checkpoint_put_find_remove),
        cmocka_unit_test(test_dra_checkpoint_decode_refusals),
        cmocka_unit_test(test_dra_checkpoint_share_round_trip),
        cmocka_unit_test(test_dra_checkpoint_for_boot),
    };
    return cmocka_run_group_tests_name("dra checkpoint", tests, NULL, NULL);
}

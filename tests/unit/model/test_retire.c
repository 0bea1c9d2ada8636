/* SPDX-License-Identifier: Apache-2.0 */
/* test_retire.c: model_removed_ids and model_retire_devices (src/model/retire.c), what the
 * daemon uses to keep devices that pods still hold after a live change: stable replica IDs
 * (8 -> 4 drops ::4..::7), held devices appended Unhealthy and findable, a resource that is
 * gone brought back in name order with only its held devices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fixtures.h"
#include "model/model.h"

static struct model *time_sliced(const struct inv_inventory *inv, unsigned replicas, bool rename)
{
    struct cfg_config cfg;
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", replicas);

    fx_cfg_init(&cfg);
    if (replicas > 1)
        fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, rename, false);
    return fx_build(inv, &cfg);
}

static const char *suffix(const char *id)
{
    const char *p = strstr(id, "::");
    return p ? p + 2 : "";
}

static void test_model_removed_ids_replicas_8_to_4(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct model *old = time_sliced(inv, 8, false), *m = time_sliced(inv, 4, false);
    const struct model_resource *ores = model_find_resource(old, "nvidia.com/gpu");
    char **ids = NULL;

    (void)state;
    assert_int_equal(model_removed_ids(m, ores, &ids, NULL), 0);
    assert_int_equal(strv_length(ids), 4);
    for (size_t i = 0; i < 4; i++) {
        char want[4];
        want[0] = (char)('4' + i);
        want[1] = '\0';
        assert_string_equal(suffix(ids[i]), want); /* ::0..::3 stay: IDs are stable */
    }
    strv_free(ids);
    /* nothing removed when the new model lists everything */
    assert_int_equal(model_removed_ids(old, ores, &ids, NULL), 0);
    assert_int_equal(strv_length(ids), 0);
    strv_free(ids);
    model_free(old);
    model_free(m);
    inv_free(inv);
}

static void test_model_retire_devices_held_stay_unhealthy(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct model *old = time_sliced(inv, 8, false), *m = time_sliced(inv, 4, false);
    const struct model_resource *ores = model_find_resource(old, "nvidia.com/gpu");
    const struct model_resource *res;
    const char *held[3];

    (void)state;
    held[0] = ores->devices[7].id;
    held[1] = ores->devices[5].id;
    held[2] = ores->devices[5].id; /* a duplicate is added once */
    assert_int_equal(model_retire_devices(m, ores, held, 3, NULL), 2);
    res = model_find_resource(m, "nvidia.com/gpu");
    assert_int_equal(res->n_devices, 6);
    for (size_t i = 0; i < 2; i++) {
        const struct model_device *d = model_resource_find_device(res, held[i]);
        assert_non_null(d);
        assert_false(d->healthy);
        assert_string_equal(d->base_id, ores->devices[0].base_id);
    }
    assert_true(model_resource_find_device(res, ores->devices[0].id)->healthy);
    /* already listed or unknown IDs are skipped */
    held[0] = ores->devices[1].id;
    held[1] = "GPU-nope::1";
    assert_int_equal(model_retire_devices(m, ores, held, 2, NULL), 0);
    assert_int_equal(res->n_devices, 6);
    assert_int_equal(model_retire_devices(m, ores, NULL, 0, NULL), 0);
    model_free(old);
    model_free(m);
    inv_free(inv);
}

static void test_model_retire_devices_resource_gone(void **state)
{
    struct inv_inventory *inv = fx_l20();
    /* renamed: nvidia.com/gpu disappears, nvidia.com/gpu.shared appears */
    struct model *old = time_sliced(inv, 4, false), *m = time_sliced(inv, 4, true);
    const struct model_resource *ores = model_find_resource(old, "nvidia.com/gpu");
    const struct model_resource *res;
    const char *held[1];
    char **ids = NULL;

    (void)state;
    assert_null(model_find_resource(m, "nvidia.com/gpu"));
    assert_int_equal(model_removed_ids(m, ores, &ids, NULL), 0);
    assert_int_equal(strv_length(ids), 4);
    strv_free(ids);
    held[0] = ores->devices[2].id;
    assert_int_equal(model_retire_devices(m, ores, held, 1, NULL), 1);
    assert_int_equal(m->n_resources, 2);
    assert_string_equal(m->resources[0].name, "nvidia.com/gpu"); /* name order kept */
    assert_string_equal(m->resources[1].name, "nvidia.com/gpu.shared");
    res = &m->resources[0];
    assert_string_equal(res->socket_name, ores->socket_name);
    assert_int_equal(res->replicas, 4);
    assert_int_equal(res->n_devices, 1);
    assert_false(res->devices[0].healthy);
    assert_non_null(model_resource_find_device(res, held[0]));
    model_free(old);
    model_free(m);
    inv_free(inv);
}

/* A new process: held replicas of an earlier one's config, described from the inventory. */
static void test_model_keep_held_table(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct model *whole = time_sliced(inv, 1, false), *eight = time_sliced(inv, 8, false);
    const struct model_resource *r8 = model_find_resource(eight, "nvidia.com/gpu");
    const struct model_resource *res;
    char bogus[160], foreign[] = "GPU-00000000-0000-0000-0000-000000000000::1";
    const char *ids[5];

    (void)state;
    snprintf(bogus, sizeof(bogus), "%s::x", r8->devices[0].gpu_uuid);
    ids[0] = r8->devices[3].id; /* a replica of our GPU: kept */
    ids[1] = r8->devices[5].id; /* another: kept */
    ids[2] = r8->devices[3].id; /* the same ID twice: once */
    ids[3] = foreign;           /* a GPU this node does not have: skipped */
    ids[4] = bogus;             /* not a replica number: skipped */
    assert_int_equal(model_keep_held(whole, inv, "nvidia.com/gpu", ids, 5, NULL), 2);
    res = model_find_resource(whole, "nvidia.com/gpu");
    assert_int_equal(res->n_devices, 3); /* the whole GPU + 2 held */
    for (size_t i = 0; i < 2; i++) {
        const struct model_device *d = model_resource_find_device(res, ids[i]);
        assert_non_null(d);
        assert_false(d->healthy);
        assert_string_equal(d->gpu_uuid, r8->devices[0].gpu_uuid);
        assert_int_equal(d->mig_index, -1);
    }
    assert_null(model_resource_find_device(res, foreign));
    /* listed already: nothing added; a resource the model lacks: created, time-sliced */
    ids[0] = res->devices[0].id;
    assert_int_equal(model_keep_held(whole, inv, "nvidia.com/gpu", ids, 1, NULL), 0);
    ids[0] = r8->devices[7].id;
    assert_int_equal(model_keep_held(whole, inv, "nvidia.com/gpu.shared", ids, 1, NULL), 1);
    res = model_find_resource(whole, "nvidia.com/gpu.shared");
    assert_non_null(res);
    assert_int_equal(res->sharing, CFG_SHARING_TIME_SLICING);
    assert_string_equal(res->socket_name, "nvidia-gpu.shared.sock");
    model_free(whole);
    model_free(eight);
    inv_free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_removed_ids_replicas_8_to_4),
        cmocka_unit_test(test_model_retire_devices_held_stay_unhealthy),
        cmocka_unit_test(test_model_retire_devices_resource_gone),
        cmocka_unit_test(test_model_keep_held_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

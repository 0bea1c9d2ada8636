/* SPDX-License-Identifier: Apache-2.0 */
/* test_retire.c: model_removed_ids and model_retire_devices (src/model/retire.c), what the
 * daemon uses to keep devices that pods still hold after a live change: stable replica IDs
 * (8 -> 4 drops ::4..::7), held devices appended Unhealthy and findable, a resource that is
 * gone brought back in name order with only its held devices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_removed_ids_replicas_8_to_4),
        cmocka_unit_test(test_model_retire_devices_held_stay_unhealthy),
        cmocka_unit_test(test_model_retire_devices_resource_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_model.c: the model's lookups and the equality helpers the daemon diffs with. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"

static struct model *l20(const struct inv_inventory *inv, unsigned replicas, bool gds)
{
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", replicas);
    struct cfg_config cfg;

    fx_cfg_init(&cfg);
    cfg.flags.gds_enabled = gds;
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, true);
    return fx_build(inv, &cfg);
}

static void test_model_resource_equal_diff(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct model *a = l20(inv, 8, false), *b = l20(inv, 8, false), *c = l20(inv, 4, true);
    const struct model_resource *ra = model_find_resource(a, "nvidia.com/gpu");
    const struct model_resource *rb = model_find_resource(b, "nvidia.com/gpu");

    (void)state;
    assert_true(model_resource_equal(ra, rb));
    assert_true(model_settings_equal(&a->settings, &b->settings));
    assert_false(model_resource_equal(ra, model_find_resource(c, "nvidia.com/gpu")));
    assert_false(model_settings_equal(&a->settings, &c->settings));
    assert_true(model_resource_equal(NULL, NULL));
    assert_false(model_resource_equal(ra, NULL));
    /* a health change is a change the kubelet must see */
    assert_int_equal(model_set_health(b, inv->gpus[0].uuid, INV_ID_NONE, INV_ID_NONE, false), 8);
    assert_false(model_resource_equal(ra, rb));
    model_free(a);
    model_free(b);
    model_free(c);
    inv_free(inv);
}

static void test_model_find_resource_and_device_misses(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct model *m = l20(inv, 2, false);
    const struct model_resource *res = model_find_resource(m, "nvidia.com/gpu");

    (void)state;
    assert_non_null(res);
    assert_null(model_find_resource(m, "nvidia.com/gpu.shared"));
    assert_null(model_find_resource(NULL, "nvidia.com/gpu"));
    assert_null(model_resource_find_device(res, "GPU-nope::0"));
    assert_null(model_resource_find_device(res, ""));
    assert_ptr_equal(model_resource_find_device(res, res->devices[1].id), &res->devices[1]);
    model_free(m);
    inv_free(inv);
}

static void test_model_set_health_mig_event_on_whole_gpu(void **state)
{
    struct inv_inventory *inv = fx_a100_1g10gb(2);
    struct cfg_config cfg;
    struct model *m;
    const struct model_resource *res;

    (void)state;
    fx_cfg_init(&cfg); /* migStrategy none: MIG-enabled GPUs are advertised whole */
    m = fx_build(inv, &cfg);
    res = model_find_resource(m, "nvidia.com/gpu");
    assert_int_equal(model_set_health(m, inv->gpus[1].uuid, 9, 0, false), 1);
    assert_true(res->devices[0].healthy);
    assert_false(res->devices[1].healthy);
    model_free(m);
    inv_free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_resource_equal_diff),
        cmocka_unit_test(test_model_find_resource_and_device_misses),
        cmocka_unit_test(test_model_set_health_mig_event_on_whole_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_plan.c: model_plan_report() — the `gpuslice plan` table and JSON shape, with errors
 * and warnings, on the seed's L20 node and MIG machines. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "fixtures.h"

static char *report(const struct model *m, const struct inv_inventory *inv,
                    enum model_plan_format f)
{
    char *text = NULL;
    struct error err = {0};
    if (model_plan_report(m, inv, f, &text, &err) < 0)
        fail_msg("model_plan_report: %s", err.msg);
    return text;
}

static struct model *l20_model(const struct inv_inventory *inv)
{
    static struct cfg_replicated_resource rule;
    struct cfg_config cfg;

    rule = fx_rule("nvidia.com/gpu", 8);
    fx_cfg_init(&cfg);
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, true);
    return fx_build(inv, &cfg);
}

static void test_model_plan_report_text_seed_l20(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct model *m = l20_model(inv);
    char *text = report(m, inv, MODEL_PLAN_TEXT);

    (void)state;
    assert_true(str_startswith(text,
                               "RESOURCE               DEVICES  SHARING        REPLICAS  GPUS\n"
                               "nvidia.com/gpu         8        time-slicing   8         "
                               "1 × NVIDIA L20 (46068 MiB, ~5758 MiB per replica)\n"
                               "warning: renameByDefault is false"));
    assert_null(strstr(text, "error:"));
    free(text);
    model_free(m);
    inv_free(inv);
}

static void test_model_plan_report_json_shape(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct model *m = l20_model(inv);
    char *text = report(m, inv, MODEL_PLAN_JSON);
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr), *res, *dev;

    (void)state;
    assert_non_null(root);
    res = json_array_get(json_object_get(root, "resources"), 0);
    assert_string_equal(json_string_value(json_object_get(res, "name")), "nvidia.com/gpu");
    assert_int_equal(json_integer_value(json_object_get(res, "count")), 8);
    assert_string_equal(json_string_value(json_object_get(res, "sharing")), "time-slicing");
    assert_int_equal(json_integer_value(json_object_get(res, "replicas")), 8);
    assert_string_equal(json_string_value(json_object_get(res, "socket")), "nvidia-gpu.sock");
    assert_int_equal(json_array_size(json_object_get(res, "devices")), 8);
    dev = json_array_get(json_object_get(res, "devices"), 7);
    assert_true(str_endswith(json_string_value(json_object_get(dev, "id")), "::7"));
    assert_int_equal(json_integer_value(json_object_get(dev, "gpu")), 0);
    assert_string_equal(json_string_value(json_object_get(dev, "health")), "Healthy");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(dev, "numa"), 0)), 0);
    assert_int_equal(json_array_size(json_object_get(root, "errors")), 0);
    assert_int_equal(json_array_size(json_object_get(root, "warnings")), 1);
    json_decref(root);
    free(text);
    model_free(m);
    inv_free(inv);
}

static void test_model_plan_report_errors_and_mig(void **state)
{
    struct inv_inventory *inv = fx_a100_balanced();
    struct model_options opts = {.keep_valid = true};
    struct cfg_config cfg;
    struct model *m = NULL;
    char *text;

    (void)state;
    fx_cfg_init(&cfg);
    cfg.flags.mig_strategy = CFG_MIG_SINGLE;
    assert_int_equal(model_build(inv, &cfg, &opts, &m, NULL), 0);
    text = report(m, inv, MODEL_PLAN_TEXT);
    assert_non_null(strstr(text, "nvidia.com/gpu         2        none           1         "
                                 "2 × MIG 1g.10gb on NVIDIA A100-SXM4-80GB (9856 MiB)\n"));
    assert_non_null(strstr(text, "error: invalid MIG configuration: more than one MIG device "
                                 "type present on node"));
    free(text);
    text = report(m, inv, MODEL_PLAN_JSON);
    assert_non_null(strstr(text, "\"errors\": [\n    \"invalid MIG configuration"));
    assert_non_null(strstr(text, "\"mig\": 1"));
    free(text);
    model_free(m);
    inv_free(inv);
}

static void test_model_plan_report_empty_and_mixed(void **state)
{
    struct inv_inventory *inv = fx_generic(0);
    struct inv_inventory *four = fx_generic(4);
    struct cfg_device_ref ref = {.kind = CFG_DEVREF_GPU_INDEX, .gpu_index = 2};
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", 8);
    struct cfg_config cfg;
    struct model *m;
    char *text;

    (void)state;
    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    text = report(m, inv, MODEL_PLAN_TEXT);
    assert_non_null(strstr(text, "(nothing is advertised)\n"));
    free(text);
    model_free(m);

    rule.devices_kind = CFG_DEVICES_LIST;
    rule.devices = &ref;
    rule.n_devices = 1;
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, true);
    m = fx_build(four, &cfg);
    text = report(m, four, MODEL_PLAN_TEXT);
    assert_non_null(strstr(text, "nvidia.com/gpu         11       time-slicing   1-8       "
                                 "3 × NVIDIA A100-SXM4-80GB (81920 MiB); 1 × NVIDIA "
                                 "A100-SXM4-80GB (81920 MiB, ~10240 MiB per replica)\n"));
    free(text);
    model_free(m);
    inv_free(inv);
    inv_free(four);
}

static void test_model_plan_report_json_non_utf8_name(void **state)
{
    struct inv_inventory *inv = fx_generic(1);
    struct cfg_config cfg;
    struct model *m;
    char *text;
    json_t *root;

    (void)state;
    inv->gpus[0].name[0] = (char)0xC3; /* a broken UTF-8 sequence from a driver */
    inv->gpus[0].name[1] = (char)0x28;
    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    text = report(m, inv, MODEL_PLAN_JSON);
    root = json_loads(text, 0, NULL);
    assert_non_null(root);
    json_decref(root);
    free(text);
    model_free(m);
    inv_free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_plan_report_text_seed_l20),
        cmocka_unit_test(test_model_plan_report_json_shape),
        cmocka_unit_test(test_model_plan_report_errors_and_mig),
        cmocka_unit_test(test_model_plan_report_empty_and_mixed),
        cmocka_unit_test(test_model_plan_report_json_non_utf8_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

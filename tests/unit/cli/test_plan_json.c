/* SPDX-License-Identifier: Apache-2.0 */
/* test_plan_json.c: cli_plan_json() (src/cli/plan_json.c), the `gpuslice plan -o json`
 * report built from the model: its shape on the seed's L20 node, and valid JSON when a
 * driver hands back a name that is not UTF-8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "cli/cli.h"
#include "fixtures.h"

static char *json_report(const struct model *m, const struct inv_inventory *inv)
{
    struct strbuf sb = STRBUF_INIT;
    if (cli_plan_json(m, inv, &sb) < 0)
        fail_msg("cli_plan_json failed");
    return strbuf_take(&sb);
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

static void test_cli_plan_json_shape(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct model *m = l20_model(inv);
    char *text = json_report(m, inv);
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

static void test_cli_plan_json_non_utf8_name(void **state)
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
    text = json_report(m, inv);
    root = json_loads(text, 0, NULL);
    assert_non_null(root);
    json_decref(root);
    free(text);
    model_free(m);
    inv_free(inv);
}

/* Errors stay in the JSON (a kept-valid model) and MIG devices carry their index. */
static void test_cli_plan_json_errors_and_mig(void **state)
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
    text = json_report(m, inv);
    assert_non_null(strstr(text, "\"errors\": [\n    \"invalid MIG configuration"));
    assert_non_null(strstr(text, "\"mig\": 1"));
    free(text);
    model_free(m);
    inv_free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_plan_json_shape),
        cmocka_unit_test(test_cli_plan_json_non_utf8_name),
        cmocka_unit_test(test_cli_plan_json_errors_and_mig),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_plan.c: model_plan_report() — the `gpuslice plan` table (its JSON shape is checked
 * by tests/cli/test_cli_plan.sh, cli/ builds it), with errors
 * and warnings, on the seed's L20 node and MIG machines. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "fixtures.h"

static char *report(const struct model *m, const struct inv_inventory *inv)
{
    char *text = NULL;
    struct error err = {0};
    if (model_plan_report(m, inv, &text, &err) < 0)
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
    char *text = report(m, inv);

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
    text = report(m, inv);
    assert_non_null(strstr(text, "nvidia.com/gpu         2        none           1         "
                                 "2 × MIG 1g.10gb on NVIDIA A100-SXM4-80GB (9856 MiB)\n"));
    assert_non_null(strstr(text, "error: invalid MIG configuration: more than one MIG device "
                                 "type present on node"));
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
    text = report(m, inv);
    assert_non_null(strstr(text, "(nothing is advertised)\n"));
    free(text);
    model_free(m);

    rule.devices_kind = CFG_DEVICES_LIST;
    rule.devices = &ref;
    rule.n_devices = 1;
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, true);
    m = fx_build(four, &cfg);
    text = report(m, four);
    assert_non_null(strstr(text, "nvidia.com/gpu         11       time-slicing   1-8       "
                                 "3 × NVIDIA A100-SXM4-80GB (81920 MiB); 1 × NVIDIA "
                                 "A100-SXM4-80GB (81920 MiB, ~10240 MiB per replica)\n"));
    free(text);
    model_free(m);
    inv_free(inv);
    inv_free(four);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_plan_report_text_seed_l20),
        cmocka_unit_test(test_model_plan_report_errors_and_mig),
        cmocka_unit_test(test_model_plan_report_empty_and_mixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

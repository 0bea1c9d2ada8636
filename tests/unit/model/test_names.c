/* SPDX-License-Identifier: Apache-2.0 */
/* test_names.c: kubelet resource-name rules, MIG resource names, socket names, globs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"
#include "model/internal.h"

static void test_model_resource_name_valid_table(void **state)
{
    static const struct {
        const char *name;
        bool ok;
    } cases[] = {
        {"nvidia.com/gpu", true},
        {"nvidia.com/gpu.shared", true},
        {"nvidia.com/mig-1g.10gb.me", true},
        {"example.com/L20_shared", true},
        {"a/b", true},
        {"gpu", false},
        {"", false},
        {"kubernetes.io/gpu", false},
        {"foo.kubernetes.io/gpu", false},
        {"requests.nvidia.com/gpu", false},
        {"Nvidia.com/gpu", false},
        {"nvidia.com/", false},
        {"/gpu", false},
        {"nvidia.com/gpu/x", false},
        {"nvidia.com/gpu-", false},
        {"nvidia.com/.gpu", false},
        {"nvidia..com/gpu", false},
        {"nvidia.com/a b", false},
        {"nvidia.com/0123456789012345678901234567890123456789012345678901234567890123", false},
        {"nvidia.com/012345678901234567890123456789012345678901234567890123456789012", true},
    };
    struct error err = {0};

    (void)state;
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        error_clear(&err);
        if (model_resource_name_valid(cases[i].name, &err) != cases[i].ok)
            fail_msg("'%s': want %s (%s)", cases[i].name, cases[i].ok ? "valid" : "invalid",
                     err.msg);
        if (!cases[i].ok)
            assert_true(err.msg[0] != '\0');
    }
}

static void test_model_mig_resource_name_plus_to_dot(void **state)
{
    char *s;
    (void)state;
    s = model_mig_resource_name("1g.10gb+me");
    assert_string_equal(s, "nvidia.com/mig-1g.10gb.me");
    free(s);
    s = model_mig_resource_name("1g.10gb-me");
    assert_string_equal(s, "nvidia.com/mig-1g.10gb-me");
    free(s);
}

static void test_model_socket_name_and_glob(void **state)
{
    char *s;
    (void)state;
    s = model__socket_name("nvidia.com/gpu.shared");
    assert_string_equal(s, "nvidia-gpu.shared.sock");
    free(s);
    assert_true(model__glob_match("*T4*", "Tesla T4"));
    assert_true(model__glob_match("*", ""));
    assert_true(model__glob_match("1g.10gb", "1g.10gb"));
    assert_false(model__glob_match("1g.10gb", "1g.10gb+me"));
    assert_true(model__glob_match("NVIDIA*80GB", "NVIDIA A100-SXM4-80GB"));
    assert_false(model__glob_match("*L20", "NVIDIA L20S"));
    assert_true(model__profile_is_subslice("1c.2g.20gb"));
    assert_false(model__profile_is_subslice("1g.10gb"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_resource_name_valid_table),
        cmocka_unit_test(test_model_mig_resource_name_plus_to_dot),
        cmocka_unit_test(test_model_socket_name_and_glob),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

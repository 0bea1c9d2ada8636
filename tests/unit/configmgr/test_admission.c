/* SPDX-License-Identifier: Apache-2.0 */
/* test_admission.c: the shared resources the admission policy guards, per config: names as
 * the model advertises them (rename, .shared, plain), only failRequestsGreaterThanOne /
 * MPS, replicas 1 left out, no duplicates across configs. */
#include <string.h>

#include "configmgr/configmgr.h"
#include "helpers.h"

static struct cfg_config *parse(const char *text)
{
    struct cfg_config *cfg = NULL;
    struct error err = {0};

    if (cfg_parse_buffer(text, strlen(text), "test.yaml", NULL, &cfg, NULL, &err) < 0)
        fail_msg("parse: %s", err.msg);
    return cfg;
}

static void check(const char *yaml, const char *want)
{
    struct cfg_config *cfg = parse(yaml);
    char **names = strv_new();
    struct strbuf sb = STRBUF_INIT;
    struct error err = {0};

    assert_int_equal(cfgmgr_admission_resources(cfg, &names, &err), 0);
    for (size_t i = 0; names[i]; i++)
        strbuf_printf(&sb, "%s%s", i ? "," : "", names[i]);
    assert_string_equal(strbuf_str(&sb), want);
    strbuf_release(&sb);
    strv_free(names);
    cfg_free(cfg);
}

#define TS(flags, res) "version: v1\nsharing:\n  timeSlicing:\n" flags "    resources:\n" res

static void test_admission_resources_names(void **state)
{
    (void)state;
    /* the seed's: plain name, failRequestsGreaterThanOne */
    check(TS("    failRequestsGreaterThanOne: true\n",
             "    - name: nvidia.com/gpu\n      replicas: 8\n"),
          "nvidia.com/gpu");
    /* renameByDefault, an explicit rename, a replicas-1 entry left out */
    check(TS("    failRequestsGreaterThanOne: true\n    renameByDefault: true\n",
             "    - name: nvidia.com/gpu\n      replicas: 4\n"
             "    - name: nvidia.com/mig-1g.10gb\n      rename: example.com/small\n"
             "      replicas: 2\n"),
          "nvidia.com/gpu.shared,example.com/small");
    /* time-slicing without failRequestsGreaterThanOne: several per container are allowed */
    check(TS("", "    - name: nvidia.com/gpu\n      replicas: 4\n"), "");
    /* MPS refuses > 1 by default */
    check("version: v1\nflags:\n  mpsRoot: /run/nvidia/mps\nsharing:\n  mps:\n"
          "    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n",
          "nvidia.com/gpu");
    /* no sharing */
    check("version: v1\n", "");
}

static void test_admission_resources_union(void **state)
{
    struct cfg_config *a = parse(TS("    failRequestsGreaterThanOne: true\n",
                                    "    - name: nvidia.com/gpu\n      replicas: 8\n"));
    struct cfg_config *b = parse(TS("    failRequestsGreaterThanOne: true\n",
                                    "    - name: nvidia.com/gpu\n      replicas: 3\n"));
    char **names = strv_new();
    struct error err = {0};

    (void)state;
    assert_int_equal(cfgmgr_admission_resources(a, &names, &err), 0);
    assert_int_equal(cfgmgr_admission_resources(b, &names, &err), 0);
    assert_int_equal(strv_length(names), 1);
    strv_free(names);
    cfg_free(a);
    cfg_free(b);
}

const struct CMUnitTest admission_tests[] = {
    cmocka_unit_test(test_admission_resources_names),
    cmocka_unit_test(test_admission_resources_union),
};
const size_t n_admission_tests = sizeof(admission_tests) / sizeof(admission_tests[0]);

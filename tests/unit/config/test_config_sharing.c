/* SPDX-License-Identifier: Apache-2.0 */
/* test_config_sharing.c: the sharing-mode descriptor rows (src/config/sharing.c): one row
 * per mode, consistent, and the parser, the checks and the printer driven by the rows
 * alone (keys, replica limits, defaults, hints), so a new row is a new block. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static void test_cfg_sharing_mode_rows(void **state)
{
    static const struct {
        enum cfg_sharing_strategy s;
        const char *name, *key, *dra;
    } want[] = {
        {CFG_SHARING_NONE, "none", NULL, NULL},
        {CFG_SHARING_TIME_SLICING, "time-slicing", "timeSlicing", "TimeSlicing"},
        {CFG_SHARING_MPS, "mps", "mps", "MPS"},
        {CFG_SHARING_FRACTIONS, "fractions", "fractions", NULL},
    };

    (void)state;
    assert_int_equal(GS_ARRAY_SIZE(want), CFG_SHARING__N);
    for (size_t i = 0; i < GS_ARRAY_SIZE(want); i++) {
        const struct cfg_sharing_mode *m = cfg_sharing_mode(want[i].s);
        assert_int_equal(m->strategy, want[i].s);
        assert_string_equal(m->name, want[i].name);
        assert_string_equal(cfg_sharing_strategy_name(want[i].s), want[i].name);
        if (want[i].key)
            assert_string_equal(m->config_key, want[i].key);
        else
            assert_null(m->config_key);
        assert_int_equal(cfg_sharing_mode_shares(m), want[i].key != NULL);
        if (want[i].dra) {
            assert_ptr_equal(cfg_sharing_mode_by_dra_name(want[i].dra), m);
            assert_non_null(m->dra_config_key);
        } else {
            assert_null(m->dra_name);
        }
        assert_non_null(m->title);
        assert_non_null(m->max_replicas_why);
        assert_true(m->max_replicas >= 1);
        /* only modes with replicas are served by the device plugin as shared devices */
        if (m->dra_shareable)
            assert_int_equal(m->max_replicas, 1);
        /* precedence decides between two written blocks: never a tie */
        for (size_t j = 0; j < i; j++) {
            const struct cfg_sharing_mode *o = cfg_sharing_mode(want[j].s);
            if (cfg_sharing_mode_shares(m) && cfg_sharing_mode_shares(o))
                assert_int_not_equal(m->precedence, o->precedence);
        }
    }
    assert_ptr_equal(cfg_sharing_mode((enum cfg_sharing_strategy)99),
                     cfg_sharing_mode(CFG_SHARING_NONE));
    assert_string_equal(cfg_sharing_strategy_name((enum cfg_sharing_strategy)99), "none");
    assert_null(cfg_sharing_mode_by_dra_name("None"));
    assert_null(cfg_sharing_mode_by_dra_name("timeslicing")); /* NVIDIA's names are exact */
    assert_null(cfg_sharing_mode_by_dra_name(NULL));
}

/* Each mode's block parses to its strategy with its own default and replica limit, and
 * prints back under its key. */
static void test_cfg_sharing_mode_drives_parse_and_print(void **state)
{
    (void)state;
    for (int s = 0; s < CFG_SHARING__N; s++) {
        const struct cfg_sharing_mode *m = cfg_sharing_mode((enum cfg_sharing_strategy)s);
        char yaml[512], expect[256], key[64];
        struct cfg_config *c;
        struct strbuf out = STRBUF_INIT;

        if (!m->config_key)
            continue;
        snprintf(yaml, sizeof(yaml),
                 "version: v1\nflags:\n  mpsRoot: /run/nvidia/mps\nsharing:\n  %s:\n"
                 "    resources: [{name: nvidia.com/gpu, replicas: %u}]\n",
                 m->config_key, m->max_replicas > 1 ? 2u : 1u);
        c = assert_parse_ok(yaml);
        assert_int_equal(c->sharing_strategy, m->strategy);
        assert_int_equal(c->sharing.fail_requests_greater_than_one, m->fail_requests_default);
        assert_int_equal(cfg_print(c, CFG_FORMAT_YAML, &out), 0);
        snprintf(key, sizeof(key), "\n  %s:\n", m->config_key);
        if (!strstr(strbuf_str(&out), key))
            fail_msg("%s: printed config lacks its block:\n%s", m->name, strbuf_str(&out));
        strbuf_release(&out);
        cfg_free(c);

        snprintf(yaml, sizeof(yaml),
                 "version: v1\nsharing:\n  %s:\n    resources: [{name: nvidia.com/gpu, "
                 "replicas: %u}]\n",
                 m->config_key, m->max_replicas + 1);
        snprintf(expect, sizeof(expect), "%u replicas is too many; at most %u are allowed%s",
                 m->max_replicas + 1, m->max_replicas, m->max_replicas_why);
        assert_parse_error(yaml, expect);
    }
}

/* A mode's key written in the wrong place points at sharing.<key>, from the rows. */
static void test_cfg_sharing_mode_key_hint(void **state)
{
    (void)state;
    for (int s = 0; s < CFG_SHARING__N; s++) {
        const struct cfg_sharing_mode *m = cfg_sharing_mode((enum cfg_sharing_strategy)s);
        char yaml[256], expect[128];
        struct cfg_config *c;
        char *text;

        if (!m->config_key)
            continue;
        snprintf(yaml, sizeof(yaml), "version: v1\nimex:\n  %s: {}\n", m->config_key);
        snprintf(expect, sizeof(expect), "it belongs at 'sharing.%s'", m->config_key);
        assert_int_equal(parse_text(yaml, NULL, &c, &text), 0);
        if (!strstr(text, expect))
            fail_msg("%s: want '%s' in:\n%s", m->name, expect, text);
        cfg_free(c);
        free(text);
    }
}

/* sharing.fractions: entries name GPUs without replicas (1 when left out, served whole by
 * the device plugin), and what has no meaning there is refused with the way out. */
static void test_cfg_fractions_block(void **state)
{
    struct cfg_config *c;
    struct cfg_overrides o;
    struct error err = {0};
    char *text = NULL;

    (void)state;
    c = assert_parse_ok("version: v1\nsharing:\n  fractions:\n    resources:\n"
                        "    - name: nvidia.com/gpu\n      devices: [0, 2]\n");
    assert_int_equal(c->sharing_strategy, CFG_SHARING_FRACTIONS);
    assert_true(cfg_sharing_mode(c->sharing_strategy)->dra_shareable);
    assert_int_equal(c->sharing.n_resources, 1);
    assert_int_equal(c->sharing.resources[0].replicas, 1);
    assert_int_equal(c->sharing.resources[0].n_devices, 2);
    cfg_free(c);
    assert_parse_error("version: v1\nsharing:\n  fractions:\n    resources:\n"
                       "    - {name: nvidia.com/gpu, rename: nvidia.com/gpu.frac}\n",
                       "rename has no meaning there: remove it");
    assert_parse_error("version: v1\nsharing:\n  fractions:\n    resources:\n"
                       "    - {name: nvidia.com/mig-1g.10gb}\n",
                       "sharing with fractions is not supported for MIG devices");
    assert_parse_error("version: v1\nsharing:\n  fractions:\n    resources:\n"
                       "    - {name: nvidia.com/gpu, devices: ['0:1']}\n",
                       "sharing with fractions is not supported for MIG devices");
    assert_parse_error("version: v1\nsharing:\n  fractions:\n    resources:\n"
                       "    - {name: nvidia.com/gpu, memoryLimit: 10Gi}\n",
                       "memoryLimit limits MPS clients; fractions has no per-client limits");
    /* NVIDIA's plugin would ignore the block and keep the other */
    assert_parse_error("version: v1\nflags: {mpsRoot: /m}\nsharing:\n"
                       "  fractions: {resources: [{name: nvidia.com/gpu}]}\n"
                       "  mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}\n",
                       "(NVIDIA's plugin would silently use mps)");
    cfg_overrides_init(&o, CFG_BIN_PLUGIN);
    assert_int_equal(cfg_overrides_set(&o, "--strict-nvidia-schema", "true", &err), 0);
    assert_int_equal(parse_text("version: v1\nsharing:\n  fractions:\n"
                                "    resources: [{name: nvidia.com/gpu}]\n",
                                &o, &c, &text),
                     -EINVAL);
    assert_non_null(strstr(text, "sharing.fractions is a gpuslice extension"));
    free(text);
    cfg_overrides_release(&o);
}

const struct CMUnitTest sharing_tests[] = {
    cmocka_unit_test(test_cfg_fractions_block),
    cmocka_unit_test(test_cfg_sharing_mode_rows),
    cmocka_unit_test(test_cfg_sharing_mode_drives_parse_and_print),
    cmocka_unit_test(test_cfg_sharing_mode_key_hint),
};
const size_t n_sharing_tests = GS_ARRAY_SIZE(sharing_tests);

/* SPDX-License-Identifier: Apache-2.0 */
/* test_config.c: mig-parted config parsing (facts B.1) and its per-GPU selection: every
 * default layout of examples/mig/config-default.yaml (facts B.7) selected and planned on
 * every catalogue model and PCI id it names; later entries win; bad files refused with
 * mig-parted's message and file:line:col (YAML syntax errors too). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mig/config.h"
#include "mig/mig.h"

static void test_config_defaults_plan_on_every_model(void **state)
{
    char path[1024];
    struct mig_config *cfg = NULL;
    struct error err = {0};
    size_t n_planned = 0;
    (void)state;

    snprintf(path, sizeof(path), "%s/examples/mig/config-default.yaml", GS_SOURCE_DIR);
    if (mig_config_load(path, &cfg, &err) < 0)
        fail_msg("%s", err.msg);
    assert_non_null(mig_config_find(cfg, "all-1g.10gb", NULL));
    assert_non_null(mig_config_find(cfg, "all-balanced", NULL));
    assert_null(mig_config_find(cfg, "no-such-layout", &err));
    for (size_t s = 0; s < cfg->n; s++)
        for (size_t mi = 0; mig_model_get(mi); mi++) {
            const struct mig_gpu_model *m = mig_model_get(mi);
            for (const uint32_t *id = m->pci_ids; *id; id++) {
                const struct mig_config_entry *e = mig_config_for_gpu(&cfg->sets[s], 0, *id);
                struct mig_want w;
                struct mig_layout l;
                struct strbuf why = STRBUF_INIT;

                if (!e || !e->mig_enabled)
                    continue;
                assert_true(m->n_profiles <= 32);
                if (mig_config_want(e, m, &w, &err) < 0)
                    fail_msg("%s on %s (0x%08X): %s", cfg->sets[s].label, m->name, *id, err.msg);
                if (mig_plan_want(m, &w, &l, &why) < 0)
                    fail_msg("%s on %s: %s", cfg->sets[s].label, m->name, strbuf_str(&why));
                assert_true(mig_layout_valid(m, &l, NULL));
                strbuf_release(&why);
                n_planned++;
            }
        }
    assert_true(n_planned > 100);
    mig_config_free(cfg);
}

static void test_config_later_entry_wins(void **state)
{
    static const char text[] = "version: v1\n"
                               "mig-configs:\n"
                               "  mixed:\n"
                               "  - devices: all\n"
                               "    mig-enabled: true\n"
                               "    mig-devices: {1g.10gb: 7}\n"
                               "  - device-filter: 0x20B210DE\n"
                               "    devices: [1]\n"
                               "    mig-enabled: false\n";
    const struct mig_gpu_model *m = mig_model_find("0x20B210DE");
    struct mig_config *cfg = NULL;
    struct error err = {0};
    const struct mig_config_entry *e;
    struct mig_want w;
    (void)state;

    if (mig_config_parse(text, strlen(text), "t.yaml", &cfg, &err) < 0)
        fail_msg("%s", err.msg);
    assert_non_null(m);
    e = mig_config_for_gpu(&cfg->sets[0], 0, 0x20B210DE);
    assert_non_null(e);
    assert_true(e->mig_enabled);
    assert_int_equal(mig_config_want(e, m, &w, NULL), 0);
    assert_int_equal(w.counts[mig_profile_by_name(m, "1g.10gb") - m->profiles], 7);
    e = mig_config_for_gpu(&cfg->sets[0], 1, 0x20B210DE); /* the later entry decides GPU 1 */
    assert_non_null(e);
    assert_false(e->mig_enabled);
    e = mig_config_for_gpu(&cfg->sets[0], 1, 0x20B510DE); /* filter does not match */
    assert_true(e->mig_enabled);
    mig_config_free(cfg);
}

static void test_config_unknown_profile_on_model(void **state)
{
    static const char text[] = "version: v1\nmig-configs:\n  x:\n  - devices: all\n"
                               "    mig-enabled: true\n    mig-devices: {3g.40gb: 1}\n";
    const struct mig_gpu_model *m = mig_model_find("0x20B010DE"); /* A100-40GB: 3g.20gb */
    struct mig_config *cfg = NULL;
    struct error err = {0};
    struct mig_want w;
    (void)state;

    assert_int_equal(mig_config_parse(text, strlen(text), "t.yaml", &cfg, NULL), 0);
    assert_int_equal(mig_config_want(mig_config_for_gpu(&cfg->sets[0], 0, 0x20B010DE), m, &w, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "3g.40gb"));
    mig_config_free(cfg);
}

/* Compute-instance sub-profiles: 1c.3g.40gb x4 + 2c.3g.40gb pack into two 3g
 * GPU instances (3 x 1c in one, 2c + 1c in the other) with NVIDIA's CI placements; 2c.7g
 * x3 + 1c.7g fill one 7g; sizes NVIDIA does not allow are refused naming the allowed ones. */
static void test_config_compute_instance_profiles(void **state)
{
    static const char text[] = "version: v1\nmig-configs:\n  ci:\n  - devices: all\n"
                               "    mig-enabled: true\n"
                               "    mig-devices: {1c.3g.40gb: 4, 2c.3g.40gb: 1}\n"
                               "  seven:\n  - devices: all\n    mig-enabled: true\n"
                               "    mig-devices: {2c.7g.80gb: 3, 1c.7g.80gb: 1}\n"
                               "  bad:\n  - devices: all\n    mig-enabled: true\n"
                               "    mig-devices: {3c.4g.40gb: 1}\n";
    const struct mig_gpu_model *m = mig_model_find("NVIDIA A100-SXM4-80GB");
    const struct mig_profile *g3 = mig_profile_by_name(m, "3g.40gb");
    struct mig_config *cfg = NULL;
    struct error err = {0};
    struct mig_want w;
    struct mig_layout l;
    unsigned gi_counts[MIG_MAX_PROFILES] = {0};
    char name[32];
    (void)state;

    if (mig_config_parse(text, strlen(text), "t.yaml", &cfg, &err) < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(mig_config_want(&cfg->sets[0].entries[0], m, &w, &err), 0);
    assert_int_equal(w.ci[g3 - m->profiles][1], 4);
    assert_int_equal(w.ci[g3 - m->profiles][2], 1);
    assert_int_equal(w.counts[g3 - m->profiles], 0);
    mig_want_gi_counts(m, &w, gi_counts);
    assert_int_equal(gi_counts[g3 - m->profiles], 2);
    assert_int_equal(mig_plan_want(m, &w, &l, NULL), 0);
    assert_true(mig_layout_valid(m, &l, NULL));
    unsigned ci_slices = 0, n_gi3 = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (l.items[i].p != g3)
            continue;
        n_gi3++;
        unsigned used = 0;
        for (size_t c = 0; c < l.items[i].n_ci; c++) {
            unsigned mask = ((1u << l.items[i].ci_size[c]) - 1) << l.items[i].ci_start[c];
            assert_int_equal(used & mask, 0); /* no overlap inside the GPU instance */
            used |= mask;
            ci_slices += l.items[i].ci_size[c];
            if (l.items[i].ci_size[c] == 2)
                assert_int_equal(l.items[i].ci_start[c], 0); /* 2c on 3g: only at 0 */
        }
        assert_true(used <= 0x7);
    }
    assert_int_equal(n_gi3, 2);
    assert_int_equal(ci_slices, 6);
    mig_ci_name(g3, 1, name, sizeof(name));
    assert_string_equal(name, "1c.3g.40gb");
    mig_ci_name(g3, 3, name, sizeof(name));
    assert_string_equal(name, "3g.40gb");
    /* 3 x 2c at 0, 2, 4 and 1c at 6 share one 7g */
    assert_int_equal(mig_config_want(&cfg->sets[1].entries[0], m, &w, &err), 0);
    assert_int_equal(mig_plan_want(m, &w, &l, NULL), 0);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.items[0].n_ci, 4);
    /* 3c on 4g breaks 2c <= g + 1 */
    assert_int_equal(mig_config_want(&cfg->sets[2].entries[0], m, &w, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "allowed: 1c.4g.40gb, 2c.4g.40gb, 4g.40gb"));
    mig_config_free(cfg);
}

static void test_config_invalid(void **state)
{
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"mig-configs: {a: [{devices: all, mig-enabled: false}]}\n",
         "t.yaml: unable to parse with missing 'version' field"},
        {"version: v2\nmig-configs: {}\n", "t.yaml:1:10: unknown version: v2"},
        {"version: v1\n", "at least one entry in 'mig-configs' is required"},
        {"version: v1\nfoo: 1\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n",
         "t.yaml:2:1: unexpected field: foo"},
        {"version: v1\nmig-configs:\n  a:\n  - devices: some\n    mig-enabled: false\n",
         "t.yaml:4:14: invalid string input for 'devices'"},
        {"version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: true\n",
         "t.yaml:4:5: missing required field 'mig-devices' when 'mig-enabled' is true"},
        {"version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: false\n"
         "    mig-devices: {1g.5gb: 1}\n",
         "t.yaml:6:19: MIG devices included when 'mig-enabled' is false"},
        {"version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: true\n"
         "    mig-devices: {1g.5gb: 0}\n",
         "t.yaml:6:19: all counts for all MigProfiles are 0"},
        {"version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: true\n"
         "    mig-devices: {1g.5gb: -1}\n",
         "t.yaml:6:27: count of 1g.5gb must be a number >= 0"},
        {"version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: true\n"
         "    mig-devices: {3g: 1}\n",
         "t.yaml:6:19: '3g' is not a MIG profile"},
        {"version: v1\nmig-configs:\n  a:\n  - device-filter: 0xZZ\n    devices: all\n"
         "    mig-enabled: false\n",
         "t.yaml:4:20: device-filter entries are PCI ids"},
        {"version: v1\nmig-configs:\n  a:\n  - devices: all\n",
         "t.yaml:4:5: missing required field 'mig-enabled'"},
        {"version: v1\nmig-configs: [\n",
         "t.yaml:3:1: not valid YAML: flow sequence without a closing"},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct mig_config *cfg = NULL;
        struct error err = {0};
        if (mig_config_parse(bad[i].text, strlen(bad[i].text), "t.yaml", &cfg, &err) >= 0)
            fail_msg("case %zu accepted", i);
        assert_null(cfg);
        if (!strstr(err.msg, bad[i].msg) || !strstr(err.msg, "t.yaml"))
            fail_msg("case %zu: '%s' lacks '%s' or the file name", i, err.msg, bad[i].msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults_plan_on_every_model),
        cmocka_unit_test(test_config_later_entry_wins),
        cmocka_unit_test(test_config_unknown_profile_on_model),
        cmocka_unit_test(test_config_compute_instance_profiles),
        cmocka_unit_test(test_config_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_config.c: the config module's test program — the shared helpers, the pure name
 * and value checks (resource names, ConfigMap keys, device references, durations) and the
 * flag/env overrides. The other test_config_*.c files add fields, corpus and loading. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/internal.h"
#include "helpers.h"

int parse_text(const char *yaml, const struct cfg_overrides *o, struct cfg_config **ret_cfg,
               char **ret_text)
{
    struct cfg_diags d = CFG_DIAGS_INIT;
    struct strbuf sb = STRBUF_INIT;
    struct error err = {0};
    int r;

    *ret_cfg = NULL;
    r = cfg_parse_buffer(yaml, strlen(yaml), "t.yaml", o, ret_cfg, &d, &err);
    cfg_diags_format(&d, CFG_SEV_WARNING, &sb);
    cfg_diags_format(&d, CFG_SEV_ERROR, &sb);
    if (r < 0 && r != -EINVAL)
        strbuf_printf(&sb, "%s\n", err.msg);
    *ret_text = strbuf_take(&sb);
    cfg_diags_release(&d);
    return r;
}

void assert_parse_error(const char *yaml, const char *expect)
{
    struct cfg_config *cfg;
    char *text;
    int r = parse_text(yaml, NULL, &cfg, &text);

    if (r != -EINVAL || !strstr(text, expect))
        print_error("input:\n%s\nwant error containing: %s\ngot r=%d:\n%s\n", yaml, expect, r,
                    text);
    assert_int_equal(r, -EINVAL);
    assert_null(cfg);
    assert_non_null(strstr(text, expect));
    free(text);
}

struct cfg_config *assert_parse_ok(const char *yaml)
{
    struct cfg_config *cfg;
    char *text;
    int r = parse_text(yaml, NULL, &cfg, &text);

    if (r != 0)
        print_error("input:\n%s\ngot r=%d:\n%s\n", yaml, r, text);
    assert_int_equal(r, 0);
    assert_non_null(cfg);
    free(text);
    return cfg;
}

/* ---- names ------------------------------------------------------------------------------- */

static void test_cfg_resource_name_valid_table(void **state)
{
    static const struct {
        const char *name;
        bool ok;
        const char *why;
    } cases[] = {
        {"nvidia.com/gpu", true, NULL},
        {"nvidia.com/gpu.shared", true, NULL},
        {"nvidia.com/mig-1g.10gb", true, NULL},
        {"nvidia.com/mig-1g.10gb.me.shared", true, NULL},
        {"example.com/a", true, NULL},
        {"a.b-c.d/x-1", true, NULL},
        {"gpu", false, "no domain prefix"},
        {"nvidia.com/", false, "not a valid resource name"},
        {"nvidia.com/GPU", false, "not a valid resource name"},
        {"nvidia.com/gpu_shared", false, "not a valid resource name"},
        {"nvidia.com/-gpu", false, "not a valid resource name"},
        {"nvidia.com/gpu-", false, "not a valid resource name"},
        {"nvidia.com/gpu..x", false, "not a valid resource name"},
        {"nvidia.com/a/b", false, "more than one '/'"},
        {"Nvidia.com/gpu", false, "invalid domain prefix"},
        {"/gpu", false, "invalid domain prefix"},
        {"kubernetes.io/gpu", false, "kubernetes.io"},
        {"x.kubernetes.io/gpu", false, "kubernetes.io"},
        {"nvidia.com/abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabc", false, "63"},
        {"nvidia.com/abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijab", true, NULL},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct error err = {0};
        bool ok = cfg_resource_name_valid(cases[i].name, &err);
        if (ok != cases[i].ok)
            print_error("%s: got %d (%s)\n", cases[i].name, ok, err.msg);
        assert_int_equal(ok, cases[i].ok);
        if (!ok)
            assert_non_null(strstr(err.msg, cases[i].why));
    }
}

static void test_cfg_config_name_valid_table(void **state)
{
    static const struct {
        const char *name;
        bool ok;
    } cases[] = {
        {"default", true},   {"l20", true},
        {"a100-40gb", true}, {"tesla_t4.v2", true},
        {"", false},         {".", false},
        {"..", false},       {"..data", false},
        {".hidden", false},  {"../etc/passwd", false},
        {"a/b", false},      {"a..b", false},
        {"a b", false},      {"a\nb", false},
        {"naïve", false},    {"$(x)", false},
    };
    char long_name[300];

    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        if (cfg_config_name_valid(cases[i].name, NULL) != cases[i].ok)
            print_error("%s\n", cases[i].name);
        assert_int_equal(cfg_config_name_valid(cases[i].name, NULL), cases[i].ok);
    }
    memset(long_name, 'a', sizeof(long_name));
    long_name[253] = '\0';
    assert_true(cfg_config_name_valid(long_name, NULL));
    long_name[253] = 'a';
    long_name[254] = '\0';
    assert_false(cfg_config_name_valid(long_name, NULL));
}

static void test_cfg_device_ref_parse_table(void **state)
{
    static const struct {
        const char *s;
        int r;
        enum cfg_device_ref_kind kind;
        unsigned gpu, mig;
    } cases[] = {
        {"0", 0, CFG_DEVREF_GPU_INDEX, 0, 0},
        {"15", 0, CFG_DEVREF_GPU_INDEX, 15, 0},
        {"0:1", 0, CFG_DEVREF_MIG_INDEX, 0, 1},
        {"3:6", 0, CFG_DEVREF_MIG_INDEX, 3, 6},
        {"GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f601", 0, CFG_DEVREF_GPU_UUID, 0, 0},
        {"MIG-5a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", 0, CFG_DEVREF_MIG_UUID, 0, 0},
        {"MIG-GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f602/7/0", 0, CFG_DEVREF_MIG_UUID, 0, 0},
        {"", -EINVAL, 0, 0, 0},
        {"-1", -EINVAL, 0, 0, 0},
        {"1.5", -EINVAL, 0, 0, 0},
        {"0:", -EINVAL, 0, 0, 0},
        {":1", -EINVAL, 0, 0, 0},
        {"0:1:2", -EINVAL, 0, 0, 0},
        {"GPU-1234", -EINVAL, 0, 0, 0},
        {"GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f60", -EINVAL, 0, 0, 0},
        {"GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f601x", -EINVAL, 0, 0, 0},
        {"GPU-zd3f2b1a-5c6e-4f70-9a81-b2c3d4e5f601", -EINVAL, 0, 0, 0},
        {"MIG-GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f602/7", -EINVAL, 0, 0, 0},
        {"MIG-GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f602/x/0", -EINVAL, 0, 0, 0},
        {"gpu0", -EINVAL, 0, 0, 0},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct cfg_device_ref d = {0};
        struct error err = {0};
        int r = cfg_device_ref_parse(cases[i].s, &d, &err);
        if (r != cases[i].r)
            print_error("'%s': got %d\n", cases[i].s, r);
        assert_int_equal(r, cases[i].r);
        if (r == 0) {
            assert_int_equal(d.kind, cases[i].kind);
            assert_int_equal(d.gpu_index, cases[i].gpu);
            assert_int_equal(d.mig_index, cases[i].mig);
            if (d.kind == CFG_DEVREF_GPU_UUID || d.kind == CFG_DEVREF_MIG_UUID)
                assert_string_equal(d.uuid, cases[i].s);
            free(d.uuid);
        } else {
            assert_non_null(strstr(err.msg, "is not a device"));
        }
    }
}

static void test_cfg_duration_parse_ms_table(void **state)
{
    static const struct {
        const char *s;
        int r;
        int64_t ms;
    } cases[] = {
        {"60s", 0, 60000},
        {"1m30s", 0, 90000},
        {"500ms", 0, 500},
        {"1.5s", 0, 1500},
        {"2h", 0, 7200000},
        {"1h1m1s", 0, 3661000},
        {"0", 0, 0},
        {"30000000000", 0, 30000},
        {"infinite", 0, -1},
        {"10us", 0, 0},
        {"1000000ns", 0, 1},
        {"+5s", 0, 5000},
        {"", -EINVAL, 0},
        {"s", -EINVAL, 0},
        {"10", 0, 0},
        {"10x", -EINVAL, 0},
        {"-5s", -EINVAL, 0},
        {"5 s", -EINVAL, 0},
        {"infinity", -EINVAL, 0},
        {"99999999999999h", -ERANGE, 0},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        int64_t ms = 12345;
        int r = cfg_duration_parse_ms(cases[i].s, &ms, NULL);
        if (r != cases[i].r || (r == 0 && ms != cases[i].ms))
            print_error("'%s': got %d %lld\n", cases[i].s, r, (long long)ms);
        assert_int_equal(r, cases[i].r);
        if (r == 0)
            assert_int_equal(ms, cases[i].ms);
    }
}

/* ---- overrides --------------------------------------------------------------------------- */

static const char *fake_env(const char *name)
{
    static const char *const env[][2] = {
        {"MIG_STRATEGY", "single"},      {"PASS_DEVICE_SPECS", "true"},
        {"NVIDIA_CTK_PATH", "/opt/ctk"}, {"CONTAINER_DRIVER_ROOT", "/cdr"},
        {"MPS_ROOT", "/run/nvidia/mps"}, {"DEVICE_LIST_STRATEGY", "envvar,cdi-cri"},
        {"GFD_MIG_STRATEGY", "mixed"}, /* GFD's: the plugin must ignore it */
        {"DEVICE_ID_STRATEGY", ""},    /* empty counts as unset */
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(env); i++)
        if (strcmp(env[i][0], name) == 0)
            return env[i][1];
    return NULL;
}

static void test_cfg_overrides_precedence(void **state)
{
    struct cfg_overrides o;
    struct cfg_config *cfg;
    char *text;
    struct error err = {0};

    cfg_overrides_init(&o, CFG_BIN_PLUGIN);
    /* flag first, env later: the flag still wins */
    assert_int_equal(cfg_overrides_set(&o, "--mig-strategy", "mixed", &err), 0);
    assert_int_equal(cfg_overrides_from_env(&o, fake_env, &err), 0);
    assert_string_equal(cfg_overrides_get(&o, CFG_OPT_MIG_STRATEGY), "mixed");
    assert_string_equal(o.v[CFG_OPT_MIG_STRATEGY].source, "--mig-strategy");
    /* env beats the file */
    assert_int_equal(parse_text("version: v1\nflags:\n  passDeviceSpecs: false\n  plugin:\n"
                                "    passDeviceSpecs: false\n    nvidiaCTKPath: /file\n"
                                "  mpsRoot: /file-mps\n",
                                &o, &cfg, &text),
                     0);
    assert_int_equal(cfg->flags.mig_strategy, CFG_MIG_MIXED);
    assert_true(cfg->flags.plugin.pass_device_specs);
    assert_string_equal(cfg->flags.plugin.nvidia_ctk_path, "/opt/ctk"); /* alias env */
    assert_string_equal(cfg->flags.plugin.container_driver_root, "/cdr");
    assert_string_equal(cfg->flags.mps_root, "/run/nvidia/mps");
    assert_int_equal(cfg->flags.plugin.device_list_strategies, CFG_LIST_ENVVAR | CFG_LIST_CDI_CRI);
    assert_int_equal(cfg->flags.plugin.device_id_strategy, CFG_DEVICE_ID_UUID);
    /* the unknown passDeviceSpecs directly under flags is a warning */
    assert_non_null(strstr(text, "it belongs at 'flags.plugin.passDeviceSpecs'"));
    cfg_free(cfg);
    free(text);
    /* file beats default when nothing is set */
    cfg_overrides_release(&o);
    assert_int_equal(parse_text("flags:\n  plugin:\n    nvidiaCTKPath: /file\n", &o, &cfg, &text),
                     0);
    assert_string_equal(cfg->flags.plugin.nvidia_ctk_path, "/file");
    assert_string_equal(cfg->flags.plugin.cdi_annotation_prefix, "cdi.k8s.io/");
    cfg_free(cfg);
    free(text);
    cfg_overrides_release(&o);
}

static void test_cfg_overrides_set_names_and_values(void **state)
{
    static const struct {
        const char *name, *value;
        int r;
        const char *msg;
    } cases[] = {
        {"--driver-root", "/run/nvidia/driver", 0, NULL},
        {"nvidia-driver-root", "/x", 0, NULL},
        {"--nvidia-dev-root", "/", 0, NULL},
        {"--nvidia-ctk-path", "/c", 0, NULL},
        {"--nvidia-cdi-hook-path", "/c", 0, NULL},
        {"--container-driver-root", "/d", 0, NULL},
        {"--driver-root-ctr-path", "/d", 0, NULL},
        {"DRIVER_ROOT_CTR_PATH", "/d", 0, NULL},
        {"NVIDIA_CDI_HOOK_PATH", "/h", 0, NULL},
        {"--fail-on-init-error", "false", 0, NULL},
        {"--mig-strategy", "dynamic", -EINVAL,
         "--mig-strategy: 'dynamic' is not allowed; use one of 'none'"},
        {"MIG_STRATEGY", "x", -EINVAL, "MIG_STRATEGY: 'x' is not allowed"},
        {"--pass-device-specs", "maybe", -EINVAL, "--pass-device-specs: 'maybe' is not a boolean"},
        {"--device-list-strategy", "envvar,bogus", -EINVAL, "invalid strategy 'bogus'"},
        {"--device-id-strategy", "serial", -EINVAL, "'uuid' or 'index'"},
        {"--shared-devices-allocation-policy", "spread", -EINVAL, "'distributed' or 'packed'"},
        {"--device-discovery-strategy", "vfio", -EINVAL, "'auto', 'nvml' or 'tegra'"},
        {"--imex-channel-ids", "1", -EINVAL, "empty or 0"},
        {"--imex-channel-ids", "0", 0, NULL},
        {"--kubelet-socket", "", 0, NULL},
        {"--oneshot", "true", -ENOENT, "unknown flag"}, /* GFD's, not the plugin's */
        {"GFD_ONESHOT", "true", -ENOENT, "unknown flag"},
        {"--frobnicate", "1", -ENOENT, "unknown flag or environment variable '--frobnicate'"},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct cfg_overrides o;
        struct error err = {0};
        int r;

        cfg_overrides_init(&o, CFG_BIN_PLUGIN);
        r = cfg_overrides_set(&o, cases[i].name, cases[i].value, &err);
        if (r != cases[i].r || (cases[i].msg && !strstr(err.msg, cases[i].msg)))
            print_error("%s=%s: got %d '%s'\n", cases[i].name, cases[i].value, r, err.msg);
        assert_int_equal(r, cases[i].r);
        if (cases[i].msg)
            assert_non_null(strstr(err.msg, cases[i].msg));
        cfg_overrides_release(&o);
    }
}

static void test_cfg_overrides_gfd_and_apply_every_option(void **state)
{
    struct cfg_overrides o;
    struct cfg_config *cfg = NULL;
    struct error err = {0};
    static const char *const sets[][2] = {
        {"--mig-strategy", "single"},
        {"--fail-on-init-error", "false"},
        {"--driver-root", "/dr"},
        {"--dev-root", "/dev-root"},
        {"--pass-device-specs", "1"},
        {"--device-list-strategy", "volume-mounts"},
        {"--device-id-strategy", "index"},
        {"--gdrcopy-enabled", "true"},
        {"--gds-enabled", "true"},
        {"--mofed-enabled", "true"},
        {"--cdi-annotation-prefix", "p/"},
        {"--nvidia-cdi-hook-path", "/hook"},
        {"--driver-root-ctr-path", "/ctr"},
        {"--mps-root", "/mps"},
        {"--shared-devices-allocation-policy", "packed"},
        {"--device-discovery-strategy", "tegra"},
        {"--imex-channel-ids", "0"},
        {"--imex-required", "true"},
        {"--oneshot", "true"},
        {"--no-timestamp", "true"},
        {"--sleep-interval", "5s"},
        {"-o", "/out"},
        {"--machine-type-file", "/mt"},
        {"USE_NODE_FEATURE_API", "false"},
        {"GFD_MIG_STRATEGY", "mixed"},
    };

    cfg_overrides_init(&o, CFG_BIN_PLUGIN | CFG_BIN_GFD);
    for (size_t i = 0; i < GS_ARRAY_SIZE(sets); i++)
        assert_int_equal(cfg_overrides_set(&o, sets[i][0], sets[i][1], &err), 0);
    assert_int_equal(cfg_new_default(&cfg, &err), 0);
    assert_int_equal(cfg_overrides_apply(&o, cfg, &err), 0);
    assert_int_equal(cfg->flags.mig_strategy, CFG_MIG_SINGLE); /* flag beats GFD env */
    assert_false(cfg->flags.fail_on_init_error);
    assert_string_equal(cfg->flags.nvidia_driver_root, "/dr");
    assert_string_equal(cfg->flags.nvidia_dev_root, "/dev-root");
    assert_true(cfg->flags.plugin.pass_device_specs);
    assert_int_equal(cfg->flags.plugin.device_list_strategies, CFG_LIST_VOLUME_MOUNTS);
    assert_int_equal(cfg->flags.plugin.device_id_strategy, CFG_DEVICE_ID_INDEX);
    assert_true(cfg->flags.gdrcopy_enabled && cfg->flags.gds_enabled && cfg->flags.mofed_enabled);
    assert_string_equal(cfg->flags.plugin.cdi_annotation_prefix, "p/");
    assert_string_equal(cfg->flags.plugin.nvidia_ctk_path, "/hook");
    assert_string_equal(cfg->flags.plugin.container_driver_root, "/ctr");
    assert_string_equal(cfg->flags.mps_root, "/mps");
    assert_int_equal(cfg->flags.plugin.shared_devices_allocation_policy, CFG_ALLOC_PACKED);
    assert_int_equal(cfg->flags.device_discovery_strategy, CFG_DISCOVERY_TEGRA);
    assert_int_equal(cfg->imex.n_channel_ids, 1);
    assert_true(cfg->imex.required);
    assert_true(cfg->flags.gfd.oneshot && cfg->flags.gfd.no_timestamp);
    assert_int_equal(cfg->flags.gfd.sleep_interval_ms, 5000);
    assert_string_equal(cfg->flags.gfd.output_file, "/out");
    assert_string_equal(cfg->flags.gfd.machine_type_file, "/mt");
    assert_false(cfg->flags.gfd.use_node_feature_api);
    cfg_free(cfg);
    cfg_overrides_release(&o);
}

/* One spelling per key: every option that overrides a flags key finds that key in the
 * descriptor tables that parsing and printing use, and setting it through the table takes
 * the option's default. */
static void test_flags_descriptor_table(void **state)
{
    (void)state;
    size_t n;
    const struct cfg_option *opts = cfg_options(&n);
    struct cfg_config *cfg = NULL;
    size_t found = 0;

    assert_int_equal(cfg_new_default(&cfg, NULL), 0);
    for (size_t i = 0; i < n; i++) {
        if (!opts[i].config_key || strncmp(opts[i].config_key, "flags.", 6) != 0)
            continue;
        const struct cfg__field *f = cfg__field_find(opts[i].config_key);
        if (!f)
            fail_msg("%s: no descriptor for %s", opts[i].flags[0], opts[i].config_key);
        assert_int_equal(cfg__field_set(f, cfg, opts[i].default_value), 0);
        found++;
    }
    assert_int_equal(found, 22);
    assert_null(cfg__field_find("flags.noSuchKey"));
    assert_null(cfg__field_find("flags.plugin"));
    /* a value that does not parse is refused, not stored */
    assert_int_equal(cfg__field_set(cfg__field_find("flags.migStrategy"), cfg, "bogus"), -EINVAL);
    cfg_free(cfg);
}

static void test_cfg_options_table_consistent(void **state)
{
    size_t n;
    const struct cfg_option *opts = cfg_options(&n);
    bool is_env;

    assert_int_equal(n, CFG_OPT__COUNT);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(opts[i].id, i);
        assert_non_null(opts[i].flags[0]);
        assert_non_null(opts[i].envs[0]);
        for (size_t k = 0; k < GS_ARRAY_SIZE(opts[i].flags) && opts[i].flags[k]; k++) {
            assert_ptr_equal(cfg_option_find(opts[i].flags[k], opts[i].binaries, &is_env),
                             &opts[i]);
            assert_false(is_env);
        }
        for (size_t k = 0; k < GS_ARRAY_SIZE(opts[i].envs) && opts[i].envs[k]; k++) {
            assert_ptr_equal(
                cfg_option_find(opts[i].envs[k], CFG_BIN_PLUGIN | CFG_BIN_GFD, &is_env), &opts[i]);
            assert_true(is_env);
        }
    }
}

static const struct CMUnitTest base_tests[] = {
    cmocka_unit_test(test_cfg_resource_name_valid_table),
    cmocka_unit_test(test_cfg_config_name_valid_table),
    cmocka_unit_test(test_cfg_device_ref_parse_table),
    cmocka_unit_test(test_cfg_duration_parse_ms_table),
    cmocka_unit_test(test_cfg_overrides_precedence),
    cmocka_unit_test(test_cfg_overrides_set_names_and_values),
    cmocka_unit_test(test_cfg_overrides_gfd_and_apply_every_option),
    cmocka_unit_test(test_cfg_options_table_consistent),
    cmocka_unit_test(test_flags_descriptor_table),
};

int main(void)
{
    int failed = 0;

    failed += _cmocka_run_group_tests("config_names_overrides", base_tests,
                                      GS_ARRAY_SIZE(base_tests), NULL, NULL);
    failed +=
        _cmocka_run_group_tests("config_fields_rules", field_tests, n_field_tests, NULL, NULL);
    failed += _cmocka_run_group_tests("config_corpus", corpus_tests, n_corpus_tests, NULL, NULL);
    failed += _cmocka_run_group_tests("config_load", load_tests, n_load_tests, NULL, NULL);
    failed += _cmocka_run_group_tests("config_sharing", sharing_tests, n_sharing_tests, NULL, NULL);
    return failed ? 1 : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_options.c: `gpuslice device-plugin` flags and env vars (src/daemon/options.c): our
 * own flags, NVIDIA's through the config option table, precedence and usage errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/daemon.h"

static const char *const *test_env;

static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; test_env && test_env[i]; i += 2)
        if (strcmp(test_env[i], name) == 0)
            return test_env[i + 1];
    return NULL;
}

static int parse(struct daemon_options *o, const char *const *env, const char *const *args,
                 struct error *err)
{
    char *argv[32];
    int argc = 0;

    argv[argc++] = (char *)"device-plugin";
    for (size_t i = 0; args[i]; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    test_env = env;
    return daemon_options_parse(o, argc, argv, fake_getenv, err);
}

static void test_daemon_options_parse_defaults(void **state)
{
    static const char *const args[] = {NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse(&o, NULL, args, NULL), 0);
    assert_string_equal(o.plugin_dir, DAEMON_DEFAULT_PLUGIN_DIR);
    assert_null(o.kubelet_socket);
    assert_null(o.config_file);
    assert_false(o.keep_serving_valid);
    assert_int_equal(o.log_level, LOG_LEVEL_INFO);
    assert_false(o.help);
    daemon_options_release(&o);
}

static void test_daemon_options_parse_own_flags(void **state)
{
    static const char *const args[] = {"--config-file",
                                       "/etc/c.yaml",
                                       "--config-name=l20",
                                       "--device-plugin-dir",
                                       "/tmp/dp",
                                       "--kubelet-socket",
                                       "",
                                       "--nvml-library",
                                       "/x/libnvidia-ml.so.1",
                                       "--keep-serving-valid",
                                       "--log-format",
                                       "json",
                                       "-v",
                                       NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse(&o, NULL, args, NULL), 0);
    assert_string_equal(o.config_file, "/etc/c.yaml");
    assert_string_equal(o.config_name, "l20");
    assert_string_equal(o.plugin_dir, "/tmp/dp");
    assert_string_equal(o.kubelet_socket, ""); /* empty: do not register */
    assert_string_equal(o.nvml.library_path, "/x/libnvidia-ml.so.1");
    assert_true(o.keep_serving_valid);
    assert_int_equal(o.log_format, LOG_FORMAT_JSON);
    assert_int_equal(o.log_level, LOG_LEVEL_DEBUG);
    daemon_options_release(&o);
}

static void test_daemon_options_parse_nvidia_flags(void **state)
{
    static const char *const env[] = {"MIG_STRATEGY",
                                      "single",
                                      "CONFIG_FILE",
                                      "/env.yaml",
                                      "KUBELET_SOCKET",
                                      "/k/kubelet.sock",
                                      "CONFIG_NAME",
                                      "t4",
                                      "DP_DISABLE_HEALTHCHECKS",
                                      "48",
                                      NULL};
    static const char *const args[] = {"--mig-strategy=mixed",
                                       "--fail-on-init-error=false",
                                       "--pass-device-specs",
                                       "--device-list-strategy",
                                       "envvar,cdi-annotations",
                                       "--driver-root",
                                       "/run/nvidia",
                                       NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse(&o, env, args, NULL), 0);
    /* flag beats env */
    assert_string_equal(cfg_overrides_get(&o.overrides, CFG_OPT_MIG_STRATEGY), "mixed");
    assert_string_equal(cfg_overrides_get(&o.overrides, CFG_OPT_FAIL_ON_INIT_ERROR), "false");
    assert_string_equal(cfg_overrides_get(&o.overrides, CFG_OPT_PASS_DEVICE_SPECS), "true");
    assert_string_equal(cfg_overrides_get(&o.overrides, CFG_OPT_DEVICE_LIST_STRATEGY),
                        "envvar,cdi-annotations");
    assert_string_equal(o.nvml.driver_root, "/run/nvidia");
    /* env only */
    assert_string_equal(o.config_file, "/env.yaml");
    assert_string_equal(o.config_name, "t4");
    assert_string_equal(o.kubelet_socket, "/k/kubelet.sock");
    assert_string_equal(o.disable_healthchecks, "48");
    daemon_options_release(&o);
}

struct bad_case {
    const char *args[4];
    const char *msg; /* substring of the error */
};

static void test_daemon_options_parse_errors(void **state)
{
    static const struct bad_case cases[] = {
        {{"--no-such-flag", NULL}, "unknown flag '--no-such-flag'"},
        {{"--mig-strategy", "bogus", NULL}, "bogus"},
        {{"--mig-strategy", NULL}, "needs a value"},
        {{"--log-format", "xml", NULL}, "text or json"},
        {{"--log-level", "loud", NULL}, "loud"},
        {{"--device-plugin-dir=", NULL}, "must not be empty"},
        {{"stray", NULL}, "unexpected argument 'stray'"},
        {{"--keep-serving-valid=maybe", NULL}, "bool"},
        {{"--MIG_STRATEGY=none", NULL}, "unknown flag"},
        {{"--fallback-strategies", "named,bogus", NULL}, "unknown strategy 'bogus'"},
        {{"--fallback-strategies", "named,,empty", NULL}, "bad list"},
        {{"--inventory-interval", "soon", NULL}, "duration"},
        {{"--retire-check-interval", "0", NULL}, "must be positive"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct daemon_options o;
        struct error err = {0};

        assert_int_equal(parse(&o, NULL, cases[i].args, &err), -EINVAL);
        if (!strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].msg);
        daemon_options_release(&o);
    }
}

static void test_daemon_options_parse_reload_defaults(void **state)
{
    static const char *const args[] = {NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse(&o, NULL, args, NULL), 0);
    assert_int_equal(o.inventory_interval_ms, 30000);
    assert_int_equal(o.retire_check_ms, 5000);
    assert_int_equal(o.n_fallbacks, 3);
    assert_int_equal(o.fallbacks[0], CFG_FALLBACK_NAMED);
    assert_int_equal(o.fallbacks[1], CFG_FALLBACK_SINGLE);
    assert_int_equal(o.fallbacks[2], CFG_FALLBACK_EMPTY);
    assert_string_equal(o.node_label, "nvidia.com/device-plugin.config");
    assert_string_equal(o.pod_resources_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
    assert_null(o.default_config);
    assert_null(o.node_name);
    assert_null(o.kubeconfig);
    daemon_options_release(&o);
}

static void test_daemon_options_parse_reload_env_and_flags(void **state)
{
    static const char *const env[] = {"DEFAULT_CONFIG",
                                      "l20",
                                      "FALLBACK_STRATEGIES",
                                      "empty",
                                      "NODE_LABEL",
                                      "example.com/gpu-config",
                                      "NODE_NAME",
                                      "node-7",
                                      "INVENTORY_INTERVAL",
                                      "1m30s",
                                      "KUBECONFIG",
                                      "/root/.kube/config",
                                      NULL};
    static const char *const none[] = {NULL};
    static const char *const args[] = {"--default-config=t4",
                                       "--inventory-interval",
                                       "0",
                                       "--pod-resources-socket",
                                       "/tmp/pr.sock",
                                       "--retire-check-interval",
                                       "250ms",
                                       "--node-label",
                                       "a/b",
                                       NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse(&o, env, none, NULL), 0);
    assert_string_equal(o.default_config, "l20");
    assert_int_equal(o.n_fallbacks, 1);
    assert_int_equal(o.fallbacks[0], CFG_FALLBACK_EMPTY);
    assert_string_equal(o.node_label, "example.com/gpu-config");
    assert_string_equal(o.node_name, "node-7");
    assert_string_equal(o.kubeconfig, "/root/.kube/config");
    assert_int_equal(o.inventory_interval_ms, 90000);
    daemon_options_release(&o);
    /* flags beat env vars; 0 turns the periodic inventory off */
    assert_int_equal(parse(&o, env, args, NULL), 0);
    assert_string_equal(o.default_config, "t4");
    assert_int_equal(o.inventory_interval_ms, 0);
    assert_string_equal(o.pod_resources_socket, "/tmp/pr.sock");
    assert_int_equal(o.retire_check_ms, 250);
    assert_string_equal(o.node_label, "a/b");
    daemon_options_release(&o);
}

static void test_daemon_options_parse_help(void **state)
{
    static const char *const args[] = {"--help", NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse(&o, NULL, args, NULL), 0);
    assert_true(o.help);
    assert_non_null(strstr(daemon_usage(), "--device-plugin-dir"));
    daemon_options_release(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_daemon_options_parse_defaults),
        cmocka_unit_test(test_daemon_options_parse_own_flags),
        cmocka_unit_test(test_daemon_options_parse_nvidia_flags),
        cmocka_unit_test(test_daemon_options_parse_errors),
        cmocka_unit_test(test_daemon_options_parse_reload_defaults),
        cmocka_unit_test(test_daemon_options_parse_reload_env_and_flags),
        cmocka_unit_test(test_daemon_options_parse_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

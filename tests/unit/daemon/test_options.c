/* SPDX-License-Identifier: Apache-2.0 */
/* test_options.c: `gpuslice device-plugin` flags and env vars (src/daemon/options.c): our
 * own flags, NVIDIA's through the config option table, precedence and usage errors; and
 * `gpuslice dra-plugin`'s (src/daemon/dra_options.c): NVIDIA's gpu-kubelet-plugin flags in
 * Go's syntax, its env vars, defaults and refusals. */
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

/* ---- gpuslice dra-plugin (src/daemon/dra_options.c) ---------------------------------- */

static int parse_dra(struct daemon_options *o, const char *const *env, const char *const *args,
                     struct error *err)
{
    char *argv[48];
    int argc = 0;

    argv[argc++] = (char *)"gpu-kubelet-plugin";
    for (size_t i = 0; args[i]; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    test_env = env;
    return daemon_dra_options_parse(o, argc, argv, fake_getenv, err);
}

static const char *const node_env[] = {"NODE_NAME", "node-1", NULL};
static const char *const no_args[] = {NULL};

static void test_daemon_dra_options_parse_defaults(void **state)
{
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse_dra(&o, node_env, no_args, NULL), 0);
    assert_true(o.dra.enabled);
    assert_string_equal(o.node_name, "node-1");
    assert_string_equal(o.dra.namespace, "default");
    assert_string_equal(o.dra.cdi_root, "/etc/cdi");
    assert_string_equal(o.dra.cdi_root, DAEMON_DRA_DEFAULT_CDI_ROOT);
    assert_string_equal(o.dra.registrar_dir, "/var/lib/kubelet/plugins_registry");
    assert_string_equal(o.dra.plugins_dir, "/var/lib/kubelet/plugins");
    assert_int_equal(o.dra.healthcheck_port, -1);
    assert_null(o.dra.host_driver_root);
    assert_null(o.dra.container_driver_root);
    assert_null(o.dra.cdi_hook_path);
    assert_null(o.dra.image_name);
    assert_null(o.dra.feature_gates);
    assert_null(o.dra.nvidia_smi);
    assert_null(o.config_file);
    assert_null(o.mig_config_file);
    assert_null(o.kubeconfig);
    assert_int_equal(o.labels, DAEMON_LABELS_OFF);
    assert_int_equal(o.log_level, LOG_LEVEL_INFO);
    assert_false(o.help);
    daemon_options_release(&o);
}

/* The GPUs are read again every 30 s by the device plugin, never by dra-plugin (NVIDIA's DRA
 * driver does not poll either: issue 28's idle cost) unless INVENTORY_INTERVAL asks. */
static void test_daemon_inventory_interval_ms_per_mode(void **state)
{
    static const char *const dra_env[] = {"NODE_NAME", "node-1", "INVENTORY_INTERVAL", "45s", NULL};
    static const char *const dp_env[] = {"INVENTORY_INTERVAL", "0", NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse(&o, NULL, no_args, NULL), 0);
    assert_int_equal(daemon_inventory_interval_ms(&o), 30000);
    daemon_options_release(&o);
    assert_int_equal(parse(&o, dp_env, no_args, NULL), 0);
    assert_int_equal(daemon_inventory_interval_ms(&o), 0);
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, node_env, no_args, NULL), 0);
    assert_int_equal(daemon_inventory_interval_ms(&o), 0);
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, dra_env, no_args, NULL), 0);
    assert_int_equal(daemon_inventory_interval_ms(&o), 45000);
    daemon_options_release(&o);
}

/* Go's flag syntax: one or two dashes, "=value" or the next argument. */
static void test_daemon_dra_options_parse_flag_forms(void **state)
{
    static const char *const args[] = {"-node-name=n1",
                                       "--namespace",
                                       "gpu-operator",
                                       "-cdi-root",
                                       "/var/run/cdi",
                                       "--kubelet-plugins-directory-path=/k/plugins",
                                       "-kubelet-registrar-directory-path=/k/reg",
                                       "--healthcheck-port=51515",
                                       "-kube-api-qps",
                                       "5",
                                       "--kube-api-burst=10",
                                       "--feature-gates=MPSSupport=true",
                                       "-image-name",
                                       "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0",
                                       "--nvidia-driver-root=/run/nvidia/driver",
                                       "-container-driver-root",
                                       "/driver-root",
                                       "--nvidia-cdi-hook-path",
                                       "/usr/bin/nvidia-cdi-hook",
                                       NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse_dra(&o, NULL, args, NULL), 0);
    assert_string_equal(o.node_name, "n1");
    assert_string_equal(o.dra.namespace, "gpu-operator");
    assert_string_equal(o.dra.cdi_root, "/var/run/cdi");
    assert_string_equal(o.dra.plugins_dir, "/k/plugins");
    assert_string_equal(o.dra.registrar_dir, "/k/reg");
    assert_int_equal(o.dra.healthcheck_port, 51515);
    assert_int_equal(o.dra.kube_api_qps, 5);
    assert_int_equal(o.dra.kube_api_burst, 10);
    assert_string_equal(o.dra.feature_gates, "MPSSupport=true"); /* only the first '=' splits */
    assert_string_equal(o.dra.image_name, "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0");
    assert_string_equal(o.dra.host_driver_root, "/run/nvidia/driver");
    assert_string_equal(o.nvml.driver_root, "/run/nvidia/driver");
    assert_string_equal(o.dra.container_driver_root, "/driver-root");
    assert_string_equal(o.nvml.driver_root_ctr_path, "/driver-root");
    assert_string_equal(o.dra.cdi_hook_path, "/usr/bin/nvidia-cdi-hook");
    daemon_options_release(&o);
}

/* Every env var of the table in dra_options.c, with no flags. */
static void test_daemon_dra_options_parse_every_env(void **state)
{
    static const char *const env[] = {"NODE_NAME",
                                      "n-env",
                                      "NAMESPACE",
                                      "ns-env",
                                      "CDI_ROOT",
                                      "/env/cdi",
                                      "NVIDIA_DRIVER_ROOT",
                                      "/env/host",
                                      "DRIVER_ROOT_CTR_PATH",
                                      "/env/ctr",
                                      "NVIDIA_CDI_HOOK_PATH",
                                      "/env/hook",
                                      "IMAGE_NAME",
                                      "img:1",
                                      "KUBELET_REGISTRAR_DIRECTORY_PATH",
                                      "/env/reg",
                                      "KUBELET_PLUGINS_DIRECTORY_PATH",
                                      "/env/plugins",
                                      "HEALTHCHECK_PORT",
                                      "51515",
                                      "ADDITIONAL_XIDS_TO_IGNORE",
                                      "13,31",
                                      "KUBECONFIG",
                                      "/env/kubeconfig",
                                      "KUBE_API_QPS",
                                      "7",
                                      "KUBE_API_BURST",
                                      "9",
                                      "FEATURE_GATES",
                                      "TimeSlicingSettings=true",
                                      "LOG_VERBOSITY",
                                      "6",
                                      "GPUSLICE_NVIDIA_SMI",
                                      "/env/nvidia-smi",
                                      "GPUSLICE_NVML_LIBRARY",
                                      "/env/libnvidia-ml.so.1",
                                      "GPUSLICE_KUBE_API_SERVER",
                                      "http://127.0.0.1:1",
                                      "GPUSLICE_METRICS_ADDRESS",
                                      "127.0.0.1:9400",
                                      "HTTP_ENDPOINT",
                                      ":8080",
                                      "METRICS_PATH",
                                      "/metrics",
                                      NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse_dra(&o, env, no_args, NULL), 0);
    assert_string_equal(o.node_name, "n-env");
    assert_string_equal(o.dra.namespace, "ns-env");
    assert_string_equal(o.dra.cdi_root, "/env/cdi");
    assert_string_equal(o.dra.host_driver_root, "/env/host");
    assert_string_equal(o.nvml.driver_root, "/env/host");
    assert_string_equal(o.dra.container_driver_root, "/env/ctr");
    assert_string_equal(o.nvml.driver_root_ctr_path, "/env/ctr");
    assert_string_equal(o.dra.cdi_hook_path, "/env/hook");
    assert_string_equal(o.dra.image_name, "img:1");
    assert_string_equal(o.dra.registrar_dir, "/env/reg");
    assert_string_equal(o.dra.plugins_dir, "/env/plugins");
    assert_int_equal(o.dra.healthcheck_port, 51515);
    assert_string_equal(o.disable_healthchecks, "13,31");
    assert_string_equal(o.kubeconfig, "/env/kubeconfig");
    assert_int_equal(o.dra.kube_api_qps, 7);
    assert_int_equal(o.dra.kube_api_burst, 9);
    assert_string_equal(o.dra.feature_gates, "TimeSlicingSettings=true");
    assert_int_equal(o.log_level, LOG_LEVEL_DEBUG);
    assert_string_equal(o.dra.nvidia_smi, "/env/nvidia-smi");
    assert_string_equal(o.nvml.library_path, "/env/libnvidia-ml.so.1");
    assert_string_equal(o.kube_api_server, "http://127.0.0.1:1");
    assert_string_equal(o.metrics_address, "127.0.0.1:9400"); /* ours beats HTTP_ENDPOINT */
    daemon_options_release(&o);
}

/* v0.4.0 of kubernetes-sigs/dra-driver-nvidia-gpu: --http-endpoint / HTTP_ENDPOINT and
 * --metrics-path / METRICS_PATH, which its chart sets (kubeletPlugin.metrics, on by default),
 * become our metrics address; --metrics-address (GPUSLICE_METRICS_ADDRESS) still wins. */
static void test_daemon_dra_options_parse_http_endpoint(void **state)
{
    static const struct {
        const char *env[9];
        const char *args[6];
        const char *want; /* metrics_address, NULL: no server */
    } cases[] = {
        /* the v0.4.0 chart's gpus container */
        {{"NODE_NAME", "n", "HTTP_ENDPOINT", ":8080", "METRICS_PATH", "/metrics", NULL},
         {NULL},
         ":8080"},
        {{"NODE_NAME", "n", "HTTP_ENDPOINT", "127.0.0.1:8080", NULL}, {NULL}, "127.0.0.1:8080"},
        {{"NODE_NAME", "n", NULL},
         {"--http-endpoint=:8081", "--metrics-path", "metrics/", NULL},
         ":8081"},
        {{"NODE_NAME", "n", NULL},
         {"-http-endpoint", ":8082", "-metrics-path=//metrics", NULL},
         ":8082"},
        /* a flag beats its env var */
        {{"NODE_NAME", "n", "HTTP_ENDPOINT", ":8080", NULL}, {"--http-endpoint=:9", NULL}, ":9"},
        /* NVIDIA's defaults: no endpoint, no server; an empty path turns it off too */
        {{"NODE_NAME", "n", NULL}, {NULL}, NULL},
        {{"NODE_NAME", "n", "HTTP_ENDPOINT", "", "METRICS_PATH", "/metrics", NULL}, {NULL}, NULL},
        {{"NODE_NAME", "n", "HTTP_ENDPOINT", ":8080", "METRICS_PATH", "", NULL}, {NULL}, NULL},
        {{"NODE_NAME", "n", NULL}, {"--http-endpoint", ":8080", "--metrics-path=", NULL}, NULL},
        /* ours wins, from env or flag, whatever the order */
        {{"NODE_NAME", "n", "GPUSLICE_METRICS_ADDRESS", ":9400", "HTTP_ENDPOINT", ":8080", NULL},
         {NULL},
         ":9400"},
        {{"NODE_NAME", "n", "HTTP_ENDPOINT", ":8080", NULL},
         {"--metrics-address=:9400", "--http-endpoint=:8081", NULL},
         ":9400"},
        /* an explicitly empty address of ours keeps the server off */
        {{"NODE_NAME", "n", "GPUSLICE_METRICS_ADDRESS", "", "HTTP_ENDPOINT", ":8080", NULL},
         {NULL},
         NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct daemon_options o;
        struct error err = {0};

        if (parse_dra(&o, cases[i].env, cases[i].args, &err) != 0)
            fail_msg("case %zu: %s", i, err.msg);
        if (cases[i].want && (!o.metrics_address || strcmp(o.metrics_address, cases[i].want) != 0))
            fail_msg("case %zu: metrics address '%s', want '%s'", i,
                     o.metrics_address ? o.metrics_address : "(none)", cases[i].want);
        if (!cases[i].want && o.metrics_address)
            fail_msg("case %zu: metrics address '%s', want none", i, o.metrics_address);
        daemon_options_release(&o);
    }
    assert_non_null(strstr(daemon_dra_usage(), "--http-endpoint"));
    assert_non_null(strstr(daemon_dra_usage(), "METRICS_PATH"));
}

/* Our server has one path, /metrics: another METRICS_PATH is refused where it would be used,
 * naming the chart value, and accepted where NVIDIA's driver would not use it either. */
static void test_daemon_dra_options_parse_metrics_path_other(void **state)
{
    static const char *const used[] = {"NODE_NAME", "n", "HTTP_ENDPOINT", ":8080", "METRICS_PATH",
                                       "/prom",     NULL};
    static const char *const no_endpoint[] = {"NODE_NAME", "n", "METRICS_PATH", "/prom", NULL};
    static const char *const ours[] = {"NODE_NAME",
                                       "n",
                                       "GPUSLICE_METRICS_ADDRESS",
                                       ":9400",
                                       "HTTP_ENDPOINT",
                                       ":8080",
                                       "METRICS_PATH",
                                       "/prom",
                                       NULL};
    static const char *const flag[] = {"--http-endpoint=:8080", "--metrics-path=/metricsx", NULL};
    struct daemon_options o;
    struct error err = {0};

    (void)state;
    assert_int_equal(parse_dra(&o, used, no_args, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "METRICS_PATH) '/prom'"));
    assert_non_null(strstr(err.msg, "at /metrics only"));
    assert_non_null(strstr(err.msg, "kubeletPlugin.metrics.metricsPath"));
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, node_env, flag, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "'/metricsx'"));
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, no_endpoint, no_args, NULL), 0);
    assert_null(o.metrics_address);
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, ours, no_args, NULL), 0);
    assert_string_equal(o.metrics_address, ":9400");
    daemon_options_release(&o);
}

/* HOST_DRIVER_ROOT is the second name of the driver root; NVIDIA_DRIVER_ROOT wins over it. */
static void test_daemon_dra_options_parse_host_driver_root_env(void **state)
{
    static const char *const host_only[] = {"NODE_NAME", "n", "HOST_DRIVER_ROOT", "/h", NULL};
    static const char *const both[] = {
        "NODE_NAME", "n", "HOST_DRIVER_ROOT", "/h", "NVIDIA_DRIVER_ROOT", "/nv", NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse_dra(&o, host_only, no_args, NULL), 0);
    assert_string_equal(o.dra.host_driver_root, "/h");
    assert_string_equal(o.nvml.driver_root, "/h");
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, both, no_args, NULL), 0);
    assert_string_equal(o.dra.host_driver_root, "/nv");
    daemon_options_release(&o);
}

/* NVIDIA's chart passes --host_driver-root; --host-driver-root is accepted too. */
static void test_daemon_dra_options_parse_host_driver_root_alias(void **state)
{
    static const char *const underscore[] = {"--host_driver-root=/run/nvidia/driver", NULL};
    static const char *const dashes[] = {"-host-driver-root", "/hd", NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse_dra(&o, node_env, underscore, NULL), 0);
    assert_string_equal(o.dra.host_driver_root, "/run/nvidia/driver");
    assert_string_equal(o.nvml.driver_root, "/run/nvidia/driver");
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, node_env, dashes, NULL), 0);
    assert_string_equal(o.dra.host_driver_root, "/hd");
    daemon_options_release(&o);
}

static void test_daemon_dra_options_parse_flags_beat_env(void **state)
{
    static const char *const env[] = {"NODE_NAME",
                                      "env-node",
                                      "NAMESPACE",
                                      "env-ns",
                                      "CDI_ROOT",
                                      "/env/cdi",
                                      "HEALTHCHECK_PORT",
                                      "1",
                                      "LOG_VERBOSITY",
                                      "4",
                                      "ADDITIONAL_XIDS_TO_IGNORE",
                                      "13",
                                      "KUBELET_PLUGINS_DIRECTORY_PATH",
                                      "/env/plugins",
                                      "NVIDIA_DRIVER_ROOT",
                                      "/env/host",
                                      NULL};
    static const char *const args[] = {"--node-name",
                                       "flag-node",
                                       "-namespace=flag-ns",
                                       "--cdi-root",
                                       "/flag/cdi",
                                       "--healthcheck-port",
                                       "2",
                                       "-v",
                                       "0",
                                       "--additional-xids-to-ignore=31",
                                       "--kubelet-plugins-directory-path",
                                       "/flag/plugins",
                                       "--host_driver-root",
                                       "/flag/host",
                                       NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse_dra(&o, env, args, NULL), 0);
    assert_string_equal(o.node_name, "flag-node");
    assert_string_equal(o.dra.namespace, "flag-ns");
    assert_string_equal(o.dra.cdi_root, "/flag/cdi");
    assert_int_equal(o.dra.healthcheck_port, 2);
    assert_int_equal(o.log_level, LOG_LEVEL_INFO);
    assert_string_equal(o.disable_healthchecks, "31");
    assert_string_equal(o.dra.plugins_dir, "/flag/plugins");
    assert_string_equal(o.dra.host_driver_root, "/flag/host");
    assert_string_equal(o.nvml.driver_root, "/flag/host");
    daemon_options_release(&o);
}

/* klog's -v: 4 and more is debug, below is info. */
static void test_daemon_dra_options_parse_verbosity(void **state)
{
    static const struct {
        const char *args[3];
        enum log_level want;
    } cases[] = {
        {{"-v", "4", NULL}, LOG_LEVEL_DEBUG}, {{"--v=4", NULL}, LOG_LEVEL_DEBUG},
        {{"-v=9", NULL}, LOG_LEVEL_DEBUG},    {{"-v", "3", NULL}, LOG_LEVEL_INFO},
        {{"-v", "0", NULL}, LOG_LEVEL_INFO},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct daemon_options o;

        assert_int_equal(parse_dra(&o, node_env, cases[i].args, NULL), 0);
        if (o.log_level != cases[i].want)
            fail_msg("case %zu: log level %d, want %d", i, (int)o.log_level, (int)cases[i].want);
        daemon_options_release(&o);
    }
}

/* NVIDIA's XIDs to ignore feed the same policy as the device plugin's DP_DISABLE_HEALTHCHECKS,
 * and win over it. */
static void test_daemon_dra_options_parse_xids_to_ignore(void **state)
{
    static const char *const env[] = {"NODE_NAME", "n", "DP_DISABLE_HEALTHCHECKS", "48", NULL};
    static const char *const args[] = {"--additional-xids-to-ignore", "13,31,43", NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse_dra(&o, env, no_args, NULL), 0);
    assert_string_equal(o.disable_healthchecks, "48");
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, env, args, NULL), 0);
    assert_string_equal(o.disable_healthchecks, "13,31,43");
    daemon_options_release(&o);
}

static void test_daemon_dra_options_parse_node_name_required(void **state)
{
    static const char *const empty_env[] = {"NODE_NAME", "", NULL};
    static const char *const empty_flag[] = {"--node-name=", NULL};
    const char *const *envs[] = {NULL, empty_env, node_env};
    const char *const *args[] = {no_args, no_args, empty_flag};

    (void)state;
    for (size_t i = 0; i < sizeof(envs) / sizeof(envs[0]); i++) {
        struct daemon_options o;
        struct error err = {0};

        assert_int_equal(parse_dra(&o, envs[i], args[i], &err), -EINVAL);
        if (!strstr(err.msg, "NODE_NAME") || !strstr(err.msg, "--node-name"))
            fail_msg("case %zu: '%s' does not name NODE_NAME and --node-name", i, err.msg);
        daemon_options_release(&o);
    }
}

/* dra-plugin reads a config only when --config-file (CONFIG_FILE) names one: its
 * sharing.fractions (docs/dra.md); the flag beats the env var. */
static void test_daemon_dra_options_config_file(void **state)
{
    static const char *const env[] = {"NODE_NAME", "node-1", "CONFIG_FILE", "/env.yaml", NULL};
    static const char *const flag[] = {"--config-file=/flag.yaml", NULL};
    static const char *const alias[] = {"--config", "/alias.yaml", NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse_dra(&o, env, no_args, NULL), 0);
    assert_string_equal(o.config_file, "/env.yaml");
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, env, flag, NULL), 0);
    assert_string_equal(o.config_file, "/flag.yaml");
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, node_env, alias, NULL), 0);
    assert_string_equal(o.config_file, "/alias.yaml");
    daemon_options_release(&o);
}

static void test_daemon_dra_options_parse_errors(void **state)
{
    static const struct bad_case cases[] = {
        {{"--no-such-flag", NULL}, "unknown flag '--no-such-flag'"},
        {{"-bogus=1", NULL}, "unknown flag '-bogus=1'"},
        {{"--config-name", "l20", NULL}, "unknown flag"}, /* device-plugin only */
        {{"--config-file", NULL}, "needs a value"},
        {{"--NODE_NAME=x", NULL}, "unknown flag"},
        {{"--namespace", NULL}, "needs a value"},
        {{"-v", NULL}, "needs a value"},
        {{"-v", "loud", NULL}, "verbosity"},
        {{"-v", "-1", NULL}, "verbosity"},
        {{"--healthcheck-port", "http", NULL}, "must be a number"},
        {{"--kube-api-qps=fast", NULL}, "must be a number"},
        {{"stray", NULL}, "unexpected argument 'stray'"},
        {{"-", NULL}, "unexpected argument '-'"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct daemon_options o;
        struct error err = {0};

        assert_int_equal(parse_dra(&o, node_env, cases[i].args, &err), -EINVAL);
        if (!strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].msg);
        daemon_options_release(&o);
    }
}

static void test_daemon_dra_options_parse_bad_env(void **state)
{
    static const char *const env[] = {"NODE_NAME", "n", "HEALTHCHECK_PORT", "soon", NULL};
    struct daemon_options o;
    struct error err = {0};

    (void)state;
    assert_int_equal(parse_dra(&o, env, no_args, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "HEALTHCHECK_PORT"));
    daemon_options_release(&o);
}

/* --help needs no node name. */
static void test_daemon_dra_options_parse_help(void **state)
{
    static const char *const help[] = {"--help", NULL};
    static const char *const h[] = {"-h", NULL};
    struct daemon_options o;

    (void)state;
    assert_int_equal(parse_dra(&o, NULL, help, NULL), 0);
    assert_true(o.help);
    daemon_options_release(&o);
    assert_int_equal(parse_dra(&o, NULL, h, NULL), 0);
    assert_true(o.help);
    daemon_options_release(&o);
    assert_non_null(strstr(daemon_dra_usage(), "--kubelet-plugins-directory-path"));
    assert_non_null(strstr(daemon_dra_usage(), "NODE_NAME"));
    assert_non_null(strstr(daemon_dra_usage(), "gpu-kubelet-plugin"));
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
        cmocka_unit_test(test_daemon_dra_options_parse_defaults),
        cmocka_unit_test(test_daemon_inventory_interval_ms_per_mode),
        cmocka_unit_test(test_daemon_dra_options_parse_flag_forms),
        cmocka_unit_test(test_daemon_dra_options_parse_every_env),
        cmocka_unit_test(test_daemon_dra_options_parse_http_endpoint),
        cmocka_unit_test(test_daemon_dra_options_parse_metrics_path_other),
        cmocka_unit_test(test_daemon_dra_options_parse_host_driver_root_env),
        cmocka_unit_test(test_daemon_dra_options_parse_host_driver_root_alias),
        cmocka_unit_test(test_daemon_dra_options_parse_flags_beat_env),
        cmocka_unit_test(test_daemon_dra_options_parse_verbosity),
        cmocka_unit_test(test_daemon_dra_options_parse_xids_to_ignore),
        cmocka_unit_test(test_daemon_dra_options_parse_node_name_required),
        cmocka_unit_test(test_daemon_dra_options_config_file),
        cmocka_unit_test(test_daemon_dra_options_parse_errors),
        cmocka_unit_test(test_daemon_dra_options_parse_bad_env),
        cmocka_unit_test(test_daemon_dra_options_parse_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

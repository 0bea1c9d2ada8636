/* SPDX-License-Identifier: Apache-2.0 */
/* test_configmgr.c: config-manager options (flags, NVIDIA's env, precedence, bad values),
 * the config chosen for a label value (the daemon's selection: label > default >
 * fallbacks, "..data" skipped, /dev/null for empty) and the atomic destination symlink. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "configmgr/configmgr.h"
#include "helpers.h"

static const char *env_table[16][2];

static const char *fake_env(const char *name)
{
    for (size_t i = 0; i < 16 && env_table[i][0]; i++)
        if (strcmp(env_table[i][0], name) == 0)
            return env_table[i][1];
    return NULL;
}

static void set_env(size_t i, const char *k, const char *v)
{
    env_table[i][0] = k;
    env_table[i][1] = v;
    env_table[i + 1][0] = NULL;
}

static int parse(struct cfgmgr_options *o, struct error *err, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    return cfgmgr_options_parse(o, argc, argv, fake_env, err);
}

/* The init container's env exactly as NVIDIA's chart renders it. */
static void test_options_parse_chart_env(void **state)
{
    struct cfgmgr_options o;
    struct error err = {0};
    char *argv[] = {"config-manager", NULL};

    (void)state;
    set_env(0, "ONESHOT", "true");
    set_env(1, "KUBECONFIG", "");
    set_env(2, "NODE_NAME", "gpu-node-1");
    set_env(3, "NODE_LABEL", "nvidia.com/device-plugin.config");
    set_env(4, "CONFIG_FILE_SRCDIR", "/available-configs");
    set_env(5, "CONFIG_FILE_DST", "/config/config.yaml");
    set_env(6, "DEFAULT_CONFIG", "any");
    set_env(7, "FALLBACK_STRATEGIES", "named,single");
    set_env(8, "SEND_SIGNAL", "false");
    set_env(9, "SIGNAL", "");
    set_env(10, "PROCESS_TO_SIGNAL", "");
    /* empty values count as unset: the defaults stay */
    assert_int_equal(parse(&o, &err, argv), 0);
    assert_true(o.oneshot);
    assert_null(o.kubeconfig); /* "" = in-cluster */
    assert_string_equal(o.node_name, "gpu-node-1");
    assert_string_equal(o.srcdir, "/available-configs");
    assert_string_equal(o.dst, "/config/config.yaml");
    assert_string_equal(o.default_config, "any");
    assert_int_equal(o.n_fallbacks, 2);
    assert_int_equal(o.fallbacks[0], CFG_FALLBACK_NAMED);
    assert_int_equal(o.fallbacks[1], CFG_FALLBACK_SINGLE);
    assert_false(o.send_signal);
    assert_int_equal(o.signal, SIGHUP);
    assert_string_equal(o.process, "nvidia-device-plugin");
    /* a bad value in the env is named as such */
    set_env(9, "SIGNAL", "HUPP");
    assert_int_equal(parse(&o, &err, argv), -EINVAL);
    assert_non_null(strstr(err.msg, "env SIGNAL 'HUPP'"));
    env_table[0][0] = NULL;
}

static void test_options_parse_flags_beat_env(void **state)
{
    struct cfgmgr_options o;
    struct error err = {0};
    char *argv[] = {"config-manager",
                    "--node-name",
                    "b",
                    "-config-file-srcdir=/s",
                    "--config-file-dst",
                    "/d/c.yaml",
                    "--oneshot",
                    "--send-signal=false",
                    "--signal",
                    "SIGUSR1",
                    "--process-to-signal",
                    "/usr/bin/mps-control-daemon",
                    "--fallback-strategies",
                    "empty",
                    NULL};

    (void)state;
    set_env(0, "NODE_NAME", "a");
    set_env(1, "ONESHOT", "false");
    set_env(2, "FALLBACK_STRATEGIES", "named,single");
    assert_int_equal(parse(&o, &err, argv), 0);
    assert_string_equal(o.node_name, "b");
    assert_string_equal(o.srcdir, "/s");
    assert_true(o.oneshot);
    assert_false(o.send_signal);
    assert_int_equal(o.signal, SIGUSR1);
    assert_string_equal(o.process, "/usr/bin/mps-control-daemon");
    assert_int_equal(o.n_fallbacks, 1);
    assert_int_equal(o.fallbacks[0], CFG_FALLBACK_EMPTY);
    env_table[0][0] = NULL;
}

static void test_options_parse_defaults_and_required(void **state)
{
    struct cfgmgr_options o;
    struct error err = {0};
    char *none[] = {"config-manager", NULL};
    char *ok[] = {"config-manager",    "--node-name", "n", "--config-file-srcdir", "/s",
                  "--config-file-dst", "/d",          NULL};
    char *help[] = {"config-manager", "--help", NULL};

    (void)state;
    env_table[0][0] = NULL;
    assert_int_equal(parse(&o, &err, none), -EINVAL);
    assert_non_null(strstr(err.msg, "NODE_NAME"));
    assert_int_equal(parse(&o, &err, help), 0);
    assert_true(o.help);
    assert_int_equal(parse(&o, &err, ok), 0);
    assert_false(o.oneshot);
    assert_true(o.send_signal);
    assert_int_equal(o.signal, SIGHUP);
    assert_string_equal(o.node_label, "nvidia.com/device-plugin.config");
    assert_string_equal(o.process, "nvidia-device-plugin");
    assert_int_equal(o.n_fallbacks, 0);
    assert_null(o.default_config);
}

static void test_options_parse_bad_values(void **state)
{
    static const struct {
        const char *flag, *value, *want;
    } cases[] = {
        {"--oneshot=maybe", NULL, "not a boolean"},
        {"--fallback-strategies", "named,bogus", "fallback strategies"},
        {"--fallback-strategies", "named,named", "fallback strategies"},
        {"--fallback-strategies", "named,,single", "fallback strategies"},
        {"--signal", "0", "not a signal"},
        {"--signal", "SIGWHAT", "not a signal"},
        {"--no-such-flag", NULL, "unknown option"},
        {"--node-label", NULL, "needs a value"},
        {"stray", NULL, "unexpected argument"},
    };

    (void)state;
    env_table[0][0] = NULL;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cfgmgr_options o;
        struct error err = {0};
        char *argv[] = {"config-manager",      "--node-name",          "n",
                        (char *)cases[i].flag, (char *)cases[i].value, NULL};
        assert_int_equal(parse(&o, &err, argv), -EINVAL);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("%s %s: %s", cases[i].flag, cases[i].value ? cases[i].value : "", err.msg);
    }
}

static const char ts8[] = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                          "    - name: nvidia.com/gpu\n      replicas: 8\n";

/* The ConfigMap layout kubelet makes: ..data -> ..ts, keys -> ..data/key. */
static char *configmap(const char *const *keys)
{
    char *d = tmpdir_new();
    char path[4096], link[4096];

    for (size_t i = 0; keys[i]; i++) {
        snprintf(path, sizeof(path), "..2026_01_01/%s", keys[i]);
        write_at(d, path, ts8, sizeof(ts8) - 1);
        snprintf(path, sizeof(path), "%s/%s", d, keys[i]);
        snprintf(link, sizeof(link), "..data/%s", keys[i]);
        assert_int_equal(symlink(link, path), 0);
    }
    snprintf(path, sizeof(path), "%s/..data", d);
    assert_int_equal(symlink("..2026_01_01", path), 0);
    return d;
}

static void test_choose_label_default_fallbacks(void **state)
{
    static const char *const keys[] = {"any", "l20", "t4", NULL};
    char *d = configmap(keys);
    struct cfgmgr_options o = {.srcdir = d};
    struct error err = {0};
    char *t = NULL, want[4096];

    (void)state;
    assert_int_equal(cfgmgr_choose(&o, "l20", &t, &err), 0);
    snprintf(want, sizeof(want), "%s/l20", d);
    assert_string_equal(t, want);
    free(t);
    /* unknown label: -ENOENT naming the available configs */
    assert_int_equal(cfgmgr_choose(&o, "h100", &t, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "h100"));
    assert_non_null(strstr(err.msg, "any, l20, t4"));
    /* no label, no default, no fallbacks: nothing */
    assert_int_equal(cfgmgr_choose(&o, NULL, &t, &err), -ENOENT);
    /* default config */
    o.default_config = "any";
    assert_int_equal(cfgmgr_choose(&o, NULL, &t, &err), 0);
    snprintf(want, sizeof(want), "%s/any", d);
    assert_string_equal(t, want);
    free(t);
    /* fallbacks: named (no "default" key) fails, single (3 keys) fails, empty -> /dev/null */
    o.default_config = NULL;
    o.fallbacks[0] = CFG_FALLBACK_NAMED;
    o.fallbacks[1] = CFG_FALLBACK_SINGLE;
    o.n_fallbacks = 2;
    assert_int_equal(cfgmgr_choose(&o, NULL, &t, &err), -ENOENT);
    o.fallbacks[2] = CFG_FALLBACK_EMPTY;
    o.n_fallbacks = 3;
    assert_int_equal(cfgmgr_choose(&o, NULL, &t, &err), 0);
    assert_string_equal(t, CFGMGR_EMPTY_TARGET);
    free(t);
    /* a label that is not a ConfigMap key is refused before it becomes a path */
    assert_int_equal(cfgmgr_choose(&o, "../etc/passwd", &t, &err), -EINVAL);
    tmpdir_free(d);
}

static void test_choose_single(void **state)
{
    static const char *const keys[] = {"only", NULL};
    char *d = configmap(keys);
    struct cfgmgr_options o = {.srcdir = d, .n_fallbacks = 1};
    struct error err = {0};
    char *t = NULL;

    (void)state;
    o.fallbacks[0] = CFG_FALLBACK_SINGLE;
    assert_int_equal(cfgmgr_choose(&o, NULL, &t, &err), 0);
    assert_non_null(strstr(t, "/only"));
    free(t);
    tmpdir_free(d);
}

static void read_link(const char *path, char *buf, size_t size)
{
    ssize_t n = readlink(path, buf, size - 1);
    assert_true(n >= 0);
    buf[n] = '\0';
}

static void test_link_update_atomic_and_idempotent(void **state)
{
    char *d = tmpdir_new();
    char dst[4096], buf[4096];
    struct error err = {0};
    struct stat st;
    bool changed = false;

    (void)state;
    snprintf(dst, sizeof(dst), "%s/config/config.yaml", d); /* parent made on demand */
    assert_int_equal(cfgmgr_link_update(dst, "/available-configs/l20", &changed, &err), 0);
    assert_true(changed);
    read_link(dst, buf, sizeof(buf));
    assert_string_equal(buf, "/available-configs/l20");
    assert_int_equal(cfgmgr_link_update(dst, "/available-configs/l20", &changed, &err), 0);
    assert_false(changed);
    assert_int_equal(cfgmgr_link_update(dst, CFGMGR_EMPTY_TARGET, &changed, &err), 0);
    assert_true(changed);
    read_link(dst, buf, sizeof(buf));
    assert_string_equal(buf, "/dev/null");
    /* no temp link left behind */
    snprintf(buf, sizeof(buf), "%s/config/config.yaml.tmp-%ld", d, (long)getpid());
    assert_int_equal(lstat(buf, &st), -1);
    /* a regular file at dst (an old copy) is replaced by the link */
    write_at(d, "config/config.yaml", "x", 1);
    assert_int_equal(cfgmgr_link_update(dst, "/a/t4", &changed, &err), 0);
    assert_true(changed);
    read_link(dst, buf, sizeof(buf));
    assert_string_equal(buf, "/a/t4");
    /* dst a directory: error says so, nothing changed */
    snprintf(dst, sizeof(dst), "%s/config", d);
    assert_true(cfgmgr_link_update(dst, "/a/t4", &changed, &err) < 0);
    assert_non_null(strstr(err.msg, "is a directory"));
    tmpdir_free(d);
}

const struct CMUnitTest configmgr_tests[] = {
    cmocka_unit_test(test_options_parse_chart_env),
    cmocka_unit_test(test_options_parse_flags_beat_env),
    cmocka_unit_test(test_options_parse_defaults_and_required),
    cmocka_unit_test(test_options_parse_bad_values),
    cmocka_unit_test(test_choose_label_default_fallbacks),
    cmocka_unit_test(test_choose_single),
    cmocka_unit_test(test_link_update_atomic_and_idempotent),
};
const size_t n_configmgr_tests = sizeof(configmgr_tests) / sizeof(configmgr_tests[0]);

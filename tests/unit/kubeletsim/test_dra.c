/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for tools/kubelet-sim dra.c and the dra-* commands of cmd.c: parsing, then the
 * simulator in-process against src/kubelet's DRA plugin server (stub ops) — registration in
 * v1 and forced v1beta1, prepare/unprepare answers, deregistration when the socket goes and
 * registration again when it comes back or the kubelet restarts, and the answers without a
 * registry. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kubelet.h"
#include "sim.h"

#define DRIVER "gpu.nvidia.com"

struct fx {
    char dir[64];
    char plugins[96];
    char registry[96];
    char dp[96];
    struct kdra_server *srv;
    struct sim *sim;
    unsigned n_prepare;
    enum kdra_api last_api;
};

static int stub_prepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims, size_t n,
                        struct kdra_result *results, struct rpc_status *st)
{
    struct fx *f = ctx;

    (void)st;
    f->n_prepare++;
    f->last_api = api;
    for (size_t i = 0; i < n; i++) {
        char cdi[300];
        const char *ids[] = {cdi, NULL};
        snprintf(cdi, sizeof(cdi), "k8s.gpu.nvidia.com/claim=%s-gpu-1", claims[i].uid);
        if (strcmp(claims[i].name, "taken") == 0)
            kdra_result_set_error(&results[i], "device gpu-1 is prepared for another claim");
        else
            kdra_result_add_device(&results[i], "node1", "gpu-1", NULL, ids);
    }
    return 0;
}

static int stub_unprepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims, size_t n,
                          struct kdra_result *results, struct rpc_status *st)
{
    (void)ctx;
    (void)api;
    (void)claims;
    (void)n;
    (void)results;
    (void)st;
    return 0;
}

static const struct kdra_ops stub_ops = {stub_prepare, stub_unprepare, NULL};

static void server_start(struct fx *f)
{
    struct kdra_server_opts o = {
        .plugins_dir = f->plugins, .registrar_dir = f->registry, .ops = &stub_ops, .ctx = f};

    assert_int_equal(kdra_server_new(&o, &f->srv, NULL), 0);
    assert_int_equal(kdra_server_start(f->srv, NULL), 0);
}

static void sim_start(struct fx *f, bool v1beta1)
{
    struct sim_opts o = {.dir = f->dp,
                         .rpc_timeout_ms = 5000,
                         .plugins_registry = f->registry,
                         .dra_force_v1beta1 = v1beta1};
    struct error err = {0};

    if (sim_new(&o, &f->sim, &err) < 0)
        fail_msg("sim_new: %s", err.msg);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/gs-simdra-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->plugins, sizeof(f->plugins), "%s/plugins", f->dir);
    snprintf(f->registry, sizeof(f->registry), "%s/plugins_registry", f->dir);
    snprintf(f->dp, sizeof(f->dp), "%s/device-plugins", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    sim_free(f->sim);
    kdra_server_free(f->srv);
    path_rm_tree(f->dir);
    free(f);
    return 0;
}

/* Runs one command with JSON output; returns the parsed answer (owned). */
static json_t *run(struct fx *f, const char *line, int want_r)
{
    struct sim_cmd c = {0};
    struct strbuf out = STRBUF_INIT;
    struct error err = {0};
    json_t *j;
    int r;

    if (sim_cmd_parse(line, &c, &err) != 0)
        fail_msg("parse \"%s\": %s", line, err.msg);
    r = sim_run(f->sim, &c, true, &out);
    if ((r < 0) != (want_r < 0))
        fail_msg("\"%s\": %d: %s", line, r, strbuf_str(&out));
    j = json_loads(strbuf_str(&out), 0, NULL);
    assert_non_null(j);
    sim_cmd_release(&c);
    strbuf_release(&out);
    return j;
}

static const char *jstr(json_t *o, const char *path0, const char *path1)
{
    json_t *v = json_object_get(o, path0);

    if (path1)
        v = json_object_get(v, path1);
    return json_string_value(v);
}

static void test_sim_cmd_parse_dra(void **state)
{
    struct sim_cmd c;
    struct error err = {0};
    char line[SIM_MAX_LINE];
    size_t n = 0;

    (void)state;
    assert_int_equal(sim_cmd_parse("dra-wait gpu.nvidia.com 300", &c, NULL), 0);
    assert_int_equal(c.kind, SIM_CMD_DRA_WAIT);
    assert_string_equal(c.name, DRIVER);
    assert_int_equal(c.timeout_ms, 300);
    sim_cmd_release(&c);
    assert_int_equal(sim_cmd_parse("dra-drivers", &c, NULL), 0);
    assert_int_equal(c.kind, SIM_CMD_DRA_DRIVERS);
    sim_cmd_release(&c);
    assert_int_equal(sim_cmd_parse("dra-prepare d.io ns/a:u-1 other/b:7c1e-2f", &c, NULL), 0);
    assert_int_equal(c.kind, SIM_CMD_DRA_PREPARE);
    assert_int_equal(c.n_claims, 2);
    assert_string_equal(c.claims[1].namespace, "other");
    assert_string_equal(c.claims[1].name, "b");
    assert_string_equal(c.claims[1].uid, "7c1e-2f");
    sim_cmd_release(&c);
    assert_int_equal(sim_cmd_parse("dra-unprepare d.io ns/a:u", &c, NULL), 0);
    assert_int_equal(c.kind, SIM_CMD_DRA_UNPREPARE);
    sim_cmd_release(&c);

    static const char *const bad[] = {
        "dra-prepare d.io",
        "dra-prepare d.io ns-a:u",
        "dra-prepare d.io /a:u",
        "dra-prepare d.io ns/:u",
        "dra-prepare d.io ns/a:",
        "dra-prepare d.io ns/a",
        "dra-wait",
        "dra-wait d.io x",
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(bad); i++) {
        if (sim_cmd_parse(bad[i], &c, &err) != -EINVAL)
            fail_msg("\"%s\" parsed", bad[i]);
    }
    n = (size_t)snprintf(line, sizeof(line), "dra-prepare d.io");
    for (int i = 0; i <= SIM_MAX_CLAIMS; i++)
        n += (size_t)snprintf(line + n, sizeof(line) - n, " ns/c%d:u%d", i, i);
    assert_int_equal(sim_cmd_parse(line, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "usage: dra-prepare"));
}

static void test_sim_dra_registers_and_prepares_v1(void **state)
{
    struct fx *f = *state;
    json_t *j, *claims, *dev;

    server_start(f);
    sim_start(f, false);
    j = run(f, "dra-wait gpu.nvidia.com 10000", 0);
    assert_string_equal(jstr(j, "api", NULL), "v1");
    assert_string_equal(jstr(j, "endpoint", NULL), kdra_server_socket_path(f->srv));
    json_decref(j);
    /* the plugin heard back */
    {
        struct kdra_registration reg;
        kdra_server_registration(f->srv, &reg);
        assert_true(reg.is_registered);
        assert_int_equal(reg.n_notifications, 1);
    }
    j = run(f, "dra-prepare gpu.nvidia.com default/c1:uid-1 default/taken:uid-2", 0);
    assert_int_equal(f->last_api, KDRA_API_V1);
    claims = json_object_get(j, "claims");
    assert_int_equal(json_array_size(claims), 2);
    dev = json_array_get(json_object_get(json_array_get(claims, 0), "devices"), 0);
    assert_string_equal(jstr(dev, "device", NULL), "gpu-1");
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(dev, "cdi_device_ids"), 0)),
        "k8s.gpu.nvidia.com/claim=uid-1-gpu-1");
    assert_string_equal(jstr(json_array_get(claims, 1), "error", NULL),
                        "device gpu-1 is prepared for another claim");
    json_decref(j);
    j = run(f, "dra-unprepare gpu.nvidia.com default/c1:uid-1", 0);
    assert_true(
        json_is_null(json_object_get(json_array_get(json_object_get(j, "claims"), 0), "error")));
    json_decref(j);
}

static void test_sim_dra_force_v1beta1(void **state)
{
    struct fx *f = *state;
    json_t *j;

    server_start(f);
    sim_start(f, true);
    j = run(f, "dra-wait gpu.nvidia.com 10000", 0);
    assert_string_equal(jstr(j, "api", NULL), "v1beta1");
    json_decref(j);
    j = run(f, "dra-prepare gpu.nvidia.com default/c1:uid-1", 0);
    assert_string_equal(jstr(j, "api", NULL), "v1beta1");
    assert_int_equal(f->last_api, KDRA_API_V1BETA1);
    json_decref(j);
}

/* Waits on the sim's condition until the plugin's registration state is `registered`. */
static bool wait_registered(struct fx *f, bool registered, unsigned n_registrations)
{
    uint64_t deadline = time_now_ns() + 10000ull * 1000000u;
    bool ok = false;

    pthread_mutex_lock(&f->sim->lock);
    for (;;) {
        const struct sim_dra_plugin *p = f->sim->dra.n_plugins ? &f->sim->dra.plugins[0] : NULL;
        ok = p && p->is_registered == registered && p->n_registrations == n_registrations &&
             p->is_removed == !registered;
        if (ok || !sim__wait_until(f->sim, deadline))
            break;
    }
    pthread_mutex_unlock(&f->sim->lock);
    return ok;
}

static void test_sim_dra_plugin_leaves_and_returns(void **state)
{
    struct fx *f = *state;
    json_t *j;

    /* the sim first: the plugin's socket appears later (inotify) */
    sim_start(f, false);
    server_start(f);
    assert_true(wait_registered(f, true, 1));
    kdra_server_free(f->srv); /* the registration socket goes: deregistered */
    f->srv = NULL;
    assert_true(wait_registered(f, false, 1));
    j = run(f, "dra-prepare gpu.nvidia.com default/c1:uid-1", -ENOENT);
    assert_non_null(strstr(jstr(j, "error", NULL), "not registered"));
    json_decref(j);
    server_start(f);
    assert_true(wait_registered(f, true, 2));
    j = run(f, "dra-drivers", 0);
    assert_int_equal(json_array_size(json_object_get(j, "plugins")), 1);
    json_decref(j);
}

/* A kubelet restart registers the DRA plugins again, as a new kubelet finds the sockets. */
static void test_sim_dra_kubelet_restart(void **state)
{
    struct fx *f = *state;
    struct kdra_registration reg;
    json_t *j;

    server_start(f);
    sim_start(f, false);
    assert_true(wait_registered(f, true, 1));
    j = run(f, "restart 10000", 0);
    json_decref(j);
    assert_true(wait_registered(f, true, 2));
    kdra_server_registration(f->srv, &reg);
    assert_int_equal(reg.n_get_info, 2);
    assert_int_equal(reg.n_notifications, 2);
    assert_true(reg.is_registered);
}

static void test_sim_dra_without_registry(void **state)
{
    struct fx *f = *state;
    struct sim_opts o = {.dir = f->dp, .rpc_timeout_ms = 1000};
    json_t *j;

    assert_int_equal(sim_new(&o, &f->sim, NULL), 0);
    j = run(f, "dra-wait gpu.nvidia.com 0", -ETIMEDOUT);
    assert_non_null(strstr(jstr(j, "error", NULL), "no --plugins-registry"));
    json_decref(j);
    j = run(f, "dra-drivers", 0);
    assert_int_equal(json_array_size(json_object_get(j, "plugins")), 0);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_cmd_parse_dra),
        cmocka_unit_test_setup_teardown(test_sim_dra_registers_and_prepares_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_dra_force_v1beta1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_dra_plugin_leaves_and_returns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_dra_kubelet_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_dra_without_registry, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

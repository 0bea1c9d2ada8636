/* SPDX-License-Identifier: Apache-2.0 */
/* test_client.c: src/kube/client.c and watch.c without an API server — HTTP error texts,
 * where the settings come from (options, KUBECONFIG, in-cluster, nothing), argument checks,
 * and a watch on a refused port: it reports unreachable and stops at once. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/internal.h"
#include "tests.h"

static void test_http_error_table(void **state)
{
    static const struct {
        long status;
        const char *body;
        int r;
        const char *want;
    } cases[] = {
        {403, "{\"kind\":\"Status\",\"message\":\"nodes \\\"n\\\" is forbidden\",\"code\":403}",
         -EACCES,
         "GET https://h/api/v1/nodes/n: HTTP 403: nodes \"n\" is forbidden; grant "
         "get/list/watch on nodes and create on events"},
        {401, "{\"kind\":\"Status\",\"message\":\"Unauthorized\"}", -EACCES,
         "HTTP 401: Unauthorized; the credentials were refused"},
        {404, "", -ENOENT, "HTTP 404: (no message); check the name"},
        {410, "{\"kind\":\"Status\",\"message\":\"too old\"}", -ESTALE, "HTTP 410: too old"},
        {503, "<html>busy</html>", -EAGAIN, "HTTP 503: (no message); the API server is"},
        {418, NULL, -EIO, "HTTP 418: (no message)"},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct error err = {0};
        const char *b = cases[i].body;
        int r = kube__http_error("GET", "https://h/api/v1/nodes/n", cases[i].status, b,
                                 b ? strlen(b) : 0, &err);
        assert_int_equal(r, cases[i].r);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg, cases[i].want);
    }
}

/* What a real API server answers, and the hint each must give (issue 19: the refused verb
 * and resource, not the device plugin's rights; a missing API group, not a wrong name). */
static void test_http_error_names_what_was_refused_or_missing(void **state)
{
    static const struct {
        long status;
        const char *url;
        const char *body;
        int r;
        const char *want;
    } cases[] = {
        {403, "https://h/api/v1/nodes/n",
         "{\"kind\":\"Status\",\"code\":403,\"message\":\"nodes \\\"n\\\" is forbidden: User "
         "\\\"system:serviceaccount:gpuslice:gpuslice\\\" cannot patch resource \\\"nodes\\\" "
         "in API group \\\"\\\" at the cluster scope\"}",
         -EACCES,
         "; the service account may not patch nodes: grant \"patch\" on \"nodes\" in its "
         "ClusterRole"},
        {403, "https://h/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpuslice/nodefeatures/x",
         "{\"kind\":\"Status\",\"code\":403,\"message\":\"nodefeatures.nfd.k8s-sigs.io "
         "\\\"x\\\" is forbidden: User \\\"u\\\" cannot get resource \\\"nodefeatures\\\" in "
         "API group \\\"nfd.k8s-sigs.io\\\" in the namespace \\\"gpuslice\\\"\"}",
         -EACCES,
         "may not get nodefeatures.nfd.k8s-sigs.io in namespace \"gpuslice\": grant "
         "\"get\" on \"nodefeatures.nfd.k8s-sigs.io\" there"},
        {403, "https://h/api/v1/nodes",
         "{\"kind\":\"Status\",\"code\":403,\"message\":\"nodes is forbidden: User \\\"u\\\" "
         "cannot watch resource \\\"nodes\\\" in API group \\\"\\\" at the cluster scope\"}",
         -EACCES, "grant get/list/watch on nodes"},
        {404, "https://h/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpuslice/nodefeatures/x",
         "404 page not found\n", -EOPNOTSUPP,
         "HTTP 404: 404 page not found; the API server does not serve "
         "nfd.k8s-sigs.io/v1alpha1: that API group is not installed"},
        {404, "https://h/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpuslice/nodefeatures/x",
         "{\"kind\":\"Status\",\"code\":404,\"message\":\"not found\",\"details\":{\"name\":"
         "\"x\",\"group\":\"nfd.k8s-sigs.io\",\"kind\":\"nodefeatures\"}}",
         -ENOENT, "HTTP 404: not found"},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct error err = {0};
        int r = kube__http_error("GET", cases[i].url, cases[i].status, cases[i].body,
                                 strlen(cases[i].body), &err);
        assert_int_equal(r, cases[i].r);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg, cases[i].want);
        if (i < 2 && strstr(err.msg, "create on events"))
            fail_msg("case %zu: \"%s\" names the device plugin's rights", i, err.msg);
    }
}

static void clear_env(void)
{
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("NODE_NAME");
    unsetenv("NAMESPACE");
    unsetenv("GS_KUBE_SERVICEACCOUNT_DIR");
}

static void test_client_new_without_any_configuration(void **state)
{
    struct kube_client *c = NULL;
    struct error err = {0};

    clear_env();
    assert_int_equal(kube_client_new(NULL, &c, &err), -ENOENT);
    assert_null(c);
    assert_non_null(strstr(err.msg, "--kubeconfig"));
}

static void test_client_new_server_override_only(void **state)
{
    struct kube_options o = {.api_server = "http://127.0.0.1:1/"};
    struct kube_client *c = NULL;

    clear_env();
    setenv("NODE_NAME", "gpu-7", 1);
    assert_int_equal(kube_client_new(&o, &c, NULL), 0);
    assert_string_equal(kube_client_server(c), "http://127.0.0.1:1/");
    assert_string_equal(kube_client_node_name(c), "gpu-7");
    assert_string_equal(c->event_namespace, "default");
    kube_client_free(c);

    o.api_server = "127.0.0.1:1";
    struct error err = {0};
    assert_int_equal(kube_client_new(&o, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "must start with https://"));
    clear_env();
}

static void test_client_new_kubeconfig_list_takes_first_existing(void **state)
{
    char path[] = "/tmp/gs-kube-kc-XXXXXX";
    char list[256];
    const char *kc = "current-context: x\ncontexts:\n- {name: x, context: {cluster: c, "
                     "namespace: ns1}}\nclusters:\n- {name: c, cluster: {server: 'https://h'}}\n";
    struct kube_options o = {.node_name = "n1"};
    struct kube_client *c = NULL;
    struct error err = {0};
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, kc, strlen(kc)), (ssize_t)strlen(kc));
    close(fd);
    clear_env();
    snprintf(list, sizeof(list), "/nonexistent/a:%s:/nonexistent/b", path);
    setenv("KUBECONFIG", list, 1);
    setenv("NODE_NAME", "ignored-when-given", 1);
    assert_int_equal(kube_client_new(&o, &c, &err), 0);
    assert_string_equal(kube_client_server(c), "https://h");
    assert_string_equal(kube_client_node_name(c), "n1");
    /* Events are about the Node (cluster-scoped): "default" whatever the context's or the
     * pod's namespace, or a real API server refuses them (issue 18) */
    assert_string_equal(c->event_namespace, "default");
    kube_client_free(c);

    setenv("NAMESPACE", "from-env", 1);
    assert_int_equal(kube_client_new(&o, &c, &err), 0);
    assert_string_equal(c->event_namespace, "default");
    kube_client_free(c);

    setenv("KUBECONFIG", "/nonexistent/only", 1);
    assert_int_equal(kube_client_new(&o, &c, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "kubeconfig"));
    unlink(path);
    clear_env();
}

static void test_calls_check_arguments_before_the_network(void **state)
{
    struct kube_options o = {.api_server = "http://127.0.0.1:1"};
    struct kube_node_watch *w = NULL;
    struct kube_client *c = NULL;
    struct error err = {0};
    char *v = NULL;

    clear_env();
    assert_int_equal(kube_client_new(&o, &c, NULL), 0);
    assert_null(kube_client_node_name(c));
    assert_int_equal(kube_node_get_label(c, NULL, "k", &v, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "NODE_NAME"));
    assert_int_equal(kube_node_get_label(c, "n", "", &v, &err), -EINVAL);
    assert_null(v);
    assert_int_equal(kube_event_post(c, "n", "Error", "R", "m", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "Normal or Warning"));
    assert_int_equal(kube_event_post(c, "n", "Normal", "", "m", &err), -EINVAL);
    assert_int_equal(kube_node_watch_start(c, NULL, "k", NULL, &w, &err), -EINVAL);
    assert_int_equal(kube_node_watch_start(c, "n", "", NULL, &w, &err), -EINVAL);
    assert_null(w);
    kube_node_watch_stop(NULL);
    kube_client_free(c);
    kube_client_free(NULL);
}

struct status_seen {
    int n_unreachable;
    char msg[ERROR_MSG_MAX];
};

static void on_status(bool reachable, const struct error *e, void *userdata)
{
    struct status_seen *s = userdata;
    if (!reachable) {
        s->n_unreachable++;
        str_copy(s->msg, e->msg, sizeof(s->msg));
    }
}

static void test_watch_refused_port_reports_and_stops_at_once(void **state)
{
    struct kube_options o = {.api_server = "http://127.0.0.1:1", .node_name = "n"};
    struct status_seen seen = {0};
    struct kube_watch_callbacks cb = {.on_status = on_status, .userdata = &seen};
    struct kube_watch_stats st;
    struct kube_node_watch *w = NULL;
    struct kube_client *c = NULL;
    struct error last = {0};
    struct pollfd p;
    char *v = NULL;
    bool known = true;
    uint64_t t0;

    clear_env();
    assert_int_equal(kube_client_new(&o, &c, NULL), 0);
    assert_int_equal(kube_node_watch_start(c, NULL, "k", &cb, &w, NULL), 0);
    p = (struct pollfd){.fd = kube_node_watch_fd(w), .events = POLLIN};
    assert_int_equal(poll(&p, 1, 5000), 1); /* the unreachable status change */
    kube_node_watch_stats(w, &st, &last);
    assert_false(st.reachable);
    assert_true(st.n_failures >= 1);
    assert_non_null(strstr(last.msg, "http://127.0.0.1:1/api/v1/nodes?fieldSelector="));
    assert_int_equal(kube_node_watch_value(w, &v, &known, NULL), 0);
    assert_false(known);
    assert_null(v);
    t0 = time_now_ms();
    kube_node_watch_stop(w); /* in the middle of a backoff */
    assert_true(time_now_ms() - t0 < 300);
    assert_int_equal(seen.n_unreachable, 1);
    assert_non_null(strstr(seen.msg, "reachable from this node"));
    kube_client_free(c);
}

int run_client_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_error_table),
        cmocka_unit_test(test_http_error_names_what_was_refused_or_missing),
        cmocka_unit_test(test_client_new_without_any_configuration),
        cmocka_unit_test(test_client_new_server_override_only),
        cmocka_unit_test(test_client_new_kubeconfig_list_takes_first_existing),
        cmocka_unit_test(test_calls_check_arguments_before_the_network),
        cmocka_unit_test(test_watch_refused_port_reports_and_stops_at_once),
    };
    return cmocka_run_group_tests_name("kube_client", tests, NULL, NULL);
}

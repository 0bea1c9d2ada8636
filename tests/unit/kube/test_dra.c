/* SPDX-License-Identifier: Apache-2.0 */
/* test_dra.c: src/kube/dra.c without an API server — resource.k8s.io URLs, the slice body
 * (apiVersion, resourceVersion, the v1beta1 "basic" wrapping), ResourceSliceList answers,
 * the errors' hints (DRA off, RBAC, 409 → re-list) and argument checks. The requests
 * themselves are tested against fake_apiserver.py (tests/integration/test_kube_dra.py). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kube/internal.h"
#include "tests.h"

static void test_url_dra_paths_and_escapes(void **state)
{
    static const struct {
        const char *v, *ns, *res, *name, *want;
    } cases[] = {
        {"v1", NULL, NULL, NULL, "https://h/apis/resource.k8s.io/v1"},
        {"v1beta2", NULL, "resourceslices", NULL,
         "https://h/apis/resource.k8s.io/v1beta2/resourceslices"},
        {"v1", NULL, "resourceslices", "n-gpu.nvidia.com-x",
         "https://h/apis/resource.k8s.io/v1/resourceslices/n-gpu.nvidia.com-x"},
        {"v1beta1", "team a", "resourceclaims", "c/1",
         "https://h/apis/resource.k8s.io/v1beta1/namespaces/team%20a/resourceclaims/c%2F1"},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        char *url = NULL;
        assert_int_equal(kube__url_dra("https://h//", cases[i].v, cases[i].ns, cases[i].res,
                                       cases[i].name, &url),
                         0);
        assert_string_equal(url, cases[i].want);
        free(url);
    }
}

static void test_url_slices_field_selector(void **state)
{
    char *url = NULL;

    assert_int_equal(
        kube__url_slices("http://h:1", "v1", "gpu.nvidia.com", "node 1", false, NULL, &url), 0);
    assert_string_equal(url, "http://h:1/apis/resource.k8s.io/v1/resourceslices?fieldSelector="
                             "spec.driver%3Dgpu.nvidia.com%2Cspec.nodeName%3Dnode%201");
    free(url);
    assert_int_equal(kube__url_slices("http://h:1", "v1beta1", "d", "n", true, "12", &url), 0);
    assert_string_equal(url, "http://h:1/apis/resource.k8s.io/v1beta1/resourceslices?"
                             "fieldSelector=spec.driver%3Dd%2Cspec.nodeName%3Dn&watch=true&"
                             "allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=12");
    free(url);
}

static json_t *body_for(const char *in, const char *version, const char *rv)
{
    struct error err = {0};
    char *out = NULL;
    json_t *j;

    assert_int_equal(kube__slice_body(in, version, rv, &out, &err), 0);
    j = json_loads(out, 0, NULL);
    free(out);
    assert_non_null(j);
    return j;
}

#define SLICE                                                                                      \
    "{\"metadata\":{\"generateName\":\"n-gpu.nvidia.com-\"},\"spec\":{\"driver\":"                 \
    "\"gpu.nvidia.com\",\"nodeName\":\"n\",\"pool\":{\"name\":\"n\",\"generation\":1,"             \
    "\"resourceSliceCount\":1},\"devices\":[{\"name\":\"gpu-0\",\"attributes\":{\"type\":"         \
    "{\"string\":\"gpu\"}},\"capacity\":{\"memory\":{\"value\":\"80Gi\"}}}]}}"

static void test_slice_body_v1_sets_version_and_rv(void **state)
{
    json_t *j = body_for(SLICE, "v1", "42"), *dev;

    assert_string_equal(json_string_value(json_object_get(j, "apiVersion")), "resource.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "ResourceSlice");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "metadata"), "resourceVersion")),
        "42");
    dev = json_array_get(json_object_get(json_object_get(j, "spec"), "devices"), 0);
    assert_non_null(json_object_get(dev, "attributes"));
    assert_null(json_object_get(dev, "basic"));
    json_decref(j);

    j = body_for(SLICE, "v1beta2", NULL);
    assert_string_equal(json_string_value(json_object_get(j, "apiVersion")),
                        "resource.k8s.io/v1beta2");
    assert_null(json_object_get(json_object_get(j, "metadata"), "resourceVersion"));
    dev = json_array_get(json_object_get(json_object_get(j, "spec"), "devices"), 0);
    assert_null(json_object_get(dev, "basic"));
    json_decref(j);
}

static void test_slice_body_v1beta1_wraps_basic(void **state)
{
    json_t *j = body_for(SLICE, "v1beta1", NULL), *dev, *basic;

    assert_string_equal(json_string_value(json_object_get(j, "apiVersion")),
                        "resource.k8s.io/v1beta1");
    dev = json_array_get(json_object_get(json_object_get(j, "spec"), "devices"), 0);
    assert_string_equal(json_string_value(json_object_get(dev, "name")), "gpu-0");
    assert_int_equal(json_object_size(dev), 2); /* name + basic */
    basic = json_object_get(dev, "basic");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(basic, "attributes"), "type"), "string")),
        "gpu");
    assert_non_null(json_object_get(json_object_get(basic, "capacity"), "memory"));
    json_decref(j);
}

static void test_slice_body_refuses_bad_input(void **state)
{
    static const char *const bad[] = {
        "", "[]", "{", "{\"spec\":{\"devices\":{}}}", "{\"metadata\":[]}", NULL,
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(bad); i++) {
        struct error err = {0};
        char *out = NULL;
        assert_int_equal(kube__slice_body(bad[i], "v1", NULL, &out, &err), -EINVAL);
        assert_null(out);
        assert_true(err.msg[0] != '\0');
    }
}

static void test_slice_list_parse(void **state)
{
    static const struct {
        const char *body;
        int r;
        size_t n;
        const char *rv;
    } cases[] = {
        {"{\"kind\":\"ResourceSliceList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":"
         "[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}",
         0, 2, "7"},
        {"{\"metadata\":{\"resourceVersion\":\"8\"},\"items\":null}", 0, 0, "8"},
        {"{\"metadata\":{\"resourceVersion\":\"8\"},\"items\":[]}", 0, 0, "8"},
        {"{\"items\":[]}", -EINVAL, 0, NULL},
        {"{\"metadata\":{\"resourceVersion\":\"8\"}}", -EINVAL, 0, NULL},
        {"not json", -EINVAL, 0, NULL},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct kube_slice_list l = {0};
        struct error err = {0};
        int r = kube__slice_list_parse(cases[i].body, strlen(cases[i].body), &l, &err);
        assert_int_equal(r, cases[i].r);
        if (r < 0) {
            assert_null(l.items_json);
            assert_true(err.msg[0] != '\0');
            continue;
        }
        assert_int_equal(l.n_items, cases[i].n);
        assert_string_equal(l.resource_version, cases[i].rv);
        json_t *items = json_loads(l.items_json, 0, NULL);
        assert_true(json_is_array(items));
        assert_int_equal(json_array_size(items), cases[i].n);
        json_decref(items);
        kube_slice_list_release(&l);
    }
    kube_slice_list_release(NULL);
}

static void test_errors_name_dra_fixes(void **state)
{
    static const struct {
        long status;
        const char *url, *body;
        int r;
        const char *want;
    } cases[] = {
        {404, "https://h/apis/resource.k8s.io/v1/resourceslices", "404 page not found\n",
         -EOPNOTSUPP, "does not serve resource.k8s.io/v1: Dynamic Resource Allocation is off"},
        {404, "https://h/apis/resource.k8s.io/v1/namespaces/a/resourceclaims/c",
         "{\"kind\":\"Status\",\"code\":404,\"message\":\"resourceclaims.resource.k8s.io "
         "\\\"c\\\" not found\",\"details\":{\"name\":\"c\"}}",
         -ENOENT, "HTTP 404: resourceclaims.resource.k8s.io \"c\" not found"},
        {409, "https://h/apis/resource.k8s.io/v1/resourceslices/s",
         "{\"kind\":\"Status\",\"code\":409,\"message\":\"Operation cannot be fulfilled\"}",
         -EEXIST, "list the slices again and retry with the new resourceVersion"},
        {403, "https://h/apis/resource.k8s.io/v1/resourceslices",
         "{\"kind\":\"Status\",\"code\":403,\"message\":\"resourceslices.resource.k8s.io is "
         "forbidden: User \\\"u\\\" cannot create resource \\\"resourceslices\\\" in API group "
         "\\\"resource.k8s.io\\\" at the cluster scope\"}",
         -EACCES,
         "may not create resourceslices.resource.k8s.io: grant \"create\" on "
         "\"resourceslices.resource.k8s.io\" in its ClusterRole (deployments/kustomize/"
         "components/dra, docs/dra.md)"},
        {403, "https://h/api/v1/namespaces/team/events",
         "{\"kind\":\"Status\",\"code\":403,\"message\":\"events is forbidden: User \\\"u\\\" "
         "cannot create resource \\\"events\\\" in API group \\\"\\\" in the namespace "
         "\\\"team\\\"\"}",
         -EACCES, "may not create events in namespace \"team\""},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct error err = {0};
        const char *b = cases[i].body;
        int r = kube__http_error("GET", cases[i].url, cases[i].status, b, strlen(b), &err);
        assert_int_equal(r, cases[i].r);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg, cases[i].want);
    }
}

static void test_dra_off_error_says_how_to_enable(void **state)
{
    struct error err = {0};

    assert_int_equal(kube__dra_off_error("https://h", &err), -EOPNOTSUPP);
    assert_non_null(strstr(err.msg, "does not serve resource.k8s.io (tried v1, v1beta2, v1beta1)"));
    assert_non_null(strstr(err.msg, "Dynamic Resource Allocation is not enabled"));
    assert_non_null(strstr(err.msg, "DynamicResourceAllocation=true"));
    assert_non_null(strstr(err.msg, "1.32"));
}

static void test_calls_check_arguments_without_a_request(void **state)
{
    struct kube_options o = {.api_server = "http://127.0.0.1:1", .node_name = NULL};
    struct kube_client *c = NULL;
    struct kube_slice_list l = {0};
    struct error err = {0};
    char *out = NULL;

    unsetenv("NODE_NAME");
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(kube_client_new(&o, &c, &err), 0);
    assert_int_equal(kube_slices_list(c, "gpu.nvidia.com", NULL, &l, &err), -EINVAL);
    assert_int_equal(kube_slices_list(c, NULL, "n", &l, &err), -EINVAL);
    assert_int_equal(kube_slice_update(c, "s", "{}", NULL, &out, &err), -EINVAL);
    assert_int_equal(kube_slice_update(c, NULL, "{}", "1", &out, &err), -EINVAL);
    assert_int_equal(kube_slice_delete(c, "", NULL, &err), -EINVAL);
    assert_int_equal(kube_claim_get(c, "ns", NULL, &out, &err), -EINVAL);
    {
        struct kube_slice_watch *w = NULL;
        assert_int_equal(kube_slices_watch_start(c, "gpu.nvidia.com", NULL, NULL, &w, &err),
                         -EINVAL);
        assert_int_equal(kube_slices_watch_start(c, "", "n", NULL, &w, &err), -EINVAL);
        assert_null(w);
        kube_slice_watch_stop(NULL);
    }
    assert_null(out);
    {
        struct kube_event ev = {.about = {.kind = "Pod", .name = "p"}, .type = "Info"};
        assert_int_equal(kube_event_post_about(c, &ev, &err), -EINVAL);
        ev.type = "Warning";
        assert_int_equal(kube_event_post_about(c, &ev, &err), -EINVAL); /* no reason */
        ev.reason = "R";
        ev.about.name = NULL;
        assert_int_equal(kube_event_post_about(c, &ev, &err), -EINVAL);
    }
    kube_client_free(c);
}

/* Nothing listens on port 1: the version is not learned (the next call tries again). */
static void test_dra_version_unreachable_not_remembered(void **state)
{
    struct kube_options o = {.api_server = "http://127.0.0.1:1", .request_timeout_ms = 2000};
    struct kube_client *c = NULL;
    struct error err = {0};
    const char *v = NULL;

    assert_int_equal(kube_client_new(&o, &c, &err), 0);
    assert_int_equal(kube_dra_version(c, &v, &err), -ECONNREFUSED);
    assert_null(v);
    assert_null(c->dra_version);
    assert_non_null(strstr(err.msg, "/apis/resource.k8s.io/v1"));
    {
        /* a slice watch learns the version first: the failure comes back at once */
        struct kube_slice_watch *w = NULL;
        assert_int_equal(kube_slices_watch_start(c, "gpu.nvidia.com", "n", NULL, &w, &err),
                         -ECONNREFUSED);
        assert_null(w);
    }
    kube_client_free(c);
}

int run_dra_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_dra_paths_and_escapes),
        cmocka_unit_test(test_url_slices_field_selector),
        cmocka_unit_test(test_slice_body_v1_sets_version_and_rv),
        cmocka_unit_test(test_slice_body_v1beta1_wraps_basic),
        cmocka_unit_test(test_slice_body_refuses_bad_input),
        cmocka_unit_test(test_slice_list_parse),
        cmocka_unit_test(test_errors_name_dra_fixes),
        cmocka_unit_test(test_dra_off_error_says_how_to_enable),
        cmocka_unit_test(test_calls_check_arguments_without_a_request),
        cmocka_unit_test(test_dra_version_unreachable_not_remembered),
    };
    return cmocka_run_group_tests_name("kube_dra", tests, NULL, NULL);
}

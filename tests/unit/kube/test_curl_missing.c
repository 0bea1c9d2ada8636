/* SPDX-License-Identifier: Apache-2.0 */
/* test_curl_missing.c: a process whose libcurl cannot be loaded (ctest sets GPUSLICE_LIBCURL
 * to a path that does not exist): kube_client_new fails with the loader's message, every
 * time, and settings errors still come first because libcurl is loaded last. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube/internal.h"
#include "tests.h"

static void test_client_new_without_libcurl_says_what_to_install(void **state)
{
    struct kube_options o = {.api_server = "http://127.0.0.1:1", .node_name = "n"};
    const char *lib = getenv("GPUSLICE_LIBCURL");
    const struct kube_curl *k = NULL;
    struct kube_client *c = NULL;
    struct error err = {0};

    assert_non_null(lib);
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    for (int i = 0; i < 2; i++) { /* the failed load is remembered, not retried */
        error_clear(&err);
        assert_int_equal(kube_client_new(&o, &c, &err), -ELIBACC);
        assert_null(c);
        assert_non_null(strstr(err.msg, "cannot load "));
        assert_non_null(strstr(err.msg, lib));
        assert_non_null(strstr(err.msg, "libcurl4 at run time"));
    }
    assert_int_equal(kube_client_new(&o, &c, NULL), -ELIBACC);
    assert_int_equal(kube__curl_load(&k, NULL), -ELIBACC);
    assert_null(k);
}

static void test_client_new_reports_missing_settings_before_libcurl(void **state)
{
    struct kube_client *c = NULL;
    struct error err = {0};

    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    setenv("GS_KUBE_SERVICEACCOUNT_DIR", "/nonexistent", 1);
    assert_int_equal(kube_client_new(NULL, &c, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "no Kubernetes API configured"));
    unsetenv("GS_KUBE_SERVICEACCOUNT_DIR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_new_without_libcurl_says_what_to_install),
        cmocka_unit_test(test_client_new_reports_missing_settings_before_libcurl),
    };
    return cmocka_run_group_tests_name("kube_curl_missing", tests, NULL, NULL);
}

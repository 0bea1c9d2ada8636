/* SPDX-License-Identifier: Apache-2.0 */
/* test_curl.c: the run-time libcurl loader (src/kube/curl.c): a missing library or one
 * without libcurl's functions gives a message that says what to install, never a crash; the
 * real libcurl.so.4 loads once and fills the whole table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube/curl.h"
#include "kube/internal.h"
#include "tests.h"

static void test_curl_open_missing_library(void **state)
{
    struct kube_curl t = {0};
    struct error err = {0};

    assert_int_equal(kube__curl_open("/nonexistent/libcurl.so.4", &t, &err), -ELIBACC);
    assert_int_equal(err.code, -ELIBACC);
    assert_non_null(strstr(err.msg, "cannot load /nonexistent/libcurl.so.4: "));
    assert_non_null(strstr(err.msg, "install libcurl4"));
    assert_non_null(strstr(err.msg, "without --kubeconfig"));
    assert_null(t.easy_init);
    assert_int_equal(kube__curl_open("/nonexistent/libcurl.so.4", &t, NULL), -ELIBACC);
}

static void test_curl_open_library_without_curl(void **state)
{
    struct kube_curl t = {0};
    struct error err = {0};

    /* Already mapped, so opening and closing it again has no side effect. */
    assert_int_equal(kube__curl_open("libc.so.6", &t, &err), -ELIBBAD);
    assert_non_null(strstr(err.msg, "cannot load libc.so.6: it has no curl_global_init"));
    assert_non_null(strstr(err.msg, "install libcurl4"));
    assert_null(t.global_init);
}

static void test_curl_load_fills_every_function_once(void **state)
{
    const struct kube_curl *k = NULL, *again = NULL;
    struct error err = {0};
    void *const *fn;

    if (getenv("GPUSLICE_LIBCURL"))
        skip();
    assert_int_equal(kube__curl_load(&k, &err), 0);
    assert_non_null(k);
    fn = (void *const *)k; /* the table is function pointers only */
    for (size_t i = 0; i < sizeof(*k) / sizeof(void *); i++)
        assert_non_null(fn[i]);
    assert_string_equal(k->easy_strerror(CURLE_OK), "No error");
    assert_int_equal(kube__curl_load(&again, NULL), 0);
    assert_ptr_equal(again, k);
}

int run_curl_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_curl_open_missing_library),
        cmocka_unit_test(test_curl_open_library_without_curl),
        cmocka_unit_test(test_curl_load_fills_every_function_once),
    };
    return cmocka_run_group_tests_name("kube_curl", tests, NULL, NULL);
}

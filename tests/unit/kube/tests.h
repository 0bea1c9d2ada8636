/* SPDX-License-Identifier: Apache-2.0 */
/* tests.h: the test lists of tests/unit/kube's files, run together by main.c. */
#ifndef GS_TEST_KUBE_TESTS_H
#define GS_TEST_KUBE_TESTS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

int run_objects_tests(void);
int run_kubeconfig_tests(void);
int run_client_tests(void);
int run_curl_tests(void);
int run_dra_tests(void);
int run_event_tests(void);

#endif

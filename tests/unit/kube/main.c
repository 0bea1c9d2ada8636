/* SPDX-License-Identifier: Apache-2.0 */
/* main.c: runs the src/kube unit test groups (one cmocka group per source file). */
#include "tests.h"

int main(void)
{
    int failed = 0;

    failed += run_objects_tests();
    failed += run_kubeconfig_tests();
    failed += run_client_tests();
    failed += run_curl_tests();
    failed += run_dra_tests();
    failed += run_event_tests();
    return failed ? 1 : 0;
}

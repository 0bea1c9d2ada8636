/* SPDX-License-Identifier: Apache-2.0 */
/* placeholder */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "dra/dra.h"
static void test_nothing(void **s)
{
    (void)s;
}
int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_nothing)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

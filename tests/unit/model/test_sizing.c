/* SPDX-License-Identifier: Apache-2.0 */
/* test_sizing.c: model_size_replicas(): the seed's own sizing (L20 46068 MiB / 4621 MiB ->
 * 8, T4 15360 / 4401 -> 3, 000_fca19c8bebe64b50.txt), headroom, and bad input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model/model.h"

static void test_model_size_replicas_seed(void **state)
{
    struct model_sizing s;

    (void)state;
    assert_int_equal(model_size_replicas(46068, 4621, 10, &s), 0);
    assert_int_equal(s.usable_mib, 41461);
    assert_int_equal(s.ratio_x100, 897);
    assert_int_equal(s.replicas, 8);
    assert_int_equal(model_size_replicas(15360, 4401, 10, &s), 0);
    assert_int_equal(s.replicas, 3);
    /* no headroom: the seed's hand arithmetic (46068 / 4621 = 9.97) */
    assert_int_equal(model_size_replicas(46068, 4621, 0, &s), 0);
    assert_int_equal(s.replicas, 9);
    /* a process larger than the usable share still gets the GPU alone */
    assert_int_equal(model_size_replicas(15360, 20000, 10, &s), 0);
    assert_int_equal(s.replicas, 1);
}

static void test_model_size_replicas_bad_input(void **state)
{
    struct model_sizing s;

    (void)state;
    assert_int_equal(model_size_replicas(0, 4621, 10, &s), -EINVAL);
    assert_int_equal(model_size_replicas(46068, 0, 10, &s), -EINVAL);
    assert_int_equal(model_size_replicas(46068, 4621, 100, &s), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_size_replicas_seed),
        cmocka_unit_test(test_model_size_replicas_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_health.c: the XID policy of src/daemon/health.c — NVIDIA's default ignored XIDs and
 * DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS (facts §6), table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "daemon/daemon.h"

struct xid_case {
    const char *disable, *enable;
    unsigned long long xid;
    bool critical;
    size_t n_warnings;
};

static const struct xid_case cases[] = {
    /* defaults: 13 31 43 45 68 109 ignored, everything else critical */
    {NULL, NULL, 13, false, 0},
    {NULL, NULL, 31, false, 0},
    {NULL, NULL, 43, false, 0},
    {NULL, NULL, 45, false, 0},
    {NULL, NULL, 68, false, 0},
    {NULL, NULL, 109, false, 0},
    {NULL, NULL, 48, true, 0},
    {NULL, NULL, 79, true, 0},
    {NULL, NULL, 94, true, 0},
    {"", "", 79, true, 0},
    /* disabling */
    {"all", NULL, 79, false, 0},
    {"ALL", NULL, 48, false, 0},
    {"xids", NULL, 79, false, 0},
    {"48,xids", NULL, 79, false, 0},
    {"all", "79", 79, false, 0}, /* NVIDIA: "all" wins over the enable list */
    /* extra ignored XIDs */
    {"79", NULL, 79, false, 0},
    {" 79 , 48 ", NULL, 48, false, 0},
    {"79", NULL, 48, true, 0},
    {"79,abc,,-3", NULL, 48, true, 2},
    {"99999999999999999999999", NULL, 48, true, 1},
    /* enabling */
    {NULL, "13", 13, true, 0},
    {NULL, "13", 31, false, 0},
    {"79", "79", 79, true, 0},
    {NULL, "all", 109, true, 0},
    {NULL, "All", 13, true, 0},
    {NULL, "x", 13, false, 1},
};

static void test_daemon_xid_is_critical_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct xid_case *c = &cases[i];
        struct daemon_xid_policy p;
        char **warnings = NULL;

        assert_int_equal(daemon_xid_policy_init(&p, c->disable, c->enable, &warnings, NULL), 0);
        if (daemon_xid_is_critical(&p, c->xid) != c->critical)
            fail_msg("case %zu: disable=%s enable=%s xid=%llu: expected %s", i,
                     c->disable ? c->disable : "(unset)", c->enable ? c->enable : "(unset)", c->xid,
                     c->critical ? "critical" : "ignored");
        if (strv_length(warnings) != c->n_warnings)
            fail_msg("case %zu: %zu warnings, expected %zu", i, strv_length(warnings),
                     c->n_warnings);
        strv_free(warnings);
    }
}

static void test_daemon_xid_policy_init_bounded(void **state)
{
    struct strbuf sb = STRBUF_INIT;
    struct daemon_xid_policy p;
    char **warnings = NULL;

    (void)state;
    for (unsigned i = 0; i < 1000; i++)
        assert_int_equal(strbuf_printf(&sb, "%s%u", i ? "," : "", 1000 + i), 0);
    assert_int_equal(daemon_xid_policy_init(&p, strbuf_str(&sb), NULL, &warnings, NULL), 0);
    assert_int_equal(p.n_ignored, DAEMON_XID_LIST_MAX);
    assert_true(strv_length(warnings) > 0);
    assert_false(daemon_xid_is_critical(&p, 1000));
    assert_true(daemon_xid_is_critical(&p, 1999)); /* past the cap: not ignored */
    strv_free(warnings);
    strbuf_release(&sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_daemon_xid_is_critical_table),
        cmocka_unit_test(test_daemon_xid_policy_init_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

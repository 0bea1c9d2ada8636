/* SPDX-License-Identifier: Apache-2.0 */
/* test_rpc_h2: the pure gRPC-over-HTTP/2 pieces under the rpc layer (src/rpc/rpc_h2.c):
 * message framing, grpc-message escapes, grpc-timeout values, HTTP status mapping and
 * grpc-status parsing, each with bad input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rpc/internal.h"

static void test_rpc_frame_header_big_endian(void **state)
{
    uint8_t hdr[RPC__FRAME_HDR];

    (void)state;
    rpc__frame_header(hdr, 0x30);
    assert_memory_equal(hdr, "\x00\x00\x00\x00\x30", 5); /* facts §1.5: Register's frame */
    rpc__frame_header(hdr, 0x01020304);
    assert_memory_equal(hdr, "\x00\x01\x02\x03\x04", 5);
}

static void test_rpc_frame_next_cases(void **state)
{
    static const struct {
        const char *buf;
        size_t len;
        int ret;
        size_t want;
    } cases[] = {
        {"", 0, 0, 0},                     /* nothing yet */
        {"\x00\x00\x00", 3, 0, 0},         /* prefix incomplete */
        {"\x00\x00\x00\x00\x00", 5, 1, 0}, /* an empty message is whole */
        {"\x00\x00\x00\x00\x03"
         "ab",
         7, 0, 3}, /* announced 3, 2 in */
        {"\x00\x00\x00\x00\x03"
         "abc",
         8, 1, 3}, /* whole */
        {"\x00\x00\x00\x00\x02"
         "abXYZ",
         10, 1, 2}, /* the next message's bytes follow */
        {"\x01\x00\x00\x00\x01"
         "a",
         6, -EPROTO, 0},                             /* compressed: never offered */
        {"\x00\xff\xff\xff\xff", 5, 0, 0xffffffffu}, /* huge: the caller checks its limit */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t want = 99;

        assert_int_equal(rpc__frame_next((const uint8_t *)cases[i].buf, cases[i].len, &want),
                         cases[i].ret);
        assert_int_equal(want, cases[i].want);
    }
}

static void test_rpc_percent_round_trip(void **state)
{
    static const struct {
        const char *in;
        const char *enc;
    } cases[] = {
        {"plain text, quotes \"x\"", "plain text, quotes \"x\""},
        {"50% done", "50%25 done"},
        {"line\nbreak\t", "line%0Abreak%09"},
        {"caf\xc3\xa9", "caf%C3%A9"},
        {"", ""},
    };
    char enc[64], dec[64];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rpc__percent_encode(cases[i].in, enc, sizeof(enc));
        assert_string_equal(enc, cases[i].enc);
        rpc__percent_decode((const uint8_t *)enc, strlen(enc), dec, sizeof(dec));
        assert_string_equal(dec, cases[i].in);
    }
}

static void test_rpc_percent_bad_input(void **state)
{
    char out[8];

    (void)state;
    /* malformed escapes stay as they are */
    rpc__percent_decode((const uint8_t *)"%zz%4", 5, out, sizeof(out));
    assert_string_equal(out, "%zz%4");
    /* truncation keeps whole escapes only and always terminates */
    rpc__percent_encode("ab\n\n\n", out, 6);
    assert_string_equal(out, "ab%0A");
    rpc__percent_decode((const uint8_t *)"abcdefghij", 10, out, sizeof(out));
    assert_string_equal(out, "abcdefg");
    rpc__percent_encode(NULL, out, sizeof(out));
    assert_string_equal(out, "");
}

static void test_rpc_timeout_value_units(void **state)
{
    char out[16];

    (void)state;
    rpc__timeout_value(250, out, sizeof(out));
    assert_string_equal(out, "250m");
    rpc__timeout_value(99999999, out, sizeof(out));
    assert_string_equal(out, "99999999m");
    rpc__timeout_value(100000000, out, sizeof(out)); /* 9 digits: seconds instead */
    assert_string_equal(out, "100000S");
    rpc__timeout_value(0, out, sizeof(out));
    assert_string_equal(out, "1m");
}

static void test_rpc_code_from_http_table(void **state)
{
    static const int cases[][2] = {
        {400, RPC_INTERNAL},      {401, RPC_UNAUTHENTICATED}, {403, RPC_PERMISSION_DENIED},
        {404, RPC_UNIMPLEMENTED}, {429, RPC_UNAVAILABLE},     {502, RPC_UNAVAILABLE},
        {503, RPC_UNAVAILABLE},   {504, RPC_UNAVAILABLE},     {500, RPC_UNKNOWN},
        {301, RPC_UNKNOWN},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(rpc__code_from_http(cases[i][0]), cases[i][1]);
}

static void test_rpc_parse_status_cases(void **state)
{
    (void)state;
    assert_int_equal(rpc__parse_status((const uint8_t *)"0", 1), 0);
    assert_int_equal(rpc__parse_status((const uint8_t *)"14", 2), 14);
    assert_int_equal(rpc__parse_status((const uint8_t *)"", 0), -1);
    assert_int_equal(rpc__parse_status((const uint8_t *)"1x", 2), -1);
    assert_int_equal(rpc__parse_status((const uint8_t *)"-1", 2), -1);
    assert_int_equal(rpc__parse_status((const uint8_t *)"100", 3), -1);
}

/* grpc-timeout as a server reads it: every unit, rounded up, malformed values refused. */
static void test_rpc_parse_timeout_units(void **state)
{
    static const struct {
        const char *v;
        int ret;
        uint64_t ms;
    } cases[] = {
        {"1H", 0, 3600000},  {"2M", 0, 120000},
        {"5S", 0, 5000},     {"250m", 0, 250},
        {"1500u", 0, 2},     {"1n", 0, 1},
        {"0m", 0, 0},        {"99999999S", 0, 99999999000},
        {"", -EINVAL, 0},    {"m", -EINVAL, 0},
        {"10", -EINVAL, 0},  {"1x", -EINVAL, 0},
        {"-1m", -EINVAL, 0}, {"123456789m", -EINVAL, 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t ms = 0;
        int r = rpc__parse_timeout((const uint8_t *)cases[i].v, strlen(cases[i].v), &ms);

        assert_int_equal(r, cases[i].ret);
        if (r == 0)
            assert_int_equal(ms, cases[i].ms);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_frame_header_big_endian),
        cmocka_unit_test(test_rpc_frame_next_cases),
        cmocka_unit_test(test_rpc_percent_round_trip),
        cmocka_unit_test(test_rpc_percent_bad_input),
        cmocka_unit_test(test_rpc_timeout_value_units),
        cmocka_unit_test(test_rpc_parse_timeout_units),
        cmocka_unit_test(test_rpc_code_from_http_table),
        cmocka_unit_test(test_rpc_parse_status_cases),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

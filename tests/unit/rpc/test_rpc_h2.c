/* SPDX-License-Identifier: Apache-2.0 */
/* test_rpc_h2: the pure gRPC-over-HTTP/2 pieces under the rpc layer (src/rpc/rpc_h2.c):
 * message framing, grpc-message escapes, grpc-timeout values (sent and parsed), HTTP status
 * mapping and grpc-status parsing, each with bad input; and the frame reader in front of
 * nghttp2, fed a recorded conversation split at every byte boundary. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>

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

/* ---- the frame reader in front of nghttp2 (rpc__conn_feed) ---- */

struct frames {
    unsigned by_type[16];
};

static int count_frame(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
    struct frames *f = user;

    (void)h2;
    if (frame->hd.type < 16)
        f->by_type[frame->hd.type]++;
    return 0;
}

/* A recorded client conversation: preface and SETTINGS, a call on stream 1 (HEADERS, DATA
 * with END_STREAM), a PING, a reset of stream 7 that was never opened (what gRPC's C core
 * sends after a quick cancel), then a call on stream 3. Owned: free(). */
static uint8_t *conversation(size_t *ret_len)
{
    static const uint8_t rst7[] = {0, 0, 4, NGHTTP2_RST_STREAM, 0, 0, 0, 0, 7, 0, 0, 0, 8};
    static const uint8_t body[] = {0, 0, 0, 0, 2, 'h', 'i'};
    nghttp2_nv nv[] = {RPC__NV(":method", "POST"), RPC__NV(":scheme", "http"),
                       RPC__NV(":path", "/a.B/C"), RPC__NV(":authority", "localhost"),
                       RPC__NV("content-type", "application/grpc")};
    nghttp2_session_callbacks *cbs = NULL;
    nghttp2_session *h2 = NULL;
    uint8_t *out = NULL;
    size_t len = 0;

    nghttp2_session_callbacks_new(&cbs);
    assert_int_equal(nghttp2_session_client_new(&h2, cbs, NULL), 0);
    nghttp2_submit_settings(h2, NGHTTP2_FLAG_NONE, NULL, 0);
    for (int round = 0; round < 2; round++) {
        const uint8_t *data;
        ssize_t n;

        /* stream 1 then stream 3; DATA frames carry the message with END_STREAM */
        assert_true(nghttp2_submit_headers(h2, NGHTTP2_FLAG_NONE, -1, NULL, nv, GS_ARRAY_SIZE(nv),
                                           NULL) > 0);
        if (round == 0)
            nghttp2_submit_ping(h2, NGHTTP2_FLAG_NONE, NULL);
        while ((n = nghttp2_session_mem_send(h2, &data)) > 0) {
            out = realloc(out, len + (size_t)n + sizeof(rst7) + sizeof(body) + 9);
            memcpy(out + len, data, (size_t)n);
            len += (size_t)n;
        }
        /* a DATA frame with END_STREAM for the stream just opened */
        {
            uint8_t hd[9] = {0,
                             0,
                             sizeof(body),
                             NGHTTP2_DATA,
                             NGHTTP2_FLAG_END_STREAM,
                             0,
                             0,
                             0,
                             (uint8_t)(round == 0 ? 1 : 3)};

            memcpy(out + len, hd, 9);
            memcpy(out + len + 9, body, sizeof(body));
            len += 9 + sizeof(body);
        }
        if (round == 0) {
            memcpy(out + len, rst7, sizeof(rst7));
            len += sizeof(rst7);
        }
    }
    nghttp2_session_del(h2);
    nghttp2_session_callbacks_del(cbs);
    *ret_len = len;
    return out;
}

/* Feeds the conversation in pieces cut at `cuts` (ascending, < len) into a fresh server
 * session; the frames nghttp2 saw, and whether every piece was taken. */
static bool feed_split(const uint8_t *buf, size_t len, const size_t *cuts, size_t n_cuts,
                       bool filter, struct frames *ret)
{
    nghttp2_session_callbacks *cbs = NULL;
    struct rpc__conn c = {.fd = -1};
    size_t from = 0;
    bool ok = true;

    memset(ret, 0, sizeof(*ret));
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, count_frame);
    assert_int_equal(nghttp2_session_server_new(&c.h2, cbs, ret), 0);
    c.drop_idle_resets = filter;
    c.preface_left = NGHTTP2_CLIENT_MAGIC_LEN;
    for (size_t i = 0; i <= n_cuts && ok; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;

        ok = rpc__conn_feed(&c, buf + from, to - from) == 0;
        from = to;
    }
    nghttp2_session_del(c.h2);
    nghttp2_session_callbacks_del(cbs);
    return ok;
}

static void check_frames(const struct frames *f)
{
    assert_int_equal(f->by_type[NGHTTP2_SETTINGS], 1);
    assert_int_equal(f->by_type[NGHTTP2_HEADERS], 2);
    assert_int_equal(f->by_type[NGHTTP2_DATA], 2);
    assert_int_equal(f->by_type[NGHTTP2_PING], 1);
    assert_int_equal(f->by_type[NGHTTP2_RST_STREAM], 0); /* the idle reset never got there */
}

/* The same frames reach nghttp2 however the bytes are cut: at every single boundary, and
 * one byte at a time; without the filter the idle reset ends the connection. */
static void test_rpc_frame_reader_every_split(void **state)
{
    size_t len = 0;
    uint8_t *buf = conversation(&len);
    size_t *cuts = calloc(len, sizeof(*cuts));
    struct frames f;

    (void)state;
    assert_non_null(cuts);
    for (size_t k = 0; k <= len; k++) {
        size_t cut = k;

        assert_true(feed_split(buf, len, &cut, k < len ? 1 : 0, true, &f));
        check_frames(&f);
    }
    for (size_t k = 0; k + 1 < len; k++)
        cuts[k] = k + 1;
    assert_true(feed_split(buf, len, cuts, len - 1, true, &f));
    check_frames(&f);
    /* unfiltered, the reset is a connection error: stream 3 never gets through */
    assert_true(!feed_split(buf, len, NULL, 0, false, &f) || f.by_type[NGHTTP2_HEADERS] < 2);
    free(cuts);
    free(buf);
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
        cmocka_unit_test(test_rpc_frame_reader_every_split),
        cmocka_unit_test(test_rpc_code_from_http_table),
        cmocka_unit_test(test_rpc_parse_status_cases),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

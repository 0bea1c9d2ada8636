/* SPDX-License-Identifier: Apache-2.0 */
/* test_base.c: unit tests for src/base (errors, strbuf, parsing, strv, files). */
#include <limits.h>
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/base.h"

static void test_error_set_forces_negative_and_formats(void **state)
{
    struct error err = {0};
    assert_int_equal(error_set(&err, EINVAL, "bad %s at %d", "thing", 3), -EINVAL);
    assert_int_equal(err.code, -EINVAL);
    assert_string_equal(err.msg, "bad thing at 3");
    assert_int_equal(error_set(NULL, -ENOENT, "ignored"), -ENOENT);
}

static void test_error_set_errno_appends_strerror(void **state)
{
    struct error err = {0};
    assert_int_equal(error_set_errno(&err, ENOENT, "cannot open '%s'", "/x"), -ENOENT);
    assert_int_equal(err.code, -ENOENT);
    assert_string_equal(err.msg, "cannot open '/x': No such file or directory");
    /* a negative errno too, and NULL */
    assert_int_equal(error_set_errno(&err, -EACCES, "chmod"), -EACCES);
    assert_string_equal(err.msg, "chmod: Permission denied");
    assert_int_equal(error_set_errno(NULL, EIO, "ignored"), -EIO);
}

static void test_error_prefix_adds_context(void **state)
{
    struct error err = {0};
    error_set(&err, -EINVAL, "replicas must be >= 1");
    error_prefix(&err, "config.yaml:12:7");
    assert_string_equal(err.msg, "config.yaml:12:7: replicas must be >= 1");
    error_prefix(NULL, "no crash");
}

static void test_error_set_truncates_long_messages(void **state)
{
    struct error err = {0};
    char big[3000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    error_set(&err, -E2BIG, "%s", big);
    assert_int_equal(strlen(err.msg), ERROR_MSG_MAX - 1);
    assert_string_equal(err.msg + ERROR_MSG_MAX - 4, "...");
}

static void test_strbuf_append_and_take(void **state)
{
    struct strbuf sb = STRBUF_INIT;
    assert_string_equal(strbuf_str(&sb), "");
    assert_int_equal(strbuf_puts(&sb, "nvidia.com/"), 0);
    assert_int_equal(strbuf_printf(&sb, "%s-%d", "gpu", 8), 0);
    assert_int_equal(strbuf_putc(&sb, '!'), 0);
    assert_string_equal(strbuf_str(&sb), "nvidia.com/gpu-8!");
    char *s = strbuf_take(&sb);
    assert_string_equal(s, "nvidia.com/gpu-8!");
    assert_null(sb.buf);
    free(s);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(strbuf_printf(&sb, "%d,", i), 0);
    assert_true(sb.len > 40000);
    strbuf_release(&sb);
}

static void test_strbuf_cap_refuses_growth(void **state)
{
    struct strbuf sb = STRBUF_INIT;
    sb.max_len = 8;
    assert_int_equal(strbuf_puts(&sb, "12345678"), 0);
    assert_int_equal(strbuf_puts(&sb, "9"), -E2BIG);
    assert_string_equal(strbuf_str(&sb), "12345678");
    strbuf_release(&sb);
}

static void test_parse_numbers_strict(void **state)
{
    static const struct {
        const char *in;
        int r;
        int64_t v;
    } cases[] = {
        {"0", 0, 0},
        {"42", 0, 42},
        {"-7", 0, -7},
        {"+3", 0, 3},
        {"", -EINVAL, 0},
        {"4x", -EINVAL, 0},
        {" 4", -EINVAL, 0},
        {"1.5", -EINVAL, 0},
        {"9223372036854775807", 0, INT64_MAX},
        {"9223372036854775808", -ERANGE, 0},
        {"-9223372036854775808", 0, INT64_MIN},
        {"-", -EINVAL, 0},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        int64_t v = 12345;
        int r = parse_int64(cases[i].in, &v);
        assert_int_equal(r, cases[i].r);
        if (r == 0)
            assert_true(v == cases[i].v);
        else
            assert_true(v == 12345); /* untouched on error */
    }
    unsigned u;
    assert_int_equal(parse_uint("4294967295", &u), 0);
    assert_int_equal(u, 4294967295u);
    assert_int_equal(parse_uint("4294967296", &u), -ERANGE);
    assert_int_equal(parse_uint("-1", &u), -EINVAL);
    assert_int_equal(parse_uint(NULL, &u), -EINVAL);
}

static void test_parse_bool_forms(void **state)
{
    bool b;
    assert_int_equal(parse_bool("TRUE", &b), 0);
    assert_true(b);
    assert_int_equal(parse_bool("off", &b), 0);
    assert_false(b);
    assert_int_equal(parse_bool("maybe", &b), -EINVAL);
}

static void test_str_distance_hints(void **state)
{
    assert_int_equal(str_distance("replicas", "replicas"), 0);
    assert_int_equal(str_distance("replica", "replicas"), 1);
    assert_int_equal(str_distance("renameByDefualt", "renameByDefault"), 2);
    assert_int_equal(str_distance("", "abc"), 3);
}

static void test_str_dns_subdomain_valid_rules(void **state)
{
    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"nvidia.com", true}, {"gpu", true},         {"mig-1g.10gb", true}, {"a", true},
        {"", false},          {"Nvidia.com", false}, {"-gpu", false},       {"gpu-", false},
        {"a..b", false},      {".a", false},         {"a.", false},         {"a_b", false},
        {"gpu.-x", false},    {"gpu-.x", false},
    };
    char label64[65], long254[255];
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++)
        assert_int_equal(str_dns_subdomain_valid(cases[i].s, strlen(cases[i].s)), cases[i].ok);
    memset(label64, 'a', 64);
    label64[64] = '\0';
    assert_false(str_dns_subdomain_valid(label64, 64));
    assert_true(str_dns_subdomain_valid(label64, 63));
    for (size_t i = 0; i < 254; i++)
        long254[i] = i % 2 ? '.' : 'a';
    long254[253] = 'a';
    long254[254] = '\0';
    assert_false(str_dns_subdomain_valid(long254, 254));
    assert_true(str_dns_subdomain_valid(long254, 253));
}

static void test_str_hex_digit_all_cases(void **state)
{
    static const char digits[] = "0123456789abcdef";

    (void)state;
    for (int i = 0; i < 16; i++) {
        assert_int_equal(str_hex_digit(digits[i]), i);
        assert_int_equal(str_hex_digit(toupper((unsigned char)digits[i])), i);
    }
    assert_int_equal(str_hex_digit('g'), -1);
    assert_int_equal(str_hex_digit('G'), -1);
    assert_int_equal(str_hex_digit('%'), -1);
    assert_int_equal(str_hex_digit(0), -1);
    assert_int_equal(str_hex_digit(0xff), -1);
}

static void test_str_helpers(void **state)
{
    char buf[5];
    assert_int_equal(str_copy(buf, "abcdefg", sizeof(buf)), 7);
    assert_string_equal(buf, "abcd");
    assert_true(str_startswith("nvidia.com/gpu", "nvidia.com/"));
    assert_false(str_startswith(NULL, "x"));
    assert_true(str_endswith("nvidia.com/gpu.shared", ".shared"));
    assert_false(str_endswith("a", "abc"));
    assert_true(str_eq(NULL, NULL));
    assert_false(str_eq("a", NULL));
}

static void test_strv_push_contains_free(void **state)
{
    char **v = strv_new();
    assert_int_equal(strv_push(&v, "any"), 0);
    assert_int_equal(strv_push(&v, "l20"), 0);
    assert_int_equal(strv_length(v), 2);
    assert_true(strv_contains(v, "l20"));
    assert_false(strv_contains(v, "t4"));
    strv_free(v);
    strv_free(NULL);
}

static void test_file_write_atomic_and_read_back(void **state)
{
    char dir[] = "/tmp/gs-test-XXXXXX";
    char path[256];
    char *data = NULL;
    size_t len = 0;
    struct error err = {0};

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/f.txt", dir);
    assert_int_equal(file_write_atomic(path, "hello\n", 6, 0644, &err), 0);
    assert_int_equal(file_read_all(path, 1024, &data, &len, &err), 0);
    assert_int_equal(len, 6);
    assert_string_equal(data, "hello\n");
    free(data);
    data = NULL;

    assert_int_equal(file_read_all(path, 3, &data, &len, &err), -EFBIG);
    assert_null(data);
    assert_non_null(strstr(err.msg, "limit"));

    assert_int_equal(file_read_all(dir, 1024, &data, &len, &err), -EISDIR);
    assert_non_null(strstr(err.msg, "is a directory"));
    assert_true(path_is_dir(dir));
    assert_true(path_exists(path));

    unlink(path);
    assert_int_equal(file_read_all(path, 1024, &data, &len, &err), -ENOENT);
    assert_non_null(strstr(err.msg, path));
    rmdir(dir);
}

/* path_mkdir_p then path_rm_tree: the whole tree goes, a symlink in it is removed but what
 * it points to is left alone. */
static void test_path_mkdir_p_and_rm_tree(void **state)
{
    char dir[] = "/tmp/gs-test-XXXXXX", outside[] = "/tmp/gs-test-XXXXXX";
    char path[256], victim[256], link_path[256];
    struct error err = {0};

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_non_null(mkdtemp(outside));
    snprintf(path, sizeof(path), "%s/a/b/c", dir);
    assert_int_equal(path_mkdir_p(path, 0755, &err), 0);
    assert_int_equal(path_mkdir_p(path, 0755, &err), 0); /* existing: fine */
    assert_true(path_is_dir(path));
    snprintf(path, sizeof(path), "%s/a/b/c/f", dir);
    assert_int_equal(file_write_atomic(path, "x", 1, 0644, &err), 0);
    snprintf(victim, sizeof(victim), "%s/keep", outside);
    assert_int_equal(file_write_atomic(victim, "y", 1, 0644, &err), 0);
    snprintf(link_path, sizeof(link_path), "%s/a/out", dir);
    assert_int_equal(symlink(outside, link_path), 0);

    path_rm_tree(dir);
    assert_false(path_exists(dir));
    assert_true(path_exists(victim));
    path_rm_tree(dir); /* gone already: nothing to do, no crash */
    unlink(victim);
    rmdir(outside);
}

/* A FIFO at a config path hung the daemon's loop in open(2): refused at once now. */
static void test_file_read_all_refuses_fifo_accepts_dev_null(void **state)
{
    char dir[] = "/tmp/gs-test-XXXXXX";
    char path[256];
    char *data = NULL;
    size_t len = 7;
    struct error err = {0};

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/config.yaml", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(file_read_all(path, 1024, &data, &len, &err), -EINVAL);
    assert_null(data);
    assert_non_null(strstr(err.msg, "is a FIFO, not a regular file"));
    unlink(path);
    rmdir(dir);
    /* config-manager points the config at /dev/null for the empty config */
    assert_int_equal(file_read_all("/dev/null", 1024, &data, &len, &err), 0);
    assert_int_equal(len, 0);
    free(data);
}

/* JSON logs: every line valid JSON whatever the message holds (invalid UTF-8, quotes,
 * controls), and the key=value context in keys of their own. Checked with jansson. */
static void test_log_json_valid_and_structured(void **state)
{
    char path[] = "/tmp/gs-log-XXXXXX";
    int fd = mkstemp(path);
    char *data = NULL, *line, *save = NULL;
    size_t len = 0, n = 0;
    json_error_t jerr;

    (void)state;
    assert_true(fd >= 0);
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_JSON, fd);
    log_warn("health: xid=79 gpu=GPU-1234: devices=16 marked Unhealthy");
    log_info("resource=nvidia.com/gpu device=GPU-ab::3 held by pod=default/p1, kept");
    log_error("bad bytes \xff\xfe and \xc3 quote \" backslash \\ tab \t name=%s", "caf\xc3\xa9");
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_KLOG, 2);
    close(fd);
    assert_int_equal(file_read_all(path, 65536, &data, &len, NULL), 0);
    unlink(path);
    for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        json_t *o = json_loads(line, 0, &jerr);
        if (!o)
            fail_msg("not JSON: %s (%s)", line, jerr.text);
        if (n == 0) {
            assert_string_equal(json_string_value(json_object_get(o, "xid")), "79");
            assert_string_equal(json_string_value(json_object_get(o, "gpu")), "GPU-1234");
            assert_string_equal(json_string_value(json_object_get(o, "level")), "warning");
        } else if (n == 1) {
            assert_string_equal(json_string_value(json_object_get(o, "resource")),
                                "nvidia.com/gpu");
            assert_string_equal(json_string_value(json_object_get(o, "device")), "GPU-ab::3");
            assert_string_equal(json_string_value(json_object_get(o, "pod")), "default/p1");
        } else {
            const char *m = json_string_value(json_object_get(o, "msg"));
            assert_non_null(
                strstr(m, "bad bytes \xef\xbf\xbd\xef\xbf\xbd and \xef\xbf\xbd quote \""));
            assert_non_null(strstr(m, "caf\xc3\xa9")); /* valid UTF-8 kept as is */
        }
        json_decref(o);
    }
    assert_int_equal(n, 3);
    free(data);
}

static void test_log_level_parse(void **state)
{
    enum log_level l;
    assert_int_equal(log_level_parse("debug", &l), 0);
    assert_int_equal(l, LOG_LEVEL_DEBUG);
    assert_int_equal(log_level_parse("5", &l), 0);
    assert_int_equal(l, LOG_LEVEL_DEBUG);
    assert_int_equal(log_level_parse("loud", &l), -EINVAL);
}

static void test_log_emit_one_line_json(void **state)
{
    int fds[2];
    char buf[512] = {0};
    assert_int_equal(pipe(fds), 0);
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_JSON, fds[1]);
    log_debug("hidden %d", 1);
    log_info("registered resource=%s \"quoted\"", "nvidia.com/gpu");
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_KLOG, 2);
    close(fds[1]);
    ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
    close(fds[0]);
    assert_true(n > 0);
    assert_null(strstr(buf, "hidden"));
    assert_non_null(strstr(buf, "\"level\":\"info\""));
    assert_non_null(strstr(buf, "registered resource=nvidia.com/gpu \\\"quoted\\\""));
    assert_ptr_equal(strchr(buf, '\n'), buf + n - 1);
}

/* The backoff every retry loop shares: min first, doubling, capped, never overflowing. */
static void test_backoff_next_ms(void **state)
{
    unsigned ms = 0;
    const unsigned want[] = {250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000};

    (void)state;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ms = backoff_next_ms(ms, 250, 30000);
        assert_int_equal(ms, want[i]);
    }
    assert_int_equal(backoff_next_ms(0, 100, 10000), 100);
    assert_int_equal(backoff_next_ms(6000, 100, 10000), 10000);
    assert_int_equal(backoff_next_ms(UINT_MAX - 1, 1, UINT_MAX), UINT_MAX);
    assert_int_equal(backoff_next_ms(0, 500, 300), 300); /* min above max: the cap wins */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_set_forces_negative_and_formats),
        cmocka_unit_test(test_error_set_errno_appends_strerror),
        cmocka_unit_test(test_error_prefix_adds_context),
        cmocka_unit_test(test_error_set_truncates_long_messages),
        cmocka_unit_test(test_strbuf_append_and_take),
        cmocka_unit_test(test_str_hex_digit_all_cases),
        cmocka_unit_test(test_strbuf_cap_refuses_growth),
        cmocka_unit_test(test_parse_numbers_strict),
        cmocka_unit_test(test_parse_bool_forms),
        cmocka_unit_test(test_str_distance_hints),
        cmocka_unit_test(test_str_dns_subdomain_valid_rules),
        cmocka_unit_test(test_str_helpers),
        cmocka_unit_test(test_strv_push_contains_free),
        cmocka_unit_test(test_file_write_atomic_and_read_back),
        cmocka_unit_test(test_file_read_all_refuses_fifo_accepts_dev_null),
        cmocka_unit_test(test_path_mkdir_p_and_rm_tree),
        cmocka_unit_test(test_log_json_valid_and_structured),
        cmocka_unit_test(test_log_level_parse),
        cmocka_unit_test(test_log_emit_one_line_json),
        cmocka_unit_test(test_backoff_next_ms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

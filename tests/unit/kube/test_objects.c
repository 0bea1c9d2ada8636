/* SPDX-License-Identifier: Apache-2.0 */
/* test_objects.c: src/kube/objects.c — URL building and escaping, Node / NodeList / watch
 * event / Status parsing (good and bad input), and splitting a stream into bounded lines. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube/internal.h"
#include "tests.h"

#define LABEL "nvidia.com/device-plugin.config"

static void test_url_node_escapes_and_trims_server(void **state)
{
    static const struct {
        const char *server, *node, *want;
    } cases[] = {
        {"https://10.0.0.1:443", "gpu-node-1", "https://10.0.0.1:443/api/v1/nodes/gpu-node-1"},
        {"https://h/", "n.example.com", "https://h/api/v1/nodes/n.example.com"},
        {"https://h/k8s/clusters/c-1//", "a/b", "https://h/k8s/clusters/c-1/api/v1/nodes/a%2Fb"},
        {"http://127.0.0.1:1", "x y?&=", "http://127.0.0.1:1/api/v1/nodes/x%20y%3F%26%3D"},
        {"http://h", "é", "http://h/api/v1/nodes/%C3%A9"},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        char *url = NULL;
        assert_int_equal(kube__url_node(cases[i].server, cases[i].node, &url), 0);
        assert_string_equal(url, cases[i].want);
        free(url);
    }
}

static void test_url_node_list_watch_and_rv(void **state)
{
    char *url = NULL;

    assert_int_equal(kube__url_node_list("https://h", "n1", false, NULL, &url), 0);
    assert_string_equal(url, "https://h/api/v1/nodes?fieldSelector=metadata.name%3Dn1");
    free(url);
    assert_int_equal(kube__url_node_list("https://h", "n&1", true, "12 3", &url), 0);
    assert_string_equal(url, "https://h/api/v1/nodes?fieldSelector=metadata.name%3Dn%261"
                             "&watch=true&allowWatchBookmarks=true&timeoutSeconds=300"
                             "&resourceVersion=12%203");
    free(url);
    assert_int_equal(kube__url_node_list("https://h", "n", true, "", &url), 0);
    assert_null(strstr(url, "resourceVersion"));
    free(url);
}

static void test_url_events_escapes_namespace(void **state)
{
    char *url = NULL;
    assert_int_equal(kube__url_events("https://h/", "gpu system", &url), 0);
    assert_string_equal(url, "https://h/api/v1/namespaces/gpu%20system/events");
    free(url);
}

static void test_node_parse_label_present_absent_and_bad(void **state)
{
    static const struct {
        const char *json;
        int r;
        bool has;
        const char *value;
    } cases[] = {
        {"{\"metadata\":{\"name\":\"n\",\"uid\":\"u\",\"resourceVersion\":\"7\","
         "\"labels\":{\"" LABEL "\":\"l20\"}}}",
         0, true, "l20"},
        {"{\"metadata\":{\"name\":\"n\",\"labels\":{\"" LABEL "\":\"\"}}}", 0, true, ""},
        {"{\"metadata\":{\"name\":\"n\",\"labels\":{\"other\":\"x\"}}}", 0, false, NULL},
        {"{\"metadata\":{\"name\":\"n\"}}", 0, false, NULL},
        {"{\"metadata\":{\"name\":\"n\",\"labels\":{\"" LABEL "\":3}}}", -EINVAL, false, NULL},
        {"{\"kind\":\"Node\"}", -EINVAL, false, NULL},
        {"[1,2]", -EINVAL, false, NULL},
        {"{\"metadata\":", -EINVAL, false, NULL},
        {"{\"a\":1,\"a\":2}", -EINVAL, false, NULL},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct kube__node_info n = {0};
        struct error err = {0};
        int r = kube__node_parse(cases[i].json, strlen(cases[i].json), LABEL, &n, &err);
        assert_int_equal(r, cases[i].r);
        if (r < 0) {
            assert_true(err.msg[0] != '\0');
            continue;
        }
        assert_int_equal(n.has_label, cases[i].has);
        if (cases[i].value)
            assert_string_equal(n.label_value, cases[i].value);
        else
            assert_null(n.label_value);
        assert_string_equal(n.name, "n");
        kube__node_info_release(&n);
    }
}

static void test_node_list_parse_finds_node_and_keeps_list_rv(void **state)
{
    const char *list = "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"500\"},"
                       "\"items\":[{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"3\"}},"
                       "{\"metadata\":{\"name\":\"b\",\"uid\":\"ub\",\"resourceVersion\":\"4\","
                       "\"labels\":{\"" LABEL "\":\"t4\"}}}]}";
    struct kube__node_info n = {0};
    bool found = false;

    assert_int_equal(kube__node_list_parse(list, strlen(list), "b", LABEL, &n, &found, NULL), 0);
    assert_true(found);
    assert_string_equal(n.label_value, "t4");
    assert_string_equal(n.uid, "ub");
    assert_string_equal(n.resource_version, "500");
    kube__node_info_release(&n);

    assert_int_equal(kube__node_list_parse(list, strlen(list), "zz", LABEL, &n, &found, NULL), 0);
    assert_false(found);
    assert_false(n.has_label);
    assert_string_equal(n.resource_version, "500");
    kube__node_info_release(&n);

    const char *bad = "{\"items\":[]}";
    struct error err = {0};
    assert_int_equal(kube__node_list_parse(bad, strlen(bad), "a", LABEL, &n, &found, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "NodeList"));
}

static void test_watch_event_parse_table(void **state)
{
    static const struct {
        const char *line;
        int r;
        enum kube__event_type type;
        const char *rv, *value;
        long code;
    } cases[] = {
        {"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"n\",\"resourceVersion\":\"1\","
         "\"labels\":{\"" LABEL "\":\"a\"}}}}",
         0, KUBE__EV_ADDED, "1", "a", 0},
        {"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"n\",\"resourceVersion\":"
         "\"2\"}}}",
         0, KUBE__EV_MODIFIED, "2", NULL, 0},
        {"{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"n\",\"resourceVersion\":"
         "\"3\",\"labels\":{\"" LABEL "\":\"a\"}}}}",
         0, KUBE__EV_DELETED, "3", "a", 0},
        {"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"resourceVersion\":"
         "\"9\"}}}",
         0, KUBE__EV_BOOKMARK, "9", NULL, 0},
        {"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":\"too old resource "
         "version: 1 (5)\",\"reason\":\"Expired\",\"code\":410}}",
         0, KUBE__EV_ERROR, NULL, NULL, 410},
        {"{\"type\":\"WHATEVER\",\"object\":{}}", -EINVAL, 0, NULL, NULL, 0},
        {"{\"object\":{\"metadata\":{}}}", -EINVAL, 0, NULL, NULL, 0},
        {"{\"type\":\"ADDED\"}", -EINVAL, 0, NULL, NULL, 0},
        {"{\"type\":\"ADDED\",\"object\":{}}", -EINVAL, 0, NULL, NULL, 0},
        {"not json", -EINVAL, 0, NULL, NULL, 0},
        {"", -EINVAL, 0, NULL, NULL, 0},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct kube__watch_event ev = {0};
        struct error err = {0};
        int r = kube__watch_event_parse(cases[i].line, strlen(cases[i].line), LABEL, &ev, &err);
        assert_int_equal(r, cases[i].r);
        if (r < 0) {
            assert_true(err.msg[0] != '\0');
            continue;
        }
        assert_int_equal(ev.type, cases[i].type);
        if (cases[i].rv)
            assert_string_equal(ev.node.resource_version, cases[i].rv);
        if (cases[i].value)
            assert_string_equal(ev.node.label_value, cases[i].value);
        else
            assert_null(ev.node.label_value);
        assert_int_equal(ev.code, cases[i].code);
        if (ev.type == KUBE__EV_ERROR)
            assert_string_equal(ev.message, "too old resource version: 1 (5)");
        kube__watch_event_release(&ev);
    }
}

static void test_status_message_only_from_status(void **state)
{
    const char *st = "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"forbidden\","
                     "\"code\":403}";
    const char *node = "{\"kind\":\"Node\",\"message\":\"x\"}";
    char *m = kube__status_message(st, strlen(st));

    assert_string_equal(m, "forbidden");
    free(m);
    assert_null(kube__status_message(node, strlen(node)));
    assert_null(kube__status_message("<html>", 6));
    assert_null(kube__status_message(NULL, 0));
}

struct collected {
    char lines[8][64];
    int n;
    int fail_at; /* on_line returns -EIO at this line number (1-based), 0 = never */
};

static int collect(const char *line, size_t len, void *userdata)
{
    struct collected *c = userdata;

    assert_true(len < sizeof(c->lines[0]));
    assert_int_equal(strlen(line), len);
    memcpy(c->lines[c->n], line, len);
    c->lines[c->n][len] = '\0';
    c->n++;
    return c->n == c->fail_at ? -EIO : 0;
}

static int collect_any(const char *line, size_t len, void *userdata)
{
    struct collected *c = userdata;
    assert_true(len > 0 && line[len] == '\0');
    c->n++;
    return 0;
}

static void test_lines_feed_splits_across_chunks(void **state)
{
    /* The same stream cut at every possible point gives the same lines. */
    const char *stream = "{\"a\":1}\n\n{\"b\":22}\n{\"c\"";
    size_t len = strlen(stream);

    for (size_t cut = 0; cut <= len; cut++) {
        struct kube__lines l = {STRBUF_INIT};
        struct collected c = {0};
        assert_int_equal(kube__lines_feed(&l, stream, cut, 100, collect, &c), 0);
        assert_int_equal(kube__lines_feed(&l, stream + cut, len - cut, 100, collect, &c), 0);
        assert_int_equal(c.n, 2);
        assert_string_equal(c.lines[0], "{\"a\":1}");
        assert_string_equal(c.lines[1], "{\"b\":22}");
        assert_int_equal(kube__lines_feed(&l, ":3}\n", 4, 100, collect, &c), 0);
        assert_string_equal(c.lines[2], "{\"c\":3}");
        kube__lines_release(&l);
    }
}

static void test_lines_feed_caps_and_stops(void **state)
{
    struct kube__lines l = {STRBUF_INIT};
    struct collected c = {0};

    assert_int_equal(kube__lines_feed(&l, "12345", 5, 8, collect, &c), 0);
    assert_int_equal(kube__lines_feed(&l, "6789", 4, 8, collect, &c), -E2BIG);
    kube__lines_release(&l);

    /* Exactly at the cap is fine. */
    assert_int_equal(kube__lines_feed(&l, "12345678\n", 9, 8, collect, &c), 0);
    assert_int_equal(c.n, 1);
    kube__lines_release(&l);

    struct collected d = {.fail_at = 1};
    assert_int_equal(kube__lines_feed(&l, "a\nb\n", 4, 8, collect, &d), -EIO);
    assert_int_equal(d.n, 1);
    kube__lines_release(&l);
}

/* Not a fuzzer (fuzz/ links a fixed library list), but the same idea in every test run:
 * seeds mutated by a fixed-seed generator go through every parser; ASan/valgrind check the
 * memory, the asserts check that a failure always comes with a message. */
static uint64_t next_random(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void mutate(char *buf, size_t *len, size_t cap, uint64_t *rng)
{
    static const char tokens[] = "{}[]\":,\\\n 0-9aZ\x80\xff";
    unsigned n = 1 + next_random(rng) % 4;

    for (unsigned i = 0; i<n && * len> 0; i++) {
        size_t at = next_random(rng) % *len;
        switch (next_random(rng) % 4) {
        case 0: /* replace a byte */
            buf[at] = tokens[next_random(rng) % (sizeof(tokens) - 1)];
            break;
        case 1: /* truncate */
            *len = at;
            break;
        case 2: /* delete a byte */
            memmove(buf + at, buf + at + 1, *len - at - 1);
            (*len)--;
            break;
        default: /* duplicate a run */
            if (*len + 8 < cap) {
                memmove(buf + at + 8, buf + at, *len - at);
                *len += 8;
            }
            break;
        }
    }
    buf[*len] = '\0';
}

static void test_parsers_survive_mutated_input(void **state)
{
    static const char *const seeds[] = {
        "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"n\","
        "\"uid\":\"u\",\"resourceVersion\":\"12\",\"labels\":{\"" LABEL "\":\"t4\"}}}}\n",
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":\"gone\",\"code\":410}}\n",
        "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{\"metadata\":"
        "{\"name\":\"n\",\"labels\":{\"" LABEL "\":\"a\"}}}]}",
        "current-context: x\ncontexts:\n- {name: x, context: {cluster: c, user: u}}\nclusters:\n"
        "- {name: c, cluster: {server: 'https://h', certificate-authority-data: Q0E=}}\n"
        "users:\n- {name: u, user: {token: t, client-certificate-data: Q0VSVA==, "
        "client-key-data: S0VZIQ==}}\n",
    };
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    char buf[1024];

    for (unsigned iter = 0; iter < 20000; iter++) {
        const char *seed = seeds[iter % GS_ARRAY_SIZE(seeds)];
        size_t len = strlen(seed);
        struct kube__watch_event ev = {0};
        struct kube__node_info n = {0};
        struct kube__auth a = {0};
        struct kube__lines l = {STRBUF_INIT};
        struct collected c = {0};
        struct error err = {0};
        bool found;
        char *m;

        memcpy(buf, seed, len + 1);
        mutate(buf, &len, sizeof(buf) - 16, &rng);
        if (kube__watch_event_parse(buf, len, LABEL, &ev, &err) < 0)
            assert_true(err.msg[0] != '\0');
        kube__watch_event_release(&ev);
        err.msg[0] = '\0';
        if (kube__node_list_parse(buf, len, "n", LABEL, &n, &found, &err) < 0)
            assert_true(err.msg[0] != '\0');
        kube__node_info_release(&n);
        err.msg[0] = '\0';
        if (kube__kubeconfig_parse(buf, len, "/k/c", NULL, &a, &err) < 0)
            assert_true(err.msg[0] != '\0');
        kube__auth_release(&a);
        m = kube__status_message(buf, len);
        free(m);
        (void)kube__lines_feed(&l, buf, len, 64, collect_any, &c);
        kube__lines_release(&l);
    }
}

int run_objects_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_node_escapes_and_trims_server),
        cmocka_unit_test(test_url_node_list_watch_and_rv),
        cmocka_unit_test(test_url_events_escapes_namespace),
        cmocka_unit_test(test_node_parse_label_present_absent_and_bad),
        cmocka_unit_test(test_node_list_parse_finds_node_and_keeps_list_rv),
        cmocka_unit_test(test_watch_event_parse_table),
        cmocka_unit_test(test_status_message_only_from_status),
        cmocka_unit_test(test_lines_feed_splits_across_chunks),
        cmocka_unit_test(test_lines_feed_caps_and_stops),
        cmocka_unit_test(test_parsers_survive_mutated_input),
    };
    return cmocka_run_group_tests_name("kube_objects", tests, NULL, NULL);
}

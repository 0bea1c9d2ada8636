/* SPDX-License-Identifier: Apache-2.0 */
/* test_yaml.c: unit tests for src/yaml, the one YAML layer (positions, collected syntax
 * errors, scalar text with single-quoted scalars decoded from the source, lookups). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/base.h"
#include "yaml/yaml.h"

static int parse(const char *text, unsigned flags, struct yaml_doc *doc)
{
    return yaml_parse(text, strlen(text), flags, doc, NULL, NULL, NULL, NULL, 0);
}

static void test_positions(void **state)
{
    const char *text = "a: 1\nlist:\n  - x\n  - y\nmap:\n    k: v\n";
    struct yaml_doc doc;
    struct fy_node *root;
    struct yaml_pos p;

    assert_int_equal(parse(text, 0, &doc), 0);
    root = yaml_root(&doc);
    p = yaml_pos(root); /* a mapping: its first key */
    assert_int_equal(p.line, 1);
    assert_int_equal(p.col, 1);
    p = yaml_pos(yaml_lookup(root, "list")); /* a sequence: its first item */
    assert_int_equal(p.line, 3);
    assert_int_equal(p.col, 5);
    p = yaml_pos(yaml_lookup(root, "map"));
    assert_int_equal(p.line, 6);
    assert_int_equal(p.col, 5);
    p = yaml_pos(NULL);
    assert_int_equal(p.line, 0);
    assert_null(yaml_lookup(root, "absent"));
    assert_null(yaml_lookup(yaml_lookup(root, "a"), "x")); /* not a mapping */
    yaml_doc_release(&doc);
}

static void test_scalar_text(void **state)
{
    const char *text = "plain: true\nsq: 'it''s ''''ok'''\ndq: \"a\\tb\"\n"
                       "folded: 'one\n  two'\nseq: [1]\n";
    struct yaml_doc doc;
    struct fy_node *root;
    bool oom = false;

    assert_int_equal(parse(text, 0, &doc), 0);
    root = yaml_root(&doc);
    assert_string_equal(yaml_text(&doc, yaml_lookup(root, "plain"), &oom), "true");
    assert_true(yaml_is_plain(yaml_lookup(root, "plain")));
    /* '' runs are decoded from the source, every quote kept */
    assert_string_equal(yaml_text(&doc, yaml_lookup(root, "sq"), &oom), "it's ''ok'");
    assert_false(yaml_is_plain(yaml_lookup(root, "sq")));
    assert_string_equal(yaml_text(&doc, yaml_lookup(root, "dq"), &oom), "a\tb");
    assert_string_equal(yaml_text(&doc, yaml_lookup(root, "folded"), &oom), "one two");
    assert_null(yaml_text(&doc, yaml_lookup(root, "seq"), &oom)); /* not a scalar */
    assert_false(yaml_is_scalar(yaml_lookup(root, "seq")));
    assert_false(oom);
    yaml_doc_release(&doc);
    yaml_doc_release(&doc); /* twice is harmless */
}

struct seen {
    unsigned n, first_line;
};

static void count_error(void *ctx, struct yaml_pos pos, const char *msg)
{
    struct seen *s = ctx;

    assert_non_null(msg);
    if (s->n++ == 0)
        s->first_line = pos.line;
}

static void test_syntax_errors_collected(void **state)
{
    const char *text = "a: 1\nb: [unclosed\nc: 2\n";
    struct seen seen = {0};
    struct yaml_doc doc;
    struct yaml_pos pos;
    char msg[128];

    assert_int_equal(
        yaml_parse(text, strlen(text), 0, &doc, count_error, &seen, &pos, msg, sizeof(msg)),
        -EINVAL);
    assert_null(doc.fy);
    assert_true(seen.n >= 1);
    assert_int_equal(seen.first_line, pos.line);
    assert_true(pos.line >= 2);
    assert_true(strlen(msg) > 0);
}

static void test_nul_byte_is_not_yaml(void **state)
{
    const char text[] = "a: 1\0b: 2";
    struct yaml_doc doc;
    char msg[64];

    assert_int_equal(
        yaml_parse(text, sizeof(text) - 1, 0, &doc, NULL, NULL, NULL, msg, sizeof(msg)), -EINVAL);
    assert_string_equal(msg, "the text holds a NUL byte");
}

static void test_resolve_merge_keys(void **state)
{
    const char *text = "base: &b\n  x: 1\nuse:\n  <<: *b\n  y: 2\n";
    struct yaml_doc doc;

    assert_int_equal(parse(text, YAML_RESOLVE, &doc), 0);
    assert_string_equal(
        yaml_text(&doc, yaml_lookup(yaml_lookup(yaml_root(&doc), "use"), "x"), NULL), "1");
    yaml_doc_release(&doc);
}

static void test_version_1_2_booleans(void **state)
{
    /* YAML 1.2: `yes` is a string; the text is what callers judge */
    struct yaml_doc doc;

    assert_int_equal(parse("a: yes\n", YAML_VERSION_1_2, &doc), 0);
    assert_string_equal(yaml_text(&doc, yaml_lookup(yaml_root(&doc), "a"), NULL), "yes");
    yaml_doc_release(&doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_scalar_text),
        cmocka_unit_test(test_syntax_errors_collected),
        cmocka_unit_test(test_nul_byte_is_not_yaml),
        cmocka_unit_test(test_resolve_merge_keys),
        cmocka_unit_test(test_version_1_2_booleans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_config_corpus.c: walks tests/data/config/. Every valid/ config (the seeds' and
 * NVIDIA's docs' configs, and ours) must load, print and re-parse to the same text; every
 * invalid/ config must fail with the error in its .expect sidecar (one substring per line,
 * with line:col). A .flags sidecar holds "flag=value" lines applied as overrides. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define CORPUS GS_SOURCE_DIR "/tests/data/config"

static char *read_sidecar(const char *path, const char *suffix)
{
    struct strbuf p = STRBUF_INIT;
    char *data = NULL;
    size_t len;

    strbuf_printf(&p, "%s%s", path, suffix);
    if (file_read_all(p.buf, 1 << 16, &data, &len, NULL) < 0)
        data = NULL;
    strbuf_release(&p);
    return data;
}

static void apply_flags(struct cfg_overrides *o, char *flags)
{
    for (char *line = flags, *next; line && *line; line = next) {
        char *eq;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        eq = strchr(line, '=');
        assert_non_null(eq);
        *eq = '\0';
        assert_int_equal(cfg_overrides_set(o, line, eq + 1, NULL), 0);
    }
}

/* Loads one corpus file; returns the result, *ret_text the diagnostics. */
static int load_file(const char *path, struct cfg_config **ret_cfg, char **ret_text)
{
    struct cfg_overrides o;
    struct cfg_diags d = CFG_DIAGS_INIT;
    struct strbuf sb = STRBUF_INIT;
    struct error err = {0};
    char *flags = read_sidecar(path, ".flags");
    struct cfg_load_options lo = {.path = path, .overrides = &o};
    int r;

    cfg_overrides_init(&o, CFG_BIN_PLUGIN);
    if (flags)
        apply_flags(&o, flags);
    *ret_cfg = NULL;
    r = cfg_load(&lo, ret_cfg, &d, &err);
    cfg_diags_format(&d, CFG_SEV_WARNING, &sb);
    cfg_diags_format(&d, CFG_SEV_ERROR, &sb);
    strbuf_printf(&sb, "%s\n", err.msg);
    *ret_text = strbuf_take(&sb);
    cfg_diags_release(&d);
    cfg_overrides_release(&o);
    free(flags);
    return r;
}

/* Every line of the .expect sidecar must appear after "<file>:" in the diagnostics. */
static size_t check_expect(const char *path, const char *base, const char *text, bool required)
{
    char *expect = read_sidecar(path, ".expect");
    size_t n = 0;

    if (required && !expect)
        print_error("%s has no .expect sidecar\n", path);
    assert_true(expect || !required);
    for (char *line = expect, *next; line && *line; line = next) {
        struct strbuf want = STRBUF_INIT;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        strbuf_printf(&want, "%s:%s", base, line);
        if (!strstr(text, want.buf))
            print_error("%s: want '%s' in:\n%s\n", path, want.buf, text);
        assert_non_null(strstr(text, want.buf));
        strbuf_release(&want);
        n++;
    }
    assert_true(n > 0 || !required);
    free(expect);
    return n;
}

static void round_trip(const struct cfg_config *cfg)
{
    for (int f = 0; f < 2; f++) {
        struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
        struct cfg_config *c2 = NULL;
        struct cfg_overrides o;

        /* the printed config carries mpsRoot itself, so no overrides are needed */
        cfg_overrides_init(&o, CFG_BIN_PLUGIN);
        assert_int_equal(cfg_print(cfg, (enum cfg_format)f, &a), 0);
        assert_int_equal(cfg_parse_buffer(a.buf, a.len, "printed", &o, &c2, NULL, NULL), 0);
        assert_int_equal(cfg_print(c2, (enum cfg_format)f, &b), 0);
        assert_string_equal(a.buf, b.buf);
        cfg_free(c2);
        strbuf_release(&a);
        strbuf_release(&b);
    }
}

static bool is_config_file(const char *name)
{
    return name[0] != '.' && (str_endswith(name, ".yaml") || str_endswith(name, ".json"));
}

static size_t walk(const char *sub, bool valid)
{
    struct strbuf dir = STRBUF_INIT;
    struct dirent *de;
    size_t n = 0;
    DIR *d;

    strbuf_printf(&dir, "%s/%s", CORPUS, sub);
    d = opendir(dir.buf);
    assert_non_null(d);
    for (de = readdir(d); de; de = readdir(d)) {
        struct strbuf path = STRBUF_INIT;
        struct cfg_config *cfg = NULL;
        char *text = NULL;
        int r;

        if (!is_config_file(de->d_name))
            continue;
        strbuf_printf(&path, "%s/%s", dir.buf, de->d_name);
        r = load_file(path.buf, &cfg, &text);
        if ((r == 0) != valid || (!valid && r != -EINVAL))
            print_error("%s: got %d, want %s:\n%s\n", path.buf, r, valid ? "valid" : "-EINVAL",
                        text);
        if (valid) {
            assert_int_equal(r, 0);
            assert_string_equal(cfg->source_path, path.buf);
            round_trip(cfg);
        } else {
            assert_int_equal(r, -EINVAL);
            assert_null(cfg);
        }
        check_expect(path.buf, de->d_name, text, !valid);
        cfg_free(cfg);
        free(text);
        strbuf_release(&path);
        n++;
    }
    closedir(d);
    strbuf_release(&dir);
    return n;
}

static void test_corpus_valid_and_invalid(void **state)
{
    size_t n_valid = walk("valid", true);
    size_t n_invalid = walk("invalid", false);

    print_message("corpus: %zu valid, %zu invalid configs\n", n_valid, n_invalid);
    assert_true(n_valid >= 20);
    assert_true(n_invalid >= 20);
    assert_true(n_valid + n_invalid >= 40);
}

const struct CMUnitTest corpus_tests[] = {
    cmocka_unit_test(test_corpus_valid_and_invalid),
};
const size_t n_corpus_tests = GS_ARRAY_SIZE(corpus_tests);

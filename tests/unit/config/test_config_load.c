/* SPDX-License-Identifier: Apache-2.0 */
/* test_config_load.c: named configs in a ConfigMap mount built in a temp dir with
 * kubelet's layout (keys are symlinks into ..data, which links to a timestamped dir):
 * listing, every selection rule, path-traversal names, files vs directories, caps. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

#define TS_DIR "..2024_01_01_00_00_00.123456789"

static char tmpdir[256];

static void put_file(const char *rel, const char *text)
{
    struct strbuf p = STRBUF_INIT;

    strbuf_printf(&p, "%s/%s", tmpdir, rel);
    assert_int_equal(file_write_atomic(p.buf, text, strlen(text), 0644, NULL), 0);
    strbuf_release(&p);
}

static void put_link(const char *target, const char *rel)
{
    struct strbuf p = STRBUF_INIT;

    strbuf_printf(&p, "%s/%s", tmpdir, rel);
    assert_int_equal(symlink(target, p.buf), 0);
    strbuf_release(&p);
}

static const char *ts_config(unsigned replicas)
{
    static char buf[160];
    snprintf(buf, sizeof(buf),
             "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
             "    - name: nvidia.com/gpu\n      replicas: %u\n",
             replicas);
    return buf;
}

/* kubelet layout: keys any, l20, t4 (+ extra keys given) */
static int setup_configmap(void **state)
{
    struct strbuf p = STRBUF_INIT;

    snprintf(tmpdir, sizeof(tmpdir), "%s/gs-config-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(tmpdir));
    strbuf_printf(&p, "%s/" TS_DIR, tmpdir);
    assert_int_equal(mkdir(p.buf, 0755), 0);
    strbuf_reset(&p);
    strbuf_printf(&p, "%s/subdir", tmpdir);
    assert_int_equal(mkdir(p.buf, 0755), 0);
    put_file(TS_DIR "/any", ts_config(2));
    put_file(TS_DIR "/l20", ts_config(8));
    put_file(TS_DIR "/t4", ts_config(3));
    put_file(TS_DIR "/broken", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                               "    - name: gpu\n      replicas: 0\n");
    put_link(TS_DIR, "..data");
    put_link("..data/any", "any");
    put_link("..data/l20", "l20");
    put_link("..data/t4", "t4");
    put_file(".hidden", ts_config(5));
    put_link("..data/missing", "dangling");
    strbuf_release(&p);
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int teardown_configmap(void **state)
{
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static int load(const char *path, const char *name, const char *def, const enum cfg_fallback *fb,
                size_t n_fb, struct cfg_config **ret, struct error *err)
{
    struct cfg_load_options lo = {path, name, def, fb, n_fb, NULL};
    struct cfg_diags d = CFG_DIAGS_INIT;
    int r = cfg_load(&lo, ret, &d, err);

    cfg_diags_release(&d);
    return r;
}

static void test_cfg_list_names_configmap_layout(void **state)
{
    char **names = NULL;
    struct error err = {0};

    assert_int_equal(cfg_list_names(tmpdir, &names, &err), 0);
    /* ..data, the timestamped dir, .hidden, subdir and the dangling link are skipped */
    assert_int_equal(strv_length(names), 3);
    assert_string_equal(names[0], "any");
    assert_string_equal(names[1], "l20");
    assert_string_equal(names[2], "t4");
    strv_free(names);
    assert_int_equal(cfg_list_names("/nonexistent-gs", &names, &err), -ENOENT);
}

static void test_cfg_load_explicit_name(void **state)
{
    struct cfg_config *c = NULL;
    struct error err = {0};
    struct strbuf want = STRBUF_INIT;

    assert_int_equal(load(tmpdir, "l20", "any", NULL, 0, &c, &err), 0);
    assert_string_equal(c->config_name, "l20");
    strbuf_printf(&want, "%s/l20", tmpdir);
    assert_string_equal(c->source_path, want.buf);
    assert_int_equal(c->sharing.resources[0].replicas, 8);
    cfg_free(c);
    strbuf_release(&want);
}

static void test_cfg_load_unknown_name_lists_available(void **state)
{
    struct cfg_config *c = NULL;
    struct error err = {0};

    assert_int_equal(load(tmpdir, "a100", NULL, NULL, 0, &c, &err), -ENOENT);
    assert_null(c);
    assert_non_null(strstr(err.msg, "config 'a100' does not exist"));
    assert_non_null(strstr(err.msg, "available configs: any, l20, t4"));
    /* a name that exists but is not a regular file is unknown, too */
    assert_int_equal(load(tmpdir, "subdir", NULL, NULL, 0, &c, &err), -ENOENT);
}

static void test_cfg_load_rejects_traversal_names(void **state)
{
    static const char *const bad[] = {"../etc", "..data", "a/b",  "/etc/passwd", ".hidden",
                                      "..",     ".",      "x..y", "t4 ",         ""};
    for (size_t i = 0; i < GS_ARRAY_SIZE(bad); i++) {
        struct cfg_config *c = NULL;
        struct error err = {0};
        int r = load(tmpdir, bad[i], NULL, NULL, 0, &c, &err);
        if (r != -EINVAL)
            print_error("'%s': got %d %s\n", bad[i], r, err.msg);
        assert_int_equal(r, -EINVAL);
        assert_null(c);
        assert_non_null(strstr(err.msg, "config name"));
        /* the default name is checked the same way */
        assert_int_equal(load(tmpdir, NULL, bad[i][0] ? bad[i] : "..", NULL, 0, &c, &err), -EINVAL);
    }
}

static void test_cfg_load_default_name(void **state)
{
    struct cfg_config *c = NULL;
    struct error err = {0};

    assert_int_equal(load(tmpdir, NULL, "t4", NULL, 0, &c, &err), 0);
    assert_string_equal(c->config_name, "t4");
    assert_int_equal(c->sharing.resources[0].replicas, 3);
    cfg_free(c);
    assert_int_equal(load(tmpdir, NULL, "nope", NULL, 0, &c, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "default config 'nope' does not exist"));
}

static void test_cfg_load_fallbacks(void **state)
{
    static const enum cfg_fallback named_single[] = {CFG_FALLBACK_NAMED, CFG_FALLBACK_SINGLE};
    static const enum cfg_fallback named_single_empty[] = {CFG_FALLBACK_NAMED, CFG_FALLBACK_SINGLE,
                                                           CFG_FALLBACK_EMPTY};
    static const enum cfg_fallback single[] = {CFG_FALLBACK_SINGLE};
    struct cfg_config *c = NULL;
    struct error err = {0};

    /* three keys, none called default: named and single find nothing */
    assert_int_equal(load(tmpdir, NULL, NULL, named_single, 2, &c, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "fallbacks (named, single) found none"));
    assert_non_null(strstr(err.msg, "available configs: any, l20, t4"));
    /* empty: built-in defaults */
    assert_int_equal(load(tmpdir, NULL, NULL, named_single_empty, 3, &c, &err), 0);
    assert_null(c->config_name);
    assert_int_equal(c->sharing_strategy, CFG_SHARING_NONE);
    cfg_free(c);
    /* no fallbacks at all */
    assert_int_equal(load(tmpdir, NULL, NULL, NULL, 0, &c, &err), -ENOENT);
    /* named: a key called default */
    put_file(TS_DIR "/default", ts_config(6));
    put_link("..data/default", "default");
    assert_int_equal(load(tmpdir, NULL, NULL, named_single, 2, &c, &err), 0);
    assert_string_equal(c->config_name, "default");
    assert_int_equal(c->sharing.resources[0].replicas, 6);
    cfg_free(c);
    /* single: the only key */
    {
        char saved[256];
        memcpy(saved, tmpdir, sizeof(saved));
        snprintf(tmpdir + strlen(tmpdir), sizeof(tmpdir) - strlen(tmpdir), "/subdir");
        put_file("only", ts_config(7));
        assert_int_equal(load(tmpdir, NULL, NULL, single, 1, &c, &err), 0);
        assert_string_equal(c->config_name, "only");
        cfg_free(c);
        put_file("second", ts_config(7));
        assert_int_equal(load(tmpdir, NULL, NULL, single, 1, &c, &err), -ENOENT);
        memcpy(tmpdir, saved, sizeof(saved));
    }
}

static void test_cfg_load_invalid_named_config(void **state)
{
    struct cfg_config *c = NULL;
    struct cfg_diags d = CFG_DIAGS_INIT;
    struct error err = {0};
    struct strbuf want = STRBUF_INIT, got = STRBUF_INIT;
    struct cfg_load_options lo = {.path = tmpdir, .config_name = "broken"};

    put_link("..data/broken", "broken");
    assert_int_equal(cfg_load(&lo, &c, &d, &err), -EINVAL);
    assert_null(c);
    cfg_diags_format(&d, CFG_SEV_ERROR, &got);
    strbuf_printf(&want, "%s/broken:6:17: sharing.timeSlicing.resources[0].replicas: 0 is not",
                  tmpdir);
    assert_non_null(strstr(got.buf, want.buf));
    cfg_diags_release(&d);
    strbuf_release(&want);
    strbuf_release(&got);
}

static void test_cfg_load_file_and_name(void **state)
{
    struct strbuf p = STRBUF_INIT;
    struct cfg_config *c = NULL;
    struct error err = {0};

    /* a key mounted as a file (the seed's --config-file=/etc/.../t4) */
    strbuf_printf(&p, "%s/t4", tmpdir);
    assert_int_equal(load(p.buf, NULL, NULL, NULL, 0, &c, &err), 0);
    assert_null(c->config_name);
    cfg_free(c);
    assert_int_equal(load(p.buf, "t4", "ignored", NULL, 0, &c, &err), 0);
    assert_string_equal(c->config_name, "t4");
    cfg_free(c);
    assert_int_equal(load(p.buf, "l20", NULL, NULL, 0, &c, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "is a file, which holds one config named 't4', not 'l20'"));
    assert_int_equal(load(p.buf, "../x", NULL, NULL, 0, &c, &err), -EINVAL);
    strbuf_release(&p);
}

static void test_cfg_load_io_errors(void **state)
{
    struct cfg_config *c = NULL;
    struct error err = {0};
    struct strbuf p = STRBUF_INIT;
    char *big = calloc(1, CFG_MAX_INPUT_BYTES + 16);

    assert_int_equal(load("/nonexistent-gs/config.yaml", NULL, NULL, NULL, 0, &c, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent-gs/config.yaml"));
    assert_non_null(big);
    memset(big, '#', CFG_MAX_INPUT_BYTES + 15);
    put_file("big.yaml", big);
    strbuf_printf(&p, "%s/big.yaml", tmpdir);
    assert_int_equal(load(p.buf, NULL, NULL, NULL, 0, &c, &err), -EFBIG);
    assert_non_null(strstr(err.msg, "is larger than"));
    free(big);
    strbuf_release(&p);
}

static void test_cfg_load_defaults_with_overrides(void **state)
{
    struct cfg_overrides o;
    struct cfg_load_options lo = {.overrides = &o};
    struct cfg_config *c = NULL;

    cfg_overrides_init(&o, CFG_BIN_PLUGIN);
    assert_int_equal(cfg_overrides_set(&o, "MIG_STRATEGY", "mixed", NULL), 0);
    assert_int_equal(cfg_load(&lo, &c, NULL, NULL), 0);
    assert_int_equal(c->flags.mig_strategy, CFG_MIG_MIXED);
    assert_null(c->source_path);
    cfg_free(c);
    cfg_overrides_release(&o);
}

static void test_cfg_fallback_parse_table(void **state)
{
    enum cfg_fallback f;

    assert_int_equal(cfg_fallback_parse("named", &f), 0);
    assert_int_equal(f, CFG_FALLBACK_NAMED);
    assert_int_equal(cfg_fallback_parse("single", &f), 0);
    assert_int_equal(f, CFG_FALLBACK_SINGLE);
    assert_int_equal(cfg_fallback_parse("empty", &f), 0);
    assert_int_equal(f, CFG_FALLBACK_EMPTY);
    assert_int_equal(cfg_fallback_parse("Named", &f), -EINVAL);
}

const struct CMUnitTest load_tests[] = {
    cmocka_unit_test_setup_teardown(test_cfg_list_names_configmap_layout, setup_configmap,
                                    teardown_configmap),
    cmocka_unit_test_setup_teardown(test_cfg_load_explicit_name, setup_configmap,
                                    teardown_configmap),
    cmocka_unit_test_setup_teardown(test_cfg_load_unknown_name_lists_available, setup_configmap,
                                    teardown_configmap),
    cmocka_unit_test_setup_teardown(test_cfg_load_rejects_traversal_names, setup_configmap,
                                    teardown_configmap),
    cmocka_unit_test_setup_teardown(test_cfg_load_default_name, setup_configmap,
                                    teardown_configmap),
    cmocka_unit_test_setup_teardown(test_cfg_load_fallbacks, setup_configmap, teardown_configmap),
    cmocka_unit_test_setup_teardown(test_cfg_load_invalid_named_config, setup_configmap,
                                    teardown_configmap),
    cmocka_unit_test_setup_teardown(test_cfg_load_file_and_name, setup_configmap,
                                    teardown_configmap),
    cmocka_unit_test_setup_teardown(test_cfg_load_io_errors, setup_configmap, teardown_configmap),
    cmocka_unit_test(test_cfg_load_defaults_with_overrides),
    cmocka_unit_test(test_cfg_fallback_parse_table),
};
const size_t n_load_tests = GS_ARRAY_SIZE(load_tests);

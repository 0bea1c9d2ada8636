/* SPDX-License-Identifier: Apache-2.0 */
/* load.c: from bytes or a path to the effective config. Runs libfyaml with its errors
 * collected (not printed), picks a named config out of a ConfigMap mount directory the way
 * NVIDIA's config-manager does, and overlays flags and env vars. The only file access of
 * the config module is here: listing a directory and reading one file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libfyaml.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/internal.h"

#define MAX_DIR_ENTRIES 10000u /* named configs in one directory */

static void syntax_error(void *ctx, struct yaml_pos pos, const char *msg)
{
    cfg__diag(ctx, CFG_SEV_ERROR, (struct cfg_pos){pos.line, pos.col}, NULL, NULL,
              "invalid YAML/JSON: %s; fix the syntax at this position", msg);
}

/* true when the text holds nothing but blanks and comments: an empty config, like the
 * /dev/null that config-manager links for its "empty" fallback. */
static bool text_is_empty(const char *data, size_t len)
{
    bool comment = false;

    for (size_t i = 0; i < len; i++) {
        char ch = data[i];
        if (ch == '\n')
            comment = false;
        else if (ch == '#')
            comment = true;
        else if (!comment && ch != ' ' && ch != '\t' && ch != '\r')
            return false;
    }
    return true;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). YAML and JSON are
 * UTF-8 text, and libfyaml can loop forever on some invalid bytes, so they never reach it.
 * Returns true, or false with the 1-based position of the first bad byte. */
static bool utf8_valid(const char *data, size_t len, struct cfg_pos *ret_pos)
{
    const unsigned char *s = (const unsigned char *)data;
    unsigned line = 1, col = 1;

    for (size_t i = 0; i < len;) {
        unsigned char ch = s[i];
        size_t n = 0;
        uint32_t cp = 0, min = 0;

        if (ch < 0x80)
            n = 1, cp = ch;
        else if ((ch & 0xe0) == 0xc0)
            n = 2, cp = ch & 0x1f, min = 0x80;
        else if ((ch & 0xf0) == 0xe0)
            n = 3, cp = ch & 0x0f, min = 0x800;
        else if ((ch & 0xf8) == 0xf0)
            n = 4, cp = ch & 0x07, min = 0x10000;
        if (n == 0 || i + n > len)
            goto bad;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                goto bad;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            goto bad;
        if (ch == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
        i += n;
    }
    return true;
bad:
    *ret_pos = (struct cfg_pos){line, col};
    return false;
}

int cfg__utf8_check(const char *data, size_t len)
{
    struct cfg_pos pos;
    return utf8_valid(data, len, &pos) ? 0 : -EILSEQ;
}

int cfg_parse_buffer(const char *data, size_t len, const char *display_name,
                     const struct cfg_overrides *overrides, struct cfg_config **ret_cfg,
                     struct cfg_diags *diags, struct error *err)
{
    struct cfg__ctx c = {.file = display_name, .diags = diags};
    struct yaml_doc doc = {0};
    struct cfg_config *cfg = NULL;
    struct cfg_pos bad_pos;
    int r;

    if (!data) { /* no bytes at all: an empty config */
        data = "";
        len = 0;
    }
    if (len > CFG_MAX_INPUT_BYTES)
        return error_set(err, -E2BIG,
                         "%s: %zu bytes is too large for a config; the limit is "
                         "%u bytes",
                         display_name ? display_name : "config", len, CFG_MAX_INPUT_BYTES);
    r = cfg_new_default(&cfg, err);
    if (r < 0)
        return r;
    c.cfg = cfg;

    if (memchr(data, '\0', len)) {
        cfg__diag(&c, CFG_SEV_ERROR, (struct cfg_pos){0, 0}, NULL, NULL,
                  "the config holds a NUL byte; it must be YAML or JSON text");
    } else if (!utf8_valid(data, len, &bad_pos)) {
        cfg__diag(&c, CFG_SEV_ERROR, bad_pos, NULL, NULL,
                  "invalid UTF-8; save the config as UTF-8 text");
    } else if (text_is_empty(data, len)) {
        cfg__parse_document(&c, NULL);
    } else {
        r = yaml_parse(data, len, YAML_VERSION_1_2, &doc, syntax_error, &c, NULL, NULL, 0);
        if (r == -ENOMEM) {
            r = error_set(err, -ENOMEM, "out of memory creating the YAML parser");
            goto out;
        }
        if (r == 0) {
            c.doc = &doc;
            cfg__parse_document(&c, yaml_root(&doc));
        }
    }
    if (!c.oom && doc.fy)
        cfg__validate_sharing(&c);
    if (!c.oom && overrides) {
        r = cfg_overrides_apply(overrides, cfg, err);
        if (r < 0)
            goto out;
    }
    if (!c.oom)
        cfg__validate_overlaid(&c, overrides);
    if (c.oom) {
        r = error_set(err, -ENOMEM, "out of memory parsing %s",
                      display_name ? display_name : "the config");
        goto out;
    }
    if (c.n_errors > 0) {
        r = error_set(err, -EINVAL, "%s: %zu error%s in the config",
                      display_name ? display_name : "config", c.n_errors,
                      c.n_errors == 1 ? "" : "s");
        goto out;
    }
    *ret_cfg = cfg;
    cfg = NULL;
    r = 0;
out:
    yaml_doc_release(&doc);
    cfg_free(cfg);
    return r;
}

/* ---- named configs ----------------------------------------------------------------------- */

int cfg_fallback_parse(const char *s, enum cfg_fallback *ret)
{
    static const char *const names[] = {"named", "single", "empty", NULL};
    int i = cfg__lookup(names, s);

    if (i < 0)
        return -EINVAL;
    *ret = (enum cfg_fallback)i;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cfg_list_names(const char *dir, char ***ret_names, struct error *err)
{
    char **names = NULL;
    DIR *d = NULL;
    struct dirent *de;
    size_t n = 0;
    int r;

    names = strv_new();
    if (!names)
        return error_set(err, -ENOMEM, "out of memory");
    d = opendir(dir); /* glibc opens directories with O_CLOEXEC */
    if (!d) {
        r = error_set_errno(err, errno, "cannot open config directory '%s'", dir);
        goto out;
    }
    for (de = readdir(d); de; de = readdir(d)) {
        struct stat st;
        /* "..data", "..2024_01_01_..." are kubelet's internals, ".x" hidden files */
        if (de->d_name[0] == '.' || !cfg_config_name_valid(de->d_name, NULL))
            continue;
        /* keys are symlinks into ..data: follow them */
        if (fstatat(dirfd(d), de->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (++n > MAX_DIR_ENTRIES) {
            r = error_set(err, -E2BIG, "config directory '%s' holds more than %u entries", dir,
                          MAX_DIR_ENTRIES);
            goto out;
        }
        r = strv_push(&names, de->d_name);
        if (r < 0) {
            r = error_set(err, r, "out of memory");
            goto out;
        }
    }
    qsort(names, strv_length(names), sizeof(char *), cmp_str);
    *ret_names = names;
    names = NULL;
    r = 0;
out:
    if (d)
        closedir(d);
    strv_free(names);
    return r;
}

static void join_names(char *const *names, struct strbuf *out)
{
    if (!names[0]) {
        strbuf_puts(out, "(none)");
        return;
    }
    for (size_t i = 0; names[i]; i++)
        strbuf_printf(out, "%s%s", i ? ", " : "", names[i]);
}

static int pick_existing(const char *dir, char *const *names, const char *name, const char *what,
                         char **ret_name, struct error *err)
{
    struct strbuf sb = STRBUF_INIT;
    int r;

    if (!cfg_config_name_valid(name, err)) {
        error_prefix(err, "%s", what);
        return -EINVAL;
    }
    if (strv_contains(names, name)) {
        *ret_name = strdup(name);
        return *ret_name ? 0 : error_set(err, -ENOMEM, "out of memory");
    }
    join_names(names, &sb);
    r = error_set(err, -ENOENT, "%s '%s' does not exist in '%s'; available configs: %s", what, name,
                  dir, strbuf_str(&sb));
    strbuf_release(&sb);
    return r;
}

int cfg_select_name(const char *dir, const struct cfg_load_options *opts, char **ret_name,
                    struct error *err)
{
    static const char *const fb_names[] = {"named", "single", "empty"};
    struct strbuf sb = STRBUF_INIT;
    char **names = NULL;
    size_t n;
    int r;

    if (opts->config_name && !cfg_config_name_valid(opts->config_name, err)) {
        return -EINVAL;
    }
    r = cfg_list_names(dir, &names, err);
    if (r < 0)
        return r;
    n = strv_length(names);
    if (opts->config_name) {
        r = pick_existing(dir, names, opts->config_name, "config", ret_name, err);
        goto out;
    }
    if (opts->default_name && *opts->default_name) {
        r = pick_existing(dir, names, opts->default_name, "default config", ret_name, err);
        goto out;
    }
    for (size_t i = 0; i < opts->n_fallbacks; i++) {
        switch (opts->fallbacks[i]) {
        case CFG_FALLBACK_NAMED:
            if (strv_contains(names, "default")) {
                r = pick_existing(dir, names, "default", "config", ret_name, err);
                goto out;
            }
            break;
        case CFG_FALLBACK_SINGLE:
            if (n == 1) {
                r = pick_existing(dir, names, names[0], "config", ret_name, err);
                goto out;
            }
            break;
        case CFG_FALLBACK_EMPTY:
            *ret_name = NULL;
            r = 0;
            goto out;
        }
    }
    strbuf_puts(&sb, "no config selected: no name was given, no default, and the fallbacks (");
    for (size_t i = 0; i < opts->n_fallbacks; i++)
        strbuf_printf(&sb, "%s%s", i ? ", " : "", fb_names[opts->fallbacks[i] % 3]);
    strbuf_puts(&sb, ") found none; available configs: ");
    join_names(names, &sb);
    r = error_set(err, -ENOENT, "'%s': %s; pass a config name", dir, strbuf_str(&sb));
out:
    strbuf_release(&sb);
    strv_free(names);
    return r;
}

/* ---- load -------------------------------------------------------------------------------- */

int cfg_load(const struct cfg_load_options *opts, struct cfg_config **ret_cfg,
             struct cfg_diags *diags, struct error *err)
{
    struct strbuf file = STRBUF_INIT;
    struct cfg_config *cfg = NULL;
    char *name = NULL, *data = NULL;
    const char *base;
    size_t len = 0;
    struct stat st;
    int r;

    if (!opts->path) {
        r = cfg_parse_buffer("", 0, "defaults", opts->overrides, &cfg, NULL, err);
        goto done;
    }
    if (stat(opts->path, &st) < 0) {
        r = error_set_errno(err, errno, "cannot read config '%s'", opts->path);
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        r = cfg_select_name(opts->path, opts, &name, err);
        if (r < 0)
            goto out;
        if (!name) { /* the "empty" fallback: built-in defaults */
            char **names = NULL;
            if (diags && cfg_list_names(opts->path, &names, NULL) == 0 && strv_length(names) > 1) {
                struct cfg__ctx c = {.file = opts->path, .diags = diags};
                struct strbuf list = STRBUF_INIT;
                join_names(names, &list);
                /* capacity silently dropping to one device per GPU is the trap: say so */
                cfg__diag(&c, CFG_SEV_WARNING, (struct cfg_pos){0, 0}, CFG_DIAG_NO_CONFIG_NAME,
                          NULL,
                          "no config chosen among %s (no config name, no node label "
                          "nvidia.com/device-plugin.config, no default config): falling back to "
                          "the built-in defaults, no sharing; label the node or set "
                          "--config-name / --default-config",
                          strbuf_str(&list));
                strbuf_release(&list);
            }
            strv_free(names);
            r = cfg_parse_buffer("", 0, opts->path, opts->overrides, &cfg, NULL, err);
            goto done;
        }
        r = strbuf_printf(&file, "%s%s%s", opts->path, str_endswith(opts->path, "/") ? "" : "/",
                          name);
    } else {
        base = strrchr(opts->path, '/');
        base = base ? base + 1 : opts->path;
        if (opts->config_name && !str_eq(opts->config_name, base)) {
            if (!cfg_config_name_valid(opts->config_name, err)) {
                r = -EINVAL;
                goto out;
            }
            r = error_set(err, -ENOENT,
                          "'%s' is a file, which holds one config named '%s', "
                          "not '%s'; pass the ConfigMap directory to choose by name, or drop "
                          "the config name",
                          opts->path, base, opts->config_name);
            goto out;
        }
        if (opts->config_name) {
            name = strdup(opts->config_name);
            if (!name) {
                r = error_set(err, -ENOMEM, "out of memory");
                goto out;
            }
        }
        r = strbuf_puts(&file, opts->path);
    }
    if (r < 0) {
        r = error_set(err, r, "out of memory");
        goto out;
    }
    r = file_read_all(strbuf_str(&file), CFG_MAX_INPUT_BYTES, &data, &len, err);
    if (r == -EFBIG)
        r = error_set(err, -EFBIG,
                      "config '%s' is larger than %u bytes; the limit guards "
                      "against reading the wrong file",
                      strbuf_str(&file), CFG_MAX_INPUT_BYTES);
    if (r < 0)
        goto out;
    r = cfg_parse_buffer(data, len, strbuf_str(&file), opts->overrides, &cfg, diags, err);
done:
    if (r < 0)
        goto out;
    if (opts->path && !cfg__set_str(&cfg->source_path, file.len ? strbuf_str(&file) : opts->path)) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    cfg->config_name = name;
    name = NULL;
    *ret_cfg = cfg;
    cfg = NULL;
out:
    cfg_free(cfg);
    free(name);
    free(data);
    strbuf_release(&file);
    return r;
}

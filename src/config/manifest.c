/* SPDX-License-Identifier: Apache-2.0 */
/* manifest.c: the file people `kubectl apply` — a ConfigMap manifest (or a List of them, or
 * several YAML documents) whose data keys are named configs. Splits it into its configs with
 * where each value starts in the manifest, so that validation reports positions in the file
 * the user edits, not inside an embedded string. Reads text only; no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "config/config.h"
#include "config/internal.h"
#include "yaml/yaml.h"

static const char *scalar(struct fy_node *n, const char *key, size_t *ret_len)
{
    struct fy_node *v = yaml_lookup(n, key);

    if (!yaml_is_scalar(v))
        return NULL;
    return fy_node_get_scalar(v, ret_len);
}

/* Where the value's text starts: for a block scalar (|, >) the first content line after the
 * indicator and its indentation; for a flow scalar its own position (+1 past a quote). */
static void value_origin(const char *data, size_t len, struct fy_node *v, unsigned *ret_line,
                         unsigned *ret_col, bool *ret_block)
{
    struct fy_token *t = fy_node_get_scalar_token(v);
    const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
    enum fy_node_style st = fy_node_get_style(v);
    size_t pos;
    unsigned indent = 0;

    *ret_line = m ? (unsigned)m->line + 1 : 0;
    *ret_col = m ? (unsigned)m->column + 1 : 0;
    *ret_block = st == FYNS_LITERAL || st == FYNS_FOLDED;
    if (!m)
        return;
    if (!*ret_block) {
        *ret_col += st == FYNS_SINGLE_QUOTED || st == FYNS_DOUBLE_QUOTED;
        return;
    }
    pos = (size_t)m->input_pos;
    if (pos < len && (data[pos] == '|' || data[pos] == '>')) {
        /* the mark is at the indicator: the text starts on the next line */
        while (pos < len && data[pos] != '\n')
            pos++;
        pos++;
        *ret_line += 1;
    } else {
        while (pos > 0 && data[pos - 1] != '\n') /* the mark is in the text: its line */
            pos--;
    }
    while (pos + indent < len && data[pos + indent] == ' ')
        indent++;
    *ret_col = indent + 1;
}

static int add_configs(const char *data, size_t len, struct fy_node *cm, struct cfg_manifest *out)
{
    struct fy_node *d = fy_node_mapping_lookup_by_string(cm, "data", FY_NT);
    struct fy_node_pair *p;
    void *it = NULL;

    if (!d || fy_node_get_type(d) != FYNT_MAPPING)
        return 0; /* a ConfigMap without data holds no config */
    while ((p = fy_node_mapping_iterate(d, &it))) {
        struct fy_node *k = fy_node_pair_key(p), *v = fy_node_pair_value(p);
        struct cfg_manifest_config *c, *grown;
        size_t klen = 0, vlen = 0;
        const char *ks = k ? fy_node_get_scalar(k, &klen) : NULL;
        const char *vs =
            v && fy_node_get_type(v) == FYNT_SCALAR ? fy_node_get_scalar(v, &vlen) : NULL;

        if (!ks)
            continue;
        grown = realloc(out->configs, (out->n_configs + 1) * sizeof(*grown));
        if (!grown)
            return -ENOMEM;
        out->configs = grown;
        c = &out->configs[out->n_configs];
        memset(c, 0, sizeof(*c));
        c->name = strndup(ks, klen);
        c->text = strndup(vs ? vs : "", vs ? vlen : 0);
        c->len = vs ? vlen : 0;
        c->not_a_string = !vs;
        if (v)
            value_origin(data, len, v, &c->line, &c->col, &c->block);
        out->n_configs++;
        if (!c->name || !c->text)
            return -ENOMEM;
    }
    return 0;
}

/* A ConfigMap, or a List whose items are ConfigMaps: 1 when it was one. */
static int add_document(const char *data, size_t len, struct fy_node *root,
                        struct cfg_manifest *out)
{
    size_t n = 0;
    const char *kind = scalar(root, "kind", &n);
    struct fy_node *items, *item;
    void *it = NULL;
    int r, found = 0;

    if (!kind)
        return 0;
    if (n == strlen("ConfigMap") && memcmp(kind, "ConfigMap", n) == 0) {
        r = add_configs(data, len, root, out);
        return r < 0 ? r : 1;
    }
    if (n != strlen("List") || memcmp(kind, "List", n) != 0)
        return 0;
    items = fy_node_mapping_lookup_by_string(root, "items", FY_NT);
    while (items && fy_node_get_type(items) == FYNT_SEQUENCE &&
           (item = fy_node_sequence_iterate(items, &it))) {
        r = add_document(data, len, item, out);
        if (r < 0)
            return r;
        found |= r;
    }
    return found;
}

int cfg_manifest_parse(const char *data, size_t len, struct cfg_manifest *ret, struct error *err)
{
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2};
    struct cfg_manifest m = {0};
    struct fy_parser *fyp = NULL;
    struct fy_document *doc;
    int r = 0, found = 0;

    /* only text that can be a manifest: NULs and invalid UTF-8 are the config parser's to
     * report (libfyaml must not see invalid UTF-8) */
    if (len == 0 || memchr(data, '\0', len) || !memmem(data, len, "ConfigMap", 9) ||
        cfg__utf8_check(data, len) < 0)
        return 0;
    fyp = fy_parser_create(&pcfg);
    if (!fyp || fy_parser_set_string(fyp, data, len) != 0) {
        r = error_set(err, -ENOMEM, "out of memory creating the YAML parser");
        goto out;
    }
    while ((doc = fy_parse_load_document(fyp))) {
        r = add_document(data, len, fy_document_root(doc), &m);
        fy_parse_document_destroy(fyp, doc);
        if (r < 0) {
            error_set(err, r, "out of memory reading the ConfigMap");
            goto out;
        }
        found |= r;
    }
    r = 0;
    if (found) {
        *ret = m;
        memset(&m, 0, sizeof(m));
        r = 1;
    }
out:
    cfg_manifest_release(&m);
    if (fyp)
        fy_parser_destroy(fyp);
    return r;
}

void cfg_manifest_release(struct cfg_manifest *m)
{
    for (size_t i = 0; m && i < m->n_configs; i++) {
        free(m->configs[i].name);
        free(m->configs[i].text);
    }
    if (m) {
        free(m->configs);
        m->configs = NULL;
        m->n_configs = 0;
    }
}

void cfg_manifest_place(const struct cfg_manifest_config *c, const char *file,
                        struct cfg_diags *diags)
{
    for (size_t i = 0; i < diags->n_items; i++) {
        struct cfg_diag *d = &diags->items[i];
        char *f = file ? strdup(file) : NULL;

        if (f) {
            free(d->file);
            d->file = f;
        }
        if (!d->line) {
            d->line = c->line;
            d->col = c->col;
        } else if (c->block) {
            d->line += c->line - 1;
            d->col += c->col - 1;
        } else {
            if (d->line == 1)
                d->col += c->col - 1;
            d->line += c->line - 1;
        }
    }
}

static int cmp_diag(const void *a, const void *b)
{
    const struct cfg_diag *x = a, *y = b;

    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->col != y->col)
        return x->col < y->col ? -1 : 1;
    return (int)x->severity - (int)y->severity;
}

void cfg_diags_sort(struct cfg_diags *diags)
{
    if (diags->n_items > 1)
        qsort(diags->items, diags->n_items, sizeof(*diags->items), cmp_diag);
}

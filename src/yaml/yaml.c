/* SPDX-License-Identifier: Apache-2.0 */
/* yaml.c: parsing with collected diagnostics, node positions and scalar text (yaml.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "yaml/yaml.h"

struct yaml_pos yaml_pos(struct fy_node *n)
{
    struct fy_token *t;
    const struct fy_mark *m;
    void *it = NULL;

    if (!n)
        return (struct yaml_pos){0, 0};
    switch (fy_node_get_type(n)) {
    case FYNT_SCALAR:
        t = fy_node_get_scalar_token(n);
        m = t ? fy_token_start_mark(t) : NULL;
        return m ? (struct yaml_pos){(unsigned)m->line + 1, (unsigned)m->column + 1}
                 : (struct yaml_pos){0, 0};
    case FYNT_MAPPING: {
        struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);
        return yaml_pos(p ? fy_node_pair_key(p) : NULL);
    }
    case FYNT_SEQUENCE:
        return yaml_pos(fy_node_sequence_iterate(n, &it));
    }
    return (struct yaml_pos){0, 0};
}

/* Hands every collected error to on_error; the first into ret_first_*. */
static void report_errors(struct fy_diag *diag, yaml_error_fn on_error, void *ctx,
                          struct yaml_pos *ret_first_pos, char *ret_first_msg, size_t msg_size)
{
    struct fy_diag_error *e;
    void *it = NULL;
    bool first = true;

    for (e = diag ? fy_diag_errors_iterate(diag, &it) : NULL; e;
         e = fy_diag_errors_iterate(diag, &it)) {
        struct yaml_pos pos = {e->line > 0 ? (unsigned)e->line : 0,
                               e->column > 0 ? (unsigned)e->column : 0};
        const char *msg = e->msg ? e->msg : "syntax error";
        if (on_error)
            on_error(ctx, pos, msg);
        if (first && ret_first_pos)
            *ret_first_pos = pos;
        if (first && ret_first_msg && msg_size)
            str_copy(ret_first_msg, msg, msg_size);
        first = false;
    }
    if (first && on_error)
        on_error(ctx, (struct yaml_pos){0, 0}, "syntax error");
}

int yaml_parse(const char *src, size_t len, unsigned flags, struct yaml_doc *ret,
               yaml_error_fn on_error, void *ctx, struct yaml_pos *ret_first_pos,
               char *ret_first_msg, size_t msg_size)
{
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET};
    struct fy_diag_cfg dcfg;
    struct fy_diag *diag;
    struct fy_document *doc;

    memset(ret, 0, sizeof(*ret));
    if (ret_first_pos)
        *ret_first_pos = (struct yaml_pos){0, 0};
    if (ret_first_msg && msg_size)
        str_copy(ret_first_msg, "syntax error", msg_size);
    if (memchr(src, '\0', len)) {
        if (ret_first_msg && msg_size)
            str_copy(ret_first_msg, "the text holds a NUL byte", msg_size);
        if (on_error)
            on_error(ctx, (struct yaml_pos){0, 0}, "the text holds a NUL byte");
        return -EINVAL;
    }
    pcfg.flags |=
        (flags & YAML_VERSION_1_2) ? FYPCF_DEFAULT_VERSION_1_2 : FYPCF_DEFAULT_VERSION_AUTO;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.colorize = false;
    diag = fy_diag_create(&dcfg);
    if (!diag)
        return -ENOMEM;
    fy_diag_set_collect_errors(diag, true);
    pcfg.diag = diag;
    doc = fy_document_build_from_string(&pcfg, src, len);
    if (doc && (flags & YAML_RESOLVE) && fy_document_resolve(doc) != 0) {
        fy_document_destroy(doc);
        doc = NULL;
    }
    if (!doc)
        report_errors(diag, on_error, ctx, ret_first_pos, ret_first_msg, msg_size);
    fy_diag_destroy(diag);
    if (!doc)
        return -EINVAL;
    ret->fy = doc;
    ret->src = src;
    ret->len = len;
    return 0;
}

void yaml_doc_release(struct yaml_doc *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_owned; i++)
        free(d->owned[i]);
    free(d->owned);
    fy_document_destroy(d->fy);
    memset(d, 0, sizeof(*d));
}

struct fy_node *yaml_root(const struct yaml_doc *d)
{
    return d && d->fy ? fy_document_root(d->fy) : NULL;
}

/* Keeps s until the document goes; NULL (and s freed) when out of memory. */
static const char *keep(struct yaml_doc *d, char *s)
{
    if (!s)
        return NULL;
    if (d->n_owned == d->alloc_owned) {
        size_t na = d->alloc_owned ? 2 * d->alloc_owned : 8;
        char **p = realloc(d->owned, na * sizeof(*p));
        if (!p) {
            free(s);
            return NULL;
        }
        d->owned = p;
        d->alloc_owned = na;
    }
    d->owned[d->n_owned++] = s;
    return s;
}

const char *yaml_text(struct yaml_doc *d, struct fy_node *n, bool *ret_oom)
{
    const char *s;
    size_t len;

    if (!n || fy_node_get_type(n) != FYNT_SCALAR || fy_node_is_alias(n))
        return NULL;
    if (fy_node_get_style(n) == FYNS_SINGLE_QUOTED && d && d->src) {
        struct fy_token *t = fy_node_get_scalar_token(n);
        const struct fy_mark *a = t ? fy_token_start_mark(t) : NULL;
        const struct fy_mark *b = t ? fy_token_end_mark(t) : NULL;
        if (!a || !b || a->input_pos > b->input_pos || (size_t)b->input_pos > d->len)
            return NULL;
        s = keep(d, str_yaml_single_quoted(d->src, a->input_pos, b->input_pos));
        if (!s && ret_oom)
            *ret_oom = true;
        return s;
    }
    s = fy_node_get_scalar0(n);
    if (!s || (fy_node_get_scalar(n, &len) && strlen(s) != len))
        return NULL;
    return s;
}

struct fy_node *yaml_lookup(struct fy_node *map, const char *key)
{
    if (!map || fy_node_get_type(map) != FYNT_MAPPING)
        return NULL;
    return fy_node_mapping_lookup_by_string(map, key, FY_NT);
}

bool yaml_is_plain(struct fy_node *n)
{
    return n && fy_node_get_style(n) == FYNS_PLAIN;
}

bool yaml_is_scalar(struct fy_node *n)
{
    return n && fy_node_get_type(n) == FYNT_SCALAR;
}

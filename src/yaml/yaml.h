/* SPDX-License-Identifier: Apache-2.0 */
/* yaml: the one YAML layer. Parses text into a libfyaml document with its diagnostics
 * collected (never printed), says where a node starts, and gives a scalar's text — single-
 * quoted scalars decoded from the source by base/ (libfyaml 0.7.12 leaks the buffer it makes
 * for them, and drops characters on '' runs). Used by config/, mig/ and kube/; callers walk
 * the document with libfyaml's own node calls. */
#ifndef GS_YAML_H
#define GS_YAML_H

#include <libfyaml.h>
#include <stdbool.h>
#include <stddef.h>

/* 1-based line and column; {0, 0} when unknown. */
struct yaml_pos {
    unsigned line, col;
};

/* Where n starts: a scalar by its token, a mapping by its first key, a sequence by its first
 * item; {0, 0} for NULL or an empty collection. */
struct yaml_pos yaml_pos(struct fy_node *n);

#define YAML_VERSION_1_2 1u /* YAML 1.2 when the text says nothing (else: auto) */
#define YAML_RESOLVE 2u     /* resolve anchors and aliases (merge keys) after parsing */

/* A parsed document and the text it came from (borrowed: it must outlive the document). */
struct yaml_doc {
    struct fy_document *fy;
    const char *src;
    size_t len;
    char **owned; /* scalars decoded for yaml_text, freed with the document */
    size_t n_owned, alloc_owned;
};

/* Called for each syntax error libfyaml collected, in order (pos {0,0} when it had none). */
typedef void (*yaml_error_fn)(void *ctx, struct yaml_pos pos, const char *msg);

/* Parses src[0..len) (flags: YAML_*). 0 and *ret filled; -EINVAL when the text is not YAML
 * (each error handed to on_error, when given; *ret_first, when not NULL, gets the first one's
 * position and text, "syntax error" when libfyaml said nothing); -ENOMEM. Text holding a NUL
 * byte is not YAML. Release *ret with yaml_doc_release() when 0 was returned. */
int yaml_parse(const char *src, size_t len, unsigned flags, struct yaml_doc *ret,
               yaml_error_fn on_error, void *ctx, struct yaml_pos *ret_first_pos,
               char *ret_first_msg, size_t msg_size);
void yaml_doc_release(struct yaml_doc *d);
struct fy_node *yaml_root(const struct yaml_doc *d);

/* The scalar's text, NUL-terminated, owned by the document: NULL for NULL, a collection, an
 * alias, a scalar holding a NUL byte, or when out of memory (*ret_oom set, when given). */
const char *yaml_text(struct yaml_doc *d, struct fy_node *n, bool *ret_oom);
/* The value at `key` of mapping map; NULL when absent or map is not a mapping. */
struct fy_node *yaml_lookup(struct fy_node *map, const char *key);
/* A plain (unquoted) scalar: the one kind whose `true`, `null` or `42` mean what they say. */
bool yaml_is_plain(struct fy_node *n);
bool yaml_is_scalar(struct fy_node *n);

#endif

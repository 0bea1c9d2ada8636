/* SPDX-License-Identifier: Apache-2.0 */
/* config/internal.h: what the config module's own files share (never included from
 * outside src/config/): the diagnostics sink used while parsing and validating, the
 * enum name tables, and the pieces of the loader. */
#ifndef GS_CONFIG_INTERNAL_H
#define GS_CONFIG_INTERNAL_H

#include "config/config.h"
#include "yaml/yaml.h"

/* Where the parser is while it walks a document. Positions of a few keys are kept for
 * the cross-checks that run after flags and env vars were applied. */
struct cfg__ctx {
    const char *file;        /* display name for diagnostics */
    struct cfg_diags *diags; /* may be NULL: count only */
    size_t n_errors;         /* errors found, also when diags is NULL */
    bool oom;                /* an allocation failed: stop and report -ENOMEM */
    struct cfg_config *cfg;
    bool fail_requests_set; /* sharing.*.failRequestsGreaterThanOne was written */
    bool both_sharing;      /* timeSlicing and mps were both given */
    struct cfg_pos pos_mig_strategy;
    struct cfg_pos pos_mps_root;
    struct cfg_pos pos_sharing; /* the sharing.<strategy> key */
    struct yaml_doc *doc;       /* the document being parsed (NULL: an empty config) */
};

/* Records a diagnostic; the message is formatted from fmt. `value` may be NULL. */
void cfg__diag(struct cfg__ctx *c, enum cfg_severity sev, struct cfg_pos pos, const char *path,
               const char *value, const char *fmt, ...) GS_PRINTF(6, 7);

/* Value tables, NULL-terminated, indexed by the matching enum. */
extern const char *const cfg__mig_strategies[];
extern const char *const cfg__device_id_strategies[];
extern const char *const cfg__alloc_policies[];
extern const char *const cfg__discovery_strategies[];
extern const char *const cfg__list_strategies[]; /* bit i = CFG_LIST_* (1u << i) */

/* Index of s in table, or -1. */
int cfg__lookup(const char *const *table, const char *s);
/* "'a', 'b' or 'c'" into out. */
int cfg__join_allowed(const char *const *table, struct strbuf *out);
/* Parses a comma-separated deviceListStrategy value into bits; on failure *ret_bad points
 * into s at the bad entry (length *ret_bad_len). */
int cfg__list_strategies_parse(const char *s, unsigned *ret_bits, const char **ret_bad,
                               size_t *ret_bad_len);

/* Parses `root` (a whole document, may be NULL for an empty one) into c->cfg, which holds
 * the defaults already. Problems go to c. */
struct fy_node;
void cfg__parse_document(struct cfg__ctx *c, struct fy_node *root);
/* Cross-entry checks of the sharing section (overlaps, renames, MPS limits). */
void cfg__validate_sharing(struct cfg__ctx *c);
/* Checks that need the overlaid values (MPS root, MPS with mixed). */
void cfg__validate_overlaid(struct cfg__ctx *c, const struct cfg_overrides *o);

void cfg__resource_pattern_release(struct cfg_resource_pattern *p);
void cfg__replicated_release(struct cfg_replicated_resource *r);
/* Replaces *dst with a copy of s; false when out of memory. */
bool cfg__set_str(char **dst, const char *s);

/* ---- descriptor tables of the flags sections (fields.c) ----------------------------------- */

#define CFG__MAX_FIELDS 16

enum cfg__ftype {
    CFG__F_BOOL,
    CFG__F_STR,
    CFG__F_STR_EMPTY_NULL, /* "" means unset (NULL) */
    CFG__F_ENUM,           /* an int-sized enum, named by `values` */
    CFG__F_DURATION,       /* int64_t ms; "infinite" is -1 */
    CFG__F_LIST_STRATEGIES,
    CFG__F_SECTION, /* a nested mapping: `sub` */
};

struct cfg__section;

struct cfg__field {
    const char *key; /* as written in the file */
    enum cfg__ftype type;
    size_t off; /* offsetof(struct cfg_config, ...) */
    const char *const *values;
    const struct cfg__section *sub;
    size_t pos_off; /* offsetof(struct cfg__ctx, pos_...) + 1 to record where it was; 0 none */
};

struct cfg__section {
    const char *path; /* "flags", "flags.plugin" */
    const struct cfg__field *fields;
    size_t n;
};

extern const struct cfg__section cfg__flags_section;
/* The keys of s, NULL-terminated (for walk_map). */
const char *const *cfg__section_keys(const struct cfg__section *s);
/* The field a config key path names ("flags.plugin.deviceIDStrategy"), or NULL. */
const struct cfg__field *cfg__field_find(const char *path);
void *cfg__field_ptr(const struct cfg__field *f, struct cfg_config *cfg);
/* Sets f from its string form (a flag or env value): -EINVAL when it does not parse. */
int cfg__field_set(const struct cfg__field *f, struct cfg_config *cfg, const char *v);

/* 0 for valid UTF-8, -EILSEQ otherwise (libfyaml must never see invalid UTF-8). */
int cfg__utf8_check(const char *data, size_t len);

#endif

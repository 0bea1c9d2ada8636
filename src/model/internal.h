/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h: what the model's own files share (never included from outside src/model/).
 * Small helpers for growing arrays, recording diagnostics and matching names. */
#ifndef GS_MODEL_INTERNAL_H
#define GS_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"

/* Makes room for one more element in *arr (n used, *alloc allocated). 0 or -ENOMEM;
 * the array is untouched on failure. */
int model__grow(void **arr, size_t *alloc, size_t n, size_t elem_size);

/* Appends a diagnostic to m; counts errors. -ENOMEM only. */
int model__diag(struct model *m, enum model_diag_level level, const char *fmt, ...) GS_PRINTF(3, 4);

/* '*'-glob, anchored at both ends ("*T4*", "1g.10gb"). */
bool model__glob_match(const char *pattern, const char *s);

/* "nvidia-<part after the last slash>.sock"; owned, NULL on ENOMEM. */
char *model__socket_name(const char *resource_name);

/* True for compute-instance sub-slice profiles ("1c.2g.20gb"): C != G. */
bool model__profile_is_subslice(const char *profile);

/* (Re)builds res->by_id, the sorted index for model_resource_find_device(). -ENOTUNIQ for
 * duplicate IDs, -ENOMEM. */
int model__index_by_id(struct model_resource *res);

#endif

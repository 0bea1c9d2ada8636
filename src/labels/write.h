/* SPDX-License-Identifier: Apache-2.0 */
/* write.h: the writers of a label set (library gs_labels_write, over base/ and kube/):
 * NFD's local-source file, the NodeFeature object, or a merge patch of the Node's labels
 * that removes only the labels gpuslice set before (recorded in an annotation). */
#ifndef GS_LABELS_WRITE_H
#define GS_LABELS_WRITE_H

#include <stdbool.h>

#include "labels/labels.h"

struct kube_client;

/* Lists the label keys gpuslice set on the Node (comma-separated), so a later patch removes
 * exactly those that went away and never a label someone else set. */
#define LABELS_OWNED_ANNOTATION "gpuslice.io/labels"

/* "key=value\n" lines, sorted as the set is. Owned. -ENOMEM. */
int labels_format(const struct labels_set *s, char **ret_text);
/* NFD local-source file, written atomically with mode 0644; path NULL or "" = stdout. */
int labels_write_file(const struct labels_set *s, const char *path, struct error *err);
/* Creates or updates nfd.k8s-sigs.io/v1alpha1 NodeFeature "nvidia-features-for-<node>" in ns
 * (label nfd.node.kubernetes.io/node-name, spec.labels = s, ownerReferences to pod when it
 * can be read). Writes only when spec.labels differ; *ret_changed says whether it did. */
int labels_write_nodefeature(struct kube_client *c, const char *ns, const char *node,
                             const char *pod, const struct labels_set *s, bool *ret_changed,
                             struct error *err);
/* Merge-patches the Node's labels to s, deleting the keys recorded in
 * LABELS_OWNED_ANNOTATION that s lacks, and records s's keys there. */
int labels_patch_node(struct kube_client *c, const char *node, const struct labels_set *s,
                      struct error *err);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* write.h: the writers of a label set (library gs_labels_write, over base/ and kube/):
 * NFD's local-source file, the NodeFeature object, or a merge patch of the Node's labels
 * that removes only the labels gpuslice set before (recorded in an annotation). */
#ifndef GS_LABELS_WRITE_H
#define GS_LABELS_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* ---- host facts (host.c) ------------------------------------------------------------------ */

#define LABELS_MACHINE_TYPE_FILE "/sys/class/dmi/id/product_name"

struct labels_host {
    char *machine_type;  /* owned; NULL when unreadable */
    uint32_t *pci_class; /* owned, one per GPU (0 unknown) */
    bool vgpu_present;
    bool vgpu_unreadable; /* a config space was cut at 64 bytes: not privileged */
    char vgpu_version[16], vgpu_branch[16];
};

/* Reads the machine type (machine_type_file, NULL: the DMI default), each GPU's PCI class
 * and the vGPU capability of NVIDIA PCI functions under sysfs_root (NULL: /sys). Missing
 * files leave a field unknown; only -ENOMEM fails. labels_host_release() frees. */
int labels_host_read(const struct inv_inventory *inv, const char *sysfs_root,
                     const char *machine_type_file, struct labels_host *h);
/* Points o's host fields at h (h must outlive o's use). */
void labels_host_apply(const struct labels_host *h, struct labels_options *o);
void labels_host_release(struct labels_host *h);

/* The vGPU capability in a PCI config space (GFD's rule: vendor-specific capability whose
 * bytes 3..4 are "VF"; the host driver version and branch from its type-0 record). 1: a
 * vGPU, 0: not, -EACCES: fewer than 256 bytes (the capabilities need a privileged read).
 * Pure. */
int labels_vgpu_parse(const unsigned char *cfg, size_t len, char *version, size_t vsize,
                      char *branch, size_t bsize);

#endif

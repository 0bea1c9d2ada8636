/* SPDX-License-Identifier: Apache-2.0 */
/* labels.h: the node labels of GPU feature discovery, computed from the same inventory and
 * resource model the device plugin serves, so labels and capacity never disagree.
 * Pure: no I/O, no clock (the caller passes the timestamp, machine type and PCI class).
 * NVIDIA's keys and value rules (facts nvidia-device-plugin.md §7.3), plus what NVIDIA's
 * GFD gets wrong or leaves out: per-model label sets on nodes with several GPU models, and
 * per-resource labels for renamed resources. docs/labels.md lists every label. */
#ifndef GS_LABELS_H
#define GS_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "gpu/inventory.h"
#include "model/model.h"

#define LABELS_PREFIX "nvidia.com/"
#define LABELS_VALUE_MAX 63 /* characters in a label value (and a key's name part) */

struct labels_options {
    bool no_timestamp;
    int64_t timestamp;        /* unix seconds for nvidia.com/gfd.timestamp */
    const char *machine_type; /* DMI product name as read; NULL or "" -> "unknown" */
    /* PCI class of each GPU by index (0x0302 compute, 0x0300 graphics, 0 unknown); NULL
     * when not read: gpu.mode is then "unknown", as GFD says when it cannot tell. */
    const uint32_t *pci_class;
    bool vgpu_present;
    /* from the vGPU capability of a vGPU guest's PCI config space (labels_vgpu_parse) */
    const char *vgpu_host_driver_version;
    const char *vgpu_host_driver_branch;
};

struct labels_label {
    char *key;   /* owned */
    char *value; /* owned */
};

struct labels_set {
    struct labels_label *labels; /* owned, sorted by key, keys unique */
    size_t n_labels;
};

/* Computes the node's labels. inv and model describe the same node (the model built from
 * inv with the effective config). On success *ret_set is owned by the caller
 * (labels_set_free()). -EINVAL with err when NVIDIA's GFD would fail to label (a driver
 * version that is not 2-3 dot-separated parts, MPS on a MIG-enabled GPU); -ENOMEM. */
int labels_compute(const struct inv_inventory *inv, const struct model *model,
                   const struct labels_options *opts, struct labels_set **ret_set,
                   struct error *err);

/* Frees everything; accepts NULL. */
void labels_set_free(struct labels_set *set);

/* The value of key, borrowed from set; NULL when absent. */
const char *labels_get(const struct labels_set *set, const char *key);

/* GFD's sanitising of product names: characters outside [A-Za-z0-9-_. ] dropped, runs of
 * whitespace become one '-'. Writes at most size bytes including the NUL. */
void labels_sanitise(const char *in, char *out, size_t size);

/* Any string as a valid label value: labels_sanitise, then cut to LABELS_VALUE_MAX
 * characters and trimmed to a letter or digit at both ends ("" stays ""). A value GFD
 * writes that the API accepts comes out unchanged. Writes at most size bytes with the NUL;
 * in and out must not overlap. Every value labels_compute returns went through it. */
void labels_value_sanitise(const char *in, char *out, size_t size);

/* True when key is a valid Kubernetes label key (optional DNS prefix + '/', name of 1-63
 * characters [A-Za-z0-9-_.], alphanumeric at both ends) and value a valid label value. */
bool labels_valid(const char *key, const char *value);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* config.h: mig-parted's config file (facts B.1) as plain structs, and which entry decides a
 * GPU. Part of gs_mig; the parser reads YAML through libfyaml. */
#ifndef GS_MIG_CONFIG_H
#define GS_MIG_CONFIG_H

#include "mig/mig.h"

#define MIG_CONFIG_MAX_FILTERS 32
#define MIG_CONFIG_MAX_DEVICES 16

struct mig_config_device {
    char name[40]; /* as written: "1g.10gb", "1g.10gb+me" */
    struct mig_profile_spec spec;
    unsigned count;
};

struct mig_config_entry {
    uint32_t device_filter[MIG_CONFIG_MAX_FILTERS]; /* 0xDDDDVVVV; none: every GPU */
    size_t n_filter;
    bool all_devices;
    uint64_t device_mask; /* bit i: GPU index i, when not all_devices */
    bool mig_enabled;
    struct mig_config_device devices[MIG_CONFIG_MAX_DEVICES];
    size_t n_devices;
    unsigned line;
};

struct mig_config_set {
    char *label;
    struct mig_config_entry *entries;
    size_t n;
    unsigned line;
};

struct mig_config {
    char *file;
    struct mig_config_set *sets;
    size_t n;
};

/* path: a file, "-" for stdin, or a ConfigMap directory (config.yaml or its only key). */
int mig_config_load(const char *path, struct mig_config **ret, struct error *err);
int mig_config_parse(const char *src, size_t len, const char *file, struct mig_config **ret,
                     struct error *err);
void mig_config_free(struct mig_config *c);
/* label NULL/"": the only one (an error when there are several). NULL + err when unknown,
 * naming the labels there are. */
const struct mig_config_set *mig_config_find(const struct mig_config *c, const char *label,
                                             struct error *err);
bool mig_config_entry_selects(const struct mig_config_entry *e, unsigned index, uint32_t pci_id);
/* The entry that decides GPU index/pci_id: the last that selects it (mig-parted applies
 * them in order), NULL when none does. */
const struct mig_config_entry *mig_config_for_gpu(const struct mig_config_set *s, unsigned index,
                                                  uint32_t pci_id);
/* e's mig-devices as what they ask of a GPU of model m (GPU instances per m->profiles index,
 * and compute-instance sub-profiles); an unknown profile on m is -EINVAL. */
int mig_config_want(const struct mig_config_entry *e, const struct mig_gpu_model *m,
                    struct mig_want *ret, struct error *err);

/* ---- hooks (facts B.5) ------------------------------------------------------------------ */

#define MIG_HOOK_NAMES 4 /* apply-start, pre-apply-mode, pre-apply-config, apply-exit */

struct mig_hook {
    char *command;
    char **args;   /* strv */
    char **envs;   /* strv of K=V */
    char *workdir; /* NULL: inherit */
};

struct mig_hooks {
    struct mig_hook *list[MIG_HOOK_NAMES];
    size_t n[MIG_HOOK_NAMES];
};

/* Index of a hook name, -1 when unknown. */
int mig_hook_index(const char *name);
int mig_hooks_load(const char *path, struct mig_hooks *ret, struct error *err);
void mig_hooks_release(struct mig_hooks *h);

#endif

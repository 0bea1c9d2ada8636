/* SPDX-License-Identifier: Apache-2.0 */
/* mig.h: MIG partitioning. The GPU-instance profile catalog per GPU model (facts part A),
 * mig-parted's profile grammar and config file (part B), and an exact placement planner:
 * wanted instances -> a placement per GPU or an explanation, the closest layouts that fit,
 * and the capacity a layout strands. All pure (the config parser reads a file); applying a
 * layout through NVML is gpu/'s job (gpu/mig.h), driven by cli/cmd_mig.c and daemon/mig.c.
 * docs/mig.md tells the user-facing side. */
#ifndef GS_MIG_H
#define GS_MIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define MIG_MAX_INSTANCES 8 /* GPU instances one GPU can hold (7 compute slices, 8 memory) */
#define MIG_MAX_PROFILES 32 /* GPU-instance profiles of one model */
#define MIG_MAX_CI 8        /* compute instances in one GPU instance (7 compute slices) */

/* ---- catalog ------------------------------------------------------------------------------- */

/* One GPU-instance profile of one GPU model (nvidia-smi mig -lgip / -lgipp). */
struct mig_profile {
    unsigned index;          /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;             /* what nvidia-smi shows and create/placements take */
    unsigned slices;         /* memory slices = placement size */
    unsigned compute_slices; /* the "Ng" */
    unsigned sms;
    unsigned memory_mib;
    unsigned dec, enc, ce, jpeg, ofa;
    unsigned max_instances;
    unsigned starts_mask; /* bit s set: s is an allowed placement start */
    const char *name;     /* "1g.10gb", "1g.10gb+me" */
};

struct mig_gpu_model {
    const char *name;        /* NVML's name: "NVIDIA A100-SXM4-80GB" */
    const uint32_t *pci_ids; /* 0xDDDDVVVV, 0-terminated: device-filter values */
    uint64_t memory_mib;     /* as NVML reports it */
    unsigned mem_slices;     /* 8 or 4 */
    unsigned compute_slices; /* 7 or 4 */
    const struct mig_profile *profiles;
    size_t n_profiles;
};

/* The MIG-capable models we know (A100 40/80GB, A30, H100 SXM/PCIe/NVL, H200 SXM/NVL, H20,
 * GH200): i from 0 until NULL. */
const struct mig_gpu_model *mig_model_get(size_t i);
/* By NVML name, case-insensitively, with or without the "NVIDIA " prefix, or by PCI device
 * id ("0x20B010DE"). NULL when unknown. */
const struct mig_gpu_model *mig_model_find(const char *name);
const struct mig_profile *mig_profile_by_name(const struct mig_gpu_model *m, const char *name);
const struct mig_profile *mig_profile_by_id(const struct mig_gpu_model *m, unsigned id);

/* ---- profile strings (mig-parted's grammar, go-nvlib parseMigProfile) --------------------- */

struct mig_profile_spec {
    unsigned c, g, gb; /* <C>c.<G>g.<GB>gb; c == g when written <G>g.<GB>gb */
    char attrs[32];    /* "+me" / "+me.all" / "-me" / "" (normalised, sorted) */
};
/* -EINVAL with a message naming the rule broken. */
int mig_profile_parse(const char *s, struct mig_profile_spec *ret, struct error *err);
/* Does a catalog profile (a full compute instance) match the spec? */
bool mig_profile_matches(const struct mig_profile *p, const struct mig_profile_spec *s);

/* ---- planner (pure, exact) ---------------------------------------------------------------- */

struct mig_placement {
    const struct mig_profile *p;
    unsigned start; /* memory slice */
    /* its compute instances: none listed = one spanning the GPU instance (the usual case);
     * else n_ci of ci_size compute slices at ci_start (within the GPU instance) */
    unsigned n_ci;
    unsigned ci_size[MIG_MAX_CI], ci_start[MIG_MAX_CI];
};

struct mig_layout {
    struct mig_placement items[MIG_MAX_INSTANCES];
    size_t n;
};

/* counts[i]: how many of m->profiles[i] are wanted. 0 and *ret = a valid layout (items
 * sorted by start) when one exists; -ENOSPC when none does, with why (may be NULL) saying
 * which resource runs out or which placement rule blocks it. Exhaustive search: never misses
 * a layout that exists. */
int mig_plan(const struct mig_gpu_model *m, const unsigned *counts, struct mig_layout *ret,
             struct strbuf *why);

/* Up to max layouts that fit and keep the most of counts: sub-multisets with the fewest
 * instances removed, then the most memory kept. Returns how many were written. */
size_t mig_plan_closest(const struct mig_gpu_model *m, const unsigned *counts,
                        struct mig_layout *ret, size_t max);

/* Capacity a layout strands: free memory slices that no profile of m can occupy next to
 * the instances placed, and the compute slices left with them. */
struct mig_stranded {
    unsigned free_slices, stranded_slices;
    uint64_t stranded_mib;
    unsigned free_compute, stranded_compute;
    unsigned stranded_mask; /* bit s: memory slice s is stranded */
};
void mig_layout_stranded(const struct mig_gpu_model *m, const struct mig_layout *l,
                         struct mig_stranded *ret);

/* Whether a layout is valid on m (starts allowed, no overlap, max instances, compute
 * slices). why (may be NULL) gets the first problem. */
bool mig_layout_valid(const struct mig_gpu_model *m, const struct mig_layout *l,
                      struct strbuf *why);

/* A slot diagram of l, one line: "|  3g.40gb  |2g.20gb|1g|..|" over the memory slices. */
int mig_layout_diagram(const struct mig_gpu_model *m, const struct mig_layout *l,
                       struct strbuf *out);

/* ---- compute-instance sub-profiles (1c.3g.40gb) ------------------------------------------
 * What a mig-parted config asks of one GPU: GPU instances with one full compute instance,
 * and compute instances smaller than their GPU instance (<C>c.<G>g.<GB>gb), which are
 * packed into as few GPU instances of that profile as fit (mig-parted puts consecutive
 * compute instances of one profile into the same GPU instance). */
struct mig_want {
    unsigned counts[MIG_MAX_PROFILES];         /* per m->profiles index */
    unsigned ci[MIG_MAX_PROFILES][MIG_MAX_CI]; /* [profile index][c]: compute instances of c
                                                * slices (c < the profile's) */
};

/* NVIDIA's rule for a compute instance of c slices in a GPU instance of g: c <= g, and when
 * smaller 2c <= g + 1 (3g: 1c, 2c; 4g: 1c, 2c; 7g: 1c, 2c, 3c, 4c). */
bool mig_ci_size_valid(unsigned c, unsigned g);
/* Adds n of spec to w: a full compute instance counts its GPU instance, a smaller one goes
 * to w->ci. -EINVAL naming the profile when m has no such GPU instance or the size is not
 * allowed. */
int mig_want_add(const struct mig_gpu_model *m, const struct mig_profile_spec *spec, unsigned n,
                 struct mig_want *w, struct error *err);
bool mig_want_equal(const struct mig_want *a, const struct mig_want *b);
/* GPU instances w needs per profile index: counts plus the GPU instances its smaller compute
 * instances are packed into. */
void mig_want_gi_counts(const struct mig_gpu_model *m, const struct mig_want *w,
                        unsigned *gi_counts);
/* mig_plan for w, and each packed group of compute instances given to a GPU instance of its
 * profile with their placements. */
int mig_plan_want(const struct mig_gpu_model *m, const struct mig_want *w, struct mig_layout *ret,
                  struct strbuf *why);
/* "1c.3g.40gb" for c slices on GPU instance profile p; p's name when c is all of it. */
void mig_ci_name(const struct mig_profile *p, unsigned c, char *buf, size_t size);

/* "3g.40gb=1,1g.10gb=3,1c.3g.40gb=3" -> what it asks of a GPU of m. -EINVAL with a
 * message. */
int mig_parse_want(const struct mig_gpu_model *m, const char *want, struct mig_want *ret,
                   struct error *err);

#endif

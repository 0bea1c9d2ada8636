/* SPDX-License-Identifier: Apache-2.0 */
/* ci.c: compute-instance sub-profiles (1c.3g.40gb). NVIDIA's size rule, placements inside
 * a GPU instance (a compute instance of c slices starts at a multiple of c rounded up to a
 * power of two and must fit: on 7g, 3c at 0 and 4 — facts A.4), packing the wanted compute
 * instances into GPU instances of their profile (largest first, first fit, as mig-parted
 * adds a compute instance to the previous GPU instance of the same profile when it fits),
 * and the plan: the GPU instances that needs, placed by mig_plan, with the groups handed
 * to them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mig/mig.h"

bool mig_ci_size_valid(unsigned c, unsigned g)
{
    return c >= 1 && c <= g && (c == g || 2 * c <= g + 1);
}

static unsigned ci_align(unsigned c)
{
    unsigned a = 1;
    while (a < c)
        a <<= 1;
    return a;
}

/* Places sizes[k..n) (largest first) in a GPU instance of g compute slices. */
static bool ci_place(unsigned g, const unsigned *sizes, size_t n, size_t k, unsigned used,
                     unsigned *starts)
{
    if (k == n)
        return true;
    unsigned c = sizes[k];
    for (unsigned s = 0; s + c <= g; s += ci_align(c)) {
        unsigned mask = ((1u << c) - 1u) << s;
        if (used & mask)
            continue;
        starts[k] = s;
        if (ci_place(g, sizes, n, k + 1, used | mask, starts))
            return true;
    }
    return false;
}

/* The compute instances of w->ci[k] packed into GPU instances of profile k: groups written
 * to out[0..max) as placements (p set, start unset), their number returned; more than max
 * returns max + 1. */
/* First fit: the first of the n groups that takes one more compute instance of c slices
 * (out[g] updated), or n when none does. */
static size_t fit_one(const struct mig_profile *p, unsigned c, struct mig_placement *out, size_t n)
{
    for (size_t g = 0; g < n; g++) {
        struct mig_placement t = out[g];
        if (t.n_ci == MIG_MAX_CI)
            continue;
        t.ci_size[t.n_ci++] = c; /* sizes stay largest first */
        if (ci_place(p->compute_slices, t.ci_size, t.n_ci, 0, 0, t.ci_start)) {
            out[g] = t;
            return g;
        }
    }
    return n;
}

static size_t pack(const struct mig_profile *p, const unsigned *want, struct mig_placement *out,
                   size_t max)
{
    size_t n = 0;

    for (unsigned c = MIG_MAX_CI - 1; c >= 1; c--) {
        for (unsigned i = 0; i < want[c]; i++) {
            if (fit_one(p, c, out, n) < n)
                continue;
            if (n == max)
                return max + 1;
            memset(&out[n], 0, sizeof(out[n]));
            out[n].p = p;
            out[n].ci_size[0] = c;
            out[n].n_ci = 1;
            out[n].ci_start[0] = 0;
            n++;
        }
    }
    return n;
}

int mig_want_add(const struct mig_gpu_model *m, const struct mig_profile_spec *spec, unsigned n,
                 struct mig_want *w, struct error *err)
{
    struct mig_profile_spec gi = *spec;
    size_t k = 0;

    gi.c = gi.g; /* the GPU instance it lives in */
    while (k < m->n_profiles && !mig_profile_matches(&m->profiles[k], &gi))
        k++;
    if (k == m->n_profiles || k >= MIG_MAX_PROFILES) {
        struct strbuf known = STRBUF_INIT;
        for (size_t i = 0; i < m->n_profiles; i++)
            (void)strbuf_printf(&known, "%s%s", i ? ", " : "", m->profiles[i].name);
        error_set(err, -EINVAL, "%s has no MIG profile %ug.%ugb%s; it has %s", m->name, gi.g, gi.gb,
                  gi.attrs, strbuf_str(&known));
        strbuf_release(&known);
        return -EINVAL;
    }
    if (spec->c == spec->g) {
        w->counts[k] += n;
        return 0;
    }
    if (!mig_ci_size_valid(spec->c, spec->g) || spec->c >= MIG_MAX_CI) {
        struct strbuf ok = STRBUF_INIT;
        for (unsigned c = 1; c < spec->g; c++)
            if (mig_ci_size_valid(c, spec->g))
                (void)strbuf_printf(&ok, "%uc.%s, ", c, m->profiles[k].name);
        error_set(err, -EINVAL,
                  "%uc.%s: a compute instance of %u slices does not fit NVIDIA's rule on a "
                  "%ug GPU instance (c <= g and 2c <= g + 1); allowed: %s%s",
                  spec->c, m->profiles[k].name, spec->c, spec->g, strbuf_str(&ok),
                  m->profiles[k].name);
        strbuf_release(&ok);
        return -EINVAL;
    }
    w->ci[k][spec->c] += n;
    return 0;
}

bool mig_want_equal(const struct mig_want *a, const struct mig_want *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

void mig_want_gi_counts(const struct mig_gpu_model *m, const struct mig_want *w,
                        unsigned *gi_counts)
{
    struct mig_placement groups[MIG_MAX_INSTANCES];

    for (size_t k = 0; k < m->n_profiles && k < MIG_MAX_PROFILES; k++)
        gi_counts[k] =
            w->counts[k] + (unsigned)pack(&m->profiles[k], w->ci[k], groups, MIG_MAX_INSTANCES);
}

int mig_plan_want(const struct mig_gpu_model *m, const struct mig_want *w, struct mig_layout *ret,
                  struct strbuf *why)
{
    unsigned gi_counts[MIG_MAX_PROFILES] = {0};
    int r;

    mig_want_gi_counts(m, w, gi_counts);
    r = mig_plan(m, gi_counts, ret, why);
    if (r < 0)
        return r;
    for (size_t k = 0; k < m->n_profiles && k < MIG_MAX_PROFILES; k++) {
        struct mig_placement groups[MIG_MAX_INSTANCES];
        size_t n = pack(&m->profiles[k], w->ci[k], groups, MIG_MAX_INSTANCES), g = 0;
        /* every GPU instance of profile k is alike: the first ones take the groups */
        for (size_t i = 0; i < ret->n && g < n; i++) {
            struct mig_placement *it = &ret->items[i];
            if (it->p != &m->profiles[k] || it->n_ci)
                continue;
            it->n_ci = groups[g].n_ci;
            memcpy(it->ci_size, groups[g].ci_size, sizeof(it->ci_size));
            memcpy(it->ci_start, groups[g].ci_start, sizeof(it->ci_start));
            g++;
        }
    }
    return 0;
}

void mig_ci_name(const struct mig_profile *p, unsigned c, char *buf, size_t size)
{
    if (c >= p->compute_slices)
        snprintf(buf, size, "%s", p->name);
    else
        snprintf(buf, size, "%uc.%s", c, p->name);
}

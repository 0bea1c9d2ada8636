/* SPDX-License-Identifier: Apache-2.0 */
/* plan.c: the MIG placement planner. A GPU has at most 8 memory slices and 7 compute
 * slices, so an exhaustive search over placements is cheap: the planner tries every
 * allowed start of every wanted instance (largest first, identical instances in increasing
 * start order so no layout is tried twice) and is exact — it finds a layout whenever one
 * exists, which tests prove against brute force. Around it: the explanation when none
 * exists, the closest layouts that fit, stranded capacity, and a slot diagram. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mig/mig.h"

struct search {
    const struct mig_gpu_model *m;
    const struct mig_profile *items[MIG_MAX_INSTANCES]; /* wanted, largest first */
    size_t n;
    struct mig_layout *out;
    unsigned starts[MIG_MAX_INSTANCES];
};

static unsigned range_mask(unsigned start, unsigned slices)
{
    return ((1u << slices) - 1u) << start;
}

/* Instance k onward, with `used` memory slices taken. */
static bool place(struct search *s, size_t k, unsigned used)
{
    if (k == s->n)
        return true;
    const struct mig_profile *p = s->items[k];
    /* identical instances are interchangeable: keep their starts increasing */
    unsigned from = k > 0 && s->items[k - 1] == p ? s->starts[k - 1] + 1 : 0;
    for (unsigned st = from; st + p->slices <= s->m->mem_slices; st++) {
        unsigned mask = range_mask(st, p->slices);
        if (!(p->starts_mask & (1u << st)) || (used & mask))
            continue;
        s->starts[k] = st;
        if (place(s, k + 1, used | mask))
            return true;
    }
    return false;
}

static int cmp_placement(const void *a, const void *b)
{
    const struct mig_placement *x = a, *y = b;
    return (int)x->start - (int)y->start;
}

/* Sorts wanted items largest first (memory, then compute), so the search fails fast. */
static int cmp_profile_desc(const void *a, const void *b)
{
    const struct mig_profile *x = *(const struct mig_profile *const *)a;
    const struct mig_profile *y = *(const struct mig_profile *const *)b;
    if (x->slices != y->slices)
        return (int)y->slices - (int)x->slices;
    if (x->compute_slices != y->compute_slices)
        return (int)y->compute_slices - (int)x->compute_slices;
    return x < y ? -1 : x > y;
}

/* Just the feasibility: 1 fits (layout in *out when not NULL), 0 does not, -EINVAL too many. */
static int fits(const struct mig_gpu_model *m, const unsigned *counts, struct mig_layout *out)
{
    struct search s = {.m = m, .out = out};
    unsigned compute = 0;

    for (size_t i = 0; i < m->n_profiles; i++) {
        if (counts[i] > m->profiles[i].max_instances)
            return 0;
        for (unsigned k = 0; k < counts[i]; k++) {
            if (s.n == MIG_MAX_INSTANCES)
                return -EINVAL;
            s.items[s.n++] = &m->profiles[i];
            compute += m->profiles[i].compute_slices;
        }
    }
    if (compute > m->compute_slices)
        return 0;
    qsort(s.items, s.n, sizeof(s.items[0]), cmp_profile_desc);
    if (!place(&s, 0, 0))
        return 0;
    if (out) {
        out->n = s.n;
        for (size_t k = 0; k < s.n; k++)
            out->items[k] = (struct mig_placement){.p = s.items[k], .start = s.starts[k]};
        qsort(out->items, out->n, sizeof(out->items[0]), cmp_placement);
    }
    return 1;
}

static void starts_text(const struct mig_gpu_model *m, const struct mig_profile *p,
                        struct strbuf *sb)
{
    bool first = true;
    for (unsigned st = 0; st < m->mem_slices; st++)
        if (p->starts_mask & (1u << st)) {
            (void)strbuf_printf(sb, "%s%u", first ? "" : ",", st);
            first = false;
        }
}

/* Why counts cannot be placed, most basic reason first. */
static void explain(const struct mig_gpu_model *m, const unsigned *counts, struct strbuf *why)
{
    unsigned mem = 0, compute = 0, n = 0;

    for (size_t i = 0; i < m->n_profiles; i++) {
        const struct mig_profile *p = &m->profiles[i];
        if (counts[i] > p->max_instances) {
            (void)strbuf_printf(why, "%s: %u wanted, at most %u fit on a %s", p->name, counts[i],
                                p->max_instances, m->name);
            return;
        }
        mem += counts[i] * p->slices;
        compute += counts[i] * p->compute_slices;
        n += counts[i];
    }
    if (n > MIG_MAX_INSTANCES) {
        (void)strbuf_printf(why, "%u instances wanted, a GPU holds at most %u", n,
                            m->compute_slices);
        return;
    }
    if (mem > m->mem_slices) {
        (void)strbuf_printf(why,
                            "memory slices run out: the instances need %u, a %s has %u "
                            "(%llu MiB each)",
                            mem, m->name, m->mem_slices,
                            (unsigned long long)(m->memory_mib / m->mem_slices));
        return;
    }
    if (compute > m->compute_slices) {
        (void)strbuf_printf(why, "compute slices run out: the instances need %u, a %s has %u",
                            compute, m->name, m->compute_slices);
        return;
    }
    /* enough slices in total: the placement rules block it */
    (void)strbuf_printf(why,
                        "the instances need %u of %u memory slices but no placement fits "
                        "them together; allowed starts: ",
                        mem, m->mem_slices);
    bool first = true;
    for (size_t i = 0; i < m->n_profiles; i++) {
        if (!counts[i])
            continue;
        (void)strbuf_printf(why, "%s%s at slice ", first ? "" : "; ", m->profiles[i].name);
        starts_text(m, &m->profiles[i], why);
        (void)strbuf_printf(why, " (%u slice%s)", m->profiles[i].slices,
                            m->profiles[i].slices == 1 ? "" : "s");
        first = false;
    }
}

int mig_plan(const struct mig_gpu_model *m, const unsigned *counts, struct mig_layout *ret,
             struct strbuf *why)
{
    struct mig_layout l = {0};

    if (fits(m, counts, &l) == 1) {
        *ret = l;
        return 0;
    }
    if (why)
        explain(m, counts, why);
    return -ENOSPC;
}

/* ---- closest layouts ------------------------------------------------------------------- */

struct closest {
    const struct mig_gpu_model *m;
    const unsigned *want;
    unsigned cur[32];
    struct {
        unsigned removed;
        uint64_t mib;
        struct mig_layout l;
    } best[8];
    size_t n_best, max;
};

static void consider(struct closest *c)
{
    unsigned removed = 0;
    uint64_t mib = 0;
    struct mig_layout l;

    for (size_t i = 0; i < c->m->n_profiles; i++) {
        removed += c->want[i] - c->cur[i];
        mib += (uint64_t)c->cur[i] * c->m->profiles[i].memory_mib;
    }
    if (removed == 0 || mib == 0 || fits(c->m, c->cur, &l) != 1)
        return;
    /* insert sorted: fewest removed, then most memory */
    size_t at = c->n_best;
    while (at > 0 && (c->best[at - 1].removed > removed ||
                      (c->best[at - 1].removed == removed && c->best[at - 1].mib < mib)))
        at--;
    if (at >= c->max)
        return;
    size_t last = c->n_best < c->max ? c->n_best : c->max - 1;
    for (size_t k = last; k > at; k--)
        c->best[k] = c->best[k - 1];
    c->best[at].removed = removed;
    c->best[at].mib = mib;
    c->best[at].l = l;
    if (c->n_best < c->max)
        c->n_best++;
}

static void walk(struct closest *c, size_t i)
{
    if (i == c->m->n_profiles) {
        consider(c);
        return;
    }
    for (unsigned k = 0; k <= c->want[i]; k++) {
        c->cur[i] = k;
        walk(c, i + 1);
    }
}

size_t mig_plan_closest(const struct mig_gpu_model *m, const unsigned *counts,
                        struct mig_layout *ret, size_t max)
{
    struct closest c = {.m = m};
    unsigned capped[32];

    if (m->n_profiles > 32 || max == 0)
        return 0;
    /* more than fits of one profile is never closer: cap the search there */
    for (size_t i = 0; i < m->n_profiles; i++)
        capped[i] =
            counts[i] < m->profiles[i].max_instances ? counts[i] : m->profiles[i].max_instances;
    c.want = capped;
    c.max = max < 8 ? max : 8;
    walk(&c, 0);
    for (size_t k = 0; k < c.n_best; k++)
        ret[k] = c.best[k].l;
    return c.n_best;
}

/* ---- checks and reports ---------------------------------------------------------------- */

bool mig_layout_valid(const struct mig_gpu_model *m, const struct mig_layout *l, struct strbuf *why)
{
    unsigned used = 0, compute = 0;

    for (size_t k = 0; k < l->n; k++) {
        const struct mig_placement *it = &l->items[k];
        unsigned n_same = 0;
        if (it->start >= m->mem_slices || !(it->p->starts_mask & (1u << it->start)) ||
            it->start + it->p->slices > m->mem_slices) {
            if (why)
                (void)strbuf_printf(why, "%s cannot start at memory slice %u", it->p->name,
                                    it->start);
            return false;
        }
        unsigned mask = range_mask(it->start, it->p->slices);
        if (used & mask) {
            if (why)
                (void)strbuf_printf(why, "%s at slice %u overlaps another instance", it->p->name,
                                    it->start);
            return false;
        }
        used |= mask;
        compute += it->p->compute_slices;
        for (size_t j = 0; j < l->n; j++)
            n_same += l->items[j].p == it->p;
        if (n_same > it->p->max_instances) {
            if (why)
                (void)strbuf_printf(why, "%u x %s, at most %u fit", n_same, it->p->name,
                                    it->p->max_instances);
            return false;
        }
    }
    if (compute > m->compute_slices) {
        if (why)
            (void)strbuf_printf(why, "%u compute slices used, the GPU has %u", compute,
                                m->compute_slices);
        return false;
    }
    return true;
}

void mig_layout_stranded(const struct mig_gpu_model *m, const struct mig_layout *l,
                         struct mig_stranded *ret)
{
    unsigned used = 0, compute = 0, usable = 0;

    for (size_t k = 0; k < l->n; k++) {
        used |= range_mask(l->items[k].start, l->items[k].p->slices);
        compute += l->items[k].p->compute_slices;
    }
    /* a free slice is usable if some profile has a free placement covering it and room in
     * the compute slices left */
    for (size_t i = 0; i < m->n_profiles; i++) {
        const struct mig_profile *p = &m->profiles[i];
        if (compute + p->compute_slices > m->compute_slices)
            continue;
        for (unsigned st = 0; st + p->slices <= m->mem_slices; st++) {
            unsigned mask = range_mask(st, p->slices);
            if ((p->starts_mask & (1u << st)) && !(used & mask))
                usable |= mask;
        }
    }
    memset(ret, 0, sizeof(*ret));
    for (unsigned st = 0; st < m->mem_slices; st++) {
        if (used & (1u << st))
            continue;
        ret->free_slices++;
        if (!(usable & (1u << st))) {
            ret->stranded_slices++;
            ret->stranded_mask |= 1u << st;
        }
    }
    ret->stranded_mib = (uint64_t)ret->stranded_slices * (m->memory_mib / m->mem_slices);
    ret->free_compute = m->compute_slices > compute ? m->compute_slices - compute : 0;
    /* compute slices are only usable with memory: none usable when no slice is */
    ret->stranded_compute = usable ? 0 : ret->free_compute;
}

int mig_layout_diagram(const struct mig_gpu_model *m, const struct mig_layout *l,
                       struct strbuf *out)
{
    const unsigned w = 9; /* characters per memory slice */
    int r = strbuf_putc(out, '|');

    for (unsigned st = 0; r == 0 && st < m->mem_slices;) {
        const struct mig_placement *it = NULL;
        for (size_t k = 0; k < l->n; k++)
            if (l->items[k].start == st)
                it = &l->items[k];
        unsigned cells = it ? it->p->slices : 1;
        unsigned width = cells * w + (cells - 1);
        char cell[128];
        const char *label = it ? it->p->name : "";
        size_t len = strlen(label);
        if (len > width)
            len = width;
        size_t left = (width - len) / 2;
        snprintf(cell, sizeof(cell), "%*s%.*s%*s|", (int)left, "", (int)len, label,
                 (int)(width - len - left), "");
        r = strbuf_puts(out, cell);
        st += cells;
    }
    return r;
}

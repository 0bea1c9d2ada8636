/* SPDX-License-Identifier: Apache-2.0 */
/* preferred.c: GetPreferredAllocation policies. Whole GPUs: the set with the best
 * interconnect (NVLink links first, then PCIe closeness), found exactly by branch and bound.
 * Replicas and MIG devices: NVIDIA v0.20.0's distributed/packed greedy (internal/rm/allocate.go,
 * facts §3.4), ties NVIDIA leaves to map order made deterministic.
 * Pure: no I/O. The kubelet treats the answer as advice. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/internal.h"

/* One NVLink link outweighs any PCIe sum over all pairs of the largest set we search:
 * C(64,2) pairs × 5 = 10080 < 16384. */
#define NVLINK_WEIGHT 16384u
#define PCIE_CLOSENESS_MAX 5u
/* DFS nodes before settling for the best found so far. A full enumeration of 16 GPUs visits
 * at most 2^16 nodes, so up to 16 GPUs the answer is always exact. */
#define EXACT_NODE_BUDGET 200000u
#define TOPO_MAX_GPUS 64u

static uint64_t pair_score(const struct inv_inventory *topo, unsigned a, unsigned b)
{
    const struct inv_link *l = inv_link_between(topo, a, b);
    unsigned level = (unsigned)l->pcie;
    unsigned close = level >= 50 ? 0 : (50 - level) / 10;

    if (close > PCIE_CLOSENESS_MAX)
        close = PCIE_CLOSENESS_MAX;
    return (uint64_t)l->nvlinks * NVLINK_WEIGHT + close;
}

uint64_t model_topology_score(const struct inv_inventory *topology, const unsigned *gpus, size_t n)
{
    uint64_t s = 0;

    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            s += pair_score(topology, gpus[i], gpus[j]);
    return s;
}

/* ---- exact search over whole GPUs ----------------------------------------------------------- */

struct search {
    size_t n;             /* candidates */
    size_t k;             /* how many to pick */
    const uint64_t *pair; /* n × n scores between candidates */
    uint64_t max_pair;
    uint64_t *gain; /* gain[depth * n + c]: score c adds to the chosen set at that depth */
    size_t *chosen; /* current picks (candidate positions) */
    size_t *best;   /* best picks */
    uint64_t best_score;
    bool have_best;
    uint64_t nodes;
    uint64_t *scratch; /* for the bound: top gains */
};

/* Optimistic completion: the r largest gains still possible plus the best pair score for
 * every pair among the r. Never below the truth, so pruning keeps the optimum. */
static uint64_t bound(struct search *s, size_t depth, size_t from, size_t r)
{
    const uint64_t *g = &s->gain[depth * s->n];
    size_t m = 0;
    uint64_t sum = 0;

    if (r == 0)
        return 0;
    for (size_t c = from; c < s->n; c++) {
        /* insertion into a descending top-r list */
        uint64_t v = g[c];
        size_t pos = m < r ? m++ : r;
        while (pos > 0 && s->scratch[pos - 1] < v) {
            if (pos < r)
                s->scratch[pos] = s->scratch[pos - 1];
            pos--;
        }
        if (pos < r)
            s->scratch[pos] = v;
    }
    for (size_t i = 0; i < m; i++)
        sum += s->scratch[i];
    return sum + (uint64_t)(r * (r - 1) / 2) * s->max_pair;
}

static void dfs(struct search *s, size_t depth, size_t from, uint64_t score)
{
    size_t r = s->k - depth;

    if (++s->nodes > EXACT_NODE_BUDGET && s->have_best)
        return;
    if (r == 0) {
        if (!s->have_best || score > s->best_score) {
            s->best_score = score;
            s->have_best = true;
            memcpy(s->best, s->chosen, s->k * sizeof(*s->best));
        }
        return;
    }
    if (s->have_best && score + bound(s, depth, from, r) <= s->best_score)
        return;
    for (size_t c = from; c + r <= s->n; c++) {
        const uint64_t *g = &s->gain[depth * s->n];
        uint64_t *next = &s->gain[(depth + 1) * s->n];
        s->chosen[depth] = c;
        for (size_t o = c + 1; o < s->n; o++)
            next[o] = g[o] + s->pair[c * s->n + o];
        dfs(s, depth + 1, c + 1, score + g[c]);
    }
}

/* Picks k of the candidate GPUs (cand[], ascending) maximising the score together with the
 * must-include GPUs. Writes positions into ret_pos (k entries). */
static int best_gpu_set(const struct inv_inventory *topo, const unsigned *must, size_t n_must,
                        const unsigned *cand, size_t n, size_t k, size_t *ret_pos)
{
    struct search s = {.n = n, .k = k};
    uint64_t *pair = NULL;
    int r = -ENOMEM;

    pair = calloc(n * n + 1, sizeof(*pair));
    s.gain = calloc((k + 1) * n + 1, sizeof(*s.gain));
    s.chosen = calloc(k + 1, sizeof(*s.chosen));
    s.best = calloc(k + 1, sizeof(*s.best));
    s.scratch = calloc(k + 1, sizeof(*s.scratch));
    if (!pair || !s.gain || !s.chosen || !s.best || !s.scratch)
        goto out;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            pair[a * n + b] = a == b ? 0 : pair_score(topo, cand[a], cand[b]);
            if (pair[a * n + b] > s.max_pair)
                s.max_pair = pair[a * n + b];
        }
    s.pair = pair;
    for (size_t c = 0; c < n; c++)
        for (size_t i = 0; i < n_must; i++)
            s.gain[c] += pair_score(topo, cand[c], must[i]);
    dfs(&s, 0, 0, 0);
    memcpy(ret_pos, s.best, k * sizeof(*ret_pos));
    r = 0;
out:
    free(pair);
    free(s.gain);
    free(s.chosen);
    free(s.best);
    free(s.scratch);
    return r;
}

/* ---- request parsing ------------------------------------------------------------------------ */

struct request {
    size_t *avail; /* device indices of available minus must, deduplicated, ascending */
    size_t n_avail;
    size_t *must; /* device indices in the caller's order, deduplicated */
    size_t n_must;
};

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static int lookup(const struct model_resource *res, const char *id, size_t *ret_idx,
                  struct error *err)
{
    const struct model_device *d = model_resource_find_device(res, id);

    if (!d)
        return error_set(err, -EINVAL, "invalid request: unknown device: %s", id);
    *ret_idx = (size_t)(d - res->devices);
    return 0;
}

static int request_parse(const struct model_resource *res, const char *const *available,
                         size_t n_available, const char *const *must_include, size_t n_must,
                         struct request *q, struct error *err)
{
    size_t w = 0;
    int r;

    q->avail = calloc(n_available + 1, sizeof(*q->avail));
    q->must = calloc(n_must + 1, sizeof(*q->must));
    if (!q->avail || !q->must)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n_must; i++) {
        size_t idx = 0;
        bool dup = false;
        r = lookup(res, must_include[i], &idx, err);
        if (r < 0)
            return r;
        for (size_t j = 0; j < q->n_must && !dup; j++)
            dup = q->must[j] == idx;
        if (!dup)
            q->must[q->n_must++] = idx;
    }
    for (size_t i = 0; i < n_available; i++) {
        r = lookup(res, available[i], &q->avail[i], err);
        if (r < 0)
            return r;
    }
    qsort(q->avail, n_available, sizeof(*q->avail), cmp_size);
    for (size_t i = 0; i < n_available; i++) {
        bool skip = i > 0 && q->avail[i] == q->avail[i - 1];
        for (size_t j = 0; j < q->n_must && !skip; j++)
            skip = q->must[j] == q->avail[i];
        if (!skip)
            q->avail[w++] = q->avail[i];
    }
    q->n_avail = w;
    return 0;
}

/* ---- replicas and MIG devices: distributed / packed -------------------------------------------
 */

struct group {
    size_t first_dev;        /* index of replica 0 of the physical device */
    unsigned gpu;            /* parent GPU index */
    size_t start, end, next; /* its available devices: q->avail[start..end) */
    unsigned allocated;      /* NVIDIA's count: replicas not available, picks included */
    unsigned picked;         /* NVIDIA's pickedFrom: picked by this request, must-include not */
};

/* NVIDIA's greedyAlloc order: the policy's comparator over `allocated` (fewest first for
 * distributed, most first for packed), then the device picked least in this request. Where
 * both tie NVIDIA's order is Go map order; ours: for distributed the parent GPU picked least
 * (must-include counted, so MIG devices spread over GPUs), then device order.
 * gpu_picked: picks per parent GPU in this request (MIG devices of one GPU share it). */
static bool group_better(const struct group *a, const struct group *b, const unsigned *gpu_picked,
                         enum cfg_alloc_policy p)
{
    if (a->allocated != b->allocated)
        return p == CFG_ALLOC_PACKED ? a->allocated > b->allocated : a->allocated < b->allocated;
    if (a->picked != b->picked)
        return a->picked < b->picked;
    if (p == CFG_ALLOC_PACKED)
        return false;
    return gpu_picked[a->gpu] < gpu_picked[b->gpu];
}

static int pick_greedy(const struct model_resource *res, enum cfg_alloc_policy policy,
                       const struct request *q, size_t k, size_t *out)
{
    struct group *g = NULL;
    unsigned *gpu_picked = NULL, max_gpu = 0;
    size_t n_g = 0;

    for (size_t i = 0; i < res->n_devices; i++)
        if (res->devices[i].gpu_index > max_gpu)
            max_gpu = res->devices[i].gpu_index;
    g = calloc(q->n_avail + 1, sizeof(*g));
    gpu_picked = calloc((size_t)max_gpu + 1, sizeof(*gpu_picked));
    if (!g || !gpu_picked) {
        free(g);
        free(gpu_picked);
        return -ENOMEM;
    }
    for (size_t i = 0; i < q->n_must; i++)
        gpu_picked[res->devices[q->must[i]].gpu_index]++;
    for (size_t i = 0; i < q->n_avail; i++) {
        const struct model_device *d = &res->devices[q->avail[i]];
        size_t first = q->avail[i] - d->replica;
        if (n_g == 0 || g[n_g - 1].first_dev != first)
            g[n_g++] =
                (struct group){.first_dev = first, .gpu = d->gpu_index, .start = i, .next = i};
        g[n_g - 1].end = i + 1;
    }
    for (size_t i = 0; i < n_g; i++) {
        unsigned total = res->devices[g[i].first_dev].replicas;
        unsigned free_n = (unsigned)(g[i].end - g[i].start);
        g[i].allocated = total > free_n ? total - free_n : 0;
    }
    for (size_t n = 0; n < k; n++) {
        struct group *best = NULL;
        for (size_t i = 0; i < n_g; i++) {
            if (g[i].next == g[i].end)
                continue;
            if (!best || group_better(&g[i], best, gpu_picked, policy))
                best = &g[i];
        }
        out[n] = q->avail[best->next++];
        best->allocated++;
        best->picked++;
        gpu_picked[best->gpu]++;
    }
    free(g);
    free(gpu_picked);
    return 0;
}

/* Whole GPUs with a usable topology: the exact best set. */
static int pick_topology(const struct model_resource *res, const struct inv_inventory *topo,
                         const struct request *q, size_t k, size_t *out)
{
    unsigned *must = calloc(q->n_must + 1, sizeof(*must));
    unsigned *cand = calloc(q->n_avail + 1, sizeof(*cand));
    size_t *pos = calloc(k + 1, sizeof(*pos));
    int r = -ENOMEM;

    if (!must || !cand || !pos)
        goto out;
    for (size_t i = 0; i < q->n_must; i++)
        must[i] = res->devices[q->must[i]].gpu_index;
    for (size_t i = 0; i < q->n_avail; i++)
        cand[i] = res->devices[q->avail[i]].gpu_index;
    r = best_gpu_set(topo, must, q->n_must, cand, q->n_avail, k, pos);
    if (r < 0)
        goto out;
    for (size_t i = 0; i < k; i++)
        out[i] = q->avail[pos[i]];
out:
    free(must);
    free(cand);
    free(pos);
    return r;
}

static bool topology_usable(const struct model_resource *res, const struct inv_inventory *topo,
                            const struct request *q)
{
    if (!topo || !topo->links || res->is_mig || q->n_avail > TOPO_MAX_GPUS)
        return false;
    for (size_t i = 0; i < q->n_avail; i++) {
        const struct model_device *d = &res->devices[q->avail[i]];
        if (d->replicas > 1 || d->mig_index >= 0 || d->gpu_index >= topo->n_gpus)
            return false;
    }
    for (size_t i = 0; i < q->n_must; i++)
        if (res->devices[q->must[i]].gpu_index >= topo->n_gpus)
            return false;
    return true;
}

int model_preferred_allocation(const struct model *m, const struct model_resource *res,
                               const char *const *available, size_t n_available,
                               const char *const *must_include, size_t n_must, size_t size,
                               const struct inv_inventory *topology, char ***ret_ids,
                               struct error *err)
{
    struct request q = {0};
    size_t *picks = NULL;
    char **ids = NULL;
    size_t k;
    int r;

    if (!m || !res || !ret_ids)
        return error_set(err, -EINVAL, "model_preferred_allocation: missing model or resource");
    r = request_parse(res, available, n_available, must_include, n_must, &q, err);
    if (r < 0)
        goto out;
    if (q.n_must > size || size - q.n_must > q.n_avail) {
        /* NVIDIA's answers (facts §3.4): whole GPUs go through go-gpuallocator, which
         * returns an empty preference; replicas and MIG devices go through its greedy
         * path, which fails the call with this exact text. */
        if (!cfg_sharing_mode_shares(res->mode) && !res->is_mig) {
            ids = strv_new();
            if (!ids) {
                r = error_set(err, -ENOMEM, "out of memory");
                goto out;
            }
            *ret_ids = ids;
            ids = NULL;
            r = 0;
            goto out;
        }
        r = error_set(err, -EINVAL,
                      "error getting list of preferred allocation devices: "
                      "not enough available devices to satisfy allocation");
        goto out;
    }
    k = size - q.n_must;
    picks = calloc(k + 1, sizeof(*picks));
    ids = strv_new();
    if (!picks || !ids) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (topology_usable(res, topology, &q))
        r = pick_topology(res, topology, &q, k, picks);
    else
        r = pick_greedy(res, m->settings.allocation_policy, &q, k, picks);
    if (r < 0) {
        error_set(err, r, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < q.n_must && r == 0; i++)
        r = strv_push(&ids, res->devices[q.must[i]].id);
    for (size_t i = 0; i < k && r == 0; i++)
        r = strv_push(&ids, res->devices[picks[i]].id);
    if (r < 0) {
        error_set(err, r, "out of memory");
        goto out;
    }
    *ret_ids = ids;
    ids = NULL;
out:
    free(q.avail);
    free(q.must);
    free(picks);
    strv_free(ids);
    return r;
}

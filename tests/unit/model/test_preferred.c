/* SPDX-License-Identifier: Apache-2.0 */
/* test_preferred.c: GetPreferredAllocation policies. The topology search is checked against
 * brute force on the 8×H100 NVSwitch and 2-socket PCIe machines (every size 1..8, with and
 * without must-include sets) and on random 16-GPU topologies; the replica policies against
 * NVIDIA v0.20.0's distributed/packed ranking on uneven occupancy. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"

/* ---- brute force ----------------------------------------------------------------------------- */

/* Best score over all subsets of `avail_mask` of `size` GPUs that contain `must_mask`. */
static uint64_t brute_best(const struct inv_inventory *inv, unsigned avail_mask, unsigned must_mask,
                           size_t size)
{
    uint64_t best = 0;
    bool any = false;
    unsigned gpus[32];

    for (unsigned set = 0; set < (1u << inv->n_gpus); set++) {
        size_t n = 0;
        if ((set & avail_mask) != set || (set & must_mask) != must_mask ||
            (size_t)__builtin_popcount(set) != size)
            continue;
        for (unsigned i = 0; i < inv->n_gpus; i++)
            if (set & (1u << i))
                gpus[n++] = i;
        uint64_t s = model_topology_score(inv, gpus, n);
        if (!any || s > best)
            best = s;
        any = true;
    }
    assert_true(any);
    return best;
}

static size_t ids_len(char **ids)
{
    return strv_length(ids);
}

/* Checks one answer: right size, must first, all available, distinct, optimal. */
static void check_topology_answer(const struct inv_inventory *inv, const struct model *m,
                                  unsigned avail_mask, const unsigned *must, size_t n_must,
                                  size_t size)
{
    const struct model_resource *res = model_find_resource(m, "nvidia.com/gpu");
    const char *avail[32], *must_ids[32];
    unsigned must_mask = 0, got_mask = 0, gpus[32];
    size_t n_avail = 0;
    char **ids = NULL;
    struct error err = {0};
    int r;

    for (unsigned i = 0; i < inv->n_gpus; i++)
        if (avail_mask & (1u << i))
            avail[n_avail++] = res->devices[i].id;
    for (size_t i = 0; i < n_must; i++) {
        must_ids[i] = res->devices[must[i]].id;
        must_mask |= 1u << must[i];
    }
    r = model_preferred_allocation(m, res, avail, n_avail, must_ids, n_must, size, inv, &ids, &err);
    if (r < 0)
        fail_msg("size %zu: %s", size, err.msg);
    assert_int_equal(ids_len(ids), size);
    for (size_t i = 0; i < size; i++) {
        const struct model_device *d = model_resource_find_device(res, ids[i]);
        assert_non_null(d);
        if (i < n_must)
            assert_string_equal(ids[i], must_ids[i]);
        assert_false(got_mask & (1u << d->gpu_index));
        assert_true(avail_mask & (1u << d->gpu_index));
        got_mask |= 1u << d->gpu_index;
        gpus[i] = d->gpu_index;
    }
    uint64_t want = brute_best(inv, avail_mask, must_mask, size);
    uint64_t got = model_topology_score(inv, gpus, size);
    if (got != want)
        fail_msg("size %zu avail %#x must %#x: score %llu, brute force %llu", size, avail_mask,
                 must_mask, (unsigned long long)got, (unsigned long long)want);
    strv_free(ids);
}

static void check_machine(struct inv_inventory *inv)
{
    static const unsigned musts[][3] = {{0}, {5}, {3, 6}, {7, 0, 2}};
    static const size_t n_musts[] = {1, 1, 2, 3};
    const unsigned all = (1u << inv->n_gpus) - 1;
    struct cfg_config cfg;
    struct model *m;

    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    for (size_t size = 1; size <= inv->n_gpus; size++) {
        check_topology_answer(inv, m, all, NULL, 0, size);
        for (size_t k = 0; k < GS_ARRAY_SIZE(musts); k++)
            if (n_musts[k] <= size)
                check_topology_answer(inv, m, all, musts[k], n_musts[k], size);
        /* GPUs 1 and 4 already taken */
        if (size <= inv->n_gpus - 2)
            check_topology_answer(inv, m, all & ~0x12u, musts[2], size >= 2 ? 2 : 0, size);
    }
    model_free(m);
}

static void test_model_preferred_allocation_h100_nvswitch_brute_force(void **state)
{
    struct inv_inventory *inv = fx_h100_nvswitch();
    (void)state;
    check_machine(inv);
    inv_free(inv);
}

static void test_model_preferred_allocation_pcie_2socket_brute_force(void **state)
{
    struct inv_inventory *inv = fx_pcie_2socket();
    struct cfg_config cfg;
    struct model *m;
    const struct model_resource *res;
    const char *avail[8];
    char **ids = NULL;

    (void)state;
    check_machine(inv);
    /* the obvious answer for 2: the 4-link pair 0-1 (ties with 2-3 go to the lowest) */
    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    res = model_find_resource(m, "nvidia.com/gpu");
    for (size_t i = 0; i < 8; i++)
        avail[i] = res->devices[i].id;
    assert_int_equal(model_preferred_allocation(m, res, avail, 8, NULL, 0, 2, inv, &ids, NULL), 0);
    assert_string_equal(ids[0], inv->gpus[0].uuid);
    assert_string_equal(ids[1], inv->gpus[1].uuid);
    strv_free(ids);
    model_free(m);
    inv_free(inv);
}

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void test_model_preferred_allocation_random_16_brute_force(void **state)
{
    uint32_t seed = 42;

    (void)state;
    for (int round = 0; round < 3; round++) {
        struct inv_inventory *inv = fx_generic(16);
        struct cfg_config cfg;
        struct model *m;
        for (size_t i = 0; i < 16; i++)
            for (size_t j = i + 1; j < 16; j++) {
                struct inv_link l = {lcg(&seed) % 4 == 0 ? lcg(&seed) % 6 : 0,
                                     (enum inv_pcie_level)(10 * (1 + lcg(&seed) % 5))};
                inv->links[i * 16 + j] = inv->links[j * 16 + i] = l;
            }
        fx_cfg_init(&cfg);
        m = fx_build(inv, &cfg);
        for (size_t size = 1; size <= 16; size += 1 + (size > 4)) {
            static const unsigned must[] = {3, 11};
            check_topology_answer(inv, m, 0xFFFFu, NULL, 0, size);
            if (size >= 2)
                check_topology_answer(inv, m, 0xFFFFu, must, 2, size);
        }
        model_free(m);
        inv_free(inv);
    }
}

/* Beyond 16 GPUs the search is bounded: it still answers, with a valid set, quickly. */
static void test_model_preferred_allocation_large_node_bounded(void **state)
{
    struct inv_inventory *inv = fx_generic(48);
    struct cfg_config cfg;
    struct model *m;
    const struct model_resource *res;
    const char *avail[48];
    char **ids = NULL;
    uint32_t seed = 7;
    uint64_t t0;

    (void)state;
    for (size_t i = 0; i < 48; i++)
        for (size_t j = i + 1; j < 48; j++) {
            struct inv_link l = {lcg(&seed) % 3, (enum inv_pcie_level)(10 * (1 + lcg(&seed) % 5))};
            inv->links[i * 48 + j] = inv->links[j * 48 + i] = l;
        }
    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    res = model_find_resource(m, "nvidia.com/gpu");
    for (size_t i = 0; i < 48; i++)
        avail[i] = res->devices[i].id;
    t0 = time_now_ns();
    assert_int_equal(model_preferred_allocation(m, res, avail, 48, NULL, 0, 24, inv, &ids, NULL),
                     0);
    assert_true(time_now_ns() - t0 < 5000000000ull); /* a hang guard, not a benchmark */
    assert_int_equal(ids_len(ids), 24);
    for (size_t i = 0; i < 24; i++)
        for (size_t j = i + 1; j < 24; j++)
            assert_string_not_equal(ids[i], ids[j]);
    strv_free(ids);
    model_free(m);
    inv_free(inv);
}

/* ---- replicas: distributed / packed ------------------------------------------------------------
 */

struct shared {
    struct inv_inventory *inv;
    struct model *m;
    const struct model_resource *res;
};

static void shared_setup(struct shared *s, size_t n_gpus, unsigned replicas,
                         enum cfg_alloc_policy policy)
{
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", replicas);
    struct cfg_config cfg;

    s->inv = fx_generic(n_gpus);
    fx_cfg_init(&cfg);
    cfg.flags.plugin.shared_devices_allocation_policy = policy;
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, true, false);
    s->m = fx_build(s->inv, &cfg);
    s->res = model_find_resource(s->m, "nvidia.com/gpu.shared");
    assert_non_null(s->res);
}

static void shared_teardown(struct shared *s)
{
    model_free(s->m);
    inv_free(s->inv);
}

/* Picks `size` among the devices of `avail` (indices into res->devices). */
static char **pick(struct shared *s, const size_t *avail, size_t n, const size_t *must,
                   size_t n_must, size_t size)
{
    const char *a[64], *mu[8];
    char **ids = NULL;
    struct error err = {0};

    for (size_t i = 0; i < n; i++)
        a[i] = s->res->devices[avail[i]].id;
    for (size_t i = 0; i < n_must; i++)
        mu[i] = s->res->devices[must[i]].id;
    if (model_preferred_allocation(s->m, s->res, a, n, mu, n_must, size, s->inv, &ids, &err) < 0)
        fail_msg("%s", err.msg);
    return ids;
}

static unsigned gpu_of(const struct shared *s, const char *id)
{
    const struct model_device *d = model_resource_find_device(s->res, id);
    assert_non_null(d);
    return d->gpu_index;
}

/* One GetPreferredAllocation on `n_gpus` GPUs of `replicas` replicas each: GPU g has its first
 * in_use[g] replicas allocated, must[] are device indices (g × replicas + r), and want_gpus[]
 * the GPUs of the picks after the must-include devices, in order. Worked by hand from
 * NVIDIA v0.20.0's greedyAlloc (internal/rm/allocate.go). */
struct policy_case {
    const char *what;
    enum cfg_alloc_policy policy;
    size_t n_gpus;
    unsigned replicas;
    unsigned in_use[4];
    size_t must[2];
    size_t n_must;
    size_t size;
    unsigned want_gpus[8];
};

#define DIST CFG_ALLOC_DISTRIBUTED
#define PACK CFG_ALLOC_PACKED

static const struct policy_case policy_cases[] = {
    {"distributed 1: the emptier GPU", DIST, 2, 4, {0, 2}, {0}, 0, 1, {0}},
    /* NVIDIA ranks by allocated before picked: the busier GPU waits (issue 27) */
    {"distributed 2: fewest allocated even twice", DIST, 2, 4, {0, 3}, {0}, 0, 2, {0, 0}},
    {"distributed 3: fewest, then picked least", DIST, 2, 4, {0, 2}, {0}, 0, 3, {0, 0, 1}},
    /* issue 27's case: 4 A100s × 4, one GPU with 1 in use, another with 2, a request for 4 */
    {"distributed 4 on uneven GPUs", DIST, 4, 4, {0, 1, 2, 0}, {0}, 0, 4, {0, 3, 1, 0}},
    {"distributed 5 on 3 uneven GPUs", DIST, 3, 4, {3, 1, 0}, {0}, 0, 5, {2, 1, 2, 1, 2}},
    {"distributed: even GPUs alternate", DIST, 3, 2, {0, 0, 0}, {0}, 0, 3, {0, 1, 2}},
    {"distributed: a full GPU is skipped", DIST, 3, 2, {0, 2, 1}, {0}, 0, 3, {0, 2, 0}},
    /* must-include devices count as allocated, not as picked */
    {"distributed: must-include counts", DIST, 2, 4, {0, 0}, {1}, 1, 4, {1, 0, 1}},
    {"distributed: must-include on the emptier GPU",
     DIST,
     3,
     4,
     {2, 0, 1},
     {4, 5},
     2,
     5,
     {2, 0, 1}},
    {"packed 1: the busier GPU", PACK, 2, 4, {0, 2}, {0}, 0, 1, {1}},
    {"packed 3: fill the busier GPU first", PACK, 2, 4, {0, 2}, {0}, 0, 3, {1, 1, 0}},
    {"packed 2 from free GPUs: stays on one", PACK, 2, 4, {0, 0}, {0}, 0, 2, {0, 0}},
    {"packed 4 on uneven GPUs", PACK, 4, 4, {0, 1, 2, 0}, {0}, 0, 4, {2, 2, 1, 1}},
    {"packed 3 on 3 uneven GPUs", PACK, 3, 4, {1, 3, 0}, {0}, 0, 3, {1, 0, 0}},
    {"packed: overflow to the next busiest", PACK, 3, 2, {1, 0, 1}, {0}, 0, 3, {0, 2, 1}},
    {"packed: must-include counts", PACK, 2, 4, {0, 0}, {4}, 1, 3, {1, 1}},
};

#undef DIST
#undef PACK

/* The available device indices of a case: every replica not in use. */
static size_t case_avail(const struct policy_case *pc, size_t *avail)
{
    size_t n = 0;

    for (size_t g = 0; g < pc->n_gpus; g++)
        for (unsigned r = pc->in_use[g]; r < pc->replicas; r++)
            avail[n++] = g * pc->replicas + r;
    return n;
}

static void test_model_preferred_allocation_policies(void **state)
{
    (void)state;
    for (size_t c = 0; c < GS_ARRAY_SIZE(policy_cases); c++) {
        const struct policy_case *pc = &policy_cases[c];
        size_t avail[16], n_avail = case_avail(pc, avail);
        struct shared s;
        char **ids;
        shared_setup(&s, pc->n_gpus, pc->replicas, pc->policy);
        ids = pick(&s, avail, n_avail, pc->must, pc->n_must, pc->size);
        assert_int_equal(ids_len(ids), pc->size);
        for (size_t i = 0; i < pc->n_must; i++)
            assert_string_equal(ids[i], s.res->devices[pc->must[i]].id);
        for (size_t i = pc->n_must; i < pc->size; i++) {
            unsigned want = pc->want_gpus[i - pc->n_must];
            if (gpu_of(&s, ids[i]) != want)
                fail_msg("%s: pick %zu is GPU %u, want GPU %u", pc->what, i - pc->n_must,
                         gpu_of(&s, ids[i]), want);
        }
        strv_free(ids);
        shared_teardown(&s);
    }
}

static void test_model_preferred_allocation_must_include_counts(void **state)
{
    static const size_t avail[] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const size_t must[] = {1};
    struct shared s;
    char **ids;

    (void)state;
    shared_setup(&s, 2, 4, CFG_ALLOC_DISTRIBUTED);
    ids = pick(&s, avail, 8, must, 1, 2);
    assert_string_equal(ids[0], s.res->devices[1].id);
    assert_int_equal(gpu_of(&s, ids[1]), 1); /* GPU 0 already has the must-include */
    strv_free(ids);
    shared_teardown(&s);
}

static void test_model_preferred_allocation_mig_devices(void **state)
{
    struct inv_inventory *inv = fx_a100_1g10gb(2);
    struct cfg_config cfg;
    struct model *m;
    const struct model_resource *res;
    const char *avail[14];
    char **ids = NULL;

    (void)state;
    fx_cfg_init(&cfg);
    cfg.flags.mig_strategy = CFG_MIG_MIXED;
    m = fx_build(inv, &cfg);
    res = model_find_resource(m, "nvidia.com/mig-1g.10gb");
    for (size_t i = 0; i < 14; i++)
        avail[13 - i] = res->devices[i].id; /* order given must not matter */
    assert_int_equal(model_preferred_allocation(m, res, avail, 14, NULL, 0, 3, inv, &ids, NULL), 0);
    assert_int_equal(ids_len(ids), 3);
    /* distributed spreads MIG devices over their parent GPUs */
    assert_string_equal(ids[0], res->devices[0].id);
    assert_string_equal(ids[1], res->devices[7].id);
    assert_string_equal(ids[2], res->devices[1].id);
    strv_free(ids);
    model_free(m);
    inv_free(inv);
}

/* NVIDIA's whole-GPU path (go-gpuallocator) answers an empty preference, not an error, when
 * fewer GPUs are available than asked (facts §3.4). */
static void test_model_preferred_allocation_whole_gpus_short_is_empty(void **state)
{
    struct inv_inventory *inv = fx_generic(2);
    struct cfg_config cfg;
    struct model *m;
    const struct model_resource *res;
    const char *avail[2];
    char **ids = NULL;
    struct error err = {0};

    (void)state;
    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    res = model_find_resource(m, "nvidia.com/gpu");
    assert_non_null(res);
    avail[0] = res->devices[0].id;
    avail[1] = res->devices[1].id;
    assert_int_equal(model_preferred_allocation(m, res, avail, 2, NULL, 0, 3, inv, &ids, &err), 0);
    assert_non_null(ids);
    assert_int_equal(ids_len(ids), 0);
    strv_free(ids);
    model_free(m);
    inv_free(inv);
}

static void test_model_preferred_allocation_errors(void **state)
{
    static const size_t avail[] = {0, 1};
    struct shared s;
    const char *bad[] = {"GPU-nope::0"};
    const char *two[2];
    char **ids = NULL;
    struct error err = {0};

    (void)state;
    shared_setup(&s, 1, 4, CFG_ALLOC_DISTRIBUTED);
    assert_int_equal(model_preferred_allocation(s.m, s.res, bad, 1, NULL, 0, 1, NULL, &ids, &err),
                     -EINVAL);
    assert_string_equal(err.msg, "invalid request: unknown device: GPU-nope::0");
    assert_null(ids);
    two[0] = s.res->devices[avail[0]].id;
    two[1] = s.res->devices[avail[1]].id;
    assert_int_equal(model_preferred_allocation(s.m, s.res, two, 2, NULL, 0, 3, NULL, &ids, &err),
                     -EINVAL);
    assert_string_equal(err.msg, "error getting list of preferred allocation devices: not "
                                 "enough available devices to satisfy allocation");
    assert_null(ids);
    assert_int_equal(model_preferred_allocation(s.m, s.res, two, 2, two, 2, 1, NULL, &ids, &err),
                     -EINVAL);
    /* size 0: nothing */
    assert_int_equal(model_preferred_allocation(s.m, s.res, two, 2, NULL, 0, 0, NULL, &ids, &err),
                     0);
    assert_int_equal(ids_len(ids), 0);
    strv_free(ids);
    shared_teardown(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_preferred_allocation_h100_nvswitch_brute_force),
        cmocka_unit_test(test_model_preferred_allocation_pcie_2socket_brute_force),
        cmocka_unit_test(test_model_preferred_allocation_random_16_brute_force),
        cmocka_unit_test(test_model_preferred_allocation_large_node_bounded),
        cmocka_unit_test(test_model_preferred_allocation_policies),
        cmocka_unit_test(test_model_preferred_allocation_must_include_counts),
        cmocka_unit_test(test_model_preferred_allocation_mig_devices),
        cmocka_unit_test(test_model_preferred_allocation_errors),
        cmocka_unit_test(test_model_preferred_allocation_whole_gpus_short_is_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

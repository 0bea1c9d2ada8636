/* SPDX-License-Identifier: Apache-2.0 */
/* test_mig.c: the MIG planner against brute force on every multiset of profiles up to the
 * slice limit (A100-40GB, H100-80GB, A30); the 19 maximal A100 layouts of facts A.5;
 * explanations, closest layouts, stranded capacity, the profile grammar and --want. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mig/mig.h"

/* ---- brute force: every set of non-overlapping (profile, start) candidates ------------- */

struct cand {
    size_t profile;
    unsigned mask;
};

struct brute {
    const struct mig_gpu_model *m;
    struct cand c[128];
    size_t n;
    /* feasible multisets, encoded base-9 per profile */
    unsigned char *feasible;
    size_t size;
};

static size_t encode(const struct mig_gpu_model *m, const unsigned *counts)
{
    size_t code = 0;
    for (size_t i = m->n_profiles; i-- > 0;)
        code = code * 9 + counts[i];
    return code;
}

static void brute_walk(struct brute *b, size_t k, unsigned used, unsigned compute, unsigned *counts)
{
    b->feasible[encode(b->m, counts)] = 1;
    for (size_t j = k; j < b->n; j++) {
        const struct mig_profile *p = &b->m->profiles[b->c[j].profile];
        if ((used & b->c[j].mask) || compute + p->compute_slices > b->m->compute_slices ||
            counts[b->c[j].profile] + 1 > p->max_instances)
            continue;
        counts[b->c[j].profile]++;
        brute_walk(b, j + 1, used | b->c[j].mask, compute + p->compute_slices, counts);
        counts[b->c[j].profile]--;
    }
}

static void brute_init(struct brute *b, const struct mig_gpu_model *m)
{
    unsigned counts[16] = {0};
    memset(b, 0, sizeof(*b));
    b->m = m;
    for (size_t i = 0; i < m->n_profiles; i++)
        for (unsigned st = 0; st + m->profiles[i].slices <= m->mem_slices; st++)
            if (m->profiles[i].starts_mask & (1u << st))
                b->c[b->n++] = (struct cand){i, ((1u << m->profiles[i].slices) - 1) << st};
    b->size = 1;
    for (size_t i = 0; i < m->n_profiles; i++)
        b->size *= 9;
    b->feasible = calloc(b->size, 1);
    assert_non_null(b->feasible);
    brute_walk(b, 0, 0, 0, counts);
}

/* Every multiset with total memory slices <= the GPU's (and up to 8 of each): the planner
 * says "fits" exactly when brute force found it, and its layouts are valid with the
 * counts asked for. */
static void check_model(const char *name)
{
    const struct mig_gpu_model *m = mig_model_find(name);
    struct brute b;
    unsigned counts[16] = {0};
    size_t checked = 0, feasible = 0;

    assert_non_null(m);
    assert_true(m->n_profiles <= 16);
    brute_init(&b, m);
    for (;;) {
        unsigned mem = 0;
        for (size_t i = 0; i < m->n_profiles; i++)
            mem += counts[i] * m->profiles[i].slices;
        if (mem <= m->mem_slices) {
            struct mig_layout l;
            struct strbuf why = STRBUF_INIT;
            int r = mig_plan(m, counts, &l, &why);
            bool want = b.feasible[encode(m, counts)];
            if ((r == 0) != want)
                fail_msg("%s: planner %s, brute force %s (code %zu): %s", name,
                         r == 0 ? "fits" : "no fit", want ? "fits" : "no fit", encode(m, counts),
                         strbuf_str(&why));
            if (r == 0) {
                unsigned got[16] = {0};
                struct strbuf bad = STRBUF_INIT;
                if (!mig_layout_valid(m, &l, &bad))
                    fail_msg("%s: invalid layout: %s", name, strbuf_str(&bad));
                for (size_t k = 0; k < l.n; k++)
                    got[l.items[k].p - m->profiles]++;
                assert_memory_equal(got, counts, m->n_profiles * sizeof(unsigned));
                strbuf_release(&bad);
                feasible++;
            } else {
                assert_true(why.len > 0); /* always an explanation */
            }
            strbuf_release(&why);
            checked++;
        }
        /* next multiset (odometer, digits 0..8) */
        size_t i = 0;
        while (i < m->n_profiles && ++counts[i] > 8)
            counts[i++] = 0;
        if (i == m->n_profiles)
            break;
    }
    print_message("%s: %zu multisets checked, %zu fit\n", name, checked, feasible);
    assert_true(feasible > 10);
    free(b.feasible);
}

static void test_exact_a100_40(void **state)
{
    (void)state;
    check_model("NVIDIA A100-SXM4-40GB");
}

static void test_exact_h100_80(void **state)
{
    (void)state;
    check_model("NVIDIA H100 80GB HBM3");
}

static void test_exact_a30(void **state)
{
    (void)state;
    check_model("NVIDIA A30");
}

static unsigned *want(const struct mig_gpu_model *m, const char *spec)
{
    static struct mig_want w;
    struct error err = {0};
    if (mig_parse_want(m, spec, &w, &err) < 0)
        fail_msg("%s: %s", spec, err.msg);
    return w.counts;
}

/* The order trap of the MIG guide (-cgi 19,19,14,9 fails, 9,19,14,19 works): any order in,
 * a valid layout out. And the 19 maximal A100 layouts of facts A.5 all plan. */
static void test_known_layouts(void **state)
{
    (void)state;
    const struct mig_gpu_model *m = mig_model_find("A100-SXM4-40GB");
    struct mig_layout l;
    static const char *const layouts[] = {
        "7g.40gb=1",
        "4g.20gb=1,3g.20gb=1",
        "4g.20gb,2g.10gb,1g.5gb",
        "4g.20gb,1g.5gb=3",
        "3g.20gb=2",
        "3g.20gb,2g.10gb,1g.5gb",
        "3g.20gb,1g.5gb=3",
        "2g.10gb=2,3g.20gb",
        "2g.10gb=3,1g.5gb",
        "2g.10gb=2,1g.5gb=3",
        "2g.10gb,1g.5gb=2,3g.20gb",
        "2g.10gb=2,1g.5gb=3",
        "2g.10gb,1g.5gb=5",
        "1g.5gb=2,2g.10gb,3g.20gb",
        "1g.5gb=3,2g.10gb=2",
        "1g.5gb=5,2g.10gb",
        "1g.5gb=4,3g.20gb",
        "1g.5gb=5,2g.10gb",
        "1g.5gb=7",
    };
    assert_non_null(m);
    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
        if (mig_plan(m, want(m, layouts[i]), &l, NULL) < 0)
            fail_msg("%s does not plan", layouts[i]);
    assert_int_equal(mig_plan(m, want(m, "1g.5gb=2,2g.10gb,3g.20gb"), &l, NULL), 0);
    /* 3g must take 0 or 4; the 2g and 1gs fill the other half */
    bool has3 = false;
    for (size_t k = 0; k < l.n; k++)
        if (strcmp(l.items[k].p->name, "3g.20gb") == 0)
            has3 = l.items[k].start == 0 || l.items[k].start == 4;
    assert_true(has3);
}

static void test_explanations(void **state)
{
    (void)state;
    const struct mig_gpu_model *m = mig_model_find("NVIDIA A100-SXM4-80GB");
    struct mig_layout l;
    struct strbuf why = STRBUF_INIT;

    assert_int_equal(mig_plan(m, want(m, "3g.40gb=3"), &l, &why), -ENOSPC);
    assert_non_null(strstr(strbuf_str(&why), "3g.40gb: 3 wanted, at most 2 fit"));
    strbuf_reset(&why);
    assert_int_equal(mig_plan(m, want(m, "4g.40gb=1,2g.20gb=2,1g.10gb=1"), &l, &why), -ENOSPC);
    assert_non_null(strstr(strbuf_str(&why), "memory slices run out: the instances need 9"));
    strbuf_reset(&why);
    /* 8 memory slices but 8 compute slices: the GPU has 7 */
    assert_int_equal(mig_plan(m, want(m, "2g.20gb=3,1g.10gb=2"), &l, &why), -ENOSPC);
    assert_non_null(strstr(strbuf_str(&why), "compute slices run out: the instances need 8"));
    strbuf_reset(&why);
    /* the guide's order trap plans fine: 2x1g, 2g and 3g in any order */
    assert_int_equal(mig_plan(m, want(m, "1g.10gb=2,2g.20gb,3g.40gb"), &l, &why), 0);
    strbuf_release(&why);
}

/* Every multiset within the counts, memory and compute limits fits an A100 (so "placement
 * rules block it" only happens on parts with sparser tables): what the exhaustive search
 * finds, checked here so a regression in the explanation's last branch shows. */
static void test_placement_rule_explanation(void **state)
{
    (void)state;
    static const struct mig_profile odd[] = {
        {0, 1, 2, 2, 0, 100, 0, 0, 0, 0, 0, 2, 0x5, "2g.1gb"}, /* starts 0, 2 */
        {1, 2, 1, 1, 0, 50, 0, 0, 0, 0, 0, 4, 0x2, "1g.1gb"},  /* start 1 only */
    };
    static const uint32_t ids[] = {0};
    const struct mig_gpu_model m = {"test GPU", ids, 200, 4, 4, odd, 2};
    unsigned counts[2] = {1, 1};
    struct mig_layout l;
    struct strbuf why = STRBUF_INIT;
    /* 2g at 0 covers slice 1; 2g at 2 leaves 1 free: fits */
    assert_int_equal(mig_plan(&m, counts, &l, &why), 0);
    counts[0] = 2; /* 2g at 0 and 2 fill everything: no room for 1g */
    assert_int_equal(mig_plan(&m, counts, &l, &why), -ENOSPC);
    assert_non_null(strstr(strbuf_str(&why), "memory slices run out"));
    strbuf_reset(&why);
    counts[0] = 1;
    counts[1] = 2; /* 1g twice at slice 1: the rule blocks it although slices are left */
    assert_int_equal(mig_plan(&m, counts, &l, &why), -ENOSPC);
    assert_non_null(strstr(strbuf_str(&why), "no placement fits them together"));
    assert_non_null(strstr(strbuf_str(&why), "1g.1gb at slice 1 (1 slice)"));
    strbuf_release(&why);
}

static void test_closest(void **state)
{
    (void)state;
    const struct mig_gpu_model *m = mig_model_find("NVIDIA A100-SXM4-80GB");
    struct mig_layout out[3];
    unsigned *c = want(m, "3g.40gb=2,1g.10gb=2");
    size_t n = mig_plan_closest(m, c, out, 3);

    /* one instance removed: drop both 1g? no: dropping one 3g keeps 3g+2x1g (fits) */
    assert_true(n >= 1);
    unsigned n3 = 0, n1 = 0;
    for (size_t k = 0; k < out[0].n; k++) {
        n3 += strcmp(out[0].items[k].p->name, "3g.40gb") == 0;
        n1 += strcmp(out[0].items[k].p->name, "1g.10gb") == 0;
    }
    assert_int_equal(out[0].n, 3);
    /* the most memory among 3-instance layouts: 2x3g+1g (88 GB... 2x3g+1g fits: 3g@0, 3g@4
     * leaves nothing) - so 3g + 2x1g */
    assert_int_equal(n3 + n1, 3);
    for (size_t k = 0; k < n; k++)
        assert_true(mig_layout_valid(m, &out[k], NULL));
    /* something that fits has no "closest" */
    assert_int_equal(mig_plan_closest(m, want(m, "7g.80gb=1"), out, 3), 0);
}

static void test_stranded(void **state)
{
    (void)state;
    const struct mig_gpu_model *m = mig_model_find("NVIDIA A100-SXM4-80GB");
    struct mig_stranded st;
    /* a hand-made bad layout: 1g at 0 and 2, 2g at 4: slices 1, 3, 6, 7 are free; 1g fits
     * at 1, 3 and 6, but nothing can use slice 7 (1g never starts at 7, 1g.20gb at 6 would
     * need 6-7: free! so 7 is usable) -> make 6 taken too */
    struct mig_layout l = {.n = 4};
    l.items[0] = (struct mig_placement){.p = mig_profile_by_name(m, "1g.10gb"), .start = 0};
    l.items[1] = (struct mig_placement){.p = mig_profile_by_name(m, "1g.10gb"), .start = 2};
    l.items[2] = (struct mig_placement){.p = mig_profile_by_name(m, "2g.20gb"), .start = 4};
    l.items[3] = (struct mig_placement){.p = mig_profile_by_name(m, "1g.10gb"), .start = 6};
    assert_true(mig_layout_valid(m, &l, NULL));
    mig_layout_stranded(m, &l, &st);
    assert_int_equal(st.free_slices, 3);     /* 1, 3, 7 */
    assert_int_equal(st.stranded_slices, 1); /* 7: only 1g.20gb@6, 3g@4, 7g@0 reach it */
    assert_int_equal(st.stranded_mask, 1u << 7);
    assert_int_equal(st.stranded_mib, 81920 / 8);
    assert_int_equal(st.free_compute, 2);
    assert_int_equal(st.stranded_compute, 0);
    /* the canonical all-1g layout strands slice 7 as well, and nothing else */
    l.n = 7;
    for (unsigned k = 0; k < 7; k++)
        l.items[k] = (struct mig_placement){.p = mig_profile_by_name(m, "1g.10gb"), .start = k};
    mig_layout_stranded(m, &l, &st);
    assert_int_equal(st.stranded_slices, 1);
    assert_int_equal(st.free_compute, 0);
    /* 4g + 2g: slices 6, 7 free, 1 compute slice: 1g at 6 or 1g.20gb at 6 use them */
    l.n = 2;
    l.items[0] = (struct mig_placement){.p = mig_profile_by_name(m, "4g.40gb"), .start = 0};
    l.items[1] = (struct mig_placement){.p = mig_profile_by_name(m, "2g.20gb"), .start = 4};
    mig_layout_stranded(m, &l, &st);
    assert_int_equal(st.stranded_slices, 0);
}

static void test_invalid_layouts(void **state)
{
    (void)state;
    const struct mig_gpu_model *m = mig_model_find("NVIDIA A100-SXM4-80GB");
    struct mig_layout l = {.n = 2};
    struct strbuf why = STRBUF_INIT;
    l.items[0] = (struct mig_placement){.p = mig_profile_by_name(m, "3g.40gb"), .start = 2};
    assert_false(mig_layout_valid(m, &l, &why));
    assert_non_null(strstr(strbuf_str(&why), "3g.40gb cannot start at memory slice 2"));
    strbuf_reset(&why);
    l.items[0] = (struct mig_placement){.p = mig_profile_by_name(m, "3g.40gb"), .start = 4};
    l.items[1] = (struct mig_placement){.p = mig_profile_by_name(m, "2g.20gb"), .start = 4};
    assert_false(mig_layout_valid(m, &l, &why));
    assert_non_null(strstr(strbuf_str(&why), "overlaps"));
    strbuf_release(&why);
}

static void test_profile_grammar(void **state)
{
    (void)state;
    struct mig_profile_spec s;
    struct error err = {0};
    const struct mig_gpu_model *m = mig_model_find("NVIDIA A100-SXM4-80GB");

    assert_int_equal(mig_profile_parse("3g.40gb", &s, &err), 0);
    assert_int_equal(s.c, 3);
    assert_int_equal(s.g, 3);
    assert_int_equal(s.gb, 40);
    assert_int_equal(mig_profile_parse("1c.3g.40gb", &s, &err), 0);
    assert_int_equal(s.c, 1);
    assert_int_equal(mig_profile_parse("1g.10gb+me", &s, &err), 0);
    assert_string_equal(s.attrs, "+me");
    assert_true(mig_profile_matches(mig_profile_by_name(m, "1g.10gb+me"), &s));
    assert_false(mig_profile_matches(mig_profile_by_name(m, "1g.10gb"), &s));
    assert_int_equal(mig_profile_parse("1g.10gb+me.all,gfx", &s, &err), 0);
    assert_string_equal(s.attrs, "+gfx,me.all");
    static const char *const bad[] = {"",
                                      "3g",
                                      "3g.40",
                                      "g.40gb",
                                      "3g.40gb+",
                                      "3g.40gb+me,me",
                                      "3g.40gb+1me",
                                      "3g.40gb+me-gfx",
                                      "4c.3g.40gb",
                                      "3g.40gbx",
                                      "0g.40gb",
                                      "3g.40gb+.me"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (mig_profile_parse(bad[i], &s, &err) != -EINVAL)
            fail_msg("'%s' should not parse", bad[i]);
}

static void test_want_and_models(void **state)
{
    (void)state;
    const struct mig_gpu_model *m = mig_model_find("0x20B210DE");
    struct mig_want w;
    struct error err = {0};
    assert_non_null(m);
    assert_string_equal(m->name, "NVIDIA A100-SXM4-80GB");
    assert_ptr_equal(mig_model_find("nvidia a100-sxm4-80gb"), m);
    assert_ptr_equal(mig_model_find("H20"), mig_model_find("NVIDIA H20"));
    assert_null(mig_model_find("NVIDIA L20"));
    assert_int_equal(mig_parse_want(m, "3g.40gb=1,1g.10gb=3,1c.3g.40gb=2", &w, &err), 0);
    assert_int_equal(w.counts[mig_profile_by_name(m, "3g.40gb") - m->profiles], 1);
    assert_int_equal(w.counts[mig_profile_by_name(m, "1g.10gb") - m->profiles], 3);
    assert_int_equal(w.ci[mig_profile_by_name(m, "3g.40gb") - m->profiles][1], 2);
    assert_int_equal(mig_parse_want(m, "3g.20gb=1", &w, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "has no MIG profile 3g.20gb; it has 1g.10gb"));
    assert_int_equal(mig_parse_want(m, "3g.40gb=x", &w, &err), -EINVAL);
}

static void test_diagram(void **state)
{
    (void)state;
    const struct mig_gpu_model *m = mig_model_find("NVIDIA A100-SXM4-80GB");
    struct mig_layout l;
    struct strbuf sb = STRBUF_INIT;
    assert_int_equal(mig_plan(m, want(m, "4g.40gb,2g.20gb,1g.10gb"), &l, NULL), 0);
    assert_int_equal(mig_layout_diagram(m, &l, &sb), 0);
    /* 8 slices of 9 characters plus separators: every line is as wide */
    assert_int_equal(strlen(strbuf_str(&sb)), 1 + 8 * 10);
    assert_non_null(strstr(strbuf_str(&sb), "4g.40gb"));
    assert_non_null(strstr(strbuf_str(&sb), "1g.10gb"));
    strbuf_release(&sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_a100_40),
        cmocka_unit_test(test_exact_h100_80),
        cmocka_unit_test(test_exact_a30),
        cmocka_unit_test(test_known_layouts),
        cmocka_unit_test(test_explanations),
        cmocka_unit_test(test_closest),
        cmocka_unit_test(test_placement_rule_explanation),
        cmocka_unit_test(test_stranded),
        cmocka_unit_test(test_invalid_layouts),
        cmocka_unit_test(test_profile_grammar),
        cmocka_unit_test(test_want_and_models),
        cmocka_unit_test(test_diagram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

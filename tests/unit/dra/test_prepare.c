/* SPDX-License-Identifier: Apache-2.0 */
/* test_prepare.c: src/dra/prepare.c with fake effects (a world of specs, MPS daemons,
 * time-slices and a saved checkpoint text): success and the kubelet's retry, every failure
 * point (claim read, nvidia-smi, MPS, CDI write, each checkpoint save) leaving nothing
 * behind, every crash point between the two checkpoint writes (rebuilt from the saved text
 * and retried: the same result, nothing leaked), unprepare's failures, the admin-access
 * guard, an unusable claim as the claim's own error, concurrent claims, and shares of one GPU
 * (their limits in the spec, the checkpoint, a whole claim refused, fail closed). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdi/cdi.h"
#include "tests.h"

#define MIG(k) "gpu-1-mig-1g10gb-19-" #k
#define API "\"apiVersion\": \"resource.nvidia.com/v1beta1\", "
#define MAX_CLAIMS 8

/* ---- the fake world ----------------------------------------------------------------------- */

struct fake {
    pthread_mutex_t lock;
    const char *names[MAX_CLAIMS], *texts[MAX_CLAIMS]; /* the API's claims */
    size_t n_claims;
    const char *fail_op; /* this op fails on its fail_nth call (1-based) */
    int fail_nth, calls;
    int crash_after; /* > 0: from effect crash_after + 1 on, nothing happens any more */
    int n_effects;
    char **specs, **mps, **ts; /* claim uids with a spec, with daemons; "<uuid>=<interval>" */
    char **shares;             /* claim uids whose shares are held */
    char **env;                /* the last spec's first device's variables */
    char *saved;               /* the checkpoint file */
    size_t meet;               /* > 0: cdi_write waits until this many writers are in it */
    size_t in_write;
    pthread_cond_t cond;
};

/* One effect: counted, maybe failed or crashed. Called with f->lock held. */
static int step(struct fake *f, const char *op, struct error *err)
{
    f->n_effects++;
    if (f->crash_after > 0 && f->n_effects > f->crash_after)
        return error_set(err, -EINTR, "crashed before %s", op);
    if (f->fail_op && strcmp(f->fail_op, op) == 0 && ++f->calls == f->fail_nth)
        return error_set(err, -EIO, "%s failed (fake)", op);
    return 0;
}

static void drop(char **v, const char *prefix)
{
    size_t j = 0;

    for (size_t i = 0; v[i]; i++) {
        if (strncmp(v[i], prefix, strlen(prefix)) == 0)
            free(v[i]);
        else
            v[j++] = v[i];
    }
    v[j] = NULL;
}

static int f_read(void *ctx, const char *ns, const char *name, char **ret, struct error *err)
{
    struct fake *f = ctx;
    int r;

    (void)ns;
    pthread_mutex_lock(&f->lock);
    r = step(f, "read", err);
    for (size_t i = 0; r == 0 && i < f->n_claims; i++)
        if (strcmp(f->names[i], name) == 0) {
            *ret = str_dup(f->texts[i]);
            pthread_mutex_unlock(&f->lock);
            return 0;
        }
    pthread_mutex_unlock(&f->lock);
    return r < 0 ? r : error_set(err, -ENOENT, "not found");
}

static int f_timeslice(void *ctx, const char *uuid, enum dra_timeslice interval, bool reset,
                       struct error *err)
{
    struct fake *f = ctx;
    char entry[128];
    int r;

    pthread_mutex_lock(&f->lock);
    r = step(f, "timeslice", err);
    snprintf(entry, sizeof(entry), "%s=", uuid);
    if (r == 0)
        drop(f->ts, entry);
    snprintf(entry, sizeof(entry), "%s=%d", uuid, reset ? 0 : (int)interval);
    if (r == 0 && !reset)
        assert_int_equal(strv_push(&f->ts, entry), 0);
    pthread_mutex_unlock(&f->lock);
    return r;
}

static int f_mps_start(void *ctx, const struct dra_plan *plan, struct error *err)
{
    struct fake *f = ctx;
    int r;

    pthread_mutex_lock(&f->lock);
    r = step(f, "mps_start", err);
    if (r == 0 && !strv_contains(f->mps, plan->claim_uid))
        assert_int_equal(strv_push(&f->mps, plan->claim_uid), 0);
    pthread_mutex_unlock(&f->lock);
    return r;
}

static int f_share_start(void *ctx, const struct dra_plan *plan, struct error *err)
{
    struct fake *f = ctx;
    int r;

    pthread_mutex_lock(&f->lock);
    r = step(f, "share_start", err);
    if (r == 0 && !strv_contains(f->shares, plan->claim_uid))
        assert_int_equal(strv_push(&f->shares, plan->claim_uid), 0);
    pthread_mutex_unlock(&f->lock);
    return r;
}

static int f_share_stop(void *ctx, const char *uid, struct error *err)
{
    struct fake *f = ctx;
    int r;

    pthread_mutex_lock(&f->lock);
    r = step(f, "share_stop", err);
    if (r == 0)
        drop(f->shares, uid);
    pthread_mutex_unlock(&f->lock);
    return r;
}

static int f_mps_stop(void *ctx, const char *uid, struct error *err)
{
    struct fake *f = ctx;
    int r;

    pthread_mutex_lock(&f->lock);
    r = step(f, "mps_stop", err);
    if (r == 0)
        drop(f->mps, uid);
    pthread_mutex_unlock(&f->lock);
    return r;
}

/* Waits (bounded) until f->meet writers are here: only effects run outside the lock can. */
static void meet(struct fake *f)
{
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    f->in_write++;
    pthread_cond_broadcast(&f->cond);
    while (f->in_write < f->meet)
        if (pthread_cond_timedwait(&f->cond, &f->lock, &until) != 0)
            fail_msg("only %zu of %zu prepares ran their effects at the same time", f->in_write,
                     f->meet);
}

static int f_cdi_write(void *ctx, const struct cdi_claim *cc, struct error *err)
{
    struct fake *f = ctx;
    int r;

    pthread_mutex_lock(&f->lock);
    if (f->meet)
        meet(f);
    r = step(f, "cdi_write", err);
    assert_true(cc->n_devices > 0);
    assert_non_null(cc->devices[0].name);
    if (r == 0 && !strv_contains(f->specs, cc->uid))
        assert_int_equal(strv_push(&f->specs, cc->uid), 0);
    strv_free(f->env);
    f->env = strv_new();
    for (size_t i = 0; cc->devices[0].edits.env && cc->devices[0].edits.env[i]; i++)
        assert_int_equal(strv_push(&f->env, cc->devices[0].edits.env[i]), 0);
    pthread_mutex_unlock(&f->lock);
    return r;
}

static int f_cdi_remove(void *ctx, const char *uid, struct error *err)
{
    struct fake *f = ctx;
    int r;

    pthread_mutex_lock(&f->lock);
    r = step(f, "cdi_remove", err);
    if (r == 0)
        drop(f->specs, uid);
    pthread_mutex_unlock(&f->lock);
    return r;
}

static int f_save(void *ctx, const struct dra_checkpoint *cp, struct error *err)
{
    struct fake *f = ctx;
    char *text = NULL;
    int r;

    pthread_mutex_lock(&f->lock);
    r = step(f, "save", err);
    if (r == 0)
        r = dra_checkpoint_encode(cp, &text, err);
    if (r == 0) {
        free(f->saved);
        f->saved = text;
    }
    pthread_mutex_unlock(&f->lock);
    return r;
}

static struct fake *fake_new(void)
{
    struct fake *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->specs = strv_new();
    f->mps = strv_new();
    f->ts = strv_new();
    f->shares = strv_new();
    return f;
}

static void fake_free(struct fake *f)
{
    strv_free(f->specs);
    strv_free(f->mps);
    strv_free(f->ts);
    strv_free(f->shares);
    strv_free(f->env);
    free(f->saved);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
    free(f);
}

static struct dra_prepare_ops ops_of(struct fake *f)
{
    return (struct dra_prepare_ops){.claim_read = f_read,
                                    .timeslice = f_timeslice,
                                    .mps_start = f_mps_start,
                                    .mps_stop = f_mps_stop,
                                    .share_start = f_share_start,
                                    .share_stop = f_share_stop,
                                    .cdi_write = f_cdi_write,
                                    .cdi_remove = f_cdi_remove,
                                    .checkpoint_save = f_save,
                                    .ctx = f};
}

/* The state as a restarted plugin builds it: from the saved text (none: empty). */
static struct dra_state *state_from(const struct fake *f)
{
    struct dra_state_options o = {.node_name = "node-a", .mps_root = "/run/mps"};
    struct dra_checkpoint *cp = NULL;
    struct dra_state *s = NULL;
    struct error err = {0};

    if (f->saved)
        assert_int_equal(dra_checkpoint_decode(f->saved, strlen(f->saved), &cp, &err), 0);
    else
        cp = dra_checkpoint_new();
    assert_int_equal(dra_state_new(&o, cp, &s, &err), 0);
    assert_int_equal(
        dra_state_set_devices(s, dra_devices_dup(tx_plan_devices()), "550.54.15", &err), 0);
    return s;
}

/* ---- claims ------------------------------------------------------------------------------- */

/* gpu-0 under TimeSlicing Long and MIG 0 under MPS: every effect a prepare has. */
static const char *const shared_claim =
    "{\"metadata\": {\"name\": \"c\", \"namespace\": \"ml\", \"uid\": \"uid-1\"},"
    " \"status\": {\"allocation\": {\"devices\": {\"results\": ["
    "  {\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
    "   \"device\": \"gpu-0\"},"
    "  {\"request\": \"mig\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
    "   \"device\": \"" MIG(
        0) "\"}],"
           " \"config\": ["
           "  {\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"gpu.nvidia.com\", "
           "\"parameters\":"
           "   {" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\","
           "    \"timeSlicingConfig\": {\"interval\": \"Long\"}}}}},"
           "  {\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"gpu.nvidia.com\", "
           "\"parameters\":"
           "   {" API "\"kind\": \"MigDeviceConfig\", \"sharing\": {\"strategy\": \"MPS\"}}}}]}}}}";

static const struct dra_claim_ref ref_c = {"ml", "c", "uid-1"};

static void add_claim(struct fake *f, const char *name, const char *text)
{
    f->names[f->n_claims] = name;
    f->texts[f->n_claims++] = text;
}

static const struct dra_checkpoint_claim *entry(struct dra_state *s, const char *uid,
                                                struct dra_checkpoint **keep)
{
    *keep = dra_state_checkpoint(s);
    assert_non_null(*keep);
    return dra_checkpoint_find(*keep, uid);
}

/* The world after a clean prepare of shared_claim. */
static void assert_prepared_world(const struct fake *f)
{
    assert_true(strv_contains(f->specs, "uid-1"));
    assert_true(strv_contains(f->mps, "uid-1"));
    assert_int_equal(strv_length(f->ts), 1);
    assert_non_null(strstr(f->ts[0], "=3")); /* Long */
}

static void assert_empty_world(const struct fake *f)
{
    assert_int_equal(strv_length(f->specs), 0);
    assert_int_equal(strv_length(f->mps), 0);
    assert_int_equal(strv_length(f->ts), 0);
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_dra_prepare_then_retry_then_unprepare(void **state)
{
    struct fake *f = fake_new();
    struct dra_prepare_ops ops = ops_of(f);
    struct dra_state *s;
    struct dra_prepared p, again;
    struct dra_checkpoint *cp = NULL;
    struct error err = {0};
    int effects;
    (void)state;

    add_claim(f, "c", shared_claim);
    s = state_from(f);
    assert_int_equal(dra_prepare(s, &ops, &ref_c, &p, &err), 0);
    assert_int_equal(p.plan->n_devices, 2);
    assert_string_equal(p.claim->uid, "uid-1");
    assert_prepared_world(f);
    assert_int_equal(entry(s, "uid-1", &cp)->state, DRA_PREPARE_COMPLETED);
    dra_checkpoint_free(cp);
    assert_non_null(strstr(f->saved, "PrepareCompleted"));
    /* the kubelet retries: the same answer, only the claim read again */
    effects = f->n_effects;
    assert_int_equal(dra_prepare(s, &ops, &ref_c, &again, &err), 0);
    assert_int_equal(f->n_effects, effects + 1);
    assert_string_equal(again.plan->devices[1].cdi_device_id, p.plan->devices[1].cdi_device_id);
    dra_prepared_release(&again);
    dra_prepared_release(&p);
    assert_int_equal(dra_unprepare(s, &ops, "uid-1", &err), 0);
    assert_empty_world(f);
    assert_int_equal(dra_state_n_claims(s), 0);
    assert_int_equal(dra_unprepare(s, &ops, "uid-1", &err), 0); /* unknown: success */
    dra_state_free(s);
    fake_free(f);
}

/* Each effect fails once: the prepare fails naming it, and nothing stays behind (the entry
 * gone, or PrepareStarted where the effects stayed); a retry then succeeds. */
static void test_dra_prepare_fails_at_every_point(void **state)
{
    static const struct {
        const char *op;
        int nth;
        bool entry_stays; /* PrepareStarted kept: the effects were done */
    } cases[] = {{"timeslice", 1, false},
                 {"mps_start", 1, false},
                 {"cdi_write", 1, false},
                 {"save", 1, false},
                 {"save", 2, true}};
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct fake *f = fake_new();
        struct dra_prepare_ops ops = ops_of(f);
        struct dra_state *s;
        struct dra_prepared p;
        struct dra_checkpoint *cp = NULL;
        struct error err = {0};

        add_claim(f, "c", shared_claim);
        s = state_from(f);
        f->fail_op = cases[i].op;
        f->fail_nth = cases[i].nth;
        assert_int_equal(dra_prepare(s, &ops, &ref_c, &p, &err), -EIO);
        assert_int_equal(p.call, DRA_CALL_OK); /* the claim's error, not the call's */
        if (!strstr(err.msg, cases[i].op))
            fail_msg("%s: '%s'", cases[i].op, err.msg);
        if (cases[i].entry_stays) {
            assert_int_equal(entry(s, "uid-1", &cp)->state, DRA_PREPARE_STARTED);
            dra_checkpoint_free(cp);
        } else {
            assert_int_equal(dra_state_n_claims(s), 0);
            assert_empty_world(f);
        }
        f->fail_op = NULL;
        assert_int_equal(dra_prepare(s, &ops, &ref_c, &p, &err), 0);
        assert_prepared_world(f);
        dra_prepared_release(&p);
        dra_state_free(s);
        fake_free(f);
    }
}

/* The claim read: gone (NotFound), unreachable (Unavailable), another uid: the call's. */
static void test_dra_prepare_claim_read_failures(void **state)
{
    struct fake *f = fake_new();
    struct dra_prepare_ops ops = ops_of(f);
    struct dra_state *s;
    struct dra_prepared p;
    struct error err = {0};
    struct dra_claim_ref other = {"ml", "c", "uid-2"}, gone = {"ml", "nope", "uid-1"};
    (void)state;

    add_claim(f, "c", shared_claim);
    s = state_from(f);
    assert_int_equal(dra_prepare(s, &ops, &gone, &p, &err), -ENOENT);
    assert_int_equal(p.call, DRA_CALL_NOT_FOUND);
    assert_non_null(strstr(err.msg, "ResourceClaim ml/nope"));
    assert_int_equal(dra_prepare(s, &ops, &other, &p, &err), -ESTALE);
    assert_int_equal(p.call, DRA_CALL_UID_CHANGED);
    f->fail_op = "read";
    f->fail_nth = 1;
    f->calls = 0;
    assert_int_equal(dra_prepare(s, &ops, &ref_c, &p, &err), -EIO);
    assert_int_equal(p.call, DRA_CALL_UNAVAILABLE);
    assert_non_null(strstr(err.msg, "reading ResourceClaim ml/c"));
    assert_int_equal(dra_state_n_claims(s), 0);
    assert_empty_world(f);
    dra_state_free(s);
    fake_free(f);
}

/* A crash after every effect of a clean prepare: the plugin restarts from the checkpoint
 * file, the kubelet retries: the same answer, the same world, and unprepare leaves none. */
static void test_dra_prepare_every_crash_point(void **state)
{
    int total;
    (void)state;

    { /* how many effects a clean prepare has */
        struct fake *f = fake_new();
        struct dra_prepare_ops ops = ops_of(f);
        struct dra_state *s;
        struct dra_prepared p;
        add_claim(f, "c", shared_claim);
        s = state_from(f);
        assert_int_equal(dra_prepare(s, &ops, &ref_c, &p, NULL), 0);
        total = f->n_effects;
        dra_prepared_release(&p);
        dra_state_free(s);
        fake_free(f);
    }
    assert_int_equal(total, 6); /* read, save, timeslice, mps_start, cdi_write, save */
    for (int n = 1; n < total; n++) {
        struct fake *f = fake_new();
        struct dra_prepare_ops ops = ops_of(f);
        struct dra_state *s;
        struct dra_prepared p;
        struct error err = {0};

        add_claim(f, "c", shared_claim);
        s = state_from(f);
        f->crash_after = n;
        assert_true(dra_prepare(s, &ops, &ref_c, &p, &err) < 0);
        dra_state_free(s); /* the process is gone; what it wrote stays */
        f->crash_after = 0;
        s = state_from(f);
        assert_int_equal(dra_prepare(s, &ops, &ref_c, &p, &err), 0);
        assert_int_equal(p.plan->n_devices, 2);
        assert_prepared_world(f);
        dra_prepared_release(&p);
        assert_int_equal(dra_unprepare(s, &ops, "uid-1", &err), 0);
        assert_empty_world(f);
        assert_null(strstr(f->saved, "uid-1"));
        dra_state_free(s);
        fake_free(f);
    }
}

/* A failed unprepare keeps the claim (PrepareStarted, its save failed: re-put) for the
 * kubelet's retry, which finishes the job. */
static void test_dra_unprepare_failures_keep_the_claim(void **state)
{
    static const char *const ops_failing[] = {"cdi_remove", "timeslice", "mps_stop", "save"};
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(ops_failing); i++) {
        struct fake *f = fake_new();
        struct dra_prepare_ops ops = ops_of(f);
        struct dra_state *s;
        struct dra_prepared p;
        struct dra_checkpoint *cp = NULL;
        struct error err = {0};

        add_claim(f, "c", shared_claim);
        s = state_from(f);
        assert_int_equal(dra_prepare(s, &ops, &ref_c, &p, &err), 0);
        dra_prepared_release(&p);
        f->fail_op = ops_failing[i];
        f->calls = 0;
        f->fail_nth = 1;
        assert_int_equal(dra_unprepare(s, &ops, "uid-1", &err), -EIO);
        assert_non_null(strstr(err.msg, "ResourceClaim ml/c"));
        assert_int_equal(entry(s, "uid-1", &cp)->state, DRA_PREPARE_STARTED);
        dra_checkpoint_free(cp);
        f->fail_op = NULL;
        assert_int_equal(dra_unprepare(s, &ops, "uid-1", &err), 0);
        assert_empty_world(f);
        assert_int_equal(dra_state_n_claims(s), 0);
        dra_state_free(s);
        fake_free(f);
    }
}

/* adminAccess with a sharing config: refused before any effect, naming claim and fix. */
static void test_dra_prepare_admin_access_with_sharing(void **state)
{
    static const char *const admin =
        "{\"metadata\": {\"name\": \"watch\", \"namespace\": \"ops\", \"uid\": \"uid-9\"},"
        " \"status\": {\"allocation\": {\"devices\": {\"results\": ["
        "  {\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
        "   \"device\": \"gpu-0\", \"adminAccess\": true}],"
        " \"config\": [{\"source\": \"FromClass\", \"opaque\": {\"driver\": \"gpu.nvidia.com\","
        "  \"parameters\": {" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\":"
        "  \"TimeSlicing\"}}}}]}}}}";
    struct dra_claim_ref ref = {"ops", "watch", "uid-9"};
    struct fake *f = fake_new();
    struct dra_prepare_ops ops = ops_of(f);
    struct dra_state *s;
    struct dra_prepared p;
    struct error err = {0};
    (void)state;

    add_claim(f, "watch", admin);
    s = state_from(f);
    assert_int_equal(dra_prepare(s, &ops, &ref, &p, &err), -EPERM);
    assert_non_null(strstr(err.msg, "ResourceClaim ops/watch"));
    assert_non_null(strstr(err.msg, "adminAccess"));
    assert_non_null(strstr(err.msg, "remove the sharing config"));
    assert_int_equal(f->n_effects, 1); /* the read only: nothing saved, nothing touched */
    assert_int_equal(dra_state_n_claims(s), 0);
    assert_empty_world(f);
    dra_state_free(s);
    fake_free(f);
}

/* A claim the API holds but the parser refuses is that claim's error, never the call's. */
static void test_dra_prepare_unusable_claim_is_its_own_error(void **state)
{
    static const char *const big =
        "{\"metadata\": {\"name\": \"b\", \"namespace\": \"ml\", \"uid\": \"uid-3\"},"
        " \"status\": {\"allocation\": {\"devices\": {\"results\": ["
        "  {\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
        "   \"device\": \"gpu-0\"}],"
        " \"config\": [{\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"gpu.nvidia.com\","
        "  \"parameters\": {" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\","
        "  \"mpsConfig\": {\"defaultActiveThreadPercentage\": 9223372036854775808}}}}}]}}}}";
    struct dra_claim_ref ref = {"ml", "b", "uid-3"};
    struct fake *f = fake_new();
    struct dra_prepare_ops ops = ops_of(f);
    struct dra_state *s;
    struct dra_prepared p;
    struct error err = {0};
    (void)state;

    add_claim(f, "b", big);
    s = state_from(f);
    assert_true(dra_prepare(s, &ops, &ref, &p, &err) < 0);
    assert_int_equal(p.call, DRA_CALL_OK);
    assert_non_null(strstr(err.msg, "ResourceClaim ml/b (uid-3) cannot be prepared"));
    assert_empty_world(f);
    dra_state_free(s);
    fake_free(f);
}

struct worker {
    struct dra_state *s;
    const struct dra_prepare_ops *ops;
    struct dra_claim_ref ref;
    int r;
    struct error err;
};

static void *prepare_thread(void *arg)
{
    struct worker *w = arg;
    struct dra_prepared p;

    w->r = dra_prepare(w->s, w->ops, &w->ref, &p, &w->err);
    if (w->r == 0)
        dra_prepared_release(&p);
    return NULL;
}

/* Four claims prepared at the same time from four threads: their effects overlap (each CDI
 * write waits for the other three), the checkpoint ends with all four, saved. */
static void test_dra_prepare_concurrent_claims(void **state)
{
    static const char *const names[] = {"k0", "k1", "k2", "k3"};
    static const char *const uids[] = {"uid-k0", "uid-k1", "uid-k2", "uid-k3"};
    char texts[4][1024];
    struct worker w[4];
    pthread_t t[4];
    struct fake *f = fake_new();
    struct dra_prepare_ops ops = ops_of(f);
    struct dra_state *s;
    struct dra_checkpoint *cp = NULL;
    (void)state;

    for (int i = 0; i < 4; i++) {
        snprintf(texts[i], sizeof(texts[i]),
                 "{\"metadata\": {\"name\": \"%s\", \"namespace\": \"ml\", \"uid\": \"%s\"},"
                 " \"status\": {\"allocation\": {\"devices\": {\"results\": ["
                 "  {\"request\": \"r\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
                 "   \"device\": \"gpu-1-mig-1g10gb-19-%d\"}]}}}}",
                 names[i], uids[i], i);
        add_claim(f, names[i], texts[i]);
    }
    s = state_from(f);
    f->meet = 4;
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.s = s, .ops = &ops, .ref = {"ml", names[i], uids[i]}};
        assert_int_equal(pthread_create(&t[i], NULL, prepare_thread, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        if (w[i].r != 0)
            fail_msg("%s: %s", names[i], w[i].err.msg);
    }
    assert_int_equal(dra_state_n_claims(s), 4);
    assert_int_equal(dra_checkpoint_decode(f->saved, strlen(f->saved), &cp, NULL), 0);
    assert_int_equal(cp->n_claims, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(dra_checkpoint_find(cp, uids[i])->state, DRA_PREPARE_COMPLETED);
        assert_true(strv_contains(f->specs, uids[i]));
    }
    dra_checkpoint_free(cp);
    dra_state_free(s);
    fake_free(f);
}

/* ---- shares of one GPU (consumable capacity) -------------------------------------------- */

/* A claim holding a share of gpu-0: shareID and consumed memory (and compute when pct >= 0). */
static void share_claim(char *buf, size_t size, const char *name, const char *uid,
                        const char *share, const char *memory, int pct)
{
    char id[96] = "", cc[160] = "", mem[64] = "", cpu[32] = "";

    if (share)
        snprintf(id, sizeof(id), ", \"shareID\": \"%s\"", share);
    if (memory)
        snprintf(mem, sizeof(mem), "\"memory\": \"%s\"", memory);
    if (pct >= 0)
        snprintf(cpu, sizeof(cpu), "%s\"" DRA_CAPACITY_COMPUTE "\": \"%d\"", memory ? ", " : "",
                 pct);
    if (memory || pct >= 0)
        snprintf(cc, sizeof(cc), ", \"consumedCapacity\": {%s%s}", mem, cpu);
    snprintf(buf, size,
             "{\"metadata\": {\"name\": \"%s\", \"namespace\": \"ml\", \"uid\": \"%s\"},"
             " \"status\": {\"allocation\": {\"devices\": {\"results\": ["
             "  {\"request\": \"r\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
             "   \"device\": \"gpu-0\"%s%s}]}}}}",
             name, uid, id, cc);
}

/* Two shares of gpu-0 side by side: each prepared with its limits in its spec, the share id
 * in the plan and the checkpoint (a restarted plugin finds them), a whole-GPU claim refused
 * while they are held, the last unprepare releasing everything. */
static void test_dra_prepare_shares_of_one_gpu(void **state)
{
    char a[1024], b[1024], whole[1024];
    struct fake *f = fake_new();
    struct dra_prepare_ops ops = ops_of(f);
    struct dra_claim_ref ra = {"ml", "a", "uid-a"}, rb = {"ml", "b", "uid-b"},
                         rw = {"ml", "w", "uid-w"};
    struct dra_state *s, *again;
    struct dra_checkpoint *keep = NULL;
    struct dra_prepared p;
    struct error err = {0};
    (void)state;

    share_claim(a, sizeof(a), "a", "uid-a", "share-a", "10Gi", -1);
    share_claim(b, sizeof(b), "b", "uid-b", "share-b", "20Gi", 25);
    share_claim(whole, sizeof(whole), "w", "uid-w", NULL, NULL, -1);
    add_claim(f, "a", a);
    add_claim(f, "b", b);
    add_claim(f, "w", whole);
    s = state_from(f);
    assert_int_equal(dra_prepare(s, &ops, &ra, &p, &err), 0);
    assert_string_equal(p.plan->devices[0].share.id, "share-a");
    assert_int_equal(p.plan->devices[0].share.memory_mib, 10240);
    assert_true(strv_contains(f->env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M"));
    assert_non_null(strstr(f->env[0], "/run/mps/share-"));
    dra_prepared_release(&p);
    assert_int_equal(dra_prepare(s, &ops, &rb, &p, &err), 0);
    assert_int_equal(p.plan->devices[0].share.thread_pct, 25);
    assert_true(strv_contains(f->env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M"));
    assert_true(strv_contains(f->env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25"));
    dra_prepared_release(&p);
    assert_true(strv_contains(f->shares, "uid-a") && strv_contains(f->shares, "uid-b"));
    assert_int_equal(strv_length(f->mps), 0); /* no per-claim daemon for a share */
    /* defence in depth: the GPU whole while shares are held */
    assert_int_equal(dra_prepare(s, &ops, &rw, &p, &err), -EBUSY);
    assert_non_null(strstr(err.msg, "held in shares by claim uid-"));
    /* a restarted plugin: the shares from the saved checkpoint */
    again = state_from(f);
    assert_string_equal(entry(again, "uid-b", &keep)->plan->devices[0].share.id, "share-b");
    assert_int_equal(dra_checkpoint_find(keep, "uid-b")->plan->devices[0].share.thread_pct, 25);
    dra_checkpoint_free(keep);
    dra_state_free(again);
    assert_int_equal(dra_unprepare(s, &ops, "uid-a", &err), 0);
    assert_false(strv_contains(f->shares, "uid-a"));
    assert_true(strv_contains(f->shares, "uid-b"));
    assert_int_equal(dra_unprepare(s, &ops, "uid-b", &err), 0);
    assert_int_equal(strv_length(f->shares), 0);
    assert_int_equal(strv_length(f->specs), 0);
    assert_int_equal(dra_state_n_claims(s), 0);
    dra_state_free(s);
    fake_free(f);
}

/* Fail closed: a share whose limit cannot be put in force (share_start fails: the GPU's
 * daemon does not serve or refuses the limit) is not prepared and leaves nothing; a share
 * without consumed memory is refused before any effect. */
static void test_dra_prepare_share_fails_closed(void **state)
{
    char a[1024], nomem[1024];
    struct fake *f = fake_new();
    struct dra_prepare_ops ops = ops_of(f);
    struct dra_claim_ref ra = {"ml", "a", "uid-a"}, rn = {"ml", "n", "uid-n"};
    struct dra_state *s;
    struct dra_prepared p;
    struct error err = {0};
    (void)state;

    share_claim(a, sizeof(a), "a", "uid-a", "share-a", "10Gi", -1);
    share_claim(nomem, sizeof(nomem), "n", "uid-n", "share-n", NULL, -1);
    add_claim(f, "a", a);
    add_claim(f, "n", nomem);
    s = state_from(f);
    f->fail_op = "share_start";
    f->fail_nth = 1;
    assert_int_equal(dra_prepare(s, &ops, &ra, &p, &err), -EIO);
    assert_non_null(strstr(err.msg, "share_start failed"));
    assert_int_equal(strv_length(f->shares), 0);
    assert_int_equal(strv_length(f->specs), 0);
    assert_int_equal(dra_state_n_claims(s), 0);
    /* the retry, once the limit holds */
    assert_int_equal(dra_prepare(s, &ops, &ra, &p, &err), 0);
    dra_prepared_release(&p);
    f->n_effects = 0;
    assert_int_equal(dra_prepare(s, &ops, &rn, &p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "never prepared without its memory limit"));
    assert_int_equal(f->n_effects, 1); /* the read only: refused before any effect */
    assert_int_equal(dra_state_n_claims(s), 1);
    dra_state_free(s);
    fake_free(f);
}

int run_prepare_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_prepare_then_retry_then_unprepare),
        cmocka_unit_test(test_dra_prepare_fails_at_every_point),
        cmocka_unit_test(test_dra_prepare_claim_read_failures),
        cmocka_unit_test(test_dra_prepare_every_crash_point),
        cmocka_unit_test(test_dra_unprepare_failures_keep_the_claim),
        cmocka_unit_test(test_dra_prepare_admin_access_with_sharing),
        cmocka_unit_test(test_dra_prepare_unusable_claim_is_its_own_error),
        cmocka_unit_test(test_dra_prepare_concurrent_claims),
        cmocka_unit_test(test_dra_prepare_shares_of_one_gpu),
        cmocka_unit_test(test_dra_prepare_share_fails_closed),
    };
    return cmocka_run_group_tests_name("prepare", tests, NULL, NULL);
}

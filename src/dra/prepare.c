/* SPDX-License-Identifier: Apache-2.0 */
/* prepare.c: NodePrepareResources and NodeUnprepareResources for one claim, as a transaction
 * over the checkpoint (PrepareStarted, the effects, PrepareCompleted), the plan -> CDI claim
 * translation, and the state the DRA calls share with the loop (checkpoint and devices under
 * one lock, held only while the checkpoint changes). Pure: every effect (the API read,
 * nvidia-smi, MPS daemons, CDI files, the checkpoint file) goes through dra_prepare_ops. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi/cdi.h"
#include "dra/dra.h"

struct dra_state {
    pthread_mutex_t lock; /* everything below that changes: cp, devs, driver_version */
    struct dra_checkpoint *cp;
    struct dra_devices *devs;
    char *driver_version;
    char *node_name, *mps_root; /* fixed */
};

int dra_state_new(const struct dra_state_options *o, struct dra_checkpoint *cp,
                  struct dra_state **ret, struct error *err)
{
    struct dra_state *s = calloc(1, sizeof(*s));

    if (!s || !cp) {
        free(s);
        dra_checkpoint_free(cp);
        return error_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->lock, NULL);
    s->cp = cp;
    s->node_name = str_dup(o->node_name ? o->node_name : "");
    s->mps_root = str_dup(o->mps_root ? o->mps_root : "");
    s->driver_version = str_dup("");
    if (!s->node_name || !s->mps_root || !s->driver_version) {
        dra_state_free(s);
        return error_set(err, -ENOMEM, "out of memory");
    }
    *ret = s;
    return 0;
}

void dra_state_free(struct dra_state *s)
{
    if (!s)
        return;
    dra_checkpoint_free(s->cp);
    dra_devices_free(s->devs);
    free(s->driver_version);
    free(s->node_name);
    free(s->mps_root);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int dra_state_set_devices(struct dra_state *s, struct dra_devices *devs, const char *driver_version,
                          struct error *err)
{
    char *v = str_dup(driver_version ? driver_version : "");

    if (!v) {
        dra_devices_free(devs);
        return error_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&s->lock);
    dra_devices_free(s->devs);
    s->devs = devs;
    free(s->driver_version);
    s->driver_version = v;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

size_t dra_state_n_claims(struct dra_state *s)
{
    size_t n;

    pthread_mutex_lock(&s->lock);
    n = s->cp->n_claims;
    pthread_mutex_unlock(&s->lock);
    return n;
}

struct dra_checkpoint *dra_state_checkpoint(struct dra_state *s)
{
    struct dra_checkpoint *copy = dra_checkpoint_new();
    int r = copy ? 0 : -ENOMEM;

    pthread_mutex_lock(&s->lock);
    if (copy)
        str_copy(copy->boot_id, s->cp->boot_id, sizeof(copy->boot_id));
    for (size_t i = 0; r == 0 && i < s->cp->n_claims; i++) {
        struct dra_plan *p = dra_plan_dup(s->cp->claims[i].plan);
        r = p ? dra_checkpoint_put(copy, s->cp->claims[i].state, p, NULL) : -ENOMEM;
    }
    pthread_mutex_unlock(&s->lock);
    if (r < 0) {
        dra_checkpoint_free(copy);
        return NULL;
    }
    return copy;
}

void dra_prepared_release(struct dra_prepared *p)
{
    dra_plan_free(p->plan);
    dra_claim_free(p->claim);
    *p = (struct dra_prepared){0};
}

int dra_mps_daemon_name(const struct dra_plan *plan, unsigned group, char *buf, size_t size)
{
    int n = snprintf(buf, size, "claim-%s-%u", plan->claim_uid, group);

    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int dra_share_daemon_name(const char *gpu_uuid, char *buf, size_t size)
{
    int n = snprintf(buf, size, "share-%s", gpu_uuid);

    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* ---- the effects of one claim (no lock held) ---------------------------------------------- */

/* A whole GPU under TimeSlicing of a claim that owns it (not admin access: refused). */
static bool sets_timeslice(const struct dra_plan_device *pd)
{
    return pd->sharing.mode->dra_time_slice && pd->device.type == DRA_DEVICE_GPU &&
           !pd->admin_access;
}

static bool has_mps(const struct dra_plan *plan)
{
    for (size_t i = 0; i < plan->n_devices; i++)
        if (plan->devices[i].sharing.mode->control_daemon)
            return true;
    return false;
}

static bool has_share(const struct dra_plan *plan)
{
    for (size_t i = 0; i < plan->n_devices; i++)
        if (plan->devices[i].share.id[0])
            return true;
    return false;
}

/* A device's MPS edits: its daemon's pipe folder (same path inside) and the variables. A
 * share's client also gets its limits (device 0: the share's daemon serves that GPU only, so
 * its clients see it as device 0); the daemon holds them too (docs/dra.md, what a share's
 * limit enforces). */
struct mps_edits {
    char pipe[4096], env[4200], limit[96], threads[64];
    const char *envs[4];
    struct cdi_mount mount;
};

static int mps_edits_of(const char *mps_root, const struct dra_plan *plan,
                        const struct dra_plan_device *pd, struct mps_edits *e,
                        struct cdi_claim_device *dev)
{
    char name[160];
    size_t k = 0;
    int r = pd->share.id[0] ? dra_share_daemon_name(pd->device.uuid, name, sizeof(name))
                            : dra_mps_daemon_name(plan, pd->group, name, sizeof(name));
    int n = r == 0 ? snprintf(e->pipe, sizeof(e->pipe), "%s/%s/pipe", mps_root, name) : -1;

    if (n < 0 || (size_t)n >= sizeof(e->pipe))
        return -ENAMETOOLONG;
    snprintf(e->env, sizeof(e->env), "CUDA_MPS_PIPE_DIRECTORY=%s", e->pipe);
    e->envs[k++] = e->env;
    if (pd->share.id[0]) {
        snprintf(e->limit, sizeof(e->limit), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%lluM",
                 (unsigned long long)pd->share.memory_mib);
        e->envs[k++] = e->limit;
    }
    if (pd->share.id[0] && pd->share.thread_pct > 0) {
        snprintf(e->threads, sizeof(e->threads), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d",
                 pd->share.thread_pct);
        e->envs[k++] = e->threads;
    }
    e->mount = (struct cdi_mount){.host_path = e->pipe, .container_path = e->pipe};
    dev->edits = (struct cdi_edits){.env = e->envs, .mounts = &e->mount, .n_mounts = 1};
    return 0;
}

/* The plan as the claim's CDI spec: a device per plan device, MPS clients' edits. */
static int write_spec(const struct dra_state *s, const struct dra_prepare_ops *ops,
                      const struct dra_plan *plan, const char *driver_version, struct error *err)
{
    size_t n = plan->n_devices ? plan->n_devices : 1;
    struct cdi_claim_device *devs = calloc(n, sizeof(*devs));
    struct mps_edits *mps = calloc(n, sizeof(*mps));
    struct cdi_claim cc = {.uid = plan->claim_uid,
                           .driver_version = driver_version,
                           .devices = devs,
                           .n_devices = plan->n_devices};
    int r = devs && mps ? 0 : error_set(err, -ENOMEM, "out of memory");

    for (size_t i = 0; r == 0 && i < plan->n_devices; i++) {
        const struct dra_plan_device *pd = &plan->devices[i];
        devs[i] = (struct cdi_claim_device){.name = pd->cdi_device_name,
                                            .minor = pd->device.minor,
                                            .is_mig = pd->device.type == DRA_DEVICE_MIG,
                                            .gi_id = pd->device.gi_id,
                                            .ci_id = pd->device.ci_id};
        if ((pd->sharing.mode->control_daemon || pd->share.id[0]) &&
            mps_edits_of(s->mps_root, plan, pd, &mps[i], &devs[i]) < 0)
            r = error_set(err, -ENAMETOOLONG, "the MPS root %s is too long", s->mps_root);
    }
    if (r == 0)
        r = ops->cdi_write(ops->ctx, &cc, err);
    free(mps);
    free(devs);
    return r;
}

/* Sets the time-slices (*ret_n: how many devices were reached, for the undo). */
static int timeslices_set(const struct dra_prepare_ops *ops, const struct dra_plan *plan,
                          size_t *ret_n, struct error *err)
{
    int r = 0;

    for (*ret_n = 0; r == 0 && *ret_n < plan->n_devices; (*ret_n)++) {
        const struct dra_plan_device *pd = &plan->devices[*ret_n];
        if (sets_timeslice(pd))
            r = ops->timeslice(ops->ctx, pd->device.uuid, pd->sharing.interval, false, err);
    }
    return r;
}

/* Undoes the effects of the plan's first n_ts devices' time-slices, its MPS daemons and its
 * spec; every step is tried, the first failure is returned. */
static int effects_undo(const struct dra_prepare_ops *ops, const struct dra_plan *plan, size_t n_ts,
                        struct error *err)
{
    struct error e = {0};
    int r = ops->cdi_remove(ops->ctx, plan->claim_uid, err), q;

    for (size_t i = 0; i < n_ts && i < plan->n_devices; i++) {
        const struct dra_plan_device *pd = &plan->devices[i];
        if (!sets_timeslice(pd))
            continue;
        q = ops->timeslice(ops->ctx, pd->device.uuid, DRA_TIMESLICE_DEFAULT, true,
                           r < 0 ? &e : err);
        r = r < 0 ? r : q;
    }
    if (has_mps(plan)) {
        q = ops->mps_stop(ops->ctx, plan->claim_uid, r < 0 ? &e : err);
        r = r < 0 ? r : q;
    }
    if (has_share(plan)) {
        q = ops->share_stop(ops->ctx, plan->claim_uid, r < 0 ? &e : err);
        r = r < 0 ? r : q;
    }
    return r;
}

/* Sharing, then the CDI spec: what the containers of the claim's pods will see. On a
 * failure what was done is undone; *ret_undone says whether that worked. */
static int effects_apply(const struct dra_state *s, const struct dra_prepare_ops *ops,
                         const struct dra_plan *plan, const char *driver_version, bool *ret_undone,
                         struct error *err)
{
    size_t n_ts = 0;
    int r = timeslices_set(ops, plan, &n_ts, err);

    if (r == 0 && has_mps(plan))
        r = ops->mps_start(ops->ctx, plan, err);
    if (r == 0 && has_share(plan))
        r = ops->share_start(ops->ctx, plan, err);
    if (r == 0)
        r = write_spec(s, ops, plan, driver_version, err);
    *ret_undone = r < 0 && effects_undo(ops, plan, n_ts, NULL) == 0;
    return r;
}

/* ---- the checkpoint (under the lock) ------------------------------------------------------ */

static struct dra_checkpoint_claim *entry_of(struct dra_checkpoint *cp, const char *uid)
{
    for (size_t i = 0; i < cp->n_claims; i++)
        if (strcmp(cp->claims[i].plan->claim_uid, uid) == 0)
            return &cp->claims[i];
    return NULL;
}

/* Sharing settings belong to the claim that allocated the device: an admin-access result
 * (monitoring, debugging) may not change them, so a sharing config on one is refused. */
static int admin_guard(const struct dra_plan *plan, struct error *err)
{
    for (size_t i = 0; i < plan->n_devices; i++) {
        const struct dra_plan_device *pd = &plan->devices[i];
        if (!pd->admin_access || !cfg_sharing_mode_shares(pd->sharing.mode))
            continue;
        return error_set(err, -EPERM,
                         "ResourceClaim %s/%s: request %s has adminAccess and a %s sharing "
                         "config for device %s: an admin-access claim may not change the "
                         "sharing settings of a device another claim allocated; remove the "
                         "sharing config for this request (claim or DeviceClass config)",
                         plan->claim_namespace ? plan->claim_namespace : "", plan->claim_name,
                         pd->request, pd->sharing.mode->dra_name, pd->device.name);
    }
    return 0;
}

/* Under the lock: the answer of a claim prepared completely (*ret_done), or the new plan
 * recorded and saved as PrepareStarted. *ret_version: the driver version for the spec. */
static int txn_start(struct dra_state *s, const struct dra_prepare_ops *ops,
                     const struct dra_claim *claim, struct dra_plan **ret, char **ret_version,
                     bool *ret_done, struct error *err)
{
    struct dra_checkpoint_claim *e;
    struct dra_plan *plan = NULL, *copy = NULL;
    bool had;
    int r;

    pthread_mutex_lock(&s->lock);
    e = entry_of(s->cp, claim->uid);
    had = e != NULL;
    *ret_done = e && e->state == DRA_PREPARE_COMPLETED;
    if (*ret_done) { /* the kubelet retried: the same answer */
        plan = dra_plan_dup(e->plan);
        r = plan ? 0 : error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = dra_plan_build(claim, s->node_name, s->devs, s->cp, &plan, err);
    if (r == 0)
        r = admin_guard(plan, err);
    copy = r == 0 ? dra_plan_dup(plan) : NULL;
    if (r == 0 && !copy)
        r = error_set(err, -ENOMEM, "out of memory");
    /* PrepareStarted first: a crash from here on leaves a record unprepare cleans up */
    if (r == 0)
        r = dra_checkpoint_put(s->cp, DRA_PREPARE_STARTED, copy, err);
    if (r == 0) {
        r = ops->checkpoint_save(ops->ctx, s->cp, err);
        if (r < 0 && !had)
            dra_checkpoint_remove(s->cp, claim->uid); /* as the file still has it */
    }
out:
    *ret_version = r == 0 ? str_dup(s->driver_version) : NULL;
    if (r == 0 && !*ret_version)
        r = error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_unlock(&s->lock);
    if (r < 0) {
        dra_plan_free(plan);
        return r;
    }
    *ret = plan;
    return 0;
}

/* Under the lock: PrepareCompleted saved; when the save fails the entry stays
 * PrepareStarted, so that the retry redoes the effects and saves again. */
static int txn_complete(struct dra_state *s, const struct dra_prepare_ops *ops,
                        const struct dra_plan *plan, struct error *err)
{
    struct dra_plan *copy = dra_plan_dup(plan);
    struct dra_checkpoint_claim *e;
    int r;

    if (!copy)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_lock(&s->lock);
    r = dra_checkpoint_put(s->cp, DRA_PREPARE_COMPLETED, copy, err);
    if (r == 0)
        r = ops->checkpoint_save(ops->ctx, s->cp, err);
    e = r < 0 ? entry_of(s->cp, plan->claim_uid) : NULL;
    if (e)
        e->state = DRA_PREPARE_STARTED;
    pthread_mutex_unlock(&s->lock);
    return r;
}

/* Under the lock: the entry of a claim whose effects were undone goes (a failed save is
 * harmless: the file's PrepareStarted entry is cleaned by the next prepare or unprepare). */
static void txn_abort(struct dra_state *s, const struct dra_prepare_ops *ops, const char *uid)
{
    pthread_mutex_lock(&s->lock);
    if (dra_checkpoint_remove(s->cp, uid))
        (void)ops->checkpoint_save(ops->ctx, s->cp, NULL);
    pthread_mutex_unlock(&s->lock);
}

/* ---- prepare and unprepare ---------------------------------------------------------------- */

/* The claim as the API has it now (no lock held). A claim the API has but that cannot be
 * parsed (a config the parser refuses) is this claim's error, not the call's. */
static int claim_get(const struct dra_prepare_ops *ops, const struct dra_claim_ref *ref,
                     struct dra_claim **ret, enum dra_call_failure *ret_call, struct error *err)
{
    char *text = NULL;
    int r = ops->claim_read(ops->ctx, ref->ns, ref->name, &text, err);

    if (r < 0) {
        *ret_call = r == -ENOENT ? DRA_CALL_NOT_FOUND : DRA_CALL_UNAVAILABLE;
        error_prefix(err, "%sResourceClaim %s/%s", r == -ENOENT ? "" : "reading ", ref->ns,
                     ref->name);
        return r;
    }
    r = dra_claim_parse_text(text, strlen(text), ret, err);
    free(text);
    if (r < 0) {
        error_prefix(err, "ResourceClaim %s/%s (%s) cannot be prepared", ref->ns, ref->name,
                     ref->uid);
        return r;
    }
    if (strcmp((*ret)->uid, ref->uid) != 0) {
        *ret_call = DRA_CALL_UID_CHANGED;
        r = error_set(err, -ESTALE,
                      "ResourceClaim %s/%s has UID %s, not %s: it was deleted and created "
                      "again; the kubelet retries with the new one",
                      ref->ns, ref->name, (*ret)->uid, ref->uid);
        dra_claim_free(*ret);
        *ret = NULL;
    }
    return r;
}

int dra_prepare(struct dra_state *s, const struct dra_prepare_ops *ops,
                const struct dra_claim_ref *ref, struct dra_prepared *ret, struct error *err)
{
    struct dra_claim *claim = NULL;
    struct dra_plan *plan = NULL;
    char *version = NULL;
    bool done = false, undone = false;
    int r;

    *ret = (struct dra_prepared){0};
    r = claim_get(ops, ref, &claim, &ret->call, err);
    if (r == 0)
        r = txn_start(s, ops, claim, &plan, &version, &done, err);
    if (r == 0 && !done)
        r = effects_apply(s, ops, plan, version, &undone, err);
    if (r < 0 && undone)
        txn_abort(s, ops, plan->claim_uid);
    if (r == 0 && !done)
        r = txn_complete(s, ops, plan, err);
    free(version);
    if (r < 0) {
        dra_plan_free(plan);
        dra_claim_free(claim);
        return r;
    }
    ret->plan = plan;
    ret->claim = claim;
    return 0;
}

int dra_unprepare(struct dra_state *s, const struct dra_prepare_ops *ops, const char *claim_uid,
                  struct error *err)
{
    struct dra_checkpoint_claim *e;
    struct dra_plan *plan = NULL;
    bool known;
    int r;

    pthread_mutex_lock(&s->lock);
    e = entry_of(s->cp, claim_uid);
    known = e != NULL;
    plan = e ? dra_plan_dup(e->plan) : NULL;
    pthread_mutex_unlock(&s->lock);
    if (!known)
        return 0; /* never prepared here, or unprepared already: the kubelet retried */
    if (!plan)
        return error_set(err, -ENOMEM, "out of memory");
    r = effects_undo(ops, plan, plan->n_devices, err);
    pthread_mutex_lock(&s->lock);
    e = r < 0 ? entry_of(s->cp, claim_uid) : NULL;
    if (r == 0) {
        dra_checkpoint_remove(s->cp, claim_uid);
        r = ops->checkpoint_save(ops->ctx, s->cp, err);
        struct dra_plan *back = r < 0 ? dra_plan_dup(plan) : NULL;
        if (back) /* the file still has it: so does the state, for the retry */
            (void)dra_checkpoint_put(s->cp, DRA_PREPARE_STARTED, back, NULL);
    } else if (e && e->state != DRA_PREPARE_STARTED) {
        e->state = DRA_PREPARE_STARTED; /* half undone: a prepare must redo it all */
        (void)ops->checkpoint_save(ops->ctx, s->cp, NULL);
    }
    pthread_mutex_unlock(&s->lock);
    if (r < 0)
        error_prefix(err, "unpreparing ResourceClaim %s/%s (%s)",
                     plan->claim_namespace ? plan->claim_namespace : "", plan->claim_name,
                     claim_uid);
    dra_plan_free(plan);
    return r;
}

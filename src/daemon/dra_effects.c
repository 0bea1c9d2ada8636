/* SPDX-License-Identifier: Apache-2.0 */
/* dra_effects.c: part of the DRA feature — what a prepare does to the node, as the ops of
 * dra/prepare.c: the claim read from the API, nvidia-smi for time-slices (a child reaped
 * through its pidfd within a deadline, on the calling worker thread), MPS control daemons
 * (one supervisor, its own lock and a thread that handles its deaths and restarts), the
 * claim's CDI spec, the checkpoint file. Calls of different claims run at the same time. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdi/cdi.h"
#include "daemon/internal.h"
#include "dra/dra.h"
#include "kube/kube.h"
#include "mps/mps.h"

#define DRA_SMI_TIMEOUT_MS 10000
#define DRA_MAX_SHARES 256 /* shares prepared on one node (7 a GPU on 8 GPUs is 56) */

/* A share of a GPU held by a claim: what its GPU's daemon must hold. */
struct share_ref {
    char claim_uid[64];
    char gpu[INV_UUID_MAX];
    char id[DRA_SHARE_ID_MAX];
    uint64_t memory_mib;
    int thread_pct; /* -1: none consumed */
};

struct daemon__dra_effects {
    struct kube_client *kube; /* borrowed */
    char *plugin_dir, *cp_path, *mps_root, *smi;
    const char *cdi_root;
    struct cdi_options cdi;
    atomic_size_t n_saved; /* claims in the checkpoint last saved, for /metrics */
    /* MPS: the supervisor is not thread-safe; mps_lock serializes it */
    pthread_mutex_t mps_lock;
    struct mps_supervisor *mps;
    struct gpu_nvml *nvml;         /* for MPS compute modes */
    struct mps_daemon_spec *specs; /* MPS_MAX_DAEMONS: the daemons wanted */
    size_t n_specs;
    int stop_fd;
    pthread_t mps_thread;
    bool mps_started;
    /* the shares prepared (under mps_lock): each GPU with shares has one daemon in specs */
    struct share_ref *shares; /* DRA_MAX_SHARES */
    size_t n_shares;
};

/* ---- nvidia-smi ------------------------------------------------------------------------- */

/* Waits for pid within ms through its pidfd; true when it exited (and was reaped). */
static bool reap_within(pid_t pid, int ms, int *ret_status)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    bool done;

    if (fd < 0) /* no pidfd (old kernel): nvidia-smi ends on its own */
        return waitpid(pid, ret_status, 0) == pid;
    while (poll(&p, 1, ms) < 0 && errno == EINTR)
        ;
    done = waitpid(pid, ret_status, WNOHANG) == pid;
    close(fd);
    return done;
}

/* Runs nvidia-smi with args (NULL-terminated) from the driver root, as NVIDIA's driver does:
 * NVML has no public call for the time-slice. Its output goes to our log. */
static int run_smi(const struct daemon__dra_effects *e, const char *const *args, struct error *err)
{
    const char *argv[8] = {e->smi};
    int status = 0, r;
    size_t n = 1;
    pid_t pid;

    for (; args[n - 1] && n < GS_ARRAY_SIZE(argv) - 1; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    r = proc_spawn(e->smi, (char *const *)argv, NULL, -1, -1, &pid);
    if (r < 0)
        return error_set_errno(err, -r, "running %s", e->smi);
    if (!reap_within(pid, DRA_SMI_TIMEOUT_MS, &status)) {
        kill(pid, SIGKILL);
        (void)waitpid(pid, &status, 0);
        return error_set(err, -ETIMEDOUT, "%s %s did not finish within %d s", e->smi, args[0],
                         DRA_SMI_TIMEOUT_MS / 1000);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    return error_set(err, -EIO,
                     "%s %s %s failed (exit %d); is nvidia-smi under the container driver root "
                     "(--container-driver-root, or --nvidia-smi)?",
                     e->smi, args[0], args[1] ? args[1] : "",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static int op_timeslice(void *ctx, const char *uuid, enum dra_timeslice interval, bool reset,
                        struct error *err)
{
    const struct daemon__dra_effects *e = ctx;
    char level[8];
    int r;

    snprintf(level, sizeof(level), "%d", reset ? DRA_TIMESLICE_DEFAULT : (int)interval);
    /* NVIDIA's argv (cmd/gpu-kubelet-plugin/nvlib.go): -c DEFAULT, then the time-slice */
    const char *mode[] = {"-i", uuid, "-c", "DEFAULT", NULL};
    const char *policy[] = {"compute-policy", "-i", uuid, "--set-timeslice", level, NULL};
    r = reset ? 0 : run_smi(e, mode, err);
    if (r == 0)
        r = run_smi(e, policy, err);
    if (r == 0)
        log_info("DRA: GPU %s time-slice %s", uuid, reset ? "reset to Default (0)" : level);
    return r;
}

/* ---- MPS control daemons ---------------------------------------------------------------- */

/* Drops the wanted daemons of a claim ("claim-<uid>-<g>"). Under mps_lock. */
static void specs_drop(struct daemon__dra_effects *e, const char *claim_uid)
{
    char prefix[160];
    size_t j = 0;

    snprintf(prefix, sizeof(prefix), "claim-%s-", claim_uid);
    for (size_t i = 0; i < e->n_specs; i++)
        if (!str_startswith(e->specs[i].resource, prefix))
            e->specs[j++] = e->specs[i];
    e->n_specs = j;
}

/* Adds the daemons of the plan's MPS groups, each GPU once. Under mps_lock. */
static int specs_add(struct daemon__dra_effects *e, const struct dra_plan *plan, struct error *err)
{
    for (size_t i = 0; i < plan->n_devices; i++) {
        const struct dra_plan_device *pd = &plan->devices[i];
        struct mps_daemon_spec *sp;
        char name[sizeof(sp->resource)];
        size_t k = 0, u = 0;
        if (!pd->sharing.mode->control_daemon)
            continue;
        if (dra_mps_daemon_name(plan, pd->group, name, sizeof(name)) < 0)
            return error_set(err, -ENAMETOOLONG, "claim uid %s is too long", plan->claim_uid);
        while (k < e->n_specs && strcmp(e->specs[k].resource, name) != 0)
            k++;
        if (k == MPS_MAX_DAEMONS)
            return error_set(err, -E2BIG, "more than %d MPS daemons on one node", MPS_MAX_DAEMONS);
        sp = &e->specs[k];
        if (k == e->n_specs) {
            *sp = (struct mps_daemon_spec){0};
            e->n_specs++;
        }
        str_copy(sp->resource, name, sizeof(sp->resource));
        while (u < sp->n && strcmp(sp->uuids[u], pd->device.uuid) != 0)
            u++;
        if (u == sp->n && sp->n == MPS_MAX_DEVICES)
            return error_set(err, -E2BIG, "more than %d devices in one MPS group", MPS_MAX_DEVICES);
        if (u == sp->n) /* CUDA_VISIBLE_DEVICES names each device once */
            str_copy(sp->uuids[sp->n++], pd->device.uuid, INV_UUID_MAX);
        sp->mem_limit_mib[u] = pd->sharing.pinned_limit_mib;
        if (pd->sharing.active_thread_percentage >= 0)
            sp->thread_pct = (unsigned)pd->sharing.active_thread_percentage;
    }
    return 0;
}

/* The claim's daemons, which must serve before the prepare succeeds (fail closed). */
static int op_mps_start(void *ctx, const struct dra_plan *plan, struct error *err)
{
    struct daemon__dra_effects *e = ctx;
    struct error why = {0};
    int r;

    if (!e->mps)
        return error_set(err, -ENODEV, "claim %s asks for MPS but no MPS supervisor runs",
                         plan->claim_uid);
    pthread_mutex_lock(&e->mps_lock);
    specs_drop(e, plan->claim_uid);
    r = specs_add(e, plan, err);
    if (r == 0)
        (void)mps_supervisor_set(e->mps, e->specs, e->n_specs, &why);
    for (size_t i = 0; r == 0 && i < e->n_specs; i++) {
        char prefix[160];
        snprintf(prefix, sizeof(prefix), "claim-%s-", plan->claim_uid);
        if (str_startswith(e->specs[i].resource, prefix) &&
            !mps_supervisor_up(e->mps, e->specs[i].resource))
            r = error_set(err, -EAGAIN,
                          "the MPS control daemon %s of the claim does not serve%s%s; the "
                          "prepare fails until it does (the kubelet retries)",
                          e->specs[i].resource, *why.msg ? ": " : "", why.msg);
    }
    if (r < 0) { /* nothing kept running for a claim that is not prepared */
        specs_drop(e, plan->claim_uid);
        (void)mps_supervisor_set(e->mps, e->specs, e->n_specs, NULL);
    }
    pthread_mutex_unlock(&e->mps_lock);
    return r;
}

static int op_mps_stop(void *ctx, const char *claim_uid, struct error *err)
{
    struct daemon__dra_effects *e = ctx;
    int r;

    if (!e->mps)
        return 0;
    pthread_mutex_lock(&e->mps_lock);
    specs_drop(e, claim_uid);
    r = mps_supervisor_set(e->mps, e->specs, e->n_specs, err);
    pthread_mutex_unlock(&e->mps_lock);
    return r == -E2BIG || r == -ENOMEM ? r : 0; /* the others' restarts are the supervisor's */
}

/* ---- shares: one MPS control daemon per GPU whose memory is sold in shares ---------------- */

/* The daemon spec of a GPU's shares (*ret_n: how many shares it holds). Its default limits
 * are the largest share's memory and, when every share consumed compute, the largest
 * share's threads: a client that drops its own limits (the container's environment) gets no
 * more than that; each client's own limit is its share's (CDI env). Under mps_lock. */
static size_t share_spec(const struct daemon__dra_effects *e, const char *gpu,
                         struct mps_daemon_spec *sp)
{
    size_t n = 0;
    bool all_threads = true;

    *sp = (struct mps_daemon_spec){.n = 1};
    (void)dra_share_daemon_name(gpu, sp->resource, sizeof(sp->resource));
    str_copy(sp->uuids[0], gpu, INV_UUID_MAX);
    for (size_t i = 0; i < e->n_shares; i++) {
        const struct share_ref *sh = &e->shares[i];
        if (strcmp(sh->gpu, gpu) != 0)
            continue;
        n++;
        if (sh->memory_mib > sp->mem_limit_mib[0])
            sp->mem_limit_mib[0] = sh->memory_mib;
        all_threads &= sh->thread_pct > 0;
        if (sh->thread_pct > 0 && (unsigned)sh->thread_pct > sp->thread_pct)
            sp->thread_pct = (unsigned)sh->thread_pct;
    }
    if (!all_threads)
        sp->thread_pct = 0;
    return n;
}

static ssize_t spec_index(const struct daemon__dra_effects *e, const char *resource)
{
    for (size_t k = 0; k < e->n_specs; k++)
        if (strcmp(e->specs[k].resource, resource) == 0)
            return (ssize_t)k;
    return -1;
}

/* Makes the daemon of gpu match its shares: started with the first (serving before this
 * returns 0), its limits changed in place when they change (no restart: the other shares'
 * clients keep running), stopped with the last. Under mps_lock. */
static int shares_sync(struct daemon__dra_effects *e, const char *gpu, struct error *err)
{
    struct mps_daemon_spec sp;
    size_t n = share_spec(e, gpu, &sp);
    ssize_t k = spec_index(e, sp.resource);
    struct error why = {0};
    int r;

    if (n == 0 && k < 0)
        return 0;
    if (n == 0) { /* the last share went: the daemon stops */
        e->specs[k] = e->specs[--e->n_specs];
        r = mps_supervisor_set(e->mps, e->specs, e->n_specs, err);
        return r == -E2BIG || r == -ENOMEM ? r : 0;
    }
    if (k >= 0 && e->specs[k].mem_limit_mib[0] == sp.mem_limit_mib[0] &&
        e->specs[k].thread_pct == sp.thread_pct)
        return mps_supervisor_up(e->mps, sp.resource)
                   ? 0
                   : error_set(err, -EAGAIN,
                               "the MPS control daemon %s of GPU %s does not serve; a share is "
                               "never prepared without its limit in force: the prepare fails "
                               "until it serves again (the kubelet retries)",
                               sp.resource, gpu);
    if (k >= 0) {
        r = mps_supervisor_set_limits(e->mps, &sp, err);
        if (r < 0) {
            error_prefix(err,
                         "the limits of the shares of GPU %s could not be applied; a share "
                         "is never prepared without its limit in force",
                         gpu);
            return r;
        }
        e->specs[k] = sp;
        return 0;
    }
    if (e->n_specs == MPS_MAX_DAEMONS)
        return error_set(err, -E2BIG, "more than %d MPS daemons on one node", MPS_MAX_DAEMONS);
    e->specs[e->n_specs++] = sp;
    r = mps_supervisor_set(e->mps, e->specs, e->n_specs, &why);
    if (r == -E2BIG || r == -ENOMEM) { /* not started at all: up() would not know it */
        e->n_specs--;
        (void)mps_supervisor_set(e->mps, e->specs, e->n_specs, NULL);
        return error_set(err, r, "starting the MPS control daemon %s of GPU %s: %s", sp.resource,
                         gpu, why.msg);
    }
    if (mps_supervisor_up(e->mps, sp.resource))
        return 0;
    return error_set(err, -EAGAIN,
                     "the MPS control daemon %s of GPU %s does not serve%s%s; a share is never "
                     "prepared without its limit in force: the prepare fails until it does (the "
                     "kubelet retries)",
                     sp.resource, gpu, *why.msg ? ": " : "", why.msg);
}

static void shares_drop(struct daemon__dra_effects *e, const char *claim_uid)
{
    size_t j = 0;

    for (size_t i = 0; i < e->n_shares; i++)
        if (strcmp(e->shares[i].claim_uid, claim_uid) != 0)
            e->shares[j++] = e->shares[i];
    e->n_shares = j;
}

static int shares_add(struct daemon__dra_effects *e, const struct dra_plan *plan, struct error *err)
{
    for (size_t i = 0; i < plan->n_devices; i++) {
        const struct dra_plan_device *pd = &plan->devices[i];
        struct share_ref *sh;
        if (!pd->share.id[0])
            continue;
        if (e->n_shares == DRA_MAX_SHARES)
            return error_set(err, -E2BIG, "more than %d shares prepared on one node",
                             DRA_MAX_SHARES);
        sh = &e->shares[e->n_shares++];
        *sh = (struct share_ref){.memory_mib = pd->share.memory_mib,
                                 .thread_pct = pd->share.thread_pct};
        str_copy(sh->claim_uid, plan->claim_uid, sizeof(sh->claim_uid));
        str_copy(sh->gpu, pd->device.uuid, sizeof(sh->gpu));
        str_copy(sh->id, pd->share.id, sizeof(sh->id));
    }
    return 0;
}

/* The GPUs of the claim's shares (up to n), for the daemons to sync after a change. */
static size_t claim_gpus(const struct daemon__dra_effects *e, const char *claim_uid,
                         char (*gpus)[INV_UUID_MAX], size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < e->n_shares; i++) {
        bool seen = false;
        if (strcmp(e->shares[i].claim_uid, claim_uid) != 0)
            continue;
        for (size_t j = 0; j < k; j++)
            seen |= strcmp(gpus[j], e->shares[i].gpu) == 0;
        if (!seen && k < n)
            str_copy(gpus[k++], e->shares[i].gpu, INV_UUID_MAX);
    }
    return k;
}

static int op_share_start(void *ctx, const struct dra_plan *plan, struct error *err)
{
    struct daemon__dra_effects *e = ctx;
    char gpus[MPS_MAX_DEVICES][INV_UUID_MAX];
    size_t n;
    int r;

    if (!e->mps)
        return error_set(err, -ENODEV, "claim %s holds a share but no MPS supervisor runs",
                         plan->claim_uid);
    pthread_mutex_lock(&e->mps_lock);
    shares_drop(e, plan->claim_uid); /* a retry: the plan's shares replace what was there */
    r = shares_add(e, plan, err);
    n = claim_gpus(e, plan->claim_uid, gpus, MPS_MAX_DEVICES);
    for (size_t i = 0; r == 0 && i < n; i++)
        r = shares_sync(e, gpus[i], err);
    if (r < 0) { /* nothing of this claim's shares is left: the others' limits as they were */
        shares_drop(e, plan->claim_uid);
        for (size_t i = 0; i < n; i++)
            (void)shares_sync(e, gpus[i], NULL);
    }
    pthread_mutex_unlock(&e->mps_lock);
    return r;
}

static int op_share_stop(void *ctx, const char *claim_uid, struct error *err)
{
    struct daemon__dra_effects *e = ctx;
    char gpus[MPS_MAX_DEVICES][INV_UUID_MAX];
    struct error w = {0};
    size_t n;
    int r = 0;

    if (!e->mps)
        return 0;
    pthread_mutex_lock(&e->mps_lock);
    n = claim_gpus(e, claim_uid, gpus, MPS_MAX_DEVICES);
    shares_drop(e, claim_uid);
    for (size_t i = 0; i < n; i++) {
        int q = shares_sync(e, gpus[i], &w);
        if (q == -E2BIG || q == -ENOMEM)
            r = r ? r : error_set(err, q, "%s", w.msg);
        else if (q < 0) /* a daemon down keeps its larger default until it is back: logged */
            log_warn("DRA: releasing the shares of claim %s on GPU %s: %s, continuing", claim_uid,
                     gpus[i], w.msg);
    }
    pthread_mutex_unlock(&e->mps_lock);
    return r;
}

/* The supervisor's deaths, restarts and probes, off the loop. */
static void *mps_main(void *arg)
{
    struct daemon__dra_effects *e = arg;
    struct pollfd p[2] = {{.fd = e->stop_fd, .events = POLLIN},
                          {.fd = mps_supervisor_fd(e->mps), .events = POLLIN}};

    while (poll(p, 2, -1) >= 0 || errno == EINTR) {
        bool changed = false;
        if (p[0].revents)
            break;
        if (!(p[1].revents & POLLIN))
            continue;
        pthread_mutex_lock(&e->mps_lock);
        mps_supervisor_dispatch(e->mps, &changed);
        pthread_mutex_unlock(&e->mps_lock);
    }
    return NULL;
}

static int mps_new(struct daemon__dra_effects *e, const struct daemon *d, struct error *err)
{
    struct mps_options mo = {.root = e->mps_root,
                             .binary = d->o->mps_control_binary,
                             .timeout_ms = MPS_DEFAULT_TIMEOUT_MS,
                             .probe_interval_ms = (unsigned)d->o->mps_probe_interval_ms,
                             .report = daemon_mps_report};
    struct error w = {0};

    if (gpu_nvml_open(&d->o->nvml, &e->nvml, &w) < 0)
        log_warn("DRA: MPS: no NVML (%s): compute modes are left as they are", w.msg);
    mo.nvml = e->nvml;
    e->specs = calloc(MPS_MAX_DAEMONS, sizeof(*e->specs));
    e->shares = calloc(DRA_MAX_SHARES, sizeof(*e->shares));
    e->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!e->specs || !e->shares || e->stop_fd < 0)
        return error_set(err, -ENOMEM, "out of memory");
    if (mps_supervisor_new(&mo, &e->mps, err) < 0)
        return -EIO;
    if (pthread_create(&e->mps_thread, NULL, mps_main, e) != 0)
        return error_set(err, -EAGAIN, "starting the MPS supervision thread");
    e->mps_started = true;
    return 0;
}

int daemon__dra_effects_mps_restore(struct daemon__dra_effects *e, const struct dra_checkpoint *cp,
                                    struct error *err)
{
    int r = 0;

    pthread_mutex_lock(&e->mps_lock);
    for (size_t i = 0; r == 0 && i < cp->n_claims; i++)
        if (cp->claims[i].state == DRA_PREPARE_COMPLETED)
            r = specs_add(e, cp->claims[i].plan, err);
    for (size_t i = 0; r == 0 && i < cp->n_claims; i++)
        if (cp->claims[i].state == DRA_PREPARE_COMPLETED)
            r = shares_add(e, cp->claims[i].plan, err);
    /* each GPU with shares: its daemon with the limits that hold them all */
    for (size_t i = 0; r == 0 && i < e->n_shares; i++) {
        struct mps_daemon_spec sp;
        (void)share_spec(e, e->shares[i].gpu, &sp);
        if (spec_index(e, sp.resource) >= 0)
            continue;
        if (e->n_specs == MPS_MAX_DAEMONS)
            r = error_set(err, -E2BIG, "more than %d MPS daemons on one node", MPS_MAX_DAEMONS);
        else
            e->specs[e->n_specs++] = sp;
    }
    if (r == 0 && e->n_specs) {
        struct error w = {0};
        if (mps_supervisor_set(e->mps, e->specs, e->n_specs, &w) < 0)
            log_warn("DRA: MPS: %s; retrying", w.msg);
    }
    pthread_mutex_unlock(&e->mps_lock);
    return r;
}

/* ---- the API, CDI, the checkpoint ----------------------------------------------------------- */

static int op_claim_read(void *ctx, const char *ns, const char *name, char **ret, struct error *err)
{
    const struct daemon__dra_effects *e = ctx;

    return kube_claim_get(e->kube, ns, name, ret, err);
}

static int op_cdi_write(void *ctx, const struct cdi_claim *cc, struct error *err)
{
    const struct daemon__dra_effects *e = ctx;
    char *json = NULL;
    int r = cdi_claim_spec_build(cc, &e->cdi, &json, err);

    if (r == 0)
        r = cdi_claim_spec_write(e->cdi_root, cc->uid, json, NULL, err);
    free(json);
    return r;
}

static int op_cdi_remove(void *ctx, const char *claim_uid, struct error *err)
{
    const struct daemon__dra_effects *e = ctx;

    return cdi_claim_spec_remove(e->cdi_root, claim_uid, err);
}

static int op_checkpoint_save(void *ctx, const struct dra_checkpoint *cp, struct error *err)
{
    struct daemon__dra_effects *e = ctx;
    char *text = NULL;
    int r = dra_checkpoint_encode(cp, &text, err);

    if (r == 0)
        r = file_write_atomic(e->cp_path, text, strlen(text), 0600, err);
    free(text);
    if (r == 0)
        atomic_store(&e->n_saved, cp->n_claims);
    return r;
}

void daemon__dra_effects_ops(struct daemon__dra_effects *e, struct dra_prepare_ops *ret)
{
    *ret = (struct dra_prepare_ops){.claim_read = op_claim_read,
                                    .timeslice = op_timeslice,
                                    .mps_start = op_mps_start,
                                    .mps_stop = op_mps_stop,
                                    .share_start = op_share_start,
                                    .share_stop = op_share_stop,
                                    .cdi_write = op_cdi_write,
                                    .cdi_remove = op_cdi_remove,
                                    .checkpoint_save = op_checkpoint_save,
                                    .ctx = e};
}

int daemon__dra_checkpoint_load(struct daemon__dra_effects *e, struct dra_checkpoint **ret,
                                struct error *err)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(e->cp_path, 64u << 20, &text, &len, NULL);

    if (r == 0 && len == 0)
        log_warn("DRA: the checkpoint %s is empty, taking it as no claims", e->cp_path);
    if (r == -ENOENT || (r == 0 && len == 0)) {
        free(text);
        *ret = dra_checkpoint_new();
        return *ret ? 0 : error_set(err, -ENOMEM, "out of memory");
    }
    if (r < 0) {
        free(text);
        return error_set(err, r, "reading the DRA checkpoint %s: %s", e->cp_path, strerror(-r));
    }
    r = dra_checkpoint_decode(text, len, ret, err);
    free(text);
    if (r < 0)
        error_prefix(err, "%s", e->cp_path);
    else
        atomic_store(&e->n_saved, (*ret)->n_claims);
    return r;
}

size_t daemon__dra_effects_n_claims(struct daemon__dra_effects *e)
{
    return atomic_load(&e->n_saved);
}

const char *daemon__dra_effects_mps_root(const struct daemon__dra_effects *e)
{
    return e->mps_root;
}

struct gpu_nvml *daemon__dra_effects_nvml(const struct daemon__dra_effects *e)
{
    return e->nvml;
}

/* ---- setup ------------------------------------------------------------------------------ */

/* Paths under the kubelet's plugins dir, nvidia-smi, the CDI options. */
static int effects_paths(const struct daemon *d, struct daemon__dra_effects *e, struct error *err)
{
    const struct daemon_dra_options *o = &d->o->dra;
    const char *ctr = o->container_driver_root          ? o->container_driver_root
                      : d->o->nvml.driver_root_ctr_path ? d->o->nvml.driver_root_ctr_path
                                                        : GPU_DEFAULT_DRIVER_ROOT_CTR_PATH;
    const char *host = o->host_driver_root ? o->host_driver_root : "/";
    struct strbuf sb = STRBUF_INIT;
    int r = strbuf_printf(&sb, "%s/%s", o->plugins_dir, DRA_DRIVER_NAME);

    e->plugin_dir = r == 0 ? strbuf_take(&sb) : NULL;
    if (e->plugin_dir && strbuf_printf(&sb, "%s/checkpoint.json", e->plugin_dir) == 0)
        e->cp_path = strbuf_take(&sb);
    if (e->plugin_dir && strbuf_printf(&sb, "%s/mps", e->plugin_dir) == 0)
        e->mps_root = strbuf_take(&sb);
    if (o->nvidia_smi)
        e->smi = str_dup(o->nvidia_smi);
    else if (strbuf_printf(&sb, "%s/usr/bin/nvidia-smi", path_is_dir(ctr) ? ctr : "") == 0)
        e->smi = strbuf_take(&sb);
    strbuf_release(&sb);
    e->cdi_root = o->cdi_root;
    if (!e->plugin_dir || !e->cp_path || !e->mps_root || !e->smi)
        return error_set(err, -ENOMEM, "out of memory");
    r = cdi_options_from_config(&e->cdi, d->cfg, NULL, NULL, d->o->proc_root, err);
    if (r < 0)
        return r;
    e->cdi.flag_names = CDI_FLAGS_DRA_PLUGIN; /* errors cite dra-plugin's root flags */
    if (o->cdi_hook_path)
        e->cdi.hook_path = o->cdi_hook_path;
    /* the driver's files as this process sees them, the host's for the spec */
    e->cdi.driver_root = path_is_dir(ctr) ? ctr : host;
    if (strbuf_printf(&sb, "%s/dev", e->cdi.driver_root) == 0)
        e->cdi.dev_root = path_is_dir(strbuf_str(&sb)) ? e->cdi.driver_root : "/";
    strbuf_release(&sb);
    e->cdi.host_driver_root = host;
    e->cdi.host_dev_root = host;
    return path_mkdir_p(e->plugin_dir, 0750, err);
}

int daemon__dra_effects_new(const struct daemon *d, struct kube_client *kube,
                            struct daemon__dra_effects **ret, struct error *err)
{
    struct daemon__dra_effects *e = calloc(1, sizeof(*e));
    int r;

    if (!e)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&e->mps_lock, NULL);
    e->kube = kube;
    e->stop_fd = -1;
    r = effects_paths(d, e, err);
    if (r == 0)
        r = mps_new(e, d, err);
    if (r < 0) {
        daemon__dra_effects_free(e);
        return r;
    }
    *ret = e;
    return 0;
}

void daemon__dra_effects_free(struct daemon__dra_effects *e)
{
    uint64_t one = 1;

    if (!e)
        return;
    if (e->mps_started) {
        (void)!write(e->stop_fd, &one, sizeof(one));
        pthread_join(e->mps_thread, NULL);
    }
    mps_supervisor_free(e->mps);
    gpu_nvml_close(e->nvml);
    if (e->stop_fd >= 0)
        close(e->stop_fd);
    free(e->specs);
    free(e->shares);
    free(e->plugin_dir);
    free(e->cp_path);
    free(e->mps_root);
    free(e->smi);
    pthread_mutex_destroy(&e->mps_lock);
    free(e);
}

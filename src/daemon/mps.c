/* SPDX-License-Identifier: Apache-2.0 */
/* mps.c: MPS in the device plugin. --mps-control=internal: the plugin runs and supervises
 * one control daemon per MPS resource (mps/), started before the resource is served, kept
 * in step with every new snapshot (a config change to or from MPS on the same PID), and a
 * resource whose daemon is down is served Unhealthy until it is back. --mps-control=external
 * (NVIDIA's split, the default for drop-in): another container runs the daemons; the plugin
 * waits for its .ready file with inotify before serving, with no 30 s sleeps. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "daemon/internal.h"
#include "metrics/metrics.h"
#include "gpu/gpu.h"
#include "mps/mps.h"

/* While waiting for the control daemons: a reminder this often, a look this often. */
#define MPS_WAIT_LOG_EVERY_MS 30000
#define MPS_WAIT_POLL_MS 1000

struct daemon__mps {
    struct mps_supervisor *sup;
    struct gpu_nvml *nvml;
};

static void mps_stop(struct daemon *d);

static int mps_up(const struct daemon *d, const char *resource)
{
    if (!d->mps || !d->mps->sup)
        return -1;
    return mps_supervisor_up(d->mps->sup, resource) ? 1 : 0;
}

static unsigned mps_restarts(const struct daemon *d)
{
    return d->mps && d->mps->sup ? mps_supervisor_restarts(d->mps->sup) : 0;
}

void daemon_mps_report(void *ctx, enum log_level level, const char *msg)
{
    (void)ctx;
    GS_LOG(level, "MPS: %s", msg);
}

int daemon_mps_specs(const struct model *m, struct mps_daemon_spec *specs, struct error *err)
{
    size_t n = 0;
    for (size_t i = 0; m && i < m->n_resources; i++) {
        const struct model_resource *res = &m->resources[i];
        struct mps_daemon_spec *sp = &specs[n];
        if (!res->mode->control_daemon || !res->n_mps_limits)
            continue;
        if (n == MPS_MAX_DAEMONS)
            return error_set(err, -E2BIG,
                             "the config shares more than %d resources with MPS (one control "
                             "daemon each); merge some MPS resources",
                             MPS_MAX_DAEMONS);
        memset(sp, 0, sizeof(*sp));
        str_copy(sp->resource, res->name, sizeof(sp->resource));
        for (size_t k = 0; k < res->n_mps_limits && sp->n < MPS_MAX_DEVICES; k++) {
            str_copy(sp->uuids[sp->n], res->mps_limits[k].uuid, sizeof(sp->uuids[0]));
            sp->mem_limit_mib[sp->n] = res->mps_limits[k].pinned_memory_limit_mib;
            sp->n++;
        }
        sp->thread_pct = res->mps_limits[0].active_thread_percentage;
        n++;
    }
    return (int)n;
}

/* The MPS root as this process sees it (the settings hold the host's, for Allocate). */
static const char *mps_root(const struct model *m)
{
    return m && m->settings.mps_root ? mps_local_root(m->settings.mps_root) : NULL;
}

static int mps_update(struct daemon *d, const struct dp_snapshot *snap, struct error *err)
{
    const struct model *m = dp_snapshot_model(snap);
    struct mps_daemon_spec *specs;
    size_t n;
    int r;

    if (d->o->mps_control != DAEMON_MPS_INTERNAL)
        return 0;
    specs = calloc(MPS_MAX_DAEMONS, sizeof(*specs));
    if (!specs)
        return error_set(err, -ENOMEM, "out of memory");
    r = daemon_mps_specs(m, specs, err);
    if (r < 0) {
        free(specs);
        return r;
    }
    n = (size_t)r;
    if (n > 0 && !mps_root(m)) {
        free(specs);
        return error_set(err, -EINVAL,
                         "MPS needs --mps-root (flags.mpsRoot): where the "
                         "control daemons' pipe folders go");
    }
    if (n > 0 && !d->mps) {
        struct mps_options o = {.root = mps_root(m),
                                .binary = d->o->mps_control_binary,
                                .timeout_ms = MPS_DEFAULT_TIMEOUT_MS,
                                .probe_interval_ms = (unsigned)d->o->mps_probe_interval_ms,
                                .report = daemon_mps_report};
        d->mps = calloc(1, sizeof(*d->mps));
        r = d->mps ? 0 : error_set(err, -ENOMEM, "out of memory");
        if (r == 0 && gpu_nvml_open(&d->o->nvml, &d->mps->nvml, err) < 0) {
            log_warn("MPS: no NVML (%s): compute modes are left as they are", err->msg);
            *err = (struct error){0};
        }
        o.nvml = d->mps ? d->mps->nvml : NULL;
        /* the /dev/shm clients share, as NVIDIA's init container mounts it (needs privileges;
         * without them the plugin goes on: clients then use their own /dev/shm) */
        struct error se = {0};
        if (r == 0 && d->o->mps_mount_shm && mps_mount_shm(mps_root(m), &se) < 0)
            log_warn("MPS: %s", se.msg);
        if (r == 0)
            r = mps_supervisor_new(&o, &d->mps->sup, err);
        if (r < 0) {
            mps_stop(d);
            free(specs);
            return r;
        }
    }
    r = d->mps ? mps_supervisor_set(d->mps->sup, specs, n, err) : 0;
    free(specs);
    /* a daemon that did not start was reported (report callback) and is retried with
     * backoff, its devices Unhealthy meanwhile: not a reason to stop serving the rest */
    if (r < 0 && r != -E2BIG) {
        *err = (struct error){0};
        r = 0;
    }
    return r;
}

static bool mps_any_down(const struct daemon *d)
{
    const struct model *m = dp_snapshot_model(d->snap);
    for (size_t i = 0; d->mps && m && i < m->n_resources; i++)
        if (m->resources[i].mode->control_daemon &&
            !mps_supervisor_up(d->mps->sup, m->resources[i].name))
            return true;
    return false;
}

static void mps_mark(const struct daemon *d, struct model *m)
{
    for (size_t i = 0; d->mps && i < m->n_resources; i++) {
        struct model_resource *res = &m->resources[i];
        if (!res->mode->control_daemon || mps_supervisor_up(d->mps->sup, res->name))
            continue;
        for (size_t j = 0; j < res->n_devices; j++)
            res->devices[j].healthy = false;
    }
}

static int mps_fd(const struct daemon *d)
{
    return d->mps ? mps_supervisor_fd(d->mps->sup) : -1;
}

static void mps_on_event(struct daemon *d)
{
    bool changed = false;
    mps_supervisor_dispatch(d->mps->sup, &changed);
    if (changed) /* a daemon went down or came back: health follows on ListAndWatch */
        daemon__apply(d, 0, "MPS control daemon");
}

static void mps_stop(struct daemon *d)
{
    if (!d->mps)
        return;
    mps_supervisor_free(d->mps->sup);
    gpu_nvml_close(d->mps->nvml);
    free(d->mps);
    d->mps = NULL;
}

static int mps_wait_external(struct daemon *d, int sfd, struct error *err)
{
    const struct model *m = dp_snapshot_model(d->snap);
    struct strbuf ready = STRBUF_INIT;
    int ifd = -1, r = 0;
    uint64_t next_log = 0;
    bool any = false;

    for (size_t i = 0; m && i < m->n_resources && !any; i++)
        any = m->resources[i].mode->control_daemon && m->resources[i].n_mps_limits;
    if (d->o->mps_control != DAEMON_MPS_EXTERNAL || !any)
        return 0;
    if (!mps_root(m))
        return error_set(err, -EINVAL, "MPS needs --mps-root (flags.mpsRoot)");
    (void)strbuf_printf(&ready, "%s/.ready", mps_root(m));
    ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    (void)path_mkdir_p(mps_root(m), 0755, NULL);
    if (ifd >= 0)
        (void)inotify_add_watch(ifd, mps_root(m), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE);
    while (!path_exists(strbuf_str(&ready))) {
        struct pollfd p[2] = {{.fd = ifd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        char buf[4096];
        if (time_now_ms() >= next_log) {
            log_info("MPS: waiting for the control daemons (%s); run gpuslice "
                     "mps-control-daemon or --mps-control=internal",
                     strbuf_str(&ready));
            next_log = time_now_ms() + MPS_WAIT_LOG_EVERY_MS;
        }
        if (poll(p, 2, MPS_WAIT_POLL_MS) < 0 && errno != EINTR)
            break;
        if (p[1].revents) { /* a signal: stop waiting, the loop handles it */
            r = error_set(err, -EINTR, "stopped while waiting for the MPS control daemons");
            break;
        }
        if (p[0].revents)
            (void)!read(ifd, buf, sizeof(buf));
    }
    if (r == 0)
        log_info("MPS: control daemons ready (%s)", strbuf_str(&ready));
    if (ifd >= 0)
        close(ifd);
    strbuf_release(&ready);
    return r;
}

/* The control daemons of the MPS resources in next run before it is served: at start a
 * failure stops the daemon (and external daemons are waited for); later it is logged, and
 * the resource's devices are Unhealthy while its daemon is retried. */
static int mps_prepare(struct daemon *d, const struct dp_snapshot *next,
                       const struct cfg_config *cfg, const struct daemon_change *c,
                       struct error *err)
{
    int r = mps_update(d, next, err);

    if (c->what & DAEMON_CHANGE_START)
        return r == 0 ? mps_wait_external(d, d->sfd, err) : r;
    if (r < 0) {
        log_error("%s: %s", c->why, err->msg);
        *err = (struct error){0};
    }
    return 0;
}

static int mps_start(struct daemon *d, struct error *err)
{
    if (mps_any_down(d)) /* a control daemon did not start: its devices Unhealthy */
        daemon__apply(d, 0, "MPS control daemon");
    return 0;
}

static int mps_metrics(struct daemon *d, struct strbuf *sb)
{
    const struct model *m = d->snap ? dp_snapshot_model(d->snap) : NULL;
    bool header = false;
    int r = 0;

    for (size_t i = 0; m && r == 0 && i < m->n_resources; i++) {
        int up = mps_up(d, m->resources[i].name);
        if (up < 0 || !m->resources[i].mode->control_daemon)
            continue;
        if (!header)
            r = metrics_family(sb, "gpuslice_mps_daemon_up", "gauge",
                               "1 when the resource's MPS control daemon runs and answers.");
        header = true;
        if (r == 0)
            r = metrics_sample1(sb, "gpuslice_mps_daemon_up", "resource", m->resources[i].name,
                                NULL, (unsigned long long)up);
    }
    if (r == 0 && header)
        r = metrics_family(sb, "gpuslice_mps_daemon_restarts_total", "counter",
                           "MPS control daemons restarted after they died or hung.");
    if (r == 0 && header)
        r = strbuf_printf(sb, "gpuslice_mps_daemon_restarts_total %u\n", mps_restarts(d));
    return r;
}

static const struct daemon_source mps_sources[] = {{mps_fd, mps_on_event}};

const struct daemon_feature daemon__feature_mps = {
    .name = "mps",
    .prepare = mps_prepare,
    .start = mps_start,
    .mark = mps_mark,
    .metrics = mps_metrics,
    .stop = mps_stop,
    .sources = mps_sources,
    .n_sources = GS_ARRAY_SIZE(mps_sources),
};

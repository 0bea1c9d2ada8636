/* SPDX-License-Identifier: Apache-2.0 */
/* recovery.c: the health feature. The health thread (health_thread.c) hands critical XIDs to
 * the loop; their devices go Unhealthy and the change is announced as a new health state.
 * Unlike NVIDIA's plugin (a device stays Unhealthy until restart, NVIDIA #1014) a device comes
 * back Healthy after --health-recovery-after (default 5 m) without a new XID, unless its XID
 * means the GPU is gone or must be reset: those GPUs are probed by the health thread, and one
 * that answers again after NVML reported it lost is re-read and Healthy again. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "daemon/internal.h"
#include "metrics/metrics.h"

static void count_health(struct daemon *d, const char *reason)
{
    size_t i = 0;
    while (i < d->n_health_reasons && strcmp(d->health_reasons[i].reason, reason) != 0)
        i++;
    if (i == d->n_health_reasons) {
        if (i == GS_ARRAY_SIZE(d->health_reasons))
            i--; /* bounded: the last slot collects the rest */
        else
            d->n_health_reasons++;
        str_copy(d->health_reasons[i].reason, reason, sizeof(d->health_reasons[i].reason));
    }
    d->health_reasons[i].n++;
}

/* XIDs after which only a GPU reset (or a reboot) helps, from NVIDIA's XID catalogue: 48
 * double-bit ECC error, 79 GPU has fallen off the bus, 92 high single-bit ECC error rate,
 * 94 contained ECC error (reset needed), 95 uncontained ECC error. */
static bool xid_needs_reset(unsigned long long xid)
{
    return xid == 48 || xid == 79 || xid == 92 || xid == 94 || xid == 95;
}

static int recovery_setup(struct daemon *d, struct error *err)
{
    d->recovery_fd = -1;
    if (d->o->health_recovery_ms <= 0)
        return 0;
    d->recovery_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (d->recovery_fd < 0)
        return error_set_errno(err, errno, "creating the recovery timer");
    return 0;
}

static void recovery_release(struct daemon *d)
{
    if (d->recovery_fd >= 0)
        close(d->recovery_fd);
    d->recovery_fd = -1;
}

static void recovery_arm(struct daemon *d)
{
    uint64_t now = time_now_ms(), next = 0;

    if (d->recovery_fd < 0)
        return;
    for (size_t i = 0; i < d->n_xid_marks; i++) {
        const struct daemon__xid_mark *x = &d->xid_marks[i];
        uint64_t due = x->at_ms + (uint64_t)d->o->health_recovery_ms;
        if (xid_needs_reset(x->xid))
            continue;
        if (!next || due < next)
            next = due;
    }
    /* 0 disarms; a due time already past fires at once (1 ms) */
    daemon__timer_set(d->recovery_fd, next ? (int64_t)(next > now ? next - now : 1) : 0, false);
}

static void on_recovery_timer(struct daemon *d)
{
    uint64_t now = time_now_ms();
    bool changed = false;

    daemon__timer_drain(d->recovery_fd);
    for (size_t i = 0; i < d->n_xid_marks;) {
        struct daemon__xid_mark x = d->xid_marks[i];
        char msg[512];
        int n;

        if (xid_needs_reset(x.xid) || now < x.at_ms + (uint64_t)d->o->health_recovery_ms) {
            i++;
            continue;
        }
        d->xid_marks[i] = d->xid_marks[--d->n_xid_marks]; /* forget the mark */
        n = dp_snapshot_set_health(d->snap, x.uuid, x.gi_id, x.ci_id, true);
        if (n < 0)
            continue; /* the device is gone from what we serve */
        changed |= n > 0;
        d->health_recoveries++;
        count_health(d, "recovered");
        snprintf(msg, sizeof(msg),
                 "device %s recovered: no XID for %.1f s after xid=%llu; marked Healthy again",
                 x.uuid, (double)d->o->health_recovery_ms / 1000.0, x.xid);
        log_info("health: %s (devices=%d, reason=recovered)", msg, n);
        daemon__kube_event(d, "GPURecovered", msg);
    }
    if (changed)
        daemon__health_changed(d, "health recovery");
    recovery_arm(d);
}

static void watch_resets(struct daemon *d)
{
    for (size_t i = 0; i < d->n_xid_marks; i++)
        if (xid_needs_reset(d->xid_marks[i].xid))
            daemon__health_watch_reset(d->health, d->xid_marks[i].uuid);
}

static bool gpu_back(struct daemon *d, const char *gpu_uuid)
{
    unsigned long long xid = 0;
    bool any = false;
    char msg[512];
    int n;

    for (size_t i = 0; i < d->n_xid_marks;) {
        if (strcmp(d->xid_marks[i].uuid, gpu_uuid) != 0) {
            i++;
            continue;
        }
        if (xid_needs_reset(d->xid_marks[i].xid) || !xid)
            xid = d->xid_marks[i].xid;
        d->xid_marks[i] = d->xid_marks[--d->n_xid_marks];
        any = true;
    }
    if (!any)
        return false;
    n = dp_snapshot_set_health(d->snap, gpu_uuid, INV_ID_NONE, INV_ID_NONE, true);
    d->health_recoveries++;
    count_health(d, "reset");
    snprintf(msg, sizeof(msg),
             "GPU %s answers again after it was lost (xid=%llu): it was reset; re-reading it "
             "and marking its devices Healthy",
             gpu_uuid, xid);
    log_info("health: %s (devices=%d, reason=reset)", msg, n < 0 ? 0 : n);
    daemon__kube_event(d, "GPURecovered", msg);
    if (n > 0)
        daemon__health_changed(d, "health recovery");
    recovery_arm(d);
    return true;
}

static void remember_unhealthy(struct daemon *d, const struct daemon__health_msg *msg)
{
    struct daemon__xid_mark *x;

    if (msg->all_devices) {
        d->all_unhealthy = true;
        count_health(d, "event-wait-failed");
        return;
    }
    char reason[32];
    snprintf(reason, sizeof(reason), "xid-%llu", msg->xid);
    count_health(d, reason);
    for (size_t i = 0; i < d->n_xid_marks; i++) {
        x = &d->xid_marks[i];
        if (strcmp(x->uuid, msg->uuid) == 0 && x->gi_id == msg->gi_id && x->ci_id == msg->ci_id) {
            x->xid = msg->xid; /* a new XID: recovery counts from now */
            x->at_ms = time_now_ms();
            recovery_arm(d);
            if (xid_needs_reset(x->xid))
                daemon__health_watch_reset(d->health, x->uuid);
            return;
        }
    }
    if (d->n_xid_marks == DAEMON_XID_MARKS_MAX)
        return; /* bounded: past this, a rebuilt model forgets the oldest marks' health */
    x = &d->xid_marks[d->n_xid_marks++];
    str_copy(x->uuid, msg->uuid, sizeof(x->uuid));
    x->gi_id = msg->gi_id;
    x->ci_id = msg->ci_id;
    x->xid = msg->xid;
    x->at_ms = time_now_ms();
    recovery_arm(d);
    if (xid_needs_reset(x->xid))
        daemon__health_watch_reset(d->health, x->uuid);
}

/* One XID on one device: marked Unhealthy when the policy calls it critical. Returns the
 * devices changed (0 when ignored). */
static int on_xid(struct daemon *d, const struct daemon__health_msg *msg)
{
    int changed;

    if (!daemon_xid_is_critical(&d->xid, msg->xid)) {
        log_info("health: ignoring xid=%llu gpu=%s (not critical by policy)", msg->xid, msg->uuid);
        return 0;
    }
    remember_unhealthy(d, msg);
    changed = dp_snapshot_set_health(d->snap, msg->uuid, msg->gi_id, msg->ci_id, false);
    if (changed == -ENOENT) {
        log_info("health: xid=%llu for unknown device %s, ignoring", msg->xid, msg->uuid);
        return 0;
    }
    if (msg->gi_id != INV_ID_NONE)
        log_warn("health: xid=%llu gpu=%s gi=%u ci=%u: devices=%d marked Unhealthy", msg->xid,
                 msg->uuid, msg->gi_id, msg->ci_id, changed);
    else
        log_warn("health: xid=%llu gpu=%s: devices=%d marked Unhealthy", msg->xid, msg->uuid,
                 changed);
    return changed;
}

/* An XID event from the health thread, or a lost GPU back after a reset. */
static void on_health(struct daemon *d)
{
    struct daemon__health_msg msg;
    bool reset = false;
    int changed;

    while (daemon__health_read(d->health, &msg) > 0) {
        if (msg.back) {
            reset |= gpu_back(d, msg.uuid);
            continue;
        }
        if (msg.all_devices) {
            remember_unhealthy(d, &msg);
            changed = dp_snapshot_set_all_health(d->snap, false);
            log_error("health: %s, marking every device unhealthy (devices=%d)", msg.text, changed);
        } else {
            changed = on_xid(d, &msg);
        }
        if (changed > 0)
            daemon__health_changed(d, "XID");
    }
    if (reset) {
        /* a reset GPU is read again (its MIG layout, memory, ...), and its XID events are
         * registered again with a fresh health thread */
        daemon__apply(d, DAEMON_RELOAD_INVENTORY, "GPU back after a reset");
        daemon__health_stop(d->health);
        d->health = daemon__health_start(d->o, &d->xid, d->snap);
        watch_resets(d);
    }
}
/* Devices (replicas, MIG devices) an XID mark keeps Unhealthy, each counted once. */
static size_t xid_marked_devices(const struct daemon *d, const struct model *m)
{
    size_t n = 0;

    for (size_t i = 0; m && i < m->n_resources; i++)
        for (size_t j = 0; j < m->resources[i].n_devices; j++) {
            const struct model_device *dev = &m->resources[i].devices[j];
            bool marked = false;
            for (size_t k = 0; k < d->n_xid_marks && !marked; k++)
                marked = model_device_matches(dev, d->xid_marks[k].uuid, d->xid_marks[k].gi_id,
                                              d->xid_marks[k].ci_id);
            n += marked;
        }
    return n;
}

/* dcgm-exporter's DCGM_FI_DEV_XID_ERRORS: the last XID the health thread saw on each GPU
 * (critical or not, 0 for none), with its err_code and err_msg and dcgm's GPU labels. */
static int render_last_xid(const struct daemon *d, const struct inv_inventory *inv,
                           struct strbuf *sb)
{
    struct strbuf host = STRBUF_INIT;
    char hostname[128];
    int r = 0;

    if (!d->health || !inv || !inv->n_gpus)
        return 0;
    daemon__dcgm_hostname(d->o, hostname, sizeof(hostname));
    daemon__dcgm_host_labels(&host, hostname, inv);
    r = metrics_family(sb, "DCGM_FI_DEV_XID_ERRORS", "gauge",
                       "Value of the last XID error encountered.");
    for (size_t g = 0; r == 0 && g < inv->n_gpus; g++) {
        unsigned long long n, xid = daemon__health_last_xid(d->health, inv->gpus[g].uuid, &n);
        char code[24];
        snprintf(code, sizeof(code), "%llu", xid);
        r = strbuf_puts(sb, "DCGM_FI_DEV_XID_ERRORS{");
        daemon__dcgm_labels(sb, strbuf_str(&host), &inv->gpus[g], NULL, NULL, NULL);
        daemon__dcgm_label(sb, "err_code", code, false);
        daemon__dcgm_label(sb, "err_msg", metrics_xid_text(xid), false);
        if (r == 0)
            r = strbuf_printf(sb, "} %llu\n", xid);
    }
    strbuf_release(&host);
    return r;
}

/* Health changes, XIDs and marks. The counters a user alerts on exist at 0 before their
 * first event (increase() over a series born at 1 is 0): the fixed reasons always, and one
 * XID counter per GPU from the moment the GPU is served. */
static int render_health(const struct daemon *d, const struct model *m,
                         const struct inv_inventory *inv, struct strbuf *sb)
{
    static const char *const fixed[] = {"event-wait-failed", "recovered", "reset"};
    int r = metrics_family(sb, "gpuslice_xid_marked_devices", "gauge",
                           "Devices made Unhealthy by a critical XID.");

    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_xid_marked_devices %zu\n", xid_marked_devices(d, m));
    if (r == 0)
        r = metrics_family(
            sb, "gpuslice_health_recoveries_total", "counter",
            "Devices Healthy again: no XID for --health-recovery-after, or a lost GPU reset.");
    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_health_recoveries_total %llu\n", d->health_recoveries);
    if (r == 0)
        r = metrics_family(sb, "gpuslice_health_changes_total", "counter",
                           "Device health changes by reason: xid-<n> (from the first such XID on), "
                           "event-wait-failed, recovered, reset.");
    for (size_t f = 0; r == 0 && f < GS_ARRAY_SIZE(fixed); f++) {
        unsigned long long n = 0;
        for (size_t i = 0; i < d->n_health_reasons; i++)
            if (strcmp(d->health_reasons[i].reason, fixed[f]) == 0)
                n = d->health_reasons[i].n;
        r = strbuf_printf(sb, "gpuslice_health_changes_total{reason=\"%s\"} %llu\n", fixed[f], n);
    }
    for (size_t i = 0; r == 0 && i < d->n_health_reasons; i++) {
        bool is_fixed = false;
        for (size_t f = 0; f < GS_ARRAY_SIZE(fixed); f++)
            is_fixed |= strcmp(d->health_reasons[i].reason, fixed[f]) == 0;
        if (!is_fixed)
            r = strbuf_printf(sb, "gpuslice_health_changes_total{reason=\"%s\"} %llu\n",
                              d->health_reasons[i].reason, d->health_reasons[i].n);
    }
    if (r == 0 && d->health && inv && inv->n_gpus)
        r = metrics_family(sb, "gpuslice_xid_errors_total", "counter",
                           "XID errors reported on the GPU, critical or not (the last one: "
                           "DCGM_FI_DEV_XID_ERRORS).");
    for (size_t g = 0; r == 0 && d->health && inv && g < inv->n_gpus; g++) {
        unsigned long long n;
        (void)daemon__health_last_xid(d->health, inv->gpus[g].uuid, &n);
        r = strbuf_printf(sb, "gpuslice_xid_errors_total{gpu=\"%u\",UUID=\"%s\"} %llu\n",
                          inv->gpus[g].index, inv->gpus[g].uuid, n);
    }
    return r == 0 ? render_last_xid(d, inv, sb) : r;
}

/* ---- the feature ------------------------------------------------------------------------ */

/* Every rebuilt model keeps the marks: XIDs seen, or every device when the wait failed. */
static void health_mark(const struct daemon *d, struct model *m)
{
    for (size_t i = 0; i < d->n_xid_marks; i++)
        (void)model_set_health(m, d->xid_marks[i].uuid, d->xid_marks[i].gi_id,
                               d->xid_marks[i].ci_id, false);
    for (size_t i = 0; d->all_unhealthy && i < m->n_resources; i++)
        for (size_t j = 0; j < m->resources[i].n_devices; j++)
            m->resources[i].devices[j].healthy = false;
}

/* Other GPUs or MIG devices: the health thread registers its events on the new ones. */
static void health_on_state(struct daemon *d, const struct daemon_change *c)
{
    if (!(c->what & DAEMON_CHANGE_DEVICES))
        return;
    daemon__health_stop(d->health);
    d->health = daemon__health_start(d->o, &d->xid, d->snap);
    watch_resets(d);
}

static int health_start(struct daemon *d, struct error *err)
{
    int r = recovery_setup(d, err);

    if (r < 0)
        return r;
    d->health = daemon__health_start(d->o, &d->xid, d->snap);
    watch_resets(d);
    return 0;
}

static void health_stop(struct daemon *d)
{
    recovery_release(d);
    daemon__health_stop(d->health);
    d->health = NULL;
}

static int health_metrics(struct daemon *d, struct strbuf *sb)
{
    const struct model *m = d->snap ? dp_snapshot_model(d->snap) : NULL;
    const struct inv_inventory *inv = d->snap ? dp_snapshot_inventory(d->snap) : NULL;

    return render_health(d, m, inv, sb);
}

static int health_fd(const struct daemon *d)
{
    return daemon__health_fd(d->health);
}

static int recovery_fd(const struct daemon *d)
{
    return d->recovery_fd;
}

static const struct daemon_source health_sources[] = {
    {health_fd, on_health},
    {recovery_fd, on_recovery_timer},
};

const struct daemon_feature daemon__feature_health = {
    .name = "health",
    .start = health_start,
    .mark = health_mark,
    .on_state = health_on_state,
    .metrics = health_metrics,
    .stop = health_stop,
    .sources = health_sources,
    .n_sources = GS_ARRAY_SIZE(health_sources),
};

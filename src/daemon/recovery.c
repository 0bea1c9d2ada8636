/* SPDX-License-Identifier: Apache-2.0 */
/* recovery.c: health that recovers. NVIDIA's plugin keeps a device Unhealthy after a critical
 * XID until it restarts (NVIDIA #1014). Here a device comes back Healthy after
 * --health-recovery-after (default 5 m) without a new XID, unless its XID means the GPU is
 * gone or must be reset: those GPUs are probed by the health thread, and one that answers
 * again after NVML reported it lost (it was reset) is re-read and Healthy again. One timerfd
 * in the loop, armed for the earliest device due. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "daemon/internal.h"

/* XIDs after which only a GPU reset (or a reboot) helps, from NVIDIA's XID catalogue: 48
 * double-bit ECC error, 79 GPU has fallen off the bus, 92 high single-bit ECC error rate,
 * 94 contained ECC error (reset needed), 95 uncontained ECC error. */
bool daemon_xid_needs_reset(unsigned long long xid)
{
    return xid == 48 || xid == 79 || xid == 92 || xid == 94 || xid == 95;
}

int daemon__recovery_setup(struct daemon *d, struct error *err)
{
    d->recovery_fd = -1;
    if (d->o->health_recovery_ms <= 0)
        return 0;
    d->recovery_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (d->recovery_fd < 0)
        return error_set_errno(err, errno, "creating the recovery timer");
    return 0;
}

void daemon__recovery_release(struct daemon *d)
{
    if (d->recovery_fd >= 0)
        close(d->recovery_fd);
    d->recovery_fd = -1;
}

void daemon__recovery_arm(struct daemon *d)
{
    uint64_t now = time_now_ms(), next = 0;

    if (d->recovery_fd < 0)
        return;
    for (size_t i = 0; i < d->n_xid_marks; i++) {
        const struct daemon__xid_mark *x = &d->xid_marks[i];
        uint64_t due = x->at_ms + (uint64_t)d->o->health_recovery_ms;
        if (daemon_xid_needs_reset(x->xid))
            continue;
        if (!next || due < next)
            next = due;
    }
    /* 0 disarms; a due time already past fires at once (1 ms) */
    daemon__timer_set(d->recovery_fd, next ? (int64_t)(next > now ? next - now : 1) : 0, false);
}

void daemon__on_recovery_timer(struct daemon *d)
{
    uint64_t now = time_now_ms();
    bool changed = false;

    daemon__timer_drain(d->recovery_fd);
    for (size_t i = 0; i < d->n_xid_marks;) {
        struct daemon__xid_mark x = d->xid_marks[i];
        char msg[512];
        int n;

        if (daemon_xid_needs_reset(x.xid) || now < x.at_ms + (uint64_t)d->o->health_recovery_ms) {
            i++;
            continue;
        }
        d->xid_marks[i] = d->xid_marks[--d->n_xid_marks]; /* forget the mark */
        n = dp_snapshot_set_health(d->snap, x.uuid, x.gi_id, x.ci_id, true);
        if (n < 0)
            continue; /* the device is gone from what we serve */
        changed |= n > 0;
        d->health_recoveries++;
        daemon__count_health(d, "recovered");
        snprintf(msg, sizeof(msg),
                 "device %s recovered: no XID for %.1f s after xid=%llu; marked Healthy again",
                 x.uuid, (double)d->o->health_recovery_ms / 1000.0, x.xid);
        log_info("health: %s (devices=%d, reason=recovered)", msg, n);
        daemon__kube_event(d, "GPURecovered", msg);
    }
    if (changed)
        daemon__push_all(d);
    daemon__recovery_arm(d);
}

void daemon__recovery_watch(struct daemon *d)
{
    for (size_t i = 0; i < d->n_xid_marks; i++)
        if (daemon_xid_needs_reset(d->xid_marks[i].xid))
            daemon__health_watch_reset(d->health, d->xid_marks[i].uuid);
}

bool daemon__recovery_gpu_back(struct daemon *d, const char *gpu_uuid)
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
        if (daemon_xid_needs_reset(d->xid_marks[i].xid) || !xid)
            xid = d->xid_marks[i].xid;
        d->xid_marks[i] = d->xid_marks[--d->n_xid_marks];
        any = true;
    }
    if (!any)
        return false;
    n = dp_snapshot_set_health(d->snap, gpu_uuid, INV_ID_NONE, INV_ID_NONE, true);
    d->health_recoveries++;
    daemon__count_health(d, "reset");
    snprintf(msg, sizeof(msg),
             "GPU %s answers again after it was lost (xid=%llu): it was reset; re-reading it "
             "and marking its devices Healthy",
             gpu_uuid, xid);
    log_info("health: %s (devices=%d, reason=reset)", msg, n < 0 ? 0 : n);
    daemon__kube_event(d, "GPURecovered", msg);
    if (n > 0)
        daemon__push_all(d);
    daemon__recovery_arm(d);
    return true;
}

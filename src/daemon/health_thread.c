/* SPDX-License-Identifier: Apache-2.0 */
/* health_thread.c: the NVML event thread. It owns its own NVML handle and event set
 * (gpu_events_*), applies NVIDIA's XID policy itself (ignorable XIDs never leave the
 * thread) and records critical ones in a bounded per-device table, waking the main loop
 * through an eventfd; the loop drains the table and updates the model. A burst of
 * thousands of ignorable XIDs therefore cannot push a critical one out, and a device hit
 * many times is one entry. The wait is NVIDIA's (5 s per nvmlEventSetWait, no shorter
 * tick): an idle node wakes no more than NVIDIA's plugin. Stopping does not wait those 5 s:
 * a thread still inside NVML's wait is left to finish it, and frees itself then. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "daemon/internal.h"
#include "gpu/gpu.h"

/* One wait, as NVIDIA's plugin does it: the only wake-up of an idle thread. */
#define HEALTH_WAIT_MS 5000
/* How long daemon__health_stop waits for the thread before leaving it to finish alone. */
#define HEALTH_STOP_GRACE_MS 100

struct daemon__health {
    pthread_t thread;
    bool started;
    atomic_bool stop;
    bool finished;  /* the thread left its loop (under lock) */
    bool abandoned; /* stop gave up waiting: the thread frees everything (under lock) */
    int efd;        /* eventfd: pending entries to drain */
    struct daemon_xid_policy policy;
    struct gpu_nvml *nvml;
    struct gpu_events *events;
    pthread_mutex_t lock;               /* guards the table */
    struct daemon__health_msg *pending; /* bounded: one slot per device */
    bool *used;
    size_t n_slots;
    size_t next_drain;
    bool all_devices; /* the event wait failed */
    char all_text[200];
    unsigned long long ignored, coalesced;
    /* the last XID of each GPU, critical or not (dcgm's DCGM_FI_DEV_XID_ERRORS), and how many
     * it had (gpuslice_xid_errors_total), under lock */
    struct {
        char uuid[INV_UUID_MAX];
        unsigned long long xid, n;
    } * last;
    size_t n_last, max_last;
    /* GPUs whose XID needs a reset, probed until they come back (under lock) */
    struct {
        char uuid[INV_UUID_MAX];
        bool seen_lost;
    } * watch;
    size_t n_watch;
};

#define HEALTH_PROBE_MS 500 /* the event wait while a GPU is watched for its reset */

static void wake(struct daemon__health *h);

void daemon__health_watch_reset(struct daemon__health *h, const char *gpu_uuid)
{
    size_t i = 0;

    if (!h)
        return;
    pthread_mutex_lock(&h->lock);
    while (i < h->n_watch && strcmp(h->watch[i].uuid, gpu_uuid) != 0)
        i++;
    if (i == h->n_watch && h->n_watch < h->max_last) {
        str_copy(h->watch[i].uuid, gpu_uuid, sizeof(h->watch[i].uuid));
        h->watch[i].seen_lost = false;
        h->n_watch++;
    }
    pthread_mutex_unlock(&h->lock);
}

/* A `back` message for the loop (never coalesced with XID entries). */
static void post_back(struct daemon__health *h, const char *uuid)
{
    bool posted = false;

    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < h->n_slots && !posted; i++) {
        if (h->used[i])
            continue;
        memset(&h->pending[i], 0, sizeof(h->pending[i]));
        str_copy(h->pending[i].uuid, uuid, sizeof(h->pending[i].uuid));
        h->pending[i].back = true;
        h->pending[i].gi_id = h->pending[i].ci_id = INV_ID_NONE;
        h->used[i] = true;
        posted = true;
    }
    pthread_mutex_unlock(&h->lock);
    if (posted)
        wake(h);
}

/* Probes the watched GPUs: lost -> remembered; answering after lost -> `back`. Off the loop:
 * a lost GPU's NVML calls may be slow. */
static void probe_watched(struct daemon__health *h)
{
    for (size_t i = 0;; i++) {
        char uuid[INV_UUID_MAX];
        struct error err = {0};
        bool back = false;
        int a;

        pthread_mutex_lock(&h->lock);
        if (i >= h->n_watch) {
            pthread_mutex_unlock(&h->lock);
            return;
        }
        str_copy(uuid, h->watch[i].uuid, sizeof(uuid));
        pthread_mutex_unlock(&h->lock);
        a = gpu_device_answers(h->nvml, uuid, &err);
        bool lost_now = false;
        pthread_mutex_lock(&h->lock);
        if (i < h->n_watch && strcmp(h->watch[i].uuid, uuid) == 0) {
            if (a == 0) {
                lost_now = !h->watch[i].seen_lost;
                h->watch[i].seen_lost = true;
            } else if (a > 0 && h->watch[i].seen_lost) {
                h->watch[i] = h->watch[--h->n_watch];
                back = true;
            }
        }
        pthread_mutex_unlock(&h->lock);
        if (lost_now)
            log_warn("health: gpu=%s is lost (NVML: GPU is lost); its devices stay Unhealthy "
                     "until it is reset (nvidia-smi -r) and answers again",
                     uuid);
        if (back) {
            log_debug("health: gpu=%s answers again after it was lost", uuid);
            post_back(h, uuid);
            i--; /* the slot now holds another GPU (i wraps and comes back by one) */
        }
    }
}

static void note_last(struct daemon__health *h, const struct gpu_event *ev)
{
    size_t i = 0;

    pthread_mutex_lock(&h->lock);
    while (i < h->n_last && strcmp(h->last[i].uuid, ev->uuid) != 0)
        i++;
    if (i == h->n_last && h->n_last < h->max_last)
        str_copy(h->last[h->n_last++].uuid, ev->uuid, sizeof(h->last[0].uuid));
    if (i < h->n_last) {
        h->last[i].xid = ev->xid;
        h->last[i].n++;
    }
    pthread_mutex_unlock(&h->lock);
}

unsigned long long daemon__health_last_xid(struct daemon__health *h, const char *gpu_uuid,
                                           unsigned long long *ret_count)
{
    unsigned long long xid = 0, n = 0;

    if (h) {
        pthread_mutex_lock(&h->lock);
        for (size_t i = 0; i < h->n_last; i++)
            if (strcmp(h->last[i].uuid, gpu_uuid) == 0) {
                xid = h->last[i].xid;
                n = h->last[i].n;
            }
        pthread_mutex_unlock(&h->lock);
    }
    *ret_count = n;
    return xid;
}

static void wake(struct daemon__health *h)
{
    uint64_t one = 1;
    if (write(h->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        log_debug("health: eventfd write: %s", strerror(errno));
}

/* Records a critical XID for its device: a new slot, or the device's existing one (the
 * latest XID wins; the device is Unhealthy either way). */
static void record(struct daemon__health *h, const struct gpu_event *ev)
{
    size_t free_slot = SIZE_MAX;
    bool fresh = true;

    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < h->n_slots; i++) {
        struct daemon__health_msg *m = &h->pending[i];
        if (!h->used[i]) {
            if (free_slot == SIZE_MAX)
                free_slot = i;
            continue;
        }
        if (strcmp(m->uuid, ev->uuid) == 0 && m->gi_id == ev->gi_id && m->ci_id == ev->ci_id) {
            m->xid = ev->xid;
            fresh = false;
            h->coalesced++;
            break;
        }
    }
    if (fresh && free_slot != SIZE_MAX) {
        struct daemon__health_msg *m = &h->pending[free_slot];
        memset(m, 0, sizeof(*m));
        str_copy(m->uuid, ev->uuid, sizeof(m->uuid));
        m->xid = ev->xid;
        m->gi_id = ev->gi_id;
        m->ci_id = ev->ci_id;
        h->used[free_slot] = true;
    } else if (fresh) {
        /* more devices in flight than slots (the table is sized for every GPU and MIG
         * device): never drop a critical event, mark everything instead */
        h->all_devices = true;
        str_copy(h->all_text, "too many devices reported critical XIDs at once",
                 sizeof(h->all_text));
    }
    pthread_mutex_unlock(&h->lock);
    if (fresh)
        wake(h);
}

static void health_free(struct daemon__health *h);

static void *health_main(void *arg)
{
    struct daemon__health *h = arg;
    struct gpu_event ev;
    struct error err = {0};
    bool abandoned;
    int r;

    while (!atomic_load(&h->stop)) {
        pthread_mutex_lock(&h->lock);
        int wait_ms = h->n_watch ? HEALTH_PROBE_MS : HEALTH_WAIT_MS;
        pthread_mutex_unlock(&h->lock);
        r = gpu_events_wait(h->events, wait_ms, &ev, &err);
        if (wait_ms == HEALTH_PROBE_MS && !atomic_load(&h->stop))
            probe_watched(h);
        if (r == 0 || atomic_load(&h->stop))
            continue;
        if (r < 0) {
            pthread_mutex_lock(&h->lock);
            h->all_devices = true;
            str_copy(h->all_text, err.msg, sizeof(h->all_text));
            pthread_mutex_unlock(&h->lock);
            wake(h);
            break;
        }
        if (!ev.is_xid)
            continue; /* NVIDIA's checker skips non-XID events too */
        note_last(h, &ev);
        if (!daemon_xid_is_critical(&h->policy, ev.xid)) {
            h->ignored++; /* only this thread touches it */
            log_debug("health: ignoring xid=%llu gpu=%s (not critical by policy)", ev.xid, ev.uuid);
            continue;
        }
        record(h, &ev);
    }
    pthread_mutex_lock(&h->lock);
    h->finished = true;
    abandoned = h->abandoned;
    pthread_mutex_unlock(&h->lock);
    if (abandoned)
        health_free(h);
    return NULL;
}

static void health_free(struct daemon__health *h)
{
    if (!h)
        return;
    gpu_events_close(h->events);
    gpu_nvml_close(h->nvml);
    if (h->efd >= 0)
        close(h->efd);
    pthread_mutex_destroy(&h->lock);
    free(h->pending);
    free(h->used);
    free(h->last);
    free(h->watch);
    free(h);
}

struct daemon__health *daemon__health_start(const struct daemon_options *o,
                                            const struct daemon_xid_policy *xid,
                                            struct dp_snapshot *snap)
{
    struct daemon__health *h = NULL;
    struct gpu_nvml_options nvml = o->nvml;
    const struct inv_inventory *inv;
    char **warnings = NULL;
    struct error err = {0};

    if (xid->disabled) {
        log_info("health checks disabled by DP_DISABLE_HEALTHCHECKS");
        return NULL;
    }
    inv = dp_snapshot_inventory(snap);
    if (!inv || inv->n_gpus == 0)
        return NULL;
    h = calloc(1, sizeof(*h));
    if (!h)
        goto fail;
    pthread_mutex_init(&h->lock, NULL);
    h->policy = *xid;
    /* a slot for every GPU and every MIG device it could hold (7 or 8), and the GPU itself */
    h->n_slots = inv->n_gpus * 9 + 8;
    h->pending = calloc(h->n_slots, sizeof(*h->pending));
    h->used = calloc(h->n_slots, sizeof(*h->used));
    h->max_last = inv->n_gpus;
    h->last = calloc(h->max_last, sizeof(*h->last));
    h->watch = calloc(h->max_last, sizeof(*h->watch));
    h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!h->pending || !h->used || !h->last || !h->watch || h->efd < 0) {
        error_set(&err, h->efd < 0 ? -errno : -ENOMEM, "health table: %s",
                  h->efd < 0 ? strerror(errno) : "out of memory");
        goto fail;
    }
    gpu_nvml_options_from_env(&nvml);
    if (gpu_nvml_open(&nvml, &h->nvml, &err) < 0 ||
        gpu_events_open(h->nvml, inv, &h->events, &warnings, &err) < 0)
        goto fail;
    for (size_t i = 0; warnings[i]; i++)
        log_warn("health: %s", warnings[i]);
    strv_free(warnings);
    if (pthread_create(&h->thread, NULL, health_main, h) != 0) {
        error_set(&err, -EAGAIN, "cannot start the health thread");
        goto fail;
    }
    pthread_setname_np(h->thread, "gs-health"); /* for top, perf and bench_idle */
    h->started = true;
    log_debug("health: watching XID events on %zu GPUs", inv->n_gpus);
    return h;
fail:
    log_warn("health: %s, continuing with health checks disabled",
             err.msg[0] ? err.msg : "out of memory");
    health_free(h);
    return NULL;
}

void daemon__health_stop(struct daemon__health *h)
{
    struct timespec ts;
    bool finished;

    if (!h)
        return;
    if (h->started) {
        atomic_store(&h->stop, true);
        time_deadline(&ts, CLOCK_REALTIME, HEALTH_STOP_GRACE_MS);
        if (pthread_timedjoin_np(h->thread, NULL, &ts) != 0) {
            /* still inside NVML's wait (up to 5 s): let it finish and free itself */
            pthread_mutex_lock(&h->lock);
            finished = h->finished;
            h->abandoned = !finished;
            pthread_mutex_unlock(&h->lock);
            if (!finished) {
                pthread_detach(h->thread);
                return;
            }
            pthread_join(h->thread, NULL);
        }
    }
    health_free(h);
}

int daemon__health_fd(const struct daemon__health *h)
{
    return h ? h->efd : -1;
}

int daemon__health_read(struct daemon__health *h, struct daemon__health_msg *ret)
{
    uint64_t v;
    int found = 0;

    if (!h)
        return 0;
    while (read(h->efd, &v, sizeof(v)) == sizeof(v))
        ;
    pthread_mutex_lock(&h->lock);
    if (h->all_devices) {
        memset(ret, 0, sizeof(*ret));
        ret->all_devices = true;
        str_copy(ret->text, h->all_text, sizeof(ret->text));
        h->all_devices = false;
        found = 1;
    }
    for (size_t k = 0; !found && k < h->n_slots; k++) {
        size_t i = (h->next_drain + k) % h->n_slots;
        if (!h->used[i])
            continue;
        *ret = h->pending[i];
        h->used[i] = false;
        h->next_drain = i + 1;
        found = 1;
    }
    pthread_mutex_unlock(&h->lock);
    return found;
}

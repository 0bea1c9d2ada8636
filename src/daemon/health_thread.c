/* SPDX-License-Identifier: Apache-2.0 */
/* health_thread.c: the NVML event thread. It owns its own NVML handle and event set
 * (gpu_events_*), waits for events in short ticks so it can be stopped, and writes each
 * event to a pipe the main loop polls; the main loop applies the XID policy and updates the
 * model, so no model state is touched from here. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/internal.h"
#include "gpu/gpu.h"

#define HEALTH_TICK_MS 250

struct daemon__health {
    pthread_t thread;
    int pipe[2];
    atomic_bool stop;
    struct gpu_nvml *nvml;
    struct gpu_events *events;
};

static void health_send(struct daemon__health *h, const struct daemon__health_msg *m)
{
    /* a full pipe means the loop is far behind: dropping an event is better than blocking */
    if (write(h->pipe[1], m, sizeof(*m)) != (ssize_t)sizeof(*m))
        log_warn("health: event for %s dropped (main loop busy)", m->uuid);
}

static void *health_main(void *arg)
{
    struct daemon__health *h = arg;
    struct daemon__health_msg m;
    struct gpu_event ev;
    struct error err = {0};
    int r;

    while (!atomic_load(&h->stop)) {
        r = gpu_events_wait(h->events, HEALTH_TICK_MS, &ev, &err);
        if (r == 0)
            continue;
        memset(&m, 0, sizeof(m));
        if (r < 0) {
            m.all_devices = true;
            str_copy(m.text, err.msg, sizeof(m.text));
            health_send(h, &m);
            break;
        }
        if (!ev.is_xid) {
            log_debug("health: skipping non-XID event type=0x%llx gpu=%s", ev.type, ev.uuid);
            continue;
        }
        str_copy(m.uuid, ev.uuid, sizeof(m.uuid));
        m.xid = ev.xid;
        m.gi_id = ev.gi_id;
        m.ci_id = ev.ci_id;
        health_send(h, &m);
    }
    return NULL;
}

static void health_free(struct daemon__health *h)
{
    if (!h)
        return;
    gpu_events_close(h->events);
    gpu_nvml_close(h->nvml);
    if (h->pipe[0] >= 0)
        close(h->pipe[0]);
    if (h->pipe[1] >= 0)
        close(h->pipe[1]);
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
    h->pipe[0] = h->pipe[1] = -1;
    if (pipe2(h->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        error_set(&err, -errno, "pipe: %s", strerror(errno));
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
    if (!h)
        return;
    atomic_store(&h->stop, true);
    pthread_join(h->thread, NULL);
    health_free(h);
}

int daemon__health_fd(const struct daemon__health *h)
{
    return h ? h->pipe[0] : -1;
}

int daemon__health_read(struct daemon__health *h, struct daemon__health_msg *ret)
{
    if (!h)
        return 0;
    return read(h->pipe[0], ret, sizeof(*ret)) == (ssize_t)sizeof(*ret) ? 1 : 0;
}

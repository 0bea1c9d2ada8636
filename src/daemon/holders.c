/* SPDX-License-Identifier: Apache-2.0 */
/* holders.c: which devices pods hold, read off the main loop. A thread of its own asks the
 * kubelet's pod-resources List (or, when that does not answer, reads the kubelet's
 * checkpoint) when the loop requests it, and hands the answer over through an eventfd. The
 * loop decides only with an answer it has just taken (an older one could miss a pod admitted
 * since): a decision that comes first asks, treats the holders as unknown meanwhile
 * (devices kept Unhealthy), and is made again when the answer comes. A List that hangs for its
 * whole deadline, or a checkpoint of 100,000 entries, never delays the loop (an XID then
 * waited 1.8 s, issue 19). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon/internal.h"

#define POD_RESOURCES_TIMEOUT_MS 2000

enum holders_source { SOURCE_UNKNOWN = 0, SOURCE_LIST, SOURCE_CHECKPOINT, SOURCE_NONE };

struct daemon__holders {
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int efd;
    /* under lock: the request, and the answer the thread handed over */
    bool want, stop, have_fresh;
    struct dp_pod_devices fresh;
    bool fresh_reachable, fresh_from_checkpoint;
    char fresh_err[ERROR_MSG_MAX], fresh_cp_err[ERROR_MSG_MAX];
    /* loop side */
    struct dp_pod_devices view;
    bool reachable, requested;
    bool taken_now; /* the view was taken in this turn of the loop: decisions may use it */
    char *socket, *checkpoint;
    enum holders_source logged_source; /* what the log last said */
};

/* One read: pod-resources, else the checkpoint. Runs on the holders thread. */
static void read_holders(const struct daemon__holders *h, struct dp_pod_devices *ret,
                         bool *ret_reachable, bool *ret_from_cp, struct error *err,
                         struct error *cp_err)
{
    *ret_from_cp = false;
    *ret_reachable = dp_pod_resources_list(h->socket, POD_RESOURCES_TIMEOUT_MS, ret, err) == 0;
    if (*ret_reachable)
        return;
    /* NVIDIA's chart and manifests do not mount pod-resources; the kubelet's checkpoint in
     * the device-plugin directory (always mounted) says which devices pods hold. */
    *ret_from_cp = true;
    *ret_reachable = dp_checkpoint_read(h->checkpoint, ret, cp_err) == 0;
}

static void *holders_main(void *arg)
{
    struct daemon__holders *h = arg;
    uint64_t one = 1;

    pthread_mutex_lock(&h->lock);
    for (;;) {
        struct dp_pod_devices got = {0};
        struct error err = {0}, cp_err = {0};
        bool reachable, from_cp;

        while (!h->want && !h->stop)
            pthread_cond_wait(&h->cond, &h->lock);
        if (h->stop)
            break;
        h->want = false;
        pthread_mutex_unlock(&h->lock);
        read_holders(h, &got, &reachable, &from_cp, &err, &cp_err);
        pthread_mutex_lock(&h->lock);
        dp_pod_devices_release(&h->fresh);
        h->fresh = got;
        h->have_fresh = true;
        h->fresh_reachable = reachable;
        h->fresh_from_checkpoint = from_cp;
        str_copy(h->fresh_err, err.msg, sizeof(h->fresh_err));
        str_copy(h->fresh_cp_err, cp_err.msg, sizeof(h->fresh_cp_err));
        (void)!write(h->efd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

int daemon__holders_start(struct daemon *d, struct error *err)
{
    struct daemon__holders *h = calloc(1, sizeof(*h));
    struct strbuf cp = STRBUF_INIT;

    if (!h || strbuf_printf(&cp, "%s/%s", d->o->plugin_dir, DP_CHECKPOINT_NAME) < 0) {
        free(h);
        strbuf_release(&cp);
        return error_set(err, -ENOMEM, "out of memory");
    }
    h->checkpoint = strbuf_take(&cp);
    h->socket = str_dup(d->o->pod_resources_socket ? d->o->pod_resources_socket : "");
    h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->cond, NULL);
    d->holders = h;
    if (!h->socket || !h->checkpoint || h->efd < 0)
        return error_set(err, -ENOMEM, "pod holders: out of memory or eventfd: %s",
                         strerror(errno));
    h->started = pthread_create(&h->thread, NULL, holders_main, h) == 0;
    if (h->started)
        pthread_setname_np(h->thread, "gs-holders");
    if (!h->started)
        return error_set(err, -EAGAIN, "pod holders: cannot start a thread");
    return 0;
}

void daemon__holders_stop(struct daemon *d)
{
    struct daemon__holders *h = d->holders;

    if (!h)
        return;
    if (h->started) {
        pthread_mutex_lock(&h->lock);
        h->stop = true;
        pthread_cond_signal(&h->cond);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->thread, NULL);
    }
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->cond);
    if (h->efd >= 0)
        close(h->efd);
    dp_pod_devices_release(&h->fresh);
    dp_pod_devices_release(&h->view);
    free(h->socket);
    free(h->checkpoint);
    free(h);
    d->holders = NULL;
}

int daemon__holders_fd(const struct daemon *d)
{
    return d->holders ? d->holders->efd : -1;
}

void daemon__holders_request(struct daemon *d)
{
    struct daemon__holders *h = d->holders;

    if (!h || !h->started)
        return;
    pthread_mutex_lock(&h->lock);
    h->want = true;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
    h->requested = true;
}

/* Logs the way the holders are known when it changes (not on every retire check). */
static void log_source(struct daemon *d, bool reachable, bool from_cp, const char *err,
                       const char *cp_err)
{
    struct daemon__holders *h = d->holders;
    enum holders_source src = !from_cp ? SOURCE_LIST : reachable ? SOURCE_CHECKPOINT : SOURCE_NONE;

    if (src == h->logged_source)
        return;
    h->logged_source = src;
    if (src == SOURCE_LIST)
        return;
    if (reachable)
        log_warn("pod-resources API %s: %s; using the kubelet's checkpoint %s to see which "
                 "devices pods hold (mount /var/lib/kubelet/pod-resources to get pod names)",
                 h->socket, err, h->checkpoint);
    else
        log_warn("pod-resources API %s: %s, and the kubelet checkpoint: %s; keeping the "
                 "devices being removed as Unhealthy until one answers",
                 h->socket, err, cp_err);
}

bool daemon__holders_take(struct daemon *d)
{
    struct daemon__holders *h = d->holders;
    bool reachable = false, from_cp = false, got = false;
    char err[ERROR_MSG_MAX], cp_err[ERROR_MSG_MAX];

    if (!h)
        return false;
    daemon__timer_drain(h->efd);
    pthread_mutex_lock(&h->lock);
    if (h->have_fresh) {
        dp_pod_devices_release(&h->view);
        h->view = h->fresh;
        h->fresh = (struct dp_pod_devices){0};
        h->have_fresh = false;
        reachable = h->reachable = h->fresh_reachable;
        from_cp = h->fresh_from_checkpoint;
        str_copy(err, h->fresh_err, sizeof(err));
        str_copy(cp_err, h->fresh_cp_err, sizeof(cp_err));
        h->taken_now = true;
        got = true;
    }
    pthread_mutex_unlock(&h->lock);
    if (got) {
        h->requested = false;
        log_source(d, reachable, from_cp, err, cp_err);
    }
    return got;
}

const struct dp_pod_devices *daemon__holders_view(struct daemon *d, bool *ret_reachable)
{
    struct daemon__holders *h = d->holders;

    if (h && h->taken_now) {
        *ret_reachable = h->reachable;
        return &h->view;
    }
    if (h && !h->requested)
        daemon__holders_request(d);
    return NULL;
}

bool daemon__holders_current(const struct daemon *d)
{
    return d->holders && d->holders->taken_now;
}

bool daemon__holders_can_answer(const struct daemon *d)
{
    return d->holders && d->holders->started;
}

void daemon__holders_done(struct daemon *d)
{
    if (d->holders)
        d->holders->taken_now = false;
}

int daemon__holders_read_now(struct daemon *d)
{
    struct daemon__holders *h = d->holders;
    struct dp_pod_devices got = {0};
    struct error err = {0}, cp_err = {0};
    bool reachable, from_cp;

    if (!h)
        return -ENOENT;
    read_holders(h, &got, &reachable, &from_cp, &err, &cp_err);
    dp_pod_devices_release(&h->view);
    h->view = got;
    h->reachable = reachable;
    h->taken_now = true;
    log_source(d, reachable, from_cp, err.msg, cp_err.msg);
    return reachable ? 0 : -ENOENT;
}

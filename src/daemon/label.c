/* SPDX-License-Identifier: Apache-2.0 */
/* label.c: the node label that names the config (nvidia.com/device-plugin.config, or
 * --node-label), read and watched through kube/ when a client can be made and NODE_NAME is
 * set; the node state the daemon asserts (labels such as nvidia.com/mig.config.state), by a
 * thread of its own; and Kubernetes Events, queued on kube/'s retrying poster. The main loop
 * never waits on the API server. The API being unreachable never stops serving: the current
 * config stays and the watcher retries by itself. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon/internal.h"
#include "kube/kube.h"

/* Each API request of the node-state, Event and node-watch threads. */
#define LABEL_API_TIMEOUT_MS 2000

/* Events wait on kube/'s poster (its own thread): posting never blocks the main loop (a hung
 * API server delayed XID -> Unhealthy by 1.8 s when Events were posted inline); a failed POST
 * is retried with backoff (a PreparedDeviceLost Event must not be lost to one 503). Bounded:
 * when full, the oldest is dropped and logged. */
#define KUBE_EVENT_QUEUE 64
/* Node state (the MIG state label, NVIDIA's operand labels) is desired state, not a message:
 * the node-state thread re-asserts what did not reach the Node, retrying from
 * NODE_RETRY_MIN_MS doubling to NODE_RETRY_MAX_MS, so one failed PATCH (an API server
 * restart) never leaves the node saying "pending" or the operands paused for ever. */
#define KUBE_MAX_NODE_LABELS 8
#define NODE_RETRY_MIN_MS 250u
#define NODE_RETRY_MAX_MS 30000u
/* A refused Event is logged as a warning, then at most once a minute with a count. */
#define EVENT_WARN_INTERVAL_MS 60000u
/* What a stopping daemon gives the Events still queued. */
#define KUBE_EVENT_FLUSH_MS 1000u

struct node_label {
    char key[128];
    char value[128]; /* "" removes the label */
    bool pending;    /* not yet on the Node */
};

struct daemon__kube {
    struct kube_client *client;
    struct kube_node_watch *watch;
    bool reachable;
    struct kube_event_poster *events; /* NULL: Events are not posted */
    pthread_t poster;                 /* the node-state thread */
    bool poster_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    char *node;
    /* desired node state, under lock */
    struct node_label labels[KUBE_MAX_NODE_LABELS];
    size_t n_labels;
    unsigned retry_ms;
    uint64_t retry_at_ms;
    /* failed Event tries (the poster's thread) */
    atomic_ullong event_failures;
    _Atomic uint64_t next_event_warn_ms;
};

/* Merge-patches one label of this node (value "" removes it). */
static int patch_label(struct daemon__kube *k, const char *key, const char *value,
                       struct error *err)
{
    struct strbuf path = STRBUF_INIT, body = STRBUF_INIT;
    int r = strbuf_printf(&path, "/api/v1/nodes/%s", k->node);
    if (r == 0)
        r = *value ? strbuf_printf(&body, "{\"metadata\":{\"labels\":{\"%s\":\"%s\"}}}", key, value)
                   : strbuf_printf(&body, "{\"metadata\":{\"labels\":{\"%s\":null}}}", key);
    if (r == 0)
        r = kube_request(k->client, "PATCH", strbuf_str(&path), strbuf_str(&body),
                         "application/merge-patch+json", NULL, err);
    strbuf_release(&path);
    strbuf_release(&body);
    return r;
}

/* One pass over the desired node state (poster thread, lock held on entry and exit, dropped
 * around the API calls). Returns true when all of it is on the Node. */
static bool assert_node_state(struct daemon__kube *k)
{
    struct node_label want[KUBE_MAX_NODE_LABELS];
    size_t n = k->n_labels;
    bool done = true;

    memcpy(want, k->labels, sizeof(want));
    pthread_mutex_unlock(&k->lock);
    for (size_t i = 0; i < n; i++) {
        struct error err = {0};
        if (!want[i].pending)
            continue;
        want[i].pending = patch_label(k, want[i].key, want[i].value, &err) < 0;
        if (want[i].pending)
            log_warn("setting node label %s=%s: %s; retrying", want[i].key, want[i].value, err.msg);
    }
    pthread_mutex_lock(&k->lock);
    /* what changed meanwhile stays pending */
    for (size_t i = 0; i < n; i++) {
        if (!want[i].pending && strcmp(k->labels[i].value, want[i].value) == 0)
            k->labels[i].pending = false;
        done &= !k->labels[i].pending;
    }
    return done;
}

/* The poster's word on a failed try (its thread): a dropped Event is logged each time, a
 * retried one at most once a minute with the count. */
static void event_failed(void *userdata, const char *reason, enum kube_event_fate fate,
                         const struct error *err)
{
    struct daemon__kube *k = userdata;
    unsigned long long n = atomic_fetch_add(&k->event_failures, 1) + 1;
    uint64_t now = time_now_ms();

    if (fate == KUBE_EVENT_DROPPED) {
        log_warn("posting Event %s: %s; dropped", reason, err->msg);
        return;
    }
    if (now < atomic_load(&k->next_event_warn_ms))
        return;
    log_warn("posting Event %s: %s; retrying (%llu failed tr%s; next warning in %u s at the "
             "earliest)",
             reason, err->msg, n, n == 1 ? "y" : "ies", EVENT_WARN_INTERVAL_MS / 1000);
    atomic_store(&k->next_event_warn_ms, now + EVENT_WARN_INTERVAL_MS);
}

static bool node_state_pending(const struct daemon__kube *k)
{
    bool any = false;
    for (size_t i = 0; i < k->n_labels; i++)
        any |= k->labels[i].pending;
    return any;
}

/* The node-state thread: asserts the desired node state until it is on the Node. */
static void *node_state_thread(void *arg)
{
    struct daemon__kube *k = arg;

    pthread_mutex_lock(&k->lock);
    for (;;) {
        while (!k->stop && !(node_state_pending(k) && time_now_ms() >= k->retry_at_ms)) {
            struct timespec ts;
            uint64_t now = time_now_ms();
            if (!node_state_pending(k)) {
                pthread_cond_wait(&k->cond, &k->lock);
                continue;
            }
            time_deadline(&ts, CLOCK_MONOTONIC, (unsigned)(k->retry_at_ms - now));
            (void)pthread_cond_timedwait(&k->cond, &k->lock, &ts);
        }
        if (k->stop)
            break;
        if (assert_node_state(k)) {
            k->retry_ms = 0;
            continue;
        }
        k->retry_ms = backoff_next_ms(k->retry_ms, NODE_RETRY_MIN_MS, NODE_RETRY_MAX_MS);
        k->retry_at_ms = time_now_ms() + k->retry_ms;
    }
    pthread_mutex_unlock(&k->lock);
    return NULL;
}

/* Waits up to ms for the watch's first answer; takes the value when it comes. */
static void first_label(struct daemon *d, unsigned ms)
{
    struct daemon__kube *k = d->kube;
    uint64_t deadline = time_now_ms() + ms, now;
    struct pollfd pfd = {.fd = kube_node_watch_fd(k->watch), .events = POLLIN};
    struct error err = {0};
    bool known = false;
    char *value = NULL;

    while (kube_node_watch_value(k->watch, &value, &known, &err) == 0 && !known) {
        now = time_now_ms();
        if (now >= deadline)
            break;
        uint64_t ticks;
        if (poll(&pfd, 1, (int)(deadline - now)) > 0)
            (void)!read(pfd.fd, &ticks, sizeof(ticks));
    }
    if (!known) {
        free(value);
        log_warn("node label %s not read within %u ms (API server slow or unreachable); "
                 "serving without it, the label applies when the watch reads it",
                 d->o->node_label, ms);
        return;
    }
    d->label_pending = false;
    d->label_value = value;
    k->reachable = true;
    log_info("node %s label %s=%s", d->o->node_name, d->o->node_label, value ? value : "(none)");
}

void daemon__kube_start(struct daemon *d)
{
    struct kube_options ko = {
        .kubeconfig = d->o->kubeconfig,
        .node_name = d->o->node_name,
        .api_server = d->o->kube_api_server,
        /* on the watch and Event threads, never this one */
        .request_timeout_ms = LABEL_API_TIMEOUT_MS,
    };
    struct daemon__kube *k;
    struct error err = {0};
    int r;

    if (!d->o->node_name) {
        log_info("NODE_NAME is not set: not reading the node label %s", d->o->node_label);
        return;
    }
    k = calloc(1, sizeof(*k));
    if (!k)
        return;
    r = kube_client_new(&ko, &k->client, &err);
    if (r < 0) {
        log_info("no Kubernetes API (%s): not reading the node label %s", err.msg,
                 d->o->node_label);
        free(k);
        return;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the retry deadlines */
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->cond, &ca);
    pthread_condattr_destroy(&ca);
    k->poster_started = pthread_create(&k->poster, NULL, node_state_thread, k) == 0;
    if (k->poster_started)
        pthread_setname_np(k->poster, "gs-node-state");
    else
        log_warn("cannot start the node-state thread: node labels will not be set");
    r = kube_event_poster_new(k->client,
                              &(struct kube_event_poster_options){.max_queued = KUBE_EVENT_QUEUE,
                                                                  .on_failure = event_failed,
                                                                  .userdata = k},
                              &k->events, &err);
    if (r < 0)
        log_warn("cannot start the Event poster: %s; Events will not be posted", err.msg);
    k->node = str_dup(d->o->node_name);
    d->kube = k;
    if (d->o->dra.enabled) /* dra-plugin has no named configs to pick */
        return;
    if (d->o->config_name) {
        log_info("--config-name %s wins over the node label %s", d->o->config_name,
                 d->o->node_label);
        return;
    }
    /* The watch lists the node first. A healthy API server answers in milliseconds: wait
     * that long so the first config is the labelled one; a slow or stalled one must not hold
     * back serving (it took 2 s with the read on this thread), so after a short wait start
     * with the fallback and switch when the label arrives. */
    r = kube_node_watch_start(k->client, NULL, d->o->node_label, NULL, &k->watch, &err);
    if (r < 0) {
        log_warn("watching node label %s: %s; label changes need a restart", d->o->node_label,
                 err.msg);
        return;
    }
    d->label_pending = true;
    first_label(d, DAEMON_FIRST_LABEL_WAIT_MS);
}

void daemon__kube_stop(struct daemon *d)
{
    if (!d->kube)
        return;
    kube_node_watch_stop(d->kube->watch);
    if (d->kube->poster_started) {
        pthread_mutex_lock(&d->kube->lock);
        d->kube->stop = true;
        pthread_cond_signal(&d->kube->cond);
        pthread_mutex_unlock(&d->kube->lock);
        pthread_join(d->kube->poster, NULL);
    }
    /* a moment for what is queued (a lost GPU's Event just before SIGTERM), then the rest is
     * dropped: we are going away */
    (void)kube_event_poster_flush(d->kube->events, KUBE_EVENT_FLUSH_MS);
    kube_event_poster_free(d->kube->events);
    pthread_mutex_destroy(&d->kube->lock);
    pthread_cond_destroy(&d->kube->cond);
    kube_client_free(d->kube->client);
    free(d->kube->node);
    free(d->kube);
    d->kube = NULL;
    free(d->label_value);
    d->label_value = NULL;
}

int daemon__kube_fd(const struct daemon__kube *k)
{
    return k && k->watch ? kube_node_watch_fd(k->watch) : -1;
}

bool daemon__kube_take_label(struct daemon *d)
{
    struct daemon__kube *k = d->kube;
    struct kube_watch_stats st;
    struct error err = {0};
    char *value = NULL;
    bool known = false;
    uint64_t ticks;

    (void)!read(kube_node_watch_fd(k->watch), &ticks, sizeof(ticks));
    kube_node_watch_stats(k->watch, &st, &err);
    if (st.reachable != k->reachable) {
        k->reachable = st.reachable;
        if (st.reachable)
            log_info("Kubernetes API reachable again");
        else
            log_warn("Kubernetes API unreachable (%s): keeping the current config, retrying",
                     err.msg);
    }
    if (kube_node_watch_value(k->watch, &value, &known, &err) < 0 || !known) {
        free(value);
        return false;
    }
    if (d->label_pending) {
        /* the first answer after a slow start: apply it even when the label is absent, so
         * a config chosen without it is now reported as such (ConfigNotSelected) */
        d->label_pending = false;
        log_info("node label %s read: %s", d->o->node_label, value ? value : "(none)");
        free(d->label_value);
        d->label_value = value;
        return true;
    }
    if ((!value && !d->label_value) ||
        (value && d->label_value && strcmp(value, d->label_value) == 0)) {
        free(value);
        return false;
    }
    log_info("node label %s changed: %s -> %s", d->o->node_label,
             d->label_value ? d->label_value : "(none)", value ? value : "(none)");
    free(d->label_value);
    d->label_value = value;
    return true;
}

void daemon__kube_event(struct daemon *d, const char *reason, const char *message)
{
    daemon__kube_event_pod(d, NULL, NULL, NULL, reason, message);
}

void daemon__kube_event_pod(struct daemon *d, const char *ns, const char *pod, const char *uid,
                            const char *reason, const char *message)
{
    struct daemon__kube *k = d->kube;
    struct error err = {0};
    char dropped[64];
    int r;

    if (!k || !k->events)
        return;
    /* about the Pod when one is named, else about this node (kube/ puts it in "default") */
    const struct kube_event ev = {
        .about = pod ? (struct kube_object_ref){.kind = "Pod",
                                                .namespace = ns ? ns : "default",
                                                .name = pod,
                                                .uid = uid}
                     : (struct kube_object_ref){.kind = "Node", .name = k->node},
        .type = "Warning",
        .reason = reason,
        .message = message,
    };
    r = kube_event_poster_add(k->events, &ev, dropped, sizeof(dropped), &err);
    if (r == 1)
        log_warn("Event queue full (%d): dropped the oldest Event, %s", KUBE_EVENT_QUEUE, dropped);
    else if (r < 0)
        log_warn("Event %s not queued: %s", reason, err.msg);
}

/* A change of desired node state: tried at once, then retried until it is on the Node. */
static void node_state_changed(struct daemon__kube *k)
{
    k->retry_ms = 0;
    k->retry_at_ms = 0;
    pthread_cond_signal(&k->cond);
}

void daemon__kube_set_label(struct daemon *d, const char *key, const char *value)
{
    struct daemon__kube *k = d->kube;
    size_t i;

    if (!k || !k->poster_started)
        return;
    pthread_mutex_lock(&k->lock);
    for (i = 0; i < k->n_labels && strcmp(k->labels[i].key, key) != 0; i++)
        ;
    if (i < KUBE_MAX_NODE_LABELS) {
        k->n_labels += i == k->n_labels;
        str_copy(k->labels[i].key, key, sizeof(k->labels[i].key));
        str_copy(k->labels[i].value, value ? value : "", sizeof(k->labels[i].value));
        k->labels[i].pending = true;
        node_state_changed(k);
    }
    pthread_mutex_unlock(&k->lock);
}

struct kube_client *daemon__kube_client(struct daemon *d)
{
    return d->kube ? d->kube->client : NULL;
}

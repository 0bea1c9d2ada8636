/* SPDX-License-Identifier: Apache-2.0 */
/* label.c: the node label that names the config (nvidia.com/device-plugin.config, or
 * --node-label), read and watched through kube/ when a client can be made and NODE_NAME is
 * set, and Kubernetes Events for reload failures, posted by a thread of their own so the
 * main loop never waits on the API server. The API being unreachable never stops
 * serving: the current config stays and the watcher retries by itself. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon/internal.h"
#include "kube/kube.h"

/* Each API request of the label, Event and node-watch threads. */
#define LABEL_API_TIMEOUT_MS 2000

/* Events wait here for the poster thread: posting never blocks the main loop (a hung API
 * server delayed XID -> Unhealthy by 1.8 s when Events were posted inline). Bounded: when
 * full, the oldest is dropped and counted. */
#define KUBE_EVENT_QUEUE 32
/* Node state (the MIG state label, NVIDIA's operand labels) is desired state, not a message:
 * the poster re-asserts what did not reach the Node, retrying from NODE_RETRY_MIN_MS doubling
 * to NODE_RETRY_MAX_MS, so one failed PATCH (an API server restart) never leaves the node
 * saying "pending" or the operands paused for ever. */
#define KUBE_MAX_NODE_LABELS 8
#define NODE_RETRY_MIN_MS 250u
#define NODE_RETRY_MAX_MS 30000u
/* A refused Event is logged as a warning, then at most once a minute with a count. */
#define EVENT_WARN_INTERVAL_MS 60000u

struct kube_event_item {
    char reason[64];
    char message[1024];
    /* about a Pod when pod_name is set, else about this node */
    char pod_namespace[64], pod_name[254], pod_uid[64];
};

struct node_label {
    char key[128];
    char value[128]; /* "" removes the label */
    bool pending;    /* not yet on the Node */
};

struct daemon__kube {
    struct kube_client *client;
    struct kube_node_watch *watch;
    bool reachable;
    pthread_t poster;
    bool poster_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct kube_event_item queue[KUBE_EVENT_QUEUE];
    size_t head, n; /* ring */
    bool stop;
    unsigned long long dropped;
    char *node;
    /* desired node state, under lock; `paused` belongs to the poster thread */
    struct node_label labels[KUBE_MAX_NODE_LABELS];
    size_t n_labels;
    bool operands_paused, operands_pending;
    unsigned retry_ms;
    uint64_t retry_at_ms;
    char **paused; /* nvidia.com/gpu.deploy.* labels we set to paused-for-mig-change */
    /* refused Events (poster thread) */
    unsigned long long event_failures;
    uint64_t next_event_warn_ms;
};

#define DEPLOY_PREFIX "nvidia.com/gpu.deploy."
#define DEPLOY_PAUSED "paused-for-mig-change"

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

/* Puts back the operand labels we paused; those that fail stay listed for the next try.
 * Returns 0 when none is left. */
static int resume_operands(struct daemon__kube *k)
{
    struct error err = {0};
    char **left = NULL;
    int r = 0;

    for (size_t i = 0; k->paused && k->paused[i]; i++) {
        if (patch_label(k, k->paused[i], "true", &err) == 0) {
            log_info("MIG: %s=true (NVIDIA operands resume)", k->paused[i]);
            continue;
        }
        log_warn("restoring node label %s=true: %s; retrying", k->paused[i], err.msg);
        (void)strv_push(&left, k->paused[i]);
        r = -EAGAIN;
    }
    strv_free(k->paused);
    k->paused = left;
    return r;
}

/* NVIDIA's operands (GPU operator) pause on nvidia.com/gpu.deploy.<operand>=paused-for-mig-
 * change while mig-manager repartitions: set the ones that are "true" to paused. Only labels
 * present and true are touched, as mig-manager does. Returns 0 when every one is paused
 * (a retry reads the node again and pauses what is still true). */
static int pause_operands(struct daemon__kube *k)
{
    struct strbuf path = STRBUF_INIT;
    struct error err = {0};
    char *body = NULL;
    json_t *node = NULL;
    const char *key;
    json_t *v;
    int r;

    (void)strbuf_printf(&path, "/api/v1/nodes/%s", k->node);
    r = kube_request(k->client, "GET", strbuf_str(&path), NULL, NULL, &body, &err);
    if (r < 0) {
        log_warn("reading node %s for %s* labels: %s; retrying", k->node, DEPLOY_PREFIX, err.msg);
        goto out;
    }
    node = json_loads(body, 0, NULL);
    json_object_foreach(json_object_get(json_object_get(node, "metadata"), "labels"), key, v)
    {
        if (!str_startswith(key, DEPLOY_PREFIX) || !json_is_string(v) ||
            strcmp(json_string_value(v), "true") != 0)
            continue;
        if (patch_label(k, key, DEPLOY_PAUSED, &err) < 0) {
            log_warn("pausing %s: %s; retrying", key, err.msg);
            r = -EAGAIN;
        } else if (!strv_contains(k->paused, key) && strv_push(&k->paused, key) == 0) {
            log_info("MIG: %s=%s (NVIDIA operands pause)", key, DEPLOY_PAUSED);
        }
    }
out:
    json_decref(node);
    free(body);
    strbuf_release(&path);
    return r;
}

/* One pass over the desired node state (poster thread, lock held on entry and exit, dropped
 * around the API calls). Returns true when all of it is on the Node. */
static bool assert_node_state(struct daemon__kube *k)
{
    struct node_label want[KUBE_MAX_NODE_LABELS];
    size_t n = k->n_labels;
    bool pause = k->operands_paused, operands = k->operands_pending, done = true;

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
    if (operands)
        operands = (pause ? pause_operands(k) : resume_operands(k)) < 0;
    pthread_mutex_lock(&k->lock);
    /* what changed meanwhile stays pending */
    for (size_t i = 0; i < n; i++) {
        if (!want[i].pending && strcmp(k->labels[i].value, want[i].value) == 0)
            k->labels[i].pending = false;
        done &= !k->labels[i].pending;
    }
    if (!operands && k->operands_paused == pause)
        k->operands_pending = false;
    return done && !k->operands_pending;
}

static void post_event(struct daemon__kube *k, const struct kube_event_item *it)
{
    struct error err = {0};
    uint64_t now;

    const struct kube_event pod = {
        .about = {.kind = "Pod",
                  .namespace = it->pod_namespace,
                  .name = it->pod_name,
                  .uid = *it->pod_uid ? it->pod_uid : NULL},
        .type = "Warning",
        .reason = it->reason,
        .message = it->message,
    };
    int r = *it->pod_name
                ? kube_event_post_about(k->client, &pod, &err)
                : kube_event_post(k->client, NULL, "Warning", it->reason, it->message, &err);
    if (r == 0)
        return;
    k->event_failures++;
    now = time_now_ms();
    if (now < k->next_event_warn_ms)
        return;
    log_warn("posting Event %s: %s (%llu Event post%s failed; next warning in %u s at the "
             "earliest)",
             it->reason, err.msg, k->event_failures, k->event_failures == 1 ? "" : "s",
             EVENT_WARN_INTERVAL_MS / 1000);
    k->next_event_warn_ms = now + EVENT_WARN_INTERVAL_MS;
}

static bool node_state_pending(const struct daemon__kube *k)
{
    bool any = k->operands_pending;
    for (size_t i = 0; i < k->n_labels; i++)
        any |= k->labels[i].pending;
    return any;
}

/* The poster thread: Events in order, then the node state until it is on the Node. */
static void *event_poster(void *arg)
{
    struct daemon__kube *k = arg;

    pthread_mutex_lock(&k->lock);
    for (;;) {
        struct kube_event_item it;

        while (!k->stop && !k->n && !(node_state_pending(k) && time_now_ms() >= k->retry_at_ms)) {
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
        if (k->n) {
            it = k->queue[k->head];
            k->head = (k->head + 1) % KUBE_EVENT_QUEUE;
            k->n--;
            pthread_mutex_unlock(&k->lock);
            post_event(k, &it);
            pthread_mutex_lock(&k->lock);
            continue;
        }
        if (assert_node_state(k)) {
            k->retry_ms = 0;
            continue;
        }
        k->retry_ms = k->retry_ms ? k->retry_ms * 2 : NODE_RETRY_MIN_MS;
        if (k->retry_ms > NODE_RETRY_MAX_MS)
            k->retry_ms = NODE_RETRY_MAX_MS;
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
    k->poster_started = pthread_create(&k->poster, NULL, event_poster, k) == 0;
    if (k->poster_started)
        pthread_setname_np(k->poster, "gs-kube-events");
    if (!k->poster_started)
        log_warn("cannot start the Event thread: Events will not be posted");
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
        d->kube->stop = true; /* Events still queued are dropped: we are going away */
        pthread_cond_signal(&d->kube->cond);
        pthread_mutex_unlock(&d->kube->lock);
        pthread_join(d->kube->poster, NULL);
    }
    pthread_mutex_destroy(&d->kube->lock);
    pthread_cond_destroy(&d->kube->cond);
    kube_client_free(d->kube->client);
    free(d->kube->node);
    strv_free(d->kube->paused);
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
    struct kube_event_item *it;

    if (!k || !k->poster_started)
        return;
    pthread_mutex_lock(&k->lock);
    if (k->n == KUBE_EVENT_QUEUE) { /* full: the oldest goes */
        k->head = (k->head + 1) % KUBE_EVENT_QUEUE;
        k->n--;
        k->dropped++;
    }
    it = &k->queue[(k->head + k->n) % KUBE_EVENT_QUEUE];
    str_copy(it->reason, reason, sizeof(it->reason));
    str_copy(it->message, message, sizeof(it->message));
    str_copy(it->pod_namespace, pod ? (ns ? ns : "default") : "", sizeof(it->pod_namespace));
    str_copy(it->pod_name, pod ? pod : "", sizeof(it->pod_name));
    str_copy(it->pod_uid, pod && uid ? uid : "", sizeof(it->pod_uid));
    k->n++;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
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

void daemon__kube_pause_operands(struct daemon *d, bool pause)
{
    struct daemon__kube *k = d->kube;

    if (!k || !k->poster_started)
        return;
    pthread_mutex_lock(&k->lock);
    k->operands_paused = pause;
    k->operands_pending = true;
    node_state_changed(k);
    pthread_mutex_unlock(&k->lock);
}

struct kube_client *daemon__kube_client(struct daemon *d)
{
    return d->kube ? d->kube->client : NULL;
}

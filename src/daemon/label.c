/* SPDX-License-Identifier: Apache-2.0 */
/* label.c: the node label that names the config (nvidia.com/device-plugin.config, or
 * --node-label), read and watched through kube/ when a client can be made and NODE_NAME is
 * set, and Kubernetes Events for reload failures, posted by a thread of their own so the
 * main loop never waits on the API server. The API being unreachable never stops
 * serving: the current config stays and the watcher retries by itself. Built without
 * src/kube/ (GS_HAVE_KUBE unset), the daemon runs without the label. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/internal.h"

#ifdef GS_HAVE_KUBE
#include <pthread.h>

#include <jansson.h>

#include "kube/kube.h"

/* Events wait here for the poster thread: posting never blocks the main loop (a hung API
 * server delayed XID -> Unhealthy by 1.8 s when Events were posted inline). Bounded: when
 * full, the oldest is dropped and counted. */
#define KUBE_EVENT_QUEUE 32

enum kube_item_kind { ITEM_EVENT = 0, ITEM_LABEL, ITEM_PAUSE_OPERANDS, ITEM_RESUME_OPERANDS };

struct kube_event_item {
    enum kube_item_kind kind; /* ITEM_LABEL: reason is the key, message the value */
    char reason[64];
    char message[1024];
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
    char **paused; /* nvidia.com/gpu.deploy.* labels we set to paused-for-mig-change */
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

/* NVIDIA's operands (GPU operator) pause on nvidia.com/gpu.deploy.<operand>=paused-for-mig-
 * change while mig-manager repartitions: set the ones that are "true" to paused, and back.
 * Only labels present and true are touched, as mig-manager does. */
static void operands(struct daemon__kube *k, bool pause)
{
    struct error err = {0};

    if (!pause) {
        for (size_t i = 0; k->paused && k->paused[i]; i++)
            if (patch_label(k, k->paused[i], "true", &err) < 0)
                log_warn("restoring node label %s=true: %s", k->paused[i], err.msg);
        strv_free(k->paused);
        k->paused = NULL;
        return;
    }
    struct strbuf path = STRBUF_INIT;
    char *body = NULL;
    json_t *node = NULL;
    (void)strbuf_printf(&path, "/api/v1/nodes/%s", k->node);
    if (kube_request(k->client, "GET", strbuf_str(&path), NULL, NULL, &body, &err) < 0) {
        log_warn("reading node %s for %s* labels: %s", k->node, DEPLOY_PREFIX, err.msg);
        goto out;
    }
    node = json_loads(body, 0, NULL);
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(json_object_get(node, "metadata"), "labels"), key, v)
    {
        if (!str_startswith(key, DEPLOY_PREFIX) || !json_is_string(v) ||
            strcmp(json_string_value(v), "true") != 0)
            continue;
        if (patch_label(k, key, DEPLOY_PAUSED, &err) < 0)
            log_warn("pausing %s: %s", key, err.msg);
        else if (strv_push(&k->paused, key) == 0)
            log_info("MIG: %s=%s (NVIDIA operands pause)", key, DEPLOY_PAUSED);
    }
out:
    json_decref(node);
    free(body);
    strbuf_release(&path);
}

static void *event_poster(void *arg)
{
    struct daemon__kube *k = arg;

    pthread_mutex_lock(&k->lock);
    for (;;) {
        struct kube_event_item it;
        struct error err = {0};

        while (!k->n && !k->stop)
            pthread_cond_wait(&k->cond, &k->lock);
        if (k->stop)
            break;
        it = k->queue[k->head];
        k->head = (k->head + 1) % KUBE_EVENT_QUEUE;
        k->n--;
        pthread_mutex_unlock(&k->lock);
        if (it.kind == ITEM_LABEL) {
            if (patch_label(k, it.reason, it.message, &err) < 0)
                log_warn("setting node label %s=%s: %s", it.reason, it.message, err.msg);
        } else if (it.kind == ITEM_PAUSE_OPERANDS || it.kind == ITEM_RESUME_OPERANDS) {
            operands(k, it.kind == ITEM_PAUSE_OPERANDS);
        } else if (kube_event_post(k->client, NULL, "Warning", it.reason, it.message, &err) < 0) {
            log_debug("posting Event %s: %s", it.reason, err.msg);
        }
        pthread_mutex_lock(&k->lock);
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
        .request_timeout_ms = 2000, /* on the watch and Event threads, never this one */
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
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->cond, NULL);
    k->poster_started = pthread_create(&k->poster, NULL, event_poster, k) == 0;
    if (!k->poster_started)
        log_warn("cannot start the Event thread: Events will not be posted");
    k->node = str_dup(d->o->node_name);
    d->kube = k;
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

void daemon__kube_on_event(struct daemon *d)
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
        return;
    }
    if (d->label_pending) {
        /* the first answer after a slow start: apply it even when the label is absent, so
         * a config chosen without it is now reported as such (ConfigNotSelected) */
        d->label_pending = false;
        log_info("node label %s read: %s", d->o->node_label, value ? value : "(none)");
        free(d->label_value);
        d->label_value = value;
        daemon__apply(d, DAEMON_RELOAD_CONFIG, "node label");
        return;
    }
    if ((!value && !d->label_value) ||
        (value && d->label_value && strcmp(value, d->label_value) == 0)) {
        free(value);
        return;
    }
    log_info("node label %s changed: %s -> %s", d->o->node_label,
             d->label_value ? d->label_value : "(none)", value ? value : "(none)");
    free(d->label_value);
    d->label_value = value;
    daemon__apply(d, DAEMON_RELOAD_CONFIG, "node label");
}

static void enqueue(struct daemon *d, enum kube_item_kind kind, const char *reason,
                    const char *message)
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
    it->kind = kind;
    str_copy(it->reason, reason, sizeof(it->reason));
    str_copy(it->message, message, sizeof(it->message));
    k->n++;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
}

void daemon__kube_event(struct daemon *d, const char *reason, const char *message)
{
    enqueue(d, ITEM_EVENT, reason, message);
}

void daemon__kube_set_label(struct daemon *d, const char *key, const char *value)
{
    enqueue(d, ITEM_LABEL, key, value ? value : "");
}

void daemon__kube_pause_operands(struct daemon *d, bool pause)
{
    enqueue(d, pause ? ITEM_PAUSE_OPERANDS : ITEM_RESUME_OPERANDS, "", "");
}

struct kube_client *daemon__kube_client(struct daemon *d)
{
    return d->kube ? d->kube->client : NULL;
}

#else /* !GS_HAVE_KUBE */

void daemon__kube_start(struct daemon *d)
{
    if (d->o->node_name)
        log_info("built without the Kubernetes client: not reading the node label %s",
                 d->o->node_label);
}

void daemon__kube_stop(struct daemon *d)
{
    (void)d;
}

int daemon__kube_fd(const struct daemon__kube *k)
{
    (void)k;
    return -1;
}

void daemon__kube_on_event(struct daemon *d)
{
    (void)d;
}

void daemon__kube_event(struct daemon *d, const char *reason, const char *message)
{
    (void)d;
    (void)reason;
    (void)message;
}

void daemon__kube_set_label(struct daemon *d, const char *key, const char *value)
{
    (void)d;
    (void)key;
    (void)value;
}

struct kube_client *daemon__kube_client(struct daemon *d)
{
    (void)d;
    return NULL;
}

void daemon__kube_pause_operands(struct daemon *d, bool pause)
{
    (void)d;
    (void)pause;
}

#endif

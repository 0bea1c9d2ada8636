/* SPDX-License-Identifier: Apache-2.0 */
/* labels.c: live node labels in the daemon (--labels=nfd-file|node-feature|node). Every
 * snapshot the daemon starts serving (start, config or label change, inventory re-read)
 * gets its labels computed here on the main loop (pure, microseconds) and handed to one
 * writer thread, so a slow or absent API server never delays Allocate, ListAndWatch or
 * health. The writer keeps only the newest set, writes it, and retries with backoff on
 * failure until it lands or a newer set replaces it. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/internal.h"
#include "kube/kube.h"
#include "labels/labels.h"
#include "labels/write.h"

#define LABELS_RETRY_MIN_MS 500
#define LABELS_RETRY_MAX_MS 30000
#define LABELS_DEFAULT_OUTPUT "/etc/kubernetes/node-feature-discovery/features.d/gfd"

struct daemon__labels {
    enum daemon_labels_mode mode;
    const char *output;     /* nfd-file */
    const char *namespace_; /* node-feature */
    const char *pod;
    char *node;
    struct kube_client *client; /* node-feature, node */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct labels_set *pending; /* newest set not yet written (owned) */
    struct labels_set *last;    /* the last set handed over (main loop only, owned) */
    bool stop;
    unsigned long long writes, failures;
};

static int write_set(struct daemon__labels *l, const struct labels_set *s, struct error *err)
{
    switch (l->mode) {
    case DAEMON_LABELS_NFD_FILE:
        return labels_write_file(s, l->output, err);
    case DAEMON_LABELS_NODE_FEATURE:
        return labels_write_nodefeature(l->client, l->namespace_, l->node, l->pod, s, NULL, err);
    case DAEMON_LABELS_NODE:
        return labels_patch_node(l->client, l->node, s, err);
    default:
        return 0;
    }
}

static void *writer(void *arg)
{
    struct daemon__labels *l = arg;
    struct labels_set *cur = NULL;
    unsigned backoff_ms = 0;

    pthread_mutex_lock(&l->lock);
    for (;;) {
        struct error err = {0};
        int r;

        if (backoff_ms && !l->pending && !l->stop) { /* a failed write waits, a new set not */
            struct timespec ts;
            time_deadline(&ts, CLOCK_MONOTONIC, backoff_ms);
            while (!l->pending && !l->stop &&
                   pthread_cond_timedwait(&l->cond, &l->lock, &ts) != ETIMEDOUT)
                ;
        }
        while (!l->pending && !l->stop && !cur)
            pthread_cond_wait(&l->cond, &l->lock);
        if (l->stop)
            break;
        if (l->pending) {
            labels_set_free(cur);
            cur = l->pending;
            l->pending = NULL;
            backoff_ms = 0;
        }
        pthread_mutex_unlock(&l->lock);
        r = write_set(l, cur, &err);
        pthread_mutex_lock(&l->lock);
        if (r == 0) {
            l->writes++;
            backoff_ms = 0;
            log_info("labels: %zu written (%s)", cur->n_labels,
                     l->mode == DAEMON_LABELS_NFD_FILE ? l->output
                     : l->mode == DAEMON_LABELS_NODE   ? "node labels"
                                                       : "NodeFeature");
            labels_set_free(cur);
            cur = NULL;
            continue;
        }
        l->failures++;
        backoff_ms = backoff_next_ms(backoff_ms, LABELS_RETRY_MIN_MS, LABELS_RETRY_MAX_MS);
        log_warn("labels: %s, retrying in %u ms", err.msg, backoff_ms);
    }
    pthread_mutex_unlock(&l->lock);
    labels_set_free(cur);
    return NULL;
}

static void labels_start_writer(struct daemon *d)
{
    const struct daemon_options *o = d->o;
    struct daemon__labels *l;
    struct error err = {0};

    if (o->labels == DAEMON_LABELS_OFF)
        return;
    l = calloc(1, sizeof(*l));
    if (!l) {
        log_error("labels: out of memory, continuing without labels");
        return;
    }
    l->mode = o->labels;
    l->output = o->labels_output_file ? o->labels_output_file : LABELS_DEFAULT_OUTPUT;
    l->namespace_ = o->labels_namespace && *o->labels_namespace ? o->labels_namespace : "default";
    l->pod = o->pod_name;
    {
        pthread_condattr_t ca; /* the retry deadline is on CLOCK_MONOTONIC */
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_mutex_init(&l->lock, NULL);
        pthread_cond_init(&l->cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (l->mode != DAEMON_LABELS_NFD_FILE) {
        struct kube_options ko = {.kubeconfig = o->kubeconfig,
                                  .node_name = o->node_name,
                                  .api_server = o->kube_api_server};
        if (!o->node_name || !*o->node_name) {
            log_error("--labels=%s needs NODE_NAME (downward API spec.nodeName), continuing "
                      "without labels",
                      l->mode == DAEMON_LABELS_NODE ? "node" : "node-feature");
            goto fail;
        }
        if (kube_client_new(&ko, &l->client, &err) < 0) {
            log_error("labels: %s, continuing without labels", err.msg);
            goto fail;
        }
        l->node = str_dup(o->node_name);
        if (!l->node)
            goto fail;
    }
    if (pthread_create(&l->thread, NULL, writer, l) != 0) {
        log_error("labels: cannot start the writer thread, continuing without labels");
        goto fail;
    }
    pthread_setname_np(l->thread, "gs-labels");
    l->started = true;
    d->labels = l;
    return;
fail:
    kube_client_free(l->client);
    free(l->node);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    free(l);
}

/* Same labels but for the timestamp: nothing to write (an inventory re-read every 30 s
 * must not rewrite the NodeFeature or patch the Node each time). */
static bool same_but_timestamp(const struct labels_set *a, const struct labels_set *b)
{
    size_t i = 0, j = 0;

    if (!a || !b)
        return false;
    for (;;) {
        while (i < a->n_labels && strcmp(a->labels[i].key, LABELS_PREFIX "gfd.timestamp") == 0)
            i++;
        while (j < b->n_labels && strcmp(b->labels[j].key, LABELS_PREFIX "gfd.timestamp") == 0)
            j++;
        if (i == a->n_labels || j == b->n_labels)
            return i == a->n_labels && j == b->n_labels;
        if (strcmp(a->labels[i].key, b->labels[j].key) != 0 ||
            strcmp(a->labels[i].value, b->labels[j].value) != 0)
            return false;
        i++;
        j++;
    }
}

static struct labels_set *set_dup(const struct labels_set *s)
{
    struct labels_set *c = calloc(1, sizeof(*c));

    if (c)
        c->labels = calloc(s->n_labels ? s->n_labels : 1, sizeof(*c->labels));
    if (!c || !c->labels) {
        free(c);
        return NULL;
    }
    for (; c->n_labels < s->n_labels; c->n_labels++) {
        struct labels_label *l = &c->labels[c->n_labels];
        l->key = str_dup(s->labels[c->n_labels].key);
        l->value = str_dup(s->labels[c->n_labels].value);
        if (!l->key || !l->value) {
            c->n_labels++;
            labels_set_free(c);
            return NULL;
        }
    }
    return c;
}

static void labels_update(struct daemon *d)
{
    struct daemon__labels *l = d->labels;
    struct labels_options lo = {.timestamp = (int64_t)time(NULL)};
    struct labels_set *s = NULL;
    struct labels_host host;
    struct error err = {0};
    int r;

    if (!l || !d->snap)
        return;
    /* the same host facts as gpu-feature-discovery reads (machine type, PCI class, vGPU) */
    if (labels_host_read(dp_snapshot_inventory(d->snap), d->o->nvml.sysfs_root, NULL, &host) < 0) {
        log_warn("labels: out of memory, keeping the labels written before");
        return;
    }
    labels_host_apply(&host, &lo);
    r = labels_compute(dp_snapshot_inventory(d->snap), dp_snapshot_model(d->snap), &lo, &s, &err);
    labels_host_release(&host);
    if (r < 0) {
        log_warn("labels: %s, keeping the labels written before", err.msg);
        return;
    }
    if (same_but_timestamp(s, l->last)) {
        labels_set_free(s);
        return;
    }
    labels_set_free(l->last);
    l->last = set_dup(s); /* NULL on ENOMEM: the next update writes again */
    pthread_mutex_lock(&l->lock);
    labels_set_free(l->pending);
    l->pending = s;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

/* The labels stay on the node when the daemon stops (NVIDIA #796): a restart must not
 * unlabel GPUs that are still there. */
static void labels_stop(struct daemon *d)
{
    struct daemon__labels *l = d->labels;

    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
    if (l->started)
        pthread_join(l->thread, NULL);
    labels_set_free(l->pending);
    labels_set_free(l->last);
    kube_client_free(l->client);
    free(l->node);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    free(l);
    d->labels = NULL;
}

static int labels_start(struct daemon *d, struct error *err)
{
    labels_start_writer(d); /* never fails: logs and goes on */
    labels_update(d);
    return 0;
}

/* Labels follow what is served (not health: GFD's labels do not carry it). */
static void labels_on_state(struct daemon *d, const struct daemon_change *c)
{
    if (!(c->what & DAEMON_CHANGE_HEALTH))
        labels_update(d);
}

const struct daemon_feature daemon__feature_labels = {
    .name = "labels",
    .start = labels_start,
    .on_state = labels_on_state,
    .stop = labels_stop,
};

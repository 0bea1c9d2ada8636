/* SPDX-License-Identifier: Apache-2.0 */
/* event.c: core/v1 Events about the node (a config the label names is missing, a reload
 * failed) or about any other object (a pod whose prepared DRA claim lost its GPU), shaped as
 * client-go's recorder writes them so `kubectl describe` shows them; and the poster thread
 * that queues them and retries with backoff what an API server restart refused. Returns
 * errors only; the caller decides to carry on and logs. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "kube/curl.h"
#include "kube/internal.h"

#define KUBE_EVENT_MESSAGE_MAX_BYTES 1024

/* When an Event happened, as its timestamps and name say it. */
struct event_stamp {
    char ts[32];    /* RFC 3339, seconds */
    char name[300]; /* client-go's recorder: <object>.<unix nanoseconds in hex> */
};

static void stamp_now(const char *object, struct event_stamp *ret)
{
    struct timespec now;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ret->ts, sizeof(ret->ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(ret->name, sizeof(ret->name), "%s.%llx", object,
             (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec);
}

/* At most `max` bytes of s, not cutting a UTF-8 sequence in two. Owned. */
static char *truncate_utf8(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n <= max)
        return strdup(s);
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return strndup(s, n);
}

/* involvedObject; a Node of this client gets the uid learned from the API. */
static json_t *involved_json(struct kube_client *c, const struct kube_object_ref *o)
{
    json_t *j = json_pack("{s:s, s:s, s:s}", "apiVersion", o->api_version ? o->api_version : "v1",
                          "kind", o->kind, "name", o->name);

    if (!j)
        return NULL;
    if (o->namespace && *o->namespace)
        json_object_set_new(j, "namespace", json_string(o->namespace));
    if (o->uid && *o->uid) {
        json_object_set_new(j, "uid", json_string(o->uid));
    } else if (str_eq(o->kind, "Node") && str_eq(o->name, c->node_name)) {
        pthread_mutex_lock(&c->lock);
        if (c->node_uid)
            json_object_set_new(j, "uid", json_string(c->node_uid));
        pthread_mutex_unlock(&c->lock);
    }
    return j;
}

static json_t *event_json(struct kube_client *c, const struct kube_event *ev, const char *ns,
                          const struct event_stamp *at)
{
    const char *host = c->node_name ? c->node_name : ev->about.name;
    json_t *obj, *involved;
    char *msg = truncate_utf8(ev->message ? ev->message : "", KUBE_EVENT_MESSAGE_MAX_BYTES);

    if (!msg)
        return NULL;
    involved = involved_json(c, &ev->about);
    obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o*, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, "
                    "s:i, s:s, s:s}",
                    "apiVersion", "v1", "kind", "Event", "metadata", "name", at->name, "namespace",
                    ns, "involvedObject", involved, "reason", ev->reason, "message", msg, "type",
                    ev->type, "source", "component", "gpuslice", "host", host, "firstTimestamp",
                    at->ts, "lastTimestamp", at->ts, "count", 1, "reportingComponent", "gpuslice",
                    "reportingInstance", host);
    free(msg);
    return obj;
}

static int check_event(const struct kube_event *ev, struct error *err)
{
    if (!str_eq(ev->type, "Normal") && !str_eq(ev->type, "Warning"))
        return error_set(err, -EINVAL, "event type \"%s\" must be Normal or Warning",
                         ev->type ? ev->type : "");
    if (!ev->reason || !*ev->reason)
        return error_set(err, -EINVAL, "an event needs a reason");
    if (!ev->about.kind || !*ev->about.kind || !ev->about.name || !*ev->about.name)
        return error_set(err, -EINVAL, "an event needs the kind and name of its object");
    return 0;
}

/* An Event lives in its object's namespace; about a cluster-scoped object, in "default"
 * (the API server refuses it anywhere else: legacyValidateEvent). */
static const char *event_namespace(const struct kube_client *c, const struct kube_event *ev)
{
    return ev->about.namespace && *ev->about.namespace ? ev->about.namespace : c->event_namespace;
}

/* One POST of ev, named and stamped by at; *ret_status the HTTP status (0: no answer). */
static int post_event(struct kube_client *c, const struct kube_event *ev,
                      const struct event_stamp *at, struct kube__cancel *cancel, long *ret_status,
                      struct error *err)
{
    struct strbuf response = STRBUF_INIT;
    struct kube__request rq = {
        .method = "POST", .timeout_ms = c->request_timeout_ms, .cancel = cancel};
    const char *ns = event_namespace(c, ev);
    char *url = NULL, *body = NULL;
    json_t *obj = NULL;
    int r;

    *ret_status = 0;
    response.max_len = KUBE__BODY_MAX_BYTES;
    obj = event_json(c, ev, ns, at);
    body = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    r = body ? kube__url_events(c->auth.server, ns, &url) : -ENOMEM;
    if (r < 0) {
        r = error_set(err, r, "out of memory");
        goto out;
    }
    rq.url = url;
    rq.body = body;
    r = kube__perform(c, &rq, &response, ret_status, err);
out:
    strbuf_release(&response);
    json_decref(obj);
    free(body);
    free(url);
    return r;
}

int kube_event_post_about(struct kube_client *c, const struct kube_event *ev, struct error *err)
{
    struct event_stamp at;
    long status;
    int r = check_event(ev, err);

    if (r < 0)
        return r;
    stamp_now(ev->about.name, &at);
    return post_event(c, ev, &at, NULL, &status, err);
}

int kube_event_post(struct kube_client *c, const char *node, const char *type, const char *reason,
                    const char *message, struct error *err)
{
    struct kube_event ev = {
        .about = {.kind = "Node"}, .type = type, .reason = reason, .message = message};

    ev.about.name = kube__node_or_default(c, node, err);
    if (!ev.about.name)
        return -EINVAL;
    return kube_event_post_about(c, &ev, err);
}

/* ---- the poster: a queue, one thread, retries with backoff ------------------------------- */

#define POSTER_QUEUE_DEFAULT 64
#define POSTER_RETRY_MIN_MS 250u
#define POSTER_RETRY_MAX_MS 30000u
#define POSTER_MAX_TRIES 16u

/* A queued Event: a copy of the caller's, named and stamped when it was queued. */
struct queued {
    char *api_version, *kind, *namespace, *name, *uid, *type, *reason, *message; /* owned */
    struct event_stamp at;
    unsigned tries;
};

struct kube_event_poster {
    struct kube_client *c; /* borrowed */
    struct kube_event_poster_options o;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* work queued, stop, or the queue drained (CLOCK_MONOTONIC) */
    struct queued **ring;
    size_t head, n;
    bool in_flight, stop;
    uint64_t retry_at_ms;
    unsigned retry_ms;
    struct kube__cancel cancel;
    struct kube_event_poster_stats stats;
};

static void queued_free(struct queued *q)
{
    if (!q)
        return;
    free(q->api_version);
    free(q->kind);
    free(q->namespace);
    free(q->name);
    free(q->uid);
    free(q->type);
    free(q->reason);
    free(q->message);
    free(q);
}

static struct queued *queued_new(const struct kube_event *ev)
{
    struct queued *q = calloc(1, sizeof(*q));
    const char *const src[] = {
        ev->about.api_version, ev->about.kind, ev->about.namespace, ev->about.name,
        ev->about.uid,         ev->type,       ev->reason,          ev->message};
    char **dst[] = {&q->api_version, &q->kind, &q->namespace, &q->name,
                    &q->uid,         &q->type, &q->reason,    &q->message};

    if (!q)
        return NULL;
    for (size_t i = 0; i < GS_ARRAY_SIZE(dst); i++) {
        *dst[i] = src[i] ? strdup(src[i]) : NULL;
        if (src[i] && !*dst[i]) {
            queued_free(q);
            return NULL;
        }
    }
    stamp_now(ev->about.name, &q->at);
    return q;
}

static struct kube_event queued_event(const struct queued *q)
{
    return (struct kube_event){.about = {.api_version = q->api_version,
                                         .kind = q->kind,
                                         .namespace = q->namespace,
                                         .name = q->name,
                                         .uid = q->uid},
                               .type = q->type,
                               .reason = q->reason,
                               .message = q->message};
}

/* Failures that may pass: no answer, a timeout, a refused connection, 429 and 5xx. */
static bool may_pass(int r, long status)
{
    return r == -EAGAIN || r == -ETIMEDOUT || r == -ECONNREFUSED || (status == 0 && r == -EIO);
}

/* The outcome of one try of q, which the thread holds (out of the ring); lock held. q goes
 * back to the head of the ring for a retry, or is freed. */
static void settle(struct kube_event_poster *p, struct queued *q, int r, long status,
                   enum kube_event_fate *fate)
{
    size_t cap = p->o.max_queued;

    *fate = KUBE_EVENT_DROPPED;
    if (r == 0 || r == -EEXIST) {
        p->stats.posted++;
        p->retry_ms = 0;
        p->retry_at_ms = 0;
        queued_free(q);
        return;
    }
    if (!may_pass(r, status) || q->tries >= p->o.max_tries) {
        if (may_pass(r, status))
            p->stats.dropped_tries++;
        else
            p->stats.dropped_refused++;
        p->retry_ms = 0;
        p->retry_at_ms = 0;
        queued_free(q);
        return;
    }
    p->retry_ms = backoff_next_ms(p->retry_ms, p->o.retry_min_ms, p->o.retry_max_ms);
    p->retry_at_ms = time_now_ms() + p->retry_ms;
    if (p->n == cap) { /* the queue filled meanwhile: this, the oldest, goes */
        p->stats.dropped_full++;
        queued_free(q);
        return;
    }
    p->stats.retries++;
    *fate = KUBE_EVENT_RETRYING;
    p->head = (p->head + cap - 1) % cap;
    p->ring[p->head] = q;
    p->n++;
}

static void *poster_thread(void *arg)
{
    struct kube_event_poster *p = arg;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        struct queued *q;
        struct kube_event ev;
        struct error err = {0};
        enum kube_event_fate fate;
        char reason[128];
        long status = 0;
        int r;

        while (!p->stop && (!p->n || time_now_ms() < p->retry_at_ms)) {
            struct timespec ts;
            uint64_t now = time_now_ms();
            if (!p->n) {
                pthread_cond_wait(&p->cond, &p->lock);
                continue;
            }
            time_deadline(&ts, CLOCK_MONOTONIC, (unsigned)(p->retry_at_ms - now));
            (void)pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        }
        if (p->stop)
            break;
        q = p->ring[p->head];
        p->head = (p->head + 1) % p->o.max_queued;
        p->n--;
        p->in_flight = true;
        q->tries++;
        pthread_mutex_unlock(&p->lock);

        ev = queued_event(q);
        r = check_event(&ev, &err);
        if (r == 0)
            r = post_event(p->c, &ev, &q->at, &p->cancel, &status, &err);

        pthread_mutex_lock(&p->lock);
        p->in_flight = false;
        if (r == -ECANCELED && p->stop) {
            queued_free(q);
            break;
        }
        str_copy(reason, q->reason ? q->reason : "", sizeof(reason));
        settle(p, q, r, status, &fate); /* q is the ring's again, or freed */
        pthread_cond_broadcast(&p->cond);
        if (r < 0 && r != -EEXIST && p->o.on_failure) {
            pthread_mutex_unlock(&p->lock);
            p->o.on_failure(p->o.userdata, reason, fate, &err);
            pthread_mutex_lock(&p->lock);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int kube_event_poster_new(struct kube_client *c, const struct kube_event_poster_options *o,
                          struct kube_event_poster **ret, struct error *err)
{
    struct kube_event_poster *p = calloc(1, sizeof(*p));
    pthread_condattr_t ca;
    int r;

    if (!p)
        return error_set(err, -ENOMEM, "out of memory");
    p->c = c;
    if (o)
        p->o = *o;
    if (!p->o.max_queued)
        p->o.max_queued = POSTER_QUEUE_DEFAULT;
    if (!p->o.retry_min_ms)
        p->o.retry_min_ms = POSTER_RETRY_MIN_MS;
    if (!p->o.retry_max_ms)
        p->o.retry_max_ms = POSTER_RETRY_MAX_MS;
    if (p->o.retry_max_ms < p->o.retry_min_ms)
        p->o.retry_max_ms = p->o.retry_min_ms;
    if (!p->o.max_tries)
        p->o.max_tries = POSTER_MAX_TRIES;
    p->ring = calloc(p->o.max_queued, sizeof(*p->ring));
    p->cancel.multi = c->curl->multi_init();
    if (!p->ring || !p->cancel.multi) {
        if (p->cancel.multi)
            c->curl->multi_cleanup(p->cancel.multi);
        free(p->ring);
        free(p);
        return error_set(err, -ENOMEM, "out of memory");
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the retry deadlines */
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    r = -pthread_create(&p->thread, NULL, poster_thread, p);
    if (r < 0) {
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        c->curl->multi_cleanup(p->cancel.multi);
        free(p->ring);
        free(p);
        return error_set_errno(err, -r, "starting the Event poster thread");
    }
    *ret = p;
    return 0;
}

int kube_event_poster_add(struct kube_event_poster *p, const struct kube_event *ev,
                          char *dropped_reason, size_t size, struct error *err)
{
    struct queued *q, *old = NULL;
    size_t cap = p->o.max_queued;
    int r = check_event(ev, err);

    if (r < 0)
        return r;
    q = queued_new(ev);
    if (!q)
        return error_set(err, -ENOMEM, "out of memory queueing Event %s", ev->reason);
    pthread_mutex_lock(&p->lock);
    if (p->n == cap) {
        old = p->ring[p->head];
        p->head = (p->head + 1) % cap;
        p->n--;
        p->stats.dropped_full++;
    }
    p->ring[(p->head + p->n) % cap] = q;
    p->n++;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (old && dropped_reason && size)
        str_copy(dropped_reason, old->reason ? old->reason : "", size);
    r = old ? 1 : 0;
    queued_free(old);
    return r;
}

bool kube_event_poster_flush(struct kube_event_poster *p, unsigned timeout_ms)
{
    uint64_t deadline = time_now_ms() + timeout_ms;
    bool done;

    pthread_mutex_lock(&p->lock);
    while (!(done = !p->n && !p->in_flight) && time_now_ms() < deadline) {
        struct timespec ts;
        time_deadline(&ts, CLOCK_MONOTONIC, (unsigned)(deadline - time_now_ms()));
        (void)pthread_cond_timedwait(&p->cond, &p->lock, &ts);
    }
    pthread_mutex_unlock(&p->lock);
    return done;
}

void kube_event_poster_stats(struct kube_event_poster *p, struct kube_event_poster_stats *ret)
{
    pthread_mutex_lock(&p->lock);
    *ret = p->stats;
    ret->queued = p->n;
    ret->in_flight = p->in_flight;
    pthread_mutex_unlock(&p->lock);
}

void kube_event_poster_free(struct kube_event_poster *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    atomic_store(&p->cancel.stop, true);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    p->c->curl->multi_wakeup(p->cancel.multi);
    pthread_join(p->thread, NULL);
    for (size_t i = 0; i < p->n; i++)
        queued_free(p->ring[(p->head + i) % p->o.max_queued]);
    p->c->curl->multi_cleanup(p->cancel.multi);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p->ring);
    free(p);
}

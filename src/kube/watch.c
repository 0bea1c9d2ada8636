/* SPDX-License-Identifier: Apache-2.0 */
/* watch.c: follows one label of one node, or the ResourceSlices of one DRA driver on one
 * node, from a background thread — list, then watch from the list's resourceVersion; 410
 * Gone or a broken stream → re-list; failures → backoff (500 ms doubling to 30 s). Changes
 * reach the owner through callbacks, an eventfd and a locked copy of the value (the label,
 * or the slices by name). Stop interrupts any transfer at once (curl_multi_wakeup). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "kube/curl.h"
#include "kube/internal.h"

/* A watch stream open at least this long (or that delivered events) was healthy: its end
 * restarts the backoff. */
#define WATCH_HEALTHY_AFTER_MS 1000

enum reach { REACH_UNKNOWN, REACH_YES, REACH_NO };

struct kube_node_watch {
    struct kube_client *c; /* borrowed */
    char *node;
    char *label_key;   /* the label watched; NULL for a slice watch */
    char *driver;      /* a slice watch: the DRA driver */
    const char *dra_v; /* a slice watch: the resource.k8s.io version (static) */
    struct kube_watch_callbacks cb;
    int efd;
    pthread_t thread;
    bool thread_started;
    struct kube__cancel cancel;

    pthread_mutex_t lock; /* guards the fields below and pairs with cond (stop waits) */
    pthread_cond_t cond;
    bool known;
    char *value;
    json_t *slices;  /* a slice watch: name → ResourceSlice object (NULL until listed) */
    char *slices_rv; /* a slice watch: the resourceVersion the slices were seen at */
    struct kube_watch_stats stats;
    struct error last_err;

    /* The watcher thread's own state. */
    char *rv; /* resume point; NULL = list first */
    enum reach reach;
    struct kube__lines lines;
    struct error *stream_err;
    unsigned n_stream_events;
    bool stream_failed; /* the stream's content was bad (not the connection) */
};

static void notify(struct kube_node_watch *w)
{
    uint64_t one = 1;
    ssize_t n = write(w->efd, &one, sizeof(one));
    (void)n; /* a full counter (EAGAIN) is still readable */
}

static void set_value(struct kube_node_watch *w, bool has_label, const char *value)
{
    bool changed;
    char *copy = NULL;

    if (has_label) {
        copy = strdup(value);
        if (!copy)
            return; /* the next event or list tries again */
    }
    pthread_mutex_lock(&w->lock);
    changed =
        !w->known || (w->value != NULL) != has_label || (has_label && strcmp(w->value, value) != 0);
    if (changed) {
        free(w->value);
        w->value = copy;
        copy = NULL;
        w->known = true;
        w->stats.n_changes++;
    }
    pthread_mutex_unlock(&w->lock);
    free(copy);
    if (!changed)
        return;
    notify(w);
    if (w->cb.on_change)
        w->cb.on_change(has_label ? value : NULL, w->cb.userdata);
}

static void set_reach(struct kube_node_watch *w, bool reachable, const struct error *e)
{
    enum reach next = reachable ? REACH_YES : REACH_NO;
    bool changed = w->reach != next;

    w->reach = next;
    pthread_mutex_lock(&w->lock);
    w->stats.reachable = reachable;
    if (!reachable) {
        w->stats.n_failures++;
        w->last_err = *e;
    }
    pthread_mutex_unlock(&w->lock);
    if (!changed)
        return;
    notify(w);
    if (w->cb.on_status)
        w->cb.on_status(reachable, reachable ? NULL : e, w->cb.userdata);
}

static void count(struct kube_node_watch *w, uint64_t *counter)
{
    pthread_mutex_lock(&w->lock);
    (*counter)++;
    pthread_mutex_unlock(&w->lock);
}

static int set_rv(struct kube_node_watch *w, const char *rv)
{
    char *copy;

    if (!rv)
        return 0;
    copy = strdup(rv);
    if (!copy)
        return -ENOMEM;
    free(w->rv);
    w->rv = copy;
    return 0;
}

/* Waits up to ms for stop; true when stopping. */
static bool wait_stop(struct kube_node_watch *w, unsigned ms)
{
    struct timespec deadline;
    bool stop;

    time_deadline(&deadline, CLOCK_MONOTONIC, ms); /* w->cond waits on the monotonic clock */
    pthread_mutex_lock(&w->lock);
    while (!atomic_load(&w->cancel.stop))
        if (pthread_cond_timedwait(&w->cond, &w->lock, &deadline) == ETIMEDOUT)
            break;
    stop = atomic_load(&w->cancel.stop);
    pthread_mutex_unlock(&w->lock);
    return stop;
}

/* A slice watch's new set of slices (map stolen) seen at rv. */
static void set_slices(struct kube_node_watch *w, json_t *map, const char *rv)
{
    char *rv_copy = rv ? strdup(rv) : NULL;
    bool changed;

    pthread_mutex_lock(&w->lock);
    changed = !w->known || !json_equal(w->slices, map);
    if (rv_copy) {
        free(w->slices_rv);
        w->slices_rv = rv_copy;
    }
    if (changed) {
        json_decref(w->slices);
        w->slices = map;
        map = NULL;
        w->known = true;
        w->stats.n_changes++;
    }
    pthread_mutex_unlock(&w->lock);
    json_decref(map);
    if (!changed)
        return;
    notify(w);
    if (w->cb.on_change)
        w->cb.on_change(NULL, w->cb.userdata);
}

/* A ResourceSliceList answer → name → object, and the list's resourceVersion. */
static int slices_from_list(const char *body, size_t len, json_t **ret_map, char **ret_rv,
                            struct error *err)
{
    struct kube_slice_list l = {0};
    json_t *items = NULL, *map = NULL, *item;
    size_t i;
    int r = kube__slice_list_parse(body, len, &l, err);

    if (r < 0)
        return r;
    items = json_loads(l.items_json, 0, NULL);
    map = json_object();
    if (!items || !map) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    json_array_foreach(items, i, item)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
        if (name)
            json_object_set(map, name, item);
    }
    *ret_map = map;
    map = NULL;
    *ret_rv = l.resource_version;
    l.resource_version = NULL;
out:
    json_decref(map);
    json_decref(items);
    kube_slice_list_release(&l);
    return r;
}

static int do_list_slices(struct kube_node_watch *w, struct error *err)
{
    struct strbuf body = STRBUF_INIT;
    struct kube__request rq = {.method = "GET", .cancel = &w->cancel};
    char *url = NULL, *rv = NULL;
    json_t *map = NULL;
    long status;
    int r;

    body.max_len = KUBE__BODY_MAX_BYTES;
    rq.timeout_ms = w->c->request_timeout_ms;
    r = kube__url_slices(w->c->auth.server, w->dra_v, w->driver, w->node, false, NULL, &url);
    if (r < 0)
        return error_set(err, r, "out of memory");
    rq.url = url;
    r = kube__perform(w->c, &rq, &body, &status, err);
    if (r < 0)
        goto out;
    r = slices_from_list(body.buf ? body.buf : "", body.len, &map, &rv, err);
    if (r < 0) {
        error_prefix(err, "GET %s", url);
        goto out;
    }
    r = set_rv(w, rv);
    if (r < 0)
        goto out;
    count(w, &w->stats.n_lists);
    set_slices(w, map, rv);
    map = NULL;
out:
    json_decref(map);
    free(rv);
    strbuf_release(&body);
    free(url);
    return r;
}

/* One ADDED/MODIFIED/DELETED slice applied to a copy of the set. */
static int apply_slice_event(struct kube_node_watch *w, bool deleted, json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    json_t *copy;
    int r = set_rv(w, rv);

    if (r < 0 || !name)
        return r;
    pthread_mutex_lock(&w->lock);
    copy = w->slices ? json_deep_copy(w->slices) : json_object();
    pthread_mutex_unlock(&w->lock);
    if (!copy)
        return -ENOMEM;
    if (deleted)
        json_object_del(copy, name);
    else
        json_object_set(copy, name, obj);
    set_slices(w, copy, rv);
    return 0;
}

static int on_slice_line(struct kube_node_watch *w, const char *line, size_t len)
{
    json_t *j = json_loadb(line, len, 0, NULL), *obj;
    const char *type = json_string_value(json_object_get(j, "type"));
    int r;

    obj = json_object_get(j, "object");
    if (!type || !json_is_object(obj)) {
        r = error_set(w->stream_err, -EINVAL, "watch event without \"type\" or \"object\"");
    } else if (str_eq(type, "ERROR")) {
        json_t *code = json_object_get(obj, "code");
        const char *msg = json_string_value(json_object_get(obj, "message"));
        r = json_integer_value(code) == 410
                ? -ESTALE
                : error_set(w->stream_err, -EIO, "watch error %lld: %s",
                            (long long)json_integer_value(code), msg ? msg : "(no message)");
    } else if (str_eq(type, "BOOKMARK")) {
        w->n_stream_events++;
        r = set_rv(w, json_string_value(
                          json_object_get(json_object_get(obj, "metadata"), "resourceVersion")));
    } else if (str_eq(type, "ADDED") || str_eq(type, "MODIFIED") || str_eq(type, "DELETED")) {
        w->n_stream_events++;
        r = apply_slice_event(w, str_eq(type, "DELETED"), obj);
    } else {
        r = error_set(w->stream_err, -EINVAL, "unknown watch event type \"%s\"", type);
    }
    json_decref(j);
    if (r < 0)
        w->stream_failed = true;
    return r;
}

static int do_list(struct kube_node_watch *w, struct error *err)
{
    struct kube__node_info info = {0};
    struct strbuf body = STRBUF_INIT;
    struct kube__request rq = {.method = "GET", .cancel = &w->cancel};
    char *url = NULL;
    bool found = false;
    long status;
    int r;

    if (!w->label_key)
        return do_list_slices(w, err);
    body.max_len = KUBE__BODY_MAX_BYTES;
    rq.timeout_ms = w->c->request_timeout_ms;
    r = kube__url_node_list(w->c->auth.server, w->node, false, NULL, &url);
    if (r < 0)
        return error_set(err, r, "out of memory");
    rq.url = url;
    r = kube__perform(w->c, &rq, &body, &status, err);
    if (r < 0)
        goto out;
    r = kube__node_list_parse(body.buf ? body.buf : "", body.len, w->node, w->label_key, &info,
                              &found, err);
    if (r < 0) {
        error_prefix(err, "GET %s", url);
        goto out;
    }
    r = set_rv(w, info.resource_version);
    if (r < 0)
        goto out;
    count(w, &w->stats.n_lists);
    kube__remember_uid(w->c, w->node, info.uid);
    set_value(w, found && info.has_label, info.label_value);
out:
    kube__node_info_release(&info);
    strbuf_release(&body);
    free(url);
    return r;
}

static int on_line(const char *line, size_t len, void *userdata)
{
    struct kube_node_watch *w = userdata;
    struct kube__watch_event ev = {0};
    int r;

    if (!w->label_key)
        return on_slice_line(w, line, len);
    r = kube__watch_event_parse(line, len, w->label_key, &ev, w->stream_err);
    if (r < 0) {
        w->stream_failed = true;
        return r;
    }
    if (ev.type != KUBE__EV_ERROR) /* an error event alone is not a watch that worked */
        w->n_stream_events++;
    switch (ev.type) {
    case KUBE__EV_ERROR:
        if (ev.code == 410) {
            r = -ESTALE;
            break;
        }
        r = error_set(w->stream_err, -EIO, "watch error %ld: %s", ev.code,
                      ev.message ? ev.message : "(no message)");
        break;
    case KUBE__EV_BOOKMARK:
        r = set_rv(w, ev.node.resource_version);
        break;
    case KUBE__EV_ADDED:
    case KUBE__EV_MODIFIED:
    case KUBE__EV_DELETED:
        /* The field selector should only send our node; anything else is ignored. */
        if (!str_eq(ev.node.name, w->node))
            break;
        r = set_rv(w, ev.node.resource_version);
        if (r >= 0 && ev.type != KUBE__EV_DELETED)
            kube__remember_uid(w->c, w->node, ev.node.uid);
        set_value(w, ev.type != KUBE__EV_DELETED && ev.node.has_label, ev.node.label_value);
        break;
    }
    kube__watch_event_release(&ev);
    if (r < 0)
        w->stream_failed = true;
    return r;
}

static int on_watch_data(const char *data, size_t n, void *userdata)
{
    struct kube_node_watch *w = userdata;
    int r;

    /* Bytes from a 2xx watch: the server is there. */
    if (w->reach != REACH_YES)
        set_reach(w, true, NULL);
    r = kube__lines_feed(&w->lines, data, n, KUBE_WATCH_MAX_EVENT_BYTES, on_line, w);
    if (r == -E2BIG)
        error_set(w->stream_err, r, "a watch event is larger than %u bytes",
                  KUBE_WATCH_MAX_EVENT_BYTES);
    if (r < 0)
        w->stream_failed = true;
    return r;
}

/* *ret_status: the HTTP status (2xx: the stream was open, whatever ended it). */
static int do_watch(struct kube_node_watch *w, long *ret_status, struct error *err)
{
    struct kube__request rq = {.method = "GET", .cancel = &w->cancel};
    char *url = NULL;
    long status;
    int r;

    if (w->label_key)
        r = kube__url_node_list(w->c->auth.server, w->node, true, w->rv, &url);
    else
        r = kube__url_slices(w->c->auth.server, w->dra_v, w->driver, w->node, true, w->rv, &url);
    if (r < 0)
        return error_set(err, r, "out of memory");
    count(w, &w->stats.n_watches);
    rq.url = url;
    /* A safety net above the server-side timeoutSeconds, for a connection gone silent. */
    rq.timeout_ms = (KUBE__WATCH_TIMEOUT_S + 30) * 1000L;
    rq.on_data = on_watch_data;
    rq.userdata = w;
    w->stream_err = err;
    w->n_stream_events = 0;
    w->stream_failed = false;
    kube__lines_release(&w->lines);
    r = kube__perform(w->c, &rq, NULL, &status, err);
    *ret_status = status;
    w->stream_err = NULL;
    free(url);
    return r;
}

/* The watch thread's backoff: the current wait, watches in a row that ended at once, and
 * whether the last watch got 410 Gone before it delivered anything. */
struct watch_backoff {
    unsigned ms, n_quick;
    bool gone_at_once;
};

enum watch_next { WATCH_AGAIN, WATCH_FAILED, WATCH_STOP };

static unsigned backoff_doubled(unsigned ms)
{
    return ms * 2 > KUBE_WATCH_BACKOFF_MAX_MS ? KUBE_WATCH_BACKOFF_MAX_MS : ms * 2;
}

/* A list (w->rv unset). */
static enum watch_next list_step(struct kube_node_watch *w, struct watch_backoff *b,
                                 struct error *err)
{
    int r = do_list(w, err);

    if (r == -ECANCELED)
        return WATCH_STOP;
    if (r < 0)
        return WATCH_FAILED;
    set_reach(w, true, NULL);
    /* a list between two 410s proves nothing: keep backing off then */
    if (!b->gone_at_once)
        b->ms = KUBE_WATCH_BACKOFF_MIN_MS;
    return WATCH_AGAIN;
}

/* A watch from w->rv. */
static enum watch_next watch_step(struct kube_node_watch *w, struct watch_backoff *b,
                                  struct error *err)
{
    uint64_t t0 = time_now_ms();
    long status = 0;
    bool open_a_while;
    int r = do_watch(w, &status, err);

    if (r == -ECANCELED)
        return WATCH_STOP;
    open_a_while = w->n_stream_events > 0 || time_now_ms() - t0 >= WATCH_HEALTHY_AFTER_MS;
    if (r == -ESTALE) { /* resourceVersion compacted away: list again */
        count(w, &w->stats.n_gone);
        free(w->rv);
        w->rv = NULL;
        /* Once after a watch that lived is compaction: re-list at once. A watch that answers
         * 410 straight after a fresh list is a misbehaving server: back off (it made us
         * re-list 500-2,400 times a second). */
        if (!open_a_while && b->gone_at_once) {
            if (wait_stop(w, b->ms))
                return WATCH_STOP;
            b->ms = backoff_doubled(b->ms);
        }
        b->gone_at_once = !open_a_while;
        return WATCH_AGAIN;
    }
    b->gone_at_once = false;
    /* The server ended the watch (timeoutSeconds), or the network or an API server restart
     * cut an open stream: watch again from the last resourceVersion at once (a failure to
     * reconnect counts as one). Streams that keep ending at once get the backoff, so a
     * misbehaving server is not hammered. */
    if (r >= 0 || (status >= 200 && status <= 299 && !w->stream_failed)) {
        b->n_quick = open_a_while ? 0 : b->n_quick + 1;
        if (b->n_quick >= 2 && wait_stop(w, b->ms))
            return WATCH_STOP;
        return WATCH_AGAIN;
    }
    return WATCH_FAILED;
}

static void *watch_thread(void *userdata)
{
    struct kube_node_watch *w = userdata;
    struct watch_backoff b = {.ms = KUBE_WATCH_BACKOFF_MIN_MS};
    struct error err;

    while (!atomic_load(&w->cancel.stop)) {
        enum watch_next next;

        error_clear(&err);
        next = w->rv ? watch_step(w, &b, &err) : list_step(w, &b, &err);
        if (next == WATCH_STOP)
            break;
        if (next == WATCH_AGAIN)
            continue;
        /* A failure. After it, list again: changes made meanwhile may be compacted away. */
        set_reach(w, false, &err);
        free(w->rv);
        w->rv = NULL;
        if (wait_stop(w, b.ms))
            break;
        b.ms = backoff_doubled(b.ms);
    }
    return NULL;
}

static void watch_free(struct kube_node_watch *w)
{
    if (!w)
        return;
    if (w->cancel.multi)
        w->c->curl->multi_cleanup(w->cancel.multi);
    if (w->efd >= 0)
        close(w->efd);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    kube__lines_release(&w->lines);
    free(w->rv);
    free(w->value);
    json_decref(w->slices);
    free(w->slices_rv);
    free(w->node);
    free(w->label_key);
    free(w->driver);
    free(w);
}

/* What a watch follows: a node's label (label_key), or a driver's slices on the node. */
struct watch_what {
    const char *node;
    const char *label_key;
    const char *driver;
    const char *dra_v;
};

static int watch_start(struct kube_client *c, const struct watch_what *what,
                       const struct kube_watch_callbacks *cb, struct kube_node_watch **ret,
                       struct error *err)
{
    struct kube_node_watch *w = NULL;
    pthread_condattr_t ca;
    int r;

    w = calloc(1, sizeof(*w));
    if (!w)
        return error_set(err, -ENOMEM, "out of memory");
    w->efd = -1;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    w->c = c;
    if (cb)
        w->cb = *cb;
    w->node = strdup(what->node);
    w->label_key = str_dup(what->label_key);
    w->driver = str_dup(what->driver);
    w->dra_v = what->dra_v;
    w->cancel.multi = c->curl->multi_init();
    if (!w->node || (what->label_key && !w->label_key) || (what->driver && !w->driver) ||
        !w->cancel.multi) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->efd < 0) {
        r = error_set_errno(err, errno, "eventfd");
        goto out;
    }
    r = -pthread_create(&w->thread, NULL, watch_thread, w);
    if (r < 0) {
        error_set(err, r, "cannot start the watch thread: %s", strerror(-r));
        goto out;
    }
    w->thread_started = true;
    *ret = w;
    w = NULL;
out:
    watch_free(w);
    return r;
}

int kube_node_watch_start(struct kube_client *c, const char *node, const char *label_key,
                          const struct kube_watch_callbacks *cb, struct kube_node_watch **ret,
                          struct error *err)
{
    struct watch_what what = {.label_key = label_key};

    what.node = node ? node : c->node_name;
    if (!what.node || !*what.node)
        return error_set(err, -EINVAL,
                         "no node name to watch: set NODE_NAME (from "
                         "spec.nodeName through the downward API)");
    if (!label_key || !*label_key)
        return error_set(err, -EINVAL, "no label key to watch");
    return watch_start(c, &what, cb, ret, err);
}

int kube_node_watch_fd(const struct kube_node_watch *w)
{
    return w->efd;
}

int kube_node_watch_value(struct kube_node_watch *w, char **ret_value, bool *ret_known,
                          struct error *err)
{
    char *copy = NULL;
    bool known;

    pthread_mutex_lock(&w->lock);
    known = w->known;
    if (w->value)
        copy = strdup(w->value);
    pthread_mutex_unlock(&w->lock);
    if (w->value && !copy)
        return error_set(err, -ENOMEM, "out of memory");
    *ret_value = copy;
    *ret_known = known;
    return 0;
}

void kube_node_watch_stats(struct kube_node_watch *w, struct kube_watch_stats *ret,
                           struct error *ret_last_err)
{
    pthread_mutex_lock(&w->lock);
    *ret = w->stats;
    if (ret_last_err)
        *ret_last_err = w->last_err;
    pthread_mutex_unlock(&w->lock);
}

void kube_node_watch_stop(struct kube_node_watch *w)
{
    if (!w)
        return;
    if (w->thread_started) {
        pthread_mutex_lock(&w->lock);
        atomic_store(&w->cancel.stop, true);
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        w->c->curl->multi_wakeup(w->cancel.multi);
        pthread_join(w->thread, NULL);
    }
    watch_free(w);
}

/* ---- ResourceSlices of one driver on one node ------------------------------------------- */

struct kube_slice_watch {
    struct kube_node_watch *w; /* the same machinery, following slices */
};

int kube_slices_watch_start(struct kube_client *c, const char *driver, const char *node,
                            const struct kube_watch_callbacks *cb, struct kube_slice_watch **ret,
                            struct error *err)
{
    struct watch_what what = {.driver = driver};
    struct kube_slice_watch *sw;
    int r;

    what.node = node ? node : c->node_name;
    if (!driver || !*driver || !what.node || !*what.node)
        return error_set(err, -EINVAL,
                         "watching ResourceSlices needs a driver and a node name (NODE_NAME)");
    /* Once, here: the caller hears at once that DRA is off, and stop never waits on it. */
    r = kube_dra_version(c, &what.dra_v, err);
    if (r < 0)
        return r;
    sw = calloc(1, sizeof(*sw));
    if (!sw)
        return error_set(err, -ENOMEM, "out of memory");
    r = watch_start(c, &what, cb, &sw->w, err);
    if (r < 0) {
        free(sw);
        return r;
    }
    *ret = sw;
    return 0;
}

int kube_slice_watch_fd(const struct kube_slice_watch *sw)
{
    return sw->w->efd;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The slices of map as an array sorted by name (new reference). */
static json_t *sorted_items(json_t *map)
{
    size_t n = json_object_size(map), i = 0;
    const char **names = calloc(n ? n : 1, sizeof(*names));
    json_t *arr = json_array(), *v;
    const char *key;

    if (!names || !arr) {
        free(names);
        json_decref(arr);
        return NULL;
    }
    json_object_foreach(map, key, v) names[i++] = key;
    qsort(names, n, sizeof(*names), by_name);
    for (i = 0; i < n; i++)
        json_array_append(arr, json_object_get(map, names[i]));
    free(names);
    return arr;
}

int kube_slice_watch_get(struct kube_slice_watch *sw, struct kube_slice_list *ret, bool *ret_known,
                         struct error *err)
{
    struct kube_node_watch *w = sw->w;
    struct kube_slice_list l = {0};
    json_t *arr;
    bool known;

    pthread_mutex_lock(&w->lock);
    known = w->known;
    arr = sorted_items(w->slices);
    l.n_items = json_array_size(arr);
    l.items_json = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    l.resource_version = strdup(w->slices_rv ? w->slices_rv : "");
    pthread_mutex_unlock(&w->lock);
    json_decref(arr);
    if (!l.items_json || !l.resource_version) {
        kube_slice_list_release(&l);
        return error_set(err, -ENOMEM, "out of memory");
    }
    *ret = l;
    *ret_known = known;
    return 0;
}

void kube_slice_watch_stop(struct kube_slice_watch *sw)
{
    if (!sw)
        return;
    kube_node_watch_stop(sw->w);
    free(sw);
}

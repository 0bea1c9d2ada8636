/* SPDX-License-Identifier: Apache-2.0 */
/* dra_slice.c: part of the DRA feature — the ResourceSlice controller, on a thread of its
 * own. The loop hands it each new device set (as the node-label poster is handed labels);
 * it writes this node's one slice when the content changed (list, create or update,
 * delete), with its own backoff (1 s doubling to 30 s), and puts back a slice someone
 * deleted (its watch). Its blocking API calls never hold a lock another thread waits on. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon/internal.h"
#include "dra/dra.h"
#include "kube/kube.h"

#define SLICE_RETRY_MIN_MS 1000u
#define SLICE_RETRY_MAX_MS 30000u

struct daemon__dra_slices {
    struct kube_client *kube; /* borrowed: outlives the controller */
    char *node_name;
    int wake_fd; /* eventfd: a new device set, or stop */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock; /* next and stopping: what the loop hands over */
    struct dra_devices *next;
    bool stopping;
    /* the thread's own */
    struct kube_slice_watch *watch; /* our slices, to put back one deleted or changed */
    struct dra_devices *devs;
    char *node_uid;
    char *published; /* the slice's content last written ("" none), for the diff */
    char *slice_name, *slice_rv;
    int64_t generation;
    unsigned retry_ms;
};

/* The slice body for devs (name and resourceVersion when updating), as text. */
static char *slice_text(const struct daemon__dra_slices *sl, const char *name, const char *rv,
                        int64_t generation, struct error *err)
{
    struct dra_slice_meta meta = {.node_name = sl->node_name,
                                  .node_uid = sl->node_uid,
                                  .name = name,
                                  .resource_version = rv,
                                  .generation = generation};
    json_t *slice = NULL;
    char *text = NULL;

    if (dra_slice_json(sl->devs, &meta, DRA_API_V1, &slice, err) < 0)
        return NULL;
    text = json_dumps(slice, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(slice);
    if (!text)
        error_set(err, -ENOMEM, "out of memory");
    return text;
}

/* The name and resourceVersion of a slice object (the API's answer or a listed item). */
static void take_meta(struct daemon__dra_slices *sl, json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));

    if (name) {
        free(sl->slice_name);
        sl->slice_name = str_dup(name);
    }
    if (rv) {
        free(sl->slice_rv);
        sl->slice_rv = str_dup(rv);
    }
}

/* Our slices now: the first one's name and resourceVersion kept, the others deleted. */
static int adopt_slices(struct daemon__dra_slices *sl, struct error *err)
{
    struct kube_slice_list l = {0};
    json_t *items = NULL;
    int r = kube_slices_list(sl->kube, DRA_DRIVER_NAME, sl->node_name, &l, err);

    if (r < 0)
        return r;
    items = json_loads(l.items_json ? l.items_json : "[]", 0, NULL);
    free(sl->slice_name);
    free(sl->slice_rv);
    sl->slice_name = sl->slice_rv = NULL;
    for (size_t i = 0; r == 0 && i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        const char *name =
            json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
        json_t *gen =
            json_object_get(json_object_get(json_object_get(item, "spec"), "pool"), "generation");
        if (!name)
            continue;
        if (sl->slice_name) { /* one slice per node: an extra one (a crash mid-create) goes */
            r = kube_slice_delete(sl->kube, name, NULL, err);
            r = r == -ENOENT ? 0 : r;
            continue;
        }
        take_meta(sl, item);
        if (json_integer_value(gen) > sl->generation)
            sl->generation = json_integer_value(gen);
    }
    json_decref(items);
    kube_slice_list_release(&l);
    return r;
}

/* Creates our slice, or updates it with the name and resourceVersion last seen; when that
 * one changed meanwhile (409) or was never learnt, the slices are listed first. */
static int write_slice(struct daemon__dra_slices *sl, struct error *err)
{
    char *body = NULL, *answer = NULL;
    int r = 0;

    for (int attempt = 0; attempt < 2; attempt++) {
        if (!sl->slice_name || attempt > 0)
            r = adopt_slices(sl, err);
        if (r < 0)
            break;
        free(body);
        body = slice_text(sl, sl->slice_name, sl->slice_rv, sl->generation + 1, err);
        if (!body) {
            r = -ENOMEM;
            break;
        }
        r = sl->slice_name
                ? kube_slice_update(sl->kube, sl->slice_name, body, sl->slice_rv, &answer, err)
                : kube_slice_create(sl->kube, body, &answer, err);
        if (r != -EEXIST && r != -ENOENT)
            break;
        *err = (struct error){0}; /* changed or gone meanwhile: list, then once more */
    }
    if (r == 0) {
        json_t *obj = answer ? json_loads(answer, 0, NULL) : NULL;
        sl->generation++;
        take_meta(sl, obj);
        json_decref(obj);
        log_info("DRA: ResourceSlice %s written: %zu devices (pool generation %lld)",
                 sl->slice_name ? sl->slice_name : "", sl->devs->n_devices,
                 (long long)sl->generation);
    }
    free(body);
    free(answer);
    return r;
}

/* The node's GPUs are gone: so is the slice. */
static int remove_slice(struct daemon__dra_slices *sl, struct error *err)
{
    int r = adopt_slices(sl, err);

    if (r == 0 && sl->slice_name)
        r = kube_slice_delete(sl->kube, sl->slice_name, NULL, err);
    r = r == -ENOENT ? 0 : r;
    if (r == 0) {
        free(sl->slice_name);
        sl->slice_name = NULL;
        log_info("DRA: no GPU on this node: ResourceSlice removed");
    }
    return r;
}

/* Writes the slice when its content changed (or removes it when the node has no device). */
static int publish(struct daemon__dra_slices *sl, struct error *err)
{
    char *want = NULL;
    int r;

    if (!sl->node_uid) /* the owner reference, once the node can be read */
        (void)kube_node_uid(sl->kube, NULL, &sl->node_uid, NULL);
    want = slice_text(sl, NULL, NULL, 1, err);
    r = want ? 0 : -ENOMEM;
    if (r == 0 && sl->published && strcmp(want, sl->published) == 0)
        goto out; /* nothing changed */
    if (r == 0)
        r = sl->devs->n_devices == 0 ? remove_slice(sl, err) : write_slice(sl, err);
    if (r == 0) {
        free(sl->published);
        sl->published = want;
        want = NULL;
    }
out:
    free(want);
    return r;
}

/* Is our slice, as last written, among the slices the watch sees? */
static bool slice_present(const struct daemon__dra_slices *sl, const struct kube_slice_list *l)
{
    json_t *items = json_loads(l->items_json ? l->items_json : "[]", 0, NULL);
    bool found = false;

    for (size_t i = 0; !found && i < json_array_size(items); i++) {
        json_t *meta = json_object_get(json_array_get(items, i), "metadata");
        found = sl->slice_name &&
                strcmp(json_string_value(json_object_get(meta, "name")) ?: "", sl->slice_name) == 0;
    }
    json_decref(items);
    return found || !items;
}

/* The watch fired: a slice deleted behind our back (kubectl, a cleanup controller) is
 * written again, as NVIDIA's driver does. True when it must be. */
static bool watch_says_gone(struct daemon__dra_slices *sl)
{
    struct kube_slice_list l = {0};
    bool known = false, gone = false;
    uint64_t ticks;

    (void)!read(kube_slice_watch_fd(sl->watch), &ticks, sizeof(ticks));
    if (kube_slice_watch_get(sl->watch, &l, &known, NULL) < 0 || !known)
        return false;
    if (sl->published && *sl->published && !slice_present(sl, &l)) {
        log_warn("DRA: our ResourceSlice %s is gone from the API: writing it again",
                 sl->slice_name ? sl->slice_name : "");
        free(sl->published);
        sl->published = NULL;
        gone = true;
    }
    kube_slice_list_release(&l);
    return gone;
}

/* A new device set handed over (taken into sl->devs); false when stopping. */
static bool take_handed(struct daemon__dra_slices *sl, bool *ret_new)
{
    bool stopping;
    uint64_t ticks;

    (void)!read(sl->wake_fd, &ticks, sizeof(ticks));
    pthread_mutex_lock(&sl->lock);
    stopping = sl->stopping;
    if (sl->next) {
        dra_devices_free(sl->devs);
        sl->devs = sl->next;
        sl->next = NULL;
        *ret_new = true;
    }
    pthread_mutex_unlock(&sl->lock);
    return !stopping;
}

static void *slices_main(void *arg)
{
    struct daemon__dra_slices *sl = arg;
    struct pollfd p[2] = {
        {.fd = sl->wake_fd, .events = POLLIN},
        {.fd = sl->watch ? kube_slice_watch_fd(sl->watch) : -1, .events = POLLIN}};
    bool due = false;

    while (take_handed(sl, &due)) {
        struct error err = {0};
        if (p[1].revents & POLLIN)
            due |= watch_says_gone(sl);
        if (due && sl->devs && publish(sl, &err) == 0) {
            sl->retry_ms = 0;
            due = false;
        } else if (due && sl->devs) {
            sl->retry_ms = backoff_next_ms(sl->retry_ms, SLICE_RETRY_MIN_MS, SLICE_RETRY_MAX_MS);
            log_error("DRA: publishing the ResourceSlice: %s; retrying in %u ms", err.msg,
                      sl->retry_ms);
        }
        p[0].revents = p[1].revents = 0;
        if (poll(p, 2, due ? (int)sl->retry_ms : -1) < 0 && errno != EINTR)
            break;
    }
    return NULL;
}

int daemon__dra_slices_start(struct kube_client *kube, const char *node_name,
                             struct daemon__dra_slices **ret, struct error *err)
{
    struct daemon__dra_slices *sl = calloc(1, sizeof(*sl));
    int r;

    if (!sl)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&sl->lock, NULL);
    sl->kube = kube;
    sl->node_name = str_dup(node_name ? node_name : "");
    sl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    r = sl->node_name && sl->wake_fd >= 0 ? 0 : error_set(err, -ENOMEM, "out of memory");
    if (r == 0 &&
        kube_slices_watch_start(kube, DRA_DRIVER_NAME, node_name, NULL, &sl->watch, err) < 0) {
        log_warn("DRA: watching our ResourceSlices: %s; a slice deleted by hand comes back "
                 "with the next change only",
                 err->msg);
        *err = (struct error){0};
    }
    if (r == 0 && pthread_create(&sl->thread, NULL, slices_main, sl) != 0)
        r = error_set(err, -EAGAIN, "starting the ResourceSlice thread");
    sl->started = r == 0;
    if (r < 0) {
        daemon__dra_slices_stop(sl);
        return r;
    }
    *ret = sl;
    return 0;
}

void daemon__dra_slices_set(struct daemon__dra_slices *sl, struct dra_devices *devs)
{
    uint64_t one = 1;

    pthread_mutex_lock(&sl->lock);
    dra_devices_free(sl->next);
    sl->next = devs;
    pthread_mutex_unlock(&sl->lock);
    (void)!write(sl->wake_fd, &one, sizeof(one));
}

void daemon__dra_slices_stop(struct daemon__dra_slices *sl)
{
    uint64_t one = 1;

    if (!sl)
        return;
    if (sl->started) {
        pthread_mutex_lock(&sl->lock);
        sl->stopping = true;
        pthread_mutex_unlock(&sl->lock);
        (void)!write(sl->wake_fd, &one, sizeof(one));
        pthread_join(sl->thread, NULL);
    }
    kube_slice_watch_stop(sl->watch);
    if (sl->wake_fd >= 0)
        close(sl->wake_fd);
    dra_devices_free(sl->next);
    dra_devices_free(sl->devs);
    free(sl->node_name);
    free(sl->node_uid);
    free(sl->published);
    free(sl->slice_name);
    free(sl->slice_rv);
    pthread_mutex_destroy(&sl->lock);
    free(sl);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* serve.c: the device-plugin feature. One dp_plugin per resource of the node state, each
 * serving before it registers with the kubelet (retrying with backoff); the plugin
 * directory is watched for kubelet restarts and for sockets removed or replaced. A new state
 * touches only the resources that changed; a health change is pushed on ListAndWatch. Its
 * /metrics series: devices, registration, Allocate counts; ready when all are registered. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "daemon/internal.h"
#include "kubelet/kubelet.h"
#include "metrics/metrics.h"
#include "model/model.h"

/* Right after kubelet.sock is created the kubelet may not accept yet: retry quickly. */
#define DAEMON_FAST_RETRY_MS 50u
#define DAEMON_FAST_RETRIES 20u

/* ---- Allocate counts of stopped plugins ------------------------------------------------ */

static struct daemon__alloc_count *kept_counts(const struct daemon *d, const char *resource)
{
    for (size_t i = 0; i < d->n_alloc_kept; i++)
        if (strcmp(d->alloc_kept[i].resource, resource) == 0)
            return &d->alloc_kept[i];
    return NULL;
}

static void keep_counts(struct daemon *d, struct dp_plugin *p)
{
    const char *resource = dp_plugin_resource_name(p);
    struct daemon__alloc_count *k = kept_counts(d, resource);
    struct dp_plugin_stats st;

    dp_plugin_stats(p, &st);
    if (!k) { /* one entry per resource name a config ever served: bounded by configs */
        struct daemon__alloc_count *v =
            reallocarray(d->alloc_kept, d->n_alloc_kept + 1, sizeof(*v));
        if (!v)
            return; /* out of memory: this resource's counters restart */
        d->alloc_kept = v;
        k = &d->alloc_kept[d->n_alloc_kept++];
        memset(k, 0, sizeof(*k));
        str_copy(k->resource, resource, sizeof(k->resource));
    }
    k->allocates += st.allocates;
    k->allocate_errors += st.allocate_errors;
}

/* ---- Allocate environment: MIG capability paths and random ids -------------------------- */

static char *env_mig_cap_path(void *userdata, unsigned minor, unsigned gi, unsigned ci,
                              bool compute_instance)
{
    struct strbuf path = STRBUF_INIT, out = STRBUF_INIT;
    char *data = NULL, *p, *res = NULL;
    unsigned n;

    (void)userdata;
    if (compute_instance)
        strbuf_printf(&path, "/proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%u/access", minor,
                      gi, ci);
    else
        strbuf_printf(&path, "/proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/access", minor, gi);
    if (file_read_all(strbuf_str(&path), 4096, &data, NULL, NULL) < 0)
        goto out;
    p = strstr(data, "DeviceFileMinor:");
    if (!p)
        goto out;
    p += strlen("DeviceFileMinor:");
    while (*p == ' ' || *p == '\t')
        p++;
    p[strcspn(p, " \t\r\n")] = '\0';
    if (parse_uint(p, &n) < 0 || strbuf_printf(&out, "/dev/nvidia-caps/nvidia-cap%u", n) < 0)
        goto out;
    res = strbuf_take(&out);
out:
    free(data);
    strbuf_release(&path);
    strbuf_release(&out);
    return res;
}

/* NVIDIA adds /dev/nvidiactl & co. to DeviceSpecs only when they exist in its container. */
static bool env_device_exists(void *userdata, const char *container_path)
{
    (void)userdata;
    return path_exists(container_path);
}

static char *env_new_id(void *userdata)
{
    uint8_t b[16];
    struct strbuf sb = STRBUF_INIT;

    (void)userdata;
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        return NULL;
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* variant 1 */
    if (strbuf_printf(&sb, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                      b[12], b[13], b[14], b[15]) < 0) {
        strbuf_release(&sb);
        return NULL;
    }
    return strbuf_take(&sb);
}

/* ---- plugins and registration ------------------------------------------------------------ */

static void log_resource(const char *what, const struct model_resource *res,
                         const struct dp_plugin *p)
{
    log_info("%s resource=%s count=%zu sharing=%s replicas=%u endpoint=%s", what, res->name,
             res->n_devices, res->mode->name, res->replicas, dp_plugin_endpoint(p));
}

/* A stop signal is waiting on the signalfd (not consumed). Checked between Register calls,
 * which can each block for DAEMON_REGISTER_TIMEOUT_MS on a hung kubelet. */
static bool stop_pending(void)
{
    sigset_t pending;

    if (sigpending(&pending) < 0)
        return false;
    return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1 ||
           sigismember(&pending, SIGQUIT) == 1;
}

/* Identity of the socket file now at path; !valid when there is none. */
static struct daemon__sock_id sock_id_of(const char *path)
{
    struct daemon__sock_id id = {0};
    struct stat st;

    if (path && stat(path, &st) == 0) {
        id.valid = true;
        id.dev = (uint64_t)st.st_dev;
        id.ino = (uint64_t)st.st_ino;
        id.ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
    }
    return id;
}

static bool sock_id_equal(const struct daemon__sock_id *a, const struct daemon__sock_id *b)
{
    return a->valid && b->valid && a->dev == b->dev && a->ino == b->ino &&
           a->ctime_ns == b->ctime_ns;
}

static void slot_register(struct daemon *d, struct daemon__slot *s, bool again)
{
    const char *name = dp_plugin_resource_name(s->p);
    struct error err = {0};
    const struct model_resource *res;
    struct daemon__sock_id kubelet_id;
    int r;

    if (!d->kubelet_socket)
        return;
    if (stop_pending()) {
        s->retry_at_ms = 0; /* the loop stops before any retry */
        return;
    }
    /* Taken before dialling: if the kubelet restarts in between, the new socket differs and
     * its IN_CREATE makes us register again. */
    kubelet_id = sock_id_of(d->kubelet_socket);
    r = dp_register(d->kubelet_socket, dp_plugin_endpoint(s->p), name, DAEMON_REGISTER_TIMEOUT_MS,
                    &err);
    if (r < 0) {
        unsigned wait_ms;

        if (s->fast_retries > 0) {
            s->fast_retries--;
            wait_ms = DAEMON_FAST_RETRY_MS;
        } else {
            s->backoff_ms = dp_backoff_next_ms(s->backoff_ms);
            wait_ms = s->backoff_ms;
        }
        s->retry_at_ms = time_now_ms() + wait_ms;
        s->registered = false;
        log_warn("%s, retrying in %u ms", err.msg, wait_ms);
        return;
    }
    dp_snapshot_lock(d->snap);
    res = model_find_resource(dp_snapshot_model(d->snap), name);
    if (res)
        log_resource(again ? "re-registered" : "registered", res, s->p);
    dp_snapshot_unlock(d->snap);
    s->registered = true;
    s->kubelet_id = kubelet_id;
    s->backoff_ms = 0;
    s->retry_at_ms = 0;
    s->fast_retries = 0;
}

/* Creates and starts the plugin of slot s for `name`. */
static int slot_start(struct daemon *d, struct daemon__slot *s, const char *name, struct error *err)
{
    int r;

    r = dp_plugin_new(d->o->plugin_dir, name, d->snap, &d->env, &s->p, err);
    if (r < 0)
        return r;
    r = dp_plugin_start(s->p, err);
    if (r < 0) {
        dp_plugin_free(s->p);
        s->p = NULL;
    }
    if (r < 0) {
        /* e.g. a file someone keeps at the socket's name: try again later (daemon_on_timer),
         * so the resource comes back once the name is free */
        s->registered = false;
        s->backoff_ms = dp_backoff_next_ms(s->backoff_ms);
        s->retry_at_ms = time_now_ms() + s->backoff_ms;
        return r;
    }
    s->registered = false;
    s->backoff_ms = 0;
    s->retry_at_ms = 0;
    return 0;
}

static void daemon_stop_plugins(struct daemon *d)
{
    for (size_t i = 0; i < d->n_slots; i++)
        dp_plugin_free(d->slots[i].p);
    free(d->slots);
    d->slots = NULL;
    d->n_slots = 0;
}

/* One plugin per resource of the current snapshot, serving before registering. */
static int daemon_start_plugins(struct daemon *d, struct error *err)
{
    const struct model *m = dp_snapshot_model(d->snap);
    int r;

    if (m->n_resources == 0) {
        log_warn("no devices found on this node, nothing to serve; waiting for SIGHUP or "
                 "a kubelet restart");
        return 0;
    }
    d->slots = calloc(m->n_resources, sizeof(*d->slots));
    if (!d->slots)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < m->n_resources; i++) {
        r = slot_start(d, &d->slots[i], m->resources[i].name, err);
        if (r < 0)
            return r;
        d->n_slots++;
        log_debug("serving resource=%s socket=%s", m->resources[i].name,
                  dp_plugin_socket_path(d->slots[i].p));
    }
    for (size_t i = 0; i < d->n_slots; i++)
        slot_register(d, &d->slots[i], false);
    return 0;
}

/* Arms the timerfd for the earliest pending registration retry (or disarms it). */
static void daemon_arm_timer(struct daemon *d)
{
    struct itimerspec its = {0};
    uint64_t next = 0;

    for (size_t i = 0; i < d->n_slots; i++) {
        const struct daemon__slot *s = &d->slots[i];
        if (!s->registered && s->retry_at_ms && (!next || s->retry_at_ms < next))
            next = s->retry_at_ms;
    }
    if (next) {
        its.it_value.tv_sec = (time_t)(next / 1000);
        its.it_value.tv_nsec = (long)(next % 1000) * 1000000L;
    }
    (void)timerfd_settime(d->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* The socket name is ours in the device-plugin directory: remove whatever file took it
 * (never a directory) so the kubelet can reach us again. */
static void take_name_back(struct daemon *d, const char *socket_name)
{
    struct strbuf path = STRBUF_INIT;
    struct stat st;

    if (strbuf_printf(&path, "%s/%s", d->o->plugin_dir, socket_name) == 0 &&
        lstat(strbuf_str(&path), &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISSOCK(st.st_mode) &&
        unlink(strbuf_str(&path)) < 0)
        log_warn("cannot remove '%s' that took our socket's name: %s", strbuf_str(&path),
                 strerror(errno));
    strbuf_release(&path);
}

/* Slot i's server could not start: try again (slots follow the model's resources). */
static void restart_slot(struct daemon *d, size_t i)
{
    const struct model *m = dp_snapshot_model(d->snap);
    struct daemon__slot *s = &d->slots[i];
    const char *name = i < m->n_resources ? m->resources[i].name : NULL;
    struct error err = {0};

    if (!name) {
        s->retry_at_ms = 0;
        return;
    }
    take_name_back(d, m->resources[i].socket_name);
    if (slot_start(d, s, name, &err) < 0) {
        log_warn("restarting resource=%s: %s; retrying in %u ms", name, err.msg, s->backoff_ms);
        return;
    }
    log_info("resource=%s serving again", name);
    slot_register(d, s, true);
}

static void daemon_on_timer(struct daemon *d)
{
    uint64_t ticks, now = time_now_ms();

    (void)!read(d->tfd, &ticks, sizeof(ticks));
    for (size_t i = 0; i < d->n_slots; i++) {
        struct daemon__slot *s = &d->slots[i];
        if (s->registered || !s->retry_at_ms || s->retry_at_ms > now)
            continue;
        if (s->p)
            slot_register(d, s, true);
        else
            restart_slot(d, i);
    }
}

/* kubelet restarts delete our sockets: bring back the servers whose socket is gone. */
static void daemon_check_sockets(struct daemon *d, bool register_now)
{
    struct error err = {0};

    for (size_t i = 0; i < d->n_slots; i++) {
        struct daemon__slot *s = &d->slots[i];
        char *name;

        struct stat st;
        char *path;
        bool replaced;

        if (!s->p || dp_plugin_socket_ok(s->p))
            continue;
        name = str_dup(dp_plugin_resource_name(s->p));
        path = str_dup(dp_plugin_socket_path(s->p));
        replaced = path && lstat(path, &st) == 0;
        log_info("socket %s was %s, serving resource=%s again", path ? path : "?",
                 replaced ? "replaced by another file" : "removed", name ? name : "?");
        keep_counts(d, s->p); /* counters survive the kubelet's restart */
        dp_plugin_free(s->p); /* leaves the path alone: it is not our socket any more */
        s->p = NULL;
        /* the socket name is ours in the device-plugin directory: take it back (never a
         * directory) so the kubelet can reach us again */
        if (replaced && !S_ISDIR(st.st_mode) && unlink(path) < 0)
            log_warn("cannot remove '%s' that replaced our socket: %s", path, strerror(errno));
        free(path);
        if (!name || slot_start(d, s, name, &err) < 0) {
            log_error("restarting resource=%s: %s; retrying in %u ms", name ? name : "?", err.msg,
                      s->backoff_ms);
        } else if (register_now) {
            slot_register(d, s, true);
        }
        free(name);
    }
}

/* One inotify event: the kubelet's socket created or one of ours removed or replaced. */
static void on_inotify_event(struct daemon *d, const struct inotify_event *ev,
                             bool *kubelet_created, bool *deleted)
{
    bool is_kubelet = d->kubelet_name && ev->len > 0 && strcmp(ev->name, d->kubelet_name) == 0;

    if (ev->wd == d->wd_kubelet && is_kubelet && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
        *kubelet_created = true;
    /* a socket removed, or another file put at a socket's name */
    if ((ev->mask & (IN_DELETE | IN_MOVED_FROM)) ||
        (ev->wd == d->wd_plugin && (ev->mask & (IN_CREATE | IN_MOVED_TO)) && !is_kubelet))
        *deleted = true;
}

/* The kubelet restarted (its socket is new): every served resource registers again. */
static void register_all_again(struct daemon *d)
{
    struct daemon__sock_id now = sock_id_of(d->kubelet_socket);

    log_info("kubelet socket %s was created (kubelet restart), registering again",
             d->kubelet_socket);
    for (size_t i = 0; i < d->n_slots; i++) {
        if (!d->slots[i].p)
            continue;
        /* Already registered with this very socket (its creation was still queued when we
         * registered, e.g. at start-up): registering again would only make the kubelet drop
         * and redo the ListAndWatch stream. */
        if (d->slots[i].registered && sock_id_equal(&d->slots[i].kubelet_id, &now)) {
            log_debug("resource=%s already registered with this kubelet socket",
                      dp_plugin_resource_name(d->slots[i].p));
            continue;
        }
        d->slots[i].backoff_ms = 0;
        d->slots[i].fast_retries = DAEMON_FAST_RETRIES;
        slot_register(d, &d->slots[i], true);
    }
}

static void daemon_on_inotify(struct daemon *d)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool kubelet_created = false, deleted = false;
    ssize_t n;

    while ((n = read(d->ifd, buf, sizeof(buf))) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof(*ev) + ev->len;
            on_inotify_event(d, ev, &kubelet_created, &deleted);
        }
    }
    /* when kubelet.sock came back in the same batch, register_all_again registers everyone */
    if (deleted)
        daemon_check_sockets(d, !(kubelet_created && d->kubelet_socket));
    if (kubelet_created && d->kubelet_socket)
        register_all_again(d);
}

static void push_all(struct daemon *d)
{
    for (size_t i = 0; i < d->n_slots; i++)
        if (d->slots[i].p)
            dp_plugin_push(d->slots[i].p);
}

static int daemon_resolve_kubelet(struct daemon *d, struct error *err)
{
    struct strbuf sb = STRBUF_INIT;
    const char *slash;

    if (d->o->kubelet_socket && !*d->o->kubelet_socket) {
        log_info("--kubelet-socket is empty: serving without registering");
        return 0;
    }
    if (d->o->kubelet_socket)
        d->kubelet_socket = str_dup(d->o->kubelet_socket);
    else if (strbuf_printf(&sb, "%s/%s", d->o->plugin_dir, DP_KUBELET_SOCKET_NAME) == 0)
        d->kubelet_socket = strbuf_take(&sb);
    strbuf_release(&sb);
    if (!d->kubelet_socket)
        return error_set(err, -ENOMEM, "out of memory");
    slash = strrchr(d->kubelet_socket, '/');
    d->kubelet_name = slash ? slash + 1 : d->kubelet_socket;
    d->kubelet_dir =
        slash ? strndup(d->kubelet_socket, (size_t)(slash - d->kubelet_socket)) : str_dup(".");
    if (!d->kubelet_dir)
        return error_set(err, -ENOMEM, "out of memory");
    if (d->kubelet_dir[0] == '\0') {
        free(d->kubelet_dir);
        d->kubelet_dir = str_dup("/");
    }
    return 0;
}

/* ---- the feature ------------------------------------------------------------------------ */

static size_t resource_index(const struct model *m, const char *name)
{
    for (size_t i = 0; i < m->n_resources; i++)
        if (strcmp(m->resources[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

/* d->snap is served instead of c->old, touching only the resources that changed. */
static void serve_diff(struct daemon *d, const struct daemon_change *c)
{
    const struct dp_snapshot *snap = d->snap;
    const char *why = c->why;
    const struct model *om = dp_snapshot_model(c->old), *nm = dp_snapshot_model(snap);
    bool same_settings = model_settings_equal(&om->settings, &nm->settings);
    struct daemon__slot *slots = calloc(nm->n_resources ? nm->n_resources : 1, sizeof(*slots));
    size_t unchanged = 0, changed = 0, added = 0, removed = 0;
    struct error err = {0};

    if (!slots) {
        log_error("%s: out of memory, the served resources stay as they were", why);
        return;
    }
    for (size_t i = 0; i < d->n_slots; i++) {
        struct daemon__slot *s = &d->slots[i];
        const char *name;
        size_t j;
        bool same;

        if (!s->p)
            continue;
        name = dp_plugin_resource_name(s->p);
        j = resource_index(nm, name);
        if (j == SIZE_MAX) {
            log_info("resource=%s is gone: stopping its server, socket %s removed", name,
                     dp_plugin_socket_path(s->p));
            keep_counts(d, s->p);
            dp_plugin_free(s->p);
            removed++;
            continue;
        }
        same =
            same_settings && model_resource_equal(model_find_resource(om, name), &nm->resources[j]);
        if (dp_plugin_replace_snapshot(s->p, (struct dp_snapshot *)snap, !same, &err) < 0)
            log_warn("%s", err.msg);
        slots[j] = *s;
        if (same) {
            unchanged++;
        } else {
            changed++;
            log_resource("updated", &nm->resources[j], s->p);
        }
    }
    free(d->slots);
    d->slots = slots;
    d->n_slots = nm->n_resources;
    for (size_t j = 0; j < nm->n_resources; j++) {
        if (slots[j].p)
            continue;
        if (slot_start(d, &slots[j], nm->resources[j].name, &err) < 0) {
            log_error("starting resource=%s: %s", nm->resources[j].name, err.msg);
            continue;
        }
        added++;
        slot_register(d, &slots[j], false);
    }
    /* a change someone asked for (config, label, SIGHUP) is always reported; periodic
     * re-reads only when they changed something */
    if (changed + added + removed > 0 || (c->what & DAEMON_RELOAD_CONFIG))
        log_info("%s applied: resources unchanged=%zu changed=%zu added=%zu removed=%zu", why,
                 unchanged, changed, added, removed);
    else
        log_debug("%s: nothing changed", why);
}

/* Allocate calls per resource since the process started: the served plugins' counts plus
 * what plugins stopped before them (a kubelet restart) had counted; a resource no longer
 * served keeps its last values. Each family at 0 from the resource's first appearance. */
static int render_allocations(const struct daemon *d, struct strbuf *sb)
{
    int r = 0;

    for (int errors = 0; errors < 2 && r == 0; errors++) { /* one family at a time */
        const char *name =
            errors ? "gpuslice_allocation_errors_total" : "gpuslice_allocations_total";
        r = metrics_family(sb, name, "counter",
                           errors ? "Allocate calls refused, per resource."
                                  : "Allocate calls per resource.");
        for (size_t i = 0; i < d->n_slots && r == 0; i++) {
            struct dp_plugin_stats st;
            if (!d->slots[i].p)
                continue;
            dp_plugin_stats(d->slots[i].p, &st);
            const char *res = dp_plugin_resource_name(d->slots[i].p);
            const struct daemon__alloc_count *k = kept_counts(d, res);
            unsigned long long v = errors ? st.allocate_errors : st.allocates;
            if (k)
                v += errors ? k->allocate_errors : k->allocates;
            r = metrics_sample1(sb, name, "resource", res, NULL, v);
        }
        for (size_t i = 0; i < d->n_alloc_kept && r == 0; i++) {
            const struct daemon__alloc_count *k = &d->alloc_kept[i];
            bool served = false;
            for (size_t j = 0; j < d->n_slots && !served; j++)
                served = d->slots[j].p &&
                         strcmp(dp_plugin_resource_name(d->slots[j].p), k->resource) == 0;
            if (!served)
                r = metrics_sample1(sb, name, "resource", k->resource, NULL,
                                    errors ? k->allocate_errors : k->allocates);
        }
    }
    return r;
}

/* Devices per resource and health, per GPU the Unhealthy ones, registration per resource. */
static int render_devices(const struct daemon *d, struct strbuf *sb)
{
    const struct model *m = d->snap ? dp_snapshot_model(d->snap) : NULL;
    const struct inv_inventory *inv = d->snap ? dp_snapshot_inventory(d->snap) : NULL;
    int r = metrics_family(sb, "gpuslice_devices", "gauge",
                           "Devices advertised per resource and health.");

    for (size_t i = 0; m && i < m->n_resources && r == 0; i++) {
        const struct model_resource *res = &m->resources[i];
        unsigned long long healthy = 0;
        for (size_t j = 0; j < res->n_devices; j++)
            healthy += res->devices[j].healthy;
        r = metrics_sample1(sb, "gpuslice_devices", "resource", res->name, ",health=\"healthy\"",
                            healthy);
        if (r == 0)
            r = metrics_sample1(sb, "gpuslice_devices", "resource", res->name,
                                ",health=\"unhealthy\"", res->n_devices - healthy);
    }
    /* health per GPU, for top and alerts: its devices (whole, replicas, MIG) that are
     * advertised Unhealthy */
    if (r == 0 && inv && inv->n_gpus)
        r = metrics_family(
            sb, "gpuslice_gpu_unhealthy_devices", "gauge",
            "Devices of the GPU (whole, replicas, MIG devices) advertised Unhealthy.");
    for (size_t g = 0; r == 0 && inv && m && g < inv->n_gpus; g++) {
        unsigned long long bad = 0;
        for (size_t i = 0; i < m->n_resources; i++)
            for (size_t j = 0; j < m->resources[i].n_devices; j++) {
                const struct model_device *dev = &m->resources[i].devices[j];
                bad += !dev->healthy && strcmp(dev->gpu_uuid, inv->gpus[g].uuid) == 0;
            }
        r = strbuf_printf(sb, "gpuslice_gpu_unhealthy_devices{gpu=\"%u\",UUID=\"%s\"} %llu\n",
                          inv->gpus[g].index, inv->gpus[g].uuid, bad);
    }
    if (r == 0)
        r = metrics_family(sb, "gpuslice_resource_registered", "gauge",
                           "1 when the resource is registered with the kubelet.");
    for (size_t i = 0; i < d->n_slots && r == 0; i++)
        if (d->slots[i].p)
            r = metrics_sample1(sb, "gpuslice_resource_registered", "resource",
                                dp_plugin_resource_name(d->slots[i].p), NULL,
                                d->slots[i].registered);
    return r;
}

static int serve_metrics(struct daemon *d, struct strbuf *sb)
{
    int r = render_devices(d, sb);

    return r == 0 ? render_allocations(d, sb) : r;
}

/* Ready when every served resource is registered (or registration is off). A node without a
 * GPU (or NVML) where --fail-on-init-error=false keeps the plugin waiting quietly: nothing to
 * serve is ready, so a DaemonSet rollout does not stall on such nodes. */
static bool serve_ready(const struct daemon *d, char *why, size_t n)
{
    const struct inv_inventory *inv = d->snap ? dp_snapshot_inventory(d->snap) : NULL;
    size_t registered = 0, served = 0;

    for (size_t i = 0; i < d->n_slots; i++) {
        served += d->slots[i].p != NULL;
        registered += d->slots[i].p && d->slots[i].registered;
    }
    if (served == 0 && (!inv || inv->n_gpus == 0))
        return true;
    if (served > 0 && (registered == served || !d->kubelet_socket))
        return true;
    if (served == 0)
        snprintf(why, n, "no resource served");
    else
        snprintf(why, n, "%zu of %zu resources registered with the kubelet", registered, served);
    return false;
}

static void serve_on_state(struct daemon *d, const struct daemon_change *c)
{
    if (c->old == d->snap) /* health changed in place: ListAndWatch sends it */
        push_all(d);
    else
        serve_diff(d, c);
}

static int serve_setup_watch(struct daemon *d, struct error *err)
{
    uint32_t in_mask = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM;

    d->ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    d->tfd = daemon__timer_new();
    if (d->ifd < 0 || d->tfd < 0)
        return error_set_errno(err, errno, "creating inotify/timerfd");
    if (!path_is_dir(d->o->plugin_dir)) {
        int r = path_mkdir_p(d->o->plugin_dir, 0750, err);
        if (r < 0)
            return r;
    }
    d->wd_plugin = inotify_add_watch(d->ifd, d->o->plugin_dir, in_mask);
    if (d->wd_plugin < 0)
        return error_set(err, -errno, "watching %s: %s (does the directory exist?)",
                         d->o->plugin_dir, strerror(errno));
    d->wd_kubelet = d->wd_plugin;
    if (d->kubelet_dir) {
        d->wd_kubelet = inotify_add_watch(d->ifd, d->kubelet_dir, in_mask);
        if (d->wd_kubelet < 0)
            return error_set_errno(err, errno, "watching %s", d->kubelet_dir);
    }
    return 0;
}

/* One API per node (docs/dra.md): a DRA plugin for gpu.nvidia.com registered here would hand
 * out the same GPUs; refuse to start while one is live. */
static int dra_plugin_live(const struct daemon *d, struct error *err)
{
    char path[4096];

    snprintf(path, sizeof(path), "%s/gpu.nvidia.com-reg.sock", d->o->dra.registrar_dir);
    if (!path_socket_live(path))
        return 0;
    return error_set(err, -EBUSY,
                     "a DRA kubelet plugin for gpu.nvidia.com is registered on this node (%s): "
                     "it and the device-plugin API would hand out the same GPUs; run one of the "
                     "two DaemonSets per node (docs/dra.md, the one-API rule)",
                     path);
}

static int serve_start(struct daemon *d, struct error *err)
{
    int r;

    r = dra_plugin_live(d, err);
    if (r < 0)
        return r;
    d->env.device_exists = env_device_exists;
    d->env.mig_cap_path = env_mig_cap_path;
    d->env.new_id = env_new_id;
    r = daemon_resolve_kubelet(d, err);

    if (r == 0)
        r = serve_setup_watch(d, err);
    if (r == 0)
        r = daemon_start_plugins(d, err);
    return r;
}

static void serve_stop(struct daemon *d)
{
    daemon_stop_plugins(d);
    free(d->alloc_kept);
    d->alloc_kept = NULL;
    d->n_alloc_kept = 0;
    free(d->kubelet_socket);
    d->kubelet_socket = NULL;
    free(d->kubelet_dir);
    d->kubelet_dir = NULL;
    if (d->ifd >= 0)
        close(d->ifd);
    d->ifd = -1;
    daemon__timer_close(&d->tfd);
}

static int serve_inotify_fd(const struct daemon *d)
{
    return d->ifd;
}

static int serve_timer_fd(const struct daemon *d)
{
    return d->tfd;
}

static const struct daemon_source serve_sources[] = {
    {serve_inotify_fd, daemon_on_inotify},
    {serve_timer_fd, daemon_on_timer},
};

const struct daemon_feature daemon__feature_serve = {
    .name = "device-plugin",
    .start = serve_start,
    .on_state = serve_on_state,
    .metrics = serve_metrics,
    .ready = serve_ready,
    .before_poll = daemon_arm_timer,
    .stop = serve_stop,
    .sources = serve_sources,
    .n_sources = GS_ARRAY_SIZE(serve_sources),
};

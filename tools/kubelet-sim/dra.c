/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim DRA side: the kubelet's plugin manager over plugins_registry (inotify wakes a
 * reconcile scan: every socket not starting with "." is asked GetInfo, validated as a
 * DRAPlugin, given v1 or v1beta1 and told NotifyRegistrationStatus; failures are retried,
 * removals deregister) and the dra-* commands (NodePrepareResources and
 * NodeUnprepareResources with the claims given, answers as text or JSON). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kubelet.h"

/* The kubelet's deadlines for the registration calls (facts §4.1). */
#define GET_INFO_TIMEOUT_MS 1000
#define NOTIFY_TIMEOUT_MS 5000
/* A failed registration is tried again after this (the kubelet's reconciler runs each 1 s). */
#define RETRY_MS 1000
/* The watcher rescans at least this often (retries), and at once on inotify events. */
#define SCAN_MS 200

static void plugin_release(struct sim_dra_plugin *p)
{
    free(p->reg_socket);
    free(p->driver);
    free(p->endpoint);
    free(p->error);
    memset(p, 0, sizeof(*p));
}

/* Under sim->lock. */
static struct sim_dra_plugin *plugin_find(struct sim *sim, const char *reg_socket)
{
    for (size_t i = 0; i < sim->dra.n_plugins; i++)
        if (str_eq(sim->dra.plugins[i].reg_socket, reg_socket))
            return &sim->dra.plugins[i];
    return NULL;
}

/* Under sim->lock: a free slot, reusing one of a removed socket when the table is full
 * (a rolling update names each instance's socket anew). NULL when every slot is live. */
static struct sim_dra_plugin *plugin_slot(struct sim *sim)
{
    if (sim->dra.n_plugins < SIM_MAX_DRA_PLUGINS)
        return &sim->dra.plugins[sim->dra.n_plugins];
    for (size_t i = 0; i < sim->dra.n_plugins; i++)
        if (sim->dra.plugins[i].is_removed)
            return &sim->dra.plugins[i];
    return NULL;
}

/* The outcome of one registration attempt, applied under the lock. */
struct attempt {
    const char *path;
    struct stat st;
    struct kdra_plugin_info info;
    enum kdra_api api;
    struct error err;
    bool ok;
};

/* GetInfo, the DRA handler's checks, then NotifyRegistrationStatus: no lock held. */
static void register_plugin(struct sim *sim, struct attempt *a)
{
    int r;

    r = kdra_client_get_info(a->path, GET_INFO_TIMEOUT_MS, &a->info, &a->err);
    if (r < 0) {
        error_prefix(&a->err, "failed to get plugin info using RPC GetInfo at socket %s", a->path);
        return; /* nobody to tell */
    }
    if (strcmp(a->info.type, KDRA_PLUGIN_TYPE) != 0)
        r = error_set(&a->err, -ENOTSUP, "no handler registered for plugin type: %s", a->info.type);
    else if (!a->info.name[0])
        r = error_set(&a->err, -EINVAL, "plugin name is empty");
    else
        r = kdra_pick_api(a->info.supported_versions, sim->dra.force_v1beta1, &a->api, &a->err);
    if (r < 0)
        error_prefix(&a->err, "RegisterPlugin error -- plugin validation failed with err");
    a->ok = r >= 0;
    r = kdra_client_notify(a->path, a->ok, a->ok ? "" : a->err.msg, NOTIFY_TIMEOUT_MS,
                           a->ok ? &a->err : NULL);
    if (r < 0 && a->ok) {
        error_prefix(&a->err, "RegisterPlugin error -- failed to send registration status");
        a->ok = false;
    }
}

/* Under sim->lock: records the attempt on the plugin's entry (added when new). */
static void apply_attempt(struct sim *sim, struct attempt *a)
{
    struct sim_dra_plugin *p = plugin_find(sim, a->path);

    if (!p) {
        p = plugin_slot(sim);
        if (!p)
            return;
        plugin_release(p);
        p->reg_socket = str_dup(a->path);
        if (!p->reg_socket)
            return;
        if (p == &sim->dra.plugins[sim->dra.n_plugins])
            sim->dra.n_plugins++;
    }
    p->dev = a->st.st_dev;
    p->ino = a->st.st_ino;
    p->is_removed = false;
    p->is_registered = a->ok;
    free(p->error);
    p->error = a->ok ? NULL : str_dup(a->err.msg);
    p->retry_ns = a->ok ? 0 : time_now_ns() + (uint64_t)RETRY_MS * 1000000u;
    if (a->info.name) {
        free(p->driver);
        free(p->endpoint);
        p->driver = str_dup(a->info.name);
        p->endpoint = str_dup(a->info.endpoint[0] ? a->info.endpoint : a->path);
        p->api = a->api;
    }
    if (a->ok)
        p->n_registrations++;
    log_debug("dra registration socket=%s driver=%s ok=%d error=%s", a->path,
              p->driver ? p->driver : "-", a->ok, a->ok ? "" : a->err.msg);
    pthread_cond_broadcast(&sim->cond);
}

/* Under sim->lock: whether the socket at path (stat st) needs a registration attempt. */
static bool wants_attempt(struct sim *sim, const char *path, const struct stat *st, uint64_t now)
{
    const struct sim_dra_plugin *p = plugin_find(sim, path);

    if (!p)
        return plugin_slot(sim) != NULL;
    if (p->dev != st->st_dev || p->ino != st->st_ino || p->is_removed)
        return true; /* a new socket at the same path: the plugin restarted */
    return !p->is_registered && now >= p->retry_ns;
}

static void try_socket(struct sim *sim, const char *path, const struct stat *st)
{
    struct attempt a = {.path = path, .st = *st};
    bool want;

    pthread_mutex_lock(&sim->lock);
    want = wants_attempt(sim, path, st, time_now_ns());
    pthread_mutex_unlock(&sim->lock);
    if (!want)
        return;
    register_plugin(sim, &a);
    pthread_mutex_lock(&sim->lock);
    apply_attempt(sim, &a);
    pthread_mutex_unlock(&sim->lock);
    kdra_plugin_info_release(&a.info);
}

/* Deregisters plugins whose socket file is gone or replaced by a non-socket. */
static void drop_missing(struct sim *sim)
{
    pthread_mutex_lock(&sim->lock);
    for (size_t i = 0; i < sim->dra.n_plugins; i++) {
        struct sim_dra_plugin *p = &sim->dra.plugins[i];
        struct stat st;
        if (p->is_removed)
            continue;
        if (lstat(p->reg_socket, &st) == 0 && S_ISSOCK(st.st_mode))
            continue;
        p->is_removed = true;
        p->is_registered = false;
        log_debug("dra deregistered socket=%s driver=%s", p->reg_socket,
                  p->driver ? p->driver : "-");
        pthread_cond_broadcast(&sim->cond);
    }
    pthread_mutex_unlock(&sim->lock);
}

/* One pass of the kubelet's reconciler: register what is new or failed, drop what left. */
static void reconcile(struct sim *sim)
{
    DIR *d = opendir(sim->dra.registry);
    struct dirent *de;

    drop_missing(sim);
    if (!d)
        return;
    for (de = readdir(d); de; de = readdir(d)) {
        struct strbuf path = STRBUF_INIT;
        struct stat st;
        if (de->d_name[0] == '.')
            continue; /* the kubelet ignores hidden files */
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode))
            continue;
        if (strbuf_printf(&path, "%s/%s", sim->dra.registry, de->d_name) >= 0)
            try_socket(sim, strbuf_str(&path), &st);
        strbuf_release(&path);
    }
    closedir(d);
}

static void *watch_main(void *arg)
{
    struct sim *sim = arg;
    char buf[4096];

    reconcile(sim); /* sockets already there are picked up at start, as the kubelet does */
    for (;;) {
        struct pollfd pfd[2] = {{sim->dra.stop_fd, POLLIN, 0}, {sim->dra.inotify_fd, POLLIN, 0}};
        if (poll(pfd, 2, SCAN_MS) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents)
            break;
        if (pfd[1].revents)
            while (read(sim->dra.inotify_fd, buf, sizeof(buf)) > 0)
                ; /* the events only wake us: the scan sees the directory as it is */
        reconcile(sim);
    }
    return NULL;
}

int sim__dra_start(struct sim *sim, const struct sim_opts *opts, struct error *err)
{
    struct sim_dra *d = &sim->dra;
    int r;

    d->stop_fd = -1;
    d->inotify_fd = -1;
    if (!opts->plugins_registry)
        return 0;
    d->force_v1beta1 = opts->dra_force_v1beta1;
    d->registry = str_dup(opts->plugins_registry);
    if (!d->registry)
        return error_set(err, -ENOMEM, "out of memory");
    r = path_mkdir_p(d->registry, 0750, err);
    if (r < 0)
        return r;
    d->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    d->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (d->stop_fd < 0 || d->inotify_fd < 0)
        return error_set_errno(err, errno, "watching plugins registry '%s'", d->registry);
    if (inotify_add_watch(d->inotify_fd, d->registry,
                          IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ATTRIB) < 0)
        return error_set_errno(err, errno, "watching plugins registry '%s'", d->registry);
    if (pthread_create(&d->thread, NULL, watch_main, sim) != 0)
        return error_set(err, -EAGAIN, "cannot start the plugins registry watcher");
    d->thread_started = true;
    return 0;
}

void sim__dra_stop(struct sim *sim)
{
    struct sim_dra *d = &sim->dra;
    uint64_t one = 1;

    if (!d->registry)
        return; /* never started: the fds were not set up */
    if (d->thread_started) {
        if (write(d->stop_fd, &one, sizeof(one)) < 0)
            log_debug("dra watcher stop: %s", strerror(errno));
        pthread_join(d->thread, NULL);
        d->thread_started = false;
    }
    if (d->stop_fd >= 0)
        close(d->stop_fd);
    if (d->inotify_fd >= 0)
        close(d->inotify_fd);
    d->stop_fd = d->inotify_fd = -1;
    for (size_t i = 0; i < d->n_plugins; i++)
        plugin_release(&d->plugins[i]);
    d->n_plugins = 0;
    free(d->registry);
    d->registry = NULL;
}

int sim__dra_restart(struct sim *sim, uint64_t deadline_ns, struct error *err)
{
    unsigned before[SIM_MAX_DRA_PLUGINS];
    bool want[SIM_MAX_DRA_PLUGINS];
    const char *late = NULL;
    size_t n;

    if (!sim->dra.registry)
        return 0;
    pthread_mutex_lock(&sim->lock);
    n = sim->dra.n_plugins;
    for (size_t i = 0; i < n; i++) {
        struct sim_dra_plugin *p = &sim->dra.plugins[i];
        want[i] = p->is_registered;
        before[i] = p->n_registrations;
        p->is_registered = false;
        p->dev = 0; /* "a new socket": the next scan registers it */
        p->ino = 0;
    }
    for (;;) {
        late = NULL;
        for (size_t i = 0; i < n && !late; i++)
            if (want[i] && sim->dra.plugins[i].n_registrations == before[i] &&
                !sim->dra.plugins[i].is_removed)
                late = sim->dra.plugins[i].reg_socket;
        if (!late || !sim__wait_until(sim, deadline_ns))
            break;
    }
    if (late)
        error_set(err, -ETIMEDOUT, "restart: DRA plugin %s did not register again in time", late);
    pthread_mutex_unlock(&sim->lock);
    return late ? -ETIMEDOUT : 0;
}

/* ---- commands ---- */

static json_t *strv_json(char *const *v)
{
    json_t *a = json_array();

    for (size_t i = 0; a && v && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *plugin_json(const struct sim_dra_plugin *p)
{
    return json_pack("{s:s, s:s?, s:s?, s:s, s:b, s:b, s:I, s:s?}", "socket", p->reg_socket,
                     "driver", p->driver, "endpoint", p->endpoint, "api", kdra_api_name(p->api),
                     "registered", p->is_registered, "removed", p->is_removed, "registrations",
                     (json_int_t)p->n_registrations, "error", p->error);
}

static void plugin_text(const struct sim_dra_plugin *p, struct strbuf *out)
{
    strbuf_printf(out, "%s %s api=%s endpoint=%s registrations=%u socket=%s%s%s\n",
                  p->driver ? p->driver : "-",
                  p->is_removed      ? "removed"
                  : p->is_registered ? "registered"
                                     : "failed",
                  kdra_api_name(p->api), p->endpoint ? p->endpoint : "-", p->n_registrations,
                  p->reg_socket, p->error ? " error=" : "", p->error ? p->error : "");
}

/* Under sim->lock: the registered plugin of a driver (the last one registered wins, as the
 * kubelet prefers the newest connected instance), or NULL. */
static const struct sim_dra_plugin *driver_find(const struct sim *sim, const char *driver)
{
    const struct sim_dra_plugin *best = NULL;

    for (size_t i = 0; i < sim->dra.n_plugins; i++) {
        const struct sim_dra_plugin *p = &sim->dra.plugins[i];
        if (p->is_registered && str_eq(p->driver, driver))
            best = p;
    }
    return best;
}

static int run_wait(struct sim *sim, const struct sim_cmd *c, bool json, struct strbuf *out,
                    struct error *err)
{
    int timeout_ms = c->timeout_ms >= 0 ? c->timeout_ms : 10000;
    uint64_t start = time_now_ns(), deadline = start + (uint64_t)timeout_ms * 1000000u;
    const struct sim_dra_plugin *p;
    int r = 0;

    pthread_mutex_lock(&sim->lock);
    for (p = driver_find(sim, c->name); !p; p = driver_find(sim, c->name))
        if (!sim__wait_until(sim, deadline))
            break;
    if (!p)
        r = error_set(
            err, -ETIMEDOUT, "timed out after %d ms waiting for DRA driver \"%s\" to register%s",
            timeout_ms, c->name, sim->dra.registry ? "" : " (no --plugins-registry given)");
    else if (json)
        sim__emit_json(json_pack("{s:b, s:s, s:s, s:s, s:s, s:I, s:I}", "ok", true, "cmd",
                                 "dra-wait", "driver", c->name, "api", kdra_api_name(p->api),
                                 "endpoint", p->endpoint, "registrations",
                                 (json_int_t)p->n_registrations, "waited_ms",
                                 (json_int_t)((time_now_ns() - start) / 1000000u)),
                       out);
    else
        strbuf_printf(out, "ok: DRA driver %s registered (%s, %s)\n", c->name,
                      kdra_api_name(p->api), p->endpoint);
    pthread_mutex_unlock(&sim->lock);
    return r;
}

static void run_drivers(struct sim *sim, bool json, struct strbuf *out)
{
    json_t *a = json ? json_array() : NULL;

    pthread_mutex_lock(&sim->lock);
    for (size_t i = 0; i < sim->dra.n_plugins; i++) {
        if (json)
            json_array_append_new(a, plugin_json(&sim->dra.plugins[i]));
        else
            plugin_text(&sim->dra.plugins[i], out);
    }
    if (!json && sim->dra.n_plugins == 0)
        strbuf_puts(out, "(no DRA plugins)\n");
    pthread_mutex_unlock(&sim->lock);
    if (json)
        sim__emit_json(json_pack("{s:b, s:s, s:o}", "ok", true, "cmd", "dra-drivers", "plugins", a),
                       out);
}

static json_t *result_json(const struct sim_claim *c, const struct kdra_result *res)
{
    json_t *devs = json_array();

    for (size_t j = 0; devs && j < res->n_devices; j++) {
        const struct kdra_device *d = &res->devices[j];
        json_array_append_new(devs,
                              json_pack("{s:o, s:s, s:s, s:o, s:s?}", "request_names",
                                        strv_json(d->request_names), "pool", d->pool_name, "device",
                                        d->device_name, "cdi_device_ids",
                                        strv_json(d->cdi_device_ids), "share_id", d->share_id));
    }
    return json_pack("{s:s, s:s, s:s, s:s?, s:o}", "namespace", c->namespace, "name", c->name,
                     "uid", c->uid, "error", res->error, "devices", devs);
}

static void result_text(const struct sim_claim *c, const struct kdra_result *res,
                        struct strbuf *out)
{
    strbuf_printf(out, "claim %s/%s (%s):", c->namespace, c->name, c->uid);
    if (res->error)
        strbuf_printf(out, " error: %s", res->error);
    else if (res->n_devices == 0)
        strbuf_puts(out, " ok");
    for (size_t j = 0; !res->error && j < res->n_devices; j++) {
        const struct kdra_device *d = &res->devices[j];
        strbuf_printf(out, "%s %s/%s", j ? "," : "", d->pool_name, d->device_name);
        if (d->share_id)
            strbuf_printf(out, " share=%s", d->share_id);
        for (size_t k = 0; d->cdi_device_ids && d->cdi_device_ids[k]; k++)
            strbuf_printf(out, " %s", d->cdi_device_ids[k]);
    }
    strbuf_putc(out, '\n');
}

static void call_answer(const struct sim_cmd *c, enum kdra_api api, const struct kdra_result *res,
                        uint64_t took_ms, bool json, struct strbuf *out)
{
    bool prepare = c->kind == SIM_CMD_DRA_PREPARE;
    json_t *a = json ? json_array() : NULL;

    for (size_t i = 0; i < c->n_claims; i++) {
        if (json)
            json_array_append_new(a, result_json(&c->claims[i], &res[i]));
        else
            result_text(&c->claims[i], &res[i], out);
    }
    if (json)
        sim__emit_json(json_pack("{s:b, s:s, s:s, s:s, s:o, s:I}", "ok", true, "cmd",
                                 prepare ? "dra-prepare" : "dra-unprepare", "driver", c->name,
                                 "api", kdra_api_name(api), "claims", a, "took_ms",
                                 (json_int_t)took_ms),
                       out);
}

static int run_call(struct sim *sim, const struct sim_cmd *c, bool json, struct strbuf *out,
                    struct error *err)
{
    bool prepare = c->kind == SIM_CMD_DRA_PREPARE;
    const char *what = prepare ? "NodePrepareResources" : "NodeUnprepareResources";
    struct kdra_claim claims[SIM_MAX_CLAIMS];
    struct kdra_result res[SIM_MAX_CLAIMS];
    const struct sim_dra_plugin *p;
    uint64_t start = time_now_ns();
    enum kdra_api api = KDRA_API_V1;
    char *endpoint = NULL;
    int r;

    memset(res, 0, sizeof(res));
    pthread_mutex_lock(&sim->lock);
    p = driver_find(sim, c->name);
    if (p) {
        endpoint = str_dup(p->endpoint);
        api = p->api;
    }
    pthread_mutex_unlock(&sim->lock);
    if (!p)
        return error_set(err, -ENOENT, "DRA driver \"%s\" is not registered; see \"dra-drivers\"",
                         c->name);
    if (!endpoint)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < c->n_claims; i++) {
        claims[i].namespace = c->claims[i].namespace;
        claims[i].name = c->claims[i].name;
        claims[i].uid = c->claims[i].uid;
    }
    r = kdra_client_call(endpoint, api, prepare, claims, c->n_claims, sim->rpc_timeout_ms, res,
                         NULL, err);
    if (r < 0)
        error_prefix(err, "%s (%s) failed", what, kdra_api_name(api));
    else
        call_answer(c, api, res, (time_now_ns() - start) / 1000000u, json, out);
    for (size_t i = 0; i < c->n_claims; i++)
        kdra_result_release(&res[i]);
    free(endpoint);
    return r;
}

int sim__dra_run(struct sim *sim, const struct sim_cmd *c, bool json, struct strbuf *out,
                 struct error *err)
{
    switch (c->kind) {
    case SIM_CMD_DRA_WAIT:
        return run_wait(sim, c, json, out, err);
    case SIM_CMD_DRA_DRIVERS:
        run_drivers(sim, json, out);
        return 0;
    default:
        return run_call(sim, c, json, out, err);
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* daemon.c: the device plugin's main loop. Loads config + inventory into a model snapshot,
 * serves one dp_plugin per resource, registers each with the kubelet (retrying with
 * backoff), and waits in poll(2) on a signalfd (SIGHUP reload, SIGTERM/SIGINT/SIGQUIT
 * stop), inotify (socket directory: kubelet restarts, deleted sockets; the config path), a
 * timerfd (registration retries), the health thread's pipe (XID events), reload.c's timers
 * and the node label watch (label.c). */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/internal.h"
#include "kubelet/kubelet.h"
#include "model/model.h"

/* Right after kubelet.sock is created the kubelet may not accept yet: retry quickly. */
#define DAEMON_FAST_RETRY_MS 50u
#define DAEMON_FAST_RETRIES 20u

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

void daemon__log_resource(const char *what, const struct model_resource *res,
                          const struct dp_plugin *p)
{
    log_info("%s resource=%s count=%zu sharing=%s replicas=%u endpoint=%s", what, res->name,
             res->n_devices, cfg_sharing_strategy_name(res->sharing), res->replicas,
             dp_plugin_endpoint(p));
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

void daemon__slot_register(struct daemon *d, struct daemon__slot *s, bool again)
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
        daemon__log_resource(again ? "re-registered" : "registered", res, s->p);
    dp_snapshot_unlock(d->snap);
    s->registered = true;
    s->kubelet_id = kubelet_id;
    s->backoff_ms = 0;
    s->retry_at_ms = 0;
    s->fast_retries = 0;
}

/* Creates and starts the plugin of slot s for `name`. */
int daemon__slot_start(struct daemon *d, struct daemon__slot *s, const char *name,
                       struct error *err)
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
        r = daemon__slot_start(d, &d->slots[i], m->resources[i].name, err);
        if (r < 0)
            return r;
        d->n_slots++;
        log_debug("serving resource=%s socket=%s", m->resources[i].name,
                  dp_plugin_socket_path(d->slots[i].p));
    }
    for (size_t i = 0; i < d->n_slots; i++)
        daemon__slot_register(d, &d->slots[i], false);
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
    if (daemon__slot_start(d, s, name, &err) < 0) {
        log_warn("restarting resource=%s: %s; retrying in %u ms", name, err.msg, s->backoff_ms);
        return;
    }
    log_info("resource=%s serving again", name);
    daemon__slot_register(d, s, true);
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
            daemon__slot_register(d, s, true);
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
        daemon__metrics_keep_counts(d, s->p); /* counters survive the kubelet's restart */
        dp_plugin_free(s->p); /* leaves the path alone: it is not our socket any more */
        s->p = NULL;
        /* the socket name is ours in the device-plugin directory: take it back (never a
         * directory) so the kubelet can reach us again */
        if (replaced && !S_ISDIR(st.st_mode) && unlink(path) < 0)
            log_warn("cannot remove '%s' that replaced our socket: %s", path, strerror(errno));
        free(path);
        if (!name || daemon__slot_start(d, s, name, &err) < 0) {
            log_error("restarting resource=%s: %s; retrying in %u ms", name ? name : "?", err.msg,
                      s->backoff_ms);
        } else if (register_now) {
            daemon__slot_register(d, s, true);
        }
        free(name);
    }
}

/* One inotify event: config events handled, the kubelet's socket created or one of ours
 * removed or replaced noted. */
static void on_inotify_event(struct daemon *d, const struct inotify_event *ev,
                             bool *kubelet_created, bool *deleted)
{
    bool is_kubelet = d->kubelet_name && ev->len > 0 && strcmp(ev->name, d->kubelet_name) == 0;

    if (ev->wd == d->wd_config && ev->wd != d->wd_plugin && ev->wd != d->wd_kubelet) {
        daemon__on_config_event(d, ev);
        return;
    }
    if (ev->wd == d->wd_config)
        daemon__on_config_event(d, ev);
    if (ev->wd == d->wd_config_parent && d->wd_config_parent >= 0)
        daemon__on_config_parent_event(d, ev);
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
        daemon__slot_register(d, &d->slots[i], true);
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

void daemon__push_all(struct daemon *d)
{
    for (size_t i = 0; i < d->n_slots; i++)
        if (d->slots[i].p)
            dp_plugin_push(d->slots[i].p);
}

/* One XID on one device: marked Unhealthy when the policy calls it critical. Returns the
 * devices changed (0 when ignored). */
static int on_xid(struct daemon *d, const struct daemon__health_msg *msg)
{
    int changed;

    if (!daemon_xid_is_critical(&d->xid, msg->xid)) {
        log_info("health: ignoring xid=%llu gpu=%s (not critical by policy)", msg->xid, msg->uuid);
        return 0;
    }
    daemon__remember_unhealthy(d, msg);
    changed = dp_snapshot_set_health(d->snap, msg->uuid, msg->gi_id, msg->ci_id, false);
    if (changed == -ENOENT) {
        log_info("health: xid=%llu for unknown device %s, ignoring", msg->xid, msg->uuid);
        return 0;
    }
    if (msg->gi_id != INV_ID_NONE)
        log_warn("health: xid=%llu gpu=%s gi=%u ci=%u: devices=%d marked Unhealthy", msg->xid,
                 msg->uuid, msg->gi_id, msg->ci_id, changed);
    else
        log_warn("health: xid=%llu gpu=%s: devices=%d marked Unhealthy", msg->xid, msg->uuid,
                 changed);
    return changed;
}

/* An XID event from the health thread, or a lost GPU back after a reset. */
static void daemon_on_health(struct daemon *d)
{
    struct daemon__health_msg msg;
    bool reset = false;
    int changed;

    while (daemon__health_read(d->health, &msg) > 0) {
        if (msg.back) {
            reset |= daemon__recovery_gpu_back(d, msg.uuid);
            continue;
        }
        if (msg.all_devices) {
            daemon__remember_unhealthy(d, &msg);
            changed = dp_snapshot_set_all_health(d->snap, false);
            log_error("health: %s, marking every device unhealthy (devices=%d)", msg.text, changed);
        } else {
            changed = on_xid(d, &msg);
        }
        if (changed > 0)
            daemon__push_all(d);
    }
    if (reset) {
        /* a reset GPU is read again (its MIG layout, memory, ...), and its XID events are
         * registered again with a fresh health thread */
        daemon__apply(d, DAEMON_RELOAD_INVENTORY, "GPU back after a reset");
        daemon__health_stop(d->health);
        d->health = daemon__health_start(d->o, &d->xid, d->snap);
        daemon__recovery_watch(d);
    }
}

/* ---- setup and loop ---------------------------------------------------------------------- */

static int daemon_setup_fds(struct daemon *d, sigset_t *mask, struct error *err)
{
    uint32_t in_mask = IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM;

    sigemptyset(mask);
    sigaddset(mask, SIGHUP);
    sigaddset(mask, SIGTERM);
    sigaddset(mask, SIGINT);
    sigaddset(mask, SIGQUIT);
    if (pthread_sigmask(SIG_BLOCK, mask, NULL) != 0)
        return error_set_errno(err, errno, "blocking signals");
    d->sfd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
    d->ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    d->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (d->sfd < 0 || d->ifd < 0 || d->tfd < 0)
        return error_set_errno(err, errno, "creating signalfd/inotify/timerfd");
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

/* Returns 1 to stop. */
static int daemon_on_signal(struct daemon *d)
{
    struct signalfd_siginfo si;

    while (read(d->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGHUP) {
            log_info("SIGHUP: reloading config and inventory");
            daemon__apply(d, DAEMON_RELOAD_CONFIG | DAEMON_RELOAD_INVENTORY, "SIGHUP");
        } else {
            log_info("signal %s: stopping, removing sockets", strsignal((int)si.ssi_signo));
            return 1;
        }
    }
    return 0;
}

/* One entry of the loop's handler table. */
struct loop_fd {
    int fd;
    void (*on_ready)(struct daemon *d);
};

/* Everything up to serving: policies, fds, config, inventory, the first snapshot, CDI,
 * MPS, the plugins registered, then the features around them. */
static int daemon_start(struct daemon *d, struct error *err)
{
    char **warnings = NULL;
    sigset_t mask;
    int r;

    r = daemon_xid_policy_init(&d->xid, d->o->disable_healthchecks, d->o->enable_healthchecks,
                               &warnings, err);
    for (size_t i = 0; r == 0 && warnings[i]; i++)
        log_warn("%s", warnings[i]);
    strv_free(warnings);
    if (r == 0)
        r = daemon_resolve_kubelet(d, err);
    /* Signals first: a SIGTERM during startup must still stop us cleanly. */
    if (r == 0)
        r = daemon_setup_fds(d, &mask, err);
    if (r < 0)
        return r;
    daemon__kube_start(d);
    r = daemon__holders_start(d, err);
    if (r == 0)
        r = daemon__load_initial(d, err);
    if (r == 0)
        r = daemon__reload_setup(d, err);
    if (r == 0)
        r = daemon__recovery_setup(d, err);
    if (r == 0)
        r = daemon__cdi_update(d, d->snap, d->cfg, true, err);
    /* MPS resources are served once their control daemons run */
    if (r == 0)
        r = daemon__mps_update(d, d->snap, err);
    if (r == 0)
        r = daemon__mps_wait_external(d, d->sfd, err);
    if (r == 0)
        r = daemon_start_plugins(d, err);
    if (r < 0)
        return r;
    if (daemon__mps_any_down(d)) /* a control daemon did not start: its devices Unhealthy */
        daemon__apply(d, 0, "MPS control daemon");
    d->health = daemon__health_start(d->o, &d->xid, d->snap);
    daemon__recovery_watch(d);
    daemon__labels_start(d);
    daemon__labels_update(d);
    daemon__metrics_start(d);
    return daemon__mig_start(d, err);
}

/* Serves until SIGTERM/SIGINT (0) or a failed poll. */
static int daemon_loop(struct daemon *d, struct error *err)
{
    for (;;) {
        /* The handler table: every fd the loop waits on and what handles it, in the order
         * they are served (health before config work; -1 fds are ignored by poll). */
        const struct loop_fd fds[] = {
            {d->sfd, NULL}, /* signals: handled first, may end the loop */
            {daemon__health_fd(d->health), daemon_on_health},
            {d->ifd, daemon_on_inotify},
            {d->tfd, daemon_on_timer},
            {daemon__kube_fd(d->kube), daemon__kube_on_event},
            {d->debounce_fd, daemon__on_debounce},
            {d->inventory_fd, daemon__on_inventory_timer},
            {d->retire_fd, daemon__on_retire_timer},
            {daemon__metrics_fd(d), daemon__metrics_on_ping},
            {d->recovery_fd, daemon__on_recovery_timer},
            {daemon__mig_watch_fd(d), daemon__mig_on_label},
            {daemon__mig_timer_fd(d), daemon__mig_on_timer},
            {daemon__mig_done_fd(d), daemon__mig_on_done},
            {daemon__mps_fd(d), daemon__mps_on_event},
            {d->cdi_retry_fd, daemon__cdi_on_retry},
            {daemon__holders_fd(d), daemon__on_holders},
        };
        struct pollfd pfd[GS_ARRAY_SIZE(fds)];

        for (size_t i = 0; i < GS_ARRAY_SIZE(fds); i++)
            pfd[i] = (struct pollfd){.fd = fds[i].fd, .events = POLLIN};
        daemon_arm_timer(d);
        if (poll(pfd, GS_ARRAY_SIZE(pfd), -1) < 0) {
            if (errno == EINTR)
                continue;
            return error_set_errno(err, errno, "poll");
        }
        if ((pfd[0].revents & POLLIN) && daemon_on_signal(d))
            return 0;
        for (size_t i = 1; i < GS_ARRAY_SIZE(fds); i++)
            if (pfd[i].revents & POLLIN)
                fds[i].on_ready(d);
    }
}

static void daemon_teardown(struct daemon *d)
{
    daemon__mig_stop(d);
    daemon__mps_stop(d);
    daemon__recovery_release(d);
    daemon__cdi_release(d);
    daemon__holders_stop(d);
    daemon__metrics_stop(d);
    daemon__labels_stop(d);
    daemon__health_stop(d->health);
    daemon_stop_plugins(d);
    daemon__kube_stop(d);
    daemon__reload_release(d);
    dp_snapshot_unref(d->snap);
    free(d->cdi_json);
    free(d->kubelet_socket);
    free(d->kubelet_dir);
    if (d->sfd >= 0)
        close(d->sfd);
    if (d->ifd >= 0)
        close(d->ifd);
    if (d->tfd >= 0)
        close(d->tfd);
}

int daemon_run(const struct daemon_options *o, struct error *err)
{
    struct daemon d = {.o = o,
                       .sfd = -1,
                       .ifd = -1,
                       .tfd = -1,
                       .wd_plugin = -1,
                       .wd_kubelet = -1,
                       .wd_config = -1,
                       .wd_config_parent = -1,
                       .debounce_fd = -1,
                       .inventory_fd = -1,
                       .retire_fd = -1,
                       .recovery_fd = -1,
                       .cdi_retry_fd = -1};
    int r;

    /* A log reader (or any peer) going away must not kill the daemon and leave its sockets
     * behind: writes to a closed pipe fail with EPIPE instead. */
    signal(SIGPIPE, SIG_IGN);
    /* Memory a large request took goes back to the system: big blocks are mmap'd (freed
     * at once), the heap is trimmed past 128 KiB free, and gRPC's threads share two arenas
     * instead of one each (RSS stayed at 16-42 MiB after one 50,000-ID request). */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    mallopt(M_ARENA_MAX, 2);
    d.env.device_exists = env_device_exists;
    d.env.mig_cap_path = env_mig_cap_path;
    d.env.new_id = env_new_id;
    r = daemon_start(&d, err);
    if (r == 0)
        r = daemon_loop(&d, err);
    daemon_teardown(&d);
    return r;
}

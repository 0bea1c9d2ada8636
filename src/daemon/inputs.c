/* SPDX-License-Identifier: Apache-2.0 */
/* inputs.c: what makes a new node state, registered with the loop like a feature: the config
 * path (a file, or a ConfigMap directory with kubelet's atomic `..data` swap) watched with
 * inotify and a short debounce, the inventory re-read every --inventory-interval (not in
 * dra-plugin unless INVENTORY_INTERVAL asks: daemon_inventory_interval_ms), the retire
 * check every --retire-check-interval, the holders' answers and the node label. Each calls
 * the core (reload.c), which hands the state it builds to every unit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "daemon/internal.h"

/* ---- watching the config path ------------------------------------------------------------ */

#define CONFIG_WATCH_MASK                                                                          \
    (IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_ATTRIB |            \
     IN_DELETE_SELF | IN_MOVE_SELF)

static int inputs_start(struct daemon *d, struct error *err)
{
    const uint32_t mask = CONFIG_WATCH_MASK;
    const char *path = d->o->config_file;
    char *dir = NULL;

    d->config_ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    d->debounce_fd = daemon__timer_new();
    d->inventory_fd = daemon__timer_new();
    d->retire_fd = daemon__timer_new();
    if (d->config_ifd < 0 || d->debounce_fd < 0 || d->inventory_fd < 0 || d->retire_fd < 0)
        return error_set_errno(err, errno, "creating the config watch and timerfds");
    if (daemon_inventory_interval_ms(d->o) > 0)
        daemon__timer_set(d->inventory_fd, daemon_inventory_interval_ms(d->o), true);
    if (d->n_retiring) /* devices kept for pods at start: checked like retiring ones */
        daemon__timer_set(d->retire_fd, d->o->retire_check_ms, true);
    if (!path)
        return 0;
    if (d->config_is_dir) {
        dir = str_dup(path);
    } else {
        const char *slash = strrchr(path, '/');
        dir = slash ? strndup(path, (size_t)(slash - path)) : str_dup(".");
        d->config_base = str_dup(slash ? slash + 1 : path);
        if (dir && !*dir) {
            free(dir);
            dir = str_dup("/");
        }
        if (!d->config_base) {
            free(dir);
            return error_set(err, -ENOMEM, "out of memory");
        }
    }
    if (!dir)
        return error_set(err, -ENOMEM, "out of memory");
    d->wd_config = inotify_add_watch(d->config_ifd, dir, mask);
    if (d->wd_config < 0)
        log_warn("cannot watch %s (%s): config changes need SIGHUP", dir, strerror(errno));
    else
        log_info("watching %s for config changes", dir);
    d->config_dir = dir;
    return 0;
}

/* The config directory went away (a ConfigMap volume remounted, a directory replaced):
 * watch its parent until a directory of that name is back, then watch it again. */
static void watch_parent(struct daemon *d)
{
    char *parent;
    const char *slash = strrchr(d->config_dir, '/');

    if (d->wd_config_parent >= 0)
        return;
    parent = slash && slash != d->config_dir
                 ? strndup(d->config_dir, (size_t)(slash - d->config_dir))
                 : str_dup(slash ? "/" : ".");
    if (parent)
        d->wd_config_parent =
            inotify_add_watch(d->config_ifd, parent, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
    if (d->wd_config_parent < 0)
        log_warn("the config directory %s went away and its parent cannot be watched: config "
                 "changes need SIGHUP from now on",
                 d->config_dir);
    else
        log_warn("the config directory %s went away: watching %s for it to come back, keeping "
                 "the last good config",
                 d->config_dir, parent);
    free(parent);
}

static void on_config_parent_event(struct daemon *d, const struct inotify_event *ev)
{
    const char *slash = strrchr(d->config_dir, '/');
    const char *base = slash ? slash + 1 : d->config_dir;

    if (ev->len == 0 || strcmp(ev->name, base) != 0 || !path_is_dir(d->config_dir))
        return;
    d->wd_config = inotify_add_watch(d->config_ifd, d->config_dir, CONFIG_WATCH_MASK);
    if (d->wd_config < 0)
        return; /* not there after all: keep waiting on the parent */
    inotify_rm_watch(d->config_ifd, d->wd_config_parent);
    d->wd_config_parent = -1;
    log_info("the config directory %s is back: watching it again", d->config_dir);
    if (!daemon__timer_armed(d->debounce_fd))
        daemon__timer_set(d->debounce_fd, DAEMON_CONFIG_DEBOUNCE_MS, false);
}

static void inputs_stop(struct daemon *d)
{
    daemon__timer_close(&d->debounce_fd);
    daemon__timer_close(&d->inventory_fd);
    daemon__timer_close(&d->retire_fd);
    daemon__timer_close(&d->config_ifd); /* closes any fd */
    free(d->config_base);
    d->config_base = NULL;
    free(d->config_dir);
    d->config_dir = NULL;
}

static void on_config_event(struct daemon *d, const struct inotify_event *ev)
{
    if (d->debounce_fd < 0)
        return;
    if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
        if (ev->mask & IN_MOVE_SELF) /* moved away: the watch follows it, drop it */
            inotify_rm_watch(d->config_ifd, d->wd_config);
        d->wd_config = -1;
        if (d->config_dir)
            watch_parent(d);
        return;
    }
    /* a file: its own name, or kubelet's ..data swap when it is a ConfigMap key mount */
    if (d->config_base && (ev->len == 0 || (strcmp(ev->name, d->config_base) != 0 &&
                                            strcmp(ev->name, "..data") != 0)))
        return;
    log_debug("config event mask=0x%x name=%s", ev->mask, ev->len ? ev->name : "");
    if (!daemon__timer_armed(d->debounce_fd))
        daemon__timer_set(d->debounce_fd, DAEMON_CONFIG_DEBOUNCE_MS, false);
}

static void on_debounce(struct daemon *d)
{
    daemon__timer_drain(d->debounce_fd);
    log_info("config %s changed, reloading", d->o->config_file);
    daemon__apply(d, DAEMON_RELOAD_CONFIG, "config change");
}

static void on_inventory_timer(struct daemon *d)
{
    daemon__timer_drain(d->inventory_fd);
    daemon__apply(d, DAEMON_RELOAD_INVENTORY, "inventory interval");
}

/* The check asks who holds what, off the loop; on_holders decides with the answer. */
static void on_retire_timer(struct daemon *d)
{
    daemon__timer_drain(d->retire_fd);
    d->retire_waiting = true;
    daemon__holders_request(d);
}

static void on_holders(struct daemon *d)
{
    if (!daemon__holders_take(d))
        return;
    if (d->apply_waiting || d->retire_waiting) {
        unsigned what = d->apply_waiting_what;
        char why[sizeof(d->apply_waiting_why)];
        str_copy(why, d->apply_waiting ? d->apply_waiting_why : "retire check", sizeof(why));
        d->apply_waiting = d->retire_waiting = false;
        d->apply_waiting_what = 0;
        daemon__apply(d, what, why);
    }
    daemon__units_on_holders(d); /* e.g. a MIG change waiting for its GPUs to be free */
    daemon__holders_done(d);
}

static void on_config_inotify(struct daemon *d)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;

    while ((n = read(d->config_ifd, buf, sizeof(buf))) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof(*ev) + ev->len;
            if (ev->wd == d->wd_config)
                on_config_event(d, ev);
            if (ev->wd == d->wd_config_parent && d->wd_config_parent >= 0)
                on_config_parent_event(d, ev);
        }
    }
}

/* The node label's watch fired: a new value re-selects the config. */
static void on_label(struct daemon *d)
{
    if (daemon__kube_take_label(d))
        daemon__apply(d, DAEMON_RELOAD_CONFIG, "node label");
}

static int config_ifd(const struct daemon *d)
{
    return d->config_ifd;
}

static int label_fd(const struct daemon *d)
{
    return daemon__kube_fd(d->kube);
}

static int debounce_fd(const struct daemon *d)
{
    return d->debounce_fd;
}

static int inventory_fd(const struct daemon *d)
{
    return d->inventory_fd;
}

static int retire_fd(const struct daemon *d)
{
    return d->retire_fd;
}

static int holders_fd(const struct daemon *d)
{
    return daemon__holders_fd(d);
}

static const struct daemon_source inputs_sources[] = {
    {config_ifd, on_config_inotify},    {label_fd, on_label},         {debounce_fd, on_debounce},
    {inventory_fd, on_inventory_timer}, {retire_fd, on_retire_timer}, {holders_fd, on_holders},
};

const struct daemon_feature daemon__inputs = {
    .name = "inputs",
    .start = inputs_start,
    .stop = inputs_stop,
    .sources = inputs_sources,
    .n_sources = GS_ARRAY_SIZE(inputs_sources),
};

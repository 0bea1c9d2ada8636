/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_config_manager.c: `gpuslice config-manager` (argv[0] `config-manager`), NVIDIA's
 * init container / sidecar: reads the node label through kube/, points CONFIG_FILE_DST at
 * the chosen config (configmgr/), signals the plugin on a change, and with no --oneshot
 * watches the label until SIGTERM. A label naming no config keeps the current one, logs it
 * and records a Warning Event on the node; NVIDIA's would exit. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/cli.h"
#include "configmgr/configmgr.h"
#include "kube/kube.h"

struct manager {
    const struct cfgmgr_options *o;
    struct kube_client *client;
    char *reported; /* the unknown label value last reported (one Event per value) */
};

static const char *env_get(const char *name)
{
    return getenv(name);
}

static void post_event(struct manager *m, const char *reason, const char *message)
{
    struct error err = {0};

    if (kube_event_post(m->client, NULL, "Warning", reason, message, &err) < 0)
        log_warn("posting Event %s on node %s: %s, ignoring", reason, m->o->node_name, err.msg);
}

static void signal_process(struct manager *m)
{
    struct error err = {0};
    pid_t pid;

    if (cfgmgr_find_process(m->o->proc_root, m->o->process, &pid, &err) < 0) {
        log_warn("%s; the device plugin still sees the new file when it watches it", err.msg);
        return;
    }
    if (kill(pid, m->o->signal) < 0)
        log_warn("sending signal %d to pid %ld (%s): %s", m->o->signal, (long)pid, m->o->process,
                 strerror(errno));
    else
        log_info("sent signal %d to pid %ld (%s)", m->o->signal, (long)pid, m->o->process);
}

/* Points dst at the config for `value` (NULL: label absent). Returns 0 or the error that
 * left no usable config (then err says why). */
static int apply(struct manager *m, const char *value, struct error *err)
{
    const struct cfgmgr_options *o = m->o;
    char *target = NULL;
    bool changed = false;
    int r;

    r = cfgmgr_choose(o, value, &target, err);
    if (r == -ENOENT && value) {
        char cur[8];
        bool have_current = readlink(o->dst, cur, sizeof(cur)) >= 0;

        if (!str_eq(m->reported, value)) { /* a reconnect re-reads it: say it once */
            log_error("node label %s=%s: %s; %s", o->node_label, value, err->msg,
                      have_current ? "keeping the current config"
                                   : "no current config, using the default config instead");
            post_event(m, "ConfigNotFound", err->msg);
            free(m->reported);
            m->reported = str_dup(value);
        }
        if (have_current)
            return 0;
        *err = (struct error){0};
        r = cfgmgr_choose(o, NULL, &target, err);
    }
    if (r < 0)
        goto out;
    r = cfgmgr_link_update(o->dst, target, &changed, err);
    if (r < 0)
        goto out;
    if (!str_eq(m->reported, value)) { /* a good choice: a bad value later is news again */
        free(m->reported);
        m->reported = NULL;
    }
    if (!changed) {
        log_info("node label %s=%s: %s already points at %s", o->node_label,
                 value ? value : "(none)", o->dst, target);
        goto out;
    }
    log_info("node label %s=%s: %s -> %s", o->node_label, value ? value : "(none)", o->dst, target);
    if (o->send_signal)
        signal_process(m);
out:
    free(target);
    return r;
}

static int run_oneshot(struct manager *m)
{
    struct error err = {0};
    char *value = NULL;
    int r;

    r = kube_node_get_label(m->client, NULL, m->o->node_label, &value, &err);
    if (r < 0) {
        log_error("reading node %s label %s: %s", m->o->node_name, m->o->node_label, err.msg);
        return CLI_EXIT_FAILURE;
    }
    r = apply(m, value, &err);
    free(value);
    if (r < 0) {
        log_error("choosing a config: %s", err.msg);
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

/* One wake-up of the watch: reachability changes are logged, a known value applied. */
static void on_watch(struct manager *m, struct kube_node_watch *w, bool *reachable)
{
    struct kube_watch_stats st;
    struct error err = {0};
    char *value = NULL;
    bool known = false;
    uint64_t ticks;

    (void)!read(kube_node_watch_fd(w), &ticks, sizeof(ticks));
    kube_node_watch_stats(w, &st, &err);
    if (st.reachable != *reachable) {
        *reachable = st.reachable;
        if (st.reachable)
            log_info("Kubernetes API reachable");
        else
            log_warn("Kubernetes API unreachable (%s): keeping the current config, retrying",
                     err.msg);
    }
    err = (struct error){0};
    if (kube_node_watch_value(w, &value, &known, &err) < 0 || !known) {
        free(value);
        return;
    }
    if (apply(m, value, &err) < 0)
        log_error("choosing a config for %s=%s: %s; keeping the current config", m->o->node_label,
                  value ? value : "(none)", err.msg);
    free(value);
}

static int run_watch(struct manager *m)
{
    struct kube_node_watch *w = NULL;
    struct error err = {0};
    bool reachable = false;
    sigset_t mask;
    int sfd = -1, rc = CLI_EXIT_FAILURE;

    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGQUIT);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
        (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        log_error("signalfd: %s", strerror(errno));
        return CLI_EXIT_FAILURE;
    }
    if (kube_node_watch_start(m->client, NULL, m->o->node_label, NULL, &w, &err) < 0) {
        log_error("watching node %s label %s: %s", m->o->node_name, m->o->node_label, err.msg);
        goto out;
    }
    log_info("watching node %s label %s", m->o->node_name, m->o->node_label);
    for (;;) {
        struct pollfd p[2] = {{.fd = sfd, .events = POLLIN},
                              {.fd = kube_node_watch_fd(w), .events = POLLIN}};

        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            log_error("poll: %s", strerror(errno));
            goto out;
        }
        if (p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            (void)!read(sfd, &si, sizeof(si));
            log_info("signal %u: exiting", si.ssi_signo);
            rc = CLI_EXIT_OK;
            goto out;
        }
        if (p[1].revents & POLLIN)
            on_watch(m, w, &reachable);
    }
out:
    kube_node_watch_stop(w);
    close(sfd);
    return rc;
}

int cmd_config_manager(int argc, char **argv)
{
    struct cfgmgr_options o;
    struct manager m = {.o = &o};
    struct error err = {0};
    enum log_level level;
    int rc;

    if (cfgmgr_options_parse(&o, argc, argv, env_get, &err) < 0)
        return cli_usage_error("config-manager", "%s", err.msg);
    if (o.help) {
        fputs(cfgmgr_usage(), stdout);
        return CLI_EXIT_OK;
    }
    cli_setup_logging();
    if (o.log_level) {
        if (log_level_parse(o.log_level, &level) < 0)
            return cli_usage_error("config-manager",
                                   "--log-level '%s' is not error, warn, "
                                   "info or debug",
                                   o.log_level);
        log_setup(level, LOG_FORMAT_KLOG, 2);
    }
    struct kube_options ko = {
        .kubeconfig = o.kubeconfig,
        .node_name = o.node_name,
        .api_server = o.api_server,
    };
    if (kube_client_new(&ko, &m.client, &err) < 0) {
        log_error("no Kubernetes API: %s", err.msg);
        return CLI_EXIT_FAILURE;
    }
    log_info("config-manager: node %s, label %s, configs in %s, link %s%s", o.node_name,
             o.node_label, o.srcdir, o.dst, o.oneshot ? ", one-shot" : "");
    rc = o.oneshot ? run_oneshot(&m) : run_watch(&m);
    kube_client_free(m.client);
    free(m.reported);
    return rc;
}

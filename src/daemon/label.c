/* SPDX-License-Identifier: Apache-2.0 */
/* label.c: the node label that names the config (nvidia.com/device-plugin.config, or
 * --node-label), read and watched through kube/ when a client can be made and NODE_NAME is
 * set, and Kubernetes Events for reload failures. The API being unreachable never stops
 * serving: the current config stays and the watcher retries by itself. Built without
 * src/kube/ (GS_HAVE_KUBE unset), the daemon runs without the label. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/internal.h"

#ifdef GS_HAVE_KUBE
#include "kube/kube.h"

struct daemon__kube {
    struct kube_client *client;
    struct kube_node_watch *watch;
    bool reachable;
};

void daemon__kube_start(struct daemon *d)
{
    struct kube_options ko = {
        .kubeconfig = d->o->kubeconfig,
        .node_name = d->o->node_name,
        .api_server = d->o->kube_api_server,
        .request_timeout_ms = 2000, /* Events and the first read block the main loop */
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
    d->kube = k;
    if (d->o->config_name) {
        log_info("--config-name %s wins over the node label %s", d->o->config_name,
                 d->o->node_label);
        return;
    }
    r = kube_node_get_label(k->client, NULL, d->o->node_label, &d->label_value, &err);
    k->reachable = r == 0;
    if (r < 0)
        log_warn("reading node label %s: %s; starting without it, the watch retries",
                 d->o->node_label, err.msg);
    else
        log_info("node %s label %s=%s", d->o->node_name, d->o->node_label,
                 d->label_value ? d->label_value : "(none)");
    r = kube_node_watch_start(k->client, NULL, d->o->node_label, NULL, &k->watch, &err);
    if (r < 0)
        log_warn("watching node label %s: %s; label changes need a restart", d->o->node_label,
                 err.msg);
}

void daemon__kube_stop(struct daemon *d)
{
    if (!d->kube)
        return;
    kube_node_watch_stop(d->kube->watch);
    kube_client_free(d->kube->client);
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

void daemon__kube_event(struct daemon *d, const char *reason, const char *message)
{
    struct error err = {0};

    if (!d->kube)
        return;
    if (kube_event_post(d->kube->client, NULL, "Warning", reason, message, &err) < 0)
        log_debug("posting Event %s: %s", reason, err.msg);
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

#endif

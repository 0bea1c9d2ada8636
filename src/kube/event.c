/* SPDX-License-Identifier: Apache-2.0 */
/* event.c: core/v1 Events about the node (a config the label names is missing, a reload
 * failed) or about any other object (a pod whose prepared DRA claim lost its GPU), shaped as
 * client-go's recorder writes them so `kubectl describe` shows them. Returns errors only;
 * the caller decides to carry on and logs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "kube/internal.h"

#define KUBE_EVENT_MESSAGE_MAX_BYTES 1024

static void rfc3339_now(char *buf, size_t size, struct timespec *ret_now)
{
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, ret_now);
    gmtime_r(&ret_now->tv_sec, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
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

static json_t *event_json(struct kube_client *c, const struct kube_event *ev, const char *ns)
{
    const char *host = c->node_name ? c->node_name : ev->about.name;
    char ts[32], name[300];
    struct timespec now;
    json_t *obj, *involved;
    char *msg = truncate_utf8(ev->message ? ev->message : "", KUBE_EVENT_MESSAGE_MAX_BYTES);

    if (!msg)
        return NULL;
    rfc3339_now(ts, sizeof(ts), &now);
    /* client-go's recorder names events <object>.<unix nanoseconds in hex>. */
    snprintf(name, sizeof(name), "%s.%llx", ev->about.name,
             (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec);
    involved = involved_json(c, &ev->about);
    obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o*, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, "
                    "s:i, s:s, s:s}",
                    "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace", ns,
                    "involvedObject", involved, "reason", ev->reason, "message", msg, "type",
                    ev->type, "source", "component", "gpuslice", "host", host, "firstTimestamp", ts,
                    "lastTimestamp", ts, "count", 1, "reportingComponent", "gpuslice",
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

int kube_event_post_about(struct kube_client *c, const struct kube_event *ev, struct error *err)
{
    struct strbuf response = STRBUF_INIT;
    struct kube__request rq = {.method = "POST", .timeout_ms = c->request_timeout_ms};
    const char *ns;
    char *url = NULL, *body = NULL;
    json_t *obj = NULL;
    long status;
    int r;

    r = check_event(ev, err);
    if (r < 0)
        return r;
    /* An Event lives in its object's namespace; about a cluster-scoped object, in "default"
     * (the API server refuses it anywhere else: legacyValidateEvent). */
    ns = ev->about.namespace && *ev->about.namespace ? ev->about.namespace : c->event_namespace;
    response.max_len = KUBE__BODY_MAX_BYTES;
    obj = event_json(c, ev, ns);
    body = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    r = body ? kube__url_events(c->auth.server, ns, &url) : -ENOMEM;
    if (r < 0) {
        r = error_set(err, r, "out of memory");
        goto out;
    }
    rq.url = url;
    rq.body = body;
    r = kube__perform(c, &rq, &response, &status, err);
out:
    strbuf_release(&response);
    json_decref(obj);
    free(body);
    free(url);
    return r;
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

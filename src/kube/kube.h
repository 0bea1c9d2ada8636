/* SPDX-License-Identifier: Apache-2.0 */
/* kube.h: the Kubernetes API client (libcurl + jansson) — authentication (in-cluster service
 * account or kubeconfig), reading one node label, watching it (list + watch with
 * resourceVersion, reconnect with backoff, re-list on 410 Gone) and recording Events on the
 * node. The daemon uses it to pick the config named by the node label. Library code: never
 * logs above debug, never logs secrets; callers log the errors returned. */
#ifndef GS_KUBE_H
#define GS_KUBE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

/* Where a pod finds its service account (token, ca.crt, namespace). */
#define KUBE_SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/* The label NVIDIA's config-manager reads (NODE_LABEL there). */
#define KUBE_DEFAULT_CONFIG_LABEL "nvidia.com/device-plugin.config"
#define KUBE_DEFAULT_REQUEST_TIMEOUT_MS 10000
/* One watch event (one JSON line) larger than this ends the connection (re-listed). */
#define KUBE_WATCH_MAX_EVENT_BYTES (8u * 1024 * 1024)
/* Reconnect backoff: doubles from the first value up to the cap, reset after a success. */
#define KUBE_WATCH_BACKOFF_MIN_MS 500
#define KUBE_WATCH_BACKOFF_MAX_MS 30000

/* All fields optional (NULL / 0 = default). Strings are copied by kube_client_new. */
struct kube_options {
    /* A kubeconfig file (--kubeconfig); NULL = $KUBECONFIG, and when that is unset too,
     * in-cluster (service account). */
    const char *kubeconfig;
    /* The node this client works on (used when a call passes node NULL); NULL = $NODE_NAME. */
    const char *node_name;
    /* Overrides the server URL (e.g. "http://127.0.0.1:8080" in tests). With no kubeconfig
     * and no service account, requests go unauthenticated to this URL. */
    const char *api_server;
    /* The service account directory; NULL = $GS_KUBE_SERVICEACCOUNT_DIR, then
     * KUBE_SERVICEACCOUNT_DIR (tests point it elsewhere). */
    const char *serviceaccount_dir;
    /* Timeout of one non-watch request; 0 = KUBE_DEFAULT_REQUEST_TIMEOUT_MS. */
    int request_timeout_ms;
};

/* A client holds the connection settings only (read once, immutable afterwards); every call
 * makes its own connection, and the service account token is re-read on each one since
 * kubelet rotates it. Safe to use from several threads at once. */
struct kube_client;

/* Resolves the settings (kubeconfig current-context → cluster/user, or in-cluster:
 * KUBERNETES_SERVICE_HOST/_PORT + service account). -ENOENT when there is neither a
 * kubeconfig, an in-cluster environment nor an api_server override; -EINVAL for a bad
 * kubeconfig (the message names file, field and what to do). *ret owned by the caller. */
int kube_client_new(const struct kube_options *o, struct kube_client **ret, struct error *err);
void kube_client_free(struct kube_client *c); /* NULL ok */
/* The node name from the options/environment, NULL when unknown; borrowed from c. */
const char *kube_client_node_name(const struct kube_client *c);
/* The server URL in use (no secrets in it); borrowed from c. */
const char *kube_client_server(const struct kube_client *c);

/* GET /api/v1/nodes/<node> (node NULL = the client's node). On success *ret_value is an
 * owned copy of the label's value, or NULL when the node has no such label. Errors name the
 * URL, the HTTP status, the API's message and what to do (e.g. RBAC): -ENOENT node not
 * found, -EACCES 401/403, -EIO other HTTP/transport failures, -ETIMEDOUT. */
int kube_node_get_label(struct kube_client *c, const char *node, const char *label_key,
                        char **ret_value, struct error *err);

/* Records a core/v1 Event on the node (node NULL = the client's node): type "Normal" or
 * "Warning", reason (CamelCase, e.g. "ConfigNotFound"), message (truncated to 1 KiB).
 * Source component "gpuslice". A Node is cluster-scoped, so the Event goes to namespace
 * "default" whatever the pod's namespace (as client-go's recorder does: the API server
 * refuses an Event about a cluster-scoped object anywhere else). Returns an error only; the
 * caller decides to carry on (and logs it). */
int kube_event_post(struct kube_client *c, const char *node, const char *type, const char *reason,
                    const char *message, struct error *err);

/* ---- any object: for labels (NodeFeature objects, Node label patches) ------------------ */

/* One request on an API path ("/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/ns/nodefeatures/x").
 * method "GET", "POST", "PUT" or "PATCH"; body NULL for GET; content_type NULL =
 * application/json (PATCH: "application/merge-patch+json"). On 2xx returns 0 and, when
 * ret_body is not NULL, the owned response body. -ENOENT for 404 of an object (the API's
 * NotFound Status names it), -EOPNOTSUPP for 404 of a path the server does not serve at all
 * (its API group or resource is not installed: a missing CustomResourceDefinition), -EEXIST
 * for 409, -EACCES for 401/403 (a 403 names the verb and resource refused, from the API's
 * message), -EIO/-ETIMEDOUT otherwise, with the API's message in err. */
int kube_request(struct kube_client *c, const char *method, const char *path, const char *body,
                 const char *content_type, char **ret_body, struct error *err);

/* ---- watching one label of one node ------------------------------------------------------ */

/* Called from the watcher thread, never with the watcher's lock held (a callback may call
 * kube_node_watch_value, but not kube_node_watch_stop). Both optional. */
struct kube_watch_callbacks {
    /* The label value changed (value NULL: label absent; borrowed for the call). Called once
     * after the first successful list too. */
    void (*on_change)(const char *value, void *userdata);
    /* The API became reachable (the first success too) or unreachable (reachable false, err
     * says why, borrowed for the call). Only changes are reported. */
    void (*on_status)(bool reachable, const struct error *err, void *userdata);
    void *userdata;
};

struct kube_node_watch;

/* Counters for logs, tests and metrics. */
struct kube_watch_stats {
    uint64_t n_lists;    /* successful list requests */
    uint64_t n_watches;  /* watch connections opened */
    uint64_t n_gone;     /* 410 Gone (resourceVersion too old) answers → re-list */
    uint64_t n_failures; /* failed requests (each followed by a backoff) */
    uint64_t n_changes;  /* on_change calls */
    bool reachable;      /* the last request succeeded */
};

/* Starts a thread that lists then watches the node (fieldSelector metadata.name=<node>,
 * resourceVersion, allowWatchBookmarks), reconnecting with backoff and re-listing on 410.
 * node NULL = the client's node (-EINVAL when unknown). c must outlive the watch; cb
 * (may be NULL) is copied. *ret owned by the caller: stop it with kube_node_watch_stop. */
int kube_node_watch_start(struct kube_client *c, const char *node, const char *label_key,
                          const struct kube_watch_callbacks *cb, struct kube_node_watch **ret,
                          struct error *err);
/* An eventfd (O_CLOEXEC|O_NONBLOCK) that becomes readable on every value change and every
 * reachability change; read(2) 8 bytes to reset it. Owned by the watch. */
int kube_node_watch_fd(const struct kube_node_watch *w);
/* The latest value: *ret_value owned copy (NULL = label absent), *ret_known false until the
 * first successful list (then *ret_value is NULL). Thread-safe. */
int kube_node_watch_value(struct kube_node_watch *w, char **ret_value, bool *ret_known,
                          struct error *err);
/* Copies the counters; *ret_last_err (may be NULL) gets the last failure. Thread-safe. */
void kube_node_watch_stats(struct kube_node_watch *w, struct kube_watch_stats *ret,
                           struct error *ret_last_err);
/* Aborts the transfer in flight, joins the thread (returns within ~200 ms) and frees.
 * NULL ok. Not from a callback. */
void kube_node_watch_stop(struct kube_node_watch *w);

#endif

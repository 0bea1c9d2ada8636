/* SPDX-License-Identifier: Apache-2.0 */
/* kube.h: the Kubernetes API client (libcurl + jansson) — in-cluster or kubeconfig auth, a
 * node label read and watched (list + watch, backoff, re-list on 410), Events on the node or
 * a pod, and resource.k8s.io for DRA (ResourceSlices listed, watched and written, claims
 * read). Library code: never logs above debug, never logs secrets; callers log errors. */
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

/* The object an Event is about. kind and name are required; api_version NULL = "v1";
 * namespace NULL or "" = a cluster-scoped object; uid optional (kubectl describe matches on
 * it when present). Borrowed for the call. */
struct kube_object_ref {
    const char *api_version;
    const char *kind;
    const char *namespace;
    const char *name;
    const char *uid;
};

/* An Event about any object (a Pod: "prepared claim's GPU was lost"). type "Normal" or
 * "Warning", reason CamelCase, message truncated to 1 KiB. It goes to the object's namespace
 * (an Event about a cluster-scoped object: to "default", as kube_event_post). Source
 * component "gpuslice", host the client's node. All borrowed for the call. */
struct kube_event {
    struct kube_object_ref about;
    const char *type;
    const char *reason;
    const char *message;
};
/* POSTs the Event. Errors as kube_request (-EACCES: RBAC "create" on events in that
 * namespace; -EINVAL: a bad type, reason or object, or the API refused the Event). */
int kube_event_post_about(struct kube_client *c, const struct kube_event *ev, struct error *err);

/* ---- Events posted with retries ------------------------------------------------------------ */

/* A poster thread of its own, so a caller (the daemon's loop, the DRA handlers) never waits
 * on the API server: Events queue (bounded, in order) and are POSTed one at a time. An
 * Event that fails for a reason that may pass (no answer, timeout, refused connection, 429,
 * 5xx) is retried after retry_min_ms, doubling to retry_max_ms, up to max_tries; later Events
 * wait behind it (order kept). A refusal that will not pass (400, 401/403, 404, 422) drops it
 * at once; 409 AlreadyExists counts as posted (a retry of an Event whose answer was lost: the
 * name and timestamps are fixed when it is queued). */
struct kube_event_poster;

enum kube_event_fate {
    KUBE_EVENT_RETRYING = 0, /* this try failed; it is tried again */
    KUBE_EVENT_DROPPED,      /* refused for good, or out of tries: given up */
};

struct kube_event_poster_options {
    size_t max_queued;     /* Events waiting (the one in flight is beside them); 0: 64 */
    unsigned retry_min_ms; /* 0: 250 */
    unsigned retry_max_ms; /* 0: 30000 */
    unsigned max_tries;    /* tries of one Event; 0: 16 (with the defaults, about 5 minutes) */
    /* Called on the poster thread (no lock held) after each failed try; the caller logs (kube/
     * does not). NULL: nobody is told. err describes the failure; borrowed for the call. */
    void (*on_failure)(void *userdata, const char *reason, enum kube_event_fate fate,
                       const struct error *err);
    void *userdata;
};

struct kube_event_poster_stats {
    unsigned long long posted;          /* accepted by the API (409 included) */
    unsigned long long retries;         /* failed tries that were retried */
    unsigned long long dropped_full;    /* oldest dropped to make room */
    unsigned long long dropped_refused; /* refused for good */
    unsigned long long dropped_tries;   /* out of tries */
    size_t queued;                      /* waiting now */
    bool in_flight;                     /* one is being posted now */
};

/* Starts the poster for client c (borrowed: it must outlive the poster); o NULL: defaults.
 * -ENOMEM, or the error of starting the thread. *ret owned: kube_event_poster_free. */
int kube_event_poster_new(struct kube_client *c, const struct kube_event_poster_options *o,
                          struct kube_event_poster **ret, struct error *err);

/* Queues a copy of ev (checked as kube_event_post_about does: -EINVAL, nothing queued).
 * Never blocks on the API. When the queue is full the oldest Event is dropped to make room:
 * returns 1 then, with its reason copied to dropped_reason (optional, size bytes) for the
 * caller's log; else 0. -ENOMEM. */
int kube_event_poster_add(struct kube_event_poster *p, const struct kube_event *ev,
                          char *dropped_reason, size_t size, struct error *err);

/* Waits up to timeout_ms until nothing is queued or in flight; true when so. */
bool kube_event_poster_flush(struct kube_event_poster *p, unsigned timeout_ms);

void kube_event_poster_stats(struct kube_event_poster *p, struct kube_event_poster_stats *ret);

/* Stops the thread (a POST in flight is cancelled at once) and frees; Events still queued are
 * dropped (flush first to give them a chance). NULL is fine. */
void kube_event_poster_free(struct kube_event_poster *p);

/* GET /api/v1/nodes/<node> (node NULL = the client's node): *ret_uid owned copy of
 * metadata.uid (for ownerReferences). Remembered for the client's own node, so later calls
 * and Events need no request. Errors as kube_node_get_label. */
int kube_node_uid(struct kube_client *c, const char *node, char **ret_uid, struct error *err);

/* ---- any object: for labels (NodeFeature objects, Node label patches) ------------------ */

/* One request on an API path ("/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/ns/nodefeatures/x").
 * method "GET", "POST", "PUT", "PATCH" or "DELETE"; body NULL for GET; content_type NULL =
 * application/json (PATCH: "application/merge-patch+json"). On 2xx returns 0 and, when
 * ret_body is not NULL, the owned response body. -ENOENT for 404 of an object (the API's
 * NotFound Status names it), -EOPNOTSUPP for 404 of a path the server does not serve at all
 * (its API group or resource is not installed: a missing CustomResourceDefinition), -EEXIST
 * for 409, -EACCES for 401/403 (a 403 names the verb and resource refused, from the API's
 * message), -EIO/-ETIMEDOUT otherwise, with the API's message in err. */
int kube_request(struct kube_client *c, const char *method, const char *path, const char *body,
                 const char *content_type, char **ret_body, struct error *err);

/* ---- resource.k8s.io: Dynamic Resource Allocation ---------------------------------------- */

#define KUBE_DRA_GROUP "resource.k8s.io"

/* Which version of resource.k8s.io the API server serves: "v1" (Kubernetes 1.34+),
 * "v1beta2" (1.33), "v1beta1" (1.32), tried in that order as NVIDIA's driver does (GET of
 * the version's discovery document, /apis/resource.k8s.io/<v>; a 404 moves on). The answer
 * is remembered by the client: later calls make no request, until a call finds that version
 * no longer served (-EOPNOTSUPP), after which the next call asks again. *ret_version is a
 * static string.
 * -EOPNOTSUPP when none is served, with a message saying DRA is not enabled and how to turn
 * it on; other errors as kube_request (the answer is not remembered then). */
int kube_dra_version(struct kube_client *c, const char **ret_version, struct error *err);

/* The ResourceSlices of one driver on one node. */
struct kube_slice_list {
    char *items_json; /* a JSON array of the ResourceSlice objects, as served */
    size_t n_items;
    char *resource_version; /* the list's metadata.resourceVersion (where a watch starts) */
};
void kube_slice_list_release(struct kube_slice_list *l); /* frees the contents; NULL ok */

/* GET .../resourceslices?fieldSelector=spec.driver=<driver>,spec.nodeName=<node> (node
 * NULL = the client's node). Fills *ret on success only (owned by the caller; release it).
 * Errors as kube_request; -EOPNOTSUPP: DRA is not enabled (kube_dra_version). */
int kube_slices_list(struct kube_client *c, const char *driver, const char *node,
                     struct kube_slice_list *ret, struct error *err);

/* POST a ResourceSlice. body_json is the object in the v1 shape (devices with attributes and
 * capacity directly, not under "basic"; metadata.name or metadata.generateName set by the
 * caller); apiVersion is set to the served version and, for v1beta1, each device's fields
 * are moved under "basic". *ret_json (may be NULL): the created object as the server
 * answered (its name, uid, resourceVersion), owned. -EEXIST: the name is taken; -EINVAL: a
 * body that is not a JSON object, or the API refused it (422: the message names the field). */
int kube_slice_create(struct kube_client *c, const char *body_json, char **ret_json,
                      struct error *err);

/* PUT the ResourceSlice `name`: body_json as for create; resource_version (required) is the
 * one last read: the server refuses the update with 409 when the slice changed since, and
 * this returns -EEXIST with a message saying to list again and retry. *ret_json as create. */
int kube_slice_update(struct kube_client *c, const char *name, const char *body_json,
                      const char *resource_version, char **ret_json, struct error *err);

/* DELETE the ResourceSlice `name`; resource_version NULL = whatever it is now, otherwise a
 * precondition (-EEXIST on 409 when it changed). -ENOENT when it is already gone. */
int kube_slice_delete(struct kube_client *c, const char *name, const char *resource_version,
                      struct error *err);

/* GET /apis/resource.k8s.io/<v>/namespaces/<ns>/resourceclaims/<name>: *ret_json the claim
 * as served (owned; the caller parses it and checks its uid). -ENOENT: no such claim. */
int kube_claim_get(struct kube_client *c, const char *ns, const char *name, char **ret_json,
                   struct error *err);

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

/* ---- watching the ResourceSlices of one DRA driver on one node ---------------------------- */

struct kube_slice_watch;

/* Learns the resource.k8s.io version first (kube_dra_version: -EOPNOTSUPP when DRA is off),
 * then starts a thread that lists and watches the slices with fieldSelector
 * spec.driver=<driver>,spec.nodeName=<node> (node NULL = the client's node), with the same
 * reconnect, 410 re-list and backoff as the node watch. cb->on_change is called with value
 * NULL whenever the set of slices or any slice changed (and after the first list);
 * on_status as for the node watch. c must outlive the watch. *ret owned: stop it with
 * kube_slice_watch_stop. */
int kube_slices_watch_start(struct kube_client *c, const char *driver, const char *node,
                            const struct kube_watch_callbacks *cb, struct kube_slice_watch **ret,
                            struct error *err);
/* Readable on every change of the slices and of reachability (as kube_node_watch_fd). */
int kube_slice_watch_fd(const struct kube_slice_watch *w);
/* The slices as last seen: *ret as kube_slices_list fills it (items sorted by name; the
 * resourceVersion of the last list or event), *ret_known false until the first successful
 * list (then the list is empty). Thread-safe. */
int kube_slice_watch_get(struct kube_slice_watch *w, struct kube_slice_list *ret, bool *ret_known,
                         struct error *err);
/* As kube_node_watch_stop. NULL ok. */
void kube_slice_watch_stop(struct kube_slice_watch *w);

#endif

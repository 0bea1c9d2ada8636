/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h: declarations shared by the files of src/kube only (never included from outside):
 * the resolved connection settings, the pure helpers (kubeconfig parsing, URL building, watch
 * line splitting and parsing, API Status messages) that the unit tests drive directly, the
 * run-time loader of libcurl and the one HTTP request helper over it. */
#ifndef GS_KUBE_INTERNAL_H
#define GS_KUBE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "kube/kube.h"

/* A kubeconfig larger than this is refused (they are a few KiB). */
#define KUBE__KUBECONFIG_MAX_BYTES (4u << 20)
/* Answers of non-watch requests larger than this are refused (a node is ~10-100 KiB). */
#define KUBE__BODY_MAX_BYTES (16u << 20)
#define KUBE__TOKEN_MAX_BYTES (64u << 10)
/* The server ends each watch after this; we then reconnect from the last resourceVersion. */
#define KUBE__WATCH_TIMEOUT_S 300
/* Where Events about a Node go: the real API server validates that an Event whose
 * involvedObject has no namespace lives in "" or "default" (legacyValidateEvent). */
#define KUBE__NODE_EVENT_NAMESPACE "default"

/* How to reach and authenticate to the API server. Every field owned; NULL = unset. Blobs
 * come from the -data fields of a kubeconfig (base64-decoded), files are absolute paths. */
struct kube__auth {
    char *server; /* "https://host:port[/prefix]" without trailing '/' */
    char *ca_file;
    char *ca_data;
    size_t ca_len;
    bool insecure_skip_tls_verify;
    char *token;      /* static bearer token (kubeconfig user.token) */
    char *token_file; /* re-read on every connection (service account, tokenFile) */
    char *cert_file;
    char *cert_data;
    size_t cert_len;
    char *key_file;
    char *key_data;
    size_t key_len;
    char *username; /* basic auth (rare; kubeconfig user.username/password) */
    char *password;
    char *namespace; /* the context's namespace */
};

void kube__auth_release(struct kube__auth *a);

/* Parses a kubeconfig text (YAML or JSON): the current context (or `context` when not NULL)
 * → cluster and user. `path` names the file in messages and anchors relative file paths
 * (kubectl resolves them against the kubeconfig's directory). Fills *ret on success only. */
int kube__kubeconfig_parse(const char *text, size_t len, const char *path, const char *context,
                           struct kube__auth *ret, struct error *err);
/* Standard base64 (with padding, whitespace ignored) → owned bytes, NUL-terminated. */
int kube__base64_decode(const char *in, size_t in_len, char **ret, size_t *ret_len);

/* In-cluster settings from KUBERNETES_SERVICE_HOST/_PORT and the service account dir. */
int kube__incluster_auth(const char *sa_dir, struct kube__auth *ret, struct error *err);

/* ---- libcurl, loaded at run time (curl.c; the table itself is in kube/curl.h) ----------- */

struct kube_curl;

/* Opens `library` (dlopen, RTLD_NOW | RTLD_LOCAL) and resolves every function of struct
 * kube_curl into *ret. A missing library or symbol → -ELIBACC / -ELIBBAD and a message naming
 * the library, dlerror's reason and what to install; nothing stays open then. On success the
 * library stays open for good (no handle is returned). No curl_global_init. */
int kube__curl_open(const char *library, struct kube_curl *ret, struct error *err);
/* The process-wide table: the first call (thread-safe, pthread_once) opens libcurl.so.4, or
 * $GPUSLICE_LIBCURL when set, and runs curl_global_init; later calls give the same table or
 * the same error. *ret is borrowed, valid until exit (the library is never closed, see
 * curl.c). */
int kube__curl_load(const struct kube_curl **ret, struct error *err);

struct kube_client {
    const struct kube_curl *curl; /* borrowed from kube__curl_load */
    struct kube__auth auth;
    char *node_name;
    const char *event_namespace; /* KUBE__NODE_EVENT_NAMESPACE: see kube_event_post */
    long request_timeout_ms;
    pthread_mutex_t lock;    /* guards node_uid and dra_version */
    char *node_uid;          /* learned from GET/list of node_name; used in Events */
    const char *dra_version; /* resource.k8s.io version served (static), NULL = not known */
};

/* ---- URLs (percent-encoding of path segments and query values) -------------------------- */

int kube__escape(struct strbuf *sb, const char *s);
/* The server URL without trailing slashes. */
int kube__put_server(struct strbuf *sb, const char *server);
/* A list URL's "&watch=true&allowWatchBookmarks=true&timeoutSeconds=..." (watch) and
 * "&resourceVersion=<rv>" (rv not NULL or ""). */
int kube__put_watch_query(struct strbuf *sb, bool watch, const char *rv);
/* Hands over sb (r == 0) as *ret, or releases it and returns r (or -ENOMEM). */
int kube__url_finish(struct strbuf *sb, int r, char **ret);
/* <server>/api/v1/nodes/<node> */
int kube__url_node(const char *server, const char *node, char **ret);
/* <server>/api/v1/nodes?fieldSelector=metadata.name%3D<node>[&watch=true&...&resourceVersion=rv] */
int kube__url_node_list(const char *server, const char *node, bool watch, const char *rv,
                        char **ret);
/* <server>/api/v1/namespaces/<ns>/events */
int kube__url_events(const char *server, const char *ns, char **ret);

/* ---- resource.k8s.io (dra.c) ------------------------------------------------------------ */

/* The versions tried, newest first (NVIDIA's driver's order). */
extern const char *const kube__dra_versions[3];
/* <server>/apis/resource.k8s.io/<version>[/namespaces/<ns>][/<resource>[/<name>]]; ns,
 * resource and name may be NULL. */
int kube__url_dra(const char *server, const char *version, const char *ns, const char *resource,
                  const char *name, char **ret);
/* <server>/apis/resource.k8s.io/<version>/resourceslices?fieldSelector=spec.driver%3D<driver>
 * %2Cspec.nodeName%3D<node>[&watch=true&...][&resourceVersion=rv] */
int kube__url_slices(const char *server, const char *version, const char *driver, const char *node,
                     bool watch, const char *rv, char **ret);
/* The request body for a create/update: body_json (v1 shape) with apiVersion and kind set,
 * metadata.resourceVersion set when resource_version is not NULL, and for v1beta1 each
 * device's fields other than name moved under "basic". *ret owned. -EINVAL: not an object
 * (or spec.devices not an array). */
int kube__slice_body(const char *body_json, const char *version, const char *resource_version,
                     char **ret, struct error *err);
/* A ResourceSliceList answer → items (re-serialised) and the list's resourceVersion. */
int kube__slice_list_parse(const char *body, size_t len, struct kube_slice_list *ret,
                           struct error *err);
/* The "DRA is not enabled" error (-EOPNOTSUPP) for a server. */
int kube__dra_off_error(const char *server, struct error *err);

/* ---- API objects ------------------------------------------------------------------------ */

/* What one node object says. All owned. */
struct kube__node_info {
    char *name;
    char *uid;
    char *resource_version;
    bool has_label;
    char *label_value; /* NULL when !has_label */
};
void kube__node_info_release(struct kube__node_info *n);
/* From a parsed Node JSON object. -EINVAL when it is not one. */
int kube__node_info_from_json(const void *json_node, const char *label_key,
                              struct kube__node_info *ret, struct error *err);
/* A Node (GET) answer. */
int kube__node_parse(const char *body, size_t len, const char *label_key,
                     struct kube__node_info *ret, struct error *err);
/* A NodeList answer: *ret_found tells whether `node` is in it; ret->resource_version is the
 * list's resourceVersion either way. */
int kube__node_list_parse(const char *body, size_t len, const char *node, const char *label_key,
                          struct kube__node_info *ret, bool *ret_found, struct error *err);

enum kube__event_type {
    KUBE__EV_ADDED,
    KUBE__EV_MODIFIED,
    KUBE__EV_DELETED,
    KUBE__EV_BOOKMARK,
    KUBE__EV_ERROR,
};
struct kube__watch_event {
    enum kube__event_type type;
    struct kube__node_info node; /* ADDED/MODIFIED/DELETED; BOOKMARK: resource_version only */
    long code;                   /* ERROR: the Status code (410 = resourceVersion too old) */
    char *message;               /* ERROR: the Status message */
};
void kube__watch_event_release(struct kube__watch_event *ev);
/* One watch line (one JSON object). -EINVAL with a message for anything else. */
int kube__watch_event_parse(const char *line, size_t len, const char *label_key,
                            struct kube__watch_event *ret, struct error *err);

/* The `message` of an API Status answer (owned), NULL when the body is not one. */
char *kube__status_message(const char *body, size_t len);

/* ---- splitting a watch stream into lines ------------------------------------------------ */

/* Bytes arrive in arbitrary chunks; each complete '\n'-terminated line (without the '\n',
 * blank lines skipped) goes to on_line. A line longer than max_line_bytes → -E2BIG. A
 * negative return of on_line stops and is returned. */
struct kube__lines {
    struct strbuf sb;
};
int kube__lines_feed(struct kube__lines *l, const char *data, size_t n, size_t max_line_bytes,
                     int (*on_line)(const char *line, size_t len, void *userdata), void *userdata);
void kube__lines_release(struct kube__lines *l);

/* ---- HTTP -------------------------------------------------------------------------------- */

/* A request in flight can be cancelled from another thread (watch stop). */
struct kube__cancel {
    void *multi; /* CURLM *, owned by the watcher */
    atomic_bool stop;
};

struct kube__request {
    const char *method; /* "GET" / "POST" / "PUT" / "PATCH" */
    const char *url;
    const char *body;         /* request body (JSON) or NULL */
    const char *content_type; /* of the body; NULL = application/json */
    long timeout_ms;          /* whole-transfer timeout, 0 = none (watch) */
    /* Called with each chunk of a 2xx answer; NULL = collect into `response`. Return 0 to go
     * on, negative to abort the transfer (returned from kube__perform). */
    int (*on_data)(const char *data, size_t n, void *userdata);
    void *userdata;
    struct kube__cancel *cancel; /* NULL = not cancellable */
};

/* Performs one request. 0 on 2xx (the body collected in *response when on_data is NULL),
 * otherwise a negative errno and a message naming method, URL, status, the API's message
 * and a hint. *ret_status gets the HTTP status (0 = no answer). -ECANCELED when cancelled. */
int kube__perform(struct kube_client *c, const struct kube__request *rq, struct strbuf *response,
                  long *ret_status, struct error *err);
/* The error text for an HTTP status with the API's Status message (pure, for tests). */
int kube__http_error(const char *method, const char *url, long status, const char *body,
                     size_t body_len, struct error *err);
void kube__remember_uid(struct kube_client *c, const char *node, const char *uid);
/* node, or the client's node when NULL; NULL (and err set) when neither is known. */
const char *kube__node_or_default(const struct kube_client *c, const char *node, struct error *err);

#endif

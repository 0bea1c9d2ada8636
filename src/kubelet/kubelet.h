/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet.h: the kubelet-facing services built on rpc.h — the device plugin service of one
 * resource (dp_plugin: GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation,
 * Allocate, PreStartContainer, answered from a model), the registration client, and the DRA
 * kubelet plugin (kdra_: DRAPlugin v1/v1beta1 plus plugin registration, answered through an
 * ops table). Library code: never logs above debug; the daemon logs. */
#ifndef GS_KUBELET_H
#define GS_KUBELET_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "gpu/inventory.h"
#include "rpc/rpc.h"
#include "model/model.h"

#define DP_API_VERSION "v1beta1"
#define DP_KUBELET_SOCKET_NAME "kubelet.sock"
/* ListAndWatch streams one plugin keeps open at once; more are refused (RESOURCE_EXHAUSTED). */
#define DP_MAX_WATCHERS 64

/* ---- snapshot: a model (and the inventory for topology) shared by all plugins ------------- */

struct dp_snapshot;

/* Takes ownership of `m` and `inv` (inv may be NULL: no topology) on success only.
 * Starts with one reference, owned by the caller. */
int dp_snapshot_new(struct model *m, struct inv_inventory *inv, struct dp_snapshot **ret,
                    struct error *err);
struct dp_snapshot *dp_snapshot_ref(struct dp_snapshot *s);
/* Drops a reference; the model goes with the last one. Accepts NULL. */
void dp_snapshot_unref(struct dp_snapshot *s);
/* model_set_health under the snapshot's lock (thread-safe against the handlers). Returns
 * the number of devices changed or a negative errno (-ENOENT: no such device). */
int dp_snapshot_set_health(struct dp_snapshot *s, const char *uuid, unsigned gi_id, unsigned ci_id,
                           bool healthy);
/* Marks every device of the model (un)healthy; returns the number changed. */
int dp_snapshot_set_all_health(struct dp_snapshot *s, bool healthy);
/* The model, borrowed while a reference is held; read it only under dp_snapshot_lock. */
const struct model *dp_snapshot_model(const struct dp_snapshot *s);
/* The inventory (immutable; NULL when none), borrowed while a reference is held. */
const struct inv_inventory *dp_snapshot_inventory(const struct dp_snapshot *s);
void dp_snapshot_lock(struct dp_snapshot *s);
void dp_snapshot_unlock(struct dp_snapshot *s);

/* ---- the device plugin service of one resource ------------------------------------------ */

struct dp_plugin;

/* Serves `resource_name` of `snap` on <dir>/<socket_name> (the model's socket name). Takes a
 * reference to snap. `env` (may be NULL) is copied; its userdata must outlive the plugin.
 * -ENOENT when the model has no such resource. Not serving until dp_plugin_start(). */
int dp_plugin_new(const char *dir, const char *resource_name, struct dp_snapshot *snap,
                  const struct model_alloc_env *env, struct dp_plugin **ret, struct error *err);
/* Binds the socket (mode 0600) and serves: when it returns 0 a client can connect. */
int dp_plugin_start(struct dp_plugin *p, struct error *err);
/* Stops and frees; accepts NULL. */
void dp_plugin_free(struct dp_plugin *p);
/* Replaces the served snapshot (takes a reference, drops the old one) and pushes the new
 * device list to every ListAndWatch stream. The resource must exist in the new model
 * (-ENOENT otherwise, nothing changed). Thread-safe. */
int dp_plugin_set_snapshot(struct dp_plugin *p, struct dp_snapshot *snap, struct error *err);
/* The same, pushing only when `push` (a live reload that left this resource unchanged swaps
 * the snapshot silently: the kubelet's stream sees nothing). */
int dp_plugin_replace_snapshot(struct dp_plugin *p, struct dp_snapshot *snap, bool push,
                               struct error *err);
/* Pushes the current device list to every ListAndWatch stream (after a health change).
 * Returns the number of streams it was sent to. Thread-safe. */
int dp_plugin_push(struct dp_plugin *p);
const char *dp_plugin_resource_name(const struct dp_plugin *p);
const char *dp_plugin_socket_path(const struct dp_plugin *p);
/* False when the socket path no longer is the socket this plugin bound (removed, or
 * replaced by another file): the daemon then serves it again. */
bool dp_plugin_socket_ok(const struct dp_plugin *p);
/* Basename of the socket: the Register endpoint. */
const char *dp_plugin_endpoint(const struct dp_plugin *p);
size_t dp_plugin_n_watchers(struct dp_plugin *p);
/* Counters for logs and tests. */
struct dp_plugin_stats {
    unsigned long long allocates, allocate_errors, preferred, list_and_watch_opens, pushes;
};
void dp_plugin_stats(struct dp_plugin *p, struct dp_plugin_stats *ret);
/* The ListAndWatchResponse of the resource (protobuf bytes), for tests. Owned: free(). */
int dp_encode_device_list(const struct model_resource *res, uint8_t **ret, size_t *ret_len,
                          struct error *err);

/* ---- registration ------------------------------------------------------------------------ */

/* One Register call on the kubelet socket: version v1beta1, endpoint (socket basename),
 * resource name and the plugin's options (pre_start_required false, preferred allocation
 * available). The plugin must already be serving (kubelet dials back during the call).
 * Errors as rpc_client_call (-ECONNREFUSED when nobody serves the kubelet socket). */
int dp_register(const char *kubelet_socket, const char *endpoint, const char *resource_name,
                int timeout_ms, struct error *err);

/* Registration retry backoff: 0 (first failure) gives DP_BACKOFF_MIN_MS, then doubling up
 * to DP_BACKOFF_MAX_MS. Pure. */
#define DP_BACKOFF_MIN_MS 1000u
#define DP_BACKOFF_MAX_MS 30000u
unsigned dp_backoff_next_ms(unsigned prev_ms);

/* ---- pod-resources v1 (podresources.c) --------------------------------------------------- */

/* Device assignments accepted from one List answer. */
#define DP_POD_DEVICES_MAX 65536u

/* One device ID assigned to a pod's container. */
struct dp_pod_device {
    char *resource;  /* "nvidia.com/gpu" */
    char *id;        /* the device ID as advertised */
    char *pod;       /* "<namespace>/<name>" ("uid <UID>" from the checkpoint) */
    char *container; /* the container the device went to, NULL when not known */
};

struct dp_pod_devices {
    struct dp_pod_device *items;
    size_t n;
};

/* Calls List on the kubelet's pod-resources socket. On success *ret (owned:
 * dp_pod_devices_release()) lists every device ID assigned to a pod. Errors as
 * rpc_client_call (-ECONNREFUSED: nobody serves the socket); -EBADMSG for a malformed answer;
 * -E2BIG beyond DP_POD_DEVICES_MAX assignments. */
int dp_pod_resources_list(const char *socket_path, int timeout_ms, struct dp_pod_devices *ret,
                          struct error *err);
void dp_pod_devices_release(struct dp_pod_devices *l);
/* The entry for device `id` of `resource`, or NULL. Borrowed. */
const struct dp_pod_device *dp_pod_devices_find(const struct dp_pod_devices *l,
                                                const char *resource, const char *id);
/* The pod ("<namespace>/<name>") holding device `id` of `resource`, or NULL. Borrowed. */
const char *dp_pod_devices_holder(const struct dp_pod_devices *l, const char *resource,
                                  const char *id);

/* The kubelet's own record of assigned devices, `kubelet_internal_checkpoint` in the
 * device-plugin directory (every deployment mounts it, unlike pod-resources): read-only,
 * both DeviceIDs formats. Pods are named "uid <PodUID>" (the checkpoint has no names).
 * -ENOENT, -EBADMSG (not a checkpoint), -E2BIG, -ENOMEM. */
#define DP_CHECKPOINT_NAME "kubelet_internal_checkpoint"
#define DP_CHECKPOINT_MAX_BYTES (16u * 1024 * 1024)
int dp_checkpoint_read(const char *path, struct dp_pod_devices *ret, struct error *err);

/* ---- DRA kubelet plugin (dra.c) ------------------------------------------------------------
 * The node side of Dynamic Resource Allocation as the kubelet sees it: the DRAPlugin service
 * (NodePrepareResources, NodeUnprepareResources) on <plugins>/<driver>/dra.sock in both API
 * versions (k8s.io.kubelet.pkg.apis.dra.v1 and .v1beta1: same messages, other package), and
 * the plugin registration service (pluginregistration.Registration) on
 * <registrar>/<driver>-reg.sock, which the kubelet's plugin watcher finds, asks GetInfo and
 * answers with NotifyRegistrationStatus. Both serve before anything registers: the kubelet
 * dials back. Requests reach the caller as plain C structs through struct kdra_ops. */

#define KDRA_DRIVER_NAME "gpu.nvidia.com"
#define KDRA_SOCKET_NAME "dra.sock"
#define KDRA_REG_SOCKET_SUFFIX "-reg.sock"
#define KDRA_PLUGIN_TYPE "DRAPlugin"
/* PluginInfo.supported_versions entries (not the full gRPC service names) */
#define KDRA_VERSION_V1 "v1.DRAPlugin"
#define KDRA_VERSION_V1BETA1 "v1beta1.DRAPlugin"
/* Claims in one call (the kubelet sends the claims of one pod for this driver); more are
 * refused with INVALID_ARGUMENT. */
#define KDRA_MAX_CLAIMS 256
/* Longest namespace, name or UID accepted (a DNS subdomain). */
#define KDRA_MAX_NAME_LEN 253

enum kdra_api { KDRA_API_V1 = 0, KDRA_API_V1BETA1 };

/* "v1" or "v1beta1". Static. */
const char *kdra_api_name(enum kdra_api api);
/* The full method path of NodePrepareResources (prepare true) or NodeUnprepareResources. */
const char *kdra_method(enum kdra_api api, bool prepare);

/* One claim of a request. The server hands them to the ops borrowed for the call; every
 * field is 1..KDRA_MAX_NAME_LEN bytes of [A-Za-z0-9._-] and UIDs are unique in a call. */
struct kdra_claim {
    const char *namespace;
    const char *uid;
    const char *name;
};

/* One prepared device. Owned by its kdra_result. */
struct kdra_device {
    char **request_names;  /* strv; empty: every request of the claim */
    char *pool_name;       /* required */
    char *device_name;     /* required */
    char **cdi_device_ids; /* strv of fully qualified CDI names */
    char *share_id;        /* NULL when none; sent in v1 only (v1beta1 has no such field) */
};

/* The answer for one claim: prepared devices, or an error text the kubelet shows on the pod
 * (FailedPrepareDynamicResources) and retries. For unprepare only `error` counts. */
struct kdra_result {
    struct kdra_device *devices;
    size_t n_devices;
    char *error; /* NULL: success */
};

/* Appends a device (strings and NULL-terminated lists copied; lists may be NULL). 0 or
 * -ENOMEM, r unchanged on failure. */
int kdra_result_add_device(struct kdra_result *r, const char *pool_name, const char *device_name,
                           const char *const *request_names, const char *const *cdi_device_ids);
/* Sets the claim's error text (replacing one set before). 0 or -ENOMEM. */
int kdra_result_set_error(struct kdra_result *r, const char *fmt, ...) GS_PRINTF(2, 3);
/* Frees the contents; r is empty afterwards. Accepts NULL. */
void kdra_result_release(struct kdra_result *r);

/* What the server calls. prepare and unprepare run on a pool of worker threads
 * (kdra_server_opts.workers, KDRA_WORKERS by default), never on the rpc thread, so one slow
 * claim (an API read hanging to its timeout) holds up no other pod's call. The contract:
 *  - prepare and unprepare MAY RUN CONCURRENTLY on several threads, for calls whose claim
 *    UIDs are disjoint;
 *  - two calls sharing a claim UID never run at once: they run one after the other, in the
 *    order the kubelet sent them (a prepare and the unprepare after it, too);
 *  - one call's claims come in one op invocation, as before.
 * So an op must be thread-safe against itself for different claims (shared state such as a
 * checkpoint file or the device set needs the caller's own lock) and may rely on exclusive
 * access per claim UID. Each may block (an API GET, a CDI write, a child process): other
 * claims' calls keep running, and the kubelet's deadline (45 s) is the bound. A call the
 * kubelet gave up on before a worker took it is not run. registration runs on the
 * registration socket's thread, and may overlap them. All must be thread-safe against the
 * caller's other threads. */
#define KDRA_WORKERS 4
#define KDRA_WORKERS_MAX 8
struct kdra_ops {
    /* Fills results[i] (zeroed, n_claims entries) for claims[i]. Returns 0 for an answer
     * (per-claim errors in results), or fails the whole call: set st to a status (the
     * kubelet sees "rpc error: code = <Name> desc = <message>") and return < 0; a negative
     * return with st still OK is sent as UNKNOWN with strerror's text. The server frees the
     * results either way. */
    int (*prepare)(void *ctx, enum kdra_api api, const struct kdra_claim *claims, size_t n_claims,
                   struct kdra_result *results, struct rpc_status *st);
    /* The same for NodeUnprepareResources; only results[i].error is sent. Unpreparing a
     * claim never prepared must succeed (the kubelet retries after restarts). */
    int (*unprepare)(void *ctx, enum kdra_api api, const struct kdra_claim *claims, size_t n_claims,
                     struct kdra_result *results, struct rpc_status *st);
    /* NotifyRegistrationStatus arrived (may be NULL). error is "" when registered. Same
     * thread rules; must not call kdra_server_stop/free. */
    void (*registration)(void *ctx, bool registered, const char *error);
};

struct kdra_server_opts {
    const char *driver_name;    /* NULL: KDRA_DRIVER_NAME */
    const char *plugins_dir;    /* kubelet's plugins dir: socket <it>/<driver>/dra.sock */
    const char *registrar_dir;  /* kubelet's plugins_registry: <it>/<driver>-reg.sock */
    const struct kdra_ops *ops; /* borrowed; must outlive the server */
    void *ctx;                  /* passed to the ops */
    /* Worker threads for prepare/unprepare (started as calls come, joined at stop): 0 means
     * KDRA_WORKERS; at most KDRA_WORKERS_MAX; 1 runs the calls one at a time in order. */
    unsigned workers;
};

/* What the kubelet said about the registration, for the caller and tests. */
struct kdra_registration {
    bool is_registered;             /* the last NotifyRegistrationStatus said registered */
    unsigned n_get_info;            /* GetInfo calls answered */
    unsigned n_notifications;       /* NotifyRegistrationStatus calls received */
    char error[RPC_STATUS_MSG_MAX]; /* the last error text, "" when none */
};

struct kdra_server;

/* A stopped server; nothing is created on disk yet. -EINVAL for a missing dir or ops, or a
 * socket path too long for a unix socket. Owned: kdra_server_free(). */
int kdra_server_new(const struct kdra_server_opts *opts, struct kdra_server **ret,
                    struct error *err);
/* Creates <plugins>/<driver> and the registrar dir if missing (0750), removes stale socket
 * files, serves DRAPlugin (v1 and v1beta1) and then Registration: when it returns 0 the
 * kubelet can find and dial the plugin. Once only. */
int kdra_server_start(struct kdra_server *s, struct error *err);
/* Removes the registration socket first (the kubelet deregisters), lets the calls already
 * taken finish (new ones get UNAVAILABLE), joins the workers, then stops serving DRAPlugin.
 * Idempotent; not from an op. */
void kdra_server_stop(struct kdra_server *s);
/* Stops and frees; accepts NULL. */
void kdra_server_free(struct kdra_server *s);
const char *kdra_server_socket_path(const struct kdra_server *s);
const char *kdra_server_registration_path(const struct kdra_server *s);
/* False when either socket path no longer is the socket this server bound (removed or
 * replaced): free this server and start a new one to register again. */
bool kdra_server_sockets_ok(const struct kdra_server *s);
/* The registration state so far. Thread-safe. */
void kdra_server_registration(struct kdra_server *s, struct kdra_registration *ret);

/* ---- gRPC health service (health.c) --------------------------------------------------------
 * grpc.health.v1.Health/Check (messages generated from proto/grpc/health/v1/health.proto),
 * as a Kubernetes `grpc:` probe and grpc-health-probe call it. NVIDIA's DRA chart probes its
 * --healthcheck-port with service "liveness" (startup and liveness); its plugin serves ""
 * and "liveness" and answers NOT_FOUND "unknown service" for any other name. */

#define KHEALTH_METHOD_CHECK "/grpc.health.v1.Health/Check"
/* The service name NVIDIA's DRA chart's startup and liveness probes send. */
#define KHEALTH_SERVICE_LIVENESS "liveness"

/* Whether `service` ("" or one of the served names) is serving now. Runs on the health
 * server's thread for every Check: quick, thread-safe, no rpc_server calls. */
typedef bool (*khealth_serving_fn)(void *ctx, const char *service);

struct khealth_opts {
    /* "host:port" ("0.0.0.0:51516", "[::]:51516"; port 0 picks one), or a unix socket path
     * (starting with '/'). */
    const char *address;
    /* NULL-terminated names served besides "" (always served); NULL: "" only. Copied. */
    const char *const *services;
    khealth_serving_fn serving; /* required */
    void *ctx;                  /* passed to serving */
};

struct khealth_server;

/* A stopped health server. -EINVAL without an address or callback. Owned:
 * khealth_server_free(). */
int khealth_server_new(const struct khealth_opts *opts, struct khealth_server **ret,
                       struct error *err);
/* Listens and serves: when it returns 0 a probe can connect. */
int khealth_server_start(struct khealth_server *h, struct error *err);
/* The TCP port listened on (after start; useful with port 0), -1 for a unix socket. */
int khealth_server_port(const struct khealth_server *h);
/* Stops serving; idempotent. */
void khealth_server_stop(struct khealth_server *h);
/* Stops and frees; accepts NULL. */
void khealth_server_free(struct khealth_server *h);
/* One Check, pure, for the server and tests: `services` a strv holding "" and the served
 * names. A known name appends HealthCheckResponse{SERVING or NOT_SERVING, as `serving`
 * says} to resp; an unknown one sets st NOT_FOUND "unknown service"; a malformed request
 * INVALID_ARGUMENT. Returns 0, or -ENOMEM. */
int khealth_check(char *const *services, khealth_serving_fn serving, void *ctx, const uint8_t *req,
                  size_t req_len, struct strbuf *resp, struct rpc_status *st);

/* ---- DRA, the kubelet's side (dra_client.c): kubelet-sim and tests ----------------------- */

struct kdra_plugin_info {
    char *type;
    char *name;
    char *endpoint;            /* "" when the plugin left it empty */
    char **supported_versions; /* strv */
};
void kdra_plugin_info_release(struct kdra_plugin_info *i);

/* GetInfo on a registration socket. -EBADMSG for an answer that does not decode. */
int kdra_client_get_info(const char *reg_socket, int timeout_ms, struct kdra_plugin_info *ret,
                         struct error *err);
/* NotifyRegistrationStatus(registered, error) on a registration socket. */
int kdra_client_notify(const char *reg_socket, bool registered, const char *error, int timeout_ms,
                       struct error *err);
/* Picks the API the kubelet would use from supported_versions: v1 first, then v1beta1 (only
 * v1beta1 when force_v1beta1). -ENOTSUP with the kubelet-like text when none fits. */
int kdra_pick_api(char *const *supported_versions, bool force_v1beta1, enum kdra_api *ret,
                  struct error *err);
/* NodePrepareResources (prepare true) or NodeUnprepareResources on a DRA socket. On success
 * results[i] (n entries, zeroed by the caller, release each) is the answer for claims[i].
 * A failed call returns as rpc_client_call (st holds the status); an answer missing a claim
 * is -EBADMSG "NodePrepareResources skipped N ResourceClaims" as the kubelet says. */
int kdra_client_call(const char *socket, enum kdra_api api, bool prepare,
                     const struct kdra_claim *claims, size_t n_claims, int timeout_ms,
                     struct kdra_result *results, struct rpc_status *st, struct error *err);

#endif

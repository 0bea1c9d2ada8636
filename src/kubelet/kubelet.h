/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet.h: the kubelet-facing services built on rpc.h — the device plugin service of one
 * resource (dp_plugin: GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation,
 * Allocate, PreStartContainer, answered from a model) and the registration client. The
 * model is shared through a refcounted snapshot that can be swapped atomically. Library
 * code: never logs above debug; the daemon logs. */
#ifndef GS_KUBELET_H
#define GS_KUBELET_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "gpu/inventory.h"
#include "model/model.h"

#define DP_API_VERSION "v1beta1"
#define DP_KUBELET_SOCKET_NAME "kubelet.sock"
/* ListAndWatch streams one plugin keeps open at once; more are refused (RESOURCE_EXHAUSTED). */
#define DP_MAX_WATCHERS 64
/* Device IDs accepted in one container request (kubelet never sends more than it has). */
#define DP_MAX_REQUEST_IDS MODEL_MAX_DEVICES

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
/* Stops serving (open ListAndWatch streams end with UNAVAILABLE) and removes the socket. */
void dp_plugin_stop(struct dp_plugin *p);
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

#define DP_POD_RESOURCES_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
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

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* deviceplugin.c: the v1beta1 DevicePlugin service of one resource on rpc.h. Requests are
 * decoded with protobuf-c, answered from the shared model snapshot (model/), and encoded
 * back; ListAndWatch streams get the full device list on connect and on every push.
 * Threads: handlers run on the rpc server's thread, pushes come from any thread; the
 * plugin's lock guards the snapshot pointer and the watcher list. Never logs above debug. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"

#define DP_METHOD(m) "/v1beta1.DevicePlugin/" m

/* ---- snapshot ----------------------------------------------------------------------------- */

struct dp_snapshot {
    atomic_uint refs;
    pthread_mutex_t lock; /* guards the model's health fields against concurrent readers */
    unsigned health_gen;  /* bumped (under lock) whenever a health field changes */
    struct model *model;
    struct inv_inventory *inv;
};

int dp_snapshot_new(struct model *m, struct inv_inventory *inv, struct dp_snapshot **ret,
                    struct error *err)
{
    struct dp_snapshot *s = calloc(1, sizeof(*s));

    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->lock, NULL);
    s->model = m;
    s->inv = inv;
    *ret = s;
    return 0;
}

struct dp_snapshot *dp_snapshot_ref(struct dp_snapshot *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
    return s;
}

void dp_snapshot_unref(struct dp_snapshot *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    model_free(s->model);
    inv_free(s->inv);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

const struct model *dp_snapshot_model(const struct dp_snapshot *s)
{
    return s->model;
}

const struct inv_inventory *dp_snapshot_inventory(const struct dp_snapshot *s)
{
    return s->inv;
}

void dp_snapshot_lock(struct dp_snapshot *s)
{
    pthread_mutex_lock(&s->lock);
}

void dp_snapshot_unlock(struct dp_snapshot *s)
{
    pthread_mutex_unlock(&s->lock);
}

int dp_snapshot_set_health(struct dp_snapshot *s, const char *uuid, unsigned gi_id, unsigned ci_id,
                           bool healthy)
{
    int r;

    pthread_mutex_lock(&s->lock);
    r = model_set_health(s->model, uuid, gi_id, ci_id, healthy);
    if (r > 0)
        s->health_gen++;
    pthread_mutex_unlock(&s->lock);
    return r;
}

int dp_snapshot_set_all_health(struct dp_snapshot *s, bool healthy)
{
    int n = 0;

    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->model->n_resources; i++) {
        struct model_resource *res = &s->model->resources[i];
        for (size_t j = 0; j < res->n_devices; j++) {
            if (res->devices[j].healthy != healthy) {
                res->devices[j].healthy = healthy;
                n++;
            }
        }
    }
    if (n > 0)
        s->health_gen++;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* ---- plugin ------------------------------------------------------------------------------- */

struct dp_plugin {
    char *resource_name;
    char *socket_path;
    const char *endpoint; /* into socket_path */
    struct model_alloc_env env;
    struct rpc_server *srv;
    bool started;

    pthread_mutex_t lock; /* snap, watchers, stats */
    struct dp_snapshot *snap;
    struct rpc_stream *watchers[DP_MAX_WATCHERS];
    size_t n_watchers;
    struct dp_plugin_stats stats;
    /* The ListAndWatch answer of snap, encoded once per change and sent to every stream
     * (10,240 devices: ~1 MiB, not re-encoded per connect); NULL until needed. */
    uint8_t *list;
    size_t list_len;
    unsigned list_gen; /* snap's health_gen it was encoded at */
};

static int pack_to(const ProtobufCMessage *msg, struct strbuf *out)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(n ? n : 1);
    int r;

    if (!buf)
        return -ENOMEM;
    protobuf_c_message_pack(msg, buf);
    r = strbuf_append(out, (const char *)buf, n);
    free(buf);
    return r;
}

int dp_encode_device_list(const struct model_resource *res, uint8_t **ret, size_t *ret_len,
                          struct error *err)
{
    V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    V1beta1__Device *devs = NULL, **ptrs = NULL;
    V1beta1__TopologyInfo *topo = NULL;
    V1beta1__NUMANode *nodes = NULL, **node_ptrs = NULL;
    uint8_t *buf = NULL;
    size_t n = res->n_devices, len;
    int r = -ENOMEM;

    devs = calloc(n ? n : 1, sizeof(*devs));
    ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    topo = calloc(n ? n : 1, sizeof(*topo));
    nodes = calloc(n ? n : 1, sizeof(*nodes));
    node_ptrs = calloc(n ? n : 1, sizeof(*node_ptrs));
    if (!devs || !ptrs || !topo || !nodes || !node_ptrs)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const struct model_device *d = &res->devices[i];
        V1beta1__Device init = V1BETA1__DEVICE__INIT;
        V1beta1__TopologyInfo tinit = V1BETA1__TOPOLOGY_INFO__INIT;
        V1beta1__NUMANode ninit = V1BETA1__NUMANODE__INIT;

        devs[i] = init;
        devs[i].id = d->id;
        devs[i].health = (char *)(d->healthy ? MODEL_HEALTHY : MODEL_UNHEALTHY);
        if (d->numa_node >= 0) {
            /* NVIDIA sends the GPU's NUMA node as the device's only topology node */
            nodes[i] = ninit;
            nodes[i].id = d->numa_node;
            node_ptrs[i] = &nodes[i];
            topo[i] = tinit;
            topo[i].n_nodes = 1;
            topo[i].nodes = &node_ptrs[i];
            devs[i].topology = &topo[i];
        }
        ptrs[i] = &devs[i];
    }
    resp.n_devices = n;
    resp.devices = ptrs;
    len = protobuf_c_message_get_packed_size(&resp.base);
    buf = malloc(len ? len : 1);
    if (!buf)
        goto out;
    protobuf_c_message_pack(&resp.base, buf);
    *ret = buf;
    *ret_len = len;
    buf = NULL;
    r = 0;
out:
    if (r < 0)
        error_set(err, r, "encoding the device list of %s: out of memory", res->name);
    free(buf);
    free(devs);
    free(ptrs);
    free(topo);
    free(nodes);
    free(node_ptrs);
    return r;
}

/* The current snapshot with a reference held, or NULL. */
static struct dp_snapshot *plugin_snapshot(struct dp_plugin *p)
{
    struct dp_snapshot *s;

    pthread_mutex_lock(&p->lock);
    s = dp_snapshot_ref(p->snap);
    pthread_mutex_unlock(&p->lock);
    return s;
}

/* Under p->lock: the list of the current snapshot, encoded when snap or its health changed
 * since the last encoding (borrowed until the lock is released). */
static int plugin_list_locked(struct dp_plugin *p, const uint8_t **ret, size_t *ret_len)
{
    const struct model_resource *res;
    int r = 0;

    dp_snapshot_lock(p->snap);
    if (!p->list || p->list_gen != p->snap->health_gen) {
        free(p->list);
        p->list = NULL;
        res = model_find_resource(p->snap->model, p->resource_name);
        r = res ? dp_encode_device_list(res, &p->list, &p->list_len, NULL) : -ENOENT;
        p->list_gen = p->snap->health_gen;
    }
    dp_snapshot_unlock(p->snap);
    *ret = p->list;
    *ret_len = p->list_len;
    return r;
}

/* Under p->lock: the cached list no longer matches p->snap. */
static void plugin_list_drop_locked(struct dp_plugin *p)
{
    free(p->list);
    p->list = NULL;
}

/* Under p->lock: sends msg to watcher i. Each message is the full device list, so a newer
 * one replaces any the kubelet has not read yet: a watcher that stops reading holds one
 * list, not one per health change (issue 29). A watcher that cannot take it is ended so
 * that the kubelet reconnects and gets a full list again. */
static bool plugin_send_locked(struct dp_plugin *p, size_t i, const uint8_t *msg, size_t len)
{
    struct rpc_status st;
    int r = rpc_stream_send_latest(p->watchers[i], msg, len);

    if (r == 0)
        return true;
    if (r != -EPIPE) {
        rpc_status_set(&st, RPC_UNAVAILABLE, "device list update could not be queued: %s",
                       strerror(-r));
        rpc_stream_finish(p->watchers[i], &st);
    }
    return false;
}

static int h_options(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                     struct rpc_status *st)
{
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

    (void)ctx;
    (void)req;
    (void)req_len;
    (void)st;
    o.pre_start_required = 0;
    o.get_preferred_allocation_available = 1;
    return pack_to(&o.base, resp);
}

static int h_prestart(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                      struct rpc_status *st)
{
    V1beta1__PreStartContainerRequest *in;
    V1beta1__PreStartContainerResponse out = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;

    (void)ctx;
    in = v1beta1__pre_start_container_request__unpack(NULL, req_len, req);
    if (!in) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "malformed PreStartContainerRequest");
        return 0;
    }
    v1beta1__pre_start_container_request__free_unpacked(in, NULL);
    return pack_to(&out.base, resp);
}

static int h_watch_open(void *ctx, const uint8_t *req, size_t req_len, struct rpc_stream *stream,
                        struct rpc_status *st)
{
    struct dp_plugin *p = ctx;
    const uint8_t *msg = NULL;
    size_t len = 0;
    int r;

    (void)req;
    (void)req_len;
    pthread_mutex_lock(&p->lock);
    if (p->n_watchers >= DP_MAX_WATCHERS) {
        rpc_status_set(st, RPC_RESOURCE_EXHAUSTED, "too many ListAndWatch streams (max %d)",
                       DP_MAX_WATCHERS);
        r = 0;
        goto out;
    }
    r = plugin_list_locked(p, &msg, &len);
    if (r < 0) {
        rpc_status_set(st, RPC_INTERNAL, "encoding the device list: %s", strerror(-r));
        r = 0;
        goto out;
    }
    p->watchers[p->n_watchers++] = stream;
    p->stats.list_and_watch_opens++;
    plugin_send_locked(p, p->n_watchers - 1, msg, len);
out:
    pthread_mutex_unlock(&p->lock);
    return r;
}

static void h_watch_closed(void *ctx, struct rpc_stream *stream, bool peer_cancelled)
{
    struct dp_plugin *p = ctx;
    bool found = false;

    (void)peer_cancelled;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->n_watchers; i++) {
        if (p->watchers[i] == stream) {
            p->watchers[i] = p->watchers[--p->n_watchers];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (found)
        rpc_stream_unref(stream);
}

static int h_preferred(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                       struct rpc_status *st)
{
    struct dp_plugin *p = ctx;
    V1beta1__PreferredAllocationRequest *in = NULL;
    V1beta1__PreferredAllocationResponse out = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    V1beta1__ContainerPreferredAllocationResponse *cr = NULL, **crp = NULL;
    char ***picked = NULL;
    struct dp_snapshot *s = NULL;
    struct error err = {0};
    size_t n = 0;
    int r = 0;

    in = v1beta1__preferred_allocation_request__unpack(NULL, req_len, req);
    if (!in) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "malformed PreferredAllocationRequest");
        goto out;
    }
    n = in->n_container_requests;
    cr = calloc(n ? n : 1, sizeof(*cr));
    crp = calloc(n ? n : 1, sizeof(*crp));
    picked = calloc(n ? n : 1, sizeof(*picked));
    if (!cr || !crp || !picked) {
        r = -ENOMEM;
        goto out;
    }
    s = plugin_snapshot(p);
    dp_snapshot_lock(s);
    for (size_t i = 0; i < n && r == 0; i++) {
        const V1beta1__ContainerPreferredAllocationRequest *c = in->container_requests[i];
        const struct model_resource *res = model_find_resource(s->model, p->resource_name);
        V1beta1__ContainerPreferredAllocationResponse init =
            V1BETA1__CONTAINER_PREFERRED_ALLOCATION_RESPONSE__INIT;

        if (!res || c->allocation_size < 0) {
            rpc_status_set(st, RPC_INVALID_ARGUMENT, "invalid allocation size %d",
                           (int)c->allocation_size);
            break;
        }
        r = model_preferred_allocation(
            s->model, res, (const char *const *)c->available_deviceids, c->n_available_deviceids,
            (const char *const *)c->must_include_deviceids, c->n_must_include_deviceids,
            (size_t)c->allocation_size, s->inv, &picked[i], &err);
        if (r < 0) {
            rpc_status_set(st, RPC_UNKNOWN, "%s", err.msg);
            r = 0;
            break;
        }
        cr[i] = init;
        cr[i].deviceids = picked[i];
        cr[i].n_deviceids = strv_length(picked[i]);
        crp[i] = &cr[i];
    }
    dp_snapshot_unlock(s);
    if (r == 0 && st->code == RPC_OK) {
        out.n_container_responses = n;
        out.container_responses = crp;
        r = pack_to(&out.base, resp);
    }
    pthread_mutex_lock(&p->lock);
    p->stats.preferred++;
    pthread_mutex_unlock(&p->lock);
out:
    for (size_t i = 0; picked && i < n; i++)
        strv_free(picked[i]);
    free(picked);
    free(cr);
    free(crp);
    dp_snapshot_unref(s);
    if (in)
        v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
    return r;
}

/* One ContainerAllocateResponse pointing into `a` (borrowed); arrays owned by `c`. */
struct alloc_msg {
    V1beta1__ContainerAllocateResponse c;
    V1beta1__ContainerAllocateResponse__EnvsEntry *envs, **envp;
    V1beta1__ContainerAllocateResponse__AnnotationsEntry *ann, **annp;
    V1beta1__Mount *mounts, **mountp;
    V1beta1__DeviceSpec *specs, **specp;
    V1beta1__CDIDevice *cdi, **cdip;
};

static void alloc_msg_release(struct alloc_msg *m)
{
    free(m->envs);
    free(m->envp);
    free(m->ann);
    free(m->annp);
    free(m->mounts);
    free(m->mountp);
    free(m->specs);
    free(m->specp);
    free(m->cdi);
    free(m->cdip);
}

#define ALLOC_ARRAYS(obj, ptrs, n)                                                                 \
    ((obj) = calloc((n) ? (n) : 1, sizeof(*(obj))),                                                \
     (ptrs) = calloc((n) ? (n) : 1, sizeof(*(ptrs))), (obj) && (ptrs))

static int alloc_msg_fill(struct alloc_msg *m, const struct model_alloc_response *a)
{
    V1beta1__ContainerAllocateResponse init = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;

    m->c = init;
    if (!ALLOC_ARRAYS(m->envs, m->envp, a->n_envs) ||
        !ALLOC_ARRAYS(m->ann, m->annp, a->n_annotations) ||
        !ALLOC_ARRAYS(m->mounts, m->mountp, a->n_mounts) ||
        !ALLOC_ARRAYS(m->specs, m->specp, a->n_devices) ||
        !ALLOC_ARRAYS(m->cdi, m->cdip, a->n_cdi_devices))
        return -ENOMEM;
    for (size_t i = 0; i < a->n_envs; i++) {
        V1beta1__ContainerAllocateResponse__EnvsEntry e =
            V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ENVS_ENTRY__INIT;
        e.key = a->envs[i].key;
        e.value = a->envs[i].value;
        m->envs[i] = e;
        m->envp[i] = &m->envs[i];
    }
    for (size_t i = 0; i < a->n_annotations; i++) {
        V1beta1__ContainerAllocateResponse__AnnotationsEntry e =
            V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ANNOTATIONS_ENTRY__INIT;
        e.key = a->annotations[i].key;
        e.value = a->annotations[i].value;
        m->ann[i] = e;
        m->annp[i] = &m->ann[i];
    }
    for (size_t i = 0; i < a->n_mounts; i++) {
        V1beta1__Mount e = V1BETA1__MOUNT__INIT;
        e.container_path = a->mounts[i].container_path;
        e.host_path = a->mounts[i].host_path;
        e.read_only = a->mounts[i].read_only;
        m->mounts[i] = e;
        m->mountp[i] = &m->mounts[i];
    }
    for (size_t i = 0; i < a->n_devices; i++) {
        V1beta1__DeviceSpec e = V1BETA1__DEVICE_SPEC__INIT;
        e.container_path = a->devices[i].container_path;
        e.host_path = a->devices[i].host_path;
        e.permissions = a->devices[i].permissions;
        m->specs[i] = e;
        m->specp[i] = &m->specs[i];
    }
    for (size_t i = 0; i < a->n_cdi_devices; i++) {
        V1beta1__CDIDevice e = V1BETA1__CDIDEVICE__INIT;
        e.name = a->cdi_devices[i];
        m->cdi[i] = e;
        m->cdip[i] = &m->cdi[i];
    }
    m->c.n_envs = a->n_envs;
    m->c.envs = m->envp;
    m->c.n_annotations = a->n_annotations;
    m->c.annotations = m->annp;
    m->c.n_mounts = a->n_mounts;
    m->c.mounts = m->mountp;
    m->c.n_devices = a->n_devices;
    m->c.devices = m->specp;
    m->c.n_cdi_devices = a->n_cdi_devices;
    m->c.cdi_devices = m->cdip;
    return 0;
}

/* Debug: the container's device IDs (bounded, as a request can hold many). */
static void log_allocate(const char *resource, const V1beta1__ContainerAllocateRequest *c)
{
    struct strbuf ids = STRBUF_INIT;

    ids.max_len = 1024;
    for (size_t i = 0; i < c->n_devices_ids; i++)
        if (strbuf_printf(&ids, "%s%s", i ? "," : "", c->devices_ids[i]) < 0)
            break;
    log_debug("allocate resource=%s count=%zu devices=%s", resource, c->n_devices_ids,
              strbuf_str(&ids));
    strbuf_release(&ids);
}

static int h_allocate(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                      struct rpc_status *st)
{
    struct dp_plugin *p = ctx;
    V1beta1__AllocateRequest *in = NULL;
    V1beta1__AllocateResponse out = V1BETA1__ALLOCATE_RESPONSE__INIT;
    struct model_alloc_response **allocs = NULL;
    struct alloc_msg *msgs = NULL;
    V1beta1__ContainerAllocateResponse **ptrs = NULL;
    struct dp_snapshot *s = NULL;
    struct error err = {0};
    size_t n = 0;
    int r = 0;

    in = v1beta1__allocate_request__unpack(NULL, req_len, req);
    if (!in) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "malformed AllocateRequest");
        goto out;
    }
    n = in->n_container_requests;
    allocs = calloc(n ? n : 1, sizeof(*allocs));
    msgs = calloc(n ? n : 1, sizeof(*msgs));
    ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    if (!allocs || !msgs || !ptrs) {
        r = -ENOMEM;
        goto out;
    }
    s = plugin_snapshot(p);
    dp_snapshot_lock(s);
    {
        /* The kubelet never asks for more IDs than the resource advertises: a request that
         * does is refused before any work (and before its IDs are copied around). */
        const struct model_resource *res = model_find_resource(s->model, p->resource_name);
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += in->container_requests[i]->n_devices_ids;
        if (res && total > res->n_devices)
            rpc_status_set(st, RPC_INVALID_ARGUMENT,
                           "invalid allocation request for \"%s\": %zu device IDs, more than "
                           "the %zu devices it advertises",
                           p->resource_name, total, res->n_devices);
    }
    for (size_t i = 0; i < n && st->code == RPC_OK; i++) {
        const V1beta1__ContainerAllocateRequest *c = in->container_requests[i];
        const struct model_resource *res = model_find_resource(s->model, p->resource_name);

        if (!res) {
            rpc_status_set(st, RPC_UNKNOWN, "resource %s is no longer served", p->resource_name);
            break;
        }
        r = model_allocate(s->model, res, (const char *const *)c->devices_ids, c->n_devices_ids,
                           &p->env, &allocs[i], &err);
        if (r < 0) {
            rpc_status_set(st, RPC_UNKNOWN, "%s", err.msg);
            r = 0;
            break;
        }
        r = alloc_msg_fill(&msgs[i], allocs[i]);
        if (r < 0)
            break;
        ptrs[i] = &msgs[i].c;
        if (log_enabled(LOG_LEVEL_DEBUG))
            log_allocate(p->resource_name, c);
    }
    dp_snapshot_unlock(s);
    if (r == 0 && st->code == RPC_OK) {
        out.n_container_responses = n;
        out.container_responses = ptrs;
        r = pack_to(&out.base, resp);
    }
    pthread_mutex_lock(&p->lock);
    if (r == 0 && st->code == RPC_OK)
        p->stats.allocates++;
    else
        p->stats.allocate_errors++;
    pthread_mutex_unlock(&p->lock);
out:
    for (size_t i = 0; allocs && msgs && i < n; i++) {
        model_alloc_response_free(allocs[i]);
        alloc_msg_release(&msgs[i]);
    }
    free(allocs);
    free(msgs);
    free(ptrs);
    dp_snapshot_unref(s);
    if (in)
        v1beta1__allocate_request__free_unpacked(in, NULL);
    return r;
}

int dp_plugin_new(const char *dir, const char *resource_name, struct dp_snapshot *snap,
                  const struct model_alloc_env *env, struct dp_plugin **ret, struct error *err)
{
    const struct model_resource *res = model_find_resource(snap->model, resource_name);
    struct dp_plugin *p = NULL;
    struct strbuf path = STRBUF_INIT;
    int r;

    if (!res)
        return error_set(err, -ENOENT, "resource %s is not in the model", resource_name);
    p = calloc(1, sizeof(*p));
    if (!p) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    pthread_mutex_init(&p->lock, NULL);
    r = strbuf_printf(&path, "%s/%s", dir, res->socket_name);
    if (r < 0) {
        error_set(err, r, "socket path for %s: %s", resource_name, strerror(-r));
        goto out;
    }
    p->socket_path = strbuf_take(&path);
    p->resource_name = str_dup(resource_name);
    if (!p->socket_path || !p->resource_name) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    p->endpoint = strrchr(p->socket_path, '/') + 1;
    if (env)
        p->env = *env;
    r = rpc_server_new(p->socket_path, &p->srv, err);
    if (r < 0)
        goto out;
    r = rpc_server_add_unary(p->srv, DP_METHOD("GetDevicePluginOptions"), h_options, p, err);
    if (r == 0)
        r = rpc_server_add_stream(p->srv, DP_METHOD("ListAndWatch"), h_watch_open, h_watch_closed,
                                  p, err);
    if (r == 0)
        r = rpc_server_add_unary(p->srv, DP_METHOD("GetPreferredAllocation"), h_preferred, p, err);
    if (r == 0)
        r = rpc_server_add_unary(p->srv, DP_METHOD("Allocate"), h_allocate, p, err);
    if (r == 0)
        r = rpc_server_add_unary(p->srv, DP_METHOD("PreStartContainer"), h_prestart, p, err);
    if (r < 0)
        goto out;
    p->snap = dp_snapshot_ref(snap);
    *ret = p;
    p = NULL;
out:
    strbuf_release(&path);
    dp_plugin_free(p);
    return r;
}

int dp_plugin_start(struct dp_plugin *p, struct error *err)
{
    const uint8_t *msg;
    size_t len;
    int r = rpc_server_start(p->srv, err);

    if (r < 0) {
        error_prefix(err, "serving %s on %s", p->resource_name, p->socket_path);
        return r;
    }
    p->started = true;
    /* encoded now, before the plugin registers: the kubelet's ListAndWatch, right after
     * Register, finds the list ready (a failure here is retried on connect) */
    pthread_mutex_lock(&p->lock);
    (void)plugin_list_locked(p, &msg, &len);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

void dp_plugin_free(struct dp_plugin *p)
{
    if (!p)
        return;
    /* ends every stream: the closed callbacks drop their references */
    rpc_server_free(p->srv);
    for (size_t i = 0; i < p->n_watchers; i++)
        rpc_stream_unref(p->watchers[i]);
    dp_snapshot_unref(p->snap);
    free(p->list);
    pthread_mutex_destroy(&p->lock);
    free(p->resource_name);
    free(p->socket_path);
    free(p);
}

static int plugin_push_locked(struct dp_plugin *p)
{
    const uint8_t *msg = NULL;
    size_t len = 0;
    int n = 0, r;

    r = plugin_list_locked(p, &msg, &len);
    if (r < 0)
        return r;
    for (size_t i = 0; i < p->n_watchers; i++)
        if (plugin_send_locked(p, i, msg, len))
            n++;
    p->stats.pushes++;
    return n;
}

int dp_plugin_set_snapshot(struct dp_plugin *p, struct dp_snapshot *snap, struct error *err)
{
    return dp_plugin_replace_snapshot(p, snap, true, err);
}

int dp_plugin_replace_snapshot(struct dp_plugin *p, struct dp_snapshot *snap, bool push,
                               struct error *err)
{
    struct dp_snapshot *old;
    int r = 0;

    if (!model_find_resource(snap->model, p->resource_name))
        return error_set(err, -ENOENT, "resource %s is not in the new model", p->resource_name);
    pthread_mutex_lock(&p->lock);
    old = p->snap;
    p->snap = dp_snapshot_ref(snap);
    plugin_list_drop_locked(p);
    if (push)
        r = plugin_push_locked(p);
    pthread_mutex_unlock(&p->lock);
    dp_snapshot_unref(old);
    return r < 0 ? error_set(err, r, "pushing the device list of %s: %s", p->resource_name,
                             strerror(-r))
                 : 0;
}

int dp_plugin_push(struct dp_plugin *p)
{
    int r;

    pthread_mutex_lock(&p->lock);
    r = plugin_push_locked(p);
    pthread_mutex_unlock(&p->lock);
    return r;
}

const char *dp_plugin_resource_name(const struct dp_plugin *p)
{
    return p->resource_name;
}

const char *dp_plugin_socket_path(const struct dp_plugin *p)
{
    return p->socket_path;
}

bool dp_plugin_socket_ok(const struct dp_plugin *p)
{
    return p->srv && rpc_server_socket_is_ours(p->srv);
}

const char *dp_plugin_endpoint(const struct dp_plugin *p)
{
    return p->endpoint;
}

size_t dp_plugin_n_watchers(struct dp_plugin *p)
{
    size_t n;

    pthread_mutex_lock(&p->lock);
    n = p->n_watchers;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void dp_plugin_stats(struct dp_plugin *p, struct dp_plugin_stats *ret)
{
    pthread_mutex_lock(&p->lock);
    *ret = p->stats;
    pthread_mutex_unlock(&p->lock);
}

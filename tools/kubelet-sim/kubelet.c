/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim gRPC side: serves Registration on <dir>/kubelet.sock, validates and dials
 * back during Register like kubelet >= 1.25 (GetDevicePluginOptions, then a ListAndWatch
 * thread per resource), simulates kubelet restarts, and serves pod-resources v1 List and
 * GetAllocatableResources. Only the tool's stdout loop (main.c) prints; this file doesn't. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "podresources/v1/api.pb-c.h"

#include "kubelet.h"

#define WATCH_POLL_MS 50

/* ---- endpoints ---- */

struct sim_endpoint *sim__endpoint_ref(struct sim_endpoint *ep)
{
    __atomic_add_fetch(&ep->refs, 1, __ATOMIC_SEQ_CST);
    return ep;
}

static void endpoint_stop(struct sim_endpoint *ep)
{
    pthread_mutex_lock(&ep->sim->lock);
    ep->stop = true;
    pthread_mutex_unlock(&ep->sim->lock);
    if (ep->thread_started) {
        pthread_join(ep->thread, NULL);
        ep->thread_started = false;
    }
}

void sim__endpoint_unref(struct sim_endpoint *ep)
{
    if (!ep || __atomic_sub_fetch(&ep->refs, 1, __ATOMIC_SEQ_CST) > 0)
        return;
    endpoint_stop(ep);
    rpc_client_free(ep->client);
    free(ep->resource);
    free(ep->socket_path);
    free(ep);
}

struct sim_endpoint *sim__endpoint_find(struct sim *sim, const char *resource)
{
    for (size_t i = 0; i < sim->n_eps; i++)
        if (str_eq(sim->eps[i]->resource, resource))
            return sim->eps[i];
    return NULL;
}

bool sim__wait_until(struct sim *sim, uint64_t deadline_ns)
{
    uint64_t now = time_now_ns();
    struct timespec ts;

    if (now >= deadline_ns)
        return false;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)((deadline_ns - now) / 1000000000u);
    ts.tv_nsec += (long)((deadline_ns - now) % 1000000000u);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&sim->cond, &sim->lock, &ts);
    return true;
}

/* Applies one ListAndWatch message if ep is still the resource's endpoint. */
static void watch_apply(struct sim_endpoint *ep, const V1beta1__ListAndWatchResponse *m)
{
    struct sim *sim = ep->sim;
    const char **ids = calloc(m->n_devices + 1, sizeof(*ids));
    bool *healthy = calloc(m->n_devices + 1, sizeof(*healthy));
    int64_t *numa = calloc(m->n_devices + 1, sizeof(*numa));
    struct sim_resource *r;

    if (!ids || !healthy || !numa)
        goto out;
    for (size_t i = 0; i < m->n_devices; i++) {
        const V1beta1__Device *d = m->devices[i];
        ids[i] = d->id;
        healthy[i] = str_eq(d->health, "Healthy"); /* exact match only, like kubelet */
        numa[i] = d->topology && d->topology->n_nodes > 0 ? d->topology->nodes[0]->id : -1;
    }
    pthread_mutex_lock(&sim->lock);
    r = sim_state_find_resource(&sim->state, ep->resource);
    if (r && sim__endpoint_find(sim, ep->resource) == ep && !ep->stop) {
        /* an over-long list is refused whole: the last good list stays */
        (void)sim_resource_set_devices(r, ids, healthy, numa, m->n_devices, NULL);
        r->is_connected = true;
        log_debug("ListAndWatch resource=%s devices=%zu healthy=%zu", r->name, r->n_devices,
                  sim_resource_allocatable(r));
        pthread_cond_broadcast(&sim->cond);
    }
    pthread_mutex_unlock(&sim->lock);
out:
    free(ids);
    free(healthy);
    free(numa);
}

static void *watch_main(void *arg)
{
    struct sim_endpoint *ep = arg;
    struct sim *sim = ep->sim;
    struct rpc_client_stream *s = NULL;
    struct sim_resource *r;
    bool stop = false;
    int rr;

    rr = rpc_client_stream_open(ep->client, SIM_M_LIST_AND_WATCH, NULL, 0, &s, NULL);
    while (rr >= 0 && !stop) {
        uint8_t *msg = NULL;
        size_t len = 0;
        rr = rpc_client_stream_next(s, WATCH_POLL_MS, &msg, &len, NULL, NULL);
        if (rr == 1) {
            V1beta1__ListAndWatchResponse *m =
                v1beta1__list_and_watch_response__unpack(NULL, len, msg);
            if (m)
                watch_apply(ep, m);
            v1beta1__list_and_watch_response__free_unpacked(m, NULL);
        } else if (rr == 0) {
            rr = -EPIPE; /* the plugin ended the stream */
        } else if (rr == -ETIMEDOUT) {
            rr = 0;
        }
        free(msg);
        pthread_mutex_lock(&sim->lock);
        stop = ep->stop;
        pthread_mutex_unlock(&sim->lock);
    }
    rpc_client_stream_close(s);
    /* the stream is gone: kubelet's PluginDisconnected marks every device unhealthy */
    pthread_mutex_lock(&sim->lock);
    r = sim_state_find_resource(&sim->state, ep->resource);
    if (r && sim__endpoint_find(sim, ep->resource) == ep && !ep->stop) {
        r->is_connected = false;
        sim_resource_mark_all_unhealthy(r);
        log_debug("ListAndWatch ended resource=%s", r->name);
        pthread_cond_broadcast(&sim->cond);
    }
    pthread_mutex_unlock(&sim->lock);
    return NULL;
}

/* Dials the plugin and asks for its options, as kubelet does inside Register. */
static int endpoint_connect(struct sim *sim, const char *resource, const char *socket_path,
                            struct sim_endpoint **ret, V1beta1__DevicePluginOptions **ret_opts,
                            struct error *err)
{
    struct sim_endpoint *ep = NULL;
    uint8_t *resp = NULL;
    size_t len = 0;
    struct stat st;
    int r;

    if (stat(socket_path, &st) < 0)
        return error_set(err, -errno, "failed to dial device plugin: '%s': %s", socket_path,
                         strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return error_set(err, -ENOTSOCK, "failed to dial device plugin: '%s' is not a socket",
                         socket_path);
    ep = calloc(1, sizeof(*ep));
    if (!ep)
        return error_set(err, -ENOMEM, "out of memory");
    ep->sim = sim;
    ep->refs = 1;
    ep->resource = str_dup(resource);
    ep->socket_path = str_dup(socket_path);
    if (!ep->resource || !ep->socket_path) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = rpc_client_new(socket_path, NULL, &ep->client, err);
    if (r < 0)
        goto out;
    r = rpc_client_unary(ep->client, SIM_M_OPTIONS, NULL, 0, sim->rpc_timeout_ms, &resp, &len, NULL,
                         err);
    if (r < 0) {
        error_prefix(err, "failed to dial device plugin");
        goto out;
    }
    *ret_opts = v1beta1__device_plugin_options__unpack(NULL, len, resp);
    if (!*ret_opts) {
        r = error_set(err, -EBADMSG,
                      "failed to dial device plugin: GetDevicePluginOptions "
                      "answer is not a DevicePluginOptions message");
        goto out;
    }
    *ret = ep;
    ep = NULL;
out:
    free(resp);
    sim__endpoint_unref(ep);
    return r;
}

/* Register: kubelet's checks, then the dial back; the plugin sees our error text. */
static int on_register(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                       struct rpc_status *st)
{
    struct sim *sim = ctx;
    V1beta1__RegisterRequest *m = v1beta1__register_request__unpack(NULL, req_len, req);
    V1beta1__DevicePluginOptions *opts = NULL;
    struct sim_endpoint *ep = NULL, *old = NULL;
    struct sim_resource *res;
    struct error e = {0};
    struct strbuf path = STRBUF_INIT;
    int r;

    if (!m) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "malformed RegisterRequest");
        return -EINVAL;
    }
    r = sim_validate_registration(m->version, m->resource_name, m->endpoint, &e);
    if (r >= 0)
        r = strbuf_printf(&path, "%s/%s", sim->dir, m->endpoint);
    if (r >= 0)
        r = endpoint_connect(sim, m->resource_name, strbuf_str(&path), &ep, &opts, &e);
    if (r < 0)
        goto out;

    pthread_mutex_lock(&sim->lock);
    r = sim_state_add_resource(&sim->state, m->resource_name, &res, &e);
    if (r >= 0 && !sim__endpoint_find(sim, m->resource_name) && sim->n_eps >= SIM_MAX_RESOURCES)
        r = error_set(&e, -ENOSPC, "too many plugins");
    if (r >= 0) {
        char *endpoint = str_dup(m->endpoint);
        free(res->endpoint);
        res->endpoint = endpoint;
        res->preferred_available = opts->get_preferred_allocation_available;
        res->pre_start_required = opts->pre_start_required;
        res->n_registrations++;
        old = sim__endpoint_find(sim, m->resource_name);
        if (old)
            old->stop = true; /* re-registration replaces the endpoint (facts §2.1 step 5) */
        for (size_t i = 0; i < sim->n_eps; i++)
            if (sim->eps[i] == old)
                sim->eps[i] = ep;
        if (!old)
            sim->eps[sim->n_eps++] = ep;
        sim__endpoint_ref(ep);
        if (pthread_create(&ep->thread, NULL, watch_main, ep) == 0)
            ep->thread_started = true;
        pthread_cond_broadcast(&sim->cond);
    }
    pthread_mutex_unlock(&sim->lock);
    if (r >= 0)
        log_debug("registered resource=%s endpoint=%s preferred=%d", m->resource_name, m->endpoint,
                  opts->get_preferred_allocation_available);
out:
    if (r < 0)
        rpc_status_set(st, RPC_UNKNOWN, "%s", e.msg);
    sim__endpoint_unref(old); /* joins its watcher: it is no longer current, changes nothing */
    sim__endpoint_unref(ep);
    v1beta1__device_plugin_options__free_unpacked(opts, NULL);
    v1beta1__register_request__free_unpacked(m, NULL);
    strbuf_release(&path);
    return r < 0 ? r : 0;
}

/* ---- pod-resources v1 ---- */

static int on_pod_list(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                       struct rpc_status *st)
{
    struct sim *sim = ctx;
    V1__ListPodResourcesResponse out = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
    V1__PodResources *pods = NULL, **pod_ptrs = NULL;
    V1__ContainerResources *ctrs = NULL, **ctr_ptrs = NULL;
    V1__ContainerDevices *cdevs = NULL, **cdev_ptrs = NULL;
    uint8_t *buf = NULL;
    size_t n = 0, n_ctr = 0, n_dev = 0, len;
    int r = 0;

    pthread_mutex_lock(&sim->lock);
    pods = calloc(sim->state.n_pods + 1, sizeof(*pods));
    pod_ptrs = calloc(sim->state.n_pods + 1, sizeof(*pod_ptrs));
    /* at most one container per request */
    ctrs = calloc(sim->state.n_pods * SIM_MAX_REQUESTS + 1, sizeof(*ctrs));
    ctr_ptrs = calloc(sim->state.n_pods * SIM_MAX_REQUESTS + 1, sizeof(*ctr_ptrs));
    cdevs = calloc(sim->state.n_pods * SIM_MAX_REQUESTS + 1, sizeof(*cdevs));
    cdev_ptrs = calloc(sim->state.n_pods * SIM_MAX_REQUESTS + 1, sizeof(*cdev_ptrs));
    if (!pods || !pod_ptrs || !ctrs || !ctr_ptrs || !cdevs || !cdev_ptrs) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < sim->state.n_pods; i++) {
        struct sim_pod *p = sim->state.pods[i];
        if (p->phase != SIM_POD_RUNNING)
            continue;
        v1__pod_resources__init(&pods[n]);
        pods[n].name = p->name;
        pods[n].namespace_ = "default";
        pods[n].containers = &ctr_ptrs[n_ctr];
        /* one entry per container, in the order the requests name them; allocs[j] answers
         * requests[j] */
        for (size_t c = 0; c < p->n_requests; c++) {
            const char *name = sim_request_container(&p->requests[c]);
            bool seen = false;
            for (size_t k = 0; k < c && !seen; k++)
                seen = strcmp(sim_request_container(&p->requests[k]), name) == 0;
            if (seen)
                continue;
            V1__ContainerResources *ct = &ctrs[n_ctr];
            v1__container_resources__init(ct);
            ct->name = (char *)name;
            ct->devices = &cdev_ptrs[n_dev];
            for (size_t j = 0; j < p->n_allocs && j < p->n_requests; j++) {
                if (strcmp(sim_request_container(&p->requests[j]), name) != 0)
                    continue;
                v1__container_devices__init(&cdevs[n_dev]);
                cdevs[n_dev].resource_name = p->allocs[j].resource;
                cdevs[n_dev].device_ids = p->allocs[j].device_ids;
                cdevs[n_dev].n_device_ids = strv_length(p->allocs[j].device_ids);
                cdev_ptrs[n_dev] = &cdevs[n_dev];
                n_dev++;
                ct->n_devices++;
            }
            ctr_ptrs[n_ctr++] = ct;
            pods[n].n_containers++;
        }
        pod_ptrs[n] = &pods[n];
        n++;
    }
    out.pod_resources = pod_ptrs;
    out.n_pod_resources = n;
    len = v1__list_pod_resources_response__get_packed_size(&out);
    buf = malloc(len + 1);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    v1__list_pod_resources_response__pack(&out, buf);
    r = strbuf_append(resp, (const char *)buf, len);
out:
    pthread_mutex_unlock(&sim->lock);
    if (r < 0)
        rpc_status_set(st, RPC_INTERNAL, "cannot build the pod list: %s", strerror(-r));
    free(buf);
    free(pods);
    free(pod_ptrs);
    free(ctrs);
    free(ctr_ptrs);
    free(cdevs);
    free(cdev_ptrs);
    return r;
}

static int on_pod_allocatable(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                              struct rpc_status *st)
{
    struct sim *sim = ctx;
    V1__AllocatableResourcesResponse out = V1__ALLOCATABLE_RESOURCES_RESPONSE__INIT;
    V1__ContainerDevices cdevs[SIM_MAX_RESOURCES], *cdev_ptrs[SIM_MAX_RESOURCES];
    char **ids[SIM_MAX_RESOURCES] = {NULL};
    uint8_t *buf = NULL;
    size_t n = 0, len;
    int r = 0;

    pthread_mutex_lock(&sim->lock);
    for (size_t i = 0; i < sim->state.n_resources && r >= 0; i++) {
        const struct sim_resource *res = &sim->state.resources[i];
        ids[n] = strv_new();
        for (size_t j = 0; ids[n] && j < res->n_devices && r >= 0; j++)
            if (res->devices[j].is_healthy)
                r = strv_push(&ids[n], res->devices[j].id);
        if (!ids[n] || r < 0) {
            r = -ENOMEM;
            break;
        }
        v1__container_devices__init(&cdevs[n]);
        cdevs[n].resource_name = res->name;
        cdevs[n].device_ids = ids[n];
        cdevs[n].n_device_ids = strv_length(ids[n]);
        cdev_ptrs[n] = &cdevs[n];
        n++;
    }
    pthread_mutex_unlock(&sim->lock); /* ids are copies; names live as long as sim */
    if (r >= 0) {
        out.devices = cdev_ptrs;
        out.n_devices = n;
        len = v1__allocatable_resources_response__get_packed_size(&out);
        buf = malloc(len + 1);
        if (!buf)
            r = -ENOMEM;
        else
            v1__allocatable_resources_response__pack(&out, buf);
    }
    if (r >= 0)
        r = strbuf_append(resp, (const char *)buf, len);
    if (r < 0)
        rpc_status_set(st, RPC_INTERNAL, "cannot build the allocatable list: %s", strerror(-r));
    for (size_t i = 0; i < SIM_MAX_RESOURCES; i++)
        strv_free(ids[i]);
    free(buf);
    return r;
}

/* ---- servers ---- */

struct unary_method {
    const char *path;
    rpc_unary_fn fn;
};

/* A started server on socket_path with the given unary methods; *ret written on success. */
static int server_start(struct sim *sim, const char *socket_path,
                        const struct unary_method *methods, size_t n, struct rpc_server **ret,
                        struct error *err)
{
    struct rpc_server *srv = NULL;
    int r;

    r = rpc_server_new(socket_path, &srv, err);
    for (size_t i = 0; i < n && r >= 0; i++)
        r = rpc_server_add_unary(srv, methods[i].path, methods[i].fn, sim, err);
    if (r >= 0)
        r = rpc_server_start(srv, err);
    if (r < 0) {
        rpc_server_free(srv);
        return r;
    }
    *ret = srv;
    return 0;
}

static int registration_start(struct sim *sim, struct error *err)
{
    static const struct unary_method methods[] = {{SIM_M_REGISTER, on_register}};

    return server_start(sim, sim->kubelet_socket, methods, GS_ARRAY_SIZE(methods),
                        &sim->registration, err);
}

static int pod_resources_start(struct sim *sim, struct error *err)
{
    static const struct unary_method methods[] = {
        {SIM_M_POD_LIST, on_pod_list},
        {SIM_M_POD_ALLOCATABLE, on_pod_allocatable},
    };

    return server_start(sim, sim->pod_resources_socket, methods, GS_ARRAY_SIZE(methods),
                        &sim->pod_resources, err);
}

/* Takes every endpoint out of the table and drops it (joining its watcher). */
static void endpoints_drop_all(struct sim *sim)
{
    struct sim_endpoint *eps[SIM_MAX_RESOURCES];
    size_t n;

    pthread_mutex_lock(&sim->lock);
    n = sim->n_eps;
    memcpy(eps, sim->eps, n * sizeof(eps[0]));
    sim->n_eps = 0;
    for (size_t i = 0; i < n; i++)
        eps[i]->stop = true;
    pthread_mutex_unlock(&sim->lock);
    for (size_t i = 0; i < n; i++)
        sim__endpoint_unref(eps[i]);
}

/* A new kubelet deletes the sockets in its directory (facts §2.4); the checkpoint stays. */
static void remove_sockets(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;

    if (!d)
        return;
    for (de = readdir(d); de; de = readdir(d)) {
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode))
            (void)unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
}

int sim__restart(struct sim *sim, int timeout_ms, uint64_t *ret_ms, struct error *err)
{
    unsigned before[SIM_MAX_RESOURCES];
    uint64_t start = time_now_ns(), deadline = start + (uint64_t)timeout_ms * 1000000u;
    size_t n, missing = 0;
    const char *first_missing = NULL;
    int r;

    rpc_server_free(sim->registration); /* stops serving and removes kubelet.sock */
    sim->registration = NULL;
    endpoints_drop_all(sim);
    pthread_mutex_lock(&sim->lock);
    n = sim->state.n_resources;
    for (size_t i = 0; i < n; i++) {
        struct sim_resource *res = &sim->state.resources[i];
        before[i] = res->n_registrations;
        /* from the checkpoint: the resource is known but has no devices until it registers */
        (void)sim_resource_set_devices(res, NULL, NULL, NULL, 0, NULL);
        res->is_connected = false;
    }
    pthread_mutex_unlock(&sim->lock);
    remove_sockets(sim->dir);
    r = registration_start(sim, err);
    if (r < 0) {
        error_prefix(err, "restart");
        return r;
    }
    pthread_mutex_lock(&sim->lock);
    for (;;) {
        missing = 0;
        for (size_t i = 0; i < n; i++) {
            const struct sim_resource *res = &sim->state.resources[i];
            if (res->n_registrations == before[i] || !res->is_connected) {
                if (!missing++)
                    first_missing = res->name;
            }
        }
        if (missing == 0 || !sim__wait_until(sim, deadline))
            break;
    }
    if (missing)
        r = error_set(err, -ETIMEDOUT,
                      "restart: %zu resource(s) did not register again within "
                      "%d ms (first: \"%s\"); is the plugin watching for kubelet.sock?",
                      missing, timeout_ms, first_missing);
    pthread_mutex_unlock(&sim->lock);
    if (r >= 0)
        r = sim__dra_restart(sim, deadline, err); /* plugins_registry is rescanned as well */
    if (r >= 0 && ret_ms)
        *ret_ms = (time_now_ns() - start) / 1000000u;
    return r;
}

int sim_new(const struct sim_opts *opts, struct sim **ret, struct error *err)
{
    struct sim *sim = NULL;
    struct strbuf sb = STRBUF_INIT;
    pthread_condattr_t ca;
    int r;

    if (mkdir(opts->dir, 0750) < 0 && errno != EEXIST)
        return error_set(err, -errno, "cannot create device plugin directory '%s': %s", opts->dir,
                         strerror(errno));
    sim = calloc(1, sizeof(*sim));
    if (!sim)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&sim->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sim->cond, &ca);
    pthread_condattr_destroy(&ca);
    sim->rpc_timeout_ms = opts->rpc_timeout_ms > 0 ? opts->rpc_timeout_ms : 10000;
    sim->dir = str_dup(opts->dir);
    r = strbuf_printf(&sb, "%s/kubelet.sock", opts->dir);
    sim->kubelet_socket = strbuf_take(&sb);
    sim->pod_resources_socket = str_dup(opts->pod_resources_socket);
    if (r < 0 || !sim->dir || !sim->kubelet_socket ||
        (opts->pod_resources_socket && !sim->pod_resources_socket)) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = registration_start(sim, err);
    if (r >= 0 && sim->pod_resources_socket)
        r = pod_resources_start(sim, err);
    if (r >= 0)
        r = sim__dra_start(sim, opts, err);
    if (r < 0)
        goto out;
    *ret = sim;
    sim = NULL;
out:
    sim_free(sim);
    strbuf_release(&sb);
    return r;
}

void sim_free(struct sim *sim)
{
    if (!sim)
        return;
    sim__dra_stop(sim);
    rpc_server_free(sim->registration);
    rpc_server_free(sim->pod_resources);
    endpoints_drop_all(sim);
    sim_state_release(&sim->state);
    pthread_cond_destroy(&sim->cond);
    pthread_mutex_destroy(&sim->lock);
    free(sim->dir);
    free(sim->kubelet_socket);
    free(sim->pod_resources_socket);
    free(sim);
}

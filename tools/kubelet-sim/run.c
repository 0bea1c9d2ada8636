/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim commands: runs one parsed command against the simulator and writes its answer
 * (text, or one JSON object per command). Admission follows kubelet's device manager:
 * available = healthy and unallocated, GetPreferredAllocation when offered and there is a
 * choice, then Allocate; outcomes Running, Pending (Insufficient <resource>) or Failed
 * UnexpectedAdmissionError with kubelet's message. RPCs run without sim->lock held. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "deviceplugin/v1beta1/api.pb-c.h"

#include "kubelet.h"
#include "output.h"

/* One resource request of a pod being admitted: what was seen under the lock. */
struct admit_item {
    const char *resource; /* borrowed from the command/pod for the call */
    unsigned count;
    struct sim_endpoint *ep; /* referenced */
    char **available;
    bool preferred_available;
    bool pre_start_required;
};

/* "rpc error: code = <Name> desc = <message>", as grpc-go prints a status. */
static void rpc_error_text(const struct rpc_status *st, const struct error *e, struct strbuf *sb)
{
    if (st->code != RPC_OK)
        strbuf_printf(sb, "rpc error: code = %s desc = %s", rpc_code_name(st->code), st->message);
    else
        strbuf_puts(sb, e->msg);
}

static int call(struct sim *sim, struct sim_endpoint *ep, const char *method,
                const ProtobufCMessage *req, uint8_t **ret, size_t *ret_len, struct strbuf *why)
{
    struct rpc_status st = {0};
    struct error e = {0};
    size_t len = protobuf_c_message_get_packed_size(req);
    uint8_t *buf = malloc(len + 1);
    int r;

    if (!buf)
        return -ENOMEM;
    protobuf_c_message_pack(req, buf);
    r = rpc_client_unary(ep->client, method, buf, len, sim->rpc_timeout_ms, ret, ret_len, &st, &e);
    if (r < 0)
        rpc_error_text(&st, &e, why);
    free(buf);
    return r;
}

static int preferred(struct sim *sim, struct admit_item *it, char ***ret, struct strbuf *why)
{
    V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    V1beta1__ContainerPreferredAllocationRequest c =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    V1beta1__ContainerPreferredAllocationRequest *cp = &c;
    V1beta1__PreferredAllocationResponse *resp = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    char **v = NULL;
    int r;

    c.available_deviceids = it->available;
    c.n_available_deviceids = strv_length(it->available);
    c.allocation_size = (int32_t)it->count;
    req.container_requests = &cp;
    req.n_container_requests = 1;
    r = call(sim, it->ep, SIM_M_PREFERRED, &req.base, &data, &len, why);
    if (r < 0) {
        /* kubelet's wording (facts §2.6) */
        struct strbuf sb = STRBUF_INIT;
        strbuf_printf(&sb, "device plugin GetPreferredAllocation rpc failed with err: %s",
                      strbuf_str(why));
        strbuf_reset(why);
        strbuf_puts(why, strbuf_str(&sb));
        strbuf_release(&sb);
        goto out;
    }
    resp = v1beta1__preferred_allocation_response__unpack(NULL, len, data);
    v = strv_new();
    if (!resp || !v) {
        strbuf_puts(why, resp ? "out of memory" : "malformed PreferredAllocationResponse");
        r = -EBADMSG;
        goto out;
    }
    for (size_t i = 0;
         resp->n_container_responses > 0 && i < resp->container_responses[0]->n_deviceids && r >= 0;
         i++)
        r = strv_push(&v, resp->container_responses[0]->deviceids[i]);
    if (r < 0)
        goto out;
    *ret = v;
    v = NULL;
out:
    strv_free(v);
    v1beta1__preferred_allocation_response__free_unpacked(resp, NULL);
    free(data);
    return r;
}

static int kv_strv(char ***v, const char *k, const char *val)
{
    struct strbuf sb = STRBUF_INIT;
    int r = strbuf_printf(&sb, "%s=%s", k ? k : "", val ? val : "");

    if (r >= 0)
        r = strv_push(v, strbuf_str(&sb));
    strbuf_release(&sb);
    return r;
}

/* Flattens container_responses[0] into a. */
static int alloc_from_response(const V1beta1__ContainerAllocateResponse *c, struct sim_alloc *a)
{
    struct strbuf sb = STRBUF_INIT;
    int r = 0;

    a->envs = strv_new();
    a->annotations = strv_new();
    a->mounts = strv_new();
    a->devices = strv_new();
    a->cdi_devices = strv_new();
    if (!a->envs || !a->annotations || !a->mounts || !a->devices || !a->cdi_devices)
        return -ENOMEM;
    for (size_t i = 0; i < c->n_envs && r >= 0; i++)
        r = kv_strv(&a->envs, c->envs[i]->key, c->envs[i]->value);
    for (size_t i = 0; i < c->n_annotations && r >= 0; i++)
        r = kv_strv(&a->annotations, c->annotations[i]->key, c->annotations[i]->value);
    for (size_t i = 0; i < c->n_mounts && r >= 0; i++) {
        strbuf_reset(&sb);
        r = strbuf_printf(&sb, "%s:%s%s", c->mounts[i]->host_path, c->mounts[i]->container_path,
                          c->mounts[i]->read_only ? ":ro" : "");
        if (r >= 0)
            r = strv_push(&a->mounts, strbuf_str(&sb));
    }
    for (size_t i = 0; i < c->n_devices && r >= 0; i++) {
        strbuf_reset(&sb);
        r = strbuf_printf(&sb, "%s:%s:%s", c->devices[i]->host_path, c->devices[i]->container_path,
                          c->devices[i]->permissions);
        if (r >= 0)
            r = strv_push(&a->devices, strbuf_str(&sb));
    }
    for (size_t i = 0; i < c->n_cdi_devices && r >= 0; i++)
        r = strv_push(&a->cdi_devices, c->cdi_devices[i]->name);
    strbuf_release(&sb);
    return r;
}

/* Chooses devices and calls Allocate (and PreStartContainer when required) for one request. */
static int allocate_one(struct sim *sim, struct admit_item *it, struct sim_alloc *a,
                        struct strbuf *why)
{
    V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest *cp = &c;
    V1beta1__AllocateResponse *resp = NULL;
    struct error e = {0};
    char **pref = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    int r = 0;

    /* asked only when offered and there is a choice to make (facts §2.6) */
    if (it->preferred_available && strv_length(it->available) > it->count)
        r = preferred(sim, it, &pref, why);
    if (r >= 0)
        r = sim_choose_devices(it->available, pref, it->count, &a->device_ids, &e);
    if (r < 0) {
        if (e.code)
            strbuf_puts(why, e.msg);
        goto out;
    }
    a->resource = str_dup(it->resource);
    c.devices_ids = a->device_ids;
    c.n_devices_ids = strv_length(a->device_ids);
    req.container_requests = &cp;
    req.n_container_requests = 1;
    r = call(sim, it->ep, SIM_M_ALLOCATE, &req.base, &data, &len, why);
    if (r < 0)
        goto out;
    resp = v1beta1__allocate_response__unpack(NULL, len, data);
    if (!resp || resp->n_container_responses == 0) {
        strbuf_printf(why, "%s",
                      resp ? "no containers return in allocation response"
                           : "malformed AllocateResponse");
        r = -EBADMSG;
        goto out;
    }
    r = alloc_from_response(resp->container_responses[0], a);
    if (r < 0) {
        strbuf_puts(why, "out of memory");
        goto out;
    }
    if (it->pre_start_required) {
        V1beta1__PreStartContainerRequest ps = V1BETA1__PRE_START_CONTAINER_REQUEST__INIT;
        uint8_t *pdata = NULL;
        size_t plen = 0;
        ps.devices_ids = a->device_ids;
        ps.n_devices_ids = c.n_devices_ids;
        r = call(sim, it->ep, SIM_M_PRE_START, &ps.base, &pdata, &plen, why);
        free(pdata);
    }
out:
    v1beta1__allocate_response__free_unpacked(resp, NULL);
    free(data);
    strv_free(pref);
    return r;
}

static void items_release(struct admit_item *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sim__endpoint_unref(items[i].ep);
        strv_free(items[i].available);
    }
}

/* Snapshot under the lock. Returns the first resource without room (static to the pod) or
 * NULL when everything fits; -ENOMEM through *ret_r. */
static const char *admit_snapshot(struct sim *sim, const struct sim_pod *p,
                                  struct admit_item *items, size_t *ret_n, int *ret_r)
{
    for (size_t i = 0; i < p->n_requests; i++) {
        const struct sim_request *rq = &p->requests[i];
        struct sim_resource *res = sim_state_find_resource(&sim->state, rq->resource);
        struct sim_endpoint *ep = sim__endpoint_find(sim, rq->resource);
        struct admit_item *it = &items[*ret_n];
        if (!res || !ep || !res->is_connected)
            return rq->resource;
        memset(it, 0, sizeof(*it));
        it->resource = rq->resource;
        it->count = rq->count;
        it->preferred_available = res->preferred_available;
        it->pre_start_required = res->pre_start_required;
        if (sim_state_available(&sim->state, res, &it->available) < 0) {
            *ret_r = -ENOMEM;
            return NULL;
        }
        it->ep = sim__endpoint_ref(ep);
        (*ret_n)++;
        /* containers of one pod asking for the same resource need room for all of them */
        size_t need = 0;
        for (size_t j = 0; j <= i; j++)
            if (strcmp(p->requests[j].resource, rq->resource) == 0)
                need += p->requests[j].count;
        if (strv_length(it->available) < need)
            return rq->resource;
    }
    return NULL;
}

/* Devices given to one container are not available to the next (the kubelet allocates a
 * pod's containers in turn): drops ids from later items of the same resource. */
static void take_from_later(struct admit_item *items, size_t from, size_t n, const char *resource,
                            char *const *ids)
{
    for (size_t k = from; k < n; k++) {
        if (strcmp(items[k].resource, resource) != 0)
            continue;
        size_t w = 0;
        for (size_t r = 0; items[k].available[r]; r++) {
            if (strv_contains(ids, items[k].available[r]))
                free(items[k].available[r]);
            else
                items[k].available[w++] = items[k].available[r];
        }
        items[k].available[w] = NULL;
    }
}

/* Admits (or retries) one pod already in the state. */
static int admit(struct sim *sim, const char *pod_name)
{
    struct admit_item items[SIM_MAX_REQUESTS];
    struct sim_alloc allocs[SIM_MAX_REQUESTS];
    struct strbuf why = STRBUF_INIT, msg = STRBUF_INIT;
    const char *insufficient;
    struct sim_pod *p;
    size_t n = 0, n_allocs = 0;
    int r = 0;

    memset(allocs, 0, sizeof(allocs));
    pthread_mutex_lock(&sim->lock);
    p = sim_state_find_pod(&sim->state, pod_name);
    insufficient = p ? admit_snapshot(sim, p, items, &n, &r) : NULL;
    if (p && insufficient) {
        strbuf_printf(&msg, "Insufficient %s", insufficient);
        r = sim_pod_set_phase(p, SIM_POD_PENDING, strbuf_str(&msg), NULL);
    }
    pthread_mutex_unlock(&sim->lock);
    if (!p || insufficient || r < 0)
        goto out;

    for (size_t i = 0; i < n && r >= 0; i++) {
        r = allocate_one(sim, &items[i], &allocs[i], &why);
        n_allocs = i + 1;
        if (r >= 0)
            take_from_later(items, i + 1, n, items[i].resource, allocs[i].device_ids);
    }
    strbuf_reset(&msg);
    if (r < 0)
        strbuf_printf(&msg, "Allocate failed due to %s, which is unexpected", strbuf_str(&why));

    pthread_mutex_lock(&sim->lock);
    p = sim_state_find_pod(&sim->state, pod_name);
    if (p && r >= 0) {
        r = sim_pod_set_phase(p, SIM_POD_RUNNING, NULL, NULL);
        for (size_t i = 0; i < n_allocs && r >= 0; i++) {
            p->allocs[i] = allocs[i];
            memset(&allocs[i], 0, sizeof(allocs[i]));
        }
        if (r >= 0)
            p->n_allocs = n_allocs;
    } else if (p) {
        r = sim_pod_set_phase(p, SIM_POD_FAILED, "UnexpectedAdmissionError", strbuf_str(&msg));
    }
    pthread_cond_broadcast(&sim->cond);
    pthread_mutex_unlock(&sim->lock);
out:
    for (size_t i = 0; i < n_allocs; i++)
        sim_alloc_release(&allocs[i]);
    items_release(items, n);
    strbuf_release(&why);
    strbuf_release(&msg);
    return r;
}

/* ---- answers ---- */

/* One JSON line; o is consumed. Every command must answer, so a failed encoding (only out
 * of memory or a NULL from json_pack) still gives a line. */
void sim__emit_json(json_t *o, struct strbuf *out)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

    strbuf_puts(out, s ? s : "{\"ok\":false,\"error\":\"cannot encode the answer\"}");
    strbuf_putc(out, '\n');
    free(s);
    json_decref(o);
}

static const char *cmd_name(enum sim_cmd_kind k)
{
    static const char *const names[] = {
        "wait",        "wait-resources", "capacity", "devices", "admit", "delete",   "pods",
        "pod",         "schedule",       "restart",  "help",    "quit",  "dra-wait", "dra-drivers",
        "dra-prepare", "dra-unprepare"};
    return (size_t)k < GS_ARRAY_SIZE(names) ? names[k] : "?";
}

void sim_format_error(const struct error *err, const char *cmd, bool json, struct strbuf *out)
{
    if (json)
        sim__emit_json(json_pack("{s:b, s:s?, s:s}", "ok", false, "cmd", cmd, "error", err->msg),
                       out);
    else
        strbuf_printf(out, "error: %s\n", err->msg);
}

static int run_wait(struct sim *sim, const struct sim_cmd *c, bool json, struct strbuf *out,
                    struct error *err)
{
    int timeout_ms = c->timeout_ms >= 0 ? c->timeout_ms : 10000;
    uint64_t start = time_now_ns(), deadline = start + (uint64_t)timeout_ms * 1000000u;
    size_t have = 0;
    bool ok;

    pthread_mutex_lock(&sim->lock);
    for (;;) {
        const struct sim_resource *res = NULL;
        if (c->kind == SIM_CMD_WAIT) {
            res = sim_state_find_resource(&sim->state, c->name);
            have = res ? sim_resource_allocatable(res) : 0;
            ok = res && res->n_updates > 0 && sim_cmp_holds(c->cmp, have, c->count);
        } else {
            have = 0;
            for (size_t i = 0; i < sim->state.n_resources; i++)
                have += sim->state.resources[i].is_connected;
            ok = have >= c->count;
        }
        if (ok || !sim__wait_until(sim, deadline))
            break;
    }
    pthread_mutex_unlock(&sim->lock);
    if (!ok && c->kind == SIM_CMD_WAIT)
        return error_set(err, -ETIMEDOUT,
                         "timed out after %d ms waiting for \"%s\" allocatable "
                         "%s %u (now %zu)",
                         timeout_ms, c->name, sim_cmp_str(c->cmp), c->count, have);
    if (!ok)
        return error_set(err, -ETIMEDOUT,
                         "timed out after %d ms waiting for %u resources to "
                         "register and list devices (now %zu)",
                         timeout_ms, c->count, have);
    if (json)
        sim__emit_json(json_pack("{s:b, s:s, s:s?, s:I, s:I}", "ok", true, "cmd", cmd_name(c->kind),
                                 "resource", c->name, "value", (json_int_t)have, "waited_ms",
                                 (json_int_t)((time_now_ns() - start) / 1000000u)),
                       out);
    else
        strbuf_printf(out, "ok: %s%s%zu after %" PRIu64 " ms\n", c->name ? c->name : "resources",
                      c->name ? " allocatable " : " registered ", have,
                      (time_now_ns() - start) / 1000000u);
    return 0;
}

static void pods_answer(struct sim *sim, const char *cmd, const char *only, bool details,
                        uint64_t took_ms, bool json, struct strbuf *out)
{
    json_t *a = json_array();

    pthread_mutex_lock(&sim->lock);
    for (size_t i = 0; i < sim->state.n_pods; i++) {
        const struct sim_pod *p = sim->state.pods[i];
        if (only && !str_eq(p->name, only))
            continue;
        if (json)
            json_array_append_new(a, sim_out_pod_json(p, details));
        else
            sim_out_pod_text(p, details, out);
    }
    pthread_mutex_unlock(&sim->lock);
    if (json && only)
        sim__emit_json(json_pack("{s:b, s:s, s:O, s:I}", "ok", true, "cmd", cmd, "pod",
                                 json_array_get(a, 0), "took_ms", (json_int_t)took_ms),
                       out);
    else if (json)
        sim__emit_json(json_pack("{s:b, s:s, s:O, s:I}", "ok", true, "cmd", cmd, "pods", a,
                                 "took_ms", (json_int_t)took_ms),
                       out);
    else if (!only && a && json_array_size(a) == 0 && out->len == 0)
        strbuf_puts(out, "(no pods)\n");
    json_decref(a);
}

static int run_admit(struct sim *sim, const struct sim_cmd *c, bool json, struct strbuf *out,
                     struct error *err)
{
    uint64_t start = time_now_ns();
    struct sim_pod *p = sim_pod_new(c->name, c->requests, c->n_requests, err);
    int r;

    if (!p)
        return -ENOMEM;
    pthread_mutex_lock(&sim->lock);
    r = sim_state_add_pod(&sim->state, &p, err);
    pthread_mutex_unlock(&sim->lock);
    sim_pod_free(p);
    if (r < 0)
        return r;
    r = admit(sim, c->name);
    if (r < 0)
        return error_set(err, r, "admit \"%s\": %s", c->name, strerror(-r));
    pods_answer(sim, "admit", c->name, false, (time_now_ns() - start) / 1000000u, json, out);
    return 0;
}

static int run_schedule(struct sim *sim, bool json, struct strbuf *out, struct error *err)
{
    uint64_t start = time_now_ns();
    char **pending = strv_new();
    int r = pending ? 0 : -ENOMEM;

    pthread_mutex_lock(&sim->lock);
    for (size_t i = 0; i < sim->state.n_pods && r >= 0; i++)
        if (sim->state.pods[i]->phase == SIM_POD_PENDING)
            r = strv_push(&pending, sim->state.pods[i]->name);
    pthread_mutex_unlock(&sim->lock);
    for (size_t i = 0; r >= 0 && pending[i]; i++)
        r = admit(sim, pending[i]);
    strv_free(pending);
    if (r < 0)
        return error_set(err, r, "schedule: %s", strerror(-r));
    pods_answer(sim, "schedule", NULL, false, (time_now_ns() - start) / 1000000u, json, out);
    return 0;
}

static int run_capacity(struct sim *sim, const struct sim_cmd *c, bool json, struct strbuf *out,
                        struct error *err)
{
    const struct sim_resource *res = NULL;
    int r = 0;

    pthread_mutex_lock(&sim->lock);
    if (c->kind == SIM_CMD_DEVICES) {
        res = sim_state_find_resource(&sim->state, c->name);
        if (!res)
            r = error_set(err, -ENOENT, "no resource \"%s\" registered; see \"capacity\"", c->name);
        else if (json)
            sim__emit_json(json_pack("{s:b, s:s, s:s, s:o}", "ok", true, "cmd", "devices",
                                     "resource", c->name, "devices",
                                     sim_out_devices_json(&sim->state, res)),
                           out);
        else
            sim_out_devices_text(&sim->state, res, out);
    } else if (json) {
        sim__emit_json(json_pack("{s:b, s:s, s:o}", "ok", true, "cmd", "capacity", "resources",
                                 sim_out_capacity_json(&sim->state)),
                       out);
    } else {
        sim_out_capacity_text(&sim->state, out);
    }
    pthread_mutex_unlock(&sim->lock);
    return r;
}

static int run_simple(struct sim *sim, const struct sim_cmd *c, bool json, struct strbuf *out,
                      struct error *err)
{
    uint64_t ms = 0;
    int r = 0;

    switch (c->kind) {
    case SIM_CMD_DELETE:
        pthread_mutex_lock(&sim->lock);
        r = sim_state_delete_pod(&sim->state, c->name);
        pthread_cond_broadcast(&sim->cond);
        pthread_mutex_unlock(&sim->lock);
        if (r < 0)
            return error_set(err, r, "no pod \"%s\"", c->name);
        break;
    case SIM_CMD_RESTART:
        r = sim__restart(sim, c->timeout_ms >= 0 ? c->timeout_ms : 10000, &ms, err);
        if (r < 0)
            return r;
        break;
    case SIM_CMD_HELP:
        if (!json)
            strbuf_puts(out, sim_cmd_help());
        break;
    default:
        break;
    }
    if (json)
        sim__emit_json(json_pack("{s:b, s:s, s:s?, s:I}", "ok", true, "cmd", cmd_name(c->kind),
                                 c->kind == SIM_CMD_HELP ? "help" : "pod",
                                 c->kind == SIM_CMD_HELP ? sim_cmd_help() : c->name, "took_ms",
                                 (json_int_t)ms),
                       out);
    else if (c->kind == SIM_CMD_DELETE)
        strbuf_printf(out, "pod/%s deleted\n", c->name);
    else if (c->kind == SIM_CMD_RESTART)
        strbuf_printf(
            out, "ok: kubelet restarted, every plugin registered again in %" PRIu64 " ms\n", ms);
    else if (c->kind == SIM_CMD_QUIT)
        strbuf_puts(out, "bye\n");
    return 0;
}

int sim_run(struct sim *sim, const struct sim_cmd *c, bool json, struct strbuf *out)
{
    struct error err = {0};
    int r;

    switch (c->kind) {
    case SIM_CMD_WAIT:
    case SIM_CMD_WAIT_RESOURCES:
        r = run_wait(sim, c, json, out, &err);
        break;
    case SIM_CMD_CAPACITY:
    case SIM_CMD_DEVICES:
        r = run_capacity(sim, c, json, out, &err);
        break;
    case SIM_CMD_ADMIT:
        r = run_admit(sim, c, json, out, &err);
        break;
    case SIM_CMD_PODS:
        pods_answer(sim, "pods", NULL, false, 0, json, out);
        r = 0;
        break;
    case SIM_CMD_POD:
        pthread_mutex_lock(&sim->lock);
        r = sim_state_find_pod(&sim->state, c->name) ? 0 : -ENOENT;
        pthread_mutex_unlock(&sim->lock);
        if (r < 0)
            error_set(&err, r, "no pod \"%s\"", c->name);
        else
            pods_answer(sim, "pod", c->name, true, 0, json, out);
        break;
    case SIM_CMD_SCHEDULE:
        r = run_schedule(sim, json, out, &err);
        break;
    case SIM_CMD_DRA_WAIT:
    case SIM_CMD_DRA_DRIVERS:
    case SIM_CMD_DRA_PREPARE:
    case SIM_CMD_DRA_UNPREPARE:
        r = sim__dra_run(sim, c, json, out, &err);
        break;
    default:
        r = run_simple(sim, c, json, out, &err);
        break;
    }
    if (r < 0)
        sim_format_error(&err, cmd_name(c->kind), json, out);
    return r;
}

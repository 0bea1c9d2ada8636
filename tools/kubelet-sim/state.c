/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim state: the node's device-manager bookkeeping — resources with their last
 * ListAndWatch list, capacity (all) vs allocatable (healthy), pods and the devices they hold,
 * kubelet's registration checks. Pure: no I/O, no locking (kubelet.c holds sim->lock). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "sim.h"

static void resource_release(struct sim_resource *r)
{
    free(r->name);
    free(r->endpoint);
    for (size_t i = 0; i < r->n_devices; i++)
        free(r->devices[i].id);
    free(r->devices);
    memset(r, 0, sizeof(*r));
}

void sim_state_release(struct sim_state *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_resources; i++)
        resource_release(&s->resources[i]);
    for (size_t i = 0; i < s->n_pods; i++)
        sim_pod_free(s->pods[i]);
    memset(s, 0, sizeof(*s));
}

struct sim_resource *sim_state_find_resource(struct sim_state *s, const char *name)
{
    for (size_t i = 0; i < s->n_resources; i++)
        if (str_eq(s->resources[i].name, name))
            return &s->resources[i];
    return NULL;
}

int sim_state_add_resource(struct sim_state *s, const char *name, struct sim_resource **ret,
                           struct error *err)
{
    struct sim_resource *r = sim_state_find_resource(s, name);

    if (!r) {
        if (s->n_resources >= SIM_MAX_RESOURCES)
            return error_set(err, -ENOSPC, "too many resources (at most %d)", SIM_MAX_RESOURCES);
        r = &s->resources[s->n_resources];
        memset(r, 0, sizeof(*r));
        r->name = str_dup(name);
        if (!r->name)
            return error_set(err, -ENOMEM, "out of memory");
        s->n_resources++;
    }
    *ret = r;
    return 0;
}

int sim_resource_set_devices(struct sim_resource *r, const char *const *ids, const bool *healthy,
                             const int64_t *numa, size_t n, struct error *err)
{
    struct sim_device *devs = NULL;
    int r_ = 0;

    if (n > SIM_MAX_DEVICES)
        return error_set(err, -E2BIG, "resource \"%s\": %zu devices listed, at most %d kept",
                         r->name, n, SIM_MAX_DEVICES);
    if (n > 0) {
        devs = calloc(n, sizeof(*devs));
        if (!devs)
            return error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        devs[i].id = str_dup(ids[i] ? ids[i] : "");
        if (!devs[i].id) {
            r_ = error_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        devs[i].is_healthy = healthy[i];
        devs[i].numa_node = numa ? numa[i] : -1;
    }
    for (size_t i = 0; i < r->n_devices; i++)
        free(r->devices[i].id);
    free(r->devices);
    r->devices = devs;
    r->n_devices = n;
    r->n_updates++;
    devs = NULL;
out:
    if (devs) {
        for (size_t i = 0; i < n; i++)
            free(devs[i].id);
        free(devs);
    }
    return r_;
}

void sim_resource_mark_all_unhealthy(struct sim_resource *r)
{
    for (size_t i = 0; i < r->n_devices; i++)
        r->devices[i].is_healthy = false;
}

size_t sim_resource_capacity(const struct sim_resource *r)
{
    return r->n_devices;
}

size_t sim_resource_allocatable(const struct sim_resource *r)
{
    size_t n = 0;

    for (size_t i = 0; i < r->n_devices; i++)
        n += r->devices[i].is_healthy;
    return n;
}

bool sim_state_device_is_allocated(const struct sim_state *s, const char *resource, const char *id)
{
    for (size_t i = 0; i < s->n_pods; i++) {
        const struct sim_pod *p = s->pods[i];
        if (p->phase != SIM_POD_RUNNING)
            continue;
        for (size_t j = 0; j < p->n_allocs; j++)
            if (str_eq(p->allocs[j].resource, resource) &&
                strv_contains(p->allocs[j].device_ids, id))
                return true;
    }
    return false;
}

size_t sim_state_allocated(const struct sim_state *s, const struct sim_resource *r)
{
    size_t n = 0;

    for (size_t i = 0; i < r->n_devices; i++)
        n += sim_state_device_is_allocated(s, r->name, r->devices[i].id);
    return n;
}

int sim_state_available(const struct sim_state *s, const struct sim_resource *r, char ***ret)
{
    char **v = strv_new();

    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < r->n_devices; i++) {
        const struct sim_device *d = &r->devices[i];
        if (!d->is_healthy || sim_state_device_is_allocated(s, r->name, d->id) ||
            strv_contains(v, d->id))
            continue;
        if (strv_push(&v, d->id) < 0) {
            strv_free(v);
            return -ENOMEM;
        }
    }
    *ret = v;
    return 0;
}

int sim_choose_devices(char *const *available, char *const *preferred, unsigned count, char ***ret,
                       struct error *err)
{
    char **v = NULL;
    int r = 0;

    if (strv_length(available) < count)
        return error_set(err, -ENOSPC,
                         "requested number of devices unavailable: requested %u, "
                         "available %zu",
                         count, strv_length(available));
    v = strv_new();
    if (!v)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; preferred && preferred[i] && strv_length(v) < count; i++) {
        if (!strv_contains(available, preferred[i]) || strv_contains(v, preferred[i]))
            continue;
        if (strv_push(&v, preferred[i]) < 0) {
            r = error_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    for (size_t i = 0; available[i] && strv_length(v) < count; i++) {
        if (strv_contains(v, available[i]))
            continue;
        if (strv_push(&v, available[i]) < 0) {
            r = error_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    *ret = v;
    v = NULL;
out:
    strv_free(v);
    return r;
}

/* ---- pods ---- */

void sim_alloc_release(struct sim_alloc *a)
{
    if (!a)
        return;
    free(a->resource);
    strv_free(a->device_ids);
    strv_free(a->envs);
    strv_free(a->annotations);
    strv_free(a->mounts);
    strv_free(a->devices);
    strv_free(a->cdi_devices);
    memset(a, 0, sizeof(*a));
}

void sim_pod_free(struct sim_pod *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->reason);
    free(p->message);
    for (size_t i = 0; i < p->n_requests; i++) {
        free(p->requests[i].resource);
        free(p->requests[i].container);
    }
    for (size_t i = 0; i < p->n_allocs; i++)
        sim_alloc_release(&p->allocs[i]);
    free(p);
}

struct sim_pod *sim_pod_new(const char *name, const struct sim_request *reqs, size_t n,
                            struct error *err)
{
    struct sim_pod *p = NULL;

    if (n > SIM_MAX_REQUESTS) {
        error_set(err, -E2BIG, "pod \"%s\": too many requests (at most %d)", name,
                  SIM_MAX_REQUESTS);
        return NULL;
    }
    p = calloc(1, sizeof(*p));
    if (!p)
        goto oom;
    p->name = str_dup(name);
    if (!p->name)
        goto oom;
    p->phase = SIM_POD_PENDING;
    for (size_t i = 0; i < n; i++) {
        p->requests[i].resource = str_dup(reqs[i].resource);
        if (!p->requests[i].resource)
            goto oom;
        p->requests[i].count = reqs[i].count;
        p->n_requests++;
        p->requests[i].container = reqs[i].container ? str_dup(reqs[i].container) : NULL;
        if (reqs[i].container && !p->requests[i].container)
            goto oom;
    }
    return p;
oom:
    sim_pod_free(p);
    error_set(err, -ENOMEM, "out of memory");
    return NULL;
}

int sim_pod_set_phase(struct sim_pod *p, enum sim_pod_phase phase, const char *reason,
                      const char *message)
{
    char *r = str_dup(reason), *m = str_dup(message);

    if ((reason && !r) || (message && !m)) {
        free(r);
        free(m);
        return -ENOMEM;
    }
    free(p->reason);
    free(p->message);
    p->reason = r;
    p->message = m;
    p->phase = phase;
    return 0;
}

const char *sim_pod_phase_name(enum sim_pod_phase phase)
{
    switch (phase) {
    case SIM_POD_RUNNING:
        return "Running";
    case SIM_POD_PENDING:
        return "Pending";
    case SIM_POD_FAILED:
        return "Failed";
    }
    return "Unknown";
}

struct sim_pod *sim_state_find_pod(struct sim_state *s, const char *name)
{
    for (size_t i = 0; i < s->n_pods; i++)
        if (str_eq(s->pods[i]->name, name))
            return s->pods[i];
    return NULL;
}

int sim_state_add_pod(struct sim_state *s, struct sim_pod **pod, struct error *err)
{
    if (sim_state_find_pod(s, (*pod)->name))
        return error_set(err, -EEXIST, "pod \"%s\" already exists; delete it first", (*pod)->name);
    if (s->n_pods >= SIM_MAX_PODS)
        return error_set(err, -ENOSPC, "too many pods (at most %d)", SIM_MAX_PODS);
    (*pod)->seq = s->next_seq++;
    s->pods[s->n_pods++] = *pod;
    *pod = NULL;
    return 0;
}

int sim_state_delete_pod(struct sim_state *s, const char *name)
{
    for (size_t i = 0; i < s->n_pods; i++) {
        if (!str_eq(s->pods[i]->name, name))
            continue;
        sim_pod_free(s->pods[i]);
        memmove(&s->pods[i], &s->pods[i + 1], (s->n_pods - i - 1) * sizeof(s->pods[0]));
        s->n_pods--;
        return 0;
    }
    return -ENOENT;
}

/* ---- registration checks (facts §2.1; the name rules are the model's) ---- */

int sim_validate_registration(const char *version, const char *resource, const char *endpoint,
                              struct error *err)
{
    if (!str_eq(version, "v1beta1"))
        return error_set(err, -EINVAL,
                         "requested API version \"%s\" is not supported by "
                         "kubelet. Supported version is \"v1beta1\"",
                         version ? version : "");
    if (!resource || !model_resource_name_valid(resource, NULL))
        return error_set(err, -EINVAL, "the ResourceName \"%s\" is invalid",
                         resource ? resource : "");
    if (!endpoint || !*endpoint || strchr(endpoint, '/') || str_eq(endpoint, "..") ||
        str_eq(endpoint, "."))
        return error_set(err, -EINVAL,
                         "invalid endpoint \"%s\": want a socket file name in "
                         "the device plugin directory",
                         endpoint ? endpoint : "");
    return 0;
}

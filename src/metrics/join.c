/* SPDX-License-Identifier: Apache-2.0 */
/* join.c: the pod-usage join (metrics.h): which pod uses how much of each GPU, from the
 * devices pods hold (pod-resources' names, the checkpoint's UIDs) and the GPU's processes
 * with their cgroups (the pod UID). Pure: the daemon's sampler reads NVML and /proc, this
 * decides, the sampler writes the series. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"

/* A new zeroed entry for gpu, or NULL when out of memory. */
static struct metrics_pod_use *use_add(struct metrics_usage *u, unsigned gpu)
{
    struct metrics_pod_use *e;

    if (u->n_pods == u->alloc_pods) {
        size_t alloc = u->alloc_pods ? 2 * u->alloc_pods : 32;
        struct metrics_pod_use *v = reallocarray(u->pods, alloc, sizeof(*v));
        if (!v)
            return NULL;
        u->pods = v;
        u->alloc_pods = alloc;
    }
    e = &u->pods[u->n_pods++];
    memset(e, 0, sizeof(*e));
    e->gpu = gpu;
    e->sm = -1;
    return e;
}

/* Replicas held by each pod (and container) on each GPU. */
static int count_replicas(const struct metrics_holding *h, size_t n_h, struct metrics_usage *u)
{
    for (size_t i = 0; i < n_h; i++) {
        const char *container = h[i].container ? h[i].container : "";
        struct metrics_pod_use *e = NULL;

        if (!h[i].pod)
            continue; /* only pod-resources names a pod and its containers */
        for (size_t k = 0; k < u->n_pods && !e; k++)
            if (u->pods[k].gpu == h[i].gpu && strcmp(u->pods[k].ns_name, h[i].pod) == 0 &&
                strcmp(u->pods[k].resource, h[i].resource) == 0 &&
                strcmp(u->pods[k].container, container) == 0)
                e = &u->pods[k];
        if (!e) {
            e = use_add(u, h[i].gpu);
            if (!e)
                return -ENOMEM;
            str_copy(e->ns_name, h[i].pod, sizeof(e->ns_name));
            str_copy(e->container, container, sizeof(e->container));
            str_copy(e->resource, h[i].resource, sizeof(e->resource));
            if (h[i].uid)
                str_copy(e->uid, h[i].uid, sizeof(e->uid));
        }
        e->replicas++;
    }
    return 0;
}

/* The entry of pod uid on GPU g its processes count to: its only container's there; with
 * several containers holding devices there, a pod-level entry (container ""): the cgroup
 * names the container by id, the kubelet by name, and nothing on the node links the two.
 * Made (named after what is known of the pod) when missing; NULL on ENOMEM. */
static struct metrics_pod_use *process_entry(struct metrics_usage *u, unsigned g, const char *uid)
{
    struct metrics_pod_use *e = NULL;
    char ns_name[sizeof(e->ns_name)] = "", resource[sizeof(e->resource)] = "";
    size_t same = 0;

    for (size_t j = 0; j < u->n_pods; j++)
        if (u->pods[j].gpu == g && strcmp(u->pods[j].uid, uid) == 0 && u->pods[j].replicas) {
            same++;
            e = &u->pods[j];
        }
    if (same > 1) {
        e = NULL;
        for (size_t j = 0; j < u->n_pods && !e; j++)
            if (u->pods[j].gpu == g && strcmp(u->pods[j].uid, uid) == 0 && !u->pods[j].replicas &&
                !u->pods[j].container[0])
                e = &u->pods[j];
    }
    if (e)
        return e;
    /* pod level, or a pod known by its UID only: named after what is known of it */
    for (size_t j = 0; j < u->n_pods; j++)
        if (u->pods[j].gpu == g && strcmp(u->pods[j].uid, uid) == 0) {
            str_copy(ns_name, u->pods[j].ns_name, sizeof(ns_name));
            str_copy(resource, u->pods[j].resource, sizeof(resource));
        }
    e = use_add(u, g);
    if (e) {
        str_copy(e->uid, uid, sizeof(e->uid));
        str_copy(e->ns_name, ns_name, sizeof(e->ns_name));
        str_copy(e->resource, resource, sizeof(e->resource));
    }
    return e;
}

static int add_host(struct metrics_usage *u, const struct metrics_process *p)
{
    struct metrics_host_use *v = reallocarray(u->host, u->n_host + 1, sizeof(*v));

    if (!v)
        return -ENOMEM;
    u->host = v;
    u->host[u->n_host++] = (struct metrics_host_use){p->gpu, p->pid, p->used_bytes};
    return 0;
}

int metrics_pod_usage(const struct metrics_holding *h, size_t n_h, const struct metrics_process *p,
                      size_t n_p, struct metrics_usage *ret, struct error *err)
{
    struct metrics_usage u = {0};
    int r = count_replicas(h, n_h, &u);

    for (size_t i = 0; r == 0 && i < n_p; i++) {
        char uid[64], cid[80];
        struct metrics_pod_use *e;

        if (!p[i].cgroup) { /* not visible here: neither a pod's nor surely the host's */
            u.unattributed++;
            continue;
        }
        if (metrics_cgroup_pod(p[i].cgroup, uid, sizeof(uid), cid, sizeof(cid)) != 1) {
            r = add_host(&u, &p[i]);
            continue;
        }
        e = process_entry(&u, p[i].gpu, uid);
        if (!e) {
            r = -ENOMEM;
            break;
        }
        e->bytes += p[i].used_bytes;
        if (p[i].sm_util >= 0)
            e->sm = (e->sm < 0 ? 0 : e->sm) + p[i].sm_util;
    }
    if (r < 0) {
        metrics_usage_release(&u);
        return error_set(err, r, "per-pod usage: out of memory");
    }
    *ret = u;
    return 0;
}

void metrics_usage_release(struct metrics_usage *u)
{
    if (!u)
        return;
    free(u->pods);
    free(u->host);
    *u = (struct metrics_usage){0};
}

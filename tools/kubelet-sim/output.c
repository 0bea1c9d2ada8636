/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim output: renders the state (capacity table, devices, pods with their Allocate
 * responses) as text for people or as JSON objects for scripts. No I/O: results go to a
 * strbuf or a json_t; callers hold sim->lock while the state is read. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "output.h"

static json_t *strv_json(char *const *v)
{
    json_t *a = json_array();

    for (size_t i = 0; v && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

/* "K=V" pairs as an object. */
static json_t *kv_json(char *const *v)
{
    json_t *o = json_object();

    for (size_t i = 0; v && v[i]; i++) {
        const char *eq = strchr(v[i], '=');
        char *k = eq ? strndup(v[i], (size_t)(eq - v[i])) : NULL;
        if (k)
            json_object_set_new(o, k, json_string(eq + 1));
        free(k);
    }
    return o;
}

json_t *sim_out_capacity_json(const struct sim_state *s)
{
    json_t *a = json_array();

    for (size_t i = 0; i < s->n_resources; i++) {
        const struct sim_resource *r = &s->resources[i];
        json_array_append_new(
            a, json_pack("{s:s, s:I, s:I, s:I, s:b, s:s?, s:I, s:b}", "resource", r->name,
                         "capacity", (json_int_t)sim_resource_capacity(r), "allocatable",
                         (json_int_t)sim_resource_allocatable(r), "allocated",
                         (json_int_t)sim_state_allocated(s, r), "connected", r->is_connected,
                         "endpoint", r->endpoint, "registrations", (json_int_t)r->n_registrations,
                         "preferred_allocation", r->preferred_available));
    }
    return a;
}

void sim_out_capacity_text(const struct sim_state *s, struct strbuf *out)
{
    size_t w = strlen("RESOURCE");

    for (size_t i = 0; i < s->n_resources; i++)
        if (strlen(s->resources[i].name) > w)
            w = strlen(s->resources[i].name);
    strbuf_printf(out, "%-*s  %8s  %11s  %9s  %s\n", (int)w, "RESOURCE", "CAPACITY", "ALLOCATABLE",
                  "ALLOCATED", "PLUGIN");
    if (s->n_resources == 0)
        strbuf_puts(out, "(no device plugin registered)\n");
    for (size_t i = 0; i < s->n_resources; i++) {
        const struct sim_resource *r = &s->resources[i];
        strbuf_printf(out, "%-*s  %8zu  %11zu  %9zu  %s\n", (int)w, r->name,
                      sim_resource_capacity(r), sim_resource_allocatable(r),
                      sim_state_allocated(s, r), r->is_connected ? "connected" : "disconnected");
    }
}

json_t *sim_out_devices_json(const struct sim_state *s, const struct sim_resource *r)
{
    json_t *a = json_array();

    for (size_t i = 0; i < r->n_devices; i++) {
        const struct sim_device *d = &r->devices[i];
        const char *holder = NULL;
        for (size_t p = 0; p < s->n_pods && !holder; p++)
            for (size_t j = 0; j < s->pods[p]->n_allocs && !holder; j++)
                if (s->pods[p]->phase == SIM_POD_RUNNING &&
                    str_eq(s->pods[p]->allocs[j].resource, r->name) &&
                    strv_contains(s->pods[p]->allocs[j].device_ids, d->id))
                    holder = s->pods[p]->name;
        json_array_append_new(a,
                              json_pack("{s:s, s:s, s:o, s:s?}", "id", d->id, "health",
                                        d->is_healthy ? "Healthy" : "Unhealthy", "numa",
                                        d->numa_node < 0 ? json_null() : json_integer(d->numa_node),
                                        "pod", holder));
    }
    return a;
}

void sim_out_devices_text(const struct sim_state *s, const struct sim_resource *r,
                          struct strbuf *out)
{
    json_t *a = sim_out_devices_json(s, r);
    size_t i;
    json_t *d;

    strbuf_printf(out, "%s: %zu devices\n", r->name, r->n_devices);
    json_array_foreach(a, i, d)
    {
        json_t *numa = json_object_get(d, "numa");
        json_t *pod = json_object_get(d, "pod");
        strbuf_printf(out, "  %s  %s  numa=", json_string_value(json_object_get(d, "id")),
                      json_string_value(json_object_get(d, "health")));
        if (json_is_integer(numa))
            strbuf_printf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(numa));
        else
            strbuf_puts(out, "none");
        strbuf_printf(out, "%s%s\n", json_is_string(pod) ? "  pod=" : "",
                      json_is_string(pod) ? json_string_value(pod) : "");
    }
    json_decref(a);
}

/* A request's key in a pod's JSON: "<resource>", "<resource>@<container>" when it named a
 * container (the admit syntax). */
static const char *request_key(const struct sim_request *rq, char *buf, size_t size)
{
    if (!rq->container)
        return rq->resource;
    snprintf(buf, size, "%s@%s", rq->resource, rq->container);
    return buf;
}

json_t *sim_out_pod_json(const struct sim_pod *p, bool details)
{
    char key[512];
    json_t *o = json_pack("{s:s, s:s, s:s?, s:s?}", "name", p->name, "phase",
                          sim_pod_phase_name(p->phase), "reason", p->reason, "message", p->message);
    json_t *reqs = json_object();

    for (size_t i = 0; i < p->n_requests; i++)
        json_object_set_new(reqs, request_key(&p->requests[i], key, sizeof(key)),
                            json_integer(p->requests[i].count));
    json_object_set_new(o, "requests", reqs);
    if (p->phase == SIM_POD_RUNNING) {
        json_t *devs = json_object();
        for (size_t i = 0; i < p->n_allocs && i < p->n_requests; i++)
            json_object_set_new(devs, request_key(&p->requests[i], key, sizeof(key)),
                                strv_json(p->allocs[i].device_ids));
        json_object_set_new(o, "devices", devs);
    }
    if (details && p->phase == SIM_POD_RUNNING) {
        json_t *allocs = json_array();
        for (size_t i = 0; i < p->n_allocs; i++) {
            const struct sim_alloc *a = &p->allocs[i];
            json_array_append_new(
                allocs, json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o}", "resource", a->resource,
                                  "device_ids", strv_json(a->device_ids), "envs", kv_json(a->envs),
                                  "annotations", kv_json(a->annotations), "mounts",
                                  strv_json(a->mounts), "devices", strv_json(a->devices),
                                  "cdi_devices", strv_json(a->cdi_devices)));
        }
        json_object_set_new(o, "allocate_responses", allocs);
    }
    return o;
}

void sim_out_pod_text(const struct sim_pod *p, bool details, struct strbuf *out)
{
    strbuf_printf(out, "pod/%s  %s", p->name, sim_pod_phase_name(p->phase));
    if (p->phase == SIM_POD_PENDING && p->reason)
        strbuf_printf(out, " (%s)", p->reason);
    else if (p->reason)
        strbuf_printf(out, " %s: %s", p->reason, p->message ? p->message : "");
    for (size_t i = 0; i < p->n_allocs && p->phase == SIM_POD_RUNNING; i++) {
        strbuf_printf(out, "  %s=", p->allocs[i].resource);
        for (size_t j = 0; p->allocs[i].device_ids[j]; j++)
            strbuf_printf(out, "%s%s", j ? "," : "", p->allocs[i].device_ids[j]);
    }
    strbuf_putc(out, '\n');
    for (size_t i = 0; details && i < p->n_allocs && p->phase == SIM_POD_RUNNING; i++) {
        const struct sim_alloc *a = &p->allocs[i];
        char **lists[] = {a->envs, a->annotations, a->mounts, a->devices, a->cdi_devices};
        const char *names[] = {"env", "annotation", "mount", "device", "cdi"};
        for (size_t l = 0; l < GS_ARRAY_SIZE(lists); l++)
            for (size_t j = 0; lists[l] && lists[l][j]; j++)
                strbuf_printf(out, "  %s %s %s\n", a->resource, names[l], lists[l][j]);
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c: the daemon's side of the HTTP endpoint (--metrics-address): on each request's
 * ping the loop renders the device plugin's metrics from its own state (a few KiB of text)
 * and publishes them with readiness to metrics/, then answers: no timers, no wake-ups when
 * nobody scrapes.
 * GPU telemetry and per-pod series come from the sampler thread (sampler.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"
#include "metrics/metrics.h"

#ifndef GS_VERSION
#define GS_VERSION "0.1.0"
#endif

void daemon__count_health(struct daemon *d, const char *reason)
{
    size_t i = 0;
    while (i < d->n_health_reasons && strcmp(d->health_reasons[i].reason, reason) != 0)
        i++;
    if (i == d->n_health_reasons) {
        if (i == GS_ARRAY_SIZE(d->health_reasons))
            i--; /* bounded: the last slot collects the rest */
        else
            d->n_health_reasons++;
        str_copy(d->health_reasons[i].reason, reason, sizeof(d->health_reasons[i].reason));
    }
    d->health_reasons[i].n++;
}

static struct daemon__alloc_count *kept_counts(const struct daemon *d, const char *resource)
{
    for (size_t i = 0; i < d->n_alloc_kept; i++)
        if (strcmp(d->alloc_kept[i].resource, resource) == 0)
            return &d->alloc_kept[i];
    return NULL;
}

void daemon__metrics_keep_counts(struct daemon *d, struct dp_plugin *p)
{
    const char *resource = dp_plugin_resource_name(p);
    struct daemon__alloc_count *k = kept_counts(d, resource);
    struct dp_plugin_stats st;

    dp_plugin_stats(p, &st);
    if (!k) { /* one entry per resource name a config ever served: bounded by configs */
        struct daemon__alloc_count *v =
            reallocarray(d->alloc_kept, d->n_alloc_kept + 1, sizeof(*v));
        if (!v)
            return; /* out of memory: this resource's counters restart */
        d->alloc_kept = v;
        k = &d->alloc_kept[d->n_alloc_kept++];
        memset(k, 0, sizeof(*k));
        str_copy(k->resource, resource, sizeof(k->resource));
    }
    k->allocates += st.allocates;
    k->allocate_errors += st.allocate_errors;
}

void daemon__metrics_start(struct daemon *d)
{
    struct error err = {0};

    if (!d->o->metrics_address || !*d->o->metrics_address)
        return;
    if (metrics_server_start(d->o->metrics_address, &d->metrics, &err) < 0) {
        log_error("%s; continuing without the metrics endpoint", err.msg);
        return;
    }
    log_info("metrics, /healthz and /readyz on %s (port %u)", d->o->metrics_address,
             metrics_server_port(d->metrics));
    daemon__sampler_start(d);
}

void daemon__metrics_stop(struct daemon *d)
{
    daemon__sampler_stop(d);
    metrics_server_free(d->metrics);
    d->metrics = NULL;
    free(d->alloc_kept);
    d->alloc_kept = NULL;
    d->n_alloc_kept = 0;
}

int daemon__metrics_fd(const struct daemon *d)
{
    return metrics_server_ping_fd(d->metrics);
}

void daemon__metrics_on_ping(struct daemon *d)
{
    daemon__metrics_publish(d); /* a scrape waits for this: fresh counters */
    metrics_server_pong(d->metrics);
}

static int with_resource(struct strbuf *sb, const char *metric, const char *resource,
                         const char *extra, unsigned long long v)
{
    int r = strbuf_printf(sb, "%s{resource=\"", metric);

    if (r == 0)
        r = metrics_escape(sb, resource);
    if (r == 0)
        r = strbuf_printf(sb, "\"%s} %llu\n", extra ? extra : "", v);
    return r;
}

/* Allocate calls per resource since the process started: the served plugins' counts plus
 * what plugins stopped before them (a kubelet restart) had counted; a resource no longer
 * served keeps its last values. Each family at 0 from the resource's first appearance. */
static int render_allocations(const struct daemon *d, struct strbuf *sb)
{
    int r = 0;

    for (int errors = 0; errors < 2 && r == 0; errors++) { /* one family at a time */
        const char *name =
            errors ? "gpuslice_allocation_errors_total" : "gpuslice_allocations_total";
        r = metrics_family(sb, name, "counter",
                           errors ? "Allocate calls refused, per resource."
                                  : "Allocate calls per resource.");
        for (size_t i = 0; i < d->n_slots && r == 0; i++) {
            struct dp_plugin_stats st;
            if (!d->slots[i].p)
                continue;
            dp_plugin_stats(d->slots[i].p, &st);
            const char *res = dp_plugin_resource_name(d->slots[i].p);
            const struct daemon__alloc_count *k = kept_counts(d, res);
            unsigned long long v = errors ? st.allocate_errors : st.allocates;
            if (k)
                v += errors ? k->allocate_errors : k->allocates;
            r = with_resource(sb, name, res, NULL, v);
        }
        for (size_t i = 0; i < d->n_alloc_kept && r == 0; i++) {
            const struct daemon__alloc_count *k = &d->alloc_kept[i];
            bool served = false;
            for (size_t j = 0; j < d->n_slots && !served; j++)
                served = d->slots[j].p &&
                         strcmp(dp_plugin_resource_name(d->slots[j].p), k->resource) == 0;
            if (!served)
                r = with_resource(sb, name, k->resource, NULL,
                                  errors ? k->allocate_errors : k->allocates);
        }
    }
    return r;
}

/* Devices (replicas, MIG devices) an XID mark keeps Unhealthy, each counted once. */
static size_t xid_marked_devices(const struct daemon *d, const struct model *m)
{
    size_t n = 0;

    for (size_t i = 0; m && i < m->n_resources; i++)
        for (size_t j = 0; j < m->resources[i].n_devices; j++) {
            const struct model_device *dev = &m->resources[i].devices[j];
            bool marked = false;
            for (size_t k = 0; k < d->n_xid_marks && !marked; k++)
                marked = model_device_matches(dev, d->xid_marks[k].uuid, d->xid_marks[k].gi_id,
                                              d->xid_marks[k].ci_id);
            n += marked;
        }
    return n;
}

/* Health changes, XIDs and marks. The counters a user alerts on exist at 0 before their
 * first event (increase() over a series born at 1 is 0): the fixed reasons always, and one
 * XID counter per GPU from the moment the GPU is served. */
static int render_health(const struct daemon *d, const struct model *m,
                         const struct inv_inventory *inv, struct strbuf *sb)
{
    static const char *const fixed[] = {"event-wait-failed", "recovered", "reset"};
    int r = metrics_family(sb, "gpuslice_xid_marked_devices", "gauge",
                           "Devices made Unhealthy by a critical XID.");

    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_xid_marked_devices %zu\n", xid_marked_devices(d, m));
    if (r == 0)
        r = metrics_family(
            sb, "gpuslice_health_recoveries_total", "counter",
            "Devices Healthy again: no XID for --health-recovery-after, or a lost GPU reset.");
    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_health_recoveries_total %llu\n", d->health_recoveries);
    if (r == 0)
        r = metrics_family(sb, "gpuslice_health_changes_total", "counter",
                           "Device health changes by reason: xid-<n> (from the first such XID on), "
                           "event-wait-failed, recovered, reset.");
    for (size_t f = 0; r == 0 && f < GS_ARRAY_SIZE(fixed); f++) {
        unsigned long long n = 0;
        for (size_t i = 0; i < d->n_health_reasons; i++)
            if (strcmp(d->health_reasons[i].reason, fixed[f]) == 0)
                n = d->health_reasons[i].n;
        r = strbuf_printf(sb, "gpuslice_health_changes_total{reason=\"%s\"} %llu\n", fixed[f], n);
    }
    for (size_t i = 0; r == 0 && i < d->n_health_reasons; i++) {
        bool is_fixed = false;
        for (size_t f = 0; f < GS_ARRAY_SIZE(fixed); f++)
            is_fixed |= strcmp(d->health_reasons[i].reason, fixed[f]) == 0;
        if (!is_fixed)
            r = strbuf_printf(sb, "gpuslice_health_changes_total{reason=\"%s\"} %llu\n",
                              d->health_reasons[i].reason, d->health_reasons[i].n);
    }
    if (r == 0 && d->health && inv && inv->n_gpus)
        r = metrics_family(sb, "gpuslice_xid_errors_total", "counter",
                           "XID errors reported on the GPU, critical or not (the last one: "
                           "DCGM_FI_DEV_XID_ERRORS).");
    for (size_t g = 0; r == 0 && d->health && inv && g < inv->n_gpus; g++) {
        unsigned long long n;
        (void)daemon__health_last_xid(d->health, inv->gpus[g].uuid, &n);
        r = strbuf_printf(sb, "gpuslice_xid_errors_total{gpu=\"%u\",UUID=\"%s\"} %llu\n",
                          inv->gpus[g].index, inv->gpus[g].uuid, n);
    }
    return r;
}

/* MIG partitioning and MPS control daemons, when this daemon runs them. */
static int render_mig_mps(const struct daemon *d, const struct model *m, struct strbuf *sb)
{
    const char *mig = daemon__mig_state(d);
    bool mps_header = false;
    int r = 0;

    if (mig) {
        static const char *const states[] = {"pending", "success", "failed", "rebooting"};
        r = metrics_family(sb, "gpuslice_mig_config_state", "gauge",
                           "1 for the nvidia.com/mig.config.state this node is in.");
        for (size_t i = 0; r == 0 && i < GS_ARRAY_SIZE(states); i++)
            r = strbuf_printf(sb, "gpuslice_mig_config_state{state=\"%s\"} %d\n", states[i],
                              strcmp(mig, states[i]) == 0);
    }
    for (size_t i = 0; m && r == 0 && i < m->n_resources; i++) {
        int up = daemon__mps_up(d, m->resources[i].name);
        if (up < 0 || m->resources[i].sharing != CFG_SHARING_MPS)
            continue;
        if (!mps_header)
            r = metrics_family(sb, "gpuslice_mps_daemon_up", "gauge",
                               "1 when the resource's MPS control daemon runs and answers.");
        mps_header = true;
        if (r == 0)
            r = with_resource(sb, "gpuslice_mps_daemon_up", m->resources[i].name, NULL,
                              (unsigned long long)up);
    }
    if (r == 0 && mps_header)
        r = metrics_family(sb, "gpuslice_mps_daemon_restarts_total", "counter",
                           "MPS control daemons restarted after they died or hung.");
    if (r == 0 && mps_header)
        r = strbuf_printf(sb, "gpuslice_mps_daemon_restarts_total %u\n", daemon__mps_restarts(d));
    return r;
}

static int render(struct daemon *d, struct strbuf *sb, bool *ret_ready, char *why, size_t n)
{
    const struct model *m = d->snap ? dp_snapshot_model(d->snap) : NULL;
    size_t registered = 0, served = 0;
    int r = metrics_family(sb, "gpuslice_build_info", "gauge", "Build of the running gpuslice.");

    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_build_info{version=\"%s\"} 1\n", GS_VERSION);
    if (r == 0)
        r = metrics_family(sb, "gpuslice_devices", "gauge",
                           "Devices advertised per resource and health.");
    for (size_t i = 0; m && i < m->n_resources && r == 0; i++) {
        const struct model_resource *res = &m->resources[i];
        unsigned long long healthy = 0;
        for (size_t j = 0; j < res->n_devices; j++)
            healthy += res->devices[j].healthy;
        r = with_resource(sb, "gpuslice_devices", res->name, ",health=\"healthy\"", healthy);
        if (r == 0)
            r = with_resource(sb, "gpuslice_devices", res->name, ",health=\"unhealthy\"",
                              res->n_devices - healthy);
    }
    /* health per GPU, for top and alerts: its devices (whole, replicas, MIG) that are
     * advertised Unhealthy */
    const struct inv_inventory *inv = d->snap ? dp_snapshot_inventory(d->snap) : NULL;
    if (r == 0 && inv && inv->n_gpus)
        r = metrics_family(
            sb, "gpuslice_gpu_unhealthy_devices", "gauge",
            "Devices of the GPU (whole, replicas, MIG devices) advertised Unhealthy.");
    for (size_t g = 0; r == 0 && inv && m && g < inv->n_gpus; g++) {
        unsigned long long bad = 0;
        for (size_t i = 0; i < m->n_resources; i++)
            for (size_t j = 0; j < m->resources[i].n_devices; j++) {
                const struct model_device *dev = &m->resources[i].devices[j];
                bad += !dev->healthy && strcmp(dev->gpu_uuid, inv->gpus[g].uuid) == 0;
            }
        r = strbuf_printf(sb, "gpuslice_gpu_unhealthy_devices{gpu=\"%u\",UUID=\"%s\"} %llu\n",
                          inv->gpus[g].index, inv->gpus[g].uuid, bad);
    }
    if (r == 0)
        r = metrics_family(sb, "gpuslice_resource_registered", "gauge",
                           "1 when the resource is registered with the kubelet.");
    for (size_t i = 0; i < d->n_slots && r == 0; i++) {
        if (!d->slots[i].p)
            continue;
        served++;
        registered += d->slots[i].registered;
        r = with_resource(sb, "gpuslice_resource_registered",
                          dp_plugin_resource_name(d->slots[i].p), NULL, d->slots[i].registered);
    }
    if (r == 0)
        r = render_allocations(d, sb);
    if (r == 0)
        r = metrics_family(sb, "gpuslice_config_reloads_total", "counter",
                           "Config, label and inventory changes applied.");
    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_config_reloads_total %llu\n", d->reloads);
    if (r == 0)
        r = metrics_family(sb, "gpuslice_config_reload_failures_total", "counter",
                           "Configs that could not be applied (the last good one kept).");
    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_config_reload_failures_total %llu\n",
                          d->config_reload_failures);
    if (r == 0)
        r = metrics_family(sb, "gpuslice_retiring_devices", "gauge",
                           "Devices a config removed, kept Unhealthy while pods hold them.");
    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_retiring_devices %zu\n", d->n_retiring);
    if (r == 0)
        r = render_health(d, m, inv, sb);
    if (r == 0)
        r = render_mig_mps(d, m, sb);
    if (r == 0) /* NVML telemetry and per-pod attribution, from the sampler thread */
        r = daemon__sampler_render(d, sb);
    *ret_ready = served > 0 && (registered == served || !d->kubelet_socket);
    if (!*ret_ready)
        snprintf(why, n, "%zu of %zu resources registered with the kubelet", registered, served);
    /* A node without a GPU (or NVML) where --fail-on-init-error=false keeps the plugin
     * waiting quietly: nothing to serve is ready, so a DaemonSet rollout does not stall on
     * such nodes. */
    if (served == 0 && (!inv || inv->n_gpus == 0))
        *ret_ready = true;
    return r;
}

void daemon__metrics_publish(struct daemon *d)
{
    struct strbuf sb = STRBUF_INIT;
    char why[128] = "no resource served";
    bool ready = false;

    if (!d->metrics)
        return;
    if (render(d, &sb, &ready, why, sizeof(why)) == 0)
        metrics_server_publish(d->metrics, strbuf_str(&sb), sb.len, ready, why);
    strbuf_release(&sb);
}

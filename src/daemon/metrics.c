/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c: the metrics feature, the daemon's side of the HTTP endpoint (--metrics-address):
 * on each request's ping the loop renders the core's series and every unit's own (its
 * metrics op), then the sampler's, and publishes them with readiness (every unit's ready op)
 * to metrics/: no timers, no wake-ups when nobody scrapes. GPU telemetry and per-pod series
 * come from the sampler thread (sampler.c, part of this feature). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"
#include "metrics/metrics.h"

#ifndef GS_VERSION
#define GS_VERSION "0.1.0"
#endif

/* The core's series: build, reloads, retiring devices. */
static int render_core(const struct daemon *d, struct strbuf *sb)
{
    int r = metrics_family(sb, "gpuslice_build_info", "gauge", "Build of the running gpuslice.");

    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_build_info{version=\"%s\"} 1\n", GS_VERSION);
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
    return r;
}

static void metrics_publish(struct daemon *d)
{
    struct strbuf sb = STRBUF_INIT;
    char why[128] = "no resource served";
    bool ready;
    int r;

    if (!d->metrics)
        return;
    r = render_core(d, &sb);
    if (r == 0)
        r = daemon__units_metrics(d, &sb);
    if (r == 0) /* NVML telemetry and per-pod attribution, from the sampler thread */
        r = daemon__sampler_render(d, &sb);
    ready = daemon__units_ready(d, why, sizeof(why));
    if (r == 0)
        metrics_server_publish(d->metrics, strbuf_str(&sb), sb.len, ready, why);
    strbuf_release(&sb);
}

static int metrics_start(struct daemon *d, struct error *unused)
{
    struct error err = {0};

    if (!d->o->metrics_address || !*d->o->metrics_address)
        return 0;
    if (metrics_server_start(d->o->metrics_address, &d->metrics, &err) < 0) {
        log_error("%s; continuing without the metrics endpoint", err.msg);
        return 0;
    }
    log_info("metrics, /healthz and /readyz on %s (port %u)", d->o->metrics_address,
             metrics_server_port(d->metrics));
    daemon__sampler_start(d);
    return 0;
}

/* The sampler reads the devices of the state now served (not on health-only changes). */
static void metrics_on_state(struct daemon *d, const struct daemon_change *c)
{
    if (!(c->what & DAEMON_CHANGE_HEALTH))
        daemon__sampler_update(d);
}

static void metrics_stop(struct daemon *d)
{
    daemon__sampler_stop(d);
    metrics_server_free(d->metrics);
    d->metrics = NULL;
}

static int metrics_fd(const struct daemon *d)
{
    return metrics_server_ping_fd(d->metrics);
}

static void metrics_on_ping(struct daemon *d)
{
    metrics_publish(d); /* a scrape waits for this: fresh counters */
    metrics_server_pong(d->metrics);
}

static const struct daemon_source metrics_sources[] = {{metrics_fd, metrics_on_ping}};

const struct daemon_feature daemon__feature_metrics = {
    .name = "metrics",
    .start = metrics_start,
    .on_state = metrics_on_state,
    .stop = metrics_stop,
    .sources = metrics_sources,
    .n_sources = GS_ARRAY_SIZE(metrics_sources),
};

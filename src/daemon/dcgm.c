/* SPDX-License-Identifier: Apache-2.0 */
/* dcgm.c: dcgm-exporter's label set for /metrics series about a GPU (gpu, UUID, pci_bus_id,
 * device, modelName, the GPU instance's profile and id, Hostname, driver version, the pod
 * holding it). A service below the features: the metrics sampler's telemetry and the health
 * feature's XID series label their GPUs the same way through it. Pure text: no I/O beyond
 * reading the host name. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/internal.h"
#include "metrics/metrics.h"

void daemon__dcgm_label(struct strbuf *sb, const char *k, const char *v, bool first)
{
    (void)strbuf_printf(sb, "%s%s=\"", first ? "" : ",", k);
    (void)metrics_escape(sb, v ? v : "");
    (void)strbuf_putc(sb, '"');
}

void daemon__dcgm_hostname(const struct daemon_options *o, char *buf, size_t n)
{
    if (o->node_name)
        str_copy(buf, o->node_name, n);
    else if (n == 0 || gethostname(buf, n - 1) < 0)
        str_copy(buf, "", n);
    else
        buf[n - 1] = '\0';
}

void daemon__dcgm_host_labels(struct strbuf *sb, const char *hostname,
                              const struct inv_inventory *inv)
{
    daemon__dcgm_label(sb, "Hostname", hostname, true);
    daemon__dcgm_label(sb, "DCGM_FI_DRIVER_VERSION", inv->driver_version, false);
}

void daemon__dcgm_labels(struct strbuf *sb, const char *host, const struct inv_gpu *g,
                         const struct gpu_sample_gi *gi, const char *pod, const char *container)
{
    char dev[32], num[24];

    snprintf(dev, sizeof(dev), "nvidia%u", g->minor);
    snprintf(num, sizeof(num), "%u", g->index);
    daemon__dcgm_label(sb, "gpu", num, true);
    daemon__dcgm_label(sb, "UUID", g->uuid, false);
    daemon__dcgm_label(sb, "pci_bus_id", g->pci_bus_id, false);
    daemon__dcgm_label(sb, "device", dev, false);
    daemon__dcgm_label(sb, "modelName", g->name, false);
    if (gi) {
        snprintf(num, sizeof(num), "%u", gi->gi_id);
        daemon__dcgm_label(sb, "GPU_I_PROFILE", gi->profile, false);
        daemon__dcgm_label(sb, "GPU_I_ID", num, false);
    }
    (void)strbuf_printf(sb, ",%s", host);
    if (pod) {
        const char *slash = strchr(pod, '/');
        char ns[128] = "";
        if (slash)
            snprintf(ns, sizeof(ns), "%.*s", (int)(slash - pod), pod);
        daemon__dcgm_label(sb, "namespace", ns, false);
        daemon__dcgm_label(sb, "pod", slash ? slash + 1 : pod, false);
        daemon__dcgm_label(sb, "container", container, false);
    }
}

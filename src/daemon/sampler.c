/* SPDX-License-Identifier: Apache-2.0 */
/* sampler.c: GPU telemetry and per-pod attribution for /metrics, on one thread of its own
 * (never the loop): every --metrics-sample-interval it reads every GPU through NVML
 * (utilization, framebuffer, temperature, power, SM clock, ECC, compute processes), asks
 * the kubelet which pods hold which devices (pod-resources for names, the kubelet's
 * checkpoint for pod UIDs), reads each GPU process's cgroup under --host-proc to find its
 * pod, and renders dcgm-exporter-compatible series plus gpuslice's per-pod ones. The loop
 * hands it the devices of every new snapshot and copies its text into each scrape. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/internal.h"
#include "gpu/gpu.h"
#include "metrics/metrics.h"

/* Deadline of the sampler's pod-resources List: a hung kubelet costs one sample's names. */
#define SAMPLER_LIST_TIMEOUT_MS 1000

struct sampler_dev {
    char resource[128];
    char id[160];
    char gpu_uuid[INV_UUID_MAX];
    unsigned gi_id; /* MIG: the GPU instance; INV_ID_NONE for a whole GPU */
};

/* The most one pod used on a GPU since the daemon started (plan --size and top size from it). */
struct gpu_peak {
    char uuid[INV_UUID_MAX];
    uint64_t bytes;
    char ns_name[256]; /* the pod that used it ("" with pod_uid when unnamed) */
    char uid[64];
};

struct daemon__sampler {
    const struct daemon_options *o;
    pthread_t thread;
    bool started, stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct inv_inventory *inv; /* latest, owned */
    struct sampler_dev *devs;  /* latest, owned */
    size_t n_devs;
    char *text;             /* latest rendering, owned */
    struct gpu_peak *peaks; /* by GPU UUID, kept across inventory changes; sampler thread only */
    size_t n_peaks;
    unsigned long long samples;
    uint64_t last_cost_ns;
    char hostname[128];
};

/* The pod holding device (resource, id) per pod-resources ("ns/name") and per the kubelet's
 * checkpoint ("uid <UID>"). */
static const char *holder(const struct dp_pod_devices *l, const char *resource, const char *id)
{
    return l ? dp_pod_devices_holder(l, resource, id) : NULL;
}

/* dcgm-exporter's rule: the pod holding the devices of a GPU (of one of its GPU instances
 * when gi is not INV_ID_NONE), or NULL when no pod or several do. *ret_container is the
 * container when a single one holds them all, else "". */
static const char *sole_holder(const struct sampler_dev *devs, size_t n_devs,
                               const struct dp_pod_devices *names, const char *gpu_uuid,
                               unsigned gi, const char **ret_container)
{
    const struct dp_pod_device *first = NULL;

    *ret_container = "";
    for (size_t i = 0; names && i < n_devs; i++) {
        if (strcmp(devs[i].gpu_uuid, gpu_uuid) != 0 || (gi != INV_ID_NONE && devs[i].gi_id != gi))
            continue;
        const struct dp_pod_device *pd = dp_pod_devices_find(names, devs[i].resource, devs[i].id);
        if (!pd)
            continue;
        if (!first) {
            first = pd;
            *ret_container = pd->container ? pd->container : "";
        } else if (strcmp(first->pod, pd->pod) != 0) {
            *ret_container = "";
            return NULL;
        } else if (strcmp(*ret_container, pd->container ? pd->container : "") != 0) {
            *ret_container = "";
        }
    }
    return first ? first->pod : NULL;
}

/* dcgm-exporter's names, types and help for enum gpu_field (etc/default-counters.csv). */
static const struct {
    const char *name, *type, *help;
} dcgm_fields[GPU_FIELD_COUNT] = {
    [GPU_FIELD_GPU_UTIL] = {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."},
    [GPU_FIELD_MEM_COPY_UTIL] = {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge",
                                 "Memory utilization (in %)."},
    [GPU_FIELD_ENC_UTIL] = {"DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."},
    [GPU_FIELD_DEC_UTIL] = {"DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."},
    [GPU_FIELD_FB_FREE] = {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."},
    [GPU_FIELD_FB_USED] = {"DCGM_FI_DEV_FB_USED", "gauge",
                           "Framebuffer memory used (in MiB). On a MIG GPU, per GPU instance "
                           "only."},
    [GPU_FIELD_FB_RESERVED] = {"DCGM_FI_DEV_FB_RESERVED", "gauge",
                               "Framebuffer memory reserved (in MiB): part of the used memory "
                               "that belongs to no process (driver, contexts)."},
    [GPU_FIELD_GPU_TEMP] = {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."},
    [GPU_FIELD_MEMORY_TEMP] = {"DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."},
    [GPU_FIELD_POWER_USAGE] = {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."},
    [GPU_FIELD_TOTAL_ENERGY] = {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
                                "Total energy consumption since boot (in mJ)."},
    [GPU_FIELD_SM_CLOCK] = {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."},
    [GPU_FIELD_MEM_CLOCK] = {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."},
    [GPU_FIELD_PCIE_REPLAYS] = {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter",
                                "Total number of PCIe retries."},
    [GPU_FIELD_ECC_SBE_VOL] = {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
                               "Total number of single-bit volatile ECC errors."},
    [GPU_FIELD_ECC_DBE_VOL] = {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
                               "Total number of double-bit volatile ECC errors."},
    [GPU_FIELD_REMAPPED_COR] = {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
                                "Number of remapped rows for correctable errors."},
    [GPU_FIELD_REMAPPED_UNC] = {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
                                "Number of remapped rows for uncorrectable errors."},
    [GPU_FIELD_REMAP_FAILURE] = {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge",
                                 "Whether remapping of rows has failed."},
    [GPU_FIELD_NVLINK_BANDWIDTH] = {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
                                    "Total NVLink traffic over all links, TX and RX with "
                                    "protocol overhead (in KiB)."},
    [GPU_FIELD_VGPU_LICENSE] = {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge",
                                "vGPU license status (1 licensed)."},
};

/* Every dcgm field of every GPU. A MIG-enabled GPU's framebuffer goes out per GPU instance
 * only, as dcgm-exporter does: a whole-GPU series beside them would count it twice in any
 * sum. lab holds each GPU's labels, then its GPU instances' (per_gpu apart). */
static void render_fields(const struct inv_inventory *inv, const struct gpu_sample *smp,
                          const struct strbuf *lab, size_t per_gpu, struct strbuf *sb)
{
    for (size_t f = 0; f < GPU_FIELD_COUNT; f++) {
        bool fb = f == GPU_FIELD_FB_USED || f == GPU_FIELD_FB_FREE;
        (void)metrics_family(sb, dcgm_fields[f].name, dcgm_fields[f].type, dcgm_fields[f].help);
        for (size_t g = 0; g < inv->n_gpus; g++) {
            const struct gpu_sample *x = &smp[g];
            if (fb && inv->gpus[g].mig_enabled) {
                for (size_t k = 0; k < x->n_gis; k++)
                    (void)strbuf_printf(sb, "%s{%s} %llu\n", dcgm_fields[f].name,
                                        strbuf_str(&lab[g * per_gpu + 1 + k]),
                                        (unsigned long long)(f == GPU_FIELD_FB_USED
                                                                 ? x->gis[k].fb_used_mib
                                                                 : x->gis[k].fb_free_mib));
                continue;
            }
            if (x->field[f] < 0)
                continue; /* NVML does not tell: no series, as dcgm-exporter */
            (void)strbuf_printf(sb, "%s{%s} %.15g\n", dcgm_fields[f].name,
                                strbuf_str(&lab[g * per_gpu]), x->field[f]);
        }
    }
}

/* Raises each GPU's recorded peak to the largest pod seen on it in this sample. A pod split
 * over several entries (containers) counts once, summed. */
static void record_peaks(struct daemon__sampler *s, const struct inv_inventory *inv,
                         const struct metrics_usage *use)
{
    for (size_t k = 0; k < use->n_pods; k++) {
        const struct metrics_pod_use *u = &use->pods[k];
        uint64_t bytes = 0;
        if (!u->bytes || u->gpu >= inv->n_gpus)
            continue;
        for (size_t j = 0; j < use->n_pods; j++) /* the pod's total on this GPU */
            if (use->pods[j].gpu == u->gpu && strcmp(use->pods[j].uid, u->uid) == 0 &&
                strcmp(use->pods[j].ns_name, u->ns_name) == 0)
                bytes += use->pods[j].bytes;
        const char *uuid = inv->gpus[u->gpu].uuid;
        struct gpu_peak *pk = NULL;
        for (size_t j = 0; j < s->n_peaks && !pk; j++)
            if (strcmp(s->peaks[j].uuid, uuid) == 0)
                pk = &s->peaks[j];
        if (!pk) {
            struct gpu_peak *v = reallocarray(s->peaks, s->n_peaks + 1, sizeof(*v));
            if (!v)
                continue;
            s->peaks = v;
            pk = &s->peaks[s->n_peaks++];
            memset(pk, 0, sizeof(*pk));
            str_copy(pk->uuid, uuid, sizeof(pk->uuid));
        }
        if (bytes > pk->bytes) {
            pk->bytes = bytes;
            str_copy(pk->ns_name, u->ns_name, sizeof(pk->ns_name));
            str_copy(pk->uid, u->uid, sizeof(pk->uid));
        }
    }
}

/* dcgm's fields: each GPU's (and GPU instance's) labels, holder included, built once for
 * every field. */
static void render_gpu_fields(const struct daemon__sampler *s, const struct inv_inventory *inv,
                              const struct gpu_sample *smp, const struct sampler_dev *devs,
                              size_t n_devs, const struct dp_pod_devices *names, struct strbuf *sb)
{
    const size_t per_gpu = 1 + GPU_SAMPLE_MAX_GIS;
    struct strbuf *lab = calloc(inv->n_gpus * per_gpu + 1, sizeof(*lab));
    struct strbuf host = STRBUF_INIT;

    daemon__dcgm_host_labels(&host, s->hostname, inv);
    for (size_t g = 0; lab && g < inv->n_gpus; g++) {
        const char *container, *pod;
        pod = sole_holder(devs, n_devs, names, inv->gpus[g].uuid, INV_ID_NONE, &container);
        daemon__dcgm_labels(&lab[g * per_gpu], strbuf_str(&host), &inv->gpus[g], NULL, pod,
                            container);
        for (size_t k = 0; k < smp[g].n_gis; k++) {
            const struct gpu_sample_gi *gi = &smp[g].gis[k];
            pod = sole_holder(devs, n_devs, names, inv->gpus[g].uuid, gi->gi_id, &container);
            daemon__dcgm_labels(&lab[g * per_gpu + 1 + k], strbuf_str(&host), &inv->gpus[g], gi,
                                pod, container);
        }
    }
    if (lab)
        render_fields(inv, smp, lab, per_gpu, sb);
    for (size_t i = 0; lab && i < inv->n_gpus * per_gpu; i++)
        strbuf_release(&lab[i]);
    free(lab);
    strbuf_release(&host);
}

/* The per-pod families: memory, SM share, replicas. */
static void render_pod_series(const struct metrics_usage *use, struct strbuf *sb)
{
    static const char *const pod_metrics[3][2] = {
        {"gpuslice_pod_gpu_memory_used_bytes", "GPU memory used by the pod's processes"},
        {"gpuslice_pod_gpu_sm_utilization_ratio",
         "share of the GPU's SMs the pod's processes used (NVML process samples)"},
        {"gpuslice_pod_gpu_replicas", "replicas of the GPU the pod was given"},
    };
    for (size_t m = 0; m < 3; m++) {
        (void)metrics_family(sb, pod_metrics[m][0], "gauge", pod_metrics[m][1]);
        for (size_t k = 0; k < use->n_pods; k++) {
            const struct metrics_pod_use *u = &use->pods[k];
            const char *slash = strchr(u->ns_name, '/');
            char ns[128] = "", gpu[16];
            if ((m == 1 && u->sm < 0) || (m == 2 && !u->replicas) || (m < 2 && !u->bytes))
                continue;
            if (slash)
                snprintf(ns, sizeof(ns), "%.*s", (int)(slash - u->ns_name), u->ns_name);
            snprintf(gpu, sizeof(gpu), "%u", u->gpu);
            (void)strbuf_printf(sb, "%s{", pod_metrics[m][0]);
            daemon__dcgm_label(sb, "namespace", ns, true);
            daemon__dcgm_label(sb, "pod", slash ? slash + 1 : "", false);
            daemon__dcgm_label(sb, "container", u->container, false);
            daemon__dcgm_label(sb, "pod_uid", u->uid, false);
            daemon__dcgm_label(sb, "resource", u->resource, false);
            daemon__dcgm_label(sb, "gpu", gpu, false);
            if (m == 0)
                (void)strbuf_printf(sb, "} %llu\n", (unsigned long long)u->bytes);
            else if (m == 1)
                (void)strbuf_printf(sb, "} %g\n", (double)u->sm / 100.0);
            else
                (void)strbuf_printf(sb, "} %u\n", u->replicas);
        }
    }
}

/* The most one pod used on each GPU since the daemon started. */
static void render_peaks(const struct daemon__sampler *s, const struct inv_inventory *inv,
                         struct strbuf *sb)
{
    (void)metrics_family(
        sb, "gpuslice_gpu_pod_memory_peak_bytes", "gauge",
        "The most GPU memory one pod used on this GPU since the daemon started (size replicas "
        "from it: gpuslice plan --size --from-metrics).");
    for (size_t g = 0; g < inv->n_gpus; g++) {
        const struct gpu_peak *pk = NULL;
        for (size_t k = 0; k < s->n_peaks && !pk; k++)
            if (strcmp(s->peaks[k].uuid, inv->gpus[g].uuid) == 0)
                pk = &s->peaks[k];
        if (!pk)
            continue;
        const char *slash = strchr(pk->ns_name, '/');
        char ns[128] = "", gpu[24];
        if (slash)
            snprintf(ns, sizeof(ns), "%.*s", (int)(slash - pk->ns_name), pk->ns_name);
        snprintf(gpu, sizeof(gpu), "%zu", g);
        (void)strbuf_puts(sb, "gpuslice_gpu_pod_memory_peak_bytes{");
        daemon__dcgm_label(sb, "gpu", gpu, true);
        daemon__dcgm_label(sb, "UUID", pk->uuid, false);
        daemon__dcgm_label(sb, "namespace", ns, false);
        daemon__dcgm_label(sb, "pod", slash ? slash + 1 : "", false);
        daemon__dcgm_label(sb, "pod_uid", pk->uid, false);
        (void)strbuf_printf(sb, "} %llu\n", (unsigned long long)pk->bytes);
    }
}

/* What the join needs: the devices pods hold (pod-resources' names, the checkpoint's UIDs)
 * and the GPUs' processes with the text of their cgroup files (owned by *ret_texts). */
static int join_inputs(const struct daemon__sampler *s, const struct inv_inventory *inv,
                       const struct gpu_sample *smp, const struct sampler_dev *devs, size_t n_devs,
                       const struct dp_pod_devices *names, const struct dp_pod_devices *uids,
                       struct metrics_holding **ret_h, size_t *ret_nh,
                       struct metrics_process **ret_p, size_t *ret_np, char ***ret_texts)
{
    size_t n_procs = 0, nh = 0, np = 0;
    struct metrics_holding *h;
    struct metrics_process *p;
    char **texts;

    for (size_t g = 0; g < inv->n_gpus; g++)
        n_procs += smp[g].n_procs;
    h = calloc(n_devs + 1, sizeof(*h));
    p = calloc(n_procs + 1, sizeof(*p));
    texts = calloc(n_procs + 1, sizeof(*texts));
    if (!h || !p || !texts) {
        free(h);
        free(p);
        free(texts);
        return -ENOMEM;
    }
    for (size_t i = 0; names && i < n_devs; i++) {
        const struct dp_pod_device *pd = dp_pod_devices_find(names, devs[i].resource, devs[i].id);
        const char *id = holder(uids, devs[i].resource, devs[i].id);
        size_t g = 0;
        while (pd && g < inv->n_gpus && strcmp(inv->gpus[g].uuid, devs[i].gpu_uuid) != 0)
            g++;
        if (!pd || g == inv->n_gpus)
            continue;
        h[nh++] = (struct metrics_holding){.resource = devs[i].resource,
                                           .id = devs[i].id,
                                           .gpu = (unsigned)g,
                                           .pod = pd->pod,
                                           .container = pd->container,
                                           .uid = id && str_startswith(id, "uid ") ? id + 4 : NULL};
    }
    for (size_t g = 0; g < inv->n_gpus; g++) {
        for (size_t k = 0; k < smp[g].n_procs; k++, np++) {
            const struct gpu_sample_proc *pr = &smp[g].procs[k];
            char path[256];
            snprintf(path, sizeof(path), "%s/%u/cgroup",
                     s->o->host_proc ? s->o->host_proc : "/proc", pr->pid);
            if (file_read_all(path, 65536, &texts[np], NULL, NULL) < 0)
                texts[np] = NULL; /* not visible here: neither a pod's nor surely the host's */
            p[np] = (struct metrics_process){(unsigned)g, pr->pid, pr->used_bytes, pr->sm_util,
                                             texts[np]};
        }
    }
    *ret_h = h;
    *ret_nh = nh;
    *ret_p = p;
    *ret_np = np;
    *ret_texts = texts;
    return 0;
}

/* Processes in no pod (the host's), and how many /proc cannot show. */
static void render_host(const struct metrics_usage *use, struct strbuf *sb)
{
    (void)metrics_family(sb, "gpuslice_host_gpu_memory_used_bytes", "gauge",
                         "GPU memory used by processes that are in no pod (host processes)");
    for (size_t i = 0; i < use->n_host; i++) {
        char gpu[24], pid[16];
        snprintf(gpu, sizeof(gpu), "%u", use->host[i].gpu);
        snprintf(pid, sizeof(pid), "%u", use->host[i].pid);
        (void)strbuf_puts(sb, "gpuslice_host_gpu_memory_used_bytes{");
        daemon__dcgm_label(sb, "gpu", gpu, true);
        daemon__dcgm_label(sb, "pid", pid, false);
        (void)strbuf_printf(sb, "} %llu\n", (unsigned long long)use->host[i].bytes);
    }
    (void)metrics_family(sb, "gpuslice_gpu_processes_unattributed", "gauge",
                         "GPU processes whose /proc/<pid>/cgroup cannot be read (run with the "
                         "host PID namespace or mount the host's /proc at --host-proc)");
    (void)strbuf_printf(sb, "gpuslice_gpu_processes_unattributed %zu\n", use->unattributed);
}

static void render(struct daemon__sampler *s, const struct inv_inventory *inv,
                   const struct gpu_sample *smp, const struct sampler_dev *devs, size_t n_devs,
                   const struct dp_pod_devices *names, const struct dp_pod_devices *uids,
                   struct strbuf *sb)
{
    struct metrics_usage use = {0};
    struct metrics_holding *h = NULL;
    struct metrics_process *p = NULL;
    char **texts = NULL;
    size_t nh = 0, np = 0;

    render_gpu_fields(s, inv, smp, devs, n_devs, names, sb);
    if (join_inputs(s, inv, smp, devs, n_devs, names, uids, &h, &nh, &p, &np, &texts) == 0 &&
        metrics_pod_usage(h, nh, p, np, &use, NULL) == 0) {
        render_host(&use, sb);
        render_pod_series(&use, sb);
        record_peaks(s, inv, &use);
    }
    render_peaks(s, inv, sb);
    for (size_t i = 0; texts && i < np; i++)
        free(texts[i]);
    free(texts);
    free(h);
    free(p);
    metrics_usage_release(&use);
}

static void sample_once(struct daemon__sampler *s, struct gpu_nvml *nvml)
{
    struct inv_inventory *inv;
    struct sampler_dev *devs = NULL;
    size_t n_devs;
    struct gpu_sample *smp = NULL;
    struct dp_pod_devices names = {0}, uids = {0};
    struct strbuf sb = STRBUF_INIT, cp = STRBUF_INIT;
    struct error err = {0};
    uint64_t t0 = time_now_ns();
    bool have_names, have_uids;

    pthread_mutex_lock(&s->lock);
    inv = inv_dup(s->inv);
    n_devs = s->n_devs;
    if (n_devs) {
        devs = calloc(n_devs, sizeof(*devs));
        if (devs)
            memcpy(devs, s->devs, n_devs * sizeof(*devs));
    }
    pthread_mutex_unlock(&s->lock);
    if (!inv || (n_devs && !devs))
        goto out;
    smp = calloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*smp));
    if (!smp || gpu_sample_read(nvml, inv, smp, &err) < 0) {
        if (err.msg[0])
            log_debug("metrics sampler: %s", err.msg);
        goto out;
    }
    have_names = dp_pod_resources_list(s->o->pod_resources_socket, SAMPLER_LIST_TIMEOUT_MS, &names,
                                       NULL) == 0;
    (void)strbuf_printf(&cp, "%s/%s", s->o->plugin_dir, DP_CHECKPOINT_NAME);
    have_uids = dp_checkpoint_read(strbuf_str(&cp), &uids, NULL) == 0;
    render(s, inv, smp, devs, n_devs, have_names ? &names : NULL, have_uids ? &uids : NULL, &sb);
    pthread_mutex_lock(&s->lock);
    free(s->text);
    s->text = strbuf_take(&sb);
    s->samples++;
    s->last_cost_ns = time_now_ns() - t0;
    pthread_mutex_unlock(&s->lock);
out:
    dp_pod_devices_release(&names);
    dp_pod_devices_release(&uids);
    strbuf_release(&sb);
    strbuf_release(&cp);
    free(smp);
    free(devs);
    inv_free(inv);
}

static void *sampler_main(void *arg)
{
    struct daemon__sampler *s = arg;
    struct gpu_nvml *nvml = NULL;
    struct error err = {0};

    if (gpu_nvml_open(&s->o->nvml, &nvml, &err) < 0) {
        log_warn("metrics sampler: %s; no GPU telemetry in /metrics", err.msg);
        return NULL;
    }
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        if (s->inv) {
            pthread_mutex_unlock(&s->lock);
            sample_once(s, nvml);
            pthread_mutex_lock(&s->lock);
        }
        struct timespec ts;
        time_deadline(&ts, CLOCK_MONOTONIC, (unsigned)s->o->metrics_sample_ms);
        while (!s->stop && pthread_cond_timedwait(&s->cond, &s->lock, &ts) == 0)
            ;
    }
    pthread_mutex_unlock(&s->lock);
    gpu_nvml_close(nvml);
    return NULL;
}

void daemon__sampler_start(struct daemon *d)
{
    struct daemon__sampler *s;
    pthread_condattr_t ca;

    if (!d->metrics || d->o->metrics_sample_ms <= 0)
        return;
    s = calloc(1, sizeof(*s));
    if (!s)
        return;
    s->o = d->o;
    daemon__dcgm_hostname(d->o, s->hostname, sizeof(s->hostname));
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    d->sampler = s;
    daemon__sampler_update(d);
    s->started = pthread_create(&s->thread, NULL, sampler_main, s) == 0;
    if (s->started)
        pthread_setname_np(s->thread, "gs-sampler");
    if (!s->started)
        log_warn("metrics sampler: cannot start its thread; no GPU telemetry in /metrics");
}

void daemon__sampler_update(struct daemon *d)
{
    struct daemon__sampler *s = d->sampler;
    const struct model *m;
    struct sampler_dev *devs = NULL;
    size_t n = 0;

    if (!s || !d->snap)
        return;
    m = dp_snapshot_model(d->snap);
    for (size_t i = 0; i < m->n_resources; i++)
        n += m->resources[i].n_devices;
    devs = calloc(n ? n : 1, sizeof(*devs));
    if (!devs)
        return;
    n = 0;
    for (size_t i = 0; i < m->n_resources; i++)
        for (size_t j = 0; j < m->resources[i].n_devices; j++, n++) {
            str_copy(devs[n].resource, m->resources[i].name, sizeof(devs[n].resource));
            str_copy(devs[n].id, m->resources[i].devices[j].id, sizeof(devs[n].id));
            str_copy(devs[n].gpu_uuid, m->resources[i].devices[j].gpu_uuid,
                     sizeof(devs[n].gpu_uuid));
            devs[n].gi_id = m->resources[i].devices[j].mig_index < 0
                                ? INV_ID_NONE
                                : m->resources[i].devices[j].gi_id;
        }
    struct inv_inventory *inv = inv_dup(dp_snapshot_inventory(d->snap));
    pthread_mutex_lock(&s->lock);
    if (inv) {
        inv_free(s->inv);
        s->inv = inv;
    }
    free(s->devs);
    s->devs = devs;
    s->n_devs = n;
    pthread_cond_signal(&s->cond); /* sample the new devices now */
    pthread_mutex_unlock(&s->lock);
}

int daemon__sampler_render(struct daemon *d, struct strbuf *sb)
{
    struct daemon__sampler *s = d->sampler;
    int r = 0;
    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    if (s->text)
        r = strbuf_puts(sb, s->text);
    if (r == 0)
        r = strbuf_printf(sb,
                          "# HELP gpuslice_metrics_samples_total NVML samples taken\n"
                          "# TYPE gpuslice_metrics_samples_total counter\n"
                          "gpuslice_metrics_samples_total %llu\n"
                          "# HELP gpuslice_metrics_sample_seconds how long the last sample took\n"
                          "# TYPE gpuslice_metrics_sample_seconds gauge\n"
                          "gpuslice_metrics_sample_seconds %.6f\n",
                          s->samples, (double)s->last_cost_ns / 1e9);
    pthread_mutex_unlock(&s->lock);
    return r;
}

void daemon__sampler_stop(struct daemon *d)
{
    struct daemon__sampler *s = d->sampler;
    if (!s)
        return;
    if (s->started) {
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_cond_signal(&s->cond);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
    }
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    inv_free(s->inv);
    free(s->devs);
    free(s->text);
    free(s->peaks);
    free(s);
    d->sampler = NULL;
}

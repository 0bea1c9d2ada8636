/* SPDX-License-Identifier: Apache-2.0 */
/* mig.c: MIG layouts from the node label, in the agent (--mig-config-file). The daemon
 * watches nvidia.com/mig.config on its node; a new value is validated and planned against
 * the mig-parted config (failed + Event when it does not fit, nothing changed), and when
 * it changes anything: state pending, only the GPUs that change stop taking new pods (their
 * devices go Unhealthy), each is repartitioned as soon as no pod holds it (pod-resources,
 * or the kubelet checkpoint), on a worker thread with checkpoint/rollback, and the new MIG
 * devices are served live. A GPU still held at --mig-drain-timeout keeps its layout and the
 * state is failed. States as nvidia-mig-manager writes them in nvidia.com/mig.config.state;
 * meanwhile the operands NVIDIA's manager pauses (and only those) are paused. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "daemon/internal.h"
#include "metrics/metrics.h"
#include "kube/kube.h"
#include "mig/apply.h"

#define MIG_LABEL "nvidia.com/mig.config"
#define MIG_STATE_LABEL "nvidia.com/mig.config.state"
#define MIG_DRAIN_POLL_MS 250
#define MIG_DEPLOY_PAUSED "paused-for-mig-change"
#define MIG_DEPLOY_DEVICE_PLUGIN "nvidia.com/gpu.deploy.device-plugin"

/* The GPU Operator's operand labels NVIDIA's manager pauses across a change (mig-parted
 * v0.15.0 pkg/mig/reconfigure: the GPU clients in Kubernetes), and no other: the driver,
 * the toolkit, the validator, the MIG manager itself keep running. */
static const char *const mig_pause_labels[] = {
    MIG_DEPLOY_DEVICE_PLUGIN,
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
    "nvidia.com/gpu.deploy.client",
};
#define MIG_N_PAUSE GS_ARRAY_SIZE(mig_pause_labels)

struct daemon__mig {
    struct kube_node_watch *watch;
    char *handled; /* the label value last acted on */
    bool have_handled;
    char *wanted; /* the value being worked on */
    bool busy;    /* a change is in progress */
    struct mig_node *plan;
    bool draining[MIG_NODE_MAX_GPUS]; /* GPU waits for its pods, then for the worker */
    bool done[MIG_NODE_MAX_GPUS];
    uint64_t deadline_ms;
    bool any_failed;
    bool reboot_needed; /* a MIG mode change waits for a reboot */
    char failure[ERROR_MSG_MAX];
    int timer_fd, done_fd;
    /* the worker: one GPU at a time */
    pthread_t worker;
    bool worker_running;
    unsigned worker_gpu;
    int worker_result;
    struct error worker_err;
    struct gpu_nvml *nvml;
    const char *state;        /* the last state set (a literal), "" before any */
    bool paused[MIG_N_PAUSE]; /* mig_pause_labels we set to paused-for-mig-change */
};

static const char *mig_state(const struct daemon *d)
{
    return d->mig ? (d->mig->state ? d->mig->state : "") : NULL;
}

static void set_state(struct daemon *d, const char *state)
{
    d->mig->state = state;
    log_info("MIG: %s=%s", MIG_STATE_LABEL, state);
    daemon__kube_set_label(d, MIG_STATE_LABEL, state);
}

static void fail_change(struct daemon *d, const char *reason, const char *msg)
{
    /* finish() has settled the value being worked on into `handled` already */
    const char *value = d->mig->wanted ? d->mig->wanted : d->mig->handled;
    log_error("MIG config %s=%s: %s", MIG_LABEL, value ? value : "", msg);
    daemon__kube_event(d, reason, msg);
    set_state(d, "failed");
}

static void mig_mark(const struct daemon *d, struct model *m)
{
    const struct daemon__mig *g = d->mig;
    for (size_t i = 0; g && g->plan && i < g->plan->n; i++)
        if (g->draining[i])
            (void)model_set_health(m, g->plan->gpus[i].cur.uuid, INV_ID_NONE, INV_ID_NONE, false);
}

/* The value being worked on is now the one handled; the plan is dropped. */
static void settle(struct daemon__mig *m)
{
    free(m->plan);
    m->plan = NULL;
    free(m->handled);
    m->handled = m->wanted;
    m->have_handled = true;
    m->wanted = NULL;
}

/* Whether this process is the device plugin the kubelet uses: then its own pod is
 * scheduled by nvidia.com/gpu.deploy.device-plugin, and pausing that would delete it mid-change
 * (it drains per GPU instead). nvidia-mig-manager registers with no kubelet. */
static bool serves_kubelet(const struct daemon *d)
{
    return !d->o->kubelet_socket || *d->o->kubelet_socket;
}

/* Sets the listed operand labels that are on (true, or paused by a change that did not
 * finish) to paused-for-mig-change, as NVIDIA's manager does; labels absent or "false" are
 * left alone. One GET of the Node on the loop: once per change, bounded by the client's
 * timeout. The patches are desired state (label.c retries them). */
static void pause_operands(struct daemon *d)
{
    struct daemon__mig *m = d->mig;
    struct kube_client *c = daemon__kube_client(d);
    struct strbuf path = STRBUF_INIT;
    struct error err = {0};
    char *body = NULL;
    json_t *node = NULL, *labels;

    if (!c || strbuf_printf(&path, "/api/v1/nodes/%s", kube_client_node_name(c)) < 0)
        goto out;
    if (kube_request(c, "GET", strbuf_str(&path), NULL, NULL, &body, &err) < 0) {
        log_warn("MIG: reading node labels to pause NVIDIA's operands: %s; continuing without "
                 "pausing them",
                 err.msg);
        goto out;
    }
    node = json_loads(body, 0, NULL);
    labels = json_object_get(json_object_get(node, "metadata"), "labels");
    for (size_t i = 0; i < MIG_N_PAUSE; i++) {
        const char *v = json_string_value(json_object_get(labels, mig_pause_labels[i]));
        if (!v || (strcmp(v, "true") != 0 && strcmp(v, MIG_DEPLOY_PAUSED) != 0))
            continue;
        if (strcmp(mig_pause_labels[i], MIG_DEPLOY_DEVICE_PLUGIN) == 0 && serves_kubelet(d))
            continue;
        m->paused[i] = true;
        log_info("MIG: %s=%s (NVIDIA operands pause)", mig_pause_labels[i], MIG_DEPLOY_PAUSED);
        daemon__kube_set_label(d, mig_pause_labels[i], MIG_DEPLOY_PAUSED);
    }
out:
    json_decref(node);
    free(body);
    strbuf_release(&path);
}

static void resume_operands(struct daemon *d)
{
    struct daemon__mig *m = d->mig;
    for (size_t i = 0; i < MIG_N_PAUSE; i++) {
        if (!m->paused[i])
            continue;
        m->paused[i] = false;
        log_info("MIG: %s=true (NVIDIA operands resume)", mig_pause_labels[i]);
        daemon__kube_set_label(d, mig_pause_labels[i], "true");
    }
}

static void finish(struct daemon *d)
{
    struct daemon__mig *m = d->mig;

    daemon__timer_set(m->timer_fd, 0, false);
    memset(m->draining, 0, sizeof(m->draining));
    m->busy = false;
    settle(m);
    resume_operands(d);
    if (m->any_failed) {
        fail_change(d, "MigConfigFailed", m->failure);
    } else if (m->reboot_needed) {
        /* as mig-manager without WITH_REBOOT: the mode waits for the node's reboot; the agent
         * finishes the layout when it starts again */
        log_warn("MIG: a mode change is pending until the node reboots (or the GPU is reset)");
        daemon__kube_event(d, "MigRebootRequired",
                           "a MIG mode change is pending until the node reboots; gpuslice "
                           "finishes the layout when it starts again");
        set_state(d, "rebooting");
    } else {
        set_state(d, "success");
    }
    /* health back for GPUs left alone, new MIG devices served for the others */
    daemon__apply(d, DAEMON_RELOAD_INVENTORY, "MIG layout");
}

static void *worker_main(void *arg)
{
    struct daemon__mig *m = arg;
    m->worker_result =
        mig_apply_gpu(m->nvml, &m->plan->gpus[m->worker_gpu], false, NULL, &m->worker_err);
    uint64_t one = 1;
    (void)!write(m->done_fd, &one, sizeof(one));
    return NULL;
}

/* Whether a pod holds the GPU or MIG device `uuid` under any resource name: device IDs are
 * UUID-based under every strategy ("<uuid>" or "<uuid>::<n>"), so nvidia-mig-manager, which
 * serves no kubelet, knows the pods of the cluster's plugin whatever its MIG strategy and
 * sharing. */
static bool held_by_uuid(const struct dp_pod_devices *pods, const char *uuid)
{
    size_t n = strlen(uuid);
    for (size_t i = 0; n && i < pods->n; i++) {
        const char *id = pods->items[i].id;
        if (id && strncmp(id, uuid, n) == 0 && (id[n] == '\0' || strncmp(id + n, "::", 2) == 0))
            return true;
    }
    return false;
}

/* Which GPUs that still wait are free of pods; -1: the pods cannot be known. */
static int held(struct daemon *d, bool *busy)
{
    struct daemon__mig *m = d->mig;
    const struct model *model = dp_snapshot_model(d->snap);
    bool reachable = false;
    /* read off the loop (holders.c): asked now, decided when the answer comes */
    const struct dp_pod_devices *pods = daemon__holders_view(d, &reachable);

    if (!pods || !reachable)
        return -1;
    memset(busy, 0, MIG_NODE_MAX_GPUS * sizeof(*busy));
    for (size_t i = 0; i < model->n_resources; i++) {
        const struct model_resource *res = &model->resources[i];
        for (size_t j = 0; j < res->n_devices; j++) {
            const struct model_device *dev = &res->devices[j];
            if (!dp_pod_devices_holder(pods, res->name, dev->id) && !held_by_uuid(pods, dev->uuid))
                continue;
            for (size_t g = 0; g < m->plan->n; g++)
                if (strcmp(m->plan->gpus[g].cur.uuid, dev->gpu_uuid) == 0)
                    busy[g] = true;
        }
    }
    return 0;
}

/* Starts the worker on the next free GPU, finishes when none is left, fails the ones still
 * held at the deadline. */
static void step(struct daemon *d)
{
    struct daemon__mig *m = d->mig;
    bool busy[MIG_NODE_MAX_GPUS];
    size_t waiting = 0;

    if (m->worker_running)
        return;
    bool known = held(d, busy) == 0;
    for (size_t g = 0; g < m->plan->n; g++) {
        if (!m->draining[g] || m->done[g])
            continue;
        waiting++;
        if (!known || busy[g])
            continue;
        m->worker_gpu = (unsigned)g;
        m->worker_err = (struct error){0};
        log_info("MIG: GPU %zu is free of pods, applying its layout", g);
        if (pthread_create(&m->worker, NULL, worker_main, m) != 0) {
            m->done[g] = true;
            m->any_failed = true;
            snprintf(m->failure, sizeof(m->failure), "GPU %zu: cannot start a thread", g);
            continue;
        }
        m->worker_running = true;
        return;
    }
    if (waiting == 0) {
        finish(d);
        return;
    }
    if (time_now_ms() >= m->deadline_ms) {
        size_t n = 0;
        for (size_t g = 0; g < m->plan->n; g++)
            if (m->draining[g] && !m->done[g]) {
                m->done[g] = true;
                n++;
            }
        m->any_failed = true;
        snprintf(m->failure, sizeof(m->failure),
                 "%zu GPU%s still held by pods after %lld s (--mig-drain-timeout): their "
                 "layout is unchanged, move the pods away and set the label again",
                 n, n == 1 ? "" : "s", (long long)(d->o->mig_drain_timeout_ms / 1000));
        finish(d);
    }
}

/* A new label value: validate, plan, and start draining what changes. */
static void begin(struct daemon *d, const char *value)
{
    struct daemon__mig *m = d->mig;
    struct mig_config *cfg = NULL;
    const struct mig_config_set *set;
    struct error err = {0};
    int r;

    free(m->wanted);
    m->wanted = str_dup(value);
    m->any_failed = false;
    m->reboot_needed = false;
    memset(m->done, 0, sizeof(m->done));
    memset(m->draining, 0, sizeof(m->draining));
    r = mig_config_load(d->o->mig_config_file, &cfg, &err);
    set = r == 0 ? mig_config_find(cfg, value, &err) : NULL;
    m->plan = calloc(1, sizeof(*m->plan));
    if (set && !m->plan)
        error_set(&err, -ENOMEM, "out of memory");
    if (set && m->plan && !m->nvml)
        r = gpu_nvml_open(&d->o->nvml, &m->nvml, &err);
    if (set && m->plan && m->nvml)
        r = mig_node_plan(m->nvml, set, false, m->plan, &err);
    mig_config_free(cfg);
    if (!set || !m->plan || !m->nvml || r < 0) {
        /* nothing changed: the layout is refused before any GPU is touched */
        settle(m);
        log_error("MIG config %s=%s: %s", MIG_LABEL, value, err.msg);
        daemon__kube_event(d, "MigConfigInvalid", err.msg);
        set_state(d, "failed");
        return;
    }
    if (mig_node_applied(m->plan, false)) {
        settle(m);
        set_state(d, "success");
        return;
    }
    set_state(d, "pending");
    pause_operands(d);
    m->busy = true;
    for (size_t g = 0; g < m->plan->n; g++) {
        const struct mig_gpu_plan *p = &m->plan->gpus[g];
        m->draining[g] = p->selected && (p->change_mode || p->change_layout);
        if (m->draining[g])
            log_info("MIG: GPU %zu (%s) changes: no new pods on it until it is repartitioned", g,
                     p->cur.uuid);
    }
    m->deadline_ms = time_now_ms() + (uint64_t)d->o->mig_drain_timeout_ms;
    daemon__apply(d, 0, "MIG drain"); /* the changing GPUs' devices go Unhealthy */
    daemon__timer_set(m->timer_fd, MIG_DRAIN_POLL_MS, true);
    step(d);
}

static void consider(struct daemon *d)
{
    struct daemon__mig *m = d->mig;
    struct error err = {0};
    char *value = NULL;
    bool known = false;

    if (m->busy || kube_node_watch_value(m->watch, &value, &known, &err) < 0 || !known) {
        free(value);
        return;
    }
    if (!value || (m->have_handled && str_eq(value, m->handled))) {
        free(value);
        return;
    }
    log_info("MIG: node label %s=%s", MIG_LABEL, value);
    begin(d, value);
    free(value);
}

static void mig_on_label(struct daemon *d)
{
    uint64_t ticks;
    (void)!read(kube_node_watch_fd(d->mig->watch), &ticks, sizeof(ticks));
    consider(d);
}

static void mig_on_holders(struct daemon *d)
{
    if (d->mig && d->mig->busy)
        step(d);
}

static void mig_on_timer(struct daemon *d)
{
    daemon__timer_drain(d->mig->timer_fd);
    if (d->mig->busy)
        step(d);
}

static void mig_on_done(struct daemon *d)
{
    struct daemon__mig *m = d->mig;
    uint64_t ticks;

    (void)!read(m->done_fd, &ticks, sizeof(ticks));
    if (!m->worker_running)
        return;
    pthread_join(m->worker, NULL);
    m->worker_running = false;
    m->done[m->worker_gpu] = true;
    if (m->worker_result == -EINPROGRESS) {
        m->reboot_needed = true;
        log_warn("MIG: %s", m->worker_err.msg);
    } else if (m->worker_result < 0) {
        m->any_failed = true;
        str_copy(m->failure, m->worker_err.msg, sizeof(m->failure));
        log_error("MIG: %s", m->worker_err.msg);
    } else {
        log_info("MIG: GPU %u repartitioned", m->worker_gpu);
        m->draining[m->worker_gpu] = false;
        /* serve its new MIG devices now, not when every GPU is done */
        daemon__apply(d, DAEMON_RELOAD_INVENTORY, "MIG layout");
    }
    step(d);
    consider(d); /* a newer value set meanwhile (no-op while a change is in progress) */
}

/* A `gpuslice mig apply` killed part way left its record (mig/intent.c): say so once at
 * start; the layout the node label names is then applied over it as usual. */
static void report_interrupted_apply(struct daemon *d)
{
    struct strbuf what = STRBUF_INIT;
    struct mig_intent in;

    if (mig_intent_read(mig_intent_path(), &in, NULL) < 0 || mig_intent_running(&in))
        return;
    if (mig_intent_describe(&in, &what) == 0) {
        log_warn("MIG: %s (%s); the layout %s names is applied over it", strbuf_str(&what),
                 mig_intent_path(), MIG_LABEL);
        daemon__kube_event(d, "MigApplyInterrupted", strbuf_str(&what));
    }
    strbuf_release(&what);
}

static int mig_start(struct daemon *d, struct error *err)
{
    struct daemon__mig *m;
    struct kube_client *c = daemon__kube_client(d);
    int r;

    if (!d->o->mig_config_file)
        return 0;
    if (!c)
        return error_set(err, -EINVAL,
                         "--mig-config-file needs the Kubernetes API to read %s (set NODE_NAME "
                         "and run in the cluster, or give --kubeconfig)",
                         MIG_LABEL);
    m = calloc(1, sizeof(*m));
    if (!m)
        return error_set(err, -ENOMEM, "out of memory");
    m->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    m->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    d->mig = m;
    if (m->timer_fd < 0 || m->done_fd < 0)
        return error_set_errno(err, errno, "MIG: timerfd/eventfd");
    r = kube_node_watch_start(c, NULL, MIG_LABEL, NULL, &m->watch, err);
    if (r < 0) {
        error_prefix(err, "watching %s", MIG_LABEL);
        return r;
    }
    log_info("MIG: layouts from %s, named by the node label %s", d->o->mig_config_file, MIG_LABEL);
    report_interrupted_apply(d);
    return 0;
}

static void mig_stop(struct daemon *d)
{
    struct daemon__mig *m = d->mig;
    if (!m)
        return;
    if (m->worker_running) /* an apply in flight finishes (or rolls back) before we go */
        pthread_join(m->worker, NULL);
    kube_node_watch_stop(m->watch);
    if (m->timer_fd >= 0)
        close(m->timer_fd);
    if (m->done_fd >= 0)
        close(m->done_fd);
    gpu_nvml_close(m->nvml);
    free(m->plan);
    free(m->handled);
    free(m->wanted);
    free(m);
    d->mig = NULL;
}

static int mig_watch_fd(const struct daemon *d)
{
    return d->mig && d->mig->watch ? kube_node_watch_fd(d->mig->watch) : -1;
}

static int mig_timer_fd(const struct daemon *d)
{
    return d->mig ? d->mig->timer_fd : -1;
}

static int mig_done_fd(const struct daemon *d)
{
    return d->mig ? d->mig->done_fd : -1;
}

static int mig_metrics(struct daemon *d, struct strbuf *sb)
{
    static const char *const states[] = {"pending", "success", "failed", "rebooting"};
    const char *state = mig_state(d);
    int r;

    if (!state)
        return 0;
    r = metrics_family(sb, "gpuslice_mig_config_state", "gauge",
                       "1 for the nvidia.com/mig.config.state this node is in.");
    for (size_t i = 0; r == 0 && i < GS_ARRAY_SIZE(states); i++)
        r = strbuf_printf(sb, "gpuslice_mig_config_state{state=\"%s\"} %d\n", states[i],
                          strcmp(state, states[i]) == 0);
    return r;
}

static const struct daemon_source mig_sources[] = {
    {mig_watch_fd, mig_on_label},
    {mig_timer_fd, mig_on_timer},
    {mig_done_fd, mig_on_done},
};

const struct daemon_feature daemon__feature_mig = {
    .name = "mig",
    .start = mig_start,
    .mark = mig_mark,
    .on_holders = mig_on_holders,
    .metrics = mig_metrics,
    .stop = mig_stop,
    .sources = mig_sources,
    .n_sources = GS_ARRAY_SIZE(mig_sources),
};

/* SPDX-License-Identifier: Apache-2.0 */
/* dra.c: the DRA feature (`gpuslice dra-plugin`, NVIDIA's gpu-kubelet-plugin), as one unit of
 * the loop. It serves the kubelet's DRAPlugin (kubelet/ kdra) and hands each new node state's
 * devices to the prepare state (dra/prepare.c, under its one lock) and to the ResourceSlice
 * controller (dra_slice.c, its own thread). Prepare and unprepare run on the rpc threads
 * through dra/prepare.c with the effects of dra_effects.c; the gRPC health service is
 * dra_health.c. The loop never waits for a prepare, and the rpc threads never read d->snap. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"
#include "dra/dra.h"
#include "kube/kube.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"
#include "metrics/metrics.h"

/* Each Kubernetes API request of the DRA unit (slices, claims, Events). */
#define DRA_API_TIMEOUT_MS 5000
#define DRA_MAX_POD_REFS 256 /* claims whose pods are remembered for Events */

/* A prepared claim's pod, for the Event when its GPU is lost (kept in memory only: after a
 * restart the Event goes to the node and names the claim). */
struct pod_ref {
    char claim_uid[64];
    char ns[64], name[254], uid[64];
};

struct daemon__dra {
    struct kube_client *kube;
    struct kdra_server *srv;
    struct khealth_server *health;       /* --healthcheck-port: grpc.health.v1 */
    struct dra_state *state;             /* the checkpoint and the devices, its own lock */
    struct daemon__dra_effects *effects; /* what a prepare does to the node */
    struct dra_prepare_ops ops;
    struct daemon__dra_slices *slices; /* the ResourceSlice controller thread */
    /* the loop's own */
    struct dra_devices *devs; /* as last handed out, for lost devices */
    char **lost_reported;     /* "<claim uid> <gpu uuid>" already reported */
    /* for /metrics, read without a lock */
    atomic_size_t n_healthy, n_unhealthy;
    /* the pods of prepared claims: rpc threads add and drop, the loop reads */
    pthread_mutex_t pods_lock;
    struct pod_ref pods[DRA_MAX_POD_REFS];
    size_t n_pods;
};

/* ---- the node's devices (the loop) ----------------------------------------------------- */

/* Uuids of the GPUs the served state holds Unhealthy devices of (XIDs, lost GPUs). Devices
 * a config change retired (kept for device-plugin pods, which a DRA node has none of) say
 * nothing about the GPU's health. */
static char **unhealthy_gpus(const struct daemon *d)
{
    const struct model *m = d->snap ? dp_snapshot_model(d->snap) : NULL;
    char **out = strv_new();

    if (d->snap)
        dp_snapshot_lock(d->snap);
    for (size_t i = 0; out && m && i < m->n_resources; i++)
        for (size_t j = 0; out && j < m->resources[i].n_devices; j++) {
            const struct model_device *dev = &m->resources[i].devices[j];
            if (!dev->healthy && !daemon__retiring_has(d, m->resources[i].name, dev->id) &&
                !strv_contains(out, dev->gpu_uuid) && strv_push(&out, dev->gpu_uuid) < 0) {
                strv_free(out);
                out = NULL;
            }
        }
    if (d->snap)
        dp_snapshot_unlock(d->snap);
    return out;
}

static int build_devices(const struct daemon *d, struct dra_devices **ret, struct error *err)
{
    const struct inv_inventory *inv = dp_snapshot_inventory(d->snap);
    char(*roots)[64] = calloc(inv->n_gpus + 1, sizeof(*roots));
    const char **root_ptrs = calloc(inv->n_gpus + 1, sizeof(*root_ptrs));
    char **bad = unhealthy_gpus(d);
    struct dra_devices_options opts = {
        .unhealthy_uuids = bad, .pcie_roots = root_ptrs, .cfg = d->cfg};
    int r = roots && root_ptrs && bad ? 0 : error_set(err, -ENOMEM, "out of memory");

    for (size_t i = 0; r == 0 && i < inv->n_gpus; i++) {
        gpu_pcie_root(d->o->nvml.sysfs_root ? d->o->nvml.sysfs_root : GPU_DEFAULT_SYSFS_ROOT,
                      inv->gpus[i].pci_bus_id, roots[i], sizeof(roots[i]));
        root_ptrs[i] = roots[i];
    }
    if (r == 0)
        r = dra_devices_build(inv, &opts, ret, err);
    free(roots);
    free(root_ptrs);
    strv_free(bad);
    return r;
}

/* Hands devs (taken) to the prepare state and the slice controller, each its own copy. */
static int hand_devices(const struct daemon *d, struct daemon__dra *x, struct dra_devices *devs,
                        struct error *err)
{
    struct dra_devices *for_state = dra_devices_dup(devs), *for_slices = dra_devices_dup(devs);
    size_t healthy = 0;
    int r = for_state && for_slices ? 0 : error_set(err, -ENOMEM, "out of memory");

    if (r < 0) {
        dra_devices_free(for_state);
        dra_devices_free(for_slices);
        dra_devices_free(devs);
        return r;
    }
    r = dra_state_set_devices(x->state, for_state, dp_snapshot_inventory(d->snap)->driver_version,
                              err);
    if (x->slices)
        daemon__dra_slices_set(x->slices, for_slices);
    else
        dra_devices_free(for_slices);
    for (size_t i = 0; i < devs->n_devices; i++)
        healthy += devs->devices[i].healthy;
    atomic_store(&x->n_healthy, healthy);
    atomic_store(&x->n_unhealthy, devs->n_devices - healthy);
    dra_devices_free(x->devs);
    x->devs = devs;
    return r;
}

/* ---- prepare and unprepare (rpc threads) ---------------------------------------------- */

static void remember_pods(struct daemon__dra *x, const struct dra_claim *claim)
{
    pthread_mutex_lock(&x->pods_lock);
    for (size_t i = 0; i < claim->n_reserved_for && x->n_pods < DRA_MAX_POD_REFS; i++) {
        struct pod_ref *p = &x->pods[x->n_pods++];
        str_copy(p->claim_uid, claim->uid, sizeof(p->claim_uid));
        str_copy(p->ns, claim->namespace ? claim->namespace : "default", sizeof(p->ns));
        str_copy(p->name, claim->reserved_for[i].name ? claim->reserved_for[i].name : "",
                 sizeof(p->name));
        str_copy(p->uid, claim->reserved_for[i].uid ? claim->reserved_for[i].uid : "",
                 sizeof(p->uid));
    }
    pthread_mutex_unlock(&x->pods_lock);
}

static void forget_pods(struct daemon__dra *x, const char *claim_uid)
{
    pthread_mutex_lock(&x->pods_lock);
    for (size_t i = 0; i < x->n_pods;)
        if (strcmp(x->pods[i].claim_uid, claim_uid) == 0)
            x->pods[i] = x->pods[--x->n_pods];
        else
            i++;
    pthread_mutex_unlock(&x->pods_lock);
}

static int answer(const struct dra_plan *plan, struct kdra_result *res)
{
    for (size_t i = 0; i < plan->n_devices; i++) {
        const struct dra_plan_device *pd = &plan->devices[i];
        const char *requests[] = {pd->request, NULL};
        const char *ids[] = {pd->cdi_device_id, NULL};
        if (kdra_result_add_device(res, pd->pool, pd->device.name, requests, ids) < 0)
            return kdra_result_set_error(res, "out of memory");
        /* a share: the answer names it (v1; kdra leaves it out of v1beta1) */
        if (pd->share.id[0]) {
            char **sid = &res->devices[res->n_devices - 1].share_id;
            *sid = str_dup(pd->share.id);
            if (!*sid)
                return kdra_result_set_error(res, "out of memory");
        }
    }
    return 0;
}

/* A failure of the whole call (the claim gone, replaced, or the API unreachable). */
static int call_failed(enum dra_call_failure call, const struct error *err, struct rpc_status *st)
{
    enum rpc_code code = call == DRA_CALL_NOT_FOUND     ? RPC_NOT_FOUND
                         : call == DRA_CALL_UID_CHANGED ? RPC_FAILED_PRECONDITION
                                                        : RPC_UNAVAILABLE;

    rpc_status_set(st, code, "%s", err->msg);
    return -ESTALE;
}

static int op_prepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims,
                      size_t n_claims, struct kdra_result *results, struct rpc_status *st)
{
    struct daemon__dra *x = ((struct daemon *)ctx)->dra;

    (void)api;
    for (size_t i = 0; i < n_claims; i++) {
        struct dra_claim_ref ref = {claims[i].namespace, claims[i].name, claims[i].uid};
        struct dra_prepared p;
        struct error err = {0};
        if (dra_prepare(x->state, &x->ops, &ref, &p, &err) < 0) {
            if (p.call != DRA_CALL_OK)
                return call_failed(p.call, &err, st);
            log_warn("DRA: preparing claim %s/%s (%s): %s", ref.ns, ref.name, ref.uid, err.msg);
            (void)kdra_result_set_error(&results[i], "%s", err.msg);
            continue;
        }
        remember_pods(x, p.claim);
        log_info("DRA: prepared claim %s/%s (%s): %zu devices", ref.ns, ref.name, ref.uid,
                 p.plan->n_devices);
        (void)answer(p.plan, &results[i]);
        dra_prepared_release(&p);
    }
    return 0;
}

static int op_unprepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims,
                        size_t n_claims, struct kdra_result *results, struct rpc_status *st)
{
    struct daemon__dra *x = ((struct daemon *)ctx)->dra;

    (void)api;
    (void)st;
    for (size_t i = 0; i < n_claims; i++) {
        struct error err = {0};
        if (dra_unprepare(x->state, &x->ops, claims[i].uid, &err) < 0) {
            log_warn("DRA: %s", err.msg);
            (void)kdra_result_set_error(&results[i], "%s", err.msg);
            continue;
        }
        forget_pods(x, claims[i].uid);
        log_info("DRA: unprepared claim %s/%s (%s)", claims[i].namespace, claims[i].name,
                 claims[i].uid);
    }
    return 0;
}

static void op_registration(void *ctx, bool registered, const char *error)
{
    (void)ctx;
    if (registered)
        log_info("DRA: registered with the kubelet as %s", DRA_DRIVER_NAME);
    else
        log_warn("DRA: the kubelet refused the registration: %s", error);
}

static const struct kdra_ops dra_ops = {
    .prepare = op_prepare,
    .unprepare = op_unprepare,
    .registration = op_registration,
};

/* ---- health: claims whose GPU was lost (the loop) ------------------------------------------ */

static void strv_drop(char **v, const char *s)
{
    size_t i = 0, j = 0;

    for (; v && v[i]; i++) {
        if (strcmp(v[i], s) == 0)
            free(v[i]);
        else
            v[j++] = v[i];
    }
    if (v)
        v[j] = NULL;
}

static bool device_ok(const struct dra_devices *devs, const char *name)
{
    const struct dra_device *dev = dra_devices_find(devs, name);
    return dev && dev->healthy;
}

/* The Event about one lost device: on each pod of the claim, or on the node. */
static void tell_lost(struct daemon *d, struct daemon__dra *x, const struct dra_plan *p,
                      const struct dra_device_info *dev, const char *share)
{
    char msg[512];
    bool any = false;

    snprintf(msg, sizeof(msg),
             "GPU %s of ResourceClaim %s/%s (device %s%s%s) is unhealthy or gone; the pods "
             "using it may fail: delete them to get another device",
             dev->parent_uuid, p->claim_namespace, p->claim_name, dev->name,
             share && share[0] ? ", share " : "", share ? share : "");
    log_warn("DRA: %s", msg);
    pthread_mutex_lock(&x->pods_lock);
    for (size_t k = 0; k < x->n_pods; k++)
        if (strcmp(x->pods[k].claim_uid, p->claim_uid) == 0) {
            daemon__kube_event_pod(d, x->pods[k].ns, x->pods[k].name, x->pods[k].uid,
                                   "PreparedDeviceLost", msg);
            any = true;
        }
    pthread_mutex_unlock(&x->pods_lock);
    if (!any)
        daemon__kube_event(d, "PreparedDeviceLost", msg);
}

/* An Event on each pod of a prepared claim whose device went Unhealthy or away (once per
 * claim and GPU until it is back): NVIDIA's driver tells nobody. */
static void report_lost(struct daemon *d, struct daemon__dra *x)
{
    struct dra_checkpoint *cp = dra_state_checkpoint(x->state);

    for (size_t c = 0; cp && c < cp->n_claims; c++) {
        const struct dra_plan *p = cp->claims[c].plan;
        for (size_t i = 0; i < p->n_devices; i++) {
            const struct dra_device_info *dev = &p->devices[i].device;
            char key[256];
            bool ok = device_ok(x->devs, dev->name), told;
            snprintf(key, sizeof(key), "%s %s", p->claim_uid, dev->parent_uuid);
            told = strv_contains(x->lost_reported, key);
            if (ok && told)
                strv_drop(x->lost_reported, key);
            if (ok || told || strv_push(&x->lost_reported, key) < 0)
                continue;
            tell_lost(d, x, p, dev, p->devices[i].share.id);
        }
    }
    dra_checkpoint_free(cp);
}

/* ---- the feature -------------------------------------------------------------------------- */

/* One API per node (docs/dra.md): a device plugin serving nvidia.com resources here would
 * hand out the same GPUs; refuse to start while one is live. */
static int device_plugin_live(const struct daemon *d, struct error *err)
{
    DIR *dir = opendir(d->o->plugin_dir);
    struct dirent *de;
    int r = 0;

    while (dir && r == 0 && (de = readdir(dir))) {
        char path[4096];
        if (!str_startswith(de->d_name, "nvidia") || !str_endswith(de->d_name, ".sock"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", d->o->plugin_dir, de->d_name);
        if (path_socket_live(path))
            r = error_set(err, -EBUSY,
                          "a device plugin serves %s on this node: DRA and the device-plugin "
                          "API would hand out the same GPUs; run one of the two DaemonSets per "
                          "node (docs/dra.md, the one-API rule)",
                          path);
    }
    if (dir)
        closedir(dir);
    return r;
}

static int dra_kube(struct daemon *d, struct daemon__dra *x, struct error *err)
{
    struct kube_options ko = {.kubeconfig = d->o->kubeconfig,
                              .node_name = d->o->node_name,
                              .api_server = d->o->kube_api_server,
                              .request_timeout_ms = DRA_API_TIMEOUT_MS};
    int r = kube_client_new(&ko, &x->kube, err);

    if (r < 0) {
        error_prefix(err, "DRA needs the Kubernetes API (in-cluster, --kubeconfig or "
                          "--kube-api-server)");
        return r;
    }
    return 0;
}

/* This boot's id (/proc/sys/kernel/random/boot_id: the host's, also in a container), "" when
 * it cannot be read. */
static void boot_id(const struct daemon *d, char *buf, size_t size)
{
    struct strbuf path = STRBUF_INIT;
    char *text = NULL;

    buf[0] = '\0';
    if (strbuf_printf(&path, "%s/sys/kernel/random/boot_id",
                      d->o->proc_root ? d->o->proc_root : "/proc") == 0 &&
        file_read_all(strbuf_str(&path), 256, &text, NULL, NULL) == 0) {
        text[strcspn(text, " \t\r\n")] = '\0';
        str_copy(buf, text, size);
    }
    free(text);
    strbuf_release(&path);
}

/* The prepare state from the checkpoint, with the MPS daemons of its claims back. */
static int dra_state_load(const struct daemon *d, struct daemon__dra *x, struct error *err)
{
    struct dra_state_options so = {.node_name = d->o->node_name,
                                   .mps_root = daemon__dra_effects_mps_root(x->effects)};
    struct dra_checkpoint *cp = NULL;
    char boot[DRA_BOOT_ID_MAX];
    int r = daemon__dra_checkpoint_load(x->effects, &cp, err);

    if (r == 0) { /* after a reboot nothing of the claims is in place: NVIDIA forgets them too */
        boot_id(d, boot, sizeof(boot));
        size_t forgotten = dra_checkpoint_for_boot(cp, boot);
        if (forgotten)
            log_warn("DRA: the checkpoint was written before the node rebooted: its %zu "
                     "prepared claim%s forgotten; the kubelet prepares its pods' claims again",
                     forgotten, forgotten == 1 ? " is" : "s are");
    }
    if (r == 0 && cp->n_claims) /* a restart: the claims' daemons */
        r = daemon__dra_effects_mps_restore(x->effects, cp, err);
    if (r < 0) {
        dra_checkpoint_free(cp);
        return r;
    }
    return dra_state_new(&so, cp, &x->state, err);
}

/* The rpc side: the kubelet's DRA socket and registration, the health service. */
static int dra_serve(struct daemon *d, struct daemon__dra *x, struct error *err)
{
    struct kdra_server_opts so = {.plugins_dir = d->o->dra.plugins_dir,
                                  .registrar_dir = d->o->dra.registrar_dir,
                                  .ops = &dra_ops,
                                  .ctx = d};
    int r = kdra_server_new(&so, &x->srv, err);

    if (r == 0)
        r = kdra_server_start(x->srv, err);
    if (r == 0)
        r = daemon__dra_health_start(d->o->dra.healthcheck_port, x->srv, &x->health, err);
    if (r == 0)
        log_info("DRA: serving %s on %s, registering through %s (%zu prepared claims kept)",
                 DRA_DRIVER_NAME, kdra_server_socket_path(x->srv),
                 kdra_server_registration_path(x->srv), dra_state_n_claims(x->state));
    return r;
}

static int dra_start(struct daemon *d, struct error *err)
{
    struct daemon__dra *x;
    struct dra_devices *devs = NULL;
    int r;

    r = device_plugin_live(d, err); /* the unit runs only in dra-plugin's table (daemon.c) */
    if (r < 0)
        return r;
    x = calloc(1, sizeof(*x));
    if (!x)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&x->pods_lock, NULL);
    x->lost_reported = strv_new();
    d->dra = x;
    r = x->lost_reported ? 0 : error_set(err, -ENOMEM, "out of memory");
    if (r == 0)
        r = dra_kube(d, x, err);
    if (r == 0)
        r = daemon__dra_effects_new(d, x->kube, &x->effects, err);
    if (r == 0)
        r = dra_state_load(d, x, err);
    if (r == 0)
        r = daemon__dra_slices_start(x->kube, d->o->node_name, &x->slices, err);
    if (r == 0)
        r = build_devices(d, &devs, err);
    if (r == 0)
        r = hand_devices(d, x, devs, err);
    if (r == 0)
        daemon__dra_effects_ops(x->effects, &x->ops);
    if (r == 0)
        r = dra_serve(d, x, err);
    return r;
}

/* A config for dra-plugin (--config-file) may turn fractions on; time-slicing and MPS are
 * the device plugin's there (claims carry their own GpuConfig): such a config is refused, at
 * start and on a reload (the last good one stays). */
static int dra_prepare_state(struct daemon *d, const struct dp_snapshot *next,
                             const struct cfg_config *cfg, const struct daemon_change *c,
                             struct error *err)
{
    int r = dra_config_check(cfg, err);

    (void)next;
    if (r < 0 && !(c->what & DAEMON_CHANGE_START)) { /* at start the caller says it */
        log_error("DRA: %s: %s, keeping the last good config", c->why, err->msg);
        daemon__kube_event(d, "ConfigInvalid", err->msg);
    }
    return r;
}

/* A new node state: the slice follows it, lost devices of prepared claims are reported. */
static void dra_on_state(struct daemon *d, const struct daemon_change *c)
{
    struct daemon__dra *x = d->dra;
    struct dra_devices *devs = NULL;
    struct error err = {0};

    if (!x)
        return;
    if (build_devices(d, &devs, &err) < 0 || hand_devices(d, x, devs, &err) < 0) {
        log_error("DRA: %s: %s; the ResourceSlice stays as it is", c->why, err.msg);
        return;
    }
    report_lost(d, x);
}

static void dra_stop(struct daemon *d)
{
    struct daemon__dra *x = d->dra;

    if (!x)
        return;
    khealth_server_free(x->health);
    kdra_server_free(x->srv); /* no call in flight after this */
    daemon__dra_slices_stop(x->slices);
    daemon__dra_effects_free(x->effects);
    dra_state_free(x->state);
    dra_devices_free(x->devs);
    kube_client_free(x->kube);
    strv_free(x->lost_reported);
    pthread_mutex_destroy(&x->pods_lock);
    free(x);
    d->dra = NULL;
}

/* ---- /metrics: the shares (the loop) --------------------------------------------------------- */

/* One shared GPU's processes, read live once per scrape, and each process's pod uid (from its
 * cgroup under --host-proc; "" when it is no pod's). */
struct gpu_use {
    struct gpu_sample s;
    char pod_uid[GPU_SAMPLE_MAX_PROCS][64];
    bool ok;
};

static void gpu_use_read(const struct daemon *d, struct gpu_nvml *nvml, const char *gpu,
                         struct gpu_use *u)
{
    struct error err = {0};

    u->ok = nvml && gpu_sample_procs(nvml, gpu, &u->s, &err) == 0;
    if (!u->ok) {
        str_copy(u->s.uuid, gpu, sizeof(u->s.uuid));
        log_debug("DRA: the processes of GPU %s: %s", gpu, err.msg);
        return;
    }
    for (size_t k = 0; k < u->s.n_procs; k++) {
        char path[256], cid[128];
        char *text = NULL;
        snprintf(path, sizeof(path), "%s/%u/cgroup", d->o->host_proc ? d->o->host_proc : "/proc",
                 u->s.procs[k].pid);
        if (file_read_all(path, 65536, &text, NULL, NULL) < 0 ||
            metrics_cgroup_pod(text, u->pod_uid[k], sizeof(u->pod_uid[k]), cid, sizeof(cid)) != 1)
            u->pod_uid[k][0] = '\0';
        free(text);
    }
}

/* The memory the processes of a claim's pods use on the GPU of u. */
static uint64_t share_used_bytes(struct daemon__dra *x, const struct gpu_use *u,
                                 const struct dra_plan *p)
{
    uint64_t used = 0;

    pthread_mutex_lock(&x->pods_lock);
    for (size_t k = 0; u->ok && k < u->s.n_procs; k++) {
        bool ours = false;
        for (size_t i = 0; u->pod_uid[k][0] && !ours && i < x->n_pods; i++)
            ours = strcmp(x->pods[i].claim_uid, p->claim_uid) == 0 &&
                   strcmp(x->pods[i].uid, u->pod_uid[k]) == 0;
        used += ours ? u->s.procs[k].used_bytes : 0;
    }
    pthread_mutex_unlock(&x->pods_lock);
    return used;
}

/* The use of gpu in uses[0..*n), read now if it is not there yet (at most max GPUs). */
static const struct gpu_use *gpu_use_of(const struct daemon *d, struct gpu_nvml *nvml,
                                        struct gpu_use *uses, size_t *n, size_t max,
                                        const char *gpu)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(uses[i].s.uuid, gpu) == 0)
            return &uses[i];
    if (*n == max)
        return NULL;
    gpu_use_read(d, nvml, gpu, &uses[*n]);
    return &uses[(*n)++];
}

/* The first pod of a claim (NVIDIA's claims serve one pod each, usually): "" when unknown. */
static void share_pod(struct daemon__dra *x, const char *claim_uid, char *name, size_t size)
{
    name[0] = '\0';
    pthread_mutex_lock(&x->pods_lock);
    for (size_t i = 0; !name[0] && i < x->n_pods; i++)
        if (strcmp(x->pods[i].claim_uid, claim_uid) == 0)
            str_copy(name, x->pods[i].name, size);
    pthread_mutex_unlock(&x->pods_lock);
}

static int share_sample(struct strbuf *sb, const char *metric, const struct dra_plan *p,
                        const struct dra_plan_device *pd, const char *pod, uint64_t v)
{
    int r = strbuf_printf(sb, "%s{namespace=\"", metric);

    r = r == 0 ? metrics_escape(sb, p->claim_namespace) : r;
    r = r == 0 ? strbuf_puts(sb, "\",claim=\"") : r;
    r = r == 0 ? metrics_escape(sb, p->claim_name) : r;
    r = r == 0 ? strbuf_printf(sb, "\",claim_uid=\"%s\",pod=\"", p->claim_uid) : r;
    r = r == 0 ? metrics_escape(sb, pod) : r;
    r = r == 0 ? strbuf_printf(sb, "\",device=\"%s\",UUID=\"%s\",share=\"", pd->device.name,
                               pd->device.uuid)
               : r;
    r = r == 0 ? metrics_escape(sb, pd->share.id) : r;
    return r == 0 ? strbuf_printf(sb, "\"} %llu\n", (unsigned long long)v) : r;
}

/* One family of per-share series: what each prepared share consumed (its MPS limit), or, with
 * uses, what its pods' processes use on its GPU now (each shared GPU's processes read once
 * for the scrape, live: the inventory is not re-read in dra-plugin). */
static int share_family(struct daemon *d, struct daemon__dra *x, const struct dra_checkpoint *cp,
                        struct strbuf *sb, const char *name, const char *help, struct gpu_use *uses,
                        size_t max_uses)
{
    struct gpu_nvml *nvml = daemon__dra_effects_nvml(x->effects);
    int r = metrics_family(sb, name, "gauge", help);
    size_t n_uses = 0;

    for (size_t c = 0; r == 0 && c < cp->n_claims; c++)
        for (size_t i = 0; r == 0 && i < cp->claims[c].plan->n_devices; i++) {
            const struct dra_plan *p = cp->claims[c].plan;
            const struct dra_plan_device *pd = &p->devices[i];
            const struct gpu_use *u = NULL;
            char pod[254];
            if (!pd->share.id[0])
                continue;
            if (uses)
                u = gpu_use_of(d, nvml, uses, &n_uses, max_uses, pd->device.uuid);
            if (uses && !u)
                continue;
            share_pod(x, p->claim_uid, pod, sizeof(pod));
            r = share_sample(sb, name, p, pd, pod,
                             u ? share_used_bytes(x, u, p) : pd->share.memory_mib << 20);
        }
    return r;
}

static int share_metrics(struct daemon *d, struct daemon__dra *x, struct strbuf *sb)
{
    struct dra_checkpoint *cp = dra_state_checkpoint(x->state);
    size_t max_uses = 0;
    struct gpu_use *uses = NULL;
    int r = cp ? 0 : -ENOMEM;

    for (size_t c = 0; cp && c < cp->n_claims; c++)
        max_uses += cp->claims[c].plan->n_devices; /* the shared GPUs are fewer */
    if (r == 0 && max_uses) {
        uses = calloc(max_uses, sizeof(*uses));
        r = uses ? 0 : -ENOMEM;
    }
    if (r == 0)
        r = share_family(d, x, cp, sb, "gpuslice_dra_share_memory_bytes",
                         "GPU memory a share consumed (its MPS limit), per prepared share.", NULL,
                         0);
    if (r == 0)
        r = share_family(d, x, cp, sb, "gpuslice_dra_share_memory_used_bytes",
                         "GPU memory the processes of a share's pods use on its GPU.", uses,
                         max_uses);
    free(uses);
    dra_checkpoint_free(cp);
    return r;
}

static int dra_metrics(struct daemon *d, struct strbuf *sb)
{
    struct daemon__dra *x = d->dra;
    int r;

    if (!x)
        return 0;
    r = metrics_family(sb, "gpuslice_dra_devices", "gauge",
                       "Devices of this node's ResourceSlice by health (unhealthy: left out).");
    if (r == 0)
        r = strbuf_printf(sb,
                          "gpuslice_dra_devices{health=\"healthy\"} %zu\n"
                          "gpuslice_dra_devices{health=\"unhealthy\"} %zu\n",
                          atomic_load(&x->n_healthy), atomic_load(&x->n_unhealthy));
    if (r == 0)
        r = metrics_family(sb, "gpuslice_dra_prepared_claims", "gauge",
                           "ResourceClaims prepared on this node (the checkpoint's).");
    if (r == 0)
        r = strbuf_printf(sb, "gpuslice_dra_prepared_claims %zu\n",
                          daemon__dra_effects_n_claims(x->effects));
    if (r == 0)
        r = share_metrics(d, x, sb);
    return r;
}

static bool dra_ready(const struct daemon *d, char *why, size_t n)
{
    struct kdra_registration reg;

    if (!d->dra)
        return true;
    kdra_server_registration(d->dra->srv, &reg);
    if (reg.is_registered)
        return true;
    snprintf(why, n, "not registered with the kubelet yet%s%s", *reg.error ? ": " : "", reg.error);
    return false;
}

const struct daemon_feature daemon__feature_dra = {
    .name = "dra",
    .start = dra_start,
    .prepare = dra_prepare_state,
    .on_state = dra_on_state,
    .metrics = dra_metrics,
    .ready = dra_ready,
    .stop = dra_stop,
};

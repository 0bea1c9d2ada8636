/* SPDX-License-Identifier: Apache-2.0 */
/* dra.c: the DRA feature (`gpuslice dra-plugin`, NVIDIA's gpu-kubelet-plugin). Publishes the
 * node's GPUs and MIG devices as one ResourceSlice that follows every new node state (MIG
 * layouts, GPUs lost and back, health), serves the kubelet's DRAPlugin (kubelet/ kdra) and
 * prepares claims: the plan (dra/), sharing applied (time-slice through nvidia-smi, MPS
 * control daemons supervised here), one CDI spec per claim, a checkpoint so a restarted
 * plugin answers the same. Prepare runs on the gRPC thread under dra->lock. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdi/cdi.h"
#include "daemon/internal.h"
#include "dra/dra.h"
#include "kube/kube.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"
#include "metrics/metrics.h"
#include "mps/mps.h"

/* How often a running nvidia-smi is checked for its exit. */
#define DRA_SMI_POLL_US 10000
/* Each Kubernetes API request of the DRA unit (slices, claims, Events). */
#define DRA_API_TIMEOUT_MS 5000

#define DRA_RETRY_MIN_MS 1000u
#define DRA_RETRY_MAX_MS 30000u
#define DRA_SMI_TIMEOUT_MS 10000
#define DRA_MAX_POD_REFS 256 /* claims whose pods are remembered for Events */

/* A prepared claim's pod, for the Event when its GPU is lost (kept in memory only: after a
 * restart the Event goes to the node and names the claim). */
struct pod_ref {
    char claim_uid[64];
    char ns[64], name[254], uid[64];
};

struct daemon__dra {
    struct kube_client *kube;
    char *node_uid;
    struct kdra_server *srv;
    pthread_mutex_t lock; /* everything below: the gRPC thread prepares, the loop publishes */
    struct dra_devices *devs;
    char *published; /* the slice's content last written ("" none), for the diff */
    char *slice_name, *slice_rv;
    int64_t generation;
    struct dra_checkpoint *cp;
    char *plugin_dir, *cp_path, *mps_root, *smi;
    const char *cdi_root;
    struct cdi_options cdi;
    struct mps_supervisor *mps;
    struct gpu_nvml *nvml; /* for MPS compute modes */
    int retry_fd;
    unsigned retry_ms;
    struct kube_slice_watch *watch; /* our slices, to put back one someone deleted or changed */
    struct rpc_server *health;      /* --healthcheck-port: grpc.health.v1 for NVIDIA's probes */
    /* for /metrics, read without the lock (a slow prepare must not stall a scrape) */
    atomic_size_t n_healthy, n_unhealthy, n_claims;
    struct pod_ref pods[DRA_MAX_POD_REFS];
    size_t n_pods;
    char **lost_reported; /* "<claim uid> <gpu uuid>" already reported */
};

/* ---- counts for /metrics (under x->lock, read without it) ----------------------------------- */

static void counts_update(struct daemon__dra *x)
{
    size_t healthy = 0, n = x->devs ? x->devs->n_devices : 0;

    for (size_t i = 0; i < n; i++)
        healthy += x->devs->devices[i].healthy;
    atomic_store(&x->n_healthy, healthy);
    atomic_store(&x->n_unhealthy, n - healthy);
    atomic_store(&x->n_claims, x->cp ? x->cp->n_claims : 0);
}

/* ---- the checkpoint file --------------------------------------------------------------- */

static int checkpoint_save(struct daemon__dra *x, struct error *err)
{
    char *text = NULL;
    int r = dra_checkpoint_encode(x->cp, &text, err);

    if (r == 0)
        r = file_write_atomic(x->cp_path, text, strlen(text), 0600, err);
    free(text);
    counts_update(x);
    return r;
}

static int checkpoint_load(struct daemon__dra *x, struct error *err)
{
    char *text = NULL;
    size_t len = 0;
    int r = file_read_all(x->cp_path, 64u << 20, &text, &len, NULL);

    if (r == -ENOENT || (r == 0 && len == 0)) {
        free(text);
        x->cp = dra_checkpoint_new();
        return x->cp ? 0 : error_set(err, -ENOMEM, "out of memory");
    }
    if (r < 0) {
        free(text);
        return error_set(err, r, "reading the DRA checkpoint %s: %s", x->cp_path, strerror(-r));
    }
    r = dra_checkpoint_decode(text, len, &x->cp, err);
    free(text);
    if (r < 0)
        error_prefix(err, "%s", x->cp_path);
    return r;
}

/* ---- the node's devices and the slice -------------------------------------------------- */

/* Uuids of the GPUs the served state holds Unhealthy devices of (XIDs, lost GPUs). */
static char **unhealthy_gpus(const struct daemon *d)
{
    const struct model *m = d->snap ? dp_snapshot_model(d->snap) : NULL;
    char **out = strv_new();

    if (d->snap)
        dp_snapshot_lock(d->snap);
    for (size_t i = 0; out && m && i < m->n_resources; i++)
        for (size_t j = 0; out && j < m->resources[i].n_devices; j++) {
            const struct model_device *dev = &m->resources[i].devices[j];
            if (!dev->healthy && !strv_contains(out, dev->gpu_uuid) &&
                strv_push(&out, dev->gpu_uuid) < 0) {
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
    struct dra_devices_options opts = {.unhealthy_uuids = bad, .pcie_roots = root_ptrs};
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

/* The slice body for devs (name and resourceVersion when updating), as text. */
static char *slice_text(struct daemon__dra *x, const struct daemon *d, const char *name,
                        const char *rv, int64_t generation, struct error *err)
{
    struct dra_slice_meta meta = {.node_name = d->o->node_name,
                                  .node_uid = x->node_uid,
                                  .name = name,
                                  .resource_version = rv,
                                  .generation = generation};
    json_t *slice = NULL;
    char *text = NULL;

    if (dra_slice_json(x->devs, &meta, DRA_API_V1, &slice, err) < 0)
        return NULL;
    text = json_dumps(slice, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(slice);
    if (!text)
        error_set(err, -ENOMEM, "out of memory");
    return text;
}

/* Our slices now: the first one's name and resourceVersion kept, the others deleted. */
static int adopt_slices(struct daemon__dra *x, const struct daemon *d, struct error *err)
{
    struct kube_slice_list l = {0};
    json_t *items = NULL;
    int r = kube_slices_list(x->kube, DRA_DRIVER_NAME, d->o->node_name, &l, err);

    if (r < 0)
        return r;
    items = json_loads(l.items_json ? l.items_json : "[]", 0, NULL);
    free(x->slice_name);
    free(x->slice_rv);
    x->slice_name = x->slice_rv = NULL;
    for (size_t i = 0; r == 0 && i < json_array_size(items); i++) {
        json_t *meta = json_object_get(json_array_get(items, i), "metadata");
        const char *name = json_string_value(json_object_get(meta, "name"));
        const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
        json_t *pool = json_object_get(
            json_object_get(json_object_get(json_array_get(items, i), "spec"), "pool"),
            "generation");
        if (!name)
            continue;
        if (x->slice_name) { /* one slice per node: an extra one (a crash mid-create) goes */
            r = kube_slice_delete(x->kube, name, NULL, err);
            r = r == -ENOENT ? 0 : r;
            continue;
        }
        x->slice_name = str_dup(name);
        x->slice_rv = rv ? str_dup(rv) : NULL;
        if (json_integer_value(pool) > x->generation)
            x->generation = json_integer_value(pool);
    }
    json_decref(items);
    kube_slice_list_release(&l);
    return r;
}

/* The name and resourceVersion of the slice the API answered with (create, update). */
static void take_meta(struct daemon__dra *x, const char *answer)
{
    json_t *obj = answer ? json_loads(answer, 0, NULL) : NULL;
    json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));

    if (name) {
        free(x->slice_name);
        x->slice_name = str_dup(name);
    }
    if (rv) {
        free(x->slice_rv);
        x->slice_rv = str_dup(rv);
    }
    json_decref(obj);
}

/* Creates our slice, or updates it with the name and resourceVersion last seen; when that
 * one changed meanwhile (409) or was never learnt, the slices are listed first. */
static int write_slice(struct daemon__dra *x, const struct daemon *d, struct error *err)
{
    char *body = NULL, *answer = NULL;
    int r = 0;

    for (int attempt = 0; attempt < 2; attempt++) {
        if (!x->slice_name || attempt > 0)
            r = adopt_slices(x, d, err);
        if (r < 0)
            break;
        free(body);
        body = slice_text(x, d, x->slice_name, x->slice_rv, x->generation + 1, err);
        if (!body) {
            r = -ENOMEM;
            break;
        }
        r = x->slice_name
                ? kube_slice_update(x->kube, x->slice_name, body, x->slice_rv, &answer, err)
                : kube_slice_create(x->kube, body, &answer, err);
        if (r != -EEXIST && r != -ENOENT)
            break;
        *err = (struct error){0}; /* changed or gone meanwhile: list, then once more */
    }
    if (r == 0) {
        x->generation++;
        take_meta(x, answer);
        log_info("DRA: ResourceSlice %s written: %zu devices (pool generation %lld)",
                 x->slice_name ? x->slice_name : "", x->devs->n_devices, (long long)x->generation);
    }
    free(body);
    free(answer);
    return r;
}

/* Writes the slice when its content changed (or removes it when the node has no device). */
static int publish(struct daemon__dra *x, const struct daemon *d, struct error *err)
{
    char *want = slice_text(x, d, NULL, NULL, 1, err);
    int r = want ? 0 : -ENOMEM;

    if (r == 0 && x->published && strcmp(want, x->published) == 0)
        goto out;                            /* nothing changed */
    if (r == 0 && x->devs->n_devices == 0) { /* the node's GPUs are gone: so is the slice */
        r = adopt_slices(x, d, err);
        if (r == 0 && x->slice_name)
            r = kube_slice_delete(x->kube, x->slice_name, NULL, err);
        r = r == -ENOENT ? 0 : r;
        if (r == 0) {
            free(x->slice_name);
            x->slice_name = NULL;
            log_info("DRA: no GPU on this node: ResourceSlice removed");
        }
    } else if (r == 0) {
        r = write_slice(x, d, err);
    }
    if (r == 0) {
        free(x->published);
        x->published = want;
        want = NULL;
    }
out:
    free(want);
    return r;
}

/* Publishes now, or schedules a retry with backoff (1 s doubling to 30 s). */
static void publish_or_retry(struct daemon *d)
{
    struct daemon__dra *x = d->dra;
    struct error err = {0};

    if (publish(x, d, &err) == 0) {
        x->retry_ms = 0;
        daemon__timer_set(x->retry_fd, 0, false);
        return;
    }
    x->retry_ms = x->retry_ms ? x->retry_ms * 2 : DRA_RETRY_MIN_MS;
    if (x->retry_ms > DRA_RETRY_MAX_MS)
        x->retry_ms = DRA_RETRY_MAX_MS;
    log_error("DRA: publishing the ResourceSlice: %s; retrying in %u ms", err.msg, x->retry_ms);
    daemon__timer_set(x->retry_fd, x->retry_ms, false);
}

static void dra_on_retry(struct daemon *d)
{
    daemon__timer_drain(d->dra->retry_fd);
    pthread_mutex_lock(&d->dra->lock);
    publish_or_retry(d);
    pthread_mutex_unlock(&d->dra->lock);
}

/* Is our slice, as last written, among the slices the watch sees? */
static bool slice_present(const struct daemon__dra *x, const struct kube_slice_list *l)
{
    json_t *items = json_loads(l->items_json ? l->items_json : "[]", 0, NULL);
    bool found = false;

    for (size_t i = 0; !found && i < json_array_size(items); i++) {
        json_t *meta = json_object_get(json_array_get(items, i), "metadata");
        found = x->slice_name &&
                strcmp(json_string_value(json_object_get(meta, "name")) ?: "", x->slice_name) == 0;
    }
    json_decref(items);
    return found || !items;
}

/* The watch of our slices fired: a slice deleted behind our back (kubectl, a cleanup
 * controller) is written again, as NVIDIA's driver does. */
static void dra_on_watch(struct daemon *d)
{
    struct daemon__dra *x = d->dra;
    struct kube_slice_list l = {0};
    bool known = false;
    uint64_t ticks;

    (void)!read(kube_slice_watch_fd(x->watch), &ticks, sizeof(ticks));
    if (kube_slice_watch_get(x->watch, &l, &known, NULL) < 0 || !known)
        return;
    pthread_mutex_lock(&x->lock);
    if (x->published && *x->published && !slice_present(x, &l)) {
        log_warn("DRA: our ResourceSlice %s is gone from the API: writing it again",
                 x->slice_name ? x->slice_name : "");
        free(x->published);
        x->published = NULL;
        publish_or_retry(d);
    }
    pthread_mutex_unlock(&x->lock);
    kube_slice_list_release(&l);
}

/* ---- sharing ---------------------------------------------------------------------------- */

/* Runs nvidia-smi with args (NULL-terminated) from the driver root, as NVIDIA's driver does:
 * NVML has no public call for the time-slice. Its output goes to our log at debug. */
static int run_smi(const struct daemon__dra *x, const char *const *args, struct error *err)
{
    const char *argv[8] = {x->smi};
    int status = 0, fd;
    size_t n = 1;
    pid_t pid;

    for (; args[n - 1] && n < GS_ARRAY_SIZE(argv) - 1; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    pid = fork();
    if (pid < 0)
        return error_set_errno(err, errno, "running %s", x->smi);
    if (pid == 0) {
        fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd >= 0)
            dup2(fd, 0);
        execv(x->smi, (char *const *)argv);
        _exit(127);
    }
    for (int waited = 0; waitpid(pid, &status, WNOHANG) == 0; waited += 10) {
        if (waited >= DRA_SMI_TIMEOUT_MS) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return error_set(err, -ETIMEDOUT, "%s %s did not finish within %d s", x->smi, args[0],
                             DRA_SMI_TIMEOUT_MS / 1000);
        }
        usleep(DRA_SMI_POLL_US);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    return error_set(err, -EIO,
                     "%s %s %s failed (exit %d); is nvidia-smi under the container driver root "
                     "(--container-driver-root, or --nvidia-smi)?",
                     x->smi, args[0], args[1] ? args[1] : "",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Sets (or, with `reset`, undoes) the time-slice of the plan's whole GPUs under TimeSlicing. */
static int timeslice(struct daemon__dra *x, const struct dra_plan *plan, bool reset,
                     struct error *err)
{
    int r = 0;

    for (size_t i = 0; r == 0 && i < plan->n_devices; i++) {
        const struct dra_plan_device *pd = &plan->devices[i];
        char level[8];
        if (pd->sharing.strategy != DRA_SHARING_TIME_SLICING || pd->device.type != DRA_DEVICE_GPU)
            continue;
        snprintf(level, sizeof(level), "%d",
                 reset ? DRA_TIMESLICE_DEFAULT : (int)pd->sharing.interval);
        /* NVIDIA's argv (cmd/gpu-kubelet-plugin/nvlib.go): -c DEFAULT, then the time-slice */
        const char *mode[] = {"-i", pd->device.uuid, "-c", "DEFAULT", NULL};
        const char *policy[] = {"compute-policy",  "-i",  pd->device.uuid,
                                "--set-timeslice", level, NULL};
        r = reset ? 0 : run_smi(x, mode, err);
        if (r == 0)
            r = run_smi(x, policy, err);
        if (r == 0)
            log_info("DRA: claim %s: GPU %s time-slice %s", plan->claim_uid, pd->device.uuid,
                     reset ? "reset to Default (0)" : level);
    }
    return r;
}

/* The MPS daemon of group g of a claim: "claim-<uid>-<g>" (its pipe folder's name). */
static void mps_name(const struct dra_plan *plan, unsigned g, char *buf, size_t size)
{
    snprintf(buf, size, "claim-%s-%u", plan->claim_uid, g);
}

/* Every MPS group of the prepared claims (plus `extra`, not yet in the checkpoint) as
 * control-daemon specs; the supervisor makes the running daemons match. */
static int mps_sync(struct daemon__dra *x, const struct dra_plan *extra, struct error *err)
{
    struct mps_daemon_spec *specs = calloc(MPS_MAX_DAEMONS, sizeof(*specs));
    size_t n = 0;
    int r = specs ? 0 : error_set(err, -ENOMEM, "out of memory");

    for (size_t c = 0; r == 0 && c <= x->cp->n_claims; c++) {
        const struct dra_plan *p = c < x->cp->n_claims ? x->cp->claims[c].plan : extra;
        for (size_t i = 0; r == 0 && p && i < p->n_devices; i++) {
            const struct dra_plan_device *pd = &p->devices[i];
            char name[sizeof(specs[0].resource)];
            size_t k = 0;
            if (pd->sharing.strategy != DRA_SHARING_MPS)
                continue;
            mps_name(p, pd->group, name, sizeof(name));
            while (k < n && strcmp(specs[k].resource, name) != 0)
                k++;
            if (k == n && n == MPS_MAX_DAEMONS)
                r = error_set(err, -E2BIG, "more than %d MPS claims on one node", MPS_MAX_DAEMONS);
            if (r < 0 || specs[k].n == MPS_MAX_DEVICES)
                break;
            if (k == n)
                str_copy(specs[n++].resource, name, sizeof(specs[0].resource));
            str_copy(specs[k].uuids[specs[k].n], pd->device.uuid, INV_UUID_MAX);
            specs[k].mem_limit_mib[specs[k].n++] = pd->sharing.pinned_limit_mib;
            if (pd->sharing.active_thread_percentage >= 0)
                specs[k].thread_pct = (unsigned)pd->sharing.active_thread_percentage;
        }
    }
    if (r == 0)
        r = mps_supervisor_set(x->mps, specs, n, err);
    free(specs);
    /* a daemon that did not start was reported (daemon_mps_report) and is retried with
     * backoff by the supervisor, as for the device plugin: not a reason to fail the claim */
    if (r < 0 && r != -E2BIG && r != -ENOMEM) {
        log_warn("DRA: MPS: %s; retrying", err->msg);
        *err = (struct error){0};
        r = 0;
    }
    return r;
}

/* The pipe folder of the MPS daemon serving plan device pd (its clients'
 * CUDA_MPS_PIPE_DIRECTORY), owned; NULL when out of memory. */
static char *mps_pipe_of(const struct daemon__dra *x, const struct dra_plan *plan,
                         const struct dra_plan_device *pd)
{
    struct strbuf pipe = STRBUF_INIT;
    char name[160];

    mps_name(plan, pd->group, name, sizeof(name));
    if (mps_path(x->mps_root, name, "pipe", &pipe) < 0) {
        strbuf_release(&pipe);
        return NULL;
    }
    return strbuf_take(&pipe);
}
/* ---- the claim's CDI spec ---------------------------------------------------------------- */

/* A device's own MPS edits: its daemon's pipe folder, same path inside, and the variable. */
struct mps_edits {
    char *pipe, *env;
    const char *envs[2];
    struct cdi_mount mount;
};

static int mps_edits_of(const struct daemon__dra *x, const struct dra_plan *plan,
                        const struct dra_plan_device *pd, struct mps_edits *e,
                        struct cdi_claim_device *dev)
{
    e->pipe = mps_pipe_of(x, plan, pd);
    if (!e->pipe || asprintf(&e->env, "CUDA_MPS_PIPE_DIRECTORY=%s", e->pipe) < 0)
        return -ENOMEM;
    e->envs[0] = e->env;
    e->mount = (struct cdi_mount){.host_path = e->pipe, .container_path = e->pipe};
    dev->edits = (struct cdi_edits){.env = e->envs, .mounts = &e->mount, .n_mounts = 1};
    return 0;
}

static int write_spec(struct daemon__dra *x, const struct daemon *d, const struct dra_plan *plan,
                      struct error *err)
{
    size_t n = plan->n_devices ? plan->n_devices : 1;
    struct cdi_claim_device *devs = calloc(n, sizeof(*devs));
    struct mps_edits *mps = calloc(n, sizeof(*mps));
    struct cdi_claim cc = {.uid = plan->claim_uid,
                           .driver_version = dp_snapshot_inventory(d->snap)->driver_version,
                           .devices = devs,
                           .n_devices = plan->n_devices};
    char *json = NULL;
    int r = devs && mps ? 0 : -ENOMEM;

    for (size_t i = 0; r == 0 && i < plan->n_devices; i++) {
        const struct dra_plan_device *pd = &plan->devices[i];
        devs[i] = (struct cdi_claim_device){.name = pd->cdi_device_name,
                                            .minor = pd->device.minor,
                                            .is_mig = pd->device.type == DRA_DEVICE_MIG,
                                            .gi_id = pd->device.gi_id,
                                            .ci_id = pd->device.ci_id};
        if (pd->sharing.strategy == DRA_SHARING_MPS) /* its clients reach its daemon */
            r = mps_edits_of(x, plan, pd, &mps[i], &devs[i]);
    }
    if (r == -ENOMEM)
        error_set(err, r, "out of memory writing the CDI spec of claim %s", plan->claim_uid);
    if (r == 0)
        r = cdi_claim_spec_build(&cc, &x->cdi, &json, err);
    if (r == 0)
        r = cdi_claim_spec_write(x->cdi_root, plan->claim_uid, json, NULL, err);
    for (size_t i = 0; mps && i < plan->n_devices; i++) {
        free(mps[i].pipe);
        free(mps[i].env);
    }
    free(mps);
    free(devs);
    free(json);
    return r;
}

/* ---- prepare and unprepare (the gRPC thread, under x->lock) ------------------------------ */

static void remember_pods(struct daemon__dra *x, const struct dra_claim *claim)
{
    for (size_t i = 0; i < claim->n_reserved_for && x->n_pods < DRA_MAX_POD_REFS; i++) {
        struct pod_ref *p = &x->pods[x->n_pods++];
        str_copy(p->claim_uid, claim->uid, sizeof(p->claim_uid));
        str_copy(p->ns, claim->namespace ? claim->namespace : "default", sizeof(p->ns));
        str_copy(p->name, claim->reserved_for[i].name ? claim->reserved_for[i].name : "",
                 sizeof(p->name));
        str_copy(p->uid, claim->reserved_for[i].uid ? claim->reserved_for[i].uid : "",
                 sizeof(p->uid));
    }
}

static void forget_pods(struct daemon__dra *x, const char *claim_uid)
{
    for (size_t i = 0; i < x->n_pods;)
        if (strcmp(x->pods[i].claim_uid, claim_uid) == 0)
            x->pods[i] = x->pods[--x->n_pods];
        else
            i++;
}

static int answer(const struct dra_plan *plan, struct kdra_result *res)
{
    for (size_t i = 0; i < plan->n_devices; i++) {
        const struct dra_plan_device *pd = &plan->devices[i];
        const char *requests[] = {pd->request, NULL};
        const char *ids[] = {pd->cdi_device_id, NULL};
        if (kdra_result_add_device(res, pd->pool, pd->device.name, requests, ids) < 0)
            return kdra_result_set_error(res, "out of memory");
    }
    return 0;
}

/* Sharing, then the CDI spec: what the containers of the claim's pods will see. */
static int apply(struct daemon__dra *x, const struct daemon *d, const struct dra_plan *plan,
                 struct error *err)
{
    int r = timeslice(x, plan, false, err);

    if (r == 0 && x->mps && mps_sync(x, plan, err) < 0)
        r = -EIO;
    if (r == 0)
        r = write_spec(x, d, plan, err);
    return r;
}

/* The claim as the API has it now; the whole call fails (as in NVIDIA's driver) when it is
 * gone or is another claim than the kubelet means. */
static int claim_read(struct daemon__dra *x, const struct kdra_claim *c, struct dra_claim **ret,
                      struct rpc_status *st)
{
    struct error err = {0};
    char *json = NULL;
    int r = kube_claim_get(x->kube, c->namespace, c->name, &json, &err);

    if (r == 0)
        r = dra_claim_parse_text(json, strlen(json), ret, &err);
    free(json);
    if (r == -ENOENT)
        rpc_status_set(st, RPC_NOT_FOUND, "ResourceClaim %s/%s: %s", c->namespace, c->name,
                       err.msg);
    else if (r < 0)
        rpc_status_set(st, RPC_UNAVAILABLE, "reading ResourceClaim %s/%s: %s", c->namespace,
                       c->name, err.msg);
    else if (strcmp((*ret)->uid, c->uid) != 0)
        rpc_status_set(st, RPC_FAILED_PRECONDITION,
                       "ResourceClaim %s/%s has UID %s, not %s: it was deleted and created "
                       "again; the kubelet retries with the new one",
                       c->namespace, c->name, (*ret)->uid, c->uid);
    else
        return 0;
    dra_claim_free(*ret);
    *ret = NULL;
    return -ESTALE;
}

static int prepare_locked(struct daemon__dra *x, const struct daemon *d,
                          const struct dra_claim *claim, struct kdra_result *res)
{
    const struct dra_checkpoint_claim *done = dra_checkpoint_find(x->cp, claim->uid);
    struct dra_plan *plan = NULL, *copy = NULL;
    struct error err = {0};
    int r;

    if (done && done->state == DRA_PREPARE_COMPLETED)
        return answer(done->plan, res); /* the kubelet retried: the same answer */
    r = dra_plan_build(claim, d->o->node_name, x->devs, x->cp, &plan, &err);
    copy = r == 0 ? dra_plan_dup(plan) : NULL;
    if (r == 0 && !copy)
        r = error_set(&err, -ENOMEM, "out of memory");
    /* PrepareStarted first: a crash from here on leaves a record unprepare cleans up */
    if (r == 0) {
        r = dra_checkpoint_put(x->cp, DRA_PREPARE_STARTED, copy, &err);
        copy = NULL;
    }
    if (r == 0)
        r = checkpoint_save(x, &err);
    if (r == 0)
        r = apply(x, d, plan, &err);
    if (r == 0) {
        remember_pods(x, claim);
        r = dra_checkpoint_put(x->cp, DRA_PREPARE_COMPLETED, plan, &err);
        plan = NULL;
    }
    if (r == 0)
        r = checkpoint_save(x, &err);
    if (r < 0) {
        log_warn("DRA: preparing claim %s/%s (%s): %s", claim->namespace, claim->name, claim->uid,
                 err.msg);
        dra_plan_free(plan);
        dra_plan_free(copy);
        return kdra_result_set_error(res, "%s", err.msg);
    }
    done = dra_checkpoint_find(x->cp, claim->uid);
    log_info("DRA: prepared claim %s/%s (%s): %zu devices", claim->namespace, claim->name,
             claim->uid, done->plan->n_devices);
    return answer(done->plan, res);
}

static int op_prepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims,
                      size_t n_claims, struct kdra_result *results, struct rpc_status *st)
{
    struct daemon *d = ctx;
    struct daemon__dra *x = d->dra;
    int r = 0;

    for (size_t i = 0; r == 0 && i < n_claims; i++) {
        struct dra_claim *claim = NULL;
        r = claim_read(x, &claims[i], &claim, st);
        if (r < 0)
            break;
        pthread_mutex_lock(&x->lock);
        r = prepare_locked(x, d, claim, &results[i]);
        pthread_mutex_unlock(&x->lock);
        dra_claim_free(claim);
    }
    return r;
}

/* Undoes what prepare did for the claim (also a half-done one); unknown claims succeed. */
static int unprepare_locked(struct daemon__dra *x, const char *uid, struct error *err)
{
    const struct dra_checkpoint_claim *e = dra_checkpoint_find(x->cp, uid);
    struct dra_plan *plan = e ? dra_plan_dup(e->plan) : NULL;
    int r = 0;

    if (!e)
        return 0;
    if (!plan)
        return error_set(err, -ENOMEM, "out of memory");
    r = cdi_claim_spec_remove(x->cdi_root, uid, err);
    if (r == 0)
        r = timeslice(x, plan, true, err);
    dra_checkpoint_remove(x->cp, uid);
    if (r == 0 && x->mps)
        r = mps_sync(x, NULL, err);
    if (r == 0)
        r = checkpoint_save(x, err);
    if (r == 0) {
        forget_pods(x, uid);
        log_info("DRA: unprepared claim %s/%s (%s)", plan->claim_namespace, plan->claim_name, uid);
    } else {
        (void)dra_checkpoint_put(x->cp, DRA_PREPARE_STARTED, dra_plan_dup(plan), NULL);
    }
    dra_plan_free(plan);
    return r;
}

static int op_unprepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims,
                        size_t n_claims, struct kdra_result *results, struct rpc_status *st)
{
    struct daemon *d = ctx;
    struct daemon__dra *x = d->dra;

    for (size_t i = 0; i < n_claims; i++) {
        struct error err = {0};
        pthread_mutex_lock(&x->lock);
        if (unprepare_locked(x, claims[i].uid, &err) < 0)
            (void)kdra_result_set_error(&results[i], "%s", err.msg);
        pthread_mutex_unlock(&x->lock);
    }
    return 0;
}

static void op_registration(void *ctx, bool registered, const char *error)
{
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

/* ---- health: claims whose GPU was lost ---------------------------------------------------- */

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

/* An Event on each pod of a prepared claim whose device went Unhealthy or away (once per
 * claim and GPU until it is back): NVIDIA's driver tells nobody. */
static void report_lost(struct daemon *d, struct daemon__dra *x)
{
    for (size_t c = 0; c < x->cp->n_claims; c++) {
        const struct dra_plan *p = x->cp->claims[c].plan;
        for (size_t i = 0; i < p->n_devices; i++) {
            const struct dra_device_info *dev = &p->devices[i].device;
            char key[256], msg[512];
            bool ok = device_ok(x->devs, dev->name), told;
            snprintf(key, sizeof(key), "%s %s", p->claim_uid, dev->parent_uuid);
            told = strv_contains(x->lost_reported, key);
            if (ok && told)
                strv_drop(x->lost_reported, key);
            if (ok || told || strv_push(&x->lost_reported, key) < 0)
                continue;
            snprintf(msg, sizeof(msg),
                     "GPU %s of ResourceClaim %s/%s (device %s) is unhealthy or gone; the pods "
                     "using it may fail: delete them to get another device",
                     dev->parent_uuid, p->claim_namespace, p->claim_name, dev->name);
            log_warn("DRA: %s", msg);
            bool any = false;
            for (size_t k = 0; k < x->n_pods; k++)
                if (strcmp(x->pods[k].claim_uid, p->claim_uid) == 0) {
                    daemon__kube_event_pod(d, x->pods[k].ns, x->pods[k].name, x->pods[k].uid,
                                           "PreparedDeviceLost", msg);
                    any = true;
                }
            if (!any)
                daemon__kube_event(d, "PreparedDeviceLost", msg);
        }
    }
}

/* ---- the gRPC health service (--healthcheck-port) ------------------------------------------ */

/* grpc.health.v1.Health/Check, as NVIDIA's chart probes it (startup and liveness, over TCP):
 * HealthCheckResponse{status: SERVING (1)} once the kubelet accepted the registration,
 * NOT_SERVING (2) before. The request's service name is not looked at. */
static int health_check(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                        struct rpc_status *st)
{
    struct daemon__dra *x = ctx;
    struct kdra_registration reg;
    const char serving[] = {0x08, 0x01}, not_serving[] = {0x08, 0x02};

    kdra_server_registration(x->srv, &reg);
    return strbuf_append(resp, reg.is_registered ? serving : not_serving, 2);
}

static int health_start(const struct daemon *d, struct daemon__dra *x, struct error *err)
{
    char addr[64];
    int r;

    if (d->o->dra.healthcheck_port < 0)
        return 0;
    if (d->o->dra.healthcheck_port > 65535)
        return error_set(err, -EINVAL, "--healthcheck-port %lld is not a port (0-65535, -1: off)",
                         (long long)d->o->dra.healthcheck_port);
    snprintf(addr, sizeof(addr), "0.0.0.0:%lld", (long long)d->o->dra.healthcheck_port);
    r = rpc_server_new_tcp(addr, &x->health, err);
    if (r == 0)
        r = rpc_server_add_unary(x->health, "/grpc.health.v1.Health/Check", health_check, x, err);
    if (r == 0)
        r = rpc_server_start(x->health, err);
    if (r == 0)
        log_info("DRA: gRPC health service on %s", addr);
    return r;
}

/* ---- the feature -------------------------------------------------------------------------- */

/* Paths under the kubelet's plugins dir, nvidia-smi, the CDI options. */
static int dra_paths(struct daemon *d, struct daemon__dra *x, struct error *err)
{
    const struct daemon_dra_options *o = &d->o->dra;
    const char *ctr = o->container_driver_root          ? o->container_driver_root
                      : d->o->nvml.driver_root_ctr_path ? d->o->nvml.driver_root_ctr_path
                                                        : GPU_DEFAULT_DRIVER_ROOT_CTR_PATH;
    struct strbuf sb = STRBUF_INIT;
    int r = strbuf_printf(&sb, "%s/%s", o->plugins_dir, DRA_DRIVER_NAME);

    x->plugin_dir = r == 0 ? strbuf_take(&sb) : NULL;
    if (x->plugin_dir && strbuf_printf(&sb, "%s/checkpoint.json", x->plugin_dir) == 0)
        x->cp_path = strbuf_take(&sb);
    if (x->plugin_dir && strbuf_printf(&sb, "%s/mps", x->plugin_dir) == 0)
        x->mps_root = strbuf_take(&sb);
    if (o->nvidia_smi)
        x->smi = str_dup(o->nvidia_smi);
    else if (strbuf_printf(&sb, "%s/usr/bin/nvidia-smi", path_is_dir(ctr) ? ctr : "") == 0)
        x->smi = strbuf_take(&sb);
    strbuf_release(&sb);
    x->cdi_root = o->cdi_root;
    if (!x->plugin_dir || !x->cp_path || !x->mps_root || !x->smi)
        return error_set(err, -ENOMEM, "out of memory");
    r = cdi_options_from_config(&x->cdi, d->cfg, NULL, NULL, d->o->proc_root, err);
    if (r == 0 && o->cdi_hook_path)
        x->cdi.hook_path = o->cdi_hook_path;
    if (r == 0) { /* the driver's files as this process sees them, the host's for the spec */
        const char *host = o->host_driver_root ? o->host_driver_root : "/";
        x->cdi.driver_root = path_is_dir(ctr) ? ctr : host;
        if (strbuf_printf(&sb, "%s/dev", x->cdi.driver_root) == 0)
            x->cdi.dev_root = path_is_dir(strbuf_str(&sb)) ? x->cdi.driver_root : "/";
        strbuf_release(&sb);
        x->cdi.host_driver_root = host;
        x->cdi.host_dev_root = host;
    }
    if (r == 0)
        r = path_mkdir_p(x->plugin_dir, 0750, err);
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
    if (kube_node_uid(x->kube, NULL, &x->node_uid, err) < 0) {
        log_warn("DRA: %s; the ResourceSlice gets its owner reference once the node is read",
                 err->msg);
        *err = (struct error){0};
    }
    return 0;
}

static int dra_mps(struct daemon *d, struct daemon__dra *x, struct error *err)
{
    struct mps_options mo = {.root = x->mps_root,
                             .binary = d->o->mps_control_binary,
                             .timeout_ms = MPS_DEFAULT_TIMEOUT_MS,
                             .probe_interval_ms = (unsigned)d->o->mps_probe_interval_ms,
                             .report = daemon_mps_report};
    struct error e = {0};

    if (gpu_nvml_open(&d->o->nvml, &x->nvml, &e) < 0)
        log_warn("DRA: MPS: no NVML (%s): compute modes are left as they are", e.msg);
    mo.nvml = x->nvml;
    if (mps_supervisor_new(&mo, &x->mps, err) < 0)
        return -EIO;
    return x->cp->n_claims ? mps_sync(x, NULL, err) : 0; /* a restart: the claims' daemons */
}

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

static int dra_start(struct daemon *d, struct error *err)
{
    struct daemon__dra *x;
    struct kdra_server_opts so = {.plugins_dir = d->o->dra.plugins_dir,
                                  .registrar_dir = d->o->dra.registrar_dir,
                                  .ops = &dra_ops,
                                  .ctx = d};
    int r;

    if (!d->o->dra.enabled)
        return 0;
    r = device_plugin_live(d, err);
    if (r < 0)
        return r;
    x = calloc(1, sizeof(*x));
    if (!x)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&x->lock, NULL);
    x->retry_fd = daemon__timer_new();
    x->lost_reported = strv_new();
    d->dra = x;
    r = x->retry_fd >= 0 && x->lost_reported ? 0 : error_set(err, -ENOMEM, "out of memory");
    if (r == 0)
        r = dra_paths(d, x, err);
    if (r == 0)
        r = checkpoint_load(x, err);
    if (r == 0)
        r = dra_kube(d, x, err);
    if (r == 0)
        r = dra_mps(d, x, err);
    if (r == 0)
        r = build_devices(d, &x->devs, err);
    if (r < 0)
        return r;
    counts_update(x);
    publish_or_retry(d);
    if (kube_slices_watch_start(x->kube, DRA_DRIVER_NAME, d->o->node_name, NULL, &x->watch, err) <
        0) {
        log_warn("DRA: watching our ResourceSlices: %s; a slice deleted by hand comes back "
                 "with the next change only",
                 err->msg);
        *err = (struct error){0};
    }
    r = kdra_server_new(&so, &x->srv, err);
    if (r == 0)
        r = kdra_server_start(x->srv, err);
    if (r == 0)
        r = health_start(d, x, err);
    if (r == 0)
        log_info("DRA: serving %s on %s, registering through %s (%zu prepared claims kept)",
                 DRA_DRIVER_NAME, kdra_server_socket_path(x->srv),
                 kdra_server_registration_path(x->srv), x->cp->n_claims);
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
    if (build_devices(d, &devs, &err) < 0) {
        log_error("DRA: %s: %s; the ResourceSlice stays as it is", c->why, err.msg);
        return;
    }
    pthread_mutex_lock(&x->lock);
    dra_devices_free(x->devs);
    x->devs = devs;
    counts_update(x);
    if (!x->node_uid)
        (void)kube_node_uid(x->kube, NULL, &x->node_uid, NULL);
    publish_or_retry(d);
    report_lost(d, x);
    pthread_mutex_unlock(&x->lock);
}

static void dra_stop(struct daemon *d)
{
    struct daemon__dra *x = d->dra;

    if (!x)
        return;
    rpc_server_free(x->health);
    kdra_server_free(x->srv); /* no call in flight after this */
    kube_slice_watch_stop(x->watch);
    mps_supervisor_free(x->mps);
    gpu_nvml_close(x->nvml);
    daemon__timer_close(&x->retry_fd);
    dra_checkpoint_free(x->cp);
    dra_devices_free(x->devs);
    kube_client_free(x->kube);
    strv_free(x->lost_reported);
    free(x->node_uid);
    free(x->published);
    free(x->slice_name);
    free(x->slice_rv);
    free(x->plugin_dir);
    free(x->cp_path);
    free(x->mps_root);
    free(x->smi);
    pthread_mutex_destroy(&x->lock);
    free(x);
    d->dra = NULL;
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
        r = strbuf_printf(sb, "gpuslice_dra_prepared_claims %zu\n", atomic_load(&x->n_claims));
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

static void dra_on_mps(struct daemon *d)
{
    bool changed = false;

    pthread_mutex_lock(&d->dra->lock);
    mps_supervisor_dispatch(d->dra->mps, &changed);
    pthread_mutex_unlock(&d->dra->lock);
}

static int dra_retry_fd(const struct daemon *d)
{
    return d->dra ? d->dra->retry_fd : -1;
}

static int dra_mps_fd(const struct daemon *d)
{
    return d->dra && d->dra->mps ? mps_supervisor_fd(d->dra->mps) : -1;
}

static int dra_watch_fd(const struct daemon *d)
{
    return d->dra && d->dra->watch ? kube_slice_watch_fd(d->dra->watch) : -1;
}

static const struct daemon_source dra_sources[] = {
    {dra_retry_fd, dra_on_retry},
    {dra_mps_fd, dra_on_mps},
    {dra_watch_fd, dra_on_watch},
};

const struct daemon_feature daemon__feature_dra = {
    .name = "dra",
    .start = dra_start,
    .on_state = dra_on_state,
    .metrics = dra_metrics,
    .ready = dra_ready,
    .stop = dra_stop,
    .sources = dra_sources,
    .n_sources = GS_ARRAY_SIZE(dra_sources),
};

/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h: what daemon/'s files share. The loop and its units (loop.c): each feature is
 * a `struct daemon_feature` in its own file, registered by one line in daemon.c; the core
 * (reload.c) builds the node state and hands it to every unit through the ops, never naming
 * one. Below the core: the API client and Event poster (label.c), the holders thread
 * (holders.c), the health thread (health_thread.c). Never included from outside src/daemon/.
 * Each field of struct daemon is written by the one file named beside it. */
#ifndef GS_DAEMON_INTERNAL_H
#define GS_DAEMON_INTERNAL_H

#include <sys/inotify.h>

#include "daemon/daemon.h"
#include "gpu/inventory.h"
#include "kubelet/kubelet.h"
#include "model/model.h"

/* Allocate calls a stopped plugin had served (metrics.c). */
struct daemon__alloc_count {
    char resource[128];
    unsigned long long allocates, allocate_errors;
};

/* One device's critical XID (or: every device, when the event wait failed). */
struct daemon__health_msg {
    char uuid[INV_UUID_MAX];
    unsigned long long xid;
    unsigned gi_id, ci_id;
    bool all_devices; /* the event wait failed: everything is unhealthy */
    bool back;        /* the GPU answers again after it was lost (a reset): uuid says which */
    char text[200];   /* why, for all_devices */
};

/* ---- the loop and its units (loop.c) ----------------------------------------------------- */

struct daemon;
struct dp_snapshot;
struct cfg_config;
struct model;
struct strbuf;

/* Bits of daemon__apply's `what` (what to read again) and of a change's `what`. */
#define DAEMON_RELOAD_CONFIG 1u    /* the config (file, node label) */
#define DAEMON_RELOAD_INVENTORY 2u /* the inventory */
#define DAEMON_CHANGE_DEVICES 4u   /* the new state has other GPUs or MIG devices */
#define DAEMON_CHANGE_HEALTH 8u    /* only health changed, in the state served (old == d->snap) */
#define DAEMON_CHANGE_START 16u    /* the first state, before any unit started (prepare only) */

/* A new node state, as every unit hears of it: d->snap is the state now, old the one before
 * (NULL at start; d->snap itself for a health change). */
struct daemon_change {
    unsigned what; /* DAEMON_RELOAD_* that caused it | DAEMON_CHANGE_* */
    const struct dp_snapshot *old;
    const char *why; /* for logs: "config change", "SIGHUP", "XID", ... */
};

/* One fd a unit waits on: fd() says which now (-1: none now; asked before every poll), ready()
 * runs on the loop thread when it is readable. */
struct daemon_source {
    int (*fd)(const struct daemon *d);
    void (*ready)(struct daemon *d);
};

/* A unit of the loop. Every op is optional and runs on the loop thread. A feature calls the
 * core (daemon__apply, daemon__health_changed), the services below it (label.c's Events and
 * API client, holders.c, timers) and nothing else: never another feature. */
struct daemon_feature {
    const char *name;
    /* After the first state exists and was prepared: create what it owns, start threads. */
    int (*start)(struct daemon *d, struct error *err);
    /* Before next is served: make what it names exist (CDI specs, MPS daemons). A negative
     * return keeps the current state (the unit logs and schedules its own retry); at start
     * (DAEMON_CHANGE_START) it stops the daemon with err. */
    int (*prepare)(struct daemon *d, const struct dp_snapshot *next, const struct cfg_config *cfg,
                   const struct daemon_change *c, struct error *err);
    /* While a new model is built: mark the devices it keeps Unhealthy (XIDs, MIG drains, MPS
     * daemons down), so every rebuilt state keeps them. */
    void (*mark)(const struct daemon *d, struct model *m);
    /* A new state is served (d->snap); c says what changed. */
    void (*on_state)(struct daemon *d, const struct daemon_change *c);
    /* The holders' answer was taken (holders.c): decisions that waited for it. */
    void (*on_holders)(struct daemon *d);
    /* Its /metrics series, on a scrape. */
    int (*metrics)(struct daemon *d, struct strbuf *sb);
    /* False (and why) while the node is not ready for /readyz. */
    bool (*ready)(const struct daemon *d, char *why, size_t n);
    /* Before every poll: re-arm what depends on state (registration retries). */
    void (*before_poll)(struct daemon *d);
    void (*stop)(struct daemon *d);
    const struct daemon_source *sources;
    size_t n_sources;
};
#define DAEMON_SOURCES_MAX 32

/* The units daemon.c registers (each defined in the file named). */
extern const struct daemon_feature daemon__inputs;          /* inputs.c */
extern const struct daemon_feature daemon__feature_serve;   /* serve.c */
extern const struct daemon_feature daemon__feature_health;  /* recovery.c */
extern const struct daemon_feature daemon__feature_cdi;     /* cdi.c */
extern const struct daemon_feature daemon__feature_mps;     /* mps.c */
extern const struct daemon_feature daemon__feature_labels;  /* labels.c */
extern const struct daemon_feature daemon__feature_metrics; /* metrics.c + sampler.c */
extern const struct daemon_feature daemon__feature_mig;     /* mig.c */
extern const struct daemon_feature daemon__feature_dra;     /* dra.c */

/* Polls every unit's sources until d->stopping (0) or a failed poll. */
int daemon__loop_run(struct daemon *d, struct error *err);
/* The dispatchers: every unit's op, in table order (stop: reverse). */
int daemon__units_start(struct daemon *d, struct error *err);
void daemon__units_stop(struct daemon *d);
int daemon__units_prepare(struct daemon *d, const struct dp_snapshot *next,
                          const struct cfg_config *cfg, const struct daemon_change *c,
                          struct error *err);
void daemon__units_mark(const struct daemon *d, struct model *m);
/* Whether device id of resource is one of d->retiring (kept Unhealthy for its pods only). */
bool daemon__retiring_has(const struct daemon *d, const char *resource, const char *id);
void daemon__units_on_state(struct daemon *d, const struct daemon_change *c);
void daemon__units_on_holders(struct daemon *d);
int daemon__units_metrics(struct daemon *d, struct strbuf *sb);
bool daemon__units_ready(const struct daemon *d, char *why, size_t n);

/* timerfds: new (CLOCK_MONOTONIC, non-blocking), armed once after ms (0 disarms) or every ms
 * when `repeat`, armed?, drained, closed (and set to -1; any fd). */
int daemon__timer_new(void);
void daemon__timer_set(int fd, int64_t ms, bool repeat);
bool daemon__timer_armed(int fd);
void daemon__timer_drain(int fd);
void daemon__timer_close(int *fd);

struct daemon__health;
struct daemon__kube;
struct daemon__labels;
struct daemon__mig;
struct daemon__mps;
struct daemon__sampler;
struct daemon__dra;
struct metrics_server;

/* One served resource: its plugin and registration state. */
struct daemon__sock_id {
    bool valid;
    uint64_t dev, ino;
    int64_t ctime_ns;
};

struct daemon__slot {
    struct dp_plugin *p;
    bool registered;
    unsigned backoff_ms;
    uint64_t retry_at_ms;  /* 0 = not scheduled */
    unsigned fast_retries; /* after kubelet.sock appeared: it may not listen yet */
    /* Which kubelet.sock the last successful Register went to (dev, inode, ctime): an
     * IN_CREATE for the socket we already registered with is not a kubelet restart. */
    struct daemon__sock_id kubelet_id;
};

/* A device an XID made Unhealthy: applied again to every rebuilt model. */
struct daemon__xid_mark {
    char uuid[INV_UUID_MAX];
    unsigned gi_id, ci_id;
    unsigned long long xid; /* the last critical XID seen on it */
    uint64_t at_ms;         /* when (monotonic): recovery counts from here */
};
#define DAEMON_XID_MARKS_MAX 256

/* How long start-up waits for the node label before serving without it (label.c). */
#define DAEMON_FIRST_LABEL_WAIT_MS 500

struct daemon {
    const struct daemon_options *o;
    const struct daemon_feature *const *units; /* daemon.c: the unit table */
    size_t n_units;
    bool stopping; /* daemon.c: a stop signal came, the loop ends */
    int sfd;       /* daemon.c: signalfd */
    /* the core (reload.c): the node state and what it is built from */
    struct dp_snapshot *snap;    /* what is served: config's model + inventory */
    struct cfg_config *cfg;      /* the last good config */
    size_t n_retiring;           /* devices kept Unhealthy for their pods */
    char **retiring;             /* which: "<resource> <id>" (owned strv) */
    bool retire_waiting;         /* a retire check waits for the holders' next answer */
    bool retire_unknown;         /* the last answer could not tell the holders */
    bool apply_waiting;          /* a change that removes devices waits for it too: */
    unsigned apply_waiting_what; /* its DAEMON_RELOAD_* */
    char apply_waiting_why[64];  /* and what it was */
    unsigned long long config_reload_failures; /* for metrics */
    unsigned long long reloads;                /* applied changes */
    /* inputs.c: the config path's watch and the timers that re-read inputs */
    int config_ifd;       /* inotify */
    int wd_config;        /* watch of the config directory (or the file's one) */
    char *config_dir;     /* that directory (owned) */
    int wd_config_parent; /* while it is gone: a watch of its parent, -1 otherwise */
    char *config_base;    /* the config file's basename; NULL when the path is a directory */
    bool config_is_dir;   /* (reload.c sets it when it reads the first config) */
    int debounce_fd, inventory_fd, retire_fd; /* timerfds */
    /* services below the core: label.c (API client, Event poster, the node label) and
     * holders.c (which devices pods hold, read off the loop) */
    struct daemon__kube *kube; /* NULL: no Kubernetes API */
    char *label_value;         /* the label's value, NULL when absent or unknown */
    bool label_pending;        /* the watch has not answered yet: value unknown */
    struct daemon__holders *holders;
    /* serve.c: the device-plugin API */
    char *kubelet_socket; /* NULL: no registration */
    char *kubelet_dir;    /* owned */
    const char *kubelet_name;
    struct daemon__slot *slots;
    size_t n_slots;
    struct model_alloc_env env;
    int ifd, tfd; /* inotify of the plugin (and kubelet) directory; registration retries */
    int wd_plugin, wd_kubelet;
    /* Allocate counts of plugins already stopped (a kubelet restart, a resource gone), per
     * resource: gpuslice_allocations_total only resets with the process */
    struct daemon__alloc_count *alloc_kept;
    size_t n_alloc_kept;
    /* recovery.c: health */
    struct daemon_xid_policy xid;
    struct daemon__health *health; /* the NVML event thread */
    struct daemon__xid_mark xid_marks[DAEMON_XID_MARKS_MAX];
    size_t n_xid_marks;
    bool all_unhealthy; /* the event wait failed */
    int recovery_fd;    /* timerfd for the next device due to recover, or -1 */
    unsigned long long health_recoveries;
    /* health changes by reason, for gpuslice_health_changes_total{reason}: "xid-<n>" (a
     * critical XID made a device Unhealthy), "event-wait-failed", "recovered" */
    struct {
        char reason[32];
        unsigned long long n;
    } health_reasons[32];
    size_t n_health_reasons;
    /* cdi.c */
    char *cdi_json;          /* the spec last written (owned), NULL: none */
    int cdi_retry_fd;        /* timerfd of the next try after a failed write */
    unsigned cdi_retry_what; /* DAEMON_RELOAD_* of the changes waiting for it */
    unsigned cdi_retry_ms;   /* the current backoff, 0: none */
    /* the other features' own state (their files) */
    struct daemon__labels *labels;   /* labels.c; NULL with --labels=off */
    struct metrics_server *metrics;  /* metrics.c; NULL without --metrics-address */
    struct daemon__sampler *sampler; /* sampler.c; NULL without the metrics endpoint */
    struct daemon__mig *mig;         /* mig.c; NULL without --mig-config-file */
    struct daemon__mps *mps;         /* mps.c; NULL unless internal MPS daemons run */
    struct daemon__dra *dra;         /* dra.c; NULL unless dra-plugin */
};

/* ---- reload.c: the core ------------------------------------------------------------------ */

/* The first config, inventory and model into d->cfg / d->snap. */
int daemon__load_initial(struct daemon *d, struct error *err);
/* Every unit's prepare for that first state (CDI spec, MPS daemons), then every unit's marks
 * on it (an MPS daemon refused), before any unit starts. */
int daemon__prepare_initial(struct daemon *d, struct error *err);
/* Applies a change: `what` says what to read again (0: only rebuild the model, e.g. health
 * marks or retiring devices changed). Validates, keeps the last good config on errors, builds
 * the new state and hands it to every unit (on_state), which touches only what changed. */
void daemon__apply(struct daemon *d, unsigned what, const char *why);
/* Device health changed in the served state (dp_snapshot_set_health): every unit hears. */
void daemon__health_changed(struct daemon *d, const char *why);
void daemon__state_release(struct daemon *d);

/* ---- holders.c --------------------------------------------------------------------------- */

/* Which devices pods hold: pod-resources List, or the kubelet's checkpoint, read by a thread
 * of its own when asked; the answer wakes the loop on daemon__holders_fd. */
int daemon__holders_start(struct daemon *d, struct error *err);
void daemon__holders_stop(struct daemon *d);
int daemon__holders_fd(const struct daemon *d);
void daemon__holders_request(struct daemon *d);
/* Takes the thread's new answer, if any (the fd's handler); true when there was one. */
bool daemon__holders_take(struct daemon *d);
/* The answer just taken (in inputs.c on_holders, or by daemon__holders_read_now), borrowed
 * until daemon__holders_done; otherwise NULL, and a new one is asked for: decide when it
 * comes. *ret_reachable: false when neither source answered (holders unknown). */
const struct dp_pod_devices *daemon__holders_view(struct daemon *d, bool *ret_reachable);
/* The decisions of this turn are made: the view is no longer current. */
void daemon__holders_done(struct daemon *d);
/* An answer was taken in this turn (daemon__holders_view will return it). */
bool daemon__holders_current(const struct daemon *d);
/* The thread runs: a request will be answered (so a decision may wait for it). */
bool daemon__holders_can_answer(const struct daemon *d);
/* Reads on this thread, for start-up, before the loop runs. 0, or -ENOENT: unknown. */
int daemon__holders_read_now(struct daemon *d);

/* ---- label.c ----------------------------------------------------------------------------- */

/* Makes the Kubernetes client (in-cluster or --kubeconfig) when NODE_NAME is set, reads the
 * label into d->label_value and starts watching it (unless --config-name wins). Never
 * fails: without an API it logs once and the daemon goes on without the label. */
void daemon__kube_start(struct daemon *d);
void daemon__kube_stop(struct daemon *d);
/* The watch's eventfd for poll(2), -1 without one. */
int daemon__kube_fd(const struct daemon__kube *k);
/* The watch fired: reads it; true when the label's value changed (d->label_value). */
bool daemon__kube_take_label(struct daemon *d);
/* Queues a Warning Event on the node when a client exists; kube/'s poster sends it, retrying
 * with backoff (failures are logged: dropped ones each time, retries once a minute). */
void daemon__kube_event(struct daemon *d, const char *reason, const char *message);
/* The same about a Pod (ns, name, uid; uid may be NULL); pod NULL: about the node. */
void daemon__kube_event_pod(struct daemon *d, const char *ns, const char *pod, const char *uid,
                            const char *reason, const char *message);
/* Queues a merge patch of one label of this node (value NULL or "": remove it), sent by the
 * node-state thread and re-sent until it is on the Node. */
void daemon__kube_set_label(struct daemon *d, const char *key, const char *value);
/* The API client (NULL without one), for features that watch more of the node. */
struct kube_client;
struct kube_client *daemon__kube_client(struct daemon *d);

/* ---- sampler.c: part of the metrics feature -------------------------------------------- */

/* GPU telemetry and per-pod attribution on a thread of its own, for /metrics. */
void daemon__sampler_start(struct daemon *d);
/* Hands the sampler the devices of the snapshot now served. */
void daemon__sampler_update(struct daemon *d);
int daemon__sampler_render(struct daemon *d, struct strbuf *sb);
void daemon__sampler_stop(struct daemon *d);

/* ---- dcgm.c: dcgm-exporter's labels, for the sampler's and the health feature's series --- */

struct gpu_sample_gi;
/* One label: `k="v"` (v escaped; NULL is ""), after a comma unless first. */
void daemon__dcgm_label(struct strbuf *sb, const char *k, const char *v, bool first);
/* The Hostname label's value: the node name, else the host's name. */
void daemon__dcgm_hostname(const struct daemon_options *o, char *buf, size_t n);
/* The labels dcgm-exporter puts after a GPU's own: Hostname and DCGM_FI_DRIVER_VERSION. */
void daemon__dcgm_host_labels(struct strbuf *sb, const char *hostname,
                              const struct inv_inventory *inv);
/* dcgm-exporter's labels of a GPU, or of one of its GPU instances (gi not NULL), then host
 * (daemon__dcgm_host_labels' text), then the pod holding it when pod is not NULL
 * ("ns/name") with its container. */
void daemon__dcgm_labels(struct strbuf *sb, const char *host, const struct inv_gpu *g,
                         const struct gpu_sample_gi *gi, const char *pod, const char *container);

/* ---- health_thread.c: part of the health feature (recovery.c) --------------------------- */

/* Starts the health thread for the GPUs of snap (it opens its own NVML). NULL when health
 * checks are disabled by policy, there are no GPUs, or it could not start (logged:
 * "continuing with health checks disabled"). */
struct daemon__health *daemon__health_start(const struct daemon_options *o,
                                            const struct daemon_xid_policy *xid,
                                            struct dp_snapshot *snap);
/* Stops and joins the thread; accepts NULL. */
void daemon__health_stop(struct daemon__health *h);
/* Asks the health thread to watch a GPU whose XID needs a reset: it probes the GPU through
 * NVML (every 500 ms while any is watched) and, once the GPU was seen lost and answers
 * again, posts a `back` message. */
void daemon__health_watch_reset(struct daemon__health *h, const char *gpu_uuid);
/* The last XID (critical or not) the health thread saw on the GPU, 0 for none (or h NULL);
 * *ret_count is how many it saw there since the daemon started. */
unsigned long long daemon__health_last_xid(struct daemon__health *h, const char *gpu_uuid,
                                           unsigned long long *ret_count);
/* The eventfd for poll(2): readable when entries wait; -1 for NULL (poll ignores it). */
int daemon__health_fd(const struct daemon__health *h);
/* Takes one pending entry without blocking: 1, or 0 when none is waiting. */
int daemon__health_read(struct daemon__health *h, struct daemon__health_msg *ret);

/* ---- dra_*.c: parts of the DRA feature (dra.c is the unit) --------------------------------- */

struct dra_checkpoint;
struct dra_devices;
struct dra_prepare_ops;
struct kdra_server;
struct rpc_server;
struct khealth_server;
struct daemon__dra_effects;
struct daemon__dra_slices;

/* dra_effects.c: the node side of a prepare (paths from d's options, MPS supervision on a
 * thread of its own). kube is borrowed and must outlive it. *ret owned. */
int daemon__dra_effects_new(const struct daemon *d, struct kube_client *kube,
                            struct daemon__dra_effects **ret, struct error *err);
void daemon__dra_effects_free(struct daemon__dra_effects *e); /* NULL ok */
/* The ops of dra/prepare.c that act through e (ctx = e). */
void daemon__dra_effects_ops(struct daemon__dra_effects *e, struct dra_prepare_ops *ret);
/* The MPS daemons of the claims prepared completely in cp (a restart). */
int daemon__dra_effects_mps_restore(struct daemon__dra_effects *e, const struct dra_checkpoint *cp,
                                    struct error *err);
/* The checkpoint file (none or empty: no claims, the empty one logged). *ret owned. */
int daemon__dra_checkpoint_load(struct daemon__dra_effects *e, struct dra_checkpoint **ret,
                                struct error *err);
size_t daemon__dra_effects_n_claims(struct daemon__dra_effects *e); /* as last saved */
const char *daemon__dra_effects_mps_root(const struct daemon__dra_effects *e);
/* The effects' NVML handle (MPS compute modes; also the shares' processes for /metrics), or
 * NULL when NVML could not be opened. Borrowed. */
struct gpu_nvml *daemon__dra_effects_nvml(const struct daemon__dra_effects *e);

/* dra_slice.c: the ResourceSlice controller thread of node_name (kube borrowed). */
int daemon__dra_slices_start(struct kube_client *kube, const char *node_name,
                             struct daemon__dra_slices **ret, struct error *err);
/* Hands it the node's devices now (taken); it publishes them when they changed. */
void daemon__dra_slices_set(struct daemon__dra_slices *sl, struct dra_devices *devs);
void daemon__dra_slices_stop(struct daemon__dra_slices *sl); /* joins; NULL ok */

/* dra_health.c: grpc.health.v1 on 0.0.0.0:port for srv's registration (port < 0: none,
 * *ret NULL). *ret owned: khealth_server_free. */
int daemon__dra_health_start(long long port, struct kdra_server *srv, struct khealth_server **ret,
                             struct error *err);

#endif

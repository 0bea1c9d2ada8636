/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h: what daemon/'s files share — the daemon's state, the plugin slots (daemon.c),
 * live reload (reload.c: config watch, inventory re-reads, diffs, retiring devices), the node
 * label (label.c) and the health thread (health_thread.c) that waits for NVML XID events,
 * applies the XID policy and hands critical ones to the main loop through a bounded
 * per-device table and an eventfd. Never included from outside src/daemon/. */
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

struct daemon__health;
struct daemon__kube;
struct daemon__labels;
struct daemon__mig;
struct daemon__mps;
struct daemon__sampler;
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
    char *kubelet_socket; /* NULL: no registration */
    char *kubelet_dir;    /* owned */
    const char *kubelet_name;
    struct dp_snapshot *snap; /* what is served */
    struct daemon__slot *slots;
    size_t n_slots;
    struct model_alloc_env env;
    struct daemon_xid_policy xid;
    struct daemon__health *health;
    int sfd, ifd, tfd;
    int wd_plugin, wd_kubelet;
    /* live reload (reload.c) */
    struct cfg_config *cfg; /* the last good config */
    int wd_config;          /* inotify watch of the config directory (or the file's one) */
    char *config_dir;       /* that directory (owned) */
    int wd_config_parent;   /* while it is gone: a watch of its parent, -1 otherwise */
    char *config_base;      /* the config file's basename; NULL when the path is a directory */
    bool config_is_dir;
    int debounce_fd, inventory_fd, retire_fd; /* timerfds */
    size_t n_retiring;                        /* devices kept Unhealthy for their pods */
    char **retiring;                          /* which: "<resource> <id>" (owned strv) */
    struct daemon__holders *holders; /* holders.c: which devices pods hold, read off the loop */
    bool retire_waiting;             /* a retire check waits for the holders' next answer */
    bool retire_unknown;             /* the last answer could not tell the holders */
    bool apply_waiting;              /* a change that removes devices waits for it too: */
    unsigned apply_waiting_what;     /* its DAEMON_RELOAD_* */
    char apply_waiting_why[64];      /* and what it was */
    unsigned long long config_reload_failures; /* for metrics */
    unsigned long long reloads;                /* applied changes */
    struct daemon__xid_mark xid_marks[DAEMON_XID_MARKS_MAX];
    size_t n_xid_marks;
    bool all_unhealthy; /* the event wait failed */
    int recovery_fd;    /* recovery.c: timerfd for the next device due to recover, or -1 */
    unsigned long long health_recoveries;
    /* health changes by reason, for gpuslice_health_changes_total{reason}: "xid-<n>" (a
     * critical XID made a device Unhealthy), "event-wait-failed", "recovered" */
    struct {
        char reason[32];
        unsigned long long n;
    } health_reasons[32];
    size_t n_health_reasons;
    /* Allocate counts of plugins already stopped (a kubelet restart, a resource gone), per
     * resource: gpuslice_allocations_total only resets with the process (metrics.c) */
    struct daemon__alloc_count *alloc_kept;
    size_t n_alloc_kept;
    /* the node label (label.c) */
    struct daemon__kube *kube;       /* NULL: no Kubernetes API */
    char *label_value;               /* the label's value, NULL when absent or unknown */
    bool label_pending;              /* the watch has not answered yet: value unknown */
    struct daemon__labels *labels;   /* labels.c; NULL with --labels=off */
    struct metrics_server *metrics;  /* metrics.c; NULL without --metrics-address */
    char *cdi_json;                  /* cdi.c: the spec last written (owned), NULL: none */
    int cdi_retry_fd;                /* cdi.c: timerfd of the next try after a failed write */
    unsigned cdi_retry_what;         /* DAEMON_RELOAD_* of the changes waiting for it */
    unsigned cdi_retry_ms;           /* the current backoff, 0: none */
    struct daemon__mig *mig;         /* mig.c; NULL without --mig-config-file */
    struct daemon__mps *mps;         /* mps.c; NULL unless internal MPS daemons run */
    struct daemon__sampler *sampler; /* sampler.c; NULL without the metrics endpoint */
};

/* ---- holders.c --------------------------------------------------------------------------- */

/* Which devices pods hold: pod-resources List, or the kubelet's checkpoint, read by a thread
 * of its own when asked; the answer wakes the loop on daemon__holders_fd. */
int daemon__holders_start(struct daemon *d, struct error *err);
void daemon__holders_stop(struct daemon *d);
int daemon__holders_fd(const struct daemon *d);
void daemon__holders_request(struct daemon *d);
/* Takes the thread's new answer, if any (the fd's handler); true when there was one. */
bool daemon__holders_take(struct daemon *d);
/* The answer just taken (in daemon__on_holders, or by daemon__holders_read_now), borrowed
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
/* The holders' answer came (reload.c): decisions that waited for it are made. */
void daemon__on_holders(struct daemon *d);
/* ... and a MIG change waiting for GPUs to be free looks again (mig.c). */
void daemon__mig_on_holders(struct daemon *d);

/* ---- daemon.c ---------------------------------------------------------------------------- */

/* Creates and starts the plugin of slot s for `name` (serving, not registered). */
int daemon__slot_start(struct daemon *d, struct daemon__slot *s, const char *name,
                       struct error *err);
/* Registers slot s (schedules a retry with backoff on failure). */
void daemon__slot_register(struct daemon *d, struct daemon__slot *s, bool again);
void daemon__log_resource(const char *what, const struct model_resource *res,
                          const struct dp_plugin *p);

/* ---- reload.c ---------------------------------------------------------------------------- */

#define DAEMON_RELOAD_CONFIG 1u
#define DAEMON_RELOAD_INVENTORY 2u

/* The first config, inventory and model into d->cfg / d->snap. */
int daemon__load_initial(struct daemon *d, struct error *err);
/* Timerfds and the inotify watch of the config path. */
int daemon__reload_setup(struct daemon *d, struct error *err);
void daemon__reload_release(struct daemon *d);
/* Applies a change: `what` says what to read again (0: only re-check retiring devices).
 * Validates, keeps the last good config on errors, diffs the new model against the served
 * one and touches only the resources that changed. */
void daemon__apply(struct daemon *d, unsigned what, const char *why);
/* An inotify event of the config watch: arms the debounce timer when it matters. */
void daemon__on_config_event(struct daemon *d, const struct inotify_event *ev);
/* An event of the parent watch: the config directory came back, watch it again. */
void daemon__on_config_parent_event(struct daemon *d, const struct inotify_event *ev);
void daemon__on_debounce(struct daemon *d);
void daemon__on_inventory_timer(struct daemon *d);
void daemon__on_retire_timer(struct daemon *d);
/* Remembers an XID mark (or all devices) so rebuilt models keep it. */
void daemon__remember_unhealthy(struct daemon *d, const struct daemon__health_msg *msg);
/* A config that could not be applied: log "..., keeping last good config", Event, counter. */
void daemon__reload_failed(struct daemon *d, const char *reason, const struct error *err);

/* ---- label.c ----------------------------------------------------------------------------- */

/* Makes the Kubernetes client (in-cluster or --kubeconfig) when NODE_NAME is set, reads the
 * label into d->label_value and starts watching it (unless --config-name wins). Never
 * fails: without an API it logs once and the daemon goes on without the label. */
void daemon__kube_start(struct daemon *d);
void daemon__kube_stop(struct daemon *d);
/* The watch's eventfd for poll(2), -1 without one. */
int daemon__kube_fd(const struct daemon__kube *k);
/* The watch fired: a new label value re-selects the config. */
void daemon__kube_on_event(struct daemon *d);
/* Records a Warning Event on the node when a client exists (errors logged at debug). */
void daemon__kube_event(struct daemon *d, const char *reason, const char *message);
/* Queues a merge patch of one label of this node (value NULL or "": remove it), sent by the
 * same thread as Events. */
void daemon__kube_set_label(struct daemon *d, const char *key, const char *value);
/* Sets this node's nvidia.com/gpu.deploy.* labels that are "true" to paused-for-mig-change
 * (pause) or back to true (resume), on the Event thread, as NVIDIA's mig-manager does. */
void daemon__kube_pause_operands(struct daemon *d, bool pause);
/* The API client (NULL without one), for features that watch more of the node. */
struct kube_client;
struct kube_client *daemon__kube_client(struct daemon *d);

/* Counts one health change for gpuslice_health_changes_total{reason}. */
void daemon__count_health(struct daemon *d, const char *reason);
/* Keeps the Allocate counts of a plugin about to be freed, so the resource's counters go
 * on from them when it is served again. */
void daemon__metrics_keep_counts(struct daemon *d, struct dp_plugin *p);

/* ---- sampler.c --------------------------------------------------------------------------- */

/* GPU telemetry and per-pod attribution on a thread of its own, for /metrics. */
void daemon__sampler_start(struct daemon *d);
/* Hands the sampler the devices of the snapshot now served. */
void daemon__sampler_update(struct daemon *d);
int daemon__sampler_render(struct daemon *d, struct strbuf *sb);
void daemon__sampler_stop(struct daemon *d);

/* ---- mig.c ------------------------------------------------------------------------------- */

/* --mig-config-file: watches nvidia.com/mig.config and applies the named layout. */
int daemon__mig_start(struct daemon *d, struct error *err);
void daemon__mig_stop(struct daemon *d);
int daemon__mig_watch_fd(const struct daemon *d);
int daemon__mig_timer_fd(const struct daemon *d);
int daemon__mig_done_fd(const struct daemon *d);
void daemon__mig_on_label(struct daemon *d);
void daemon__mig_on_timer(struct daemon *d);
void daemon__mig_on_done(struct daemon *d);
/* Marks the devices of GPUs waiting for a new MIG layout Unhealthy in m. */
void daemon__mig_health_marks(const struct daemon *d, struct model *m);
/* The nvidia.com/mig.config.state last set ("" before any), NULL when the daemon does not
 * partition (no --mig-config-file). */
const char *daemon__mig_state(const struct daemon *d);

/* ---- mps.c ------------------------------------------------------------------------------- */

/* --mps-control=internal: the control daemons snap's MPS resources need (started, stopped,
 * restarted as the model changes). */
int daemon__mps_update(struct daemon *d, const struct dp_snapshot *snap, struct error *err);
/* True when an MPS resource of the current snapshot has no serving control daemon. */
bool daemon__mps_any_down(const struct daemon *d);
void daemon__mps_health_marks(const struct daemon *d, struct model *m);
int daemon__mps_fd(const struct daemon *d);
/* Internal MPS: 1 when resource's control daemon is up, 0 when not, -1 when this daemon does
 * not run them (external, or no MPS). */
int daemon__mps_up(const struct daemon *d, const char *resource);
unsigned daemon__mps_restarts(const struct daemon *d);
void daemon__mps_on_event(struct daemon *d);
void daemon__mps_stop(struct daemon *d);
/* --mps-control=external: waits (inotify, signals on sfd end it) for <mps root>/.ready when
 * MPS resources are configured. */
int daemon__mps_wait_external(struct daemon *d, int sfd, struct error *err);

/* ---- cdi.c ------------------------------------------------------------------------------- */

/* With a cdi-* device list strategy, writes the CDI spec of snap under cfg when it differs
 * from the last one written. at_start: the caller stops on failure (otherwise it is logged
 * and the last spec stays). 0 when no CDI strategy is on. */
/* A snapshot whose CDI spec could not be written is not served: the reload (what) is tried
 * again after a backoff (1 s doubling to 30 s) on cdi_retry_fd, and logged once per try.
 * daemon__cdi_retry_done clears it after a snapshot is served. */
void daemon__cdi_retry_later(struct daemon *d, unsigned what, const char *why,
                             const struct error *err);
void daemon__cdi_retry_done(struct daemon *d);
void daemon__cdi_on_retry(struct daemon *d);
void daemon__cdi_release(struct daemon *d);
int daemon__cdi_update(struct daemon *d, const struct dp_snapshot *snap,
                       const struct cfg_config *cfg, bool at_start, struct error *err);

/* ---- labels.c ---------------------------------------------------------------------------- */

/* Starts the labels writer for --labels (no-op when off; never fails: logs and goes on). */
void daemon__labels_start(struct daemon *d);
/* Computes the labels of what d->snap serves and hands them to the writer (latest wins). */
void daemon__labels_update(struct daemon *d);
/* Stops and joins the writer; the labels written stay on the node. */
void daemon__labels_stop(struct daemon *d);

/* ---- recovery.c (health that recovers) --------------------------------------------------- */

/* Creates the timer when --health-recovery-after is not 0. */
int daemon__recovery_setup(struct daemon *d, struct error *err);
void daemon__recovery_release(struct daemon *d);
/* (Re)arms the timer for the earliest recoverable mark. */
void daemon__recovery_arm(struct daemon *d);
/* Every served resource sends its devices (health changed) on ListAndWatch. */
void daemon__push_all(struct daemon *d);
/* Has the health thread watch every GPU whose XID mark needs a reset (after it (re)starts). */
void daemon__recovery_watch(struct daemon *d);
/* The GPU answers again after it was lost (health thread's `back`): its marks go, its
 * devices are Healthy, the change is logged, counted (reason=reset) and posted as an Event.
 * True when the GPU had marks. */
bool daemon__recovery_gpu_back(struct daemon *d, const char *gpu_uuid);
void daemon__on_recovery_timer(struct daemon *d);
/* True for XIDs that mean the GPU is gone or must be reset: never recovered by time. */
bool daemon_xid_needs_reset(unsigned long long xid);

/* timerfd helpers shared by reload.c and recovery.c */
void daemon__timer_set(int fd, int64_t ms, bool repeat);
void daemon__timer_drain(int fd);

/* ---- metrics.c --------------------------------------------------------------------------- */

void daemon__metrics_start(struct daemon *d); /* no-op without --metrics-address */
void daemon__metrics_stop(struct daemon *d);
int daemon__metrics_fd(const struct daemon *d); /* /healthz pings; -1 without */
void daemon__metrics_on_ping(struct daemon *d);
/* Renders the metrics and readiness from d and publishes them (on every scrape's ping). */
void daemon__metrics_publish(struct daemon *d);

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

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim: the tool's one internal header. state.c holds the node's bookkeeping
 * (resources, devices, health, pods: pure, no I/O, callers hold sim->lock), cmd.c parses the
 * control language (pure), kubelet.c is the gRPC side (Registration server, dial back,
 * ListAndWatch threads, admission RPCs, restart, pod-resources), dra.c the kubelet's DRA
 * side (plugins_registry watcher, prepare/unprepare), main.c the stdin loop. */
#ifndef GS_KUBELET_SIM_H
#define GS_KUBELET_SIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define SIM_MAX_RESOURCES 64
#define SIM_MAX_DEVICES 4096 /* per resource; a bigger ListAndWatch list is cut */
#define SIM_MAX_PODS 4096
#define SIM_MAX_REQUESTS 16 /* resource requests per pod */
#define SIM_MAX_LINE 4096   /* control line length */
#define SIM_MAX_ARGS 32
#define SIM_MAX_CLAIMS 16      /* claims per dra-prepare/dra-unprepare command */
#define SIM_MAX_DRA_PLUGINS 16 /* registration sockets tracked in plugins_registry */

enum sim_pod_phase { SIM_POD_RUNNING = 0, SIM_POD_PENDING, SIM_POD_FAILED };

struct sim_device {
    char *id;
    bool is_healthy;
    int64_t numa_node; /* -1 when the device gives no topology */
};

/* One advertised resource as kubelet's device manager sees it. */
struct sim_resource {
    char *name;
    char *endpoint;           /* socket file name from RegisterRequest */
    bool preferred_available; /* GetDevicePluginOptions */
    bool pre_start_required;
    bool is_connected;          /* ListAndWatch stream open */
    unsigned n_registrations;   /* successful Register calls so far */
    unsigned n_updates;         /* ListAndWatch messages received */
    struct sim_device *devices; /* the last list received, in its order */
    size_t n_devices;
};

struct sim_request {
    char *resource;
    unsigned count;
    char *container; /* the container asking; NULL: the pod's one container, "main" */
};

/* What Allocate answered for one resource of a pod (container_responses[0]), flattened. */
struct sim_alloc {
    char *resource;
    char **device_ids;  /* strv: what kubelet chose and sent */
    char **envs;        /* strv "KEY=VALUE" */
    char **annotations; /* strv "KEY=VALUE" */
    char **mounts;      /* strv "host_path:container_path[:ro]" */
    char **devices;     /* strv "host_path:container_path:permissions" */
    char **cdi_devices; /* strv */
};

struct sim_pod {
    char *name;
    enum sim_pod_phase phase;
    char *reason;  /* NULL when Running: "Insufficient x" or "UnexpectedAdmissionError" */
    char *message; /* NULL or the kubelet message */
    struct sim_request requests[SIM_MAX_REQUESTS];
    size_t n_requests;
    struct sim_alloc allocs[SIM_MAX_REQUESTS]; /* Running pods only, one per request */
    size_t n_allocs;
    uint64_t seq; /* creation order, for retries */
};

struct sim_state {
    struct sim_resource resources[SIM_MAX_RESOURCES];
    size_t n_resources;
    struct sim_pod *pods[SIM_MAX_PODS];
    size_t n_pods;
    uint64_t next_seq;
};

/* ---- state.c (pure; caller holds the lock when shared) ------------------------------------ */

void sim_state_release(struct sim_state *s);
/* Borrowed pointer or NULL. */
struct sim_resource *sim_state_find_resource(struct sim_state *s, const char *name);
/* Finds or adds the resource (copying name). -ENOSPC past SIM_MAX_RESOURCES. */
int sim_state_add_resource(struct sim_state *s, const char *name, struct sim_resource **ret,
                           struct error *err);
/* Replaces the device list (a ListAndWatch message). ids/health arrays of n entries; numa may
 * be NULL. Lists longer than SIM_MAX_DEVICES fail with -E2BIG and keep the old list. */
int sim_resource_set_devices(struct sim_resource *r, const char *const *ids, const bool *healthy,
                             const int64_t *numa, size_t n, struct error *err);
/* Marks every device unhealthy (stream lost), as kubelet's PluginDisconnected does. */
void sim_resource_mark_all_unhealthy(struct sim_resource *r);

size_t sim_resource_capacity(const struct sim_resource *r);
size_t sim_resource_allocatable(const struct sim_resource *r);
/* Devices of r held by Running pods (only those still in r's list count). */
size_t sim_state_allocated(const struct sim_state *s, const struct sim_resource *r);
bool sim_state_device_is_allocated(const struct sim_state *s, const char *resource, const char *id);
/* The devices that can be given to a new pod: healthy and not held by a Running pod, in list
 * order. *ret is an owned strv (possibly empty). */
int sim_state_available(const struct sim_state *s, const struct sim_resource *r, char ***ret);

/* Picks `count` devices out of `available`: first those of `preferred` that are available
 * (in preferred's order, no duplicates), then the rest of `available` in order, like
 * kubelet does with a GetPreferredAllocation answer. preferred may be NULL. -ENOSPC when
 * available is too small. *ret: owned strv. */
int sim_choose_devices(char *const *available, char *const *preferred, unsigned count, char ***ret,
                       struct error *err);

/* Pod bookkeeping. sim_state_add_pod takes ownership of pod (NULL-ed on success); -EEXIST
 * when the name is taken, -ENOSPC past SIM_MAX_PODS. */
int sim_state_add_pod(struct sim_state *s, struct sim_pod **pod, struct error *err);
struct sim_pod *sim_state_find_pod(struct sim_state *s, const char *name);
/* Removes and frees the pod: its devices become available. -ENOENT when absent. */
int sim_state_delete_pod(struct sim_state *s, const char *name);
/* The request's container name: "main" unless the request named one. */
static inline const char *sim_request_container(const struct sim_request *rq)
{
    return rq->container ? rq->container : "main";
}
struct sim_pod *sim_pod_new(const char *name, const struct sim_request *reqs, size_t n,
                            struct error *err);
void sim_pod_free(struct sim_pod *p);
/* Sets phase + reason/message (copied; NULL allowed). -ENOMEM keeps the old values. */
int sim_pod_set_phase(struct sim_pod *p, enum sim_pod_phase phase, const char *reason,
                      const char *message);
void sim_alloc_release(struct sim_alloc *a);
const char *sim_pod_phase_name(enum sim_pod_phase phase);

/* Validates a RegisterRequest as kubelet does; err carries kubelet's text. 0 or -EINVAL. */
int sim_validate_registration(const char *version, const char *resource, const char *endpoint,
                              struct error *err);

/* ---- cmd.c (pure) ------------------------------------------------------------------------- */

enum sim_cmd_kind {
    SIM_CMD_WAIT = 0,       /* wait <resource> [>=|<=|=]<count> [timeout_ms] */
    SIM_CMD_WAIT_RESOURCES, /* wait-resources <n> [timeout_ms] */
    SIM_CMD_CAPACITY,       /* capacity */
    SIM_CMD_DEVICES,        /* devices <resource> */
    SIM_CMD_ADMIT,          /* admit <pod> <resource>=<n>... */
    SIM_CMD_DELETE,         /* delete <pod> */
    SIM_CMD_PODS,           /* pods */
    SIM_CMD_POD,            /* pod <pod>: one pod with its Allocate responses */
    SIM_CMD_SCHEDULE,       /* schedule: retry Pending pods in creation order */
    SIM_CMD_RESTART,        /* restart [timeout_ms] */
    SIM_CMD_HELP,
    SIM_CMD_QUIT,
    SIM_CMD_DRA_WAIT,      /* dra-wait <driver> [timeout_ms] */
    SIM_CMD_DRA_DRIVERS,   /* dra-drivers */
    SIM_CMD_DRA_PREPARE,   /* dra-prepare <driver> <namespace>/<name>:<uid>... */
    SIM_CMD_DRA_UNPREPARE, /* dra-unprepare <driver> <namespace>/<name>:<uid>... */
};

/* A ResourceClaim reference as the kubelet sends it to a DRA driver. */
struct sim_claim {
    char *namespace;
    char *name;
    char *uid;
};

enum sim_cmp { SIM_CMP_GE = 0, SIM_CMP_LE, SIM_CMP_EQ };

struct sim_cmd {
    enum sim_cmd_kind kind;
    char *name; /* resource (wait, devices), pod (admit, delete, pod) or DRA driver; owned */
    enum sim_cmp cmp;
    unsigned count;
    int timeout_ms; /* -1 when not given */
    struct sim_request requests[SIM_MAX_REQUESTS];
    size_t n_requests;
    struct sim_claim claims[SIM_MAX_CLAIMS]; /* dra-prepare, dra-unprepare */
    size_t n_claims;
};

/* Parses one control line. Returns 0 and fills *ret (release with sim_cmd_release), 1 for a
 * blank or comment line (nothing to do), or -EINVAL with a message in err. */
int sim_cmd_parse(const char *line, struct sim_cmd *ret, struct error *err);
void sim_cmd_release(struct sim_cmd *c);
bool sim_cmp_holds(enum sim_cmp cmp, size_t value, unsigned want);
const char *sim_cmp_str(enum sim_cmp cmp);
/* Usage text for the control language (static). */
const char *sim_cmd_help(void);

/* ---- kubelet.c (gRPC) --------------------------------------------------------------------- */

struct sim;

struct sim_opts {
    const char *dir;                  /* device-plugin dir: kubelet.sock and plugin sockets */
    const char *pod_resources_socket; /* NULL: no pod-resources service */
    int rpc_timeout_ms;               /* every call to a plugin; > 0 */
    const char *plugins_registry;     /* NULL: no DRA side; else watched for plugin sockets */
    bool dra_force_v1beta1;           /* pick v1beta1.DRAPlugin even when v1 is offered */
};

int sim_new(const struct sim_opts *opts, struct sim **ret, struct error *err);
/* Stops every thread and server (kubelet.sock and the pod-resources socket are removed).
 * Accepts NULL. */
void sim_free(struct sim *sim);

/* Runs one parsed command and writes the answer (text or one JSON line) to out. Returns 0,
 * or a negative errno when the command failed (the answer already says why). */
int sim_run(struct sim *sim, const struct sim_cmd *cmd, bool json, struct strbuf *out);
/* Writes an error answer for err (text "error: ..." or {"ok":false,...}). */
void sim_format_error(const struct error *err, const char *cmd, bool json, struct strbuf *out);

#endif

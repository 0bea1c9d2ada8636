/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.h: the daemon's HTTP endpoint (libmicrohttpd, one internal thread): /metrics
 * (Prometheus text exposition 0.0.4), /healthz and /readyz. The endpoint never touches the
 * daemon's state: the daemon publishes the exposition text and its readiness here, and
 * answers liveness pings through an eventfd its loop polls, so a wedged loop fails /healthz.
 * No NVML, no gRPC; base/ and libmicrohttpd only. */
#ifndef GS_METRICS_H
#define GS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

struct metrics_server;

/* How long /healthz waits for the loop to answer a ping. */
#define METRICS_HEALTHZ_TIMEOUT_MS 2000
/* The largest exposition published (anything a node can produce fits many times). */
#define METRICS_MAX_TEXT_BYTES (8u * 1024 * 1024)

/* Listens on "HOST:PORT" (":9400" = every address, "127.0.0.1:0" = any free port). On
 * success *ret is owned (metrics_server_free()); -EINVAL for a bad address, -EADDRINUSE and
 * others from bind, with the address in err. */
int metrics_server_start(const char *address, struct metrics_server **ret, struct error *err);
/* Stops the thread and frees; accepts NULL. */
void metrics_server_free(struct metrics_server *s);
/* The TCP port listened on (useful with port 0). */
unsigned metrics_server_port(const struct metrics_server *s);

/* The IPv4 next hops of the default routes in the text of /proc/net/route (the node's
 * address on the pod network for most CNIs: a kubelet probe of a pod without hostNetwork
 * comes from there), at most max of them, in host order of the file. Pure. */
size_t metrics_route_gateways(const char *route_text, uint32_t *ret_addrs_be, size_t max);

/* Replaces the /metrics body (copied) and the /readyz answer (ready, and why not). */
int metrics_server_publish(struct metrics_server *s, const char *text, size_t len, bool ready,
                           const char *not_ready_reason);

/* The eventfd /healthz and /metrics write a ping to; the loop publishes, then calls
 * metrics_server_pong() when it reads it. -1 for NULL. */
int metrics_server_ping_fd(const struct metrics_server *s);
void metrics_server_pong(struct metrics_server *s);

/* The pod a process belongs to, from the text of its /proc/<pid>/cgroup (v1 or v2; systemd
 * or cgroupfs driver; containerd, CRI-O or Docker naming): 1 with the pod UID (dashed) and
 * the container id (64 hex digits, "" when the path names none), 0 when it is not in a pod
 * (a host process). Pure. */
int metrics_cgroup_pod(const char *text, char *uid, size_t uid_size, char *cid, size_t cid_size);

/* ---- the pod-usage join (join.c, pure) ----------------------------------------------------- */

/* One advertised device a pod holds. Strings are borrowed for the call. */
struct metrics_holding {
    const char *resource, *id;
    unsigned gpu;          /* its GPU's index */
    const char *pod;       /* "<namespace>/<name>" (pod-resources), NULL when not known */
    const char *container; /* the container it went to, NULL when not known */
    const char *uid;       /* the pod's UID (the kubelet's checkpoint), NULL when not known */
};

/* One process on a GPU (NVML), with the text of its /proc/<pid>/cgroup. */
struct metrics_process {
    unsigned gpu, pid;
    uint64_t used_bytes;
    int sm_util;        /* %, -1 unknown */
    const char *cgroup; /* NULL: /proc does not show it (no host PID namespace) */
};

/* One pod's (or container's) share of one GPU. */
struct metrics_pod_use {
    char ns_name[256];   /* "<namespace>/<name>", "" when only the UID is known */
    char uid[64];        /* "" when not known */
    char container[128]; /* "" when its processes cannot be told apart by container */
    char resource[128];
    unsigned gpu;
    uint64_t bytes;    /* GPU memory its processes use */
    int sm;            /* % summed over its processes, -1 unknown */
    unsigned replicas; /* devices of the GPU it holds */
};

struct metrics_host_use {
    unsigned gpu, pid;
    uint64_t bytes;
};

struct metrics_usage {
    struct metrics_pod_use *pods; /* owned */
    size_t n_pods, alloc_pods;
    struct metrics_host_use *host; /* processes in no pod (owned) */
    size_t n_host;
    size_t unattributed; /* processes /proc cannot show */
};

/* Joins holdings and processes: replicas per pod and container on each GPU; each process's
 * memory and SM share to its pod's entry (the container's when the pod has one container
 * holding devices on that GPU, else a pod-level entry, container ""); processes in no pod
 * are the host's; ones /proc cannot show are counted. *ret owned (metrics_usage_release);
 * -ENOMEM. */
int metrics_pod_usage(const struct metrics_holding *h, size_t n_h, const struct metrics_process *p,
                      size_t n_p, struct metrics_usage *ret, struct error *err);
void metrics_usage_release(struct metrics_usage *u);

/* The Prometheus text in OpenMetrics 1.0 form (what /metrics answers to an Accept of
 * application/openmetrics-text): counter families named without _total, a final # EOF. */
int metrics_openmetrics(const char *text, struct strbuf *out);

/* What an XID means (NVIDIA's XID catalog), for dcgm-exporter's err_msg label; "" when it is
 * not one the catalog names (or 0, no XID). Static text. */
const char *metrics_xid_text(unsigned long long xid);

/* Exposition helpers (write.c), the one writer of every family: a label value escaped as the
 * text format wants (\\, \", \n), and a family's "# HELP" and "# TYPE" lines. */
int metrics_escape(struct strbuf *sb, const char *value);
int metrics_family(struct strbuf *sb, const char *name, const char *type, const char *help);
/* One sample with one escaped label, `metric{label="value"<extra>} v`: extra ("" or NULL, or
 * more labels starting with a comma) is written as given. */
int metrics_sample1(struct strbuf *sb, const char *metric, const char *label, const char *value,
                    const char *extra, unsigned long long v);

#endif

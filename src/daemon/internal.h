/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h: what daemon/'s files share — the health thread (health_thread.c) that waits
 * for NVML XID events and hands them to the main loop through a pipe. Never included from
 * outside src/daemon/. */
#ifndef GS_DAEMON_INTERNAL_H
#define GS_DAEMON_INTERNAL_H

#include "daemon/daemon.h"
#include "gpu/inventory.h"
#include "kubelet/kubelet.h"

/* One message on the pipe; small enough to be written atomically (< PIPE_BUF). */
struct daemon__health_msg {
    char uuid[INV_UUID_MAX];
    unsigned long long xid;
    unsigned gi_id, ci_id;
    bool all_devices; /* the event wait failed: everything is unhealthy */
    char text[200];   /* why, for all_devices */
};

struct daemon__health;

/* Starts the health thread for the GPUs of snap (it opens its own NVML). NULL when health
 * checks are disabled by policy, there are no GPUs, or it could not start (logged:
 * "continuing with health checks disabled"). */
struct daemon__health *daemon__health_start(const struct daemon_options *o,
                                            const struct daemon_xid_policy *xid,
                                            struct dp_snapshot *snap);
/* Stops and joins the thread; accepts NULL. */
void daemon__health_stop(struct daemon__health *h);
/* The pipe's read end for poll(2); -1 for NULL (poll ignores it). */
int daemon__health_fd(const struct daemon__health *h);
/* Reads one message without blocking: 1, or 0 when none is waiting. */
int daemon__health_read(struct daemon__health *h, struct daemon__health_msg *ret);

#endif

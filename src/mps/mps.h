/* SPDX-License-Identifier: Apache-2.0 */
/* mps.h: MPS control daemons, supervised. One nvidia-cuda-mps-control per MPS resource,
 * started as NVIDIA's mps-control-daemon does (compute mode EXCLUSIVE_PROCESS through NVML,
 * pipe and log folders under the MPS root, CUDA_VISIBLE_DEVICES, per-device pinned memory
 * and active thread limits sent over its control interface, .started and .ready files) but
 * kept as our child (`-f`): its death is seen at once through a pidfd, it is restarted with
 * backoff and its limits applied again; a control command that times out counts as death.
 * Used by the device plugin (--mps-control=internal) and `gpuslice mps-control-daemon`.
 * docs/mps.md. */
#ifndef GS_MPS_H
#define GS_MPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "gpu/inventory.h"

#define MPS_MAX_DEVICES 64
#define MPS_MAX_DAEMONS 32 /* MPS resources (control daemons) on one node */
#define MPS_DEFAULT_BINARY "nvidia-cuda-mps-control"
#define MPS_DEFAULT_TIMEOUT_MS 2000

struct gpu_nvml;

struct mps_options {
    const char *root;           /* <root>/<resource>/{pipe,log,.started}, <root>/.ready */
    const char *binary;         /* the control binary (PATH lookup when no '/') */
    struct gpu_nvml *nvml;      /* for the compute mode; NULL: left as it is (logged) */
    unsigned timeout_ms;        /* a control command slower than this: the daemon is dead */
    unsigned probe_interval_ms; /* health probe of running daemons; 0: only pidfd */
    /* What happens to the daemons (up, died, restart failed...), for the caller to log: the
     * library itself does not log above debug (STYLE.md). NULL: not reported. */
    void (*report)(void *ctx, enum log_level level, const char *msg);
    void *report_ctx;
};

/* One daemon: a resource and its GPUs, in CUDA_VISIBLE_DEVICES (= device index) order. */
struct mps_daemon_spec {
    char resource[128];
    char uuids[MPS_MAX_DEVICES][INV_UUID_MAX];
    uint64_t mem_limit_mib[MPS_MAX_DEVICES];
    size_t n;
    unsigned thread_pct;
};

struct mps_supervisor;

int mps_supervisor_new(const struct mps_options *o, struct mps_supervisor **ret, struct error *err);
/* Makes the running daemons match specs: new ones started, changed ones restarted, gone ones
 * stopped; .ready written when every daemon is up. A daemon that fails to start is retried
 * with backoff (the error names it). */
int mps_supervisor_set(struct mps_supervisor *s, const struct mps_daemon_spec *specs, size_t n,
                       struct error *err);
/* Changes the limits of the running daemon of spec->resource in place, without a restart (its
 * clients keep running): the defaults for servers it starts from now on, sent over its
 * control pipe and kept for its restarts. A thread_pct of 0 puts the default back to 100.
 * -ENOENT: no such daemon; -EAGAIN: it does not serve now; -EINVAL: spec names other GPUs;
 * the control daemon's refusal (-EIO) or silence (-ETIMEDOUT): the old limits are kept. */
int mps_supervisor_set_limits(struct mps_supervisor *s, const struct mps_daemon_spec *spec,
                              struct error *err);
/* An epoll fd: readable when a daemon exited or a restart/probe is due. */
int mps_supervisor_fd(const struct mps_supervisor *s);
/* Handles it; *ret_changed: some daemon went down or came back (health to update). */
void mps_supervisor_dispatch(struct mps_supervisor *s, bool *ret_changed);
/* Is the daemon of resource up (limits applied)? */
bool mps_supervisor_up(const struct mps_supervisor *s, const char *resource);
unsigned mps_supervisor_restarts(const struct mps_supervisor *s);
/* Sends quit to every daemon, restores the compute modes, removes what it created. */
void mps_supervisor_free(struct mps_supervisor *s);

/* Runs `binary` as the control client with `commands` on stdin (env: the resource's pipe
 * folder), within timeout_ms; *ret_out (may be NULL) gets its output. -ETIMEDOUT: killed. */
int mps_control_command(const struct mps_options *o, const char *resource, const char *commands,
                        char **ret_out, struct error *err);

/* Where this process sees the MPS root: "/mps" when that folder exists (NVIDIA's containers
 * mount the host's MPS root there), else the MPS root itself (run on the host, tests). */
const char *mps_local_root(const char *mps_root);

/* Mounts the tmpfs <root>/shm (nosuid, nodev, noexec, half the RAM) MPS clients share as
 * /dev/shm, replacing a previous mount, as NVIDIA's `mps-control-daemon mount-shm` does. */
int mps_mount_shm(const char *root, struct error *err);

/* "<root>/<resource>/pipe" and friends. */
int mps_path(const char *root, const char *resource, const char *leaf, struct strbuf *out);

#endif

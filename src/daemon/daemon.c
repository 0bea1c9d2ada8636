/* SPDX-License-Identifier: Apache-2.0 */
/* daemon.c: `gpuslice device-plugin`'s wiring. The unit table (the inputs, then every feature
 * in the order they start and hear of a new state), signals (SIGHUP reloads, SIGTERM/SIGINT/
 * SIGQUIT stop), the first node state, the loop (loop.c) and the teardown. What each unit
 * does is in its own file; docs/internals/daemon.md draws the whole. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/internal.h"
#include "kubelet/kubelet.h"
#include "model/model.h"

/* ---- signals ------------------------------------------------------------------------------ */

/* Blocked in this thread (and the threads it starts), read from a signalfd. First: a SIGTERM
 * during start-up must still stop us cleanly. */
static int signals_setup(struct daemon *d, struct error *err)
{
    sigset_t mask;
    int r;

    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGQUIT);
    r = pthread_sigmask(SIG_BLOCK, &mask, NULL); /* returns the error; errno is untouched */
    if (r != 0)
        return error_set_errno(err, r, "blocking signals");
    d->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (d->sfd < 0)
        return error_set_errno(err, errno, "creating the signalfd");
    return 0;
}

static void on_signal(struct daemon *d)
{
    struct signalfd_siginfo si;

    while (read(d->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGHUP) {
            log_info("SIGHUP: reloading config and inventory");
            daemon__apply(d, DAEMON_RELOAD_CONFIG | DAEMON_RELOAD_INVENTORY, "SIGHUP");
        } else {
            log_info("signal %s: stopping, removing sockets", strsignal((int)si.ssi_signo));
            d->stopping = true;
            return;
        }
    }
}

static int signal_fd(const struct daemon *d)
{
    return d->sfd;
}

static const struct daemon_source signal_sources[] = {{signal_fd, on_signal}};

static const struct daemon_feature signals = {
    .name = "signals",
    .sources = signal_sources,
    .n_sources = GS_ARRAY_SIZE(signal_sources),
};

/* ---- wiring ------------------------------------------------------------------------------- */

/* Every unit of `gpuslice device-plugin`, in the order they start, prepare a state, hear of
 * it and are polled (signals first, health before config work); they stop in reverse. A
 * feature is one file and one line here. */
static const struct daemon_feature *const device_plugin_units[] = {
    &signals,
    &daemon__feature_health,
    &daemon__inputs, /* the config watch exists before anything registers: no edit is missed */
    &daemon__feature_serve,
    &daemon__feature_cdi,
    &daemon__feature_mps,
    &daemon__feature_labels,
    &daemon__feature_metrics,
    &daemon__feature_mig,
};

/* `gpuslice dra-plugin`: GPUs go through DRA only. The device-plugin API is not a unit here,
 * so nothing ever serves a socket in the device plugins' folder (the one-API rule,
 * docs/dra.md); its CDI spec, MPS daemons, labels and MIG agent are the device plugin's. */
static const struct daemon_feature *const dra_plugin_units[] = {
    &signals,
    &daemon__feature_health,
    &daemon__inputs,
    &daemon__feature_metrics,
    &daemon__feature_dra,
};

/* Policies, signals, the API client and holders, the first node state, what it names
 * (CDI, MPS), then every unit. */
static int daemon_start(struct daemon *d, struct error *err)
{
    char **warnings = NULL;
    int r;

    r = daemon_xid_policy_init(&d->xid, d->o->disable_healthchecks, d->o->enable_healthchecks,
                               &warnings, err);
    for (size_t i = 0; r == 0 && warnings[i]; i++)
        log_warn("%s", warnings[i]);
    strv_free(warnings);
    if (r == 0)
        r = signals_setup(d, err);
    if (r < 0)
        return r;
    daemon__kube_start(d);
    /* who holds device-plugin devices: not a question for DRA (the kubelet prepares) */
    r = d->o->dra.enabled ? 0 : daemon__holders_start(d, err);
    if (r == 0)
        r = daemon__load_initial(d, err);
    if (r == 0)
        r = daemon__prepare_initial(d, err);
    if (r == 0)
        r = daemon__units_start(d, err);
    return r;
}

static void daemon_teardown(struct daemon *d)
{
    daemon__units_stop(d);
    daemon__holders_stop(d);
    daemon__kube_stop(d);
    daemon__state_release(d);
    if (d->sfd >= 0)
        close(d->sfd);
}

int daemon_run(const struct daemon_options *o, struct error *err)
{
    struct daemon d = {.o = o,
                       .units = o->dra.enabled ? dra_plugin_units : device_plugin_units,
                       .n_units = o->dra.enabled ? GS_ARRAY_SIZE(dra_plugin_units)
                                                 : GS_ARRAY_SIZE(device_plugin_units),
                       .sfd = -1,
                       .ifd = -1,
                       .tfd = -1,
                       .config_ifd = -1,
                       .wd_plugin = -1,
                       .wd_kubelet = -1,
                       .wd_config = -1,
                       .wd_config_parent = -1,
                       .debounce_fd = -1,
                       .inventory_fd = -1,
                       .retire_fd = -1,
                       .recovery_fd = -1,
                       .cdi_retry_fd = -1};
    int r;

    /* A log reader (or any peer) going away must not kill the daemon and leave its sockets
     * behind: writes to a closed pipe fail with EPIPE instead. */
    signal(SIGPIPE, SIG_IGN);
    /* Memory a large request took goes back to the system: big blocks are mmap'd (freed
     * at once), the heap is trimmed past 128 KiB free, and the rpc and feature threads share
     * two arenas instead of one each (RSS stayed at 16-42 MiB after one 50,000-ID request,
     * measured with gRPC's C core, before the rpc layer moved to nghttp2). */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    mallopt(M_ARENA_MAX, 2);
    r = daemon_start(&d, err);
    if (r == 0)
        r = daemon__loop_run(&d, err);
    daemon_teardown(&d);
    return r;
}

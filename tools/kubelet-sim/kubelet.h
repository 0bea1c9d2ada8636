/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim: the simulator object shared by kubelet.c (Registration server, dial back,
 * ListAndWatch threads, restart, pod-resources), dra.c (the DRA side) and run.c (the
 * commands and admission). Locking: sim->lock guards state, eps and dra.plugins; RPCs are
 * never made while holding it. */
#ifndef GS_KUBELET_SIM_KUBELET_H
#define GS_KUBELET_SIM_KUBELET_H

#include <pthread.h>
#include <stdbool.h>

#include <sys/types.h>

#include <jansson.h>

#include "kubelet/kubelet.h"
#include "rpc/rpc.h"
#include "sim.h"

#define SIM_M_REGISTER "/v1beta1.Registration/Register"
#define SIM_M_OPTIONS "/v1beta1.DevicePlugin/GetDevicePluginOptions"
#define SIM_M_LIST_AND_WATCH "/v1beta1.DevicePlugin/ListAndWatch"
#define SIM_M_PREFERRED "/v1beta1.DevicePlugin/GetPreferredAllocation"
#define SIM_M_ALLOCATE "/v1beta1.DevicePlugin/Allocate"
#define SIM_M_PRE_START "/v1beta1.DevicePlugin/PreStartContainer"
#define SIM_M_POD_LIST "/v1.PodResourcesLister/List"
#define SIM_M_POD_ALLOCATABLE "/v1.PodResourcesLister/GetAllocatableResources"

/* A connection to one registered plugin: its client and its ListAndWatch thread.
 * Reference-counted: the sim's table holds one, admission holds one while it calls. */
struct sim_endpoint {
    struct sim *sim;
    char *resource;
    char *socket_path;
    struct rpc_client *client;
    pthread_t thread;
    bool thread_started;
    bool stop; /* under sim->lock */
    int refs;  /* atomic */
};

/* One plugin socket found in plugins_registry, as the kubelet's plugin manager tracks it. */
struct sim_dra_plugin {
    char *reg_socket; /* path in plugins_registry */
    dev_t dev;        /* of the socket file registered (a new file registers again) */
    ino_t ino;
    char *driver;             /* PluginInfo.name; NULL until GetInfo answered */
    char *endpoint;           /* DRA socket (PluginInfo.endpoint, or reg_socket when empty) */
    enum kdra_api api;        /* the service chosen */
    bool is_registered;       /* validated and told so; false after a failure or removal */
    bool is_removed;          /* the socket is gone (deregistered) */
    unsigned n_registrations; /* successful registrations of this socket path */
    char *error;              /* the last failure, NULL when none */
    uint64_t retry_ns;        /* a failed socket is tried again from then on */
};

/* The DRA side: a watcher thread over plugins_registry. */
struct sim_dra {
    char *registry;
    bool force_v1beta1;
    pthread_t thread;
    bool thread_started;
    int stop_fd;    /* eventfd: the watcher ends */
    int inotify_fd; /* wakes the watcher on changes in the registry */
    struct sim_dra_plugin plugins[SIM_MAX_DRA_PLUGINS]; /* under sim->lock */
    size_t n_plugins;
};

struct sim {
    char *dir;
    char *kubelet_socket;
    char *pod_resources_socket; /* NULL when not served */
    int rpc_timeout_ms;

    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC; broadcast on every state change */
    struct sim_state state;
    struct sim_endpoint *eps[SIM_MAX_RESOURCES];
    size_t n_eps;

    struct rpc_server *registration;
    struct rpc_server *pod_resources;
    struct sim_dra dra;
};

struct sim_endpoint *sim__endpoint_ref(struct sim_endpoint *ep);
void sim__endpoint_unref(struct sim_endpoint *ep);
/* Borrowed (caller holds the lock) or NULL. */
struct sim_endpoint *sim__endpoint_find(struct sim *sim, const char *resource);
/* Simulates a kubelet restart (see docs/kubelet-sim.md); waits up to timeout_ms for every
 * resource registered before to register again. *ret_ms: how long that took. */
int sim__restart(struct sim *sim, int timeout_ms, uint64_t *ret_ms, struct error *err);
/* Waits on sim->cond (lock held) until deadline_ns (CLOCK_MONOTONIC). false on timeout. */
bool sim__wait_until(struct sim *sim, uint64_t deadline_ns);

/* dra.c: starts the registry watcher when opts->plugins_registry is set (the dir is created,
 * 0750); stops it and frees the DRA state (stop is safe on a zeroed sim_dra). */
int sim__dra_start(struct sim *sim, const struct sim_opts *opts, struct error *err);
void sim__dra_stop(struct sim *sim);
/* The DRA part of a kubelet restart: every registration is forgotten and the watcher
 * registers each plugin socket again (GetInfo, NotifyRegistrationStatus); waits until those
 * registered before did so, up to deadline_ns. 0 at once without a registry. */
int sim__dra_restart(struct sim *sim, uint64_t deadline_ns, struct error *err);
/* Runs a dra-* command (run.c dispatches). Errors in err; the answer goes to out. */
int sim__dra_run(struct sim *sim, const struct sim_cmd *c, bool json, struct strbuf *out,
                 struct error *err);
/* One JSON line from o (consumed), always a line even when o is NULL. */
void sim__emit_json(json_t *o, struct strbuf *out);

#endif

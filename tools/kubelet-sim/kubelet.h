/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim: the simulator object shared by kubelet.c (Registration server, dial back,
 * ListAndWatch threads, restart, pod-resources) and run.c (the commands and admission).
 * Locking: sim->lock guards state and eps; RPCs are never made while holding it. */
#ifndef GS_KUBELET_SIM_KUBELET_H
#define GS_KUBELET_SIM_KUBELET_H

#include <pthread.h>
#include <stdbool.h>

#include "kubelet/rpc.h"
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

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* dra_health.c: part of the DRA feature — the gRPC health service on --healthcheck-port
 * (grpc.health.v1, generated; kubelet/health.c), as NVIDIA's chart probes the kubelet plugin
 * (service "liveness"; "" too). SERVING once the kubelet accepted the registration; names
 * NVIDIA's plugin does not serve get NOT_FOUND, as there. */
#include <errno.h>
#include <stdio.h>

#include "daemon/internal.h"
#include "kubelet/kubelet.h"

static bool registered(void *ctx, const char *service)
{
    struct kdra_registration reg;

    (void)service;
    kdra_server_registration(ctx, &reg);
    return reg.is_registered;
}

int daemon__dra_health_start(long long port, struct kdra_server *srv, struct khealth_server **ret,
                             struct error *err)
{
    static const char *const services[] = {KHEALTH_SERVICE_LIVENESS, NULL};
    struct khealth_server *h = NULL;
    char addr[64];
    int r;

    *ret = NULL;
    if (port < 0)
        return 0;
    if (port > 65535)
        return error_set(err, -EINVAL, "--healthcheck-port %lld is not a port (0-65535, -1: off)",
                         port);
    snprintf(addr, sizeof(addr), "0.0.0.0:%lld", port);
    r = khealth_server_new(
        &(struct khealth_opts){
            .address = addr, .services = services, .serving = registered, .ctx = srv},
        &h, err);
    if (r == 0)
        r = khealth_server_start(h, err);
    if (r < 0) {
        khealth_server_free(h);
        return r;
    }
    log_info("DRA: gRPC health service on %s", addr);
    *ret = h;
    return 0;
}

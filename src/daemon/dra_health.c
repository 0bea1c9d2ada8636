/* SPDX-License-Identifier: Apache-2.0 */
/* dra_health.c: part of the DRA feature — the gRPC health service on --healthcheck-port
 * (grpc.health.v1.Health/Check over TCP, as NVIDIA's chart probes the kubelet plugin),
 * SERVING once the kubelet accepted the registration. Its answer is two literal protobuf
 * bytes: the generated service (src/kubelet/, the rpc helper's) replaces this file. */
#include <errno.h>
#include <stdio.h>

#include "daemon/internal.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"

/* HealthCheckResponse{status: SERVING (1)} once registered, NOT_SERVING (2) before. The
 * request's service name is not looked at. */
static int health_check(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                        struct rpc_status *st)
{
    struct kdra_server *srv = ctx;
    struct kdra_registration reg;
    const char serving[] = {0x08, 0x01}, not_serving[] = {0x08, 0x02};

    (void)req;
    (void)req_len;
    (void)st;
    kdra_server_registration(srv, &reg);
    return strbuf_append(resp, reg.is_registered ? serving : not_serving, 2);
}

int daemon__dra_health_start(long long port, struct kdra_server *srv, struct rpc_server **ret,
                             struct error *err)
{
    struct rpc_server *s = NULL;
    char addr[64];
    int r;

    *ret = NULL;
    if (port < 0)
        return 0;
    if (port > 65535)
        return error_set(err, -EINVAL, "--healthcheck-port %lld is not a port (0-65535, -1: off)",
                         port);
    snprintf(addr, sizeof(addr), "0.0.0.0:%lld", port);
    r = rpc_server_new_tcp(addr, &s, err);
    if (r == 0)
        r = rpc_server_add_unary(s, "/grpc.health.v1.Health/Check", health_check, srv, err);
    if (r == 0)
        r = rpc_server_start(s, err);
    if (r < 0) {
        rpc_server_free(s);
        return r;
    }
    log_info("DRA: gRPC health service on %s", addr);
    *ret = s;
    return 0;
}

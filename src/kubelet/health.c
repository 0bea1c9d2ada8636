/* SPDX-License-Identifier: Apache-2.0 */
/* health.c: gRPC's health service (grpc.health.v1.Health/Check) on rpc.h, with the messages
 * generated from proto/grpc/health/v1/health.proto: what a Kubernetes `grpc:` probe (NVIDIA's
 * DRA chart: startup and liveness, service "liveness") and grpc-health-probe call. Serves ""
 * and the caller's service names, asks the caller whether they serve, and answers NOT_FOUND
 * for any other name, as grpc-go's health server and NVIDIA's plugin do. Never logs above
 * debug. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"

struct khealth_server {
    struct rpc_server *rpc;
    char **services; /* strv, "" first */
    khealth_serving_fn serving;
    void *ctx;
};

int khealth_check(char *const *services, khealth_serving_fn serving, void *ctx, const uint8_t *req,
                  size_t req_len, struct strbuf *resp, struct rpc_status *st)
{
    Grpc__Health__V1__HealthCheckRequest *in =
        grpc__health__v1__health_check_request__unpack(NULL, req_len, req);
    Grpc__Health__V1__HealthCheckResponse out = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    uint8_t buf[16];
    size_t n;
    int r = 0;

    if (!in) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "malformed HealthCheckRequest");
        return 0;
    }
    if (!strv_contains(services, in->service ? in->service : "")) {
        rpc_status_set(st, RPC_NOT_FOUND, "unknown service");
        goto out;
    }
    out.status = serving(ctx, in->service ? in->service : "")
                     ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                     : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    n = grpc__health__v1__health_check_response__pack(&out, buf);
    r = strbuf_append(resp, (const char *)buf, n);
out:
    grpc__health__v1__health_check_request__free_unpacked(in, NULL);
    return r;
}

static int h_check(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                   struct rpc_status *st)
{
    struct khealth_server *h = ctx;

    return khealth_check(h->services, h->serving, h->ctx, req, req_len, resp, st);
}

int khealth_server_new(const struct khealth_opts *o, struct khealth_server **ret, struct error *err)
{
    struct khealth_server *h = NULL;
    int r;

    if (!o->address || !*o->address || !o->serving)
        return error_set(err, -EINVAL,
                         "health service: an address and a serving callback "
                         "are needed");
    h = calloc(1, sizeof(*h));
    if (!h)
        return error_set(err, -ENOMEM, "out of memory");
    h->serving = o->serving;
    h->ctx = o->ctx;
    h->services = strv_new();
    r = h->services ? strv_push(&h->services, "") : -ENOMEM;
    for (size_t i = 0; r >= 0 && o->services && o->services[i]; i++)
        if (!strv_contains(h->services, o->services[i]))
            r = strv_push(&h->services, o->services[i]);
    if (r < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    /* a path is a unix socket (tests, sidecars); anything else host:port */
    r = o->address[0] == '/' ? rpc_server_new(o->address, &h->rpc, err)
                             : rpc_server_new_tcp(o->address, &h->rpc, err);
    if (r >= 0)
        r = rpc_server_add_unary(h->rpc, KHEALTH_METHOD_CHECK, h_check, h, err);
    if (r < 0)
        goto fail;
    *ret = h;
    return 0;
fail:
    error_prefix(err, "health service on %s", o->address);
    khealth_server_free(h);
    return r;
}

int khealth_server_start(struct khealth_server *h, struct error *err)
{
    return rpc_server_start(h->rpc, err);
}

int khealth_server_port(const struct khealth_server *h)
{
    return rpc_server_tcp_port(h->rpc);
}

void khealth_server_stop(struct khealth_server *h)
{
    if (h)
        rpc_server_stop(h->rpc);
}

void khealth_server_free(struct khealth_server *h)
{
    if (!h)
        return;
    rpc_server_free(h->rpc);
    strv_free(h->services);
    free(h);
}

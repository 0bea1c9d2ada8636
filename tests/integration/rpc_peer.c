/* SPDX-License-Identifier: Apache-2.0 */
/* rpc_peer: the C side of the gRPC interop test (test_rpc_interop.py). `serve SOCKET`
 * serves the DevicePlugin service shape on rpc/ with protobuf-c messages until
 * SIGTERM; `register KUBELET_SOCK` calls Registration/Register as a plugin would; `watch
 * SOCKET` reads ListAndWatch and prints each message in hex. Test code: canned answers. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "rpc/rpc.h"

#define DP "/v1beta1.DevicePlugin/"

/* Packs any protobuf-c message into the response buffer. */
static int pack_into(const ProtobufCMessage *m, struct strbuf *resp)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    int r;

    if (!buf)
        return -ENOMEM;
    protobuf_c_message_pack(m, buf);
    r = strbuf_append(resp, (const char *)buf, n);
    free(buf);
    return r;
}

static int h_options(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                     struct rpc_status *st)
{
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

    o.get_preferred_allocation_available = true;
    return pack_into(&o.base, resp);
}

static int h_allocate(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                      struct rpc_status *st)
{
    V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, len, req);
    V1beta1__AllocateResponse out = V1BETA1__ALLOCATE_RESPONSE__INIT;
    V1beta1__ContainerAllocateResponse *crs = NULL, **crp = NULL;
    V1beta1__ContainerAllocateResponse__EnvsEntry *envs = NULL, **envp = NULL;
    struct strbuf *vals = NULL;
    size_t n;
    int r = 0;

    if (!in) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "malformed AllocateRequest");
        return 0;
    }
    n = in->n_container_requests;
    if (n == 0) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "AllocateRequest has no container requests");
        goto out;
    }
    crs = calloc(n, sizeof(*crs));
    crp = calloc(n, sizeof(*crp));
    envs = calloc(n, sizeof(*envs));
    envp = calloc(n, sizeof(*envp));
    vals = calloc(n, sizeof(*vals));
    if (!crs || !crp || !envs || !envp || !vals) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const V1beta1__ContainerAllocateRequest *c = in->container_requests[i];

        for (size_t j = 0; j < c->n_devices_ids; j++) {
            if (!str_startswith(c->devices_ids[j], "GPU-")) {
                rpc_status_set(st, RPC_INVALID_ARGUMENT, "unknown device \"%s\"",
                               c->devices_ids[j]);
                goto out;
            }
            strbuf_printf(&vals[i], "%s%s", j ? "," : "", c->devices_ids[j]);
        }
        v1beta1__container_allocate_response__init(&crs[i]);
        v1beta1__container_allocate_response__envs_entry__init(&envs[i]);
        envs[i].key = (char *)"GS_DEVICES";
        envs[i].value = (char *)strbuf_str(&vals[i]);
        envp[i] = &envs[i];
        crs[i].n_envs = 1;
        crs[i].envs = &envp[i];
        crp[i] = &crs[i];
    }
    out.n_container_responses = n;
    out.container_responses = crp;
    r = pack_into(&out.base, resp);
out:
    for (size_t i = 0; vals && i < n; i++)
        strbuf_release(&vals[i]);
    free(vals);
    free(envp);
    free(envs);
    free(crp);
    free(crs);
    v1beta1__allocate_request__free_unpacked(in, NULL);
    return r;
}

static int h_preferred(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                       struct rpc_status *st)
{
    V1beta1__PreferredAllocationRequest *in =
        v1beta1__preferred_allocation_request__unpack(NULL, len, req);
    V1beta1__PreferredAllocationResponse out = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    V1beta1__ContainerPreferredAllocationResponse cr =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_RESPONSE__INIT;
    V1beta1__ContainerPreferredAllocationResponse *crp = &cr;
    int r;

    if (!in || in->n_container_requests != 1) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "want one container request");
        v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
        return 0;
    }
    /* The first allocation_size of the available IDs: enough to check the wire. */
    cr.n_deviceids = in->container_requests[0]->n_available_deviceids;
    if (in->container_requests[0]->allocation_size >= 0 &&
        cr.n_deviceids > (size_t)in->container_requests[0]->allocation_size)
        cr.n_deviceids = (size_t)in->container_requests[0]->allocation_size;
    cr.deviceids = in->container_requests[0]->available_deviceids;
    out.n_container_responses = 1;
    out.container_responses = &crp;
    r = pack_into(&out.base, resp);
    v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
    return r;
}

static int h_prestart(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                      struct rpc_status *st)
{
    return 0; /* PreStartContainerResponse is empty */
}

/* Device list: GPU-0 (NUMA node 0) with the given health, plus GPU-1 when `two`. */
static int pack_list(const char *health, bool two, struct strbuf *out)
{
    V1beta1__NUMANode node = V1BETA1__NUMANODE__INIT;
    V1beta1__NUMANode *nodes[] = {&node};
    V1beta1__TopologyInfo topo = V1BETA1__TOPOLOGY_INFO__INIT;
    V1beta1__Device d0 = V1BETA1__DEVICE__INIT, d1 = V1BETA1__DEVICE__INIT;
    V1beta1__Device *devs[] = {&d0, &d1};
    V1beta1__ListAndWatchResponse l = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;

    topo.n_nodes = 1;
    topo.nodes = nodes;
    d0.id = (char *)"GPU-0";
    d0.health = (char *)health;
    d0.topology = &topo;
    d1.id = (char *)"GPU-1";
    d1.health = (char *)"Healthy";
    l.n_devices = two ? 2 : 1;
    l.devices = devs;
    return pack_into(&l.base, out);
}

static int h_watch(void *ctx, const uint8_t *req, size_t len, struct rpc_stream *stream,
                   struct rpc_status *st)
{
    struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
    int r;

    /* First the facts' §1.5 example, then a changed list, as on a health event. */
    r = pack_list("Healthy", false, &a);
    if (r >= 0)
        r = pack_list("Unhealthy", true, &b);
    if (r >= 0)
        r = rpc_stream_send(stream, (const uint8_t *)a.buf, a.len);
    if (r >= 0)
        r = rpc_stream_send(stream, (const uint8_t *)b.buf, b.len);
    strbuf_release(&a);
    strbuf_release(&b);
    if (r < 0)
        return r;
    rpc_stream_unref(stream); /* the stream stays open until the client or stop ends it */
    return 0;
}

static int serve(const char *sock)
{
    struct rpc_server *srv = NULL;
    struct error err = {0};
    sigset_t set;
    int sig = 0;
    int r;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts */
    r = rpc_server_new(sock, &srv, &err);
    if (r >= 0)
        r = rpc_server_add_unary(srv, DP "GetDevicePluginOptions", h_options, NULL, &err);
    if (r >= 0)
        r = rpc_server_add_stream(srv, DP "ListAndWatch", h_watch, NULL, NULL, &err);
    if (r >= 0)
        r = rpc_server_add_unary(srv, DP "GetPreferredAllocation", h_preferred, NULL, &err);
    if (r >= 0)
        r = rpc_server_add_unary(srv, DP "Allocate", h_allocate, NULL, &err);
    if (r >= 0)
        r = rpc_server_add_unary(srv, DP "PreStartContainer", h_prestart, NULL, &err);
    if (r >= 0)
        r = rpc_server_start(srv, &err);
    if (r < 0) {
        fprintf(stderr, "rpc_peer: %s\n", err.msg);
        rpc_server_free(srv);
        return 1;
    }
    printf("serving %s\n", sock);
    fflush(stdout);
    sigwait(&set, &sig);
    rpc_server_stop(srv);
    rpc_server_free(srv);
    printf("stopped\n");
    return 0;
}

static int do_register(const char *sock)
{
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    V1beta1__RegisterRequest rq = V1BETA1__REGISTER_REQUEST__INIT;
    struct rpc_status st = {0, ""};
    struct error err = {0};
    uint8_t buf[256];
    uint8_t *resp = NULL;
    size_t len = 0, n;
    int r;

    /* The facts' §1.5 example, byte for byte. */
    o.get_preferred_allocation_available = true;
    rq.version = (char *)"v1beta1";
    rq.endpoint = (char *)"example-gpu.sock";
    rq.resource_name = (char *)"example.com/gpu";
    rq.options = &o;
    n = v1beta1__register_request__pack(&rq, buf);
    r = rpc_client_call(sock, "/v1beta1.Registration/Register", buf, n, 5000, &resp, &len, &st,
                        &err);
    free(resp);
    printf("status=%d code=%s message=%s len=%zu\n", st.code, rpc_code_name(st.code), st.message,
           len);
    if (r < 0)
        fprintf(stderr, "rpc_peer: %s\n", err.msg);
    return r < 0 ? 1 : 0;
}

static int watch(const char *sock, int max)
{
    struct rpc_client *c = NULL;
    struct rpc_client_stream *s = NULL;
    struct rpc_status st = {0, ""};
    struct error err = {0};
    int r;

    r = rpc_client_new(sock, NULL, &c, &err);
    if (r >= 0)
        r = rpc_client_stream_open(c, "/v1beta1.DevicePlugin/ListAndWatch", NULL, 0, &s, &err);
    for (int i = 0; r >= 0 && i < max; i++) {
        uint8_t *msg = NULL;
        size_t len = 0;

        r = rpc_client_stream_next(s, 10000, &msg, &len, &st, &err);
        if (r <= 0)
            break;
        printf("msg ");
        for (size_t j = 0; j < len; j++)
            printf("%02x", msg[j]);
        printf("\n");
        free(msg);
    }
    if (r == 0)
        printf("end status=%d\n", st.code);
    else if (r < 0)
        printf("error status=%d code=%s message=%s\n", st.code, rpc_code_name(st.code), st.message);
    rpc_client_stream_close(s);
    rpc_client_free(c);
    return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    unsigned max = 2;

    if (argc >= 3 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "register") == 0)
        return do_register(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "watch") == 0) {
        if (argc >= 4 && parse_uint(argv[3], &max) < 0)
            return 2;
        return watch(argv[2], (int)max);
    }
    fprintf(stderr, "usage: rpc_peer serve SOCKET | register KUBELET_SOCK | watch SOCKET [N]\n");
    return 2;
}

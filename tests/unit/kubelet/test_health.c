/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for src/kubelet/health.c: grpc.health.v1.Health/Check from generated messages —
 * the pure answer table ("" and "liveness" served, SERVING or NOT_SERVING as the callback
 * says, other names NOT_FOUND, a malformed request INVALID_ARGUMENT), the service on a unix
 * socket through our client, and on a TCP port through a bare HTTP/2 peer, as a kubelet
 * probe reaches it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/base.h"
#include "grpc/health/v1/health.pb-c.h"
#include "h2peer.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"

#define WAIT_MS 10000

static bool serving_flag(void *ctx, const char *service)
{
    (void)service;
    return *(bool *)ctx;
}

/* A packed HealthCheckRequest for `service` into buf; its length. */
static size_t pack_request(const char *service, uint8_t *buf)
{
    Grpc__Health__V1__HealthCheckRequest rq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;

    rq.service = (char *)service;
    return grpc__health__v1__health_check_request__pack(&rq, buf);
}

/* The status of a packed HealthCheckResponse, -1 when it does not decode. */
static int response_status(const uint8_t *buf, size_t len)
{
    Grpc__Health__V1__HealthCheckResponse *r =
        grpc__health__v1__health_check_response__unpack(NULL, len, buf);
    int st = r ? (int)r->status : -1;

    grpc__health__v1__health_check_response__free_unpacked(r, NULL);
    return st;
}

static void test_khealth_check_table(void **state)
{
    static const struct {
        const char *service;
        bool serving;
        int code;
        int status;
    } cases[] = {
        {"", true, RPC_OK, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING},
        {"", false, RPC_OK, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING},
        {"liveness", true, RPC_OK,
         GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING},
        {"liveness", false, RPC_OK,
         GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING},
        {"readiness", true, RPC_NOT_FOUND, -1},
        {"grpc.health.v1.Health", true, RPC_NOT_FOUND, -1},
    };
    char *services[] = {"", "liveness", NULL};

    (void)state;
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct strbuf resp = STRBUF_INIT;
        struct rpc_status st = {RPC_OK, ""};
        bool serving = cases[i].serving;
        uint8_t req[64];
        size_t n = pack_request(cases[i].service, req);

        assert_int_equal(khealth_check(services, serving_flag, &serving, req, n, &resp, &st), 0);
        assert_int_equal(st.code, cases[i].code);
        if (cases[i].code == RPC_OK)
            assert_int_equal(response_status((const uint8_t *)resp.buf, resp.len), cases[i].status);
        else
            assert_string_equal(st.message, "unknown service");
        strbuf_release(&resp);
    }
    {
        struct strbuf resp = STRBUF_INIT;
        struct rpc_status st = {RPC_OK, ""};
        bool serving = true;

        assert_int_equal(khealth_check(services, serving_flag, &serving,
                                       (const uint8_t *)"\x0a\x05x", 3, &resp, &st),
                         0);
        assert_int_equal(st.code, RPC_INVALID_ARGUMENT);
        strbuf_release(&resp);
    }
}

static void test_khealth_server_unix_socket(void **state)
{
    char dir[64], sock[128];
    const char *const names[] = {KHEALTH_SERVICE_LIVENESS, NULL};
    bool serving = false;
    struct khealth_opts o = {.services = names, .serving = serving_flag, .ctx = &serving};
    struct khealth_server *h = NULL;
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    uint8_t req[64], *resp = NULL;
    size_t n, len = 0;

    (void)state;
    str_copy(dir, "/tmp/gs-health-XXXXXX", sizeof(dir));
    assert_non_null(mkdtemp(dir));
    snprintf(sock, sizeof(sock), "%s/h.sock", dir);
    o.address = sock;
    assert_int_equal(khealth_server_new(&o, &h, &err), 0);
    assert_int_equal(khealth_server_start(h, &err), 0);
    assert_int_equal(khealth_server_port(h), -1);
    n = pack_request("liveness", req);
    assert_int_equal(
        rpc_client_call(sock, KHEALTH_METHOD_CHECK, req, n, WAIT_MS, &resp, &len, &st, &err), 0);
    assert_int_equal(response_status(resp, len),
                     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
    free(resp);
    serving = true;
    assert_int_equal(
        rpc_client_call(sock, KHEALTH_METHOD_CHECK, req, n, WAIT_MS, &resp, &len, &st, &err), 0);
    assert_int_equal(response_status(resp, len),
                     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
    free(resp);
    n = pack_request("nvidia", req);
    assert_int_equal(
        rpc_client_call(sock, KHEALTH_METHOD_CHECK, req, n, WAIT_MS, &resp, &len, &st, &err),
        -EREMOTEIO);
    assert_int_equal(st.code, RPC_NOT_FOUND);
    khealth_server_free(h);
    rmdir(dir);
}

/* As the kubelet's probe reaches it: TCP, a new connection per probe. */
static void test_khealth_server_tcp_probe(void **state)
{
    const char *const names[] = {KHEALTH_SERVICE_LIVENESS, NULL};
    bool serving = true;
    struct khealth_opts o = {
        .address = "127.0.0.1:0", .services = names, .serving = serving_flag, .ctx = &serving};
    struct khealth_server *h = NULL;
    struct error err = {0};
    uint8_t body[64];
    size_t n = pack_request("liveness", body + 5);
    struct h2peer_call pc = {.path = KHEALTH_METHOD_CHECK,
                             .body = body,
                             .body_len = n + 5,
                             .end = true,
                             .wait_ms = WAIT_MS};
    int port;

    (void)state;
    body[0] = 0;
    body[1] = body[2] = body[3] = 0;
    body[4] = (uint8_t)n;
    assert_int_equal(khealth_server_new(&o, &h, &err), 0);
    assert_int_equal(khealth_server_start(h, &err), 0);
    port = khealth_server_port(h);
    assert_true(port > 0);
    assert_int_equal(h2peer_run(NULL, port, &pc), 0);
    assert_int_equal(pc.status, RPC_OK);
    assert_true(pc.data_len > 5);
    assert_int_equal(response_status(pc.data + 5, pc.data_len - 5),
                     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
    n = pack_request("other", body + 5);
    body[4] = (uint8_t)n;
    pc.body_len = n + 5;
    assert_int_equal(h2peer_run(NULL, port, &pc), 0);
    assert_int_equal(pc.status, RPC_NOT_FOUND);
    khealth_server_free(h);
}

static void test_khealth_server_new_bad_input(void **state)
{
    struct khealth_opts o = {0};
    struct khealth_server *h = NULL;
    struct error err = {0};

    (void)state;
    assert_int_equal(khealth_server_new(&o, &h, &err), -EINVAL);
    o.address = "127.0.0.1:0";
    assert_int_equal(khealth_server_new(&o, &h, &err), -EINVAL); /* no callback */
    o.serving = serving_flag;
    o.address = "127.0.0.1";
    assert_int_equal(khealth_server_new(&o, &h, &err), 0);
    assert_int_equal(khealth_server_start(h, &err), -EINVAL); /* no port */
    assert_non_null(strstr(err.msg, "no port"));
    khealth_server_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_khealth_check_table),
        cmocka_unit_test(test_khealth_server_unix_socket),
        cmocka_unit_test(test_khealth_server_tcp_probe),
        cmocka_unit_test(test_khealth_server_new_bad_input),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for src/rpc's TCP server (the probe port): a connection that sends no HTTP/2 preface
 * or stays idle is dropped, and a peer holding every connection slot does not lock new
 * probes out (issue 29 §1: 103 of 118 probes failed while a peer held 256 connections). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/base.h"
#include "h2peer.h"
#include "rpc/rpc.h"

#define WAIT_MS 10000
#define M_ECHO "/test.Svc/Echo"
/* HTTP/2's client preface and an empty SETTINGS frame: a peer that spoke, then fell silent */
static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
#define PREFACE_LEN (sizeof(preface) - 1)

static int h_echo(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                  struct rpc_status *st)
{
    return strbuf_append(resp, (const char *)req, len);
}

static struct rpc_server *tcp_server(int preface_ms, int idle_ms, int *ret_port)
{
    struct rpc_server *srv = NULL;
    struct error err = {0};

    assert_int_equal(rpc_server_new_tcp("127.0.0.1:0", &srv, &err), 0);
    assert_int_equal(rpc_server_add_unary(srv, M_ECHO, h_echo, NULL, &err), 0);
    if (preface_ms >= 0)
        assert_int_equal(rpc_server_set_conn_timeouts(srv, preface_ms, idle_ms, &err), 0);
    assert_int_equal(rpc_server_start(srv, &err), 0);
    assert_int_equal(rpc_server_set_conn_timeouts(srv, 1, 1, &err), -EBUSY);
    *ret_port = rpc_server_tcp_port(srv);
    assert_true(*ret_port > 0);
    return srv;
}

static int tcp_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* Reads until EOF; the ms it took, or -1 when the server kept the connection past limit. */
static long ms_until_eof(int fd, int limit_ms)
{
    uint64_t t0 = time_now_ms(), end = t0 + (uint64_t)limit_ms;
    char buf[256];

    while (time_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&p, 1, (int)(end - time_now_ms())) <= 0)
            break;
        n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            return (long)(time_now_ms() - t0);
    }
    return -1;
}

static void probe_ok(int port)
{
    static const uint8_t body[] = {0, 0, 0, 0, 2, 'o', 'k'};
    struct h2peer_call pc = {
        .path = M_ECHO, .body = body, .body_len = sizeof(body), .end = true, .wait_ms = WAIT_MS};

    assert_int_equal(h2peer_run(NULL, port, &pc), 0);
    assert_int_equal(pc.status, RPC_OK);
}

static void test_rpc_tcp_no_preface_dropped(void **state)
{
    int port, fd;
    struct rpc_server *srv = tcp_server(300, 0, &port);
    long ms;

    (void)state;
    fd = tcp_connect(port);
    ms = ms_until_eof(fd, 5000);
    assert_true(ms >= 250 && ms < 5000);
    close(fd);
    probe_ok(port);
    rpc_server_free(srv);
}

static void test_rpc_tcp_idle_dropped(void **state)
{
    int port, fd;
    struct rpc_server *srv = tcp_server(0, 400, &port);
    long ms;

    (void)state;
    fd = tcp_connect(port);
    assert_int_equal(write(fd, preface, PREFACE_LEN), (ssize_t)PREFACE_LEN);
    ms = ms_until_eof(fd, 5000);
    assert_true(ms >= 350 && ms < 5000);
    close(fd);
    rpc_server_free(srv);
}

/* A peer holds 256 silent connections (preface sent, then nothing): every new probe is
 * served, the idlest held connection making room each time. */
static void test_rpc_tcp_full_cap_probes_still_served(void **state)
{
    enum { HELD = 256, PROBES = 20 };
    int port, fds[HELD];
    struct rpc_server *srv = tcp_server(-1, -1, &port); /* the defaults: 5 s, 60 s */

    (void)state;
    for (int i = 0; i < HELD; i++) {
        fds[i] = tcp_connect(port);
        assert_int_equal(write(fds[i], preface, PREFACE_LEN), (ssize_t)PREFACE_LEN);
    }
    for (int i = 0; i < PROBES; i++)
        probe_ok(port);
    for (int i = 0; i < HELD; i++)
        close(fds[i]);
    rpc_server_free(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_tcp_no_preface_dropped),
        cmocka_unit_test(test_rpc_tcp_idle_dropped),
        cmocka_unit_test(test_rpc_tcp_full_cap_probes_still_served),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

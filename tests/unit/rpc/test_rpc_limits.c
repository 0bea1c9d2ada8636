/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for the limits src/rpc enforces (issue 29 §1), each against the behaviour that was
 * wrong: a message prefix announcing more than 4 MiB refused at once, a call to an unknown
 * method answered at its headers, SETTINGS_MAX_CONCURRENT_STREAMS and
 * MAX_HEADER_LIST_SIZE advertised and an oversized header list refused, a stream's queue
 * bounded in bytes and "newest only" sends for a client that stops reading, and a client
 * that cannot hang in connect() on a server whose backlog is full. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/base.h"
#include "h2peer.h"
#include "rpc/rpc.h"

#define WAIT_MS 10000
#define M_ECHO "/test.Svc/Echo"
#define M_WATCH "/test.Svc/Watch"
#define MIB (1024u * 1024u)

struct fixture {
    char dir[64];
    char sock[128];
    struct rpc_server *srv;
    pthread_mutex_t lock;
    struct rpc_stream *stream;
};

static int h_echo(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                  struct rpc_status *st)
{
    return strbuf_append(resp, (const char *)req, len);
}

static int h_watch(void *ctx, const uint8_t *req, size_t len, struct rpc_stream *stream,
                   struct rpc_status *st)
{
    struct fixture *f = ctx;

    pthread_mutex_lock(&f->lock);
    f->stream = stream;
    pthread_mutex_unlock(&f->lock);
    return 0;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct error err = {0};

    assert_non_null(f);
    pthread_mutex_init(&f->lock, NULL);
    str_copy(f->dir, "/tmp/gs-rpcl-XXXXXX", sizeof(f->dir));
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->sock, sizeof(f->sock), "%s/l.sock", f->dir);
    assert_int_equal(rpc_server_new(f->sock, &f->srv, &err), 0);
    assert_int_equal(rpc_server_add_unary(f->srv, M_ECHO, h_echo, f, &err), 0);
    assert_int_equal(rpc_server_add_stream(f->srv, M_WATCH, h_watch, NULL, f, &err), 0);
    assert_int_equal(rpc_server_start(f->srv, &err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    rpc_server_free(f->srv);
    rpc_stream_unref(f->stream);
    unlink(f->sock);
    rmdir(f->dir);
    pthread_mutex_destroy(&f->lock);
    free(f);
    return 0;
}

static void echo_still_served(struct fixture *f)
{
    struct error err = {0};
    uint8_t *resp = NULL;
    size_t len = 0;

    assert_int_equal(rpc_client_call(f->sock, M_ECHO, (const uint8_t *)"ok", 2, WAIT_MS, &resp,
                                     &len, NULL, &err),
                     0);
    free(resp);
}

/* 5 MiB announced, 3 bytes sent, nothing more coming: RESOURCE_EXHAUSTED now, not after
 * 4 MiB arrive (which here would be never). */
static void test_rpc_limits_prefix_over_max_refused_at_once(void **state)
{
    struct fixture *f = *state;
    static const uint8_t body[] = {0, 0x00, 0x50, 0x00, 0x00, 'a', 'b', 'c'};
    struct h2peer_call pc = {
        .path = M_ECHO, .body = body, .body_len = sizeof(body), .end = false, .wait_ms = 3000};

    assert_int_equal(h2peer_run(f->sock, 0, &pc), 0);
    assert_int_equal(pc.status, RPC_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(pc.message, "larger than max"));
    assert_true(pc.status_ms < 2000);
    echo_still_served(f);
}

/* A call to an unknown method whose client sends nothing yet (a bidi stream waiting for the
 * server): UNIMPLEMENTED at its headers. */
static void test_rpc_limits_unknown_method_answered_at_headers(void **state)
{
    struct fixture *f = *state;
    struct h2peer_call pc = {.path = "/test.Svc/Nope", .end = false, .wait_ms = 3000};

    assert_int_equal(h2peer_run(f->sock, 0, &pc), 0);
    assert_int_equal(pc.status, RPC_UNIMPLEMENTED);
    assert_true(pc.status_ms < 2000);
    echo_still_served(f);
}

static void test_rpc_limits_settings_and_header_list(void **state)
{
    struct fixture *f = *state;
    static const uint8_t body[] = {0, 0, 0, 0, 2, 'h', 'i'};
    size_t big_len = 100 * 1024;
    char *big = malloc(big_len + 1);
    struct h2peer_call pc = {
        .path = M_ECHO, .body = body, .body_len = sizeof(body), .end = true, .wait_ms = WAIT_MS};

    assert_non_null(big);
    assert_int_equal(h2peer_run(f->sock, 0, &pc), 0);
    assert_int_equal(pc.status, RPC_OK);
    assert_int_equal(pc.max_streams, 100);
    assert_int_equal(pc.max_header_list, 64 * 1024);
    /* 100 KiB of headers: the stream is reset, nothing answered, the server goes on */
    memset(big, 'x', big_len);
    big[big_len] = '\0';
    pc.extra = big;
    assert_int_equal(h2peer_run(f->sock, 0, &pc), 0);
    assert_true(pc.closed);
    assert_int_not_equal(pc.status, RPC_OK);
    free(big);
    echo_still_served(f);
}

static struct rpc_stream *open_watch(struct fixture *f, struct rpc_client **ret_c,
                                     struct rpc_client_stream **ret_s)
{
    struct error err = {0};
    struct rpc_stream *stream = NULL;

    assert_int_equal(rpc_client_new(f->sock, NULL, ret_c, &err), 0);
    assert_int_equal(rpc_client_stream_open(*ret_c, M_WATCH, NULL, 0, ret_s, &err), 0);
    for (uint64_t end = time_now_ms() + WAIT_MS; !stream && time_now_ms() < end;) {
        pthread_mutex_lock(&f->lock);
        stream = f->stream;
        pthread_mutex_unlock(&f->lock);
        if (!stream)
            poll(NULL, 0, 5);
    }
    assert_non_null(stream);
    return stream;
}

/* A client that stops reading: plain sends fail once 16 MiB wait (not 256 messages of a
 * MiB each, 256 MiB), and "newest only" sends all succeed and deliver the newest last. */
static void test_rpc_limits_stream_queue_bytes_and_latest(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *c = NULL;
    struct rpc_client_stream *cs = NULL;
    struct rpc_stream *s = open_watch(f, &c, &cs);
    uint8_t *msg = calloc(1, MIB), *got = NULL, last = 0;
    size_t n_sent = 0, len = 0, n_got = 0;
    struct error err = {0};
    int r = 0;

    assert_non_null(msg);
    for (; n_sent < 200 && (r = rpc_stream_send(s, msg, MIB)) == 0; n_sent++)
        ;
    assert_int_equal(r, -ENOBUFS);
    assert_true(n_sent < 64); /* 16 MiB queued, plus what the windows took */
    /* newest only: every send succeeds, whatever the client reads */
    for (unsigned i = 1; i <= 100; i++) {
        msg[0] = (uint8_t)i;
        assert_int_equal(rpc_stream_send_latest(s, msg, MIB), 0);
    }
    assert_int_equal(rpc_stream_finish(s, NULL), 0);
    while ((r = rpc_client_stream_next(cs, WAIT_MS, &got, &len, NULL, &err)) == 1) {
        n_got++;
        last = got[0];
        free(got);
    }
    assert_int_equal(r, 0);
    assert_int_equal(last, 100);            /* the newest arrived, last */
    assert_true(n_got < n_sent + 100 - 10); /* the replaced ones never went */
    rpc_client_stream_close(cs);
    rpc_client_free(c);
    free(msg);
}

struct bg_call {
    const char *sock;
    int r;
    struct rpc_status st;
    bool done;
    pthread_mutex_t lock;
};

static void *bg_call_run(void *arg)
{
    struct bg_call *b = arg;
    struct error err = {0};
    uint8_t *resp = NULL;
    size_t len = 0;
    int r = rpc_client_call(b->sock, M_ECHO, NULL, 0, 2000, &resp, &len, &b->st, &err);

    free(resp);
    pthread_mutex_lock(&b->lock);
    b->r = r;
    b->done = true;
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

/* A server alive but not accepting, its backlog full: the call fails UNAVAILABLE within its
 * deadline and the client is freed (the call ran in a thread: before the fix it stayed in
 * connect() for ever, and so did rpc_client_free). */
static void test_rpc_limits_client_connect_full_backlog(void **state)
{
    struct fixture *f = *state;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), fds[64];
    size_t n = 0;
    struct bg_call b = {.r = 1};
    pthread_t t;
    bool done = false;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/full.sock", f->dir);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(lfd, 0), 0);
    for (; n < GS_ARRAY_SIZE(fds); n++) {
        fds[n] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (connect(fds[n], (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            assert_int_equal(errno, EAGAIN);
            close(fds[n]);
            break;
        }
    }
    assert_true(n < GS_ARRAY_SIZE(fds)); /* the backlog is full */
    pthread_mutex_init(&b.lock, NULL);
    b.sock = sa.sun_path;
    assert_int_equal(pthread_create(&t, NULL, bg_call_run, &b), 0);
    for (uint64_t end = time_now_ms() + 4000; !done && time_now_ms() < end;) {
        pthread_mutex_lock(&b.lock);
        done = b.done;
        pthread_mutex_unlock(&b.lock);
        if (!done)
            poll(NULL, 0, 5);
    }
    assert_true(done); /* otherwise the thread is left behind: the process ends anyway */
    pthread_join(t, NULL);
    assert_int_equal(b.r, -ECONNREFUSED);
    assert_int_equal(b.st.code, RPC_UNAVAILABLE);
    assert_non_null(strstr(b.st.message, "not accepting"));
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    close(lfd);
    unlink(sa.sun_path);
    pthread_mutex_destroy(&b.lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rpc_limits_prefix_over_max_refused_at_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rpc_limits_unknown_method_answered_at_headers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rpc_limits_settings_and_header_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_limits_stream_queue_bytes_and_latest, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rpc_limits_client_connect_full_backlog, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

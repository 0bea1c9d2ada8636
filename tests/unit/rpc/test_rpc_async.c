/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for src/rpc/rpc.c's deferred unary calls (rpc_server_add_unary_async,
 * rpc_call_finish) and the server's own deadlines: answers from another thread, inside the
 * handler, with an error status; a late finish after the client gave up, after the
 * grpc-timeout passed (seen by a bare HTTP/2 peer with no deadline of its own) and after
 * the server was freed, each a harmless -EPIPE. */
#include <errno.h>
#include <pthread.h>
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
#include "h2peer.h"
#include "rpc/rpc.h"

#define WAIT_MS 10000
#define M_LATER "/test.Svc/Later" /* kept for the test thread to finish */
#define M_NOW "/test.Svc/Now"     /* finished inside the handler */

struct fixture {
    char dir[64];
    char sock[128];
    struct rpc_server *srv;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct rpc_call *held;
    uint8_t req[64];
    size_t req_len;
};

static void h_later(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct fixture *f = ctx;

    pthread_mutex_lock(&f->lock);
    f->held = call;
    f->req_len = len < sizeof(f->req) ? len : sizeof(f->req);
    memcpy(f->req, req, f->req_len);
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

static void h_now(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct rpc_status st = {RPC_OK, ""};

    if (len == 0)
        rpc_status_set(&st, RPC_NOT_FOUND, "nothing asked");
    rpc_call_finish(call, req, len, &st);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct error err = {0};

    assert_non_null(f);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    str_copy(f->dir, "/tmp/gs-rpca-XXXXXX", sizeof(f->dir));
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->sock, sizeof(f->sock), "%s/a.sock", f->dir);
    assert_int_equal(rpc_server_new(f->sock, &f->srv, &err), 0);
    assert_int_equal(rpc_server_add_unary_async(f->srv, M_LATER, h_later, f, &err), 0);
    assert_int_equal(rpc_server_add_unary_async(f->srv, M_NOW, h_now, f, &err), 0);
    assert_int_equal(rpc_server_add_unary_async(f->srv, M_NOW, h_now, f, &err), -EEXIST);
    assert_int_equal(rpc_server_add_unary_async(f->srv, "/x.Y/Z", NULL, f, &err), -EINVAL);
    assert_int_equal(rpc_server_start(f->srv, &err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    rpc_server_free(f->srv);
    if (f->held) /* a call a test left: finishing it after the server went is harmless */
        assert_int_equal(rpc_call_finish(f->held, NULL, 0, NULL), -EPIPE);
    unlink(f->sock);
    rmdir(f->dir);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f);
    return 0;
}

/* The call the handler took, once it has (NULL after WAIT_MS); the fixture lets go of it. */
static struct rpc_call *take_held(struct fixture *f)
{
    uint64_t end = time_now_ms() + WAIT_MS;
    struct rpc_call *call;
    struct timespec ts;

    pthread_mutex_lock(&f->lock);
    while (!f->held && time_now_ms() < end) {
        time_deadline(&ts, CLOCK_REALTIME, 20);
        pthread_cond_timedwait(&f->cond, &f->lock, &ts);
    }
    call = f->held;
    f->held = NULL;
    pthread_mutex_unlock(&f->lock);
    return call;
}

struct caller {
    struct fixture *f;
    const char *method;
    int timeout_ms;
    int r;
    struct rpc_status st;
    uint8_t *resp;
    size_t len;
};

static void *caller_run(void *arg)
{
    struct caller *c = arg;
    struct error err = {0};

    c->r = rpc_client_call(c->f->sock, c->method, (const uint8_t *)"ask", 3, c->timeout_ms,
                           &c->resp, &c->len, &c->st, &err);
    return NULL;
}

/* The handler returns at once; the answer comes from the test thread, with the bytes the
 * handler copied from the (borrowed) request. */
static void test_rpc_async_finish_from_other_thread(void **state)
{
    struct fixture *f = *state;
    struct caller c = {.f = f, .method = M_LATER, .timeout_ms = WAIT_MS};
    struct rpc_call *call;
    pthread_t t;

    assert_int_equal(pthread_create(&t, NULL, caller_run, &c), 0);
    call = take_held(f);
    assert_non_null(call);
    assert_false(rpc_call_cancelled(call));
    assert_memory_equal(f->req, "ask", 3);
    assert_int_equal(rpc_call_finish(call, (const uint8_t *)"answer", 6, NULL), 0);
    pthread_join(t, NULL);
    assert_int_equal(c.r, 0);
    assert_int_equal(c.len, 6);
    assert_memory_equal(c.resp, "answer", 6);
    free(c.resp);
}

static void test_rpc_async_finish_inside_handler(void **state)
{
    struct fixture *f = *state;
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    uint8_t *resp = NULL;
    size_t len = 0;

    assert_int_equal(
        rpc_client_call(f->sock, M_NOW, (const uint8_t *)"abc", 3, WAIT_MS, &resp, &len, &st, &err),
        0);
    assert_int_equal(len, 3);
    assert_memory_equal(resp, "abc", 3);
    free(resp);
    assert_int_equal(rpc_client_call(f->sock, M_NOW, NULL, 0, WAIT_MS, &resp, &len, &st, &err),
                     -EREMOTEIO);
    assert_int_equal(st.code, RPC_NOT_FOUND);
    assert_string_equal(st.message, "nothing asked");
}

static void test_rpc_async_error_status_and_oversized(void **state)
{
    struct fixture *f = *state;
    struct caller c = {.f = f, .method = M_LATER, .timeout_ms = WAIT_MS};
    struct rpc_status st;
    struct rpc_call *call;
    pthread_t t;
    uint8_t *big = calloc(1, RPC_MAX_MESSAGE_BYTES + 1);

    assert_non_null(big);
    assert_int_equal(pthread_create(&t, NULL, caller_run, &c), 0);
    call = take_held(f);
    assert_non_null(call);
    rpc_status_set(&st, RPC_FAILED_PRECONDITION, "claim \"%s\" busy", "a");
    assert_int_equal(rpc_call_finish(call, NULL, 0, &st), 0);
    pthread_join(t, NULL);
    assert_int_equal(c.r, -EREMOTEIO);
    assert_int_equal(c.st.code, RPC_FAILED_PRECONDITION);
    assert_string_equal(c.st.message, "claim \"a\" busy");

    c = (struct caller){.f = f, .method = M_LATER, .timeout_ms = WAIT_MS};
    assert_int_equal(pthread_create(&t, NULL, caller_run, &c), 0);
    call = take_held(f);
    assert_non_null(call);
    assert_int_equal(rpc_call_finish(call, big, RPC_MAX_MESSAGE_BYTES + 1, NULL), 0);
    pthread_join(t, NULL);
    assert_int_equal(c.st.code, RPC_RESOURCE_EXHAUSTED);
    free(big);
}

/* The client gives up (its own deadline, RST_STREAM): the call reads cancelled and a late
 * finish sends nothing. */
static void test_rpc_async_client_gone_late_finish(void **state)
{
    struct fixture *f = *state;
    struct caller c = {.f = f, .method = M_LATER, .timeout_ms = 200};
    struct rpc_call *call;
    pthread_t t;

    assert_int_equal(pthread_create(&t, NULL, caller_run, &c), 0);
    call = take_held(f);
    assert_non_null(call);
    pthread_join(t, NULL);
    assert_int_equal(c.st.code, RPC_DEADLINE_EXCEEDED);
    for (uint64_t end = time_now_ms() + WAIT_MS; !rpc_call_cancelled(call) && time_now_ms() < end;)
        usleep(1000); /* until the server thread has seen the reset */
    assert_true(rpc_call_cancelled(call));
    assert_int_equal(rpc_call_finish(call, (const uint8_t *)"late", 4, NULL), -EPIPE);
}

/* A peer with no deadline of its own sends grpc-timeout 300m: the server answers
 * DEADLINE_EXCEEDED on time although the handler never answered, and its late finish is
 * a no-op. */
static void test_rpc_async_server_deadline(void **state)
{
    struct fixture *f = *state;
    static const uint8_t body[] = {0, 0, 0, 0, 1, 'q'};
    struct h2peer_call pc = {.path = M_LATER,
                             .timeout = "300m",
                             .body = body,
                             .body_len = sizeof(body),
                             .end = true,
                             .wait_ms = WAIT_MS};
    struct rpc_call *call;

    assert_int_equal(h2peer_run(f->sock, 0, &pc), 0);
    assert_true(pc.closed);
    assert_int_equal(pc.status, RPC_DEADLINE_EXCEEDED);
    assert_true(pc.status_ms >= 290 && pc.status_ms < 3000);
    call = take_held(f);
    assert_non_null(call);
    assert_true(rpc_call_cancelled(call));
    assert_int_equal(rpc_call_finish(call, NULL, 0, NULL), -EPIPE);
}

/* A request whose message never completes (half a message, no END_STREAM) is answered
 * DEADLINE_EXCEEDED when its grpc-timeout passes, as grpc-go does. */
static void test_rpc_server_deadline_incomplete_request(void **state)
{
    struct fixture *f = *state;
    static const uint8_t half[] = {0, 0, 0, 0, 10, 'a', 'b'};
    struct h2peer_call pc = {.path = M_LATER,
                             .timeout = "200m",
                             .body = half,
                             .body_len = sizeof(half),
                             .end = false,
                             .wait_ms = WAIT_MS};

    assert_int_equal(h2peer_run(f->sock, 0, &pc), 0);
    assert_int_equal(pc.status, RPC_DEADLINE_EXCEEDED);
    assert_true(pc.status_ms >= 190 && pc.status_ms < 3000);
    assert_null(f->held); /* the handler never ran */
}

/* Stopping with a call still owed: the client hears the stop, and the finish afterwards (in
 * teardown, after rpc_server_free) is -EPIPE with nothing touched. */
static void test_rpc_async_server_stops_with_call_owed(void **state)
{
    struct fixture *f = *state;
    struct caller c = {.f = f, .method = M_LATER, .timeout_ms = WAIT_MS};
    pthread_t t;
    struct rpc_call *call;

    assert_int_equal(pthread_create(&t, NULL, caller_run, &c), 0);
    call = take_held(f);
    assert_non_null(call);
    rpc_server_stop(f->srv);
    pthread_join(t, NULL);
    assert_int_not_equal(c.r, 0);
    assert_true(rpc_call_cancelled(call));
    f->held = call; /* teardown finishes it after rpc_server_free() */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rpc_async_finish_from_other_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_async_finish_inside_handler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_async_error_status_and_oversized, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_async_client_gone_late_finish, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_async_server_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_server_deadline_incomplete_request, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rpc_async_server_stops_with_call_owed, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for src/rpc/rpc.c: our C client against our C server over a temporary unix
 * socket — unary calls, deadlines, statuses with messages, streams sent from other threads,
 * cancellation, stop with open streams, many connects (fd and stream counts come back).
 * The independent peer (Python grpcio) is tests/integration/test_rpc_interop.py. */
#include <dirent.h>
#include <malloc.h>
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
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/base.h"
#include "rpc/rpc.h"

#define WAIT_MS 10000
#define MAX_STREAMS 8

#define M_ECHO "/test.Svc/Echo"
#define M_FAIL "/test.Svc/Fail"
#define M_ERRNO "/test.Svc/Errno"
#define M_BLOCK "/test.Svc/Block"
#define M_BIG "/test.Svc/Big"
#define M_WATCH "/test.Svc/Watch"
#define M_REFUSE "/test.Svc/Refuse"

struct fixture {
    char dir[64];
    char sock[128];
    struct rpc_server *srv;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct rpc_stream *streams[MAX_STREAMS]; /* handler references, by open order */
    size_t n_opened;
    size_t n_closed;
    size_t n_cancelled;
    size_t n_bad_closed; /* closed callbacks that could still send */
    bool block_release;  /* M_BLOCK waits for this */
    bool blocked;        /* M_BLOCK is waiting */
};

/* ---- handlers ---- */

static int h_echo(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                  struct rpc_status *st)
{
    return strbuf_append(resp, (const char *)req, len);
}

static int h_fail(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                  struct rpc_status *st)
{
    rpc_status_set(st, RPC_INVALID_ARGUMENT, "unknown device \"%.*s\"", (int)len,
                   (const char *)req);
    return -EINVAL;
}

static int h_errno(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                   struct rpc_status *st)
{
    return -EIO;
}

static int h_block(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                   struct rpc_status *st)
{
    struct fixture *f = ctx;

    pthread_mutex_lock(&f->lock);
    f->blocked = true;
    pthread_cond_broadcast(&f->cond);
    while (!f->block_release)
        pthread_cond_wait(&f->cond, &f->lock);
    pthread_mutex_unlock(&f->lock);
    return 0;
}

static int h_big(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                 struct rpc_status *st)
{
    static const char chunk[4096];
    int r = 0;

    while (r == 0)
        r = strbuf_append(resp, chunk, sizeof(chunk));
    return r;
}

static int h_watch_open(void *ctx, const uint8_t *req, size_t len, struct rpc_stream *stream,
                        struct rpc_status *st)
{
    struct fixture *f = ctx;
    int r;

    r = rpc_stream_send(stream, (const uint8_t *)"first", 5);
    if (r < 0)
        return r;
    pthread_mutex_lock(&f->lock);
    if (f->n_opened < MAX_STREAMS)
        f->streams[f->n_opened] = stream;
    else
        rpc_stream_unref(stream); /* many-connects test: we only count */
    f->n_opened++;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    return 0;
}

static void h_watch_closed(void *ctx, struct rpc_stream *stream, bool peer_cancelled)
{
    struct fixture *f = ctx;

    /* cmocka asserts belong to the test thread: record, check there. */
    bool bad =
        rpc_stream_is_open(stream) || rpc_stream_send(stream, (const uint8_t *)"x", 1) != -EPIPE;

    pthread_mutex_lock(&f->lock);
    if (bad)
        f->n_bad_closed++;
    f->n_closed++;
    if (peer_cancelled)
        f->n_cancelled++;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

static int h_refuse_open(void *ctx, const uint8_t *req, size_t len, struct rpc_stream *stream,
                         struct rpc_status *st)
{
    rpc_status_set(st, RPC_FAILED_PRECONDITION, "not ready");
    return 0;
}

/* ---- fixture ---- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct error err = {0};

    assert_non_null(f);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    str_copy(f->dir, "/tmp/gs-rpc-XXXXXX", sizeof(f->dir));
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->sock, sizeof(f->sock), "%s/plugin.sock", f->dir);
    assert_int_equal(rpc_server_new(f->sock, &f->srv, &err), 0);
    assert_int_equal(rpc_server_add_unary(f->srv, M_ECHO, h_echo, f, &err), 0);
    assert_int_equal(rpc_server_add_unary(f->srv, M_FAIL, h_fail, f, &err), 0);
    assert_int_equal(rpc_server_add_unary(f->srv, M_ERRNO, h_errno, f, &err), 0);
    assert_int_equal(rpc_server_add_unary(f->srv, M_BLOCK, h_block, f, &err), 0);
    assert_int_equal(rpc_server_add_unary(f->srv, M_BIG, h_big, f, &err), 0);
    assert_int_equal(rpc_server_add_stream(f->srv, M_WATCH, h_watch_open, h_watch_closed, f, &err),
                     0);
    assert_int_equal(rpc_server_add_stream(f->srv, M_REFUSE, h_refuse_open, NULL, f, &err), 0);
    assert_int_equal(rpc_server_start(f->srv, &err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    pthread_mutex_lock(&f->lock);
    f->block_release = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    rpc_server_free(f->srv);
    assert_int_equal(f->n_bad_closed, 0);
    for (size_t i = 0; i < f->n_opened && i < MAX_STREAMS; i++)
        rpc_stream_unref(f->streams[i]);
    unlink(f->sock);
    rmdir(f->dir);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f);
    return 0;
}

/* Waits until *counter >= want (under f->lock); false after WAIT_MS. */
static bool wait_count(struct fixture *f, const size_t *counter, size_t want)
{
    uint64_t end = time_now_ms() + WAIT_MS;
    struct timespec ts;
    bool ok;

    pthread_mutex_lock(&f->lock);
    while (*counter < want && time_now_ms() < end) {
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&f->cond, &f->lock, &ts);
    }
    ok = *counter >= want;
    pthread_mutex_unlock(&f->lock);
    return ok;
}

static size_t count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    size_t n = 0;

    assert_non_null(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ---- unary ---- */

static void test_rpc_client_unary_echo(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *c = NULL;
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    static const struct {
        const char *req;
        size_t len;
    } cases[] = {
        {"hello", 5},
        {"", 0},
        {"\0\x01\xff binary \0", 12},
    };

    assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        uint8_t *resp = NULL;
        size_t len = 99;

        assert_int_equal(rpc_client_unary(c, M_ECHO, (const uint8_t *)cases[i].req, cases[i].len,
                                          5000, &resp, &len, &st, &err),
                         0);
        assert_int_equal(st.code, RPC_OK);
        assert_int_equal(len, cases[i].len);
        assert_non_null(resp);
        assert_memory_equal(resp, cases[i].req, len);
        free(resp);
    }
    rpc_client_free(c);
}

/* nghttp2 kept every closed stream of a connection for HTTP/2 priorities: the heap grew by
 * ~280 bytes per call on a kept connection (28 MiB after 100,000 Allocates in
 * bench_daemon). The heap in use stays flat now. (Under ASan mallinfo2 reads 0: vacuous.) */
static void test_rpc_client_unary_kept_connection_memory_flat(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *c = NULL;
    struct error err = {0};
    size_t before = 0;
    enum { WARM = 500, N = 5000 };

    assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
    for (int i = 0; i < WARM + N; i++) {
        uint8_t *resp = NULL;
        size_t len = 0;

        if (i == WARM)
            before = mallinfo2().uordblks;
        assert_int_equal(
            rpc_client_unary(c, M_ECHO, (const uint8_t *)"x", 1, 5000, &resp, &len, NULL, &err), 0);
        free(resp);
    }
    /* both ends are in this process: 5,000 calls x 2 x 280 bytes would be 2.8 MB */
    assert_true(mallinfo2().uordblks < before + 256 * 1024);
    rpc_client_free(c);
}

static void test_rpc_client_call_one_shot(void **state)
{
    struct fixture *f = *state;
    uint8_t *resp = NULL;
    size_t len = 0;
    struct error err = {0};

    assert_int_equal(
        rpc_client_call(f->sock, M_ECHO, (const uint8_t *)"abc", 3, 5000, &resp, &len, NULL, &err),
        0);
    assert_int_equal(len, 3);
    assert_memory_equal(resp, "abc", 3);
    free(resp);
}

static void test_rpc_client_unary_error_statuses(void **state)
{
    struct fixture *f = *state;
    static const struct {
        const char *method;
        int ret;
        int code;
        const char *message;
    } cases[] = {
        {M_FAIL, -EREMOTEIO, RPC_INVALID_ARGUMENT, "unknown device \"GPU-x\""},
        {M_ERRNO, -EREMOTEIO, RPC_UNKNOWN, "Input/output error"},
        {"/test.Svc/Nope", -EREMOTEIO, RPC_UNIMPLEMENTED, "unknown method /test.Svc/Nope"},
        {M_BIG, -EREMOTEIO, RPC_RESOURCE_EXHAUSTED, "response larger than 4194304 bytes"},
    };
    struct rpc_client *c = NULL;
    struct error err = {0};

    assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct rpc_status st = {-1, ""};
        uint8_t *resp = (uint8_t *)"untouched";

        assert_int_equal(rpc_client_unary(c, cases[i].method, (const uint8_t *)"GPU-x", 5, 5000,
                                          &resp, &(size_t){0}, &st, &err),
                         cases[i].ret);
        assert_int_equal(st.code, cases[i].code);
        assert_string_equal(st.message, cases[i].message);
        assert_string_equal((char *)resp, "untouched");
        assert_non_null(strstr(err.msg, "rpc error: code = "));
        assert_non_null(strstr(err.msg, cases[i].message));
    }
    rpc_client_free(c);
}

static void test_rpc_client_unary_request_too_large(void **state)
{
    struct fixture *f = *state;
    size_t len = RPC_MAX_MESSAGE_BYTES + 1;
    uint8_t *req = calloc(1, len);
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    uint8_t *resp = NULL;
    size_t resp_len = 0;

    assert_non_null(req);
    assert_int_equal(rpc_client_call(f->sock, M_ECHO, req, len, 5000, &resp, &resp_len, &st, &err),
                     -EREMOTEIO);
    assert_int_equal(st.code, RPC_RESOURCE_EXHAUSTED);
    free(req);
    /* The server is still serving. */
    assert_int_equal(rpc_client_call(f->sock, M_ECHO, (const uint8_t *)"ok", 2, 5000, &resp,
                                     &resp_len, &st, &err),
                     0);
    free(resp);
}

static void test_rpc_client_unary_deadline(void **state)
{
    struct fixture *f = *state;
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    uint8_t *resp = NULL;
    size_t len = 0;
    uint64_t t0 = time_now_ms();

    assert_int_equal(rpc_client_call(f->sock, M_BLOCK, NULL, 0, 200, &resp, &len, &st, &err),
                     -ETIMEDOUT);
    assert_int_equal(st.code, RPC_DEADLINE_EXCEEDED);
    assert_true(time_now_ms() - t0 < 5000);
    pthread_mutex_lock(&f->lock);
    assert_true(f->blocked);
    f->block_release = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    /* The handler finishes into a cancelled call; the server goes on serving. */
    assert_int_equal(
        rpc_client_call(f->sock, M_ECHO, (const uint8_t *)"x", 1, 5000, &resp, &len, &st, &err), 0);
    free(resp);
}

static void test_rpc_client_unary_no_server(void **state)
{
    struct fixture *f = *state;
    char path[160];
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    uint8_t *resp = NULL;
    size_t len = 0;

    snprintf(path, sizeof(path), "%s/absent.sock", f->dir);
    assert_int_equal(rpc_client_call(path, M_ECHO, NULL, 0, 2000, &resp, &len, &st, &err),
                     -ECONNREFUSED);
    assert_int_equal(st.code, RPC_UNAVAILABLE);
    assert_non_null(strstr(err.msg, "absent.sock"));
}

static void test_rpc_client_unary_path_authority(void **state)
{
    struct fixture *f = *state;
    struct rpc_client_opts opts = {.authority = f->sock}; /* what kubelet <= 1.25 sends */
    struct rpc_client *c = NULL;
    struct error err = {0};
    uint8_t *resp = NULL;
    size_t len = 0;

    assert_int_equal(rpc_client_new(f->sock, &opts, &c, &err), 0);
    assert_int_equal(
        rpc_client_unary(c, M_ECHO, (const uint8_t *)"p", 1, 5000, &resp, &len, NULL, &err), 0);
    assert_int_equal(len, 1);
    free(resp);
    rpc_client_free(c);
}

/* ---- server setup ---- */

static void test_rpc_server_start_socket_mode_and_stale(void **state)
{
    struct fixture *f = *state;
    struct rpc_server *srv = NULL;
    struct error err = {0};
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char path[160], file[160];
    struct stat st;
    int fd;

    assert_int_equal(stat(f->sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);

    /* A stale socket (bound, nobody listening) is replaced. */
    snprintf(path, sizeof(path), "%s/stale.sock", f->dir);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    str_copy(sa.sun_path, path, sizeof(sa.sun_path));
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    assert_int_equal(rpc_server_new(path, &srv, &err), 0);
    assert_int_equal(rpc_server_start(srv, &err), 0);
    assert_true(rpc_server_socket_is_ours(srv));
    rpc_server_stop(srv);
    assert_false(path_exists(path));
    rpc_server_free(srv);

    /* A file put in place of our socket: noticed, and not deleted when we stop. */
    assert_int_equal(rpc_server_new(path, &srv, &err), 0);
    assert_int_equal(rpc_server_start(srv, &err), 0);
    snprintf(file, sizeof(file), "%s/intruder", f->dir);
    assert_int_equal(file_write_atomic(file, "x", 1, 0644, NULL), 0);
    assert_int_equal(rename(file, path), 0);
    assert_false(rpc_server_socket_is_ours(srv));
    rpc_server_stop(srv);
    assert_true(path_exists(path));
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0644); /* and its mode untouched */
    rpc_server_free(srv);
    unlink(path);

    /* A regular file is not ours to delete. */
    snprintf(file, sizeof(file), "%s/file.sock", f->dir);
    assert_int_equal(file_write_atomic(file, "x", 1, 0600, NULL), 0);
    assert_int_equal(rpc_server_new(file, &srv, &err), 0);
    assert_int_equal(rpc_server_start(srv, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "not a socket"));
    rpc_server_free(srv);
    assert_true(path_exists(file));
    unlink(file);
}

/* A peer that opens connections and never speaks: the server keeps a bounded number (256)
 * and closes the rest at once, and serves again once they are gone. */
static void test_rpc_server_connections_bounded(void **state)
{
    struct fixture *f = *state;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    enum { N = 266 };
    int fds[N];
    size_t n_closed = 0;
    uint8_t *resp = NULL;
    size_t len = 0;
    struct error err = {0};
    int r = -1;

    str_copy(sa.sun_path, f->sock, sizeof(sa.sun_path));
    for (int i = 0; i < N; i++) {
        fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
    }
    /* an accepted connection gets the server's SETTINGS; a refused one only EOF */
    for (int i = 0; i < N; i++) {
        char buf[64];
        struct pollfd p = {.fd = fds[i], .events = POLLIN};

        assert_int_equal(poll(&p, 1, WAIT_MS), 1);
        if (read(fds[i], buf, sizeof(buf)) == 0)
            n_closed++;
    }
    assert_true(n_closed >= N - 256);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    /* served again once the server has seen those connections go (a call made before that
     * is refused like the extra connections were) */
    for (uint64_t end = time_now_ms() + WAIT_MS; time_now_ms() < end;) {
        r = rpc_client_call(f->sock, M_ECHO, (const uint8_t *)"ok", 2, 5000, &resp, &len, NULL,
                            &err);
        if (r == 0)
            break;
        poll(NULL, 0, 10);
    }
    assert_int_equal(r, 0);
    free(resp);
}

static void test_rpc_server_new_bad_input(void **state)
{
    struct fixture *f = *state;
    struct rpc_server *srv = NULL;
    struct error err = {0};
    char longp[200];

    memset(longp, 'a', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    assert_int_equal(rpc_server_new(longp, &srv, &err), -ENAMETOOLONG);
    assert_int_equal(rpc_server_new("", &srv, &err), -EINVAL);
    assert_int_equal(rpc_server_add_unary(f->srv, "/late", h_echo, NULL, &err), -EBUSY);

    assert_int_equal(rpc_server_new("/nonexistent-dir/x.sock", &srv, &err), 0);
    assert_int_equal(rpc_server_add_unary(srv, "/a.B/C", h_echo, NULL, &err), 0);
    assert_int_equal(rpc_server_add_unary(srv, "/a.B/C", h_echo, NULL, &err), -EEXIST);
    assert_int_equal(rpc_server_add_unary(srv, "noslash", h_echo, NULL, &err), -EINVAL);
    assert_int_equal(rpc_server_start(srv, &err), -EADDRNOTAVAIL);
    rpc_server_free(srv);
    rpc_server_free(NULL);
}

/* ---- streams ---- */

struct sender {
    struct rpc_stream *stream;
    int n;
};

static void *send_thread(void *arg)
{
    struct sender *s = arg;
    char msg[32];

    for (int i = 0; i < s->n; i++) {
        int len = snprintf(msg, sizeof(msg), "update %d", i);
        if (rpc_stream_send(s->stream, (const uint8_t *)msg, (size_t)len) < 0)
            return (void *)1;
    }
    return NULL;
}

static int next_str(struct rpc_client_stream *cs, char *buf, size_t size, struct rpc_status *st,
                    struct error *err)
{
    uint8_t *msg = NULL;
    size_t len = 0;
    int r = rpc_client_stream_next(cs, WAIT_MS, &msg, &len, st, err);

    if (r == 1) {
        snprintf(buf, size, "%.*s", (int)len, (const char *)msg);
        free(msg);
    }
    return r;
}

static void test_rpc_stream_send_from_thread_then_finish(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *c = NULL;
    struct rpc_client_stream *cs = NULL;
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    struct sender snd;
    pthread_t t;
    void *tr;
    char buf[64];

    assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
    assert_int_equal(rpc_client_stream_open(c, M_WATCH, NULL, 0, &cs, &err), 0);
    assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), 1);
    assert_string_equal(buf, "first");
    assert_true(wait_count(f, &f->n_opened, 1));
    assert_int_equal(rpc_server_n_streams(f->srv), 1);

    snd = (struct sender){f->streams[0], 50};
    assert_int_equal(pthread_create(&t, NULL, send_thread, &snd), 0);
    pthread_join(t, &tr);
    assert_null(tr);
    for (int i = 0; i < 50; i++) {
        char want[32];

        snprintf(want, sizeof(want), "update %d", i);
        assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), 1);
        assert_string_equal(buf, want);
    }
    /* Nothing more yet: the wait times out and the stream stays usable. */
    assert_int_equal(rpc_client_stream_next(cs, 50, &(uint8_t *){NULL}, &(size_t){0}, &st, &err),
                     -ETIMEDOUT);
    assert_int_equal(rpc_stream_send(f->streams[0], (const uint8_t *)"late", 4), 0);
    assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), 1);
    assert_string_equal(buf, "late");

    assert_int_equal(rpc_stream_finish(f->streams[0], NULL), 0);
    assert_int_equal(rpc_stream_finish(f->streams[0], NULL), -EPIPE);
    assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), 0);
    assert_int_equal(st.code, RPC_OK);
    assert_true(wait_count(f, &f->n_closed, 1));
    assert_int_equal(f->n_cancelled, 0);
    assert_int_equal(rpc_server_n_streams(f->srv), 0);
    rpc_client_stream_close(cs);
    rpc_client_free(c);
}

static void test_rpc_stream_finish_with_error_status(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *c = NULL;
    struct rpc_client_stream *cs = NULL;
    struct rpc_status st = {-1, ""};
    struct rpc_status fin = {RPC_ABORTED, "resource renamed"};
    struct error err = {0};
    char buf[64];

    assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
    assert_int_equal(rpc_client_stream_open(c, M_WATCH, NULL, 0, &cs, &err), 0);
    assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), 1);
    assert_true(wait_count(f, &f->n_opened, 1));
    assert_int_equal(rpc_stream_send(f->streams[0], (const uint8_t *)"last", 4), 0);
    assert_int_equal(rpc_stream_finish(f->streams[0], &fin), 0);
    assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), 1);
    assert_string_equal(buf, "last");
    assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), -EREMOTEIO);
    assert_int_equal(st.code, RPC_ABORTED);
    assert_string_equal(st.message, "resource renamed");
    assert_int_equal(rpc_client_stream_next(cs, 10, &(uint8_t *){NULL}, &(size_t){0}, &st, &err),
                     -EPIPE);
    rpc_client_stream_close(cs);
    rpc_client_free(c);
}

static void test_rpc_stream_refused_by_open(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *c = NULL;
    struct rpc_client_stream *cs = NULL;
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    char buf[16];

    assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
    assert_int_equal(rpc_client_stream_open(c, M_REFUSE, NULL, 0, &cs, &err), 0);
    assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), -EREMOTEIO);
    assert_int_equal(st.code, RPC_FAILED_PRECONDITION);
    assert_string_equal(st.message, "not ready");
    assert_int_equal(rpc_server_n_streams(f->srv), 0);
    rpc_client_stream_close(cs);
    rpc_client_free(c);
}

static void test_rpc_stream_client_cancel_mid_stream(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *c = NULL;
    struct rpc_client_stream *cs = NULL;
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    char buf[16];

    assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
    assert_int_equal(rpc_client_stream_open(c, M_WATCH, NULL, 0, &cs, &err), 0);
    assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), 1);
    assert_true(wait_count(f, &f->n_opened, 1));
    /* Unread messages in flight when the client goes away. */
    for (int i = 0; i < 20; i++)
        assert_int_equal(rpc_stream_send(f->streams[0], (const uint8_t *)"pending", 7), 0);
    rpc_client_stream_close(cs);
    assert_true(wait_count(f, &f->n_closed, 1));
    assert_int_equal(f->n_cancelled, 1);
    assert_false(rpc_stream_is_open(f->streams[0]));
    assert_int_equal(rpc_stream_send(f->streams[0], (const uint8_t *)"x", 1), -EPIPE);
    assert_int_equal(rpc_stream_send(f->streams[0], NULL, RPC_MAX_MESSAGE_BYTES + 1), -EMSGSIZE);
    assert_int_equal(rpc_server_n_streams(f->srv), 0);
    rpc_client_free(c);
}

static void test_rpc_stream_send_slow_client_bounded(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *c = NULL;
    struct rpc_client_stream *cs = NULL;
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    uint8_t *msg = calloc(1, 32 * 1024);
    char buf[16];
    int r = 0;
    int i;

    assert_non_null(msg);
    assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
    assert_int_equal(rpc_client_stream_open(c, M_WATCH, NULL, 0, &cs, &err), 0);
    assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), 1);
    assert_true(wait_count(f, &f->n_opened, 1));
    /* The client reads nothing more: flow control stops the sends and the queue fills up to
     * its message bound instead of growing (256 x 32 KiB here, under the 16 MiB byte bound
     * that test_rpc_limits checks). */
    for (i = 0; i < 4096 && r == 0; i++)
        r = rpc_stream_send(f->streams[0], msg, 32 * 1024);
    assert_int_equal(r, -ENOBUFS);
    assert_true(i > RPC_STREAM_MAX_QUEUED);
    free(msg);
    rpc_client_stream_close(cs);
    assert_true(wait_count(f, &f->n_closed, 1));
    assert_int_equal(f->n_cancelled, 1);
    rpc_client_free(c);
}

static void test_rpc_server_stop_with_open_streams(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *c = NULL;
    struct rpc_client_stream *cs[3] = {NULL};
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    char buf[16];

    assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
    for (size_t i = 0; i < GS_ARRAY_SIZE(cs); i++) {
        assert_int_equal(rpc_client_stream_open(c, M_WATCH, NULL, 0, &cs[i], &err), 0);
        assert_int_equal(next_str(cs[i], buf, sizeof(buf), &st, &err), 1);
    }
    assert_true(wait_count(f, &f->n_opened, 3));
    rpc_server_stop(f->srv);
    assert_int_equal(f->n_closed, 3);
    assert_int_equal(rpc_server_n_streams(f->srv), 0);
    assert_false(path_exists(f->sock));
    for (size_t i = 0; i < GS_ARRAY_SIZE(cs); i++) {
        int r = next_str(cs[i], buf, sizeof(buf), &st, &err);

        assert_true(r < 0);
        assert_int_equal(st.code, RPC_UNAVAILABLE);
        rpc_client_stream_close(cs[i]);
    }
    assert_int_equal(rpc_stream_send(f->streams[1], (const uint8_t *)"x", 1), -EPIPE);
    rpc_server_stop(f->srv); /* idempotent */
    rpc_client_free(c);
}

static void test_rpc_stream_many_connects(void **state)
{
    struct fixture *f = *state;
    struct rpc_status st = {-1, ""};
    struct error err = {0};
    size_t fds_before = 0;
    char buf[16];
    enum { N = 1000 };

    for (size_t i = 0; i < N; i++) {
        struct rpc_client *c = NULL;
        struct rpc_client_stream *cs = NULL;

        /* A fresh connection each time, like a kubelet that restarts its watch. */
        assert_int_equal(rpc_client_new(f->sock, NULL, &c, &err), 0);
        assert_int_equal(rpc_client_stream_open(c, M_WATCH, NULL, 0, &cs, &err), 0);
        if (i % 2 == 0) /* half go away before the server has answered */
            assert_int_equal(next_str(cs, buf, sizeof(buf), &st, &err), 1);
        rpc_client_stream_close(cs);
        rpc_client_free(c);
        if (i == 9) {
            assert_true(wait_count(f, &f->n_closed, f->n_opened));
            fds_before = count_fds();
        }
    }
    assert_true(wait_count(f, &f->n_opened, N / 2));
    assert_true(wait_count(f, &f->n_closed, f->n_opened));
    assert_int_equal(rpc_server_n_streams(f->srv), 0);
    /* Connections are torn down: the fd count is back where it was (with a little slack
     * for a connection gRPC is still closing). */
    assert_true(count_fds() <= fds_before + 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rpc_client_unary_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_client_unary_kept_connection_memory_flat, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rpc_client_call_one_shot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_client_unary_error_statuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_client_unary_request_too_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_client_unary_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_client_unary_no_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_client_unary_path_authority, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_server_start_socket_mode_and_stale, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rpc_server_connections_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_server_new_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_stream_send_from_thread_then_finish, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rpc_stream_finish_with_error_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_stream_refused_by_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_stream_client_cancel_mid_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_stream_send_slow_client_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_server_stop_with_open_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rpc_stream_many_connects, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

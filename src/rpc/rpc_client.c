/* SPDX-License-Identifier: Apache-2.0 */
/* rpc_client: the gRPC client over unix sockets, on nghttp2. Each rpc_client has one thread
 * that owns its connection(s) and polls them with no timeout: callers hand it calls and wait
 * on a condition variable with their own deadline. A connection is made on the first call
 * and again after it breaks or the server says GOAWAY. Never logs above debug. */
#include "rpc/rpc.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rpc/internal.h"

/* Our receive window per stream and per connection: a 4 MiB response in a few trips. */
#define RPC_CLIENT_STREAM_WINDOW_BYTES (1u << 20)
#define RPC_CLIENT_CONN_WINDOW_BYTES (16u << 20)
/* Messages a stream keeps unread before it stops granting the server window: a client that
 * stops reading holds at most this many plus one window, and the server's queue fills. */
#define RPC_CLIENT_MAX_UNREAD 16
/* A call's receive buffer above this size is freed once it holds no partial message. */
#define RPC_CLIENT_RX_KEEP_BYTES (64u * 1024u)

struct cmsg {
    struct cmsg *next;
    size_t len;
    uint8_t data[];
};

/* One call: unary, or a server stream. */
struct ccall {
    struct rpc_client *c;
    char *method;
    bool streaming;
    int timeout_ms;

    /* The client thread's own. */
    struct rpc__conn *conn;
    int32_t id;
    uint8_t *req; /* framed */
    size_t req_len, req_off;
    uint8_t *rx; /* bytes of a message still coming in */
    size_t rx_len, rx_cap;
    bool too_large;
    int http_status;
    bool have_status;
    struct rpc_status pending;   /* from grpc-status/grpc-message, published at close */
    struct ccall *cnext, *cprev; /* the connection's calls */
    struct ccall *snext;         /* c->submit */

    /* Under c->lock. */
    int refs;
    bool done;         /* the status is known */
    bool cancel;       /* the caller gave up: reset it */
    bool ended;        /* the caller saw the end (stream_next returned it) */
    size_t unconsumed; /* bytes received but not yet given back as window */
    struct rpc_status st;
    struct cmsg *head, *tail;
    size_t n_msgs;
};

struct rpc_client {
    char *socket_path;
    char *authority;
    size_t max_recv;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *h2_opt;
    int wake_fd;
    pthread_t thread;
    bool thread_started;
    struct rpc__conn *conns; /* the client thread's own */

    pthread_mutex_t lock;
    pthread_cond_t cond; /* any call's state changed */
    bool quit;
    bool work;            /* a call wants a cancel or a window update */
    struct ccall *submit; /* calls waiting for the thread */
};

struct rpc_client_stream {
    struct ccall *call;
};

/* ---- calls --------------------------------------------------------------------------------- */

static void ccall_unref(struct ccall *k)
{
    struct rpc_client *c = k->c;
    int refs;

    pthread_mutex_lock(&c->lock);
    refs = --k->refs;
    pthread_mutex_unlock(&c->lock);
    if (refs > 0)
        return;
    while (k->head) {
        struct cmsg *m = k->head;

        k->head = m->next;
        free(m);
    }
    free(k->method);
    free(k->req);
    free(k->rx);
    free(k);
}

/* Publishes the end of a call (first status wins). Client thread. */
static void ccall_finish(struct ccall *k, int code, const char *msg)
{
    struct rpc_client *c = k->c;

    pthread_mutex_lock(&c->lock);
    if (!k->done) {
        k->done = true;
        k->st.code = code;
        snprintf(k->st.message, sizeof(k->st.message), "%s", msg ? msg : "");
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Takes the call off its connection and drops the thread's reference. */
static void ccall_detach(struct ccall *k)
{
    struct rpc__conn *conn = k->conn;

    if (conn)
        nghttp2_session_set_stream_user_data(conn->h2, k->id, NULL);
    if (k->cprev)
        k->cprev->cnext = k->cnext;
    else if (conn)
        conn->calls = k->cnext;
    if (k->cnext)
        k->cnext->cprev = k->cprev;
    k->cnext = k->cprev = NULL;
    k->conn = NULL;
    ccall_unref(k);
}

/* A whole message arrived: queue it for the caller. Client thread. */
static int ccall_deliver(struct ccall *k, const uint8_t *data, size_t len)
{
    struct rpc_client *c = k->c;
    struct cmsg *m = malloc(sizeof(*m) + len);

    if (!m)
        return -ENOMEM;
    m->next = NULL;
    m->len = len;
    if (len)
        memcpy(m->data, data, len);
    pthread_mutex_lock(&c->lock);
    if (k->tail)
        k->tail->next = m;
    else
        k->head = m;
    k->tail = m;
    k->n_msgs++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* ---- HTTP/2 callbacks (client thread) ------------------------------------------------------ */

static struct ccall *call_of(nghttp2_session *h2, int32_t id)
{
    return nghttp2_session_get_stream_user_data(h2, id);
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    struct ccall *k = call_of(h2, frame->hd.stream_id);

    (void)flags, (void)user;
    if (!k || frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        k->http_status = 0;
        for (size_t i = 0; i < valuelen && value[i] >= '0' && value[i] <= '9'; i++)
            k->http_status = k->http_status * 10 + (value[i] - '0');
    } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        int code = rpc__parse_status(value, valuelen);

        k->have_status = true;
        k->pending.code = code < 0 ? RPC_UNKNOWN : code;
    } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
        rpc__percent_decode(value, valuelen, k->pending.message, sizeof(k->pending.message));
    }
    return 0;
}

/* Gives window back for bytes the caller has taken (or that need no caller). */
static void ccall_grant(struct ccall *k, nghttp2_session *h2, size_t len)
{
    struct rpc_client *c = k->c;
    bool now;

    pthread_mutex_lock(&c->lock);
    now = !k->streaming || k->n_msgs < RPC_CLIENT_MAX_UNREAD;
    if (!now)
        k->unconsumed += len;
    pthread_mutex_unlock(&c->lock);
    if (now)
        nghttp2_session_consume_stream(h2, k->id, len);
}

/* Splits the bytes received so far into messages. */
static void ccall_split(struct ccall *k, nghttp2_session *h2)
{
    size_t off = 0, want = 0;
    int r;

    for (;;) {
        r = rpc__frame_next(k->rx + off, k->rx_len - off, &want);
        if (r < 0)
            break;
        if (want > k->c->max_recv) {
            k->too_large = true;
            k->have_status = true;
            rpc_status_set(&k->pending, RPC_RESOURCE_EXHAUSTED,
                           "grpc: received message larger than max (%zu vs. %zu)", want,
                           k->c->max_recv);
            nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, k->id, NGHTTP2_CANCEL);
            break;
        }
        if (r == 0)
            break;
        if (ccall_deliver(k, k->rx + off + RPC__FRAME_HDR, want) < 0)
            r = -ENOMEM;
        off += RPC__FRAME_HDR + want;
        if (r < 0)
            break;
    }
    if (r < 0 && !k->too_large) {
        k->too_large = true; /* nothing more is read from this stream */
        k->have_status = true;
        rpc_status_set(&k->pending, RPC_INTERNAL,
                       r == -ENOMEM ? "out of memory" : "compressed message without encoding");
        nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, k->id, NGHTTP2_CANCEL);
    }
    memmove(k->rx, k->rx + off, k->rx_len - off);
    k->rx_len -= off;
    if (k->rx_len == 0 && k->rx_cap > RPC_CLIENT_RX_KEEP_BYTES) {
        /* a large message went through: a long stream does not keep its buffer */
        free(k->rx);
        k->rx = NULL;
        k->rx_cap = 0;
    }
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    struct ccall *k = call_of(h2, id);

    (void)flags, (void)user;
    nghttp2_session_consume_connection(h2, len);
    if (!k || k->too_large)
        return 0;
    if (k->rx_len + len > k->rx_cap) {
        size_t cap = k->rx_cap ? k->rx_cap : 256;
        uint8_t *rx;

        while (cap < k->rx_len + len)
            cap *= 2;
        rx = realloc(k->rx, cap);
        if (!rx)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        k->rx = rx;
        k->rx_cap = cap;
    }
    memcpy(k->rx + k->rx_len, data, len);
    k->rx_len += len;
    ccall_split(k, h2);
    ccall_grant(k, h2, len);
    return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
    struct rpc__conn *conn = user;

    (void)h2;
    if (frame->hd.type == NGHTTP2_GOAWAY)
        conn->goaway = true; /* new calls go to a new connection */
    return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *user)
{
    struct ccall *k = call_of(h2, id);
    char msg[96];

    (void)user;
    if (!k)
        return 0;
    if (k->have_status) {
        ccall_finish(k, k->pending.code, k->pending.message);
    } else if (k->http_status != 0 && k->http_status != 200) {
        snprintf(msg, sizeof(msg), "unexpected HTTP status code %d", k->http_status);
        ccall_finish(k, rpc__code_from_http(k->http_status), msg);
    } else if (error_code == NGHTTP2_REFUSED_STREAM) {
        ccall_finish(k, RPC_UNAVAILABLE, "the server refused the stream (it is going away)");
    } else if (error_code == NGHTTP2_CANCEL) {
        ccall_finish(k, RPC_CANCELLED, "the stream was cancelled");
    } else {
        snprintf(msg, sizeof(msg), "the stream ended without a status (HTTP/2 error %u)",
                 error_code);
        ccall_finish(k, RPC_INTERNAL, msg);
    }
    ccall_detach(k);
    return 0;
}

/* The request body: the one framed message, then END_STREAM. */
static ssize_t req_read(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct ccall *k = src->ptr;
    size_t n = k->req_len - k->req_off;

    (void)h2, (void)id, (void)user;
    if (n > length)
        n = length;
    memcpy(buf, k->req + k->req_off, n);
    k->req_off += n;
    if (k->req_off == k->req_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- connections (client thread) ----------------------------------------------------------- */

static int client_callbacks(struct rpc_client *c)
{
    nghttp2_session_callbacks *cbs = NULL;

    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    c->cbs = cbs;
    if (nghttp2_option_new(&c->h2_opt) != 0)
        return -ENOMEM;
    /* window is given back as the caller reads (ccall_grant): a slow reader is felt by
     * the server's flow control, not by our memory */
    nghttp2_option_set_no_auto_window_update(c->h2_opt, 1);
    /* closed streams are not kept for priorities: they would grow with every call */
    nghttp2_option_set_no_closed_streams(c->h2_opt, 1);
    return 0;
}

static int client_connect(struct rpc_client *c, struct rpc__conn **ret, char *why, size_t why_size)
{
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, RPC_CLIENT_STREAM_WINDOW_BYTES},
    };
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct rpc__conn *conn = calloc(1, sizeof(*conn));
    /* non-blocking from the start: a server whose accept backlog is full (alive, not
     * accepting) makes connect() fail with EAGAIN at once instead of holding this thread,
     * and with it every call's deadline and rpc_client_free(), for ever (issue 29) */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    if (!conn || fd < 0) {
        snprintf(why, why_size, "cannot create a socket: %s", strerror(conn ? errno : ENOMEM));
        goto fail;
    }
    memcpy(sa.sun_path, c->socket_path, strlen(c->socket_path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        snprintf(why, why_size, "connection error: dial unix %s: connect: %s%s", c->socket_path,
                 strerror(errno),
                 errno == EAGAIN ? " (the server is not accepting connections)" : "");
        goto fail;
    }
    if (nghttp2_session_client_new2(&conn->h2, c->cbs, conn, c->h2_opt) != 0 ||
        nghttp2_submit_settings(conn->h2, NGHTTP2_FLAG_NONE, settings, GS_ARRAY_SIZE(settings)) !=
            0 ||
        nghttp2_session_set_local_window_size(conn->h2, NGHTTP2_FLAG_NONE, 0,
                                              RPC_CLIENT_CONN_WINDOW_BYTES) != 0) {
        snprintf(why, why_size, "cannot set up the HTTP/2 session");
        goto fail;
    }
    conn->fd = fd;
    conn->owner = c;
    conn->next = c->conns;
    c->conns = conn;
    *ret = conn;
    return 0;
fail:
    if (conn)
        conn->fd = -1;
    rpc__conn_free(conn);
    if (fd >= 0)
        close(fd);
    return -ECONNREFUSED;
}

/* The connection new calls go on: the newest that is neither broken nor going away. */
static int client_conn(struct rpc_client *c, struct rpc__conn **ret, char *why, size_t why_size)
{
    for (struct rpc__conn *conn = c->conns; conn; conn = conn->next) {
        if (!conn->dead && !conn->goaway) {
            *ret = conn;
            return 0;
        }
    }
    return client_connect(c, ret, why, why_size);
}

/* Sends the call's request on a connection. Client thread. */
static void client_start_call(struct rpc_client *c, struct ccall *k)
{
    char timeout[16], why[RPC_STATUS_MSG_MAX];
    nghttp2_nv nv[7] = {
        RPC__NV(":method", "POST"),
        RPC__NV(":scheme", "http"),
        RPC__NV(":path", k->method),
        RPC__NV(":authority", c->authority),
        RPC__NV("content-type", "application/grpc"),
        RPC__NV("te", "trailers"),
    };
    size_t n = 6;
    nghttp2_data_provider prd = {.source.ptr = k, .read_callback = req_read};
    struct rpc__conn *conn = NULL;
    int32_t id = -1;

    if (k->timeout_ms > 0) {
        rpc__timeout_value(k->timeout_ms, timeout, sizeof(timeout));
        nv[n++] = (nghttp2_nv)RPC__NV("grpc-timeout", timeout);
    }
    for (int attempt = 0; attempt < 2 && id < 0; attempt++) {
        if (client_conn(c, &conn, why, sizeof(why)) < 0) {
            ccall_finish(k, RPC_UNAVAILABLE, why);
            ccall_unref(k);
            return;
        }
        id = nghttp2_submit_request(conn->h2, NULL, nv, n, &prd, k);
        if (id < 0)
            conn->goaway = true; /* out of stream IDs, or going away: use a new one */
    }
    if (id < 0) {
        ccall_finish(k, RPC_INTERNAL, "cannot start an HTTP/2 stream");
        ccall_unref(k);
        return;
    }
    k->id = id;
    k->conn = conn;
    k->cnext = conn->calls;
    if (k->cnext)
        ((struct ccall *)k->cnext)->cprev = k;
    conn->calls = k;
}

/* Closes a connection; calls still on it fail as UNAVAILABLE. */
static void client_conn_close(struct rpc_client *c, struct rpc__conn *conn)
{
    char msg[RPC_STATUS_MSG_MAX];

    snprintf(msg, sizeof(msg), "connection to '%s' closed", c->socket_path);
    while (conn->calls) {
        struct ccall *k = conn->calls;

        ccall_finish(k, RPC_UNAVAILABLE, msg);
        ccall_detach(k);
    }
    rpc__conn_remove(&c->conns, conn);
}

/* Cancels and window updates the callers asked for. Client thread. */
static void client_apply_requests(struct rpc_client *c)
{
    for (struct rpc__conn *conn = c->conns; conn; conn = conn->next) {
        for (struct ccall *k = conn->calls; k; k = k->cnext) {
            bool cancel;
            size_t grant = 0;

            pthread_mutex_lock(&c->lock);
            cancel = k->cancel;
            if (!cancel && k->n_msgs < RPC_CLIENT_MAX_UNREAD) {
                grant = k->unconsumed;
                k->unconsumed = 0;
            }
            pthread_mutex_unlock(&c->lock);
            if (cancel)
                nghttp2_submit_rst_stream(conn->h2, NGHTTP2_FLAG_NONE, k->id, NGHTTP2_CANCEL);
            else if (grant)
                nghttp2_session_consume_stream(conn->h2, k->id, grant);
        }
    }
}

/* Starts new calls, applies requests, moves output, closes what is done. Returns false
 * once the client is being freed. */
static bool client_tend(struct rpc_client *c)
{
    struct ccall *submit;
    struct rpc__conn *next;
    bool quit, work;

    pthread_mutex_lock(&c->lock);
    quit = c->quit;
    work = c->work;
    c->work = false;
    submit = c->submit;
    c->submit = NULL;
    pthread_mutex_unlock(&c->lock);
    while (submit) {
        struct ccall *k = submit;
        bool cancel;

        submit = k->snext;
        pthread_mutex_lock(&c->lock);
        cancel = k->cancel || quit;
        pthread_mutex_unlock(&c->lock);
        if (cancel) {
            ccall_finish(k, RPC_CANCELLED, "the call was cancelled");
            ccall_unref(k);
            continue;
        }
        client_start_call(c, k);
    }
    if (work)
        client_apply_requests(c);
    for (struct rpc__conn *conn = c->conns; conn; conn = next) {
        next = conn->next;
        rpc__conn_flush(conn);
        if (conn->dead || rpc__conn_events(conn) == 0 || (conn->goaway && !conn->calls))
            client_conn_close(c, conn);
    }
    return !quit;
}

static void *client_thread(void *arg)
{
    struct rpc_client *c = arg;
    struct rpc__poller p = {0};

    while (client_tend(c))
        rpc__poll(&p, c->wake_fd, -1, c->conns, -1);
    while (c->conns)
        client_conn_close(c, c->conns);
    rpc__poller_release(&p);
    return NULL;
}

/* ---- the API ------------------------------------------------------------------------------- */

int rpc_client_new(const char *socket_path, const struct rpc_client_opts *opts,
                   struct rpc_client **ret, struct error *err)
{
    struct rpc_client *c = NULL;
    pthread_condattr_t ca;
    int r;

    r = rpc__check_socket_path(socket_path, err);
    if (r < 0)
        return r;
    c = calloc(1, sizeof(*c));
    if (!c)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cond, &ca);
    pthread_condattr_destroy(&ca);
    c->max_recv = opts && opts->max_recv_bytes ? opts->max_recv_bytes : RPC_MAX_MESSAGE_BYTES;
    c->wake_fd = rpc__wake_fd();
    c->socket_path = strdup(socket_path);
    c->authority = strdup(opts && opts->authority ? opts->authority : "localhost");
    if (c->wake_fd < 0 || !c->socket_path || !c->authority || client_callbacks(c) < 0) {
        r = error_set(err, -ENOMEM, "cannot set up a client for '%s'", socket_path);
        goto out;
    }
    r = pthread_create(&c->thread, NULL, client_thread, c);
    if (r != 0) {
        r = error_set(err, -r, "cannot start client thread: %s", strerror(r));
        goto out;
    }
    pthread_setname_np(c->thread, "gs-rpc-client");
    c->thread_started = true;
    *ret = c;
    c = NULL;
    r = 0;
out:
    rpc_client_free(c);
    return r;
}

void rpc_client_free(struct rpc_client *c)
{
    if (!c)
        return;
    if (c->thread_started) {
        pthread_mutex_lock(&c->lock);
        c->quit = true;
        pthread_mutex_unlock(&c->lock);
        rpc__wake(c->wake_fd);
        pthread_join(c->thread, NULL);
        /* calls handed over after the last turn */
        client_tend(c);
    }
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    nghttp2_session_callbacks_del(c->cbs);
    nghttp2_option_del(c->h2_opt);
    free(c->socket_path);
    free(c->authority);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static int status_to_errno(int code)
{
    switch (code) {
    case RPC_OK:
        return 0;
    case RPC_DEADLINE_EXCEEDED:
        return -ETIMEDOUT;
    case RPC_UNAVAILABLE:
        return -ECONNREFUSED;
    case RPC_CANCELLED:
        return -ECANCELED;
    default:
        return -EREMOTEIO;
    }
}

static int call_failed(const char *method, const char *socket_path, const struct rpc_status *st,
                       struct error *err)
{
    return error_set(err, status_to_errno(st->code), "%s on '%s': rpc error: code = %s desc = %s",
                     method, socket_path, rpc_code_name(st->code), st->message);
}

/* A call handed to the client thread; the caller holds one reference, the thread one. */
static struct ccall *ccall_submit(struct rpc_client *c, const char *method, const uint8_t *req,
                                  size_t len, int timeout_ms, bool streaming)
{
    struct ccall *k = calloc(1, sizeof(*k));

    if (!k)
        return NULL;
    k->c = c;
    k->streaming = streaming;
    k->timeout_ms = timeout_ms;
    k->refs = 2;
    k->method = strdup(method);
    k->req_len = RPC__FRAME_HDR + len;
    k->req = malloc(k->req_len);
    if (!k->method || !k->req) {
        free(k->method);
        free(k->req);
        free(k);
        return NULL;
    }
    rpc__frame_header(k->req, len);
    if (len)
        memcpy(k->req + RPC__FRAME_HDR, req, len);
    pthread_mutex_lock(&c->lock);
    k->snext = c->submit;
    c->submit = k;
    pthread_mutex_unlock(&c->lock);
    rpc__wake(c->wake_fd);
    return k;
}

/* Waits under c->lock until the call is done (need_done) or has a message or is done, or
 * until deadline_ms (monotonic; 0: none). False on timeout. */
static bool ccall_wait_locked(struct ccall *k, uint64_t deadline_ms, bool need_done)
{
    struct rpc_client *c = k->c;

    while (!k->done && (need_done || !k->head)) {
        struct timespec ts;
        uint64_t now = time_now_ms();

        if (deadline_ms == 0) {
            pthread_cond_wait(&c->cond, &c->lock);
            continue;
        }
        if (now >= deadline_ms)
            return false;
        time_deadline(&ts, CLOCK_MONOTONIC, (unsigned)(deadline_ms - now));
        pthread_cond_timedwait(&c->cond, &c->lock, &ts);
    }
    return true;
}

/* Takes the first message of a call. Under c->lock. */
static struct cmsg *ccall_pop_locked(struct ccall *k)
{
    struct cmsg *m = k->head;

    if (!m)
        return NULL;
    k->head = m->next;
    if (!k->head)
        k->tail = NULL;
    k->n_msgs--;
    return m;
}

/* Hands a message over as a plain buffer (owned: free()): the bytes move to its start. */
static uint8_t *cmsg_take(struct cmsg *m, size_t *ret_len)
{
    size_t len = m->len;

    memmove(m, m->data, len);
    *ret_len = len;
    return (uint8_t *)m;
}

/* The caller gives up on a call: the thread resets it if it is on the wire. */
static void ccall_cancel(struct ccall *k)
{
    struct rpc_client *c = k->c;

    pthread_mutex_lock(&c->lock);
    if (!k->done) {
        k->cancel = true;
        c->work = true;
    }
    pthread_mutex_unlock(&c->lock);
    rpc__wake(c->wake_fd);
}

static uint64_t deadline_after(int timeout_ms)
{
    return timeout_ms > 0 ? time_now_ms() + (uint64_t)timeout_ms : 0;
}

int rpc_client_unary(struct rpc_client *c, const char *method, const uint8_t *req, size_t len,
                     int timeout_ms, uint8_t **ret_resp, size_t *ret_len, struct rpc_status *st,
                     struct error *err)
{
    struct ccall *k = ccall_submit(c, method, req, len, timeout_ms, false);
    struct rpc_status status = {RPC_OK, ""};
    struct cmsg *m = NULL;
    bool in_time;

    if (!k)
        return error_set(err, -ENOMEM, "%s on '%s': out of memory", method, c->socket_path);
    pthread_mutex_lock(&c->lock);
    in_time = ccall_wait_locked(k, deadline_after(timeout_ms), true);
    if (in_time) {
        status = k->st;
        m = ccall_pop_locked(k);
    }
    pthread_mutex_unlock(&c->lock);
    if (!in_time) {
        ccall_cancel(k);
        rpc_status_set(&status, RPC_DEADLINE_EXCEEDED, "Deadline Exceeded");
    } else if (status.code == RPC_OK && !m) {
        rpc_status_set(&status, RPC_INTERNAL, "server sent no response message");
    }
    ccall_unref(k);
    if (st)
        *st = status;
    if (status.code != RPC_OK) {
        free(m);
        return call_failed(method, c->socket_path, &status, err);
    }
    *ret_resp = cmsg_take(m, ret_len);
    return 0;
}

int rpc_client_call(const char *socket_path, const char *method, const uint8_t *req, size_t len,
                    int timeout_ms, uint8_t **ret_resp, size_t *ret_len, struct rpc_status *st,
                    struct error *err)
{
    struct rpc_client *c = NULL;
    int r;

    r = rpc_client_new(socket_path, NULL, &c, err);
    if (r < 0)
        return r;
    r = rpc_client_unary(c, method, req, len, timeout_ms, ret_resp, ret_len, st, err);
    rpc_client_free(c);
    return r;
}

int rpc_client_stream_open(struct rpc_client *c, const char *method, const uint8_t *req, size_t len,
                           struct rpc_client_stream **ret, struct error *err)
{
    struct rpc_client_stream *s = calloc(1, sizeof(*s));

    if (s)
        s->call = ccall_submit(c, method, req, len, 0, true);
    if (!s || !s->call) {
        free(s);
        return error_set(err, -ENOMEM, "%s on '%s': out of memory", method, c->socket_path);
    }
    *ret = s;
    return 0;
}

int rpc_client_stream_next(struct rpc_client_stream *s, int timeout_ms, uint8_t **ret_msg,
                           size_t *ret_len, struct rpc_status *st, struct error *err)
{
    struct ccall *k = s->call;
    struct rpc_client *c = k->c;
    struct rpc_status status;
    struct cmsg *m;
    bool wake = false;

    pthread_mutex_lock(&c->lock);
    if (k->ended) {
        pthread_mutex_unlock(&c->lock);
        return error_set(err, -EPIPE, "%s on '%s': stream already ended", k->method,
                         c->socket_path);
    }
    if (!ccall_wait_locked(k, deadline_after(timeout_ms), false)) {
        pthread_mutex_unlock(&c->lock);
        return error_set(err, -ETIMEDOUT, "%s on '%s': no message within %d ms", k->method,
                         c->socket_path, timeout_ms);
    }
    m = ccall_pop_locked(k);
    if (m) {
        wake = k->unconsumed > 0 && k->n_msgs < RPC_CLIENT_MAX_UNREAD;
        c->work = c->work || wake;
    } else {
        k->ended = true;
    }
    status = k->st;
    pthread_mutex_unlock(&c->lock);
    if (wake)
        rpc__wake(c->wake_fd);
    if (m) {
        *ret_msg = cmsg_take(m, ret_len);
        return 1;
    }
    if (st)
        *st = status;
    if (status.code != RPC_OK)
        return call_failed(k->method, c->socket_path, &status, err);
    return 0;
}

void rpc_client_stream_close(struct rpc_client_stream *s)
{
    if (!s)
        return;
    ccall_cancel(s->call);
    ccall_unref(s->call);
    free(s);
}

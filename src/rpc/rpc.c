/* SPDX-License-Identifier: Apache-2.0 */
/* rpc: the gRPC server over unix sockets (and one TCP port for probes), on nghttp2. One
 * thread per server polls the listening socket, its connections and a wake-up eventfd, with
 * a timeout only while a deadline is due (a call's grpc-timeout, a TCP connection's limits,
 * the stop grace): an idle server costs no wake-ups. Every handler and callback runs on that
 * thread; other threads only queue stream messages, finish deferred calls and wake it. The
 * client is rpc_client.c, the wire pieces rpc_h2.c. Never logs above debug. */
#include "rpc/rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rpc/internal.h"

/* After rpc_server_stop(), calls still flushing get this long before their connections are
 * closed under them. */
#define RPC_STOP_GRACE_MS 1000
/* A request at least this large is followed by malloc_trim(0): its unpacked copies would
 * otherwise stay in the heap's free lists for good (RSS 16-42 MiB seen with 4 MiB). */
#define RPC_TRIM_AFTER_BYTES (64u * 1024u)
/* Our receive window per stream: a 4 MiB Allocate arrives in a few round trips. */
#define RPC_SERVER_WINDOW_BYTES (1u << 20)
#define RPC_LISTEN_BACKLOG 128
/* Connections one server keeps at once; more are closed as they come (the kubelet needs one
 * or two; a peer that opens and never speaks must not take every fd). */
#define RPC_MAX_CONNS 256
/* Calls one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS; more are
 * refused with REFUSED_STREAM, which gRPC clients retry or queue). grpc-go's server has no
 * limit by default; 100 is HTTP/2's recommended floor and what most servers set. The
 * kubelet opens one ListAndWatch per resource and a handful of DRA calls. */
#define RPC_MAX_STREAMS_PER_CONN 100
/* Decoded header list of one request (SETTINGS_MAX_HEADER_LIST_SIZE, RFC 9113's count:
 * name + value + 32 per field). grpc-go allows 16 MiB; a kubelet sends under 1 KiB. */
#define RPC_MAX_HEADER_LIST_BYTES (64u * 1024u)
/* A connection that carried this many calls gives its heap back when it closes. */
#define RPC_TRIM_AFTER_CALLS 64
/* TCP (the probe port) only: a connection that has not sent HTTP/2's preface this long
 * after it was accepted, or has no call and has sent nothing this long, is closed; at the
 * connection cap the idlest connection without a call makes room for a new one. Unix
 * sockets (one peer, the kubelet, which keeps its connections for hours) have none. */
#define RPC_TCP_PREFACE_MS 5000
#define RPC_TCP_IDLE_MS 60000
/* Stream resets a unix-socket client may make at once, and per second after that. */
#define RPC_RESET_BURST 100000u
#define RPC_RESET_PER_S 10000u

/* ---- shared helpers ------------------------------------------------------------------------ */

static const char *const code_names[] = {
    "OK",       "Canceled",        "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",   "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",      "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated",
};

const char *rpc_code_name(int code)
{
    if (code < 0 || (size_t)code >= GS_ARRAY_SIZE(code_names))
        return "Unknown";
    return code_names[code];
}

void rpc_status_set(struct rpc_status *st, int code, const char *fmt, ...)
{
    va_list ap;

    if (!st)
        return;
    st->code = code;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof(st->message), fmt, ap);
    va_end(ap);
}

/* ---- server -------------------------------------------------------------------------------- */

struct rpc_method {
    char *path;
    bool streaming;
    rpc_unary_fn unary;
    rpc_unary_async_fn unary_async;
    rpc_stream_open_fn open;
    rpc_stream_closed_fn closed;
    void *ctx;
};

struct rpc_server {
    char *socket_path; /* or, with tcp, the host:port listened on */
    bool tcp;
    /* The socket we bound (device, inode): only that one is ours to chmod and remove. */
    bool have_sock_id;
    dev_t sock_dev;
    ino_t sock_ino;
    struct rpc_method *methods;
    size_t n_methods;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *h2_opt;

    int listen_fd;
    int wake_fd;
    int preface_ms, idle_ms; /* 0: none */
    pthread_t thread;
    bool thread_started;
    bool started;

    /* The server thread's own. */
    struct rpc__conn *conns;
    uint64_t stop_deadline_ms; /* 0 until the thread has seen `stopping` */

    pthread_mutex_t lock; /* guards everything below; taken before any stream lock */
    bool stopping;
    bool stopped;
    struct rpc_stream *open_streams; /* accepted, not yet closed */
    size_t n_streams;
};

enum stream_state {
    ST_OPENING,   /* request in, handler running: sends are queued */
    ST_OPEN,      /* accepted: sends flow */
    ST_FINISHING, /* status requested: the queue is flushed, then the status goes */
    ST_ENDED,     /* status sent, refused, or gone: sends fail */
};

/* One queued message, framed (5-byte prefix + bytes). */
struct out_msg {
    uint8_t *buf;
    size_t len;
};

/* What a deferred handler holds: a handle on its call's stream. */
struct rpc_call {
    struct rpc_stream *stream;
};

/* A call on the server: unary calls use it too (request, one message, status). */
struct rpc_stream {
    pthread_mutex_t lock; /* guards the fields from `refs` on */
    struct rpc_server *srv;

    /* The server thread's own. */
    struct rpc__conn *conn; /* NULL once the HTTP/2 stream is gone */
    int32_t id;
    char *path;
    struct strbuf req; /* the framed request as it arrives */
    const struct rpc_method *m;
    bool dispatched;
    bool deferred;      /* the data source said "nothing yet": resume it on new output */
    bool rst_after_end; /* answered before the client finished sending: reset it after */
    bool status_sent;
    bool answer_due;      /* a unary call's answer is awaited from rpc_call_finish() */
    size_t header_bytes;  /* the request's header list so far (RFC 9113 count) */
    uint64_t deadline_ms; /* from grpc-timeout (monotonic); 0: none, or past it */
    struct rpc_call call;
    struct rpc_stream *cnext, *cprev; /* the connection's calls */

    int refs;
    enum stream_state state;
    bool accepted;
    struct out_msg queue[RPC_STREAM_MAX_QUEUED];
    size_t q_head, n_queued, q_off; /* q_off: bytes of the head message already handed out */
    size_t q_bytes;                 /* framed bytes queued (the head's sent part included) */
    int fin_code;
    char *fin_msg;
    struct rpc_stream *next, *prev; /* srv->open_streams, under srv->lock */
};

static void queue_drop_locked(struct rpc_stream *s)
{
    while (s->n_queued > 0) {
        free(s->queue[s->q_head].buf);
        s->queue[s->q_head].buf = NULL;
        s->q_head = (s->q_head + 1) % RPC_STREAM_MAX_QUEUED;
        s->n_queued--;
    }
    s->q_off = 0;
    s->q_bytes = 0;
}

/* Appends one framed copy of msg. Under s->lock. */
static int queue_push_locked(struct rpc_stream *s, const uint8_t *msg, size_t len)
{
    uint8_t *buf;

    if (s->n_queued >= RPC_STREAM_MAX_QUEUED ||
        (s->n_queued > 0 && s->q_bytes + RPC__FRAME_HDR + len > RPC_STREAM_MAX_QUEUED_BYTES))
        return -ENOBUFS;
    buf = malloc(RPC__FRAME_HDR + len);
    if (!buf)
        return -ENOMEM;
    rpc__frame_header(buf, len);
    if (len)
        memcpy(buf + RPC__FRAME_HDR, msg, len);
    s->queue[(s->q_head + s->n_queued) % RPC_STREAM_MAX_QUEUED] =
        (struct out_msg){buf, RPC__FRAME_HDR + len};
    s->n_queued++;
    s->q_bytes += RPC__FRAME_HDR + len;
    return 0;
}

struct rpc_stream *rpc_stream_ref(struct rpc_stream *stream)
{
    pthread_mutex_lock(&stream->lock);
    stream->refs++;
    pthread_mutex_unlock(&stream->lock);
    return stream;
}

void rpc_stream_unref(struct rpc_stream *stream)
{
    int refs;

    if (!stream)
        return;
    pthread_mutex_lock(&stream->lock);
    refs = --stream->refs;
    pthread_mutex_unlock(&stream->lock);
    if (refs > 0)
        return;
    queue_drop_locked(stream);
    free(stream->fin_msg);
    free(stream->path);
    strbuf_release(&stream->req);
    pthread_mutex_destroy(&stream->lock);
    free(stream);
}

/* Wakes the server thread to move the stream's new output. Under s->lock: the server (and
 * its eventfd) outlives every stream that is not ST_ENDED. */
static void stream_kick_locked(struct rpc_stream *s)
{
    if (s->state == ST_OPEN || s->state == ST_FINISHING)
        rpc__wake(s->srv->wake_fd);
}

/* Drops the queued messages not yet begun on the wire (a part-sent one must finish: the
 * framing depends on it). Under s->lock. */
static void queue_drop_unsent_locked(struct rpc_stream *s)
{
    size_t keep = s->q_off > 0 ? 1 : 0;

    while (s->n_queued > keep) {
        struct out_msg *m = &s->queue[(s->q_head + s->n_queued - 1) % RPC_STREAM_MAX_QUEUED];

        s->q_bytes -= m->len;
        free(m->buf);
        m->buf = NULL;
        s->n_queued--;
    }
}

static int stream_send(struct rpc_stream *s, const uint8_t *msg, size_t len, bool latest)
{
    int r;

    if (len > RPC_MAX_MESSAGE_BYTES)
        return -EMSGSIZE;
    pthread_mutex_lock(&s->lock);
    if (s->state != ST_OPENING && s->state != ST_OPEN) {
        r = -EPIPE;
        goto out;
    }
    if (latest)
        queue_drop_unsent_locked(s);
    r = queue_push_locked(s, msg, len);
    if (r == 0)
        stream_kick_locked(s);
out:
    pthread_mutex_unlock(&s->lock);
    return r;
}

int rpc_stream_send(struct rpc_stream *stream, const uint8_t *msg, size_t len)
{
    return stream_send(stream, msg, len, false);
}

int rpc_stream_send_latest(struct rpc_stream *stream, const uint8_t *msg, size_t len)
{
    return stream_send(stream, msg, len, true);
}

static int stream_finish_locked(struct rpc_stream *s, int code, const char *msg)
{
    if (s->state != ST_OPENING && s->state != ST_OPEN)
        return -EPIPE;
    free(s->fin_msg);
    s->fin_msg = NULL;
    if (msg && *msg) {
        s->fin_msg = strdup(msg);
        if (!s->fin_msg)
            return -ENOMEM;
    }
    s->fin_code = code;
    /* from ST_OPENING, the status goes once the open handler has accepted */
    s->state = ST_FINISHING;
    stream_kick_locked(s);
    return 0;
}

int rpc_stream_finish(struct rpc_stream *stream, const struct rpc_status *st)
{
    int r;

    pthread_mutex_lock(&stream->lock);
    r = stream_finish_locked(stream, st ? st->code : RPC_OK, st ? st->message : NULL);
    pthread_mutex_unlock(&stream->lock);
    return r;
}

bool rpc_stream_is_open(struct rpc_stream *stream)
{
    bool open;

    pthread_mutex_lock(&stream->lock);
    open = stream->state == ST_OPENING || stream->state == ST_OPEN;
    pthread_mutex_unlock(&stream->lock);
    return open;
}

/* ---- answering (server thread) ------------------------------------------------------------- */

/* grpc-status and grpc-message as header fields; `code_buf`/`msg_buf` hold the values. */
static size_t status_fields(nghttp2_nv *nv, int code, const char *msg, char code_buf[8],
                            char msg_buf[RPC_STATUS_MSG_MAX * 3])
{
    size_t n = 0;

    snprintf(code_buf, 8, "%d", code);
    nv[n++] = (nghttp2_nv)RPC__NV("grpc-status", code_buf);
    if (msg && *msg) {
        rpc__percent_encode(msg, msg_buf, RPC_STATUS_MSG_MAX * 3);
        nv[n++] = (nghttp2_nv)RPC__NV("grpc-message", msg_buf);
    }
    return n;
}

/* Ends a call that sent no message with a trailers-only answer. */
static void call_respond_status(struct rpc_stream *s, int code, const char *fmt, ...)
    GS_PRINTF(3, 4);
static void call_respond_status(struct rpc_stream *s, int code, const char *fmt, ...)
{
    char code_buf[8], msg[RPC_STATUS_MSG_MAX], msg_buf[RPC_STATUS_MSG_MAX * 3];
    nghttp2_nv nv[4] = {RPC__NV(":status", "200"), RPC__NV("content-type", "application/grpc")};
    size_t n = 2;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    pthread_mutex_lock(&s->lock);
    s->state = ST_ENDED;
    queue_drop_locked(s);
    pthread_mutex_unlock(&s->lock);
    if (!s->conn || s->status_sent)
        return;
    n += status_fields(nv + n, code, msg, code_buf, msg_buf);
    s->status_sent = true;
    nghttp2_submit_response(s->conn->h2, s->id, nv, n, NULL);
}

/* Submits the trailers once the queue is empty and a status is due. Under s->lock. */
static bool stream_trailers_locked(struct rpc_stream *s)
{
    char code_buf[8], msg_buf[RPC_STATUS_MSG_MAX * 3];
    nghttp2_nv nv[2];
    size_t n;

    if (s->n_queued > 0 || s->state != ST_FINISHING)
        return false;
    n = status_fields(nv, s->fin_code, s->fin_msg, code_buf, msg_buf);
    s->state = ST_ENDED;
    s->status_sent = true;
    nghttp2_submit_trailer(s->conn->h2, s->id, nv, n);
    return true;
}

/* The response body: queued messages as they come, then the trailers. */
static ssize_t stream_read(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                           uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct rpc_stream *s = src->ptr;
    size_t n = 0;

    (void)h2, (void)id, (void)user;
    pthread_mutex_lock(&s->lock);
    while (n < length && s->n_queued > 0) {
        struct out_msg *m = &s->queue[s->q_head];
        size_t k = m->len - s->q_off < length - n ? m->len - s->q_off : length - n;

        memcpy(buf + n, m->buf + s->q_off, k);
        n += k;
        s->q_off += k;
        if (s->q_off < m->len)
            break;
        s->q_bytes -= m->len;
        free(m->buf);
        m->buf = NULL;
        s->q_head = (s->q_head + 1) % RPC_STREAM_MAX_QUEUED;
        s->n_queued--;
        s->q_off = 0;
    }
    if (s->conn && stream_trailers_locked(s))
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    pthread_mutex_unlock(&s->lock);
    if (n == 0 && !(*flags & NGHTTP2_DATA_FLAG_EOF)) {
        s->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

static void call_respond_data(struct rpc_stream *s)
{
    nghttp2_nv nv[] = {RPC__NV(":status", "200"), RPC__NV("content-type", "application/grpc")};
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = stream_read};

    if (!s->conn)
        return;
    nghttp2_submit_response(s->conn->h2, s->id, nv, GS_ARRAY_SIZE(nv), &prd);
}

/* Handler returned < 0 without a status: report it as UNKNOWN (grpc-go's default). */
static void status_from_errno(struct rpc_status *st, int r)
{
    if (r >= 0 || st->code != RPC_OK)
        return;
    if (r == -E2BIG)
        rpc_status_set(st, RPC_RESOURCE_EXHAUSTED, "response larger than %u bytes",
                       RPC_MAX_MESSAGE_BYTES);
    else
        rpc_status_set(st, RPC_UNKNOWN, "%s", strerror(-r));
}

/* Records a unary call's answer: the response message and an OK status, or another status.
 * Any thread; under s->lock. -EPIPE when the call has ended already. */
static int unary_answer_locked(struct rpc_stream *s, const uint8_t *resp, size_t len, int code,
                               const char *msg)
{
    char too_large[64];

    if (s->state != ST_OPENING)
        return -EPIPE;
    if (code == RPC_OK && len > RPC_MAX_MESSAGE_BYTES) {
        code = RPC_RESOURCE_EXHAUSTED;
        snprintf(too_large, sizeof(too_large), "response larger than %u bytes",
                 RPC_MAX_MESSAGE_BYTES);
        msg = too_large;
    } else if (code == RPC_OK && queue_push_locked(s, resp, len) < 0) {
        code = RPC_RESOURCE_EXHAUSTED;
        msg = "out of memory";
    }
    s->state = ST_OPEN;
    return stream_finish_locked(s, code, msg);
}

/* Server thread: sends a unary call's answer once one is recorded. */
static void call_answer_poll(struct rpc_stream *s)
{
    bool due, has_msg;
    int code;
    char msg[RPC_STATUS_MSG_MAX];

    if (!s->answer_due)
        return;
    pthread_mutex_lock(&s->lock);
    due = s->state == ST_FINISHING;
    has_msg = s->n_queued > 0;
    code = s->fin_code;
    str_copy(msg, s->fin_msg ? s->fin_msg : "", sizeof(msg));
    pthread_mutex_unlock(&s->lock);
    if (!due)
        return;
    s->answer_due = false;
    if (has_msg)
        call_respond_data(s); /* the message, then the trailers */
    else
        call_respond_status(s, code, "%s", msg);
}

static void call_run_unary(struct rpc_stream *s, const uint8_t *req, size_t len)
{
    struct strbuf resp = STRBUF_INIT;
    struct rpc_status st = {RPC_OK, ""};
    int r;

    resp.max_len = RPC_MAX_MESSAGE_BYTES;
    r = s->m->unary(s->m->ctx, req, len, &resp, &st);
    status_from_errno(&st, r);
    pthread_mutex_lock(&s->lock);
    unary_answer_locked(s, (const uint8_t *)resp.buf, resp.len, st.code, st.message);
    pthread_mutex_unlock(&s->lock);
    strbuf_release(&resp);
    s->answer_due = true;
    call_answer_poll(s);
}

/* A deferred handler: it holds a reference until rpc_call_finish(). */
static void call_run_unary_async(struct rpc_stream *s, const uint8_t *req, size_t len)
{
    s->call.stream = rpc_stream_ref(s);
    s->answer_due = true;
    s->m->unary_async(s->m->ctx, &s->call, req, len);
    call_answer_poll(s); /* finished inside the handler */
}

int rpc_call_finish(struct rpc_call *call, const uint8_t *resp, size_t len,
                    const struct rpc_status *st)
{
    struct rpc_stream *s = call->stream;
    int r;

    pthread_mutex_lock(&s->lock);
    r = unary_answer_locked(s, resp, len, st ? st->code : RPC_OK, st ? st->message : NULL);
    pthread_mutex_unlock(&s->lock);
    rpc_stream_unref(s);
    return r;
}

bool rpc_call_cancelled(struct rpc_call *call)
{
    return !rpc_stream_is_open(call->stream);
}

static void call_run_stream_open(struct rpc_stream *s, const uint8_t *req, size_t len)
{
    struct rpc_server *srv = s->srv;
    struct rpc_status st = {RPC_OK, ""};
    int r;

    /* The handler's reference exists before it runs: it may hand it on or drop it inside. */
    rpc_stream_ref(s);
    r = s->m->open(s->m->ctx, req, len, s, &st);
    status_from_errno(&st, r);
    if (st.code != RPC_OK) {
        call_respond_status(s, st.code, "%s", st.message);
        rpc_stream_unref(s); /* refused: the handler keeps none */
        return;
    }
    pthread_mutex_lock(&srv->lock);
    pthread_mutex_lock(&s->lock);
    s->accepted = true;
    s->next = srv->open_streams;
    if (srv->open_streams)
        srv->open_streams->prev = s;
    srv->open_streams = s;
    srv->n_streams++;
    if (s->state == ST_OPENING)
        s->state = ST_OPEN;
    if (srv->stopping)
        stream_finish_locked(s, RPC_UNAVAILABLE, "server is stopping");
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&srv->lock);
    call_respond_data(s);
}

static const struct rpc_method *find_method(const struct rpc_server *srv, const char *path)
{
    for (size_t i = 0; path && i < srv->n_methods; i++)
        if (strcmp(srv->methods[i].path, path) == 0)
            return &srv->methods[i];
    return NULL;
}

/* The request is in (a whole message, or the client half-closed): run the handler. */
static void call_dispatch(struct rpc_stream *s)
{
    size_t len = 0, total = s->req.len;
    int r = rpc__frame_next((const uint8_t *)s->req.buf, s->req.len, &len);

    s->dispatched = true;
    s->m = find_method(s->srv, s->path);
    if (!s->m)
        call_respond_status(s, RPC_UNIMPLEMENTED, "unknown method %s", s->path ? s->path : "");
    else if (r < 0)
        call_respond_status(s, RPC_UNIMPLEMENTED, "compressed messages are not supported");
    else if (r == 0)
        call_respond_status(s, RPC_INVALID_ARGUMENT, "request message missing");
    else if (s->m->streaming)
        call_run_stream_open(s, (const uint8_t *)s->req.buf + RPC__FRAME_HDR, len);
    else if (s->m->unary_async)
        call_run_unary_async(s, (const uint8_t *)s->req.buf + RPC__FRAME_HDR, len);
    else
        call_run_unary(s, (const uint8_t *)s->req.buf + RPC__FRAME_HDR, len);
    strbuf_release(&s->req);
    if (total >= RPC_TRIM_AFTER_BYTES)
        malloc_trim(0);
}

/* ---- HTTP/2 callbacks (server thread) ------------------------------------------------------ */

static struct rpc_stream *stream_of(nghttp2_session *h2, int32_t id)
{
    return nghttp2_session_get_stream_user_data(h2, id);
}

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
    struct rpc__conn *c = user;
    struct rpc_server *srv = c->owner;
    struct rpc_stream *s;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
    pthread_mutex_init(&s->lock, NULL);
    s->srv = srv;
    s->conn = c;
    s->id = frame->hd.stream_id;
    s->refs = 1; /* the connection's, dropped when the HTTP/2 stream is gone */
    s->state = ST_OPENING;
    s->req.max_len = RPC__FRAME_HDR + RPC_MAX_MESSAGE_BYTES;
    s->cnext = c->calls;
    if (s->cnext)
        s->cnext->cprev = s;
    c->calls = s;
    c->n_calls_seen++;
    nghttp2_session_set_stream_user_data(h2, s->id, s);
    return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    struct rpc_stream *s = stream_of(h2, frame->hd.stream_id);

    (void)flags, (void)user;
    if (!s || frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    s->header_bytes += namelen + valuelen + 32;
    if (s->header_bytes > RPC_MAX_HEADER_LIST_BYTES)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset, nothing kept */
    if (namelen == 5 && memcmp(name, ":path", 5) == 0 && !s->path) {
        s->path = strndup((const char *)value, valuelen);
        if (!s->path)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    } else if (namelen == 12 && memcmp(name, "grpc-timeout", 12) == 0) {
        uint64_t ms;

        /* a malformed value is ignored, as grpc-go's server does */
        if (rpc__parse_timeout(value, valuelen, &ms) == 0)
            s->deadline_ms = time_now_ms() + (ms ? ms : 1);
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    struct rpc_stream *s = stream_of(h2, id);
    size_t want = 0;
    int r;

    (void)flags, (void)user;
    if (!s || s->dispatched)
        return 0; /* past the one request message: nothing more is read */
    r = strbuf_append(&s->req, (const char *)data, len);
    if (r == 0) {
        r = rpc__frame_next((const uint8_t *)s->req.buf, s->req.len, &want);
        if (r != 0 && want <= RPC_MAX_MESSAGE_BYTES) {
            call_dispatch(s); /* a whole message, or a compressed one (refused there) */
            return 0;
        }
    }
    /* refused on the prefix, before a byte of the body is kept (grpc-go does the same) */
    if (r == -E2BIG || r == -ENOMEM || want > RPC_MAX_MESSAGE_BYTES) {
        s->dispatched = true;
        /* the client is still sending: reset it once the answer is out */
        s->rst_after_end = true;
        call_respond_status(s, RPC_RESOURCE_EXHAUSTED,
                            "grpc: received message larger than max (%zu vs. %u)", want,
                            RPC_MAX_MESSAGE_BYTES);
        if (s->req.len >= RPC_TRIM_AFTER_BYTES)
            malloc_trim(0);
        strbuf_release(&s->req);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
    struct rpc_stream *s;

    (void)user;
    if (frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    s = stream_of(h2, frame->hd.stream_id);
    if (s && !s->dispatched && frame->hd.type == NGHTTP2_HEADERS && !find_method(s->srv, s->path)) {
        /* answered at its headers, as grpc-go does: no need to wait for a message */
        s->dispatched = true;
        s->rst_after_end = !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
        call_respond_status(s, RPC_UNIMPLEMENTED, "unknown method %s", s->path ? s->path : "");
        return 0;
    }
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    if (s && !s->dispatched)
        call_dispatch(s);
    return 0;
}

static int on_frame_send(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
    struct rpc_stream *s;

    (void)user;
    if (frame->hd.type != NGHTTP2_HEADERS || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    s = stream_of(h2, frame->hd.stream_id);
    if (s && s->rst_after_end) {
        s->rst_after_end = false;
        nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

/* The HTTP/2 stream is gone: the call ends, its `closed` callback runs, and the
 * connection's reference goes. */
static void stream_gone(struct rpc_stream *s, bool peer_cancelled)
{
    struct rpc_server *srv = s->srv;
    struct rpc__conn *c = s->conn;
    bool notify;

    if (s->cprev)
        s->cprev->cnext = s->cnext;
    else if (c)
        c->calls = s->cnext;
    if (s->cnext)
        s->cnext->cprev = s->cprev;
    s->cnext = s->cprev = NULL;
    s->conn = NULL;
    pthread_mutex_lock(&srv->lock);
    pthread_mutex_lock(&s->lock);
    s->state = ST_ENDED;
    queue_drop_locked(s);
    notify = s->accepted;
    if (s->accepted) {
        if (s->prev)
            s->prev->next = s->next;
        else
            srv->open_streams = s->next;
        if (s->next)
            s->next->prev = s->prev;
        s->next = s->prev = NULL;
        srv->n_streams--;
        s->accepted = false;
    }
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&srv->lock);
    if (notify && s->m->closed)
        s->m->closed(s->m->ctx, s, peer_cancelled);
    rpc_stream_unref(s);
}

static bool server_is_stopping(struct rpc_server *srv)
{
    bool stopping;

    pthread_mutex_lock(&srv->lock);
    stopping = srv->stopping;
    pthread_mutex_unlock(&srv->lock);
    return stopping;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *user)
{
    struct rpc_stream *s = stream_of(h2, id);

    (void)error_code, (void)user;
    if (!s)
        return 0;
    nghttp2_session_set_stream_user_data(h2, id, NULL);
    /* the client reset it, or went away, before we sent a status */
    stream_gone(s, !s->status_sent && !server_is_stopping(s->srv));
    return 0;
}

static int server_callbacks(struct rpc_server *srv)
{
    nghttp2_session_callbacks *cbs = NULL;

    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    srv->cbs = cbs;
    if (nghttp2_option_new(&srv->h2_opt) != 0)
        return -ENOMEM;
    /* kubelet <= 1.25 sends the socket path as :authority, which HTTP's rules refuse:
     * nghttp2 checks framing only, and call_dispatch() what a gRPC call needs */
    nghttp2_option_set_no_http_messaging(srv->h2_opt, 1);
    /* nghttp2 keeps closed streams for HTTP/2 priorities, as many as the concurrent-stream
     * limit allows (none): on a kept connection that grew ~280 bytes per call */
    nghttp2_option_set_no_closed_streams(srv->h2_opt, 1);
    /* nghttp2 ends a connection whose client resets more than 1,000 streams in a burst
     * (33/s after): the "rapid reset" guard for servers on a network. A unix socket only
     * root can connect to has one peer, the kubelet, whose restarted watches reset
     * streams by the thousand (test_daemon_kubelet: 1,000 cancels on one connection);
     * the TCP health port keeps the default. */
    if (!srv->tcp)
        nghttp2_option_set_stream_reset_rate_limit(srv->h2_opt, RPC_RESET_BURST, RPC_RESET_PER_S);
    return 0;
}

/* ---- connections and the server thread ----------------------------------------------------- */

static void server_conn_close(struct rpc_server *srv, struct rpc__conn *c);

/* Closes the connection without a call that has been silent longest, to make room at the
 * cap (a peer holding every slot must not lock the kubelet's probes out). False when every
 * connection has a call. */
static bool server_evict_idlest(struct rpc_server *srv)
{
    struct rpc__conn *idlest = NULL;

    for (struct rpc__conn *c = srv->conns; c; c = c->next)
        if (!c->calls && (!idlest || c->last_active_ms < idlest->last_active_ms))
            idlest = c;
    if (!idlest)
        return false;
    log_debug("rpc: %s at %d connections, closing the idlest", srv->socket_path, RPC_MAX_CONNS);
    server_conn_close(srv, idlest);
    return true;
}

static void server_accept(struct rpc_server *srv)
{
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, RPC_SERVER_WINDOW_BYTES},
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, RPC_MAX_STREAMS_PER_CONN},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, RPC_MAX_HEADER_LIST_BYTES},
    };
    size_t n = 0;

    for (struct rpc__conn *c = srv->conns; c; c = c->next)
        n++;
    for (;;) {
        int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        struct rpc__conn *c;

        if (fd < 0)
            return; /* EAGAIN: all taken; anything else: try again on the next wake */
        if (n >= RPC_MAX_CONNS && !(srv->tcp && server_evict_idlest(srv))) {
            log_debug("rpc: %s has %d connections already, closing a new one", srv->socket_path,
                      RPC_MAX_CONNS);
            close(fd);
            continue;
        }
        if (n >= RPC_MAX_CONNS)
            n--; /* one was evicted */
        if (srv->tcp)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
        c = calloc(1, sizeof(*c));
        if (!c || nghttp2_session_server_new2(&c->h2, srv->cbs, c, srv->h2_opt) != 0 ||
            nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, settings, GS_ARRAY_SIZE(settings)) !=
                0) {
            if (c)
                c->fd = -1;
            rpc__conn_free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->owner = srv;
        c->accepted_ms = c->last_active_ms = time_now_ms();
        c->drop_idle_resets = true;
        c->preface_left = NGHTTP2_CLIENT_MAGIC_LEN;
        c->next = srv->conns;
        srv->conns = c;
        n++;
    }
}

/* Closes a connection; its calls end (cancelled by the peer unless we are stopping). */
static void server_conn_close(struct rpc_server *srv, struct rpc__conn *c)
{
    bool stopping = server_is_stopping(srv), trim;

    while (c->calls) {
        struct rpc_stream *s = c->calls;

        nghttp2_session_set_stream_user_data(c->h2, s->id, NULL);
        stream_gone(s, !s->status_sent && !stopping);
    }
    trim = c->n_calls_seen >= RPC_TRIM_AFTER_CALLS;
    rpc__conn_remove(&srv->conns, c);
    /* a peer that opened many calls leaves the heap's free lists full: give them back
     * (issue 29: 482 MB stayed after 100,000 stalled calls went) */
    if (trim)
        malloc_trim(0);
}

/* Resumes the streams that have new output since their data source said "nothing yet". */
static void server_resume(struct rpc__conn *c)
{
    for (struct rpc_stream *s = c->calls; s; s = s->cnext) {
        bool has_output;

        call_answer_poll(s);
        if (!s->deferred)
            continue;
        pthread_mutex_lock(&s->lock);
        has_output = s->n_queued > 0 || s->state == ST_FINISHING;
        pthread_mutex_unlock(&s->lock);
        if (has_output) {
            s->deferred = false;
            nghttp2_session_resume_data(c->h2, s->id);
        }
    }
}

/* A call's grpc-timeout passed before its status went out: DEADLINE_EXCEEDED, as grpc-go
 * answers, whether the request is still arriving, a deferred handler still owes its answer
 * (its late rpc_call_finish() is then a no-op) or a stream is open. */
static void call_expire(struct rpc_stream *s)
{
    static const char msg[] = "context deadline exceeded";

    s->deadline_ms = 0;
    if (!s->dispatched) {
        s->dispatched = true;
        s->rst_after_end = true; /* the client is still sending */
        strbuf_release(&s->req);
        call_respond_status(s, RPC_DEADLINE_EXCEEDED, msg);
    } else if (s->answer_due) {
        s->answer_due = false;
        call_respond_status(s, RPC_DEADLINE_EXCEEDED, msg);
    } else {
        pthread_mutex_lock(&s->lock);
        stream_finish_locked(s, RPC_DEADLINE_EXCEEDED, msg);
        pthread_mutex_unlock(&s->lock);
    }
}

/* When a connection is due to be dropped (0: never): no preface in time, or idle. */
static uint64_t conn_due_ms(const struct rpc_server *srv, const struct rpc__conn *c)
{
    if (c->dead || c->goaway)
        return 0;
    if (srv->preface_ms > 0 && c->preface_left > 0)
        return c->accepted_ms + (uint64_t)srv->preface_ms;
    if (srv->idle_ms > 0 && !c->calls)
        return c->last_active_ms + (uint64_t)srv->idle_ms;
    return 0;
}

/* Drops a connection that is due: GOAWAY for one that spoke HTTP/2, then closed. */
static void conn_expire(struct rpc_server *srv, struct rpc__conn *c)
{
    log_debug("rpc: %s: closing a connection that %s", srv->socket_path,
              c->preface_left > 0 ? "sent no HTTP/2 preface in time" : "stayed idle");
    if (c->preface_left == 0) {
        nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->h2), NGHTTP2_NO_ERROR,
                              NULL, 0);
        rpc__conn_flush(c);
    }
    c->dead = true; /* server_tend closes it */
}

/* Expires what is due and returns the poll timeout until the next deadline (-1: none, so an
 * idle server sleeps until a socket or its eventfd wakes it). */
static int server_timers(struct rpc_server *srv)
{
    uint64_t now = time_now_ms(), next = srv->stop_deadline_ms;
    bool expired = false;

    for (struct rpc__conn *c = srv->conns; c; c = c->next) {
        uint64_t due = conn_due_ms(srv, c);

        if (due && now >= due) {
            conn_expire(srv, c);
            expired = true;
        } else if (due && (next == 0 || due < next)) {
            next = due;
        }
        for (struct rpc_stream *s = c->calls; s; s = s->cnext) {
            if (s->deadline_ms == 0 || s->status_sent)
                continue;
            if (now >= s->deadline_ms) {
                call_expire(s);
                expired = true;
            } else if (next == 0 || s->deadline_ms < next) {
                next = s->deadline_ms;
            }
        }
    }
    if (expired)
        return 0; /* their answers go out first */
    if (next == 0)
        return -1;
    return next <= now ? 0 : (int)(next - now < INT_MAX ? next - now : INT_MAX);
}

/* The first turn after rpc_server_stop(): no new connections, GOAWAY on the open ones. */
static void server_begin_stop(struct rpc_server *srv)
{
    srv->stop_deadline_ms = time_now_ms() + RPC_STOP_GRACE_MS;
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    srv->listen_fd = -1;
    for (struct rpc__conn *c = srv->conns; c; c = c->next) {
        nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->h2), NGHTTP2_NO_ERROR,
                              NULL, 0);
        c->goaway = true;
    }
}

/* Moves output, closes what is done. Returns false once a stopping server is finished. */
static bool server_tend(struct rpc_server *srv)
{
    bool stopping = server_is_stopping(srv);
    struct rpc__conn *next;

    if (stopping && srv->stop_deadline_ms == 0)
        server_begin_stop(srv);
    for (struct rpc__conn *c = srv->conns; c; c = next) {
        next = c->next;
        server_resume(c);
        rpc__conn_flush(c);
        if (c->dead || rpc__conn_events(c) == 0 ||
            (stopping && !c->calls && c->out_off >= c->out_len))
            server_conn_close(srv, c);
    }
    if (!stopping)
        return true;
    if (srv->conns && time_now_ms() < srv->stop_deadline_ms)
        return true;
    while (srv->conns) /* the grace is over: calls still running are cut */
        server_conn_close(srv, srv->conns);
    return false;
}

static void *server_thread(void *arg)
{
    struct rpc_server *srv = arg;
    struct rpc__poller p = {0};

    while (server_tend(srv)) {
        int timeout = server_timers(srv);

        if (timeout == 0)
            continue; /* something expired or is due: another turn */
        /* accepting comes after the connections' turn, as it adds to them */
        if (rpc__poll(&p, srv->wake_fd, srv->listen_fd, srv->conns, timeout))
            server_accept(srv);
    }
    rpc__poller_release(&p);
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

static int server_new(const char *socket_path, bool tcp, struct rpc_server **ret, struct error *err)
{
    struct rpc_server *srv = NULL;
    int r;

    r = tcp ? (socket_path && *socket_path ? 0 : error_set(err, -EINVAL, "address is empty"))
            : rpc__check_socket_path(socket_path, err);
    if (r < 0)
        return r;
    srv = calloc(1, sizeof(*srv));
    if (!srv)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&srv->lock, NULL);
    srv->listen_fd = -1;
    srv->tcp = tcp;
    srv->preface_ms = tcp ? RPC_TCP_PREFACE_MS : 0;
    srv->idle_ms = tcp ? RPC_TCP_IDLE_MS : 0;
    srv->wake_fd = rpc__wake_fd();
    if (srv->wake_fd < 0) {
        r = error_set_errno(err, -srv->wake_fd, "cannot create an eventfd");
        goto out;
    }
    srv->socket_path = strdup(socket_path);
    if (!srv->socket_path || server_callbacks(srv) < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    *ret = srv;
    srv = NULL;
    r = 0;
out:
    rpc_server_free(srv);
    return r;
}

int rpc_server_new(const char *socket_path, struct rpc_server **ret, struct error *err)
{
    return server_new(socket_path, false, ret, err);
}

int rpc_server_new_tcp(const char *host_port, struct rpc_server **ret, struct error *err)
{
    return server_new(host_port, true, ret, err);
}

static int server_add(struct rpc_server *srv, const struct rpc_method *m, struct error *err)
{
    struct rpc_method *methods;

    if (srv->started)
        return error_set(err, -EBUSY, "cannot add method '%s': server already started", m->path);
    if (!m->path || m->path[0] != '/')
        return error_set(err, -EINVAL, "method path '%s' must start with '/'",
                         m->path ? m->path : "");
    for (size_t i = 0; i < srv->n_methods; i++)
        if (strcmp(srv->methods[i].path, m->path) == 0)
            return error_set(err, -EEXIST, "method '%s' registered twice", m->path);
    methods = realloc(srv->methods, (srv->n_methods + 1) * sizeof(*methods));
    if (!methods)
        return error_set(err, -ENOMEM, "out of memory");
    srv->methods = methods;
    methods[srv->n_methods] = *m;
    methods[srv->n_methods].path = strdup(m->path);
    if (!methods[srv->n_methods].path)
        return error_set(err, -ENOMEM, "out of memory");
    srv->n_methods++;
    return 0;
}

int rpc_server_add_unary(struct rpc_server *srv, const char *method, rpc_unary_fn fn, void *ctx,
                         struct error *err)
{
    struct rpc_method m = {.path = (char *)method, .unary = fn, .ctx = ctx};

    if (!fn)
        return error_set(err, -EINVAL, "method '%s' has no handler", method);
    return server_add(srv, &m, err);
}

int rpc_server_add_unary_async(struct rpc_server *srv, const char *method, rpc_unary_async_fn fn,
                               void *ctx, struct error *err)
{
    struct rpc_method m = {.path = (char *)method, .unary_async = fn, .ctx = ctx};

    if (!fn)
        return error_set(err, -EINVAL, "method '%s' has no handler", method);
    return server_add(srv, &m, err);
}

int rpc_server_add_stream(struct rpc_server *srv, const char *method, rpc_stream_open_fn open,
                          rpc_stream_closed_fn closed, void *ctx, struct error *err)
{
    struct rpc_method m = {
        .path = (char *)method, .streaming = true, .open = open, .closed = closed, .ctx = ctx};

    if (!open)
        return error_set(err, -EINVAL, "method '%s' has no handler", method);
    return server_add(srv, &m, err);
}

/* Removes a leftover socket (a previous run, or a kubelet that deleted ours); refuses to
 * remove anything that is not a socket. */
static int remove_stale_socket(const char *path, struct error *err)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return error_set_errno(err, errno, "cannot stat '%s'", path);
    }
    if (!S_ISSOCK(st.st_mode))
        return error_set(err, -EEXIST, "'%s' exists and is not a socket; not removing it", path);
    if (unlink(path) < 0 && errno != ENOENT)
        return error_set_errno(err, errno, "cannot remove stale socket '%s'", path);
    return 0;
}

/* Mode 0600 on the socket just bound, without following a link and without a race: the
 * path is opened O_PATH|O_NOFOLLOW, the inode checked to be a socket, and the mode set
 * through /proc/self/fd on that very inode. A symlink or a hard link someone put at the
 * path (the directory is writable by whoever can place sockets there) makes this fail
 * instead of changing the mode of the file it points to. Records the inode as ours. */
static int secure_socket(struct rpc_server *srv, struct error *err)
{
    char proc[64];
    struct stat st;
    int fd = open(srv->socket_path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int r = 0;

    if (fd < 0)
        return error_set_errno(err, errno, "cannot open the socket '%s' we bound",
                               srv->socket_path);
    if (fstat(fd, &st) < 0) {
        r = error_set_errno(err, errno, "cannot stat '%s'", srv->socket_path);
        goto out;
    }
    if (!S_ISSOCK(st.st_mode)) {
        r = error_set(err, -EPERM,
                      "'%s' is no longer the socket we bound (replaced while "
                      "starting); not changing its mode",
                      srv->socket_path);
        goto out;
    }
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    if (chmod(proc, 0600) < 0) {
        r = error_set_errno(err, errno, "cannot set mode 0600 on '%s'", srv->socket_path);
        goto out;
    }
    srv->have_sock_id = true;
    srv->sock_dev = st.st_dev;
    srv->sock_ino = st.st_ino;
out:
    close(fd);
    return r;
}

bool rpc_server_socket_is_ours(const struct rpc_server *srv)
{
    struct stat st;

    return srv && srv->have_sock_id && lstat(srv->socket_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
           st.st_dev == srv->sock_dev && st.st_ino == srv->sock_ino;
}

/* Binds the unix socket: stale one removed, mode 0600 before anyone can connect. */
static int listen_unix(struct rpc_server *srv, struct error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int r;

    r = remove_stale_socket(srv->socket_path, err);
    if (r < 0)
        return r;
    srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (srv->listen_fd < 0)
        return error_set_errno(err, errno, "cannot create a unix socket");
    memcpy(sa.sun_path, srv->socket_path, strlen(srv->socket_path) + 1);
    if (bind(srv->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return error_set(err, -EADDRNOTAVAIL,
                         "cannot listen on '%s': %s (does the directory exist and is it "
                         "writable?)",
                         srv->socket_path, strerror(errno));
    /* connecting needs write permission on the socket: 0600 limits it to our user */
    r = secure_socket(srv, err);
    if (r < 0)
        return r;
    if (listen(srv->listen_fd, RPC_LISTEN_BACKLOG) < 0)
        return error_set_errno(err, errno, "cannot listen on '%s'", srv->socket_path);
    return 0;
}

/* Binds "host:port" or "[v6]:port" (an empty host is every address). */
static int listen_tcp(struct rpc_server *srv, struct error *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char host[256];
    const char *colon = strrchr(srv->socket_path, ':');
    const char *h = srv->socket_path;
    size_t hl;
    int r;

    if (!colon || !colon[1])
        return error_set(err, -EINVAL, "address '%s' has no port (want host:port)",
                         srv->socket_path);
    hl = (size_t)(colon - h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= sizeof(host))
        return error_set(err, -EINVAL, "address '%s' is too long", srv->socket_path);
    memcpy(host, h, hl);
    host[hl] = '\0';
    r = getaddrinfo(hl ? host : NULL, colon + 1, &hints, &ai);
    if (r != 0)
        return error_set(err, -EINVAL, "cannot resolve '%s': %s", srv->socket_path,
                         gai_strerror(r));
    srv->listen_fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (srv->listen_fd < 0) {
        r = error_set_errno(err, errno, "cannot create a socket for '%s'", srv->socket_path);
        goto out;
    }
    setsockopt(srv->listen_fd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int));
    if (bind(srv->listen_fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
        listen(srv->listen_fd, RPC_LISTEN_BACKLOG) < 0) {
        r = error_set(err, -EADDRNOTAVAIL, "cannot listen on '%s': %s (is the port taken?)",
                      srv->socket_path, strerror(errno));
        goto out;
    }
    r = 0;
out:
    freeaddrinfo(ai);
    return r;
}

int rpc_server_start(struct rpc_server *srv, struct error *err)
{
    int r;

    if (srv->started)
        return error_set(err, -EBUSY, "server on '%s' already started", srv->socket_path);
    r = srv->tcp ? listen_tcp(srv, err) : listen_unix(srv, err);
    if (r < 0)
        goto fail;
    r = pthread_create(&srv->thread, NULL, server_thread, srv);
    if (r != 0) {
        r = error_set(err, -r, "cannot start server thread: %s", strerror(r));
        goto fail;
    }
    pthread_setname_np(srv->thread, "gs-rpc-server"); /* for top, perf and bench_idle */
    srv->thread_started = true;
    srv->started = true;
    return 0;
fail:
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    srv->listen_fd = -1;
    if (!srv->tcp && rpc_server_socket_is_ours(srv))
        unlink(srv->socket_path);
    srv->have_sock_id = false;
    return r;
}

void rpc_server_stop(struct rpc_server *srv)
{
    if (!srv)
        return;
    pthread_mutex_lock(&srv->lock);
    if (srv->stopped || !srv->started) {
        srv->stopped = true;
        pthread_mutex_unlock(&srv->lock);
        return;
    }
    srv->stopping = true;
    for (struct rpc_stream *s = srv->open_streams; s; s = s->next) {
        pthread_mutex_lock(&s->lock);
        stream_finish_locked(s, RPC_UNAVAILABLE, "server is stopping");
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&srv->lock);
    rpc__wake(srv->wake_fd);
    if (srv->thread_started)
        pthread_join(srv->thread, NULL);
    srv->thread_started = false;
    /* remove only the socket we bound: whatever replaced it is not ours to delete (a TCP
     * port leaves nothing on disk) */
    if (!srv->tcp && !rpc_server_socket_is_ours(srv))
        log_debug("rpc: path=%s is no longer our socket, leaving it", srv->socket_path);
    else if (!srv->tcp && unlink(srv->socket_path) < 0 && errno != ENOENT)
        log_debug("rpc: cannot remove socket path=%s: %s, ignoring", srv->socket_path,
                  strerror(errno));
    pthread_mutex_lock(&srv->lock);
    srv->stopped = true;
    pthread_mutex_unlock(&srv->lock);
}

int rpc_server_set_conn_timeouts(struct rpc_server *srv, int preface_ms, int idle_ms,
                                 struct error *err)
{
    if (srv->started)
        return error_set(err, -EBUSY, "server on '%s' already started", srv->socket_path);
    if (preface_ms < 0 || idle_ms < 0)
        return error_set(err, -EINVAL, "connection timeouts must be >= 0 ms");
    srv->preface_ms = preface_ms;
    srv->idle_ms = idle_ms;
    return 0;
}

int rpc_server_tcp_port(const struct rpc_server *srv)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (!srv->tcp || !srv->started || srv->listen_fd < 0 ||
        getsockname(srv->listen_fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

size_t rpc_server_n_streams(struct rpc_server *srv)
{
    size_t n;

    pthread_mutex_lock(&srv->lock);
    n = srv->n_streams;
    pthread_mutex_unlock(&srv->lock);
    return n;
}

void rpc_server_free(struct rpc_server *srv)
{
    if (!srv)
        return;
    if (srv->started && !srv->stopped)
        rpc_server_stop(srv);
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    if (srv->wake_fd >= 0)
        close(srv->wake_fd);
    nghttp2_session_callbacks_del(srv->cbs);
    nghttp2_option_del(srv->h2_opt);
    for (size_t i = 0; i < srv->n_methods; i++)
        free(srv->methods[i].path);
    free(srv->methods);
    free(srv->socket_path);
    pthread_mutex_destroy(&srv->lock);
    free(srv);
}

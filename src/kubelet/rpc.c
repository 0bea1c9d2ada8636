/* SPDX-License-Identifier: Apache-2.0 */
/* rpc: unix-socket gRPC server and client over the gRPC C core (completion queues and
 * batches). The only file that includes gRPC headers; messages stay opaque bytes. Each
 * server has one completion queue driven by one thread; every in-flight batch carries a
 * small tag naming its call and its step. Never logs above debug (gRPC's own log lines are
 * routed to log_debug). */
#include "kubelet/rpc.h"

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#define RPC_STOP_GRACE_MS 1000
#define RPC_CONNECT_SETTLE_MS 1000

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

static void status_from_slice(struct rpc_status *st, grpc_status_code code, grpc_slice details)
{
    size_t n = GRPC_SLICE_LENGTH(details);

    if (!st)
        return;
    st->code = (int)code;
    if (n >= sizeof(st->message))
        n = sizeof(st->message) - 1;
    memcpy(st->message, GRPC_SLICE_START_PTR(details), n);
    st->message[n] = '\0';
}

/* gRPC's own diagnostics are debug lines for us: library code does not log above debug. */
static void grpc_log_to_debug(gpr_log_func_args *args)
{
    log_debug("grpc: %s (%s:%d)", args->message, args->file, args->line);
}

static void grpc_log_setup(void)
{
    gpr_set_log_function(grpc_log_to_debug);
}

static void rpc_grpc_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, grpc_log_setup);
    grpc_init();
}

static grpc_byte_buffer *bytes_to_bb(const uint8_t *data, size_t len)
{
    grpc_slice s = grpc_slice_from_copied_buffer(data ? (const char *)data : "", data ? len : 0);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);

    grpc_slice_unref(s);
    return bb;
}

/* Flattens a received message into one slice (unref it when done). */
static int bb_to_slice(grpc_byte_buffer *bb, grpc_slice *ret)
{
    grpc_byte_buffer_reader r;

    if (!grpc_byte_buffer_reader_init(&r, bb))
        return -EIO;
    *ret = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    return 0;
}

static int bb_to_bytes(grpc_byte_buffer *bb, uint8_t **ret, size_t *ret_len)
{
    grpc_slice s;
    uint8_t *data;
    size_t n;
    int r;

    r = bb_to_slice(bb, &s);
    if (r < 0)
        return r;
    n = GRPC_SLICE_LENGTH(s);
    data = malloc(n ? n : 1);
    if (!data) {
        grpc_slice_unref(s);
        return -ENOMEM;
    }
    memcpy(data, GRPC_SLICE_START_PTR(s), n);
    grpc_slice_unref(s);
    *ret = data;
    *ret_len = n;
    return 0;
}

static gpr_timespec deadline_after_ms(int timeout_ms)
{
    if (timeout_ms <= 0)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
}

static int check_socket_path(const char *path, struct error *err)
{
    if (!path || !*path)
        return error_set(err, -EINVAL, "socket path is empty");
    if (strlen(path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
        return error_set(err, -ENAMETOOLONG, "socket path '%s' is longer than %zu bytes", path,
                         sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
    return 0;
}

/* ---- server -------------------------------------------------------------------------------- */

enum tag_kind {
    TAG_REQUEST_CALL, /* grpc_server_request_call completed: a new call */
    TAG_SHUTDOWN,     /* grpc_server_shutdown_and_notify completed */
    TAG_RECV,         /* the request message of a call arrived (or not) */
    TAG_SEND,         /* one streamed message went out */
    TAG_STATUS,       /* the final status batch completed */
    TAG_CLOSE,        /* RECV_CLOSE_ON_SERVER: the stream is over on the wire */
};

struct rpc_tag {
    enum tag_kind kind;
    struct rpc_stream *call; /* NULL for server-level tags */
};

struct rpc_method {
    char *path;
    bool streaming;
    rpc_unary_fn unary;
    rpc_stream_open_fn open;
    rpc_stream_closed_fn closed;
    void *ctx;
};

/* Requests at least this large are followed by malloc_trim(0); failed receives (a message over
 * the limit) by one once no call has completed for RPC_TRIM_QUIET_MS. */
#define RPC_TRIM_QUIET_MS 100
#define RPC_TRIM_AFTER_BYTES (64u * 1024u)

struct rpc_server {
    char *socket_path; /* or, with tcp, the host:port listened on */
    bool tcp;
    bool trim_pending; /* a failed receive: malloc_trim when the queue is quiet (cq thread) */
    /* The socket we bound (device, inode): only that one is ours to chmod and remove. */
    bool have_sock_id;
    dev_t sock_dev;
    ino_t sock_ino;
    struct rpc_method *methods;
    size_t n_methods;

    grpc_server *server;
    grpc_completion_queue *cq;
    pthread_t thread;
    bool thread_started;
    bool started;
    bool grpc_inited;

    /* The call being requested; touched by the cq thread only once started. */
    struct rpc_tag request_tag;
    struct rpc_tag shutdown_tag;
    grpc_call *new_call;
    grpc_call_details new_details;
    grpc_metadata_array new_md;

    pthread_mutex_t lock; /* guards everything below; taken before any stream lock */
    pthread_cond_t cond;
    bool stopping;
    bool stopped;
    bool shutdown_done;
    size_t n_live_calls;             /* calls whose grpc_call is not yet released */
    struct rpc_stream *open_streams; /* accepted, not yet closed */
    size_t n_streams;
};

enum stream_state {
    ST_OPENING,   /* open handler running: sends are queued, not started */
    ST_OPEN,      /* accepted: sends flow */
    ST_FINISHING, /* status requested: flushes the queue, then sends it */
    ST_ENDED,     /* over on the wire (or refused): sends fail */
};

/* A server call. Unary calls use the same object (recv, then one status batch). */
struct rpc_stream {
    pthread_mutex_t lock; /* guards the fields below `lock` */
    struct rpc_server *srv;
    const struct rpc_method *m; /* NULL: unknown method */
    grpc_call *call;
    struct rpc_tag recv_tag, send_tag, status_tag, close_tag;
    grpc_byte_buffer *recv_buf;
    int cancelled;

    int refs;
    enum stream_state state;
    bool accepted;
    bool md_sent;
    bool send_inflight;
    bool status_started;
    int n_ops; /* batches in flight */
    grpc_byte_buffer *inflight;
    grpc_byte_buffer *queue[RPC_STREAM_MAX_QUEUED];
    size_t q_head, n_queued;
    int fin_code;
    char *fin_msg;
    struct rpc_stream *next, *prev; /* srv->open_streams, under srv->lock */
};

static struct rpc_stream *stream_new(struct rpc_server *srv, grpc_call *call,
                                     const struct rpc_method *m)
{
    struct rpc_stream *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    pthread_mutex_init(&s->lock, NULL);
    s->srv = srv;
    s->m = m;
    s->call = call;
    s->refs = 1; /* the call's own reference, dropped when the grpc_call is released */
    s->state = ST_OPENING;
    s->recv_tag = (struct rpc_tag){TAG_RECV, s};
    s->send_tag = (struct rpc_tag){TAG_SEND, s};
    s->status_tag = (struct rpc_tag){TAG_STATUS, s};
    s->close_tag = (struct rpc_tag){TAG_CLOSE, s};
    return s;
}

static void queue_drop_locked(struct rpc_stream *s)
{
    while (s->n_queued > 0) {
        grpc_byte_buffer_destroy(s->queue[s->q_head]);
        s->q_head = (s->q_head + 1) % RPC_STREAM_MAX_QUEUED;
        s->n_queued--;
    }
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
    pthread_mutex_destroy(&stream->lock);
    free(stream);
}

/* Starts the next batch of a stream if none is running: a queued message, or the final
 * status once the queue is empty. Called with s->lock held; grpc_call_start_batch is not
 * to be entered by two threads at once for one call, which the lock also guarantees. */
static void stream_kick_locked(struct rpc_stream *s)
{
    grpc_op ops[2];
    size_t n = 0;
    grpc_slice details;

    if (s->send_inflight || s->status_started || !s->call)
        return;
    if (s->state != ST_OPEN && s->state != ST_FINISHING)
        return;
    memset(ops, 0, sizeof(ops));
    if (!s->md_sent) {
        ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
        n++;
    }
    if (s->n_queued > 0) {
        s->inflight = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % RPC_STREAM_MAX_QUEUED;
        s->n_queued--;
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = s->inflight;
        n++;
        if (grpc_call_start_batch(s->call, ops, n, &s->send_tag, NULL) != GRPC_CALL_OK) {
            grpc_byte_buffer_destroy(s->inflight);
            s->inflight = NULL;
            queue_drop_locked(s);
            return;
        }
        s->md_sent = true;
        s->send_inflight = true;
        s->n_ops++;
        return;
    }
    if (s->state != ST_FINISHING)
        return;
    details = grpc_slice_from_copied_string(s->fin_msg ? s->fin_msg : "");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = (grpc_status_code)s->fin_code;
    ops[n].data.send_status_from_server.status_details = s->fin_msg ? &details : NULL;
    n++;
    if (grpc_call_start_batch(s->call, ops, n, &s->status_tag, NULL) == GRPC_CALL_OK) {
        s->md_sent = true;
        s->status_started = true;
        s->n_ops++;
    }
    grpc_slice_unref(details);
}

int rpc_stream_send(struct rpc_stream *stream, const uint8_t *msg, size_t len)
{
    grpc_byte_buffer *bb;
    int r = 0;

    if (len > RPC_MAX_MESSAGE_BYTES)
        return -EMSGSIZE;
    pthread_mutex_lock(&stream->lock);
    if (stream->state != ST_OPENING && stream->state != ST_OPEN) {
        r = -EPIPE;
        goto out;
    }
    if (stream->n_queued >= RPC_STREAM_MAX_QUEUED) {
        r = -ENOBUFS;
        goto out;
    }
    bb = bytes_to_bb(msg, len);
    if (!bb) {
        r = -ENOMEM;
        goto out;
    }
    stream->queue[(stream->q_head + stream->n_queued) % RPC_STREAM_MAX_QUEUED] = bb;
    stream->n_queued++;
    stream_kick_locked(stream);
out:
    pthread_mutex_unlock(&stream->lock);
    return r;
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
    if (s->state == ST_OPEN) {
        s->state = ST_FINISHING;
        stream_kick_locked(s);
    } else {
        s->state = ST_FINISHING; /* sent once the open handler has accepted */
    }
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

/* Releases the grpc_call once the call is over and no batch is in flight; the call's own
 * reference goes with it. cq thread only; s->lock must not be held. */
static void call_maybe_release(struct rpc_stream *s)
{
    struct rpc_server *srv = s->srv;
    grpc_call *call = NULL;

    pthread_mutex_lock(&s->lock);
    if (s->state == ST_ENDED && s->n_ops == 0 && s->call) {
        call = s->call;
        s->call = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (!call)
        return;
    grpc_call_unref(call);
    if (s->recv_buf) {
        grpc_byte_buffer_destroy(s->recv_buf);
        s->recv_buf = NULL;
    }
    pthread_mutex_lock(&srv->lock);
    srv->n_live_calls--;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
    rpc_stream_unref(s);
}

/* Ends a call that is not (or no longer) an open stream with a status and RECV_CLOSE. */
static void call_send_status(struct rpc_stream *s, int code, const char *msg,
                             const struct strbuf *resp)
{
    grpc_op ops[4];
    size_t n = 0;
    grpc_slice details = grpc_slice_from_copied_string(msg ? msg : "");
    grpc_byte_buffer *bb = NULL;

    memset(ops, 0, sizeof(ops));
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (code == RPC_OK && resp) {
        bb = bytes_to_bb((const uint8_t *)resp->buf, resp->len);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = bb;
        n++;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = (grpc_status_code)code;
    ops[n].data.send_status_from_server.status_details = msg && *msg ? &details : NULL;
    n++;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n].data.recv_close_on_server.cancelled = &s->cancelled;
    n++;
    pthread_mutex_lock(&s->lock);
    s->state = ST_ENDED;
    if (grpc_call_start_batch(s->call, ops, n, &s->status_tag, NULL) == GRPC_CALL_OK)
        s->n_ops++;
    pthread_mutex_unlock(&s->lock);
    grpc_slice_unref(details);
    if (bb)
        grpc_byte_buffer_destroy(bb);
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

static void call_run_unary(struct rpc_stream *s, const uint8_t *req, size_t len)
{
    struct strbuf resp = STRBUF_INIT;
    struct rpc_status st = {RPC_OK, ""};
    int r;

    resp.max_len = RPC_MAX_MESSAGE_BYTES;
    r = s->m->unary(s->m->ctx, req, len, &resp, &st);
    status_from_errno(&st, r);
    call_send_status(s, st.code, st.code == RPC_OK ? NULL : st.message, &resp);
    strbuf_release(&resp);
}

static void call_run_stream_open(struct rpc_stream *s, const uint8_t *req, size_t len)
{
    struct rpc_server *srv = s->srv;
    struct rpc_status st = {RPC_OK, ""};
    grpc_op op;
    int r;

    /* The handler's reference exists before it runs: it may hand it on or drop it inside. */
    rpc_stream_ref(s);
    r = s->m->open(s->m->ctx, req, len, s, &st);
    status_from_errno(&st, r);
    if (st.code != RPC_OK) {
        pthread_mutex_lock(&s->lock);
        queue_drop_locked(s);
        pthread_mutex_unlock(&s->lock);
        call_send_status(s, st.code, st.message, NULL);
        rpc_stream_unref(s); /* refused: the handler keeps none */
        return;
    }

    pthread_mutex_lock(&srv->lock);
    pthread_mutex_lock(&s->lock);
    s->accepted = true;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &s->cancelled;
    if (grpc_call_start_batch(s->call, &op, 1, &s->close_tag, NULL) == GRPC_CALL_OK)
        s->n_ops++;
    s->next = srv->open_streams;
    if (srv->open_streams)
        srv->open_streams->prev = s;
    srv->open_streams = s;
    srv->n_streams++;
    if (s->state == ST_OPENING)
        s->state = ST_OPEN;
    if (srv->stopping)
        stream_finish_locked(s, RPC_UNAVAILABLE, "server is stopping");
    stream_kick_locked(s);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&srv->lock);
}

static void on_recv(struct rpc_stream *s, bool ok)
{
    size_t len;
    grpc_slice req;

    if (!ok || !s->recv_buf) {
        /* The client went away or half-closed without a request message, or sent one over
         * the limit: gRPC read up to 4 MiB of it into buffers it frees again; that memory
         * goes back to the system once the burst is over (server_main) */
        call_send_status(s, RPC_INVALID_ARGUMENT, "request message missing", NULL);
        s->srv->trim_pending = true;
        return;
    }
    if (bb_to_slice(s->recv_buf, &req) < 0) {
        call_send_status(s, RPC_INTERNAL, "cannot read request message", NULL);
        return;
    }
    if (s->m->streaming)
        call_run_stream_open(s, GRPC_SLICE_START_PTR(req), GRPC_SLICE_LENGTH(req));
    else
        call_run_unary(s, GRPC_SLICE_START_PTR(req), GRPC_SLICE_LENGTH(req));
    len = GRPC_SLICE_LENGTH(req);
    grpc_slice_unref(req);
    /* a large request (up to 4 MiB, ~50,000 IDs) leaves its unpacked copies in the heap's
     * free lists for good (RSS 16-42 MiB seen): hand the memory back to the system */
    if (len >= RPC_TRIM_AFTER_BYTES)
        malloc_trim(0);
}

static void on_send(struct rpc_stream *s, bool ok)
{
    pthread_mutex_lock(&s->lock);
    grpc_byte_buffer_destroy(s->inflight);
    s->inflight = NULL;
    s->send_inflight = false;
    s->n_ops--;
    if (ok)
        stream_kick_locked(s);
    else
        queue_drop_locked(s);
    pthread_mutex_unlock(&s->lock);
}

static void on_close(struct rpc_stream *s)
{
    struct rpc_server *srv = s->srv;
    bool notify;

    pthread_mutex_lock(&srv->lock);
    pthread_mutex_lock(&s->lock);
    s->state = ST_ENDED;
    s->n_ops--;
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
    }
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&srv->lock);
    /* a call gRPC cancelled (a message over the limit among others) may leave megabytes of
     * freed buffers: given back once the queue is quiet (server_main, this thread) */
    if (s->cancelled)
        srv->trim_pending = true;
    if (notify && s->m->closed)
        s->m->closed(s->m->ctx, s, s->cancelled != 0);
}

static void server_on_new_call(struct rpc_server *srv)
{
    const struct rpc_method *m = NULL;
    struct rpc_stream *s;
    grpc_call *call = srv->new_call;
    grpc_op op;

    srv->new_call = NULL;
    for (size_t i = 0; i < srv->n_methods; i++)
        if (grpc_slice_str_cmp(srv->new_details.method, srv->methods[i].path) == 0)
            m = &srv->methods[i];
    s = stream_new(srv, call, m);
    if (!s) {
        grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL);
        grpc_call_unref(call);
        return;
    }
    pthread_mutex_lock(&srv->lock);
    srv->n_live_calls++;
    pthread_mutex_unlock(&srv->lock);
    if (!m) {
        char *path = grpc_slice_to_c_string(srv->new_details.method);
        char msg[RPC_STATUS_MSG_MAX];

        snprintf(msg, sizeof(msg), "unknown method %s", path ? path : "?");
        gpr_free(path);
        call_send_status(s, RPC_UNIMPLEMENTED, msg, NULL);
        call_maybe_release(s);
        return;
    }
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv_buf;
    pthread_mutex_lock(&s->lock);
    if (grpc_call_start_batch(call, &op, 1, &s->recv_tag, NULL) == GRPC_CALL_OK)
        s->n_ops++;
    else
        s->state = ST_ENDED;
    pthread_mutex_unlock(&s->lock);
    call_maybe_release(s);
}

/* Asks for the next incoming call, unless stopping. cq thread (or start, before it). */
static void server_request_next(struct rpc_server *srv)
{
    bool stopping;

    pthread_mutex_lock(&srv->lock);
    stopping = srv->stopping;
    pthread_mutex_unlock(&srv->lock);
    if (stopping)
        return;
    grpc_call_details_destroy(&srv->new_details);
    grpc_metadata_array_destroy(&srv->new_md);
    grpc_call_details_init(&srv->new_details);
    grpc_metadata_array_init(&srv->new_md);
    grpc_server_request_call(srv->server, &srv->new_call, &srv->new_details, &srv->new_md, srv->cq,
                             srv->cq, &srv->request_tag);
}

static void server_dispatch(struct rpc_server *srv, struct rpc_tag *tag, bool ok)
{
    struct rpc_stream *s = tag->call;

    switch (tag->kind) {
    case TAG_REQUEST_CALL:
        if (!ok)
            return; /* shutting down */
        server_on_new_call(srv);
        server_request_next(srv);
        return;
    case TAG_SHUTDOWN:
        pthread_mutex_lock(&srv->lock);
        srv->shutdown_done = true;
        pthread_cond_broadcast(&srv->cond);
        pthread_mutex_unlock(&srv->lock);
        return;
    case TAG_RECV:
        pthread_mutex_lock(&s->lock);
        s->n_ops--;
        pthread_mutex_unlock(&s->lock);
        on_recv(s, ok);
        break;
    case TAG_SEND:
        on_send(s, ok);
        break;
    case TAG_STATUS:
        pthread_mutex_lock(&s->lock);
        s->n_ops--;
        if (!s->accepted)
            s->state = ST_ENDED; /* unary/refused: RECV_CLOSE was in this batch */
        pthread_mutex_unlock(&s->lock);
        break;
    case TAG_CLOSE:
        on_close(s);
        break;
    }
    call_maybe_release(s);
}

static void *server_thread(void *arg)
{
    struct rpc_server *srv = arg;

    for (;;) {
        gpr_timespec until = srv->trim_pending ? deadline_after_ms(RPC_TRIM_QUIET_MS)
                                               : gpr_inf_future(GPR_CLOCK_MONOTONIC);
        grpc_event ev = grpc_completion_queue_next(srv->cq, until, NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type == GRPC_QUEUE_TIMEOUT && srv->trim_pending) {
            srv->trim_pending = false;
            malloc_trim(0);
        }
        if (ev.type == GRPC_OP_COMPLETE)
            server_dispatch(srv, ev.tag, ev.success != 0);
    }
    return NULL;
}

static int server_new(const char *socket_path, bool tcp, struct rpc_server **ret, struct error *err)
{
    struct rpc_server *srv = NULL;
    int r;

    r = tcp ? (socket_path && *socket_path ? 0 : error_set(err, -EINVAL, "address is empty"))
            : check_socket_path(socket_path, err);
    if (r < 0)
        return r;
    srv = calloc(1, sizeof(*srv));
    if (!srv)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&srv->lock, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&srv->cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    grpc_call_details_init(&srv->new_details);
    grpc_metadata_array_init(&srv->new_md);
    srv->request_tag = (struct rpc_tag){TAG_REQUEST_CALL, NULL};
    srv->shutdown_tag = (struct rpc_tag){TAG_SHUTDOWN, NULL};
    srv->tcp = tcp;
    srv->socket_path = strdup(socket_path);
    if (!srv->socket_path) {
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

/* Mode 0600 on the socket gRPC just bound, without following a link and without a race:
 * the path is opened O_PATH|O_NOFOLLOW, the inode checked to be a socket, and the mode set
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

int rpc_server_start(struct rpc_server *srv, struct error *err)
{
    grpc_server_credentials *creds = NULL;
    grpc_arg args[1];
    grpc_channel_args chargs = {GS_ARRAY_SIZE(args), args};
    struct strbuf addr = STRBUF_INIT;
    int r;

    if (srv->started)
        return error_set(err, -EBUSY, "server on '%s' already started", srv->socket_path);
    r = srv->tcp ? 0 : remove_stale_socket(srv->socket_path, err);
    if (r < 0)
        goto out;
    r = srv->tcp ? strbuf_puts(&addr, srv->socket_path)
                 : strbuf_printf(&addr, "unix:%s", srv->socket_path);
    if (r < 0) {
        r = error_set(err, r, "out of memory");
        goto out;
    }
    rpc_grpc_init();
    srv->grpc_inited = true;
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = (int)RPC_MAX_MESSAGE_BYTES;
    srv->cq = grpc_completion_queue_create_for_next(NULL);
    srv->server = grpc_server_create(&chargs, NULL);
    grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
    creds = grpc_insecure_server_credentials_create();
    if (!grpc_server_add_http2_port(srv->server, strbuf_str(&addr), creds)) {
        r = error_set(err, -EADDRNOTAVAIL,
                      srv->tcp ? "cannot listen on '%s' (is the port taken?)"
                               : "cannot listen on '%s' (does the directory exist and is it "
                                 "writable?)",
                      srv->socket_path);
        goto out;
    }
    /* Connecting needs write permission on the socket: 0600 limits it to our user. */
    r = srv->tcp ? 0 : secure_socket(srv, err);
    if (r < 0)
        goto out;
    /* The thread first: after it nothing can fail, so a started server always has one. */
    r = pthread_create(&srv->thread, NULL, server_thread, srv);
    if (r != 0) {
        r = error_set(err, -r, "cannot start server thread: %s", strerror(r));
        if (rpc_server_socket_is_ours(srv))
            unlink(srv->socket_path);
        goto out;
    }
    srv->thread_started = true;
    grpc_server_start(srv->server);
    srv->started = true;
    server_request_next(srv);
    r = 0;
out:
    if (creds)
        grpc_server_credentials_release(creds);
    strbuf_release(&addr);
    return r;
}

/* Waits on srv->cond until *flag (a field under srv->lock) or the deadline. */
static bool server_wait(struct rpc_server *srv, const bool *flag, const size_t *count,
                        int timeout_ms)
{
    struct timespec ts;
    bool done;

    /* srv->cond waits on the monotonic clock: a wall-clock step cannot stretch the wait */
    time_deadline(&ts, CLOCK_MONOTONIC, (unsigned)(timeout_ms > 0 ? timeout_ms : 0));
    pthread_mutex_lock(&srv->lock);
    for (;;) {
        done = flag ? *flag : *count == 0;
        if (done || pthread_cond_timedwait(&srv->cond, &srv->lock, &ts) == ETIMEDOUT)
            break;
    }
    done = flag ? *flag : *count == 0;
    pthread_mutex_unlock(&srv->lock);
    return done;
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

    grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->shutdown_tag);
    if (!server_wait(srv, &srv->shutdown_done, NULL, RPC_STOP_GRACE_MS)) {
        grpc_server_cancel_all_calls(srv->server);
        server_wait(srv, &srv->shutdown_done, NULL, INT_MAX / 2);
    }
    if (!server_wait(srv, NULL, &srv->n_live_calls, RPC_STOP_GRACE_MS)) {
        grpc_server_cancel_all_calls(srv->server);
        server_wait(srv, NULL, &srv->n_live_calls, INT_MAX / 2);
    }
    /* gRPC's order: server shut down, then destroyed, then its completion queue. */
    grpc_server_destroy(srv->server);
    srv->server = NULL;
    grpc_completion_queue_shutdown(srv->cq);
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
    if (srv->server && !srv->started) {
        /* bound but never started (start failed after add_http2_port, e.g. the socket was
         * replaced before its mode was set): gRPC asserts that a server with listeners is
         * shut down before it is destroyed */
        grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->shutdown_tag);
        for (;;) {
            grpc_event ev =
                grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
            if (ev.type == GRPC_QUEUE_SHUTDOWN ||
                (ev.type == GRPC_OP_COMPLETE && ev.tag == &srv->shutdown_tag))
                break;
        }
    }
    if (srv->server)
        grpc_server_destroy(srv->server);
    if (srv->cq) {
        if (!srv->started) {
            grpc_completion_queue_shutdown(srv->cq);
            while (grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
                       .type != GRPC_QUEUE_SHUTDOWN)
                ;
        }
        grpc_completion_queue_destroy(srv->cq);
    }
    grpc_call_details_destroy(&srv->new_details);
    grpc_metadata_array_destroy(&srv->new_md);
    if (srv->grpc_inited)
        grpc_shutdown();
    for (size_t i = 0; i < srv->n_methods; i++)
        free(srv->methods[i].path);
    free(srv->methods);
    free(srv->socket_path);
    pthread_cond_destroy(&srv->cond);
    pthread_mutex_destroy(&srv->lock);
    free(srv);
}

/* ---- client -------------------------------------------------------------------------------- */

static void cq_drain_destroy(grpc_completion_queue *cq);

struct rpc_client {
    char *socket_path;
    grpc_channel *channel;
};

int rpc_client_new(const char *socket_path, const struct rpc_client_opts *opts,
                   struct rpc_client **ret, struct error *err)
{
    struct rpc_client *c = NULL;
    grpc_channel_credentials *creds = NULL;
    struct strbuf target = STRBUF_INIT;
    size_t max_recv = opts && opts->max_recv_bytes ? opts->max_recv_bytes : RPC_MAX_MESSAGE_BYTES;
    grpc_arg args[6];
    grpc_channel_args chargs = {GS_ARRAY_SIZE(args), args};
    int r;

    r = check_socket_path(socket_path, err);
    if (r < 0)
        return r;
    if (max_recv > INT_MAX)
        max_recv = INT_MAX;
    c = calloc(1, sizeof(*c));
    if (!c)
        return error_set(err, -ENOMEM, "out of memory");
    c->socket_path = strdup(socket_path);
    r = strbuf_printf(&target, "unix:%s", socket_path);
    if (!c->socket_path || r < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    rpc_grpc_init();
    args[0].type = GRPC_ARG_STRING;
    args[0].key = (char *)GRPC_ARG_DEFAULT_AUTHORITY;
    args[0].value.string = (char *)(opts && opts->authority ? opts->authority : "localhost");
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[1].value.integer = (int)max_recv;
    /* A call reaches the server at most once. */
    args[2].type = GRPC_ARG_INTEGER;
    args[2].key = (char *)GRPC_ARG_ENABLE_RETRIES;
    args[2].value.integer = 0;
    /* A restarted peer (kubelet, plugin) is found again quickly. */
    args[3].type = GRPC_ARG_INTEGER;
    args[3].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
    args[3].value.integer = 100;
    args[4].type = GRPC_ARG_INTEGER;
    args[4].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
    args[4].value.integer = 1000;
    /* The connection belongs to this client and goes with it. */
    args[5].type = GRPC_ARG_INTEGER;
    args[5].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
    args[5].value.integer = 1;
    creds = grpc_insecure_credentials_create();
    c->channel = grpc_channel_create(strbuf_str(&target), creds, &chargs);
    grpc_channel_credentials_release(creds);
    if (!c->channel) {
        grpc_shutdown();
        r = error_set(err, -ENOMEM, "cannot create channel to '%s'", socket_path);
        goto out;
    }
    *ret = c;
    c = NULL;
    r = 0;
out:
    strbuf_release(&target);
    rpc_client_free(c);
    return r;
}

/* gRPC 1.51 leaks the socket of a connection attempt still in progress when its channel is
 * destroyed (a client that cancels a call at once and goes away): let the attempt settle
 * first, for at most RPC_CONNECT_SETTLE_MS. */
static void channel_settle(grpc_channel *ch)
{
    grpc_connectivity_state state = grpc_channel_check_connectivity_state(ch, 0);
    grpc_completion_queue *cq;
    struct rpc_tag tag = {TAG_STATUS, NULL};

    if (state != GRPC_CHANNEL_CONNECTING)
        return;
    cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_channel_watch_connectivity_state(ch, state, deadline_after_ms(RPC_CONNECT_SETTLE_MS), cq,
                                          &tag);
    grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    cq_drain_destroy(cq);
}

void rpc_client_free(struct rpc_client *c)
{
    if (!c)
        return;
    if (c->channel) {
        channel_settle(c->channel);
        grpc_channel_destroy(c->channel);
        grpc_shutdown();
    }
    free(c->socket_path);
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

static void cq_drain_destroy(grpc_completion_queue *cq)
{
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
}

static grpc_call *client_create_call(struct rpc_client *c, grpc_completion_queue *cq,
                                     const char *method, int timeout_ms)
{
    grpc_slice m = grpc_slice_from_copied_string(method);
    grpc_call *call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m,
                                               NULL, deadline_after_ms(timeout_ms), NULL);

    grpc_slice_unref(m);
    return call;
}

int rpc_client_unary(struct rpc_client *c, const char *method, const uint8_t *req, size_t len,
                     int timeout_ms, uint8_t **ret_resp, size_t *ret_len, struct rpc_status *st,
                     struct error *err)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_byte_buffer *req_bb = bytes_to_bb(req, len);
    grpc_byte_buffer *resp_bb = NULL;
    grpc_metadata_array md, trailers;
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    struct rpc_status status = {RPC_OK, ""};
    grpc_call *call = NULL;
    struct rpc_tag tag = {TAG_STATUS, NULL};
    grpc_op ops[6];
    grpc_event ev;
    uint8_t *resp = NULL;
    size_t resp_len = 0;
    int r;

    grpc_metadata_array_init(&md);
    grpc_metadata_array_init(&trailers);
    call = client_create_call(c, cq, method, timeout_ms);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = req_bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &resp_bb;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailers;
    ops[5].data.recv_status_on_client.status = &code;
    ops[5].data.recv_status_on_client.status_details = &details;
    if (!call || grpc_call_start_batch(call, ops, GS_ARRAY_SIZE(ops), &tag, NULL) != GRPC_CALL_OK) {
        r = error_set(err, -EIO, "%s on '%s': cannot start call", method, c->socket_path);
        goto out;
    }
    ev = grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
        r = error_set(err, -EIO, "%s on '%s': call did not complete", method, c->socket_path);
        goto out;
    }
    status_from_slice(&status, code, details);
    if (status.code == RPC_OK && !resp_bb)
        rpc_status_set(&status, RPC_INTERNAL, "server sent no response message");
    if (status.code == RPC_OK && bb_to_bytes(resp_bb, &resp, &resp_len) < 0)
        rpc_status_set(&status, RPC_INTERNAL, "cannot read response message");
    if (st)
        *st = status;
    if (status.code != RPC_OK) {
        r = call_failed(method, c->socket_path, &status, err);
        goto out;
    }
    *ret_resp = resp;
    *ret_len = resp_len;
    resp = NULL;
    r = 0;
out:
    free(resp);
    if (call)
        grpc_call_unref(call);
    cq_drain_destroy(cq);
    grpc_byte_buffer_destroy(req_bb);
    if (resp_bb)
        grpc_byte_buffer_destroy(resp_bb);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&md);
    grpc_metadata_array_destroy(&trailers);
    return r;
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

struct rpc_client_stream {
    struct rpc_client *c;
    char *method;
    grpc_completion_queue *cq;
    grpc_call *call;
    struct rpc_tag start_tag, msg_tag, status_tag;
    bool start_pending, msg_pending, status_pending, ended;
    grpc_byte_buffer *req_bb;
    grpc_byte_buffer *msg_bb;
    grpc_metadata_array md, trailers;
    grpc_status_code code;
    grpc_slice details;
};

int rpc_client_stream_open(struct rpc_client *c, const char *method, const uint8_t *req, size_t len,
                           struct rpc_client_stream **ret, struct error *err)
{
    struct rpc_client_stream *s;
    grpc_op ops[4];
    int r;

    s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    s->c = c;
    s->start_tag = (struct rpc_tag){TAG_SEND, NULL};
    s->msg_tag = (struct rpc_tag){TAG_RECV, NULL};
    s->status_tag = (struct rpc_tag){TAG_STATUS, NULL};
    s->details = grpc_empty_slice();
    grpc_metadata_array_init(&s->md);
    grpc_metadata_array_init(&s->trailers);
    s->method = strdup(method);
    s->cq = grpc_completion_queue_create_for_pluck(NULL);
    s->call = client_create_call(c, s->cq, method, 0);
    s->req_bb = bytes_to_bb(req, len);
    if (!s->method || !s->call || !s->req_bb) {
        r = error_set(err, -ENOMEM, "%s on '%s': cannot create call", method, c->socket_path);
        goto out;
    }
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->req_bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->md;
    if (grpc_call_start_batch(s->call, ops, 4, &s->start_tag, NULL) != GRPC_CALL_OK) {
        r = error_set(err, -EIO, "%s on '%s': cannot start call", method, c->socket_path);
        goto out;
    }
    s->start_pending = true;
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &s->trailers;
    ops[0].data.recv_status_on_client.status = &s->code;
    ops[0].data.recv_status_on_client.status_details = &s->details;
    if (grpc_call_start_batch(s->call, ops, 1, &s->status_tag, NULL) != GRPC_CALL_OK) {
        r = error_set(err, -EIO, "%s on '%s': cannot start call", method, c->socket_path);
        goto out;
    }
    s->status_pending = true;
    *ret = s;
    s = NULL;
    r = 0;
out:
    rpc_client_stream_close(s);
    return r;
}

static void pluck(grpc_completion_queue *cq, struct rpc_tag *tag, bool *pending)
{
    if (!*pending)
        return;
    grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    *pending = false;
}

int rpc_client_stream_next(struct rpc_client_stream *s, int timeout_ms, uint8_t **ret_msg,
                           size_t *ret_len, struct rpc_status *st, struct error *err)
{
    struct rpc_status status;
    grpc_event ev;
    grpc_op op;
    int r;

    if (s->ended)
        return error_set(err, -EPIPE, "%s on '%s': stream already ended", s->method,
                         s->c->socket_path);
    if (!s->msg_pending) {
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_RECV_MESSAGE;
        op.data.recv_message.recv_message = &s->msg_bb;
        if (grpc_call_start_batch(s->call, &op, 1, &s->msg_tag, NULL) != GRPC_CALL_OK)
            return error_set(err, -EIO, "%s on '%s': cannot receive", s->method, s->c->socket_path);
        s->msg_pending = true;
    }
    ev = grpc_completion_queue_pluck(s->cq, &s->msg_tag, deadline_after_ms(timeout_ms), NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT)
        return error_set(err, -ETIMEDOUT, "%s on '%s': no message within %d ms", s->method,
                         s->c->socket_path, timeout_ms);
    s->msg_pending = false;
    if (s->msg_bb) {
        r = bb_to_bytes(s->msg_bb, ret_msg, ret_len);
        grpc_byte_buffer_destroy(s->msg_bb);
        s->msg_bb = NULL;
        if (r < 0)
            return error_set(err, r, "%s on '%s': cannot read message", s->method,
                             s->c->socket_path);
        return 1;
    }
    /* No message: the stream is over; its status says how. */
    pluck(s->cq, &s->status_tag, &s->status_pending);
    pluck(s->cq, &s->start_tag, &s->start_pending);
    s->ended = true;
    status_from_slice(&status, s->code, s->details);
    if (st)
        *st = status;
    if (status.code != RPC_OK)
        return call_failed(s->method, s->c->socket_path, &status, err);
    return 0;
}

void rpc_client_stream_close(struct rpc_client_stream *s)
{
    if (!s)
        return;
    if (s->call) {
        if (!s->ended)
            grpc_call_cancel(s->call, NULL);
        pluck(s->cq, &s->msg_tag, &s->msg_pending);
        pluck(s->cq, &s->status_tag, &s->status_pending);
        pluck(s->cq, &s->start_tag, &s->start_pending);
        grpc_call_unref(s->call);
    }
    if (s->cq)
        cq_drain_destroy(s->cq);
    if (s->msg_bb)
        grpc_byte_buffer_destroy(s->msg_bb);
    if (s->req_bb)
        grpc_byte_buffer_destroy(s->req_bb);
    grpc_slice_unref(s->details);
    grpc_metadata_array_destroy(&s->md);
    grpc_metadata_array_destroy(&s->trailers);
    free(s->method);
    free(s);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* rpc: a thin gRPC layer over unix sockets (and TCP for probes) for the kubelet APIs — a
 * server with unary (immediate or deferred) and server-streaming handlers, and a client
 * with deadlines. Messages are raw protobuf bytes here (callers pack/unpack with
 * protobuf-c), so this layer knows no service and includes nothing above base/. Only
 * the files of src/rpc include nghttp2; no HTTP/2 type appears below. Library code: it never logs
 * above debug. Contract, threading and limits: docs/internals/rpc.md. */
#ifndef GS_RPC_RPC_H
#define GS_RPC_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* gRPC status codes (the wire values of grpc-status). */
enum rpc_code {
    RPC_OK = 0,
    RPC_CANCELLED = 1,
    RPC_UNKNOWN = 2,
    RPC_INVALID_ARGUMENT = 3,
    RPC_DEADLINE_EXCEEDED = 4,
    RPC_NOT_FOUND = 5,
    RPC_ALREADY_EXISTS = 6,
    RPC_PERMISSION_DENIED = 7,
    RPC_RESOURCE_EXHAUSTED = 8,
    RPC_FAILED_PRECONDITION = 9,
    RPC_ABORTED = 10,
    RPC_OUT_OF_RANGE = 11,
    RPC_UNIMPLEMENTED = 12,
    RPC_INTERNAL = 13,
    RPC_UNAVAILABLE = 14,
    RPC_DATA_LOSS = 15,
    RPC_UNAUTHENTICATED = 16,
};

#define RPC_STATUS_MSG_MAX 512
/* Largest message either side accepts by default: grpc-go's (kubelet's) receive limit. */
#define RPC_MAX_MESSAGE_BYTES (4u * 1024u * 1024u)
/* Messages a server stream may hold queued before rpc_stream_send() says -ENOBUFS. */
#define RPC_STREAM_MAX_QUEUED 256
/* Bytes (framing included) a stream may hold queued; the same -ENOBUFS past it. */
#define RPC_STREAM_MAX_QUEUED_BYTES (16u * 1024u * 1024u)

/* A gRPC status: code plus grpc-message (UTF-8, truncated to fit). */
struct rpc_status {
    int code; /* enum rpc_code */
    char message[RPC_STATUS_MSG_MAX];
};

/* Sets st (may be NULL) to code + formatted message. */
void rpc_status_set(struct rpc_status *st, int code, const char *fmt, ...) GS_PRINTF(3, 4);
/* grpc-go's name for a code ("InvalidArgument"), as kubelet prints it in
 * "rpc error: code = <Name> desc = ..."; out-of-range codes give "Unknown". Static. */
const char *rpc_code_name(int code);

/* ---- server -------------------------------------------------------------------------------- */

struct rpc_server;
struct rpc_stream;

/* Unary handler. `req` is the request message (borrowed for the call). The handler appends
 * the response message to `resp` (binary; strbuf_append) and returns 0, or sets `st` to a
 * non-OK status (sent with its message as grpc-status/grpc-message; resp is ignored). A
 * negative return with st still OK is sent as UNKNOWN with strerror's text. Runs on the
 * server's thread: it must not block for long and must not call rpc_server_stop/free. */
typedef int (*rpc_unary_fn)(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                            struct rpc_status *st);

/* Deferred (asynchronous) unary handler: it takes ownership of `call` and answers it later,
 * exactly once, with rpc_call_finish() from any thread (or from inside the handler). `req`
 * is borrowed for the duration of the handler only: copy or decode what the answer needs.
 * Runs on the server's thread: it must hand the work on rather than do it (it must not
 * block), and must not call rpc_server_stop/free. Until finished, the call counts as running
 * (rpc_server_stop() gives it the stop grace). */
struct rpc_call;
typedef void (*rpc_unary_async_fn)(void *ctx, struct rpc_call *call, const uint8_t *req,
                                   size_t req_len);

/* Server-streaming open handler, called on the server's thread when a client starts the
 * stream. To accept, return 0 with st OK: the handler then holds one reference to `stream`
 * and must give it back with rpc_stream_unref() exactly once (any thread, any time; also
 * allowed inside the closed callback). To refuse, set st (or return < 0): the call ends with
 * that status, the handler holds no reference and `closed` is not called. */
typedef int (*rpc_stream_open_fn)(void *ctx, const uint8_t *req, size_t req_len,
                                  struct rpc_stream *stream, struct rpc_status *st);
/* Called once on the server's thread when an accepted stream ends: the client cancelled or
 * went away (peer_cancelled true), or the stream was finished by rpc_stream_finish() or by
 * the server stopping (false). Already when it runs, rpc_stream_send() fails with -EPIPE.
 * May be NULL. */
typedef void (*rpc_stream_closed_fn)(void *ctx, struct rpc_stream *stream, bool peer_cancelled);

/* Creates a stopped server for `socket_path` (unix socket path, < 108 bytes). Register the
 * methods, then rpc_server_start(). *ret is owned by the caller: rpc_server_free(). */
int rpc_server_new(const char *socket_path, struct rpc_server **ret, struct error *err);
/* The same on a TCP address ("0.0.0.0:51516", "[::]:51516"), plaintext: only for what the
 * kubelet probes over the pod network (the gRPC health service of NVIDIA's chart). */
int rpc_server_new_tcp(const char *host_port, struct rpc_server **ret, struct error *err);
/* Drops connections that sent no HTTP/2 preface within preface_ms of being accepted, or
 * that have no call and sent nothing for idle_ms (GOAWAY, then closed); 0 turns either off.
 * Defaults: TCP 5 s and 60 s (a probe port must not be held by silent peers), unix sockets
 * none. Only before rpc_server_start() (-EBUSY after). At the connection cap a TCP server
 * also closes its idlest connection without a call to take a new one. */
int rpc_server_set_conn_timeouts(struct rpc_server *srv, int preface_ms, int idle_ms,
                                 struct error *err);
/* The TCP port a started TCP server listens on (the one the kernel picked for port 0); -1
 * for a unix socket or before start. */
int rpc_server_tcp_port(const struct rpc_server *srv);
/* Registers a handler by full method path ("/v1beta1.DevicePlugin/Allocate"); `ctx` is
 * passed back to it. Only before rpc_server_start(). -EEXIST for a duplicate path, -EBUSY
 * once started. Calls to unregistered paths get UNIMPLEMENTED. */
int rpc_server_add_unary(struct rpc_server *srv, const char *method, rpc_unary_fn fn, void *ctx,
                         struct error *err);
int rpc_server_add_stream(struct rpc_server *srv, const char *method, rpc_stream_open_fn open,
                          rpc_stream_closed_fn closed, void *ctx, struct error *err);
/* The same for a deferred unary handler (see rpc_unary_async_fn). */
int rpc_server_add_unary_async(struct rpc_server *srv, const char *method, rpc_unary_async_fn fn,
                               void *ctx, struct error *err);
/* Removes a stale socket at the path (a non-socket file there is an error, -EEXIST), binds,
 * sets mode 0600 (never through a link) and starts serving: when it returns 0 a client can connect.
 * Any
 * `:authority` is accepted (kubelet sends "localhost" or the socket path). Once only. */
int rpc_server_start(struct rpc_server *srv, struct error *err);
/* Ends every open stream with UNAVAILABLE "server is stopping" (the closed callbacks run),
 * lets running calls finish (cancelling them after 1 s), stops the thread and removes the
 * socket file. Idempotent; must not be called from a handler or callback. */
void rpc_server_stop(struct rpc_server *srv);
/* True while the path is still the socket this server bound (same device and inode): a file
 * put in its place, a removed or re-created path all answer false. */
bool rpc_server_socket_is_ours(const struct rpc_server *srv);
/* Stops the server if needed and frees it. Accepts NULL. Streams still referenced by their
 * handler stay valid (sends fail with -EPIPE) until their last rpc_stream_unref(). */
void rpc_server_free(struct rpc_server *srv);
/* Number of server streams currently open (accepted and not yet closed). Thread-safe. */
size_t rpc_server_n_streams(struct rpc_server *srv);

/* Queues one message on an open stream. Thread-safe: any thread may send at any time;
 * messages go out in the order queued. Returns 0, -EPIPE when the stream has ended or is
 * finishing, -ENOBUFS when RPC_STREAM_MAX_QUEUED messages are already waiting (slow
 * client; also when RPC_STREAM_MAX_QUEUED_BYTES are), -EMSGSIZE above RPC_MAX_MESSAGE_BYTES,
 * -ENOMEM. `msg` is copied. */
int rpc_stream_send(struct rpc_stream *stream, const uint8_t *msg, size_t len);
/* Queues msg as the stream's only unsent message: messages queued earlier and not yet
 * begun on the wire are dropped (one already part-sent finishes first). For streams where
 * only the newest message matters (ListAndWatch sends the full list each time): a client
 * that stops reading holds one message, not a queue. Returns as rpc_stream_send(). */
int rpc_stream_send_latest(struct rpc_stream *stream, const uint8_t *msg, size_t len);
/* Ends the stream with `st` (NULL means OK) after the queued messages are sent. The closed
 * callback follows. Returns -EPIPE when already ended or finishing. Thread-safe. */
int rpc_stream_finish(struct rpc_stream *stream, const struct rpc_status *st);
/* True while the stream can still take messages. Thread-safe. */
bool rpc_stream_is_open(struct rpc_stream *stream);
/* Takes an extra reference (for handing the stream to another owner); returns stream. */
struct rpc_stream *rpc_stream_ref(struct rpc_stream *stream);
/* Drops one reference; the memory goes with the last one. Accepts NULL. */
void rpc_stream_unref(struct rpc_stream *stream);

/* Answers a deferred unary call and gives the handler's ownership of `call` back: `call` is
 * invalid afterwards, whatever the return. `st` NULL or OK sends `resp` (len bytes, copied;
 * more than RPC_MAX_MESSAGE_BYTES becomes RESOURCE_EXHAUSTED); any other status is sent with
 * its message and `resp` is ignored. Thread-safe: wakes the server's thread, which sends the
 * answer. Returns 0, or -EPIPE when the call had already ended (the client cancelled or went
 * away, its grpc-timeout passed and the server answered DEADLINE_EXCEEDED, or the server
 * stopped): a late finish is harmless and sends nothing. */
int rpc_call_finish(struct rpc_call *call, const uint8_t *resp, size_t len,
                    const struct rpc_status *st);
/* True once the call has ended without this handler's answer (cancelled, gone, past its
 * deadline, server stopped): work for it may be skipped, but rpc_call_finish() is still
 * owed. Thread-safe. */
bool rpc_call_cancelled(struct rpc_call *call);

/* ---- client -------------------------------------------------------------------------------- */

struct rpc_client;
struct rpc_client_stream;

struct rpc_client_opts {
    /* `:authority` to send; NULL means "localhost" (what kubelet >= 1.26 sends). Set it to
     * the socket path to act like kubelet <= 1.25. */
    const char *authority;
    /* Largest response message accepted; 0 means RPC_MAX_MESSAGE_BYTES. Larger ones fail
     * with RESOURCE_EXHAUSTED. */
    size_t max_recv_bytes;
};

/* A connection to `socket_path`, reused by every call made through it (the connection is
 * made on the first call and re-made after failures). Thread-safe: calls and streams may
 * run from several threads at once. `opts` may be NULL. Owned: rpc_client_free(). */
int rpc_client_new(const char *socket_path, const struct rpc_client_opts *opts,
                   struct rpc_client **ret, struct error *err);
/* Frees the client. Streams opened on it must be closed first. Accepts NULL. */
void rpc_client_free(struct rpc_client *c);

/* One unary call with a deadline (timeout_ms > 0; <= 0 means none). On success returns 0
 * and *ret_resp (owned, free()) / *ret_len hold the response message (*ret_resp may be
 * non-NULL with length 0). Otherwise returns a negative errno and fills err with
 * "rpc error: code = <Name> desc = <message>" plus the method: -ETIMEDOUT for
 * DEADLINE_EXCEEDED, -ECONNREFUSED for UNAVAILABLE (nobody serving the socket), -ECANCELED
 * for CANCELLED, -EREMOTEIO for any other non-OK status. `st` (may be NULL) receives the
 * status whenever the call completed, OK included. The server never sees a retry. */
int rpc_client_unary(struct rpc_client *c, const char *method, const uint8_t *req, size_t len,
                     int timeout_ms, uint8_t **ret_resp, size_t *ret_len, struct rpc_status *st,
                     struct error *err);
/* rpc_client_new + rpc_client_unary + rpc_client_free, for a one-off call. */
int rpc_client_call(const char *socket_path, const char *method, const uint8_t *req, size_t len,
                    int timeout_ms, uint8_t **ret_resp, size_t *ret_len, struct rpc_status *st,
                    struct error *err);

/* Starts a server-streaming call (one request message, a stream of responses). Nothing is
 * waited for here: connection errors come out of the first rpc_client_stream_next(). *ret
 * is owned: rpc_client_stream_close(). Use one stream from one thread at a time. */
int rpc_client_stream_open(struct rpc_client *c, const char *method, const uint8_t *req, size_t len,
                           struct rpc_client_stream **ret, struct error *err);
/* Waits up to timeout_ms (<= 0: forever) for the next message. Returns 1 with the message
 * in *ret_msg (owned, free()) / *ret_len; 0 when the stream ended with status OK;
 * -ETIMEDOUT when nothing came in time (the stream stays usable: call again); otherwise the
 * stream ended with a non-OK status, mapped as in rpc_client_unary(), with st and err
 * filled. After 0 or an error other than -ETIMEDOUT, only close is allowed. */
int rpc_client_stream_next(struct rpc_client_stream *s, int timeout_ms, uint8_t **ret_msg,
                           size_t *ret_len, struct rpc_status *st, struct error *err);
/* Cancels the call if still running (the server sees the client go away) and frees it.
 * Accepts NULL. */
void rpc_client_stream_close(struct rpc_client_stream *s);

#endif

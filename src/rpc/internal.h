/* SPDX-License-Identifier: Apache-2.0 */
/* rpc/internal.h: the HTTP/2 and gRPC wire pieces shared inside src/rpc (rpc_h2.c, used by
 * rpc.c, the server, and rpc_client.c, the client). Never included from outside src/rpc
 * (the unit test of the pure pieces aside). Includes nothing above base/. */
#ifndef GS_RPC_INTERNAL_H
#define GS_RPC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rpc/rpc.h"

/* ---- rpc wire (rpc_h2.c): pure gRPC-over-HTTP/2 pieces ------------------------------------ */

/* Length-prefixed message framing: 1 flag byte (compressed), 4 bytes big-endian length. */
#define RPC__FRAME_HDR 5

/* An nghttp2_nv initializer for a literal header name and a NUL-terminated value. */
#define RPC__NV(name, value)                                                                       \
    {                                                                                              \
        (uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, strlen(value), 0                  \
    }

/* Writes the 5-byte prefix of an uncompressed message of `len` bytes. */
void rpc__frame_header(uint8_t hdr[RPC__FRAME_HDR], size_t len);
/* Looks at the bytes received so far on a call. Returns 1 when a whole message is there
 * (*ret_len: its length; it starts at buf + RPC__FRAME_HDR), 0 when more bytes are needed
 * (*ret_len: the announced length once the prefix is in, else 0), -EPROTO for a compressed
 * message (we never offer compression, so a peer must not send one). */
int rpc__frame_next(const uint8_t *buf, size_t len, size_t *ret_len);
/* grpc-message percent-encoding (gRPC's PROTOCOL-HTTP2): bytes outside 0x20..0x7e and '%'
 * become %XX. Writes at most out_size bytes, NUL included; truncates whole escapes only. */
void rpc__percent_encode(const char *in, char *out, size_t out_size);
/* The reverse, for a received grpc-message; malformed escapes are kept as they are. */
void rpc__percent_decode(const uint8_t *in, size_t len, char *out, size_t out_size);
/* The grpc-timeout value for a deadline timeout_ms (> 0) from now: at most 8 digits and a
 * unit, as the protocol demands ("250m", "100000S"). `out` holds at least 16 bytes. */
void rpc__timeout_value(int timeout_ms, char *out, size_t out_size);
/* Parses a grpc-timeout value (1..8 digits and a unit H, M, S, m, u or n) into
 * milliseconds, rounded up. 0 or -EINVAL for a malformed value. */
int rpc__parse_timeout(const uint8_t *v, size_t len, uint64_t *ret_ms);
/* The gRPC code for an HTTP response that carried no grpc-status (gRPC's http-grpc-status
 * mapping: 400 Internal, 401 Unauthenticated, 403 PermissionDenied, 404 Unimplemented,
 * 429/502/503/504 Unavailable, anything else Unknown). */
int rpc__code_from_http(int http_status);
/* Parses a grpc-status header value (decimal, 0..99); -1 when malformed. */
int rpc__parse_status(const uint8_t *v, size_t len);

/* "socket path is empty" / too long for sun_path: 0 or -EINVAL/-ENAMETOOLONG with err. */
int rpc__check_socket_path(const char *path, struct error *err);

/* ---- rpc connections (rpc_h2.c): one nghttp2 session on a non-blocking socket ----------- */

struct nghttp2_session;
struct pollfd;

/* One connection: the socket and its HTTP/2 session. Owned by one loop thread, never
 * touched from another. */
struct rpc__conn {
    int fd;
    struct nghttp2_session *h2;
    uint8_t *out; /* bytes the session produced that the socket did not take yet */
    size_t out_len, out_off;
    bool goaway; /* the peer sent GOAWAY, or we did: no new calls on it */
    bool dead;   /* read/write failed or EOF: close it */
    /* Server side: RST_STREAM frames for streams the client never opened are dropped
     * before nghttp2 sees them (see rpc_h2.c); the frame reader's state. */
    bool drop_idle_resets;
    bool dropping;
    size_t preface_left, frame_left, hdr_len;
    uint8_t hdr[9];
    size_t n_calls_seen; /* calls ever opened on it (server: trims the heap at close) */
    uint64_t accepted_ms, last_active_ms; /* monotonic: accepted, last bytes read */
    void *owner;                          /* the server or client it belongs to */
    void *calls;                          /* the owner's list of calls on this connection */
    struct rpc__conn *next;
};

/* Sends what the session has to send, as far as the socket takes it. 0, or < 0 when the
 * connection is broken (marks it dead). */
int rpc__conn_flush(struct rpc__conn *c);
/* Feeds received bytes to the session, through the frame reader that drops resets of
 * streams never opened when c->drop_idle_resets (server side). Bytes may come split
 * anywhere. 0, or -EPROTO when the session refuses them. */
int rpc__conn_feed(struct rpc__conn *c, const uint8_t *buf, size_t n);
/* Reads what the socket has and feeds it to the session (its callbacks run here). 0, or
 * < 0 on EOF, a socket error or a protocol error (marks it dead). */
int rpc__conn_read(struct rpc__conn *c);
/* poll() events the connection waits for now (0: dead, or the session is over and
 * flushed: close it). */
short rpc__conn_events(const struct rpc__conn *c);
/* Frees the session, closes the socket and frees c. Accepts NULL. */
void rpc__conn_free(struct rpc__conn *c);
/* Takes c out of the list at *list and frees it. */
void rpc__conn_remove(struct rpc__conn **list, struct rpc__conn *c);
/* The poll set of a loop thread, kept between turns. Zero-initialise; release when done. */
struct rpc__poller {
    struct pollfd *pfd;
    size_t cap;
};

/* One turn of a loop thread: polls wake_fd, listen_fd (< 0: none) and every connection in
 * `conns` for up to timeout_ms (-1: until something happens), drains the eventfd and moves
 * bytes on the connections that are ready (their session callbacks run here). Connections
 * are neither added nor removed. Returns true when listen_fd has connections to accept. */
bool rpc__poll(struct rpc__poller *p, int wake_fd, int listen_fd, struct rpc__conn *conns,
               int timeout_ms);
void rpc__poller_release(struct rpc__poller *p);
/* A non-blocking eventfd for waking a loop thread; -errno on failure. */
int rpc__wake_fd(void);
/* Wakes the loop that polls `fd` (never fails visibly: a full counter is already a wake). */
void rpc__wake(int fd);
/* Clears pending wakes. */
void rpc__wake_drain(int fd);

#endif

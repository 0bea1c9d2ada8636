/* SPDX-License-Identifier: Apache-2.0 */
/* h2peer: a bare HTTP/2 client for the rpc tests, on nghttp2 directly (no gRPC layer), so a
 * test can do what the C client never does: send a request whose message never completes,
 * announce a huge message, leave a call open with no deadline of its own, and see the
 * server's own status and when it came. */
#ifndef GS_TEST_H2PEER_H
#define GS_TEST_H2PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct h2peer_call {
    /* in */
    const char *path;    /* ":path" */
    const char *timeout; /* grpc-timeout value, NULL for none */
    const uint8_t *body; /* bytes of the request body (gRPC framing included) */
    size_t body_len;
    bool end;          /* END_STREAM after the body; false: the request stays open */
    const char *extra; /* value of an "x-extra" header, NULL for none */
    int wait_ms;       /* give up after this long */
    /* out */
    int status;         /* grpc-status, -1 when none came */
    char message[256];  /* grpc-message (not decoded) */
    uint64_t status_ms; /* ms from the request until the status arrived */
    bool closed;        /* the stream closed (status, reset, or the connection went) */
    uint8_t data[512];  /* the response body's first bytes (gRPC framing included) */
    size_t data_len;
    uint32_t max_streams;     /* the server's SETTINGS_MAX_CONCURRENT_STREAMS */
    uint32_t max_header_list; /* the server's SETTINGS_MAX_HEADER_LIST_SIZE */
};

/* Runs one call on a new connection to the unix socket `path`, or to TCP 127.0.0.1:`port`
 * when path is NULL. 0 once the stream closed or wait_ms passed; -errno when the
 * connection could not be made. */
int h2peer_run(const char *path, int port, struct h2peer_call *call);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* rpc_h2: the wire pieces under the rpc layer. Pure gRPC-over-HTTP/2 helpers (message
 * framing, grpc-message escapes, grpc-timeout, HTTP status mapping) and the pump that moves
 * bytes between a non-blocking socket and its nghttp2 session. No threads and no timers
 * here: the loops in rpc.c (server) and rpc_client.c (client) own the connections. */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <poll.h>

#include "rpc/internal.h"

/* One read() per wake-up at most this large; the session takes it in one go. */
#define RPC_READ_CHUNK (64u * 1024u)
/* grpc-timeout values have at most 8 digits (gRPC's PROTOCOL-HTTP2). */
#define RPC_TIMEOUT_MAX_DIGITS 99999999L
/* A loop thread that cannot grow its poll set waits this long and tries again. */
#define RPC_NOMEM_RETRY_MS 10

/* ---- pure wire helpers -------------------------------------------------------------------- */

void rpc__frame_header(uint8_t hdr[RPC__FRAME_HDR], size_t len)
{
    hdr[0] = 0;
    hdr[1] = (uint8_t)(len >> 24);
    hdr[2] = (uint8_t)(len >> 16);
    hdr[3] = (uint8_t)(len >> 8);
    hdr[4] = (uint8_t)len;
}

int rpc__frame_next(const uint8_t *buf, size_t len, size_t *ret_len)
{
    size_t n;

    *ret_len = 0;
    if (len < RPC__FRAME_HDR)
        return 0;
    if (buf[0] != 0)
        return -EPROTO;
    n = ((size_t)buf[1] << 24) | ((size_t)buf[2] << 16) | ((size_t)buf[3] << 8) | buf[4];
    *ret_len = n;
    return len - RPC__FRAME_HDR >= n ? 1 : 0;
}

void rpc__percent_encode(const char *in, char *out, size_t out_size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    if (out_size == 0)
        return;
    for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p; p++) {
        bool plain = *p >= 0x20 && *p <= 0x7e && *p != '%';
        size_t need = plain ? 1 : 3;

        if (o + need >= out_size)
            break;
        if (plain) {
            out[o++] = (char)*p;
            continue;
        }
        out[o++] = '%';
        out[o++] = hex[*p >> 4];
        out[o++] = hex[*p & 0xf];
    }
    out[o] = '\0';
}

void rpc__percent_decode(const uint8_t *in, size_t len, char *out, size_t out_size)
{
    size_t o = 0;

    if (out_size == 0)
        return;
    for (size_t i = 0; i < len && o + 1 < out_size; i++) {
        int hi = i + 2 < len ? str_hex_digit(in[i + 1]) : -1;
        int lo = i + 2 < len ? str_hex_digit(in[i + 2]) : -1;

        if (in[i] == '%' && hi >= 0 && lo >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = (char)in[i];
        }
    }
    out[o] = '\0';
}

void rpc__timeout_value(int timeout_ms, char *out, size_t out_size)
{
    long v = timeout_ms > 0 ? timeout_ms : 1;

    if (v <= RPC_TIMEOUT_MAX_DIGITS)
        snprintf(out, out_size, "%ldm", v);
    else
        snprintf(out, out_size, "%ldS", (v + 999) / 1000);
}

int rpc__parse_timeout(const uint8_t *v, size_t len, uint64_t *ret_ms)
{
    uint64_t n = 0;

    if (len < 2 || len > 9)
        return -EINVAL;
    for (size_t i = 0; i + 1 < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -EINVAL;
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    switch (v[len - 1]) {
    case 'H':
        *ret_ms = n * 3600000u;
        return 0;
    case 'M':
        *ret_ms = n * 60000u;
        return 0;
    case 'S':
        *ret_ms = n * 1000u;
        return 0;
    case 'm':
        *ret_ms = n;
        return 0;
    case 'u': /* rounded up: a deadline never comes early */
        *ret_ms = (n + 999u) / 1000u;
        return 0;
    case 'n':
        *ret_ms = (n + 999999u) / 1000000u;
        return 0;
    default:
        return -EINVAL;
    }
}

int rpc__code_from_http(int http_status)
{
    switch (http_status) {
    case 400:
        return RPC_INTERNAL;
    case 401:
        return RPC_UNAUTHENTICATED;
    case 403:
        return RPC_PERMISSION_DENIED;
    case 404:
        return RPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
        return RPC_UNAVAILABLE;
    default:
        return RPC_UNKNOWN;
    }
}

int rpc__parse_status(const uint8_t *v, size_t len)
{
    int code = 0;

    if (len == 0 || len > 2)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        code = code * 10 + (v[i] - '0');
    }
    return code;
}

int rpc__check_socket_path(const char *path, struct error *err)
{
    if (!path || !*path)
        return error_set(err, -EINVAL, "socket path is empty");
    if (strlen(path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
        return error_set(err, -ENAMETOOLONG, "socket path '%s' is longer than %zu bytes", path,
                         sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
    return 0;
}

/* ---- the connection pump ------------------------------------------------------------------ */

/* Writes as much of buf as the socket takes; returns the count, or -errno. */
static ssize_t send_some(int fd, const uint8_t *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = send(fd, buf + done, len - done, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n < 0)
            return -errno;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

/* Keeps what the socket did not take, to send once it is writable again. */
static int keep_rest(struct rpc__conn *c, const uint8_t *rest, size_t len)
{
    uint8_t *buf = malloc(len);

    if (!buf)
        return -ENOMEM;
    memcpy(buf, rest, len);
    free(c->out);
    c->out = buf;
    c->out_len = len;
    c->out_off = 0;
    return 0;
}

int rpc__conn_flush(struct rpc__conn *c)
{
    while (!c->dead) {
        const uint8_t *data = NULL;
        ssize_t n, sent;

        if (c->out_off < c->out_len) {
            sent = send_some(c->fd, c->out + c->out_off, c->out_len - c->out_off);
            if (sent < 0)
                goto dead;
            c->out_off += (size_t)sent;
            if (c->out_off < c->out_len)
                return 0; /* the socket is full: wait for POLLOUT */
            free(c->out);
            c->out = NULL;
            c->out_len = c->out_off = 0;
        }
        n = nghttp2_session_mem_send(c->h2, &data);
        if (n < 0)
            goto dead;
        if (n == 0)
            return 0;
        sent = send_some(c->fd, data, (size_t)n);
        if (sent < 0)
            goto dead;
        if (sent < n && keep_rest(c, data + sent, (size_t)(n - sent)) < 0)
            goto dead;
    }
    return -EPIPE;
dead:
    c->dead = true;
    return -EPIPE;
}

static int feed(struct rpc__conn *c, const uint8_t *p, size_t len)
{
    return len == 0 || nghttp2_session_mem_recv(c->h2, p, len) >= 0 ? 0 : -EPROTO;
}

/* A frame header is complete: decides whether its frame reaches the session. gRPC's C core
 * client resets a call it cancels right after starting with an RST_STREAM for a stream
 * whose HEADERS it never sent (seen 1-6 times per 1,000 cancels). HTTP/2 calls that a
 * connection error and nghttp2 ends the connection for it, taking the client's other calls
 * along; gRPC's own servers and grpc-go ignore such a reset. So do we. */
static int frame_begin(struct rpc__conn *c)
{
    const uint8_t *h = c->hdr;
    size_t len = ((size_t)h[0] << 16) | ((size_t)h[1] << 8) | h[2];
    uint32_t sid =
        (((uint32_t)h[5] & 0x7f) << 24) | ((uint32_t)h[6] << 16) | ((uint32_t)h[7] << 8) | h[8];

    c->hdr_len = 0;
    c->frame_left = len;
    c->dropping = h[3] == NGHTTP2_RST_STREAM && (sid & 1) &&
                  (int32_t)sid > nghttp2_session_get_last_proc_stream_id(c->h2);
    return c->dropping ? 0 : feed(c, h, sizeof(c->hdr));
}

/* Feeds received bytes to the session, frame by frame, leaving out dropped frames. */
static int feed_filtered(struct rpc__conn *c, const uint8_t *buf, size_t n)
{
    size_t i = 0;
    int r = 0;

    while (i < n && r == 0) {
        size_t k;

        if (c->preface_left > 0 || c->frame_left > 0) {
            size_t *left = c->preface_left > 0 ? &c->preface_left : &c->frame_left;
            bool skip = left == &c->frame_left && c->dropping;

            k = *left < n - i ? *left : n - i;
            r = skip ? 0 : feed(c, buf + i, k);
            *left -= k;
            i += k;
            continue;
        }
        k = sizeof(c->hdr) - c->hdr_len < n - i ? sizeof(c->hdr) - c->hdr_len : n - i;
        memcpy(c->hdr + c->hdr_len, buf + i, k);
        c->hdr_len += k;
        i += k;
        if (c->hdr_len == sizeof(c->hdr))
            r = frame_begin(c);
    }
    return r;
}

int rpc__conn_feed(struct rpc__conn *c, const uint8_t *buf, size_t n)
{
    return c->drop_idle_resets ? feed_filtered(c, buf, n) : feed(c, buf, n);
}

int rpc__conn_read(struct rpc__conn *c)
{
    uint8_t buf[RPC_READ_CHUNK];

    while (!c->dead) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            break; /* EOF or a socket error */
        c->last_active_ms = time_now_ms();
        if (rpc__conn_feed(c, buf, (size_t)n) < 0)
            break;
        if ((size_t)n < sizeof(buf))
            return 0;
    }
    c->dead = true;
    return -ECONNRESET;
}

short rpc__conn_events(const struct rpc__conn *c)
{
    short ev = 0;

    if (c->dead)
        return 0;
    if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2) &&
        c->out_off >= c->out_len)
        return 0;
    if (nghttp2_session_want_read(c->h2))
        ev |= POLLIN;
    /* the session's own frames were flushed before the poll: only a full socket waits */
    if (c->out_off < c->out_len)
        ev |= POLLOUT;
    return ev;
}

void rpc__conn_free(struct rpc__conn *c)
{
    if (!c)
        return;
    nghttp2_session_del(c->h2);
    if (c->fd >= 0)
        close(c->fd);
    free(c->out);
    free(c);
}

void rpc__conn_remove(struct rpc__conn **list, struct rpc__conn *c)
{
    for (struct rpc__conn **p = list; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    rpc__conn_free(c);
}

bool rpc__poll(struct rpc__poller *p, int wake_fd, int listen_fd, struct rpc__conn *conns,
               int timeout_ms)
{
    size_t n = 0, want = listen_fd >= 0 ? 2 : 1, i;
    bool listen_ready = false;

    for (struct rpc__conn *c = conns; c; c = c->next)
        want++;
    if (want > p->cap) {
        struct pollfd *pfd = realloc(p->pfd, want * 2 * sizeof(*pfd));

        if (!pfd) {
            poll(NULL, 0, RPC_NOMEM_RETRY_MS);
            return false;
        }
        p->pfd = pfd;
        p->cap = want * 2;
    }
    p->pfd[n++] = (struct pollfd){wake_fd, POLLIN, 0};
    if (listen_fd >= 0)
        p->pfd[n++] = (struct pollfd){listen_fd, POLLIN, 0};
    for (struct rpc__conn *c = conns; c; c = c->next)
        p->pfd[n++] = (struct pollfd){c->fd, rpc__conn_events(c), 0};
    if (poll(p->pfd, n, timeout_ms) < 0)
        return false;
    if (p->pfd[0].revents)
        rpc__wake_drain(wake_fd);
    listen_ready = listen_fd >= 0 && p->pfd[1].revents != 0;
    i = listen_fd >= 0 ? 2 : 1;
    /* the same order as the set was built in */
    for (struct rpc__conn *c = conns; c && i < n; c = c->next, i++) {
        if (p->pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
            rpc__conn_read(c);
        if (p->pfd[i].revents & POLLOUT)
            rpc__conn_flush(c);
    }
    return listen_ready;
}

void rpc__poller_release(struct rpc__poller *p)
{
    free(p->pfd);
    *p = (struct rpc__poller){0};
}

int rpc__wake_fd(void)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

    return fd < 0 ? -errno : fd;
}

void rpc__wake(int fd)
{
    uint64_t one = 1;

    /* EAGAIN means the counter is full, which is a pending wake already */
    if (write(fd, &one, sizeof(one)) < 0)
        return;
}

void rpc__wake_drain(int fd)
{
    uint64_t n;

    while (read(fd, &n, sizeof(n)) > 0)
        ;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* h2peer: a bare HTTP/2 client for the rpc tests (see h2peer.h). One connection, one
 * stream, pumped with poll() until the stream closes or the caller's time is up. */
#include "h2peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/base.h"

struct peer {
    int fd;
    struct h2peer_call *call;
    size_t sent;
    int32_t id;
    uint64_t t0;
};

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE                 \
    }

static ssize_t on_send(nghttp2_session *h2, const uint8_t *data, size_t len, int flags, void *user)
{
    struct peer *p = user;
    ssize_t n = send(p->fd, data, len, MSG_NOSIGNAL);

    (void)h2, (void)flags;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return NGHTTP2_ERR_WOULDBLOCK;
    return n < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : n;
}

static ssize_t on_recv(nghttp2_session *h2, uint8_t *buf, size_t len, int flags, void *user)
{
    struct peer *p = user;
    ssize_t n = recv(p->fd, buf, len, 0);

    (void)h2, (void)flags;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return NGHTTP2_ERR_WOULDBLOCK;
    if (n == 0)
        return NGHTTP2_ERR_EOF;
    return n < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : n;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    struct peer *p = user;

    (void)h2, (void)flags;
    if (frame->hd.stream_id != p->id)
        return 0;
    if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        p->call->status = 0;
        for (size_t i = 0; i < valuelen; i++)
            p->call->status = p->call->status * 10 + (value[i] - '0');
        p->call->status_ms = time_now_ms() - p->t0;
    } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
        snprintf(p->call->message, sizeof(p->call->message), "%.*s", (int)valuelen, value);
    }
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
    struct peer *p = user;
    size_t room = sizeof(p->call->data) - p->call->data_len;

    (void)h2, (void)flags;
    if (id != p->id)
        return 0;
    if (len > room)
        len = room;
    memcpy(p->call->data + p->call->data_len, data, len);
    p->call->data_len += len;
    return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *user)
{
    struct peer *p = user;

    (void)h2, (void)code;
    if (id == p->id)
        p->call->closed = true;
    return 0;
}

static ssize_t body_read(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *user)
{
    struct peer *p = user;
    size_t n = p->call->body_len - p->sent;

    (void)h2, (void)id, (void)src;
    if (n > len)
        n = len;
    if (n)
        memcpy(buf, p->call->body + p->sent, n);
    p->sent += n;
    if (p->sent == p->call->body_len) {
        if (p->call->end)
            *flags |= NGHTTP2_DATA_FLAG_EOF;
        else if (n == 0)
            return NGHTTP2_ERR_DEFERRED; /* the rest never comes */
    }
    return (ssize_t)n;
}

static int peer_connect(const char *path, int port)
{
    int fd;

    if (path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        str_copy(sa.sun_path, path, sizeof(sa.sun_path));
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
    } else {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        struct pollfd pf;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
        pf = (struct pollfd){.fd = fd, .events = POLLOUT};
        if (fd >= 0 && errno == EINPROGRESS && poll(&pf, 1, 5000) == 1)
            return fd;
    }
    if (fd >= 0)
        close(fd);
    return -ECONNREFUSED;
}

int h2peer_run(const char *path, int port, struct h2peer_call *call)
{
    nghttp2_nv nv[] = {NV(":method", "POST"),
                       NV(":scheme", "http"),
                       NV(":path", call->path),
                       NV(":authority", "localhost"),
                       NV("content-type", "application/grpc"),
                       NV("te", "trailers"),
                       NV("grpc-timeout", call->timeout ? call->timeout : ""),
                       NV("x-extra", call->extra ? call->extra : "")};
    size_t nvlen = GS_ARRAY_SIZE(nv) - 2;
    nghttp2_data_provider prd = {.read_callback = body_read};
    nghttp2_session_callbacks *cbs = NULL;
    nghttp2_session *h2 = NULL;
    struct peer p = {.call = call, .t0 = time_now_ms()};
    uint64_t end = p.t0 + (uint64_t)call->wait_ms;

    call->status = -1;
    call->message[0] = '\0';
    call->closed = false;
    call->data_len = 0;
    p.fd = peer_connect(path, port);
    if (p.fd < 0)
        return p.fd;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_send_callback(cbs, on_send);
    nghttp2_session_callbacks_set_recv_callback(cbs, on_recv);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_client_new(&h2, cbs, &p);
    nghttp2_submit_settings(h2, NGHTTP2_FLAG_NONE, NULL, 0);
    if (call->timeout)
        nv[nvlen++] = nv[GS_ARRAY_SIZE(nv) - 2];
    if (call->extra)
        nv[nvlen++] = nv[GS_ARRAY_SIZE(nv) - 1];
    p.id = nghttp2_submit_request(h2, NULL, nv, nvlen, &prd, NULL);
    while (!call->closed && time_now_ms() < end) {
        struct pollfd pf = {.fd = p.fd, .events = POLLIN};

        if (nghttp2_session_send(h2) != 0)
            break;
        if (nghttp2_session_want_write(h2))
            pf.events |= POLLOUT;
        if (poll(&pf, 1, 20) > 0 && nghttp2_session_recv(h2) != 0)
            break;
        if (!nghttp2_session_want_read(h2) && !nghttp2_session_want_write(h2))
            break;
    }
    call->max_streams =
        nghttp2_session_get_remote_settings(h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    call->max_header_list =
        nghttp2_session_get_remote_settings(h2, NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE);
    nghttp2_session_del(h2);
    nghttp2_session_callbacks_del(cbs);
    close(p.fd);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* http.c: metrics_server over libmicrohttpd's internal polling thread (metrics.h). The
 * handler copies what the daemon published under a mutex; /healthz and /metrics round-trip
 * a ping through the daemon's loop (which re-publishes first), so /metrics is current and a
 * loop stuck in a call fails the liveness probe. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "metrics/metrics.h"

/* libmicrohttpd is loaded with dlopen when an endpoint is started, never linked: it pulls
 * in GnuTLS, p11-kit and nettle (+2.5 MiB resident), which a daemon without
 * --metrics-address should not pay for. The calls we make, resolved once: */
struct mhd_api {
    struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                       MHD_AccessHandlerCallback, void *, ...);
    void (*stop_daemon)(struct MHD_Daemon *);
    struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
                                                        enum MHD_ResponseMemoryMode);
    enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
    enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    void (*destroy_response)(struct MHD_Response *);
    const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *, enum MHD_DaemonInfoType,
                                                   ...);
    const char *(*lookup_value)(struct MHD_Connection *, enum MHD_ValueKind, const char *);
    const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *,
                                                           enum MHD_ConnectionInfoType, ...);
};
#define MHD_SYM(field, name) DL_SYMBOL(struct mhd_api, field, name)
static const struct dl_symbol mhd_symbols[] = {
    MHD_SYM(start_daemon, "MHD_start_daemon"),
    MHD_SYM(stop_daemon, "MHD_stop_daemon"),
    MHD_SYM(create_response_from_buffer, "MHD_create_response_from_buffer"),
    MHD_SYM(add_response_header, "MHD_add_response_header"),
    MHD_SYM(queue_response, "MHD_queue_response"),
    MHD_SYM(destroy_response, "MHD_destroy_response"),
    MHD_SYM(get_daemon_info, "MHD_get_daemon_info"),
    MHD_SYM(lookup_value, "MHD_lookup_connection_value"),
    MHD_SYM(get_connection_info, "MHD_get_connection_info"),
};
#undef MHD_SYM
/* The process-wide table, written once under mhd_lock and read-only after (like the logger's
 * configuration, the one kind of global STYLE.md allows: set once, then only read). */
static struct mhd_api mhd;
static bool mhd_loaded;
static pthread_mutex_t mhd_lock = PTHREAD_MUTEX_INITIALIZER;

static int mhd_load(struct error *err)
{
    static const char *const names[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};
    struct error e = {0};
    int r = 0;

    pthread_mutex_lock(&mhd_lock);
    if (!mhd_loaded) {
        r = dl_load_table(names, GS_ARRAY_SIZE(names), mhd_symbols, GS_ARRAY_SIZE(mhd_symbols),
                          &mhd, sizeof(mhd), NULL, &e); /* stays loaded for the process */
        if (r < 0)
            error_set(err, r, "--metrics-address: %s; install Debian's libmicrohttpd12", e.msg);
        mhd_loaded = r == 0;
    }
    pthread_mutex_unlock(&mhd_lock);
    return r;
}

/* What keeps /healthz and /readyz answering while other clients misbehave (idle or
 * slowloris connections, issue 19): one client address holds at most HTTP_PER_IP
 * connections; clients from elsewhere than the node (the kubelet probes from the node) share
 * HTTP_REMOTE_MAX of the HTTP_CONNECTIONS slots, so the rest stay free for the probes; a
 * connection idle for HTTP_IDLE_S is closed. "The node" is this host's own addresses (a pod
 * with hostNetwork), and for a pod on the pod network the node's addresses there as the pod
 * sees them (issue 29): the next hops of its default routes (bridge CNIs, Cilium: the kubelet
 * probes from the pod's gateway) and NODE_IP / HOST_IP when the manifest sets them from the
 * downward API's status.hostIP (CNIs whose probe source is the node's primary address).
 * Requests are served from one epoll thread and never block on a slow client. */
#define HTTP_CONNECTIONS 256u
#define HTTP_REMOTE_MAX 224u
#define HTTP_PER_IP 8u
#define HTTP_IDLE_S 5u
#define HTTP_MAX_LOCAL_ADDRS 64

struct metrics_server {
    struct MHD_Daemon *mhd;
    /* this host's addresses at start, and connections from elsewhere now open (touched by
     * the epoll thread only) */
    struct sockaddr_storage local[HTTP_MAX_LOCAL_ADDRS];
    size_t n_local;
    unsigned n_remote;
    unsigned port;
    int ping_fd; /* eventfd: the loop reads it and calls metrics_server_pong() */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char *text; /* /metrics body */
    size_t text_len;
    bool ready;
    char reason[256];
    unsigned long long pongs;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, size_t len)
{
    struct MHD_Response *resp =
        mhd.create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result r;

    if (!resp)
        return MHD_NO;
    mhd.add_response_header(resp, "Content-Type", type);
    r = mhd.queue_response(c, status, resp);
    mhd.destroy_response(resp);
    return r;
}

/* Pings the loop and waits for its pong. */
static bool loop_alive(struct metrics_server *s)
{
    uint64_t one = 1;
    unsigned long long before;
    struct timespec ts;
    bool alive;

    pthread_mutex_lock(&s->lock);
    before = s->pongs;
    if (write(s->ping_fd, &one, sizeof(one)) != sizeof(one)) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    time_deadline(&ts, CLOCK_MONOTONIC, METRICS_HEALTHZ_TIMEOUT_MS);
    while (s->pongs == before && pthread_cond_timedwait(&s->cond, &s->lock, &ts) != ETIMEDOUT)
        ;
    alive = s->pongs != before;
    pthread_mutex_unlock(&s->lock);
    return alive;
}

int metrics_openmetrics(const char *text, struct strbuf *out)
{
    int r = 0;
    for (const char *l = text; r == 0 && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) + 1 : strlen(l);
        /* a counter family is named without _total in OpenMetrics; its samples keep it */
        const char *name = NULL;
        if (strncmp(l, "# TYPE ", 7) == 0 || strncmp(l, "# HELP ", 7) == 0)
            name = l + 7;
        const char *sp = name ? memchr(name, ' ', n - 7) : NULL;
        bool counter_family = false;
        if (sp && sp - name > 6 && strncmp(sp - 6, "_total", 6) == 0) {
            /* only when the family is a counter: look for its TYPE line */
            struct strbuf key = STRBUF_INIT;
            (void)strbuf_printf(&key, "# TYPE %.*s counter\n", (int)(sp - name), name);
            counter_family = strstr(text, strbuf_str(&key)) != NULL;
            strbuf_release(&key);
        }
        if (counter_family) {
            r = strbuf_append(out, l, (size_t)(sp - 6 - l));
            if (r == 0)
                r = strbuf_append(out, sp, n - (size_t)(sp - l));
        } else if (sp && strncmp(l, "# TYPE ", 7) == 0 && strncmp(sp, " counter\n", 9) == 0) {
            /* a counter whose samples lack _total (dcgm-exporter's DCGM_FI_DEV_* names):
             * OpenMetrics would rename it, so it goes out untyped under its own name */
            r = strbuf_printf(out, "# TYPE %.*s unknown\n", (int)(sp - name), name);
        } else {
            r = strbuf_append(out, l, n);
        }
        l += n;
    }
    return r == 0 ? strbuf_puts(out, "# EOF\n") : r;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    static const char text_type[] = "text/plain; version=0.0.4; charset=utf-8";
    struct metrics_server *s = cls;
    enum MHD_Result r;

    (void)version;
    (void)upload;
    (void)upload_size;
    (void)con_cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9);
    if (strcmp(url, "/metrics") == 0) {
        /* the loop re-publishes before it answers the ping: counters kept by other
         * threads (Allocate) are fresh; a wedged loop leaves the last text */
        (void)loop_alive(s);
        const char *accept = mhd.lookup_value(c, MHD_HEADER_KIND, "Accept");
        if (accept && strstr(accept, "application/openmetrics-text")) {
            struct strbuf om = STRBUF_INIT;
            pthread_mutex_lock(&s->lock);
            int e = metrics_openmetrics(s->text ? s->text : "", &om);
            pthread_mutex_unlock(&s->lock);
            r = e == 0 ? reply(c, MHD_HTTP_OK,
                               "application/openmetrics-text; version=1.0.0; charset=utf-8",
                               strbuf_str(&om), om.len)
                       : reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "no memory\n", 10);
            strbuf_release(&om);
            return r;
        }
        pthread_mutex_lock(&s->lock);
        r = reply(c, MHD_HTTP_OK, text_type, s->text ? s->text : "", s->text ? s->text_len : 0);
        pthread_mutex_unlock(&s->lock);
        return r;
    }
    if (strcmp(url, "/healthz") == 0)
        return loop_alive(s) ? reply(c, MHD_HTTP_OK, "text/plain", "ok\n", 3)
                             : reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                                     "the daemon's loop did not answer\n", 32);
    if (strcmp(url, "/readyz") == 0) {
        char body[300];
        int n;
        (void)loop_alive(s); /* readiness as of now */
        pthread_mutex_lock(&s->lock);
        n = snprintf(body, sizeof(body), "%s\n", s->ready ? "ok" : s->reason);
        r = reply(c, s->ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", body,
                  n > 0 && (size_t)n < sizeof(body) ? (size_t)n : strlen(body));
        pthread_mutex_unlock(&s->lock);
        return r;
    }
    return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found: /metrics, /healthz, /readyz\n",
                 39);
}

static int parse_address(const char *address, struct sockaddr_in *sa, struct error *err)
{
    const char *colon = strrchr(address, ':');
    char host[64];
    unsigned port;

    if (!colon || (size_t)(colon - address) >= sizeof(host) || parse_uint(colon + 1, &port) < 0 ||
        port > 65535)
        return error_set(err, -EINVAL,
                         "--metrics-address '%s': expected HOST:PORT, e.g. :9400 "
                         "or 127.0.0.1:9400",
                         address);
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!*host || strcmp(host, "0.0.0.0") == 0)
        sa->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return error_set(err, -EINVAL, "--metrics-address '%s': '%s' is not an IPv4 address",
                         address, host);
    return 0;
}

static bool is_local(const struct metrics_server *s, const struct sockaddr *a);

/* The next whitespace-separated field of a /proc/net/route line as a hex word of 1-8
 * digits (addresses are 8, flags 4); advances *p. -1 when it is not one. */
static int64_t route_word(const char **p)
{
    const char *q = *p;
    uint32_t v = 0;
    int n = 0;

    while (*q == ' ' || *q == '\t')
        q++;
    for (; n < 8 && str_hex_digit((unsigned char)q[n]) >= 0; n++)
        v = v << 4 | (uint32_t)str_hex_digit((unsigned char)q[n]);
    *p = q + n;
    return n > 0 && (q[n] == ' ' || q[n] == '\t' || q[n] == '\n' || !q[n]) ? (int64_t)v : -1;
}

size_t metrics_route_gateways(const char *route_text, uint32_t *ret_addrs_be, size_t max)
{
    size_t n = 0;
    const char *l = route_text ? strchr(route_text, '\n') : NULL; /* past the header */

    while (l && *l && n < max) {
        const char *p = ++l;
        /* Iface Destination Gateway Flags ...: hex words in the kernel's (network) order */
        p += strcspn(p, " \t\n");
        int64_t dest = route_word(&p), gw = route_word(&p), flags = route_word(&p);
        /* the kernel prints the address's bytes as a host-order number: read back as one, it
         * is the in_addr value again */
        if (dest == 0 && gw > 0 && flags >= 0 && (flags & 0x2) /* RTF_GATEWAY */)
            ret_addrs_be[n++] = (uint32_t)gw;
        l = strchr(l, '\n');
    }
    return n;
}

static void add_local4(struct metrics_server *s, uint32_t addr_be)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = {.s_addr = addr_be}};

    if (s->n_local < HTTP_MAX_LOCAL_ADDRS && !is_local(s, (const struct sockaddr *)&sa))
        memcpy(&s->local[s->n_local++], &sa, sizeof(sa));
}

/* The node's addresses as a pod on the pod network sees them (see HTTP_REMOTE_MAX). */
static void node_addrs(struct metrics_server *s)
{
    static const char *const envs[] = {"NODE_IP", "HOST_IP"};
    uint32_t gws[8];
    char *text = NULL;

    if (file_read_all("/proc/net/route", 1u << 20, &text, NULL, NULL) == 0) {
        size_t n = metrics_route_gateways(text, gws, GS_ARRAY_SIZE(gws));
        for (size_t i = 0; i < n; i++)
            add_local4(s, gws[i]);
    }
    free(text);
    for (size_t i = 0; i < GS_ARRAY_SIZE(envs); i++) {
        const char *v = getenv(envs[i]);
        struct in_addr a;
        if (v && inet_pton(AF_INET, v, &a) == 1)
            add_local4(s, a.s_addr);
    }
}

static void local_addrs(struct metrics_server *s)
{
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0)
        return;
    for (struct ifaddrs *i = ifa; i && s->n_local < HTTP_MAX_LOCAL_ADDRS; i = i->ifa_next) {
        if (!i->ifa_addr ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        memcpy(&s->local[s->n_local++], i->ifa_addr,
               i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                 : sizeof(struct sockaddr_in6));
    }
    freeifaddrs(ifa);
}

static bool is_local(const struct metrics_server *s, const struct sockaddr *a)
{
    for (size_t i = 0; a && i < s->n_local; i++) {
        const struct sockaddr *l = (const struct sockaddr *)&s->local[i];
        if (l->sa_family != a->sa_family)
            continue;
        if (a->sa_family == AF_INET && ((const struct sockaddr_in *)l)->sin_addr.s_addr ==
                                           ((const struct sockaddr_in *)a)->sin_addr.s_addr)
            return true;
        if (a->sa_family == AF_INET6 &&
            memcmp(&((const struct sockaddr_in6 *)l)->sin6_addr,
                   &((const struct sockaddr_in6 *)a)->sin6_addr, sizeof(struct in6_addr)) == 0)
            return true;
    }
    return false;
}

/* Accept policy: clients from elsewhere get at most HTTP_REMOTE_MAX slots in all. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t len)
{
    const struct metrics_server *s = cls;
    (void)len;
    return is_local(s, addr) || s->n_remote < HTTP_REMOTE_MAX ? MHD_YES : MHD_NO;
}

/* Counts the open connections from elsewhere (the socket context marks them). */
static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    static char remote_mark;
    struct metrics_server *s = cls;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            mhd.get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (!ci || !is_local(s, ci->client_addr)) {
            *socket_context = &remote_mark;
            s->n_remote++;
        }
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context == &remote_mark) {
        *socket_context = NULL;
        s->n_remote--;
    }
}

int metrics_server_start(const char *address, struct metrics_server **ret, struct error *err)
{
    struct metrics_server *s;
    struct sockaddr_in sa;
    const union MHD_DaemonInfo *info;
    pthread_condattr_t ca;
    int r = parse_address(address, &sa, err);

    if (r < 0)
        return r;
    r = mhd_load(err);
    if (r < 0)
        return r;
    s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    str_copy(s->reason, "starting: resources not registered yet", sizeof(s->reason));
    s->ping_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->ping_fd < 0) {
        r = error_set_errno(err, errno, "eventfd");
        goto fail;
    }
    local_addrs(s);
    node_addrs(s);
    s->mhd = mhd.start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, accept_policy, s, handle, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, HTTP_CONNECTIONS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, HTTP_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT, HTTP_IDLE_S,
        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, s, MHD_OPTION_END);
    if (!s->mhd) {
        r = error_set(err, -EADDRINUSE,
                      "--metrics-address '%s': cannot listen (address in "
                      "use, or not an address of this host)",
                      address);
        goto fail;
    }
    info = mhd.get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : ntohs(sa.sin_port);
    *ret = s;
    return 0;
fail:
    metrics_server_free(s);
    return r;
}

void metrics_server_free(struct metrics_server *s)
{
    if (!s)
        return;
    if (s->mhd)
        mhd.stop_daemon(s->mhd);
    if (s->ping_fd >= 0)
        close(s->ping_fd);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s->text);
    free(s);
}

unsigned metrics_server_port(const struct metrics_server *s)
{
    return s ? s->port : 0;
}

int metrics_server_publish(struct metrics_server *s, const char *text, size_t len, bool ready,
                           const char *not_ready_reason)
{
    char *copy;

    if (len > METRICS_MAX_TEXT_BYTES)
        return -E2BIG;
    copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    pthread_mutex_lock(&s->lock);
    free(s->text);
    s->text = copy;
    s->text_len = len;
    s->ready = ready;
    str_copy(s->reason, not_ready_reason ? not_ready_reason : "not ready", sizeof(s->reason));
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int metrics_server_ping_fd(const struct metrics_server *s)
{
    return s ? s->ping_fd : -1;
}

void metrics_server_pong(struct metrics_server *s)
{
    uint64_t v;

    while (read(s->ping_fd, &v, sizeof(v)) == sizeof(v))
        ;
    pthread_mutex_lock(&s->lock);
    s->pongs++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

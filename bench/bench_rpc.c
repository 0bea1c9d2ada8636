/* SPDX-License-Identifier: Apache-2.0 */
/* bench_rpc: round-trip latency of src/rpc over a unix socket — an empty unary call on a
 * kept connection (the baseline for issue 5's "Allocate <= 1.3x empty call"), a 1 KiB echo,
 * a one-shot call that connects each time, and stream message delivery. Prints one JSON
 * line per figure with the conditions. Usage: bench_rpc [iterations] */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "rpc/rpc.h"

static int h_echo(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                  struct rpc_status *st)
{
    return strbuf_append(resp, (const char *)req, len);
}

struct watch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct rpc_stream *stream;
};

static int h_watch(void *ctx, const uint8_t *req, size_t len, struct rpc_stream *stream,
                   struct rpc_status *st)
{
    struct watch *w = ctx;

    pthread_mutex_lock(&w->lock);
    w->stream = stream;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *ns, size_t n, size_t req_bytes)
{
    uint64_t sum = 0;

    qsort(ns, n, sizeof(*ns), cmp_u64);
    for (size_t i = 0; i < n; i++)
        sum += ns[i];
    printf("{\"bench\":\"rpc\",\"case\":\"%s\",\"iterations\":%zu,\"request_bytes\":%zu,"
           "\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,\"max_us\":%.1f,"
           "\"transport\":\"unix socket, nghttp2\"}\n",
           name, n, req_bytes, ns[n / 2] / 1e3, ns[n * 99 / 100] / 1e3, (double)sum / n / 1e3,
           ns[n - 1] / 1e3);
    fflush(stdout);
}

static int bench_unary(struct rpc_client *c, const char *name, size_t bytes, size_t n, uint64_t *ns)
{
    uint8_t *req = calloc(1, bytes ? bytes : 1);
    struct error err = {0};
    int r = 0;

    if (!req)
        return -ENOMEM;
    for (size_t i = 0; i < n + n / 10 && r == 0; i++) {
        uint8_t *resp = NULL;
        size_t len = 0;
        uint64_t t0 = time_now_ns();

        r = rpc_client_unary(c, "/bench.Svc/Echo", req, bytes, 5000, &resp, &len, NULL, &err);
        if (i >= n / 10) /* the first tenth warms up */
            ns[i - n / 10] = time_now_ns() - t0;
        free(resp);
    }
    free(req);
    if (r < 0) {
        fprintf(stderr, "bench_rpc: %s\n", err.msg);
        return r;
    }
    report(name, ns, n, bytes);
    return 0;
}

static int bench_one_shot(const char *sock, size_t n, uint64_t *ns)
{
    struct error err = {0};

    for (size_t i = 0; i < n; i++) {
        uint8_t *resp = NULL;
        size_t len = 0;
        uint64_t t0 = time_now_ns();
        int r = rpc_client_call(sock, "/bench.Svc/Echo", NULL, 0, 5000, &resp, &len, NULL, &err);

        ns[i] = time_now_ns() - t0;
        free(resp);
        if (r < 0) {
            fprintf(stderr, "bench_rpc: %s\n", err.msg);
            return r;
        }
    }
    report("one_shot_connect_call", ns, n, 0);
    return 0;
}

static int bench_stream(struct rpc_client *c, struct watch *w, size_t n, uint64_t *ns)
{
    struct rpc_client_stream *s = NULL;
    struct error err = {0};
    int r;

    r = rpc_client_stream_open(c, "/bench.Svc/Watch", NULL, 0, &s, &err);
    if (r < 0)
        goto out;
    pthread_mutex_lock(&w->lock);
    while (!w->stream)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    for (size_t i = 0; i < n; i++) {
        uint8_t msg[64] = {0}, *got = NULL;
        size_t len = 0;
        uint64_t t0 = time_now_ns();

        r = rpc_stream_send(w->stream, msg, sizeof(msg));
        if (r >= 0)
            r = rpc_client_stream_next(s, 5000, &got, &len, NULL, &err);
        ns[i] = time_now_ns() - t0;
        free(got);
        if (r < 0)
            goto out;
    }
    report("stream_send_to_receive", ns, n, 64);
    r = 0;
out:
    if (r < 0)
        fprintf(stderr, "bench_rpc: stream failed: %s\n", err.msg);
    rpc_client_stream_close(s);
    return r;
}

int main(int argc, char **argv)
{
    struct watch w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
    struct rpc_server *srv = NULL;
    struct rpc_client *c = NULL;
    struct error err = {0};
    char dir[] = "/tmp/gs-bench-rpc-XXXXXX";
    char sock[64];
    unsigned n = 20000;
    uint64_t *ns = NULL;
    int r = 1;

    if (argc > 1 && parse_uint(argv[1], &n) < 0) {
        fprintf(stderr, "usage: bench_rpc [iterations]\n");
        return 2;
    }
    if (n < 100)
        n = 100;
    ns = calloc(n, sizeof(*ns));
    if (!ns || !mkdtemp(dir))
        return 1;
    snprintf(sock, sizeof(sock), "%s/bench.sock", dir);
    if (rpc_server_new(sock, &srv, &err) < 0 ||
        rpc_server_add_unary(srv, "/bench.Svc/Echo", h_echo, NULL, &err) < 0 ||
        rpc_server_add_stream(srv, "/bench.Svc/Watch", h_watch, NULL, &w, &err) < 0 ||
        rpc_server_start(srv, &err) < 0 || rpc_client_new(sock, NULL, &c, &err) < 0) {
        fprintf(stderr, "bench_rpc: %s\n", err.msg);
        goto out;
    }
    if (bench_unary(c, "empty_unary", 0, n, ns) < 0 ||
        bench_unary(c, "echo_1KiB_unary", 1024, n, ns) < 0 ||
        bench_one_shot(sock, n / 20, ns) < 0 || bench_stream(c, &w, n, ns) < 0)
        goto out;
    r = 0;
out:
    rpc_client_free(c);
    rpc_server_free(srv);
    rpc_stream_unref(w.stream);
    rmdir(dir);
    free(ns);
    return r;
}

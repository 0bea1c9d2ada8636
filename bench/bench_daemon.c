/* SPDX-License-Identifier: Apache-2.0 */
/* bench_daemon.c: `gpuslice device-plugin` on the fake 8×H100 machine with time-slicing
 * replicas 16, driven by a stand-in kubelet on the rpc layer (the client kubelet-sim uses):
 * start → registered, RSS after registration and after 100,000 Allocate calls, Allocate
 * vs empty GetDevicePluginOptions round trips (p50/p99, same run), XID → Unhealthy seen by
 * the client, kubelet restart → re-registered; then, at scale, a fake node of 64 GPUs × 160
 * replicas (10,240 devices): start → registered and ListAndWatch connect → first list.
 * Prints JSON lines. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "rpc/rpc.h"

#define N_SAMPLES 5000
#define N_ALLOCATES 100000
#define DP "/v1beta1.DevicePlugin/"

struct kubelet {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned registrations;
    uint64_t last_ns;
    char endpoint[128];
    char dir[256];
    struct rpc_server *srv;
};

static int h_register(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                      struct rpc_status *st)
{
    struct kubelet *k = ctx;
    V1beta1__RegisterRequest *r = v1beta1__register_request__unpack(NULL, len, req);
    char path[512];
    uint8_t *out = NULL;
    size_t out_len = 0;

    (void)resp;
    if (!r) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "bad request");
        return 0;
    }
    /* dial back, as kubelet >= 1.25 does inside Register */
    snprintf(path, sizeof(path), "%s/%s", k->dir, r->endpoint);
    if (rpc_client_call(path, DP "GetDevicePluginOptions", NULL, 0, 5000, &out, &out_len, NULL,
                        NULL) < 0)
        rpc_status_set(st, RPC_UNKNOWN, "failed to dial device plugin");
    free(out);
    pthread_mutex_lock(&k->lock);
    str_copy(k->endpoint, r->endpoint, sizeof(k->endpoint));
    k->registrations++;
    k->last_ns = time_now_ns();
    pthread_cond_broadcast(&k->cond);
    pthread_mutex_unlock(&k->lock);
    v1beta1__register_request__free_unpacked(r, NULL);
    return 0;
}

static int kubelet_start(struct kubelet *k)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/kubelet.sock", k->dir);
    if (rpc_server_new(path, &k->srv, NULL) < 0 ||
        rpc_server_add_unary(k->srv, "/v1beta1.Registration/Register", h_register, k, NULL) < 0 ||
        rpc_server_start(k->srv, NULL) < 0)
        return -1;
    return 0;
}

/* Waits until `n` registrations happened; returns the time of the n-th or 0. */
static uint64_t kubelet_wait(struct kubelet *k, unsigned n, int timeout_ms)
{
    uint64_t deadline = time_now_ns() + (uint64_t)timeout_ms * 1000000ull, t = 0;

    pthread_mutex_lock(&k->lock);
    while (k->registrations < n && time_now_ns() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&k->cond, &k->lock, &ts);
    }
    if (k->registrations >= n)
        t = k->last_ns;
    pthread_mutex_unlock(&k->lock);
    return t;
}

/* A field of /proc/<pid>/smaps_rollup in KiB ("Rss:", "Pss:", "Anonymous:"), -1 if absent. */
static long smaps_kib(pid_t pid, const char *field)
{
    char path[64], *data = NULL, *p;
    long v = -1;
    uint64_t x;

    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
    if (file_read_all(path, 1 << 16, &data, NULL, NULL) < 0)
        return -1;
    p = strstr(data, field);
    if (p) {
        p += strlen(field);
        while (*p == ' ' || *p == '\t')
            p++;
        p[strcspn(p, " ")] = '\0';
        if (parse_uint64(p, &x) == 0)
            v = (long)x;
    }
    free(data);
    return v;
}

struct mem {
    long rss, pss, anon;
};

static struct mem mem_of(pid_t pid)
{
    struct mem m = {smaps_kib(pid, "\nRss:"), smaps_kib(pid, "\nPss:"),
                    smaps_kib(pid, "\nAnonymous:")};
    return m;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_us(uint64_t *v, size_t n, double p)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return (double)v[(size_t)(p * (double)(n - 1))] / 1000.0;
}

static bool log_has(const char *path, const char *needle)
{
    char *data = NULL;
    bool found;

    if (file_read_all(path, 64u << 20, &data, NULL, NULL) < 0)
        return false;
    found = strstr(data, needle) != NULL;
    free(data);
    return found;
}

static size_t unhealthy_in(const uint8_t *msg, size_t len)
{
    V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, len, msg);
    size_t n = 0;

    if (!l)
        return 0;
    for (size_t i = 0; i < l->n_devices; i++)
        if (strcmp(l->devices[i]->health, "Healthy") != 0)
            n++;
    v1beta1__list_and_watch_response__free_unpacked(l, NULL);
    return n;
}

/* Starts the daemon on machine/config under dir with a stand-in kubelet at k; its pid. */
static pid_t daemon_spawn(const char *bin, const char *dir, const char *machine, const char *cfg,
                          struct kubelet *k, bool verbose)
{
    char exe[512], lib[512], state[512], events[512], logp[512];
    pid_t pid;

    snprintf(exe, sizeof(exe), "%s/gpuslice", bin);
    snprintf(lib, sizeof(lib), "%s/tools/fake-nvml/libnvidia-ml.so.1", bin);
    snprintf(state, sizeof(state), "%s/state", dir);
    snprintf(events, sizeof(events), "%s/events", dir);
    snprintf(logp, sizeof(logp), "%s/log", dir);
    if (file_write_atomic(events, "", 0, 0644, NULL) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        dup2(fd, 2);
        dup2(fd, 1);
        setenv("FAKE_NVML_MACHINE", machine, 1);
        setenv("FAKE_NVML_STATE", state, 1);
        setenv("FAKE_NVML_EVENTS", events, 1);
        execl(exe, exe, "device-plugin", "--nvml-library", lib, "--device-plugin-dir", k->dir,
              "--config-file", cfg, verbose ? "-v" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    return pid;
}

#define SCALE_GPUS 64
#define SCALE_REPLICAS 160
#define SCALE_SAMPLES 30

/* 64 GPUs × 160 replicas: start → registered, ListAndWatch connect → first list (p50 of
 * SCALE_SAMPLES fresh streams, the first included), RSS. 0, or -1 (message on stderr). */
static int bench_scale(const char *bin)
{
    struct kubelet k = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    char tmp[] = "/tmp/gs-bench-scale-XXXXXX", machine[512], cfg[512], sock[600], cmd[700];
    uint64_t lat[SCALE_SAMPLES], t0, t1;
    struct mem mem;
    int rc = -1, n = 0;
    pid_t pid = -1;
    char yaml[512];

    if (!mkdtemp(tmp))
        return -1;
    snprintf(k.dir, sizeof(k.dir), "%s/dp", tmp);
    mkdir(k.dir, 0750);
    snprintf(machine, sizeof(machine), "%s/machine.yaml", tmp);
    snprintf(cfg, sizeof(cfg), "%s/config.yaml", tmp);
    snprintf(yaml, sizeof(yaml),
             "driver: \"570.158.01\"\ncuda: 12080\ngpus:\n  - model: NVIDIA H100 80GB HBM3\n"
             "    count: %d\n    numa_node: 0\n  - model: NVIDIA H100 80GB HBM3\n"
             "    count: %d\n    numa_node: 1\ntopology:\n  nvlink: all\n",
             SCALE_GPUS / 2, SCALE_GPUS / 2);
    if (file_write_atomic(machine, yaml, strlen(yaml), 0644, NULL) < 0)
        goto out;
    snprintf(yaml, sizeof(yaml),
             "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
             "    - name: nvidia.com/gpu\n      replicas: %d\n",
             SCALE_REPLICAS);
    if (file_write_atomic(cfg, yaml, strlen(yaml), 0644, NULL) < 0 || kubelet_start(&k) < 0)
        goto out;
    t0 = time_now_ns();
    pid = daemon_spawn(bin, tmp, machine, cfg, &k, false);
    t1 = pid > 0 ? kubelet_wait(&k, 1, 20000) : 0;
    if (!t1) {
        fprintf(stderr, "bench_daemon: scale: no registration within 20 s (log %s/log)\n", tmp);
        goto out;
    }
    mem = mem_of(pid);
    snprintf(sock, sizeof(sock), "%s/%s", k.dir, k.endpoint);
    for (int i = 0; i < SCALE_SAMPLES; i++) {
        struct rpc_client *c = NULL;
        struct rpc_client_stream *s = NULL;
        uint8_t *msg = NULL;
        size_t len = 0;
        uint64_t a;
        if (rpc_client_new(sock, NULL, &c, NULL) < 0)
            break;
        a = time_now_ns();
        if (rpc_client_stream_open(c, DP "ListAndWatch", NULL, 0, &s, NULL) == 0 &&
            rpc_client_stream_next(s, 5000, &msg, &len, NULL, NULL) == 1) {
            uint64_t b = time_now_ns(); /* the list is here; checked after the clock stops */
            V1beta1__ListAndWatchResponse *l =
                v1beta1__list_and_watch_response__unpack(NULL, len, msg);
            if (l && l->n_devices == SCALE_GPUS * SCALE_REPLICAS)
                lat[n++] = b - a;
            v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        }
        free(msg);
        rpc_client_stream_close(s);
        rpc_client_free(c);
    }
    if (n == 0) {
        fprintf(stderr, "bench_daemon: scale: no full device list (log %s/log)\n", tmp);
        goto out;
    }
    printf("{\"bench\":\"daemon_scale\",\"machine\":\"h100x%d\",\"replicas\":%d,\"devices\":%d,"
           "\"start_to_registered_ms\":%.2f,\"list_and_watch_first_list_samples\":%d,"
           "\"list_and_watch_first_list_p50_ms\":%.2f,\"list_and_watch_first_list_max_ms\":%.2f,"
           "\"rss_kib\":%ld,\"anon_kib\":%ld}\n",
           SCALE_GPUS, SCALE_REPLICAS, SCALE_GPUS * SCALE_REPLICAS, (double)(t1 - t0) / 1e6, n,
           pct_us(lat, (size_t)n, 0.5) / 1000, pct_us(lat, (size_t)n, 1.0) / 1000, mem.rss,
           mem.anon);
    rc = 0;
out:
    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    rpc_server_free(k.srv);
    if (rc == 0) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        (void)!system(cmd);
    }
    return rc;
}

int main(void)
{
    const char *src = getenv("GS_SOURCE_DIR") ? getenv("GS_SOURCE_DIR") : GS_SOURCE_DIR;
    const char *bin = getenv("GS_BINARY_DIR") ? getenv("GS_BINARY_DIR") : GS_BINARY_DIR;
    struct kubelet k = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    char tmp[] = "/tmp/gs-bench-daemon-XXXXXX";
    char cfg[512], events[512], logp[512], sock[512], machine[512];
    char state[512], first_id[128] = "";
    struct rpc_client *c = NULL;
    struct rpc_client_stream *s = NULL;
    uint64_t *t_alloc = NULL, *t_opts = NULL, t0, t1;
    uint8_t *areq = NULL, *msg = NULL;
    size_t alen, mlen;
    struct mem mem_reg, mem_half = {-1, -1, -1}, mem_after;
    pid_t pid;
    int rc = 1;

    if (!mkdtemp(tmp))
        return 1;
    snprintf(k.dir, sizeof(k.dir), "%s/dp", tmp);
    mkdir(k.dir, 0750);
    snprintf(cfg, sizeof(cfg), "%s/config.yaml", tmp);
    snprintf(events, sizeof(events), "%s/events", tmp);
    snprintf(logp, sizeof(logp), "%s/log", tmp);
    snprintf(state, sizeof(state), "%s/state", tmp);
    snprintf(machine, sizeof(machine), "%s/examples/machines/h100-nvswitch-8.yaml", src);
    {
        static const char yaml[] = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                   "    - name: nvidia.com/gpu\n      replicas: 16\n";
        if (file_write_atomic(cfg, yaml, sizeof(yaml) - 1, 0644, NULL) < 0 ||
            file_write_atomic(events, "", 0, 0644, NULL) < 0)
            return 1;
    }
    if (kubelet_start(&k) < 0) {
        fprintf(stderr, "bench_daemon: cannot start the stand-in kubelet\n");
        return 1;
    }

    /* ---- start → registered ---- */
    t0 = time_now_ns();
    pid = daemon_spawn(bin, tmp, machine, cfg, &k, true);
    t1 = kubelet_wait(&k, 1, 10000);
    if (!t1) {
        fprintf(stderr, "bench_daemon: no registration within 10 s (log %s)\n", logp);
        goto out;
    }
    printf("{\"bench\":\"daemon_start_to_registered\",\"machine\":\"h100-nvswitch-8\","
           "\"replicas\":16,\"devices\":128,\"ms\":%.2f,\"target_ms\":100}\n",
           (double)(t1 - t0) / 1e6);
    mem_reg = mem_of(pid);

    /* ---- Allocate vs GetDevicePluginOptions ---- */
    snprintf(sock, sizeof(sock), "%s/%s", k.dir, k.endpoint);
    if (rpc_client_new(sock, NULL, &c, NULL) < 0 ||
        rpc_client_stream_open(c, DP "ListAndWatch", NULL, 0, &s, NULL) < 0 ||
        rpc_client_stream_next(s, 5000, &msg, &mlen, NULL, NULL) != 1)
        goto out;
    {
        V1beta1__ListAndWatchResponse *l =
            v1beta1__list_and_watch_response__unpack(NULL, mlen, msg);
        if (!l || l->n_devices != 128)
            goto out;
        str_copy(first_id, l->devices[5]->id, sizeof(first_id));
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        free(msg);
        msg = NULL;
    }
    {
        V1beta1__AllocateRequest rq = V1BETA1__ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest cr = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        V1beta1__ContainerAllocateRequest *crp = &cr;
        char *ids[1] = {first_id};
        cr.devices_ids = ids;
        cr.n_devices_ids = 1;
        rq.container_requests = &crp;
        rq.n_container_requests = 1;
        alen = protobuf_c_message_get_packed_size(&rq.base);
        areq = malloc(alen);
        protobuf_c_message_pack(&rq.base, areq);
    }
    t_alloc = calloc(N_SAMPLES, sizeof(*t_alloc));
    t_opts = calloc(N_SAMPLES, sizeof(*t_opts));
    for (size_t i = 0; i < 200; i++) { /* warm up */
        uint8_t *r = NULL;
        size_t rl;
        rpc_client_unary(c, DP "Allocate", areq, alen, 5000, &r, &rl, NULL, NULL);
        free(r);
    }
    for (size_t i = 0; i < N_SAMPLES; i++) {
        uint8_t *r = NULL;
        size_t rl;
        uint64_t a = time_now_ns();
        if (rpc_client_unary(c, DP "GetDevicePluginOptions", NULL, 0, 5000, &r, &rl, NULL, NULL) <
            0)
            goto out;
        free(r);
        r = NULL;
        uint64_t b = time_now_ns();
        if (rpc_client_unary(c, DP "Allocate", areq, alen, 5000, &r, &rl, NULL, NULL) < 0)
            goto out;
        free(r);
        t_opts[i] = b - a;
        t_alloc[i] = time_now_ns() - b;
    }
    {
        double a50 = pct_us(t_alloc, N_SAMPLES, 0.5), a99 = pct_us(t_alloc, N_SAMPLES, 0.99);
        double o50 = pct_us(t_opts, N_SAMPLES, 0.5), o99 = pct_us(t_opts, N_SAMPLES, 0.99);
        printf("{\"bench\":\"daemon_allocate_rtt\",\"samples\":%d,\"allocate_p50_us\":%.1f,"
               "\"allocate_p99_us\":%.1f,\"options_p50_us\":%.1f,\"options_p99_us\":%.1f,"
               "\"ratio_p50\":%.3f,\"target_ratio_p50\":1.3}\n",
               N_SAMPLES, a50, a99, o50, o99, a50 / o50);
    }
    for (size_t i = N_SAMPLES; i < N_ALLOCATES; i++) {
        uint8_t *r = NULL;
        size_t rl;
        if (i == N_ALLOCATES / 2)
            mem_half = mem_of(pid);
        if (rpc_client_unary(c, DP "Allocate", areq, alen, 5000, &r, &rl, NULL, NULL) < 0)
            goto out;
        free(r);
    }
    mem_after = mem_of(pid);
    /* RSS counts the shared libraries' pages (hence nghttp2 rather than gRPC's C core, and
     * libcurl loaded only when needed); PSS splits them between processes; Anonymous is the
     * daemon's own memory. */
    printf("{\"bench\":\"daemon_memory\",\"rss_kib\":%ld,\"pss_kib\":%ld,\"anon_kib\":%ld,"
           "\"rss_after_100000_allocates_kib\":%ld,\"pss_after_kib\":%ld,"
           "\"anon_after_kib\":%ld,\"anon_growth_kib\":%ld,\"anon_growth_second_50000_kib\":%ld,"
           "\"target_rss_kib\":10240}\n",
           mem_reg.rss, mem_reg.pss, mem_reg.anon, mem_after.rss, mem_after.pss, mem_after.anon,
           mem_after.anon - mem_reg.anon, mem_after.anon - mem_half.anon);

    /* ---- XID → Unhealthy seen by the client ---- */
    for (int i = 0; i < 2000 && !log_has(logp, "health: watching XID events"); i++)
        usleep(5000); /* bounded wait on a condition */
    {
        uint64_t lat[8];
        int n = 0;
        for (int g = 0; g < 8; g++) {
            char line[64];
            int fd = open(events, O_WRONLY | O_APPEND | O_CLOEXEC);
            int len = snprintf(line, sizeof(line), "xid %d 79\n", g);
            uint64_t a = time_now_ns();
            if (fd < 0 || write(fd, line, (size_t)len) != len)
                goto out;
            close(fd);
            if (rpc_client_stream_next(s, 5000, &msg, &mlen, NULL, NULL) != 1)
                goto out;
            if (unhealthy_in(msg, mlen) == (size_t)(g + 1) * 16)
                lat[n++] = time_now_ns() - a;
            free(msg);
            msg = NULL;
        }
        printf("{\"bench\":\"daemon_xid_to_unhealthy\",\"samples\":%d,\"p50_ms\":%.3f,"
               "\"max_ms\":%.3f,\"target_ms\":50}\n",
               n, n ? pct_us(lat, (size_t)n, 0.5) / 1000 : -1.0,
               n ? pct_us(lat, (size_t)n, 1.0) / 1000 : -1.0);
    }
    rpc_client_stream_close(s);
    s = NULL;
    rpc_client_free(c);
    c = NULL;

    /* ---- kubelet restart → re-registered ---- */
    {
        uint64_t lat[5];
        for (int i = 0; i < 5; i++) {
            unsigned before;
            DIR *dir;
            struct dirent *de;

            rpc_server_free(k.srv);
            k.srv = NULL;
            dir = opendir(k.dir);
            while (dir && (de = readdir(dir))) {
                char p[600];
                if (de->d_name[0] == '.')
                    continue;
                snprintf(p, sizeof(p), "%s/%s", k.dir, de->d_name);
                unlink(p);
            }
            if (dir)
                closedir(dir);
            pthread_mutex_lock(&k.lock);
            before = k.registrations;
            pthread_mutex_unlock(&k.lock);
            t0 = time_now_ns();
            if (kubelet_start(&k) < 0)
                goto out;
            t1 = kubelet_wait(&k, before + 1, 5000);
            if (!t1)
                goto out;
            lat[i] = t1 - t0;
        }
        printf("{\"bench\":\"daemon_kubelet_restart_to_registered\",\"samples\":5,"
               "\"p50_ms\":%.2f,\"max_ms\":%.2f,\"target_ms\":1000}\n",
               pct_us(lat, 5, 0.5) / 1000, pct_us(lat, 5, 1.0) / 1000);
    }
    rc = bench_scale(bin) < 0;
out:
    if (rc)
        fprintf(stderr, "bench_daemon: failed; daemon log in %s\n", logp);
    free(msg);
    free(areq);
    free(t_alloc);
    free(t_opts);
    rpc_client_stream_close(s);
    rpc_client_free(c);
    if (pid > 0) {
        int st = 0;
        kill(pid, SIGTERM);
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = 1;
    }
    rpc_server_free(k.srv);
    if (rc == 0) {
        unlink(cfg);
        unlink(events);
        unlink(logp);
        unlink(state);
        rmdir(k.dir);
        rmdir(tmp);
    }
    return rc;
}

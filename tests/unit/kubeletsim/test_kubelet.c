/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for tools/kubelet-sim kubelet.c and run.c: the simulator in-process against a fake
 * device plugin written on src/rpc/rpc.h — registration checks and dial back, capacity,
 * admission outcomes (Running with the preferred devices, Pending, Failed with kubelet's
 * text), health changes, stream loss, a kubelet restart with re-registration (the fake
 * watches kubelet.sock with inotify like a real plugin) and pod-resources List. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "podresources/v1/api.pb-c.h"

#include "rpc/rpc.h"
#include "sim.h"

#define RES "example.com/gpu"
#define N_DEVS 4
#define WAIT_MS "5000"

struct fake {
    char dir[64];
    char sock[128];
    char kubelet_sock[128];
    char podres_sock[128];
    struct sim *sim;
    struct rpc_server *srv;

    pthread_mutex_t lock;
    struct rpc_stream *stream; /* the open ListAndWatch, referenced */
    bool healthy[N_DEVS];
    bool preferred;
    bool fail_allocate_gt1;
    bool fail_preferred; /* GetPreferredAllocation answers INTERNAL */
    bool empty_allocate; /* Allocate answers no container response */
    bool pre_start;      /* options: pre_start_required */
    unsigned n_pre_start_calls;
    size_t n_pre_start_ids;
    bool block_allocate; /* Allocate waits for allocate_released */
    bool allocate_released;
    pthread_cond_t released;
    unsigned n_preferred_calls;

    pthread_t watcher; /* re-registers when kubelet.sock is created */
    bool watching;
    int inotify_fd; /* watching dir, set up before the watcher starts */
    int stop_pipe[2];
};

/* ---- the fake plugin ---- */

static int pack_list(struct fake *f, struct strbuf *out)
{
    V1beta1__ListAndWatchResponse m = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    V1beta1__Device devs[N_DEVS], *ptrs[N_DEVS];
    char ids[N_DEVS][16];
    uint8_t buf[512];
    size_t len;

    for (size_t i = 0; i < N_DEVS; i++) {
        v1beta1__device__init(&devs[i]);
        snprintf(ids[i], sizeof(ids[i]), "dev-%zu", i);
        devs[i].id = ids[i];
        devs[i].health = f->healthy[i] ? "Healthy" : "Unhealthy";
        ptrs[i] = &devs[i];
    }
    m.devices = ptrs;
    m.n_devices = N_DEVS;
    len = v1beta1__list_and_watch_response__pack(&m, buf);
    return strbuf_append(out, (const char *)buf, len);
}

static void fake_send_list(struct fake *f)
{
    struct strbuf sb = STRBUF_INIT;

    pthread_mutex_lock(&f->lock);
    assert_int_equal(pack_list(f, &sb), 0);
    if (f->stream)
        assert_int_equal(rpc_stream_send(f->stream, (const uint8_t *)sb.buf, sb.len), 0);
    pthread_mutex_unlock(&f->lock);
    strbuf_release(&sb);
}

static int h_options(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                     struct rpc_status *st)
{
    struct fake *f = ctx;
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    uint8_t buf[16];

    o.get_preferred_allocation_available = f->preferred;
    o.pre_start_required = f->pre_start;
    return strbuf_append(resp, (const char *)buf, v1beta1__device_plugin_options__pack(&o, buf));
}

static int h_law_open(void *ctx, const uint8_t *req, size_t len, struct rpc_stream *stream,
                      struct rpc_status *st)
{
    struct fake *f = ctx;
    struct strbuf sb = STRBUF_INIT;
    int r;

    pthread_mutex_lock(&f->lock);
    rpc_stream_unref(f->stream);
    f->stream = stream;
    r = pack_list(f, &sb);
    if (r >= 0)
        r = rpc_stream_send(stream, (const uint8_t *)sb.buf, sb.len);
    pthread_mutex_unlock(&f->lock);
    strbuf_release(&sb);
    return r < 0 ? r : 0;
}

static int h_preferred(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                       struct rpc_status *st)
{
    struct fake *f = ctx;
    V1beta1__PreferredAllocationRequest *m =
        v1beta1__preferred_allocation_request__unpack(NULL, len, req);
    V1beta1__PreferredAllocationResponse out = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    V1beta1__ContainerPreferredAllocationResponse
        c = V1BETA1__CONTAINER_PREFERRED_ALLOCATION_RESPONSE__INIT,
        *cp = &c;
    char *rev[N_DEVS];
    uint8_t buf[512];
    int r;

    assert_non_null(m);
    assert_int_equal(m->n_container_requests, 1);
    f->n_preferred_calls++;
    if (f->fail_preferred) {
        v1beta1__preferred_allocation_request__free_unpacked(m, NULL);
        rpc_status_set(st, RPC_INTERNAL, "topology is on fire");
        return -EIO;
    }
    /* prefer the last candidates: the sim must honour the order it gets */
    for (size_t i = 0; i < m->container_requests[0]->n_available_deviceids && i < N_DEVS; i++)
        rev[i] = m->container_requests[0]
                     ->available_deviceids[m->container_requests[0]->n_available_deviceids - 1 - i];
    c.deviceids = rev;
    c.n_deviceids = (size_t)m->container_requests[0]->allocation_size;
    out.container_responses = &cp;
    out.n_container_responses = 1;
    r = strbuf_append(resp, (const char *)buf,
                      v1beta1__preferred_allocation_response__pack(&out, buf));
    v1beta1__preferred_allocation_request__free_unpacked(m, NULL);
    return r;
}

static int h_allocate(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                      struct rpc_status *st)
{
    struct fake *f = ctx;
    V1beta1__AllocateRequest *m = v1beta1__allocate_request__unpack(NULL, len, req);
    V1beta1__AllocateResponse out = V1BETA1__ALLOCATE_RESPONSE__INIT;
    V1beta1__ContainerAllocateResponse c = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT, *cp = &c;
    V1beta1__ContainerAllocateResponse__EnvsEntry
        env = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ENVS_ENTRY__INIT,
        *envp = &env;
    struct strbuf ids = STRBUF_INIT;
    uint8_t buf[512];
    int r = 0;

    assert_non_null(m);
    assert_int_equal(m->n_container_requests, 1);
    pthread_mutex_lock(&f->lock);
    while (f->block_allocate && !f->allocate_released)
        pthread_cond_wait(&f->released, &f->lock);
    pthread_mutex_unlock(&f->lock);
    if (f->fail_allocate_gt1 && m->container_requests[0]->n_devices_ids > 1) {
        rpc_status_set(st, RPC_UNKNOWN,
                       "invalid allocation request for \"%s\": invalid "
                       "request: maximum request size for shared resources is 1; found %zu",
                       RES, m->container_requests[0]->n_devices_ids);
        r = -EINVAL;
        goto out;
    }
    for (size_t i = 0; i < m->container_requests[0]->n_devices_ids; i++)
        strbuf_printf(&ids, "%s%s", i ? "," : "", m->container_requests[0]->devices_ids[i]);
    env.key = "FAKE_VISIBLE_DEVICES";
    env.value = (char *)strbuf_str(&ids);
    c.envs = &envp;
    c.n_envs = 1;
    out.container_responses = &cp;
    out.n_container_responses = f->empty_allocate ? 0 : 1;
    r = strbuf_append(resp, (const char *)buf, v1beta1__allocate_response__pack(&out, buf));
out:
    strbuf_release(&ids);
    v1beta1__allocate_request__free_unpacked(m, NULL);
    return r;
}

static int h_pre_start(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                       struct rpc_status *st)
{
    struct fake *f = ctx;
    V1beta1__PreStartContainerRequest *m =
        v1beta1__pre_start_container_request__unpack(NULL, len, req);

    assert_non_null(m);
    f->n_pre_start_calls++;
    f->n_pre_start_ids = m->n_devices_ids;
    v1beta1__pre_start_container_request__free_unpacked(m, NULL);
    return 0; /* PreStartContainerResponse is empty */
}

static void fake_serve(struct fake *f)
{
    struct error err = {0};

    assert_int_equal(rpc_server_new(f->sock, &f->srv, &err), 0);
    assert_int_equal(rpc_server_add_unary(f->srv, "/v1beta1.DevicePlugin/GetDevicePluginOptions",
                                          h_options, f, &err),
                     0);
    assert_int_equal(rpc_server_add_stream(f->srv, "/v1beta1.DevicePlugin/ListAndWatch", h_law_open,
                                           NULL, f, &err),
                     0);
    assert_int_equal(rpc_server_add_unary(f->srv, "/v1beta1.DevicePlugin/GetPreferredAllocation",
                                          h_preferred, f, &err),
                     0);
    assert_int_equal(
        rpc_server_add_unary(f->srv, "/v1beta1.DevicePlugin/Allocate", h_allocate, f, &err), 0);
    assert_int_equal(rpc_server_add_unary(f->srv, "/v1beta1.DevicePlugin/PreStartContainer",
                                          h_pre_start, f, &err),
                     0);
    if (rpc_server_start(f->srv, &err) < 0)
        fail_msg("fake plugin: %s", err.msg);
}

static void fake_unserve(struct fake *f)
{
    rpc_server_free(f->srv);
    f->srv = NULL;
    pthread_mutex_lock(&f->lock);
    rpc_stream_unref(f->stream);
    f->stream = NULL;
    pthread_mutex_unlock(&f->lock);
}

static int do_register(struct fake *f, const char *version, const char *resource,
                       const char *endpoint, struct rpc_status *st, struct error *err)
{
    V1beta1__RegisterRequest m = V1BETA1__REGISTER_REQUEST__INIT;
    uint8_t buf[512], *resp = NULL;
    size_t len = 0;
    int r;

    m.version = (char *)version;
    m.resource_name = (char *)resource;
    m.endpoint = (char *)endpoint;
    r = rpc_client_call(f->kubelet_sock, "/v1beta1.Registration/Register", buf,
                        v1beta1__register_request__pack(&m, buf), 5000, &resp, &len, st, err);
    free(resp);
    return r;
}

/* inotify reports kubelet.sock at bind(), a moment before listen(): like the daemon, retry
 * a refused connection (for up to 5 s) instead of failing. */
static void fake_register(struct fake *f)
{
    uint64_t deadline = time_now_ms() + 5000;
    struct error err = {0};
    int r;

    for (r = do_register(f, "v1beta1", RES, "fake.sock", NULL, &err);
         r == -ECONNREFUSED && time_now_ms() < deadline;
         r = do_register(f, "v1beta1", RES, "fake.sock", NULL, &err))
        poll(NULL, 0, 5);
    if (r < 0)
        fail_msg("Register: %s", err.msg);
}

/* Like a real plugin: when kubelet.sock is created again, serve anew and re-register. */
static void *watcher_main(void *arg)
{
    struct fake *f = arg;
    int fd = f->inotify_fd;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

    for (;;) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {f->stop_pipe[0], POLLIN, 0}};
        ssize_t n;
        bool recreated = false;
        if (poll(p, 2, -1) < 0 || p[1].revents)
            break;
        n = read(fd, buf, sizeof(buf));
        for (char *q = buf; n > 0 && q < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)q;
            if (ev->len && strcmp(ev->name, "kubelet.sock") == 0)
                recreated = true;
            q += sizeof(*ev) + ev->len;
        }
        if (recreated) {
            fake_unserve(f);
            fake_serve(f);
            fake_register(f);
        }
    }
    return NULL;
}

static int setup(void **state)
{
    struct fake *f = calloc(1, sizeof(*f));
    struct sim_opts o = {0};
    struct error err = {0};

    assert_non_null(f);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->released, NULL);
    str_copy(f->dir, "/tmp/gs-simtest-XXXXXX", sizeof(f->dir));
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->sock, sizeof(f->sock), "%s/fake.sock", f->dir);
    snprintf(f->kubelet_sock, sizeof(f->kubelet_sock), "%s/kubelet.sock", f->dir);
    snprintf(f->podres_sock, sizeof(f->podres_sock), "%s/pod-resources.sock", f->dir);
    for (size_t i = 0; i < N_DEVS; i++)
        f->healthy[i] = true;
    f->preferred = true;
    o.dir = f->dir;
    o.pod_resources_socket = f->podres_sock;
    o.rpc_timeout_ms = 5000;
    if (sim_new(&o, &f->sim, &err) < 0)
        fail_msg("sim_new: %s", err.msg);
    assert_int_equal(pipe2(f->stop_pipe, O_CLOEXEC), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fake *f = *state;
    char cmd[128];

    if (f->watching) {
        assert_int_equal(write(f->stop_pipe[1], "x", 1), 1);
        pthread_join(f->watcher, NULL);
        close(f->inotify_fd);
    }
    close(f->stop_pipe[0]);
    close(f->stop_pipe[1]);
    pthread_mutex_lock(&f->lock);
    f->allocate_released = true; /* a blocked handler must end before the server stops */
    pthread_cond_broadcast(&f->released);
    pthread_mutex_unlock(&f->lock);
    sim_free(f->sim);
    fake_unserve(f);
    pthread_cond_destroy(&f->released);
    pthread_mutex_destroy(&f->lock);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Runs one command line in JSON mode; returns the parsed answer (owned). */
static json_t *run(struct fake *f, const char *line)
{
    struct sim_cmd c;
    struct strbuf out = STRBUF_INIT;
    struct error err = {0};
    json_error_t je;
    json_t *j;

    if (sim_cmd_parse(line, &c, &err) != 0)
        fail_msg("\"%s\": %s", line, err.msg);
    (void)sim_run(f->sim, &c, true, &out);
    sim_cmd_release(&c);
    j = json_loads(strbuf_str(&out), 0, &je);
    if (!j)
        fail_msg("\"%s\": answer is not JSON: %s", line, strbuf_str(&out));
    strbuf_release(&out);
    return j;
}

static void run_ok(struct fake *f, const char *line)
{
    json_t *j = run(f, line);

    if (!json_is_true(json_object_get(j, "ok")))
        fail_msg("\"%s\" failed: %s", line, json_string_value(json_object_get(j, "error")));
    json_decref(j);
}

static json_t *capacity_of(struct fake *f)
{
    json_t *j = run(f, "capacity"), *r;

    r = json_array_get(json_object_get(j, "resources"), 0);
    assert_non_null(r);
    json_incref(r);
    json_decref(j);
    return r;
}

static void assert_capacity(struct fake *f, json_int_t cap, json_int_t alloc, json_int_t used)
{
    json_t *r = capacity_of(f);

    assert_string_equal(json_string_value(json_object_get(r, "resource")), RES);
    assert_int_equal(json_integer_value(json_object_get(r, "capacity")), cap);
    assert_int_equal(json_integer_value(json_object_get(r, "allocatable")), alloc);
    assert_int_equal(json_integer_value(json_object_get(r, "allocated")), used);
    json_decref(r);
}

static void start_plugin(struct fake *f)
{
    fake_serve(f);
    fake_register(f);
    run_ok(f, "wait " RES " "
              "4 " WAIT_MS);
}

/* Pod phase/reason/message of an admit/pod answer. */
static void assert_pod(json_t *j, const char *phase, const char *reason, const char *message)
{
    json_t *p = json_object_get(j, "pod");

    assert_true(json_is_true(json_object_get(j, "ok")));
    assert_string_equal(json_string_value(json_object_get(p, "phase")), phase);
    if (reason)
        assert_string_equal(json_string_value(json_object_get(p, "reason")), reason);
    if (message)
        assert_string_equal(json_string_value(json_object_get(p, "message")), message);
}

/* ---- tests ---- */

static void test_register_dials_back_and_lists(void **state)
{
    struct fake *f = *state;
    json_t *r;

    start_plugin(f);
    assert_capacity(f, 4, 4, 0);
    r = capacity_of(f);
    assert_true(json_is_true(json_object_get(r, "connected")));
    assert_true(json_is_true(json_object_get(r, "preferred_allocation")));
    assert_int_equal(json_integer_value(json_object_get(r, "registrations")), 1);
    assert_string_equal(json_string_value(json_object_get(r, "endpoint")), "fake.sock");
    json_decref(r);
    run_ok(f, "wait-resources 1 " WAIT_MS);
}

static void test_register_rejects_like_kubelet(void **state)
{
    struct fake *f = *state;
    struct rpc_status st = {0};
    struct error err = {0};

    fake_serve(f);
    assert_int_equal(do_register(f, "v1alpha", RES, "fake.sock", &st, &err), -EREMOTEIO);
    assert_int_equal(st.code, RPC_UNKNOWN);
    assert_string_equal(st.message, "requested API version \"v1alpha\" is not supported by "
                                    "kubelet. Supported version is \"v1beta1\"");
    assert_int_equal(do_register(f, "v1beta1", "kubernetes.io/gpu", "fake.sock", &st, &err),
                     -EREMOTEIO);
    assert_string_equal(st.message, "the ResourceName \"kubernetes.io/gpu\" is invalid");
    /* the endpoint must be serving: kubelet dials back during Register */
    assert_int_equal(do_register(f, "v1beta1", RES, "missing.sock", &st, &err), -EREMOTEIO);
    assert_non_null(strstr(st.message, "failed to dial device plugin"));
    /* nothing got registered */
    {
        json_t *j = run(f, "capacity");
        assert_int_equal(json_array_size(json_object_get(j, "resources")), 0);
        json_decref(j);
    }
}

static void test_admit_outcomes(void **state)
{
    struct fake *f = *state;
    json_t *j, *envs;

    start_plugin(f);
    /* GetPreferredAllocation is asked and its order honoured: the fake prefers the last */
    j = run(f, "admit p1 " RES "=1");
    assert_pod(j, "Running", NULL, NULL);
    assert_string_equal(
        json_string_value(json_array_get(
            json_object_get(json_object_get(json_object_get(j, "pod"), "devices"), RES), 0)),
        "dev-3");
    json_decref(j);
    assert_int_equal(f->n_preferred_calls, 1);

    j = run(f, "pod p1");
    envs = json_object_get(
        json_array_get(json_object_get(json_object_get(j, "pod"), "allocate_responses"), 0),
        "envs");
    assert_string_equal(json_string_value(json_object_get(envs, "FAKE_VISIBLE_DEVICES")), "dev-3");
    json_decref(j);

    j = run(f, "admit p2 " RES "=3");
    assert_pod(j, "Running", NULL, NULL);
    json_decref(j);
    assert_int_equal(f->n_preferred_calls, 1); /* 3 of 3: no choice, not asked */
    assert_capacity(f, 4, 4, 4);

    j = run(f, "admit p3 " RES "=1");
    assert_pod(j, "Pending", "Insufficient " RES, NULL);
    json_decref(j);
    j = run(f, "admit p4 other.com/fpga=1");
    assert_pod(j, "Pending", "Insufficient other.com/fpga", NULL);
    json_decref(j);

    j = run(f, "admit p1 " RES "=1");
    assert_false(json_is_true(json_object_get(j, "ok")));
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "already exists"));
    json_decref(j);

    /* deleting frees the device; schedule retries Pending pods in order */
    run_ok(f, "delete p1");
    assert_capacity(f, 4, 4, 3);
    j = run(f, "schedule");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(j, "pods"), 1), "phase")),
        "Running");
    json_decref(j);
    assert_capacity(f, 4, 4, 4);
}

static void test_admit_failed_unexpected_admission_error(void **state)
{
    struct fake *f = *state;
    json_t *j;

    f->fail_allocate_gt1 = true;
    start_plugin(f);
    j = run(f, "admit big " RES "=2");
    assert_pod(j, "Failed", "UnexpectedAdmissionError",
               "Allocate failed due to rpc error: code = Unknown desc = invalid allocation "
               "request for \"" RES "\": invalid request: maximum request size for shared "
               "resources is 1; found 2, which is unexpected");
    json_decref(j);
    assert_capacity(f, 4, 4, 0); /* a failed pod holds nothing */
}

static void test_admit_plugin_not_answering_times_out(void **state)
{
    struct fake *f = *state;
    struct sim_opts o = {.dir = f->dir, .rpc_timeout_ms = 200};
    struct error err = {0};
    const char *msg;
    uint64_t t0;
    json_t *j;

    sim_free(f->sim); /* again, with a short deadline on plugin calls */
    f->sim = NULL;
    if (sim_new(&o, &f->sim, &err) < 0)
        fail_msg("sim_new: %s", err.msg);
    start_plugin(f);
    f->block_allocate = true;
    t0 = time_now_ms();
    j = run(f, "admit p1 " RES "=1");
    assert_true(time_now_ms() - t0 < 5000);
    assert_pod(j, "Failed", "UnexpectedAdmissionError", NULL);
    msg = json_string_value(json_object_get(json_object_get(j, "pod"), "message"));
    if (!str_startswith(msg, "Allocate failed due to rpc error: code = DeadlineExceeded desc = ") ||
        !str_endswith(msg, ", which is unexpected"))
        fail_msg("message: %s", msg);
    json_decref(j);
    assert_capacity(f, 4, 4, 0);
}

static void test_admit_plugin_errors_in_kubelet_words(void **state)
{
    struct fake *f = *state;
    json_t *j;

    start_plugin(f);
    f->fail_preferred = true;
    j = run(f, "admit p1 " RES "=1");
    assert_pod(j, "Failed", "UnexpectedAdmissionError",
               "Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: "
               "rpc error: code = Internal desc = topology is on fire, which is unexpected");
    json_decref(j);
    f->fail_preferred = false;
    f->empty_allocate = true;
    j = run(f, "admit p2 " RES "=1");
    assert_pod(j, "Failed", "UnexpectedAdmissionError",
               "Allocate failed due to no containers return in allocation response, which is "
               "unexpected");
    json_decref(j);
    assert_capacity(f, 4, 4, 0);
}

static void test_admit_calls_pre_start_when_required(void **state)
{
    struct fake *f = *state;
    json_t *j;

    f->pre_start = true;
    start_plugin(f);
    j = run(f, "admit p1 " RES "=2");
    assert_pod(j, "Running", NULL, NULL);
    json_decref(j);
    assert_int_equal(f->n_pre_start_calls, 1);
    assert_int_equal(f->n_pre_start_ids, 2);
}

static void test_health_change_lowers_allocatable(void **state)
{
    struct fake *f = *state;
    json_t *j;

    start_plugin(f);
    f->healthy[0] = false;
    f->healthy[1] = false;
    fake_send_list(f);
    run_ok(f, "wait " RES " =2 " WAIT_MS);
    assert_capacity(f, 4, 2, 0);
    j = run(f, "devices " RES);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(j, "devices"), 0), "health")),
                        "Unhealthy");
    json_decref(j);
    j = run(f, "admit p1 " RES "=3");
    assert_pod(j, "Pending", "Insufficient " RES, NULL);
    json_decref(j);
    /* healthy again */
    f->healthy[0] = true;
    fake_send_list(f);
    run_ok(f, "wait " RES " 3 " WAIT_MS);
    j = run(f, "schedule");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(j, "pods"), 0), "phase")),
        "Running");
    json_decref(j);
}

static void test_stream_loss_marks_unhealthy(void **state)
{
    struct fake *f = *state;
    json_t *r;

    start_plugin(f);
    fake_unserve(f); /* the plugin goes away */
    run_ok(f, "wait " RES " =0 " WAIT_MS);
    assert_capacity(f, 4, 0, 0);
    r = capacity_of(f);
    assert_false(json_is_true(json_object_get(r, "connected")));
    json_decref(r);
}

static void test_wait_times_out_clearly(void **state)
{
    struct fake *f = *state;
    json_t *j;

    j = run(f, "wait " RES " 1 50");
    assert_false(json_is_true(json_object_get(j, "ok")));
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")),
                           "timed out after 50 ms waiting for \"" RES "\" allocatable >= 1"));
    json_decref(j);
}

static void test_restart_reregisters(void **state)
{
    struct fake *f = *state;
    json_t *j, *r;

    start_plugin(f);
    run_ok(f, "admit p1 " RES "=1");
    f->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    assert_true(f->inotify_fd >= 0);
    assert_true(inotify_add_watch(f->inotify_fd, f->dir, IN_CREATE) >= 0);
    assert_int_equal(pthread_create(&f->watcher, NULL, watcher_main, f), 0);
    f->watching = true;
    j = run(f, "restart " WAIT_MS);
    if (!json_is_true(json_object_get(j, "ok")))
        fail_msg("restart: %s", json_string_value(json_object_get(j, "error")));
    json_decref(j);
    run_ok(f, "wait " RES " 4 " WAIT_MS);
    r = capacity_of(f);
    assert_int_equal(json_integer_value(json_object_get(r, "registrations")), 2);
    assert_int_equal(json_integer_value(json_object_get(r, "allocated")), 1); /* p1 kept */
    json_decref(r);
}

static void test_restart_without_plugin_times_out(void **state)
{
    struct fake *f = *state;
    json_t *j;

    start_plugin(f);
    j = run(f, "restart 200"); /* nobody re-registers */
    assert_false(json_is_true(json_object_get(j, "ok")));
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")),
                           "did not register again within 200 ms"));
    json_decref(j);
    assert_false(path_exists(f->sock)); /* plugin sockets were deleted */
    assert_true(path_exists(f->kubelet_sock));
}

static void test_pod_resources_list(void **state)
{
    struct fake *f = *state;
    V1__ListPodResourcesResponse *m;
    uint8_t *resp = NULL;
    size_t len = 0;
    struct error err = {0};

    start_plugin(f);
    run_ok(f, "admit p1 " RES "=2");
    run_ok(f, "admit p2 other.com/x=1"); /* Pending: not listed */
    if (rpc_client_call(f->podres_sock, "/v1.PodResourcesLister/List", NULL, 0, 5000, &resp, &len,
                        NULL, &err) < 0)
        fail_msg("List: %s", err.msg);
    m = v1__list_pod_resources_response__unpack(NULL, len, resp);
    assert_non_null(m);
    assert_int_equal(m->n_pod_resources, 1);
    assert_string_equal(m->pod_resources[0]->name, "p1");
    assert_int_equal(m->pod_resources[0]->n_containers, 1);
    assert_int_equal(m->pod_resources[0]->containers[0]->n_devices, 1);
    assert_string_equal(m->pod_resources[0]->containers[0]->devices[0]->resource_name, RES);
    assert_int_equal(m->pod_resources[0]->containers[0]->devices[0]->n_device_ids, 2);
    v1__list_pod_resources_response__free_unpacked(m, NULL);
    free(resp);
    resp = NULL;

    /* GetAllocatableResources: the healthy devices, held or not */
    f->healthy[0] = false;
    fake_send_list(f);
    run_ok(f, "wait " RES " =3 " WAIT_MS);
    if (rpc_client_call(f->podres_sock, "/v1.PodResourcesLister/GetAllocatableResources", NULL, 0,
                        5000, &resp, &len, NULL, &err) < 0)
        fail_msg("GetAllocatableResources: %s", err.msg);
    {
        V1__AllocatableResourcesResponse *a =
            v1__allocatable_resources_response__unpack(NULL, len, resp);
        assert_non_null(a);
        assert_int_equal(a->n_devices, 1);
        assert_string_equal(a->devices[0]->resource_name, RES);
        assert_int_equal(a->devices[0]->n_device_ids, 3);
        assert_string_equal(a->devices[0]->device_ids[0], "dev-1");
        v1__allocatable_resources_response__free_unpacked(a, NULL);
    }
    free(resp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_register_dials_back_and_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_rejects_like_kubelet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_outcomes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_failed_unexpected_admission_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_admit_plugin_not_answering_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_plugin_errors_in_kubelet_words, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_calls_pre_start_when_required, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health_change_lowers_allocatable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_loss_marks_unhealthy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_times_out_clearly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_reregisters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_without_plugin_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pod_resources_list, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_deviceplugin.c: the DevicePlugin service (src/kubelet/deviceplugin.c) and the
 * registration client (src/kubelet/registration.c) over real unix sockets: options,
 * ListAndWatch on connect and on push, health, Allocate (good and bad), preferred
 * allocation, malformed protobuf, Register with a stand-in kubelet, backoff. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "fixtures.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"

#define M(x) "/v1beta1.DevicePlugin/" x

struct fx {
    char dir[64];
    struct dp_snapshot *snap;
    struct dp_plugin *p;
    struct rpc_client *c;
};

/* L20 time-sliced ×4: nvidia.com/gpu with 4 replicas. */
static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct cfg_config cfg;
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", 4);
    struct inv_inventory *inv = fx_l20();
    struct model *m;

    str_copy(f->dir, "/tmp/gs-dp-XXXXXX", sizeof(f->dir));
    assert_non_null(mkdtemp(f->dir));
    fx_cfg_init(&cfg);
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, false);
    m = fx_build(inv, &cfg);
    assert_int_equal(dp_snapshot_new(m, inv, &f->snap, NULL), 0);
    assert_int_equal(dp_plugin_new(f->dir, "nvidia.com/gpu", f->snap, NULL, &f->p, NULL), 0);
    assert_int_equal(dp_plugin_start(f->p, NULL), 0);
    assert_int_equal(rpc_client_new(dp_plugin_socket_path(f->p), NULL, &f->c, NULL), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    rpc_client_free(f->c);
    dp_plugin_free(f->p);
    dp_snapshot_unref(f->snap);
    assert_int_equal(rmdir(f->dir), 0); /* the socket is gone */
    free(f);
    return 0;
}

static int call(struct fx *f, const char *method, const ProtobufCMessage *msg, uint8_t **resp,
                size_t *len, struct rpc_status *st)
{
    size_t n = msg ? protobuf_c_message_get_packed_size(msg) : 0;
    uint8_t *buf = calloc(1, n + 1);
    int r;

    if (msg)
        protobuf_c_message_pack(msg, buf);
    r = rpc_client_unary(f->c, method, buf, n, 5000, resp, len, st, NULL);
    free(buf);
    return r;
}

static void test_dp_options(void **state)
{
    struct fx *f = *state;
    uint8_t *resp = NULL;
    size_t len = 0;
    V1beta1__DevicePluginOptions *o;

    assert_int_equal(call(f, M("GetDevicePluginOptions"), NULL, &resp, &len, NULL), 0);
    o = v1beta1__device_plugin_options__unpack(NULL, len, resp);
    assert_non_null(o);
    assert_false(o->pre_start_required);
    assert_true(o->get_preferred_allocation_available);
    v1beta1__device_plugin_options__free_unpacked(o, NULL);
    free(resp);
}

static V1beta1__ListAndWatchResponse *next_list(struct rpc_client_stream *s)
{
    uint8_t *msg = NULL;
    size_t len = 0;
    V1beta1__ListAndWatchResponse *l;

    assert_int_equal(rpc_client_stream_next(s, 5000, &msg, &len, NULL, NULL), 1);
    l = v1beta1__list_and_watch_response__unpack(NULL, len, msg);
    free(msg);
    assert_non_null(l);
    return l;
}

static void test_dp_list_and_watch_connect_and_health_push(void **state)
{
    struct fx *f = *state;
    struct rpc_client_stream *s = NULL;
    V1beta1__ListAndWatchResponse *l;
    const struct model *m = dp_snapshot_model(f->snap);
    const char *gpu_uuid = m->resources[0].devices[0].gpu_uuid;

    assert_int_equal(rpc_client_stream_open(f->c, M("ListAndWatch"), NULL, 0, &s, NULL), 0);
    l = next_list(s);
    assert_int_equal(l->n_devices, 4);
    for (size_t i = 0; i < l->n_devices; i++) {
        assert_string_equal(l->devices[i]->health, "Healthy");
        assert_non_null(strstr(l->devices[i]->id, "::"));
        assert_non_null(l->devices[i]->topology);
        assert_int_equal(l->devices[i]->topology->n_nodes, 1);
    }
    v1beta1__list_and_watch_response__free_unpacked(l, NULL);

    assert_int_equal(dp_snapshot_set_health(f->snap, gpu_uuid, INV_ID_NONE, INV_ID_NONE, false), 4);
    assert_int_equal(dp_plugin_push(f->p), 1);
    l = next_list(s);
    assert_int_equal(l->n_devices, 4);
    for (size_t i = 0; i < l->n_devices; i++)
        assert_string_equal(l->devices[i]->health, "Unhealthy");
    v1beta1__list_and_watch_response__free_unpacked(l, NULL);
    assert_int_equal(dp_snapshot_set_health(f->snap, "GPU-nope", INV_ID_NONE, INV_ID_NONE, false),
                     -ENOENT);
    rpc_client_stream_close(s);
}

static void test_dp_list_and_watch_many_connects(void **state)
{
    struct fx *f = *state;

    for (int i = 0; i < 200; i++) {
        struct rpc_client_stream *s = NULL;
        uint8_t *msg = NULL;
        size_t len;

        assert_int_equal(rpc_client_stream_open(f->c, M("ListAndWatch"), NULL, 0, &s, NULL), 0);
        if (i % 2 == 0) {
            assert_int_equal(rpc_client_stream_next(s, 5000, &msg, &len, NULL, NULL), 1);
            free(msg);
        }
        rpc_client_stream_close(s);
    }
    /* the server notices every cancel; wait for the watchers to drain */
    for (int i = 0; i < 5000 && dp_plugin_n_watchers(f->p) > 0; i++)
        usleep(1000);
    assert_int_equal(dp_plugin_n_watchers(f->p), 0);
    test_dp_options(state); /* still serving */
}

static int allocate(struct fx *f, const char *const *ids, size_t n, V1beta1__AllocateResponse **ret,
                    struct rpc_status *st)
{
    V1beta1__AllocateRequest rq = V1BETA1__ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    V1beta1__ContainerAllocateRequest *cp = &c;
    uint8_t *resp = NULL;
    size_t len = 0;
    int r;

    c.devices_ids = (char **)ids;
    c.n_devices_ids = n;
    rq.container_requests = &cp;
    rq.n_container_requests = 1;
    r = call(f, M("Allocate"), &rq.base, &resp, &len, st);
    if (r == 0) {
        *ret = v1beta1__allocate_response__unpack(NULL, len, resp);
        assert_non_null(*ret);
    }
    free(resp);
    return r;
}

static void test_dp_allocate_replica_and_errors(void **state)
{
    struct fx *f = *state;
    const struct model *m = dp_snapshot_model(f->snap);
    const char *good[] = {m->resources[0].devices[1].id};
    const char *unknown[] = {"GPU-does-not-exist::0"};
    V1beta1__AllocateResponse *a = NULL;
    struct rpc_status st;
    const char *visible = NULL;

    assert_int_equal(allocate(f, good, 1, &a, NULL), 0);
    assert_int_equal(a->n_container_responses, 1);
    for (size_t i = 0; i < a->container_responses[0]->n_envs; i++)
        if (strcmp(a->container_responses[0]->envs[i]->key, "NVIDIA_VISIBLE_DEVICES") == 0)
            visible = a->container_responses[0]->envs[i]->value;
    assert_non_null(visible);
    assert_string_equal(visible, m->resources[0].devices[1].base_id);
    v1beta1__allocate_response__free_unpacked(a, NULL);

    assert_int_equal(allocate(f, unknown, 1, &a, &st), -EREMOTEIO);
    assert_int_equal(st.code, RPC_UNKNOWN);
    assert_non_null(strstr(st.message, "invalid allocation request for \"nvidia.com/gpu\""));

    /* malformed protobuf */
    {
        static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
        uint8_t *resp = NULL;
        size_t len;
        assert_int_equal(
            rpc_client_unary(f->c, M("Allocate"), junk, sizeof(junk), 5000, &resp, &len, &st, NULL),
            -EREMOTEIO);
        assert_int_equal(st.code, RPC_INVALID_ARGUMENT);
        free(resp);
    }
    {
        struct dp_plugin_stats stats;
        dp_plugin_stats(f->p, &stats);
        assert_int_equal(stats.allocates, 1);
        assert_int_equal(stats.allocate_errors, 1);
    }
}

static void test_dp_preferred_allocation(void **state)
{
    struct fx *f = *state;
    const struct model *m = dp_snapshot_model(f->snap);
    V1beta1__PreferredAllocationRequest rq = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    V1beta1__ContainerPreferredAllocationRequest c =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    V1beta1__ContainerPreferredAllocationRequest *cp = &c;
    V1beta1__PreferredAllocationResponse *pr;
    char *avail[4];
    uint8_t *resp = NULL;
    size_t len = 0;
    struct rpc_status st;

    for (size_t i = 0; i < 4; i++)
        avail[i] = m->resources[0].devices[i].id;
    c.available_deviceids = avail;
    c.n_available_deviceids = 4;
    c.allocation_size = 1;
    rq.container_requests = &cp;
    rq.n_container_requests = 1;
    assert_int_equal(call(f, M("GetPreferredAllocation"), &rq.base, &resp, &len, NULL), 0);
    pr = v1beta1__preferred_allocation_response__unpack(NULL, len, resp);
    assert_non_null(pr);
    assert_int_equal(pr->n_container_responses, 1);
    assert_int_equal(pr->container_responses[0]->n_deviceids, 1);
    v1beta1__preferred_allocation_response__free_unpacked(pr, NULL);
    free(resp);
    resp = NULL;

    c.allocation_size = 5; /* more than available */
    assert_int_equal(call(f, M("GetPreferredAllocation"), &rq.base, &resp, &len, &st), -EREMOTEIO);
    free(resp);
}

/* ---- registration against a stand-in kubelet ---------------------------------------------- */

struct kubelet_fx {
    pthread_mutex_t lock;
    char endpoint[128], resource[128], version[32];
    bool preferred;
    int calls;
};

static int h_register(void *ctx, const uint8_t *req, size_t len, struct strbuf *resp,
                      struct rpc_status *st)
{
    struct kubelet_fx *k = ctx;
    V1beta1__RegisterRequest *r = v1beta1__register_request__unpack(NULL, len, req);

    (void)resp;
    if (!r) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "bad request");
        return 0;
    }
    pthread_mutex_lock(&k->lock);
    str_copy(k->endpoint, r->endpoint, sizeof(k->endpoint));
    str_copy(k->resource, r->resource_name, sizeof(k->resource));
    str_copy(k->version, r->version, sizeof(k->version));
    k->preferred = r->options && r->options->get_preferred_allocation_available;
    k->calls++;
    pthread_mutex_unlock(&k->lock);
    v1beta1__register_request__free_unpacked(r, NULL);
    return 0;
}

static void test_dp_register(void **state)
{
    struct fx *f = *state;
    struct kubelet_fx k = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct rpc_server *srv = NULL;
    struct strbuf path = STRBUF_INIT;
    struct error err = {0};

    assert_int_equal(strbuf_printf(&path, "%s/kubelet.sock", f->dir), 0);
    /* nobody serving yet */
    assert_int_equal(
        dp_register(strbuf_str(&path), dp_plugin_endpoint(f->p), "nvidia.com/gpu", 2000, &err),
        -ECONNREFUSED);
    assert_non_null(strstr(err.msg, "registering nvidia.com/gpu"));
    assert_int_equal(rpc_server_new(strbuf_str(&path), &srv, NULL), 0);
    assert_int_equal(
        rpc_server_add_unary(srv, "/v1beta1.Registration/Register", h_register, &k, NULL), 0);
    assert_int_equal(rpc_server_start(srv, NULL), 0);
    assert_int_equal(
        dp_register(strbuf_str(&path), dp_plugin_endpoint(f->p), "nvidia.com/gpu", 2000, NULL), 0);
    assert_int_equal(k.calls, 1);
    assert_string_equal(k.endpoint, "nvidia-gpu.sock");
    assert_string_equal(k.resource, "nvidia.com/gpu");
    assert_string_equal(k.version, "v1beta1");
    assert_true(k.preferred);
    rpc_server_free(srv);
    strbuf_release(&path);
}

static void test_dp_backoff_next_ms(void **state)
{
    static const unsigned cases[][2] = {
        {0, 1000},     {1, 1000},      {1000, 2000},   {2000, 4000},
        {8000, 16000}, {16000, 30000}, {30000, 30000}, {4000000000u, 30000},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(dp_backoff_next_ms(cases[i][0]), cases[i][1]);
}

static void test_dp_plugin_set_snapshot_pushes_new_list(void **state)
{
    struct fx *f = *state;
    struct rpc_client_stream *s = NULL;
    V1beta1__ListAndWatchResponse *l;
    struct cfg_config cfg;
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", 2);
    struct inv_inventory *inv = fx_l20(), *t4 = fx_t4();
    struct dp_snapshot *snap = NULL, *other = NULL;
    struct error err = {0};

    assert_int_equal(rpc_client_stream_open(f->c, M("ListAndWatch"), NULL, 0, &s, NULL), 0);
    l = next_list(s);
    assert_int_equal(l->n_devices, 4);
    v1beta1__list_and_watch_response__free_unpacked(l, NULL);

    fx_cfg_init(&cfg);
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, true, false); /* renamed .shared */
    assert_int_equal(dp_snapshot_new(fx_build(t4, &cfg), t4, &other, NULL), 0);
    assert_int_equal(dp_plugin_set_snapshot(f->p, other, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "not in the new model"));

    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, false);
    assert_int_equal(dp_snapshot_new(fx_build(inv, &cfg), inv, &snap, NULL), 0);
    assert_int_equal(dp_plugin_set_snapshot(f->p, snap, NULL), 0);
    l = next_list(s);
    assert_int_equal(l->n_devices, 2);
    v1beta1__list_and_watch_response__free_unpacked(l, NULL);
    rpc_client_stream_close(s);
    dp_snapshot_unref(snap); /* the plugin holds its own reference */
    dp_snapshot_unref(other);
    test_dp_options(state);
}

/* A live reload that left the resource unchanged swaps the snapshot without a push: the
 * stream sees nothing, the stats count no push; a later push sends the new model's list. */
static void test_dp_plugin_replace_snapshot_silent(void **state)
{
    struct fx *f = *state;
    struct rpc_client_stream *s = NULL;
    V1beta1__ListAndWatchResponse *l;
    struct cfg_config cfg;
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", 4);
    struct inv_inventory *inv = fx_l20();
    struct dp_snapshot *snap = NULL;
    struct dp_plugin_stats before, after;
    uint8_t *msg = NULL;
    size_t len = 0;

    assert_int_equal(rpc_client_stream_open(f->c, M("ListAndWatch"), NULL, 0, &s, NULL), 0);
    l = next_list(s);
    v1beta1__list_and_watch_response__free_unpacked(l, NULL);
    dp_plugin_stats(f->p, &before);
    fx_cfg_init(&cfg);
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, false);
    assert_int_equal(dp_snapshot_new(fx_build(inv, &cfg), inv, &snap, NULL), 0);
    assert_int_equal(dp_plugin_replace_snapshot(f->p, snap, false, NULL), 0);
    dp_plugin_stats(f->p, &after);
    assert_int_equal(after.pushes, before.pushes);
    assert_int_equal(rpc_client_stream_next(s, 100, &msg, &len, NULL, NULL), -ETIMEDOUT);
    assert_int_equal(dp_snapshot_set_all_health(snap, false), 4); /* the plugin serves snap */
    assert_int_equal(dp_plugin_push(f->p), 1);
    l = next_list(s);
    assert_int_equal(l->n_devices, 4);
    assert_string_equal(l->devices[0]->health, "Unhealthy");
    v1beta1__list_and_watch_response__free_unpacked(l, NULL);
    rpc_client_stream_close(s);
    dp_snapshot_unref(snap);
}

static void test_dp_plugin_new_unknown_resource(void **state)
{
    struct fx *f = *state;
    struct dp_plugin *p = NULL;
    struct error err = {0};

    assert_int_equal(dp_plugin_new(f->dir, "nvidia.com/nope", f->snap, NULL, &p, &err), -ENOENT);
    assert_null(p);
    assert_non_null(strstr(err.msg, "nvidia.com/nope"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dp_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dp_list_and_watch_connect_and_health_push, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dp_list_and_watch_many_connects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dp_allocate_replica_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dp_preferred_allocation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dp_register, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dp_plugin_new_unknown_resource, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dp_plugin_set_snapshot_pushes_new_list, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dp_plugin_replace_snapshot_silent, setup, teardown),
        cmocka_unit_test(test_dp_backoff_next_ms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

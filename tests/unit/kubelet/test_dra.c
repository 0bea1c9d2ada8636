/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for src/kubelet/dra.c and dra_client.c: the DRA plugin server with a stub ops table
 * over real unix sockets — registration (GetInfo, NotifyRegistrationStatus), prepare and
 * unprepare in v1 and v1beta1, whole-call failures, hostile requests, the v1beta1 wire
 * (decoded with the v1beta1 code), stale sockets. Python grpcio: tests/integration. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/base.h"
#include "dra/v1/api.pb-c.h"
#include "dra/v1beta1/api.pb-c.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"

#define WAIT_MS 10000

struct fixture {
    char dir[64];
    char plugins[96];
    char registry[96];
    struct kdra_server *srv;
    unsigned n_prepare, n_unprepare, n_reg;
    enum kdra_api last_api;
    bool reg_value;
    char reg_error[128];
};

/* ---- stub ops ---- */

/* name "bad*": per-claim error; name "whole": whole-call NOT_FOUND; "errno": bare -EIO. */
static int stub_prepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims, size_t n,
                        struct kdra_result *results, struct rpc_status *st)
{
    struct fixture *f = ctx;

    f->n_prepare++;
    f->last_api = api;
    for (size_t i = 0; i < n; i++) {
        char cdi[512];
        const char *ids[] = {cdi, NULL};
        const char *reqs[] = {"gpu", NULL};
        if (strcmp(claims[i].name, "whole") == 0) {
            rpc_status_set(st, RPC_NOT_FOUND, "claim %s/%s not found", claims[i].namespace,
                           claims[i].name);
            return -ENOENT;
        }
        if (strcmp(claims[i].name, "errno") == 0)
            return -EIO;
        if (strcmp(claims[i].name, "bare") == 0) {
            /* no request names, no CDI IDs: empty repeated fields on the wire */
            assert_int_equal(kdra_result_add_device(&results[i], "node1", "gpu-2", NULL, NULL), 0);
            continue;
        }
        if (strncmp(claims[i].name, "bad", 3) == 0) {
            assert_int_equal(kdra_result_set_error(&results[i], "requested device is not "
                                                                "allocatable: gpu-7"),
                             0);
            continue;
        }
        snprintf(cdi, sizeof(cdi), "k8s.gpu.nvidia.com/claim=%s-gpu-0", claims[i].uid);
        assert_int_equal(kdra_result_add_device(&results[i], "node1", "gpu-0", reqs, ids), 0);
        results[i].devices[0].share_id = str_dup("share-1");
    }
    return 0;
}

static int stub_unprepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims, size_t n,
                          struct kdra_result *results, struct rpc_status *st)
{
    struct fixture *f = ctx;

    f->n_unprepare++;
    f->last_api = api;
    for (size_t i = 0; i < n; i++)
        if (strncmp(claims[i].name, "bad", 3) == 0)
            kdra_result_set_error(&results[i], "cannot remove CDI spec of %s", claims[i].uid);
    return 0;
}

static void stub_registration(void *ctx, bool registered, const char *error)
{
    struct fixture *f = ctx;

    f->n_reg++;
    f->reg_value = registered;
    snprintf(f->reg_error, sizeof(f->reg_error), "%s", error);
}

static const struct kdra_ops stub_ops = {stub_prepare, stub_unprepare, stub_registration};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct kdra_server_opts o = {0};

    snprintf(f->dir, sizeof(f->dir), "/tmp/gs-dra-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->plugins, sizeof(f->plugins), "%s/plugins", f->dir);
    snprintf(f->registry, sizeof(f->registry), "%s/plugins_registry", f->dir);
    o.plugins_dir = f->plugins;
    o.registrar_dir = f->registry;
    o.ops = &stub_ops;
    o.ctx = f;
    assert_int_equal(kdra_server_new(&o, &f->srv, NULL), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    kdra_server_free(f->srv);
    path_rm_tree(f->dir);
    free(f);
    return 0;
}

static void start(struct fixture *f)
{
    struct error err = {0};

    assert_int_equal(kdra_server_start(f->srv, &err), 0);
}

/* ---- tests ---- */

static void test_kdra_server_paths(void **state)
{
    struct fixture *f = *state;
    char want[256];

    snprintf(want, sizeof(want), "%s/gpu.nvidia.com/dra.sock", f->plugins);
    assert_string_equal(kdra_server_socket_path(f->srv), want);
    snprintf(want, sizeof(want), "%s/gpu.nvidia.com-reg.sock", f->registry);
    assert_string_equal(kdra_server_registration_path(f->srv), want);
    assert_false(kdra_server_sockets_ok(f->srv));
    start(f);
    assert_true(kdra_server_sockets_ok(f->srv));
    kdra_server_stop(f->srv);
    assert_false(path_exists(kdra_server_registration_path(f->srv)));
    assert_false(path_exists(kdra_server_socket_path(f->srv)));
}

static void test_kdra_registration_get_info_and_notify(void **state)
{
    struct fixture *f = *state;
    struct kdra_plugin_info info = {0};
    struct kdra_registration reg;
    struct error err = {0};
    enum kdra_api api;

    start(f);
    assert_int_equal(
        kdra_client_get_info(kdra_server_registration_path(f->srv), WAIT_MS, &info, &err), 0);
    assert_string_equal(info.type, "DRAPlugin");
    assert_string_equal(info.name, "gpu.nvidia.com");
    assert_string_equal(info.endpoint, kdra_server_socket_path(f->srv));
    assert_int_equal(strv_length(info.supported_versions), 2);
    assert_string_equal(info.supported_versions[0], "v1.DRAPlugin");
    assert_string_equal(info.supported_versions[1], "v1beta1.DRAPlugin");
    assert_int_equal(kdra_pick_api(info.supported_versions, false, &api, NULL), 0);
    assert_int_equal(api, KDRA_API_V1);
    assert_int_equal(kdra_pick_api(info.supported_versions, true, &api, NULL), 0);
    assert_int_equal(api, KDRA_API_V1BETA1);

    kdra_server_registration(f->srv, &reg);
    assert_false(reg.is_registered);
    assert_int_equal(reg.n_get_info, 1);
    assert_int_equal(reg.n_notifications, 0);

    assert_int_equal(kdra_client_notify(kdra_server_registration_path(f->srv), false,
                                        "version mismatch", WAIT_MS, &err),
                     0);
    kdra_server_registration(f->srv, &reg);
    assert_false(reg.is_registered);
    assert_string_equal(reg.error, "version mismatch");
    assert_int_equal(
        kdra_client_notify(kdra_server_registration_path(f->srv), true, "", WAIT_MS, &err), 0);
    kdra_server_registration(f->srv, &reg);
    assert_true(reg.is_registered);
    assert_string_equal(reg.error, "");
    assert_int_equal(reg.n_notifications, 2);
    assert_int_equal(f->n_reg, 2);
    assert_true(f->reg_value);
    kdra_plugin_info_release(&info);
}

static void test_kdra_pick_api_choices(void **state)
{
    char *only_beta[] = {"v1beta1.DRAPlugin", NULL};
    char *only_v1[] = {"v1.DRAPlugin", NULL};
    char *old[] = {"v1alpha3.NodeService", NULL};
    char *none[] = {NULL};
    struct error err = {0};
    enum kdra_api api = KDRA_API_V1;

    (void)state;
    assert_int_equal(kdra_pick_api(only_beta, false, &api, NULL), 0);
    assert_int_equal(api, KDRA_API_V1BETA1);
    assert_int_equal(kdra_pick_api(only_v1, true, &api, &err), -ENOTSUP);
    assert_int_equal(kdra_pick_api(old, false, &api, &err), -ENOTSUP);
    assert_non_null(strstr(err.msg, "v1alpha3.NodeService"));
    assert_int_equal(kdra_pick_api(none, false, &api, &err), -ENOTSUP);
    assert_non_null(strstr(err.msg, "empty"));
}

static void check_prepared(const struct kdra_result *r, const char *uid, bool share)
{
    char want[256];

    snprintf(want, sizeof(want), "k8s.gpu.nvidia.com/claim=%s-gpu-0", uid);
    assert_null(r->error);
    assert_int_equal(r->n_devices, 1);
    assert_string_equal(r->devices[0].pool_name, "node1");
    assert_string_equal(r->devices[0].device_name, "gpu-0");
    assert_int_equal(strv_length(r->devices[0].cdi_device_ids), 1);
    assert_string_equal(r->devices[0].cdi_device_ids[0], want);
    assert_string_equal(r->devices[0].request_names[0], "gpu");
    if (share)
        assert_string_equal(r->devices[0].share_id, "share-1");
    else
        assert_null(r->devices[0].share_id);
}

static void test_kdra_prepare_both_apis(void **state)
{
    struct fixture *f = *state;
    const struct kdra_claim claims[] = {
        {"default", "uid-1", "claim-a"},
        {"team-b", "7c1e2f3a-0000-4000-8000-000000000001", "bad-device"},
    };
    struct kdra_result res[2];
    struct error err = {0};

    start(f);
    for (int api = KDRA_API_V1; api <= KDRA_API_V1BETA1; api++) {
        memset(res, 0, sizeof(res));
        assert_int_equal(kdra_client_call(kdra_server_socket_path(f->srv), (enum kdra_api)api, true,
                                          claims, 2, WAIT_MS, res, NULL, &err),
                         0);
        assert_int_equal(f->last_api, api);
        check_prepared(&res[0], "uid-1", api == KDRA_API_V1);
        assert_string_equal(res[1].error, "requested device is not allocatable: gpu-7");
        assert_int_equal(res[1].n_devices, 0);
        kdra_result_release(&res[0]);
        kdra_result_release(&res[1]);

        /* repeat: the same answer (the ops decide; the server keeps nothing) */
        memset(res, 0, sizeof(res));
        assert_int_equal(kdra_client_call(kdra_server_socket_path(f->srv), (enum kdra_api)api, true,
                                          claims, 1, WAIT_MS, res, NULL, &err),
                         0);
        check_prepared(&res[0], "uid-1", api == KDRA_API_V1);
        kdra_result_release(&res[0]);

        memset(res, 0, sizeof(res));
        assert_int_equal(kdra_client_call(kdra_server_socket_path(f->srv), (enum kdra_api)api,
                                          false, claims, 2, WAIT_MS, res, NULL, &err),
                         0);
        assert_null(res[0].error);
        assert_string_equal(res[1].error,
                            "cannot remove CDI spec of 7c1e2f3a-0000-4000-8000-000000000001");
        kdra_result_release(&res[0]);
        kdra_result_release(&res[1]);
    }
    assert_int_equal(f->n_prepare, 4);
    assert_int_equal(f->n_unprepare, 2);
}

/* A device with empty lists decodes to empty lists (UBSan once saw memcpy from NULL). */
static void test_kdra_prepare_device_without_lists(void **state)
{
    struct fixture *f = *state;
    const struct kdra_claim claims[] = {{"default", "uid-5", "bare"}};
    struct kdra_result res[1] = {{0}};
    struct error err = {0};

    start(f);
    assert_int_equal(kdra_client_call(kdra_server_socket_path(f->srv), KDRA_API_V1, true, claims, 1,
                                      WAIT_MS, res, NULL, &err),
                     0);
    assert_int_equal(res[0].n_devices, 1);
    assert_string_equal(res[0].devices[0].device_name, "gpu-2");
    assert_int_equal(strv_length(res[0].devices[0].request_names), 0);
    assert_int_equal(strv_length(res[0].devices[0].cdi_device_ids), 0);
    assert_null(res[0].devices[0].share_id);
    kdra_result_release(&res[0]);
}

static void test_kdra_prepare_empty_claims(void **state)
{
    struct fixture *f = *state;
    struct kdra_result res[1] = {{0}};
    struct error err = {0};

    start(f);
    assert_int_equal(kdra_client_call(kdra_server_socket_path(f->srv), KDRA_API_V1, true, NULL, 0,
                                      WAIT_MS, res, NULL, &err),
                     0);
    assert_int_equal(f->n_prepare, 1);
}

static void test_kdra_prepare_whole_call_failure(void **state)
{
    struct fixture *f = *state;
    const struct kdra_claim whole[] = {{"default", "uid-1", "claim-a"},
                                       {"default", "uid-2", "whole"}};
    const struct kdra_claim bare[] = {{"default", "uid-3", "errno"}};
    struct kdra_result res[2];
    struct rpc_status st = {0};
    struct error err = {0};

    start(f);
    memset(res, 0, sizeof(res));
    assert_int_equal(kdra_client_call(kdra_server_socket_path(f->srv), KDRA_API_V1, true, whole, 2,
                                      WAIT_MS, res, &st, &err),
                     -EREMOTEIO);
    assert_int_equal(st.code, RPC_NOT_FOUND);
    assert_string_equal(st.message, "claim default/whole not found");
    assert_non_null(strstr(err.msg, "code = NotFound"));
    /* the results the op had filled are released: nothing leaks, nothing is returned */
    assert_int_equal(res[0].n_devices, 0);

    memset(res, 0, sizeof(res));
    assert_int_equal(kdra_client_call(kdra_server_socket_path(f->srv), KDRA_API_V1BETA1, true, bare,
                                      1, WAIT_MS, res, &st, &err),
                     -EREMOTEIO);
    assert_int_equal(st.code, RPC_UNKNOWN);
}

/* A raw call; returns the status code. */
static int raw_call(struct fixture *f, const char *method, const uint8_t *req, size_t len,
                    struct rpc_status *st)
{
    uint8_t *resp = NULL;
    size_t resp_len = 0;

    memset(st, 0, sizeof(*st));
    (void)rpc_client_call(kdra_server_socket_path(f->srv), method, req, len, WAIT_MS, &resp,
                          &resp_len, st, NULL);
    free(resp);
    return st->code;
}

/* Encodes claims with the v1 code into a new buffer (owned). */
static uint8_t *encode_v1(K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim **c, size_t n, size_t *len)
{
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest m =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
    uint8_t *buf;

    m.claims = c;
    m.n_claims = n;
    *len = protobuf_c_message_get_packed_size(&m.base);
    buf = malloc(*len + 1);
    assert_non_null(buf);
    protobuf_c_message_pack(&m.base, buf);
    return buf;
}

static void test_kdra_prepare_hostile_requests(void **state)
{
    struct fixture *f = *state;
    const char *prep = kdra_method(KDRA_API_V1, true);
    static const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim one =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__CLAIM__INIT;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim **many;
    char long_name[KDRA_MAX_NAME_LEN + 2];
    struct rpc_status st;
    uint8_t *buf;
    size_t len, n = KDRA_MAX_CLAIMS + 1;

    start(f);
    assert_int_equal(raw_call(f, prep, garbage, sizeof(garbage), &st), RPC_INVALID_ARGUMENT);
    assert_int_equal(
        raw_call(f, kdra_method(KDRA_API_V1BETA1, false), garbage, sizeof(garbage), &st),
        RPC_INVALID_ARGUMENT);

    /* too many claims */
    many = calloc(n, sizeof(*many));
    assert_non_null(many);
    one.namespace_ = "default";
    one.name = "c";
    one.uid = "u";
    for (size_t i = 0; i < n; i++)
        many[i] = &one;
    buf = encode_v1(many, n, &len);
    assert_int_equal(raw_call(f, prep, buf, len, &st), RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "claims in one request"));
    free(buf);

    /* duplicate UIDs */
    buf = encode_v1(many, 2, &len);
    assert_int_equal(raw_call(f, prep, buf, len, &st), RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "appears twice"));
    free(buf);

    /* empty, too long, and path-like fields */
    one.uid = "";
    buf = encode_v1(many, 1, &len);
    assert_int_equal(raw_call(f, prep, buf, len, &st), RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "invalid uid"));
    free(buf);
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    one.uid = "u";
    one.name = long_name;
    buf = encode_v1(many, 1, &len);
    assert_int_equal(raw_call(f, prep, buf, len, &st), RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "invalid name"));
    free(buf);
    one.name = "c";
    one.namespace_ = "../etc";
    buf = encode_v1(many, 1, &len);
    assert_int_equal(raw_call(f, prep, buf, len, &st), RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(st.message, "invalid namespace"));
    free(buf);
    free(many);

    /* refused before the ops ever ran */
    assert_int_equal(f->n_prepare, 0);
    assert_int_equal(f->n_unprepare, 0);
    /* unknown methods */
    assert_int_equal(raw_call(f, "/k8s.io.kubelet.pkg.apis.dra.v1alpha4.Node/NodePrepareResources",
                              NULL, 0, &st),
                     RPC_UNIMPLEMENTED);
}

/* The v1beta1 answer decodes with the v1beta1 code and carries no share_id (field 5 would
 * be an unknown field there); the v1 answer carries it. */
static void test_kdra_v1beta1_wire(void **state)
{
    struct fixture *f = *state;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim one =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__CLAIM__INIT;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *cp = &one;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourcesResponse *b = NULL;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *v = NULL;
    const K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__Device *bd;
    struct rpc_status st = {0};
    uint8_t *buf, *resp = NULL;
    size_t len, resp_len = 0;

    start(f);
    one.namespace_ = "default";
    one.uid = "uid-9";
    one.name = "claim";
    buf = encode_v1(&cp, 1, &len);
    assert_int_equal(rpc_client_call(kdra_server_socket_path(f->srv),
                                     "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
                                     "NodePrepareResources",
                                     buf, len, WAIT_MS, &resp, &resp_len, &st, NULL),
                     0);
    b = k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__unpack(
        NULL, resp_len, resp);
    assert_non_null(b);
    assert_int_equal(b->n_claims, 1);
    assert_string_equal(b->claims[0]->key, "uid-9");
    assert_int_equal(b->claims[0]->value->n_devices, 1);
    bd = b->claims[0]->value->devices[0];
    assert_string_equal(bd->device_name, "gpu-0");
    assert_string_equal(bd->cdi_device_ids[0], "k8s.gpu.nvidia.com/claim=uid-9-gpu-0");
    assert_int_equal(bd->base.n_unknown_fields, 0);
    k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__free_unpacked(b,
                                                                                              NULL);
    free(resp);
    resp = NULL;

    assert_int_equal(rpc_client_call(kdra_server_socket_path(f->srv),
                                     "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
                                     "NodePrepareResources",
                                     buf, len, WAIT_MS, &resp, &resp_len, &st, NULL),
                     0);
    v = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__unpack(
        NULL, resp_len, resp);
    assert_non_null(v);
    assert_string_equal(v->claims[0]->value->devices[0]->share_id, "share-1");
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(v, NULL);
    free(resp);
    free(buf);
}

/* A socket file left by a crashed plugin is replaced at start. */
static void test_kdra_server_start_replaces_stale_sockets(void **state)
{
    struct fixture *f = *state;
    const char *paths[2];
    struct kdra_plugin_info info = {0};
    char dir[160];

    paths[0] = kdra_server_socket_path(f->srv);
    paths[1] = kdra_server_registration_path(f->srv);
    snprintf(dir, sizeof(dir), "%s/gpu.nvidia.com", f->plugins);
    assert_int_equal(path_mkdir_p(dir, 0750, NULL), 0);
    assert_int_equal(path_mkdir_p(f->registry, 0750, NULL), 0);
    for (size_t i = 0; i < 2; i++) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", paths[i]);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        close(fd); /* nobody listens: a dead socket file */
    }
    start(f);
    assert_int_equal(kdra_client_get_info(paths[1], WAIT_MS, &info, NULL), 0);
    kdra_plugin_info_release(&info);
}

static void test_kdra_server_new_bad_input(void **state)
{
    struct kdra_server *s = NULL;
    struct kdra_server_opts o = {0};
    struct error err = {0};
    char long_dir[200];

    (void)state;
    assert_int_equal(kdra_server_new(&o, &s, &err), -EINVAL);
    o.plugins_dir = "/tmp";
    o.registrar_dir = "/tmp";
    o.ops = &stub_ops;
    o.driver_name = "Not A Driver";
    assert_int_equal(kdra_server_new(&o, &s, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "Not A Driver"));
    o.driver_name = NULL;
    memset(long_dir, 'd', sizeof(long_dir) - 1);
    long_dir[0] = '/';
    long_dir[sizeof(long_dir) - 1] = '\0';
    o.plugins_dir = long_dir;
    assert_true(kdra_server_new(&o, &s, &err) < 0);
    assert_null(s);
}

static void test_kdra_result_helpers(void **state)
{
    struct kdra_result r = {0};

    (void)state;
    assert_int_equal(kdra_result_add_device(&r, "p", "d", NULL, NULL), 0);
    assert_int_equal(strv_length(r.devices[0].request_names), 0);
    assert_int_equal(kdra_result_set_error(&r, "first %d", 1), 0);
    assert_int_equal(kdra_result_set_error(&r, "second"), 0);
    assert_string_equal(r.error, "second");
    kdra_result_release(&r);
    assert_null(r.devices);
    kdra_result_release(NULL);
    assert_string_equal(kdra_api_name(KDRA_API_V1BETA1), "v1beta1");
    assert_string_equal(kdra_method(KDRA_API_V1, false),
                        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources");
}

/* ---- concurrency: ops that block on request ---- */

/* Claims "slow*" block in prepare until released; counts per claim UID ("A", "B"). */
struct conc {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool release;
    unsigned started[2], active[2], max_active[2], done[2];
    char dir[64], plugins[96], registry[96];
    struct kdra_server *srv;
};

static int conc_prepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims, size_t n,
                        struct kdra_result *results, struct rpc_status *st)
{
    struct conc *c = ctx;

    for (size_t i = 0; i < n; i++) {
        unsigned k = claims[i].uid[0] == 'B';

        pthread_mutex_lock(&c->lock);
        c->started[k]++;
        if (++c->active[k] > c->max_active[k])
            c->max_active[k] = c->active[k];
        pthread_cond_broadcast(&c->cond);
        while (strncmp(claims[i].name, "slow", 4) == 0 && !c->release)
            pthread_cond_wait(&c->cond, &c->lock);
        c->active[k]--;
        c->done[k]++;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
        if (kdra_result_add_device(&results[i], "node1", "gpu-0", NULL, NULL) < 0)
            return -ENOMEM;
    }
    return 0;
}

static const struct kdra_ops conc_ops = {conc_prepare, conc_prepare, NULL};

static int conc_setup(void **state)
{
    struct conc *c = calloc(1, sizeof(*c));
    struct kdra_server_opts o = {.ops = &conc_ops};
    struct error err = {0};

    assert_non_null(c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    snprintf(c->dir, sizeof(c->dir), "/tmp/gs-drac-XXXXXX");
    assert_non_null(mkdtemp(c->dir));
    snprintf(c->plugins, sizeof(c->plugins), "%s/plugins", c->dir);
    snprintf(c->registry, sizeof(c->registry), "%s/reg", c->dir);
    o.plugins_dir = c->plugins;
    o.registrar_dir = c->registry;
    o.ctx = c;
    assert_int_equal(kdra_server_new(&o, &c->srv, &err), 0);
    assert_int_equal(kdra_server_start(c->srv, &err), 0);
    *state = c;
    return 0;
}

static void conc_release(struct conc *c)
{
    pthread_mutex_lock(&c->lock);
    c->release = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static int conc_teardown(void **state)
{
    struct conc *c = *state;

    conc_release(c);
    kdra_server_free(c->srv);
    path_rm_tree(c->dir);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
    free(c);
    return 0;
}

/* Waits until *v >= want (under c->lock); false after WAIT_MS. */
static bool conc_wait(struct conc *c, const unsigned *v, unsigned want)
{
    uint64_t end = time_now_ms() + WAIT_MS;
    struct timespec ts;
    bool ok;

    pthread_mutex_lock(&c->lock);
    while (*v < want && time_now_ms() < end) {
        time_deadline(&ts, CLOCK_REALTIME, 20);
        pthread_cond_timedwait(&c->cond, &c->lock, &ts);
    }
    ok = *v >= want;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

static unsigned conc_get(struct conc *c, const unsigned *v)
{
    unsigned x;

    pthread_mutex_lock(&c->lock);
    x = *v;
    pthread_mutex_unlock(&c->lock);
    return x;
}

struct conc_call {
    struct conc *c;
    struct kdra_claim claim;
    int timeout_ms;
    int r;
    struct rpc_status st;
};

static void *conc_call_run(void *arg)
{
    struct conc_call *k = arg;
    struct kdra_result res = {0};
    struct error err = {0};

    k->r = kdra_client_call(kdra_server_socket_path(k->c->srv), KDRA_API_V1, true, &k->claim, 1,
                            k->timeout_ms, &res, &k->st, &err);
    kdra_result_release(&res);
    return NULL;
}

/* issue 29 §2: a prepare of claim A that hangs (an API read to its timeout) held up every
 * other pod's call. Now claim B is answered while A still blocks. */
static void test_kdra_prepare_other_claim_not_held_up(void **state)
{
    struct conc *c = *state;
    struct conc_call a = {c, {"ns", "A", "slow-a"}, WAIT_MS, -1, {0}};
    struct conc_call b = {c, {"ns", "B", "fast-b"}, 2000, -1, {0}};
    pthread_t ta;
    uint64_t t0;

    assert_int_equal(pthread_create(&ta, NULL, conc_call_run, &a), 0);
    assert_true(conc_wait(c, &c->started[0], 1));
    t0 = time_now_ms();
    conc_call_run(&b);
    assert_int_equal(b.r, 0);
    assert_true(time_now_ms() - t0 < 2000);
    assert_int_equal(conc_get(c, &c->done[0]), 0); /* A is still in its op */
    conc_release(c);
    pthread_join(ta, NULL);
    assert_int_equal(a.r, 0);
}

/* Calls on the same claim never overlap: while A's first prepare blocks, a second one for A
 * does not start (its kubelet gives up at 300 ms), a third waits and runs once the first is
 * done, and no two of them are ever in the op at once. */
static void test_kdra_prepare_same_claim_serialized(void **state)
{
    struct conc *c = *state;
    struct conc_call first = {c, {"ns", "A", "slow-a"}, WAIT_MS, -1, {0}};
    struct conc_call second = {c, {"ns", "A", "slow-a"}, 300, -1, {0}};
    struct conc_call third = {c, {"ns", "A", "fast-a"}, WAIT_MS, -1, {0}};
    pthread_t t1, t3;

    assert_int_equal(pthread_create(&t1, NULL, conc_call_run, &first), 0);
    assert_true(conc_wait(c, &c->started[0], 1));
    conc_call_run(&second);
    assert_int_equal(second.r, -ETIMEDOUT);
    assert_int_equal(pthread_create(&t3, NULL, conc_call_run, &third), 0);
    assert_int_equal(conc_get(c, &c->started[0]), 1);
    conc_release(c);
    pthread_join(t1, NULL);
    pthread_join(t3, NULL);
    assert_int_equal(first.r, 0);
    assert_int_equal(third.r, 0);
    assert_int_equal(conc_get(c, &c->max_active[0]), 1); /* never two at once */
    /* first and third; the second too when the server had not yet seen its reset */
    assert_true(conc_get(c, &c->started[0]) >= 2);
}

/* Stopping with a call in an op: it is answered before the socket goes, and a call after the
 * stop is refused rather than queued. */
static void test_kdra_stop_waits_for_running_call(void **state)
{
    struct conc *c = *state;
    struct conc_call a = {c, {"ns", "A", "slow-a"}, WAIT_MS, -1, {0}};
    pthread_t ta;

    assert_int_equal(pthread_create(&ta, NULL, conc_call_run, &a), 0);
    assert_true(conc_wait(c, &c->started[0], 1));
    conc_release(c);
    kdra_server_stop(c->srv);
    pthread_join(ta, NULL);
    assert_int_equal(a.r, 0);
    assert_int_equal(conc_get(c, &c->done[0]), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kdra_server_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kdra_registration_get_info_and_notify, setup,
                                        teardown),
        cmocka_unit_test(test_kdra_pick_api_choices),
        cmocka_unit_test_setup_teardown(test_kdra_prepare_both_apis, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kdra_prepare_device_without_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kdra_prepare_empty_claims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kdra_prepare_whole_call_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kdra_prepare_hostile_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kdra_v1beta1_wire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kdra_server_start_replaces_stale_sockets, setup,
                                        teardown),
        cmocka_unit_test(test_kdra_server_new_bad_input),
        cmocka_unit_test(test_kdra_result_helpers),
        cmocka_unit_test_setup_teardown(test_kdra_prepare_other_claim_not_held_up, conc_setup,
                                        conc_teardown),
        cmocka_unit_test_setup_teardown(test_kdra_prepare_same_claim_serialized, conc_setup,
                                        conc_teardown),
        cmocka_unit_test_setup_teardown(test_kdra_stop_waits_for_running_call, conc_setup,
                                        conc_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_podresources.c: the pod-resources List client (src/kubelet/podresources.c) against a
 * server on the rpc layer: devices of every container of every pod flattened with
 * "<namespace>/<pod>", holder lookups by resource and ID, a malformed answer, an error
 * status, and nobody serving the socket. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/base.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"
#include "podresources/v1/api.pb-c.h"

#define LIST "/v1.PodResourcesLister/List"

enum answer { ANSWER_PODS = 0, ANSWER_GARBAGE, ANSWER_ERROR };

struct fx {
    char dir[64];
    char sock[96];
    struct rpc_server *srv;
    enum answer answer;
};

static int on_list(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                   struct rpc_status *st)
{
    struct fx *f = ctx;
    char *ids_a[] = {"GPU-a::0", "GPU-a::5"}, *ids_b[] = {"MIG-b"}, *ids_c[] = {"GPU-a::6"};
    V1__ContainerDevices da = V1__CONTAINER_DEVICES__INIT, db = V1__CONTAINER_DEVICES__INIT,
                         dc = V1__CONTAINER_DEVICES__INIT;
    V1__ContainerDevices *c1_devs[] = {&da, &db}, *c2_devs[] = {&dc};
    V1__ContainerResources c1 = V1__CONTAINER_RESOURCES__INIT, c2 = V1__CONTAINER_RESOURCES__INIT;
    V1__ContainerResources *p1_cts[] = {&c1}, *p2_cts[] = {&c2};
    V1__PodResources p1 = V1__POD_RESOURCES__INIT, p2 = V1__POD_RESOURCES__INIT,
                     p3 = V1__POD_RESOURCES__INIT;
    V1__PodResources *pods[] = {&p1, &p2, &p3};
    V1__ListPodResourcesResponse out = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
    uint8_t buf[1024];
    size_t len;

    (void)req;
    (void)req_len;
    if (f->answer == ANSWER_ERROR) {
        rpc_status_set(st, RPC_UNAVAILABLE, "kubelet is busy");
        return 0;
    }
    if (f->answer == ANSWER_GARBAGE)
        return strbuf_append(resp, "\xff\xff\xff", 3);
    da.resource_name = "nvidia.com/gpu";
    da.device_ids = ids_a;
    da.n_device_ids = 2;
    db.resource_name = "nvidia.com/mig-1g.10gb";
    db.device_ids = ids_b;
    db.n_device_ids = 1;
    dc.resource_name = "nvidia.com/gpu";
    dc.device_ids = ids_c;
    dc.n_device_ids = 1;
    c1.name = "main";
    c1.devices = c1_devs;
    c1.n_devices = 2;
    c2.name = "side";
    c2.devices = c2_devs;
    c2.n_devices = 1;
    p1.name = "trainer";
    p1.namespace_ = "ml";
    p1.containers = p1_cts;
    p1.n_containers = 1;
    p2.name = "web";
    p2.namespace_ = "default";
    p2.containers = p2_cts;
    p2.n_containers = 1;
    p3.name = "cpu-only";
    p3.namespace_ = "default";
    out.pod_resources = pods;
    out.n_pod_resources = 3;
    len = v1__list_pod_resources_response__get_packed_size(&out);
    assert_true(len <= sizeof(buf));
    v1__list_pod_resources_response__pack(&out, buf);
    return strbuf_append(resp, (const char *)buf, len);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    str_copy(f->dir, "/tmp/gs-pr-XXXXXX", sizeof(f->dir));
    assert_non_null(mkdtemp(f->dir));
    assert_true(snprintf(f->sock, sizeof(f->sock), "%s/kubelet.sock", f->dir) > 0);
    assert_int_equal(rpc_server_new(f->sock, &f->srv, NULL), 0);
    assert_int_equal(rpc_server_add_unary(f->srv, LIST, on_list, f, NULL), 0);
    assert_int_equal(rpc_server_start(f->srv, NULL), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    rpc_server_free(f->srv);
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    return 0;
}

static void test_dp_pod_resources_list_flattens_pods(void **state)
{
    struct fx *f = *state;
    struct dp_pod_devices l = {0};
    static const struct {
        const char *resource, *id, *pod; /* pod NULL: free */
    } cases[] = {
        {"nvidia.com/gpu", "GPU-a::0", "ml/trainer"},
        {"nvidia.com/gpu", "GPU-a::5", "ml/trainer"},
        {"nvidia.com/gpu", "GPU-a::6", "default/web"},
        {"nvidia.com/mig-1g.10gb", "MIG-b", "ml/trainer"},
        {"nvidia.com/gpu", "GPU-a::1", NULL},
        {"nvidia.com/gpu.shared", "GPU-a::0", NULL}, /* same ID, other resource */
    };

    assert_int_equal(dp_pod_resources_list(f->sock, 2000, &l, NULL), 0);
    assert_int_equal(l.n, 4);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *pod = dp_pod_devices_holder(&l, cases[i].resource, cases[i].id);
        if (!cases[i].pod)
            assert_null(pod);
        else
            assert_string_equal(pod, cases[i].pod);
    }
    dp_pod_devices_release(&l);
    assert_int_equal(l.n, 0);
    dp_pod_devices_release(NULL);
    assert_null(dp_pod_devices_holder(NULL, "nvidia.com/gpu", "GPU-a::0"));
}

static void test_dp_pod_resources_list_errors(void **state)
{
    struct fx *f = *state;
    struct dp_pod_devices l = {0};
    struct error err = {0};
    char nobody[128];

    f->answer = ANSWER_GARBAGE;
    assert_int_equal(dp_pod_resources_list(f->sock, 2000, &l, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "malformed"));
    f->answer = ANSWER_ERROR;
    err = (struct error){0};
    assert_true(dp_pod_resources_list(f->sock, 2000, &l, &err) < 0);
    assert_non_null(strstr(err.msg, "kubelet is busy"));
    assert_int_equal(l.n, 0);
    assert_true(snprintf(nobody, sizeof(nobody), "%s/nobody.sock", f->dir) > 0);
    err = (struct error){0};
    assert_int_equal(dp_pod_resources_list(nobody, 2000, &l, &err), -ECONNREFUSED);
    assert_non_null(strstr(err.msg, "Unavailable"));
}

/* kubelet_internal_checkpoint: both DeviceIDs formats, and what is not a checkpoint. */
static void test_dp_checkpoint_read_formats(void **state)
{
    char dir[] = "/tmp/gs-cp-XXXXXX", path[128];
    struct dp_pod_devices l = {0};
    struct error err = {0};
    static const char current[] =
        "{\"Data\":{\"PodDeviceEntries\":[{\"PodUID\":\"u1\",\"ContainerName\":\"c\","
        "\"ResourceName\":\"nvidia.com/gpu\",\"DeviceIDs\":{\"0\":[\"GPU-a::1\"],"
        "\"-1\":[\"GPU-b::0\"]},\"AllocResp\":\"\"}],\"RegisteredDevices\":{}},"
        "\"Checksum\":42}";
    static const char v1[] =
        "{\"Data\":{\"PodDeviceEntries\":[{\"PodUID\":\"u2\",\"ContainerName\":\"c\","
        "\"ResourceName\":\"nvidia.com/gpu.shared\",\"DeviceIDs\":[\"GPU-c::3\"]}]},"
        "\"Checksum\":1}";

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/kubelet_internal_checkpoint", dir);
    assert_int_equal(file_write_atomic(path, current, strlen(current), 0600, NULL), 0);
    assert_int_equal(dp_checkpoint_read(path, &l, &err), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(dp_pod_devices_holder(&l, "nvidia.com/gpu", "GPU-a::1"), "uid u1");
    assert_string_equal(dp_pod_devices_holder(&l, "nvidia.com/gpu", "GPU-b::0"), "uid u1");
    assert_null(dp_pod_devices_holder(&l, "nvidia.com/gpu", "GPU-a::0"));
    dp_pod_devices_release(&l);
    assert_int_equal(file_write_atomic(path, v1, strlen(v1), 0600, NULL), 0);
    assert_int_equal(dp_checkpoint_read(path, &l, &err), 0);
    assert_string_equal(dp_pod_devices_holder(&l, "nvidia.com/gpu.shared", "GPU-c::3"), "uid u2");
    dp_pod_devices_release(&l);
    assert_int_equal(file_write_atomic(path, "[1,2]", 5, 0600, NULL), 0);
    assert_int_equal(dp_checkpoint_read(path, &l, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "not a kubelet device checkpoint"));
    unlink(path);
    assert_int_equal(dp_checkpoint_read(path, &l, &err), -ENOENT);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dp_pod_resources_list_flattens_pods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dp_pod_resources_list_errors, setup, teardown),
        cmocka_unit_test(test_dp_checkpoint_read_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

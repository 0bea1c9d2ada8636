/* SPDX-License-Identifier: Apache-2.0 */
/* test_slice.c: src/dra/slice.c — the ResourceSlice object in v1 (flat devices), v1beta2
 * (same) and v1beta1 (attributes and capacity under `basic`), generateName or name for an
 * update, the owner reference, unhealthy devices left out, bad input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

static json_t *slice_of(const struct dra_devices *devs, const struct dra_slice_meta *meta,
                        enum dra_api_version v)
{
    json_t *s = NULL;
    struct error err = {0};

    if (dra_slice_json(devs, meta, v, &s, &err) < 0)
        fail_msg("dra_slice_json: %s", err.msg);
    return s;
}

/* The whole v1 object for the L20 node, compared as text (keys sorted). */
static void test_dra_slice_json_v1_l20(void **state)
{
    static const char *const want =
        "{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceSlice\", "
        "\"metadata\": {\"generateName\": \"node-a-gpu.nvidia.com-\", \"ownerReferences\": "
        "[{\"apiVersion\": \"v1\", \"controller\": true, \"kind\": \"Node\", \"name\": "
        "\"node-a\", \"uid\": \"6b7a-uid\"}]}, \"spec\": {\"devices\": [{\"attributes\": "
        "{\"architecture\": {\"string\": \"Ada Lovelace\"}, \"brand\": {\"string\": "
        "\"Nvidia\"}, \"cudaComputeCapability\": {\"version\": \"8.9.0\"}, "
        "\"cudaDriverVersion\": {\"version\": \"12.8.0\"}, \"driverVersion\": {\"version\": "
        "\"570.158.1\"}, \"productName\": {\"string\": \"NVIDIA L20\"}, "
        "\"resource.kubernetes.io/pciBusID\": {\"string\": \"0000:10:00.0\"}, \"type\": "
        "{\"string\": \"gpu\"}, \"uuid\": {\"string\": \"%s\"}}, \"capacity\": {\"memory\": "
        "{\"value\": \"46068Mi\"}}, \"name\": \"gpu-0\"}], \"driver\": \"gpu.nvidia.com\", "
        "\"nodeName\": \"node-a\", \"pool\": {\"generation\": 1, \"name\": \"node-a\", "
        "\"resourceSliceCount\": 1}}}";
    struct inv_inventory *inv = tx_machine("l20-node");
    struct dra_devices *devs = tx_devices(inv);
    struct dra_slice_meta meta = {.node_name = "node-a", .node_uid = "6b7a-uid", .generation = 1};
    json_t *s = slice_of(devs, &meta, DRA_API_V1);
    char *text = json_dumps(s, JSON_SORT_KEYS);
    char expect[4096];
    (void)state;

    snprintf(expect, sizeof(expect), want, inv->gpus[0].uuid);
    assert_string_equal(text, expect);
    free(text);
    json_decref(s);
    dra_devices_free(devs);
    inv_free(inv);
}

/* v1beta1 nests each device's attributes and capacity under `basic`; v1beta2 is flat. */
static void test_dra_slice_json_versions(void **state)
{
    struct dra_slice_meta meta = {.node_name = "n", .generation = 3};
    json_t *s;
    const json_t *dev;
    (void)state;

    s = slice_of(tx_plan_devices(), &meta, DRA_API_V1BETA1);
    assert_string_equal(json_string_value(json_object_get(s, "apiVersion")),
                        "resource.k8s.io/v1beta1");
    dev = json_array_get(json_object_get(json_object_get(s, "spec"), "devices"), 1);
    assert_string_equal(json_string_value(json_object_get(dev, "name")), "gpu-1-mig-1g10gb-19-0");
    assert_null(json_object_get(dev, "attributes"));
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(dev, "basic"), "attributes"),
                            "profile"),
            "string")),
        "1g.10gb");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(dev, "basic"), "capacity"),
                            "memorySlice0"),
            "value")),
        "1");
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(s, "spec"), "pool"), "generation")),
                     3);
    assert_null(json_object_get(json_object_get(s, "metadata"), "ownerReferences"));
    json_decref(s);

    s = slice_of(tx_plan_devices(), &meta, DRA_API_V1BETA2);
    assert_string_equal(json_string_value(json_object_get(s, "apiVersion")),
                        "resource.k8s.io/v1beta2");
    dev = json_array_get(json_object_get(json_object_get(s, "spec"), "devices"), 0);
    assert_null(json_object_get(dev, "basic"));
    assert_non_null(json_object_get(json_object_get(dev, "attributes"), "uuid"));
    assert_int_equal(json_array_size(json_object_get(json_object_get(s, "spec"), "devices")), 8);
    json_decref(s);
    assert_string_equal(dra_api_version_string(DRA_API_V1), "resource.k8s.io/v1");
    assert_null(dra_api_version_string((enum dra_api_version)7));
}

/* An update names the slice (and its resourceVersion) instead of generateName. */
static void test_dra_slice_json_update(void **state)
{
    struct dra_slice_meta meta = {.node_name = "n",
                                  .name = "n-gpu.nvidia.com-x7k2p",
                                  .resource_version = "4711",
                                  .generation = 2};
    json_t *s = slice_of(tx_plan_devices(), &meta, DRA_API_V1);
    const json_t *md = json_object_get(s, "metadata");
    (void)state;

    assert_string_equal(json_string_value(json_object_get(md, "name")), "n-gpu.nvidia.com-x7k2p");
    assert_string_equal(json_string_value(json_object_get(md, "resourceVersion")), "4711");
    assert_null(json_object_get(md, "generateName"));
    json_decref(s);
}

/* Unhealthy devices are not published; attribute kinds int and bool encode as the API's. */
static void test_dra_slice_json_unhealthy_and_kinds(void **state)
{
    struct dra_devices devs = {0};
    struct dra_device d[2];
    struct dra_slice_meta meta = {.node_name = "n"};
    json_t *s;
    const json_t *attrs;
    (void)state;

    memset(d, 0, sizeof(d));
    str_copy(d[0].info.name, "gpu-0", sizeof(d[0].info.name));
    d[0].healthy = true;
    d[0].n_attrs = 2;
    str_copy(d[0].attrs[0].name, "index", sizeof(d[0].attrs[0].name));
    d[0].attrs[0].kind = DRA_ATTR_INT;
    d[0].attrs[0].i = 3;
    str_copy(d[0].attrs[1].name, "migCapable", sizeof(d[0].attrs[1].name));
    d[0].attrs[1].kind = DRA_ATTR_BOOL;
    d[0].attrs[1].b = true;
    str_copy(d[1].info.name, "gpu-1", sizeof(d[1].info.name));
    devs.devices = d;
    devs.n_devices = 2;
    s = slice_of(&devs, &meta, DRA_API_V1);
    assert_int_equal(json_array_size(json_object_get(json_object_get(s, "spec"), "devices")), 1);
    attrs = json_object_get(
        json_array_get(json_object_get(json_object_get(s, "spec"), "devices"), 0), "attributes");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(attrs, "index"), "int")),
                     3);
    assert_true(json_is_true(json_object_get(json_object_get(attrs, "migCapable"), "bool")));
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(s, "spec"), "pool"), "generation")),
                     1);
    json_decref(s);
}

static void test_dra_slice_json_bad_input(void **state)
{
    struct dra_slice_meta meta = {.node_name = ""};
    json_t *s = NULL;
    struct error err = {0};
    (void)state;

    assert_int_equal(dra_slice_json(tx_plan_devices(), &meta, DRA_API_V1, &s, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "NODE_NAME"));
    meta.node_name = "n";
    assert_int_equal(dra_slice_json(tx_plan_devices(), &meta, (enum dra_api_version)9, &s, &err),
                     -EINVAL);
    assert_null(s);
    assert_int_equal(dra_slice_json(tx_plan_devices(), NULL, DRA_API_V1, &s, NULL), -EINVAL);
}

/* The API allows 128 devices per slice: 128 healthy ones go, 129 are refused. */
static void test_dra_slice_json_too_many_devices(void **state)
{
    struct dra_devices devs = {calloc(130, sizeof(struct dra_device)), 130};
    struct dra_slice_meta meta = {.node_name = "n"};
    json_t *s = NULL;
    struct error err = {0};
    (void)state;

    assert_non_null(devs.devices);
    for (size_t i = 0; i < 130; i++) {
        snprintf(devs.devices[i].info.name, sizeof(devs.devices[i].info.name), "gpu-%zu", i);
        devs.devices[i].healthy = i >= 2;
    }
    assert_int_equal(dra_slice_json(&devs, &meta, DRA_API_V1, &s, &err), 0);
    json_decref(s);
    devs.devices[0].healthy = true;
    assert_int_equal(dra_slice_json(&devs, &meta, DRA_API_V1, &s, &err), -E2BIG);
    assert_non_null(strstr(err.msg, "129 devices on node n, more than the 128"));
    free(devs.devices);
}

int run_slice_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_slice_json_v1_l20),
        cmocka_unit_test(test_dra_slice_json_versions),
        cmocka_unit_test(test_dra_slice_json_update),
        cmocka_unit_test(test_dra_slice_json_unhealthy_and_kinds),
        cmocka_unit_test(test_dra_slice_json_bad_input),
        cmocka_unit_test(test_dra_slice_json_too_many_devices),
    };
    return cmocka_run_group_tests_name("dra slice", tests, NULL, NULL);
}

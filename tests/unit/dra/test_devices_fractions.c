/* SPDX-License-Identifier: Apache-2.0 */
/* test_devices_fractions.c: src/dra/devices.c and slice.c for GPUs shared by memory
 * (config sharing.fractions, KEP-5075 consumable capacity): which GPUs become shareable
 * (per node, per model through resources.gpus, per GPU; never MIG), their capacities and
 * request policies within the API server's rules, and the slice JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

static struct cfg_config *fx_config(const char *yaml)
{
    struct cfg_diags diags = CFG_DIAGS_INIT;
    struct cfg_config *cfg = NULL;
    struct error err = {0};
    int r = cfg_parse_buffer(yaml, strlen(yaml), "t.yaml", NULL, &cfg, &diags, &err);

    if (r < 0)
        fail_msg("config did not parse: %s\n%s", err.msg, yaml);
    cfg_diags_release(&diags);
    return cfg;
}

static struct dra_devices *fx_devices(const struct inv_inventory *inv, const char *yaml)
{
    struct cfg_config *cfg = yaml ? fx_config(yaml) : NULL;
    struct dra_devices_options opts = {.cfg = cfg};
    struct dra_devices *devs = NULL;
    struct error err = {0};

    if (dra_devices_build(inv, &opts, &devs, &err) < 0)
        fail_msg("dra_devices_build: %s", err.msg);
    cfg_free(cfg);
    return devs;
}

static uint64_t q(const char *text)
{
    uint64_t v = 0;
    assert_int_equal(dra_quantity_parse(text, &v, NULL), 0);
    return v;
}

/* The API server's rules for a validRange (pkg/apis/resource/validation,
 * validateRequestPolicyRange): min <= value, default >= min, max within [min, value] and >=
 * default, min + step <= value, default and max on the grid min + k*step. */
static void check_policy_valid(const struct dra_capacity *c)
{
    const struct dra_request_policy *p = &c->policy;
    uint64_t value = q(c->value), def = q(p->default_value), min = q(p->min);

    assert_true(c->has_policy);
    assert_true(min <= value);
    assert_true(def >= min);
    if (*p->max) {
        assert_true(q(p->max) >= min && q(p->max) <= value && def <= q(p->max));
    }
    if (*p->step) {
        uint64_t step = q(p->step);
        assert_true(step > 0 && min + step <= value);
        assert_int_equal((def - min) % step, 0);
        if (*p->max)
            assert_int_equal((q(p->max) - min) % step, 0);
    }
}

/* What the allocator consumes for a request (structured: roundUpRange). */
static uint64_t consumed(const struct dra_capacity *c, uint64_t request)
{
    uint64_t min = q(c->policy.min), step = *c->policy.step ? q(c->policy.step) : 0;

    if (request < min)
        return min;
    return step ? min + (request - min + step - 1) / step * step : request;
}

static void check_shareable_gpu(const struct dra_device *d, const char *memory)
{
    const struct dra_capacity *mem = dra_device_capacity(d, DRA_CAPACITY_MEMORY);
    const struct dra_capacity *cpu = dra_device_capacity(d, DRA_CAPACITY_COMPUTE);

    assert_true(d->shareable);
    assert_non_null(mem);
    assert_non_null(cpu);
    assert_string_equal(mem->value, memory);
    /* a request that names no memory takes the whole GPU: old claims keep whole GPUs */
    assert_string_equal(mem->policy.default_value, memory);
    assert_string_equal(mem->policy.min, "1Gi");
    assert_string_equal(mem->policy.step, "1Mi");
    assert_string_equal(mem->policy.max, "");
    check_policy_valid(mem);
    assert_string_equal(cpu->value, "100");
    assert_string_equal(cpu->policy.default_value, "0");
    assert_string_equal(cpu->policy.min, "0");
    assert_string_equal(cpu->policy.max, "100");
    assert_string_equal(cpu->policy.step, "1");
    check_policy_valid(cpu);
    /* attributes + capacities within the API's 32 */
    assert_true(d->n_attrs + d->n_capacities <= 32);
}

/* Per node: every GPU of the 8 x H100 node; seven 10Gi shares fit on 81559Mi, the eighth
 * does not, and a whole request (the default) only fits an unused GPU. */
static void test_dra_fractions_h100_node(void **state)
{
    struct inv_inventory *inv = tx_machine("h100-nvswitch-8");
    struct dra_devices *devs = fx_devices(inv, "version: v1\nsharing:\n  fractions:\n"
                                               "    resources: [{name: nvidia.com/gpu}]\n");
    const struct dra_capacity *mem;
    uint64_t share;
    (void)state;

    assert_int_equal(devs->n_devices, 8);
    for (size_t i = 0; i < devs->n_devices; i++)
        check_shareable_gpu(&devs->devices[i], "81559Mi");
    mem = dra_device_capacity(&devs->devices[0], DRA_CAPACITY_MEMORY);
    share = consumed(mem, 10ull << 30);
    assert_int_equal(share, 10ull << 30); /* kept to the MiB: 10Gi consumes 10Gi */
    assert_true(7 * share <= q(mem->value));
    assert_true(8 * share > q(mem->value));
    assert_int_equal(consumed(mem, 100ull << 20), 1ull << 30);         /* below min: 1Gi */
    assert_int_equal(consumed(mem, 10000000000ull), 9537ull << 20);    /* 10G -> 9537Mi */
    assert_true(q(mem->policy.default_value) + share > q(mem->value)); /* whole: nothing else */
    dra_devices_free(devs);
    inv_free(inv);
}

/* Per model (resources.gpus) and per GPU (devices by index, uuid, count); a GPU in MIG mode
 * keeps its MIG devices unshared; the rest of the node is NVIDIA's slice unchanged. */
static void test_dra_fractions_selection(void **state)
{
    struct inv_inventory *inv = tx_machine("mixed-models");
    struct dra_devices *plain = fx_devices(inv, NULL), *devs;
    char yaml[512];
    (void)state;

    /* per model: the L20s through their own resource name */
    devs = fx_devices(inv, "version: v1\nresources:\n  gpus:\n"
                           "  - {pattern: '*L20*', name: nvidia.com/l20}\n"
                           "  - {pattern: '*', name: nvidia.com/gpu}\n"
                           "sharing:\n  fractions:\n    resources: [{name: nvidia.com/l20}]\n");
    for (size_t i = 0; i < devs->n_devices; i++) {
        const struct dra_device *d = &devs->devices[i];
        bool want = strcmp(d->info.name, "gpu-2") == 0 || strcmp(d->info.name, "gpu-3") == 0;
        assert_int_equal(d->shareable, want);
        if (want)
            check_shareable_gpu(d, "46068Mi");
        else /* as NVIDIA publishes it */
            assert_true(dra_devices_same_slice(
                &(struct dra_devices){(struct dra_device *)d, 1},
                &(struct dra_devices){(struct dra_device *)dra_devices_find(plain, d->info.name),
                                      1}));
    }
    dra_devices_free(devs);

    /* per GPU: by index and by uuid; GPU 0 is in MIG mode and stays as it is */
    snprintf(yaml, sizeof(yaml),
             "version: v1\nsharing:\n  fractions:\n    resources:\n"
             "    - {name: nvidia.com/gpu, devices: [0, 4, %s]}\n",
             inv->gpus[5].uuid);
    devs = fx_devices(inv, yaml);
    for (size_t i = 0; i < devs->n_devices; i++) {
        const char *n = devs->devices[i].info.name;
        assert_int_equal(devs->devices[i].shareable,
                         strcmp(n, "gpu-4") == 0 || strcmp(n, "gpu-5") == 0);
    }
    assert_null(
        dra_device_capacity(dra_devices_find(devs, "gpu-0-mig-4g20gb-5-0"), DRA_CAPACITY_COMPUTE));
    dra_devices_free(devs);

    /* devices: 2 = the first two GPUs of the name not in MIG mode (GPU 0 is) */
    devs = fx_devices(inv, "version: v1\nsharing:\n  fractions:\n"
                           "    resources: [{name: nvidia.com/gpu, devices: 2}]\n");
    for (size_t i = 0; i < devs->n_devices; i++) {
        const char *n = devs->devices[i].info.name;
        assert_int_equal(devs->devices[i].shareable,
                         strcmp(n, "gpu-1") == 0 || strcmp(n, "gpu-2") == 0);
    }
    dra_devices_free(devs);

    /* another sharing mode, or no config: no GPU is shareable */
    devs = fx_devices(inv, "version: v1\nsharing:\n  timeSlicing:\n"
                           "    resources: [{name: nvidia.com/gpu, replicas: 2}]\n");
    assert_true(dra_devices_same_slice(devs, plain));
    for (size_t i = 0; i < devs->n_devices; i++)
        assert_false(devs->devices[i].shareable);
    dra_devices_free(devs);
    dra_devices_free(plain);
    inv_free(inv);
}

/* Turning fractions on or off changes the slice (the plugin writes it again). */
static void test_dra_fractions_same_slice(void **state)
{
    struct inv_inventory *inv = tx_machine("l20-node");
    struct dra_devices *plain = fx_devices(inv, NULL);
    struct dra_devices *shared = fx_devices(inv, "version: v1\nsharing:\n  fractions:\n"
                                                 "    resources: [{name: nvidia.com/gpu}]\n");
    struct dra_devices *again = dra_devices_dup(shared);
    (void)state;

    assert_false(dra_devices_same_slice(plain, shared));
    assert_true(dra_devices_same_slice(shared, again));
    str_copy(again->devices[0].capacities[0].policy.min, "2Gi",
             sizeof(again->devices[0].capacities[0].policy.min));
    assert_false(dra_devices_same_slice(shared, again));
    dra_devices_free(plain);
    dra_devices_free(shared);
    dra_devices_free(again);
    inv_free(inv);
}

/* The slice JSON: allowMultipleAllocations and requestPolicy on shareable GPUs only, in v1
 * (and under `basic` in v1beta1). */
static void test_dra_fractions_slice_json(void **state)
{
    struct inv_inventory *inv = tx_machine("mixed-models");
    struct dra_devices *devs = fx_devices(inv, "version: v1\nsharing:\n  fractions:\n"
                                               "    resources: [{name: nvidia.com/gpu, "
                                               "devices: [1]}]\n");
    struct dra_slice_meta meta = {.node_name = "node-a", .generation = 1};
    json_t *slice = NULL, *want;
    json_t *devices, *d;
    size_t i;
    (void)state;

    assert_int_equal(dra_slice_json(devs, &meta, DRA_API_V1, &slice, NULL), 0);
    devices = json_object_get(json_object_get(slice, "spec"), "devices");
    json_array_foreach(devices, i, d)
    {
        const char *name = json_string_value(json_object_get(d, "name"));
        json_t *cap = json_object_get(d, "capacity");
        if (strcmp(name, "gpu-1") != 0) {
            assert_null(json_object_get(d, "allowMultipleAllocations"));
            assert_null(json_object_get(cap, DRA_CAPACITY_COMPUTE));
            assert_null(json_object_get(json_object_get(cap, "memory"), "requestPolicy"));
            continue;
        }
        assert_true(json_is_true(json_object_get(d, "allowMultipleAllocations")));
        want = tx_json("{\"memory\": {\"value\": \"24Gi\", \"requestPolicy\": {\"default\": "
                       "\"24Gi\", \"validRange\": {\"min\": \"1Gi\", \"step\": \"1Mi\"}}},"
                       " \"computePercent\": {\"value\": \"100\", \"requestPolicy\": "
                       "{\"default\": \"0\", \"validRange\": {\"min\": \"0\", \"max\": \"100\", "
                       "\"step\": \"1\"}}}}");
        assert_true(json_equal(cap, want));
        json_decref(want);
    }
    json_decref(slice);

    assert_int_equal(dra_slice_json(devs, &meta, DRA_API_V1BETA1, &slice, NULL), 0);
    devices = json_object_get(json_object_get(slice, "spec"), "devices");
    json_array_foreach(devices, i, d)
    {
        json_t *basic = json_object_get(d, "basic");
        bool shared = strcmp(json_string_value(json_object_get(d, "name")), "gpu-1") == 0;
        assert_int_equal(json_is_true(json_object_get(basic, "allowMultipleAllocations")), shared);
        assert_null(json_object_get(d, "allowMultipleAllocations"));
    }
    json_decref(slice);
    dra_devices_free(devs);
    inv_free(inv);
}

/* What dra-plugin takes from a config: no sharing or fractions; time-slicing and MPS blocks
 * are the device plugin's (claims carry their own GpuConfig under DRA). */
static void test_dra_config_check(void **state)
{
    struct cfg_config *cfg;
    struct error err = {0};
    (void)state;

    assert_int_equal(dra_config_check(NULL, &err), 0);
    cfg = fx_config("version: v1\n");
    assert_int_equal(dra_config_check(cfg, &err), 0);
    cfg_free(cfg);
    cfg = fx_config("version: v1\nsharing:\n  fractions:\n"
                    "    resources: [{name: nvidia.com/gpu}]\n");
    assert_int_equal(dra_config_check(cfg, &err), 0);
    cfg_free(cfg);
    cfg = fx_config("version: v1\nflags: {mpsRoot: /m}\nsharing:\n  mps:\n"
                    "    resources: [{name: nvidia.com/gpu, replicas: 2}]\n");
    assert_int_equal(dra_config_check(cfg, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "sharing.mps is the device plugin's"));
    assert_non_null(strstr(err.msg, "use sharing.fractions or no sharing block"));
    cfg_free(cfg);
}

int run_fractions_tests(void)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_fractions_h100_node),
        cmocka_unit_test(test_dra_fractions_selection),
        cmocka_unit_test(test_dra_fractions_same_slice),
        cmocka_unit_test(test_dra_fractions_slice_json),
        cmocka_unit_test(test_dra_config_check),
    };
    return cmocka_run_group_tests_name("dra_fractions", tests, NULL, NULL);
}

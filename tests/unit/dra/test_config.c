/* SPDX-License-Identifier: Apache-2.0 */
/* test_config.c: src/dra/config.c — GpuConfig and MigDeviceConfig as NVIDIA documents them
 * (time-slicing intervals, MPS limits), accepted without feature gates; every strict-decode
 * and validation error with what, where and the fix; Kubernetes quantities. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

#define API "\"apiVersion\": \"resource.nvidia.com/v1beta1\", "

static int decode(const char *text, struct dra_opaque_config *c, struct error *err)
{
    json_t *j = tx_json(text);
    int r = dra_opaque_config_decode(j, "claim config[0]", c, err);

    json_decref(j);
    return r;
}

static void test_dra_config_decode_valid(void **state)
{
    struct dra_opaque_config c;
    struct error err = {0};
    (void)state;

    assert_int_equal(decode("{" API "\"kind\": \"GpuConfig\"}", &c, &err), 0);
    assert_int_equal(c.kind, DRA_CONFIG_GPU);
    assert_ptr_equal(c.mode, cfg_sharing_mode(CFG_SHARING_NONE));

    assert_int_equal(decode("{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": "
                            "\"TimeSlicing\", \"timeSlicingConfig\": {\"interval\": \"Long\"}}}",
                            &c, &err),
                     0);
    assert_ptr_equal(c.mode, cfg_sharing_mode(CFG_SHARING_TIME_SLICING));
    assert_int_equal(c.interval, DRA_TIMESLICE_LONG);

    assert_int_equal(decode("{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": "
                            "\"TimeSlicing\"}}",
                            &c, &err),
                     0);
    assert_int_equal(c.interval, DRA_TIMESLICE_DEFAULT);

    assert_int_equal(
        decode(
            "{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
            "\"mpsConfig\": {\"defaultActiveThreadPercentage\": 50, "
            "\"defaultPinnedDeviceMemoryLimit\": \"10Gi\", "
            "\"defaultPerDevicePinnedMemoryLimit\": {\"0\": \"5Gi\", \"GPU-abc\": 2147483648}}}}",
            &c, &err),
        0);
    assert_ptr_equal(c.mode, cfg_sharing_mode(CFG_SHARING_MPS));
    assert_int_equal(c.mps.active_thread_percentage, 50);
    assert_true(c.mps.has_pinned_limit);
    assert_int_equal(c.mps.pinned_limit_bytes, 10ull << 30);
    assert_int_equal(c.mps.n_per_device, 2);
    assert_string_equal(c.mps.per_device[0].key, "0");
    assert_int_equal(c.mps.per_device[0].bytes, 5ull << 30);
    assert_string_equal(c.mps.per_device[1].key, "GPU-abc");
    assert_int_equal(c.mps.per_device[1].bytes, 2ull << 30);

    assert_int_equal(decode("{" API "\"kind\": \"MigDeviceConfig\", \"sharing\": {\"strategy\": "
                            "\"MPS\", \"mpsConfig\": null}}",
                            &c, &err),
                     0);
    assert_int_equal(c.kind, DRA_CONFIG_MIG);
    assert_int_equal(c.mps.active_thread_percentage, -1);
    assert_false(c.mps.has_pinned_limit);
    assert_int_equal(decode("{" API "\"kind\": \"MigDeviceConfig\", \"sharing\": {\"strategy\": "
                            "\"TimeSlicing\"}}",
                            &c, &err),
                     0);
    assert_ptr_equal(c.mode, cfg_sharing_mode(CFG_SHARING_TIME_SLICING));
}

/* Every refusal: the message names the config, the field, and what to write instead. */
static void test_dra_config_decode_errors(void **state)
{
    static const char *const t[][2] = {
        {"[]", "parameters must be an object"},
        {"{\"kind\": \"GpuConfig\"}", "Object 'apiVersion' is missing; set apiVersion: "
                                      "resource.nvidia.com/v1beta1"},
        {"{" API "\"sharing\": {}}", "Object 'Kind' is missing"},
        {"{\"apiVersion\": \"resource.nvidia.com/v1\", \"kind\": \"GpuConfig\"}",
         "no kind \"GpuConfig\" is registered for version \"resource.nvidia.com/v1\""},
        {"{" API "\"kind\": \"VfioDeviceConfig\"}", "use GpuConfig or MigDeviceConfig"},
        {"{" API "\"kind\": \"GpuConfig\", \"shareing\": {}}",
         "unknown field \"shareing\"; the config takes only apiVersion, kind, sharing"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": []}", "sharing must be an object"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"Timeslicing\"}}",
         "unknown GPU sharing strategy: Timeslicing (sharing.strategy); use TimeSlicing or MPS"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {}}",
         "unknown GPU sharing strategy: (none)"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", \"replicas\": 2}}",
         "unknown field \"sharing.replicas\"; sharing takes only strategy, timeSlicingConfig, "
         "mpsConfig"},
        {"{" API "\"kind\": \"MigDeviceConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\", "
         "\"timeSlicingConfig\": {\"interval\": \"Short\"}}}",
         "unknown field \"sharing.timeSlicingConfig\"; sharing takes only strategy, mpsConfig"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\", "
         "\"timeSlicingConfig\": {\"interval\": \"Fast\"}}}",
         "unknown time-slice interval: Fast (sharing.timeSlicingConfig.interval); use Default, "
         "Short, Medium or Long"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\", "
         "\"timeSlicingConfig\": {\"interval\": 2}}}",
         "unknown time-slice interval: (not a string)"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\", "
         "\"timeSlicingConfig\": {\"period\": \"Long\"}}}",
         "unknown field \"sharing.timeSlicingConfig.period\""},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\", "
         "\"mpsConfig\": {}}}",
         "cannot use MpsConfig with the 'TimeSlicing' strategy"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"timeSlicingConfig\": {}}}",
         "cannot use TimeSlicingConfig with the 'MPS' strategy"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": 5}}",
         "sharing.mpsConfig must be an object"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": {\"defaultActiveThreadPercentage\": 101}}}",
         "active thread percentage must not be greater than 100"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": {\"defaultActiveThreadPercentage\": -1}}}",
         "active thread percentage must not be negative"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": {\"defaultActiveThreadPercentage\": 12.5}}}",
         "must be a whole number from 0 to 100"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": {\"defaultPinnedDeviceMemoryLimit\": \"10 gigs\"}}}",
         "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: '10 gigs' is not a quantity"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": {\"defaultPinnedDeviceMemoryLimit\": true}}}",
         "defaultPinnedDeviceMemoryLimit must be a quantity string"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": {\"defaultPinnedDeviceMemoryLimit\": \"1M\"}}}",
         "is 1M, less than 1Mi"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": {\"defaultPerDevicePinnedMemoryLimit\": [\"1Gi\"]}}}",
         "must map device indexes or UUIDs to quantities"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": {\"defaultPerDevicePinnedMemoryLimit\": {\"0\": \"512Ki\"}}}}",
         "defaultPerDevicePinnedMemoryLimit[\"0\"] is 512Ki, less than 1Mi"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", "
         "\"mpsConfig\": {\"defaultThreads\": 5}}}",
         "unknown field \"sharing.mpsConfig.defaultThreads\""},
    };
    struct dra_opaque_config c;
    struct error err = {0};
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(t); i++) {
        error_clear(&err);
        if (decode(t[i][0], &c, &err) != -EINVAL)
            fail_msg("case %zu accepted: %s", i, t[i][0]);
        if (!strstr(err.msg, t[i][1]))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, t[i][1]);
        if (strncmp(err.msg, "claim config[0]: ", 17) != 0)
            fail_msg("case %zu: '%s' does not say where", i, err.msg);
    }
}

static void test_dra_quantity_parse(void **state)
{
    static const struct {
        const char *text;
        uint64_t want;
    } t[] = {
        {"0", 0},
        {"100", 100},
        {"+5", 5},
        {"1Ki", 1024},
        {"10Gi", 10ull << 30},
        {"512Mi", 512ull << 20},
        {"1.5Gi", 3ull << 29},
        {"1G", 1000000000},
        {"1M", 1000000},
        {"1k", 1000},
        {"1e9", 1000000000},
        {"5E3", 5000},
        {"2E", 2000000000000000000ull},
        {"100m", 1}, /* rounded up, as Quantity.Value() */
        {"1500m", 2},
        {"0.5", 1},
        {"1Ti", 1ull << 40},
        {"4Ei", 1ull << 62},
    };
    static const char *const bad[] = {"",     "Gi",  "-1Gi", "1 Gi", "1gi", "1.2.3",
                                      "1GiB", "8Ei", "1e99", "abc",  ".",   NULL};
    uint64_t v;
    struct error err = {0};
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(t); i++) {
        if (dra_quantity_parse(t[i].text, &v, &err) < 0)
            fail_msg("'%s': %s", t[i].text, err.msg);
        if (v != t[i].want)
            fail_msg("'%s': %llu, want %llu", t[i].text, (unsigned long long)v,
                     (unsigned long long)t[i].want);
    }
    for (size_t i = 0; bad[i]; i++)
        if (dra_quantity_parse(bad[i], &v, &err) != -EINVAL)
            fail_msg("'%s' accepted as a quantity", bad[i]);
    assert_int_equal(dra_quantity_parse(NULL, &v, NULL), -EINVAL);
}

/* Issue 29: values C cannot take as written, wrong types and deep nesting are -EINVAL naming
 * the field (the text is loaded as the claim parser loads it, "\u0000" allowed). */
static void test_dra_config_decode_hostile(void **state)
{
    static const char *const t[][2] = {
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\", "
         "\"timeSlicingConfig\": {\"interval\": \"Long\\u0000\"}}}",
         "claim config[0]: sharing.timeSlicingConfig.interval: \"Long\\u0000...\" contains a NUL "
         "character"},
        {"{" API "\"kind\": \"GpuConfig\\u0000x\"}", "claim config[0]: kind: \"GpuConfig\\u0000"},
        {"{\"apiVersion\": \"resource.nvidia.com/v1beta1\\u0000\", \"kind\": \"GpuConfig\"}",
         "claim config[0]: apiVersion: "},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\\u0000\"}}",
         "sharing.strategy: \"MPS\\u0000...\" contains a NUL"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultPerDevicePinnedMemoryLimit\": {\"0\": \"1Gi\\u0000\"}}}}",
         "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit.0: \"1Gi\\u0000...\""},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": 5}}",
         "sharing.strategy is not a string"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": 1.5}}}",
         "defaultActiveThreadPercentage must be a whole number"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": \"50\"}}}",
         "defaultActiveThreadPercentage must be a whole number"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultActiveThreadPercentage\": 9223372036854775807}}}",
         "must not be greater than 100"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultPinnedDeviceMemoryLimit\": true}}}",
         "defaultPinnedDeviceMemoryLimit must be a quantity string"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"MPS\", \"mpsConfig\": "
         "{\"defaultPinnedDeviceMemoryLimit\": \"99999999999999999999999Ei\"}}}",
         "defaultPinnedDeviceMemoryLimit"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\", "
         "\"timeSlicingConfig\": []}}",
         "sharing.timeSlicingConfig must be an object"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"strategy\": \"TimeSlicing\", "
         "\"timeSlicingConfig\": {\"interval\": 3}}}",
         "unknown time-slice interval: (not a string)"},
        {"{" API "\"kind\": \"GpuConfig\", \"sharing\": {\"x\": "
         "[[[[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]]]]}}",
         "claim config[0]: sharing.x[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nested more "
         "than 16 levels deep"},
    };
    struct dra_opaque_config c;
    struct error err = {0};
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(t); i++) {
        json_error_t je;
        json_t *j = json_loads(t[i][0], JSON_ALLOW_NUL, &je);
        if (!j)
            fail_msg("case %zu: bad test JSON: %s", i, je.text);
        error_clear(&err);
        int r = dra_opaque_config_decode(j, "claim config[0]", &c, &err);
        json_decref(j);
        if (r != -EINVAL)
            fail_msg("case %zu: %d, not -EINVAL", i, r);
        if (!strstr(err.msg, t[i][1]))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, t[i][1]);
    }
}

int run_config_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_config_decode_valid),
        cmocka_unit_test(test_dra_config_decode_errors),
        cmocka_unit_test(test_dra_config_decode_hostile),
        cmocka_unit_test(test_dra_quantity_parse),
    };
    return cmocka_run_group_tests_name("dra config", tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_claim.c: src/dra/claim.c — a ResourceClaim as the API server returns it (identity,
 * allocation results, class and claim configs, reservedFor), one not yet allocated, and
 * every malformed field named by its path, hostile JSON included (numbers past int64, NULs,
 * deep nesting). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

static const char *const full_claim =
    "{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceClaim\","
    " \"metadata\": {\"name\": \"big-gpu\", \"namespace\": \"ml\", \"uid\": \"uid-1\"},"
    " \"spec\": {\"devices\": {\"requests\": [{\"name\": \"gpu\"}]}},"
    " \"status\": {\"allocation\": {\"devices\": {"
    "   \"results\": [{\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
    "                  \"device\": \"gpu-0\"},"
    "                 {\"request\": \"mig\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"node-a\","
    "                  \"device\": \"gpu-1-mig-1g10gb-19-0\", \"adminAccess\": true}],"
    "   \"config\": [{\"source\": \"FromClass\", \"opaque\": {\"driver\": \"gpu.nvidia.com\","
    "                  \"parameters\": {\"apiVersion\": \"resource.nvidia.com/v1beta1\","
    "                                   \"kind\": \"GpuConfig\"}}},"
    "                {\"source\": \"FromClaim\", \"requests\": [\"gpu\"],"
    "                 \"opaque\": {\"driver\": \"other.example.com\", \"parameters\": {}}}]},"
    "  \"nodeSelector\": {}},"
    "  \"reservedFor\": [{\"resource\": \"pods\", \"name\": \"trainer-0\", \"uid\": \"pod-uid\"},"
    "                  {\"resource\": \"jobs\", \"apiGroup\": \"batch\", \"name\": \"j\","
    "                   \"uid\": \"job-uid\"}]}}";

static void test_dra_claim_parse_full(void **state)
{
    struct dra_claim *c = tx_claim(full_claim);
    (void)state;

    assert_string_equal(c->uid, "uid-1");
    assert_string_equal(c->name, "big-gpu");
    assert_string_equal(c->namespace, "ml");
    assert_true(c->allocated);
    assert_int_equal(c->n_results, 2);
    assert_string_equal(c->results[0].request, "gpu");
    assert_string_equal(c->results[0].driver, "gpu.nvidia.com");
    assert_string_equal(c->results[0].pool, "node-a");
    assert_string_equal(c->results[0].device, "gpu-0");
    assert_false(c->results[0].admin_access);
    assert_true(c->results[1].admin_access);
    assert_int_equal(c->n_configs, 2);
    assert_int_equal(c->configs[0].source, DRA_SOURCE_CLASS);
    assert_null(c->configs[0].requests[0]);
    assert_string_equal(c->configs[0].driver, "gpu.nvidia.com");
    assert_string_equal(json_string_value(json_object_get(c->configs[0].parameters, "kind")),
                        "GpuConfig");
    assert_int_equal(c->configs[1].source, DRA_SOURCE_CLAIM);
    assert_string_equal(c->configs[1].requests[0], "gpu");
    assert_null(c->configs[1].requests[1]);
    assert_int_equal(c->n_reserved_for, 1);
    assert_string_equal(c->reserved_for[0].name, "trainer-0");
    assert_string_equal(c->reserved_for[0].uid, "pod-uid");
    dra_claim_free(c);
}

/* A share (KEP-5075): shareID and consumedCapacity read; other capacities left alone. */
static void test_dra_claim_parse_share(void **state)
{
    struct dra_claim *c = tx_claim(
        "{\"metadata\": {\"name\": \"s\", \"uid\": \"u\"}, \"status\": {\"allocation\": "
        "{\"devices\": {\"results\": [{\"request\": \"r\", \"driver\": \"gpu.nvidia.com\","
        " \"pool\": \"n\", \"device\": \"gpu-0\", \"shareID\": \"7f3c\", \"consumedCapacity\":"
        " {\"memory\": \"10Gi\", \"computePercent\": \"25\", \"other\": \"1\"}},"
        " {\"request\": \"w\", \"driver\": \"gpu.nvidia.com\", \"pool\": \"n\","
        " \"device\": \"gpu-1\"}]}}}}");
    (void)state;

    assert_string_equal(c->results[0].share_id, "7f3c");
    assert_int_equal(c->results[0].consumed_memory_bytes, 10ull << 30);
    assert_int_equal(c->results[0].consumed_compute_pct, 25);
    assert_null(c->results[1].share_id);
    assert_int_equal(c->results[1].consumed_memory_bytes, 0);
    assert_int_equal(c->results[1].consumed_compute_pct, -1);
    dra_claim_free(c);
}

static void test_dra_claim_parse_not_allocated(void **state)
{
    struct dra_claim *c = tx_claim("{\"metadata\": {\"name\": \"c\", \"uid\": \"u\"}}");
    (void)state;

    assert_false(c->allocated);
    assert_null(c->namespace);
    assert_int_equal(c->n_results, 0);
    assert_int_equal(c->n_configs, 0);
    dra_claim_free(c);
}

/* A config that is not opaque (some future API extension) parses; prepare refuses it. */
static void test_dra_claim_parse_config_not_opaque(void **state)
{
    struct dra_claim *c =
        tx_claim("{\"metadata\": {\"name\": \"c\", \"uid\": \"u\"}, \"status\": {\"allocation\": "
                 "{\"devices\": {\"results\": [], \"config\": [{\"source\": \"FromClaim\"}]}}}}");
    (void)state;

    assert_int_equal(c->n_configs, 1);
    assert_null(c->configs[0].driver);
    assert_null(c->configs[0].parameters);
    dra_claim_free(c);
}

/* Each (text, expected part of the message) is -EINVAL with that message. */
static void expect_refused(const char *const (*t)[2], size_t n)
{
    struct dra_claim *c = NULL;
    struct error err = {0};

    for (size_t i = 0; i < n; i++) {
        error_clear(&err);
        if (dra_claim_parse_text(t[i][0], strlen(t[i][0]), &c, &err) != -EINVAL)
            fail_msg("case %zu accepted", i);
        if (!strstr(err.msg, t[i][1]))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, t[i][1]);
        assert_null(c);
    }
}

static void test_dra_claim_parse_errors(void **state)
{
    static const char *const t[][2] = {
        {"[]", "metadata is missing"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"results\": [{\"request\": \"r\", \"driver\": \"d\", \"pool\": "
         "\"p\", \"device\": \"gpu-0\", \"shareID\": 4}]}}}}",
         "results[0].shareID is not a string"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"results\": [{\"request\": \"r\", \"driver\": \"d\", \"pool\": "
         "\"p\", \"device\": \"gpu-0\", \"consumedCapacity\": []}]}}}}",
         "results[0].consumedCapacity is not an object of quantities"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"results\": [{\"request\": \"r\", \"driver\": \"d\", \"pool\": "
         "\"p\", \"device\": \"gpu-0\", \"consumedCapacity\": {\"memory\": \"ten\"}}]}}}}",
         "results[0].consumedCapacity.memory: 'ten' is not a quantity"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"results\": [{\"request\": \"r\", \"driver\": \"d\", \"pool\": "
         "\"p\", \"device\": \"gpu-0\", \"consumedCapacity\": {\"computePercent\": \"101\"}}]}}}}",
         "consumedCapacity.computePercent is 101, more than 100"},
        {"{\"metadata\": {\"name\": \"c\"}}", "metadata.uid is missing"},
        {"{\"metadata\": {\"uid\": 5, \"name\": \"c\"}}", "metadata.uid is not a string"},
        {"{\"metadata\": {\"uid\": \"u\"}}", "metadata.name is missing"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\", \"namespace\": 1}}",
         "metadata.namespace is not a string"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"results\": {}}}}}",
         "status.allocation.devices.results is not a list"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"results\": [{\"request\": \"r\", \"driver\": \"d\", \"pool\": "
         "\"p\"}]}}}}",
         "status.allocation.devices.results[0].device is missing"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"results\": [7]}}}}",
         "status.allocation.devices.results[0] is not an object"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"config\": {}}}}}",
         "status.allocation.devices.config is not a list"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"config\": [{\"source\": \"FromPod\"}]}}}}",
         "config[0].source is 'FromPod'; expected FromClass or FromClaim"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"config\": [{\"source\": \"FromClaim\", \"requests\": \"r\"}]}}}}",
         "config[0].requests is not a list"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"config\": [{\"source\": \"FromClaim\", \"requests\": [1]}]}}}}",
         "config[0].requests[0] is not a string"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"config\": [{\"source\": \"FromClaim\", \"opaque\": {}}]}}}}",
         "config[0].opaque.driver is missing"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"config\": [{\"source\": \"FromClaim\", \"opaque\": {\"driver\": "
         "\"d\"}}]}}}}",
         "config[0].opaque.parameters is missing"},
        {"{\"metadata\": ", "not JSON"},
    };
    (void)state;
    expect_refused(t, GS_ARRAY_SIZE(t));
}

/* A claim with one result of this driver and the given config list (JSON text). */
#define CLAIM_WITH(configs, extra)                                                                 \
    "{\"metadata\": {\"uid\": \"u\", \"name\": \"c\", \"namespace\": \"ns\"" extra "},"            \
    " \"status\": {\"allocation\": {\"devices\": {\"results\": [{\"request\": \"gpu\","            \
    " \"driver\": \"gpu.nvidia.com\", \"pool\": \"n\", \"device\": \"gpu-0\"}],"                   \
    " \"config\": [" configs "]}}}}"
#define OURS(params)                                                                               \
    "{\"source\": \"FromClaim\", \"requests\": [\"gpu\"], \"opaque\": {\"driver\": "               \
    "\"gpu.nvidia.com\", \"parameters\": " params "}}"
#define OTHERS(params)                                                                             \
    "{\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"nic.example.com\", "                   \
    "\"parameters\": " params "}}"
#define MPS(v)                                                                                     \
    "{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": \"GpuConfig\", \"sharing\": "     \
    "{\"strategy\": \"MPS\", \"mpsConfig\": {\"defaultActiveThreadPercentage\": " v "}}}"

/* "[[[…" n deep around 0, inside status.x of a claim (owned). */
static char *deep_claim(size_t n)
{
    static const char head[] =
        "{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"x\": ";
    char *t = malloc(sizeof(head) + 2 * n + 8);
    size_t at = sizeof(head) - 1;
    assert_non_null(t);
    memcpy(t, head, at);
    memset(t + at, '[', n);
    at += n;
    t[at++] = '0';
    memset(t + at, ']', n);
    at += n;
    memcpy(t + at, "}}", 3);
    return t;
}

/* Issue 29: valid JSON that jansson cannot hold as written (numbers past int64 or double,
 * "\u0000", deep nesting) is -EINVAL naming the field — never a crash, never a transient
 * code the kubelet retries for ever. */
static void test_dra_claim_parse_hostile(void **state)
{
    static const char *const t[][2] = {
        {CLAIM_WITH(OURS(MPS("9223372036854775808")), ""),
         "ResourceClaim ns/c: status.allocation.devices.config[0] (opaque config for "
         "gpu.nvidia.com): sharing.mpsConfig.defaultActiveThreadPercentage: the number "
         "9223372036854775808 is out of range"},
        {CLAIM_WITH(OURS(MPS("-9223372036854775809")), ""),
         "defaultActiveThreadPercentage: the number -9223372036854775809 is out of range"},
        {CLAIM_WITH(OURS(MPS("1e400")), ""), "defaultActiveThreadPercentage: the number 1e400"},
        {CLAIM_WITH(OTHERS("{}") "," OURS("{\"kind\": [1, 2, 123456789012345678901234567890]}"),
                    ""),
         "config[1] (opaque config for gpu.nvidia.com): kind[2]: the number "
         "123456789012345678901234567890 is out of range"},
        {CLAIM_WITH(OURS("99999999999999999999"), ""), "config[0] (opaque config for "
                                                       "gpu.nvidia.com): parameters: the number"},
        {CLAIM_WITH("", ", \"generation\": 99999999999999999999"),
         "ResourceClaim: metadata.generation: the number 99999999999999999999 is out of range"},
        {CLAIM_WITH("", ", \"uid\": \"u\\u0000x\""),
         "ResourceClaim: metadata.uid contains a NUL character (\\u0000)"},
        {CLAIM_WITH("{\"source\": \"FromClaim\\u0000\"}", ""),
         "status.allocation.devices.config[0].source contains a NUL character"},
        {CLAIM_WITH("{\"source\": \"FromClaim\", \"requests\": [\"gpu\\u0000\"]}", ""),
         "status.allocation.devices.config[0].requests[0] contains a NUL character"},
        {CLAIM_WITH("{\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"gpu.nvidia.com\\u0000"
                    "\", \"parameters\": {}}}",
                    ""),
         "config[0].opaque.driver contains a NUL character"},
        {CLAIM_WITH("", ", \"a\\u0000b\": 1"),
         "ResourceClaim: metadata.a\\u0000b: NUL byte in object key not supported"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"allocation\": "
         "{\"devices\": {\"results\": [{\"request\": \"r\", \"driver\": \"d\", \"pool\": "
         "\"p\", \"device\": \"x\", \"adminAccess\": \"yes\"}]}}}}",
         "status.allocation.devices.results[0].adminAccess is not true or false"},
        {"{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"reservedFor\": "
         "[{\"resource\": \"pods\", \"name\": \"p\\u0000\", \"uid\": \"x\"}]}}",
         "status.reservedFor[0].name contains a NUL character"},
    };
    struct dra_claim *c = NULL;
    struct error err = {0};
    (void)state;

    expect_refused(t, GS_ARRAY_SIZE(t));

    /* nesting past jansson's limit names where it gave up; past the scanner's, the depth */
    char *deep = deep_claim(3000);
    assert_int_equal(dra_claim_parse_text(deep, strlen(deep), &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "ResourceClaim: status.x[0][0][0]"));
    assert_non_null(strstr(err.msg, "..."));
    assert_non_null(strstr(err.msg, "depth"));
    free(deep);
    deep = deep_claim(5000);
    assert_int_equal(dra_claim_parse_text(deep, strlen(deep), &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "nested more than 4096 levels deep"));
    free(deep);
}

/* What NVIDIA's driver never decodes is no reason to refuse: numbers out of range in another
 * driver's parameters or in status.devices data; int64's own limits are fine; "\u0000" in
 * this driver's parameters is left to the config decoder (which names the field). */
static void test_dra_claim_parse_hostile_accepted(void **state)
{
    static const char *const t[] = {
        CLAIM_WITH(
            OTHERS("{\"n\": 99999999999999999999, \"r\": [1e999, -1e999]}") "," OURS(MPS("5")), ""),
        CLAIM_WITH(OURS(MPS("9223372036854775807")) "," OURS(MPS("-9223372036854775808")), ""),
        CLAIM_WITH(OURS("{\"kind\": \"GpuConfig\\u0000\"}"), ""),
        "{\"metadata\": {\"uid\": \"u\", \"name\": \"c\"}, \"status\": {\"devices\": [{\"data\": "
        "{\"big\": 1e999, \"n\": 123456789012345678901234567890}}]}}",
    };
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(t); i++) {
        struct dra_claim *c = NULL;
        struct error err = {0};
        if (dra_claim_parse_text(t[i], strlen(t[i]), &c, &err) != 0)
            fail_msg("case %zu refused: %s", i, err.msg);
        assert_string_equal(c->uid, "u");
        dra_claim_free(c);
    }
}

int run_claim_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_claim_parse_full),
        cmocka_unit_test(test_dra_claim_parse_share),
        cmocka_unit_test(test_dra_claim_parse_not_allocated),
        cmocka_unit_test(test_dra_claim_parse_config_not_opaque),
        cmocka_unit_test(test_dra_claim_parse_errors),
        cmocka_unit_test(test_dra_claim_parse_hostile),
        cmocka_unit_test(test_dra_claim_parse_hostile_accepted),
    };
    return cmocka_run_group_tests_name("dra claim", tests, NULL, NULL);
}

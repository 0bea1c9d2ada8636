/* SPDX-License-Identifier: Apache-2.0 */
/* test_claim.c: src/dra/claim.c — a ResourceClaim as the API server returns it (identity,
 * allocation results, class and claim configs, reservedFor), one not yet allocated, and
 * every malformed field named by its path. */
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

static void test_dra_claim_parse_errors(void **state)
{
    static const char *const t[][2] = {
        {"[]", "metadata is missing"},
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
    struct dra_claim *c = NULL;
    struct error err = {0};
    (void)state;

    for (size_t i = 0; i < GS_ARRAY_SIZE(t); i++) {
        error_clear(&err);
        if (dra_claim_parse_text(t[i][0], strlen(t[i][0]), &c, &err) != -EINVAL)
            fail_msg("case %zu accepted", i);
        if (!strstr(err.msg, t[i][1]))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, t[i][1]);
        assert_null(c);
    }
}

int run_claim_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_claim_parse_full),
        cmocka_unit_test(test_dra_claim_parse_not_allocated),
        cmocka_unit_test(test_dra_claim_parse_config_not_opaque),
        cmocka_unit_test(test_dra_claim_parse_errors),
    };
    return cmocka_run_group_tests_name("dra claim", tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_config_fields.c: every field of the v1 schema lands in the right struct member,
 * defaults are NVIDIA's, and every validation rule gives its error (table-driven), with
 * position, field path and fix. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static void test_cfg_new_default_values(void **state)
{
    struct cfg_config *c = NULL;

    assert_int_equal(cfg_new_default(&c, NULL), 0);
    assert_string_equal(c->version, "v1");
    assert_int_equal(c->flags.mig_strategy, CFG_MIG_NONE);
    assert_true(c->flags.fail_on_init_error);
    assert_null(c->flags.mps_root);
    assert_string_equal(c->flags.nvidia_driver_root, "/");
    assert_null(c->flags.nvidia_dev_root);
    assert_false(c->flags.gdrcopy_enabled || c->flags.gds_enabled || c->flags.mofed_enabled);
    assert_int_equal(c->flags.device_discovery_strategy, CFG_DISCOVERY_AUTO);
    assert_false(c->flags.plugin.pass_device_specs);
    assert_int_equal(c->flags.plugin.device_list_strategies, CFG_LIST_ENVVAR);
    assert_int_equal(c->flags.plugin.device_id_strategy, CFG_DEVICE_ID_UUID);
    assert_string_equal(c->flags.plugin.cdi_annotation_prefix, "cdi.k8s.io/");
    assert_string_equal(c->flags.plugin.nvidia_ctk_path, "/usr/bin/nvidia-ctk");
    assert_string_equal(c->flags.plugin.container_driver_root, "/driver-root");
    assert_int_equal(c->flags.plugin.shared_devices_allocation_policy, CFG_ALLOC_DISTRIBUTED);
    assert_false(c->flags.gfd.oneshot || c->flags.gfd.no_timestamp);
    assert_int_equal(c->flags.gfd.sleep_interval_ms, 60000);
    assert_string_equal(c->flags.gfd.output_file,
                        "/etc/kubernetes/node-feature-discovery/features.d/gfd");
    assert_string_equal(c->flags.gfd.machine_type_file, "/sys/class/dmi/id/product_name");
    assert_true(c->flags.gfd.use_node_feature_api);
    assert_int_equal(c->n_gpus + c->n_mig + c->sharing.n_resources, 0);
    assert_int_equal(c->sharing_strategy, CFG_SHARING_NONE);
    assert_int_equal(c->imex.n_channel_ids, 0);
    assert_false(c->imex.required);
    cfg_free(c);
    cfg_free(NULL);
}

static void test_cfg_parse_buffer_every_flag(void **state)
{
    struct cfg_config *c = assert_parse_ok(
        "version: v1\n"
        "flags:\n"
        "  migStrategy: mixed\n"
        "  failOnInitError: false\n"
        "  mpsRoot: /run/nvidia/mps\n"
        "  nvidiaDriverRoot: /run/nvidia/driver\n"
        "  nvidiaDevRoot: /devroot\n"
        "  gdrcopyEnabled: true\n"
        "  gdsEnabled: true\n"
        "  mofedEnabled: true\n"
        "  useNodeFeatureAPI: false\n"
        "  deviceDiscoveryStrategy: nvml\n"
        "  plugin:\n"
        "    passDeviceSpecs: true\n"
        "    deviceListStrategy: [envvar, volume-mounts, cdi-annotations, cdi-cri]\n"
        "    deviceIDStrategy: index\n"
        "    cdiAnnotationPrefix: example.com/\n"
        "    nvidiaCTKPath: /opt/nvidia-ctk\n"
        "    containerDriverRoot: /host-driver\n"
        "    sharedDevicesAllocationPolicy: packed\n"
        "  gfd:\n"
        "    oneshot: true\n"
        "    noTimestamp: true\n"
        "    sleepInterval: 2m\n"
        "    outputFile: /tmp/gfd\n"
        "    machineTypeFile: /tmp/product\n"
        "imex:\n"
        "  channelIDs: [0]\n"
        "  required: true\n");

    assert_int_equal(c->flags.mig_strategy, CFG_MIG_MIXED);
    assert_false(c->flags.fail_on_init_error);
    assert_string_equal(c->flags.mps_root, "/run/nvidia/mps");
    assert_string_equal(c->flags.nvidia_driver_root, "/run/nvidia/driver");
    assert_string_equal(c->flags.nvidia_dev_root, "/devroot");
    assert_true(c->flags.gdrcopy_enabled && c->flags.gds_enabled && c->flags.mofed_enabled);
    assert_false(c->flags.gfd.use_node_feature_api);
    assert_int_equal(c->flags.device_discovery_strategy, CFG_DISCOVERY_NVML);
    assert_true(c->flags.plugin.pass_device_specs);
    assert_int_equal(c->flags.plugin.device_list_strategies,
                     CFG_LIST_ENVVAR | CFG_LIST_VOLUME_MOUNTS | CFG_LIST_CDI_ANNOTATIONS |
                         CFG_LIST_CDI_CRI);
    assert_int_equal(c->flags.plugin.device_id_strategy, CFG_DEVICE_ID_INDEX);
    assert_string_equal(c->flags.plugin.cdi_annotation_prefix, "example.com/");
    assert_string_equal(c->flags.plugin.nvidia_ctk_path, "/opt/nvidia-ctk");
    assert_string_equal(c->flags.plugin.container_driver_root, "/host-driver");
    assert_int_equal(c->flags.plugin.shared_devices_allocation_policy, CFG_ALLOC_PACKED);
    assert_true(c->flags.gfd.oneshot && c->flags.gfd.no_timestamp);
    assert_int_equal(c->flags.gfd.sleep_interval_ms, 120000);
    assert_string_equal(c->flags.gfd.output_file, "/tmp/gfd");
    assert_string_equal(c->flags.gfd.machine_type_file, "/tmp/product");
    assert_int_equal(c->imex.n_channel_ids, 1);
    assert_int_equal(c->imex.channel_ids[0], 0);
    assert_true(c->imex.required);
    cfg_free(c);
}

static void test_cfg_parse_buffer_sharing_fields(void **state)
{
    struct cfg_config *c =
        assert_parse_ok("version: v1\n"
                        "resources:\n"
                        "  gpus:\n"
                        "  - pattern: '*L20*'\n"
                        "    name: l20\n"
                        "  mig:\n"
                        "  - pattern: 1g.10gb\n"
                        "    name: example.com/small\n"
                        "sharing:\n"
                        "  timeSlicing:\n"
                        "    renameByDefault: true\n"
                        "    resources:\n"
                        "    - name: gpu\n"
                        "      rename: gpu-fast\n"
                        "      devices: [0, '1', '2:3', GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f601]\n"
                        "      replicas: 4\n"
                        "    - name: nvidia.com/l20\n"
                        "      devices: 3\n"
                        "      replicas: 1\n"
                        "    - name: nvidia.com/mig-1g.10gb\n"
                        "      devices: all\n"
                        "      replicas: 2\n");

    assert_int_equal(c->n_gpus, 1);
    assert_string_equal(c->gpus[0].pattern, "*L20*");
    assert_string_equal(c->gpus[0].name, "nvidia.com/l20");
    assert_int_equal(c->gpus[0].pos.line, 4);
    assert_int_equal(c->n_mig, 1);
    assert_string_equal(c->mig[0].name, "example.com/small");
    assert_int_equal(c->sharing_strategy, CFG_SHARING_TIME_SLICING);
    assert_true(c->sharing.rename_by_default);
    assert_false(c->sharing.fail_requests_greater_than_one); /* time-slicing default */
    assert_int_equal(c->sharing.n_resources, 3);
    assert_string_equal(c->sharing.resources[0].name, "nvidia.com/gpu");
    assert_string_equal(c->sharing.resources[0].rename, "nvidia.com/gpu-fast");
    assert_int_equal(c->sharing.resources[0].devices_kind, CFG_DEVICES_LIST);
    assert_int_equal(c->sharing.resources[0].n_devices, 4);
    assert_int_equal(c->sharing.resources[0].devices[0].kind, CFG_DEVREF_GPU_INDEX);
    assert_int_equal(c->sharing.resources[0].devices[1].gpu_index, 1);
    assert_int_equal(c->sharing.resources[0].devices[2].kind, CFG_DEVREF_MIG_INDEX);
    assert_int_equal(c->sharing.resources[0].devices[2].mig_index, 3);
    assert_int_equal(c->sharing.resources[0].devices[3].kind, CFG_DEVREF_GPU_UUID);
    assert_int_equal(c->sharing.resources[0].devices[3].pos.line, 15);
    assert_int_equal(c->sharing.resources[0].replicas, 4);
    assert_int_equal(c->sharing.resources[0].pos.line, 13);
    assert_int_equal(c->sharing.resources[0].pos.col, 7);
    assert_int_equal(c->sharing.resources[1].devices_kind, CFG_DEVICES_COUNT);
    assert_int_equal(c->sharing.resources[1].devices_count, 3);
    assert_int_equal(c->sharing.resources[1].replicas, 1);
    assert_int_equal(c->sharing.resources[2].devices_kind, CFG_DEVICES_ALL);
    cfg_free(c);
}

/* Single-quoted scalars are decoded by us (libfyaml 0.7.12 leaks on '' escapes). */
static void test_cfg_parse_buffer_single_quoted_strings(void **state)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"flags: {mpsRoot: '/run/nvidia/mps'}", "/run/nvidia/mps"},
        {"flags: {mpsRoot: 'it''s'}", "it's"},
        {"flags: {mpsRoot: ''''''}", "''"},
        {"flags: {mpsRoot: ''}", ""},
        {"flags:\n  mpsRoot: 'a\n    b'\n", "a b"},
        {"flags:\n  mpsRoot: 'a  \n\n    b'\n", "a\nb"},
        {"flags:\n  mpsRoot: 'a\n\n\n    b '\n", "a\n\nb "},
        {"flags:\n  mpsRoot: '"
         "''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''''"
         "'\n",
         "''''''''''''''''''''''''''''''''''''''''"},
    };
    struct cfg_config *c;

    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        c = assert_parse_ok(cases[i].yaml);
        assert_string_equal(c->flags.mps_root, cases[i].want);
        cfg_free(c);
    }
    /* keys and enums, too */
    c = assert_parse_ok("'flags': {'migStrategy': 'mixed'}\n");
    assert_int_equal(c->flags.mig_strategy, CFG_MIG_MIXED);
    cfg_free(c);
}

static void test_cfg_parse_buffer_fail_requests_defaults(void **state)
{
    static const struct {
        const char *yaml;
        bool want;
    } cases[] = {
        {"sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2}]}}", false},
        {"sharing: {timeSlicing: {failRequestsGreaterThanOne: true, resources: [{name: gpu, "
         "replicas: 2}]}}",
         true},
        {"flags: {mpsRoot: /m}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}", true},
        {"flags: {mpsRoot: /m}\nsharing: {mps: {failRequestsGreaterThanOne: false, resources: "
         "[{name: gpu, replicas: 2}]}}",
         false},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct cfg_config *c = assert_parse_ok(cases[i].yaml);
        assert_int_equal(c->sharing.fail_requests_greater_than_one, cases[i].want);
        cfg_free(c);
    }
}

static void test_cfg_parse_buffer_device_list_strategy_forms(void **state)
{
    static const struct {
        const char *yaml;
        unsigned want;
    } cases[] = {
        {"flags: {plugin: {deviceListStrategy: envvar}}", CFG_LIST_ENVVAR},
        {"flags: {plugin: {deviceListStrategy: cdi-cri}}", CFG_LIST_CDI_CRI},
        {"flags: {plugin: {deviceListStrategy: 'envvar,volume-mounts'}}",
         CFG_LIST_ENVVAR | CFG_LIST_VOLUME_MOUNTS},
        {"flags: {plugin: {deviceListStrategy: [cdi-annotations]}}", CFG_LIST_CDI_ANNOTATIONS},
        {"{\"flags\": {\"plugin\": {\"deviceListStrategy\": [\"envvar\", \"cdi-cri\"]}}}",
         CFG_LIST_ENVVAR | CFG_LIST_CDI_CRI},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct cfg_config *c = assert_parse_ok(cases[i].yaml);
        assert_int_equal(c->flags.plugin.device_list_strategies, cases[i].want);
        cfg_free(c);
    }
}

#define TS(body) "version: v1\nsharing:\n  timeSlicing:\n    resources:\n" body
#define MPS(body) "version: v1\nflags:\n  mpsRoot: /m\nsharing:\n  mps:\n    resources:\n" body

/* Every rule: the input and a piece of the error it must give (position included). */
static void test_cfg_parse_buffer_rules_table(void **state)
{
    static const struct {
        const char *yaml, *expect;
    } cases[] = {
        {TS("    - name: gpu\n      replicas: 0\n"),
         "t.yaml:6:17: sharing.timeSlicing.resources[0].replicas: 0 is not a valid replica "
         "count; use a whole number >= 1 (1 means not shared)"},
        {TS("    - name: gpu\n      replicas: -1\n"), "6:17: sharing.timeSlicing.resources[0]."
                                                      "replicas: -1 is not a valid replica count"},
        {TS("    - name: gpu\n      replicas: 2.0\n"), "2.0 is not a valid replica count"},
        {TS("    - name: gpu\n      replicas: 99999999999999999999\n"),
         "is not a valid replica count"},
        {TS("    - name: gpu\n      replicas: \"2\"\n"), "got a quoted string; remove the quotes"},
        {TS("    - name: gpu\n      replicas: [2]\n"), "got a list"},
        {TS("    - name: gpu\n      replicas: true\n"), "got a boolean"},
        {TS("    - name: gpu\n      replicas: 4097\n"), "4097 replicas is too many; at most 4096"},
        {TS("    - name: gpu\n"), "5:7: sharing.timeSlicing.resources[0]: no replicas specified"},
        {TS("    - replicas: 2\n"), "no resource name specified"},
        {TS("    - name: ''\n      replicas: 2\n"), "empty resource name"},
        {TS("    - name: 5\n      replicas: 2\n"), "expected a string, got a number"},
        {TS("    - name: GPU\n      replicas: 2\n"), "'nvidia.com/GPU' is not a valid resource"},
        {TS("    - name: gpu\n      rename: Shared\n      replicas: 2\n"),
         "resources[0].rename: 'nvidia.com/Shared' is not a valid resource name"},
        {TS("    - gpu\n"), "5:7: sharing.timeSlicing.resources[0]: expected a mapping"},
        {TS("    - name: gpu\n      devices: none\n      replicas: 2\n"),
         "devices set as 'none' but the only valid string is 'all'"},
        {TS("    - name: gpu\n      devices: -3\n      replicas: 2\n"),
         "-3 is not a valid count of devices"},
        {TS("    - name: gpu\n      devices: [x]\n      replicas: 2\n"),
         "devices[0]: 'x' is not a device"},
        {TS("    - name: gpu\n      devices: [{a: 1}]\n      replicas: 2\n"),
         "expected a device (index or UUID), got a mapping"},
        {TS("    - name: gpu\n      devices: []\n      replicas: 2\n"), "empty devices list"},
        {TS("    - name: gpu\n      replicas: 2\n    - name: gpu\n      devices: [1]\n"
            "      replicas: 3\n"),
         "'nvidia.com/gpu' is also shared by resources[0] (line 5)"},
        {TS("    - name: gpu\n      devices: [0]\n      replicas: 2\n    - name: gpu\n"
            "      devices: 2\n      replicas: 3\n"),
         "the two can claim the same device"},
        {TS("    - name: gpu\n      devices: ['0:1', 2]\n      replicas: 2\n    - name: gpu\n"
            "      devices: ['0:1']\n      replicas: 3\n"),
         "device 0:1 of 'nvidia.com/gpu' is "
         "also claimed by resources[0]"},
        {TS("    - name: gpu\n      devices: [GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f601]\n"
            "      replicas: 2\n    - name: gpu\n      devices: [gpu-8d3f2b1a-5c6e-4f70-9a81-"
            "b2c3d4e5f601]\n      replicas: 3\n"),
         "is not a device"},
        {TS("    - name: gpu\n      devices: [GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f601]\n"
            "      replicas: 2\n    - name: gpu\n      devices: [GPU-8D3F2B1A-5C6E-4F70-9A81-"
            "B2C3D4E5F601]\n      replicas: 3\n"),
         "also claimed by resources[0]"},
        {TS("    - name: gpu\n      replicas: 2\n    - name: mig-1g.10gb\n      rename: gpu\n"
            "      replicas: 2\n"),
         "rename 'nvidia.com/gpu' collides with another resource"},
        {"resources:\n  gpus:\n  - pattern: '*'\n    name: nvidia.com/big\n" TS(
             "    - name: mig-1g.10gb\n      rename: big\n      replicas: 2\n"),
         "rename 'nvidia.com/big' collides"},
        {TS("    - name: mig-1g.10gb\n      rename: small\n      replicas: 2\n"
            "    - name: mig-2g.20gb\n      rename: small\n      replicas: 3\n"),
         "would be advertised under the same name as resources[0]"},
        {"sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
         "    - name: gpu\n      replicas: 2\n    - name: gpu.shared\n      replicas: 1\n",
         "'nvidia.com/gpu.shared' (from 'nvidia.com/gpu.shared') would be advertised"},
        {"sharing:\n  timeSlicing:\n    resources: []\n", "no resources specified"},
        {"sharing:\n  timeSlicing: {renameByDefault: true}\n", "no resources specified"},
        {"sharing:\n  timeSlicing: [1]\n", "sharing.timeSlicing: expected a mapping"},
        {"sharing:\n  timeSlicing:\n    resources: {name: gpu}\n", "expected a list of resources"},
        {"flags: {mpsRoot: /m}\nsharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: "
         "2}]\n  mps:\n    resources: [{name: gpu, replicas: 2}]\n",
         "both sharing.timeSlicing and sharing.mps are set"},
        {"flags: {migStrategy: mixed, mpsRoot: /m}\nsharing:\n  mps:\n    resources: [{name: "
         "gpu, replicas: 2}]\n",
         "migStrategy 'mixed' is not supported with MPS"},
        {"version: v1\nsharing:\n  mps:\n    resources: [{name: gpu, replicas: 2}]\n",
         "flags.mpsRoot: using MPS requires an MPS root"},
        {MPS("    - {name: gpu, replicas: 49}\n"), "49 replicas is too many; at most 48"},
        {MPS("    - {name: mig-1g.10gb, replicas: 2}\n"),
         "sharing with MPS is not supported for MIG devices"},
        {MPS("    - {name: gpu, devices: [MIG-5a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9], replicas: "
             "2}\n"),
         "sharing with MPS is not supported for MIG devices"},
        {"flags:\n  migStrategy: all\n", "2:16: flags.migStrategy: 'all' is not allowed; use one "
                                         "of 'none', 'single' or 'mixed'"},
        {"flags:\n  migStrategy: [none]\n", "expected one of 'none', 'single' or 'mixed', got a "
                                            "list"},
        {"flags:\n  deviceDiscoveryStrategy: vfio\n", "use one of 'auto', 'nvml' or 'tegra'"},
        {"flags:\n  plugin:\n    deviceIDStrategy: name\n", "use one of 'uuid' or 'index'"},
        {"flags:\n  plugin:\n    sharedDevicesAllocationPolicy: x\n", "'distributed' or "
                                                                      "'packed'"},
        {"flags:\n  plugin:\n    deviceListStrategy: [envvar, cdi]\n",
         "deviceListStrategy[1]: invalid strategy 'cdi'; use 'envvar', 'volume-mounts', "
         "'cdi-annotations' or 'cdi-cri'"},
        {"flags:\n  plugin:\n    deviceListStrategy: []\n", "empty list"},
        {"flags:\n  plugin:\n    deviceListStrategy: 'envvar,,cdi-cri'\n", "invalid strategy ''"},
        {"flags:\n  gfd:\n    sleepInterval: soon\n", "'soon' is not a duration"},
        {"flags:\n  gfd:\n    sleepInterval: {a: 1}\n", "expected a duration"},
        {"flags:\n  failOnInitError: 'true'\n", "got the quoted string \"true\"; write true "
                                                "without quotes"},
        {"flags:\n  gdsEnabled: 1\n", "expected a boolean (true or false), got a number"},
        {"flags:\n  mpsRoot: true\n", "expected a string, got a boolean; put it in quotes"},
        {"flags:\n  nvidiaDriverRoot: [a]\n", "expected a string, got a list"},
        {"flags: 3\n", "flags: expected a mapping"},
        {"version: v1beta1\n", "1:10: version: unknown version 'v1beta1'"},
        {"version: 1\n", "expected a string, got a number"},
        {"resources:\n  gpus:\n  - name: t4\n", "missing 'pattern'"},
        {"resources:\n  gpus:\n  - pattern: '*T4*'\n", "missing 'name'"},
        {"resources:\n  mig:\n  - pattern: ''\n    name: x\n", "empty pattern"},
        {"resources:\n  gpus: {pattern: x}\n", "expected a list of {pattern, name} entries"},
        {"imex:\n  channelIDs: [0, 0]\n", "channelIDs must be [] or [0]"},
        {"imex:\n  channelIDs: [x]\n", "expected a channel ID (0)"},
        {"- a\n- b\n", "expected a mapping (key: value lines), got a list"},
        {"just text\n", "expected a mapping (key: value lines), got a string"},
        {"version: v1\nversion: v1\n", "2:1: invalid YAML/JSON: duplicate key"},
        {"a: [1, 2\n", "invalid YAML/JSON"},
        {"{\"version\": \"v1\"", "invalid YAML/JSON"},
        {"x: &a [1]\nsharing: *a\n", "YAML aliases (*name) are not supported"},
        {"? [a]\n: 1\n", "a key must be a plain string"},
        /* found by fuzz_config: two spellings of one key wrote one field twice */
        {TS("    - name: gpu\n      devices: [0]\n      Devices: [1, 2]\n      replicas: 2\n"),
         "7:7: sharing.timeSlicing.resources[0].devices: duplicate key 'Devices'"},
        /* libfyaml loops forever on this one (found by fuzz_config): never reaches it */
        {"%\x85\x80\xbe))\n", "t.yaml:1:2: invalid UTF-8"},
        {"version: v1\nflags:\n  mpsRoot: /a\xc0\xaf"
         "b\n",
         "t.yaml:3:14: invalid UTF-8"},
        {"a: \xed\xa0\x80\n", "invalid UTF-8"},
        {"a: \xf4\x90\x80\x80\n", "invalid UTF-8"},
        {"a: \xe2\x82\n", "invalid UTF-8"},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++)
        assert_parse_error(cases[i].yaml, cases[i].expect);
}

/* Warnings do not fail the parse. */
static void test_cfg_parse_buffer_warnings_table(void **state)
{
    static const struct {
        const char *yaml, *expect;
    } cases[] = {
        {"version: v1\nflags:\n  migStratgy: single\n",
         "t.yaml:3:3: warning: flags: unknown key 'migStratgy', ignoring it; did you mean "
         "'migStrategy'?"},
        {"version: v1\nmigStrategy: single\n", "it belongs at 'flags.migStrategy'"},
        {"version: v1\nfoo: 1\n", "warning: unknown key 'foo', ignoring it"},
        {"sharing:\n  timeslicing:\n    resources: [{name: gpu, replicas: 2}]\n",
         "key 'timeslicing' matched 'timeSlicing' ignoring case"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replica: 2\n"
         "      replicas: 2\n",
         "did you mean 'replicas'?"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      devices: [0, 0]\n"
         "      replicas: 2\n",
         "warning: sharing.timeSlicing.resources[0].devices: device 0 is "
         "listed twice"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      rename: gpu\n"
         "      replicas: 2\n",
         "rename is the same as name"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: t4\n      replicas: 2\n",
         "t.yaml:4:7: warning: sharing.timeSlicing.resources[0].name: no device is advertised as "
         "'nvidia.com/t4'"},
        {"resources:\n  gpus: [{pattern: '*', name: big}]\nsharing:\n  timeSlicing:\n"
         "    resources:\n    - name: gpu\n      replicas: 2\n",
         "no device is advertised as 'nvidia.com/gpu'"},
        {"", "warning: the config is empty"},
        {"# nothing\n\n", "warning: the config is empty"},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct cfg_config *c;
        char *text;
        int r = parse_text(cases[i].yaml, NULL, &c, &text);
        if (r != 0 || !strstr(text, cases[i].expect))
            print_error("input:\n%s\nwant: %s\ngot %d:\n%s\n", cases[i].yaml, cases[i].expect, r,
                        text);
        assert_int_equal(r, 0);
        assert_non_null(strstr(text, cases[i].expect));
        cfg_free(c);
        free(text);
    }
}

/* --strict-nvidia-schema (config validate --nvidia): what NVIDIA's plugin refuses or reads
 * differently is an error, with NVIDIA's message where it has one; the same configs are
 * valid without it, and what NVIDIA reads the same way stays valid with it. */
static void test_cfg_strict_nvidia_schema_table(void **state)
{
    static const struct {
        const char *yaml, *expect; /* expect NULL: valid under strict too */
    } cases[] = {
        {TS("    - name: gpu\n      replicas: 1\n"),
         "t.yaml:6:17: sharing.timeSlicing.resources[0].replicas: NVIDIA's plugin refuses "
         "replicas: 1 (\"number of replicas must be >= 2\")"},
        {TS("    - name: gpu\n      rename: gpu.big\n      replicas: 2\n"),
         "t.yaml:6:15: sharing.timeSlicing.resources[0].rename: NVIDIA's plugin ignores rename "
         "(\"Setting "
         "the 'rename' field in sharing.timeSlicing.resources is not yet supported"},
        {TS("    - name: gpu\n      devices: [0]\n      replicas: 2\n"),
         "t.yaml:6:17: sharing.timeSlicing.resources[0].devices: NVIDIA's plugin shares every "
         "device of "
         "'nvidia.com/gpu'"},
        {TS("    - name: gpu\n      devices: 2\n      replicas: 2\n"), "Customizing the 'devices'"},
        {"resources:\n  gpus: [{pattern: '*T4*', name: t4}]\nsharing:\n  timeSlicing:\n"
         "    resources:\n    - name: t4\n      replicas: 2\n",
         "t.yaml:2:11: resources.gpus[0]: NVIDIA's plugin ignores resources.gpus"},
        {"flags: {migStrategy: mixed}\nresources:\n  mig: [{pattern: '1g.10gb', name: small}]\n",
         "resources.mig[0]: NVIDIA's plugin ignores resources.mig"},
        {"flags: {mpsRoot: /m}\nsharing:\n  mps:\n    resources:\n    - name: gpu\n"
         "      replicas: 2\n      memoryLimit: 8Gi\n",
         "t.yaml:7:20: sharing.mps.resources[0].memoryLimit: memoryLimit is a gpuslice "
         "extension"},
        {"flags: {mpsRoot: /m}\nsharing:\n  mps:\n    resources:\n    - name: gpu\n"
         "      replicas: 2\n      threadPercentage: 50\n",
         "threadPercentage is a gpuslice extension"},
        /* read the same by NVIDIA: fine */
        {TS("    - name: gpu\n      replicas: 4\n"), NULL},
        {"resources:\n  gpus: [{pattern: '*', name: nvidia.com/gpu}]\n", NULL},
        {"sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
         "    - name: gpu\n      rename: gpu.shared\n      replicas: 2\n",
         NULL},
        {TS("    - name: gpu\n      devices: all\n      replicas: 2\n"), NULL},
    };
    struct cfg_overrides o;
    struct error err = {0};

    (void)state;
    cfg_overrides_init(&o, CFG_BIN_PLUGIN);
    assert_int_equal(cfg_overrides_set(&o, "--strict-nvidia-schema", "true", &err), 0);
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct cfg_config *c = NULL;
        char *text = NULL;
        int r = parse_text(cases[i].yaml, &o, &c, &text);
        bool ok = cases[i].expect ? r == -EINVAL && strstr(text, cases[i].expect) : r == 0;
        if (!ok)
            print_error("input:\n%s\nwant: %s\ngot %d:\n%s\n", cases[i].yaml,
                        cases[i].expect ? cases[i].expect : "valid", r, text);
        assert_true(ok);
        cfg_free(c);
        free(text);
        cfg_free(assert_parse_ok(cases[i].yaml)); /* gpuslice itself takes them all */
    }
    cfg_overrides_release(&o);
}

/* All problems are collected, not just the first. */
static void test_cfg_parse_buffer_collects_all_errors(void **state)
{
    struct cfg_diags d = CFG_DIAGS_INIT;
    struct cfg_config *c = NULL;
    struct error err = {0};
    const char *yaml = "version: v2\nflags:\n  migStrategy: x\n  failOnInitError: 3\n"
                       "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n"
                       "      replicas: 0\n    - name: GPU\n      replicas: 2\n";

    assert_int_equal(cfg_parse_buffer(yaml, strlen(yaml), "c.yaml", NULL, &c, &d, &err), -EINVAL);
    assert_null(c);
    assert_int_equal(d.n_errors, 5);
    assert_int_equal(d.n_items, 5);
    assert_non_null(strstr(err.msg, "5 errors"));
    assert_int_equal(d.items[0].line, 1);
    assert_string_equal(d.items[0].path, "version");
    assert_string_equal(d.items[0].value, "v2");
    assert_string_equal(d.items[0].file, "c.yaml");
    assert_int_equal(d.items[3].line, 9);
    assert_int_equal(d.items[3].col, 17);
    assert_string_equal(d.items[3].path, "sharing.timeSlicing.resources[0].replicas");
    assert_string_equal(d.items[3].value, "0");
    cfg_diags_release(&d);
    cfg_diags_release(&d); /* released twice is fine */
}

static void test_cfg_parse_buffer_limits(void **state)
{
    struct strbuf sb = STRBUF_INIT;
    struct cfg_diags d = CFG_DIAGS_INIT;
    struct cfg_config *c = NULL;
    struct error err = {0};
    char *big;

    /* size cap */
    big = calloc(1, CFG_MAX_INPUT_BYTES + 2);
    assert_non_null(big);
    memset(big, '#', CFG_MAX_INPUT_BYTES + 1);
    assert_int_equal(cfg_parse_buffer(big, CFG_MAX_INPUT_BYTES + 1, "big.yaml", NULL, &c, &d, &err),
                     -E2BIG);
    assert_non_null(strstr(err.msg, "too large"));
    free(big);
    /* list cap */
    strbuf_puts(&sb, "imex:\n  channelIDs: [");
    for (unsigned i = 0; i <= CFG_MAX_LIST_ITEMS; i++)
        strbuf_puts(&sb, "0,");
    strbuf_puts(&sb, "0]\n");
    assert_int_equal(cfg_parse_buffer(sb.buf, sb.len, "l.yaml", NULL, &c, &d, &err), -EINVAL);
    assert_non_null(strstr(d.items[0].message, "is too many; at most 100000"));
    cfg_diags_release(&d);
    /* diagnostics cap */
    strbuf_reset(&sb);
    strbuf_puts(&sb, "version: v1\n");
    for (unsigned i = 0; i < CFG_MAX_DIAGS + 10; i++)
        strbuf_printf(&sb, "unknown%u: 1\n", i);
    assert_int_equal(cfg_parse_buffer(sb.buf, sb.len, "w.yaml", NULL, &c, &d, &err), 0);
    assert_int_equal(d.n_items, CFG_MAX_DIAGS);
    assert_int_equal(d.n_warnings, CFG_MAX_DIAGS + 10);
    assert_true(d.truncated);
    cfg_free(c);
    cfg_diags_release(&d);
    /* NUL bytes */
    assert_int_equal(cfg_parse_buffer("version: v1\0x", 13, "n.yaml", NULL, &c, &d, &err), -EINVAL);
    assert_non_null(strstr(d.items[0].message, "NUL byte"));
    cfg_diags_release(&d);
    strbuf_release(&sb);
}

/* print -> parse -> print gives the same text, in both formats. */
static void test_cfg_print_round_trip(void **state)
{
    const char *yaml =
        "flags:\n  migStrategy: single\n  nvidiaDevRoot: \"/d\\\"q\"\n  plugin:\n"
        "    deviceListStrategy: [envvar, cdi-cri]\n  gfd:\n    sleepInterval: 1500ms\n"
        "resources:\n  gpus: [{pattern: '*T4*', name: t4}]\n"
        "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
        "    - {name: gpu, devices: [0, '1:2', GPU-8d3f2b1a-5c6e-4f70-9a81-b2c3d4e5f601], "
        "replicas: 2}\n    - {name: t4, rename: t4-x, devices: 2, replicas: 3}\n"
        "imex: {channelIDs: [0]}\n";
    struct cfg_config *c = assert_parse_ok(yaml);

    for (int f = 0; f < 2; f++) {
        struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
        struct cfg_config *c2;

        assert_int_equal(cfg_print(c, (enum cfg_format)f, &a), 0);
        c2 = assert_parse_ok(a.buf);
        assert_int_equal(cfg_print(c2, (enum cfg_format)f, &b), 0);
        assert_string_equal(a.buf, b.buf);
        assert_string_equal(c2->flags.nvidia_dev_root, "/d\"q");
        assert_int_equal(c2->sharing.resources[0].n_devices, 3);
        assert_int_equal(c2->flags.gfd.sleep_interval_ms, 1500);
        cfg_free(c2);
        strbuf_release(&a);
        strbuf_release(&b);
    }
    cfg_free(c);
}

static void test_cfg_print_json_shape(void **state)
{
    struct cfg_config *c = NULL;
    struct strbuf sb = STRBUF_INIT;

    assert_int_equal(cfg_new_default(&c, NULL), 0);
    assert_int_equal(cfg_print(c, CFG_FORMAT_JSON, &sb), 0);
    assert_true(sb.buf[0] == '{');
    assert_non_null(strstr(sb.buf, "\"sharing\": {}"));
    assert_non_null(strstr(sb.buf, "\"gpus\": []"));
    assert_non_null(strstr(sb.buf, "\"deviceListStrategy\": [\n"));
    strbuf_reset(&sb);
    assert_int_equal(cfg_print(c, CFG_FORMAT_YAML, &sb), 0);
    assert_non_null(strstr(sb.buf, "sharing: {}\n"));
    assert_non_null(strstr(sb.buf, "  plugin:\n    passDeviceSpecs: false\n"));
    strbuf_release(&sb);
    cfg_free(c);
}

static void test_cfg_summary_line(void **state)
{
    struct cfg_config *c = assert_parse_ok(
        "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
        "    - {name: gpu, devices: [0], replicas: 8}\n    - {name: gpu, devices: [1], "
        "rename: big, replicas: 1}\n");
    struct strbuf sb = STRBUF_INIT;

    assert_int_equal(cfg_summary(c, &sb), 0);
    assert_string_equal(sb.buf, "config '-': migStrategy none, sharing time-slicing: "
                                "nvidia.com/gpu as nvidia.com/gpu.shared (1 device) x8, "
                                "nvidia.com/gpu as nvidia.com/big (1 device) x1");
    assert_null(strchr(sb.buf, '\n'));
    strbuf_release(&sb);
    cfg_free(c);
}

static void test_cfg_diag_format_table(void **state)
{
    static const struct {
        struct cfg_diag d;
        const char *want;
    } cases[] = {
        {{CFG_SEV_ERROR, "c.yaml", 12, 7, "a.b", "0", "bad"}, "c.yaml:12:7: a.b: bad"},
        {{CFG_SEV_WARNING, "c.yaml", 3, 1, "a", NULL, "hm"}, "c.yaml:3:1: warning: a: hm"},
        {{CFG_SEV_ERROR, "c.yaml", 0, 0, "flags.mpsRoot", NULL, "x"}, "c.yaml: flags.mpsRoot: x"},
        {{CFG_SEV_ERROR, NULL, 0, 0, NULL, NULL, "plain"}, "plain"},
        {{CFG_SEV_ERROR, NULL, 2, 5, NULL, NULL, "p"}, "2:5: p"},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct strbuf sb = STRBUF_INIT;
        assert_int_equal(cfg_diag_format(&cases[i].d, &sb), 0);
        assert_string_equal(strbuf_str(&sb), cases[i].want);
        strbuf_release(&sb);
    }
}

const struct CMUnitTest field_tests[] = {
    cmocka_unit_test(test_cfg_diag_format_table),
    cmocka_unit_test(test_cfg_new_default_values),
    cmocka_unit_test(test_cfg_parse_buffer_every_flag),
    cmocka_unit_test(test_cfg_parse_buffer_sharing_fields),
    cmocka_unit_test(test_cfg_parse_buffer_single_quoted_strings),
    cmocka_unit_test(test_cfg_parse_buffer_fail_requests_defaults),
    cmocka_unit_test(test_cfg_parse_buffer_device_list_strategy_forms),
    cmocka_unit_test(test_cfg_parse_buffer_rules_table),
    cmocka_unit_test(test_cfg_parse_buffer_warnings_table),
    cmocka_unit_test(test_cfg_strict_nvidia_schema_table),
    cmocka_unit_test(test_cfg_parse_buffer_collects_all_errors),
    cmocka_unit_test(test_cfg_parse_buffer_limits),
    cmocka_unit_test(test_cfg_print_round_trip),
    cmocka_unit_test(test_cfg_print_json_shape),
    cmocka_unit_test(test_cfg_summary_line),
};
const size_t n_field_tests = GS_ARRAY_SIZE(field_tests);

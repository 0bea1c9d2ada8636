/* SPDX-License-Identifier: Apache-2.0 */
/* test_labels.c: every rule of GFD's labels (facts §7.3) and our additions, table-driven
 * over the model's fixtures: the seed's L20 and T4 nodes, renaming, MIG single/mixed,
 * mixed-model nodes, per-resource labels, and the inputs GFD refuses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fixtures.h"
#include "labels/labels.h"

static const struct labels_options no_ts = {.no_timestamp = true};

static struct labels_set *compute(const struct inv_inventory *inv, const struct model *m,
                                  const struct labels_options *o)
{
    struct labels_set *s = NULL;
    struct error err = {0};
    int r = labels_compute(inv, m, o, &s, &err);
    if (r < 0)
        fail_msg("labels_compute: %s", err.msg);
    return s;
}

static void expect(const struct labels_set *s, const char *key, const char *value)
{
    const char *v = labels_get(s, key);
    if (!value) {
        if (v)
            fail_msg("%s should be absent, is %s", key, v);
        return;
    }
    if (!v)
        fail_msg("%s missing (want %s)", key, value);
    if (strcmp(v, value) != 0)
        fail_msg("%s=%s, want %s", key, v, value);
}

/* seed 000: the L20 node with the ConfigMap's l20 config (time-slicing 8) */
static void test_labels_seed_l20_time_slicing(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", 8);
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;

    (void)state;
    fx_cfg_init(&cfg);
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, false);
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.product", "NVIDIA-L20-SHARED");
    expect(s, "nvidia.com/gpu.replicas", "8");
    expect(s, "nvidia.com/gpu.sharing-strategy", "time-slicing");
    expect(s, "nvidia.com/gpu.count", "1");
    expect(s, "nvidia.com/gpu.memory", "46068");
    expect(s, "nvidia.com/gpu.family", "ada-lovelace");
    expect(s, "nvidia.com/mps.capable", "false");
    expect(s, "nvidia.com/gfd.timestamp", NULL);
    expect(s, "nvidia.com/mig.strategy", NULL);
    expect(s, "nvidia.com/gpu.0.product", NULL); /* one model: NVIDIA's keys only */
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

/* A unified-memory GPU (GB10: memory query NOT_SUPPORTED): GFD leaves nvidia.com/gpu.memory
 * out instead of labelling 0, and takes it from the device it labels per model: the last
 * GPU of that name. */
static void test_labels_memory_unknown_leaves_memory_out(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;

    (void)state;
    inv->gpus[0].memory_unknown = true;
    inv->gpus[0].memory_mib = 0;
    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.product", "NVIDIA-L20");
    expect(s, "nvidia.com/gpu.count", "1");
    expect(s, "nvidia.com/gpu.replicas", "1");
    expect(s, "nvidia.com/gpu.memory", NULL);
    labels_set_free(s);
    model_free(m);
    inv_free(inv);

    inv = fx_generic(2);
    inv->gpus[1].memory_unknown = true; /* the one GFD labels */
    inv->gpus[1].memory_mib = 0;
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.count", "2");
    expect(s, "nvidia.com/gpu.memory", NULL);
    labels_set_free(s);
    model_free(m);
    inv->gpus[1].memory_unknown = false;
    inv->gpus[1].memory_mib = 81920;
    inv->gpus[0].memory_unknown = true;
    inv->gpus[0].memory_mib = 0;
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.memory", "81920");
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

/* seed 000: the T4 node with t4 (3 replicas); renameByDefault drops -SHARED and adds the
 * per-resource labels NVIDIA's README promises. */
static void test_labels_seed_t4_and_renamed(void **state)
{
    struct inv_inventory *inv = fx_t4();
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", 3);
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;

    (void)state;
    fx_cfg_init(&cfg);
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, false);
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.product", "Tesla-T4-SHARED");
    expect(s, "nvidia.com/gpu.replicas", "3");
    expect(s, "nvidia.com/gpu.family", "turing");
    expect(s, "nvidia.com/gpu.shared.replicas", NULL);
    labels_set_free(s);
    model_free(m);

    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, true, false);
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.product", "Tesla-T4");
    expect(s, "nvidia.com/gpu.replicas", "3");
    expect(s, "nvidia.com/gpu.shared.replicas", "3");
    expect(s, "nvidia.com/gpu.shared.product", "Tesla-T4");
    expect(s, "nvidia.com/gpu.shared.count", "1");
    expect(s, "nvidia.com/gpu.shared.sharing-strategy", "time-slicing");
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

static void test_labels_mps(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", 4);
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;

    (void)state;
    fx_cfg_init(&cfg);
    fx_cfg_sharing(&cfg, CFG_SHARING_MPS, &rule, 1, false, false);
    cfg.flags.mps_root = "/run/nvidia/mps";
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/mps.capable", "true");
    expect(s, "nvidia.com/gpu.sharing-strategy", "mps");
    expect(s, "nvidia.com/gpu.product", "NVIDIA-L20-SHARED");
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

static void test_labels_mig_single_and_mixed(void **state)
{
    struct inv_inventory *inv = fx_h20_1g12gb();
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;

    (void)state;
    fx_cfg_init(&cfg);
    cfg.flags.mig_strategy = CFG_MIG_SINGLE;
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/mig.strategy", "single");
    expect(s, "nvidia.com/gpu.product", "NVIDIA-H20-MIG-1g.12gb");
    expect(s, "nvidia.com/gpu.count", "7");
    expect(s, "nvidia.com/gpu.replicas", "1");
    expect(s, "nvidia.com/gpu.compute.major", "9");
    expect(s, "nvidia.com/gpu.family", "hopper");
    expect(s, "nvidia.com/mig.capable", "true");
    labels_set_free(s);
    model_free(m);

    cfg.flags.mig_strategy = CFG_MIG_MIXED;
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/mig.strategy", "mixed");
    expect(s, "nvidia.com/mig-1g.12gb.product", "NVIDIA-H20-MIG-1g.12gb");
    expect(s, "nvidia.com/mig-1g.12gb.count", "7");
    expect(s, "nvidia.com/mig-1g.12gb.replicas", "1");
    expect(s, "nvidia.com/gpu.replicas", "0"); /* MIG-enabled GPU under mixed */
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

/* Every label of s is one the API accepts. */
static void expect_all_valid(const struct labels_set *s)
{
    for (size_t i = 0; i < s->n_labels; i++)
        if (!labels_valid(s->labels[i].key, s->labels[i].value))
            fail_msg("invalid label %s=%s", s->labels[i].key, s->labels[i].value);
}

/* Suffixed MIG profiles (1g.18gb+me): GFD names the device 1g.18gb.me, so its product label
 * value is NVIDIA-H200-MIG-1g.18gb.me; '+' would make the API refuse the whole patch. */
static void test_labels_mig_suffixed_profile(void **state)
{
    struct inv_inventory *inv = fx_h200_1g18gb(1);
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/mig-1g.18gb.me", 2);
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;

    (void)state;
    fx_cfg_init(&cfg);
    cfg.flags.mig_strategy = CFG_MIG_MIXED;
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/mig-1g.18gb.me.product", "NVIDIA-H200-MIG-1g.18gb.me");
    expect(s, "nvidia.com/mig-1g.18gb.me.count", "1");
    expect(s, "nvidia.com/mig-1g.18gb.me.replicas", "1");
    expect(s, "nvidia.com/mig-1g.18gb.product", "NVIDIA-H200-MIG-1g.18gb");
    expect(s, "nvidia.com/mig-1g.18gb.count", "6");
    expect_all_valid(s);
    labels_set_free(s);
    model_free(m);

    /* shared under its own name: GFD's -SHARED suffix, as for unsuffixed profiles */
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, false);
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/mig-1g.18gb.me.product", "NVIDIA-H200-MIG-1g.18gb.me-SHARED");
    expect(s, "nvidia.com/mig-1g.18gb.me.replicas", "2");
    expect(s, "nvidia.com/mig-1g.18gb.me.sharing-strategy", "time-slicing");
    expect_all_valid(s);
    labels_set_free(s);
    model_free(m);

    /* renamed: our per-resource labels, same product */
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, true, false);
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/mig-1g.18gb.me.product", "NVIDIA-H200-MIG-1g.18gb.me");
    expect(s, "nvidia.com/mig-1g.18gb.me.shared.product", "NVIDIA-H200-MIG-1g.18gb.me");
    expect(s, "nvidia.com/mig-1g.18gb.me.shared.replicas", "2");
    expect_all_valid(s);
    labels_set_free(s);
    model_free(m);
    inv_free(inv);

    /* single: the node's one profile as nvidia.com/gpu */
    inv = fx_h200_1g18gb(7);
    fx_cfg_init(&cfg);
    cfg.flags.mig_strategy = CFG_MIG_SINGLE;
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.product", "NVIDIA-H200-MIG-1g.18gb.me");
    expect(s, "nvidia.com/gpu.count", "7");
    expect_all_valid(s);
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

/* Values no GFD rule makes valid still leave valid: a machine type of 70 characters,
 * leading and trailing punctuation, characters outside the label alphabet. */
static void test_labels_value_sanitise(void **state)
{
    static const struct {
        const char *in, *out;
    } rows[] = {
        {"NVIDIA-H200-MIG-1g.18gb.me", "NVIDIA-H200-MIG-1g.18gb.me"},
        {"NVIDIA-H200-MIG-1g.18gb+me", "NVIDIA-H200-MIG-1g.18gbme"},
        {"570.158.01", "570.158.01"},
        {"time-slicing", "time-slicing"},
        {"", ""},
        {"-._", ""},
        {"--a_b--", "a_b"},
        {"  PowerEdge XE9680 ", "PowerEdge-XE9680"},
        {".x.", "x"},
        {"\xc3\xa9t\xc3\xa9", "t"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bc",
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
    };
    char long_machine[80];
    struct labels_options o = {.no_timestamp = true, .machine_type = long_machine};
    struct inv_inventory *inv = fx_l20();
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;
    char out[96];

    (void)state;
    for (size_t i = 0; i < GS_ARRAY_SIZE(rows); i++) {
        labels_value_sanitise(rows[i].in, out, sizeof(out));
        if (strcmp(out, rows[i].out) != 0)
            fail_msg("row %zu: '%s' -> '%s', want '%s'", i, rows[i].in, out, rows[i].out);
        assert_true(labels_valid("nvidia.com/x", out));
    }
    memset(long_machine, 'M', 70);
    memcpy(long_machine, "-(", 2);
    long_machine[70] = '\0';
    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &o);
    assert_int_equal(strlen(labels_get(s, "nvidia.com/gpu.machine")), LABELS_VALUE_MAX);
    expect_all_valid(s);
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

/* inv under single, where the model refuses it (keep_valid): GFD v0.19.3's invalid labels,
 * nothing a selector could count on, the architecture kept. */
static void expect_single_invalid(const struct inv_inventory *inv, const char *product)
{
    struct model_options mo = {.keep_valid = true};
    struct cfg_config cfg;
    struct model *m = NULL;
    struct labels_set *s;
    struct error err = {0};

    fx_cfg_init(&cfg);
    cfg.flags.mig_strategy = CFG_MIG_SINGLE;
    assert_int_equal(model_build(inv, &cfg, &mo, &m, &err), 0);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.product", product);
    expect(s, "nvidia.com/gpu.replicas", "0");
    expect(s, "nvidia.com/gpu.count", "0");
    expect(s, "nvidia.com/gpu.memory", "0");
    expect(s, "nvidia.com/gpu.sharing-strategy", "");
    expect(s, "nvidia.com/gpu.family", "ampere");
    expect(s, "nvidia.com/gpu.multiprocessors", NULL);
    labels_set_free(s);
    model_free(m);
}

/* A100 balanced (four profiles) under single: NVIDIA labels it -MIG-INVALID. */
static void test_labels_mig_single_invalid(void **state)
{
    struct inv_inventory *inv = fx_a100_balanced();

    (void)state;
    expect_single_invalid(inv, "NVIDIA-A100-SXM4-80GB-MIG-INVALID");
    inv_free(inv);
}

/* single with MIG on GPU 0 and off on GPU 1 (one model): invalid for the whole node, as GFD
 * decides it; under mixed NVIDIA's keys describe GPU 1, the one served whole. */
static void test_labels_single_invalid_mig_on_and_off(void **state)
{
    struct inv_inventory *inv = fx_mixed_mig();
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;

    (void)state;
    expect_single_invalid(inv, "NVIDIA-A100-SXM4-80GB-MIG-INVALID");
    fx_cfg_init(&cfg);
    cfg.flags.mig_strategy = CFG_MIG_MIXED;
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB");
    expect(s, "nvidia.com/gpu.count", "2");
    expect(s, "nvidia.com/gpu.replicas", "1"); /* GPU 1's, not the MIG-enabled GPU 0's 0 */
    expect(s, "nvidia.com/gpu.memory", "81920");
    expect(s, "nvidia.com/mig-1g.10gb.count", "7");
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

/* Two models, GPU 0 in MIG mode: NVIDIA's keys describe GPU 1 (the first served whole),
 * under every strategy but single; with MIG on everywhere, GPU 0 again. */
static void test_labels_mixed_models_mig_on_gpu0(void **state)
{
    struct inv_inventory *inv = fx_l20_t4();
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", 2);
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;

    (void)state;
    str_copy(inv->gpus[0].name, "NVIDIA A100-SXM4-40GB", sizeof(inv->gpus[0].name));
    inv->gpus[0].memory_mib = 40960;
    inv->gpus[0].cc_minor = 0;
    fx_add_mig(&inv->gpus[0], "3g.20gb", 20096, 1, 0);
    fx_add_mig(&inv->gpus[0], "4g.20gb", 20096, 2, 0);
    fx_cfg_init(&cfg);
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, false);
    for (int strategy = CFG_MIG_NONE; strategy <= CFG_MIG_MIXED; strategy++) {
        if (strategy == CFG_MIG_SINGLE)
            continue;
        cfg.flags.mig_strategy = (enum cfg_mig_strategy)strategy;
        m = fx_build(inv, &cfg);
        s = compute(inv, m, &no_ts);
        expect(s, "nvidia.com/gpu.product", "Tesla-T4-SHARED");
        expect(s, "nvidia.com/gpu.replicas", "2");
        expect(s, "nvidia.com/gpu.sharing-strategy", "time-slicing");
        expect(s, "nvidia.com/gpu.memory", "15360");
        expect(s, "nvidia.com/gpu.family", "turing");
        expect(s, "nvidia.com/gpu.0.product", "NVIDIA-A100-SXM4-40GB");
        expect(s, "nvidia.com/gpu.0.replicas", "0");
        labels_set_free(s);
        model_free(m);
    }

    /* every GPU in MIG mode: GPU 0's model */
    fx_add_mig(&inv->gpus[1], "1g.6gb", 5952, 1, 0);
    cfg.flags.mig_strategy = CFG_MIG_MIXED;
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB");
    expect(s, "nvidia.com/gpu.replicas", "0");
    expect(s, "nvidia.com/gpu.family", "ampere");
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

/* Two models, MIG off: NVIDIA's keys carry GPU 0's model, every model has nvidia.com/gpu.<n>.* */
static void test_labels_mixed_models(void **state)
{
    struct inv_inventory *inv = fx_l20_t4();
    struct cfg_replicated_resource rule = fx_rule("nvidia.com/gpu", 2);
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;

    (void)state;
    fx_cfg_init(&cfg);
    fx_cfg_sharing(&cfg, CFG_SHARING_TIME_SLICING, &rule, 1, false, false);
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &no_ts);
    expect(s, "nvidia.com/gpu.product", "NVIDIA-L20-SHARED");
    expect(s, "nvidia.com/gpu.count", "1");
    expect(s, "nvidia.com/gpu.0.product", "NVIDIA-L20-SHARED");
    expect(s, "nvidia.com/gpu.1.product", "Tesla-T4-SHARED");
    expect(s, "nvidia.com/gpu.1.memory", "15360");
    expect(s, "nvidia.com/gpu.1.family", "turing");
    expect(s, "nvidia.com/gpu.2.product", NULL);
    for (size_t i = 1; i < s->n_labels; i++)
        assert_true(strcmp(s->labels[i - 1].key, s->labels[i].key) < 0); /* sorted, unique */
    for (size_t i = 0; i < s->n_labels; i++)
        if (!labels_valid(s->labels[i].key, s->labels[i].value))
            fail_msg("invalid label %s=%s", s->labels[i].key, s->labels[i].value);
    labels_set_free(s);
    model_free(m);
    inv_free(inv);
}

static void test_labels_node_facts(void **state)
{
    struct inv_inventory *inv = fx_l20();
    struct cfg_config cfg;
    struct model *m;
    struct labels_set *s;
    const uint32_t compute_class[] = {0x0302}, vga[] = {0x0300};
    struct labels_options o = {.timestamp = 1700000000,
                               .machine_type = "ProLiant DL380 Gen11",
                               .pci_class = compute_class,
                               .vgpu_present = true};

    (void)state;
    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &o);
    expect(s, "nvidia.com/gfd.timestamp", "1700000000");
    expect(s, "nvidia.com/gpu.machine", "ProLiant-DL380-Gen11");
    expect(s, "nvidia.com/gpu.mode", "compute");
    expect(s, "nvidia.com/vgpu.present", "true");
    expect(s, "nvidia.com/cuda.driver-version.full", "570.158.01");
    expect(s, "nvidia.com/cuda.driver-version.revision", "01");
    expect(s, "nvidia.com/cuda.driver.rev", "01");
    expect(s, "nvidia.com/cuda.runtime-version.full", "12.8");
    expect(s, "nvidia.com/cuda.runtime.major", "12");
    expect(s, "nvidia.com/gpu.product", "NVIDIA-L20");
    expect(s, "nvidia.com/gpu.replicas", "1");
    expect(s, "nvidia.com/gpu.sharing-strategy", "none");
    labels_set_free(s);
    o.pci_class = vga;
    s = compute(inv, m, &o);
    expect(s, "nvidia.com/gpu.mode", "graphics");
    labels_set_free(s);

    /* GFD refuses a driver version that is not 2-3 dot parts */
    str_copy(inv->driver_version, "570", sizeof(inv->driver_version));
    {
        struct error err = {0};
        assert_int_equal(labels_compute(inv, m, &no_ts, &s, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "'570'"));
    }
    model_free(m);
    /* no GPUs: only the timestamp and vgpu labels */
    inv->n_gpus = 0;
    m = fx_build(inv, &cfg);
    s = compute(inv, m, &o);
    assert_int_equal(s->n_labels, 2);
    expect(s, "nvidia.com/vgpu.present", "true");
    labels_set_free(s);
    inv->n_gpus = 1;
    model_free(m);
    inv_free(inv);
}

static void test_labels_sanitise_and_family(void **state)
{
    static const struct {
        const char *in, *out;
    } names[] = {
        {"NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"},
        {"Tesla T4", "Tesla-T4"},
        {"  NVIDIA  RTX 6000 Ada Generation ", "NVIDIA-RTX-6000-Ada-Generation"},
        {"NVIDIA GeForce RTX 4090 (rev a1)", "NVIDIA-GeForce-RTX-4090-rev-a1"},
        {"A/B#C", "ABC"},
    };
    char out[96];

    (void)state;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        labels_sanitise(names[i].in, out, sizeof(out));
        assert_string_equal(out, names[i].out);
    }
    assert_true(labels_valid("nvidia.com/gpu.product", "NVIDIA-L20-SHARED"));
    assert_false(labels_valid("nvidia.com/-bad", "x"));
    assert_false(labels_valid("nvidia.com/gpu", "bad value"));
    assert_false(
        labels_valid("nvidia.com/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                     "x")); /* name of 64 characters */
}

/* Families by compute capability, through the label (incl. blackwell and rubin). */
static void test_labels_family_table(void **state)
{
    static const struct {
        int major, minor;
        const char *family;
    } rows[] = {
        {1, 0, "tesla"},      {2, 1, "fermi"},      {3, 5, "kepler"},       {5, 2, "maxwell"},
        {6, 1, "pascal"},     {7, 0, "volta"},      {7, 2, "volta"},        {7, 5, "turing"},
        {8, 0, "ampere"},     {8, 6, "ampere"},     {8, 9, "ada-lovelace"}, {9, 0, "hopper"},
        {10, 0, "blackwell"}, {12, 0, "blackwell"}, {13, 0, "rubin"},       {4, 0, "undefined"},
        {11, 0, "undefined"},
    };
    struct inv_inventory *inv = fx_l20();
    struct cfg_config cfg;
    struct model *m;

    (void)state;
    fx_cfg_init(&cfg);
    m = fx_build(inv, &cfg);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct labels_set *s;
        inv->gpus[0].cc_major = rows[i].major;
        inv->gpus[0].cc_minor = rows[i].minor;
        s = compute(inv, m, &no_ts);
        expect(s, "nvidia.com/gpu.family", rows[i].family);
        labels_set_free(s);
    }
    model_free(m);
    inv_free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_seed_l20_time_slicing),
        cmocka_unit_test(test_labels_memory_unknown_leaves_memory_out),
        cmocka_unit_test(test_labels_seed_t4_and_renamed),
        cmocka_unit_test(test_labels_mps),
        cmocka_unit_test(test_labels_mig_single_and_mixed),
        cmocka_unit_test(test_labels_mig_suffixed_profile),
        cmocka_unit_test(test_labels_value_sanitise),
        cmocka_unit_test(test_labels_mig_single_invalid),
        cmocka_unit_test(test_labels_single_invalid_mig_on_and_off),
        cmocka_unit_test(test_labels_mixed_models_mig_on_gpu0),
        cmocka_unit_test(test_labels_mixed_models),
        cmocka_unit_test(test_labels_node_facts),
        cmocka_unit_test(test_labels_sanitise_and_family),
        cmocka_unit_test(test_labels_family_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

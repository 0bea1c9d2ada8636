/* SPDX-License-Identifier: Apache-2.0 */
/* test_main.c: the test_dra program — runs each file's group and the shared helpers of
 * tests.h (machines through the fake NVML, JSON, the plan node). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "tests.h"

static char state_dir[] = "/tmp/gs-test-dra-XXXXXX";

struct inv_inventory *tx_machine(const char *name)
{
    char machine[1024], state[1024], lib[1024];
    struct gpu_nvml_options o = {0};
    struct inv_inventory *inv = NULL;
    char **warnings = NULL;
    struct error err = {0};

    snprintf(machine, sizeof(machine), "%s/examples/machines/%s.yaml", GS_SOURCE_DIR, name);
    snprintf(state, sizeof(state), "%s/%s.state", state_dir, name);
    snprintf(lib, sizeof(lib), "%s/tools/fake-nvml/libnvidia-ml.so.1", GS_BINARY_DIR);
    remove(state);
    setenv("FAKE_NVML_MACHINE", machine, 1);
    setenv("FAKE_NVML_STATE", state, 1);
    unsetenv("FAKE_NVML_FAIL");
    o.library_path = lib;
    if (gpu_inventory_open_and_read(&o, true, &inv, &warnings, &err) < 0)
        fail_msg("%s: %s", name, err.msg);
    strv_free(warnings);
    return inv;
}

struct dra_devices *tx_devices(const struct inv_inventory *inv)
{
    struct dra_devices *devs = NULL;
    struct error err = {0};

    if (dra_devices_build(inv, NULL, &devs, &err) < 0)
        fail_msg("dra_devices_build: %s", err.msg);
    return devs;
}

const char *tx_attr(const struct dra_device *d, const char *name)
{
    const struct dra_attr *a = dra_device_attr(d, name);
    return a ? a->str : NULL;
}

const char *tx_cap(const struct dra_device *d, const char *name)
{
    const struct dra_capacity *c = dra_device_capacity(d, name);
    return c ? c->value : NULL;
}

json_t *tx_json(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);

    if (!j)
        fail_msg("bad test JSON (line %d): %s", je.line, je.text);
    return j;
}

struct dra_claim *tx_claim(const char *text)
{
    struct dra_claim *c = NULL;
    struct error err = {0};

    if (dra_claim_parse_text(text, strlen(text), &c, &err) < 0)
        fail_msg("dra_claim_parse_text: %s", err.msg);
    return c;
}

static struct dra_devices *plan_devices;

struct dra_devices *tx_plan_devices(void)
{
    return plan_devices;
}

/* The plan node: the L20 node's GPU and GPU 0 of the A100 all-1g node as GPU 1. */
static void plan_node_init(void)
{
    struct inv_inventory *l20 = tx_machine("l20-node");
    struct inv_inventory *a100 = tx_machine("a100-80gb-all-1g");
    struct inv_gpu *g;

    g = realloc(l20->gpus, 2 * sizeof(*g));
    assert_non_null(g);
    l20->gpus = g;
    l20->gpus[1] = a100->gpus[0];
    memset(&a100->gpus[0], 0, sizeof(a100->gpus[0])); /* migs/procs moved to l20 */
    l20->gpus[1].index = l20->gpus[1].minor = 1;
    l20->n_gpus = 2;
    free(l20->links);
    l20->links = NULL;
    plan_devices = tx_devices(l20);
    inv_free(l20);
    inv_free(a100);
}

int main(void)
{
    int fails = 0;
    char cmd[64];

    if (!mkdtemp(state_dir)) {
        perror("mkdtemp");
        return 1;
    }
    plan_node_init();
    fails += run_devices_tests();
    fails += run_slice_tests();
    fails += run_fractions_tests();
    fails += run_claim_tests();
    fails += run_config_tests();
    fails += run_plan_tests();
    fails += run_checkpoint_tests();
    fails += run_prepare_tests();
    dra_devices_free(plan_devices);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", state_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", state_dir);
    return fails;
}

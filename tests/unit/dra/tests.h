/* SPDX-License-Identifier: Apache-2.0 */
/* tests.h: what the test_dra program's files share — inventories of the example machines
 * read through the fake NVML, small inventories built in C, JSON helpers, and the test
 * groups each file gives main() in test_main.c. */
#ifndef GS_TEST_DRA_TESTS_H
#define GS_TEST_DRA_TESTS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dra/dra.h"

/* examples/machines/<name>.yaml read by gpu/ through the fake NVML (fresh state file).
 * Owned: inv_free(). Fails the test on error. */
struct inv_inventory *tx_machine(const char *name);
/* The slice devices of an inventory (no unhealthy devices); fails the test on error. */
struct dra_devices *tx_devices(const struct inv_inventory *inv);
/* The string value of a device's attribute, or NULL. */
const char *tx_attr(const struct dra_device *d, const char *name);
const char *tx_cap(const struct dra_device *d, const char *name);
/* JSON from text; fails the test on a parse error. New reference. */
json_t *tx_json(const char *text);
/* A claim parsed from JSON text; fails the test on error. */
struct dra_claim *tx_claim(const char *text);

/* The l20 + A100 all-1g node every plan test runs on: gpu-0 (L20, minor 0) and the seven
 * MIG devices gpu-1-mig-1g10gb-19-<0..6> of GPU 1 (minor 1). */
struct dra_devices *tx_plan_devices(void);

int run_devices_tests(void);
int run_slice_tests(void);
int run_fractions_tests(void);
int run_claim_tests(void);
int run_config_tests(void);
int run_plan_tests(void);
int run_checkpoint_tests(void);
int run_prepare_tests(void);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* helpers.h: what the test_config program's files share — parse a YAML string and get
 * its diagnostics as text, and each file's list of cmocka tests. */
#ifndef GS_TEST_CONFIG_HELPERS_H
#define GS_TEST_CONFIG_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "config/config.h"

/* Parses `yaml` (display name "t.yaml") with optional overrides; returns the result code,
 * *ret_text gets every diagnostic, one per line (owned), *ret_cfg the config or NULL. */
int parse_text(const char *yaml, const struct cfg_overrides *o, struct cfg_config **ret_cfg,
               char **ret_text);
/* Asserts `yaml` fails and that `expect` is in the diagnostics. */
void assert_parse_error(const char *yaml, const char *expect);
/* Asserts `yaml` parses; returns the config (owned). */
struct cfg_config *assert_parse_ok(const char *yaml);

extern const struct CMUnitTest field_tests[];
extern const size_t n_field_tests;
extern const struct CMUnitTest corpus_tests[];
extern const size_t n_corpus_tests;
extern const struct CMUnitTest load_tests[];
extern const size_t n_load_tests;
extern const struct CMUnitTest sharing_tests[];
extern const size_t n_sharing_tests;

#endif

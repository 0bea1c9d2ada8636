/* SPDX-License-Identifier: Apache-2.0 */
/* helpers.h: what the configmgr test files share: temp dirs and file writing. */
#ifndef GS_TEST_CONFIGMGR_HELPERS_H
#define GS_TEST_CONFIGMGR_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* mkdtemp under /tmp; returns an owned path. */
char *tmpdir_new(void);
/* rm -rf of a tmpdir_new() result, then free. */
void tmpdir_free(char *dir);
/* Writes data (len bytes) to dir/name, creating dir/name's parents. */
void write_at(const char *dir, const char *name, const char *data, size_t len);

extern const struct CMUnitTest configmgr_tests[];
extern const size_t n_configmgr_tests;
extern const struct CMUnitTest proc_tests[];
extern const size_t n_proc_tests;
extern const struct CMUnitTest admission_tests[];
extern const size_t n_admission_tests;

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* tests.h: what the test_gpu program's files share — temp-dir helpers and the test
 * groups each file contributes to main() in test_main.c. */
#ifndef GS_TEST_GPU_TESTS_H
#define GS_TEST_GPU_TESTS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* A fresh directory under $TMPDIR (or /tmp); free() the result after tmpdir_remove(). */
char *tmpdir_make(void);
/* rm -rf */
void tmpdir_remove(const char *dir);
/* Creates dir/rel (and its parents) as an empty regular file; returns the full path
 * (owned). */
char *touch_under(const char *dir, const char *rel);
/* mkdir -p dir/rel; returns the full path (owned). */
char *mkdir_under(const char *dir, const char *rel);
/* Writes text into dir/rel (parents created). */
void write_under(const char *dir, const char *rel, const char *text);

int run_loader_tests(void);
int run_names_tests(void);
int run_inventory_tests(void);
int run_samples_tests(void);

#endif

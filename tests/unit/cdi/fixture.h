/* SPDX-License-Identifier: Apache-2.0 */
/* fixture.h: the cdi tests' fake driver root (fixture.c) and spec readers. */
#ifndef GS_TEST_CDI_FIXTURE_H
#define GS_TEST_CDI_FIXTURE_H

#include <jansson.h>
#include <stdbool.h>

#include "cdi/cdi.h"

#define VER "570.158.01"

struct fx {
    char dir[64];
    char root[128], proc[128], out[128];
    struct inv_inventory inv;
    struct inv_gpu gpus[2];
    struct inv_mig_device migs[2];
    struct cdi_options o;
};

/* cmocka setup/teardown: a temporary tree under /tmp, removed afterwards */
int fx_setup(void **state);
int fx_teardown(void **state);
/* an empty file at <root><rel>, parents created */
void fx_touch(struct fx *f, const char *rel);
void fx_write_file(const char *path, const void *data, size_t len);
/* the device called name in spec, or NULL (borrowed) */
json_t *fx_device(json_t *spec, const char *name);
/* every deviceNodes[].path of edits, joined with ',' */
void fx_node_paths(json_t *edits, char *buf, size_t n);
/* spec's top-level edits mount ctr from host */
bool fx_has_mount(json_t *spec, const char *ctr, const char *host);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* inventory_data.c: lifetime of the plain inventory structs (free, deep copy). Pure: built
 * into gs_inventory, which the pure layers link without pulling in NVML code. */
#include <stdlib.h>
#include <string.h>

#include "gpu/inventory.h"

static void inv_gpu_release(struct inv_gpu *g)
{
    free(g->migs);
    free(g->procs);
    g->migs = NULL;
    g->procs = NULL;
    g->n_migs = g->n_procs = 0;
}

void inv_free(struct inv_inventory *inv)
{
    if (!inv)
        return;
    for (size_t i = 0; inv->gpus && i < inv->n_gpus; i++)
        inv_gpu_release(&inv->gpus[i]);
    free(inv->gpus);
    free(inv->links);
    free(inv);
}

static void *dup_array(const void *src, size_t n, size_t size)
{
    void *p;
    if (!src || n == 0)
        return NULL;
    p = malloc(n * size);
    if (p)
        memcpy(p, src, n * size);
    return p;
}

struct inv_inventory *inv_dup(const struct inv_inventory *inv)
{
    struct inv_inventory *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    memcpy(c->driver_version, inv->driver_version, sizeof(c->driver_version));
    c->cuda_version = inv->cuda_version;
    if (inv->n_gpus) {
        c->gpus = calloc(inv->n_gpus, sizeof(*c->gpus));
        c->links = dup_array(inv->links, inv->n_gpus * inv->n_gpus, sizeof(*inv->links));
        if (!c->gpus || (inv->links && !c->links))
            goto fail;
        c->n_gpus = inv->n_gpus;
        for (size_t i = 0; i < inv->n_gpus; i++) {
            const struct inv_gpu *s = &inv->gpus[i];
            struct inv_gpu *d = &c->gpus[i];
            *d = *s;
            d->migs = dup_array(s->migs, s->n_migs, sizeof(*s->migs));
            d->procs = dup_array(s->procs, s->n_procs, sizeof(*s->procs));
            if ((s->n_migs && !d->migs) || (s->n_procs && !d->procs)) {
                d->n_migs = d->migs ? d->n_migs : 0;
                d->n_procs = d->procs ? d->n_procs : 0;
                goto fail;
            }
        }
    }
    return c;
fail:
    inv_free(c);
    return NULL;
}

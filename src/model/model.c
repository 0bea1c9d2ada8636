/* SPDX-License-Identifier: Apache-2.0 */
/* model.c: the model's lifetime, lookups and health updates. Health changes come from the
 * daemon's event loop (XIDs, recovery) and mark a physical device with all its replicas.
 * Pure: no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/internal.h"

static void resource_release(struct model_resource *res)
{
    for (size_t i = 0; i < res->n_devices; i++) {
        free(res->devices[i].id);
        free(res->devices[i].base_id);
    }
    free(res->devices);
    free(res->mps_limits);
    free(res->by_id);
    free(res->name);
    free(res->socket_name);
}

void model_free(struct model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_resources; i++)
        resource_release(&m->resources[i]);
    free(m->resources);
    for (size_t i = 0; i < m->n_diags; i++)
        free(m->diags[i].message);
    free(m->diags);
    free(m->settings.cdi_annotation_prefix);
    free(m->settings.dev_root);
    free(m->settings.mps_root);
    free(m->settings.imex_channel_ids);
    free(m);
}

const struct model_resource *model_find_resource(const struct model *m, const char *name)
{
    for (size_t i = 0; m && name && i < m->n_resources; i++)
        if (strcmp(m->resources[i].name, name) == 0)
            return &m->resources[i];
    return NULL;
}

const struct model_device *model_resource_find_device(const struct model_resource *res,
                                                      const char *id)
{
    size_t lo = 0, hi;

    if (!res || !id || !res->by_id)
        return NULL;
    hi = res->n_devices;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct model_device *d = &res->devices[res->by_id[mid]];
        int c = strcmp(d->id, id);
        if (c == 0)
            return d;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool health_matches(const struct model_device *d, const char *uuid, unsigned gi_id,
                           unsigned ci_id)
{
    if (strcmp(d->uuid, uuid) == 0)
        return true;
    if (strcmp(d->gpu_uuid, uuid) != 0)
        return false;
    if (gi_id == INV_ID_NONE)
        return true; /* the whole GPU, with all its MIG devices */
    return d->mig_index >= 0 && d->gi_id == gi_id && (ci_id == INV_ID_NONE || d->ci_id == ci_id);
}

int model_set_health(struct model *m, const char *uuid, unsigned gi_id, unsigned ci_id,
                     bool healthy)
{
    bool matched = false;
    int changed = 0;

    if (!m || !uuid)
        return -EINVAL;
    for (size_t i = 0; i < m->n_resources; i++) {
        struct model_resource *res = &m->resources[i];
        for (size_t k = 0; k < res->n_devices; k++) {
            struct model_device *d = &res->devices[k];
            if (!health_matches(d, uuid, gi_id, ci_id))
                continue;
            matched = true;
            if (d->healthy != healthy) {
                d->healthy = healthy;
                changed++;
            }
        }
    }
    return matched ? changed : -ENOENT;
}

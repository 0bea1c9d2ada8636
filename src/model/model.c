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

bool model_device_matches(const struct model_device *d, const char *uuid, unsigned gi_id,
                          unsigned ci_id)
{
    if (strcmp(d->uuid, uuid) == 0)
        return true;
    if (strcmp(d->gpu_uuid, uuid) != 0)
        return false;
    /* an event for the whole GPU hits all its MIG devices; an event in one MIG instance
     * hits a GPU advertised whole (migStrategy none) */
    if (gi_id == INV_ID_NONE || d->mig_index < 0)
        return true;
    return d->gi_id == gi_id && (ci_id == INV_ID_NONE || d->ci_id == ci_id);
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
            if (!model_device_matches(d, uuid, gi_id, ci_id))
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

static bool device_equal(const struct model_device *a, const struct model_device *b)
{
    return strcmp(a->id, b->id) == 0 && a->healthy == b->healthy && a->numa_node == b->numa_node &&
           a->replicas == b->replicas && strcmp(a->uuid, b->uuid) == 0 && a->minor == b->minor &&
           a->gi_id == b->gi_id && a->ci_id == b->ci_id && a->memory_mib == b->memory_mib &&
           a->memory_unknown == b->memory_unknown;
}

bool model_resource_equal(const struct model_resource *a, const struct model_resource *b)
{
    if (!a || !b)
        return a == b;
    if (strcmp(a->name, b->name) != 0 || a->sharing != b->sharing || a->replicas != b->replicas ||
        a->fail_requests_greater_than_one != b->fail_requests_greater_than_one ||
        a->n_devices != b->n_devices || a->n_mps_limits != b->n_mps_limits)
        return false;
    for (size_t i = 0; i < a->n_devices; i++)
        if (!device_equal(&a->devices[i], &b->devices[i]))
            return false;
    return a->n_mps_limits == 0 ||
           memcmp(a->mps_limits, b->mps_limits, a->n_mps_limits * sizeof(*a->mps_limits)) == 0;
}

bool model_settings_equal(const struct model_settings *a, const struct model_settings *b)
{
    return a->mig_strategy == b->mig_strategy && a->device_id_strategy == b->device_id_strategy &&
           a->allocation_policy == b->allocation_policy &&
           a->device_list_strategies == b->device_list_strategies &&
           a->pass_device_specs == b->pass_device_specs &&
           a->gdrcopy_enabled == b->gdrcopy_enabled && a->gds_enabled == b->gds_enabled &&
           a->mofed_enabled == b->mofed_enabled &&
           str_eq(a->cdi_annotation_prefix, b->cdi_annotation_prefix) &&
           str_eq(a->dev_root, b->dev_root) && str_eq(a->mps_root, b->mps_root) &&
           a->n_imex_channel_ids == b->n_imex_channel_ids &&
           (a->n_imex_channel_ids == 0 ||
            memcmp(a->imex_channel_ids, b->imex_channel_ids,
                   a->n_imex_channel_ids * sizeof(*a->imex_channel_ids)) == 0);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* retire.c: devices the daemon keeps advertising after a live config or inventory change
 * took them away, because pods still hold them. They stay in the new model as Unhealthy
 * (the kubelet places nothing new on them) until the daemon sees them released. Pure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/internal.h"

int model_removed_ids(const struct model *m, const struct model_resource *old_res, char ***ret_ids,
                      struct error *err)
{
    const struct model_resource *res = model_find_resource(m, old_res->name);
    char **ids = strv_new();

    if (!ids)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < old_res->n_devices; i++) {
        const char *id = old_res->devices[i].id;
        if (model_resource_find_device(res, id))
            continue;
        if (strv_push(&ids, id) < 0) {
            strv_free(ids);
            return error_set(err, -ENOMEM, "out of memory");
        }
    }
    *ret_ids = ids;
    return 0;
}

/* The resource of m named like old_res, inserted (in name order, without devices) when m
 * has none. NULL on ENOMEM. */
static struct model_resource *resource_for(struct model *m, const struct model_resource *old_res)
{
    struct model_resource *arr, *res;
    size_t at = 0;

    for (size_t i = 0; i < m->n_resources; i++) {
        int c = strcmp(m->resources[i].name, old_res->name);
        if (c == 0)
            return &m->resources[i];
        if (c < 0)
            at = i + 1;
    }
    arr = realloc(m->resources, (m->n_resources + 1) * sizeof(*arr));
    if (!arr)
        return NULL;
    m->resources = arr;
    memmove(&arr[at + 1], &arr[at], (m->n_resources - at) * sizeof(*arr));
    res = &arr[at];
    memset(res, 0, sizeof(*res));
    m->n_resources++;
    res->name = str_dup(old_res->name);
    res->socket_name = str_dup(old_res->socket_name);
    res->sharing = old_res->sharing;
    res->replicas = old_res->replicas;
    res->mixed_replicas = old_res->mixed_replicas;
    res->fail_requests_greater_than_one = old_res->fail_requests_greater_than_one;
    res->is_mig = old_res->is_mig;
    /* a half-made resource is still freed by model_free(); the caller reports ENOMEM */
    return res->name && res->socket_name ? res : NULL;
}

/* Does res list id? Its index covers only the first `first` devices (the ones it had). */
static bool listed(const struct model_resource *res, size_t first, const char *id)
{
    struct model_resource indexed = *res;

    indexed.n_devices = first;
    if (model_resource_find_device(&indexed, id))
        return true;
    for (size_t i = first; i < res->n_devices; i++)
        if (strcmp(res->devices[i].id, id) == 0)
            return true;
    return false;
}

int model_retire_devices(struct model *m, const struct model_resource *old_res,
                         const char *const *ids, size_t n_ids, struct error *err)
{
    struct model_resource *res;
    struct model_device *devs;
    size_t added = 0, first;
    int r;

    if (n_ids == 0)
        return 0;
    res = resource_for(m, old_res);
    if (!res)
        return error_set(err, -ENOMEM, "out of memory");
    devs = realloc(res->devices, (res->n_devices + n_ids) * sizeof(*devs));
    if (!devs)
        return error_set(err, -ENOMEM, "out of memory");
    res->devices = devs;
    first = res->n_devices;
    for (size_t i = 0; i < n_ids; i++) {
        const struct model_device *od = model_resource_find_device(old_res, ids[i]);
        struct model_device *nd = &res->devices[res->n_devices];

        if (!od || listed(res, first, ids[i]))
            continue;
        *nd = *od;
        nd->healthy = false;
        nd->id = str_dup(od->id);
        nd->base_id = str_dup(od->base_id);
        res->n_devices++; /* counted first: model_free() frees what was copied */
        if (!nd->id || !nd->base_id)
            return error_set(err, -ENOMEM, "out of memory");
        added++;
    }
    r = model__index_by_id(res);
    if (r < 0)
        return error_set(err, r, "indexing %s: %s", res->name, strerror(-r));
    return (int)added;
}

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
    res->mode = cfg_sharing_mode(res->sharing);
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

/* The physical device an advertised ID names ("<uuid>" or "<uuid>::<n>"), described as the
 * model describes it; false when inv has no such GPU or MIG device. */
static bool describe_held(const struct inv_inventory *inv, const char *id, struct model_device *ret)
{
    const char *sep = strstr(id, "::");
    size_t ulen = sep ? (size_t)(sep - id) : strlen(id);
    unsigned replica = 0;

    if (ulen == 0 || ulen >= INV_UUID_MAX || (sep && parse_uint(sep + 2, &replica) < 0))
        return false;
    for (size_t g = 0; g < inv->n_gpus; g++) {
        const struct inv_gpu *gpu = &inv->gpus[g];
        const struct inv_mig_device *mig = NULL;

        if (strlen(gpu->uuid) != ulen || strncmp(gpu->uuid, id, ulen) != 0) {
            for (size_t k = 0; !mig && gpu->mig_enabled && k < gpu->n_migs; k++)
                if (strlen(gpu->migs[k].uuid) == ulen && strncmp(gpu->migs[k].uuid, id, ulen) == 0)
                    mig = &gpu->migs[k];
            if (!mig)
                continue;
        }
        *ret = (struct model_device){.gpu_index = gpu->index,
                                     .mig_index = mig ? (int)mig->index : -1,
                                     .replica = replica,
                                     .replicas = sep ? replica + 1 : 1,
                                     .numa_node = gpu->numa_node,
                                     .minor = gpu->minor,
                                     .gi_id = mig ? mig->gi_id : INV_ID_NONE,
                                     .ci_id = mig ? mig->ci_id : INV_ID_NONE,
                                     .memory_mib = mig ? mig->memory_mib : gpu->memory_mib,
                                     .memory_unknown = !mig && gpu->memory_unknown,
                                     .cc_major = gpu->cc_major,
                                     .cc_minor = gpu->cc_minor};
        memcpy(ret->uuid, id, ulen);
        str_copy(ret->gpu_uuid, gpu->uuid, sizeof(ret->gpu_uuid));
        if (mig)
            str_copy(ret->profile, mig->profile, sizeof(ret->profile));
        return true;
    }
    return false;
}

int model_keep_held(struct model *m, const struct inv_inventory *inv, const char *resource,
                    const char *const *ids, size_t n_ids, struct error *err)
{
    struct model_resource old = {0};
    size_t n = 0;
    int r = 0;

    if (n_ids == 0 || !inv)
        return 0;
    old.devices = calloc(n_ids, sizeof(*old.devices));
    old.name = (char *)resource; /* borrowed: only read, and never freed here */
    old.socket_name = model__socket_name(resource);
    if (!old.devices || !old.socket_name) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    old.sharing = CFG_SHARING_NONE;
    old.mode = cfg_sharing_mode(old.sharing);
    old.replicas = 1;
    for (size_t i = 0; i < n_ids; i++) {
        struct model_device *d = &old.devices[n];
        bool dup = false;
        for (size_t k = 0; k < n; k++)
            dup |= strcmp(old.devices[k].id, ids[i]) == 0;
        if (dup || !describe_held(inv, ids[i], d))
            continue;
        d->id = (char *)ids[i];       /* borrowed; model_retire_devices copies */
        d->base_id = (char *)d->uuid; /* likewise */
        if (d->replicas > 1 || strstr(ids[i], "::")) {
            old.sharing = CFG_SHARING_TIME_SLICING;
            old.mode = cfg_sharing_mode(old.sharing);
        }
        old.is_mig |= d->mig_index >= 0;
        n++;
    }
    old.n_devices = n;
    r = model__index_by_id(&old);
    if (r < 0) {
        r = error_set(err, r, "indexing %s: %s", resource, strerror(-r));
        goto out;
    }
    r = model_retire_devices(m, &old, ids, n_ids, err);
out:
    free(old.by_id);
    free(old.devices);
    free(old.socket_name);
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* podresources.c: the kubelet's pod-resources v1 List, asked before devices are taken away
 * on a live reload: which device IDs of which resource are held by which pod. Library code:
 * no logging above debug. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubelet/kubelet.h"
#include "rpc/rpc.h"
#include "podresources/v1/api.pb-c.h"

#define DP_POD_LIST_METHOD "/v1.PodResourcesLister/List"

void dp_pod_devices_release(struct dp_pod_devices *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].resource);
        free(l->items[i].id);
        free(l->items[i].pod);
        free(l->items[i].container);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static int add_device(struct dp_pod_devices *l, size_t *alloc, const char *container,
                      const char *resource, const char *id, const char *ns, const char *pod)
{
    struct dp_pod_device *d;
    struct strbuf sb = STRBUF_INIT;

    if (l->n >= DP_POD_DEVICES_MAX)
        return -E2BIG;
    if (l->n == *alloc) {
        size_t na = *alloc ? *alloc * 2 : 16;
        struct dp_pod_device *items = realloc(l->items, na * sizeof(*items));
        if (!items)
            return -ENOMEM;
        l->items = items;
        *alloc = na;
    }
    d = &l->items[l->n];
    if ((ns ? strbuf_printf(&sb, "%s/%s", ns, pod) : strbuf_printf(&sb, "uid %s", pod)) < 0) {
        strbuf_release(&sb);
        return -ENOMEM;
    }
    d->pod = strbuf_take(&sb);
    d->resource = str_dup(resource);
    d->id = str_dup(id);
    d->container = container ? str_dup(container) : NULL;
    l->n++;
    return d->pod && d->resource && d->id && (d->container || !container) ? 0 : -ENOMEM;
}

/* Every device ID one container of pod holds, added to l. */
static int add_container(struct dp_pod_devices *l, size_t *alloc, const V1__PodResources *pod,
                         const V1__ContainerResources *ct)
{
    int r = 0;

    for (size_t d = 0; d < ct->n_devices && r == 0; d++) {
        const V1__ContainerDevices *cd = ct->devices[d];
        for (size_t i = 0; i < cd->n_device_ids && r == 0; i++)
            r = add_device(l, alloc, ct->name, cd->resource_name, cd->device_ids[i],
                           pod->namespace_, pod->name);
    }
    return r;
}

int dp_pod_resources_list(const char *socket_path, int timeout_ms, struct dp_pod_devices *ret,
                          struct error *err)
{
    V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    V1__ListPodResourcesResponse *resp = NULL;
    struct dp_pod_devices l = {0};
    uint8_t reqbuf[16], *raw = NULL;
    size_t raw_len = 0, alloc = 0, req_len;
    int r;

    req_len = v1__list_pod_resources_request__pack(&req, reqbuf);
    r = rpc_client_call(socket_path, DP_POD_LIST_METHOD, reqbuf, req_len, timeout_ms, &raw,
                        &raw_len, NULL, err);
    if (r < 0)
        goto out;
    resp = v1__list_pod_resources_response__unpack(NULL, raw_len, raw);
    if (!resp) {
        r = error_set(err, -EBADMSG, "pod-resources List: malformed response");
        goto out;
    }
    for (size_t p = 0; p < resp->n_pod_resources && r == 0; p++)
        for (size_t c = 0; c < resp->pod_resources[p]->n_containers && r == 0; c++)
            r = add_container(&l, &alloc, resp->pod_resources[p],
                              resp->pod_resources[p]->containers[c]);
    if (r < 0) {
        error_set(err, r, "pod-resources List: %s",
                  r == -E2BIG ? "too many devices" : "out of memory");
        goto out;
    }
    *ret = l;
    l = (struct dp_pod_devices){0};
    r = 0;
out:
    dp_pod_devices_release(&l);
    if (resp)
        v1__list_pod_resources_response__free_unpacked(resp, NULL);
    free(raw);
    return r;
}

const struct dp_pod_device *dp_pod_devices_find(const struct dp_pod_devices *l,
                                                const char *resource, const char *id)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (strcmp(l->items[i].id, id) == 0 && strcmp(l->items[i].resource, resource) == 0)
            return &l->items[i];
    return NULL;
}

const char *dp_pod_devices_holder(const struct dp_pod_devices *l, const char *resource,
                                  const char *id)
{
    const struct dp_pod_device *d = dp_pod_devices_find(l, resource, id);
    return d ? d->pod : NULL;
}

/* ---- the kubelet's checkpoint: who holds what when pod-resources is not mounted ------------ */

/* One entry's DeviceIDs: {"<numa>": [ids]} (current) or a flat [ids] (checkpoint v1). */
static int add_entry_ids(struct dp_pod_devices *l, size_t *alloc, const char *container,
                         const char *resource, const char *uid, json_t *ids)
{
    const char *numa;
    json_t *arr, *v;
    size_t i;
    int r = 0;

    if (json_is_array(ids)) {
        json_array_foreach(ids, i, v) if (json_is_string(v) && r == 0) r =
            add_device(l, alloc, container, resource, json_string_value(v), NULL, uid);
        return r;
    }
    json_object_foreach(ids, numa, arr)
        json_array_foreach(arr, i, v) if (json_is_string(v) && r == 0) r =
            add_device(l, alloc, container, resource, json_string_value(v), NULL, uid);
    return r;
}

int dp_checkpoint_read(const char *path, struct dp_pod_devices *ret, struct error *err)
{
    struct dp_pod_devices l = {0};
    json_t *doc = NULL, *entries, *e;
    json_error_t jerr;
    char *text = NULL;
    size_t len = 0, alloc = 0, i;
    int r;

    r = file_read_all(path, DP_CHECKPOINT_MAX_BYTES, &text, &len, err);
    if (r < 0)
        return r;
    doc = json_loadb(text, len, 0, &jerr);
    entries = json_object_get(json_object_get(doc, "Data"), "PodDeviceEntries");
    if (!doc || !(json_is_array(entries) || json_is_null(entries))) {
        r = error_set(err, -EBADMSG, "%s: not a kubelet device checkpoint (%s)", path,
                      doc ? "no Data.PodDeviceEntries" : jerr.text);
        goto out;
    }
    json_array_foreach(entries, i, e)
    {
        const char *uid = json_string_value(json_object_get(e, "PodUID"));
        const char *res = json_string_value(json_object_get(e, "ResourceName"));
        if (!uid || !res)
            continue;
        r = add_entry_ids(&l, &alloc, json_string_value(json_object_get(e, "ContainerName")), res,
                          uid, json_object_get(e, "DeviceIDs"));
        if (r < 0) {
            error_set(err, r, "%s: %s", path, r == -E2BIG ? "too many devices" : "out of memory");
            goto out;
        }
    }
    *ret = l;
    memset(&l, 0, sizeof(l));
    r = 0;
out:
    dp_pod_devices_release(&l);
    json_decref(doc);
    free(text);
    return r;
}

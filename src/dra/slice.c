/* SPDX-License-Identifier: Apache-2.0 */
/* slice.c: the ResourceSlice object this node publishes for driver gpu.nvidia.com, in
 * resource.k8s.io v1, v1beta2 (same device shape) or v1beta1 (attributes and capacity under
 * `basic`), as NVIDIA's plugin writes it. Pure: builds JSON, the caller sends it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dra/dra.h"

const char *dra_api_version_string(enum dra_api_version v)
{
    switch (v) {
    case DRA_API_V1:
        return "resource.k8s.io/v1";
    case DRA_API_V1BETA2:
        return "resource.k8s.io/v1beta2";
    case DRA_API_V1BETA1:
        return "resource.k8s.io/v1beta1";
    }
    return NULL;
}

/* json_object_set_new that keeps the first failure: building stops being useful after
 * out of memory, and one check at the end is enough. */
static void set(json_t *obj, const char *key, json_t *value, bool *ok)
{
    if (!value || json_object_set_new(obj, key, value) < 0)
        *ok = false;
}

static json_t *attr_json(const struct dra_attr *a)
{
    switch (a->kind) {
    case DRA_ATTR_STRING:
        return json_pack("{s:s}", "string", a->str);
    case DRA_ATTR_VERSION:
        return json_pack("{s:s}", "version", a->str);
    case DRA_ATTR_INT:
        return json_pack("{s:I}", "int", (json_int_t)a->i);
    case DRA_ATTR_BOOL:
        return json_pack("{s:b}", "bool", a->b);
    }
    return NULL;
}

/* {"value": q} and, on a shareable device, its requestPolicy {default, validRange {min,
 * max?, step?}} (KEP-5075). */
static json_t *capacity_json(const struct dra_capacity *c)
{
    const struct dra_request_policy *p = &c->policy;
    json_t *cap = json_pack("{s:s}", "value", c->value), *range;
    bool ok = cap != NULL;

    if (!ok || !c->has_policy)
        return cap;
    range = json_pack("{s:s}", "min", p->min);
    if (range && *p->max)
        set(range, "max", json_string(p->max), &ok);
    if (range && *p->step)
        set(range, "step", json_string(p->step), &ok);
    set(cap, "requestPolicy",
        json_pack("{s:s,s:o}", "default", p->default_value, "validRange", range), &ok);
    if (ok)
        return cap;
    json_decref(cap);
    return NULL;
}

static json_t *device_json(const struct dra_device *d, enum dra_api_version version)
{
    json_t *dev = json_object(), *attrs = json_object(), *caps = json_object();
    bool ok = dev && attrs && caps;

    for (size_t i = 0; ok && i < d->n_attrs; i++)
        set(attrs, d->attrs[i].name, attr_json(&d->attrs[i]), &ok);
    for (size_t i = 0; ok && i < d->n_capacities; i++)
        set(caps, d->capacities[i].name, capacity_json(&d->capacities[i]), &ok);
    if (!ok)
        goto fail;
    set(dev, "name", json_string(d->info.name), &ok);
    if (d->n_capacities == 0) { /* left out, as Go's omitempty does (a GB10 has none) */
        json_decref(caps);
        caps = NULL;
    }
    if (version == DRA_API_V1BETA1) {
        json_t *basic = caps ? json_pack("{s:o,s:o}", "attributes", attrs, "capacity", caps)
                             : json_pack("{s:o}", "attributes", attrs);
        if (basic && d->shareable)
            set(basic, "allowMultipleAllocations", json_true(), &ok);
        set(dev, "basic", basic, &ok);
    } else {
        set(dev, "attributes", attrs, &ok);
        if (caps)
            set(dev, "capacity", caps, &ok);
        if (d->shareable)
            set(dev, "allowMultipleAllocations", json_true(), &ok);
    }
    attrs = caps = NULL; /* handed over, also on failure */
    if (ok)
        return dev;
fail:
    json_decref(dev);
    json_decref(attrs);
    json_decref(caps);
    return NULL;
}

static json_t *metadata_json(const struct dra_slice_meta *meta)
{
    json_t *md = json_object();
    char prefix[300];
    bool ok = md != NULL;

    if (!ok)
        return NULL;
    if (meta->name) {
        set(md, "name", json_string(meta->name), &ok);
        if (meta->resource_version)
            set(md, "resourceVersion", json_string(meta->resource_version), &ok);
    } else {
        snprintf(prefix, sizeof(prefix), "%s-%s-", meta->node_name, DRA_DRIVER_NAME);
        set(md, "generateName", json_string(prefix), &ok);
    }
    if (meta->node_uid)
        set(md, "ownerReferences",
            json_pack("[{s:s,s:s,s:s,s:s,s:b}]", "apiVersion", "v1", "kind", "Node", "name",
                      meta->node_name, "uid", meta->node_uid, "controller", 1),
            &ok);
    if (ok)
        return md;
    json_decref(md);
    return NULL;
}

int dra_slice_json(const struct dra_devices *devs, const struct dra_slice_meta *meta,
                   enum dra_api_version version, json_t **ret, struct error *err)
{
    const char *api = dra_api_version_string(version);
    json_t *slice = NULL, *devices = NULL;
    size_t n = 0;
    bool ok = true;

    if (!api)
        return error_set(err, -EINVAL, "unknown resource.k8s.io version %d", (int)version);
    if (!meta || !meta->node_name || !*meta->node_name)
        return error_set(err, -EINVAL,
                         "no node name for the ResourceSlice; set --node-name or NODE_NAME");
    for (size_t i = 0; devs && i < devs->n_devices; i++)
        n += devs->devices[i].healthy;
    if (n > DRA_SLICE_MAX_DEVICES)
        return error_set(err, -E2BIG,
                         "%zu devices on node %s, more than the %d a ResourceSlice may hold; "
                         "use fewer MIG devices per GPU",
                         n, meta->node_name, DRA_SLICE_MAX_DEVICES);
    devices = json_array();
    for (size_t i = 0; devices && ok && devs && i < devs->n_devices; i++)
        if (devs->devices[i].healthy &&
            json_array_append_new(devices, device_json(&devs->devices[i], version)) < 0)
            ok = false;
    if (!devices || !ok)
        goto nomem;
    slice = json_pack("{s:s,s:s,s:o,s:{s:s,s:s,s:{s:s,s:I,s:i},s:o}}", "apiVersion", api, "kind",
                      "ResourceSlice", "metadata", metadata_json(meta), "spec", "driver",
                      DRA_DRIVER_NAME, "nodeName", meta->node_name, "pool", "name", meta->node_name,
                      "generation", (json_int_t)(meta->generation > 0 ? meta->generation : 1),
                      "resourceSliceCount", 1, "devices", devices);
    devices = NULL; /* json_pack's "o" took it, also on failure */
    if (!slice)
        goto nomem;
    *ret = slice;
    return 0;
nomem:
    json_decref(devices);
    return error_set(err, -ENOMEM, "out of memory");
}

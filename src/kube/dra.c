/* SPDX-License-Identifier: Apache-2.0 */
/* dra.c: resource.k8s.io for the DRA feature — which version the API server serves (v1,
 * then v1beta2, then v1beta1, remembered), ResourceSlices of one driver on one node (list,
 * create, update with resourceVersion, delete) and reading a ResourceClaim. The slice
 * content comes from the caller (src/dra builds it); this file only speaks HTTP and adapts
 * the v1 shape to v1beta1. The URL and body helpers are pure (tests/unit/kube/test_dra.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kube/internal.h"

const char *const kube__dra_versions[3] = {"v1", "v1beta2", "v1beta1"};

/* ---- pure helpers ------------------------------------------------------------------------ */

static int put_base(struct strbuf *sb, const char *server, const char *version)
{
    int r = kube__put_server(sb, server);

    if (r >= 0)
        r = strbuf_puts(sb, "/apis/" KUBE_DRA_GROUP "/");
    if (r >= 0)
        r = kube__escape(sb, version);
    return r;
}

int kube__url_dra(const char *server, const char *version, const char *ns, const char *resource,
                  const char *name, char **ret)
{
    struct strbuf sb = STRBUF_INIT;
    int r = put_base(&sb, server, version);

    if (r >= 0 && ns) {
        r = strbuf_puts(&sb, "/namespaces/");
        if (r >= 0)
            r = kube__escape(&sb, ns);
    }
    if (r >= 0 && resource)
        r = strbuf_printf(&sb, "/%s", resource);
    if (r >= 0 && resource && name) {
        r = strbuf_putc(&sb, '/');
        if (r >= 0)
            r = kube__escape(&sb, name);
    }
    return kube__url_finish(&sb, r, ret);
}

int kube__url_slices(const char *server, const char *version, const char *driver, const char *node,
                     bool watch, const char *rv, char **ret)
{
    struct strbuf sb = STRBUF_INIT;
    int r = put_base(&sb, server, version);

    if (r >= 0)
        r = strbuf_puts(&sb, "/resourceslices?fieldSelector=spec.driver%3D");
    if (r >= 0)
        r = kube__escape(&sb, driver);
    if (r >= 0)
        r = strbuf_puts(&sb, "%2Cspec.nodeName%3D");
    if (r >= 0)
        r = kube__escape(&sb, node);
    if (r >= 0)
        r = kube__put_watch_query(&sb, watch, rv);
    return kube__url_finish(&sb, r, ret);
}

/* v1beta1 keeps a device's attributes, capacity, counters, taints... under "basic". */
static int devices_to_v1beta1(json_t *devices)
{
    size_t i;
    json_t *d;

    json_array_foreach(devices, i, d)
    {
        json_t *basic;
        const char *key;
        void *tmp;
        json_t *v;

        if (!json_is_object(d) || json_object_get(d, "basic"))
            continue;
        basic = json_object();
        if (!basic)
            return -ENOMEM;
        json_object_foreach_safe(d, tmp, key, v)
        {
            if (strcmp(key, "name") == 0)
                continue;
            json_object_set(basic, key, v);
            json_object_del(d, key);
        }
        if (json_object_set_new(d, "basic", basic) < 0)
            return -ENOMEM;
    }
    return 0;
}

int kube__slice_body(const char *body_json, const char *version, const char *resource_version,
                     char **ret, struct error *err)
{
    json_error_t je;
    json_t *j = json_loads(body_json ? body_json : "", JSON_REJECT_DUPLICATES, &je);
    json_t *meta, *devices;
    char api_version[64];
    char *s = NULL;
    int r = 0;

    if (!json_is_object(j)) {
        r = error_set(err, -EINVAL, "the ResourceSlice body is not a JSON object%s%s",
                      j ? "" : ": ", j ? "" : je.text);
        goto out;
    }
    devices = json_object_get(json_object_get(j, "spec"), "devices");
    if (devices && !json_is_array(devices)) {
        r = error_set(err, -EINVAL, "the ResourceSlice body's spec.devices is not an array");
        goto out;
    }
    snprintf(api_version, sizeof(api_version), KUBE_DRA_GROUP "/%s", version);
    meta = json_object_get(j, "metadata");
    if (!meta) {
        meta = json_object();
        json_object_set_new(j, "metadata", meta);
    }
    if (json_object_set_new(j, "apiVersion", json_string(api_version)) < 0 ||
        json_object_set_new(j, "kind", json_string("ResourceSlice")) < 0 || !json_is_object(meta) ||
        (resource_version &&
         json_object_set_new(meta, "resourceVersion", json_string(resource_version)) < 0)) {
        r = error_set(err, json_is_object(meta) ? -ENOMEM : -EINVAL,
                      "cannot set the ResourceSlice's apiVersion, kind or metadata");
        goto out;
    }
    if (strcmp(version, "v1beta1") == 0 && devices && devices_to_v1beta1(devices) < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    s = json_dumps(j, JSON_COMPACT);
    if (!s) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    *ret = s;
out:
    json_decref(j);
    return r;
}

void kube_slice_list_release(struct kube_slice_list *l)
{
    if (!l)
        return;
    free(l->items_json);
    free(l->resource_version);
    memset(l, 0, sizeof(*l));
}

int kube__slice_list_parse(const char *body, size_t len, struct kube_slice_list *ret,
                           struct error *err)
{
    struct kube_slice_list l = {0};
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je), *items;
    const char *rv;
    int r = 0;

    if (!j) {
        r = error_set(err, -EINVAL, "ResourceSlice list answer is not JSON: %s (line %d)", je.text,
                      je.line);
        goto out;
    }
    items = json_object_get(j, "items");
    rv = json_string_value(json_object_get(json_object_get(j, "metadata"), "resourceVersion"));
    if (!rv || !(json_is_array(items) || json_is_null(items))) {
        r = error_set(err, -EINVAL,
                      "not a ResourceSliceList (no items or metadata.resourceVersion)");
        goto out;
    }
    /* An empty list may come as "items": null. */
    l.items_json = json_is_array(items) ? json_dumps(items, JSON_COMPACT) : strdup("[]");
    l.n_items = json_is_array(items) ? json_array_size(items) : 0;
    l.resource_version = strdup(rv);
    if (!l.items_json || !l.resource_version) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    *ret = l;
    memset(&l, 0, sizeof(l));
out:
    kube_slice_list_release(&l);
    json_decref(j);
    return r;
}

int kube__dra_off_error(const char *server, struct error *err)
{
    return error_set(
        err, -EOPNOTSUPP,
        "the API server %s does not serve " KUBE_DRA_GROUP
        " (tried v1, v1beta2, v1beta1): Dynamic Resource Allocation is not "
        "enabled. It needs Kubernetes 1.32 or later: from 1.34 it is on unless "
        "kube-apiserver's --runtime-config turns " KUBE_DRA_GROUP
        "/v1 off; on 1.32 and 1.33 give kube-apiserver, kube-controller-manager, "
        "kube-scheduler and the kubelets --feature-gates="
        "DynamicResourceAllocation=true and kube-apiserver --runtime-config=" KUBE_DRA_GROUP
        "/v1beta1=true (1.33: /v1beta2=true). Or run the device "
        "plugin instead (gpuslice device-plugin)",
        server);
}

/* ---- requests ---------------------------------------------------------------------------- */

/* One request on a full URL; *ret_body (may be NULL) the owned 2xx answer. */
static int call(struct kube_client *c, const char *method, const char *url, const char *body,
                char **ret_body, struct error *err)
{
    struct strbuf resp = STRBUF_INIT;
    struct kube__request rq = {.method = method, .url = url, .body = body};
    long status = 0;
    int r;

    resp.max_len = KUBE__BODY_MAX_BYTES;
    rq.timeout_ms = c->request_timeout_ms;
    r = kube__perform(c, &rq, &resp, &status, err);
    if (r == -EOPNOTSUPP) {
        /* The version learned is no longer served (runtime-config changed, a downgrade):
         * forget it, so that the next call asks again. */
        pthread_mutex_lock(&c->lock);
        c->dra_version = NULL;
        pthread_mutex_unlock(&c->lock);
    }
    if (r >= 0 && ret_body) {
        *ret_body = strbuf_take(&resp);
        if (!*ret_body)
            *ret_body = strdup("");
        if (!*ret_body)
            r = error_set(err, -ENOMEM, "out of memory");
    }
    strbuf_release(&resp);
    return r;
}

int kube_dra_version(struct kube_client *c, const char **ret_version, struct error *err)
{
    const char *known;
    char *url = NULL;
    int r = 0;

    pthread_mutex_lock(&c->lock);
    known = c->dra_version;
    pthread_mutex_unlock(&c->lock);
    if (known) {
        *ret_version = known;
        return 0;
    }
    for (size_t i = 0; i < GS_ARRAY_SIZE(kube__dra_versions); i++) {
        const char *v = kube__dra_versions[i];

        free(url);
        url = NULL;
        if (kube__url_dra(c->auth.server, v, NULL, NULL, NULL, &url) < 0)
            return error_set(err, -ENOMEM, "out of memory");
        r = call(c, "GET", url, NULL, NULL, err);
        if (r == -ENOENT || r == -EOPNOTSUPP)
            continue; /* this version is not served: the next one */
        if (r < 0)
            goto out;
        pthread_mutex_lock(&c->lock);
        c->dra_version = v;
        pthread_mutex_unlock(&c->lock);
        *ret_version = v;
        goto out;
    }
    r = kube__dra_off_error(c->auth.server, err);
out:
    free(url);
    return r;
}

int kube_slices_list(struct kube_client *c, const char *driver, const char *node,
                     struct kube_slice_list *ret, struct error *err)
{
    const char *v;
    char *url = NULL, *body = NULL;
    int r;

    node = node ? node : c->node_name;
    if (!driver || !*driver || !node || !*node)
        return error_set(err, -EINVAL,
                         "listing ResourceSlices needs a driver and a node name (NODE_NAME)");
    r = kube_dra_version(c, &v, err);
    if (r < 0)
        return r;
    if (kube__url_slices(c->auth.server, v, driver, node, false, NULL, &url) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    r = call(c, "GET", url, NULL, &body, err);
    if (r >= 0) {
        r = kube__slice_list_parse(body, strlen(body), ret, err);
        if (r < 0)
            error_prefix(err, "GET %s", url);
    }
    free(body);
    free(url);
    return r;
}

/* Create (name NULL: POST to the collection) or update (PUT on name). */
static int slice_write(struct kube_client *c, const char *name, const char *body_json,
                       const char *resource_version, char **ret_json, struct error *err)
{
    const char *v;
    char *url = NULL, *body = NULL;
    int r;

    r = kube_dra_version(c, &v, err);
    if (r < 0)
        return r;
    r = kube__slice_body(body_json, v, resource_version, &body, err);
    if (r < 0)
        return r;
    if (kube__url_dra(c->auth.server, v, NULL, "resourceslices", name, &url) < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = call(c, name ? "PUT" : "POST", url, body, ret_json, err);
out:
    free(body);
    free(url);
    return r;
}

int kube_slice_create(struct kube_client *c, const char *body_json, char **ret_json,
                      struct error *err)
{
    return slice_write(c, NULL, body_json, NULL, ret_json, err);
}

int kube_slice_update(struct kube_client *c, const char *name, const char *body_json,
                      const char *resource_version, char **ret_json, struct error *err)
{
    if (!name || !*name || !resource_version || !*resource_version)
        return error_set(err, -EINVAL,
                         "updating a ResourceSlice needs its name and the resourceVersion "
                         "last read");
    return slice_write(c, name, body_json, resource_version, ret_json, err);
}

int kube_slice_delete(struct kube_client *c, const char *name, const char *resource_version,
                      struct error *err)
{
    const char *v;
    char *url = NULL, *body = NULL;
    int r;

    if (!name || !*name)
        return error_set(err, -EINVAL, "deleting a ResourceSlice needs its name");
    r = kube_dra_version(c, &v, err);
    if (r < 0)
        return r;
    if (resource_version) {
        json_t *opts = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "DeleteOptions",
                                 "preconditions", "resourceVersion", resource_version);
        body = opts ? json_dumps(opts, JSON_COMPACT) : NULL;
        json_decref(opts);
        if (!body)
            return error_set(err, -ENOMEM, "out of memory");
    }
    if (kube__url_dra(c->auth.server, v, NULL, "resourceslices", name, &url) < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = call(c, "DELETE", url, body, NULL, err);
out:
    free(body);
    free(url);
    return r;
}

int kube_claim_get(struct kube_client *c, const char *ns, const char *name, char **ret_json,
                   struct error *err)
{
    const char *v;
    char *url = NULL;
    int r;

    if (!ns || !*ns || !name || !*name)
        return error_set(err, -EINVAL, "reading a ResourceClaim needs its namespace and name");
    r = kube_dra_version(c, &v, err);
    if (r < 0)
        return r;
    if (kube__url_dra(c->auth.server, v, ns, "resourceclaims", name, &url) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    r = call(c, "GET", url, NULL, ret_json, err);
    free(url);
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* claim.c: the parts of a ResourceClaim (resource.k8s.io v1/v1beta2/v1beta1, same field
 * names there) that prepare needs: identity, allocation results, the configs copied from
 * class and claim, and the pods it is reserved for. Pure: parses JSON the caller fetched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra.h"

/* A string member; NULL and -EINVAL naming `path` when absent or not a string (optional
 * members: absent is 0 with *ret NULL). */
static int str_member(const json_t *obj, const char *key, bool required, const char *path,
                      char **ret, struct error *err)
{
    const json_t *v = json_object_get(obj, key);

    *ret = NULL;
    if (!v && !required)
        return 0;
    if (!json_is_string(v))
        return error_set(err, -EINVAL, "ResourceClaim: %s%s%s is %s; expected a string", path,
                         *path ? "." : "", key, v ? "not a string" : "missing");
    *ret = str_dup(json_string_value(v));
    return *ret ? 0 : error_set(err, -ENOMEM, "out of memory");
}

static int parse_result(const json_t *r, size_t idx, struct dra_result *res, struct error *err)
{
    static const char *const keys[] = {"request", "driver", "pool", "device"};
    char **dst[] = {&res->request, &res->driver, &res->pool, &res->device};
    char path[96];
    int rc;

    snprintf(path, sizeof(path), "status.allocation.devices.results[%zu]", idx);
    if (!json_is_object(r))
        return error_set(err, -EINVAL, "ResourceClaim: %s is not an object", path);
    for (size_t i = 0; i < GS_ARRAY_SIZE(keys); i++) {
        rc = str_member(r, keys[i], true, path, dst[i], err);
        if (rc < 0)
            return rc;
    }
    res->admin_access = json_is_true(json_object_get(r, "adminAccess"));
    return 0;
}

static int parse_requests(const json_t *reqs, const char *path, char ***ret, struct error *err)
{
    size_t i;
    const json_t *v;

    *ret = strv_new();
    if (!*ret)
        return error_set(err, -ENOMEM, "out of memory");
    if (!reqs)
        return 0;
    if (!json_is_array(reqs))
        return error_set(err, -EINVAL, "ResourceClaim: %s.requests is not a list", path);
    json_array_foreach(reqs, i, v)
    {
        if (!json_is_string(v))
            return error_set(err, -EINVAL, "ResourceClaim: %s.requests[%zu] is not a string", path,
                             i);
        if (strv_push(ret, json_string_value(v)) < 0)
            return error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

static int parse_config(const json_t *c, size_t idx, struct dra_claim_config *cfg,
                        struct error *err)
{
    char path[96], opath[112];
    const char *source;
    const json_t *opaque;
    int r;

    snprintf(path, sizeof(path), "status.allocation.devices.config[%zu]", idx);
    if (!json_is_object(c))
        return error_set(err, -EINVAL, "ResourceClaim: %s is not an object", path);
    source = json_string_value(json_object_get(c, "source"));
    if (str_eq(source, "FromClass"))
        cfg->source = DRA_SOURCE_CLASS;
    else if (str_eq(source, "FromClaim"))
        cfg->source = DRA_SOURCE_CLAIM;
    else
        return error_set(err, -EINVAL,
                         "ResourceClaim: %s.source is '%s'; expected FromClass or FromClaim", path,
                         source ? source : "(missing)");
    r = parse_requests(json_object_get(c, "requests"), path, &cfg->requests, err);
    if (r < 0)
        return r;
    opaque = json_object_get(c, "opaque");
    if (!opaque)
        return 0;
    snprintf(opath, sizeof(opath), "%s.opaque", path);
    r = str_member(opaque, "driver", true, opath, &cfg->driver, err);
    if (r < 0)
        return r;
    cfg->parameters = json_object_get(opaque, "parameters");
    if (!cfg->parameters)
        return error_set(err, -EINVAL, "ResourceClaim: %s.parameters is missing", opath);
    json_incref(cfg->parameters);
    return 0;
}

static int parse_reserved(const json_t *list, struct dra_claim *c, struct error *err)
{
    size_t i;
    const json_t *v;

    if (!json_is_array(list))
        return 0;
    c->reserved_for = calloc(json_array_size(list) + 1, sizeof(*c->reserved_for));
    if (!c->reserved_for)
        return error_set(err, -ENOMEM, "out of memory");
    json_array_foreach(list, i, v)
    {
        struct dra_pod_ref *p = &c->reserved_for[c->n_reserved_for];
        const char *res = json_string_value(json_object_get(v, "resource"));
        if (!str_eq(res, "pods"))
            continue;
        p->name = str_dup(json_string_value(json_object_get(v, "name")));
        p->uid = str_dup(json_string_value(json_object_get(v, "uid")));
        c->n_reserved_for++;
    }
    return 0;
}

static int parse_allocation(const json_t *devices, struct dra_claim *c, struct error *err)
{
    const json_t *results = json_object_get(devices, "results");
    const json_t *configs = json_object_get(devices, "config");
    size_t i;
    const json_t *v;
    int r;

    if (results && !json_is_array(results))
        return error_set(err, -EINVAL,
                         "ResourceClaim: status.allocation.devices.results is not a list");
    if (configs && !json_is_array(configs))
        return error_set(err, -EINVAL,
                         "ResourceClaim: status.allocation.devices.config is not a list");
    c->results = calloc(json_array_size(results) + 1, sizeof(*c->results));
    c->configs = calloc(json_array_size(configs) + 1, sizeof(*c->configs));
    if (!c->results || !c->configs)
        return error_set(err, -ENOMEM, "out of memory");
    json_array_foreach(results, i, v)
    {
        r = parse_result(v, i, &c->results[c->n_results++], err);
        if (r < 0)
            return r;
    }
    json_array_foreach(configs, i, v)
    {
        r = parse_config(v, i, &c->configs[c->n_configs++], err);
        if (r < 0)
            return r;
    }
    return 0;
}

int dra_claim_parse(const json_t *obj, struct dra_claim **ret, struct error *err)
{
    struct dra_claim *c = calloc(1, sizeof(*c));
    const json_t *md = json_object_get(obj, "metadata");
    const json_t *status = json_object_get(obj, "status");
    const json_t *alloc = json_object_get(status, "allocation");
    int r;

    if (!c)
        return error_set(err, -ENOMEM, "out of memory");
    if (!json_is_object(md)) {
        r = error_set(err, -EINVAL, "ResourceClaim: metadata is missing");
        goto out;
    }
    r = str_member(md, "uid", true, "metadata", &c->uid, err);
    if (r == 0)
        r = str_member(md, "name", true, "metadata", &c->name, err);
    if (r == 0)
        r = str_member(md, "namespace", false, "metadata", &c->namespace, err);
    if (r == 0 && json_is_object(alloc)) {
        c->allocated = true;
        r = parse_allocation(json_object_get(alloc, "devices"), c, err);
    }
    if (r == 0)
        r = parse_reserved(json_object_get(status, "reservedFor"), c, err);
    if (r < 0)
        goto out;
    *ret = c;
    c = NULL;
out:
    dra_claim_free(c);
    return r;
}

int dra_claim_parse_text(const char *text, size_t n, struct dra_claim **ret, struct error *err)
{
    json_error_t je;
    json_t *obj = json_loadb(text, n, 0, &je);
    int r;

    if (!obj)
        return error_set(err, -EINVAL, "ResourceClaim: not JSON (line %d column %d): %s", je.line,
                         je.column, je.text);
    r = dra_claim_parse(obj, ret, err);
    json_decref(obj);
    return r;
}

void dra_claim_free(struct dra_claim *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_results; i++) {
        free(c->results[i].request);
        free(c->results[i].driver);
        free(c->results[i].pool);
        free(c->results[i].device);
    }
    for (size_t i = 0; i < c->n_configs; i++) {
        strv_free(c->configs[i].requests);
        free(c->configs[i].driver);
        json_decref(c->configs[i].parameters);
    }
    for (size_t i = 0; i < c->n_reserved_for; i++) {
        free(c->reserved_for[i].name);
        free(c->reserved_for[i].uid);
    }
    free(c->results);
    free(c->configs);
    free(c->reserved_for);
    free(c->uid);
    free(c->name);
    free(c->namespace);
    free(c);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* plan_json.c: `gpuslice plan -o json`, built from the model with jansson here in cli/,
 * so the pure model stays free of JSON (and of jansson). The table form is
 * model_plan_report(). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"

/* NVML strings are not guaranteed UTF-8; JSON must be. Other bytes become '?'. */
static json_t *json_text(const char *s)
{
    json_t *j = json_string(s);
    char *copy;

    if (j || !s)
        return j;
    copy = strdup(s);
    if (!copy)
        return NULL;
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80 || (unsigned char)*p < 0x20)
            *p = '?';
    j = json_string(copy);
    free(copy);
    return j;
}

static json_t *device_json(const struct model_device *d)
{
    json_t *o = json_object(), *numa = json_array();

    if (!o || !numa)
        goto fail;
    if (d->numa_node >= 0 && json_array_append_new(numa, json_integer(d->numa_node)) < 0)
        goto fail;
    if (json_object_set_new(o, "id", json_string(d->id)) < 0 ||
        json_object_set_new(o, "gpu", json_integer(d->gpu_index)) < 0 ||
        (d->mig_index >= 0 && json_object_set_new(o, "mig", json_integer(d->mig_index)) < 0) ||
        json_object_set_new(o, "health",
                            json_string(d->healthy ? MODEL_HEALTHY : MODEL_UNHEALTHY)) < 0 ||
        json_object_set_new(o, "numa", numa) < 0)
        goto fail_o;
    return o;
fail:
    json_decref(numa);
fail_o:
    json_decref(o);
    return NULL;
}

static json_t *resource_json(const struct model_resource *res, const struct inv_inventory *inv)
{
    struct strbuf gpus = STRBUF_INIT;
    json_t *o = json_object(), *devs = json_array();

    if (!o || !devs || model_resource_gpus_text(res, inv, &gpus) < 0)
        goto fail;
    for (size_t i = 0; i < res->n_devices; i++)
        if (json_array_append_new(devs, device_json(&res->devices[i])) < 0)
            goto fail;
    if (json_object_set_new(o, "name", json_string(res->name)) < 0 ||
        json_object_set_new(o, "count", json_integer((json_int_t)res->n_devices)) < 0 ||
        json_object_set_new(o, "sharing", json_string(res->mode->name)) < 0 ||
        json_object_set_new(o, "replicas", json_integer(res->replicas)) < 0 ||
        json_object_set_new(o, "socket", json_string(res->socket_name)) < 0 ||
        json_object_set_new(o, "gpus", json_text(strbuf_str(&gpus))) < 0)
        goto fail;
    if (json_object_set_new(o, "devices", devs) < 0) {
        devs = NULL;
        goto fail;
    }
    strbuf_release(&gpus);
    return o;
fail:
    strbuf_release(&gpus);
    json_decref(devs);
    json_decref(o);
    return NULL;
}

int cli_plan_json(const struct model *m, const struct inv_inventory *inv, struct strbuf *out)
{
    json_t *root = json_object(), *resources = json_array(), *errors = json_array(),
           *warnings = json_array();
    char *s = NULL;
    int r = -ENOMEM;

    if (!root || !resources || !errors || !warnings)
        goto out;
    for (size_t i = 0; i < m->n_resources; i++)
        if (json_array_append_new(resources, resource_json(&m->resources[i], inv)) < 0)
            goto out;
    for (size_t i = 0; i < m->n_diags; i++)
        if (json_array_append_new(m->diags[i].level == MODEL_DIAG_ERROR ? errors : warnings,
                                  json_text(m->diags[i].message)) < 0)
            goto out;
    if (json_object_set(root, "resources", resources) < 0 ||
        json_object_set(root, "errors", errors) < 0 ||
        json_object_set(root, "warnings", warnings) < 0)
        goto out;
    s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!s)
        goto out;
    r = strbuf_puts(out, s);
    if (r == 0)
        r = strbuf_putc(out, '\n');
out:
    free(s);
    json_decref(resources);
    json_decref(errors);
    json_decref(warnings);
    json_decref(root);
    return r;
}

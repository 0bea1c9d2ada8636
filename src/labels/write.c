/* SPDX-License-Identifier: Apache-2.0 */
/* write.c: where a label set goes — NFD's local-source file, a NodeFeature object, or the
 * Node's own labels — over base/ (atomic file write) and kube/ (API calls). The thin I/O
 * shell around the pure labels.c; built as its own library (gs_labels_write) so the pure
 * part never links the API client. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kube/kube.h"
#include "labels/labels.h"
#include "labels/write.h"

int labels_format(const struct labels_set *s, char **ret_text)
{
    struct strbuf sb = STRBUF_INIT;
    int r = 0;

    for (size_t i = 0; i < s->n_labels && r == 0; i++)
        r = strbuf_printf(&sb, "%s=%s\n", s->labels[i].key, s->labels[i].value);
    if (r < 0) {
        strbuf_release(&sb);
        return -ENOMEM;
    }
    *ret_text = strbuf_take(&sb);
    return *ret_text ? 0 : -ENOMEM;
}

int labels_write_file(const struct labels_set *s, const char *path, struct error *err)
{
    char *text = NULL;
    int r = labels_format(s, &text);

    if (r < 0)
        return error_set(err, r, "out of memory");
    if (!path || !*path) {
        fputs(text, stdout);
        r = fflush(stdout) == 0 ? 0 : error_set(err, -EIO, "cannot write the labels to stdout");
    } else {
        r = file_write_atomic(path, text, strlen(text), 0644, err);
    }
    free(text);
    return r;
}

/* The NodeFeature writer's errors say what this mode needs: rights on nodefeatures (not the
 * device plugin's nodes/events rights) and NFD's CRD, with the file mode as the way out.
 * kube/ has already named the refused verb or the missing API group. */
static void nodefeature_context(int r, const char *ns, const char *name, struct error *err)
{
    char detail[ERROR_MSG_MAX];

    if (!err)
        return;
    snprintf(detail, sizeof(detail), "%s", err->msg);
    if (r == -EOPNOTSUPP)
        error_set(err, r,
                  "NodeFeature %s/%s: %s; NodeFeature objects need NFD (>= 0.14) with its CRDs "
                  "installed, or write NFD's local-source file instead (device-plugin "
                  "--labels=nfd-file, feature-discovery --use-node-feature-api=false)",
                  ns, name, detail);
    else if (r == -EACCES)
        error_set(err, r,
                  "NodeFeature %s/%s: %s; NodeFeature mode needs get, create and update on "
                  "nodefeatures.nfd.k8s-sigs.io in namespace \"%s\" (docs/labels.md)",
                  ns, name, detail, ns);
    else
        error_prefix(err, "NodeFeature %s/%s", ns, name);
}

static json_t *labels_object(const struct labels_set *s)
{
    json_t *o = json_object();

    for (size_t i = 0; o && i < s->n_labels; i++)
        if (json_object_set_new(o, s->labels[i].key, json_string(s->labels[i].value)) < 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static int dump(json_t *o, char **ret)
{
    *ret = json_dumps(o, JSON_COMPACT);
    return *ret ? 0 : -ENOMEM;
}

/* ownerReferences to the pod (GFD points them at its DaemonSet and Pod so the object goes
 * with them); none when the pod cannot be read. */
static json_t *owner_refs(struct kube_client *c, const char *ns, const char *pod)
{
    char path[512], *body = NULL;
    json_t *refs = NULL, *doc = NULL;
    const char *uid;

    if (!pod || !*pod)
        return NULL;
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns, pod);
    if (kube_request(c, "GET", path, NULL, NULL, &body, NULL) < 0)
        return NULL;
    doc = json_loads(body, 0, NULL);
    uid = json_string_value(json_object_get(json_object_get(doc, "metadata"), "uid"));
    if (uid)
        refs = json_pack("[{s:s, s:s, s:s, s:s}]", "apiVersion", "v1", "kind", "Pod", "name", pod,
                         "uid", uid);
    json_decref(doc);
    free(body);
    return refs;
}

int labels_write_nodefeature(struct kube_client *c, const char *ns, const char *node,
                             const char *pod, const struct labels_set *s, bool *ret_changed,
                             struct error *err)
{
    char coll[512], item[1024], name[300], *body = NULL, *out = NULL;
    json_t *obj = NULL, *want = labels_object(s), *spec;
    bool changed = true;
    int r;

    if (!want)
        return error_set(err, -ENOMEM, "out of memory");
    snprintf(name, sizeof(name), "nvidia-features-for-%s", node);
    snprintf(coll, sizeof(coll), "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/%s/nodefeatures", ns);
    snprintf(item, sizeof(item), "%s/%s", coll, name);
    r = kube_request(c, "GET", item, NULL, NULL, &body, err);
    if (r == -ENOENT) {
        json_t *refs = owner_refs(c, ns, pod);
        obj = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:{}, s:O}}", "apiVersion",
                        "nfd.k8s-sigs.io/v1alpha1", "kind", "NodeFeature", "metadata", "name", name,
                        "namespace", ns, "labels", "nfd.node.kubernetes.io/node-name", node, "spec",
                        "features", "labels", want);
        if (obj && refs)
            json_object_set_new(json_object_get(obj, "metadata"), "ownerReferences", refs);
        else
            json_decref(refs);
        r = obj ? dump(obj, &out) : -ENOMEM;
        if (r == 0)
            r = kube_request(c, "POST", coll, out, NULL, NULL, err);
        goto out;
    }
    if (r < 0)
        goto out;
    obj = json_loads(body, 0, NULL);
    spec = json_object_get(obj, "spec");
    if (!obj || !json_is_object(spec)) {
        r = error_set(err, -EIO, "GET %s: not a NodeFeature object", item);
        goto out;
    }
    changed = !json_equal(json_object_get(spec, "labels"), want);
    if (!changed)
        goto out; /* created or updated only when the labels change */
    json_object_set(spec, "labels", want);
    r = dump(obj, &out);
    if (r == 0)
        r = kube_request(c, "PUT", item, out, NULL, NULL, err);
out:
    if (r == -ENOMEM)
        error_set(err, r, "out of memory");
    else if (r < 0)
        nodefeature_context(r, ns, name, err);
    if (r == 0 && ret_changed)
        *ret_changed = changed;
    json_decref(obj);
    json_decref(want);
    free(body);
    free(out);
    return r;
}

/* The keys recorded in LABELS_OWNED_ANNOTATION (comma-separated), as a JSON object of
 * key -> null, to delete whatever the new set does not have. */
static json_t *previous_keys(const char *node_json)
{
    json_t *doc = json_loads(node_json, 0, NULL), *gone = json_object();
    const char *list = json_string_value(json_object_get(
        json_object_get(json_object_get(doc, "metadata"), "annotations"), LABELS_OWNED_ANNOTATION));
    char *copy = list ? str_dup(list) : NULL;

    for (char *k = copy, *next; k && *k; k = next) {
        next = strchr(k, ',');
        if (next)
            *next++ = '\0';
        if (*k && gone)
            json_object_set_new(gone, k, json_null());
        if (!next)
            break;
    }
    free(copy);
    json_decref(doc);
    return gone;
}

int labels_patch_node(struct kube_client *c, const char *node, const struct labels_set *s,
                      struct error *err)
{
    char path[512], *body = NULL, *out = NULL;
    struct strbuf owned = STRBUF_INIT;
    json_t *labels = NULL, *patch = NULL;
    int r;

    snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
    r = kube_request(c, "GET", path, NULL, NULL, &body, err);
    if (r < 0)
        goto out;
    labels = previous_keys(body); /* null for every key we set before ... */
    if (!labels) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < s->n_labels && r == 0; i++) { /* ... unless still there */
        json_object_set_new(labels, s->labels[i].key, json_string(s->labels[i].value));
        r = strbuf_printf(&owned, "%s%s", i ? "," : "", s->labels[i].key);
    }
    if (r < 0)
        goto out;
    patch = json_pack("{s:{s:O, s:{s:s}}}", "metadata", "labels", labels, "annotations",
                      LABELS_OWNED_ANNOTATION, strbuf_str(&owned));
    r = patch ? dump(patch, &out) : -ENOMEM;
    if (r == 0)
        r = kube_request(c, "PATCH", path, out, "application/merge-patch+json", NULL, err);
out:
    if (r == -ENOMEM)
        error_set(err, r, "out of memory");
    else if (r == -EACCES) /* kube/ named the refused verb; say which mode needs it */
        error_prefix(err, "node labels (--labels=node needs get and patch on nodes)");
    json_decref(labels);
    json_decref(patch);
    strbuf_release(&owned);
    free(body);
    free(out);
    return r;
}

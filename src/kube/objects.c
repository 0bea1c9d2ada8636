/* SPDX-License-Identifier: Apache-2.0 */
/* objects.c: the pure half of the Kubernetes client — URLs with percent-encoding, reading
 * Node / NodeList / watch event / Status JSON (jansson), and splitting a watch stream into
 * bounded lines. No I/O; unit-tested directly (tests/unit/kube/test_objects.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kube/internal.h"

/* ---- URLs -------------------------------------------------------------------------------- */

int kube__escape(struct strbuf *sb, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int r = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p && r >= 0; p++) {
        bool unreserved = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                          (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' ||
                          *p == '~';
        if (unreserved) {
            r = strbuf_putc(sb, (char)*p);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            r = strbuf_append(sb, e, 3);
        }
    }
    return r;
}

int kube__put_server(struct strbuf *sb, const char *server)
{
    size_t n = strlen(server);
    while (n > 0 && server[n - 1] == '/')
        n--;
    return strbuf_append(sb, server, n);
}

int kube__url_finish(struct strbuf *sb, int r, char **ret)
{
    char *s;

    if (r < 0) {
        strbuf_release(sb);
        return r;
    }
    s = strbuf_take(sb);
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

int kube__put_watch_query(struct strbuf *sb, bool watch, const char *rv)
{
    int r = 0;

    if (watch)
        r = strbuf_printf(sb, "&watch=true&allowWatchBookmarks=true&timeoutSeconds=%d",
                          KUBE__WATCH_TIMEOUT_S);
    if (r >= 0 && rv && *rv) {
        r = strbuf_puts(sb, "&resourceVersion=");
        if (r >= 0)
            r = kube__escape(sb, rv);
    }
    return r;
}

int kube__url_node(const char *server, const char *node, char **ret)
{
    struct strbuf sb = STRBUF_INIT;
    int r = kube__put_server(&sb, server);

    if (r >= 0)
        r = strbuf_puts(&sb, "/api/v1/nodes/");
    if (r >= 0)
        r = kube__escape(&sb, node);
    return kube__url_finish(&sb, r, ret);
}

int kube__url_node_list(const char *server, const char *node, bool watch, const char *rv,
                        char **ret)
{
    struct strbuf sb = STRBUF_INIT;
    int r = kube__put_server(&sb, server);

    if (r >= 0)
        r = strbuf_puts(&sb, "/api/v1/nodes?fieldSelector=metadata.name%3D");
    if (r >= 0)
        r = kube__escape(&sb, node);
    if (r >= 0)
        r = kube__put_watch_query(&sb, watch, rv);
    return kube__url_finish(&sb, r, ret);
}

int kube__url_events(const char *server, const char *ns, char **ret)
{
    struct strbuf sb = STRBUF_INIT;
    int r = kube__put_server(&sb, server);

    if (r >= 0)
        r = strbuf_puts(&sb, "/api/v1/namespaces/");
    if (r >= 0)
        r = kube__escape(&sb, ns);
    if (r >= 0)
        r = strbuf_puts(&sb, "/events");
    return kube__url_finish(&sb, r, ret);
}

/* ---- objects ----------------------------------------------------------------------------- */

void kube__node_info_release(struct kube__node_info *n)
{
    if (!n)
        return;
    free(n->name);
    free(n->uid);
    free(n->resource_version);
    free(n->label_value);
    memset(n, 0, sizeof(*n));
}

/* An owned copy of obj[key] when it is a string; *ret stays NULL otherwise. */
static int dup_string(json_t *obj, const char *key, char **ret)
{
    const char *s = json_string_value(json_object_get(obj, key));

    if (!s)
        return 0;
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

int kube__node_info_from_json(const void *json_node, const char *label_key,
                              struct kube__node_info *ret, struct error *err)
{
    json_t *node = (json_t *)json_node; /* jansson getters take non-const; nothing is changed */
    struct kube__node_info n = {0};
    json_t *meta, *labels, *value;
    int r;

    meta = json_object_get(node, "metadata");
    if (!json_is_object(node) || !json_is_object(meta)) {
        r = error_set(err, -EINVAL, "not a Kubernetes object (no metadata)");
        goto out;
    }
    r = dup_string(meta, "name", &n.name);
    if (r >= 0)
        r = dup_string(meta, "uid", &n.uid);
    if (r >= 0)
        r = dup_string(meta, "resourceVersion", &n.resource_version);
    if (r < 0)
        goto out;
    labels = json_object_get(meta, "labels");
    value = label_key ? json_object_get(labels, label_key) : NULL;
    if (value) {
        if (!json_is_string(value)) {
            r = error_set(err, -EINVAL, "label \"%s\" of node \"%s\" is not a string", label_key,
                          n.name ? n.name : "?");
            goto out;
        }
        n.has_label = true;
        n.label_value = strdup(json_string_value(value));
        if (!n.label_value) {
            r = -ENOMEM;
            goto out;
        }
    }
    *ret = n;
    memset(&n, 0, sizeof(n));
    r = 0;
out:
    kube__node_info_release(&n);
    return r;
}

static json_t *load(const char *body, size_t len, const char *what, struct error *err)
{
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);

    if (!j)
        error_set(err, -EINVAL, "%s is not JSON: %s (line %d, column %d)", what, je.text, je.line,
                  je.column);
    return j;
}

int kube__node_parse(const char *body, size_t len, const char *label_key,
                     struct kube__node_info *ret, struct error *err)
{
    json_t *j = load(body, len, "node answer", err);
    int r;

    if (!j)
        return -EINVAL;
    r = kube__node_info_from_json(j, label_key, ret, err);
    json_decref(j);
    return r;
}

int kube__node_list_parse(const char *body, size_t len, const char *node, const char *label_key,
                          struct kube__node_info *ret, bool *ret_found, struct error *err)
{
    struct kube__node_info n = {0};
    json_t *j, *items, *item;
    const char *rv;
    bool found = false;
    size_t i;
    int r = 0;

    j = load(body, len, "node list answer", err);
    if (!j)
        return -EINVAL;
    items = json_object_get(j, "items");
    rv = json_string_value(json_object_get(json_object_get(j, "metadata"), "resourceVersion"));
    if (!json_is_array(items) || !rv) {
        r = error_set(err, -EINVAL, "not a NodeList (no items or metadata.resourceVersion)");
        goto out;
    }
    json_array_foreach(items, i, item)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
        if (!str_eq(name, node))
            continue;
        r = kube__node_info_from_json(item, label_key, &n, err);
        if (r < 0)
            goto out;
        found = true;
        break;
    }
    /* The list's resourceVersion is where a watch continues, not the item's. */
    free(n.resource_version);
    n.resource_version = strdup(rv);
    if (!n.resource_version) {
        r = -ENOMEM;
        goto out;
    }
    *ret = n;
    memset(&n, 0, sizeof(n));
    *ret_found = found;
out:
    kube__node_info_release(&n);
    json_decref(j);
    return r;
}

void kube__watch_event_release(struct kube__watch_event *ev)
{
    if (!ev)
        return;
    kube__node_info_release(&ev->node);
    free(ev->message);
    memset(ev, 0, sizeof(*ev));
}

static const struct {
    const char *name;
    enum kube__event_type type;
} event_types[] = {
    {"ADDED", KUBE__EV_ADDED},       {"MODIFIED", KUBE__EV_MODIFIED}, {"DELETED", KUBE__EV_DELETED},
    {"BOOKMARK", KUBE__EV_BOOKMARK}, {"ERROR", KUBE__EV_ERROR},
};

int kube__watch_event_parse(const char *line, size_t len, const char *label_key,
                            struct kube__watch_event *ret, struct error *err)
{
    struct kube__watch_event ev = {0};
    json_t *j, *obj;
    const char *type;
    size_t i;
    int r;

    j = load(line, len, "watch event", err);
    if (!j)
        return -EINVAL;
    type = json_string_value(json_object_get(j, "type"));
    obj = json_object_get(j, "object");
    if (!type || !json_is_object(obj)) {
        r = error_set(err, -EINVAL, "watch event without \"type\" or \"object\"");
        goto out;
    }
    for (i = 0; i < GS_ARRAY_SIZE(event_types); i++)
        if (strcmp(type, event_types[i].name) == 0)
            break;
    if (i == GS_ARRAY_SIZE(event_types)) {
        r = error_set(err, -EINVAL, "unknown watch event type \"%s\"", type);
        goto out;
    }
    ev.type = event_types[i].type;
    if (ev.type == KUBE__EV_ERROR) {
        json_t *code = json_object_get(obj, "code");
        ev.code = json_is_integer(code) ? (long)json_integer_value(code) : 0;
        r = dup_string(obj, "message", &ev.message);
    } else {
        r = kube__node_info_from_json(obj, label_key, &ev.node, err);
    }
    if (r < 0)
        goto out;
    *ret = ev;
    memset(&ev, 0, sizeof(ev));
out:
    kube__watch_event_release(&ev);
    json_decref(j);
    return r;
}

char *kube__status_message(const char *body, size_t len)
{
    json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(j, "message"));
    char *s = NULL;

    if (m && str_eq(json_string_value(json_object_get(j, "kind")), "Status"))
        s = strdup(m);
    json_decref(j);
    return s;
}

/* ---- lines ------------------------------------------------------------------------------- */

int kube__lines_feed(struct kube__lines *l, const char *data, size_t n, size_t max_line_bytes,
                     int (*on_line)(const char *line, size_t len, void *userdata), void *userdata)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        int r;

        if (l->sb.len + take > max_line_bytes)
            return -E2BIG;
        r = strbuf_append(&l->sb, data, take);
        if (r < 0)
            return r;
        data += take;
        n -= take;
        if (!nl)
            break;
        data++; /* the '\n' */
        n--;
        if (l->sb.len > 0) {
            r = on_line(l->sb.buf, l->sb.len, userdata);
            l->sb.len = 0;
            l->sb.buf[0] = '\0';
            if (r < 0)
                return r;
        }
    }
    return 0;
}

void kube__lines_release(struct kube__lines *l)
{
    strbuf_release(&l->sb);
}

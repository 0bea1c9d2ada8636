/* SPDX-License-Identifier: Apache-2.0 */
/* kube_dra_probe: drives src/kube's resource.k8s.io calls for test_kube_dra.py (against
 * fake_apiserver.py). Commands run in order in one client (so the remembered version shows),
 * separated by ";"; each prints one JSON line {"cmd", "rc", "error"?, ...}. Bodies come from
 * files. Exit status 0 when every command succeeded, 1 otherwise. `watch DRIVER` instead
 * follows the slices, one line per change seen through the eventfd, until stdin closes. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/kube.h"

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    struct error err = {0};

    if (file_read_all(path, 1u << 24, &text, &len, &err) < 0)
        fprintf(stderr, "kube_dra_probe: %s\n", err.msg);
    return text;
}

/* Prints the line for one command; consumes out (may be NULL). */
static int report(const char *cmd, int r, const struct error *err, json_t *out)
{
    char *s;

    out = out ? out : json_object();
    json_object_set_new(out, "cmd", json_string(cmd));
    json_object_set_new(out, "rc", json_integer(r));
    if (r < 0)
        json_object_set_new(out, "error", json_string(err->msg));
    s = json_dumps(out, JSON_COMPACT);
    printf("%s\n", s ? s : "{}");
    fflush(stdout);
    free(s);
    json_decref(out);
    return r;
}

/* A JSON text (owned by the caller) as a value of the output, or a string when not JSON. */
static json_t *as_json(const char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    return j ? j : json_string(text ? text : "");
}

static int cmd_list(struct kube_client *c, char **a, int n, struct error *err)
{
    struct kube_slice_list l = {0};
    int r;

    if (n < 1)
        return report("list", error_set(err, -EINVAL, "list DRIVER [NODE]"), err, NULL);
    r = kube_slices_list(c, a[0], n > 1 ? a[1] : NULL, &l, err);
    if (r < 0)
        return report("list", r, err, NULL);
    r = report("list", 0, err,
               json_pack("{s:o, s:i, s:s}", "items", as_json(l.items_json), "n", (int)l.n_items,
                         "rv", l.resource_version));
    kube_slice_list_release(&l);
    return r;
}

static int cmd_write(struct kube_client *c, const char *cmd, char **a, int n, struct error *err)
{
    char *body = NULL, *out = NULL;
    int r;

    if (n < (str_eq(cmd, "create") ? 1 : 3))
        return report(cmd, error_set(err, -EINVAL, "create FILE | update NAME RV FILE"), err, NULL);
    body = slurp(str_eq(cmd, "create") ? a[0] : a[2]);
    if (!body)
        return report(cmd, error_set(err, -ENOENT, "no body"), err, NULL);
    if (str_eq(cmd, "create"))
        r = kube_slice_create(c, body, &out, err);
    else
        r = kube_slice_update(c, a[0], body, a[1], &out, err);
    r = report(cmd, r, err, r < 0 ? NULL : json_pack("{s:o}", "object", as_json(out)));
    free(body);
    free(out);
    return r;
}

static int cmd_event(struct kube_client *c, char **a, int n, struct error *err)
{
    struct kube_event ev = {.about = {.kind = "Pod"}};

    if (n < 6)
        return report("pod-event", error_set(err, -EINVAL, "pod-event NS POD UID TYPE REASON MSG"),
                      err, NULL);
    ev.about.namespace = a[0];
    ev.about.name = a[1];
    ev.about.uid = *a[2] ? a[2] : NULL;
    ev.type = a[3];
    ev.reason = a[4];
    ev.message = a[5];
    return report("pod-event", kube_event_post_about(c, &ev, err), err, NULL);
}

static void on_status(bool reachable, const struct error *err, void *userdata)
{
    json_t *o = json_pack("{s:s, s:b}", "event", "status", "reachable", reachable);

    (void)userdata;
    if (err)
        json_object_set_new(o, "error", json_string(err->msg));
    report("watch", 0, NULL, o);
}

/* Prints the slices (names and resourceVersions) after each change. */
static int print_slices(struct kube_slice_watch *w)
{
    struct kube_slice_list l = {0};
    struct error err = {0};
    json_t *items, *item, *out;
    bool known = false;
    size_t i;
    int r = kube_slice_watch_get(w, &l, &known, &err);

    if (r < 0)
        return report("watch", r, &err, NULL);
    items = json_loads(l.items_json, 0, NULL);
    out = json_pack("{s:s, s:b, s:[], s:s}", "event", "slices", "known", known, "slices", "rv",
                    l.resource_version);
    json_array_foreach(items, i, item)
    {
        json_t *meta = json_object_get(item, "metadata");
        json_array_append_new(json_object_get(out, "slices"),
                              json_pack("{s:O, s:O, s:O?}", "name", json_object_get(meta, "name"),
                                        "rv", json_object_get(meta, "resourceVersion"), "devices",
                                        json_object_get(json_object_get(item, "spec"), "devices")));
    }
    json_decref(items);
    kube_slice_list_release(&l);
    return report("watch", 0, &err, out);
}

static int cmd_watch(struct kube_client *c, char **a, int n)
{
    struct kube_watch_callbacks cb = {.on_status = on_status};
    struct kube_slice_watch *w = NULL;
    struct error err = {0};
    int r;

    if (n < 1)
        return report("watch", error_set(&err, -EINVAL, "watch DRIVER [NODE]"), &err, NULL);
    r = kube_slices_watch_start(c, a[0], n > 1 ? a[1] : NULL, &cb, &w, &err);
    if (r < 0)
        return report("watch", r, &err, NULL);
    for (;;) {
        struct pollfd p[2] = {{.fd = kube_slice_watch_fd(w), .events = POLLIN},
                              {.fd = 0, .events = POLLIN}};
        uint64_t v;
        char buf[64];

        if (poll(p, 2, -1) < 0)
            continue;
        if (p[1].revents && read(0, buf, sizeof(buf)) <= 0)
            break;
        if (p[0].revents && read(p[0].fd, &v, sizeof(v)) == sizeof(v))
            print_slices(w);
    }
    kube_slice_watch_stop(w);
    return 0;
}

/* One command: a[0] is its name, n its word count. */
static int run(struct kube_client *c, char **a, int n)
{
    struct error err = {0};
    const char *v = NULL;
    char *out = NULL;
    int r;

    if (str_eq(a[0], "version")) {
        r = kube_dra_version(c, &v, &err);
        return report("version", r, &err, r < 0 ? NULL : json_pack("{s:s}", "version", v));
    }
    if (str_eq(a[0], "list"))
        return cmd_list(c, a + 1, n - 1, &err);
    if (str_eq(a[0], "create") || str_eq(a[0], "update"))
        return cmd_write(c, a[0], a + 1, n - 1, &err);
    if (str_eq(a[0], "delete") && n >= 2)
        return report("delete", kube_slice_delete(c, a[1], n > 2 ? a[2] : NULL, &err), &err, NULL);
    if (str_eq(a[0], "claim") && n >= 3) {
        r = kube_claim_get(c, a[1], a[2], &out, &err);
        r = report("claim", r, &err, r < 0 ? NULL : json_pack("{s:o}", "object", as_json(out)));
        free(out);
        return r;
    }
    if (str_eq(a[0], "node-uid")) {
        r = kube_node_uid(c, n > 1 ? a[1] : NULL, &out, &err);
        r = report("node-uid", r, &err, r < 0 ? NULL : json_pack("{s:s}", "uid", out));
        free(out);
        return r;
    }
    if (str_eq(a[0], "pod-event"))
        return cmd_event(c, a + 1, n - 1, &err);
    if (str_eq(a[0], "watch"))
        return cmd_watch(c, a + 1, n - 1);
    if (str_eq(a[0], "wait")) { /* for one line on stdin: the test changes the server */
        char buf[64];
        return report("wait", read(0, buf, sizeof(buf)) > 0 ? 0 : -EIO, &err, NULL);
    }
    return report(a[0], error_set(&err, -EINVAL, "unknown command \"%s\"", a[0]), &err, NULL);
}

int main(int argc, char **argv)
{
    struct kube_options o = {0};
    struct kube_client *c = NULL;
    struct error err = {0};
    int i = 1, failed = 0;

    for (; i + 1 < argc && str_startswith(argv[i], "--"); i += 2) {
        if (str_eq(argv[i], "--server"))
            o.api_server = argv[i + 1];
        else if (str_eq(argv[i], "--node"))
            o.node_name = argv[i + 1];
        else if (str_eq(argv[i], "--kubeconfig"))
            o.kubeconfig = argv[i + 1];
        else
            break;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: kube_dra_probe [--server URL] [--node N] [--kubeconfig F] "
                        "CMD ARGS [; CMD ARGS]...\n  version | list DRIVER [NODE] | create FILE"
                        " | update NAME RV FILE | delete NAME [RV] | claim NS NAME |\n"
                        "  node-uid [NODE] | pod-event NS POD UID TYPE REASON MESSAGE |\n"
                        "  watch DRIVER [NODE] (until stdin closes)\n");
        return 2;
    }
    if (kube_client_new(&o, &c, &err) < 0) {
        fprintf(stderr, "kube_dra_probe: %s\n", err.msg);
        return 1;
    }
    while (i < argc) {
        int j = i;
        while (j < argc && !str_eq(argv[j], ";"))
            j++;
        if (j > i && run(c, argv + i, j - i) < 0)
            failed = 1;
        i = j + 1;
    }
    kube_client_free(c);
    return failed;
}

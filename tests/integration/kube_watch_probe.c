/* SPDX-License-Identifier: Apache-2.0 */
/* kube_watch_probe: a small driver of src/kube for the integration tests
 * (test_kube_api.py against fake_apiserver.py). `get` prints a node label, `event` posts an
 * Event, `watch` prints one JSON line per value change (read through the eventfd) and per
 * reachability change (from the callback) until stdin closes or SIGTERM; `nodefeature` and
 * `patch-labels` write one label through labels/write.c (its error texts are tested). */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"
#include "labels/labels.h"
#include "labels/write.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Prints obj as one line with the wall clock time, and consumes it. */
static void emit(json_t *obj)
{
    char *s;

    json_object_set_new(obj, "t_ms", json_integer(wall_ms()));
    s = json_dumps(obj, JSON_COMPACT);
    pthread_mutex_lock(&out_lock);
    if (s)
        printf("%s\n", s);
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
    free(s);
    json_decref(obj);
}

static void on_status(bool reachable, const struct error *err, void *userdata)
{
    emit(json_pack("{s:s, s:b, s:s?}", "event", "status", "reachable", reachable, "error",
                   err ? err->msg : NULL));
}

static int usage(void)
{
    fprintf(stderr, "usage: kube_watch_probe [--kubeconfig F] [--server URL] [--node N] "
                    "[--label K] [--sa-dir D] get|watch|event TYPE REASON MESSAGE|\n"
                    "  nodefeature NAMESPACE KEY=VALUE|patch-labels KEY=VALUE\n");
    return 2;
}

static int run_watch(struct kube_client *c, const char *label)
{
    struct kube_watch_callbacks cb = {.on_status = on_status};
    struct kube_node_watch *w = NULL;
    struct kube_watch_stats stats;
    struct error err = {0};
    char *last = NULL;
    bool printed = false;
    sigset_t mask;
    int sfd = -1, r;

    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    r = kube_node_watch_start(c, NULL, label, &cb, &w, &err);
    if (r < 0) {
        fprintf(stderr, "kube_watch_probe: %s\n", err.msg);
        goto out;
    }
    emit(json_pack("{s:s}", "event", "started"));
    for (;;) {
        struct pollfd p[3] = {{.fd = kube_node_watch_fd(w), .events = POLLIN},
                              {.fd = sfd, .events = POLLIN},
                              {.fd = 0, .events = POLLIN}};
        char buf[256];
        uint64_t n;
        char *value = NULL;
        bool known;

        if (poll(p, 3, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents || (p[2].revents && read(0, buf, sizeof(buf)) <= 0))
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        if (read(p[0].fd, &n, sizeof(n)) < 0)
            continue;
        if (kube_node_watch_value(w, &value, &known, &err) < 0 || !known) {
            free(value);
            continue;
        }
        if (!printed || !str_eq(value, last))
            emit(json_pack("{s:s, s:s?}", "event", "value", "value", value));
        printed = true;
        free(last);
        last = value;
    }
    kube_node_watch_stats(w, &stats, NULL);
    emit(json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "event", "stats", "lists",
                   (json_int_t)stats.n_lists, "watches", (json_int_t)stats.n_watches, "gone",
                   (json_int_t)stats.n_gone, "failures", (json_int_t)stats.n_failures, "changes",
                   (json_int_t)stats.n_changes));
    r = 0;
out : {
    uint64_t t0 = time_now_ms();
    kube_node_watch_stop(w);
    if (w)
        emit(json_pack("{s:s, s:I}", "event", "stopped", "stop_ms",
                       (json_int_t)(time_now_ms() - t0)));
}
    free(last);
    if (sfd >= 0)
        close(sfd);
    return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct kube_options o = {0};
    const char *label = KUBE_DEFAULT_CONFIG_LABEL;
    struct kube_client *c = NULL;
    struct error err = {0};
    int i, r, rc = 1;

    for (i = 1; i + 1 < argc && str_startswith(argv[i], "--"); i += 2) {
        if (strcmp(argv[i], "--kubeconfig") == 0)
            o.kubeconfig = argv[i + 1];
        else if (strcmp(argv[i], "--server") == 0)
            o.api_server = argv[i + 1];
        else if (strcmp(argv[i], "--node") == 0)
            o.node_name = argv[i + 1];
        else if (strcmp(argv[i], "--label") == 0)
            label = argv[i + 1];
        else if (strcmp(argv[i], "--sa-dir") == 0)
            o.serviceaccount_dir = argv[i + 1];
        else
            return usage();
    }
    if (i >= argc)
        return usage();
    r = kube_client_new(&o, &c, &err);
    if (r < 0) {
        fprintf(stderr, "kube_watch_probe: %s\n", err.msg);
        return 1;
    }
    if (strcmp(argv[i], "get") == 0 && i + 1 == argc) {
        char *value = NULL;
        r = kube_node_get_label(c, NULL, label, &value, &err);
        if (r >= 0)
            emit(json_pack("{s:s, s:s?}", "event", "value", "value", value));
        free(value);
    } else if (strcmp(argv[i], "event") == 0 && i + 4 == argc) {
        r = kube_event_post(c, NULL, argv[i + 1], argv[i + 2], argv[i + 3], &err);
        if (r >= 0)
            emit(json_pack("{s:s}", "event", "posted"));
    } else if ((strcmp(argv[i], "nodefeature") == 0 && i + 3 == argc) ||
               (strcmp(argv[i], "patch-labels") == 0 && i + 2 == argc)) {
        /* the label writers (labels/write.c) over this client: one label KEY=VALUE */
        const char *kv = argv[argc - 1], *eq = strchr(kv, '=');
        struct labels_label l = {.key = eq ? strndup(kv, (size_t)(eq - kv)) : NULL,
                                 .value = eq ? strdup(eq + 1) : NULL};
        struct labels_set set = {.labels = &l, .n_labels = 1};
        if (!l.key || !l.value)
            r = error_set(&err, -EINVAL, "KEY=VALUE expected, not \"%s\"", kv);
        else if (argv[i][0] == 'n')
            r = labels_write_nodefeature(c, argv[i + 1], kube_client_node_name(c), NULL, &set, NULL,
                                         &err);
        else
            r = labels_patch_node(c, kube_client_node_name(c), &set, &err);
        if (r >= 0)
            emit(json_pack("{s:s}", "event", "written"));
        free(l.key);
        free(l.value);
    } else if (strcmp(argv[i], "watch") == 0 && i + 1 == argc) {
        rc = run_watch(c, label);
        goto out;
    } else {
        rc = usage();
        goto out;
    }
    if (r < 0)
        fprintf(stderr, "kube_watch_probe: %s\n", err.msg);
    rc = r < 0 ? 1 : 0;
out:
    kube_client_free(c);
    return rc;
}

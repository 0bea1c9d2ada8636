/* SPDX-License-Identifier: Apache-2.0 */
/* kube_event_probe: drives src/kube's Event poster (kube_event_poster_*) for
 * test_dra_hardening.py against fake_apiserver.py. Options set the poster's bounds; commands
 * come one per line on stdin, each answered by one JSON line on stdout:
 *   add REASON [NS POD UID]  -> {"cmd":"add","rc":0|1,"dropped":REASON?}  (about the node, or a
 * pod) flush MS                 -> {"cmd":"flush","drained":true|false} stats                    ->
 * {"cmd":"stats","posted":..,"retries":..,"dropped_full":..,...} The poster's failure reports come
 * as {"failure":REASON,"fate":"retrying"|"dropped","error":..}. End of stdin frees the poster (what
 * is queued is dropped) and exits 0. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

/* Prints j as one line; consumes j. */
static void emit(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

    pthread_mutex_lock(&out_lock);
    printf("%s\n", s ? s : "{}");
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
    free(s);
    json_decref(j);
}

static void on_failure(void *userdata, const char *reason, enum kube_event_fate fate,
                       const struct error *err)
{
    (void)userdata;
    emit(json_pack("{s:s, s:s, s:s}", "failure", reason, "fate",
                   fate == KUBE_EVENT_RETRYING ? "retrying" : "dropped", "error", err->msg));
}

static void cmd_add(struct kube_event_poster *p, char **a, int n)
{
    char message[128], dropped[64] = "";
    struct error err = {0};
    struct kube_event ev = {
        .about = {.kind = "Node", .name = "node-1"}, .type = "Warning", .message = message};
    int r;

    if (n < 1) {
        emit(json_pack("{s:s, s:i, s:s}", "cmd", "add", "rc", -EINVAL, "error", "add REASON"));
        return;
    }
    ev.reason = a[0];
    if (n >= 4)
        ev.about =
            (struct kube_object_ref){.kind = "Pod", .namespace = a[1], .name = a[2], .uid = a[3]};
    snprintf(message, sizeof(message), "event %s", a[0]);
    r = kube_event_poster_add(p, &ev, dropped, sizeof(dropped), &err);
    json_t *out = json_pack("{s:s, s:i}", "cmd", "add", "rc", r);
    if (r == 1)
        json_object_set_new(out, "dropped", json_string(dropped));
    if (r < 0)
        json_object_set_new(out, "error", json_string(err.msg));
    emit(out);
}

static void cmd_stats(struct kube_event_poster *p)
{
    struct kube_event_poster_stats st;

    kube_event_poster_stats(p, &st);
    emit(json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "cmd", "stats", "posted",
                   (json_int_t)st.posted, "retries", (json_int_t)st.retries, "dropped_full",
                   (json_int_t)st.dropped_full, "dropped_refused", (json_int_t)st.dropped_refused,
                   "dropped_tries", (json_int_t)st.dropped_tries, "queued", (json_int_t)st.queued,
                   "in_flight", st.in_flight));
}

static unsigned number(const char *s)
{
    unsigned v = 0;
    return s && parse_uint(s, &v) == 0 ? v : 0;
}

int main(int argc, char **argv)
{
    struct kube_options o = {.request_timeout_ms = 2000};
    struct kube_event_poster_options po = {.on_failure = on_failure};
    struct kube_event_poster *p = NULL;
    struct kube_client *c = NULL;
    struct error err = {0};
    char line[512];

    for (int i = 1; i + 1 < argc; i += 2) {
        if (str_eq(argv[i], "--server"))
            o.api_server = argv[i + 1];
        else if (str_eq(argv[i], "--node"))
            o.node_name = argv[i + 1];
        else if (str_eq(argv[i], "--queue"))
            po.max_queued = number(argv[i + 1]);
        else if (str_eq(argv[i], "--tries"))
            po.max_tries = number(argv[i + 1]);
        else if (str_eq(argv[i], "--retry-min-ms"))
            po.retry_min_ms = number(argv[i + 1]);
        else if (str_eq(argv[i], "--retry-max-ms"))
            po.retry_max_ms = number(argv[i + 1]);
        else {
            fprintf(stderr, "usage: kube_event_probe --server URL [--node N] [--queue N] "
                            "[--tries N] [--retry-min-ms MS] [--retry-max-ms MS] < commands\n");
            return 2;
        }
    }
    if (kube_client_new(&o, &c, &err) < 0 || kube_event_poster_new(c, &po, &p, &err) < 0) {
        fprintf(stderr, "kube_event_probe: %s\n", err.msg);
        kube_client_free(c);
        return 1;
    }
    while (fgets(line, sizeof(line), stdin)) {
        char *a[8], *t = line;
        int n = 0;
        while (n < 8) { /* words split on blanks, in place */
            t += strspn(t, " \t\n");
            if (!*t)
                break;
            a[n++] = t;
            t += strcspn(t, " \t\n");
            if (*t)
                *t++ = '\0';
        }
        if (n == 0)
            continue;
        if (str_eq(a[0], "add"))
            cmd_add(p, a + 1, n - 1);
        else if (str_eq(a[0], "flush"))
            emit(json_pack("{s:s, s:b}", "cmd", "flush", "drained",
                           kube_event_poster_flush(p, n > 1 ? number(a[1]) : 5000)));
        else if (str_eq(a[0], "stats"))
            cmd_stats(p);
        else
            emit(json_pack("{s:s, s:s}", "cmd", a[0], "error", "unknown command"));
    }
    kube_event_poster_free(p);
    kube_client_free(c);
    return 0;
}

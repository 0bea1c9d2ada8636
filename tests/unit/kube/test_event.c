/* SPDX-License-Identifier: Apache-2.0 */
/* test_event.c: src/kube/event.c's poster without an API server — an Event the API would
 * refuse is never queued, a refused connection is retried with backoff and reported to the
 * caller each time, and freeing stops the thread at once, in the middle of a backoff.
 * test_dra_hardening.py drives it against fake_apiserver.py failing POSTs. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"
#include "tests.h"

struct seen {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned retrying, dropped;
    char reason[64], msg[ERROR_MSG_MAX];
};

static void on_failure(void *userdata, const char *reason, enum kube_event_fate fate,
                       const struct error *err)
{
    struct seen *s = userdata;
    pthread_mutex_lock(&s->lock);
    if (fate == KUBE_EVENT_RETRYING)
        s->retrying++;
    else
        s->dropped++;
    str_copy(s->reason, reason, sizeof(s->reason));
    str_copy(s->msg, err->msg, sizeof(s->msg));
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static const struct kube_event lost = {
    .about = {.kind = "Pod", .namespace = "team", .name = "trainer-0", .uid = "pod-uid"},
    .type = "Warning",
    .reason = "PreparedDeviceLost",
    .message = "GPU GPU-1 of ResourceClaim team/c is unhealthy or gone",
};

static void test_kube_event_poster_refuses_bad_events(void **state)
{
    struct kube_options o = {.api_server = "http://127.0.0.1:1", .node_name = "n"};
    struct kube_event bad = lost;
    struct kube_event_poster_stats st;
    struct kube_event_poster *p = NULL;
    struct kube_client *c = NULL;
    struct error err = {0};
    (void)state;

    assert_int_equal(kube_client_new(&o, &c, NULL), 0);
    assert_int_equal(kube_event_poster_new(c, NULL, &p, &err), 0);
    bad.type = "Info";
    assert_int_equal(kube_event_poster_add(p, &bad, NULL, 0, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "must be Normal or Warning"));
    bad = lost;
    bad.about.name = NULL;
    assert_int_equal(kube_event_poster_add(p, &bad, NULL, 0, &err), -EINVAL);
    kube_event_poster_stats(p, &st);
    assert_int_equal(st.queued, 0);
    assert_false(st.in_flight);
    assert_true(kube_event_poster_flush(p, 0));
    kube_event_poster_free(p);
    kube_client_free(c);
}

static void test_kube_event_poster_retries_and_stops_at_once(void **state)
{
    struct kube_options o = {.api_server = "http://127.0.0.1:1", .node_name = "n"};
    struct seen s = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    struct kube_event_poster_options po = {
        .retry_min_ms = 10, .retry_max_ms = 40, .on_failure = on_failure, .userdata = &s};
    struct kube_event_poster_stats st;
    struct kube_event_poster *p = NULL;
    struct kube_client *c = NULL;
    struct error err = {0};
    uint64_t t0;
    (void)state;

    assert_int_equal(kube_client_new(&o, &c, NULL), 0);
    assert_int_equal(kube_event_poster_new(c, &po, &p, &err), 0);
    assert_int_equal(kube_event_poster_add(p, &lost, NULL, 0, &err), 0);
    pthread_mutex_lock(&s.lock);
    while (s.retrying < 3) { /* the condition, not a sleep: the reports come as tries fail */
        struct timespec ts;
        time_deadline(&ts, CLOCK_REALTIME, 10000);
        assert_int_equal(pthread_cond_timedwait(&s.cond, &s.lock, &ts), 0);
    }
    assert_string_equal(s.reason, "PreparedDeviceLost");
    assert_non_null(strstr(s.msg, "http://127.0.0.1:1/api/v1/namespaces/team/events"));
    assert_int_equal(s.dropped, 0);
    pthread_mutex_unlock(&s.lock);
    kube_event_poster_stats(p, &st);
    assert_true(st.retries >= 3);
    assert_int_equal(st.posted, 0);
    assert_int_equal(st.queued + st.in_flight, 1);
    assert_false(kube_event_poster_flush(p, 20));
    t0 = time_now_ms();
    kube_event_poster_free(p); /* queued, mid-backoff or mid-try: it stops at once */
    assert_true(time_now_ms() - t0 < 300);
    kube_client_free(c);
}

int run_event_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kube_event_poster_refuses_bad_events),
        cmocka_unit_test(test_kube_event_poster_retries_and_stops_at_once),
    };
    return cmocka_run_group_tests_name("kube event poster", tests, NULL, NULL);
}

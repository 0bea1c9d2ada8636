/* SPDX-License-Identifier: Apache-2.0 */
/* loop.c: the daemon's one event loop and its unit table. Each unit (the inputs, then every
 * feature) declares the fds it waits on as sources; the loop polls them all and calls their
 * handlers in table order. The dispatchers hand a new node state, health marks, the holders'
 * answer and metrics requests to every unit through its ops: the core never names a feature
 * and no feature names another. Also the timerfd helpers everything shares. */
#include <errno.h>
#include <poll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "daemon/internal.h"

/* ---- timers ----------------------------------------------------------------------------- */

int daemon__timer_new(void)
{
    return timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
}

/* Arms fd to fire once after ms (0 disarms); periodic when `repeat`. */
void daemon__timer_set(int fd, int64_t ms, bool repeat)
{
    struct itimerspec its = {0};

    its.it_value.tv_sec = (time_t)(ms / 1000);
    its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
    if (repeat)
        its.it_interval = its.it_value;
    (void)timerfd_settime(fd, 0, &its, NULL);
}

bool daemon__timer_armed(int fd)
{
    struct itimerspec its;

    return timerfd_gettime(fd, &its) == 0 &&
           (its.it_value.tv_sec != 0 || its.it_value.tv_nsec != 0);
}

void daemon__timer_drain(int fd)
{
    uint64_t ticks;

    (void)!read(fd, &ticks, sizeof(ticks));
}

void daemon__timer_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* ---- the loop --------------------------------------------------------------------------- */

int daemon__loop_run(struct daemon *d, struct error *err)
{
    while (!d->stopping) {
        struct pollfd pfd[DAEMON_SOURCES_MAX];
        const struct daemon_source *src[DAEMON_SOURCES_MAX];
        size_t n = 0;

        for (size_t u = 0; u < d->n_units; u++) {
            const struct daemon_feature *f = d->units[u];
            if (f->before_poll)
                f->before_poll(d);
            for (size_t i = 0; i < f->n_sources && n < DAEMON_SOURCES_MAX; i++, n++) {
                src[n] = &f->sources[i];
                pfd[n] = (struct pollfd){.fd = f->sources[i].fd(d), .events = POLLIN};
            }
        }
        if (poll(pfd, n, -1) < 0) {
            if (errno == EINTR)
                continue;
            return error_set_errno(err, errno, "poll");
        }
        /* in table order: signals first (they may end the loop), health before config work */
        for (size_t i = 0; i < n && !d->stopping; i++)
            if (pfd[i].revents & POLLIN)
                src[i]->ready(d);
    }
    return 0;
}

/* ---- dispatch --------------------------------------------------------------------------- */

int daemon__units_start(struct daemon *d, struct error *err)
{
    for (size_t u = 0; u < d->n_units; u++) {
        int r = d->units[u]->start ? d->units[u]->start(d, err) : 0;
        if (r < 0)
            return r;
    }
    return 0;
}

void daemon__units_stop(struct daemon *d)
{
    for (size_t u = d->n_units; u-- > 0;)
        if (d->units[u]->stop)
            d->units[u]->stop(d);
}

int daemon__units_prepare(struct daemon *d, const struct dp_snapshot *next,
                          const struct cfg_config *cfg, const struct daemon_change *c,
                          struct error *err)
{
    for (size_t u = 0; u < d->n_units; u++) {
        int r = d->units[u]->prepare ? d->units[u]->prepare(d, next, cfg, c, err) : 0;
        if (r < 0)
            return r;
    }
    return 0;
}

void daemon__units_mark(const struct daemon *d, struct model *m)
{
    for (size_t u = 0; u < d->n_units; u++)
        if (d->units[u]->mark)
            d->units[u]->mark(d, m);
}

void daemon__units_on_state(struct daemon *d, const struct daemon_change *c)
{
    for (size_t u = 0; u < d->n_units; u++)
        if (d->units[u]->on_state)
            d->units[u]->on_state(d, c);
}

void daemon__units_on_holders(struct daemon *d)
{
    for (size_t u = 0; u < d->n_units; u++)
        if (d->units[u]->on_holders)
            d->units[u]->on_holders(d);
}

int daemon__units_metrics(struct daemon *d, struct strbuf *sb)
{
    for (size_t u = 0; u < d->n_units; u++) {
        int r = d->units[u]->metrics ? d->units[u]->metrics(d, sb) : 0;
        if (r < 0)
            return r;
    }
    return 0;
}

bool daemon__units_ready(const struct daemon *d, char *why, size_t n)
{
    for (size_t u = 0; u < d->n_units; u++)
        if (d->units[u]->ready && !d->units[u]->ready(d, why, n))
            return false;
    return true;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* events.c: NVML event sets of the fake library. XID events come from lines appended to the
 * file named by FAKE_NVML_EVENTS ("xid <gpu index|GPU UUID|MIG UUID> <xid> [gi ci]"),
 * followed like `tail -f` from the size it had when the set was created; each line is
 * delivered at most once per set. Wait sleeps in poll(2) on inotify until a line comes or the
 * timeout passes, as the real call blocks in the driver: an idle wait costs no wake-ups. */
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define EVENT_LINE_MAX 512
#define SUPPORTED_EVENTS                                                                           \
    (nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError |                              \
     nvmlEventTypeDoubleBitEccError | nvmlEventTypePState | nvmlEventMigConfigChange)

struct nvmlEventSet_st {
    pthread_mutex_t lock;
    char *path;   /* FAKE_NVML_EVENTS, NULL: no events ever */
    char *dir;    /* its directory, watched */
    off_t offset; /* next unread byte */
    int inotify_fd;
    unsigned long long mask[FAKE_MAX_GPUS]; /* registered types per GPU index */
};

static void unlock_set(void *lock)
{
    pthread_mutex_unlock(lock);
}

/* Watches the events file's directory: an append, a create or a rename into it wakes Wait. */
static int watch_dir(struct nvmlEventSet_st *s)
{
    if (!s->dir)
        return -1;
    return inotify_add_watch(s->inotify_fd, s->dir,
                             IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE);
}

/* Reads what inotify queued. The directory's watch may have gone (the directory removed or
 * moved: IN_IGNORED): watch it again, or fall back to polling when it cannot be. */
static void drain_watch(struct nvmlEventSet_st *s)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool lost = false;
    ssize_t n;

    while (s->inotify_fd >= 0 && (n = read(s->inotify_fd, buf, sizeof(buf))) > 0)
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            lost |= (ev->mask & IN_IGNORED) != 0;
            p += sizeof(*ev) + ev->len;
        }
    if (lost && watch_dir(s) < 0) {
        close(s->inotify_fd);
        s->inotify_fd = -1;
    }
}

static off_t file_size(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 ? st.st_size : 0;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    struct nvmlEventSet_st *s;
    const char *path = getenv("FAKE_NVML_EVENTS");
    nvmlReturn_t rc = fake_enter(__func__, NULL, false, NULL, NULL);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!set)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    s = calloc(1, sizeof(*s));
    if (!s)
        return fake_leave(NVML_ERROR_MEMORY);
    pthread_mutex_init(&s->lock, NULL);
    s->inotify_fd = -1;
    if (path && *path) {
        struct strbuf dir = STRBUF_INIT;
        const char *slash = strrchr(path, '/');
        s->path = str_dup(path);
        s->offset = file_size(path);
        if (strbuf_append(&dir, slash ? path : ".",
                          slash ? (size_t)(slash - path) + (slash == path) : 1) == 0)
            s->dir = strbuf_take(&dir);
        strbuf_release(&dir);
        s->inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (s->inotify_fd >= 0 && watch_dir(s) < 0) {
            close(s->inotify_fd); /* no watch (e.g. no such directory yet): poll instead */
            s->inotify_fd = -1;
        }
    }
    *set = s;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (set->inotify_fd >= 0)
        close(set->inotify_fd);
    pthread_mutex_destroy(&set->lock);
    free(set->path);
    free(set->dir);
    free(set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!eventTypes)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *eventTypes = SUPPORTED_EVENTS;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!set)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci || (eventTypes & ~SUPPORTED_EVENTS))
        return fake_leave(NVML_ERROR_NOT_SUPPORTED); /* nothing registered, set stays usable */
    pthread_mutex_lock(&set->lock);
    set->mask[g->index] |= eventTypes;
    pthread_mutex_unlock(&set->lock);
    return fake_leave(NVML_SUCCESS);
}

/* Parses one event line and fills data when a registered GPU matches. */
static bool event_match(nvmlEventSet_t set, const char *line, nvmlEventData_t *data)
{
    char who[EVENT_LINE_MAX], xid_s[32], gi_s[32] = "", ci_s[32] = "", extra[2];
    unsigned idx, xid, gi_id = INVALID_GPU_INSTANCE_ID, ci_id = INVALID_GPU_INSTANCE_ID;
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    bool ok = false;
    int n;

    n = sscanf(line, "xid %511s %31s %31s %31s %1s", who, xid_s, gi_s, ci_s, extra);
    if ((n != 2 && n != 4) || parse_uint(xid_s, &xid) < 0)
        return false;
    if (n == 4 && (parse_uint(gi_s, &gi_id) < 0 || parse_uint(ci_s, &ci_id) < 0))
        return false;
    if (fake_enter("nvmlEventSetWait_v2", NULL, false, NULL, NULL) != NVML_SUCCESS)
        return false;
    if (parse_uint(who, &idx) == 0)
        g = idx < fake_current()->n_gpus ? &fake_current()->gpus[idx] : NULL;
    else
        g = fake_find_uuid(who, &ci);
    if (g && ci && n == 2) {
        gi_id = ci->gi->id;
        ci_id = ci->id;
    }
    if (g && (set->mask[g->index] & nvmlEventTypeXidCriticalError)) {
        data->device = (nvmlDevice_t)g;
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = xid;
        data->gpuInstanceId = gi_id;
        data->computeInstanceId = ci_id;
        ok = true;
    }
    fake_leave(NVML_ERROR_UNKNOWN); /* read-only: nothing to save */
    return ok;
}

bool fake_lines_next(const char *path, off_t *offset, bool (*fn)(void *ctx, const char *line),
                     void *ctx)
{
    char buf[4096];
    bool found = false;
    off_t size;
    int fd;

    if (!path || !*path)
        return false;
    size = file_size(path); /* called on every NVML call: nothing new costs one stat */
    if (size == *offset)
        return false;
    if (size < *offset)
        *offset = 0; /* truncated: start again, like tail -f */
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    while (!found) {
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, *offset);
        char *line = buf, *nl;
        if (n <= 0)
            break;
        buf[n] = '\0';
        nl = strchr(line, '\n');
        if (!nl) {
            if ((size_t)n == sizeof(buf) - 1)
                *offset += n; /* an over-long line: skip it */
            break;
        }
        for (; nl && !found; line = nl + 1, nl = strchr(line, '\n')) {
            *nl = '\0';
            *offset += nl - line + 1;
            found = fn(ctx, line);
        }
    }
    close(fd);
    return found;
}

struct event_want {
    nvmlEventSet_t set;
    nvmlEventData_t *data;
};

static bool event_line(void *ctx, const char *line)
{
    struct event_want *w = ctx;
    return strlen(line) < EVENT_LINE_MAX && event_match(w->set, line, w->data);
}

/* Consumes complete lines after set->offset until one is delivered. */
static bool event_next(nvmlEventSet_t set, nvmlEventData_t *data)
{
    struct event_want w = {set, data};
    return fake_lines_next(set->path, &set->offset, event_line, &w);
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    uint64_t deadline = time_now_ms() + timeoutms;
    nvmlReturn_t rc = fake_enter(__func__, NULL, false, NULL, NULL);

    if (rc != NVML_SUCCESS)
        return rc;
    fake_leave(NVML_SUCCESS);
    if (!set || !data)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&set->lock);
    /* the real call is a cancellation point (poll inside): release the set if cancelled */
    pthread_cleanup_push(unlock_set, &set->lock);
    for (;;) {
        uint64_t now, left, cap;
        struct pollfd pfd = {set->inotify_fd, POLLIN, 0};

        drain_watch(set);
        if (event_next(set, data)) {
            rc = NVML_SUCCESS;
            break;
        }
        now = time_now_ms();
        if (now >= deadline) {
            rc = NVML_ERROR_TIMEOUT;
            break;
        }
        /* Sleep as the real call does (it blocks in the driver): to the deadline, woken only
         * by a change in the events file's directory. No events file: nothing can ever
         * come. Without a watch (no such directory), look again every 5 ms. */
        left = deadline - now;
        cap = set->path && set->inotify_fd < 0 ? 5 : left;
        pfd.fd = set->inotify_fd;
        poll(set->inotify_fd >= 0 ? &pfd : NULL, set->inotify_fd >= 0 ? 1 : 0,
             (int)(left < cap        ? left
                   : cap > INT32_MAX ? INT32_MAX
                                     : cap));
    }
    pthread_cleanup_pop(1);
    return rc;
}

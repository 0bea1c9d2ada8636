/* SPDX-License-Identifier: Apache-2.0 */
/* mps.c: the MPS control-daemon supervisor (mps.h). Daemons are children started with -f
 * so a pidfd tells us the moment one dies; restarts and health probes are due on one
 * timerfd; both sit in one epoll fd the caller's loop waits on. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "mps/mps.h"

/* After SIGKILL, how long a child gets to be reaped before a blocking waitpid. */
#define MPS_KILL_REAP_MS 2000

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
/* The backoff starts again from BACKOFF_MIN_MS only once a daemon has stayed up this long: a
 * daemon that dies shortly after every start is restarted at growing intervals. */
#define STABLE_UP_MS 30000
/* A daemon restarted after a crash serves (its devices Healthy, .ready) only once it has
 * stayed up this long, so a crash loop keeps its devices Unhealthy instead of flipping them. */
#define PROBATION_MS 2000
#define PID_FILE "nvidia-cuda-mps-control.pid"
#define TAG_TIMER UINT64_MAX

enum daemon_state { D_DOWN = 0, D_UP };

struct daemon {
    struct mps_daemon_spec spec;
    bool in_use;
    enum daemon_state state;
    pid_t pid;
    int pidfd;
    bool was_exclusive[MPS_MAX_DEVICES];
    bool mode_set;
    unsigned backoff_ms;
    uint64_t restart_at_ms; /* 0: none */
    uint64_t up_since_ms;   /* when it last came up */
    bool on_probation;      /* restarted after a crash, not yet up for PROBATION_MS */
};

struct mps_supervisor {
    struct mps_options o;
    char *root, *binary;
    int epfd, tfd;
    struct daemon d[MPS_MAX_DAEMONS];
    uint64_t next_probe_ms;
    unsigned restarts;
};

static void report(const struct mps_supervisor *s, enum log_level level, const char *fmt, ...)
    GS_PRINTF(3, 4);

/* Up and past its probation: its devices may be Healthy. */
static bool serving(const struct daemon *d)
{
    return d->state == D_UP && !d->on_probation;
}
static void report(const struct mps_supervisor *s, enum log_level level, const char *fmt, ...)
{
    char msg[ERROR_MSG_MAX];
    va_list ap;

    if (!s->o.report)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    s->o.report(s->o.report_ctx, level, msg);
}

int mps_path(const char *root, const char *resource, const char *leaf, struct strbuf *out)
{
    strbuf_reset(out);
    return leaf ? strbuf_printf(out, "%s/%s/%s", root, resource, leaf)
                : strbuf_printf(out, "%s/%s", root, resource);
}

static int pidfd_of(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Waits for pid to exit within ms (pidfd poll); true when it did (and was reaped), with its
 * wait status in *ret_status when not NULL. */
static bool wait_exit_status(pid_t pid, int pidfd, int ms, int *ret_status)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    int st = 0;
    if (pidfd >= 0 && poll(&p, 1, ms) <= 0)
        return false;
    if (waitpid(pid, &st, pidfd >= 0 ? 0 : WNOHANG) != pid)
        return false;
    if (ret_status)
        *ret_status = st;
    return true;
}

static bool wait_exit(pid_t pid, int pidfd, int ms)
{
    return wait_exit_status(pid, pidfd, ms, NULL);
}

static void kill_wait(pid_t pid, int pidfd)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    if (!wait_exit(pid, pidfd, MPS_KILL_REAP_MS))
        (void)waitpid(pid, NULL, 0);
}

int mps_control_command(const struct mps_options *o, const char *resource, const char *commands,
                        char **ret_out, struct error *err)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, pidfd = -1, r = 0;
    struct strbuf got = STRBUF_INIT, pipe_dir = STRBUF_INIT, env_pipe = STRBUF_INIT;
    char **env = NULL;
    uint64_t deadline = time_now_ms() + o->timeout_ms;
    int status = 0;
    pid_t pid;

    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
        r = error_set_errno(err, errno, "pipe");
        goto out;
    }
    (void)mps_path(o->root, resource, "pipe", &pipe_dir);
    if (strbuf_printf(&env_pipe, "CUDA_MPS_PIPE_DIRECTORY=%s", strbuf_str(&pipe_dir)) < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    const char *set[] = {strbuf_str(&env_pipe)};
    env = proc_env_with(set, 1);
    char *const argv[] = {(char *)o->binary, NULL};
    r = env ? proc_spawn(o->binary, argv, env, in[0], out[1], &pid) : -ENOMEM;
    if (r == -ENOENT || r == -EACCES) {
        r = error_set(err, -ENOENT, "%s: cannot run %s (not found or not executable)", resource,
                      o->binary);
        goto out;
    }
    if (r < 0) {
        r = error_set_errno(err, -r, "%s: starting %s", resource, o->binary);
        goto out;
    }
    pidfd = pidfd_of(pid);
    close(in[0]);
    close(out[1]);
    in[0] = out[1] = -1;
    (void)!write(in[1], commands, strlen(commands));
    close(in[1]);
    in[1] = -1;
    /* read until EOF or the deadline */
    for (;;) {
        uint64_t now = time_now_ms();
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        char buf[512];
        if (now >= deadline) {
            r = -ETIMEDOUT;
            break;
        }
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            continue;
        ssize_t n = read(out[0], buf, sizeof(buf));
        if (n <= 0)
            break;
        (void)strbuf_append(&got, buf, (size_t)n);
    }
    if (r == -ETIMEDOUT ||
        !wait_exit_status(
            pid, pidfd, (int)(deadline > time_now_ms() ? deadline - time_now_ms() : 0), &status)) {
        kill_wait(pid, pidfd);
        r = error_set(err, -ETIMEDOUT,
                      "%s: the MPS control daemon did not answer within %u ms (wedged)", resource,
                      o->timeout_ms);
        goto out;
    }
    /* refused: a known error word in its answer, or an exit other than 0 (a client that
     * could not reach its daemon exits 1) */
    if (strstr(strbuf_str(&got), "Invalid") || strstr(strbuf_str(&got), "Unrecognized") ||
        strstr(strbuf_str(&got), "Cannot find") || strstr(strbuf_str(&got), "rror") ||
        !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char first[256];
        str_copy(first, strbuf_str(&got), sizeof(first));
        first[strcspn(first, "\n")] = '\0';
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            r = error_set(err, -ENOENT, "%s: cannot run %s (not found or not executable)", resource,
                          o->binary);
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            r = error_set(err, -EIO, "%s: nvidia-cuda-mps-control %s %d%s%s", resource,
                          WIFEXITED(status) ? "exited with status" : "killed by signal",
                          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                          first[0] ? ": " : "", first);
        else
            r = error_set(err, -EIO, "%s: nvidia-cuda-mps-control refused: %s", resource, first);
    }
    if (r == 0 && ret_out)
        *ret_out = strbuf_take(&got);
out:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
    }
    if (pidfd >= 0)
        close(pidfd);
    strbuf_release(&got);
    strbuf_release(&pipe_dir);
    strbuf_release(&env_pipe);
    free(env);
    return r;
}

static void arm(struct mps_supervisor *s)
{
    uint64_t next = s->next_probe_ms;
    struct itimerspec its = {0};
    for (size_t i = 0; i < MPS_MAX_DAEMONS; i++) {
        const struct daemon *d = &s->d[i];
        uint64_t due = d->restart_at_ms;
        if (d->in_use && d->state == D_UP && d->on_probation)
            due = d->up_since_ms + PROBATION_MS;
        if (d->in_use && due && (!next || due < next))
            next = due;
    }
    if (next) {
        uint64_t now = time_now_ms(), ms = next > now ? next - now : 1;
        its.it_value.tv_sec = (time_t)(ms / 1000);
        its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
    }
    (void)timerfd_settime(s->tfd, 0, &its, NULL);
}

static void write_ready(struct mps_supervisor *s)
{
    struct strbuf p = STRBUF_INIT;
    bool all = true, any = false;
    for (size_t i = 0; i < MPS_MAX_DAEMONS; i++) {
        if (!s->d[i].in_use)
            continue;
        any = true;
        all &= serving(&s->d[i]);
    }
    (void)strbuf_printf(&p, "%s/.ready", s->root);
    if (any && all)
        (void)file_write_atomic(strbuf_str(&p), "", 0, 0644, NULL);
    else
        (void)unlink(strbuf_str(&p));
    strbuf_release(&p);
}

/* Opens <root>/<resource>/<leaf> as a directory without following a symbolic link below the
 * root (the root itself is the operator's and may be one): a link there means something
 * replaced our folder, and following it would remove files in, and serve from, another
 * folder. Returns the fd or a negative errno with err filled. */
static int open_dir_nofollow(const struct mps_supervisor *s, const char *resource, const char *leaf,
                             struct error *err)
{
    struct strbuf rel = STRBUF_INIT;
    char *comp, *end;
    int fd, r;

    fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return error_set_errno(err, errno, "cannot open the MPS root %s", s->root);
    r = strbuf_printf(&rel, "%s/%s", resource, leaf);
    for (comp = r == 0 ? rel.buf : NULL; comp && *comp; comp = end ? end + 1 : NULL) {
        end = strchr(comp, '/');
        if (end)
            *end = '\0';
        if (!*comp)
            continue;
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            r = error_set(err, -errno,
                          "refusing %s/%s/%s: %s is %s (remove it; gpuslice creates this "
                          "folder itself)",
                          s->root, resource, leaf, comp,
                          errno == ELOOP || errno == ENOTDIR ? "a symbolic link or not a folder"
                                                             : strerror(errno));
            break;
        }
        close(fd);
        fd = next;
    }
    strbuf_release(&rel);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

/* A control daemon an earlier gpuslice left running (killed with SIGKILL, so it never
 * stopped its children) still serves in our pipe folder and holds the GPUs: find it by the
 * pid file it writes there, check that the pid still is such a daemon, and stop it. Returns
 * true when one was found. */
static bool stop_orphan(struct mps_supervisor *s, const struct daemon *d, int pipe_fd)
{
    char buf[32] = {0}, comm[64] = {0}, path[64];
    const char *base = strrchr(s->binary, '/');
    int64_t pid = 0;
    ssize_t n;
    int fd, pidfd;

    fd = openat(pipe_fd, PID_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[strcspn(buf, "\n")] = '\0';
    if (parse_int64(buf, &pid) < 0 || pid <= 1 || pid > INT32_MAX || pid == (int64_t)getpid())
        return false;
    /* the pid may have been reused: its command name must be the binary's (15 chars) */
    snprintf(path, sizeof(path), "/proc/%lld/comm", (long long)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    n = read(fd, comm, sizeof(comm) - 1);
    close(fd);
    base = base ? base + 1 : s->binary;
    if (n <= 0 || strncmp(comm, base, strcspn(comm, "\n")) != 0)
        return false;
    report(s, LOG_LEVEL_WARN,
           "control daemon for %s left running by an earlier gpuslice (pid %lld); stopping it",
           d->spec.resource, (long long)pid);
    pidfd = pidfd_of((pid_t)pid);
    (void)kill((pid_t)pid, SIGTERM);
    if (pidfd >= 0) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        if (poll(&p, 1, (int)s->o.timeout_ms) <= 0)
            (void)kill((pid_t)pid, SIGKILL);
        close(pidfd);
    }
    return true;
}

/* Makes <root>/<resource>/{pipe,log} (refusing links below the root), stops a daemon left
 * there by an earlier run and removes its stale control pipe. */
static int prepare_dirs(struct mps_supervisor *s, struct daemon *d, bool *ret_orphan,
                        struct error *err)
{
    static const char *const leaves[] = {"pipe", "log"};
    struct strbuf path = STRBUF_INIT;
    int r = 0, pipe_fd = -1;

    for (size_t k = 0; r == 0 && k < 2; k++) {
        r = mps_path(s->root, d->spec.resource, leaves[k], &path);
        if (r == 0)
            r = path_mkdir_p(strbuf_str(&path), 0755, err);
        if (r == 0) {
            int fd = open_dir_nofollow(s, d->spec.resource, leaves[k], err);
            r = fd < 0 ? fd : 0;
            if (k == 0)
                pipe_fd = fd;
            else if (fd >= 0)
                close(fd);
        }
    }
    if (r < 0)
        goto out;
    *ret_orphan = stop_orphan(s, d, pipe_fd);
    /* a daemon that died leaves its control pipe: not a sign the new one listens */
    if (unlinkat(pipe_fd, "control", 0) < 0 && errno != ENOENT)
        r = error_set_errno(err, errno, "cannot remove the stale %s/%s/pipe/control", s->root,
                            d->spec.resource);
out:
    if (pipe_fd >= 0)
        close(pipe_fd);
    strbuf_release(&path);
    return r;
}

/* Starts `nvidia-cuda-mps-control -f` for sp, with its pipe and log folders and GPUs in the
 * environment (each UUID once) and stdin from /dev/null. */
static int spawn_daemon(const struct mps_supervisor *s, const struct mps_daemon_spec *sp,
                        pid_t *ret_pid, struct error *err)
{
    struct strbuf pipe_dir = STRBUF_INIT, log_dir = STRBUF_INIT, visible = STRBUF_INIT,
                  b = STRBUF_INIT;
    char **env = NULL;
    int r = 0;

    (void)mps_path(s->root, sp->resource, "pipe", &b);
    if (strbuf_printf(&pipe_dir, "CUDA_MPS_PIPE_DIRECTORY=%s", strbuf_str(&b)) < 0)
        r = -ENOMEM;
    (void)mps_path(s->root, sp->resource, "log", &b);
    if (r == 0 && strbuf_printf(&log_dir, "CUDA_MPS_LOG_DIRECTORY=%s", strbuf_str(&b)) < 0)
        r = -ENOMEM;
    if (r == 0 && strbuf_printf(&visible, "CUDA_VISIBLE_DEVICES=") < 0)
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < sp->n; i++)
        if (strbuf_printf(&visible, "%s%s", i ? "," : "", sp->uuids[i]) < 0)
            r = -ENOMEM;
    if (r == 0) {
        const char *set[] = {strbuf_str(&pipe_dir), strbuf_str(&log_dir), strbuf_str(&visible)};
        char *const argv[] = {(char *)s->binary, "-f", NULL};
        env = proc_env_with(set, 3);
        r = env ? proc_spawn(s->binary, argv, env, -1, -1, ret_pid) : -ENOMEM;
    }
    if (r < 0)
        r = error_set_errno(err, -r, "%s: starting %s -f", sp->resource, s->binary);
    strbuf_release(&pipe_dir);
    strbuf_release(&log_dir);
    strbuf_release(&visible);
    strbuf_release(&b);
    free(env);
    return r;
}

/* Starts the daemon of slot d: dirs, compute mode, process, limits, .started. */
static int start_one(struct mps_supervisor *s, struct daemon *d, struct error *err)
{
    const struct mps_daemon_spec *sp = &d->spec;
    struct strbuf path = STRBUF_INIT, cmds = STRBUF_INIT;
    bool orphan = false;
    int r;

    r = prepare_dirs(s, d, &orphan, err);
    for (size_t i = 0; r == 0 && s->o.nvml && !d->mode_set && i < sp->n; i++) {
        r = gpu_compute_mode_set(s->o.nvml, sp->uuids[i], true, &d->was_exclusive[i], err);
        /* EXCLUSIVE_PROCESS was the orphan's doing, not the GPU's own mode */
        if (orphan)
            d->was_exclusive[i] = false;
    }
    if (r == 0)
        d->mode_set = s->o.nvml != NULL;
    if (r < 0)
        goto out;
    pid_t pid;
    r = spawn_daemon(s, sp, &pid, err);
    if (r < 0)
        goto out;
    d->pid = pid;
    d->pidfd = pidfd_of(pid);
    if (d->pidfd < 0) {
        kill_wait(pid, -1);
        r = error_set_errno(err, errno, "pidfd_open");
        goto out;
    }
    /* the daemon is ready when its control endpoint exists (pipe/control) */
    r = mps_path(s->root, sp->resource, "pipe/control", &path);
    for (uint64_t until = time_now_ms() + s->o.timeout_ms; r == 0;) {
        struct pollfd p = {.fd = d->pidfd, .events = POLLIN};
        if (path_exists(strbuf_str(&path)))
            break;
        if (poll(&p, 1, 5) > 0) {
            (void)waitpid(pid, NULL, 0);
            close(d->pidfd);
            d->pidfd = -1;
            d->pid = 0;
            r = error_set(err, -ECHILD,
                          "%s: %s exited at start (is it installed? see its log "
                          "in %s/%s/log)",
                          sp->resource, s->binary, s->root, sp->resource);
            break;
        }
        if (time_now_ms() >= until) {
            r = error_set(err, -ETIMEDOUT, "%s: %s did not open its control pipe within %u ms",
                          sp->resource, s->binary, s->o.timeout_ms);
            break;
        }
    }
    /* limits per device index (UUIDs were not honoured: NVIDIA PR #572), then threads */
    for (size_t i = 0; r == 0 && i < sp->n; i++)
        r = strbuf_printf(&cmds, "set_default_device_pinned_mem_limit %zu %lluM\n", i,
                          (unsigned long long)sp->mem_limit_mib[i]);
    if (r == 0 && sp->thread_pct)
        r = strbuf_printf(&cmds, "set_default_active_thread_percentage %u\n", sp->thread_pct);
    if (r == 0)
        r = mps_control_command(&s->o, sp->resource, strbuf_str(&cmds), NULL, err);
    if (r == 0)
        r = mps_path(s->root, sp->resource, ".started", &path);
    if (r == 0)
        r = file_write_atomic(strbuf_str(&path), "", 0, 0644, err);
    if (r < 0 && d->pid > 0) {
        kill_wait(d->pid, d->pidfd);
        close(d->pidfd);
        d->pidfd = -1;
        d->pid = 0;
    }
    if (r == 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)(d - s->d)};
        (void)epoll_ctl(s->epfd, EPOLL_CTL_ADD, d->pidfd, &ev);
        d->state = D_UP;
        d->restart_at_ms = 0;
        d->up_since_ms = time_now_ms();
        d->on_probation = d->backoff_ms > 0; /* restarted after a failure */
        report(s, LOG_LEVEL_INFO, "control daemon for %s up (pid %d, %zu GPU%s, %u%% threads%s)",
               sp->resource, (int)d->pid, sp->n, sp->n == 1 ? "" : "s", sp->thread_pct,
               d->on_probation ? "; its devices stay Unhealthy until it has been up 2 s" : "");
    }
out:
    strbuf_release(&path);
    strbuf_release(&cmds);
    return r;
}

static void schedule_restart(struct mps_supervisor *s, struct daemon *d)
{
    if (d->up_since_ms && time_now_ms() - d->up_since_ms >= STABLE_UP_MS)
        d->backoff_ms = 0; /* it had been up a good while: a fresh failure */
    d->backoff_ms = backoff_next_ms(d->backoff_ms, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
    d->restart_at_ms = time_now_ms() + d->backoff_ms;
    arm(s);
}

static void went_down(struct mps_supervisor *s, struct daemon *d, const char *why)
{
    struct strbuf p = STRBUF_INIT;
    if (d->pidfd >= 0) {
        (void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, d->pidfd, NULL);
        kill_wait(d->pid, d->pidfd);
        close(d->pidfd);
    }
    d->pidfd = -1;
    d->pid = 0;
    d->state = D_DOWN;
    d->on_probation = false;
    (void)mps_path(s->root, d->spec.resource, ".started", &p);
    (void)unlink(strbuf_str(&p));
    strbuf_release(&p);
    write_ready(s);
    report(s, LOG_LEVEL_WARN,
           "control daemon for %s %s; its devices are Unhealthy until it is back", d->spec.resource,
           why);
    schedule_restart(s, d);
}

/* Stops slot d: quit, compute mode back, files removed. */
static void stop_one(struct mps_supervisor *s, struct daemon *d)
{
    struct strbuf p = STRBUF_INIT;
    if (d->state == D_UP && d->pid > 0) {
        (void)mps_control_command(&s->o, d->spec.resource, "quit\n", NULL, NULL);
        if (!wait_exit(d->pid, d->pidfd, (int)s->o.timeout_ms))
            kill_wait(d->pid, d->pidfd);
    } else if (d->pid > 0) {
        kill_wait(d->pid, d->pidfd);
    }
    if (d->pidfd >= 0) {
        (void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, d->pidfd, NULL);
        close(d->pidfd);
    }
    for (size_t i = 0; d->mode_set && i < d->spec.n; i++) {
        struct error err = {0};
        if (!d->was_exclusive[i] &&
            gpu_compute_mode_set(s->o.nvml, d->spec.uuids[i], false, NULL, &err) < 0)
            report(s, LOG_LEVEL_WARN, "restoring the compute mode of %s: %s", d->spec.uuids[i],
                   err.msg);
    }
    /* .started, then the pipe and log folders with whatever the daemon left there (the real
     * one leaves control_lock, its pid file, control.log and server.log): we created both,
     * as NVIDIA's daemon does before removing its log folder. */
    (void)mps_path(s->root, d->spec.resource, ".started", &p);
    (void)unlink(strbuf_str(&p));
    const char *dirs[] = {"pipe", "log", NULL};
    for (size_t k = 0; k < 3; k++) {
        (void)mps_path(s->root, d->spec.resource, dirs[k], &p);
        if (dirs[k])
            path_rm_tree(strbuf_str(&p));
        else
            (void)rmdir(strbuf_str(&p)); /* the resource folder, only when empty */
    }
    /* "nvidia.com/gpu": the vendor folder too, when it is empty */
    char *slash = strrchr(p.buf, '/');
    if (slash && slash > p.buf + strlen(s->root)) {
        *slash = '\0';
        (void)rmdir(p.buf);
    }
    strbuf_release(&p);
    memset(d, 0, sizeof(*d));
    d->pidfd = -1;
}

int mps_supervisor_new(const struct mps_options *o, struct mps_supervisor **ret, struct error *err)
{
    struct mps_supervisor *s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    s->o = *o;
    s->root = str_dup(o->root);
    s->binary = str_dup(o->binary && *o->binary ? o->binary : MPS_DEFAULT_BINARY);
    s->o.root = s->root;
    s->o.binary = s->binary;
    if (!s->o.timeout_ms)
        s->o.timeout_ms = MPS_DEFAULT_TIMEOUT_MS;
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    for (size_t i = 0; i < MPS_MAX_DAEMONS; i++)
        s->d[i].pidfd = -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_TIMER};
    if (!s->root || !s->binary || s->epfd < 0 || s->tfd < 0 ||
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->tfd, &ev) < 0) {
        int e = errno ? errno : ENOMEM;
        mps_supervisor_free(s);
        return error_set_errno(err, e, "MPS supervisor");
    }
    if (s->o.probe_interval_ms)
        s->next_probe_ms = time_now_ms() + s->o.probe_interval_ms;
    *ret = s;
    return 0;
}

static bool spec_equal(const struct mps_daemon_spec *a, const struct mps_daemon_spec *b)
{
    if (strcmp(a->resource, b->resource) != 0 || a->n != b->n || a->thread_pct != b->thread_pct)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->uuids[i], b->uuids[i]) != 0 || a->mem_limit_mib[i] != b->mem_limit_mib[i])
            return false;
    return true;
}

int mps_supervisor_set(struct mps_supervisor *s, const struct mps_daemon_spec *specs, size_t n,
                       struct error *err)
{
    int first_err = 0;

    /* stop what is gone or changed */
    for (size_t i = 0; i < MPS_MAX_DAEMONS; i++) {
        struct daemon *d = &s->d[i];
        bool keep = false;
        for (size_t k = 0; d->in_use && k < n; k++)
            keep |= spec_equal(&d->spec, &specs[k]);
        if (d->in_use && !keep) {
            report(s, LOG_LEVEL_INFO, "stopping the control daemon for %s", d->spec.resource);
            stop_one(s, d);
        }
    }
    /* start what is new */
    for (size_t k = 0; k < n; k++) {
        struct daemon *d = NULL;
        bool running = false;
        for (size_t i = 0; i < MPS_MAX_DAEMONS; i++)
            running |= s->d[i].in_use && spec_equal(&s->d[i].spec, &specs[k]);
        if (running)
            continue;
        for (size_t i = 0; !d && i < MPS_MAX_DAEMONS; i++)
            if (!s->d[i].in_use)
                d = &s->d[i];
        if (!d) {
            first_err = first_err
                            ? first_err
                            : error_set(err, -E2BIG, "more than %d MPS resources", MPS_MAX_DAEMONS);
            break;
        }
        d->in_use = true;
        d->spec = specs[k];
        d->pidfd = -1;
        struct error e = {0};
        if (start_one(s, d, &e) < 0) {
            report(s, LOG_LEVEL_ERROR, "%s; retrying", e.msg);
            if (!first_err) {
                first_err = e.code ? e.code : -EIO;
                if (err)
                    *err = e;
            }
            schedule_restart(s, d);
        }
    }
    write_ready(s);
    arm(s);
    return first_err;
}

int mps_supervisor_set_limits(struct mps_supervisor *s, const struct mps_daemon_spec *spec,
                              struct error *err)
{
    struct strbuf cmds = STRBUF_INIT;
    struct daemon *d = NULL;
    int r = 0;

    for (size_t i = 0; !d && i < MPS_MAX_DAEMONS; i++)
        if (s->d[i].in_use && strcmp(s->d[i].spec.resource, spec->resource) == 0)
            d = &s->d[i];
    if (!d)
        return error_set(err, -ENOENT, "%s: no such MPS control daemon", spec->resource);
    if (!serving(d))
        return error_set(err, -EAGAIN, "%s: the MPS control daemon does not serve now",
                         spec->resource);
    if (d->spec.n != spec->n)
        return error_set(err, -EINVAL, "%s: the limits name other GPUs than the daemon's",
                         spec->resource);
    for (size_t i = 0; i < spec->n; i++)
        if (strcmp(d->spec.uuids[i], spec->uuids[i]) != 0)
            return error_set(err, -EINVAL, "%s: the limits name other GPUs than the daemon's",
                             spec->resource);
    for (size_t i = 0; r == 0 && i < spec->n; i++)
        r = strbuf_printf(&cmds, "set_default_device_pinned_mem_limit %zu %lluM\n", i,
                          (unsigned long long)spec->mem_limit_mib[i]);
    if (r == 0 && (spec->thread_pct || d->spec.thread_pct))
        r = strbuf_printf(&cmds, "set_default_active_thread_percentage %u\n",
                          spec->thread_pct ? spec->thread_pct : 100);
    if (r < 0)
        r = error_set(err, -ENOMEM, "out of memory");
    if (r == 0)
        r = mps_control_command(&s->o, spec->resource, strbuf_str(&cmds), NULL, err);
    if (r == 0) {
        memcpy(d->spec.mem_limit_mib, spec->mem_limit_mib, sizeof(d->spec.mem_limit_mib));
        d->spec.thread_pct = spec->thread_pct;
    }
    strbuf_release(&cmds);
    return r;
}

int mps_supervisor_fd(const struct mps_supervisor *s)
{
    return s ? s->epfd : -1;
}

bool mps_supervisor_up(const struct mps_supervisor *s, const char *resource)
{
    for (size_t i = 0; s && i < MPS_MAX_DAEMONS; i++)
        if (s->d[i].in_use && strcmp(s->d[i].spec.resource, resource) == 0)
            return serving(&s->d[i]);
    return true; /* not ours to supervise */
}

unsigned mps_supervisor_restarts(const struct mps_supervisor *s)
{
    return s ? s->restarts : 0;
}

void mps_supervisor_dispatch(struct mps_supervisor *s, bool *ret_changed)
{
    struct epoll_event evs[8];
    int n = epoll_wait(s->epfd, evs, 8, 0);
    uint64_t now = time_now_ms();

    *ret_changed = false;
    for (int i = 0; i < n; i++) {
        if (evs[i].data.u64 == TAG_TIMER) {
            uint64_t ticks;
            (void)!read(s->tfd, &ticks, sizeof(ticks));
            continue;
        }
        struct daemon *d = &s->d[evs[i].data.u64];
        if (d->in_use && d->state == D_UP) {
            went_down(s, d, "exited");
            *ret_changed = true;
        }
    }
    /* restarts due */
    for (size_t i = 0; i < MPS_MAX_DAEMONS; i++) {
        struct daemon *d = &s->d[i];
        struct error err = {0};
        if (!d->in_use || d->state == D_UP || !d->restart_at_ms || d->restart_at_ms > now)
            continue;
        d->restart_at_ms = 0;
        if (start_one(s, d, &err) == 0) {
            s->restarts++;
            *ret_changed = true;
        } else {
            report(s, LOG_LEVEL_ERROR, "restarting: %s", err.msg);
            schedule_restart(s, d);
        }
    }
    /* restarted daemons that stayed up long enough serve again */
    for (size_t i = 0; i < MPS_MAX_DAEMONS; i++) {
        struct daemon *d = &s->d[i];
        if (d->in_use && d->state == D_UP && d->on_probation &&
            now >= d->up_since_ms + PROBATION_MS) {
            d->on_probation = false;
            report(s, LOG_LEVEL_INFO, "control daemon for %s stayed up %d ms after its restart",
                   d->spec.resource, PROBATION_MS);
            *ret_changed = true;
        }
    }
    /* health probes: a daemon that does not answer is wedged, hence dead */
    if (s->next_probe_ms && now >= s->next_probe_ms) {
        s->next_probe_ms = now + s->o.probe_interval_ms;
        for (size_t i = 0; i < MPS_MAX_DAEMONS; i++) {
            struct daemon *d = &s->d[i];
            struct error err = {0};
            if (!d->in_use || d->state != D_UP)
                continue;
            if (mps_control_command(&s->o, d->spec.resource,
                                    "get_default_active_thread_percentage\n", NULL, &err) < 0) {
                report(s, LOG_LEVEL_WARN, "%s", err.msg);
                went_down(s, d, "is wedged (killed)");
                *ret_changed = true;
            }
        }
    }
    write_ready(s);
    arm(s);
}

void mps_supervisor_free(struct mps_supervisor *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < MPS_MAX_DAEMONS; i++)
        if (s->d[i].in_use)
            stop_one(s, &s->d[i]);
    if (s->root) {
        struct strbuf p = STRBUF_INIT;
        (void)strbuf_printf(&p, "%s/.ready", s->root);
        (void)unlink(strbuf_str(&p));
        strbuf_release(&p);
    }
    if (s->epfd >= 0)
        close(s->epfd);
    if (s->tfd >= 0)
        close(s->tfd);
    free(s->root);
    free(s->binary);
    free(s);
}

int mps_mount_shm(const char *root, struct error *err)
{
    struct strbuf dir = STRBUF_INIT, opts = STRBUF_INIT;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    unsigned long long half_k = pages > 0 && psize > 0
                                    ? (unsigned long long)pages * (unsigned long long)psize / 2048
                                    : 65536;
    int r;

    (void)strbuf_printf(&dir, "%s/shm", root);
    (void)umount2(strbuf_str(&dir), MNT_DETACH); /* a previous mount: start clean */
    r = path_mkdir_p(strbuf_str(&dir), 0755, err);
    if (r == 0)
        r = strbuf_printf(&opts, "size=%lluk", half_k);
    if (r == 0 && mount("shm", strbuf_str(&dir), "tmpfs",
                        MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME, strbuf_str(&opts)) < 0)
        r = error_set(err, -errno,
                      "mounting tmpfs on %s: %s (needs privileges and bidirectional mount "
                      "propagation on the MPS root)",
                      strbuf_str(&dir), strerror(errno));
    strbuf_release(&dir);
    strbuf_release(&opts);
    return r;
}

const char *mps_local_root(const char *mps_root)
{
    return path_is_dir("/mps") ? "/mps" : mps_root;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* fake_mps.c: a stand-in nvidia-cuda-mps-control for machines without a GPU. Like the real
 * one: `-d` starts the control daemon in the background, `-f` in the foreground; without
 * options it is the client, reading commands on stdin, sending them to the daemon found
 * through CUDA_MPS_PIPE_DIRECTORY and printing the answers (exit 1 when no daemon runs).
 * The daemon keeps the limits it is given, refuses what the real one refuses, logs every
 * command to CUDA_MPS_LOG_DIRECTORY/control.log and writes what it holds to
 * <log dir>/fake-mps.state for tests. Test hooks: the command `fake_hang` makes it stop
 * answering, `fake_crash` makes it abort; FAKE_MPS_CRASH_AFTER_MS=<n> makes every daemon die
 * (SIGALRM) n ms after it starts, a crash loop (only while the file FAKE_MPS_CRASH_FILE
 * exists, when that is set); while the file FAKE_MPS_REFUSE_LIMITS_FILE exists, every
 * set_default_device_pinned_mem_limit is refused as the real one refuses a bad limit (a limit
 * that cannot be applied). docs/fake-nvml.md (fake MPS). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_DEVICES 64
#define LINE_MAX_LEN 512

struct state {
    char pipe_dir[256], log_dir[256];
    unsigned n_devices;
    int thread_pct; /* -1 unset */
    char mem_limit[MAX_DEVICES][32];
    unsigned commands;
    bool hung;
};

static const char *dir_env(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

static void control_path(const char *pipe_dir, char *buf, size_t size)
{
    snprintf(buf, size, "%s/control", pipe_dir);
}

static void log_line(const struct state *s, const char *fmt, const char *arg)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/control.log", s->log_dir);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, fmt, arg);
    fputc('\n', f);
    fclose(f);
}

static void save(const struct state *s)
{
    char path[512], tmp[520];
    snprintf(path, sizeof(path), "%s/fake-mps.state", s->log_dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "pid=%d\ncommands=%u\ndevices=%u\nvisible=%s\n", (int)getpid(), s->commands,
            s->n_devices, dir_env("CUDA_VISIBLE_DEVICES", ""));
    if (s->thread_pct >= 0)
        fprintf(f, "active_thread_percentage=%d\n", s->thread_pct);
    for (unsigned i = 0; i < s->n_devices && i < MAX_DEVICES; i++)
        if (s->mem_limit[i][0])
            fprintf(f, "pinned_mem_limit.%u=%s\n", i, s->mem_limit[i]);
    fclose(f);
    rename(tmp, path);
}

/* A limit as the real daemon takes it: digits and a unit (M or G). */
static bool valid_limit(const char *v)
{
    size_t n = strlen(v);
    if (n < 2 || (v[n - 1] != 'M' && v[n - 1] != 'G'))
        return false;
    for (size_t i = 0; i + 1 < n; i++)
        if (v[i] < '0' || v[i] > '9')
            return false;
    return true;
}

static bool parse_dev(const struct state *s, const char *v, unsigned *ret)
{
    char *end;
    unsigned long d = strtoul(v, &end, 10);
    if (end == v || *end || d >= s->n_devices)
        return false;
    *ret = (unsigned)d;
    return true;
}

/* The test hook: limits refused while FAKE_MPS_REFUSE_LIMITS_FILE exists. */
static bool refusing_limits(void)
{
    const char *f = getenv("FAKE_MPS_REFUSE_LIMITS_FILE");
    struct stat st;
    return f && *f && stat(f, &st) == 0;
}

/* One command; the answer goes to out (may be empty). false: quit. */
static bool handle(struct state *s, char *line, char *out, size_t size)
{
    char *rest = NULL;
    char *cmd = strtok_r(line, " \t\r\n", &rest), *a1 = strtok_r(NULL, " \t\r\n", &rest),
         *a2 = strtok_r(NULL, " \t\r\n", &rest);
    unsigned dev;

    out[0] = '\0';
    if (!cmd)
        return true;
    s->commands++;
    log_line(s, "[fake-mps] command: %s", cmd);
    if (strcmp(cmd, "quit") == 0) {
        return false;
    } else if (strcmp(cmd, "set_default_active_thread_percentage") == 0) {
        char *end;
        long p = a1 ? strtol(a1, &end, 10) : -1;
        if (!a1 || *end || p < 1 || p > 100)
            snprintf(out, size, "Invalid active thread percentage: %s", a1 ? a1 : "");
        else
            s->thread_pct = (int)p;
    } else if (strcmp(cmd, "get_default_active_thread_percentage") == 0) {
        snprintf(out, size, "%d.0", s->thread_pct >= 0 ? s->thread_pct : 100);
    } else if (strcmp(cmd, "set_default_device_pinned_mem_limit") == 0) {
        if (!a1 || !a2 || !parse_dev(s, a1, &dev))
            snprintf(out, size, "Invalid device: %s", a1 ? a1 : "");
        else if (!valid_limit(a2) || refusing_limits())
            snprintf(out, size, "Invalid memory limit: %s", a2);
        else
            snprintf(s->mem_limit[dev], sizeof(s->mem_limit[dev]), "%s", a2);
    } else if (strcmp(cmd, "get_default_device_pinned_mem_limit") == 0) {
        if (!a1 || !parse_dev(s, a1, &dev))
            snprintf(out, size, "Invalid device: %s", a1 ? a1 : "");
        else
            snprintf(out, size, "%s", s->mem_limit[dev][0] ? s->mem_limit[dev] : "0M");
    } else if (strcmp(cmd, "get_server_list") == 0) {
        /* no servers: no CUDA client ever connects to a fake */
    } else if (strcmp(cmd, "fake_hang") == 0) {
        s->hung = true;
    } else if (strcmp(cmd, "fake_crash") == 0) {
        abort();
    } else {
        snprintf(out, size, "Unrecognized command: %s", cmd);
    }
    save(s);
    return true;
}

static int serve(bool notify_parent, int ready_fd)
{
    struct state s = {.thread_pct = -1};
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char path[300];
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    int lfd;

    snprintf(s.pipe_dir, sizeof(s.pipe_dir), "%s",
             dir_env("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"));
    snprintf(s.log_dir, sizeof(s.log_dir), "%s",
             dir_env("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps"));
    s.n_devices = 8;
    if (visible && *visible) {
        s.n_devices = 1;
        for (const char *c = visible; *c; c++)
            s.n_devices += *c == ',';
    }
    control_path(s.pipe_dir, path, sizeof(path));
    if (strlen(path) >= sizeof(addr.sun_path)) {
        fprintf(stderr, "pipe directory path too long\n");
        return 1;
    }
    /* Bound under a temporary name and renamed once listening: the control path appears
     * only when a client can connect (the supervisor takes its existence as "ready"; between
     * bind and listen a connect is refused). */
    char tmp[sizeof(path)];
    snprintf(tmp, sizeof(tmp), "%s/.ctl", s.pipe_dir); /* shorter than "control": fits too */
    strcpy(addr.sun_path, tmp);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || (unlink(tmp) < 0 && errno != ENOENT) ||
        bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(lfd, 8) < 0 ||
        rename(tmp, path) < 0) {
        fprintf(stderr, "An instance of this daemon is already running or %s is unusable: %s\n",
                path, strerror(errno));
        return 1;
    }
    char pidfile[320];
    snprintf(pidfile, sizeof(pidfile), "%s/nvidia-cuda-mps-control.pid", s.pipe_dir);
    FILE *pf = fopen(pidfile, "w");
    if (pf) {
        fprintf(pf, "%d\n", (int)getpid());
        fclose(pf);
    }
    log_line(&s, "[fake-mps] control daemon started, visible devices: %s", visible ? visible : "");
    save(&s);
    if (notify_parent) {
        (void)!write(ready_fd, "1", 1);
        close(ready_fd);
    }
    signal(SIGPIPE, SIG_IGN);
    const char *crash = getenv("FAKE_MPS_CRASH_AFTER_MS");
    const char *crash_file = getenv("FAKE_MPS_CRASH_FILE");
    if (crash && *crash && (!crash_file || access(crash_file, F_OK) == 0)) {
        long ms = strtol(crash, NULL, 10); /* test hook: no validation needed */
        struct itimerval it = {.it_value = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}};
        signal(SIGALRM, SIG_DFL);
        (void)setitimer(ITIMER_REAL, &it, NULL);
    }
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0)
            continue;
        if (s.hung) { /* wedged: take the connection, never answer */
            continue;
        }
        FILE *in = fdopen(c, "r+");
        char line[LINE_MAX_LEN], out[LINE_MAX_LEN];
        bool go_on = true;
        while (in && go_on && fgets(line, sizeof(line), in)) {
            go_on = handle(&s, line, out, sizeof(out));
            if (s.hung)
                break;
            fprintf(in, "%s\n", out);
            fflush(in);
        }
        if (in)
            fclose(in);
        else
            close(c);
        if (!go_on) {
            log_line(&s, "[fake-mps] %s", "quit: control daemon exiting");
            unlink(path);
            unlink(pidfile);
            return 0;
        }
    }
}

static int client(void)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char path[300], line[LINE_MAX_LEN];
    int fd;

    control_path(dir_env("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), path, sizeof(path));
    if (strlen(path) >= sizeof(addr.sun_path)) {
        fprintf(stderr, "pipe directory path too long\n");
        return 1;
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        fprintf(stderr, "Cannot find MPS control daemon process\n");
        return 1;
    }
    FILE *io = fdopen(fd, "r+");
    while (io && fgets(line, sizeof(line), stdin)) {
        char answer[LINE_MAX_LEN];
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        fputs(line, io);
        if (!strchr(line, '\n'))
            fputc('\n', io);
        fflush(io);
        if (strncmp(line, "quit", 4) == 0)
            break;
        if (!fgets(answer, sizeof(answer), io)) {
            fprintf(stderr, "The MPS control daemon went away\n");
            return 1;
        }
        if (answer[0] != '\n')
            fputs(answer, stdout);
    }
    if (io)
        fclose(io);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "-f") == 0)
        return serve(false, -1);
    if (argc > 1 && strcmp(argv[1], "-d") == 0) {
        int p[2];
        if (pipe(p) < 0)
            return 1;
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            close(p[0]);
            setsid();
            return serve(true, p[1]);
        }
        close(p[1]);
        char c;
        return read(p[0], &c, 1) == 1 ? 0 : 1; /* the daemon is listening */
    }
    if (argc > 1) {
        fprintf(stderr, "usage: nvidia-cuda-mps-control [-d | -f]\n");
        return 1;
    }
    return client();
}

/* SPDX-License-Identifier: Apache-2.0 */
/* proc.c: finding the process config-manager signals, by argv[0] in /proc/<pid>/cmdline
 * (NVIDIA's compares argv[0] exactly; we also match on the base name, since NVIDIA's own
 * chart passes /usr/bin/mps-control-daemon for a process started as mps-control-daemon),
 * and signal names. Reads /proc only. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "configmgr/configmgr.h"

static const char *base_name(const char *s)
{
    const char *slash = strrchr(s, '/');
    return slash ? slash + 1 : s;
}

/* argv[0] of pid (NUL-terminated in buf); false when unreadable or empty (kernel threads). */
static bool read_argv0(const char *proc_root, const char *pid, char *buf, size_t size)
{
    char path[512];
    ssize_t n;
    int fd;

    if ((size_t)snprintf(path, sizeof(path), "%s/%s/cmdline", proc_root, pid) >= sizeof(path))
        return false;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0'; /* argv[0] ends at the first NUL */
    return buf[0] != '\0';
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

int cfgmgr_find_process(const char *proc_root, const char *name, pid_t *ret_pid, struct error *err)
{
    const char *root = proc_root ? proc_root : "/proc";
    long self = (long)getpid(), exact = -1, by_base = -1;
    struct dirent *de;
    char argv0[4096];
    DIR *dir;

    dir = opendir(root);
    if (!dir)
        return error_set_errno(err, errno, "listing processes in %s", root);
    while ((de = readdir(dir))) {
        long pid;

        if (!all_digits(de->d_name))
            continue;
        pid = strtol(de->d_name, NULL, 10); /* digits only, checked above */
        if (pid == self || !read_argv0(root, de->d_name, argv0, sizeof(argv0)))
            continue;
        if (strcmp(argv0, name) == 0 && (exact < 0 || pid < exact))
            exact = pid;
        else if (strcmp(base_name(argv0), base_name(name)) == 0 && (by_base < 0 || pid < by_base))
            by_base = pid;
    }
    closedir(dir);
    if (exact < 0 && by_base < 0)
        return error_set(err, -ESRCH,
                         "no process with argv[0] '%s' in %s; the device plugin must share "
                         "this container's PID namespace (shareProcessNamespace: true)",
                         name, root);
    *ret_pid = (pid_t)(exact >= 0 ? exact : by_base);
    return 0;
}

int cfgmgr_signal_parse(const char *s, int *ret)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
                 {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}};
    unsigned n;

    if (parse_uint(s, &n) == 0) {
        if (n < 1 || n > 64)
            return -EINVAL;
        *ret = (int)n;
        return 0;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < GS_ARRAY_SIZE(names); i++)
        if (strcasecmp(s, names[i].name) == 0) {
            *ret = names[i].sig;
            return 0;
        }
    return -EINVAL;
}

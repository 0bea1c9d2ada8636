/* SPDX-License-Identifier: Apache-2.0 */
/* file.c: reading files with a size cap and writing them atomically (temp file in the
 * same directory + rename), so a reader never sees half a file. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/base.h"

int file_read_all(const char *path, size_t max_bytes, char **ret_data, size_t *ret_len,
                  struct error *err)
{
    struct stat st;
    char *data = NULL;
    size_t len = 0, alloc = 0;
    int fd = -1, r;

    /* O_NONBLOCK: a FIFO put at the path must not hang the caller (the daemon's loop) in
     * open(2) waiting for a writer; it is refused below. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        r = error_set_errno(err, errno, "cannot open '%s'", path);
        goto out;
    }
    if (fstat(fd, &st) < 0) {
        r = error_set_errno(err, errno, "cannot stat '%s'", path);
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        r = error_set(err, -EISDIR, "'%s' is a directory, expected a file", path);
        goto out;
    }
    /* regular files, and character devices for /dev/null (config-manager's empty config) */
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
        r = error_set(err, -EINVAL,
                      "'%s' is a %s, not a regular file; put the config in a "
                      "regular file",
                      path,
                      S_ISFIFO(st.st_mode)   ? "FIFO"
                      : S_ISSOCK(st.st_mode) ? "socket"
                                             : "special file");
        goto out;
    }
    for (;;) {
        if (alloc - len < 4096) {
            size_t na = alloc ? alloc * 2 : 8192;
            char *p = realloc(data, na + 1);
            if (!p) {
                r = error_set(err, -ENOMEM, "out of memory reading '%s'", path);
                goto out;
            }
            data = p;
            alloc = na;
        }
        ssize_t n = read(fd, data + len, alloc - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = error_set_errno(err, errno, "cannot read '%s'", path);
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max_bytes) {
            r = error_set(err, -EFBIG, "'%s' is larger than the %zu-byte limit", path, max_bytes);
            goto out;
        }
    }
    data[len] = '\0';
    *ret_data = data;
    data = NULL;
    if (ret_len)
        *ret_len = len;
    r = 0;
out:
    if (fd >= 0)
        close(fd);
    free(data);
    return r;
}

int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                      struct error *err)
{
    struct strbuf tmp = STRBUF_INIT;
    const char *p = data;
    int fd = -1, r;

    r = strbuf_printf(&tmp, "%s.tmp.%d.%llu", path, (int)getpid(),
                      (unsigned long long)time_now_ns());
    if (r < 0) {
        r = error_set(err, r, "cannot build a temporary name for '%s'", path);
        goto out;
    }
    fd = open(strbuf_str(&tmp), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        r = error_set_errno(err, errno, "cannot create '%s'", strbuf_str(&tmp));
        goto out;
    }
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = error_set_errno(err, errno, "cannot write '%s'", strbuf_str(&tmp));
            goto out;
        }
        p += n;
        len -= (size_t)n;
    }
    if (fchmod(fd, mode) < 0) {
        r = error_set_errno(err, errno, "cannot chmod '%s'", strbuf_str(&tmp));
        goto out;
    }
    r = close(fd);
    fd = -1;
    if (r < 0) {
        r = error_set_errno(err, errno, "cannot close '%s'", strbuf_str(&tmp));
        goto out;
    }
    if (rename(strbuf_str(&tmp), path) < 0) {
        r = error_set_errno(err, errno, "cannot rename '%s' to '%s'", strbuf_str(&tmp), path);
        goto out;
    }
    r = 0;
out:
    if (fd >= 0)
        close(fd);
    if (r < 0 && tmp.buf)
        unlink(tmp.buf);
    strbuf_release(&tmp);
    return r;
}

bool path_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool path_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

bool path_socket_live(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    bool live;
    int fd;

    if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode) || strlen(path) >= sizeof(sa.sun_path))
        return false;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return live;
}

uint64_t time_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t time_now_ms(void)
{
    return time_now_ns() / 1000000ull;
}

void time_deadline(struct timespec *ts, clockid_t clock, unsigned ms)
{
    clock_gettime(clock, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

unsigned backoff_next_ms(unsigned cur_ms, unsigned min_ms, unsigned max_ms)
{
    unsigned next = cur_ms == 0 ? min_ms : cur_ms > max_ms / 2 ? max_ms : cur_ms * 2;

    return next > max_ms ? max_ms : next;
}

int path_mkdir_p(const char *path, mode_t mode, struct error *err)
{
    char *p = str_dup(path);
    int r = 0;

    if (!p)
        return error_set(err, -ENOMEM, "out of memory");
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, mode) < 0 && errno != EEXIST) {
                r = error_set_errno(err, errno, "creating directory %s", p);
                break;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    free(p);
    return r;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    (void)remove(path);
    return 0;
}

void path_rm_tree(const char *path)
{
    (void)nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

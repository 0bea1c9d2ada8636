/* SPDX-License-Identifier: Apache-2.0 */
/* standalone.c: a main() for the fuzz targets in builds without libFuzzer. It feeds each
 * file named on the command line (or every regular file in a named directory) to
 * LLVMFuzzerTestOneInput once, so every build compiles the targets and CTest replays their
 * seed corpora: a target that no longer builds, or a seed that crashes, fails `make test`. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STANDALONE_MAX_INPUT_BYTES (4u << 20)

static int run_file(const char *path, size_t *n_run)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    ssize_t got;
    int fd, r = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "standalone: cannot open %s: %s\n", path, strerror(errno));
        return -errno;
    }
    buf = malloc(STANDALONE_MAX_INPUT_BYTES);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    while (len < STANDALONE_MAX_INPUT_BYTES &&
           (got = read(fd, buf + len, STANDALONE_MAX_INPUT_BYTES - len)) > 0)
        len += (size_t)got;
    (void)LLVMFuzzerTestOneInput(buf, len);
    (*n_run)++;
out:
    free(buf);
    close(fd);
    return r;
}

static int run_path(const char *path, size_t *n_run)
{
    struct stat st;
    struct dirent *e;
    DIR *d;
    int r = 0;

    if (stat(path, &st) < 0) {
        fprintf(stderr, "standalone: %s: %s\n", path, strerror(errno));
        return -errno;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path, n_run);
    d = opendir(path);
    if (!d)
        return -errno;
    while (r == 0 && (e = readdir(d))) {
        char child[4096];
        struct stat cst;

        if (e->d_name[0] == '.')
            continue;
        if (snprintf(child, sizeof(child), "%s/%s", path, e->d_name) >= (int)sizeof(child))
            continue;
        if (stat(child, &cst) == 0 && S_ISREG(cst.st_mode))
            r = run_file(child, n_run);
    }
    closedir(d);
    return r;
}

int main(int argc, char **argv)
{
    size_t n_run = 0;

    for (int i = 1; i < argc; i++)
        if (run_path(argv[i], &n_run) < 0)
            return 1;
    if (n_run == 0) {
        fprintf(stderr, "standalone: no input files (give files or directories)\n");
        return 1;
    }
    printf("standalone: %zu inputs ran\n", n_run);
    return 0;
}

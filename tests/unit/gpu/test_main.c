/* SPDX-License-Identifier: Apache-2.0 */
/* test_main.c: the test_gpu program — runs the loader, naming, inventory and samples groups, and
 * the small temp-dir helpers they share. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "tests.h"

char *tmpdir_make(void)
{
    const char *base = getenv("TMPDIR");
    struct strbuf sb = STRBUF_INIT;
    char *p;

    assert_int_equal(strbuf_printf(&sb, "%s/gs-gpu-XXXXXX", base && *base ? base : "/tmp"), 0);
    p = strbuf_take(&sb);
    assert_non_null(p);
    assert_non_null(mkdtemp(p));
    return p;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tmpdir_remove(const char *dir)
{
    if (dir)
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mkdir_p(char *path)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(path, 0755) < 0)
            assert_int_equal(errno, EEXIST);
        *s = '/';
    }
    if (mkdir(path, 0755) < 0)
        assert_int_equal(errno, EEXIST);
}

static char *join(const char *dir, const char *rel)
{
    struct strbuf sb = STRBUF_INIT;
    char *p;

    assert_int_equal(strbuf_printf(&sb, "%s/%s", dir, rel), 0);
    p = strbuf_take(&sb);
    assert_non_null(p);
    return p;
}

char *mkdir_under(const char *dir, const char *rel)
{
    char *p = join(dir, rel);
    mkdir_p(p);
    return p;
}

void write_under(const char *dir, const char *rel, const char *text)
{
    char *p = join(dir, rel);
    char *slash = strrchr(p, '/');
    int fd;

    *slash = '\0';
    mkdir_p(p);
    *slash = '/';
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    free(p);
}

char *touch_under(const char *dir, const char *rel)
{
    write_under(dir, rel, "");
    return join(dir, rel);
}

int main(void)
{
    int failed = 0;

    failed += run_names_tests();
    failed += run_loader_tests();
    failed += run_inventory_tests();
    failed += run_samples_tests();
    return failed ? 1 : 0;
}

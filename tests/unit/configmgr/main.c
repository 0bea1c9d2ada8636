/* SPDX-License-Identifier: Apache-2.0 */
/* main.c: runs the configmgr unit tests and holds the shared temp-dir helpers. */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

char *tmpdir_new(void)
{
    char *d = strdup("/tmp/gs-cfgmgr-XXXXXX");
    assert_non_null(d);
    assert_non_null(mkdtemp(d));
    return d;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tmpdir_free(char *dir)
{
    if (dir)
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

void write_at(const char *dir, const char *name, const char *data, size_t len)
{
    char path[4096];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

int main(void)
{
    int failed = 0;
    failed += _cmocka_run_group_tests("configmgr", configmgr_tests, n_configmgr_tests, NULL, NULL);
    failed += _cmocka_run_group_tests("proc", proc_tests, n_proc_tests, NULL, NULL);
    failed += _cmocka_run_group_tests("admission", admission_tests, n_admission_tests, NULL, NULL);
    return failed ? 1 : 0;
}

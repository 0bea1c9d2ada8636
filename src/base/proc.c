/* SPDX-License-Identifier: Apache-2.0 */
/* proc.c: starting child processes without fork(): the daemon has threads (DRA prepares run
 * on several), and a forked child of a threaded process may not allocate, so the child's
 * environment and descriptors are prepared here in the parent and posix_spawn does the rest. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

extern char **environ;

char **proc_env_with(const char *const *set, size_t n_set)
{
    size_t n = 0, k = 0;

    while (environ && environ[n])
        n++;
    char **env = calloc(n + n_set + 1, sizeof(*env));
    if (!env)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < n_set && !replaced; j++) {
            size_t len = strcspn(set[j], "=");
            replaced = strncmp(environ[i], set[j], len) == 0 && environ[i][len] == '=';
        }
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < n_set; j++)
        env[k++] = (char *)set[j];
    return env;
}

int proc_spawn(const char *file, char *const *argv, char *const *envp, int in_fd, int out_fd,
               pid_t *ret_pid)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int r;

    if (posix_spawn_file_actions_init(&fa) != 0)
        return -ENOMEM;
    r = in_fd >= 0 ? posix_spawn_file_actions_adddup2(&fa, in_fd, 0)
                   : posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (r == 0 && out_fd >= 0)
        r = posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    if (r == 0 && out_fd >= 0)
        r = posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    if (r == 0)
        r = posix_spawnp(&pid, file, &fa, NULL, argv, envp ? envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        return -r;
    *ret_pid = pid;
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_proc.c: finding the process to signal in a fake /proc (exact argv[0] first, then the
 * same base name either way round, kernel threads and unreadable entries skipped, this
 * process never) and parsing signal numbers and names. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "configmgr/configmgr.h"
#include "helpers.h"

static void add_proc(const char *root, long pid, const char *cmdline, size_t len)
{
    char name[64];
    snprintf(name, sizeof(name), "%ld/cmdline", pid);
    write_at(root, name, cmdline, len);
}

#define ADD(root, pid, lit) add_proc(root, pid, lit, sizeof(lit) - 1)

static void test_find_process_forms(void **state)
{
    char *root = tmpdir_new();
    struct error err = {0};
    pid_t pid = 0;

    (void)state;
    ADD(root, 1, "/pause\0");
    ADD(root, 2, ""); /* kernel thread: empty cmdline */
    ADD(root, 40, "/usr/bin/nvidia-device-plugin\0--config-file\0/config/config.yaml\0");
    ADD(root, 41, "mps-control-daemon\0");
    ADD(root, 50, "nvidia-device-plugin\0");
    ADD(root, 60, "config-manager\0nvidia-device-plugin\0");    /* argv[1] does not count */
    write_at(root, "self/cmdline", "x\0", 2);                   /* not a pid */
    add_proc(root, (long)getpid(), "nvidia-device-plugin", 21); /* never ourselves */

    /* exact argv[0] beats a base-name match */
    assert_int_equal(cfgmgr_find_process(root, "nvidia-device-plugin", &pid, &err), 0);
    assert_int_equal(pid, 50);
    assert_int_equal(cfgmgr_find_process(root, "/usr/bin/nvidia-device-plugin", &pid, &err), 0);
    assert_int_equal(pid, 40);
    /* NVIDIA's chart: PROCESS_TO_SIGNAL=/usr/bin/mps-control-daemon, command mps-control-daemon */
    assert_int_equal(cfgmgr_find_process(root, "/usr/bin/mps-control-daemon", &pid, &err), 0);
    assert_int_equal(pid, 41);
    assert_int_equal(cfgmgr_find_process(root, "gpu-feature-discovery", &pid, &err), -ESRCH);
    assert_non_null(strstr(err.msg, "shareProcessNamespace"));
    assert_int_equal(cfgmgr_find_process("/nonexistent-proc", "x", &pid, &err), -ENOENT);
    tmpdir_free(root);
}

static void test_find_process_real_proc(void **state)
{
    struct error err = {0};
    char name[64], full[96];
    pid_t child, pid = 0;
    int r = -ESRCH, status;

    (void)state;
    /* a child whose argv[0] nobody else has, found in the real /proc by either form */
    snprintf(name, sizeof(name), "gs-cfgmgr-test-%ld", (long)getpid());
    snprintf(full, sizeof(full), "/usr/bin/%s", name);
    assert_int_equal(cfgmgr_find_process(NULL, name, &pid, &err), -ESRCH);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        execl("/bin/sleep", name, "30", (char *)NULL);
        _exit(127);
    }
    /* exec happens in the child on its own schedule: wait for it, with a limit */
    for (uint64_t end = time_now_ms() + 5000; r == -ESRCH && time_now_ms() < end;)
        r = cfgmgr_find_process(NULL, full, &pid, &err);
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    assert_int_equal(r, 0);
    assert_int_equal(pid, child);
}

static void test_signal_parse(void **state)
{
    static const struct {
        const char *s;
        int want;
    } ok[] = {{"1", SIGHUP},   {"15", SIGTERM},      {"SIGHUP", SIGHUP},
              {"hup", SIGHUP}, {"SIGUSR2", SIGUSR2}, {"64", 64}};
    static const char *const bad[] = {"0", "65", "-1", "", "SIG", "KILLME", "1x"};
    int sig;

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(cfgmgr_signal_parse(ok[i].s, &sig), 0);
        assert_int_equal(sig, ok[i].want);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(cfgmgr_signal_parse(bad[i], &sig), -EINVAL);
}

const struct CMUnitTest proc_tests[] = {
    cmocka_unit_test(test_find_process_forms),
    cmocka_unit_test(test_find_process_real_proc),
    cmocka_unit_test(test_signal_parse),
};
const size_t n_proc_tests = sizeof(proc_tests) / sizeof(proc_tests[0]);

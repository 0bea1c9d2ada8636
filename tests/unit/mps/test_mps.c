/* SPDX-License-Identifier: Apache-2.0 */
/* test_mps.c: the MPS supervisor (src/mps/) against tools/fake-mps and the fake NVML: start
 * with limits by device index and EXCLUSIVE_PROCESS, .started/.ready; a killed daemon seen
 * through the supervisor fd, restarted with its limits; a changed spec restarts only its
 * daemon; limits changed in place (no restart, a refusal keeps the old ones, a restart applies
 * the last); an empty set stops everything; a missing binary is an error that names it; free
 * leaves no process, file (also those only the real daemon writes) or changed compute mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/base.h"
#include "gpu/gpu.h"
#include "gpu/inventory.h"
#include "mps/mps.h"

struct fixture {
    char dir[256], root[300], nvml_state[300];
    struct gpu_nvml *nvml;
    struct mps_daemon_spec specs[2];
    struct mps_options o;
    /* the test's supervisor: teardown frees it, so a failed assertion leaves no daemon
     * running (one left holding ctest's output pipe made ctest wait for its timeout) */
    struct mps_supervisor *s;
};

static int setup(void **state)
{
    static const char machine[] = "gpus:\n  - model: NVIDIA L20\n    count: 2\n";
    struct fixture *f = calloc(1, sizeof(*f));
    char lib[512], path[512];
    struct inv_inventory *inv = NULL;
    struct error err = {0};

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/gs-mps-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->root, sizeof(f->root), "%s/mps", f->dir);
    snprintf(path, sizeof(path), "%s/l20x2.yaml", f->dir);
    assert_int_equal(file_write_atomic(path, machine, sizeof(machine) - 1, 0644, NULL), 0);
    snprintf(f->nvml_state, sizeof(f->nvml_state), "%s/nvml.state", f->dir);
    setenv("FAKE_NVML_MACHINE", path, 1);
    setenv("FAKE_NVML_STATE", f->nvml_state, 1);
    unsetenv("FAKE_NVML_FAIL");
    signal(SIGPIPE, SIG_IGN);
    snprintf(lib, sizeof(lib), "%s/tools/fake-nvml/libnvidia-ml.so.1", GS_BINARY_DIR);
    struct gpu_nvml_options no = {.library_path = lib};
    assert_int_equal(gpu_nvml_open(&no, &f->nvml, &err), 0);
    assert_int_equal(gpu_inventory_read(f->nvml, &inv, &err), 0);
    assert_int_equal(inv->n_gpus, 2);
    for (size_t i = 0; i < 2; i++) {
        struct mps_daemon_spec *sp = &f->specs[i];
        snprintf(sp->resource, sizeof(sp->resource), "%s",
                 i == 0 ? "nvidia.com/gpu" : "nvidia.com/gpu.large");
        snprintf(sp->uuids[0], sizeof(sp->uuids[0]), "%s", inv->gpus[i].uuid);
        sp->mem_limit_mib[0] = i == 0 ? 11517 : 20480;
        sp->n = 1;
        sp->thread_pct = i == 0 ? 25 : 60;
    }
    inv_free(inv);
    f->o = (struct mps_options){.root = f->root,
                                .binary = GS_FAKE_MPS,
                                .nvml = f->nvml,
                                /* No case waits for this timeout: it only has to
                                 * outlast a fork+exec on a loaded 2-core CI machine
                                 * (2 s failed there, -EIO at mps_supervisor_set). */
                                .timeout_ms = 10000,
                                .probe_interval_ms = 0};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[300];

    mps_supervisor_free(f->s);
    gpu_nvml_close(f->nvml);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static bool exists(const struct fixture *f, const char *rel)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", f->root, rel);
    return stat(path, &st) == 0;
}

/* "key=value" of <root>/<resource>/log/fake-mps.state into buf; false when absent. */
static bool fake_value(const struct fixture *f, const char *res, const char *key, char *buf,
                       size_t size)
{
    char path[512], *text = NULL, *p;
    size_t n = strlen(key);
    bool found = false;

    snprintf(path, sizeof(path), "%s/%s/log/fake-mps.state", f->root, res);
    if (file_read_all(path, 1 << 16, &text, NULL, NULL) < 0)
        return false;
    for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, n) == 0 && p[n] == '=') {
            snprintf(buf, size, "%.*s", (int)strcspn(p + n + 1, "\n"), p + n + 1);
            found = true;
            break;
        }
    }
    free(text);
    return found;
}

static pid_t fake_pid(const struct fixture *f, const char *res)
{
    char buf[32];
    unsigned v = 0;
    if (!fake_value(f, res, "pid", buf, sizeof(buf)) || parse_uint(buf, &v) < 0)
        return -1;
    return (pid_t)v;
}

static void assert_value(const struct fixture *f, const char *res, const char *key,
                         const char *want)
{
    char buf[128] = "";
    assert_true(fake_value(f, res, key, buf, sizeof(buf)));
    assert_string_equal(buf, want);
}

static bool gone(pid_t pid)
{
    char path[64], *text = NULL;
    const char *p;
    bool dead;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (file_read_all(path, 4096, &text, NULL, NULL) < 0)
        return true;
    p = strrchr(text, ')');
    dead = p && (p[2] == 'Z' || p[2] == 'X');
    free(text);
    return dead;
}

static char *nvml_state(const struct fixture *f)
{
    char *text = NULL;
    if (file_read_all(f->nvml_state, 1 << 16, &text, NULL, NULL) < 0)
        return str_dup("");
    return text;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Dispatches the supervisor's events until up(resource) == want, within ms. */
static bool dispatch_until(struct mps_supervisor *s, const char *res, bool want, int ms,
                           bool *saw_change)
{
    int64_t deadline = now_ms() + ms;
    while (mps_supervisor_up(s, res) != want) {
        struct pollfd p = {.fd = mps_supervisor_fd(s), .events = POLLIN};
        int64_t left = deadline - now_ms();
        bool changed = false;
        if (left <= 0)
            return false;
        if (poll(&p, 1, (int)left) > 0) {
            mps_supervisor_dispatch(s, &changed);
            *saw_change = *saw_change || changed;
        }
    }
    return true;
}

static void test_start_limits_and_free(void **state)
{
    struct fixture *f = *state;
    struct mps_supervisor *s = NULL;
    struct error err = {0};
    char *nv;

    assert_int_equal(mps_supervisor_new(&f->o, &f->s, &err), 0);
    s = f->s;
    int r = mps_supervisor_set(s, f->specs, 2, &err);
    if (r < 0)
        fprintf(stderr, "mps_supervisor_set: %s\n", err.msg);
    assert_int_equal(r, 0);
    assert_true(mps_supervisor_up(s, "nvidia.com/gpu"));
    assert_true(mps_supervisor_up(s, "nvidia.com/gpu.large"));
    /* A resource the supervisor does not run is not its to mark down. */
    assert_true(mps_supervisor_up(s, "nvidia.com/other"));
    assert_true(exists(f, ".ready"));
    assert_true(exists(f, "nvidia.com/gpu/.started"));
    assert_value(f, "nvidia.com/gpu", "visible", f->specs[0].uuids[0]);
    assert_value(f, "nvidia.com/gpu", "active_thread_percentage", "25");
    assert_value(f, "nvidia.com/gpu", "pinned_mem_limit.0", "11517M");
    assert_value(f, "nvidia.com/gpu.large", "visible", f->specs[1].uuids[0]);
    assert_value(f, "nvidia.com/gpu.large", "active_thread_percentage", "60");
    assert_value(f, "nvidia.com/gpu.large", "pinned_mem_limit.0", "20480M");
    nv = nvml_state(f);
    assert_non_null(strstr(nv, "cm 0 3\n"));
    assert_non_null(strstr(nv, "cm 1 3\n"));
    free(nv);
    pid_t a = fake_pid(f, "nvidia.com/gpu"), b = fake_pid(f, "nvidia.com/gpu.large");
    assert_true(a > 0 && b > 0);

    /* What the real daemon leaves in its folders goes too (server.log, control_lock). */
    char extra[512];
    snprintf(extra, sizeof(extra), "%s/nvidia.com/gpu/log/server.log", f->root);
    assert_int_equal(file_write_atomic(extra, "x", 1, 0644, NULL), 0);
    snprintf(extra, sizeof(extra), "%s/nvidia.com/gpu/pipe/control_lock", f->root);
    assert_int_equal(file_write_atomic(extra, "", 0, 0644, NULL), 0);

    mps_supervisor_free(s);
    f->s = NULL;
    assert_true(gone(a));
    assert_true(gone(b));
    assert_false(exists(f, ".ready"));
    assert_false(exists(f, "nvidia.com"));
    nv = nvml_state(f);
    assert_null(strstr(nv, "cm "));
    free(nv);
}

static void test_killed_daemon_restarted_with_limits(void **state)
{
    struct fixture *f = *state;
    struct mps_supervisor *s = NULL;
    struct error err = {0};
    bool changed = false;

    assert_int_equal(mps_supervisor_new(&f->o, &f->s, &err), 0);
    s = f->s;
    assert_int_equal(mps_supervisor_set(s, f->specs, 2, &err), 0);
    pid_t first = fake_pid(f, "nvidia.com/gpu.large"), other = fake_pid(f, "nvidia.com/gpu");
    assert_int_equal(kill(first, SIGKILL), 0);
    assert_true(dispatch_until(s, "nvidia.com/gpu.large", false, 5000, &changed));
    assert_true(changed);
    assert_false(exists(f, "nvidia.com/gpu.large/.started"));
    assert_false(exists(f, ".ready"));
    changed = false;
    assert_true(dispatch_until(s, "nvidia.com/gpu.large", true, 5000, &changed));
    assert_true(changed);
    assert_int_equal(mps_supervisor_restarts(s), 1);
    assert_true(fake_pid(f, "nvidia.com/gpu.large") != first);
    assert_value(f, "nvidia.com/gpu.large", "active_thread_percentage", "60");
    assert_value(f, "nvidia.com/gpu.large", "pinned_mem_limit.0", "20480M");
    assert_true(exists(f, "nvidia.com/gpu.large/.started"));
    assert_true(exists(f, ".ready"));
    assert_int_equal(fake_pid(f, "nvidia.com/gpu"), other);
    mps_supervisor_free(s);
    f->s = NULL;
}

static void test_set_changes_only_what_changed(void **state)
{
    struct fixture *f = *state;
    struct mps_supervisor *s = NULL;
    struct error err = {0};

    assert_int_equal(mps_supervisor_new(&f->o, &f->s, &err), 0);
    s = f->s;
    assert_int_equal(mps_supervisor_set(s, f->specs, 2, &err), 0);
    pid_t a = fake_pid(f, "nvidia.com/gpu"), b = fake_pid(f, "nvidia.com/gpu.large");
    f->specs[1].thread_pct = 30;
    assert_int_equal(mps_supervisor_set(s, f->specs, 2, &err), 0);
    assert_int_equal(fake_pid(f, "nvidia.com/gpu"), a);
    assert_true(fake_pid(f, "nvidia.com/gpu.large") != b);
    assert_true(gone(b));
    assert_value(f, "nvidia.com/gpu.large", "active_thread_percentage", "30");
    /* Nothing shared with MPS any more: everything stopped and restored. */
    assert_int_equal(mps_supervisor_set(s, NULL, 0, &err), 0);
    assert_true(gone(a));
    assert_false(exists(f, ".ready"));
    assert_false(exists(f, "nvidia.com"));
    char *nv = nvml_state(f);
    assert_null(strstr(nv, "cm "));
    free(nv);
    mps_supervisor_free(s);
    f->s = NULL;
}

/* Limits changed in place: the same daemon (its clients keep running), the new values held
 * and kept for a restart; a refusal keeps the old ones; an unknown daemon or other GPUs are
 * refused. */
static void test_set_limits_in_place(void **state)
{
    struct fixture *f = *state;
    struct mps_daemon_spec sp;
    struct error err = {0};
    char refuse[512];
    bool changed = false;

    /* the daemon reads the hook's name at start; the file appears later */
    snprintf(refuse, sizeof(refuse), "%s/refuse", f->dir);
    setenv("FAKE_MPS_REFUSE_LIMITS_FILE", refuse, 1);
    assert_int_equal(mps_supervisor_new(&f->o, &f->s, &err), 0);
    assert_int_equal(mps_supervisor_set(f->s, f->specs, 1, &err), 0);
    pid_t a = fake_pid(f, "nvidia.com/gpu");
    sp = f->specs[0];
    sp.mem_limit_mib[0] = 4096;
    sp.thread_pct = 0; /* back to the whole GPU */
    if (mps_supervisor_set_limits(f->s, &sp, &err) < 0)
        fail_msg("mps_supervisor_set_limits: %s", err.msg);
    assert_int_equal(fake_pid(f, "nvidia.com/gpu"), a);
    assert_value(f, "nvidia.com/gpu", "pinned_mem_limit.0", "4096M");
    assert_value(f, "nvidia.com/gpu", "active_thread_percentage", "100");
    /* the same spec given to set: nothing restarts */
    assert_int_equal(mps_supervisor_set(f->s, &sp, 1, &err), 0);
    assert_int_equal(fake_pid(f, "nvidia.com/gpu"), a);
    /* refused: the old limits stay */
    assert_int_equal(file_write_atomic(refuse, "", 0, 0644, NULL), 0);
    sp.mem_limit_mib[0] = 8192;
    assert_int_equal(mps_supervisor_set_limits(f->s, &sp, &err), -EIO);
    assert_non_null(strstr(err.msg, "Invalid memory limit"));
    assert_value(f, "nvidia.com/gpu", "pinned_mem_limit.0", "4096M");
    assert_int_equal(unlink(refuse), 0);
    unsetenv("FAKE_MPS_REFUSE_LIMITS_FILE");
    /* a restart applies the limits last set */
    assert_int_equal(kill(a, SIGKILL), 0);
    assert_true(dispatch_until(f->s, "nvidia.com/gpu", false, 5000, &changed));
    assert_true(dispatch_until(f->s, "nvidia.com/gpu", true, 5000, &changed));
    assert_value(f, "nvidia.com/gpu", "pinned_mem_limit.0", "4096M");
    snprintf(sp.resource, sizeof(sp.resource), "nvidia.com/none");
    assert_int_equal(mps_supervisor_set_limits(f->s, &sp, &err), -ENOENT);
    sp = f->specs[1];
    snprintf(sp.resource, sizeof(sp.resource), "nvidia.com/gpu");
    assert_int_equal(mps_supervisor_set_limits(f->s, &sp, &err), -EINVAL);
    mps_supervisor_free(f->s);
    f->s = NULL;
}

static void test_missing_binary_named(void **state)
{
    struct fixture *f = *state;
    struct mps_supervisor *s = NULL;
    struct error err = {0};
    char missing[400];

    snprintf(missing, sizeof(missing), "%s/no-such-mps-control", f->dir);
    f->o.binary = missing;
    assert_int_equal(mps_supervisor_new(&f->o, &f->s, &err), 0);
    s = f->s;
    assert_true(mps_supervisor_set(s, f->specs, 1, &err) < 0);
    assert_non_null(strstr(err.msg, "no-such-mps-control"));
    assert_false(mps_supervisor_up(s, "nvidia.com/gpu"));
    assert_false(exists(f, ".ready"));
    mps_supervisor_free(s);
    f->s = NULL;
    char *nv = nvml_state(f);
    assert_null(strstr(nv, "cm "));
    free(nv);
}

/* A client's answer counts only when it exits 0: one that fails without a known error word
 * (a crash, a daemon that went away) is an error naming its exit, not a success. */
static void test_control_command_exit_status(void **state)
{
    struct fixture *f = *state;
    struct mps_options o = f->o;
    struct error err = {0};
    char bin[400], *out = NULL;

    signal(SIGPIPE, SIG_IGN); /* as both callers do: a client may die before it reads */
    snprintf(bin, sizeof(bin), "%s/client.sh", f->dir);
    o.binary = bin;
    assert_int_equal(
        file_write_atomic(bin, "#!/bin/sh\ncat >/dev/null\necho 4242\nexit 0\n", 42, 0755, &err),
        0);
    assert_int_equal(mps_control_command(&o, "nvidia.com/gpu", "get_server_list\n", &out, &err), 0);
    assert_string_equal(out, "4242\n");
    free(out);
    out = NULL;
    assert_int_equal(
        file_write_atomic(bin, "#!/bin/sh\ncat >/dev/null\necho half\nexit 3\n", 42, 0755, &err),
        0);
    assert_int_equal(mps_control_command(&o, "nvidia.com/gpu", "get_server_list\n", &out, &err),
                     -EIO);
    assert_null(out);
    assert_non_null(strstr(err.msg, "exited with status 3: half"));
    assert_int_equal(file_write_atomic(bin, "#!/bin/sh\nkill -9 $$\n", 21, 0755, &err), 0);
    assert_int_equal(mps_control_command(&o, "nvidia.com/gpu", "quit\n", NULL, &err), -EIO);
    assert_non_null(strstr(err.msg, "killed by signal 9"));
}

static void test_paths(void **state)
{
    struct strbuf sb = STRBUF_INIT;
    (void)state;
    assert_int_equal(mps_path("/run/nvidia/mps", "nvidia.com/gpu", "pipe", &sb), 0);
    assert_string_equal(strbuf_str(&sb), "/run/nvidia/mps/nvidia.com/gpu/pipe");
    strbuf_release(&sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_limits_and_free, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_daemon_restarted_with_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_changes_only_what_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_limits_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_binary_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_control_command_exit_status, setup, teardown),
        cmocka_unit_test(test_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

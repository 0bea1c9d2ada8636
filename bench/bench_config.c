/* SPDX-License-Identifier: Apache-2.0 */
/* bench_config.c: parse + validate time of a 10,000-resource config (issue 2 asks for
 * "well under a second"), in two shapes — 10,000 per-model resource names (each with its
 * resources.gpus pattern, shared and renamed), and one name
 * split into 10,000 disjoint device lists (the overlap check's worst case) — and the
 * wall time of `gpuslice config validate` on the first file. Prints JSON lines. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"

#define RESOURCES 10000
#define RUNS 7
#define TARGET_MS 1000

extern char **environ;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void build(struct strbuf *sb, bool split_devices)
{
    strbuf_puts(sb, "version: v1\n");
    if (!split_devices) { /* one resource name per GPU model, like a per-model config */
        strbuf_puts(sb, "resources:\n  gpus:\n");
        for (unsigned i = 0; i < RESOURCES; i++)
            strbuf_printf(sb, "  - pattern: \"*MODEL-%u*\"\n    name: nvidia.com/r%u\n", i, i);
    }
    strbuf_puts(sb, "sharing:\n  timeSlicing:\n    renameByDefault: true\n"
                    "    resources:\n");
    for (unsigned i = 0; i < RESOURCES; i++) {
        if (split_devices)
            strbuf_printf(sb,
                          "    - name: nvidia.com/gpu\n      devices: [%u, \"%u:0\"]\n"
                          "      replicas: %u\n",
                          i, i, 2 + i % 7);
        else
            strbuf_printf(sb,
                          "    - name: nvidia.com/r%u\n      rename: example.com/s%u\n"
                          "      replicas: %u\n",
                          i, i, 2 + i % 7);
    }
}

static int bench(const char *shape, const struct strbuf *sb)
{
    uint64_t t[RUNS];

    for (int run = 0; run < RUNS; run++) {
        struct cfg_config *cfg = NULL;
        struct error err = {0};
        uint64_t t0 = time_now_ns();
        int r = cfg_parse_buffer(sb->buf, sb->len, "bench.yaml", NULL, &cfg, NULL, &err);
        t[run] = time_now_ns() - t0;
        if (r < 0 || cfg->sharing.n_resources != RESOURCES) {
            fprintf(stderr, "bench_config: %s: %s\n", shape, err.msg);
            cfg_free(cfg);
            return 1;
        }
        cfg_free(cfg);
    }
    qsort(t, RUNS, sizeof(t[0]), cmp_u64);
    printf("{\"bench\":\"config_validate\",\"shape\":\"%s\",\"resources\":%d,\"bytes\":%zu,"
           "\"runs\":%d,\"p50_ms\":%.1f,\"max_ms\":%.1f,\"target_ms\":%d}\n",
           shape, RESOURCES, sb->len, RUNS, (double)t[RUNS / 2] / 1e6, (double)t[RUNS - 1] / 1e6,
           TARGET_MS);
    return 0;
}

/* Wall time of the command, process start included. */
static void bench_cli(const struct strbuf *sb)
{
    const char *bin_dir = getenv("GS_BINARY_DIR");
    char bin[512], path[] = "/tmp/gs-bench-config-XXXXXX";
    uint64_t t[RUNS];
    int fd, status;

    snprintf(bin, sizeof(bin), "%s/gpuslice", bin_dir ? bin_dir : GS_BINARY_DIR);
    if (access(bin, X_OK) < 0)
        return;
    fd = mkstemp(path);
    if (fd < 0)
        return;
    if (write(fd, sb->buf, sb->len) != (ssize_t)sb->len) {
        close(fd);
        unlink(path);
        return;
    }
    close(fd);
    for (int run = 0; run < RUNS; run++) {
        char *argv[] = {bin, (char *)"config", (char *)"validate", path, NULL};
        posix_spawn_file_actions_t fa;
        uint64_t t0 = time_now_ns();
        pid_t pid;

        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        if (posix_spawn(&pid, bin, &fa, NULL, argv, environ) != 0) {
            posix_spawn_file_actions_destroy(&fa);
            break;
        }
        posix_spawn_file_actions_destroy(&fa);
        waitpid(pid, &status, 0);
        t[run] = time_now_ns() - t0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_config: gpuslice config validate failed\n");
            unlink(path);
            return;
        }
    }
    unlink(path);
    qsort(t, RUNS, sizeof(t[0]), cmp_u64);
    printf("{\"bench\":\"config_validate_cli\",\"resources\":%d,\"runs\":%d,\"p50_ms\":%.1f,"
           "\"max_ms\":%.1f,\"target_ms\":%d}\n",
           RESOURCES, RUNS, (double)t[RUNS / 2] / 1e6, (double)t[RUNS - 1] / 1e6, TARGET_MS);
}

int main(void)
{
    struct strbuf names = STRBUF_INIT, devices = STRBUF_INIT;
    int rc;

    build(&names, false);
    build(&devices, true);
    rc = bench("distinct_names", &names) | bench("split_devices", &devices);
    if (rc == 0)
        bench_cli(&names);
    strbuf_release(&names);
    strbuf_release(&devices);
    return rc;
}

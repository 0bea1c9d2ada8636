/* SPDX-License-Identifier: Apache-2.0 */
/* bench_inventory.c: what one node snapshot costs — gpu_nvml_open (dlopen + symbol
 * resolution + nvmlInit_v2) and gpu_inventory_read on every example machine, through the
 * fake NVML and the production loader. One JSON line per machine with p50/p99 of the read
 * (the daemon re-reads on every change) and the conditions. The fake's own cost is in the
 * figures: a real driver answers slower per call. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "gpu/gpu.h"

#define ITERATIONS 200

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int bench_machine(const char *lib, const char *dir, const char *file, const char *state)
{
    struct gpu_nvml_options o = {.library_path = lib};
    struct strbuf path = STRBUF_INIT;
    struct gpu_nvml *n = NULL;
    struct error err = {0};
    uint64_t t[ITERATIONS], open_ns;
    size_t gpus = 0, migs = 0;
    int r = 0;

    strbuf_printf(&path, "%s/%s", dir, file);
    setenv("FAKE_NVML_MACHINE", strbuf_str(&path), 1);
    setenv("FAKE_NVML_STATE", state, 1);
    remove(state);
    open_ns = time_now_ns();
    r = gpu_nvml_open(&o, &n, &err);
    open_ns = time_now_ns() - open_ns;
    if (r < 0)
        goto out;
    for (int i = 0; i < ITERATIONS; i++) {
        struct inv_inventory *inv = NULL;
        uint64_t start = time_now_ns();

        r = gpu_inventory_read(n, &inv, &err);
        t[i] = time_now_ns() - start;
        if (r < 0)
            goto out;
        gpus = inv->n_gpus;
        migs = 0;
        for (size_t k = 0; k < inv->n_gpus; k++)
            migs += inv->gpus[k].n_migs;
        inv_free(inv);
    }
    qsort(t, ITERATIONS, sizeof(t[0]), cmp_u64);
    printf("{\"bench\":\"inventory_read\",\"machine\":\"%s\",\"gpus\":%zu,\"mig_devices\":%zu,"
           "\"open_us\":%.1f,\"read_p50_us\":%.1f,\"read_p99_us\":%.1f,\"iterations\":%d,"
           "\"nvml\":\"fake\"}\n",
           file, gpus, migs, open_ns / 1e3, t[ITERATIONS / 2] / 1e3, t[ITERATIONS * 99 / 100] / 1e3,
           ITERATIONS);
out:
    if (r < 0)
        fprintf(stderr, "bench_inventory: %s: %s\n", file, err.msg);
    gpu_nvml_close(n);
    remove(state);
    strbuf_release(&path);
    return r;
}

int main(void)
{
    struct strbuf lib = STRBUF_INIT, dir = STRBUF_INIT, state = STRBUF_INIT;
    struct dirent *de;
    DIR *d;
    int failed = 0;

    strbuf_printf(&lib, "%s/tools/fake-nvml/libnvidia-ml.so.1", GS_BINARY_DIR);
    strbuf_printf(&dir, "%s/examples/machines", GS_SOURCE_DIR);
    strbuf_printf(&state, "%s/bench_inventory.%d.state",
                  getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    unsetenv("FAKE_NVML_FAIL");
    d = opendir(strbuf_str(&dir));
    if (!d) {
        fprintf(stderr, "bench_inventory: cannot open %s\n", strbuf_str(&dir));
        return 1;
    }
    while ((de = readdir(d)))
        if (str_endswith(de->d_name, ".yaml") &&
            bench_machine(strbuf_str(&lib), strbuf_str(&dir), de->d_name, strbuf_str(&state)) < 0)
            failed = 1;
    closedir(d);
    strbuf_release(&lib);
    strbuf_release(&dir);
    strbuf_release(&state);
    return failed;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* telemetry.c: a fake GPU's telemetry — its keys and limits (shared with the machine file's
 * `telemetry:`), the values derived when none is given — and what changes while a program
 * runs. Lines
 * appended to FAKE_NVML_EVENTS (the file XIDs come from; event sets skip these lines):
 *   telemetry <gpu index|GPU UUID> <key> <value>   keys as in the machine file's telemetry:
 *   proc <gpu index|GPU UUID|MIG UUID> <pid> <used_mib> [<sm_util>]   start or change
 *   proc <gpu index|GPU UUID|MIG UUID> <pid> exit                      end
 *   gpu <gpu index|GPU UUID> lost|back    fallen off the bus (every query of it fails
 *                                         NVML_ERROR_GPU_IS_LOST) / back after a reset
 * Each library instance applies the file in order from its start on its next call, so all
 * processes using the machine agree. Malformed lines and out-of-range values are skipped. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define LIVE_LINE_MAX 512

static struct fake_gpu *find_gpu(struct fake_machine *m, const char *who, struct fake_ci **ret_ci)
{
    unsigned idx;

    *ret_ci = NULL;
    if (parse_uint(who, &idx) == 0)
        return idx < m->n_gpus ? &m->gpus[idx] : NULL;
    return fake_find_uuid(who, ret_ci);
}

#define KEY(name, max, field, scale)                                                               \
    {                                                                                              \
        name, max, offsetof(struct fake_telemetry, field), scale                                   \
    }

const struct fake_telemetry_key fake_telemetry_keys[] = {
    KEY("gpu_util", 100, gpu_util, 1),
    KEY("mem_util", 100, mem_util, 1),
    KEY("temperature_c", 150, temperature_c, 1),
    KEY("power_w", 2000, power_mw, 1000),
    KEY("sm_clock_mhz", 5000, sm_clock_mhz, 1),
    KEY("ecc_corrected", UINT32_MAX, ecc_corrected, 1),
    KEY("ecc_uncorrected", UINT32_MAX, ecc_uncorrected, 1),
    KEY("enc_util", 100, enc_util, 1),
    KEY("dec_util", 100, dec_util, 1),
    KEY("memory_temp_c", 150, memory_temp_c, 1),
    KEY("energy_mj", UINT64_MAX / 2, energy_mj, 1),
    KEY("mem_clock_mhz", 20000, mem_clock_mhz, 1),
    KEY("pcie_replays", UINT32_MAX, pcie_replays, 1),
    KEY("remapped_correctable", UINT32_MAX, remapped_correctable, 1),
    KEY("remapped_uncorrectable", UINT32_MAX, remapped_uncorrectable, 1),
    KEY("remap_failed", 1, remap_failed, 1),
    KEY("fb_reserved_mib", 1u << 20, fb_reserved_mib, 1),
    KEY("nvlink_raw_kib", UINT64_MAX / 2, nvlink_raw_kib, 1),
    KEY("vgpu_licensed", 1, vgpu_licensed, 1),
    {NULL, 0, 0, 0},
};

/* An idle datacenter GPU; not a vGPU guest. */
const struct fake_telemetry fake_telemetry_defaults = {.temperature_c = 35,
                                                       .memory_temp_c = 40,
                                                       .power_mw = 60000,
                                                       .sm_clock_mhz = 1410,
                                                       .mem_clock_mhz = 1593,
                                                       .vgpu_licensed = FAKE_NOT_APPLICABLE};

int fake_telemetry_set(struct fake_telemetry *t, const char *key, uint64_t v)
{
    size_t k = 0;

    while (fake_telemetry_keys[k].name && strcmp(fake_telemetry_keys[k].name, key) != 0)
        k++;
    if (!fake_telemetry_keys[k].name)
        return -ENOENT;
    if (v > fake_telemetry_keys[k].max)
        return -ERANGE;
    memcpy((char *)t + fake_telemetry_keys[k].offset, &(uint64_t){v * fake_telemetry_keys[k].scale},
           sizeof(uint64_t));
    return 0;
}

struct fake_telemetry fake_telemetry_of(const struct fake_gpu *g)
{
    struct fake_telemetry t = fake_telemetry_defaults;

    if (g->has_telemetry)
        return g->tele;
    if (g->n_procs) { /* busy */
        t.gpu_util = 30;
        t.mem_util = 10;
        t.temperature_c += 10;
        t.power_mw += 90000;
    }
    return t;
}

/* A GPU's telemetry becomes explicit at its first change: the derived values are kept. */
static void apply_telemetry(struct fake_gpu *g, const char *key, const char *value)
{
    struct fake_telemetry t = fake_telemetry_of(g);
    uint64_t v;

    if (parse_uint64(value, &v) < 0 || fake_telemetry_set(&t, key, v) < 0)
        return;
    g->tele = t;
    g->has_telemetry = true;
}

static void apply_proc(struct fake_gpu *g, const struct fake_ci *ci, const char *pid_s,
                       const char *mib_s, const char *sm_s)
{
    struct fake_process *p = NULL;
    unsigned pid, sm = 0;
    uint64_t mib;

    if (parse_uint(pid_s, &pid) < 0)
        return;
    for (size_t i = 0; i < g->n_procs && !p; i++)
        if (g->procs[i].pid == pid)
            p = &g->procs[i];
    if (strcmp(mib_s, "exit") == 0) {
        if (p)
            *p = g->procs[--g->n_procs];
        return;
    }
    if (parse_uint64(mib_s, &mib) < 0 || mib >= (1u << 24) ||
        (*sm_s && (parse_uint(sm_s, &sm) < 0 || sm > 100)))
        return;
    if (!p) {
        if (g->n_procs >= FAKE_MAX_PROCS)
            return;
        p = &g->procs[g->n_procs++];
        p->pid = pid;
    }
    p->used_mib = mib;
    p->sm_util = sm;
    p->gi_id = ci ? ci->gi->id : INVALID_GPU_INSTANCE_ID;
    p->ci_id = ci ? ci->id : INVALID_GPU_INSTANCE_ID;
}

static void apply_line(struct fake_machine *m, const char *line)
{
    char verb[16], who[LIVE_LINE_MAX], a[64], b[64], c[64] = "", extra[2];
    struct fake_ci *ci;
    struct fake_gpu *g;
    int n = sscanf(line, "%15s %511s %63s %63s %63s %1s", verb, who, a, b, c, extra);

    if (n == 3 && strcmp(verb, "gpu") == 0) {
        g = find_gpu(m, who, &ci);
        if (g && !ci && (strcmp(a, "lost") == 0 || strcmp(a, "back") == 0))
            g->lost = strcmp(a, "lost") == 0;
        return;
    }
    if (n < 4 || n > 5)
        return;
    g = find_gpu(m, who, &ci);
    if (!g)
        return;
    if (strcmp(verb, "telemetry") == 0 && n == 4 && !ci)
        apply_telemetry(g, a, b);
    else if (strcmp(verb, "proc") == 0)
        apply_proc(g, ci, a, b, c);
}

static bool live_line(void *ctx, const char *line)
{
    apply_line(ctx, line);
    return false; /* every line */
}

void fake_live_refresh(struct fake_machine *m)
{
    (void)fake_lines_next(getenv("FAKE_NVML_EVENTS"), &m->live_offset, live_line, m);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* state.c: the fake NVML's MIG state file — MIG modes, GPU and compute instances — written
 * atomically after every change and read back by any process using the same machine, so
 * MIG changes persist like on hardware. One line per fact; tied to the machine file by a
 * hash of its content. The caller holds the library lock and the file lock. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define STATE_MAGIC "fake-nvml-state 1"

int fake_state_save(const struct fake_machine *m, const char *path, struct error *err)
{
    struct strbuf sb = STRBUF_INIT;
    int r;

    r = strbuf_printf(&sb, STATE_MAGIC " %016" PRIx64 "\n", m->signature);
    for (size_t i = 0; r == 0 && i < m->n_gpus; i++) {
        const struct fake_gpu *g = &m->gpus[i];
        r = strbuf_printf(&sb, "gpu %u %u %u\n", g->index, g->mig_current, g->mig_pending);
        if (r == 0 && g->compute_mode)
            r = strbuf_printf(&sb, "cm %u %u\n", g->index, g->compute_mode);
        for (size_t j = 0; r == 0 && j < FAKE_MAX_GI; j++) {
            const struct fake_gi *gi = &g->gis[j];
            if (!gi->in_use)
                continue;
            r = strbuf_printf(&sb, "gi %u %u %u %u\n", g->index, gi->id, gi->profile->id,
                              gi->start);
            for (size_t k = 0; r == 0 && k < FAKE_MAX_CI; k++) {
                const struct fake_ci *ci = &gi->cis[k];
                if (ci->in_use)
                    r = strbuf_printf(&sb, "ci %u %u %u %u %u\n", g->index, gi->id, ci->id,
                                      ci->profile_index, ci->start);
            }
        }
    }
    if (r < 0) {
        r = error_set(err, r, "out of memory writing the fake NVML state");
        goto out;
    }
    r = file_write_atomic(path, sb.buf, sb.len, 0644, err);
out:
    strbuf_release(&sb);
    return r;
}

/* GI profiles seen so far while checking, so CI lines can be checked before applying. */
typedef const struct mig_profile *seen_gis[FAKE_MAX_GPUS][FAKE_MAX_GI];

/* One line; with apply false only checks it. */
static int state_line(struct fake_machine *m, const char *line, bool apply, seen_gis *seen)
{
    unsigned v[5];
    struct fake_gpu *g;
    struct fake_gi *gi;

    if (sscanf(line, "gpu %u %u %u", &v[0], &v[1], &v[2]) == 3) {
        if (v[0] >= m->n_gpus || v[1] > 1 || v[2] > 1)
            return -EINVAL;
        g = &m->gpus[v[0]];
        if ((v[1] || v[2]) && g->model.mem_slices == 0)
            return -EINVAL;
        if (apply) {
            g->mig_current = v[1];
            g->mig_pending = v[2];
            g->compute_mode = 0; /* a "cm" line follows when it is not DEFAULT */
            fake_mig_clear(g);
        }
        return 0;
    }
    if (sscanf(line, "cm %u %u", &v[0], &v[1]) == 2) {
        if (v[0] >= m->n_gpus || v[1] > 3)
            return -EINVAL;
        if (apply)
            m->gpus[v[0]].compute_mode = v[1];
        return 0;
    }
    if (sscanf(line, "gi %u %u %u %u", &v[0], &v[1], &v[2], &v[3]) == 4) {
        const struct mig_profile *p;
        if (v[0] >= m->n_gpus || v[1] < 1 || v[1] > FAKE_MAX_GI || v[3] >= 8)
            return -EINVAL;
        g = &m->gpus[v[0]];
        p = fake_profile_by_id(&g->model, v[2]);
        if (!p || !(p->starts_mask & (1u << v[3])))
            return -EINVAL;
        (*seen)[v[0]][v[1] - 1] = p;
        if (apply) {
            gi = &g->gis[v[1] - 1];
            memset(gi, 0, sizeof(*gi));
            gi->in_use = true;
            gi->gpu = g;
            gi->id = v[1];
            gi->profile = p;
            gi->start = v[3];
        }
        return 0;
    }
    if (sscanf(line, "ci %u %u %u %u %u", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5) {
        unsigned slices, align;
        struct fake_ci *ci;
        if (v[0] >= m->n_gpus || v[1] < 1 || v[1] > FAKE_MAX_GI || v[2] >= FAKE_MAX_CI)
            return -EINVAL;
        struct fake_gi probe = {.gpu = &m->gpus[v[0]], .profile = (*seen)[v[0]][v[1] - 1]};
        if (!probe.profile || !fake_ci_shape(&probe, v[3], &slices, &align) ||
            v[4] + slices > probe.profile->compute_slices)
            return -EINVAL;
        if (!apply)
            return 0;
        gi = &m->gpus[v[0]].gis[v[1] - 1];
        ci = &gi->cis[v[2]];
        ci->kind = FAKE_KIND_MIG;
        ci->in_use = true;
        ci->gi = gi;
        ci->id = v[2];
        ci->profile_index = v[3];
        ci->start = v[4];
        ci->slices = slices;
        return 0;
    }
    return -EINVAL;
}

static int state_walk(struct fake_machine *m, char *data, bool apply)
{
    seen_gis *seen = calloc(1, sizeof(*seen));
    char *line = data, *nl;
    int r = 0;

    if (!seen)
        return -ENOMEM;

    for (; *line && r == 0; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl) {
            r = -EINVAL;
            break;
        }
        *nl = '\0';
        r = state_line(m, line, apply, seen);
        *nl = '\n';
    }
    free(seen);
    return r;
}

int fake_state_load(struct fake_machine *m, const char *path, struct error *err)
{
    char *data = NULL, *body;
    char magic[64];
    uint64_t sig = 0;
    int r;

    r = file_read_all(path, FAKE_MACHINE_MAX_BYTES, &data, NULL, err);
    if (r < 0)
        goto out;
    snprintf(magic, sizeof(magic), STATE_MAGIC " %016" PRIx64 "\n", m->signature);
    body = strchr(data, '\n');
    if (!body || sscanf(data, STATE_MAGIC " %" SCNx64, &sig) != 1) {
        r = error_set(err, -EINVAL, "'%s' is not a fake NVML state file", path);
        goto out;
    }
    if (!str_startswith(data, magic)) {
        r = error_set(err, -ESTALE, "'%s' belongs to another machine file", path);
        goto out;
    }
    body++;
    /* Check everything first so a bad file leaves the current state untouched. */
    r = state_walk(m, body, false);
    if (r == 0)
        r = state_walk(m, body, true);
    if (r < 0)
        r = error_set(err, -EINVAL,
                      "'%s' is damaged; remove it to start from the machine "
                      "file",
                      path);
out:
    free(data);
    return r;
}

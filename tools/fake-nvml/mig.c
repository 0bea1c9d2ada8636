/* SPDX-License-Identifier: Apache-2.0 */
/* mig.c: MIG rules of the fake NVML on one GPU's in-memory state — GPU-instance placement
 * and overlap on memory slices, compute instances inside a GPU instance, destroy order,
 * remaining capacity, MIG device order, names and UUIDs. Pure: no I/O, no locking (the
 * caller holds the library lock). Returns NVML codes as real NVML does (facts A, C.5). */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static unsigned span_mask(unsigned start, unsigned size)
{
    return ((1u << size) - 1u) << start;
}

static unsigned gi_used_mask(const struct fake_gpu *g)
{
    unsigned used = 0;
    for (size_t i = 0; i < FAKE_MAX_GI; i++)
        if (g->gis[i].in_use)
            used |= span_mask(g->gis[i].start, g->gis[i].profile->slices);
    return used;
}

static unsigned gi_count(const struct fake_gpu *g, const struct mig_profile *p)
{
    unsigned n = 0;
    for (size_t i = 0; i < FAKE_MAX_GI; i++)
        if (g->gis[i].in_use && g->gis[i].profile == p)
            n++;
    return n;
}

nvmlReturn_t fake_gi_create(struct fake_gpu *g, const struct mig_profile *p, unsigned start,
                            struct fake_gi **ret)
{
    unsigned used = gi_used_mask(g), chosen = FAKE_NO_START;
    struct fake_gi *slot = NULL;

    if (g->model.mem_slices == 0 || g->mig_current != NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_NOT_SUPPORTED;
    if (start != FAKE_NO_START) {
        if (start >= 32 || !(p->starts_mask & (1u << start)))
            return NVML_ERROR_INVALID_ARGUMENT;
        if (used & span_mask(start, p->slices))
            return NVML_ERROR_INSUFFICIENT_RESOURCES;
        chosen = start;
    } else {
        /* The driver's own choice is not documented; taking the highest free start
         * reproduces the guide's known issue (-cgi 19,19,14,9 fails, 9,19,14,19 works). */
        for (int s = 31; s >= 0 && chosen == FAKE_NO_START; s--)
            if ((p->starts_mask & (1u << s)) && !(used & span_mask((unsigned)s, p->slices)))
                chosen = (unsigned)s;
        if (chosen == FAKE_NO_START)
            return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    if (gi_count(g, p) >= p->max_instances)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (size_t i = 0; i < FAKE_MAX_GI && !slot; i++)
        if (!g->gis[i].in_use)
            slot = &g->gis[i];
    if (!slot)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    memset(slot, 0, sizeof(*slot));
    slot->in_use = true;
    slot->gpu = g;
    slot->id = (unsigned)(slot - g->gis) + 1;
    slot->profile = p;
    slot->start = chosen;
    *ret = slot;
    return NVML_SUCCESS;
}

static bool fake_ci_has_processes(const struct fake_gpu *g, unsigned gi_id, unsigned ci_id)
{
    for (size_t i = 0; i < g->n_procs; i++)
        if (g->procs[i].gi_id == gi_id &&
            (ci_id == INVALID_GPU_INSTANCE_ID || g->procs[i].ci_id == ci_id))
            return true;
    return false;
}

nvmlReturn_t fake_gi_destroy(struct fake_gi *gi)
{
    for (size_t i = 0; i < FAKE_MAX_CI; i++)
        if (gi->cis[i].in_use)
            return NVML_ERROR_IN_USE;
    if (fake_ci_has_processes(gi->gpu, gi->id, INVALID_GPU_INSTANCE_ID))
        return NVML_ERROR_IN_USE;
    gi->in_use = false;
    return NVML_SUCCESS;
}

unsigned fake_gi_remaining(const struct fake_gpu *g, const struct mig_profile *p)
{
    unsigned used = gi_used_mask(g), have = gi_count(g, p), n = 0, free_slots = 0;

    /* Same-size placements: taking them left to right is a maximum packing. */
    for (unsigned s = 0; s < 32; s++)
        if ((p->starts_mask & (1u << s)) && !(used & span_mask(s, p->slices))) {
            used |= span_mask(s, p->slices);
            n++;
        }
    for (size_t i = 0; i < FAKE_MAX_GI; i++)
        if (!g->gis[i].in_use)
            free_slots++;
    if (have >= p->max_instances)
        return 0;
    if (n > p->max_instances - have)
        n = p->max_instances - have;
    return n < free_slots ? n : free_slots;
}

/* CI profile index -> compute slices (facts C.3). */
static const unsigned ci_index_slices[] = {1, 2, 3, 4, 7, 8, 6};

bool fake_ci_shape(const struct fake_gi *gi, unsigned ci_index, unsigned *ret_slices,
                   unsigned *ret_align)
{
    unsigned g = gi->profile->compute_slices, c, align = 1;

    /* A 1g GI with twice the memory (REV2) offers the 1-slice CI under two profiles of one
     * shape: 1_SLICE, which mig-parted asks for, and REV1, which `nvidia-smi -cgi 15 -C`
     * creates (facts A.4; NVIDIA's DRA driver issue #1480). */
    if (gi->profile->index == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2) {
        if (ci_index != NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE &&
            ci_index != NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
            return false;
        *ret_slices = 1;
        *ret_align = 1;
        return true;
    }
    if (ci_index >= GS_ARRAY_SIZE(ci_index_slices))
        return false;
    c = ci_index_slices[ci_index];
    /* go-nvlib's rule: C <= G, and if C < G then 2C <= G + 1. */
    if (c > g || (c < g && 2 * c > g + 1))
        return false;
    while (align < c)
        align *= 2;
    *ret_slices = c;
    *ret_align = align;
    return true;
}

unsigned fake_ci_full_index(const struct fake_gi *gi)
{
    if (gi->profile->index == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2)
        return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1;
    for (unsigned i = 0; i < GS_ARRAY_SIZE(ci_index_slices); i++)
        if (ci_index_slices[i] == gi->profile->compute_slices)
            return i;
    return 0;
}

unsigned fake_ci_placements(const struct fake_gi *gi, unsigned ci_index, unsigned *starts,
                            unsigned max)
{
    unsigned c, align, n = 0;

    if (!fake_ci_shape(gi, ci_index, &c, &align))
        return 0;
    for (unsigned s = 0; s + c <= gi->profile->compute_slices; s += align) {
        if (starts && n < max)
            starts[n] = s;
        n++;
    }
    return n;
}

unsigned fake_ci_sms(const struct fake_ci *ci)
{
    const struct fake_gi *gi = ci->gi;
    const struct mig_profile *one = fake_profile_by_index(&gi->gpu->model, 0);

    if (ci->slices >= gi->profile->compute_slices || !one)
        return gi->profile->sms;
    return ci->slices * one->sms;
}

static unsigned ci_used_mask(const struct fake_gi *gi)
{
    unsigned used = 0;
    for (size_t i = 0; i < FAKE_MAX_CI; i++)
        if (gi->cis[i].in_use)
            used |= span_mask(gi->cis[i].start, gi->cis[i].slices);
    return used;
}

nvmlReturn_t fake_ci_create(struct fake_gi *gi, unsigned ci_index, unsigned start,
                            struct fake_ci **ret)
{
    unsigned starts[8], c, align, n, used = ci_used_mask(gi), chosen = FAKE_NO_START;
    struct fake_ci *slot = NULL;

    if (ci_index >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!fake_ci_shape(gi, ci_index, &c, &align))
        return NVML_ERROR_NOT_SUPPORTED;
    n = fake_ci_placements(gi, ci_index, starts, GS_ARRAY_SIZE(starts));
    for (unsigned i = 0; i < n && chosen == FAKE_NO_START; i++) {
        if (start != FAKE_NO_START && starts[i] != start)
            continue;
        if (used & span_mask(starts[i], c)) {
            if (start != FAKE_NO_START)
                return NVML_ERROR_INSUFFICIENT_RESOURCES;
            continue;
        }
        chosen = starts[i];
    }
    if (chosen == FAKE_NO_START)
        return start != FAKE_NO_START ? NVML_ERROR_INVALID_ARGUMENT
                                      : NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (size_t i = 0; i < FAKE_MAX_CI && !slot; i++)
        if (!gi->cis[i].in_use)
            slot = &gi->cis[i];
    if (!slot)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    slot->kind = FAKE_KIND_MIG;
    slot->in_use = true;
    slot->gi = gi;
    slot->id = (unsigned)(slot - gi->cis);
    slot->profile_index = ci_index;
    slot->start = chosen;
    slot->slices = c;
    *ret = slot;
    return NVML_SUCCESS;
}

nvmlReturn_t fake_ci_destroy(struct fake_ci *ci)
{
    if (fake_ci_has_processes(ci->gi->gpu, ci->gi->id, ci->id))
        return NVML_ERROR_IN_USE;
    ci->in_use = false;
    return NVML_SUCCESS;
}

unsigned fake_ci_remaining(const struct fake_gi *gi, unsigned ci_index)
{
    unsigned starts[8], c, align, n, used = ci_used_mask(gi), left = 0;

    if (!fake_ci_shape(gi, ci_index, &c, &align))
        return 0;
    n = fake_ci_placements(gi, ci_index, starts, GS_ARRAY_SIZE(starts));
    for (unsigned i = 0; i < n && i < GS_ARRAY_SIZE(starts); i++)
        if (!(used & span_mask(starts[i], c))) {
            used |= span_mask(starts[i], c);
            left++;
        }
    return left;
}

void fake_mig_clear(struct fake_gpu *g)
{
    for (size_t i = 0; i < FAKE_MAX_GI; i++)
        g->gis[i].in_use = false;
}

static bool ci_before(const struct fake_ci *a, const struct fake_ci *b)
{
    if (a->gi->start != b->gi->start)
        return a->gi->start < b->gi->start;
    if (a->gi->id != b->gi->id)
        return a->gi->id < b->gi->id;
    return a->start < b->start || (a->start == b->start && a->id < b->id);
}

size_t fake_mig_devices(struct fake_gpu *g, struct fake_ci **out, size_t max)
{
    size_t n = 0;

    for (size_t i = 0; i < FAKE_MAX_GI; i++) {
        if (!g->gis[i].in_use)
            continue;
        for (size_t j = 0; j < FAKE_MAX_CI && n < max; j++) {
            struct fake_ci *ci = &g->gis[i].cis[j];
            size_t k = n;
            if (!ci->in_use)
                continue;
            n++;
            for (; k > 0 && ci_before(ci, out[k - 1]); k--) /* insertion sort */
                out[k] = out[k - 1];
            out[k] = ci;
        }
    }
    return n;
}

void fake_mig_uuid(const struct fake_ci *ci, char *buf, size_t size)
{
    const struct fake_gpu *g = ci->gi->gpu;
    unsigned ids[2] = {ci->gi->id, ci->id};
    uint64_t a = fake_hash(fake_hash(0, g->uuid, strlen(g->uuid)), ids, sizeof(ids));

    fake_uuid_format(buf, size, "MIG-", a, fake_hash(a, "mig", 3));
}

void fake_mig_profile_name(const struct fake_ci *ci, char *buf, size_t size)
{
    const struct mig_profile *p = ci->gi->profile;

    if (ci->slices < p->compute_slices)
        snprintf(buf, size, "%uc.%s", ci->slices, p->name);
    else
        str_copy(buf, p->name, size);
}

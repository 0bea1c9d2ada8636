/* SPDX-License-Identifier: Apache-2.0 */
/* nvml_mig.c: the exported MIG entry points of the fake library — mode, profiles,
 * placements, GPU and compute instances, MIG device handles. Argument checks and NVML return
 * codes live here; the placement rules are in mig.c. Mutations hold the state-file lock and
 * are saved by fake_leave() so other processes see them. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define MIG_ENTER(dev, mutate)                                                                     \
    struct fake_gpu *g = NULL;                                                                     \
    struct fake_ci *ci = NULL;                                                                     \
    nvmlReturn_t rc = fake_enter(__func__, (dev), (mutate), &g, &ci);                              \
    if (rc != NVML_SUCCESS)                                                                        \
    return rc

/* A GPU-instance handle is the address of a GI slot inside a GPU. */
static struct fake_gi *gi_resolve(nvmlGpuInstance_t h)
{
    struct fake_machine *m = fake_current();
    const char *p = (const char *)h;

    for (size_t i = 0; h && i < m->n_gpus; i++) {
        const char *b = (const char *)m->gpus[i].gis;
        if (p >= b && p < b + sizeof(m->gpus[i].gis) &&
            (size_t)(p - b) % sizeof(struct fake_gi) == 0) {
            struct fake_gi *gi = (struct fake_gi *)h;
            return gi->in_use ? gi : NULL;
        }
    }
    return NULL;
}

/* Prologue for GI calls: faults may name the GI's GPU ("fn@gpu=code"). */
static nvmlReturn_t gi_enter(const char *fn, nvmlGpuInstance_t h, bool mutate, struct fake_gi **ret)
{
    struct fake_gi *gi;
    nvmlReturn_t rc = fake_enter(fn, NULL, mutate, NULL, NULL);

    if (rc != NVML_SUCCESS)
        return rc;
    gi = gi_resolve(h);
    if (!gi)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (fake_fault(fn, (int)gi->gpu->index, &rc))
        return fake_leave(rc);
    *ret = gi;
    return NVML_SUCCESS;
}

static bool mig_capable(const struct fake_gpu *g, const struct fake_ci *ci)
{
    return !ci && g->model.mem_slices != 0;
}

static bool mig_on(const struct fake_gpu *g)
{
    return g->mig_current == NVML_DEVICE_MIG_ENABLE;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    MIG_ENTER(device, false);
    if (!currentMode || !pendingMode)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!mig_capable(g, ci))
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    *currentMode = g->mig_current;
    *pendingMode = g->mig_pending;
    return fake_leave(NVML_SUCCESS);
}

static bool has_plain_processes(const struct fake_gpu *g)
{
    for (size_t i = 0; i < g->n_procs; i++)
        if (g->procs[i].gi_id == INVALID_GPU_INSTANCE_ID)
            return true;
    return false;
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t *activationStatus)
{
    MIG_ENTER(device, true);
    if (!activationStatus || mode > NVML_DEVICE_MIG_ENABLE || ci)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!mig_capable(g, ci))
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    g->mig_pending = mode;
    /* There is no GPU reset to wait for: an idle GPU switches at once. A GPU running
     * processes outside MIG keeps the change pending, as a busy GPU does (IN_USE). */
    if (mode != g->mig_current && has_plain_processes(g)) {
        *activationStatus = NVML_ERROR_IN_USE;
        return fake_leave(NVML_SUCCESS);
    }
    if (mode != g->mig_current && g->mig_needs_reset) {
        *activationStatus = NVML_ERROR_RESET_REQUIRED; /* takes effect at the next reboot */
        return fake_leave(NVML_SUCCESS);
    }
    if (mode != g->mig_current)
        fake_mig_clear(g);
    g->mig_current = mode;
    *activationStatus = NVML_SUCCESS;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    MIG_ENTER(device, false);
    (void)g;
    if (!isMigDevice)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *isMigDevice = ci != NULL;
    return fake_leave(NVML_SUCCESS);
}

static unsigned max_mig_devices(const struct fake_gpu *g)
{
    return g->model.mem_slices && mig_on(g) ? g->model.compute_slices : 0;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    MIG_ENTER(device, false);
    if (!count || ci)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *count = max_mig_devices(g);
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice)
{
    struct fake_ci *devs[FAKE_MAX_GI * FAKE_MAX_CI];
    size_t n;
    MIG_ENTER(device, false);

    if (!migDevice || ci)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!mig_capable(g, ci))
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    if (index >= max_mig_devices(g))
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    n = fake_mig_devices(g, devs, GS_ARRAY_SIZE(devs));
    if (index >= n)
        return fake_leave(NVML_ERROR_NOT_FOUND);
    *migDevice = (nvmlDevice_t)devs[index];
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device)
{
    MIG_ENTER(migDevice, false);
    if (!device || !ci)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *device = (nvmlDevice_t)g;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    MIG_ENTER(device, false);
    (void)g;
    if (!id)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    *id = ci->gi->id;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    MIG_ENTER(device, false);
    (void)g;
    if (!id)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    *id = ci->id;
    return fake_leave(NVML_SUCCESS);
}

/* ---- GPU-instance profiles ---------------------------------------------------------------- */

/* The fields the v1, v2 and v3 profile-info structs share (they differ in layout). */
#define GI_INFO_SET(info, p)                                                                       \
    do {                                                                                           \
        (info)->id = (p)->id;                                                                      \
        (info)->sliceCount = (p)->compute_slices;                                                  \
        (info)->instanceCount = (p)->max_instances;                                                \
        (info)->multiprocessorCount = (p)->sms;                                                    \
        (info)->copyEngineCount = (p)->ce;                                                         \
        (info)->decoderCount = (p)->dec;                                                           \
        (info)->encoderCount = (p)->enc;                                                           \
        (info)->jpegCount = (p)->jpeg;                                                             \
        (info)->ofaCount = (p)->ofa;                                                               \
        (info)->memorySizeMB = (p)->memory_mib;                                                    \
    } while (0)

static nvmlReturn_t profile_lookup(const struct fake_gpu *g, const struct fake_ci *ci,
                                   unsigned index, const struct mig_profile **ret)
{
    if (ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig_capable(g, ci))
        return NVML_ERROR_NOT_SUPPORTED;
    if (index >= fake_gi_profile_count(fake_current()))
        return NVML_ERROR_INVALID_ARGUMENT;
    *ret = fake_profile_by_index(&g->model, index);
    return *ret ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
    const struct mig_profile *p = NULL;
    MIG_ENTER(device, false);

    if (!info)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = profile_lookup(g, ci, profile, &p);
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    memset(info, 0, sizeof(*info));
    GI_INFO_SET(info, p);
    return fake_leave(NVML_SUCCESS);
}

static nvmlReturn_t profile_by_id(const struct fake_gpu *g, const struct fake_ci *ci, unsigned id,
                                  const struct mig_profile **ret);

/* The V calls by index or (by_id) by profile ID. */
static nvmlReturn_t profile_info_v(const char *fn, nvmlDevice_t device, unsigned int key,
                                   bool by_id, nvmlGpuInstanceProfileInfo_v2_t *info)
{
    const struct mig_profile *p = NULL;
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(fn, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!info || (info->version != nvmlGpuInstanceProfileInfo_v2 &&
                  info->version != nvmlGpuInstanceProfileInfo_v3))
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    /* MIG on or off: a real H200 with MIG disabled lists every profile (real-h200.md) */
    rc = by_id ? profile_by_id(g, ci, key, &p) : profile_lookup(g, ci, key, &p);
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    if (info->version == nvmlGpuInstanceProfileInfo_v3) {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)info;
        memset(v3, 0, sizeof(*v3));
        v3->version = nvmlGpuInstanceProfileInfo_v3;
        GI_INFO_SET(v3, p);
        snprintf(v3->name, sizeof(v3->name), "MIG %s", p->name);
        return fake_leave(NVML_SUCCESS);
    }
    memset(info, 0, sizeof(*info));
    info->version = nvmlGpuInstanceProfileInfo_v2;
    GI_INFO_SET(info, p);
    snprintf(info->name, sizeof(info->name), "MIG %s", p->name);
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info)
{
    return profile_info_v(__func__, device, profile, false, info);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t device, unsigned int profileId,
                                                      nvmlGpuInstanceProfileInfo_v2_t *info)
{
    return profile_info_v(__func__, device, profileId, true, info);
}

/* Profile by ID on a MIG-capable parent handle. */
static nvmlReturn_t profile_by_id(const struct fake_gpu *g, const struct fake_ci *ci, unsigned id,
                                  const struct mig_profile **ret)
{
    if (ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig_capable(g, ci))
        return NVML_ERROR_NOT_SUPPORTED;
    *ret = fake_profile_by_id(&g->model, id);
    return *ret ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t *placements,
                                                           unsigned int *count)
{
    const struct mig_profile *p = NULL;
    unsigned n = 0;
    MIG_ENTER(device, false);

    if (!count)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = profile_by_id(g, ci, profileId, &p);
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    for (unsigned s = 0; s < 32; s++)
        if (p->starts_mask & (1u << s)) {
            if (placements && n < *count) {
                placements[n].start = s;
                placements[n].size = p->slices;
            }
            n++;
        }
    rc = placements && n > *count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *count = n;
    return fake_leave(rc);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                       unsigned int *count)
{
    const struct mig_profile *p = NULL;
    MIG_ENTER(device, false);

    if (!count)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = profile_by_id(g, ci, profileId, &p);
    if (rc == NVML_SUCCESS && !mig_on(g))
        rc = NVML_ERROR_NOT_SUPPORTED;
    if (rc == NVML_SUCCESS)
        *count = fake_gi_remaining(g, p);
    return fake_leave(rc);
}

static nvmlReturn_t gi_create(nvmlDevice_t device, const char *fn, unsigned profileId,
                              const nvmlGpuInstancePlacement_t *placement, bool with_placement,
                              nvmlGpuInstance_t *gpuInstance)
{
    const struct mig_profile *p = NULL;
    struct fake_gi *gi = NULL;
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(fn, device, true, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!gpuInstance || (with_placement && !placement))
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = profile_by_id(g, ci, profileId, &p);
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    if (!mig_on(g))
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    if (with_placement && placement->size != p->slices)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = fake_gi_create(g, p, with_placement ? placement->start : FAKE_NO_START, &gi);
    if (rc == NVML_SUCCESS)
        *gpuInstance = (nvmlGpuInstance_t)gi;
    return fake_leave(rc);
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                         nvmlGpuInstance_t *gpuInstance)
{
    return gi_create(device, __func__, profileId, NULL, false, gpuInstance);
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gpuInstance)
{
    return gi_create(device, __func__, profileId, placement, true, gpuInstance);
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count)
{
    const struct mig_profile *p = NULL;
    unsigned n = 0;
    MIG_ENTER(device, false);

    if (!count)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = profile_by_id(g, ci, profileId, &p);
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    /* MIG off: SUCCESS with none, as a real H200 answers (the header's prose says
     * NOT_SUPPORTED; the hardware does not) */
    for (size_t i = 0; mig_on(g) && i < FAKE_MAX_GI; i++) /* slot order is id order */
        if (g->gis[i].in_use && g->gis[i].profile == p) {
            if (gpuInstances && n < *count)
                gpuInstances[n] = (nvmlGpuInstance_t)&g->gis[i];
            n++;
        }
    rc = n > 0 && (!gpuInstances || n > *count) ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *count = n;
    return fake_leave(rc);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance)
{
    MIG_ENTER(device, false);
    if (!gpuInstance || ci)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!mig_capable(g, ci) || !mig_on(g))
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    if (id < 1 || id > FAKE_MAX_GI || !g->gis[id - 1].in_use)
        return fake_leave(NVML_ERROR_NOT_FOUND);
    *gpuInstance = (nvmlGpuInstance_t)&g->gis[id - 1];
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
    struct fake_gi *gi = NULL;
    nvmlReturn_t rc = gi_enter(__func__, gpuInstance, false, &gi);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!info)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    info->device = (nvmlDevice_t)gi->gpu;
    info->id = gi->id;
    info->profileId = gi->profile->id;
    info->placement.start = gi->start;
    info->placement.size = gi->profile->slices;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance)
{
    struct fake_gi *gi = NULL;
    nvmlReturn_t rc = gi_enter(__func__, gpuInstance, true, &gi);

    if (rc != NVML_SUCCESS)
        return rc;
    return fake_leave(fake_gi_destroy(gi));
}

/* ---- compute instances ------------------------------------------------------------------- */

static nvmlReturn_t ci_profile_check(const struct fake_gi *gi, unsigned profile,
                                     unsigned engProfile, unsigned *ret_slices)
{
    unsigned align;

    if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engProfile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    return fake_ci_shape(gi, profile, ret_slices, &align) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

struct ci_info {
    unsigned slices, instances, sms;
};

static void ci_info_fill(const struct fake_gi *gi, unsigned profile, unsigned slices,
                         struct ci_info *out)
{
    const struct mig_profile *one = fake_profile_by_index(&gi->gpu->model, 0);

    out->slices = slices;
    out->instances = fake_ci_placements(gi, profile, NULL, 0);
    out->sms = slices >= gi->profile->compute_slices || !one ? gi->profile->sms : slices * one->sms;
}

#define CI_INFO_SET(info, profile, ci_i, p)                                                        \
    do {                                                                                           \
        (info)->id = (profile);                                                                    \
        (info)->sliceCount = (ci_i).slices;                                                        \
        (info)->instanceCount = (ci_i).instances;                                                  \
        (info)->multiprocessorCount = (ci_i).sms;                                                  \
        (info)->sharedCopyEngineCount = (p)->ce;                                                   \
        (info)->sharedDecoderCount = (p)->dec;                                                     \
        (info)->sharedEncoderCount = (p)->enc;                                                     \
        (info)->sharedJpegCount = (p)->jpeg;                                                       \
        (info)->sharedOfaCount = (p)->ofa;                                                         \
    } while (0)

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info)
{
    struct fake_gi *gi = NULL;
    struct ci_info cinfo;
    unsigned slices = 0;
    nvmlReturn_t rc = gi_enter(__func__, gpuInstance, false, &gi);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!info)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = ci_profile_check(gi, profile, engProfile, &slices);
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    ci_info_fill(gi, profile, slices, &cinfo);
    memset(info, 0, sizeof(*info));
    CI_INFO_SET(info, profile, cinfo, gi->profile);
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t
nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                              unsigned int engProfile,
                                              nvmlComputeInstanceProfileInfo_v2_t *info)
{
    struct fake_gi *gi = NULL;
    struct ci_info cinfo;
    unsigned slices = 0, version;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    nvmlReturn_t rc = gi_enter(__func__, gpuInstance, false, &gi);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!info || (info->version != nvmlComputeInstanceProfileInfo_v2 &&
                  info->version != nvmlComputeInstanceProfileInfo_v3))
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = ci_profile_check(gi, profile, engProfile, &slices);
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    ci_info_fill(gi, profile, slices, &cinfo);
    if (slices < gi->profile->compute_slices)
        snprintf(name, sizeof(name), "MIG %uc.%s", slices, gi->profile->name);
    else
        snprintf(name, sizeof(name), "MIG %s", gi->profile->name);
    version = info->version;
    if (version == nvmlComputeInstanceProfileInfo_v3) {
        nvmlComputeInstanceProfileInfo_v3_t *v3 = (nvmlComputeInstanceProfileInfo_v3_t *)info;
        memset(v3, 0, sizeof(*v3));
        CI_INFO_SET(v3, profile, cinfo, gi->profile);
        str_copy(v3->name, name, sizeof(v3->name));
    } else {
        memset(info, 0, sizeof(*info));
        CI_INFO_SET(info, profile, cinfo, gi->profile);
        str_copy(info->name, name, sizeof(info->name));
    }
    info->version = version;
    return fake_leave(NVML_SUCCESS);
}

/* Prologue of the per-CI-profile queries: a live GI, a count pointer, a CI profile the GI
 * offers. Returns with the library lock held only on NVML_SUCCESS. */
static nvmlReturn_t ci_query_enter(const char *fn, nvmlGpuInstance_t h, unsigned profileId,
                                   const unsigned *count, struct fake_gi **ret_gi,
                                   unsigned *ret_slices)
{
    nvmlReturn_t rc = gi_enter(fn, h, false, ret_gi);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = ci_profile_check(*ret_gi, profileId, 0, ret_slices);
    return rc == NVML_SUCCESS ? NVML_SUCCESS : fake_leave(rc);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                unsigned int profileId,
                                                                unsigned int *count)
{
    struct fake_gi *gi = NULL;
    unsigned slices = 0;
    nvmlReturn_t rc = ci_query_enter(__func__, gpuInstance, profileId, count, &gi, &slices);

    if (rc != NVML_SUCCESS)
        return rc;
    *count = fake_ci_remaining(gi, profileId);
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    nvmlComputeInstancePlacement_t *placements, unsigned int *count)
{
    struct fake_gi *gi = NULL;
    unsigned starts[8], slices = 0, n;
    nvmlReturn_t rc = ci_query_enter(__func__, gpuInstance, profileId, count, &gi, &slices);

    if (rc != NVML_SUCCESS)
        return rc;
    n = fake_ci_placements(gi, profileId, starts, GS_ARRAY_SIZE(starts));
    for (unsigned i = 0; placements && i < n && i < *count && i < GS_ARRAY_SIZE(starts); i++) {
        placements[i].start = starts[i];
        placements[i].size = slices;
    }
    rc = placements && n > *count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *count = n;
    return fake_leave(rc);
}

static nvmlReturn_t ci_create(nvmlGpuInstance_t gpuInstance, const char *fn, unsigned profileId,
                              const nvmlComputeInstancePlacement_t *placement, bool with_placement,
                              nvmlComputeInstance_t *out)
{
    struct fake_gi *gi = NULL;
    struct fake_ci *ci = NULL;
    unsigned slices = 0;
    nvmlReturn_t rc = gi_enter(fn, gpuInstance, true, &gi);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!out || (with_placement && !placement))
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = ci_profile_check(gi, profileId, 0, &slices);
    if (rc == NVML_SUCCESS && with_placement && placement->size != slices)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)
        rc = fake_ci_create(gi, profileId, with_placement ? placement->start : FAKE_NO_START, &ci);
    if (rc == NVML_SUCCESS)
        *out = (nvmlComputeInstance_t)ci;
    return fake_leave(rc);
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t *computeInstance)
{
    return ci_create(gpuInstance, __func__, profileId, NULL, false, computeInstance);
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    const nvmlComputeInstancePlacement_t *placement, nvmlComputeInstance_t *computeInstance)
{
    return ci_create(gpuInstance, __func__, profileId, placement, true, computeInstance);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances,
                                                unsigned int *count)
{
    struct fake_gi *gi = NULL;
    unsigned n = 0, slices = 0;
    nvmlReturn_t rc = gi_enter(__func__, gpuInstance, false, &gi);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = ci_profile_check(gi, profileId, 0, &slices);
    if (rc == NVML_ERROR_NOT_SUPPORTED)
        rc = NVML_SUCCESS; /* a profile the GI does not offer simply has no instances */
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    for (size_t i = 0; i < FAKE_MAX_CI; i++)
        if (gi->cis[i].in_use && gi->cis[i].profile_index == profileId) {
            if (computeInstances && n < *count)
                computeInstances[n] = (nvmlComputeInstance_t)&gi->cis[i];
            n++;
        }
    rc = n > 0 && (!computeInstances || n > *count) ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *count = n;
    return fake_leave(rc);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t *computeInstance)
{
    struct fake_gi *gi = NULL;
    nvmlReturn_t rc = gi_enter(__func__, gpuInstance, false, &gi);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!computeInstance)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (id >= FAKE_MAX_CI || !gi->cis[id].in_use)
        return fake_leave(NVML_ERROR_NOT_FOUND);
    *computeInstance = (nvmlComputeInstance_t)&gi->cis[id];
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t *info)
{
    MIG_ENTER((nvmlDevice_t)computeInstance, false);
    if (!info || !ci)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    info->device = (nvmlDevice_t)g;
    info->gpuInstance = (nvmlGpuInstance_t)ci->gi;
    info->id = ci->id;
    info->profileId = ci->profile_index;
    info->placement.start = ci->start;
    info->placement.size = ci->slices;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
    MIG_ENTER((nvmlDevice_t)computeInstance, true);
    (void)g;
    if (!ci)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    return fake_leave(fake_ci_destroy(ci));
}

/* SPDX-License-Identifier: Apache-2.0 */
/* mig.c: reading and changing a GPU's MIG layout through NVML — the mode, the GPU instances
 * with their placements, and their compute instances (what mig-parted's checkpoint holds),
 * and the mutations an apply needs: set the mode, clear, create a GPU instance at an
 * explicit placement with its full compute instance, restore a saved state. Every mutation
 * goes through gpu_mig_ops so a dry run prints the exact NVML calls instead of making
 * them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpu/internal.h"

static int need(const struct gpu_nvml *n, const void *fn, const char *name, struct error *err)
{
    if (fn)
        return 0;
    return error_set(err, -EOPNOTSUPP,
                     "%s: the NVML library %s lacks %s (driver older than R470?), MIG cannot be "
                     "changed with it",
                     "MIG", n->path ? n->path : "", name);
}

static int handle(struct gpu_nvml *n, unsigned index, nvmlDevice_t *dev, struct error *err)
{
    char where[32];
    nvmlReturn_t rc = n->nvmlDeviceGetHandleByIndex_v2(index, dev);
    snprintf(where, sizeof(where), "GPU %u", index);
    return rc == NVML_SUCCESS ? 0
                              : gpu__nvml_fail(n, err, rc, "nvmlDeviceGetHandleByIndex_v2", where);
}

static void op(const struct gpu_mig_ops *ops, const char *fmt, ...) GS_PRINTF(2, 3);
static void op(const struct gpu_mig_ops *ops, const char *fmt, ...)
{
    char line[256];
    va_list ap;

    if (!ops || !ops->log)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    ops->log(ops->userdata, line);
}

static bool dry(const struct gpu_mig_ops *ops)
{
    return ops && ops->dry_run;
}

int gpu_mig_count(struct gpu_nvml *n, unsigned *ret, struct error *err)
{
    nvmlReturn_t rc = n->nvmlDeviceGetCount_v2(ret);
    return rc == NVML_SUCCESS ? 0 : gpu__nvml_fail(n, err, rc, "nvmlDeviceGetCount_v2", "node");
}

/* The compute instances of gi, by profile index. */
static int read_cis(struct gpu_nvml *n, nvmlGpuInstance_t gi, struct gpu_mig_gi *out,
                    const char *where, struct error *err)
{
    out->n_cis = 0;
    if (!n->nvmlGpuInstanceGetComputeInstances || !n->nvmlComputeInstanceGetInfo_v2)
        return 0;
    for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; p++) {
        nvmlComputeInstance_t cis[GPU_MIG_MAX_CI];
        unsigned count = GPU_MIG_MAX_CI;
        nvmlReturn_t rc = n->nvmlGpuInstanceGetComputeInstances(gi, p, cis, &count);
        if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT ||
            rc == NVML_ERROR_NOT_FOUND)
            continue;
        if (rc != NVML_SUCCESS)
            return gpu__nvml_fail(n, err, rc, "nvmlGpuInstanceGetComputeInstances", where);
        for (unsigned k = 0; k < count && out->n_cis < GPU_MIG_MAX_CI; k++) {
            nvmlComputeInstanceInfo_t info;
            memset(&info, 0, sizeof(info));
            rc = n->nvmlComputeInstanceGetInfo_v2(cis[k], &info);
            if (rc != NVML_SUCCESS)
                return gpu__nvml_fail(n, err, rc, "nvmlComputeInstanceGetInfo_v2", where);
            out->cis[out->n_cis++] = (struct gpu_mig_ci){
                .profile_id = p,
                .eng_profile_id = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                .start = info.placement.start,
                .size = info.placement.size,
                .ci_id = info.id,
            };
        }
    }
    return 0;
}

int gpu_mig_state_read(struct gpu_nvml *n, unsigned index, struct gpu_mig_state *ret,
                       struct error *err)
{
    struct gpu_mig_state s = {.index = index};
    nvmlDevice_t dev;
    unsigned cur = 0, pend = 0;
    char where[32], buf[96];
    nvmlPciInfo_t pci;
    nvmlReturn_t rc;
    int r;

    snprintf(where, sizeof(where), "GPU %u", index);
    r = handle(n, index, &dev, err);
    if (r < 0)
        return r;
    memset(buf, 0, sizeof(buf));
    rc = n->nvmlDeviceGetUUID(dev, buf, sizeof(buf));
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetUUID", where);
    str_copy(s.uuid, buf, sizeof(s.uuid));
    memset(buf, 0, sizeof(buf));
    rc = n->nvmlDeviceGetName(dev, buf, sizeof(buf));
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetName", where);
    str_copy(s.name, buf, sizeof(s.name));
    memset(&pci, 0, sizeof(pci));
    rc = n->nvmlDeviceGetPciInfo_v3(dev, &pci);
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetPciInfo_v3", where);
    s.pci_device_id = pci.pciDeviceId;
    pci.busId[sizeof(pci.busId) - 1] = '\0';
    str_copy(s.bus_id, pci.busId, sizeof(s.bus_id));
    rc = n->nvmlDeviceGetMigMode ? n->nvmlDeviceGetMigMode(dev, &cur, &pend)
                                 : NVML_ERROR_NOT_SUPPORTED;
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
        *ret = s; /* not MIG capable */
        return 0;
    }
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetMigMode", where);
    s.capable = true;
    s.enabled = cur == NVML_DEVICE_MIG_ENABLE;
    s.pending_enabled = pend == NVML_DEVICE_MIG_ENABLE;
    if (!s.enabled) {
        *ret = s;
        return 0;
    }
    r = need(n, (const void *)n->nvmlDeviceGetGpuInstances, "nvmlDeviceGetGpuInstances", err);
    if (r < 0)
        return r;
    for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; p++) {
        nvmlGpuInstanceProfileInfo_t pinfo;
        nvmlGpuInstance_t gis[GPU_MIG_MAX_GI];
        unsigned count = GPU_MIG_MAX_GI;
        memset(&pinfo, 0, sizeof(pinfo));
        rc = n->nvmlDeviceGetGpuInstanceProfileInfo(dev, p, &pinfo);
        if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT)
            continue;
        if (rc != NVML_SUCCESS)
            return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetGpuInstanceProfileInfo", where);
        rc = n->nvmlDeviceGetGpuInstances(dev, pinfo.id, gis, &count);
        if (rc == NVML_ERROR_NOT_FOUND)
            continue;
        if (rc != NVML_SUCCESS)
            return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetGpuInstances", where);
        for (unsigned k = 0; k < count && s.n_gis < GPU_MIG_MAX_GI; k++) {
            nvmlGpuInstanceInfo_t info;
            struct gpu_mig_gi *g = &s.gis[s.n_gis];
            memset(&info, 0, sizeof(info));
            rc = n->nvmlGpuInstanceGetInfo(gis[k], &info);
            if (rc != NVML_SUCCESS)
                return gpu__nvml_fail(n, err, rc, "nvmlGpuInstanceGetInfo", where);
            *g = (struct gpu_mig_gi){.profile_id = pinfo.id,
                                     .start = info.placement.start,
                                     .size = info.placement.size,
                                     .gi_id = info.id};
            r = read_cis(n, gis[k], g, where, err);
            if (r < 0)
                return r;
            s.n_gis++;
        }
    }
    *ret = s;
    return 0;
}

int gpu_mig_set_mode(struct gpu_nvml *n, unsigned index, bool enable, const struct gpu_mig_ops *ops,
                     bool *ret_pending, struct error *err)
{
    nvmlDevice_t dev;
    nvmlReturn_t rc, activation = NVML_SUCCESS;
    char where[32];
    int r;

    *ret_pending = false;
    op(ops, "nvmlDeviceSetMigMode(GPU %u, %s)", index,
       enable ? "NVML_DEVICE_MIG_ENABLE" : "NVML_DEVICE_MIG_DISABLE");
    if (dry(ops))
        return 0;
    snprintf(where, sizeof(where), "GPU %u", index);
    r = need(n, (const void *)n->nvmlDeviceSetMigMode, "nvmlDeviceSetMigMode", err);
    if (r == 0)
        r = handle(n, index, &dev, err);
    if (r < 0)
        return r;
    rc = n->nvmlDeviceSetMigMode(dev, enable ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE,
                                 &activation);
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(n, err, rc, "nvmlDeviceSetMigMode", where);
    /* the mode takes effect at the next GPU reset when the GPU is in use (IN_USE) or the
     * platform needs one (RESET_REQUIRED) */
    *ret_pending = activation != NVML_SUCCESS;
    return 0;
}

int gpu_mig_clear(struct gpu_nvml *n, unsigned index, const struct gpu_mig_state *cur,
                  const struct gpu_mig_ops *ops, struct error *err)
{
    nvmlDevice_t dev;
    char where[32];
    int r = 0;

    snprintf(where, sizeof(where), "GPU %u", index);
    for (size_t k = 0; k < cur->n_gis; k++) {
        for (size_t c = 0; c < cur->gis[k].n_cis; c++)
            op(ops, "nvmlComputeInstanceDestroy(GPU %u, GI %u, CI %u)", index, cur->gis[k].gi_id,
               cur->gis[k].cis[c].ci_id);
        op(ops, "nvmlGpuInstanceDestroy(GPU %u, GI %u)", index, cur->gis[k].gi_id);
    }
    if (dry(ops) || cur->n_gis == 0)
        return 0;
    r = handle(n, index, &dev, err);
    for (size_t k = 0; r == 0 && k < cur->n_gis; k++) {
        nvmlGpuInstance_t gi;
        nvmlReturn_t rc = n->nvmlDeviceGetGpuInstanceById(dev, cur->gis[k].gi_id, &gi);
        if (rc != NVML_SUCCESS)
            return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetGpuInstanceById", where);
        for (size_t c = 0; c < cur->gis[k].n_cis; c++) {
            nvmlComputeInstance_t ci;
            rc = n->nvmlGpuInstanceGetComputeInstanceById(gi, cur->gis[k].cis[c].ci_id, &ci);
            if (rc == NVML_SUCCESS)
                rc = n->nvmlComputeInstanceDestroy(ci);
            if (rc != NVML_SUCCESS)
                return gpu__nvml_fail(n, err, rc, "nvmlComputeInstanceDestroy", where);
        }
        rc = n->nvmlGpuInstanceDestroy(gi);
        if (rc != NVML_SUCCESS)
            return gpu__nvml_fail(n, err, rc, "nvmlGpuInstanceDestroy", where);
    }
    return r;
}

/* The compute instance profile that spans the whole GPU instance: the first index whose
 * slice count is the GI's (go-nvlib/mig-parted pick the same for a plain profile). */
/* The compute-instance profile of `slices` the GPU instance offers (the first, so a 1g.24gb
 * GPU instance gets its REV1 1-slice profile). */
static int ci_profile_for(struct gpu_nvml *n, nvmlGpuInstance_t gi, unsigned slices, unsigned *ret,
                          const char *where, struct error *err)
{
    for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; p++) {
        nvmlComputeInstanceProfileInfo_t info;
        memset(&info, 0, sizeof(info));
        if (n->nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, p, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info) != NVML_SUCCESS)
            continue;
        if (info.sliceCount == slices) {
            *ret = info.id;
            return 0;
        }
    }
    return error_set(err, -ENOENT, "%s: the GPU instance has no %u-slice compute instance profile",
                     where, slices);
}

int gpu_mig_create(struct gpu_nvml *n, unsigned index, const struct gpu_mig_gi *g,
                   const struct gpu_mig_ops *ops, struct error *err)
{
    nvmlGpuInstancePlacement_t pl = {.start = g->start, .size = g->size};
    nvmlComputeInstance_t made[GPU_MIG_MAX_CI];
    nvmlGpuInstance_t gi;
    nvmlDevice_t dev;
    nvmlReturn_t rc;
    size_t n_made = 0;
    char where[64];
    int r;

    op(ops, "nvmlDeviceCreateGpuInstanceWithPlacement(GPU %u, profile %u, {start %u, size %u})",
       index, g->profile_id, g->start, g->size);
    for (size_t c = 0; c < g->n_cis; c++) {
        if (g->cis[c].size)
            op(ops,
               "nvmlGpuInstanceCreateComputeInstanceWithPlacement(GPU %u, new GI, %u-slice "
               "profile, {start %u, size %u})",
               index, g->cis[c].size, g->cis[c].start, g->cis[c].size);
        else
            op(ops, "nvmlGpuInstanceCreateComputeInstance(GPU %u, new GI, profile %u)", index,
               g->cis[c].profile_id);
    }
    if (dry(ops))
        return 0;
    snprintf(where, sizeof(where), "GPU %u profile %u at %u:%u", index, g->profile_id, g->start,
             g->size);
    r = need(n, (const void *)n->nvmlDeviceCreateGpuInstanceWithPlacement,
             "nvmlDeviceCreateGpuInstanceWithPlacement", err);
    if (r == 0)
        r = handle(n, index, &dev, err);
    if (r < 0)
        return r;
    rc = n->nvmlDeviceCreateGpuInstanceWithPlacement(dev, g->profile_id, &pl, &gi);
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(n, err, rc, "nvmlDeviceCreateGpuInstanceWithPlacement", where);
    for (size_t c = 0; r == 0 && c < g->n_cis && c < GPU_MIG_MAX_CI; c++) {
        const struct gpu_mig_ci *want = &g->cis[c];
        nvmlComputeInstancePlacement_t cpl = {.start = want->start, .size = want->size};
        unsigned profile = want->profile_id;
        /* placed (sizes known): the profile of that size; a checkpoint without placements
         * (mig-parted's) names its profile and is created unplaced */
        if (want->size)
            r = ci_profile_for(n, gi, want->size, &profile, where, err);
        if (r < 0)
            break;
        rc = want->size && n->nvmlGpuInstanceCreateComputeInstanceWithPlacement
                 ? n->nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, profile, &cpl,
                                                                        &made[n_made])
                 : n->nvmlGpuInstanceCreateComputeInstance(gi, profile, &made[n_made]);
        if (rc != NVML_SUCCESS)
            r = gpu__nvml_fail(n, err, rc, "nvmlGpuInstanceCreateComputeInstance", where);
        else
            n_made++;
    }
    if (r < 0) { /* no half-made instance left behind */
        while (n_made > 0)
            (void)n->nvmlComputeInstanceDestroy(made[--n_made]);
        (void)n->nvmlGpuInstanceDestroy(gi);
    }
    return r;
}

int gpu_mig_restore(struct gpu_nvml *n, const struct gpu_mig_state *want,
                    const struct gpu_mig_ops *ops, struct error *err)
{
    struct gpu_mig_state cur;
    bool pending = false;
    int r = gpu_mig_state_read(n, want->index, &cur, err);

    if (r < 0 || !cur.capable)
        return r;
    if (cur.enabled)
        r = gpu_mig_clear(n, want->index, &cur, ops, err);
    if (r == 0 && cur.enabled != want->enabled)
        r = gpu_mig_set_mode(n, want->index, want->enabled, ops, &pending, err);
    if (r == 0 && pending)
        return error_set(err, -EINPROGRESS,
                         "GPU %u: the MIG mode change needs a GPU reset before the layout can "
                         "be restored",
                         want->index);
    for (size_t k = 0; r == 0 && want->enabled && k < want->n_gis; k++)
        r = gpu_mig_create(n, want->index, &want->gis[k], ops, err);
    return r;
}

/* ---- compute mode (MPS) -------------------------------------------------------------------- */

int gpu_compute_mode_set(struct gpu_nvml *n, const char *uuid, bool exclusive_process,
                         bool *ret_was_exclusive, struct error *err)
{
    nvmlDevice_t dev;
    nvmlComputeMode_t cur = NVML_COMPUTEMODE_DEFAULT;
    nvmlReturn_t rc;
    int r = need(n, (const void *)n->nvmlDeviceSetComputeMode, "nvmlDeviceSetComputeMode", err);

    if (r < 0)
        return r;
    rc = n->nvmlDeviceGetHandleByUUID(uuid, &dev);
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetHandleByUUID", uuid);
    if (n->nvmlDeviceGetComputeMode && n->nvmlDeviceGetComputeMode(dev, &cur) == NVML_SUCCESS &&
        ret_was_exclusive)
        *ret_was_exclusive = cur == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS;
    rc = n->nvmlDeviceSetComputeMode(dev, exclusive_process ? NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
                                                            : NVML_COMPUTEMODE_DEFAULT);
    return rc == NVML_SUCCESS ? 0 : gpu__nvml_fail(n, err, rc, "nvmlDeviceSetComputeMode", uuid);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* nvml_caps.c: what the NVIDIA driver shows beside NVML for MIG, and the per-MIG-device
 * attributes call. With FAKE_NVML_PROC_ROOT set, the fake keeps a driver /proc tree under
 * it in step with its MIG state, as the kernel module would:
 *   <root>/driver/nvidia-caps/mig-minors                      (every capability minor)
 *   <root>/driver/nvidia/capabilities/gpu<N>/mig/gi<g>/access  (one per GPU instance)
 *   <root>/driver/nvidia/capabilities/gpu<N>/mig/gi<g>/ci<c>/access
 * so tools that read either file find both. Minors follow the driver's numbering: config 1,
 * monitor 2, then per GPU 15 GPU instances x (access + 8 compute instances). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "internal.h"

#define CAPS_GIS_PER_GPU 15u
#define CAPS_CIS_PER_GI 8u
#define CAPS_MAX_GPUS 32u

static unsigned caps_gi_minor(unsigned gpu, unsigned gi)
{
    return 3u + gpu * CAPS_GIS_PER_GPU * (1u + CAPS_CIS_PER_GI) + gi * (1u + CAPS_CIS_PER_GI);
}

static unsigned caps_ci_minor(unsigned gpu, unsigned gi, unsigned ci)
{
    return caps_gi_minor(gpu, gi) + 1u + ci;
}

static int mkdir_p(const char *path)
{
    char *p = str_dup(path);
    int r = 0;

    if (!p)
        return -ENOMEM;
    for (char *s = p + 1; *s && r == 0; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            r = -errno;
        *s = '/';
    }
    if (r == 0 && mkdir(p, 0755) < 0 && errno != EEXIST)
        r = -errno;
    free(p);
    return r;
}

static int write_text(const char *path, const char *text)
{
    return file_write_atomic(path, text, strlen(text), 0444, NULL);
}

static int write_access(const char *dir, unsigned minor)
{
    struct strbuf path = STRBUF_INIT, text = STRBUF_INIT;
    int r = mkdir_p(dir);

    if (r == 0)
        r = strbuf_printf(&path, "%s/access", dir);
    if (r == 0)
        r = strbuf_printf(&text,
                          "DeviceFileMinor: %u\nDeviceFileMode: 292\n"
                          "DeviceFileModify: 1\n",
                          minor);
    if (r == 0)
        r = write_text(path.buf, text.buf);
    strbuf_release(&path);
    strbuf_release(&text);
    return r;
}

static int write_minors(const char *root)
{
    struct strbuf text = STRBUF_INIT, dir = STRBUF_INIT, path = STRBUF_INIT;
    int r = strbuf_puts(&text, "config 1\nmonitor 2\n");

    for (unsigned g = 0; g < CAPS_MAX_GPUS && r == 0; g++)
        for (unsigned gi = 0; gi < CAPS_GIS_PER_GPU && r == 0; gi++) {
            r = strbuf_printf(&text, "gpu%u/gi%u/access %u\n", g, gi, caps_gi_minor(g, gi));
            for (unsigned ci = 0; ci < CAPS_CIS_PER_GI && r == 0; ci++)
                r = strbuf_printf(&text, "gpu%u/gi%u/ci%u/access %u\n", g, gi, ci,
                                  caps_ci_minor(g, gi, ci));
        }
    if (r == 0)
        r = strbuf_printf(&dir, "%s/driver/nvidia-caps", root);
    if (r == 0)
        r = mkdir_p(dir.buf);
    if (r == 0)
        r = strbuf_printf(&path, "%s/mig-minors", dir.buf);
    if (r == 0)
        r = write_text(path.buf, text.buf);
    strbuf_release(&text);
    strbuf_release(&dir);
    strbuf_release(&path);
    return r;
}

static int write_gpu(const char *root, const struct fake_gpu *g)
{
    struct strbuf mig = STRBUF_INIT, dir = STRBUF_INIT;
    int r = strbuf_printf(&mig, "%s/driver/nvidia/capabilities/gpu%u/mig", root, g->index);

    if (r < 0)
        goto out;
    path_rm_tree(mig.buf); /* drop instances that are gone */
    if (!g->model.mem_slices || g->mig_current != NVML_DEVICE_MIG_ENABLE)
        goto out;
    for (size_t i = 0; i < FAKE_MAX_GI && r == 0; i++) {
        const struct fake_gi *gi = &g->gis[i];
        if (!gi->in_use)
            continue;
        strbuf_reset(&dir);
        r = strbuf_printf(&dir, "%s/gi%u", mig.buf, gi->id);
        if (r == 0)
            r = write_access(dir.buf, caps_gi_minor(g->index, gi->id));
        for (size_t c = 0; c < FAKE_MAX_CI && r == 0; c++) {
            const struct fake_ci *ci = &gi->cis[c];
            if (!ci->in_use)
                continue;
            strbuf_reset(&dir);
            r = strbuf_printf(&dir, "%s/gi%u/ci%u", mig.buf, gi->id, ci->id);
            if (r == 0)
                r = write_access(dir.buf, caps_ci_minor(g->index, gi->id, ci->id));
        }
    }
out:
    strbuf_release(&mig);
    strbuf_release(&dir);
    return r;
}

void fake_caps_sync(const struct fake_machine *m)
{
    const char *root = getenv("FAKE_NVML_PROC_ROOT");

    if (!root || !*root || !m)
        return;
    if (write_minors(root) < 0)
        fprintf(stderr, "fake-nvml: cannot write %s/driver/nvidia-caps/mig-minors\n", root);
    for (size_t i = 0; i < m->n_gpus && i < CAPS_MAX_GPUS; i++)
        if (write_gpu(root, &m->gpus[i]) < 0)
            fprintf(stderr,
                    "fake-nvml: cannot write the capability files of GPU %zu under "
                    "%s\n",
                    i, root);
}

/* NVML documents this call for MIG device handles only. */
static nvmlReturn_t attributes(const char *fn, nvmlDevice_t device, nvmlDeviceAttributes_t *a)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(fn, device, false, &g, &ci);
    const struct mig_profile *p;

    if (rc != NVML_SUCCESS)
        return rc;
    if (!a)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    p = ci->gi->profile;
    *a = (nvmlDeviceAttributes_t){
        .multiprocessorCount = fake_ci_sms(ci),
        .sharedCopyEngineCount = p->ce,
        .sharedDecoderCount = p->dec,
        .sharedEncoderCount = p->enc,
        .sharedJpegCount = p->jpeg,
        .sharedOfaCount = p->ofa,
        .gpuInstanceSliceCount = p->compute_slices,
        .computeInstanceSliceCount = ci->slices,
        .memorySizeMB = p->memory_mib,
    };
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes_)
{
    return attributes(__func__, device, attributes_);
}

nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes_)
{
    return attributes(__func__, device, attributes_);
}

/* Fabric: NOT_SUPPORTED unless the machine file gives the GPU a `fabric:`; then the
 * registration is complete, as on a healthy NVL72/NVL32 node. */
static nvmlReturn_t fabric(const char *fn, nvmlDevice_t device, unsigned char *uuid,
                           nvmlReturn_t *status, unsigned *clique, nvmlGpuFabricState_t *state)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(fn, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (ci || !g->fabric)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    memcpy(uuid, g->fabric_cluster, NVML_GPU_FABRIC_UUID_LEN);
    *status = NVML_SUCCESS;
    *clique = g->fabric_clique;
    *state = NVML_GPU_FABRIC_STATE_COMPLETED;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *info)
{
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    return fabric(__func__, device, info->clusterUuid, &info->status, &info->cliqueId,
                  &info->state);
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *info)
{
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlGpuFabricInfo_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    info->healthMask = 0;
    return fabric(__func__, device, info->clusterUuid, &info->status, &info->cliqueId,
                  &info->state);
}

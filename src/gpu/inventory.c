/* SPDX-License-Identifier: Apache-2.0 */
/* inventory.c: reads the node snapshot (gpu/inventory.h) through a loaded NVML — system
 * versions, every GPU with its MIG devices and processes, and the pairwise topology.
 * Which failures are fatal and which degrade one field is stated in gpu.h; NVML types stay
 * inside this file. Logs nothing: degraded fields become read warnings for the caller. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/internal.h"

#define MIB (UINT64_C(1) << 20)
/* Bounds on what a (possibly broken) driver can make us allocate. */
#define MAX_GPUS 1024u
#define MAX_MIG_DEVICES 64u
#define MAX_PROCESSES 4096u

/* A bus id in sysfs form, "0000:00:00.0" and its NUL, with room to spare. */
#define GPU_BUS_NAME_MAX 32

struct read_ctx {
    struct gpu_nvml *n;
    struct inv_inventory *inv;
    nvmlDevice_t *devs; /* by GPU index */
    char **warnings;    /* owned strv, handed to n->read_warnings */
    struct error *err;
};

/* "GPU 3" before the UUID is known, "GPU 3 (GPU-…)" after. */
static const char *gpu_where(const struct inv_gpu *g, char *buf, size_t size)
{
    if (g->uuid[0])
        snprintf(buf, size, "GPU %u (%s)", g->index, g->uuid);
    else
        snprintf(buf, size, "GPU %u", g->index);
    return buf;
}

static int fail(struct read_ctx *c, nvmlReturn_t rc, const char *call, const struct inv_gpu *g)
{
    char where[160];

    return gpu__nvml_fail(c->n, c->err, rc, call,
                          g ? gpu_where(g, where, sizeof(where)) : "the system");
}

/* Records a degraded field; -ENOMEM is the only failure. */
static int degrade(struct read_ctx *c, nvmlReturn_t rc, const char *call, const struct inv_gpu *g,
                   const char *effect)
{
    char where[160];
    int r;

    r = gpu__warn(&c->warnings, "%s failed for %s: %s; %s", call,
                  g ? gpu_where(g, where, sizeof(where)) : "the system",
                  gpu__nvml_strerror(c->n, rc), effect);
    return r < 0 ? error_set(c->err, r, "out of memory") : 0;
}

/* ---- enum → string ----------------------------------------------------------------------- */

static const char *brand_name(nvmlBrandType_t b)
{
    static const char *const names[] = {
        [NVML_BRAND_UNKNOWN] = "unknown",
        [NVML_BRAND_QUADRO] = "Quadro",
        [NVML_BRAND_TESLA] = "Tesla",
        [NVML_BRAND_NVS] = "NVS",
        [NVML_BRAND_GRID] = "GRID",
        [NVML_BRAND_GEFORCE] = "GeForce",
        [NVML_BRAND_TITAN] = "Titan",
        [NVML_BRAND_NVIDIA_VAPPS] = "NVIDIA Virtual Applications",
        [NVML_BRAND_NVIDIA_VPC] = "NVIDIA Virtual PC",
        [NVML_BRAND_NVIDIA_VCS] = "NVIDIA Virtual Compute Server",
        [NVML_BRAND_NVIDIA_VWS] = "NVIDIA RTX Virtual Workstation",
        [NVML_BRAND_NVIDIA_CLOUD_GAMING] = "NVIDIA Cloud Gaming",
        [NVML_BRAND_QUADRO_RTX] = "Quadro RTX",
        [NVML_BRAND_NVIDIA_RTX] = "NVIDIA RTX",
        [NVML_BRAND_NVIDIA] = "NVIDIA",
        [NVML_BRAND_GEFORCE_RTX] = "GeForce RTX",
        [NVML_BRAND_TITAN_RTX] = "Titan RTX",
    };

    if ((unsigned)b < GS_ARRAY_SIZE(names) && names[b])
        return names[b];
    return "unknown";
}

/* Lowercase family names, as GPU feature discovery's nvidia.com/gpu.family uses them. */
static const char *arch_name(nvmlDeviceArchitecture_t a)
{
    switch (a) {
    case NVML_DEVICE_ARCH_KEPLER:
        return "kepler";
    case NVML_DEVICE_ARCH_MAXWELL:
        return "maxwell";
    case NVML_DEVICE_ARCH_PASCAL:
        return "pascal";
    case NVML_DEVICE_ARCH_VOLTA:
        return "volta";
    case NVML_DEVICE_ARCH_TURING:
        return "turing";
    case NVML_DEVICE_ARCH_AMPERE:
        return "ampere";
    case NVML_DEVICE_ARCH_ADA:
        return "ada-lovelace";
    case NVML_DEVICE_ARCH_HOPPER:
        return "hopper";
    case NVML_DEVICE_ARCH_BLACKWELL:
        return "blackwell";
    case NVML_DEVICE_ARCH_T23X:
        return "orin";
    case NVML_DEVICE_ARCH_RUBIN:
        return "rubin";
    default:
        return "unknown";
    }
}

/* The attribute suffix a GPU-instance profile index carries in its name. */
static const char *gi_profile_suffix(unsigned index)
{
    switch (index) {
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1:
        return "+me";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
        return "+me.all";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX:
        return "+gfx";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
        return "-me";
    default:
        return "";
    }
}

/* Compute slices ("Ng") of a GPU-instance profile index, as go-nvlib's NewMigProfile
 * derives them: the index, not info.sliceCount, names the profile. 0 for an index newer
 * than this table (the caller then falls back to sliceCount). */
static unsigned gi_profile_slices(unsigned index)
{
    static const unsigned slices[] = {
        [NVML_GPU_INSTANCE_PROFILE_1_SLICE] = 1,
        [NVML_GPU_INSTANCE_PROFILE_2_SLICE] = 2,
        [NVML_GPU_INSTANCE_PROFILE_3_SLICE] = 3,
        [NVML_GPU_INSTANCE_PROFILE_4_SLICE] = 4,
        [NVML_GPU_INSTANCE_PROFILE_7_SLICE] = 7,
        [NVML_GPU_INSTANCE_PROFILE_8_SLICE] = 8,
        [NVML_GPU_INSTANCE_PROFILE_6_SLICE] = 6,
        [NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1] = 1,
        [NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1] = 2,
        [NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2] = 1,
        [NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX] = 1,
        [NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX] = 2,
        [NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX] = 4,
        [NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME] = 1,
        [NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME] = 2,
        [NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME] = 1,
        [NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME] = 2,
        [NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX] = 3,
    };

    return index < GS_ARRAY_SIZE(slices) ? slices[index] : 0;
}

/* The same for compute-instance profile indexes. */
static unsigned ci_profile_slices(unsigned index)
{
    static const unsigned slices[] = {
        [NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE] = 1,
        [NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE] = 2,
        [NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE] = 3,
        [NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE] = 4,
        [NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE] = 7,
        [NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE] = 8,
        [NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE] = 6,
        [NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1] = 1,
        [NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL] = 7,
    };

    return index < GS_ARRAY_SIZE(slices) ? slices[index] : 0;
}

static enum inv_pcie_level pcie_level(nvmlGpuTopologyLevel_t l)
{
    switch (l) {
    case NVML_TOPOLOGY_INTERNAL:
        return INV_PCIE_SAME;
    case NVML_TOPOLOGY_SINGLE:
        return INV_PCIE_SINGLE;
    case NVML_TOPOLOGY_MULTIPLE:
        return INV_PCIE_MULTIPLE;
    case NVML_TOPOLOGY_HOSTBRIDGE:
        return INV_PCIE_HOSTBRIDGE;
    case NVML_TOPOLOGY_NODE:
        return INV_PCIE_NODE;
    default:
        return INV_PCIE_SYSTEM;
    }
}

/* ---- system ------------------------------------------------------------------------------ */

static int read_system(struct read_ctx *c)
{
    struct gpu_nvml *n = c->n;
    char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "";
    nvmlReturn_t rc;
    int cuda = 0;

    rc = n->nvmlSystemGetDriverVersion(version, sizeof(version));
    if (rc != NVML_SUCCESS)
        return fail(c, rc, "nvmlSystemGetDriverVersion", NULL);
    version[sizeof(version) - 1] = '\0';
    str_copy(c->inv->driver_version, version, sizeof(c->inv->driver_version));

    if (n->nvmlSystemGetCudaDriverVersion_v2)
        rc = n->nvmlSystemGetCudaDriverVersion_v2(&cuda);
    else if (n->nvmlSystemGetCudaDriverVersion)
        rc = n->nvmlSystemGetCudaDriverVersion(&cuda);
    else
        rc = NVML_ERROR_FUNCTION_NOT_FOUND;
    if (rc != NVML_SUCCESS) {
        cuda = 0;
        int r = degrade(c, rc, "nvmlSystemGetCudaDriverVersion_v2", NULL,
                        "CUDA driver version reported as 0");
        if (r < 0)
            return r;
    }
    c->inv->cuda_version = cuda;
    return 0;
}

/* ---- NUMA ---------------------------------------------------------------------------------- */

/* <sysfs>/bus/pci/devices/<0000:3b:00.0>/numa_node, -1 when absent or unreadable: many
 * single-socket machines have no NUMA information and that is not worth a warning. */
static int sysfs_numa_node(const struct gpu_nvml *n, const char *bus_id)
{
    char name[64];
    struct strbuf path = STRBUF_INIT;
    char *data = NULL;
    size_t len = 0;
    int64_t v = -1;
    int node = -1;

    if (gpu_pci_sysfs_name(bus_id, name, sizeof(name)) < 0)
        goto out;
    if (strbuf_printf(&path, "%s/bus/pci/devices/%s/numa_node", n->sysfs_root, name) < 0)
        goto out;
    if (file_read_all(strbuf_str(&path), 64, &data, &len, NULL) < 0)
        goto out;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == ' '))
        data[--len] = '\0';
    if (parse_int64(data, &v) == 0 && v >= 0 && v < 65536)
        node = (int)v;
out:
    free(data);
    strbuf_release(&path);
    return node;
}

/* sysfs first, as NVIDIA's plugin reads it (so both agree on real hardware), then NVML's
 * nvmlDeviceGetNumaNodeId where sysfs has nothing (no numa_node file, or -1). */
static int read_numa(struct read_ctx *c, nvmlDevice_t dev, struct inv_gpu *g)
{
    unsigned node = 0;
    nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;

    g->numa_node = sysfs_numa_node(c->n, g->pci_bus_id);
    if (g->numa_node >= 0)
        return 0;
    if (c->n->nvmlDeviceGetNumaNodeId)
        rc = c->n->nvmlDeviceGetNumaNodeId(dev, &node);
    if (rc == NVML_SUCCESS && node < 65536) {
        g->numa_node = (int)node;
        return 0;
    }
    /* NOT_SUPPORTED is the normal answer on x86 hosts without NUMA information */
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND)
        return degrade(c, rc, "nvmlDeviceGetNumaNodeId", g, "NUMA node unknown");
    return 0;
}

/* ---- MIG ----------------------------------------------------------------------------------- */

static const char *const mig_detail_symbols[] = {
    "nvmlDeviceGetMaxMigDeviceCount",      "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceId",          "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetGpuInstanceById",        "nvmlGpuInstanceGetInfo",
    "nvmlDeviceGetGpuInstanceProfileInfo", "nvmlGpuInstanceGetComputeInstanceById",
    "nvmlComputeInstanceGetInfo_v2",       "nvmlGpuInstanceGetComputeInstanceProfileInfo",
};

/* The first MIG call this driver lacks, or NULL when all are there. */
static const char *missing_mig_symbol(const struct gpu_nvml *n)
{
    const void *fns[] = {
        (const void *)n->nvmlDeviceGetMaxMigDeviceCount,
        (const void *)n->nvmlDeviceGetMigDeviceHandleByIndex,
        (const void *)n->nvmlDeviceGetGpuInstanceId,
        (const void *)n->nvmlDeviceGetComputeInstanceId,
        (const void *)n->nvmlDeviceGetGpuInstanceById,
        (const void *)n->nvmlGpuInstanceGetInfo,
        (const void *)n->nvmlDeviceGetGpuInstanceProfileInfo,
        (const void *)n->nvmlGpuInstanceGetComputeInstanceById,
        (const void *)n->nvmlComputeInstanceGetInfo_v2,
        (const void *)n->nvmlGpuInstanceGetComputeInstanceProfileInfo,
    };
    _Static_assert(GS_ARRAY_SIZE(fns) == GS_ARRAY_SIZE(mig_detail_symbols), "MIG symbols");

    for (size_t i = 0; i < GS_ARRAY_SIZE(fns); i++)
        if (!fns[i])
            return mig_detail_symbols[i];
    return NULL;
}

/* A GPU's GPU-instance profile table, read once per GPU rather than once per MIG device:
 * the table is "immutable throughout the lifetime of a MIG mode". */
struct gi_profiles {
    bool loaded;
    unsigned n;
    unsigned index[NVML_GPU_INSTANCE_PROFILE_COUNT];
    nvmlGpuInstanceProfileInfo_t info[NVML_GPU_INSTANCE_PROFILE_COUNT];
};

/* Walks the profile indexes as go-nvlib does (NOT_SUPPORTED and INVALID_ARGUMENT skip an
 * index, anything else fails). */
static int load_gi_profiles(struct read_ctx *c, nvmlDevice_t dev, const struct inv_gpu *g,
                            struct gi_profiles *t)
{
    t->n = 0;
    for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++) {
        nvmlGpuInstanceProfileInfo_t *info = &t->info[t->n];
        nvmlReturn_t rc;

        memset(info, 0, sizeof(*info));
        rc = c->n->nvmlDeviceGetGpuInstanceProfileInfo(dev, i, info);
        if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT)
            continue;
        if (rc != NVML_SUCCESS)
            return fail(c, rc, "nvmlDeviceGetGpuInstanceProfileInfo", g);
        t->index[t->n++] = i;
    }
    t->loaded = true;
    return 0;
}

/* The GPU-instance profile whose id is `id`, with its index. */
static int find_gi_profile(struct read_ctx *c, nvmlDevice_t dev, const struct inv_gpu *g,
                           struct gi_profiles *t, unsigned id, unsigned *ret_index,
                           nvmlGpuInstanceProfileInfo_t *ret)
{
    char where[160];

    if (!t->loaded) {
        int r = load_gi_profiles(c, dev, g, t);
        if (r < 0)
            return r;
    }
    for (unsigned k = 0; k < t->n; k++)
        if (t->info[k].id == id) {
            *ret_index = t->index[k];
            *ret = t->info[k];
            return 0;
        }
    return error_set(c->err, -ENOENT,
                     "GPU instance profile id %u not found among the profiles of %s; the "
                     "driver's MIG profile table is inconsistent",
                     id, gpu_where(g, where, sizeof(where)));
}

static int find_ci_profile(struct read_ctx *c, nvmlGpuInstance_t gi, const struct inv_gpu *g,
                           unsigned id, unsigned *ret_index, nvmlComputeInstanceProfileInfo_t *ret)
{
    for (unsigned i = 0; i < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; i++) {
        nvmlComputeInstanceProfileInfo_t info;
        nvmlReturn_t rc;

        memset(&info, 0, sizeof(info));
        rc = c->n->nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, i, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
        if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT)
            continue;
        if (rc != NVML_SUCCESS)
            return fail(c, rc, "nvmlGpuInstanceGetComputeInstanceProfileInfo", g);
        if (info.id == id) {
            *ret_index = i;
            *ret = info;
            return 0;
        }
    }
    char where[160];
    return error_set(c->err, -ENOENT,
                     "compute instance profile id %u not found among the profiles of %s; the "
                     "driver's MIG profile table is inconsistent",
                     id, gpu_where(g, where, sizeof(where)));
}

/* Calls an NVML function and leaves through fail() with its name on error. */
#define NVML_CALL(c, g, fn, ...)                                                                   \
    do {                                                                                           \
        nvmlReturn_t rc_ = (c)->n->fn(__VA_ARGS__);                                                \
        if (rc_ != NVML_SUCCESS)                                                                   \
            return fail((c), rc_, #fn, (g));                                                       \
    } while (0)

static int read_mig_device(struct read_ctx *c, nvmlDevice_t parent, const struct inv_gpu *g,
                           struct gi_profiles *profiles, uint64_t parent_total_bytes,
                           nvmlDevice_t mig, struct inv_mig_device *m)
{
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
    nvmlMemory_t mem;
    nvmlGpuInstance_t gi = NULL;
    nvmlComputeInstance_t ci = NULL;
    nvmlGpuInstanceInfo_t gi_info;
    nvmlComputeInstanceInfo_t ci_info;
    nvmlGpuInstanceProfileInfo_t gi_prof;
    nvmlComputeInstanceProfileInfo_t ci_prof;
    unsigned gi_index = 0, ci_index = 0, gi_slices, ci_slices;
    int r;

    memset(&mem, 0, sizeof(mem));
    memset(&gi_info, 0, sizeof(gi_info));
    memset(&ci_info, 0, sizeof(ci_info));
    memset(&gi_prof, 0, sizeof(gi_prof));
    memset(&ci_prof, 0, sizeof(ci_prof));
    NVML_CALL(c, g, nvmlDeviceGetUUID, mig, uuid, sizeof(uuid));
    uuid[sizeof(uuid) - 1] = '\0';
    str_copy(m->uuid, uuid, sizeof(m->uuid));
    NVML_CALL(c, g, nvmlDeviceGetGpuInstanceId, mig, &m->gi_id);
    NVML_CALL(c, g, nvmlDeviceGetComputeInstanceId, mig, &m->ci_id);
    NVML_CALL(c, g, nvmlDeviceGetMemoryInfo, mig, &mem);
    m->memory_mib = mem.total / MIB;

    NVML_CALL(c, g, nvmlDeviceGetGpuInstanceById, parent, m->gi_id, &gi);
    NVML_CALL(c, g, nvmlGpuInstanceGetInfo, gi, &gi_info);
    NVML_CALL(c, g, nvmlGpuInstanceGetComputeInstanceById, gi, m->ci_id, &ci);
    NVML_CALL(c, g, nvmlComputeInstanceGetInfo_v2, ci, &ci_info);
    r = find_gi_profile(c, parent, g, profiles, gi_info.profileId, &gi_index, &gi_prof);
    if (r < 0)
        return r;
    r = find_ci_profile(c, gi, g, ci_info.profileId, &ci_index, &ci_prof);
    if (r < 0)
        return r;

    m->gi_profile_id = gi_info.profileId;
    m->ci_profile_id = ci_info.profileId;
    m->placement_start = gi_info.placement.start;
    m->placement_size = gi_info.placement.size;
    m->multiprocessors = ci_prof.multiprocessorCount;
    gi_slices = gi_profile_slices(gi_index);
    ci_slices = ci_profile_slices(ci_index);
    if (!gi_slices)
        gi_slices = gi_prof.sliceCount;
    if (!ci_slices)
        ci_slices = ci_prof.sliceCount;
    m->gi_slices = gi_slices;
    m->ci_slices = ci_slices;
    m->copy_engines = ci_prof.sharedCopyEngineCount;
    m->decoders = ci_prof.sharedDecoderCount;
    m->encoders = ci_prof.sharedEncoderCount;
    m->jpeg_engines = ci_prof.sharedJpegCount;
    m->ofa_engines = ci_prof.sharedOfaCount;
    m->gi_profile.memory_mib = gi_prof.memorySizeMB;
    m->gi_profile.multiprocessors = gi_prof.multiprocessorCount;
    m->gi_profile.copy_engines = gi_prof.copyEngineCount;
    m->gi_profile.decoders = gi_prof.decoderCount;
    m->gi_profile.encoders = gi_prof.encoderCount;
    m->gi_profile.jpeg_engines = gi_prof.jpegCount;
    m->gi_profile.ofa_engines = gi_prof.ofaCount;
    r = gpu_mig_profile_name(ci_slices, gi_slices,
                             gpu_mig_memory_gb(gi_prof.memorySizeMB, parent_total_bytes),
                             gi_profile_suffix(gi_index), m->profile, sizeof(m->profile));
    if (r < 0) {
        char where[160];
        return error_set(c->err, r,
                         "MIG device %s on %s: cannot name a profile of %u compute slices in a "
                         "GPU instance of %u slices",
                         m->uuid, gpu_where(g, where, sizeof(where)), ci_slices, gi_slices);
    }
    return 0;
}

static int read_migs(struct read_ctx *c, nvmlDevice_t dev, struct inv_gpu *g, uint64_t total_bytes)
{
    struct gi_profiles profiles = {0};
    struct inv_mig_device *migs = NULL;
    const char *missing;
    unsigned max = 0;
    size_t n_migs = 0;
    char where[160];
    int r;

    missing = missing_mig_symbol(c->n);
    if (missing)
        return error_set(c->err, -ENOEXEC,
                         "%s has MIG enabled but %s lacks %s; cannot list its MIG devices",
                         gpu_where(g, where, sizeof(where)), c->n->path, missing);
    NVML_CALL(c, g, nvmlDeviceGetMaxMigDeviceCount, dev, &max);
    if (max > MAX_MIG_DEVICES)
        return error_set(c->err, -E2BIG, "%s reports %u MIG device slots, more than %u",
                         gpu_where(g, where, sizeof(where)), max, MAX_MIG_DEVICES);
    if (max == 0)
        return 0;
    migs = calloc(max, sizeof(*migs));
    if (!migs)
        return error_set(c->err, -ENOMEM, "out of memory");
    for (unsigned i = 0; i < max; i++) {
        nvmlDevice_t mig = NULL;
        nvmlReturn_t rc = c->n->nvmlDeviceGetMigDeviceHandleByIndex(dev, i, &mig);

        /* An empty slot: MIG device indexes are sparse. */
        if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT)
            continue;
        if (rc != NVML_SUCCESS) {
            r = fail(c, rc, "nvmlDeviceGetMigDeviceHandleByIndex", g);
            goto out;
        }
        migs[n_migs].index = i;
        r = read_mig_device(c, dev, g, &profiles, total_bytes, mig, &migs[n_migs]);
        if (r < 0) {
            error_prefix(c->err, "MIG device %u", i);
            goto out;
        }
        n_migs++;
    }
    g->migs = migs;
    g->n_migs = n_migs;
    migs = NULL;
    r = 0;
out:
    free(migs);
    return r;
}

static int read_mig(struct read_ctx *c, nvmlDevice_t dev, struct inv_gpu *g, uint64_t total)
{
    unsigned current = 0, pending = 0;
    nvmlReturn_t rc;
    int r;

    if (!c->n->nvmlDeviceGetMigMode)
        return 0; /* a pre-MIG driver: nothing is MIG capable (load warning given) */
    rc = c->n->nvmlDeviceGetMigMode(dev, &current, &pending);
    if (rc == NVML_ERROR_NOT_SUPPORTED)
        return 0;
    if (rc != NVML_SUCCESS)
        return fail(c, rc, "nvmlDeviceGetMigMode", g);
    g->mig_capable = true;
    g->mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
    g->mig_pending = pending == NVML_DEVICE_MIG_ENABLE;
    if (!g->mig_enabled)
        return 0;
    if (g->memory_unknown) {
        char where[160];
        /* go-nvlib names MIG profiles by their share of the GPU's memory */
        return error_set(c->err, -EOPNOTSUPP,
                         "%s has MIG enabled but nvmlDeviceGetMemoryInfo answers Not Supported: "
                         "its MIG profiles cannot be named; report this GPU and driver",
                         gpu_where(g, where, sizeof(where)));
    }
    r = read_migs(c, dev, g, total);
    if (r != -EPERM)
        return r;
    /* An unprivileged daemon may not list GPU/compute instances (NO_PERMISSION): keep the
     * node served, this GPU as a whole one, and say how to get its MIG devices. */
    {
        char why[ERROR_MSG_MAX], where[160];
        str_copy(why, c->err ? c->err->msg : "Insufficient Permissions", sizeof(why));
        error_clear(c->err);
        g->mig_enabled = false;
        r = gpu__warn(&c->warnings,
                      "cannot list the MIG devices of %s (%s); serving it as a whole GPU. Run "
                      "the daemon privileged or with CAP_SYS_ADMIN (as NVIDIA's chart does for "
                      "MIG) to serve its MIG devices",
                      gpu_where(g, where, sizeof(where)), why);
        return r < 0 ? error_set(c->err, r, "out of memory") : 0;
    }
}

/* ---- processes ----------------------------------------------------------------------------- */

static int read_processes(struct read_ctx *c, nvmlDevice_t dev, struct inv_gpu *g)
{
    nvmlProcessInfo_t *infos = NULL;
    unsigned count = 0;
    nvmlReturn_t rc;
    int r = 0;

    if (!c->n->nvmlDeviceGetComputeRunningProcesses_v3)
        return 0; /* load warning given */
    rc = c->n->nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, NULL);
    /* The list can grow between the sizing call and the read: retry a few times. */
    for (int attempt = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && attempt < 4; attempt++) {
        nvmlProcessInfo_t *p;

        if (count > MAX_PROCESSES) {
            char where[160];
            r = gpu__warn(&c->warnings,
                          "%s runs %u processes, more than %u: processes not reported",
                          gpu_where(g, where, sizeof(where)), count, MAX_PROCESSES);
            if (r < 0)
                r = error_set(c->err, r, "out of memory");
            goto out;
        }
        count += 8; /* room for processes started since the sizing call */
        p = realloc(infos, count * sizeof(*infos));
        if (!p) {
            r = error_set(c->err, -ENOMEM, "out of memory");
            goto out;
        }
        infos = p;
        memset(infos, 0, count * sizeof(*infos));
        rc = c->n->nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, infos);
    }
    if (rc != NVML_SUCCESS) {
        r = degrade(c, rc, "nvmlDeviceGetComputeRunningProcesses_v3", g,
                    "running processes not reported");
        goto out;
    }
    if (count == 0 || !infos)
        goto out;
    g->procs = calloc(count, sizeof(*g->procs));
    if (!g->procs) {
        r = error_set(c->err, -ENOMEM, "out of memory");
        goto out;
    }
    for (unsigned i = 0; i < count; i++) {
        struct inv_process *p = &g->procs[i];
        p->pid = infos[i].pid;
        /* NVML_VALUE_NOT_AVAILABLE (all ones) without the privilege to see usage. */
        p->used_mib = infos[i].usedGpuMemory == ~0ULL ? 0 : infos[i].usedGpuMemory / MIB;
        p->gi_id = infos[i].gpuInstanceId;
        p->ci_id = infos[i].computeInstanceId;
    }
    g->n_procs = count;
out:
    free(infos);
    return r;
}

/* ---- one GPU ------------------------------------------------------------------------------- */

/* The NVLink fabric the GPU is attached to, as go-nvlib's IsFabricAttached decides (state
 * completed, status success, a cluster UUID set). Not attached, not supported or an old
 * driver without the call: fabric_cluster stays "". Never an error. */
static void read_fabric(struct read_ctx *c, nvmlDevice_t dev, struct inv_gpu *g)
{
    unsigned char uuid[NVML_GPU_FABRIC_UUID_LEN] = {0};
    static const unsigned char zero[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t rc = NVML_ERROR_NOT_SUPPORTED, status = NVML_ERROR_UNKNOWN;
    nvmlGpuFabricState_t state = 0;
    unsigned clique = 0;

    if (c->n->nvmlDeviceGetGpuFabricInfo) {
        nvmlGpuFabricInfo_t fi;
        memset(&fi, 0, sizeof(fi));
        rc = c->n->nvmlDeviceGetGpuFabricInfo(dev, &fi);
        memcpy(uuid, fi.clusterUuid, sizeof(uuid));
        status = fi.status;
        clique = fi.cliqueId;
        state = fi.state;
    } else if (c->n->nvmlDeviceGetGpuFabricInfoV) {
        nvmlGpuFabricInfoV_t fi = {.version = nvmlGpuFabricInfo_v2};
        rc = c->n->nvmlDeviceGetGpuFabricInfoV(dev, &fi);
        memcpy(uuid, fi.clusterUuid, sizeof(uuid));
        status = fi.status;
        clique = fi.cliqueId;
        state = fi.state;
    }
    g->fabric_cluster[0] = '\0';
    if (rc != NVML_SUCCESS || state != NVML_GPU_FABRIC_STATE_COMPLETED || status != NVML_SUCCESS ||
        memcmp(uuid, zero, sizeof(zero)) == 0)
        return;
    snprintf(g->fabric_cluster, sizeof(g->fabric_cluster),
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", uuid[0],
             uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9],
             uuid[10], uuid[11], uuid[12], uuid[13], uuid[14], uuid[15]);
    g->fabric_clique = clique;
}

static int read_gpu(struct read_ctx *c, unsigned index)
{
    struct gpu_nvml *n = c->n;
    struct inv_gpu *g = &c->inv->gpus[index];
    nvmlDevice_t dev = NULL;
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    nvmlMemory_t mem;
    nvmlPciInfo_t pci;
    nvmlBrandType_t brand = NVML_BRAND_UNKNOWN;
    nvmlDeviceArchitecture_t arch = NVML_DEVICE_ARCH_UNKNOWN;
    nvmlReturn_t rc;
    int r;

    g->index = index;
    g->numa_node = -1;
    NVML_CALL(c, g, nvmlDeviceGetHandleByIndex_v2, index, &dev);
    c->devs[index] = dev;

    memset(buf, 0, sizeof(buf));
    NVML_CALL(c, g, nvmlDeviceGetUUID, dev, buf, sizeof(buf));
    buf[sizeof(buf) - 1] = '\0';
    str_copy(g->uuid, buf, sizeof(g->uuid));
    memset(buf, 0, sizeof(buf));
    NVML_CALL(c, g, nvmlDeviceGetName, dev, buf, sizeof(buf));
    buf[sizeof(buf) - 1] = '\0';
    str_copy(g->name, buf, sizeof(g->name));
    NVML_CALL(c, g, nvmlDeviceGetMinorNumber, dev, &g->minor);
    memset(&mem, 0, sizeof(mem));
    rc = n->nvmlDeviceGetMemoryInfo(dev, &mem);
    /* NOT_SUPPORTED: a unified-memory GPU (GB10) has no framebuffer to report. NVIDIA's DRA
     * driver and device plugin serve it without a memory figure; any other error stays
     * fatal, as there. */
    if (rc == NVML_ERROR_NOT_SUPPORTED)
        memset(&mem, 0, sizeof(mem));
    else if (rc != NVML_SUCCESS)
        return fail(c, rc, "nvmlDeviceGetMemoryInfo", g);
    g->memory_unknown = rc != NVML_SUCCESS;
    g->memory_mib = g->memory_unknown ? 0 : mem.total / MIB;
    memset(&pci, 0, sizeof(pci));
    NVML_CALL(c, g, nvmlDeviceGetPciInfo_v3, dev, &pci);
    pci.busId[sizeof(pci.busId) - 1] = '\0';
    str_copy(g->pci_bus_id, pci.busId, sizeof(g->pci_bus_id));
    g->pci_device_id = pci.pciDeviceId;

    rc = n->nvmlDeviceGetCudaComputeCapability(dev, &g->cc_major, &g->cc_minor);
    if (rc != NVML_SUCCESS) {
        g->cc_major = g->cc_minor = 0;
        r = degrade(c, rc, "nvmlDeviceGetCudaComputeCapability", g,
                    "compute capability reported as 0.0");
        if (r < 0)
            return r;
    }
    rc = n->nvmlDeviceGetBrand(dev, &brand);
    if (rc != NVML_SUCCESS) {
        brand = NVML_BRAND_UNKNOWN;
        r = degrade(c, rc, "nvmlDeviceGetBrand", g, "brand reported as unknown");
        if (r < 0)
            return r;
    }
    str_copy(g->brand, brand_name(brand), sizeof(g->brand));
    if (n->nvmlDeviceGetArchitecture) {
        rc = n->nvmlDeviceGetArchitecture(dev, &arch);
        if (rc != NVML_SUCCESS) {
            arch = NVML_DEVICE_ARCH_UNKNOWN;
            r = degrade(c, rc, "nvmlDeviceGetArchitecture", g, "architecture reported as unknown");
            if (r < 0)
                return r;
        }
    }
    str_copy(g->architecture, arch_name(arch), sizeof(g->architecture));

    read_fabric(c, dev, g);
    r = read_numa(c, dev, g);
    if (r < 0)
        return r;
    r = read_mig(c, dev, g, mem.total);
    if (r < 0)
        return r;
    return read_processes(c, dev, g);
}

/* ---- topology ------------------------------------------------------------------------------ */

/* The GPU whose bus id matches (either domain width, any case), or -1. names holds each
 * GPU's bus id in sysfs form ("" when it has none), made once per read: a link asks it 18
 * times per GPU. */
static int gpu_by_bus_id(const struct inv_inventory *inv, const char (*names)[GPU_BUS_NAME_MAX],
                         const char *bus_id)
{
    char want[GPU_BUS_NAME_MAX];

    if (gpu_pci_sysfs_name(bus_id, want, sizeof(want)) < 0)
        return -1;
    for (size_t i = 0; i < inv->n_gpus; i++)
        if (strcmp(want, names[i]) == 0)
            return (int)i;
    return -1;
}

/* Counts GPU a's active NVLinks per remote GPU into row a of the link matrix, and into
 * *ret_switch_links those whose remote end is not a GPU (an NVSwitch). */
static int read_nvlinks(struct read_ctx *c, size_t a, const char (*names)[GPU_BUS_NAME_MAX],
                        unsigned *ret_switch_links)
{
    struct gpu_nvml *n = c->n;
    struct inv_inventory *inv = c->inv;
    const struct inv_gpu *g = &inv->gpus[a];

    if (!n->nvmlDeviceGetNvLinkState || !n->nvmlDeviceGetNvLinkRemotePciInfo_v2)
        return 0; /* load warning given */
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
        nvmlEnableState_t active = NVML_FEATURE_DISABLED;
        nvmlPciInfo_t pci;
        nvmlReturn_t rc;
        int b;

        rc = n->nvmlDeviceGetNvLinkState(c->devs[a], link, &active);
        /* INVALID_ARGUMENT: past the last link NVML knows; NOT_SUPPORTED: this link (or
         * NVLink at all) does not exist on this GPU. */
        if (rc == NVML_ERROR_INVALID_ARGUMENT)
            return 0;
        if (rc == NVML_ERROR_NOT_SUPPORTED)
            continue;
        if (rc != NVML_SUCCESS)
            return degrade(c, rc, "nvmlDeviceGetNvLinkState", g,
                           "its remaining NVLinks not counted");
        if (active != NVML_FEATURE_ENABLED)
            continue;
        memset(&pci, 0, sizeof(pci));
        rc = n->nvmlDeviceGetNvLinkRemotePciInfo_v2(c->devs[a], link, &pci);
        if (rc != NVML_SUCCESS) {
            int r =
                degrade(c, rc, "nvmlDeviceGetNvLinkRemotePciInfo_v2", g, "one NVLink not counted");
            if (r < 0)
                return r;
            continue;
        }
        pci.busId[sizeof(pci.busId) - 1] = '\0';
        b = gpu_by_bus_id(inv, names, pci.busId);
        if (b < 0)
            (*ret_switch_links)++;
        else if ((size_t)b != a)
            inv->links[a * inv->n_gpus + (size_t)b].nvlinks++;
    }
    return 0;
}

/* GPUs that both reach NVSwitches talk over min(links of a, links of b) NVLinks, which is
 * what nvidia-smi topo -m shows as NV<n> on NVSwitch systems. */
static void add_switch_links(struct inv_inventory *inv, const unsigned *switch_links)
{
    size_t n = inv->n_gpus;

    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            if (a != b && switch_links[a] && switch_links[b])
                inv->links[a * n + b].nvlinks +=
                    switch_links[a] < switch_links[b] ? switch_links[a] : switch_links[b];
}

static int read_pcie(struct read_ctx *c, size_t a, size_t b)
{
    struct inv_inventory *inv = c->inv;
    nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
    enum inv_pcie_level l = INV_PCIE_SYSTEM;
    nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;

    if (c->n->nvmlDeviceGetTopologyCommonAncestor) {
        rc = c->n->nvmlDeviceGetTopologyCommonAncestor(c->devs[a], c->devs[b], &level);
        if (rc == NVML_SUCCESS) {
            l = pcie_level(level);
        } else {
            char what[64];
            snprintf(what, sizeof(what), "PCIe path to GPU %zu reported as SYS", b);
            int r = degrade(c, rc, "nvmlDeviceGetTopologyCommonAncestor", &inv->gpus[a], what);
            if (r < 0)
                return r;
        }
    }
    inv->links[a * inv->n_gpus + b].pcie = l;
    inv->links[b * inv->n_gpus + a].pcie = l;
    return 0;
}

static int read_topology(struct read_ctx *c)
{
    struct inv_inventory *inv = c->inv;
    char(*names)[GPU_BUS_NAME_MAX] = NULL;
    unsigned *switch_links = NULL;
    size_t n = inv->n_gpus;
    int r;

    if (n == 0)
        return 0;
    inv->links = calloc(n * n, sizeof(*inv->links));
    switch_links = calloc(n, sizeof(*switch_links));
    names = calloc(n, sizeof(*names));
    if (!inv->links || !switch_links || !names) {
        r = error_set(c->err, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (gpu_pci_sysfs_name(inv->gpus[i].pci_bus_id, names[i], sizeof(names[i])) < 0)
            names[i][0] = '\0'; /* matches no link: sysfs names are never empty */
    for (size_t a = 0; a < n; a++) {
        inv->links[a * n + a].pcie = INV_PCIE_SAME;
        r = read_nvlinks(c, a, (const char(*)[GPU_BUS_NAME_MAX])names, &switch_links[a]);
        if (r < 0)
            goto out;
        for (size_t b = a + 1; b < n; b++) {
            r = read_pcie(c, a, b);
            if (r < 0)
                goto out;
        }
    }
    add_switch_links(inv, switch_links);
    r = 0;
out:
    free(names);
    free(switch_links);
    return r;
}

/* ---- entry points -------------------------------------------------------------------------- */

int gpu_inventory_read(struct gpu_nvml *nvml, struct inv_inventory **ret, struct error *err)
{
    struct read_ctx c = {.n = nvml, .err = err};
    unsigned count = 0;
    nvmlReturn_t rc;
    int r;

    c.warnings = strv_new();
    c.inv = calloc(1, sizeof(*c.inv));
    if (!c.warnings || !c.inv) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = read_system(&c);
    if (r < 0)
        goto out;
    rc = nvml->nvmlDeviceGetCount_v2(&count);
    if (rc != NVML_SUCCESS) {
        r = fail(&c, rc, "nvmlDeviceGetCount_v2", NULL);
        goto out;
    }
    if (count > MAX_GPUS) {
        r = error_set(err, -E2BIG, "NVML reports %u GPUs, more than %u", count, MAX_GPUS);
        goto out;
    }
    if (count > 0) {
        c.inv->gpus = calloc(count, sizeof(*c.inv->gpus));
        c.devs = calloc(count, sizeof(*c.devs));
        if (!c.inv->gpus || !c.devs) {
            r = error_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        c.inv->n_gpus = count;
    }
    for (unsigned i = 0; i < count; i++) {
        r = read_gpu(&c, i);
        if (r < 0)
            goto out;
    }
    r = read_topology(&c);
    if (r < 0)
        goto out;
    *ret = c.inv;
    c.inv = NULL;
    r = 0;
out:
    /* Warnings of a failed read are kept too: they may explain the failure. */
    if (c.warnings) {
        strv_free(nvml->read_warnings);
        nvml->read_warnings = c.warnings;
    }
    free(c.devs);
    inv_free(c.inv);
    return r;
}

static int push_all(char ***dst, char *const *src)
{
    for (size_t i = 0; src && src[i]; i++)
        if (strv_push(dst, src[i]) < 0)
            return -ENOMEM;
    return 0;
}

int gpu_inventory_open_and_read(const struct gpu_nvml_options *opts, bool fail_on_init_error,
                                struct inv_inventory **ret, char ***ret_warnings, struct error *err)
{
    struct gpu_nvml *nvml = NULL;
    struct inv_inventory *inv = NULL;
    char **warnings = NULL;
    struct error open_err = {0};
    int r;

    warnings = strv_new();
    if (!warnings)
        return error_set(err, -ENOMEM, "out of memory");
    r = gpu_nvml_open(opts, &nvml, &open_err);
    if (r < 0) {
        if (fail_on_init_error) {
            if (err)
                *err = open_err;
            goto out;
        }
        inv = calloc(1, sizeof(*inv));
        if (!inv || gpu__warn(&warnings,
                              "%s; no GPUs, keep running (fail-on-init-error is "
                              "false)",
                              open_err.msg) < 0) {
            r = error_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    } else {
        r = push_all(&warnings, gpu_nvml_load_warnings(nvml));
        if (r >= 0)
            r = gpu_inventory_read(nvml, &inv, err);
        else
            error_set(err, r, "out of memory");
        if (push_all(&warnings, gpu_nvml_read_warnings(nvml)) < 0 && r >= 0)
            r = error_set(err, -ENOMEM, "out of memory");
        if (r < 0)
            goto out;
    }
    *ret = inv;
    *ret_warnings = warnings;
    inv = NULL;
    warnings = NULL;
    r = 0;
out:
    inv_free(inv);
    strv_free(warnings);
    gpu_nvml_close(nvml);
    return r;
}
/* The PCIe root of a GPU as Kubernetes' deviceattribute package finds it: the "pci<dom>:<bus>"
 * directory its sysfs device resolves under. "" when sysfs does not have the device. */
void gpu_pcie_root(const char *sysfs_root, const char *bus_id, char *buf, size_t size)
{
    char name[32], path[512], *real = NULL;
    const char *p, *end;

    buf[0] = '\0';
    if (gpu_pci_sysfs_name(bus_id, name, sizeof(name)) < 0)
        return;
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sysfs_root, name);
    real = realpath(path, NULL);
    p = real ? strstr(real, "/pci") : NULL;
    if (p) {
        end = strchr(p + 1, '/');
        snprintf(buf, size, "%.*s", (int)(end ? end - p - 1 : (ptrdiff_t)strlen(p + 1)), p + 1);
    }
    free(real);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* samples.c: one reading of every GPU's telemetry for the metrics sampler — dcgm-exporter's
 * default fields that plain NVML answers (enum gpu_field: utilizations, framebuffer,
 * temperatures, power and energy, clocks, PCIe replays, ECC, remapped rows, NVLink
 * throughput, vGPU licensing), the compute processes with their memory and SM utilization,
 * and each GPU instance's framebuffer when MIG is on. Whatever NVML does not support on a
 * GPU (MIG-enabled utilization, ECC on consumer parts) is unknown (-1), never an error. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "gpu/internal.h"

/* Each GPU instance's memory, through the handle of its first MIG device. */
static void read_gis(struct gpu_nvml *n, const struct inv_gpu *gpu, struct gpu_sample *s)
{
    for (size_t m = 0; gpu->mig_enabled && m < gpu->n_migs; m++) {
        const struct inv_mig_device *md = &gpu->migs[m];
        bool seen = false;
        nvmlDevice_t dev;
        nvmlMemory_t mem;

        for (size_t k = 0; k < s->n_gis && !seen; k++)
            seen = s->gis[k].gi_id == md->gi_id;
        if (seen || s->n_gis == GPU_SAMPLE_MAX_GIS || !n->nvmlDeviceGetHandleByUUID ||
            n->nvmlDeviceGetHandleByUUID(md->uuid, &dev) != NVML_SUCCESS)
            continue;
        memset(&mem, 0, sizeof(mem));
        if (n->nvmlDeviceGetMemoryInfo(dev, &mem) != NVML_SUCCESS)
            continue;
        struct gpu_sample_gi *gi = &s->gis[s->n_gis++];
        gi->gi_id = md->gi_id;
        str_copy(gi->profile, md->profile, sizeof(gi->profile));
        gi->fb_total_mib = mem.total >> 20;
        gi->fb_used_mib = mem.used >> 20;
        gi->fb_free_mib = mem.free >> 20;
    }
}

/* Utilization, framebuffer, temperatures, power, energy, clocks: the plain reads. */
static void read_basic(struct gpu_nvml *n, nvmlDevice_t dev, struct gpu_sample *s)
{
    double *f = s->field;
    unsigned v, period_us;
    unsigned long long c;

    nvmlUtilization_t u;
    if (n->nvmlDeviceGetUtilizationRates &&
        n->nvmlDeviceGetUtilizationRates(dev, &u) == NVML_SUCCESS) {
        f[GPU_FIELD_GPU_UTIL] = u.gpu;
        f[GPU_FIELD_MEM_COPY_UTIL] = u.memory;
    }
    if (n->nvmlDeviceGetEncoderUtilization &&
        n->nvmlDeviceGetEncoderUtilization(dev, &v, &period_us) == NVML_SUCCESS)
        f[GPU_FIELD_ENC_UTIL] = v;
    if (n->nvmlDeviceGetDecoderUtilization &&
        n->nvmlDeviceGetDecoderUtilization(dev, &v, &period_us) == NVML_SUCCESS)
        f[GPU_FIELD_DEC_UTIL] = v;
    nvmlMemory_t mem;
    memset(&mem, 0, sizeof(mem));
    if (n->nvmlDeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS) {
        s->fb_total_mib = mem.total >> 20;
        f[GPU_FIELD_FB_USED] = (double)(mem.used >> 20);
        f[GPU_FIELD_FB_FREE] = (double)(mem.free >> 20);
    }
    nvmlMemory_v2_t mem2 = {.version = nvmlMemory_v2};
    if (n->nvmlDeviceGetMemoryInfo_v2 && n->nvmlDeviceGetMemoryInfo_v2(dev, &mem2) == NVML_SUCCESS)
        f[GPU_FIELD_FB_RESERVED] = (double)(mem2.reserved >> 20);
    if (n->nvmlDeviceGetTemperature &&
        n->nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS)
        f[GPU_FIELD_GPU_TEMP] = v;
    if (n->nvmlDeviceGetPowerUsage && n->nvmlDeviceGetPowerUsage(dev, &v) == NVML_SUCCESS)
        f[GPU_FIELD_POWER_USAGE] = v / 1000.0; /* mW */
    if (n->nvmlDeviceGetTotalEnergyConsumption &&
        n->nvmlDeviceGetTotalEnergyConsumption(dev, &c) == NVML_SUCCESS)
        f[GPU_FIELD_TOTAL_ENERGY] = (double)c;
    if (n->nvmlDeviceGetClockInfo &&
        n->nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
        f[GPU_FIELD_SM_CLOCK] = v;
    if (n->nvmlDeviceGetClockInfo &&
        n->nvmlDeviceGetClockInfo(dev, NVML_CLOCK_MEM, &v) == NVML_SUCCESS)
        f[GPU_FIELD_MEM_CLOCK] = v;
}

/* PCIe replays, ECC totals, remapped rows, vGPU licensing: what an alert watches. */
static void read_errors(struct gpu_nvml *n, nvmlDevice_t dev, struct gpu_sample *s)
{
    double *f = s->field;
    unsigned v, cor, unc, pending, failed;
    unsigned long long c;

    if (n->nvmlDeviceGetPcieReplayCounter &&
        n->nvmlDeviceGetPcieReplayCounter(dev, &v) == NVML_SUCCESS)
        f[GPU_FIELD_PCIE_REPLAYS] = v;
    if (n->nvmlDeviceGetTotalEccErrors &&
        n->nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC,
                                       &c) == NVML_SUCCESS)
        f[GPU_FIELD_ECC_SBE_VOL] = (double)c;
    if (n->nvmlDeviceGetTotalEccErrors &&
        n->nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                                       &c) == NVML_SUCCESS)
        f[GPU_FIELD_ECC_DBE_VOL] = (double)c;
    if (n->nvmlDeviceGetRemappedRows &&
        n->nvmlDeviceGetRemappedRows(dev, &cor, &unc, &pending, &failed) == NVML_SUCCESS) {
        f[GPU_FIELD_REMAPPED_COR] = cor;
        f[GPU_FIELD_REMAPPED_UNC] = unc;
        f[GPU_FIELD_REMAP_FAILURE] = failed != 0;
    }
    nvmlGridLicensableFeatures_t lic;
    memset(&lic, 0, sizeof(lic));
    if (n->nvmlDeviceGetGridLicensableFeatures_v4 &&
        n->nvmlDeviceGetGridLicensableFeatures_v4(dev, &lic) == NVML_SUCCESS &&
        lic.isGridLicenseSupported) {
        f[GPU_FIELD_VGPU_LICENSE] = 0;
        for (unsigned k = 0;
             k < lic.licensableFeaturesCount && k < NVML_GRID_LICENSE_FEATURE_MAX_COUNT; k++)
            if (lic.gridLicensableFeatures[k].featureState)
                f[GPU_FIELD_VGPU_LICENSE] = 1;
    }
}

/* A field value as a number, whichever of NVML's types it came in; -1 when it failed. */
static double field_number(const nvmlFieldValue_t *v)
{
    if (v->nvmlReturn != NVML_SUCCESS)
        return -1;
    switch (v->valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
        return v->value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        return v->value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        return (double)v->value.ulVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        return (double)v->value.ullVal;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        return (double)v->value.sllVal;
    case NVML_VALUE_TYPE_SIGNED_INT:
        return v->value.siVal;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
        return v->value.usVal;
    default:
        return -1; /* a type this header does not know */
    }
}

/* Memory temperature and NVLink throughput (every link: scope UINT_MAX), through the
 * field-value call; each field has its own return code. */
static void read_fields(struct gpu_nvml *n, nvmlDevice_t dev, struct gpu_sample *s)
{
    nvmlFieldValue_t v[3];

    if (!n->nvmlDeviceGetFieldValues)
        return;
    memset(v, 0, sizeof(v));
    v[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
    v[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX;
    v[2].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX;
    v[1].scopeId = v[2].scopeId = UINT_MAX;
    if (n->nvmlDeviceGetFieldValues(dev, 3, v) != NVML_SUCCESS)
        return;
    double tx = field_number(&v[1]), rx = field_number(&v[2]);
    s->field[GPU_FIELD_MEMORY_TEMP] = field_number(&v[0]);
    if (tx >= 0 && rx >= 0)
        s->field[GPU_FIELD_NVLINK_BANDWIDTH] = tx + rx;
}

/* The compute processes: memory from the running-process list, SM share from the samples. */
static void read_procs(struct gpu_nvml *n, nvmlDevice_t dev, struct gpu_sample *s)
{
    nvmlProcessInfo_t procs[GPU_SAMPLE_MAX_PROCS];
    unsigned count = GPU_SAMPLE_MAX_PROCS;

    if (n->nvmlDeviceGetComputeRunningProcesses_v3 &&
        n->nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, procs) == NVML_SUCCESS) {
        for (unsigned k = 0; k < count && k < GPU_SAMPLE_MAX_PROCS; k++)
            s->procs[s->n_procs++] = (struct gpu_sample_proc){
                .pid = procs[k].pid,
                .used_bytes = procs[k].usedGpuMemory,
                .gi_id = procs[k].gpuInstanceId,
                .ci_id = procs[k].computeInstanceId,
                .sm_util = -1,
            };
    }
    nvmlProcessUtilizationSample_t samples[GPU_SAMPLE_MAX_PROCS];
    unsigned ns = GPU_SAMPLE_MAX_PROCS;
    if (s->n_procs && n->nvmlDeviceGetProcessUtilization &&
        n->nvmlDeviceGetProcessUtilization(dev, samples, &ns, 0) == NVML_SUCCESS) {
        for (unsigned k = 0; k < ns && k < GPU_SAMPLE_MAX_PROCS; k++)
            for (size_t p = 0; p < s->n_procs; p++)
                if (s->procs[p].pid == samples[k].pid)
                    s->procs[p].sm_util = (int)samples[k].smUtil;
    }
}

int gpu_sample_procs(struct gpu_nvml *n, const char *uuid, struct gpu_sample *out,
                     struct error *err)
{
    nvmlDevice_t dev;
    nvmlReturn_t rc;

    memset(out, 0, sizeof(*out));
    str_copy(out->uuid, uuid, sizeof(out->uuid));
    for (size_t f = 0; f < GPU_FIELD_COUNT; f++)
        out->field[f] = -1;
    if (!n->nvmlDeviceGetHandleByUUID)
        return error_set(err, -ENOTSUP, "nvmlDeviceGetHandleByUUID is missing: %s", uuid);
    rc = n->nvmlDeviceGetHandleByUUID(uuid, &dev);
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetHandleByUUID", uuid);
    read_procs(n, dev, out);
    return 0;
}

int gpu_sample_read(struct gpu_nvml *n, const struct inv_inventory *inv, struct gpu_sample *out,
                    struct error *err)
{
    for (size_t i = 0; i < inv->n_gpus; i++) {
        struct gpu_sample *s = &out[i];
        nvmlDevice_t dev;
        nvmlReturn_t rc;

        memset(s, 0, sizeof(*s));
        str_copy(s->uuid, inv->gpus[i].uuid, sizeof(s->uuid));
        s->index = inv->gpus[i].index;
        for (size_t f = 0; f < GPU_FIELD_COUNT; f++)
            s->field[f] = -1;
        /* by UUID: indexes may change order; drivers too old for it have the index only */
        rc = n->nvmlDeviceGetHandleByUUID
                 ? n->nvmlDeviceGetHandleByUUID(inv->gpus[i].uuid, &dev)
                 : n->nvmlDeviceGetHandleByIndex_v2(inv->gpus[i].index, &dev);
        if (rc != NVML_SUCCESS)
            return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetHandleByUUID", inv->gpus[i].uuid);
        read_basic(n, dev, s);
        read_errors(n, dev, s);
        read_fields(n, dev, s);
        read_procs(n, dev, s);
        read_gis(n, &inv->gpus[i], s);
    }
    return 0;
}

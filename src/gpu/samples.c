/* SPDX-License-Identifier: Apache-2.0 */
/* samples.c: one reading of every GPU's telemetry for the metrics sampler — utilization,
 * framebuffer, temperature, power, SM clock, ECC totals, the compute processes with their
 * memory and SM utilization, and each GPU instance's framebuffer when MIG is on. Whatever
 * NVML does not support on a GPU (MIG-enabled utilization, ECC on consumer parts) is
 * reported as unknown (-1), never as an error. */
#include <errno.h>
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
        if (seen || s->n_gis == GPU_SAMPLE_MAX_GIS ||
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
        s->gpu_util = s->mem_util = s->temperature_c = s->sm_clock_mhz = -1;
        s->power_mw = s->ecc_sbe = s->ecc_dbe = -1;
        rc = n->nvmlDeviceGetHandleByUUID(inv->gpus[i].uuid, &dev);
        if (rc != NVML_SUCCESS)
            return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetHandleByUUID", inv->gpus[i].uuid);
        nvmlUtilization_t u;
        if (n->nvmlDeviceGetUtilizationRates &&
            n->nvmlDeviceGetUtilizationRates(dev, &u) == NVML_SUCCESS) {
            s->gpu_util = (int)u.gpu;
            s->mem_util = (int)u.memory;
        }
        nvmlMemory_t mem;
        memset(&mem, 0, sizeof(mem));
        if (n->nvmlDeviceGetMemoryInfo(dev, &mem) == NVML_SUCCESS) {
            s->fb_total_mib = mem.total >> 20;
            s->fb_used_mib = mem.used >> 20;
            s->fb_free_mib = mem.free >> 20;
        }
        unsigned v;
        if (n->nvmlDeviceGetTemperature &&
            n->nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS)
            s->temperature_c = (int)v;
        if (n->nvmlDeviceGetPowerUsage && n->nvmlDeviceGetPowerUsage(dev, &v) == NVML_SUCCESS)
            s->power_mw = v;
        if (n->nvmlDeviceGetClockInfo &&
            n->nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
            s->sm_clock_mhz = (int)v;
        unsigned long long c;
        if (n->nvmlDeviceGetTotalEccErrors &&
            n->nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC,
                                           &c) == NVML_SUCCESS)
            s->ecc_sbe = (long long)c;
        if (n->nvmlDeviceGetTotalEccErrors &&
            n->nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                           NVML_VOLATILE_ECC, &c) == NVML_SUCCESS)
            s->ecc_dbe = (long long)c;
        /* processes: memory from the running-process list, SM share from the samples */
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
        read_gis(n, &inv->gpus[i], s);
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* nvml_mps.c: the compute mode (nvmlDeviceGet/SetComputeMode) the MPS control daemon needs
 * (EXCLUSIVE_PROCESS), kept in the state file so every process sees the change, as on
 * hardware. Whole GPUs only: NVML refuses it on MIG device handles. */
#include "internal.h"

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!mode)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *mode = (nvmlComputeMode_t)g->compute_mode;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t device, nvmlComputeMode_t mode)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, device, true, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (ci || (unsigned)mode > NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    g->compute_mode = (unsigned)mode;
    return fake_leave(NVML_SUCCESS);
}

/* ---- more telemetry: SM and memory clocks, ECC totals, per-process SM utilization
 * ------------------- */

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!clock || (type != NVML_CLOCK_SM && type != NVML_CLOCK_MEM))
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    *clock = (unsigned)(type == NVML_CLOCK_SM ? fake_telemetry_of(g).sm_clock_mhz
                                              : fake_telemetry_of(g).mem_clock_mhz);
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t type,
                                         nvmlEccCounterType_t counter, unsigned long long *count)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!count || type > NVML_MEMORY_ERROR_TYPE_UNCORRECTED || counter > NVML_AGGREGATE_ECC)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    *count = type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? fake_telemetry_of(g).ecc_corrected
                                                      : fake_telemetry_of(g).ecc_uncorrected;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, device, false, &g, &ci);
    unsigned n = 0;

    (void)lastSeenTimeStamp;
    if (rc != NVML_SUCCESS)
        return rc;
    if (!processSamplesCount)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    for (size_t i = 0; i < g->n_procs; i++) {
        if (utilization && n < *processSamplesCount)
            utilization[n] = (nvmlProcessUtilizationSample_t){
                .pid = g->procs[i].pid, .timeStamp = 1, .smUtil = g->procs[i].sm_util};
        n++;
    }
    rc = n > *processSamplesCount || (n && !utilization) ? NVML_ERROR_INSUFFICIENT_SIZE
                                                         : NVML_SUCCESS;
    *processSamplesCount = n;
    return fake_leave(rc);
}

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

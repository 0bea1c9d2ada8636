/* SPDX-License-Identifier: Apache-2.0 */
/* fake_mig_destroy: destroys one MIG device (its compute instance, then its GPU instance)
 * through NVML, as `nvidia-smi mig -dci/-dgi` would. Linked against tools/fake-nvml, whose
 * state file (FAKE_NVML_STATE) then holds the new layout for every other process.
 * Usage: fake_mig_destroy GPU_INDEX MIG_INDEX. Exit 0, or 1 with the failing call. */
#include <stdio.h>

#include "base/base.h"
#include "gpu/nvml.h"

static int check(nvmlReturn_t rc, const char *what)
{
    if (rc != NVML_SUCCESS)
        fprintf(stderr, "fake_mig_destroy: %s: NVML error %d\n", what, (int)rc);
    return rc == NVML_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv)
{
    nvmlDevice_t gpu, mig;
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    unsigned gpu_index, mig_index, gi_id, ci_id;
    int bad;

    if (argc != 3 || parse_uint(argv[1], &gpu_index) < 0 || parse_uint(argv[2], &mig_index) < 0) {
        fprintf(stderr, "usage: fake_mig_destroy GPU_INDEX MIG_INDEX\n");
        return 2;
    }
    bad = check(nvmlInit_v2(), "nvmlInit_v2") ||
          check(nvmlDeviceGetHandleByIndex_v2(gpu_index, &gpu), "GetHandleByIndex") ||
          check(nvmlDeviceGetMigDeviceHandleByIndex(gpu, mig_index, &mig), "GetMigDeviceHandle") ||
          check(nvmlDeviceGetGpuInstanceId(mig, &gi_id), "GetGpuInstanceId") ||
          check(nvmlDeviceGetComputeInstanceId(mig, &ci_id), "GetComputeInstanceId") ||
          check(nvmlDeviceGetGpuInstanceById(gpu, gi_id, &gi), "GetGpuInstanceById") ||
          check(nvmlGpuInstanceGetComputeInstanceById(gi, ci_id, &ci), "GetComputeInstanceById") ||
          check(nvmlComputeInstanceDestroy(ci), "ComputeInstanceDestroy") ||
          check(nvmlGpuInstanceDestroy(gi), "GpuInstanceDestroy");
    nvmlShutdown();
    return bad;
}

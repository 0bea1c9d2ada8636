/* SPDX-License-Identifier: Apache-2.0 */
/* nvml_minimal.c: a test-only libnvidia-ml stand-in that exports only the symbols the
 * loader requires (plus the v1 CUDA version call), as a pre-MIG, pre-12.4 driver would:
 * two GPUs, no MIG, no NVLink, no topology or process calls. test_loader.c loads it to
 * check that every missing optional symbol degrades its feature instead of failing. */
#include <string.h>

#define NVML_EXPORT __attribute__((visibility("default")))
#include "gpu/nvml.h"

struct nvmlDevice_st {
    unsigned index;
};

static struct nvmlDevice_st devices[2] = {{0}, {1}};

static nvmlReturn_t put(char *dst, unsigned length, const char *s)
{
    if (!dst || strlen(s) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    return NVML_SUCCESS;
}

NVML_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    return result == NVML_SUCCESS ? "Success" : "Unknown Error";
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    return put(version, length, "418.226.00");
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    *v = 10010;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    *count = 2;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (index >= 2)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    return put(uuid, length,
               device->index ? "GPU-00000000-0000-0000-0000-000000000001"
                             : "GPU-00000000-0000-0000-0000-000000000000");
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    (void)device;
    return put(name, length, "Tesla V100-SXM2-16GB");
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    *minor = device->index;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    (void)device;
    memset(memory, 0, sizeof(*memory));
    memory->total = 16160ULL << 20;
    memory->free = memory->total;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    memset(pci, 0, sizeof(*pci));
    pci->bus = 0x1a + device->index;
    pci->pciDeviceId = 0x1DB110DE;
    put(pci->busId, sizeof(pci->busId), device->index ? "00000000:1B:00.0" : "00000000:1A:00.0");
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                            int *minor)
{
    (void)device;
    *major = 7;
    *minor = 0;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    (void)device;
    *type = NVML_BRAND_TESLA;
    return NVML_SUCCESS;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* nvml_tools.c: NVML calls that NVIDIA's own tools make and gpuslice does not: mig-parted
 * looks GPUs up by PCI bus id and reads the NVML version, and dies with a symbol lookup
 * error on a library without them. Also the GPU-instance profile index bound of the NVML
 * the machine's CUDA version stands for (a real 580 driver answers INVALID_ARGUMENT at
 * index 17). NVIDIA's DRA driver's addressing-mode read. Declared in internal.h, since
 * src/gpu/nvml.h holds only what gpuslice calls. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

unsigned fake_gi_profile_count(const struct fake_machine *m)
{
    /* NVML_GPU_INSTANCE_PROFILE_COUNT by NVML version (facts A.2): 0xD in 12.8, 0x11 in
     * 12.9-13.1, 0x12 from 13.2; NVML's version follows CUDA's */
    int cuda = m ? m->cuda : 0;

    if (cuda >= 13020)
        return 0x12;
    if (cuda >= 12090)
        return 0x11;
    if (cuda >= 12070)
        return 0xD;
    return 0xA;
}

/* "13.580.159.04": CUDA's major version, then the driver's (as the real library writes it). */
NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE + 16]; /* "<cuda major>." + driver */
    nvmlReturn_t rc = fake_enter(__func__, NULL, false, NULL, NULL);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!version)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    snprintf(buf, sizeof(buf), "%d.%s", fake_current()->cuda / 1000, fake_current()->driver);
    if (strlen(buf) + 1 > length)
        return fake_leave(NVML_ERROR_INSUFFICIENT_SIZE);
    memcpy(version, buf, strlen(buf) + 1);
    return fake_leave(NVML_SUCCESS);
}

/* "domain:bus:device.function" (any width, hex, either case) or "bus:device.function". */
static bool parse_bus_id(const char *s, unsigned *domain, unsigned *bus, unsigned *dev,
                         unsigned *fn)
{
    char tail;

    if (sscanf(s, "%x:%x:%x.%x%c", domain, bus, dev, fn, &tail) == 4)
        return true;
    *domain = 0;
    return sscanf(s, "%x:%x.%x%c", bus, dev, fn, &tail) == 3;
}

static nvmlReturn_t by_pci_bus_id(const char *fn_name, const char *pciBusId, nvmlDevice_t *device)
{
    unsigned domain, bus, dev, fn;
    struct fake_machine *m;
    nvmlReturn_t rc = fake_enter(fn_name, NULL, false, NULL, NULL);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!pciBusId || !device || !parse_bus_id(pciBusId, &domain, &bus, &dev, &fn))
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    m = fake_current();
    for (size_t i = 0; i < m->n_gpus; i++) {
        struct fake_gpu *g = &m->gpus[i];
        if (g->pci_domain != domain || g->pci_bus != bus || dev != 0 || fn != 0)
            continue;
        if (fake_fault(fn_name, (int)i, &rc))
            return fake_leave(rc);
        *device = (nvmlDevice_t)g;
        return fake_leave(NVML_SUCCESS);
    }
    return fake_leave(NVML_ERROR_NOT_FOUND);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId,
                                                          nvmlDevice_t *device)
{
    return by_pci_bus_id(__func__, pciBusId, device);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return by_pci_bus_id(__func__, pciBusId, device);
}

/* NOT_SUPPORTED, as on every x86 machine: only coherent platforms (Grace) answer HMM or ATS,
 * and NVIDIA's DRA driver then simply leaves its addressingMode attribute out. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device,
                                                     nvmlDeviceAddressingMode_t *mode)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!mode)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    return fake_leave(NVML_ERROR_NOT_SUPPORTED);
}

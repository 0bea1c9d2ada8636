/* SPDX-License-Identifier: Apache-2.0 */
/* nvml_telemetry.c: the NVML reads behind dcgm-exporter's default fields that have a call
 * of their own — encoder/decoder utilization, total energy, PCIe replays, remapped rows,
 * field values (memory temperature, NVLink throughput) and vGPU licensing — answered from
 * the GPU's telemetry (telemetry.c). Whole GPUs only: MIG device handles get NOT_SUPPORTED,
 * as these are per-board readings. */
#include <limits.h>
#include <string.h>

#include "internal.h"

/* The GPU of a whole-GPU handle with its telemetry, or the NVML code to return. */
static nvmlReturn_t enter(const char *fn, nvmlDevice_t device, const void *out,
                          struct fake_telemetry *ret_t)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(fn, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    *ret_t = fake_telemetry_of(g);
    return NVML_SUCCESS; /* the caller leaves */
}

static nvmlReturn_t engine_util(const char *fn, nvmlDevice_t device, unsigned *util,
                                unsigned *period_us, bool encoder)
{
    struct fake_telemetry t;
    nvmlReturn_t rc = enter(fn, device, period_us ? (const void *)util : NULL, &t);

    if (rc != NVML_SUCCESS)
        return rc;
    *util = (unsigned)(encoder ? t.enc_util : t.dec_util);
    *period_us = 167000; /* what an idle Hopper reports */
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    return engine_util(__func__, device, utilization, samplingPeriodUs, true);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    return engine_util(__func__, device, utilization, samplingPeriodUs, false);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
    struct fake_telemetry t;
    nvmlReturn_t rc = enter(__func__, device, energy, &t);

    if (rc != NVML_SUCCESS)
        return rc;
    *energy = t.energy_mj;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
    struct fake_telemetry t;
    nvmlReturn_t rc = enter(__func__, device, value, &t);

    if (rc != NVML_SUCCESS)
        return rc;
    *value = (unsigned)t.pcie_replays;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred)
{
    struct fake_telemetry t;
    bool all = corrRows && uncRows && isPending && failureOccurred;
    nvmlReturn_t rc = enter(__func__, device, all ? (const void *)corrRows : NULL, &t);

    if (rc != NVML_SUCCESS)
        return rc;
    *corrRows = (unsigned)t.remapped_correctable;
    *uncRows = (unsigned)t.remapped_uncorrectable;
    *isPending = 0;
    *failureOccurred = (unsigned)t.remap_failed;
    return fake_leave(NVML_SUCCESS);
}

static bool has_nvlink(const struct fake_gpu *g)
{
    for (size_t i = 0; i < NVML_NVLINK_MAX_LINKS; i++)
        if (g->links[i] != FAKE_LINK_NONE)
            return true;
    return false;
}

/* One field: its own return code, as NVML fills them (the call itself succeeds). */
static void field_value(const struct fake_gpu *g, const struct fake_telemetry *t,
                        nvmlFieldValue_t *v)
{
    uint64_t half = t->nvlink_raw_kib / 2;

    v->nvmlReturn = NVML_SUCCESS;
    v->timestamp = 1;
    v->latencyUsec = 0;
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    switch (v->fieldId) {
    case NVML_FI_DEV_MEMORY_TEMP:
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v->value.uiVal = (unsigned)t->memory_temp_c;
        return;
    case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX:
        if (!has_nvlink(g) || v->scopeId != UINT_MAX) { /* per link: not simulated */
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            return;
        }
        v->value.ullVal =
            v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX ? half : t->nvlink_raw_kib - half;
        return;
    default:
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        return;
    }
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, device, false, &g, &ci);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!values || valuesCount <= 0)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    struct fake_telemetry t = fake_telemetry_of(g);
    for (int i = 0; i < valuesCount; i++) {
        if (ci) {
            values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        field_value(g, &t, &values[i]);
    }
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGridLicensableFeatures_v4(nvmlDevice_t device,
                                                    nvmlGridLicensableFeatures_t *features)
{
    struct fake_telemetry t;
    nvmlReturn_t rc = enter(__func__, device, features, &t);

    if (rc != NVML_SUCCESS)
        return rc;
    memset(features, 0, sizeof(*features));
    if (t.vgpu_licensed == FAKE_NOT_APPLICABLE) /* bare metal or passthrough */
        return fake_leave(NVML_SUCCESS);
    features->isGridLicenseSupported = 1;
    features->licensableFeaturesCount = 1;
    nvmlGridLicensableFeature_t *f = &features->gridLicensableFeatures[0];
    f->featureCode = NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE;
    f->featureState = (unsigned)t.vgpu_licensed;
    f->featureEnabled = 1;
    str_copy(f->productName, "NVIDIA Virtual Compute Server", sizeof(f->productName));
    return fake_leave(NVML_SUCCESS);
}

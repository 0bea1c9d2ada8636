/* SPDX-License-Identifier: Apache-2.0 */
/* events.c: NVML event sets for health checking — register XID critical errors on every
 * GPU of a snapshot and wait for them, as NVIDIA's health checker does (facts §6). Returns
 * plain gpu_event structs; no NVML type leaves gpu/. Never logs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/internal.h"

struct gpu_events {
    struct gpu_nvml *nvml; /* borrowed */
    nvmlEventSet_t set;
};

void gpu_events_close(struct gpu_events *ev)
{
    if (!ev)
        return;
    if (ev->set && ev->nvml->nvmlEventSetFree)
        ev->nvml->nvmlEventSetFree(ev->set);
    free(ev);
}

int gpu_events_open(struct gpu_nvml *nvml, const struct inv_inventory *inv, struct gpu_events **ret,
                    char ***ret_warnings, struct error *err)
{
    struct gpu_events *ev = NULL;
    char **warnings = strv_new();
    nvmlReturn_t rc;
    int r = 0;

    if (!warnings)
        return error_set(err, -ENOMEM, "out of memory");
    if (!nvml->nvmlEventSetCreate || !nvml->nvmlDeviceRegisterEvents ||
        !nvml->nvmlEventSetWait_v2 || !nvml->nvmlEventSetFree || !nvml->nvmlDeviceGetHandleByUUID) {
        r = error_set(err, -EOPNOTSUPP, "NVML library '%s' has no event API",
                      gpu_nvml_library_path(nvml));
        goto out;
    }
    ev = calloc(1, sizeof(*ev));
    if (!ev) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    ev->nvml = nvml;
    rc = nvml->nvmlEventSetCreate(&ev->set);
    if (rc != NVML_SUCCESS) {
        r = gpu__nvml_fail(nvml, err, rc, "nvmlEventSetCreate", "the event set");
        goto out;
    }
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        unsigned long long types = nvmlEventTypeXidCriticalError;
        unsigned long long supported = 0;
        nvmlDevice_t dev;

        rc = nvml->nvmlDeviceGetHandleByUUID(g->uuid, &dev);
        if (rc != NVML_SUCCESS) {
            r = gpu__nvml_fail(nvml, err, rc, "nvmlDeviceGetHandleByUUID", g->uuid);
            goto out;
        }
        if (nvml->nvmlDeviceGetSupportedEventTypes &&
            nvml->nvmlDeviceGetSupportedEventTypes(dev, &supported) == NVML_SUCCESS)
            types &= supported;
        if (!types) {
            r = gpu__warn(&warnings,
                          "GPU %u (%s) does not report XID events, no health "
                          "checks for it",
                          g->index, g->uuid);
            if (r < 0)
                goto out;
            continue;
        }
        rc = nvml->nvmlDeviceRegisterEvents(dev, types, ev->set);
        if (rc == NVML_ERROR_NOT_SUPPORTED) {
            r = gpu__warn(&warnings, "GPU %u (%s) is too old to support health checking", g->index,
                          g->uuid);
            if (r < 0)
                goto out;
        } else if (rc != NVML_SUCCESS) {
            r = gpu__nvml_fail(nvml, err, rc, "nvmlDeviceRegisterEvents", g->uuid);
            goto out;
        }
    }
    *ret = ev;
    ev = NULL;
    *ret_warnings = warnings;
    warnings = NULL;
out:
    strv_free(warnings);
    gpu_events_close(ev);
    return r < 0 ? r : 0;
}

int gpu_device_answers(struct gpu_nvml *n, const char *uuid, struct error *err)
{
    nvmlDevice_t dev;
    nvmlMemory_t mem;
    nvmlReturn_t rc = n->nvmlDeviceGetHandleByUUID(uuid, &dev);

    if (rc == NVML_SUCCESS)
        rc = n->nvmlDeviceGetMemoryInfo(dev, &mem);
    if (rc == NVML_SUCCESS)
        return 1;
    if (rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_NOT_FOUND)
        return 0;
    return gpu__nvml_fail(n, err, rc, "nvmlDeviceGetMemoryInfo", uuid);
}

int gpu_events_wait(struct gpu_events *ev, int timeout_ms, struct gpu_event *ret, struct error *err)
{
    struct gpu_nvml *nvml = ev->nvml;
    nvmlEventData_t data;
    struct gpu_event e;
    nvmlReturn_t rc;

    memset(&data, 0, sizeof(data));
    memset(&e, 0, sizeof(e));
    rc = nvml->nvmlEventSetWait_v2(ev->set, &data, timeout_ms > 0 ? (unsigned)timeout_ms : 0);
    if (rc == NVML_ERROR_TIMEOUT)
        return 0;
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(nvml, err, rc, "nvmlEventSetWait_v2", "the event set");
    e.type = data.eventType;
    e.xid = data.eventData;
    e.gi_id = data.gpuInstanceId;
    e.ci_id = data.computeInstanceId;
    e.is_xid = (data.eventType & nvmlEventTypeXidCriticalError) != 0;
    rc = nvml->nvmlDeviceGetUUID(data.device, e.uuid, sizeof(e.uuid));
    if (rc != NVML_SUCCESS)
        return gpu__nvml_fail(nvml, err, rc, "nvmlDeviceGetUUID", "an event's device");
    *ret = e;
    return 1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* nvml.c: the exported NVML entry points of the fake library for init/shutdown, errors,
 * system queries and per-device queries, plus the shared prologue (init check, state-file
 * refresh, handle checks, fault injection) used by every call. NVML's C API has no context
 * argument, so the library keeps one global context behind one mutex — the only global. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define FAKE_MAX_FAULTS 64
/* FAKE_NVML_FAIL code that kills the process (SIGKILL) at the call instead of failing it. */
#define FAKE_FAULT_KILL 9999

struct fault {
    char fn[64];
    int gpu; /* -1: any device */
    nvmlReturn_t rc;
    unsigned nth;   /* 0: every matching call; N: only the Nth (counted in this process) */
    unsigned calls; /* matching calls seen */
};

struct fake_ctx {
    pthread_mutex_t lock;
    unsigned refcount;
    struct fake_machine *m;
    char *state_path;
    bool seen_valid;
    struct stat seen; /* the state file as last read or written */
    bool mutating;    /* between fake_enter(mutate) and fake_leave */
    int lock_fd;      /* the state-file lock while mutating (-1 if it could not be taken) */
    struct fault faults[FAKE_MAX_FAULTS];
    size_t n_faults;
    char last_report[ERROR_MSG_MAX];
};

static struct fake_ctx ctx = {.lock = PTHREAD_MUTEX_INITIALIZER, .lock_fd = -1};

/* A fake may tell the user why init failed; the real library stays silent. Each distinct
 * message is printed once. */
static void report(const char *msg)
{
    if (strcmp(ctx.last_report, msg) == 0)
        return;
    str_copy(ctx.last_report, msg, sizeof(ctx.last_report));
    fprintf(stderr, "fake-nvml: %s\n", msg);
}

/* FAKE_NVML_FAIL="fn=code,fn@gpu=code,fn#N=code,fn@gpu#N=code" */
static int faults_parse(const char *spec, struct error *err)
{
    char *copy = str_dup(spec), *item, *next = NULL;
    int r = 0;

    ctx.n_faults = 0;
    if (!copy)
        return spec ? error_set(err, -ENOMEM, "out of memory") : 0;
    for (item = copy; item && r == 0; item = next) {
        char *comma = strchr(item, ',');
        next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        if (!*item)
            continue;
        struct fault *f = &ctx.faults[ctx.n_faults];
        char *eq = strchr(item, '='), *at;
        unsigned code, gpu;

        if (ctx.n_faults >= FAKE_MAX_FAULTS) {
            r = error_set(err, -E2BIG, "FAKE_NVML_FAIL: more than %d entries", FAKE_MAX_FAULTS);
            break;
        }
        if (!eq || parse_uint(eq + 1, &code) < 0) {
            r = error_set(err, -EINVAL, "FAKE_NVML_FAIL: '%s' is not name[@gpu][#call]=code", item);
            break;
        }
        *eq = '\0';
        f->gpu = -1;
        f->nth = 0;
        f->calls = 0;
        char *hash = strchr(item, '#');
        if (hash) {
            *hash = '\0';
            if (parse_uint(hash + 1, &f->nth) < 0 || f->nth == 0) {
                r = error_set(err, -EINVAL,
                              "FAKE_NVML_FAIL: '#%s' is not a call number (1, 2, ...)", hash + 1);
                break;
            }
        }
        at = strchr(item, '@');
        if (at) {
            *at = '\0';
            if (parse_uint(at + 1, &gpu) < 0 || gpu >= FAKE_MAX_GPUS) {
                r = error_set(err, -EINVAL, "FAKE_NVML_FAIL: bad GPU index '%s'", at + 1);
                break;
            }
            f->gpu = (int)gpu;
        }
        if (!*item || str_copy(f->fn, item, sizeof(f->fn)) >= sizeof(f->fn)) {
            r = error_set(err, -EINVAL, "FAKE_NVML_FAIL: bad function name '%s'", item);
            break;
        }
        f->rc = (nvmlReturn_t)code;
        ctx.n_faults++;
    }
    free(copy);
    if (r < 0)
        ctx.n_faults = 0;
    return r;
}

bool fake_fault(const char *fn, int gpu, nvmlReturn_t *rc)
{
    for (size_t i = 0; i < ctx.n_faults; i++) {
        struct fault *f = &ctx.faults[i];
        if (strcmp(f->fn, fn) != 0 || (f->gpu >= 0 && f->gpu != gpu))
            continue;
        f->calls++;
        if (f->nth && f->calls != f->nth)
            continue; /* a one-shot failure: the Nth matching call only */
        if (f->rc == FAKE_FAULT_KILL)
            raise(SIGKILL); /* the process killed right there (kill -9 mid-way) */
        *rc = f->rc;
        return true;
    }
    return false;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Re-reads the state file when it changed since we last read or wrote it. */
static void state_refresh(void)
{
    struct error err = {0};
    struct stat st;
    int r;

    if (stat(ctx.state_path, &st) < 0)
        return;
    if (ctx.seen_valid && same_file(&st, &ctx.seen))
        return;
    r = fake_state_load(ctx.m, ctx.state_path, &err);
    if (r < 0 && r != -ENOENT && r != -ESTALE)
        report(err.msg);
    ctx.seen = st;
    ctx.seen_valid = true;
}

static void state_save(void)
{
    struct error err = {0};
    struct stat st;

    fake_caps_sync(ctx.m);
    if (fake_state_save(ctx.m, ctx.state_path, &err) < 0) {
        report(err.msg);
        return;
    }
    if (stat(ctx.state_path, &st) == 0) {
        ctx.seen = st;
        ctx.seen_valid = true;
    }
}

static int state_lock(void)
{
    struct strbuf p = STRBUF_INIT;
    int fd = -1;

    if (strbuf_printf(&p, "%s.lock", ctx.state_path) == 0)
        fd = open(p.buf, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    strbuf_release(&p);
    if (fd >= 0 && flock(fd, LOCK_EX) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static bool in_array(const void *p, const void *base, size_t elem, size_t n, size_t *ret_i)
{
    const char *c = p, *b = base;

    if (c < b || c >= b + elem * n || (size_t)(c - b) % elem != 0)
        return false;
    *ret_i = (size_t)(c - b) / elem;
    return true;
}

/* Our handles are addresses inside m->gpus: a GPU, or a CI slot inside one of its GIs. */
static nvmlReturn_t resolve(const void *h, struct fake_gpu **ret_g, struct fake_ci **ret_ci)
{
    struct fake_machine *m = ctx.m;
    size_t i, gi_i, ci_i;

    if (!h)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (in_array(h, m->gpus, sizeof(*m->gpus), m->n_gpus, &i)) {
        *ret_g = &m->gpus[i];
        *ret_ci = NULL;
        return NVML_SUCCESS;
    }
    for (i = 0; i < m->n_gpus; i++)
        for (gi_i = 0; gi_i < FAKE_MAX_GI; gi_i++)
            if (in_array(h, m->gpus[i].gis[gi_i].cis, sizeof(struct fake_ci), FAKE_MAX_CI, &ci_i)) {
                struct fake_ci *ci = &m->gpus[i].gis[gi_i].cis[ci_i];
                if (!m->gpus[i].gis[gi_i].in_use || !ci->in_use)
                    return NVML_ERROR_INVALID_ARGUMENT;
                *ret_g = &m->gpus[i];
                *ret_ci = ci;
                return NVML_SUCCESS;
            }
    return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t fake_enter(const char *fn, nvmlDevice_t dev, bool mutate, struct fake_gpu **ret_g,
                        struct fake_ci **ret_ci)
{
    struct fake_gpu *g = NULL;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = NVML_SUCCESS;

    pthread_mutex_lock(&ctx.lock);
    if (ctx.refcount == 0) {
        pthread_mutex_unlock(&ctx.lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    ctx.mutating = mutate;
    if (mutate)
        ctx.lock_fd = state_lock();
    state_refresh();
    fake_live_refresh(ctx.m); /* telemetry.c: run-time telemetry and processes */
    if (ret_g) /* the caller needs a device: a NULL or foreign handle is INVALID_ARGUMENT */
        rc = resolve(dev, &g, &ci);
    if (rc == NVML_SUCCESS && g && g->lost)
        rc = NVML_ERROR_GPU_IS_LOST; /* as a GPU that fell off the bus, until it is back */
    if (rc == NVML_SUCCESS)
        (void)fake_fault(fn, g ? (int)g->index : -1, &rc); /* sets rc only on a match */
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    if (ret_g)
        *ret_g = g;
    if (ret_ci)
        *ret_ci = ci;
    return NVML_SUCCESS;
}

nvmlReturn_t fake_leave(nvmlReturn_t rc)
{
    if (ctx.mutating && rc == NVML_SUCCESS)
        state_save();
    if (ctx.lock_fd >= 0)
        close(ctx.lock_fd); /* drops the flock */
    ctx.lock_fd = -1;
    ctx.mutating = false;
    pthread_mutex_unlock(&ctx.lock);
    return rc;
}

struct fake_machine *fake_current(void)
{
    return ctx.m;
}

struct fake_gpu *fake_find_uuid(const char *uuid, struct fake_ci **ret_ci)
{
    struct fake_ci *devs[FAKE_MAX_GI * FAKE_MAX_CI];
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

    for (size_t i = 0; i < ctx.m->n_gpus; i++) {
        struct fake_gpu *g = &ctx.m->gpus[i];
        size_t n;
        if (strcmp(g->uuid, uuid) == 0) {
            *ret_ci = NULL;
            return g;
        }
        n = fake_mig_devices(g, devs, GS_ARRAY_SIZE(devs));
        for (size_t k = 0; k < n; k++) {
            fake_mig_uuid(devs[k], buf, sizeof(buf));
            if (strcmp(buf, uuid) == 0) {
                *ret_ci = devs[k];
                return g;
            }
        }
    }
    return NULL;
}

/* ---- init and shutdown ------------------------------------------------------------------- */

static nvmlReturn_t init_locked(void)
{
    struct error err = {0};
    struct strbuf sp = STRBUF_INIT;
    const char *machine = getenv("FAKE_NVML_MACHINE"), *state = getenv("FAKE_NVML_STATE");
    nvmlReturn_t rc;

    if (ctx.refcount > 0) {
        if (fake_fault("nvmlInit_v2", -1, &rc))
            return rc;
        ctx.refcount++;
        return NVML_SUCCESS;
    }
    if (faults_parse(getenv("FAKE_NVML_FAIL"), &err) < 0) {
        report(err.msg);
        return NVML_ERROR_UNKNOWN;
    }
    if (fake_fault("nvmlInit_v2", -1, &rc))
        return rc;
    if (!machine || !*machine) {
        report("FAKE_NVML_MACHINE is not set: point it at a machine file (docs/fake-nvml.md)");
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (fake_machine_load(machine, &ctx.m, &err) < 0) {
        report(err.msg);
        return NVML_ERROR_UNKNOWN;
    }
    if (state && *state)
        ctx.state_path = str_dup(state);
    else if (strbuf_printf(&sp, "%s.state", machine) == 0)
        ctx.state_path = strbuf_take(&sp);
    strbuf_release(&sp);
    if (!ctx.state_path) {
        fake_machine_free(ctx.m);
        ctx.m = NULL;
        return NVML_ERROR_MEMORY;
    }
    ctx.seen_valid = false;
    ctx.refcount = 1;
    state_refresh();
    /* FAKE_NVML_REBOOT=1: this process starts on a freshly booted node: pending MIG modes
     * take effect (and clear the instances), as after a real reboot */
    const char *reboot = getenv("FAKE_NVML_REBOOT");
    bool rebooted = false;
    for (size_t i = 0; reboot && *reboot == '1' && i < ctx.m->n_gpus; i++) {
        struct fake_gpu *g = &ctx.m->gpus[i];
        if (g->mig_pending != g->mig_current) {
            fake_mig_clear(g);
            g->mig_current = g->mig_pending;
            rebooted = true;
        }
    }
    if (rebooted)
        state_save();
    fake_caps_sync(ctx.m);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void)
{
    nvmlReturn_t rc;

    pthread_mutex_lock(&ctx.lock);
    rc = init_locked();
    pthread_mutex_unlock(&ctx.lock);
    return rc;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t rc = NVML_SUCCESS;

    pthread_mutex_lock(&ctx.lock);
    if (ctx.refcount > 0 && !fake_fault("nvmlShutdown", -1, &rc) && --ctx.refcount == 0) {
        fake_machine_free(ctx.m);
        ctx.m = NULL;
        free(ctx.state_path);
        ctx.state_path = NULL;
        ctx.seen_valid = false;
    }
    pthread_mutex_unlock(&ctx.lock);
    return rc;
}

static const struct {
    nvmlReturn_t rc;
    const char *text;
} error_strings[] = {
    {NVML_SUCCESS, "Success"},
    {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
    {NVML_ERROR_INSUFFICIENT_POWER, "Insufficient External Power"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
    {NVML_ERROR_TIMEOUT, "Timeout"},
    {NVML_ERROR_IRQ_ISSUE, "Interrupt Request Issue"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
    {NVML_ERROR_CORRUPTED_INFOROM, "Corrupted infoROM"},
    {NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
    {NVML_ERROR_RESET_REQUIRED, "GPU requires reset"},
    {NVML_ERROR_OPERATING_SYSTEM, "GPU access blocked by the operating system"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "Driver/library version mismatch"},
    {NVML_ERROR_IN_USE, "In use by another client"},
    {NVML_ERROR_MEMORY, "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "vGPU ECC Not Supported"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "Insufficient Resources"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "Frequency Not Supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument Version Mismatch"},
    {NVML_ERROR_DEPRECATED, "Deprecated"},
    {NVML_ERROR_NOT_READY, "Not Ready"},
    {NVML_ERROR_GPU_NOT_FOUND, "GPU Not Found"},
    {NVML_ERROR_INVALID_STATE, "Invalid State"},
    {NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "Reset Type Not Supported"},
    {NVML_ERROR_UNKNOWN, "Unknown Error"},
};

const char *nvmlErrorString(nvmlReturn_t result)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(error_strings); i++)
        if (error_strings[i].rc == result)
            return error_strings[i].text;
    return "Unknown Error";
}

/* ---- system ------------------------------------------------------------------------------ */

static nvmlReturn_t copy_string(char *dst, unsigned int length, const char *src)
{
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    nvmlReturn_t rc = fake_enter(__func__, NULL, false, NULL, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    return fake_leave(copy_string(version, length, ctx.m->driver));
}

static nvmlReturn_t cuda_version(const char *fn, int *v)
{
    nvmlReturn_t rc = fake_enter(fn, NULL, false, NULL, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!v)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *v = ctx.m->cuda;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return cuda_version(__func__, cudaDriverVersion);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return cuda_version(__func__, cudaDriverVersion);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    nvmlReturn_t rc = fake_enter(__func__, NULL, false, NULL, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!deviceCount)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *deviceCount = (unsigned)ctx.m->n_gpus;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t rc = fake_enter(__func__, NULL, false, NULL, NULL);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!device || index >= ctx.m->n_gpus)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (fake_fault(__func__, (int)index, &rc))
        return fake_leave(rc);
    *device = (nvmlDevice_t)&ctx.m->gpus[index];
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    struct fake_gpu *g;
    struct fake_ci *ci = NULL;
    nvmlReturn_t rc = fake_enter(__func__, NULL, false, NULL, NULL);

    if (rc != NVML_SUCCESS)
        return rc;
    if (!uuid || !device)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    g = fake_find_uuid(uuid, &ci);
    if (!g)
        return fake_leave(NVML_ERROR_NOT_FOUND);
    *device = ci ? (nvmlDevice_t)ci : (nvmlDevice_t)g;
    return fake_leave(NVML_SUCCESS);
}

/* ---- per device -------------------------------------------------------------------------- */

/* Prologue of a device query: g is the GPU (the parent for a MIG handle), ci the MIG device. */
#define DEVICE_ENTER(dev, mutate)                                                                  \
    struct fake_gpu *g = NULL;                                                                     \
    struct fake_ci *ci = NULL;                                                                     \
    nvmlReturn_t rc = fake_enter(__func__, (dev), (mutate), &g, &ci);                              \
    if (rc != NVML_SUCCESS)                                                                        \
    return rc

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    DEVICE_ENTER(device, false);

    if (ci)
        fake_mig_uuid(ci, buf, sizeof(buf));
    else
        str_copy(buf, g->uuid, sizeof(buf));
    return fake_leave(copy_string(uuid, length, buf));
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE], prof[32];
    DEVICE_ENTER(device, false);

    if (ci) {
        fake_mig_profile_name(ci, prof, sizeof(prof));
        snprintf(buf, sizeof(buf), "%s MIG %s", g->model.name, prof);
    } else {
        str_copy(buf, g->model.name, sizeof(buf));
    }
    return fake_leave(copy_string(name, length, buf));
}

static unsigned mig_index(struct fake_gpu *g, const struct fake_ci *ci)
{
    struct fake_ci *devs[FAKE_MAX_GI * FAKE_MAX_CI];
    size_t n = fake_mig_devices(g, devs, GS_ARRAY_SIZE(devs));

    for (size_t i = 0; i < n; i++)
        if (devs[i] == ci)
            return (unsigned)i;
    return 0;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEVICE_ENTER(device, false);
    if (!index)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *index = ci ? mig_index(g, ci) : g->index;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    DEVICE_ENTER(device, false);
    if (!minorNumber)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    *minorNumber = g->index;
    return fake_leave(NVML_SUCCESS);
}

/* Bytes used on a GPU (gi_id = INVALID: all) or in one GPU instance. */
static unsigned long long used_bytes(const struct fake_gpu *g, unsigned gi_id)
{
    unsigned long long used = 0;
    for (size_t i = 0; i < g->n_procs; i++)
        if (gi_id == INVALID_GPU_INSTANCE_ID || g->procs[i].gi_id == gi_id)
            used += g->procs[i].used_mib << 20;
    return used;
}

/* A handle's memory. *reserved is the driver's share of a whole GPU (the machine's
 * fb_reserved_mib): in use, but no process's; a MIG device reports none of it. */
static void memory_of(const struct fake_gpu *g, const struct fake_ci *ci, unsigned long long *total,
                      unsigned long long *used, unsigned long long *reserved)
{
    if (ci) {
        *total = (unsigned long long)ci->gi->profile->memory_mib << 20;
        *used = used_bytes(g, ci->gi->id);
        *reserved = 0;
    } else {
        *total = g->model.memory_mib << 20;
        *used = used_bytes(g, INVALID_GPU_INSTANCE_ID);
        *reserved = fake_telemetry_of(g).fb_reserved_mib << 20;
    }
    if (*reserved > *total)
        *reserved = *total;
    if (*used > *total - *reserved)
        *used = *total - *reserved;
}

/* v1 counts the reservation as used, as the driver does since R510. */
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    unsigned long long total, used, reserved;
    DEVICE_ENTER(device, false);

    if (!memory)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (g->unified_memory)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    memory_of(g, ci, &total, &used, &reserved);
    memory->total = total;
    memory->used = used + reserved;
    memory->free = total - used - reserved;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    unsigned long long total, used, reserved;
    DEVICE_ENTER(device, false);

    if (!memory)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (memory->version != nvmlMemory_v2)
        return fake_leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (g->unified_memory)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    memory_of(g, ci, &total, &used, &reserved);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - used - reserved;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    DEVICE_ENTER(device, false);
    if (!major || !minor)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *major = g->model.cc_major;
    *minor = g->model.cc_minor;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
    DEVICE_ENTER(device, false);
    if (!arch)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *arch = g->model.arch;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    DEVICE_ENTER(device, false);
    if (!type)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *type = (nvmlBrandType_t)g->model.brand;
    return fake_leave(NVML_SUCCESS);
}

static void pci_fill(nvmlPciInfo_t *pci, unsigned domain, unsigned bus, unsigned device_id)
{
    memset(pci, 0, sizeof(*pci));
    pci->domain = domain;
    pci->bus = bus;
    pci->device = 0;
    pci->pciDeviceId = device_id;
    pci->pciSubSystemId = 0;
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT,
             domain & 0xffff, bus, 0u);
    snprintf(pci->busId, sizeof(pci->busId), NVML_DEVICE_PCI_BUS_ID_FMT, domain, bus, 0u);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEVICE_ENTER(device, false);
    if (!pci)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    pci_fill(pci, g->pci_domain, g->pci_bus, g->model.pci_device_id);
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    DEVICE_ENTER(device, false);
    if (!node)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    *node = g->numa_node;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo)
{
    struct fake_gpu *g2 = NULL;
    struct fake_ci *ci2 = NULL;
    DEVICE_ENTER(device1, false);

    if (!pathInfo || resolve(device2, &g2, &ci2) != NVML_SUCCESS)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci || ci2)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    /* PCIe only, by NUMA node: the same GPU is INTERNAL, the same node NODE, else SYSTEM. */
    *pathInfo = g == g2                         ? NVML_TOPOLOGY_INTERNAL
                : g->numa_node == g2->numa_node ? NVML_TOPOLOGY_NODE
                                                : NVML_TOPOLOGY_SYSTEM;
    return fake_leave(NVML_SUCCESS);
}

static nvmlReturn_t link_check(const struct fake_gpu *g, const struct fake_ci *ci, unsigned link)
{
    if (ci || g->model.nvlinks == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (link >= g->model.nvlinks)
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive)
{
    DEVICE_ENTER(device, false);
    if (!isActive)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = link_check(g, ci, link);
    if (rc == NVML_SUCCESS)
        *isActive = g->links[link] == FAKE_LINK_NONE ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return fake_leave(rc);
}

/* NVSwitch devices of the fake (`nvlink: all`): 4 switches, link l goes to switch l % 4. */
#define FAKE_NVSWITCH_DEVICE_ID 0x22A310DE
#define FAKE_NVSWITCH_BUS 0xC0

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci)
{
    DEVICE_ENTER(device, false);
    if (!pci)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = link_check(g, ci, link);
    if (rc != NVML_SUCCESS)
        return fake_leave(rc);
    if (g->links[link] == FAKE_LINK_NONE)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    if (g->links[link] == FAKE_LINK_SWITCH) {
        pci_fill(pci, 0, FAKE_NVSWITCH_BUS + link % 4, FAKE_NVSWITCH_DEVICE_ID);
    } else {
        const struct fake_gpu *peer = &ctx.m->gpus[g->links[link]];
        pci_fill(pci, peer->pci_domain, peer->pci_bus, peer->model.pci_device_id);
    }
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    unsigned n = 0;
    DEVICE_ENTER(device, false);

    if (!infoCount)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    for (size_t i = 0; i < g->n_procs; i++) {
        const struct fake_process *p = &g->procs[i];
        if (ci && (p->gi_id != ci->gi->id || p->ci_id != ci->id))
            continue;
        if (infos && n < *infoCount) {
            infos[n].pid = p->pid;
            infos[n].usedGpuMemory = p->used_mib << 20;
            infos[n].gpuInstanceId = p->gi_id;
            infos[n].computeInstanceId = p->ci_id;
        }
        n++;
    }
    rc = n > *infoCount || (n > 0 && !infos) ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *infoCount = n;
    return fake_leave(rc);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    DEVICE_ENTER(device, false);
    if (!utilization)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci || g->mig_current == NVML_DEVICE_MIG_ENABLE)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    utilization->gpu = fake_telemetry_of(g).gpu_util;
    utilization->memory = fake_telemetry_of(g).mem_util;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp)
{
    DEVICE_ENTER(device, false);
    if (!temp || sensorType != NVML_TEMPERATURE_GPU)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    *temp = fake_telemetry_of(g).temperature_c;
    return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    DEVICE_ENTER(device, false);
    if (!power)
        return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
    if (ci)
        return fake_leave(NVML_ERROR_NOT_SUPPORTED);
    *power = fake_telemetry_of(g).power_mw;
    return fake_leave(NVML_SUCCESS);
}

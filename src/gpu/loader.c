/* SPDX-License-Identifier: Apache-2.0 */
/* loader.c: finds libnvidia-ml.so.1 the way NVIDIA's device plugin does (explicit path,
 * else the container driver root and the driver root's library dirs, else the dynamic
 * linker), loads it with base/'s dl_load_table_opt (every symbol of NVML_FUNCS; the
 * required ones or nothing) and initialises NVML. Never linked against NVML: machines without GPUs
 * must still start the binary. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpu/internal.h"

/* The library dirs NVIDIA's plugin searches under each root (cmd/nvidia-device-plugin). */
static const char *const lib_dirs[] = {
    "/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    "/lib64",     "/lib/x86_64-linux-gnu",     "/lib/aarch64-linux-gnu",
};

/* Without these there is no inventory at all. Everything else in NVML_FUNCS is optional:
 * NULL when missing, and the code that needs it degrades or reports NOT_SUPPORTED. */
static const char *const required_symbols[] = {
    "nvmlInit_v2",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetName",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetBrand",
};

/* What a missing optional symbol costs, for the warning the caller logs. */
static const struct {
    const char *symbol;
    const char *degraded;
} optional_effects[] = {
    {"nvmlSystemGetCudaDriverVersion_v2", "CUDA driver version read with the v1 call"},
    {"nvmlDeviceGetNumaNodeId", "NUMA node read from sysfs"},
    {"nvmlDeviceGetArchitecture", "architecture reported as unknown"},
    {"nvmlDeviceGetTopologyCommonAncestor", "PCIe topology reported as SYS"},
    {"nvmlDeviceGetNvLinkState", "NVLink topology not reported"},
    {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "NVLink topology not reported"},
    {"nvmlDeviceGetComputeRunningProcesses_v3", "running processes not reported"},
    {"nvmlDeviceGetMigMode", "MIG not supported: GPUs reported as not MIG capable"},
};

/* ---- search ------------------------------------------------------------------------------ */

static const char *or_default(const char *s, const char *def)
{
    return s && *s ? s : def;
}

void gpu_nvml_options_from_env(struct gpu_nvml_options *opts)
{
    if (!opts->library_path)
        opts->library_path = getenv("GPUSLICE_NVML_LIBRARY");
    if (!opts->driver_root)
        opts->driver_root = getenv("NVIDIA_DRIVER_ROOT");
    if (!opts->driver_root_ctr_path)
        opts->driver_root_ctr_path = getenv("DRIVER_ROOT_CTR_PATH");
    if (!opts->driver_root_ctr_path)
        opts->driver_root_ctr_path = getenv("CONTAINER_DRIVER_ROOT");
    if (!opts->sysfs_root) /* where /sys is mounted elsewhere, and for tests */
        opts->sysfs_root = getenv("GPUSLICE_SYSFS_ROOT");
}

/* Pushes <root><dir>/libnvidia-ml.so.1 for every lib dir; "/" and trailing slashes on root
 * collapse so that root "/" yields "/usr/lib64/...". */
static int push_root_candidates(char ***strv, const char *root)
{
    struct strbuf sb = STRBUF_INIT;
    size_t root_len = strlen(root);
    int r = 0;

    while (root_len > 0 && root[root_len - 1] == '/')
        root_len--;
    for (size_t i = 0; i < GS_ARRAY_SIZE(lib_dirs); i++) {
        strbuf_reset(&sb);
        r = strbuf_append(&sb, root, root_len);
        if (r >= 0)
            r = strbuf_printf(&sb, "%s/%s", lib_dirs[i], GPU_NVML_LIBRARY);
        if (r < 0)
            goto out;
        if (strv_contains(*strv, strbuf_str(&sb)))
            continue;
        r = strv_push(strv, strbuf_str(&sb));
        if (r < 0)
            goto out;
    }
out:
    strbuf_release(&sb);
    return r;
}

int gpu_nvml_candidates(const struct gpu_nvml_options *opts, char ***ret, struct error *err)
{
    char **c = strv_new();
    int r;

    if (!c)
        return error_set(err, -ENOMEM, "out of memory listing NVML library candidates");
    if (opts && opts->library_path && *opts->library_path) {
        r = strv_push(&c, opts->library_path);
    } else {
        r = push_root_candidates(&c, or_default(opts ? opts->driver_root_ctr_path : NULL,
                                                GPU_DEFAULT_DRIVER_ROOT_CTR_PATH));
        if (r >= 0)
            r = push_root_candidates(
                &c, or_default(opts ? opts->driver_root : NULL, GPU_DEFAULT_DRIVER_ROOT));
        if (r >= 0)
            r = strv_push(&c, GPU_NVML_LIBRARY);
    }
    if (r < 0) {
        r = error_set(err, r, "out of memory listing NVML library candidates");
        goto out;
    }
    *ret = c;
    c = NULL;
out:
    strv_free(c);
    return r;
}

static bool is_file(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int gpu_nvml_locate(const struct gpu_nvml_options *opts, char **ret_path, struct error *err)
{
    char **c = NULL;
    const char *found = NULL;
    char *p = NULL;
    int r;

    r = gpu_nvml_candidates(opts, &c, err);
    if (r < 0)
        return r;
    if (opts && opts->library_path && *opts->library_path) {
        /* An explicit path is taken as given: a bare name goes to the dynamic linker. */
        if (strchr(c[0], '/') && !is_file(c[0])) {
            r = error_set(err, -ENOENT,
                          "NVML library '%s' (--nvml-library/GPUSLICE_NVML_LIBRARY) is not "
                          "a file",
                          c[0]);
            goto out;
        }
        found = c[0];
    } else {
        size_t n = strv_length(c);
        for (size_t i = 0; i + 1 < n && !found; i++)
            if (is_file(c[i]))
                found = c[i];
        if (!found)
            found = c[n - 1]; /* the bare name */
    }
    p = str_dup(found);
    if (!p) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    *ret_path = p;
    r = 0;
out:
    strv_free(c);
    return r;
}

/* ---- NVML error helpers ------------------------------------------------------------------ */

const char *gpu__nvml_strerror(const struct gpu_nvml *nvml, nvmlReturn_t rc)
{
    const char *s = NULL;

    if (nvml && nvml->nvmlErrorString)
        s = nvml->nvmlErrorString(rc);
    if (s && *s)
        return s;
    return rc == NVML_ERROR_UNKNOWN ? "Unknown Error" : "unknown NVML error";
}

int gpu__nvml_errno(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_ERROR_NOT_SUPPORTED:
        return -EOPNOTSUPP;
    case NVML_ERROR_NO_PERMISSION:
        return -EPERM;
    case NVML_ERROR_NOT_FOUND:
        return -ENOENT;
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return -ENODEV;
    case NVML_ERROR_MEMORY:
        return -ENOMEM;
    case NVML_ERROR_INVALID_ARGUMENT:
        return -EINVAL;
    default:
        return -EIO;
    }
}

int gpu__nvml_fail(const struct gpu_nvml *nvml, struct error *err, nvmlReturn_t rc,
                   const char *call, const char *where)
{
    return error_set(err, gpu__nvml_errno(rc), "%s failed for %s: %s", call, where,
                     gpu__nvml_strerror(nvml, rc));
}

int gpu__warn(char ***strv, const char *fmt, ...)
{
    struct strbuf sb = STRBUF_INIT;
    va_list ap;
    int r;

    if (strv_length(*strv) >= GPU__MAX_WARNINGS)
        return 0;
    va_start(ap, fmt);
    r = strbuf_vprintf(&sb, fmt, ap);
    va_end(ap);
    if (r >= 0)
        r = strv_push(strv, strbuf_str(&sb));
    strbuf_release(&sb);
    return r < 0 ? -ENOMEM : 0;
}

/* ---- open / close ------------------------------------------------------------------------ */

static bool is_required(const char *symbol)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(required_symbols); i++)
        if (strcmp(required_symbols[i], symbol) == 0)
            return true;
    return false;
}

static const char *optional_effect(const char *symbol)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(optional_effects); i++)
        if (strcmp(optional_effects[i].symbol, symbol) == 0)
            return optional_effects[i].degraded;
    return NULL;
}

/* An optional symbol is absent: a load warning when its absence costs something users see;
 * other missing optional ones (MIG mutation, events, ...) are NULL and the caller that needs
 * them says so. */
static void on_missing(void *ctx, const char *symbol)
{
    struct gpu_nvml *n = ctx;
    const char *effect = optional_effect(symbol);

    if (effect)
        (void)gpu__warn(&n->load_warnings, "%s missing in %s: %s", symbol, n->path, effect);
}

static int dlopen_error(const struct gpu_nvml_options *opts, const char *path, const char *why,
                        struct error *err);

/* dlopens the library at n->path and resolves every NVML_FUNCS entry into n: a required one
 * missing is an error, an optional one is NULL (on_missing). */
static int load_symbols(const struct gpu_nvml_options *opts, struct gpu_nvml *n, struct error *err)
{
    static const struct {
        const char *name;
        size_t offset;
    } fns[] = {
#define GPU__SYMBOL(name, ret, params) {#name, offsetof(struct gpu_nvml, name)},
        NVML_FUNCS(GPU__SYMBOL)
#undef GPU__SYMBOL
    };
    struct dl_symbol syms[GS_ARRAY_SIZE(fns)];
    struct dl_load dl = {.missing = on_missing, .ctx = n};
    const char *names[] = {n->path};
    struct error e = {0};
    int r;

    for (size_t i = 0; i < GS_ARRAY_SIZE(fns); i++)
        syms[i] = (struct dl_symbol){fns[i].name, fns[i].offset, !is_required(fns[i].name)};
    r = dl_load_table_opt(names, 1, syms, GS_ARRAY_SIZE(syms), n, sizeof(*n), &n->dl, &dl, &e);
    if (r == -ELIBACC)
        return dlopen_error(opts, n->path, dl.why, err);
    if (r == -ELIBBAD)
        return error_set(err, -ENOEXEC,
                         "NVML library '%s' lacks required symbol %s; is it "
                         "libnvidia-ml.so.1 from an NVIDIA driver >= 450?",
                         n->path, dl.lacking);
    if (r < 0)
        *err = e;
    return r;
}

static int dlopen_error(const struct gpu_nvml_options *opts, const char *path, const char *why,
                        struct error *err)
{
    if (strchr(path, '/'))
        return error_set(err, -ENOEXEC, "cannot load NVML library '%s': %s", path, why);
    return error_set(
        err, -ENOENT,
        "NVML library %s not found under the container driver root '%s' or the "
        "driver root '%s', nor by the dynamic linker (%s); is the NVIDIA driver "
        "installed? set --driver-root or --nvml-library",
        path,
        or_default(opts ? opts->driver_root_ctr_path : NULL, GPU_DEFAULT_DRIVER_ROOT_CTR_PATH),
        or_default(opts ? opts->driver_root : NULL, GPU_DEFAULT_DRIVER_ROOT), why);
}

int gpu_nvml_open(const struct gpu_nvml_options *opts, struct gpu_nvml **ret, struct error *err)
{
    struct gpu_nvml *n = NULL;
    nvmlReturn_t rc;
    int r;

    n = calloc(1, sizeof(*n));
    if (!n)
        return error_set(err, -ENOMEM, "out of memory");
    n->load_warnings = strv_new();
    n->read_warnings = strv_new();
    n->sysfs_root = str_dup(or_default(opts ? opts->sysfs_root : NULL, GPU_DEFAULT_SYSFS_ROOT));
    if (!n->load_warnings || !n->read_warnings || !n->sysfs_root) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = gpu_nvml_locate(opts, &n->path, err);
    if (r < 0)
        goto out;
    r = load_symbols(opts, n, err);
    if (r < 0)
        goto out;
    rc = n->nvmlInit_v2();
    if (rc != NVML_SUCCESS) {
        r = error_set(err, gpu__nvml_errno(rc), "nvmlInit_v2 failed (%s): %s", n->path,
                      gpu__nvml_strerror(n, rc));
        goto out;
    }
    n->initialized = true;
    *ret = n;
    n = NULL;
    r = 0;
out:
    gpu_nvml_close(n);
    return r;
}

void gpu_nvml_close(struct gpu_nvml *nvml)
{
    if (!nvml)
        return;
    if (nvml->initialized && nvml->nvmlShutdown)
        nvml->nvmlShutdown();
    if (nvml->dl)
        dlclose(nvml->dl);
    free(nvml->path);
    free(nvml->sysfs_root);
    strv_free(nvml->load_warnings);
    strv_free(nvml->read_warnings);
    free(nvml);
}

const char *gpu_nvml_library_path(const struct gpu_nvml *nvml)
{
    return nvml->path;
}

char *const *gpu_nvml_load_warnings(const struct gpu_nvml *nvml)
{
    return nvml->load_warnings;
}

char *const *gpu_nvml_read_warnings(const struct gpu_nvml *nvml)
{
    return nvml->read_warnings;
}

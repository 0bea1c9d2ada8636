/* SPDX-License-Identifier: Apache-2.0 */
/* internal.h: what gpu/'s own files share — the loaded-NVML context with one function
 * pointer per NVML_FUNCS entry (NULL when an optional symbol is missing), and helpers that
 * turn an nvmlReturn_t into an errno and a message. Never included from outside src/gpu/
 * (tests excepted). */
#ifndef GS_GPU_INTERNAL_H
#define GS_GPU_INTERNAL_H

#include "base/base.h"
#include "gpu/gpu.h"
#include "gpu/nvml.h"

/* Warnings are bounded: a broken driver must not make a snapshot grow without limit. */
#define GPU__MAX_WARNINGS 64

struct gpu_nvml {
    void *dl;             /* dlopen handle, owned */
    char *path;           /* what was dlopened, owned */
    char *sysfs_root;     /* owned */
    bool initialized;     /* nvmlInit_v2 succeeded: shutdown owed */
    char **load_warnings; /* owned strv: degraded features (missing optional symbols) */
    char **read_warnings; /* owned strv: degraded fields of the last inventory read */
#define GPU__FN_FIELD(name, ret, params) name##_fn name;
    NVML_FUNCS(GPU__FN_FIELD)
#undef GPU__FN_FIELD
};

/* NVML's text for rc ("Unknown Error"), also when nvmlErrorString is unusable. */
const char *gpu__nvml_strerror(const struct gpu_nvml *nvml, nvmlReturn_t rc);
/* NOT_SUPPORTED → -EOPNOTSUPP, NO_PERMISSION → -EPERM, NOT_FOUND → -ENOENT,
 * DRIVER_NOT_LOADED/LIBRARY_NOT_FOUND → -ENODEV, MEMORY → -ENOMEM, else -EIO. */
int gpu__nvml_errno(nvmlReturn_t rc);
/* Appends a formatted warning to *strv; once it holds GPU__MAX_WARNINGS lines, later ones
 * are dropped. Returns 0 or -ENOMEM. */
int gpu__warn(char ***strv, const char *fmt, ...) GS_PRINTF(2, 3);

/* Sets err to "<call> failed for <where>: <NVML error string>" and returns the errno. */
int gpu__nvml_fail(const struct gpu_nvml *nvml, struct error *err, nvmlReturn_t rc,
                   const char *call, const char *where);

#endif

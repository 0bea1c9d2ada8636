/* SPDX-License-Identifier: Apache-2.0 */
/* cdi.h: the Container Device Interface spec that makes the CDI device names of the
 * cdi-annotations and cdi-cri strategies resolve: kind k8s.device-plugin.nvidia.com/gpu (the
 * vendor and class NVIDIA's plugin writes), one device per GPU and MIG device named as
 * Allocate names them, and the container edits every device needs (control device nodes,
 * the driver's libraries and binaries found under the driver root, nvidia-cdi-hook calls).
 * Discovery reads files under a root (device nodes, ld.so.cache, library dirs, the driver's
 * /proc); building the JSON and writing it are separate steps. The per-claim specs of DRA
 * (kind k8s.gpu.nvidia.com/claim) share the device nodes and common edits. docs/cdi.md. */
#ifndef GS_CDI_H
#define GS_CDI_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "gpu/inventory.h"

#define CDI_VENDOR "k8s.device-plugin.nvidia.com"
#define CDI_CLASS "gpu"
#define CDI_DEFAULT_SPEC_DIR "/var/run/cdi"

/* nvidia-container-toolkit's nvcdi feature flags: accepted (an unknown one is an error) and
 * listed in docs/cdi.md with what each changes here. */
enum {
    CDI_FEATURE_EXPLICIT_DRIVER_LIBRARIES = 1u << 0, /* enable-explicit-driver-libraries */
    CDI_FEATURE_DISABLE_NVSANDBOXUTILS = 1u << 1,    /* disable-nvsandboxutils */
    CDI_FEATURE_COHERENT_ANNOTATIONS = 1u << 2,      /* enable-coherent-annotations */
    CDI_FEATURE_DISABLE_MULTIPLE_CSV = 1u << 3,      /* disable-multiple-csv-devices */
    CDI_FEATURE_NO_ADDITIONAL_GIDS = 1u << 4,        /* no-additional-gids-for-device-nodes */
    CDI_FEATURE_DISABLE_IPC = 1u << 5,               /* disable-ipc-discoverer */
};

/* The hooks a spec may carry (--cdi-disable-hooks names; "all" is every bit). */
enum {
    CDI_HOOK_CREATE_SYMLINKS = 1u << 0,
    CDI_HOOK_UPDATE_LDCACHE = 1u << 1,
    CDI_HOOK_ENABLE_CUDA_COMPAT = 1u << 2,
    CDI_HOOK_DISABLE_DEVICE_NODE_MODIFICATION = 1u << 3,
    CDI_HOOK_CHMOD = 1u << 4,
    CDI_HOOK_ALL = (1u << 5) - 1,
};

/* Whose flags set the roots: the errors about a missing driver or device node name them. */
enum cdi_flag_names {
    CDI_FLAGS_DEVICE_PLUGIN = 0, /* --driver-root, --driver-root-ctr-path, --dev-root */
    CDI_FLAGS_DRA_PLUGIN,        /* dra-plugin: --nvidia-driver-root, --container-driver-root */
};

struct cdi_options {
    /* Where this process sees the driver's files (NVIDIA's --driver-root-ctr-path when it
     * exists, else the driver root itself) and its device nodes (that root when it holds a
     * dev/ folder, else "/"). */
    const char *driver_root;
    const char *dev_root;
    /* What the spec's host paths start with: the host's driver root (--driver-root) and
     * device root (--dev-root, default the driver root). */
    const char *host_driver_root;
    const char *host_dev_root;
    const char *proc_root;   /* the driver's /proc (MIG capability minors); default "/proc" */
    const char *hook_path;   /* --nvidia-cdi-hook-path */
    bool index_names;        /* --device-id-strategy=index: "0", "0:1" instead of UUIDs */
    unsigned disabled_hooks; /* CDI_HOOK_* */
    unsigned feature_flags;  /* CDI_FEATURE_* */
    enum cdi_flag_names flag_names; /* set by the caller; cdi_options_from_config: 0 */
};

struct cfg_config;

/* o from the effective config (roots, hook path, id strategy) and the two toolkit lists
 * (NULL or "" for none); o's strings borrow from cfg and proc_root. -EINVAL, with the known
 * names in err, for an unknown feature flag or hook. */
int cdi_options_from_config(struct cdi_options *o, const struct cfg_config *cfg,
                            const char *feature_flags, const char *disable_hooks,
                            const char *proc_root, struct error *err);

/* Comma-separated lists, as NVIDIA's flags take them. An unknown name is -EINVAL with an
 * error listing the known ones. */
int cdi_parse_feature_flags(const char *list, unsigned *ret, struct error *err);
int cdi_parse_disabled_hooks(const char *list, unsigned *ret, struct error *err);

/* The CDI spec for inv as JSON text (owned by the caller), with devices named as
 * model_allocate names them. Fails, saying what is missing and where it looked, when a
 * device node, the driver's libraries or the MIG capability minors cannot be found: a name
 * that cannot resolve is never written. */
int cdi_spec_build(const struct inv_inventory *inv, const struct cdi_options *o, char **ret_json,
                   struct error *err);

/* The spec of one of the classes Allocate names besides "gpu" (facts §3.3):
 * "imex-channel" (a device per channel id, /dev/nvidia-caps-imex-channels/channel<n>) and
 * "gdrcopy", "gds", "mofed" (one device "all" with /dev/gdrdrv, /dev/nvidia-fs<n>,
 * every node in /dev/infiniband). A channel or feature without its device nodes is -ENOENT. */
int cdi_class_spec_build(const char *cls, const struct cdi_options *o, const unsigned *channels,
                         size_t n_channels, char **ret_json, struct error *err);

/* Writes json atomically (mode 0644) as <dir>/k8s.device-plugin.nvidia.com-<cls>.json (cls
 * NULL: "gpu"), creating dir when missing. *ret_path (optional) is the file written, owned. */
int cdi_spec_write(const char *dir, const char *cls, const char *json, char **ret_path,
                   struct error *err);

/* ld.so.cache (glibc's "new" format, alone or after the old one): the paths it lists for
 * 64-bit libraries, in file order; owned strv. -ENOENT when missing, -EINVAL when not a
 * cache this parser knows. Exposed for tests. */
int cdi_ldcache_read(const char *path, char ***ret_paths, struct error *err);

/* ---- per-claim specs (DRA) ---------------------------------------------------------------- */

/* NVIDIA's DRA driver names a prepared device k8s.gpu.nvidia.com/claim=<claimUID>-<device>
 * and writes one spec per claim; docs/cdi.md (per-claim specs). */
#define CDI_CLAIM_KIND "k8s.gpu.nvidia.com/claim"
#define CDI_CLAIM_UID_MAX 128 /* longer uids are refused (a Kubernetes uid is 36) */

/* A bind mount added to a claim's edits. All strings borrowed. */
struct cdi_mount {
    const char *host_path;      /* absolute, used as is (not under --driver-root) */
    const char *container_path; /* absolute */
    const char *const *options; /* NULL-terminated; NULL: "rw", "nosuid", "nodev", "bind" */
};

/* Extra container edits (MPS: CUDA_MPS_PIPE_DIRECTORY, the pipe and shm mounts). A mount
 * whose container path the common edits already mount replaces that mount. */
struct cdi_edits {
    const char *const *env; /* NULL-terminated "NAME=value" strings, or NULL */
    const struct cdi_mount *mounts;
    size_t n_mounts;
};

/* One prepared device. All strings borrowed. */
struct cdi_claim_device {
    const char *name;       /* its CDI device name, "<claimUID>-<deviceName>" */
    unsigned minor;         /* /dev/nvidia<minor> of the GPU (the parent for MIG) */
    bool is_mig;            /* adds the capability nodes of gi_id and ci_id */
    unsigned gi_id, ci_id;  /* MIG only */
    struct cdi_edits edits; /* this device's own extra edits (zero: none) */
};

struct cdi_claim {
    const char *uid;            /* the claim's uid: [A-Za-z0-9-], 1..CDI_CLAIM_UID_MAX */
    const char *driver_version; /* NVML's, to find the driver's libraries */
    const struct cdi_claim_device *devices;
    size_t n_devices;
    struct cdi_edits edits; /* edits for every device, beside the common ones (zero: none) */
};

/* The claim's spec as JSON text (owned by the caller): cdiVersion 0.5.0, kind
 * CDI_CLAIM_KIND, a device per claim device with its nodes and own edits, and the spec-wide
 * edits cdi_spec_build gives every device plus claim->edits. Fails as cdi_spec_build does
 * when a device node, the driver's files or a MIG capability minor is missing; -EINVAL for
 * a bad uid, no devices, or a device name not starting "<uid>-". */
int cdi_claim_spec_build(const struct cdi_claim *claim, const struct cdi_options *o,
                         char **ret_json, struct error *err);

/* Writes json atomically (mode 0644) as <cdi_root>/k8s.gpu.nvidia.com-claim_<uid>.yaml
 * (JSON is YAML; NVIDIA's file name), creating cdi_root when missing (NULL or "": /var/run/cdi).
 * *ret_path (optional) is the file written, owned. -EINVAL for a uid outside
 * [A-Za-z0-9-] or empty or too long (nothing is written). */
int cdi_claim_spec_write(const char *cdi_root, const char *claim_uid, const char *json,
                         char **ret_path, struct error *err);

/* Removes the claim's spec; one that is not there is success. -EINVAL for a bad uid. */
int cdi_claim_spec_remove(const char *cdi_root, const char *claim_uid, struct error *err);

#endif

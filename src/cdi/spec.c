/* SPDX-License-Identifier: Apache-2.0 */
/* spec.c: builds and writes the CDI spec for kind k8s.device-plugin.nvidia.com/gpu. What goes
 * in follows nvidia-container-toolkit's nvcdi as NVIDIA's plugin uses it: a device per GPU
 * and MIG device plus "all"; common edits with the control device nodes, every library of
 * the driver's version in its library folders, its utilities, firmware and IPC sockets, and
 * the nvidia-cdi-hook calls (symlinks, ldcache, CUDA compat, device node modification).
 * Host paths are rewritten from where we see the driver to where the host has it. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi/internal.h"

/* hostPath in device nodes needs 0.5.0; nothing newer is used. */
#define CDI_SPEC_VERSION "0.5.0"
#define MIG_MINORS_MAX_BYTES (1024u * 1024u)

static const char *const lib_dirs[] = {
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib",
    NULL,
};
static const char *const bin_dirs[] = {"/usr/bin", "/usr/sbin",      "/bin",
                                       "/sbin",    "/usr/local/bin", NULL};
/* nvcdi's driver binaries */
static const char *const binaries[] = {
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
    "nvidia-imex",
    "nvidia-imex-ctl",
    NULL,
};
static const char *const control_nodes[] = {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                            "/dev/nvidia-modeset", NULL};
static const char *const ipc_paths[] = {
    "/run/nvidia-persistenced/socket", "/run/nvidia-fabricmanager/socket", "/tmp/nvidia-mps", NULL};

struct named_bit {
    const char *name;
    unsigned bit;
};
static const struct named_bit feature_names[] = {
    {"enable-explicit-driver-libraries", CDI_FEATURE_EXPLICIT_DRIVER_LIBRARIES},
    {"disable-nvsandboxutils", CDI_FEATURE_DISABLE_NVSANDBOXUTILS},
    {"enable-coherent-annotations", CDI_FEATURE_COHERENT_ANNOTATIONS},
    {"disable-multiple-csv-devices", CDI_FEATURE_DISABLE_MULTIPLE_CSV},
    {"no-additional-gids-for-device-nodes", CDI_FEATURE_NO_ADDITIONAL_GIDS},
    {"disable-ipc-discoverer", CDI_FEATURE_DISABLE_IPC},
    {NULL, 0},
};
static const struct named_bit hook_names[] = {
    {"create-symlinks", CDI_HOOK_CREATE_SYMLINKS},
    {"update-ldcache", CDI_HOOK_UPDATE_LDCACHE},
    {"enable-cuda-compat", CDI_HOOK_ENABLE_CUDA_COMPAT},
    {"disable-device-node-modification", CDI_HOOK_DISABLE_DEVICE_NODE_MODIFICATION},
    {"chmod", CDI_HOOK_CHMOD},
    {"all", CDI_HOOK_ALL},
    {NULL, 0},
};

static int parse_names(const char *list, const struct named_bit *names, const char *what,
                       const char *flag, unsigned *ret, struct error *err)
{
    unsigned bits = 0;
    const char *p = list ? list : "";
    while (*p) {
        size_t n = strcspn(p, ",");
        size_t s = 0, e = n;
        while (s < e && (p[s] == ' ' || p[s] == '\t'))
            s++;
        while (e > s && (p[e - 1] == ' ' || p[e - 1] == '\t'))
            e--;
        if (e > s) {
            const struct named_bit *nb = names;
            while (nb->name && !(strlen(nb->name) == e - s && strncmp(nb->name, p + s, e - s) == 0))
                nb++;
            if (!nb->name) {
                struct strbuf known = STRBUF_INIT;
                for (const struct named_bit *k = names; k->name; k++)
                    (void)strbuf_printf(&known, "%s%s", k == names ? "" : ", ", k->name);
                error_set(err, -EINVAL, "%s: unknown %s \"%.*s\"; known: %s", flag, what,
                          (int)(e - s), p + s, strbuf_str(&known));
                strbuf_release(&known);
                return -EINVAL;
            }
            bits |= nb->bit;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    *ret = bits;
    return 0;
}

int cdi_parse_feature_flags(const char *list, unsigned *ret, struct error *err)
{
    return parse_names(list, feature_names, "CDI feature flag", "--cdi-feature-flags", ret, err);
}

int cdi_parse_disabled_hooks(const char *list, unsigned *ret, struct error *err)
{
    return parse_names(list, hook_names, "CDI hook", "--cdi-disable-hooks", ret, err);
}

/* ---- paths --------------------------------------------------------------------------- */

/* The flags of the running command that set where the driver and its nodes are. */
struct root_flags {
    const char *host_root, *ctr_root, *dev_hint;
};
static const struct root_flags root_flags[] = {
    [CDI_FLAGS_DEVICE_PLUGIN] = {"--driver-root", "--driver-root-ctr-path",
                                 "--dev-root/--driver-root-ctr-path do not point at the host's "
                                 "/dev"},
    [CDI_FLAGS_DRA_PLUGIN] = {"--nvidia-driver-root", "--container-driver-root",
                              "--container-driver-root does not hold the host's driver root "
                              "with its /dev"},
};

static const struct root_flags *flags_of(const struct cdi_options *o)
{
    return &root_flags[o->flag_names == CDI_FLAGS_DRA_PLUGIN ? CDI_FLAGS_DRA_PLUGIN
                                                             : CDI_FLAGS_DEVICE_PLUGIN];
}

static bool is_root(const char *root)
{
    return !root || !*root || strcmp(root, "/") == 0;
}

/* root + abs ("/dev/x"); root "/" or "" gives abs. -ENOMEM. */
static int join(struct strbuf *sb, const char *root, const char *abs)
{
    strbuf_reset(sb);
    if (is_root(root))
        return strbuf_puts(sb, abs);
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    int r = strbuf_append(sb, root, n);
    return r < 0 ? r : strbuf_puts(sb, abs);
}

/* Does <root><abs> exist (any type)? */
static bool exists_under(struct cdi__ctx *c, const char *root, const char *abs)
{
    struct stat st;
    if (join(&c->a, root, abs) < 0)
        return false;
    return lstat(strbuf_str(&c->a), &st) == 0;
}

static int set_str(json_t *obj, const char *key, const char *v)
{
    return json_object_set_new(obj, key, json_string(v)) == 0 ? 0 : -ENOMEM;
}

/* {"path": abs, "hostPath": <host dev root><abs>} appended to arr. */
int cdi__add_node(struct cdi__ctx *c, json_t *arr, const char *abs)
{
    json_t *n = json_object();
    int r = n ? 0 : -ENOMEM;
    if (r == 0)
        r = set_str(n, "path", abs);
    if (r == 0)
        r = join(&c->b, c->o->host_dev_root, abs);
    if (r == 0)
        r = set_str(n, "hostPath", strbuf_str(&c->b));
    if (r == 0)
        r = json_array_append_new(arr, n) == 0 ? 0 : -ENOMEM;
    else
        json_decref(n);
    return r;
}

/* A required device node: missing is an error naming it and the root searched. */
static int add_required_node(struct cdi__ctx *c, json_t *arr, const char *abs, const char *who)
{
    if (!exists_under(c, c->o->dev_root, abs))
        return error_set(c->err, -ENOENT,
                         "%s: device node %s not found (looked at %s); the NVIDIA driver is "
                         "not loaded or %s",
                         who, abs, strbuf_str(&c->a), flags_of(c->o)->dev_hint);
    return cdi__add_node(c, arr, abs);
}

json_t *cdi__mount_new(const char *host_path, const char *container_path,
                       const char *const *options)
{
    json_t *m = json_object(), *opts = json_array();
    int r = m && opts ? 0 : -ENOMEM;
    if (r == 0)
        r = set_str(m, "hostPath", host_path);
    if (r == 0)
        r = set_str(m, "containerPath", container_path);
    for (const char *const *o = options; r == 0 && *o; o++)
        r = json_array_append_new(opts, json_string(*o)) == 0 ? 0 : -ENOMEM;
    if (r == 0) {
        r = json_object_set_new(m, "options", opts) == 0 ? 0 : -ENOMEM;
        opts = NULL;
    }
    json_decref(opts);
    if (r < 0) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* A driver file (library, binary, socket) mounted from the host's driver root, once. */
static int add_mount(struct cdi__ctx *c, const char *abs, bool ipc)
{
    static const char *const lib_opts[] = {"ro", "nosuid", "nodev", "rbind", "rprivate", NULL};
    static const char *const ipc_opts[] = {"ro", "nosuid", "nodev", "bind", "noexec", NULL};
    if (strv_contains(c->mounted, abs))
        return 0;
    int r = join(&c->b, c->o->host_driver_root, abs);
    json_t *m = r == 0 ? cdi__mount_new(strbuf_str(&c->b), abs, ipc ? ipc_opts : lib_opts) : NULL;
    if (r == 0 && !m)
        r = -ENOMEM;
    if (r == 0)
        r = json_array_append_new(c->mounts, m) == 0 ? 0 : -ENOMEM;
    if (r == 0)
        r = strv_push(&c->mounted, abs);
    return r;
}

/* ---- the driver's files ---------------------------------------------------------------- */

static bool is_driver_lib(const char *base)
{
    return str_startswith(base, "libnvidia-ml.so") || str_startswith(base, "libcuda.so");
}

/* dir (container path) holds the driver: remember it once per real folder. */
static int add_lib_dir(struct cdi__ctx *c, const char *dir)
{
    char real[PATH_MAX];
    if (strv_contains(c->lib_dirs, dir) || join(&c->a, c->o->driver_root, dir) < 0 ||
        !realpath(strbuf_str(&c->a), real) || strv_contains(c->real_dirs, real))
        return 0;
    int r = strv_push(&c->lib_dirs, dir);
    return r < 0 ? r : strv_push(&c->real_dirs, real);
}

static int find_lib_dirs(struct cdi__ctx *c)
{
    char **cached = NULL;
    struct error e = {0};
    int r = join(&c->a, c->o->driver_root, "/etc/ld.so.cache");
    if (r < 0)
        return r;
    r = cdi_ldcache_read(strbuf_str(&c->a), &cached, &e);
    if (r == -ENOENT)
        r = 0; /* no cache: the standard folders below */
    if (r < 0) {
        error_set(c->err, r, "%s", e.msg);
        return r;
    }
    for (size_t i = 0; r == 0 && cached && cached[i]; i++) {
        const char *slash = strrchr(cached[i], '/');
        if (!slash || !is_driver_lib(slash + 1))
            continue;
        char *dir = strndup(cached[i], (size_t)(slash - cached[i]));
        r = dir ? add_lib_dir(c, *dir ? dir : "/") : -ENOMEM;
        free(dir);
    }
    strv_free(cached);
    /* no cache, or one that does not list the driver: the standard folders */
    for (size_t i = 0; r == 0 && !strv_length(c->lib_dirs) && lib_dirs[i]; i++) {
        struct strbuf p = STRBUF_INIT;
        r = strbuf_printf(&p, "%s/libnvidia-ml.so.%s", lib_dirs[i], c->driver_version);
        if (r == 0 && exists_under(c, c->o->driver_root, strbuf_str(&p)))
            r = add_lib_dir(c, lib_dirs[i]);
        strbuf_release(&p);
    }
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every <dir>/<prefix>...<suffix> (files and links) as container paths, sorted, onto out. */
static int list_matching(struct cdi__ctx *c, const char *dir, const char *prefix,
                         const char *suffix, char ***out)
{
    int r = join(&c->a, c->o->driver_root, dir);
    if (r < 0)
        return r;
    DIR *d = opendir(strbuf_str(&c->a));
    if (!d)
        return 0;
    char **found = strv_new();
    r = found ? 0 : -ENOMEM;
    struct dirent *de;
    while (r == 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.' || !str_startswith(de->d_name, prefix) ||
            !str_endswith(de->d_name, suffix))
            continue;
        struct strbuf p = STRBUF_INIT;
        r = strbuf_printf(&p, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, de->d_name);
        if (r == 0)
            r = strv_push(&found, strbuf_str(&p));
        strbuf_release(&p);
    }
    closedir(d);
    if (r == 0) {
        qsort(found, strv_length(found), sizeof(char *), cmp_str);
        for (size_t i = 0; r == 0 && found[i]; i++)
            r = strv_push(out, found[i]);
    }
    strv_free(found);
    return r;
}

static int add_libraries(struct cdi__ctx *c)
{
    const char *ver = c->driver_version;
    char **libs = strv_new(), **fw = strv_new();
    struct strbuf suffix = STRBUF_INIT, fwdir = STRBUF_INIT;
    int r = libs && fw ? 0 : -ENOMEM;
    if (r == 0)
        r = find_lib_dirs(c);
    if (r == 0)
        r = strbuf_printf(&suffix, ".so.%s", ver);
    for (size_t i = 0; r == 0 && c->lib_dirs && c->lib_dirs[i]; i++)
        r = list_matching(c, c->lib_dirs[i], "lib", strbuf_str(&suffix), &libs);
    if (r == 0 && strv_length(libs) == 0) {
        join(&c->a, c->o->driver_root, "/");
        r = error_set(c->err, -ENOENT,
                      "no libraries of NVIDIA driver %s under %s (looked in its "
                      "etc/ld.so.cache and usr/lib64, usr/lib/<arch>-linux-gnu, lib64, "
                      "lib/<arch>-linux-gnu, usr/lib): mount the host's driver root at "
                      "%s (default /driver-root) and set %s to where the host has it",
                      ver, strbuf_str(&c->a), flags_of(c->o)->ctr_root, flags_of(c->o)->host_root);
    }
    for (size_t i = 0; r == 0 && libs[i]; i++) {
        r = add_mount(c, libs[i], false);
        const char *base = strrchr(libs[i], '/') + 1;
        if (r == 0 && !c->libcuda_dir && str_startswith(base, "libcuda.so.")) {
            c->libcuda_dir = strndup(libs[i], (size_t)(base - 1 - libs[i]));
            r = c->libcuda_dir ? 0 : -ENOMEM;
        }
    }
    /* GSP firmware of this version */
    if (r == 0)
        r = strbuf_printf(&fwdir, "/lib/firmware/nvidia/%s", ver);
    if (r == 0)
        r = list_matching(c, strbuf_str(&fwdir), "gsp", ".bin", &fw);
    for (size_t i = 0; r == 0 && fw[i]; i++)
        r = add_mount(c, fw[i], false);
    strbuf_release(&suffix);
    strbuf_release(&fwdir);
    strv_free(libs);
    strv_free(fw);
    return r;
}

static int add_binaries_and_ipc(struct cdi__ctx *c)
{
    int r = 0;
    for (size_t i = 0; r == 0 && binaries[i]; i++) {
        for (size_t j = 0; r == 0 && bin_dirs[j]; j++) {
            struct strbuf p = STRBUF_INIT;
            r = strbuf_printf(&p, "%s/%s", bin_dirs[j], binaries[i]);
            bool found = r == 0 && exists_under(c, c->o->driver_root, strbuf_str(&p));
            if (found)
                r = add_mount(c, strbuf_str(&p), false);
            strbuf_release(&p);
            if (found)
                break;
        }
    }
    if (c->o->feature_flags & CDI_FEATURE_DISABLE_IPC)
        return r;
    for (size_t i = 0; r == 0 && ipc_paths[i]; i++)
        if (exists_under(c, c->o->driver_root, ipc_paths[i]))
            r = add_mount(c, ipc_paths[i], true);
    return r;
}

/* ---- hooks ---------------------------------------------------------------------------- */

/* A createContainer hook running `<hook> <name> args...` (`nvidia-ctk hook <name>` when the
 * path is nvidia-ctk, as the toolkit writes it). args is NULL-terminated. */
static int add_hook(struct cdi__ctx *c, unsigned bit, const char *name, const char *const *args)
{
    if (c->o->disabled_hooks & bit)
        return 0;
    const char *path =
        c->o->hook_path && *c->o->hook_path ? c->o->hook_path : "/usr/bin/nvidia-ctk";
    const char *slash = strrchr(path, '/');
    const char *argv0 = slash ? slash + 1 : path;
    json_t *h = json_object(), *a = json_array(), *env = json_array();
    int r = h && a && env ? 0 : -ENOMEM;
    if (r == 0)
        r = set_str(h, "hookName", "createContainer");
    if (r == 0)
        r = set_str(h, "path", path);
    if (r == 0)
        r = json_array_append_new(a, json_string(argv0));
    if (r == 0 && strcmp(argv0, "nvidia-ctk") == 0)
        r = json_array_append_new(a, json_string("hook"));
    if (r == 0)
        r = json_array_append_new(a, json_string(name));
    for (size_t i = 0; r == 0 && args && args[i]; i++)
        r = json_array_append_new(a, json_string(args[i]));
    if (r == 0)
        r = json_array_append_new(env, json_string("NVIDIA_CTK_DEBUG=false"));
    if (r == 0) {
        r = json_object_set_new(h, "args", a) == 0 ? 0 : -ENOMEM;
        a = NULL;
    }
    if (r == 0) {
        r = json_object_set_new(h, "env", env) == 0 ? 0 : -ENOMEM;
        env = NULL;
    }
    if (r == 0) {
        r = json_array_append_new(c->hooks, h) == 0 ? 0 : -ENOMEM;
        h = NULL;
    }
    json_decref(a);
    json_decref(env);
    json_decref(h);
    return r < 0 ? -ENOMEM : 0;
}

static int add_hooks(struct cdi__ctx *c)
{
    struct strbuf link = STRBUF_INIT, ver = STRBUF_INIT;
    int r = 0;
    if (c->libcuda_dir) {
        r = strbuf_printf(&link, "libcuda.so.1::%s/libcuda.so", c->libcuda_dir);
        const char *args[] = {"--link", strbuf_str(&link), NULL};
        if (r == 0)
            r = add_hook(c, CDI_HOOK_CREATE_SYMLINKS, "create-symlinks", args);
    }
    if (r == 0)
        r = strbuf_printf(&ver, "--host-driver-version=%s", c->driver_version);
    if (r == 0) {
        const char *args[] = {strbuf_str(&ver), NULL};
        r = add_hook(c, CDI_HOOK_ENABLE_CUDA_COMPAT, "enable-cuda-compat", args);
    }
    if (r == 0 && strv_length(c->lib_dirs)) {
        size_t n = strv_length(c->lib_dirs);
        const char **args = calloc(2 * n + 1, sizeof(*args));
        r = args ? 0 : -ENOMEM;
        for (size_t i = 0; r == 0 && i < n; i++) {
            args[2 * i] = "--folder";
            args[2 * i + 1] = c->lib_dirs[i];
        }
        if (r == 0)
            r = add_hook(c, CDI_HOOK_UPDATE_LDCACHE, "update-ldcache", args);
        free(args);
    }
    if (r == 0)
        r = add_hook(c, CDI_HOOK_DISABLE_DEVICE_NODE_MODIFICATION,
                     "disable-device-node-modification", NULL);
    strbuf_release(&link);
    strbuf_release(&ver);
    return r;
}

/* ---- devices --------------------------------------------------------------------------- */

static const char *proc_root(const struct cdi__ctx *c)
{
    return c->o->proc_root && *c->o->proc_root ? c->o->proc_root : "/proc";
}

/* The driver's MIG capability minors ("gpu0/gi1/access 12" lines), read once per spec; a
 * missing file is remembered (the per-capability access files may still answer). */
static int read_mig_minors(struct cdi__ctx *c)
{
    struct strbuf p = STRBUF_INIT;
    int r = 0;
    if (c->mig_minors || c->mig_minors_err.code)
        return 0;
    r = strbuf_printf(&p, "%s/driver/nvidia-caps/mig-minors", proc_root(c));
    if (r == 0)
        r = file_read_all(strbuf_str(&p), MIG_MINORS_MAX_BYTES, &c->mig_minors, NULL,
                          &c->mig_minors_err);
    if (r < 0 && r != -ENOMEM && !c->mig_minors_err.code)
        c->mig_minors_err.code = r;
    strbuf_release(&p);
    return r == -ENOMEM ? r : 0;
}

/* The minor mig-minors gives for key ("gpu1/gi2/ci0/access"); false when it has none. */
static bool minor_from_list(const char *text, const char *key, unsigned *ret)
{
    size_t n = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, key, n) == 0 && l[n] == ' ') {
            char *end;
            unsigned long v = strtoul(l + n + 1, &end, 10);
            if (end != l + n + 1 && v <= UINT_MAX) {
                *ret = (unsigned)v;
                return true;
            }
        }
    }
    return false;
}

/* A MIG capability as the driver describes it. */
struct cap_info {
    unsigned minor;
    bool has_mode;
    unsigned mode; /* DeviceFileMode, as a number (292 = 0444) */
};

/* The number after "<key>:" on a line of text; false when there is none. */
static bool access_field(const char *text, const char *key, unsigned *ret)
{
    size_t n = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *p = l + strspn(l, " \t");
        if (strncmp(p, key, n) != 0 || p[n] != ':')
            continue;
        p += n + 1;
        p += strspn(p, " \t");
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || v > UINT_MAX || *p == '-')
            return false;
        *ret = (unsigned)v;
        return true;
    }
    return false;
}

/* "DeviceFileMinor: N" (and "DeviceFileMode: M") of the capability's access file under the
 * driver's /proc (what NVIDIA's DRA driver reads); false when the file or the minor is
 * missing. */
static bool cap_from_access_file(const char *path, struct cap_info *ret)
{
    char *text = NULL;
    struct cap_info info = {0};
    bool ok = false;
    if (file_read_all(path, MIG_MINORS_MAX_BYTES, &text, NULL, NULL) == 0) {
        ok = access_field(text, "DeviceFileMinor", &info.minor);
        info.has_mode = access_field(text, "DeviceFileMode", &info.mode);
    }
    if (ok)
        *ret = info;
    free(text);
    return ok;
}

/* The capability of gpu<minor>/gi<gi>[/ci<ci>] (ci < 0: the GPU instance's): from the access
 * file, else from mig-minors. -ENOENT naming both places when neither has it. */
static int mig_cap(struct cdi__ctx *c, unsigned minor, unsigned gi, long ci, const char *who,
                   struct cap_info *ret)
{
    struct strbuf key = STRBUF_INIT, path = STRBUF_INIT;
    int r = read_mig_minors(c);
    if (r == 0)
        r = ci < 0 ? strbuf_printf(&key, "gpu%u/gi%u/access", minor, gi)
                   : strbuf_printf(&key, "gpu%u/gi%u/ci%ld/access", minor, gi, ci);
    if (r == 0)
        r = ci < 0
                ? strbuf_printf(&path, "%s/driver/nvidia/capabilities/gpu%u/mig/gi%u/access",
                                proc_root(c), minor, gi)
                : strbuf_printf(&path, "%s/driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%ld/access",
                                proc_root(c), minor, gi, ci);
    *ret = (struct cap_info){0};
    if (r == 0 && !cap_from_access_file(strbuf_str(&path), ret) &&
        !minor_from_list(c->mig_minors, strbuf_str(&key), &ret->minor)) {
        if (c->mig_minors_err.code)
            r = error_set(c->err, -ENOENT,
                          "%s: MIG devices need the driver's capability minors: %s, and %s "
                          "cannot be read; is the NVIDIA driver loaded with MIG support "
                          "(nvidia-caps)?",
                          who, c->mig_minors_err.msg, strbuf_str(&path));
        else
            r = error_set(c->err, -ENOENT,
                          "%s: the driver lists no capability minor for %s (mig-minors, %s); "
                          "the MIG layout changed while reading it, or the driver is too old",
                          who, strbuf_str(&key), strbuf_str(&path));
    }
    strbuf_release(&key);
    strbuf_release(&path);
    return r;
}

/* The character-device major of "nvidia-caps" in the "Character devices:" part of text;
 * -1 when it is not there. */
static int major_from_devices(const char *text)
{
    const char *chr = strstr(text, "Character devices:");
    const char *blk = chr ? strstr(chr, "Block devices:") : NULL;
    for (const char *l = chr; l && *l && (!blk || l < blk);
         l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *p = l + strspn(l, " \t");
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || *p == '-' || v > INT_MAX || (*end != ' ' && *end != '\t'))
            continue;
        end += strspn(end, " \t");
        if (strncmp(end, "nvidia-caps", 11) == 0 && (end[11] == '\n' || end[11] == '\0'))
            return (int)v;
    }
    return -1;
}

/* The nvidia-caps major from <proc>/devices, read once per spec; -ENOENT (remembered in
 * caps_major_err, not in c->err) when it cannot be had. */
static int caps_major(struct cdi__ctx *c, int *ret)
{
    struct strbuf p = STRBUF_INIT;
    char *text = NULL;
    int r = 0;
    if (c->caps_major == -1) {
        r = strbuf_printf(&p, "%s/devices", proc_root(c));
        if (r == 0)
            r = file_read_all(strbuf_str(&p), MIG_MINORS_MAX_BYTES, &text, NULL,
                              &c->caps_major_err);
        c->caps_major = r == 0 ? major_from_devices(text) : -2;
        if (c->caps_major < 0) {
            c->caps_major = -2;
            if (!c->caps_major_err.code)
                error_set(&c->caps_major_err, -ENOENT, "%s has no \"nvidia-caps\" character device",
                          strbuf_str(&p));
        }
        free(text);
        strbuf_release(&p);
        if (r == -ENOMEM)
            return r;
    }
    if (c->caps_major < 0)
        return -ENOENT;
    *ret = c->caps_major;
    return 0;
}

/* {"path", "type": "c", "major", "minor"[, "fileMode"]}: a node the runtime creates in the
 * container (NVIDIA's CDICharDevNode). */
static int add_char_node(json_t *arr, const char *abs, int major, const struct cap_info *cap)
{
    json_t *n = json_pack("{s:s, s:s, s:I, s:I}", "path", abs, "type", "c", "major",
                          (json_int_t)major, "minor", (json_int_t)cap->minor);
    int r = n ? 0 : -ENOMEM;
    if (r == 0 && cap->has_mode)
        r = json_object_set_new(n, "fileMode", json_integer(cap->mode)) == 0 ? 0 : -ENOMEM;
    if (r == 0)
        r = json_array_append_new(arr, n) == 0 ? 0 : -ENOMEM;
    else
        json_decref(n);
    return r;
}

/* /dev/nvidia-caps/nvidia-cap<N> of gpu<minor>/gi<gi>[/ci<ci>] (ci < 0: the GPU instance's). */
static int add_cap_node(struct cdi__ctx *c, unsigned minor, unsigned gi, long ci, const char *who,
                        json_t *nodes)
{
    struct strbuf cap = STRBUF_INIT;
    struct cap_info info;
    int major = -1;
    int r = mig_cap(c, minor, gi, ci, who, &info);
    if (r == 0)
        r = strbuf_printf(&cap, "/dev/nvidia-caps/nvidia-cap%u", info.minor);
    if (r == 0 && c->cap_char_nodes) {
        r = caps_major(c, &major);
        if (r == 0)
            r = add_char_node(nodes, strbuf_str(&cap), major, &info);
        else if (r == -ENOENT && exists_under(c, c->o->dev_root, strbuf_str(&cap)))
            r = cdi__add_node(c, nodes, strbuf_str(&cap)); /* the host's own node */
        else if (r == -ENOENT)
            r = error_set(c->err, -ENOENT,
                          "%s: MIG capability node %s cannot be described: %s, and the host "
                          "has no such node (looked at %s); is the NVIDIA driver loaded with "
                          "MIG support (nvidia-caps)?",
                          who, strbuf_str(&cap), c->caps_major_err.msg, strbuf_str(&c->a));
    } else if (r == 0) {
        r = add_required_node(c, nodes, strbuf_str(&cap), who);
    }
    strbuf_release(&cap);
    return r;
}

int cdi__device_nodes(struct cdi__ctx *c, unsigned minor, bool mig, unsigned gi, unsigned ci,
                      const char *who, json_t *nodes)
{
    struct strbuf node = STRBUF_INIT;
    int r = strbuf_printf(&node, "/dev/nvidia%u", minor);
    if (r == 0)
        r = add_required_node(c, nodes, strbuf_str(&node), who);
    if (r == 0 && mig)
        r = add_cap_node(c, minor, gi, -1, who, nodes);
    if (r == 0 && mig)
        r = add_cap_node(c, minor, gi, (long)ci, who, nodes);
    strbuf_release(&node);
    return r;
}

int cdi__add_device(struct cdi__ctx *c, json_t *devices, const char *name, json_t *nodes)
{
    json_t *d = json_object(), *edits = json_object();
    int r = d && edits ? 0 : -ENOMEM;
    (void)c;
    if (r == 0)
        r = set_str(d, "name", name);
    if (r == 0)
        r = json_object_set(edits, "deviceNodes", nodes) == 0 ? 0 : -ENOMEM;
    if (r == 0) {
        r = json_object_set_new(d, "containerEdits", edits) == 0 ? 0 : -ENOMEM;
        edits = NULL;
    }
    if (r == 0) {
        r = json_array_append_new(devices, d) == 0 ? 0 : -ENOMEM;
        d = NULL;
    }
    json_decref(edits);
    json_decref(d);
    return r;
}

/* One device of the gpu spec: its nodes, also appended (by reference) to all. */
static int add_gpu_spec_device(struct cdi__ctx *c, json_t *devices, json_t *all, const char *name,
                               unsigned minor, const struct inv_mig_device *mig, const char *who)
{
    json_t *nodes = json_array();
    int r = nodes ? 0 : -ENOMEM;
    if (r == 0)
        r = cdi__device_nodes(c, minor, mig != NULL, mig ? mig->gi_id : 0, mig ? mig->ci_id : 0,
                              who, nodes);
    if (r == 0)
        r = cdi__add_device(c, devices, name, nodes);
    /* "all" gets the GPU's node once and each MIG device's capability nodes */
    for (size_t i = mig ? 1 : 0; r == 0 && i < json_array_size(nodes); i++)
        r = json_array_append(all, json_array_get(nodes, i)) == 0 ? 0 : -ENOMEM;
    json_decref(nodes);
    return r;
}

static int add_devices(struct cdi__ctx *c, const struct inv_inventory *inv, json_t *devices)
{
    json_t *all = json_array();
    struct strbuf name = STRBUF_INIT, who = STRBUF_INIT;
    int r = all ? 0 : -ENOMEM;

    for (size_t i = 0; r == 0 && i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        strbuf_reset(&who);
        strbuf_reset(&name);
        r = strbuf_printf(&who, "GPU %u (%s)", g->index, g->uuid);
        if (r == 0)
            r = c->o->index_names ? strbuf_printf(&name, "%u", g->index)
                                  : strbuf_puts(&name, g->uuid);
        if (r == 0)
            r = add_gpu_spec_device(c, devices, all, strbuf_str(&name), g->minor, NULL,
                                    strbuf_str(&who));
        for (size_t m = 0; r == 0 && g->mig_enabled && m < g->n_migs; m++) {
            const struct inv_mig_device *mig = &g->migs[m];
            strbuf_reset(&who);
            strbuf_reset(&name);
            r = strbuf_printf(&who, "MIG device %u:%u (%s)", g->index, mig->index, mig->uuid);
            if (r == 0)
                r = c->o->index_names ? strbuf_printf(&name, "%u:%u", g->index, mig->index)
                                      : strbuf_puts(&name, mig->uuid);
            if (r == 0)
                r = add_gpu_spec_device(c, devices, all, strbuf_str(&name), g->minor, mig,
                                        strbuf_str(&who));
        }
    }
    if (r == 0 && inv->n_gpus > 0)
        r = cdi__add_device(c, devices, "all", all);
    json_decref(all);
    strbuf_release(&name);
    strbuf_release(&who);
    return r;
}

/* ---- common edits and the spec ------------------------------------------------------------ */

int cdi__ctx_init(struct cdi__ctx *c, const struct cdi_options *o, const char *driver_version,
                  struct error *err)
{
    *c = (struct cdi__ctx){.o = o,
                           .driver_version = driver_version ? driver_version : "",
                           .err = err,
                           .caps_major = -1,
                           .a = STRBUF_INIT,
                           .b = STRBUF_INIT};
    c->common_nodes = json_array();
    c->mounts = json_array();
    c->hooks = json_array();
    c->env = json_array();
    return c->common_nodes && c->mounts && c->hooks && c->env ? 0 : -ENOMEM;
}

void cdi__ctx_release(struct cdi__ctx *c)
{
    json_decref(c->common_nodes);
    json_decref(c->mounts);
    json_decref(c->hooks);
    json_decref(c->env);
    strv_free(c->mounted);
    strv_free(c->lib_dirs);
    strv_free(c->real_dirs);
    free(c->libcuda_dir);
    free(c->mig_minors);
    strbuf_release(&c->a);
    strbuf_release(&c->b);
}

static int need_driver_version(struct cdi__ctx *c)
{
    if (*c->driver_version)
        return 0;
    return error_set(c->err, -ENOENT,
                     "NVML gave no driver version: the driver's libraries cannot be found "
                     "without it");
}

int cdi__common_edits(struct cdi__ctx *c, json_t *edits)
{
    int r = need_driver_version(c);
    if (r == 0)
        r = add_required_node(c, c->common_nodes, "/dev/nvidiactl", "the NVIDIA driver");
    for (size_t i = 0; r == 0 && control_nodes[i]; i++)
        if (exists_under(c, c->o->dev_root, control_nodes[i]))
            r = cdi__add_node(c, c->common_nodes, control_nodes[i]);
    if (r == 0)
        r = add_libraries(c);
    if (r == 0)
        r = add_binaries_and_ipc(c);
    if (r == 0)
        r = add_hooks(c);
    if (r == 0)
        r = json_array_append_new(c->env, json_string("NVIDIA_VISIBLE_DEVICES=void"));
    if (r == 0 && c->libcuda_dir) {
        struct strbuf e = STRBUF_INIT;
        r = strbuf_printf(&e, "NVIDIA_CTK_LIBCUDA_DIR=%s", c->libcuda_dir);
        if (r == 0)
            r = json_array_append_new(c->env, json_string(strbuf_str(&e)));
        strbuf_release(&e);
    }
    if (r == 0 && (json_object_set(edits, "env", c->env) < 0 ||
                   json_object_set(edits, "deviceNodes", c->common_nodes) < 0 ||
                   json_object_set(edits, "mounts", c->mounts) < 0 ||
                   (json_array_size(c->hooks) && json_object_set(edits, "hooks", c->hooks) < 0)))
        r = -ENOMEM;
    return r;
}

int cdi__spec_dump(struct cdi__ctx *c, const char *kind, json_t *devices, json_t *edits,
                   char **ret_json)
{
    json_t *spec = json_object();
    char *text = NULL;
    int r = spec ? 0 : -ENOMEM;
    if (r == 0 &&
        (set_str(spec, "cdiVersion", CDI_SPEC_VERSION) < 0 || set_str(spec, "kind", kind) < 0 ||
         json_object_set(spec, "devices", devices) < 0 ||
         (edits && json_object_set(spec, "containerEdits", edits) < 0)))
        r = -ENOMEM;
    if (r == 0) {
        text = json_dumps(spec, JSON_INDENT(2));
        r = text ? 0 : -ENOMEM;
    }
    if (r == 0)
        *ret_json = text;
    json_decref(spec);
    return r;
}

/* An out-of-memory failure that nothing described yet gets a message. */
static int oom_message(struct error *err, int r)
{
    if (r == -ENOMEM && err && !err->code)
        error_set(err, r, "out of memory building the CDI spec");
    return r;
}

int cdi_spec_build(const struct inv_inventory *inv, const struct cdi_options *o, char **ret_json,
                   struct error *err)
{
    struct cdi__ctx c;
    json_t *devices = json_array(), *edits = json_object();
    int r = cdi__ctx_init(&c, o, inv->driver_version, err);
    if (r == 0 && (!devices || !edits))
        r = -ENOMEM;
    if (r == 0 && inv->n_gpus == 0)
        r = error_set(err, -ENODEV, "no GPUs: there is nothing to describe in a CDI spec");
    if (r == 0)
        r = need_driver_version(&c);
    if (r == 0)
        r = add_devices(&c, inv, devices);
    if (r == 0)
        r = cdi__common_edits(&c, edits);
    if (r == 0)
        r = cdi__spec_dump(&c, CDI_VENDOR "/" CDI_CLASS, devices, edits, ret_json);
    json_decref(devices);
    json_decref(edits);
    cdi__ctx_release(&c);
    return oom_message(err, r);
}

/* ---- the additional classes ------------------------------------------------------------ */

/* Every <dev root>/dev/<dir>/<prefix>* as device paths ("/dev/infiniband/uverbs0"), sorted. */
static int list_dev(struct cdi__ctx *c, const char *dir, const char *prefix, char ***out)
{
    struct strbuf rel = STRBUF_INIT;
    DIR *d;
    int r = strbuf_printf(&rel, "/dev%s%s", *dir ? "/" : "", dir);
    if (r == 0)
        r = join(&c->a, c->o->dev_root, strbuf_str(&rel));
    d = r == 0 ? opendir(strbuf_str(&c->a)) : NULL;
    struct dirent *de;
    while (d && r == 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.' || !str_startswith(de->d_name, prefix))
            continue;
        struct strbuf p = STRBUF_INIT;
        r = strbuf_printf(&p, "%s/%s", strbuf_str(&rel), de->d_name);
        if (r == 0)
            r = strv_push(out, strbuf_str(&p));
        strbuf_release(&p);
    }
    if (d)
        closedir(d);
    if (r == 0 && *out)
        qsort(*out, strv_length(*out), sizeof(char *), cmp_str);
    strbuf_release(&rel);
    return r;
}

int cdi_class_spec_build(const char *cls, const struct cdi_options *o, const unsigned *channels,
                         size_t n_channels, char **ret_json, struct error *err)
{
    struct cdi__ctx c;
    json_t *devices = json_array(), *nodes = json_array();
    char **paths = NULL;
    struct strbuf kind = STRBUF_INIT, name = STRBUF_INIT;
    int r = cdi__ctx_init(&c, o, NULL, err);
    if (r == 0 && (!devices || !nodes))
        r = -ENOMEM;

    if (r == 0 && strcmp(cls, "imex-channel") == 0) {
        for (size_t i = 0; r == 0 && i < n_channels; i++) {
            json_t *one = json_array();
            strbuf_reset(&name);
            r = one ? strbuf_printf(&name, "/dev/nvidia-caps-imex-channels/channel%u", channels[i])
                    : -ENOMEM;
            if (r == 0)
                r = add_required_node(&c, one, strbuf_str(&name), "IMEX channel");
            strbuf_reset(&name);
            if (r == 0)
                r = strbuf_printf(&name, "%u", channels[i]);
            if (r == 0)
                r = cdi__add_device(&c, devices, strbuf_str(&name), one);
            json_decref(one);
        }
    } else if (r == 0) {
        /* one "all" device with the feature's nodes; none at all means the feature's
         * driver is not loaded and its name could not resolve */
        const char *dir = strcmp(cls, "gdrcopy") == 0 ? ""
                          : strcmp(cls, "gds") == 0   ? ""
                                                      : "infiniband";
        const char *prefix = strcmp(cls, "gdrcopy") == 0 ? "gdrdrv"
                             : strcmp(cls, "gds") == 0   ? "nvidia-fs"
                                                         : "";
        r = list_dev(&c, dir, prefix, &paths);
        for (size_t i = 0; r == 0 && paths && paths[i]; i++)
            r = cdi__add_node(&c, nodes, paths[i]);
        if (r == 0 && !strv_length(paths)) {
            join(&c.a, o->dev_root, "/dev");
            r = error_set(err, -ENOENT,
                          "%s is enabled but %s/%s%s%s* has no device node: load its kernel "
                          "module on the node or turn the feature off",
                          cls, strbuf_str(&c.a), dir, *dir ? "/" : "", prefix);
        }
        if (r == 0)
            r = cdi__add_device(&c, devices, "all", nodes);
    }
    if (r == 0)
        r = strbuf_printf(&kind, CDI_VENDOR "/%s", cls);
    if (r == 0)
        r = cdi__spec_dump(&c, strbuf_str(&kind), devices, NULL, ret_json);
    strv_free(paths);
    json_decref(devices);
    json_decref(nodes);
    strbuf_release(&kind);
    strbuf_release(&name);
    cdi__ctx_release(&c);
    return oom_message(err, r);
}

int cdi_spec_write(const char *dir, const char *cls, const char *json, char **ret_path,
                   struct error *err)
{
    struct strbuf path = STRBUF_INIT;
    const char *d = dir && *dir ? dir : CDI_DEFAULT_SPEC_DIR;
    int r = path_mkdir_p(d, 0755, err);
    if (r == 0)
        r = strbuf_printf(&path, "%s/%s-%s.json", d, CDI_VENDOR, cls ? cls : CDI_CLASS);
    if (r == 0)
        r = file_write_atomic(strbuf_str(&path), json, strlen(json), 0644, err);
    if (r == 0 && ret_path)
        *ret_path = strbuf_take(&path);
    strbuf_release(&path);
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* allocate.c: the Allocate RPC's decision, as NVIDIA makes it (facts §3.2, §3.3, §5.2):
 * validate the device IDs, de-duplicate replicas of one device, and build the envs, mounts,
 * device specs, annotations and CDI device names for every device-list strategy.
 * Pure: the filesystem and randomness come in through struct model_alloc_env. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/internal.h"

#define CDI_VENDOR "k8s.device-plugin.nvidia.com"
#define DEVICE_LIST_DIR "/var/run/nvidia-container-devices"
#define CDI_ONLY_MASK (CFG_LIST_CDI_ANNOTATIONS | CFG_LIST_CDI_CRI)

struct resp_builder {
    struct model_alloc_response *r;
    size_t a_envs, a_mounts, a_devices, a_annotations, a_cdi;
};

static int kv_set(struct model_kv **arr, size_t *n, size_t *alloc, const char *key,
                  const char *value)
{
    char *v = strdup(value), *k = NULL;
    int r;

    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < *n; i++) {
        if (strcmp((*arr)[i].key, key) == 0) {
            free((*arr)[i].value);
            (*arr)[i].value = v;
            return 0;
        }
    }
    r = model__grow((void **)arr, alloc, *n, sizeof(**arr));
    k = r < 0 ? NULL : strdup(key);
    if (!k) {
        free(v);
        return -ENOMEM;
    }
    (*arr)[(*n)++] = (struct model_kv){.key = k, .value = v};
    return 0;
}

static int env_set(struct resp_builder *b, const char *key, const char *value)
{
    return kv_set(&b->r->envs, &b->r->n_envs, &b->a_envs, key, value);
}

static int mount_add(struct resp_builder *b, const char *host, const char *ctr, bool ro)
{
    struct model_mount mt = {
        .host_path = strdup(host), .container_path = strdup(ctr), .read_only = ro};
    int r =
        model__grow((void **)&b->r->mounts, &b->a_mounts, b->r->n_mounts, sizeof(*b->r->mounts));

    if (r < 0 || !mt.host_path || !mt.container_path) {
        free(mt.host_path);
        free(mt.container_path);
        return -ENOMEM;
    }
    b->r->mounts[b->r->n_mounts++] = mt;
    return 0;
}

static int join_path(const char *root, const char *path, struct strbuf *sb)
{
    size_t n = strlen(root);

    strbuf_reset(sb);
    while (n > 0 && root[n - 1] == '/')
        n--;
    if (strbuf_append(sb, root, n) < 0)
        return -ENOMEM;
    return strbuf_puts(sb, path);
}

/* Adds a device node once (by container path); host path is under the dev root. */
static int spec_add(struct resp_builder *b, const char *dev_root, const char *ctr)
{
    struct strbuf host = STRBUF_INIT;
    struct model_device_spec ds = {0};
    int r;

    for (size_t i = 0; i < b->r->n_devices; i++)
        if (strcmp(b->r->devices[i].container_path, ctr) == 0)
            return 0;
    r = join_path(dev_root, ctr, &host);
    if (r < 0)
        goto out;
    ds.container_path = strdup(ctr);
    ds.host_path = strbuf_take(&host);
    ds.permissions = strdup("rw");
    r = model__grow((void **)&b->r->devices, &b->a_devices, b->r->n_devices,
                    sizeof(*b->r->devices));
    if (r < 0 || !ds.container_path || !ds.host_path || !ds.permissions) {
        r = -ENOMEM;
        goto out;
    }
    b->r->devices[b->r->n_devices++] = ds;
    ds = (struct model_device_spec){0};
out:
    free(ds.container_path);
    free(ds.host_path);
    free(ds.permissions);
    strbuf_release(&host);
    return r;
}

static int cdi_add(struct resp_builder *b, struct strbuf *joined, const char *fmt_class,
                   const char *name)
{
    struct strbuf sb = STRBUF_INIT;
    int r = strbuf_printf(&sb, CDI_VENDOR "/%s=%s", fmt_class, name);

    if (r == 0 && joined->len)
        r = strbuf_putc(joined, ',');
    if (r == 0)
        r = strbuf_puts(joined, strbuf_str(&sb));
    if (r == 0)
        r = model__grow((void **)&b->r->cdi_devices, &b->a_cdi, b->r->n_cdi_devices,
                        sizeof(*b->r->cdi_devices));
    if (r == 0) {
        char *s = strbuf_take(&sb);
        if (!s)
            r = -ENOMEM;
        else
            b->r->cdi_devices[b->r->n_cdi_devices++] = s;
    }
    strbuf_release(&sb);
    return r;
}

void model_alloc_response_free(struct model_alloc_response *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_envs; i++) {
        free(r->envs[i].key);
        free(r->envs[i].value);
    }
    for (size_t i = 0; i < r->n_annotations; i++) {
        free(r->annotations[i].key);
        free(r->annotations[i].value);
    }
    for (size_t i = 0; i < r->n_mounts; i++) {
        free(r->mounts[i].host_path);
        free(r->mounts[i].container_path);
    }
    for (size_t i = 0; i < r->n_devices; i++) {
        free(r->devices[i].host_path);
        free(r->devices[i].container_path);
        free(r->devices[i].permissions);
    }
    for (size_t i = 0; i < r->n_cdi_devices; i++)
        free(r->cdi_devices[i]);
    free(r->envs);
    free(r->annotations);
    free(r->mounts);
    free(r->devices);
    free(r->cdi_devices);
    free(r);
}

const char *model_alloc_response_env(const struct model_alloc_response *r, const char *key)
{
    for (size_t i = 0; r && i < r->n_envs; i++)
        if (strcmp(r->envs[i].key, key) == 0)
            return r->envs[i].value;
    return NULL;
}

/* CDI: one name per device (+ IMEX channels, GDRCopy/GDS/MOFED), as an annotation and/or
 * in the CRI field. */
static int add_cdi(struct resp_builder *b, const struct model_settings *s,
                   const struct model_device *const *devs, size_t n,
                   const struct model_alloc_env *env)
{
    struct strbuf joined = STRBUF_INIT, key = STRBUF_INIT, num = STRBUF_INIT;
    char *rid = NULL;
    int r = 0;

    for (size_t i = 0; i < n && r == 0; i++)
        r = cdi_add(b, &joined, "gpu", devs[i]->base_id);
    for (size_t i = 0; i < s->n_imex_channel_ids && r == 0; i++) {
        strbuf_reset(&num);
        r = strbuf_printf(&num, "%u", s->imex_channel_ids[i]);
        if (r == 0)
            r = cdi_add(b, &joined, "imex-channel", strbuf_str(&num));
    }
    if (r == 0 && s->gdrcopy_enabled)
        r = cdi_add(b, &joined, "gdrcopy", "all");
    if (r == 0 && s->gds_enabled)
        r = cdi_add(b, &joined, "gds", "all");
    if (r == 0 && s->mofed_enabled)
        r = cdi_add(b, &joined, "mofed", "all");
    if (r < 0)
        goto out;
    if (s->device_list_strategies & CFG_LIST_CDI_ANNOTATIONS) {
        rid = env && env->new_id ? env->new_id(env->userdata) : NULL;
        if (!rid) {
            r = -EIO;
            goto out;
        }
        r = strbuf_printf(&key, "%snvidia-device-plugin_%s", s->cdi_annotation_prefix, rid);
        if (r == 0)
            r = kv_set(&b->r->annotations, &b->r->n_annotations, &b->a_annotations,
                       strbuf_str(&key), strbuf_str(&joined));
    }
    if (r == 0 && !(s->device_list_strategies & CFG_LIST_CDI_CRI)) {
        /* names were only needed for the annotation */
        for (size_t i = 0; i < b->r->n_cdi_devices; i++)
            free(b->r->cdi_devices[i]);
        b->r->n_cdi_devices = 0;
    }
out:
    free(rid);
    strbuf_release(&joined);
    strbuf_release(&key);
    strbuf_release(&num);
    return r;
}

static int add_mps(struct resp_builder *b, const struct model_settings *s, const char *name)
{
    struct strbuf ctr = STRBUF_INIT, host = STRBUF_INIT;
    int r;

    r = strbuf_printf(&ctr, "/mps/%s/pipe", name);
    if (r == 0)
        r = env_set(b, "CUDA_MPS_PIPE_DIRECTORY", strbuf_str(&ctr));
    if (r == 0)
        r = join_path(s->mps_root ? s->mps_root : "", strbuf_str(&ctr) + 4, &host);
    if (r == 0)
        r = mount_add(b, strbuf_str(&host), strbuf_str(&ctr), false);
    if (r == 0)
        r = join_path(s->mps_root ? s->mps_root : "", "/shm", &host);
    if (r == 0)
        r = mount_add(b, strbuf_str(&host), "/dev/shm", false);
    strbuf_release(&ctr);
    strbuf_release(&host);
    return r;
}

/* Allocate's additions per sharing mode, by the mode's alloc_env (config.h). */
static int (*const sharing_envs[])(struct resp_builder *b, const struct model_settings *s,
                                   const char *name) = {
    [CFG_SHARING_ENV_NONE] = NULL,
    [CFG_SHARING_ENV_MPS] = add_mps,
};

static int add_sharing_env(struct resp_builder *b, const struct model_settings *s,
                           const struct model_resource *res)
{
    enum cfg_sharing_env e = res->mode->alloc_env;

    if ((size_t)e >= GS_ARRAY_SIZE(sharing_envs) || !sharing_envs[e])
        return 0;
    return sharing_envs[e](b, s, res->name);
}

static int add_envvar(struct resp_builder *b, const struct model_settings *s,
                      const struct model_device *const *devs, size_t n)
{
    struct strbuf sb = STRBUF_INIT;
    int r = 0;

    for (size_t i = 0; i < n && r == 0; i++)
        r = strbuf_printf(&sb, "%s%s", i ? "," : "", devs[i]->base_id);
    if (r == 0)
        r = env_set(b, "NVIDIA_VISIBLE_DEVICES", strbuf_str(&sb));
    if (r == 0 && s->n_imex_channel_ids) {
        strbuf_reset(&sb);
        for (size_t i = 0; i < s->n_imex_channel_ids && r == 0; i++)
            r = strbuf_printf(&sb, "%s%u", i ? "," : "", s->imex_channel_ids[i]);
        if (r == 0)
            r = env_set(b, "NVIDIA_IMEX_CHANNELS", strbuf_str(&sb));
    }
    strbuf_release(&sb);
    return r;
}

/* The device-list mounts of /dev/null carry no read_only, as NVIDIA's do: the NVIDIA
 * container runtime reads only their paths, and answers byte-identical to NVIDIA's keep
 * checkpointed pods and hooks that compare responses unsurprised. */
static int add_volume_mounts(struct resp_builder *b, const struct model_settings *s,
                             const struct model_device *const *devs, size_t n)
{
    struct strbuf sb = STRBUF_INIT;
    int r = env_set(b, "NVIDIA_VISIBLE_DEVICES", DEVICE_LIST_DIR);

    for (size_t i = 0; i < n && r == 0; i++) {
        strbuf_reset(&sb);
        r = strbuf_printf(&sb, DEVICE_LIST_DIR "/%s", devs[i]->base_id);
        if (r == 0)
            r = mount_add(b, "/dev/null", strbuf_str(&sb), false);
    }
    for (size_t i = 0; i < s->n_imex_channel_ids && r == 0; i++) {
        strbuf_reset(&sb);
        r = strbuf_printf(&sb, DEVICE_LIST_DIR "/imex/%u", s->imex_channel_ids[i]);
        if (r == 0)
            r = mount_add(b, "/dev/null", strbuf_str(&sb), false);
    }
    strbuf_release(&sb);
    return r;
}

static int add_mig_caps(struct resp_builder *b, const struct model_settings *s,
                        const struct model_device *d, const struct model_alloc_env *env)
{
    int r = 0;

    if (d->mig_index < 0 || !env || !env->mig_cap_path)
        return 0;
    for (int ci = 0; ci < 2 && r == 0; ci++) {
        char *path = env->mig_cap_path(env->userdata, d->minor, d->gi_id, d->ci_id, ci == 1);
        if (path)
            r = spec_add(b, s->dev_root, path);
        free(path);
    }
    return r;
}

static int add_device_specs(struct resp_builder *b, const struct model_settings *s,
                            const struct model_device *const *devs, size_t n,
                            const struct model_alloc_env *env)
{
    static const char *const control[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                          "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};
    struct strbuf sb = STRBUF_INIT;
    int r = 0;

    for (size_t i = 0; i < GS_ARRAY_SIZE(control) && r == 0; i++)
        if (!env || !env->device_exists || env->device_exists(env->userdata, control[i]))
            r = spec_add(b, s->dev_root, control[i]);
    for (size_t i = 0; i < n && r == 0; i++) {
        strbuf_reset(&sb);
        r = strbuf_printf(&sb, "/dev/nvidia%u", devs[i]->minor);
        if (r == 0)
            r = spec_add(b, s->dev_root, strbuf_str(&sb));
        if (r == 0)
            r = add_mig_caps(b, s, devs[i], env);
    }
    for (size_t i = 0; i < s->n_imex_channel_ids && r == 0; i++) {
        strbuf_reset(&sb);
        r = strbuf_printf(&sb, "/dev/nvidia-caps-imex-channels/channel%u", s->imex_channel_ids[i]);
        if (r == 0)
            r = spec_add(b, s->dev_root, strbuf_str(&sb));
    }
    strbuf_release(&sb);
    return r;
}

static int validate(const struct model_resource *res, const char *const *ids, size_t n_ids,
                    const struct model_device **devs, size_t *ret_n, struct error *err)
{
    bool annotated = false;
    size_t n = 0;

    for (size_t i = 0; i < n_ids; i++)
        annotated |= strstr(ids[i], "::") != NULL;
    if (annotated && cfg_sharing_mode_shares(res->mode) && res->fail_requests_greater_than_one &&
        n_ids > 1)
        return error_set(err, -EINVAL,
                         "invalid allocation request for \"%s\": invalid request: "
                         "maximum request size for shared resources is 1; found %zu",
                         res->name, n_ids);
    for (size_t i = 0; i < n_ids; i++) {
        const struct model_device *d = model_resource_find_device(res, ids[i]);
        bool dup = false;
        if (!d)
            return error_set(err, -EINVAL,
                             "invalid allocation request for \"%s\": invalid "
                             "request: unknown device: %s",
                             res->name, ids[i]);
        /* replicas of one device give that device once (NVIDIA v0.18.0) */
        for (size_t j = 0; j < n && !dup; j++)
            dup = strcmp(devs[j]->base_id, d->base_id) == 0;
        if (!dup)
            devs[n++] = d;
    }
    *ret_n = n;
    return 0;
}

int model_allocate(const struct model *m, const struct model_resource *res, const char *const *ids,
                   size_t n_ids, const struct model_alloc_env *env,
                   struct model_alloc_response **ret, struct error *err)
{
    const struct model_settings *s;
    struct resp_builder b = {0};
    const struct model_device **devs = NULL;
    size_t n = 0;
    int r;

    if (!m || !res || !ret)
        return error_set(err, -EINVAL, "model_allocate: missing model or resource");
    s = &m->settings;
    devs = calloc(n_ids + 1, sizeof(*devs));
    b.r = calloc(1, sizeof(*b.r));
    if (!devs || !b.r) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = validate(res, ids, n_ids, devs, &n, err);
    if (r < 0)
        goto out;
    if (s->device_list_strategies & CDI_ONLY_MASK)
        r = add_cdi(&b, s, devs, n, env);
    if (r == 0)
        r = add_sharing_env(&b, s, res);
    /* with only CDI strategies the runtime gets everything from the CDI spec */
    if (r == 0 && (s->device_list_strategies & ~CDI_ONLY_MASK)) {
        if (s->device_list_strategies & CFG_LIST_ENVVAR)
            r = add_envvar(&b, s, devs, n);
        if (r == 0 && (s->device_list_strategies & CFG_LIST_VOLUME_MOUNTS))
            r = add_volume_mounts(&b, s, devs, n);
        if (r == 0 && s->pass_device_specs)
            r = add_device_specs(&b, s, devs, n, env);
    }
    if (r == 0 && s->gdrcopy_enabled)
        r = env_set(&b, "NVIDIA_GDRCOPY", "enabled");
    if (r == 0 && s->gds_enabled)
        r = env_set(&b, "NVIDIA_GDS", "enabled");
    if (r == 0 && s->mofed_enabled)
        r = env_set(&b, "NVIDIA_MOFED", "enabled");
    if (r == -EIO) {
        error_set(err, r, "cannot make a CDI annotation key for \"%s\": no random id", res->name);
        goto out;
    }
    if (r < 0) {
        error_set(err, r, "out of memory while building the allocate response");
        goto out;
    }
    *ret = b.r;
    b.r = NULL;
out:
    free(devs);
    model_alloc_response_free(b.r);
    return r;
}

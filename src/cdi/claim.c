/* SPDX-License-Identifier: Apache-2.0 */
/* claim.c: the per-claim CDI specs of DRA, as NVIDIA's DRA driver writes them on prepare:
 * kind k8s.gpu.nvidia.com/claim, a device "<claimUID>-<device>" per prepared device with its
 * nodes (MIG capability nodes as character devices the runtime creates, so the host needs
 * none), the common edits spec.c gives every device, and the caller's extra edits (MPS);
 * one file per claim, written atomically and removed on unprepare. No decisions: what to
 * prepare comes from the caller (src/daemon/dra.c, over dra/'s plan). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cdi/internal.h"

/* A uid becomes part of a file name and of device names: letters, digits, '-' only. */
static int check_uid(const char *uid, struct error *err)
{
    size_t n = uid ? strlen(uid) : 0;
    bool ok = n > 0 && n <= CDI_CLAIM_UID_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        char ch = uid[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '-';
    }
    if (!ok)
        return error_set(err, -EINVAL,
                         "claim uid \"%.*s\" is not a Kubernetes uid (1 to %d of A-Z, a-z, 0-9 "
                         "and '-'): refusing to use it in a CDI spec's name",
                         (int)(n > 64 ? 64 : n), uid ? uid : "", CDI_CLAIM_UID_MAX);
    return 0;
}

/* The mount at container path ctr in mounts is dropped (the caller's replaces it). */
static void drop_mount(json_t *mounts, const char *ctr)
{
    for (size_t i = json_array_size(mounts); i-- > 0;) {
        json_t *p = json_object_get(json_array_get(mounts, i), "containerPath");
        if (json_string_value(p) && strcmp(json_string_value(p), ctr) == 0)
            json_array_remove(mounts, i);
    }
}

/* e's env and mounts appended to the edits object (arrays created when missing). */
static int add_edits(json_t *edits, const struct cdi_edits *e)
{
    static const char *const default_opts[] = {"rw", "nosuid", "nodev", "bind", NULL};
    json_t *env = json_object_get(edits, "env"), *mounts = json_object_get(edits, "mounts");
    int r = 0;
    if (e->env && *e->env && !env && json_object_set_new(edits, "env", json_array()) == 0)
        env = json_object_get(edits, "env");
    if (e->n_mounts && !mounts && json_object_set_new(edits, "mounts", json_array()) == 0)
        mounts = json_object_get(edits, "mounts");
    if ((e->env && *e->env && !env) || (e->n_mounts && !mounts))
        return -ENOMEM;
    for (const char *const *s = e->env; r == 0 && s && *s; s++)
        r = json_array_append_new(env, json_string(*s)) == 0 ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < e->n_mounts; i++) {
        const struct cdi_mount *m = &e->mounts[i];
        drop_mount(mounts, m->container_path);
        json_t *j =
            cdi__mount_new(m->host_path, m->container_path, m->options ? m->options : default_opts);
        r = j && json_array_append_new(mounts, j) == 0 ? 0 : -ENOMEM;
    }
    return r;
}

/* -EINVAL naming who for an env string that is not NAME=value or a relative mount path. */
static int check_edits(const struct cdi_edits *e, const char *who, struct error *err)
{
    for (const char *const *s = e->env; s && *s; s++)
        if (!strchr(*s, '=') || **s == '=')
            return error_set(err, -EINVAL, "%s: env \"%s\" is not NAME=value", who, *s);
    for (size_t i = 0; i < e->n_mounts; i++) {
        const struct cdi_mount *m = &e->mounts[i];
        if (!m->host_path || m->host_path[0] != '/' || !m->container_path ||
            m->container_path[0] != '/')
            return error_set(err, -EINVAL, "%s: mount %zu needs absolute host and container paths",
                             who, i);
    }
    return 0;
}

static int check_claim(const struct cdi_claim *claim, struct error *err)
{
    int r = check_uid(claim->uid, err);
    size_t n = r == 0 ? strlen(claim->uid) : 0;
    if (r == 0 && claim->n_devices == 0)
        r = error_set(err, -EINVAL, "claim %s: no devices to write a CDI spec for", claim->uid);
    if (r == 0)
        r = check_edits(&claim->edits, claim->uid, err);
    for (size_t i = 0; r == 0 && i < claim->n_devices; i++) {
        const struct cdi_claim_device *d = &claim->devices[i];
        if (!d->name || strncmp(d->name, claim->uid, n) != 0 || d->name[n] != '-' ||
            !d->name[n + 1])
            r = error_set(err, -EINVAL,
                          "claim %s: CDI device name \"%s\" does not start with the claim's "
                          "uid and '-'",
                          claim->uid, d->name ? d->name : "");
        else
            r = check_edits(&d->edits, d->name, err);
    }
    return r;
}

/* One claim device: {"name", "containerEdits": {"deviceNodes", own env and mounts}}. */
static int add_claim_device(struct cdi__ctx *c, const struct cdi_claim *claim,
                            const struct cdi_claim_device *d, json_t *devices)
{
    json_t *nodes = json_array();
    struct strbuf who = STRBUF_INIT;
    int r = nodes ? 0 : -ENOMEM;
    if (r == 0)
        r = strbuf_printf(&who, "claim %s: device %s", claim->uid, d->name);
    if (r == 0)
        r = cdi__device_nodes(c, d->minor, d->is_mig, d->gi_id, d->ci_id, strbuf_str(&who), nodes);
    if (r == 0)
        r = cdi__add_device(c, devices, d->name, nodes);
    if (r == 0) {
        json_t *dev = json_array_get(devices, json_array_size(devices) - 1);
        r = add_edits(json_object_get(dev, "containerEdits"), &d->edits);
    }
    json_decref(nodes);
    strbuf_release(&who);
    return r;
}

int cdi_claim_spec_build(const struct cdi_claim *claim, const struct cdi_options *o,
                         char **ret_json, struct error *err)
{
    struct cdi__ctx c;
    json_t *devices = json_array(), *edits = json_object();
    int r = cdi__ctx_init(&c, o, claim->driver_version, err);
    c.cap_char_nodes = true; /* as NVIDIA's DRA driver: the runtime creates them */
    if (r == 0 && (!devices || !edits))
        r = -ENOMEM;
    if (r == 0)
        r = check_claim(claim, err);
    for (size_t i = 0; r == 0 && i < claim->n_devices; i++)
        r = add_claim_device(&c, claim, &claim->devices[i], devices);
    if (r == 0)
        r = cdi__common_edits(&c, edits);
    if (r == 0)
        r = add_edits(edits, &claim->edits);
    if (r == 0)
        r = cdi__spec_dump(&c, CDI_CLAIM_KIND, devices, edits, ret_json);
    if (r == -ENOMEM && err && !err->code)
        error_set(err, r, "claim %s: out of memory building its CDI spec",
                  claim->uid ? claim->uid : "");
    json_decref(devices);
    json_decref(edits);
    cdi__ctx_release(&c);
    return r;
}

/* <root>/k8s.gpu.nvidia.com-claim_<uid>.yaml */
static int claim_path(const char *cdi_root, const char *uid, struct strbuf *path, struct error *err)
{
    int r = check_uid(uid, err);
    if (r == 0)
        r = strbuf_printf(path, "%s/k8s.gpu.nvidia.com-claim_%s.yaml",
                          cdi_root && *cdi_root ? cdi_root : CDI_DEFAULT_SPEC_DIR, uid);
    return r;
}

int cdi_claim_spec_write(const char *cdi_root, const char *claim_uid, const char *json,
                         char **ret_path, struct error *err)
{
    struct strbuf path = STRBUF_INIT;
    int r = claim_path(cdi_root, claim_uid, &path, err);
    if (r == 0)
        r = path_mkdir_p(cdi_root && *cdi_root ? cdi_root : CDI_DEFAULT_SPEC_DIR, 0755, err);
    if (r == 0)
        r = file_write_atomic(strbuf_str(&path), json, strlen(json), 0644, err);
    if (r == 0 && ret_path)
        *ret_path = strbuf_take(&path);
    strbuf_release(&path);
    return r;
}

int cdi_claim_spec_remove(const char *cdi_root, const char *claim_uid, struct error *err)
{
    struct strbuf path = STRBUF_INIT;
    int r = claim_path(cdi_root, claim_uid, &path, err);
    if (r == 0 && unlink(strbuf_str(&path)) < 0 && errno != ENOENT)
        r = error_set_errno(err, errno, "removing CDI spec %s", strbuf_str(&path));
    strbuf_release(&path);
    return r;
}

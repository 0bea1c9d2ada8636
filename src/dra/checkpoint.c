/* SPDX-License-Identifier: Apache-2.0 */
/* checkpoint.c: the prepared claims a restarted plugin must remember (to answer a repeated
 * prepare the same and still unprepare), as JSON with a checksum in the manner of the
 * kubelet's checkpointmanager (NVIDIA's checkpoint.json). Pure: text in, text out. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra.h"

#define STATE_STARTED "PrepareStarted"
#define STATE_COMPLETED "PrepareCompleted"

/* sharing.strategy of a device that is not shared (the rows name only the modes that share) */
#define STRATEGY_NONE "None"

struct dra_checkpoint *dra_checkpoint_new(void)
{
    return calloc(1, sizeof(struct dra_checkpoint));
}

void dra_checkpoint_free(struct dra_checkpoint *cp)
{
    if (!cp)
        return;
    for (size_t i = 0; i < cp->n_claims; i++)
        dra_plan_free(cp->claims[i].plan);
    free(cp->claims);
    free(cp);
}

const struct dra_checkpoint_claim *dra_checkpoint_find(const struct dra_checkpoint *cp,
                                                       const char *claim_uid)
{
    for (size_t i = 0; cp && claim_uid && i < cp->n_claims; i++)
        if (strcmp(cp->claims[i].plan->claim_uid, claim_uid) == 0)
            return &cp->claims[i];
    return NULL;
}

int dra_checkpoint_put(struct dra_checkpoint *cp, enum dra_claim_state state, struct dra_plan *plan,
                       struct error *err)
{
    struct dra_checkpoint_claim *claims;

    for (size_t i = 0; i < cp->n_claims; i++)
        if (strcmp(cp->claims[i].plan->claim_uid, plan->claim_uid) == 0) {
            dra_plan_free(cp->claims[i].plan);
            cp->claims[i] = (struct dra_checkpoint_claim){state, plan};
            return 0;
        }
    claims = realloc(cp->claims, (cp->n_claims + 1) * sizeof(*claims));
    if (!claims) {
        dra_plan_free(plan);
        return error_set(err, -ENOMEM, "out of memory");
    }
    cp->claims = claims;
    cp->claims[cp->n_claims++] = (struct dra_checkpoint_claim){state, plan};
    return 0;
}

bool dra_checkpoint_remove(struct dra_checkpoint *cp, const char *claim_uid)
{
    for (size_t i = 0; cp && i < cp->n_claims; i++)
        if (strcmp(cp->claims[i].plan->claim_uid, claim_uid) == 0) {
            dra_plan_free(cp->claims[i].plan);
            memmove(&cp->claims[i], &cp->claims[i + 1],
                    (cp->n_claims - i - 1) * sizeof(*cp->claims));
            cp->n_claims--;
            return true;
        }
    return false;
}

/* ---- encode ------------------------------------------------------------------------------- */

static uint32_t fnv1a32(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

static json_t *device_json(const struct dra_plan_device *d)
{
    const struct dra_device_info *i = &d->device;
    json_t *nodes = json_array();

    for (size_t k = 0; nodes && d->device_nodes && d->device_nodes[k]; k++)
        if (json_array_append_new(nodes, json_string(d->device_nodes[k])) < 0) {
            json_decref(nodes);
            return NULL;
        }
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:s,s:[s],s:o,s:b,s:I,"
                          "s:{s:s,s:I,s:I,s:I}}",
                          "request", d->request, "pool", d->pool, "device", i->name, "type",
                          i->type == DRA_DEVICE_GPU ? "gpu" : "mig", "uuid", i->uuid, "parentUUID",
                          i->parent_uuid, "gpuIndex", (json_int_t)i->gpu_index, "minor",
                          (json_int_t)i->minor, "migIndex", (json_int_t)i->mig_index, "giId",
                          (json_int_t)i->gi_id, "ciId", (json_int_t)i->ci_id, "profile", i->profile,
                          "cdiDeviceIDs", d->cdi_device_id, "deviceNodes", nodes, "adminAccess",
                          d->admin_access, "group", (json_int_t)d->group, "sharing", "strategy",
                          d->sharing.mode->dra_name ? d->sharing.mode->dra_name : STRATEGY_NONE,
                          "interval", (json_int_t)d->sharing.interval, "activeThreadPercentage",
                          (json_int_t)d->sharing.active_thread_percentage, "pinnedMemoryLimitMiB",
                          (json_int_t)d->sharing.pinned_limit_mib);
    /* a share only: files without shares stay as they were */
    if (o && d->share.id[0] &&
        json_object_set_new(o, "share",
                            json_pack("{s:s,s:I,s:I}", "id", d->share.id, "memoryMiB",
                                      (json_int_t)d->share.memory_mib, "threadPercentage",
                                      (json_int_t)d->share.thread_pct)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *claim_json(const struct dra_checkpoint_claim *c)
{
    json_t *devices = json_array();

    for (size_t i = 0; devices && i < c->plan->n_devices; i++)
        if (json_array_append_new(devices, device_json(&c->plan->devices[i])) < 0) {
            json_decref(devices);
            return NULL;
        }
    return json_pack("{s:s,s:s,s:s,s:o}", "checkpointState",
                     c->state == DRA_PREPARE_COMPLETED ? STATE_COMPLETED : STATE_STARTED, "name",
                     c->plan->claim_name, "namespace", c->plan->claim_namespace, "preparedDevices",
                     devices);
}

static json_t *v1_json(const struct dra_checkpoint *cp)
{
    json_t *claims = json_object();

    for (size_t i = 0; claims && i < cp->n_claims; i++)
        if (json_object_set_new(claims, cp->claims[i].plan->claim_uid, claim_json(&cp->claims[i])) <
            0) {
            json_decref(claims);
            return NULL;
        }
    json_t *v1 = json_pack("{s:o}", "preparedClaims", claims);
    if (v1 && cp->boot_id[0] &&
        json_object_set_new(v1, "nodeBootID", json_string(cp->boot_id)) < 0) {
        json_decref(v1);
        return NULL;
    }
    return v1;
}

/* The checksum covers the canonical text of "v1": compact, keys sorted. */
static int checksum(const json_t *v1, uint32_t *ret)
{
    char *text = json_dumps(v1, JSON_COMPACT | JSON_SORT_KEYS);

    if (!text)
        return -ENOMEM;
    *ret = fnv1a32(text);
    free(text);
    return 0;
}

int dra_checkpoint_encode(const struct dra_checkpoint *cp, char **ret, struct error *err)
{
    json_t *v1 = v1_json(cp), *doc = NULL;
    uint32_t sum = 0;
    char *text = NULL;

    if (v1 && checksum(v1, &sum) == 0)
        doc = json_pack("{s:I,s:O}", "checksum", (json_int_t)sum, "v1", v1);
    if (doc)
        text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(v1);
    json_decref(doc);
    if (!text)
        return error_set(err, -ENOMEM, "out of memory");
    *ret = text;
    return 0;
}

/* ---- decode ------------------------------------------------------------------------------- */

static int bad(struct error *err, const char *what)
{
    return error_set(err, -EBADMSG,
                     "DRA checkpoint: %s; the file was changed or cut short — removing it "
                     "makes the plugin forget the claims it prepared",
                     what);
}

static int decode_sharing(json_t *s, struct dra_plan_sharing *sh)
{
    const char *strategy = NULL;
    json_int_t interval = 0, atp = -1, pinned = 0;

    if (json_unpack(s, "{s:s,s:I,s:I,s:I}", "strategy", &strategy, "interval", &interval,
                    "activeThreadPercentage", &atp, "pinnedMemoryLimitMiB", &pinned) < 0 ||
        interval < 0 || interval > DRA_TIMESLICE_LONG || atp < -1 || atp > 100 || pinned < 0)
        return -EBADMSG;
    sh->mode = strcmp(strategy, STRATEGY_NONE) == 0 ? cfg_sharing_mode(CFG_SHARING_NONE)
                                                    : cfg_sharing_mode_by_dra_name(strategy);
    if (!sh->mode)
        return -EBADMSG;
    sh->interval = (enum dra_timeslice)interval;
    sh->active_thread_percentage = (int)atp;
    sh->pinned_limit_mib = (uint64_t)pinned;
    return 0;
}

/* "share": {"id", "memoryMiB", "threadPercentage"}, absent when the device is not a share. */
static int decode_share(json_t *s, struct dra_plan_device *d)
{
    const char *id = NULL;
    json_int_t mib = 0, pct = -1;

    d->share.thread_pct = -1;
    if (!s)
        return 0;
    if (json_unpack(s, "{s:s,s:I,s:I}", "id", &id, "memoryMiB", &mib, "threadPercentage", &pct) <
            0 ||
        !id[0] || strlen(id) >= sizeof(d->share.id) || mib < 1 || pct < -1 || pct > 100)
        return -EBADMSG;
    str_copy(d->share.id, id, sizeof(d->share.id));
    d->share.memory_mib = (uint64_t)mib;
    d->share.thread_pct = (int)pct;
    return 0;
}

static int decode_ids(json_t *ids, json_t *nodes, const char *uid, struct dra_plan_device *d)
{
    size_t i;
    json_t *v;

    if (!json_is_string(json_array_get(ids, 0)))
        return -EBADMSG;
    d->cdi_device_id = str_dup(json_string_value(json_array_get(ids, 0)));
    if (asprintf(&d->cdi_device_name, "%s-%s%s%s", uid, d->device.name, d->share.id[0] ? "-" : "",
                 d->share.id) < 0)
        d->cdi_device_name = NULL;
    d->device_nodes = strv_new();
    if (!d->cdi_device_id || !d->cdi_device_name || !d->device_nodes)
        return -ENOMEM;
    json_array_foreach(nodes, i, v)
    {
        if (!json_is_string(v))
            return -EBADMSG;
        if (strv_push(&d->device_nodes, json_string_value(v)) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int decode_device(json_t *o, const char *uid, struct dra_plan_device *d)
{
    struct dra_device_info *i = &d->device;
    const char *req, *pool, *name, *type, *uuid, *parent, *profile;
    json_int_t gpu, minor, mig, gi, ci, group;
    json_t *ids, *nodes, *sharing;
    int admin;

    if (json_unpack(o, "{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:s,s:o,s:o,s:b,s:I,s:o}",
                    "request", &req, "pool", &pool, "device", &name, "type", &type, "uuid", &uuid,
                    "parentUUID", &parent, "gpuIndex", &gpu, "minor", &minor, "migIndex", &mig,
                    "giId", &gi, "ciId", &ci, "profile", &profile, "cdiDeviceIDs", &ids,
                    "deviceNodes", &nodes, "adminAccess", &admin, "group", &group, "sharing",
                    &sharing) < 0 ||
        strlen(name) >= sizeof(i->name) || strlen(uuid) >= sizeof(i->uuid) ||
        strlen(parent) >= sizeof(i->parent_uuid) || strlen(profile) >= sizeof(i->profile) ||
        gpu < 0 || minor < 0 || group < 0 || !json_is_array(nodes))
        return -EBADMSG;
    str_copy(i->name, name, sizeof(i->name));
    i->type = strcmp(type, "mig") == 0 ? DRA_DEVICE_MIG : DRA_DEVICE_GPU;
    str_copy(i->uuid, uuid, sizeof(i->uuid));
    str_copy(i->parent_uuid, parent, sizeof(i->parent_uuid));
    str_copy(i->profile, profile, sizeof(i->profile));
    i->gpu_index = (unsigned)gpu;
    i->minor = (unsigned)minor;
    i->mig_index = (int)mig;
    i->gi_id = (unsigned)gi;
    i->ci_id = (unsigned)ci;
    d->admin_access = admin;
    d->group = (unsigned)group;
    d->request = str_dup(req);
    d->pool = str_dup(pool);
    if (!d->request || !d->pool)
        return -ENOMEM;
    if (decode_sharing(sharing, &d->sharing) < 0 ||
        decode_share(json_object_get(o, "share"), d) < 0)
        return -EBADMSG;
    return decode_ids(ids, nodes, uid, d);
}

static int decode_claim(const char *uid, json_t *o, struct dra_checkpoint *cp, struct error *err)
{
    const char *state, *name, *ns;
    json_t *devices, *v;
    struct dra_plan *p = calloc(1, sizeof(*p));
    size_t i;
    int r = -EBADMSG;

    if (!p)
        return error_set(err, -ENOMEM, "out of memory");
    if (json_unpack(o, "{s:s,s:s,s:s,s:o}", "checkpointState", &state, "name", &name, "namespace",
                    &ns, "preparedDevices", &devices) < 0 ||
        !json_is_array(devices) ||
        (strcmp(state, STATE_STARTED) != 0 && strcmp(state, STATE_COMPLETED) != 0))
        goto out;
    p->claim_uid = str_dup(uid);
    p->claim_name = str_dup(name);
    p->claim_namespace = str_dup(ns);
    p->devices = calloc(json_array_size(devices) + 1, sizeof(*p->devices));
    r = -ENOMEM;
    if (!p->claim_uid || !p->claim_name || !p->claim_namespace || !p->devices)
        goto out;
    json_array_foreach(devices, i, v)
    {
        r = decode_device(v, uid, &p->devices[p->n_devices++]);
        if (r < 0)
            goto out;
        if (p->devices[i].group >= p->n_groups)
            p->n_groups = p->devices[i].group + 1;
    }
    return dra_checkpoint_put(
        cp, strcmp(state, STATE_COMPLETED) == 0 ? DRA_PREPARE_COMPLETED : DRA_PREPARE_STARTED, p,
        err);
out:
    dra_plan_free(p);
    return r == -ENOMEM ? error_set(err, r, "out of memory")
                        : error_set(err, r,
                                    "DRA checkpoint: claim %s is malformed; the file "
                                    "was changed by hand or by another version",
                                    uid);
}

static int decode_doc(json_t *doc, struct dra_checkpoint *cp, struct error *err)
{
    json_t *v1 = NULL, *claims = NULL, *v;
    json_int_t sum = -1;
    uint32_t want = 0;
    const char *uid;
    int r;

    if (json_unpack(doc, "{s:I,s:o}", "checksum", &sum, "v1", &v1) < 0 ||
        json_unpack(v1, "{s:o}", "preparedClaims", &claims) < 0 || !json_is_object(claims))
        return bad(err, "not a checkpoint ({\"checksum\", \"v1\": {\"preparedClaims\"}})");
    if (checksum(v1, &want) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    if (sum != (json_int_t)want)
        return bad(err, "checksum mismatch");
    const json_t *boot = json_object_get(v1, "nodeBootID");
    if (boot && (!json_is_string(boot) || json_string_length(boot) >= sizeof(cp->boot_id)))
        return bad(err, "nodeBootID is not a boot id");
    if (boot)
        str_copy(cp->boot_id, json_string_value(boot), sizeof(cp->boot_id));
    json_object_foreach(claims, uid, v)
    {
        r = decode_claim(uid, v, cp, err);
        if (r < 0)
            return r;
    }
    return 0;
}

int dra_checkpoint_decode(const char *text, size_t n, struct dra_checkpoint **ret,
                          struct error *err)
{
    struct dra_checkpoint *cp = dra_checkpoint_new();
    json_error_t je;
    json_t *doc = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    int r;

    if (!cp)
        r = error_set(err, -ENOMEM, "out of memory");
    else if (!doc)
        r = bad(err, "not JSON");
    else
        r = decode_doc(doc, cp, err);
    json_decref(doc);
    if (r < 0) {
        dra_checkpoint_free(cp);
        return r;
    }
    *ret = cp;
    return 0;
}

size_t dra_checkpoint_for_boot(struct dra_checkpoint *cp, const char *boot_id)
{
    size_t forgotten = 0;

    if (!boot_id || !boot_id[0])
        return 0;
    if (cp->boot_id[0] && strcmp(cp->boot_id, boot_id) != 0) {
        forgotten = cp->n_claims;
        for (size_t i = 0; i < cp->n_claims; i++)
            dra_plan_free(cp->claims[i].plan);
        cp->n_claims = 0;
    }
    str_copy(cp->boot_id, boot_id, sizeof(cp->boot_id));
    return forgotten;
}

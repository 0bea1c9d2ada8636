/* SPDX-License-Identifier: Apache-2.0 */
/* plan.c: ResourceClaim + this node's devices -> what NodePrepareResources must do for it:
 * which devices, their CDI ids and device nodes, and the sharing settings their opaque
 * config asks for, choosing configs and refusing devices with NVIDIA's rules and texts
 * (k8s-dra-driver-gpu device_state.go). Pure: the caller writes CDI specs and applies. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra.h"

/* A decoded config of this driver, in precedence order (lowest first). */
struct decoded {
    const struct dra_claim_config *src;
    struct dra_opaque_config cfg;
};

struct ctx {
    const struct dra_claim *claim;
    const char *pool;
    const struct dra_devices *devs;
    struct decoded *configs;
    size_t n_configs;
    struct error *err;
};

static const char *source_name(enum dra_config_source s)
{
    return s == DRA_SOURCE_CLASS ? "FromClass" : "FromClaim";
}

/* Decodes the configs of driver gpu.nvidia.com, class configs before claim configs (claim
 * ones win), each source in the API's order (later wins). */
static int decode_configs(struct ctx *c)
{
    const struct dra_claim *claim = c->claim;
    char where[512];
    int r;

    c->configs = calloc(claim->n_configs + 1, sizeof(*c->configs));
    if (!c->configs)
        return error_set(c->err, -ENOMEM, "out of memory");
    for (int pass = DRA_SOURCE_CLASS; pass <= DRA_SOURCE_CLAIM; pass++)
        for (size_t i = 0; i < claim->n_configs; i++) {
            const struct dra_claim_config *cc = &claim->configs[i];
            if ((int)cc->source != pass)
                continue;
            snprintf(where, sizeof(where),
                     "ResourceClaim %s/%s: status.allocation.devices.config[%zu] (%s)",
                     claim->namespace ? claim->namespace : "", claim->name, i,
                     source_name(cc->source));
            if (!cc->driver)
                return error_set(c->err, -EINVAL,
                                 "%s: only opaque parameters are supported by this driver; "
                                 "give the config as opaque: {driver: %s, parameters: …}",
                                 where, DRA_DRIVER_NAME);
            if (strcmp(cc->driver, DRA_DRIVER_NAME) != 0)
                continue;
            r = dra_opaque_config_decode(cc->parameters, where, &c->configs[c->n_configs].cfg,
                                         c->err);
            if (r < 0)
                return r;
            c->configs[c->n_configs++].src = cc;
        }
    return 0;
}

static bool ours(const struct ctx *c, const struct dra_result *res)
{
    return strcmp(res->driver, DRA_DRIVER_NAME) == 0 && strcmp(res->pool, c->pool) == 0;
}

/* The refusal of a result on a device another claim holds: NVIDIA's text for a whole device
 * held whole; shares of one GPU live side by side, but a GPU held in shares is not handed
 * out whole, nor a GPU held whole in shares (the scheduler's to refuse: this is defence in
 * depth against a stale allocation). */
static int overlap_error(const struct ctx *c, const struct dra_result *res,
                         const struct dra_plan_device *held, const char *holder)
{
    bool held_shared = held->share.id[0] != '\0', shared = res->share_id != NULL;

    if (held_shared && shared)
        return 0;
    if (held_shared)
        return error_set(c->err, -EBUSY,
                         "requested device %s is held in shares by claim %s (share %s): a "
                         "whole-GPU allocation (no shareID) cannot be prepared on a GPU whose "
                         "memory is sold in shares; the scheduler should not have allocated it: "
                         "delete the pod so that the claim is allocated again",
                         res->device, holder, held->share.id);
    if (shared)
        return error_set(c->err, -EBUSY,
                         "requested device %s (share %s) is already allocated whole to "
                         "different claim %s; unprepare that claim (delete its pod) first",
                         res->device, res->share_id, holder);
    return error_set(c->err, -EBUSY,
                     "requested device %s is already allocated to different "
                     "claim %s; unprepare that claim (delete its pod) first",
                     res->device, holder);
}

/* NVIDIA's overlap check: a non-admin device of this claim that a claim prepared completely
 * (another uid) already holds; shares of one GPU excepted. */
static int check_overlap(const struct ctx *c, const struct dra_checkpoint *cp)
{
    for (size_t i = 0; cp && i < c->claim->n_results; i++) {
        const struct dra_result *res = &c->claim->results[i];
        if (!ours(c, res) || res->admin_access)
            continue;
        for (size_t k = 0; k < cp->n_claims; k++) {
            const struct dra_plan *p = cp->claims[k].plan;
            if (cp->claims[k].state != DRA_PREPARE_COMPLETED ||
                strcmp(p->claim_uid, c->claim->uid) == 0)
                continue;
            for (size_t d = 0; d < p->n_devices; d++) {
                int r = 0;
                if (!p->devices[d].admin_access &&
                    strcmp(p->devices[d].device.name, res->device) == 0)
                    r = overlap_error(c, res, &p->devices[d], p->claim_uid);
                if (r < 0)
                    return r;
            }
        }
    }
    return 0;
}

/* A result with a shareID: a share of a whole GPU, which is never prepared without its limit
 * (fail closed): the consumed memory must be there, and no sharing config may say otherwise
 * (the share's MPS settings are the consumed capacity's). */
static int apply_share(const struct ctx *c, const struct dra_result *res,
                       struct dra_plan_device *pd)
{
    uint64_t mib = res->consumed_memory_bytes >> 20;

    if (!res->share_id)
        return 0;
    if (pd->device.type != DRA_DEVICE_GPU)
        return error_set(c->err, -EINVAL,
                         "request %s: device %s is a MIG device allocated as share %s; only whole "
                         "GPUs are shared by memory (a MIG device has its own memory): check "
                         "the DeviceClass and the ResourceSlice",
                         res->request, res->device, res->share_id);
    if (strlen(res->share_id) >= sizeof(pd->share.id) || !res->share_id[0] ||
        res->share_id[strspn(res->share_id, "abcdefghijklmnopqrstuvwxyz0123456789-")])
        return error_set(c->err, -EINVAL,
                         "request %s: shareID '%s' is not a UID (lower-case letters, digits and "
                         "'-', at most %d characters)",
                         res->request, res->share_id, DRA_SHARE_ID_MAX - 1);
    if (mib == 0)
        return error_set(c->err, -EINVAL,
                         "request %s: share %s of device %s has no consumedCapacity.%s (or "
                         "less than 1Mi): a share is never prepared without its memory limit; "
                         "the device must publish capacity.%s with a requestPolicy",
                         res->request, res->share_id, res->device, DRA_CAPACITY_MEMORY,
                         DRA_CAPACITY_MEMORY);
    if (cfg_sharing_mode_shares(pd->sharing.mode))
        return error_set(c->err, -EINVAL,
                         "request %s: share %s of device %s has a %s sharing config; a share's "
                         "MPS limits come from its consumed capacity: remove the sharing config "
                         "for this request (claim or DeviceClass config)",
                         res->request, res->share_id, res->device, pd->sharing.mode->dra_name);
    str_copy(pd->share.id, res->share_id, sizeof(pd->share.id));
    /* two shares of one GPU may serve one claim: each its own CDI device */
    free(pd->cdi_device_name);
    free(pd->cdi_device_id);
    pd->cdi_device_id = NULL;
    if (asprintf(&pd->cdi_device_name, "%s-%s-%s", c->claim->uid, pd->device.name, res->share_id) <
        0)
        pd->cdi_device_name = NULL;
    if (pd->cdi_device_name &&
        asprintf(&pd->cdi_device_id, "%s=%s", DRA_CDI_KIND, pd->cdi_device_name) < 0)
        pd->cdi_device_id = NULL;
    if (!pd->cdi_device_name || !pd->cdi_device_id)
        return error_set(c->err, -ENOMEM, "out of memory");
    pd->share.memory_mib = mib;
    pd->share.thread_pct = res->consumed_compute_pct > 0 ? (int)res->consumed_compute_pct : -1;
    return 0;
}

/* Config requests name a request, or a main request for all its subrequests
 * ("<main>/<sub>"). */
static bool names_request(char *const *requests, const char *request)
{
    size_t n;

    for (size_t i = 0; requests && requests[i]; i++) {
        n = strlen(requests[i]);
        if (strcmp(requests[i], request) == 0 ||
            (strncmp(requests[i], request, n) == 0 && request[n] == '/'))
            return true;
    }
    return false;
}

static const char *kind_name(enum dra_config_kind k)
{
    return k == DRA_CONFIG_GPU ? "GpuConfig" : "MigDeviceConfig";
}

static bool kind_fits(enum dra_config_kind k, enum dra_device_type t)
{
    return (k == DRA_CONFIG_GPU) == (t == DRA_DEVICE_GPU);
}

/* The index of the config for a result, or n_configs + type for the built-in default
 * (no sharing). */
static int choose_config(const struct ctx *c, const struct dra_result *res,
                         enum dra_device_type type, size_t *ret)
{
    for (size_t i = c->n_configs; i-- > 0;) {
        const struct decoded *d = &c->configs[i];
        bool named = names_request(d->src->requests, res->request);
        if (named && !kind_fits(d->cfg.kind, type))
            return error_set(
                c->err, -EINVAL,
                "cannot apply %s to device type %s (request: %s); use %s for "
                "%s devices or narrow the config's requests",
                kind_name(d->cfg.kind), type == DRA_DEVICE_GPU ? "gpu" : "mig", res->request,
                kind_name(d->cfg.kind == DRA_CONFIG_GPU ? DRA_CONFIG_MIG : DRA_CONFIG_GPU),
                type == DRA_DEVICE_GPU ? "gpu" : "mig");
        if (named || (!d->src->requests[0] && kind_fits(d->cfg.kind, type))) {
            *ret = i;
            return 0;
        }
    }
    *ret = c->n_configs + (type == DRA_DEVICE_GPU ? 0 : 1);
    return 0;
}

static int add_device(const struct ctx *c, const struct dra_result *res,
                      const struct dra_device *dev, struct dra_plan_device *pd)
{
    char node[32];

    pd->request = str_dup(res->request);
    pd->pool = str_dup(res->pool);
    pd->device = dev->info;
    pd->admin_access = res->admin_access;
    pd->sharing.mode = cfg_sharing_mode(CFG_SHARING_NONE);
    pd->sharing.active_thread_percentage = -1;
    pd->share.thread_pct = -1;
    if (asprintf(&pd->cdi_device_name, "%s-%s", c->claim->uid, dev->info.name) < 0)
        pd->cdi_device_name = NULL;
    if (asprintf(&pd->cdi_device_id, "%s=%s-%s", DRA_CDI_KIND, c->claim->uid, dev->info.name) < 0)
        pd->cdi_device_id = NULL;
    snprintf(node, sizeof(node), "/dev/nvidia%u", dev->info.minor);
    pd->device_nodes = strv_new();
    if (!pd->request || !pd->pool || !pd->cdi_device_name || !pd->cdi_device_id ||
        !pd->device_nodes || strv_push(&pd->device_nodes, node) < 0)
        return error_set(c->err, -ENOMEM, "out of memory");
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One per-device key: a uuid of the group, or an index into the group's uuids sorted (as
 * NVIDIA's MpsPerDevicePinnedMemoryLimit.Normalize over AllocatableDevices.UUIDs()). *ret is
 * the uuid it names (borrowed from uuids). */
static int limit_key(const struct ctx *c, const char *key, const char **uuids, size_t n,
                     const char **ret)
{
    unsigned idx;

    for (size_t i = 0; i < n; i++)
        if (strcmp(uuids[i], key) == 0) {
            *ret = uuids[i];
            return 0;
        }
    if (parse_uint(key, &idx) < 0)
        return error_set(c->err, -EINVAL,
                         "invalid device: unable to parse key as an integer: %s "
                         "(sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit); key the "
                         "limits by a device UUID or its index in the request",
                         key);
    if (idx >= n)
        return error_set(c->err, -EINVAL,
                         "invalid device index: %s "
                         "(sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit); the config "
                         "applies to %zu device(s), indexed from 0 in UUID order",
                         key, n);
    *ret = uuids[idx];
    return 0;
}

/* The MPS pinned-memory limit of one device of a group: the config's default, overridden
 * by the per-device entry that names it. */
static int pinned_limit(const struct ctx *c, const struct dra_plan *plan, unsigned group,
                        const struct dra_mps_config *mps, const char *uuid, uint64_t *ret)
{
    const char **uuids = calloc(plan->n_devices + 1, sizeof(*uuids));
    const char *named = NULL;
    size_t n = 0;
    int r = 0;

    if (!uuids)
        return error_set(c->err, -ENOMEM, "out of memory");
    for (size_t d = 0; d < plan->n_devices; d++)
        if (plan->devices[d].group == group)
            uuids[n++] = plan->devices[d].device.uuid;
    qsort(uuids, n, sizeof(*uuids), cmp_str);
    for (size_t k = 0; k < mps->n_per_device && r == 0; k++) {
        r = limit_key(c, mps->per_device[k].key, uuids, n, &named);
        if (r == 0 && strcmp(named, uuid) == 0)
            *ret = mps->per_device[k].bytes;
    }
    free(uuids);
    return r;
}

static int apply_sharing(const struct ctx *c, struct dra_plan *plan, size_t i, size_t cfg_index)
{
    struct dra_plan_device *pd = &plan->devices[i];
    const struct dra_opaque_config *cfg;
    uint64_t bytes = 0;
    int r;

    if (cfg_index >= c->n_configs)
        return 0;
    cfg = &c->configs[cfg_index].cfg;
    pd->sharing.mode = cfg->mode;
    if (cfg->mode->dra_time_slice)
        pd->sharing.interval = cfg->interval;
    if (!cfg->mode->control_daemon)
        return 0;
    pd->sharing.active_thread_percentage = cfg->mps.active_thread_percentage;
    if (cfg->mps.has_pinned_limit)
        bytes = cfg->mps.pinned_limit_bytes;
    r = pinned_limit(c, plan, pd->group, &cfg->mps, pd->device.uuid, &bytes);
    if (r < 0)
        return r;
    pd->sharing.pinned_limit_mib = bytes >> 20;
    return 0;
}

/* Groups numbered in order of first use, one per config (and one per built-in default). */
static unsigned group_of(size_t *group_cfg, unsigned *n_groups, size_t cfg_index)
{
    for (unsigned g = 0; g < *n_groups; g++)
        if (group_cfg[g] == cfg_index)
            return g;
    group_cfg[*n_groups] = cfg_index;
    return (*n_groups)++;
}

static int check_device(const struct ctx *c, const struct dra_result *res,
                        const struct dra_device **ret)
{
    const struct dra_device *dev = dra_devices_find(c->devs, res->device);

    if (!dev)
        return error_set(c->err, -ENODEV,
                         "requested device is not allocatable: %s; this node (%s) publishes no "
                         "such device: its GPUs or MIG layout changed since the claim was "
                         "allocated, delete the pod so that the claim is allocated again",
                         res->device, c->pool);
    if (!dev->healthy)
        return error_set(c->err, -EIO,
                         "requested device is not healthy: %s; it was taken out of the "
                         "ResourceSlice after a GPU error, delete the pod so that another "
                         "device is allocated",
                         res->device);
    *ret = dev;
    return 0;
}

static int build_devices(const struct ctx *c, struct dra_plan *plan)
{
    size_t *cfg_of = calloc(c->claim->n_results + 1, sizeof(*cfg_of));
    size_t *group_cfg = calloc(c->claim->n_results + 1, sizeof(*group_cfg));
    int r = 0;

    plan->devices = calloc(c->claim->n_results + 1, sizeof(*plan->devices));
    if (!cfg_of || !group_cfg || !plan->devices) {
        r = error_set(c->err, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < c->claim->n_results && r == 0; i++) {
        const struct dra_result *res = &c->claim->results[i];
        const struct dra_device *dev = NULL;
        size_t n = plan->n_devices;
        if (!ours(c, res))
            continue;
        r = check_device(c, res, &dev);
        if (r == 0)
            r = choose_config(c, res, dev->info.type, &cfg_of[n]);
        if (r == 0)
            r = add_device(c, res, dev, &plan->devices[plan->n_devices++]);
        if (r == 0)
            plan->devices[n].group = group_of(group_cfg, &plan->n_groups, cfg_of[n]);
    }
    for (size_t i = 0; i < plan->n_devices && r == 0; i++)
        r = apply_sharing(c, plan, i, cfg_of[i]);
    for (size_t i = 0, k = 0; i < c->claim->n_results && r == 0; i++)
        if (ours(c, &c->claim->results[i]))
            r = apply_share(c, &c->claim->results[i], &plan->devices[k++]);
out:
    free(cfg_of);
    free(group_cfg);
    return r;
}

int dra_plan_build(const struct dra_claim *claim, const char *pool, const struct dra_devices *devs,
                   const struct dra_checkpoint *prepared, struct dra_plan **ret, struct error *err)
{
    struct ctx c = {.claim = claim, .pool = pool, .devs = devs, .err = err};
    struct dra_plan *plan = calloc(1, sizeof(*plan));
    int r;

    if (!plan)
        return error_set(err, -ENOMEM, "out of memory");
    plan->claim_uid = str_dup(claim->uid);
    plan->claim_name = str_dup(claim->name);
    plan->claim_namespace = str_dup(claim->namespace ? claim->namespace : "");
    if (!plan->claim_uid || !plan->claim_name || !plan->claim_namespace) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (!claim->allocated) {
        r = error_set(err, -EINVAL,
                      "claim not yet allocated; the scheduler allocates it before the pod "
                      "reaches the node, check the claim's status");
        goto out;
    }
    r = check_overlap(&c, prepared);
    if (r == 0)
        r = decode_configs(&c);
    if (r == 0)
        r = build_devices(&c, plan);
    if (r < 0)
        goto out;
    *ret = plan;
    plan = NULL;
out:
    free(c.configs);
    dra_plan_free(plan);
    return r;
}

static void plan_device_release(struct dra_plan_device *d)
{
    free(d->request);
    free(d->pool);
    free(d->cdi_device_id);
    free(d->cdi_device_name);
    strv_free(d->device_nodes);
}

void dra_plan_free(struct dra_plan *plan)
{
    if (!plan)
        return;
    for (size_t i = 0; i < plan->n_devices; i++)
        plan_device_release(&plan->devices[i]);
    free(plan->devices);
    free(plan->claim_uid);
    free(plan->claim_name);
    free(plan->claim_namespace);
    free(plan);
}

static bool dup_device(const struct dra_plan_device *s, struct dra_plan_device *d)
{
    *d = *s;
    d->request = str_dup(s->request);
    d->pool = str_dup(s->pool);
    d->cdi_device_id = str_dup(s->cdi_device_id);
    d->cdi_device_name = str_dup(s->cdi_device_name);
    d->device_nodes = strv_new();
    for (size_t i = 0; d->device_nodes && s->device_nodes && s->device_nodes[i]; i++)
        if (strv_push(&d->device_nodes, s->device_nodes[i]) < 0)
            return false;
    return d->request && d->pool && d->cdi_device_id && d->cdi_device_name && d->device_nodes;
}

struct dra_plan *dra_plan_dup(const struct dra_plan *plan)
{
    struct dra_plan *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->claim_uid = str_dup(plan->claim_uid);
    p->claim_name = str_dup(plan->claim_name);
    p->claim_namespace = str_dup(plan->claim_namespace);
    p->n_groups = plan->n_groups;
    p->devices = calloc(plan->n_devices + 1, sizeof(*p->devices));
    if (!p->claim_uid || !p->claim_name || !p->claim_namespace || !p->devices)
        goto fail;
    for (; p->n_devices < plan->n_devices; p->n_devices++)
        if (!dup_device(&plan->devices[p->n_devices], &p->devices[p->n_devices])) {
            p->n_devices++;
            goto fail;
        }
    return p;
fail:
    dra_plan_free(p);
    return NULL;
}

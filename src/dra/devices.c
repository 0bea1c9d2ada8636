/* SPDX-License-Identifier: Apache-2.0 */
/* devices.c: inventory -> the devices of this node's ResourceSlice, with the names,
 * attributes and capacities NVIDIA's gpu-kubelet-plugin v25.12 publishes (facts/dra.md §3),
 * plus the small formatters those depend on (quantities, semver, PCI bus ids, go-nvlib's
 * brand and architecture names). Pure. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra.h"

/* ---- formatters --------------------------------------------------------------------------- */

static int put(char *buf, size_t size, const char *fmt, ...) GS_PRINTF(3, 4);

static int put(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    return (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int dra_quantity_binary(uint64_t value, char *buf, size_t size)
{
    static const char *const suffixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    size_t s = 0;

    while (value != 0 && value % 1024 == 0 && s + 1 < GS_ARRAY_SIZE(suffixes)) {
        value /= 1024;
        s++;
    }
    return put(buf, size, "%" PRIu64 "%s", value, suffixes[s]);
}

/* One numeric component; leading zeros allowed, as strconv.ParseUint takes them. */
static int semver_part(const char **p, uint64_t *ret)
{
    const char *s = *p;
    uint64_t v = 0;

    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    for (; isdigit((unsigned char)*s); s++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -EINVAL;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *p = s;
    *ret = v;
    return 0;
}

int dra_semver(const char *version, char *buf, size_t size)
{
    uint64_t part[3] = {0, 0, 0};
    const char *p = version;

    if (!p)
        return -EINVAL;
    if (*p == 'v')
        p++;
    for (size_t i = 0; i < 3; i++) {
        if (i > 0 && *p != '.')
            break;
        if (i > 0)
            p++;
        if (semver_part(&p, &part[i]) < 0)
            return -EINVAL;
    }
    if (*p != '\0')
        return -EINVAL;
    return put(buf, size, "%" PRIu64 ".%" PRIu64 ".%" PRIu64, part[0], part[1], part[2]);
}

int dra_pci_bus_id(const char *nvml_bus_id, char *buf, size_t size)
{
    char low[INV_BUS_ID_MAX];
    size_t n = nvml_bus_id ? strlen(nvml_bus_id) : 0;

    if (n == 0 || n >= sizeof(low) || !strchr(nvml_bus_id, ':'))
        return -EINVAL;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)tolower((unsigned char)nvml_bus_id[i]);
    /* go-nvlib: strings.TrimPrefix(id, "0000") unless the id is just "0000" */
    return put(buf, size, "%s", strncmp(low, "0000", 4) == 0 ? low + 4 : low);
}

const char *dra_brand_name(const char *inv_brand)
{
    static const char *const map[][2] = {
        {"Quadro", "Quadro"},
        {"Tesla", "Tesla"},
        {"NVS", "NVS"},
        {"GRID", "Grid"},
        {"GeForce", "GeForce"},
        {"Titan", "Titan"},
        {"NVIDIA Virtual Applications", "NvidiaVApps"},
        {"NVIDIA Virtual PC", "NvidiaVPC"},
        {"NVIDIA Virtual Compute Server", "NvidiaVCS"},
        {"NVIDIA RTX Virtual Workstation", "NvidiaVWS"},
        {"NVIDIA Cloud Gaming", "NvidiaCloudGaming"},
        {"Quadro RTX", "QuadroRTX"},
        {"NVIDIA RTX", "NvidiaRTX"},
        {"NVIDIA", "Nvidia"},
        {"GeForce RTX", "GeForceRTX"},
        {"Titan RTX", "TitanRTX"},
    };

    for (size_t i = 0; inv_brand && i < GS_ARRAY_SIZE(map); i++)
        if (strcmp(inv_brand, map[i][0]) == 0)
            return map[i][1];
    return "Unknown";
}

const char *dra_architecture_name(const char *inv_arch)
{
    static const char *const map[][2] = {
        {"kepler", "Kepler"},       {"maxwell", "Maxwell"},
        {"pascal", "Pascal"},       {"volta", "Volta"},
        {"turing", "Turing"},       {"ampere", "Ampere"},
        {"hopper", "Hopper"},       {"ada-lovelace", "Ada Lovelace"},
        {"blackwell", "Blackwell"},
    };

    for (size_t i = 0; inv_arch && i < GS_ARRAY_SIZE(map); i++)
        if (strcmp(inv_arch, map[i][0]) == 0)
            return map[i][1];
    return "Unknown";
}

/* ---- building devices --------------------------------------------------------------------- */

/* The parent GPU's attributes, shared by a GPU and its MIG devices. */
struct gpu_attrs {
    char cc[32], driver[INV_VERSION_MAX], cuda[32], bus_id[INV_BUS_ID_MAX];
    const char *pcie_root; /* NULL when unknown */
    char *const *unhealthy;
    bool shareable; /* sharing.fractions selects this GPU */
};

static void attr_str(struct dra_device *d, const char *name, enum dra_attr_kind kind,
                     const char *value)
{
    struct dra_attr *a = &d->attrs[d->n_attrs++];

    str_copy(a->name, name, sizeof(a->name));
    a->kind = kind;
    str_copy(a->str, value, sizeof(a->str));
}

static int capacity(struct dra_device *d, const char *name, uint64_t value)
{
    struct dra_capacity *c;

    if (d->n_capacities >= DRA_MAX_CAPACITIES)
        return -E2BIG;
    c = &d->capacities[d->n_capacities++];
    str_copy(c->name, name, sizeof(c->name));
    return dra_quantity_binary(value, c->value, sizeof(c->value));
}

static int gpu_attrs_make(const struct inv_inventory *inv, const struct inv_gpu *g,
                          struct gpu_attrs *ga, struct error *err)
{
    char raw[32];

    snprintf(raw, sizeof(raw), "%d.%d", g->cc_major, g->cc_minor);
    if (dra_semver(raw, ga->cc, sizeof(ga->cc)) < 0)
        return error_set(err, -EINVAL, "GPU %u (%s): compute capability %s is not a version",
                         g->index, g->uuid, raw);
    if (dra_semver(inv->driver_version, ga->driver, sizeof(ga->driver)) < 0)
        return error_set(err, -EINVAL,
                         "driver version '%s' is not a version NVIDIA's DRA driver accepts "
                         "(digits and dots); check the NVIDIA driver installation",
                         inv->driver_version);
    snprintf(raw, sizeof(raw), "%d.%d", inv->cuda_version / 1000, (inv->cuda_version % 1000) / 10);
    if (inv->cuda_version < 0 || dra_semver(raw, ga->cuda, sizeof(ga->cuda)) < 0)
        return error_set(err, -EINVAL, "CUDA driver version %d is not a version",
                         inv->cuda_version);
    if (dra_pci_bus_id(g->pci_bus_id, ga->bus_id, sizeof(ga->bus_id)) < 0)
        return error_set(err, -EINVAL,
                         "GPU %u (%s): PCI bus id '%s' is not of the form "
                         "domain:bus:device.function",
                         g->index, g->uuid, g->pci_bus_id);
    return 0;
}

static void common_attrs(struct dra_device *d, const struct inv_gpu *g, const struct gpu_attrs *ga)
{
    attr_str(d, "productName", DRA_ATTR_STRING, g->name);
    attr_str(d, "brand", DRA_ATTR_STRING, dra_brand_name(g->brand));
    attr_str(d, "architecture", DRA_ATTR_STRING, dra_architecture_name(g->architecture));
    attr_str(d, "cudaComputeCapability", DRA_ATTR_VERSION, ga->cc);
    attr_str(d, "driverVersion", DRA_ATTR_VERSION, ga->driver);
    attr_str(d, "cudaDriverVersion", DRA_ATTR_VERSION, ga->cuda);
    attr_str(d, DRA_PCI_BUS_ID_ATTR, DRA_ATTR_STRING, ga->bus_id);
    if (ga->pcie_root)
        attr_str(d, DRA_PCIE_ROOT_ATTR, DRA_ATTR_STRING, ga->pcie_root);
}

static bool listed(char *const *uuids, const char *uuid)
{
    return uuids && strv_contains(uuids, uuid);
}

/* ---- fractions: which GPUs are shareable, and their capacities ---------------------------- */

/* Does entry r select GPU i (whose resource name is `name`)? `devices: N` takes the first N
 * GPUs of that name not in MIG mode, in index order. */
static bool entry_selects(const struct cfg_replicated_resource *r, const struct inv_inventory *inv,
                          size_t i, const struct cfg_config *cfg)
{
    const struct inv_gpu *g = &inv->gpus[i];
    unsigned before = 0;

    switch (r->devices_kind) {
    case CFG_DEVICES_ALL:
        return true;
    case CFG_DEVICES_COUNT:
        for (size_t k = 0; k < i; k++)
            before += !inv->gpus[k].mig_enabled &&
                      strcmp(cfg_gpu_resource_name(cfg, inv->gpus[k].name), r->name) == 0;
        return before < r->devices_count;
    case CFG_DEVICES_LIST:
        for (size_t k = 0; k < r->n_devices; k++) {
            const struct cfg_device_ref *ref = &r->devices[k];
            if ((ref->kind == CFG_DEVREF_GPU_INDEX && ref->gpu_index == g->index) ||
                (ref->kind == CFG_DEVREF_GPU_UUID && ref->uuid && strcmp(ref->uuid, g->uuid) == 0))
                return true;
        }
        return false;
    }
    return false;
}

/* GPU i is shareable: sharing.fractions names its resource and selects it, it is not in MIG
 * mode (a MIG device is a fraction already), and it has room for one step above the smallest
 * share (the API's min + step <= capacity). */
static bool gpu_shareable(const struct cfg_config *cfg, const struct inv_inventory *inv, size_t i)
{
    const struct inv_gpu *g = &inv->gpus[i];
    const char *name;

    if (!cfg || !cfg_sharing_mode(cfg->sharing_strategy)->dra_shareable || g->mig_enabled ||
        g->memory_mib < DRA_SHARE_MIN_MEMORY_MIB + DRA_SHARE_MEMORY_STEP_MIB)
        return false;
    name = cfg_gpu_resource_name(cfg, g->name);
    for (size_t k = 0; k < cfg->sharing.n_resources; k++) {
        const struct cfg_replicated_resource *r = &cfg->sharing.resources[k];
        if (r->name && strcmp(r->name, name) == 0 && entry_selects(r, inv, i, cfg))
            return true;
    }
    return false;
}

int dra_config_check(const struct cfg_config *cfg, struct error *err)
{
    const struct cfg_sharing_mode *m = cfg ? cfg_sharing_mode(cfg->sharing_strategy) : NULL;

    if (!m || !cfg_sharing_mode_shares(m) || m->dra_shareable)
        return 0;
    return error_set(err, -EINVAL,
                     "%s: sharing.%s is the device plugin's; under DRA a claim asks for "
                     "time-slicing or MPS with its GpuConfig: use sharing.fractions or no "
                     "sharing block",
                     cfg->source_path ? cfg->source_path : "config", m->config_key);
}

/* The consumable capacities of a shareable GPU (dra.h: DRA_CAPACITY_*). Called after the
 * plain capacity memory was added. */
static int share_capacities(struct dra_device *d, const struct inv_gpu *g)
{
    struct dra_capacity *mem = &d->capacities[d->n_capacities - 1], *cpu;
    int r = 0;

    mem->has_policy = true;
    r |= dra_quantity_binary(g->memory_mib << 20, mem->policy.default_value,
                             sizeof(mem->policy.default_value));
    r |= dra_quantity_binary((uint64_t)DRA_SHARE_MIN_MEMORY_MIB << 20, mem->policy.min,
                             sizeof(mem->policy.min));
    r |= dra_quantity_binary((uint64_t)DRA_SHARE_MEMORY_STEP_MIB << 20, mem->policy.step,
                             sizeof(mem->policy.step));
    r |= capacity(d, DRA_CAPACITY_COMPUTE, DRA_COMPUTE_PERCENT_TOTAL);
    if (r < 0)
        return -EINVAL;
    cpu = &d->capacities[d->n_capacities - 1];
    cpu->has_policy = true;
    r |= dra_quantity_binary(0, cpu->policy.default_value, sizeof(cpu->policy.default_value));
    r |= dra_quantity_binary(0, cpu->policy.min, sizeof(cpu->policy.min));
    r |= dra_quantity_binary(DRA_COMPUTE_PERCENT_TOTAL, cpu->policy.max, sizeof(cpu->policy.max));
    r |= dra_quantity_binary(1, cpu->policy.step, sizeof(cpu->policy.step));
    d->shareable = true;
    return r < 0 ? -EINVAL : 0;
}

static int gpu_device(const struct inv_gpu *g, const struct gpu_attrs *ga, struct dra_device *d)
{
    struct dra_device_info *i = &d->info;

    snprintf(i->name, sizeof(i->name), "gpu-%u", g->minor);
    i->type = DRA_DEVICE_GPU;
    str_copy(i->uuid, g->uuid, sizeof(i->uuid));
    str_copy(i->parent_uuid, g->uuid, sizeof(i->parent_uuid));
    i->gpu_index = g->index;
    i->minor = g->minor;
    i->mig_index = -1;
    i->gi_id = i->ci_id = INV_ID_NONE;
    d->healthy = !listed(ga->unhealthy, g->uuid);
    attr_str(d, "type", DRA_ATTR_STRING, "gpu");
    attr_str(d, "uuid", DRA_ATTR_STRING, g->uuid);
    common_attrs(d, g, ga);
    /* NVML's memory query NOT_SUPPORTED (unified memory, GB10): NVIDIA's v0.4.0 publishes
     * the GPU with no capacity at all (3f2a9d48); never shareable (gpu_shareable) */
    if (g->memory_unknown)
        return 0;
    if (capacity(d, DRA_CAPACITY_MEMORY, g->memory_mib << 20) < 0)
        return -EINVAL;
    return ga->shareable ? share_capacities(d, g) : 0;
}

/* NVIDIA's canonical MIG name: the profile without dots, made RFC 1123 compliant
 * ("1g.10gb+me" -> "1g10gb-me"), then the GI profile id and the placement start. */
static void mig_name(const struct inv_gpu *g, const struct inv_mig_device *m, char *buf,
                     size_t size)
{
    char p[INV_PROFILE_MAX];
    size_t n = 0;

    for (const char *s = m->profile; *s && n + 1 < sizeof(p); s++) {
        char c = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
        bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
        if (c != '.')
            p[n++] = keep ? c : '-';
    }
    while (n > 0 && p[n - 1] == '-')
        n--;
    p[n] = '\0';
    snprintf(buf, size, "gpu-%u-mig-%s-%u-%u", g->minor, p[0] == '-' ? p + 1 : p, m->gi_profile_id,
             m->placement_start);
}

static int mig_capacities(struct dra_device *d, const struct inv_mig_device *m)
{
    char name[DRA_ATTR_NAME_MAX];
    int r = 0;

    r |= capacity(d, "multiprocessors", m->gi_profile.multiprocessors);
    r |= capacity(d, "copyEngines", m->gi_profile.copy_engines);
    r |= capacity(d, "decoders", m->gi_profile.decoders);
    r |= capacity(d, "encoders", m->gi_profile.encoders);
    r |= capacity(d, "jpegEngines", m->gi_profile.jpeg_engines);
    r |= capacity(d, "ofaEngines", m->gi_profile.ofa_engines);
    r |= capacity(d, "memory", m->gi_profile.memory_mib << 20);
    for (unsigned s = m->placement_start; r == 0 && s < m->placement_start + m->placement_size;
         s++) {
        snprintf(name, sizeof(name), "memorySlice%u", s);
        r = capacity(d, name, 1);
    }
    return r < 0 ? -E2BIG : 0;
}

static int mig_device(const struct inv_gpu *g, const struct inv_mig_device *m,
                      const struct gpu_attrs *ga, struct dra_device *d, struct error *err)
{
    struct dra_device_info *i = &d->info;

    mig_name(g, m, i->name, sizeof(i->name));
    i->type = DRA_DEVICE_MIG;
    str_copy(i->uuid, m->uuid, sizeof(i->uuid));
    str_copy(i->parent_uuid, g->uuid, sizeof(i->parent_uuid));
    i->gpu_index = g->index;
    i->minor = g->minor;
    i->mig_index = (int)m->index;
    i->gi_id = m->gi_id;
    i->ci_id = m->ci_id;
    str_copy(i->profile, m->profile, sizeof(i->profile));
    d->healthy = !listed(ga->unhealthy, m->uuid) && !listed(ga->unhealthy, g->uuid);
    attr_str(d, "type", DRA_ATTR_STRING, "mig");
    attr_str(d, "uuid", DRA_ATTR_STRING, m->uuid);
    attr_str(d, "parentUUID", DRA_ATTR_STRING, g->uuid);
    attr_str(d, "profile", DRA_ATTR_STRING, m->profile);
    common_attrs(d, g, ga);
    if (mig_capacities(d, m) < 0)
        return error_set(err, -EINVAL,
                         "GPU %u (%s): MIG device %s covers memory slices %u..%u, more than a "
                         "slice can list",
                         g->index, g->uuid, m->uuid, m->placement_start,
                         m->placement_start + m->placement_size - 1);
    return 0;
}

static size_t count_devices(const struct inv_inventory *inv)
{
    size_t n = 0;

    for (size_t i = 0; i < inv->n_gpus; i++)
        n += inv->gpus[i].mig_enabled ? inv->gpus[i].n_migs : 1;
    return n;
}

static int gpu_devices(const struct inv_inventory *inv, size_t i,
                       const struct dra_devices_options *opts, struct dra_devices *devs,
                       struct error *err)
{
    const struct inv_gpu *g = &inv->gpus[i];
    struct gpu_attrs ga = {0};
    int r = gpu_attrs_make(inv, g, &ga, err);

    if (r < 0)
        return r;
    ga.unhealthy = opts ? opts->unhealthy_uuids : NULL;
    if (opts && opts->pcie_roots && opts->pcie_roots[i] && *opts->pcie_roots[i])
        ga.pcie_root = opts->pcie_roots[i];
    ga.shareable = gpu_shareable(opts ? opts->cfg : NULL, inv, i);
    if (!g->mig_enabled)
        return gpu_device(g, &ga, &devs->devices[devs->n_devices++]) < 0
                   ? error_set(err, -EINVAL, "GPU %u (%s): memory does not fit a quantity",
                               g->index, g->uuid)
                   : 0;
    for (size_t k = 0; k < g->n_migs; k++) {
        r = mig_device(g, &g->migs[k], &ga, &devs->devices[devs->n_devices++], err);
        if (r < 0)
            return r;
    }
    return 0;
}

int dra_devices_build(const struct inv_inventory *inv, const struct dra_devices_options *opts,
                      struct dra_devices **ret, struct error *err)
{
    struct dra_devices *devs = calloc(1, sizeof(*devs));
    size_t n = count_devices(inv);
    int r = 0;

    if (!devs)
        return error_set(err, -ENOMEM, "out of memory");
    devs->devices = calloc(n ? n : 1, sizeof(*devs->devices));
    if (!devs->devices) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < inv->n_gpus; i++) {
        r = gpu_devices(inv, i, opts, devs, err);
        if (r < 0)
            goto out;
    }
    *ret = devs;
    devs = NULL;
out:
    dra_devices_free(devs);
    return r;
}

void dra_devices_free(struct dra_devices *devs)
{
    if (!devs)
        return;
    free(devs->devices);
    free(devs);
}

const struct dra_device *dra_devices_find(const struct dra_devices *devs, const char *name)
{
    for (size_t i = 0; devs && name && i < devs->n_devices; i++)
        if (strcmp(devs->devices[i].info.name, name) == 0)
            return &devs->devices[i];
    return NULL;
}

const struct dra_attr *dra_device_attr(const struct dra_device *d, const char *name)
{
    for (size_t i = 0; d && name && i < d->n_attrs; i++)
        if (strcmp(d->attrs[i].name, name) == 0)
            return &d->attrs[i];
    return NULL;
}

const struct dra_capacity *dra_device_capacity(const struct dra_device *d, const char *name)
{
    for (size_t i = 0; d && name && i < d->n_capacities; i++)
        if (strcmp(d->capacities[i].name, name) == 0)
            return &d->capacities[i];
    return NULL;
}

static bool same_policy(const struct dra_request_policy *a, const struct dra_request_policy *b)
{
    return strcmp(a->default_value, b->default_value) == 0 && strcmp(a->min, b->min) == 0 &&
           strcmp(a->max, b->max) == 0 && strcmp(a->step, b->step) == 0;
}

static bool same_device(const struct dra_device *a, const struct dra_device *b)
{
    if (strcmp(a->info.name, b->info.name) != 0 || a->n_attrs != b->n_attrs ||
        a->n_capacities != b->n_capacities)
        return false;
    for (size_t i = 0; i < a->n_attrs; i++) {
        const struct dra_attr *x = &a->attrs[i], *y = &b->attrs[i];
        if (strcmp(x->name, y->name) != 0 || x->kind != y->kind || strcmp(x->str, y->str) != 0 ||
            x->i != y->i || x->b != y->b)
            return false;
    }
    for (size_t i = 0; i < a->n_capacities; i++) {
        const struct dra_capacity *x = &a->capacities[i], *y = &b->capacities[i];
        if (strcmp(x->name, y->name) != 0 || strcmp(x->value, y->value) != 0 ||
            x->has_policy != y->has_policy || !same_policy(&x->policy, &y->policy))
            return false;
    }
    return a->shareable == b->shareable;
}

/* The next healthy device from *i on, or NULL. */
static const struct dra_device *next_published(const struct dra_devices *d, size_t *i)
{
    for (; d && *i < d->n_devices; (*i)++)
        if (d->devices[*i].healthy)
            return &d->devices[(*i)++];
    return NULL;
}

bool dra_devices_same_slice(const struct dra_devices *a, const struct dra_devices *b)
{
    size_t i = 0, j = 0;

    for (;;) {
        const struct dra_device *x = next_published(a, &i);
        const struct dra_device *y = next_published(b, &j);
        if (!x || !y)
            return !x && !y;
        if (!same_device(x, y))
            return false;
    }
}

struct dra_devices *dra_devices_dup(const struct dra_devices *devs)
{
    struct dra_devices *d = calloc(1, sizeof(*d));

    if (!d)
        return NULL;
    if (devs && devs->n_devices) {
        d->devices = malloc(devs->n_devices * sizeof(*d->devices));
        if (!d->devices) {
            free(d);
            return NULL;
        }
        memcpy(d->devices, devs->devices, devs->n_devices * sizeof(*d->devices));
        d->n_devices = devs->n_devices;
    }
    return d;
}

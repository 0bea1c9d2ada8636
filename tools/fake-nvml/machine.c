/* SPDX-License-Identifier: Apache-2.0 */
/* machine.c: reads a machine description (FAKE_NVML_MACHINE, YAML) into struct
 * fake_machine — GPUs from the catalog or fully described, processes, initial MIG layout,
 * NVLink topology. Every error names file:line. No NVML state, no printing: nvmlInit_v2
 * decides what to do with the error. */
#include <errno.h>
#include <libfyaml.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

struct parse {
    const char *path;
    struct error *err;
};

uint64_t fake_hash(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    if (h == 0)
        h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

void fake_uuid_format(char *buf, size_t size, const char *prefix, uint64_t a, uint64_t b)
{
    snprintf(buf, size, "%s%08x-%04x-%04x-%04x-%012llx", prefix, (unsigned)(a >> 32),
             (unsigned)((a >> 16) & 0xffff), (unsigned)(a & 0xffff), (unsigned)(b >> 48),
             (unsigned long long)(b & 0xffffffffffffULL));
}

static int node_line(struct fy_node *n)
{
    void *it = NULL;

    if (!n)
        return 0;
    switch (fy_node_get_type(n)) {
    case FYNT_SCALAR: {
        struct fy_token *t = fy_node_get_scalar_token(n);
        const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
        return m ? m->line + 1 : 0;
    }
    case FYNT_MAPPING: {
        struct fy_node_pair *pair = fy_node_mapping_iterate(n, &it);
        return pair ? node_line(fy_node_pair_key(pair)) : 0;
    }
    case FYNT_SEQUENCE:
        return node_line(fy_node_sequence_iterate(n, &it));
    }
    return 0;
}

static int perr(const struct parse *ps, struct fy_node *n, const char *fmt, ...) GS_PRINTF(3, 4);
static int perr(const struct parse *ps, struct fy_node *n, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return error_set(ps->err, -EINVAL, "%s:%d: %s", ps->path, node_line(n), msg);
}

static int want(const struct parse *ps, struct fy_node *n, enum fy_node_type t, const char *what)
{
    static const char *const names[] = {"a scalar", "a list", "a mapping"};

    if (fy_node_get_type(n) != t)
        return perr(ps, n, "%s must be %s", what, names[t]);
    return 0;
}

/* Rejects keys outside `allowed`, with a "did you mean" hint. */
static int check_keys(const struct parse *ps, struct fy_node *map, const char *const *allowed,
                      const char *where)
{
    struct fy_node_pair *pair;
    void *it = NULL;

    while ((pair = fy_node_mapping_iterate(map, &it))) {
        const char *key = fy_node_get_scalar0(fy_node_pair_key(pair));
        const char *best = NULL;
        unsigned best_d = 3;
        bool ok = false;

        for (size_t i = 0; key && allowed[i] && !ok; i++) {
            unsigned d = str_distance(key, allowed[i]);
            ok = d == 0;
            if (d < best_d) {
                best_d = d;
                best = allowed[i];
            }
        }
        if (!ok)
            return perr(ps, fy_node_pair_key(pair), "unknown key '%s' in %s%s%s%s", key ? key : "?",
                        where, best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
    }
    return 0;
}

static struct fy_node *get(struct fy_node *map, const char *key)
{
    return fy_node_mapping_lookup_by_string(map, key, FY_NT);
}

static int get_str(const struct parse *ps, struct fy_node *map, const char *key, const char **ret)
{
    struct fy_node *n = get(map, key);
    int r;

    if (!n)
        return 0;
    r = want(ps, n, FYNT_SCALAR, key);
    if (r < 0)
        return r;
    *ret = fy_node_get_scalar0(n);
    return 0;
}

static int node_u64(const struct parse *ps, struct fy_node *n, const char *what, uint64_t max,
                    uint64_t *ret)
{
    const char *s;
    uint64_t v = 0;
    int r = want(ps, n, FYNT_SCALAR, what);

    if (r < 0)
        return r;
    s = fy_node_get_scalar0(n);
    if (s && (str_startswith(s, "0x") || str_startswith(s, "0X")) && s[2]) {
        for (const char *p = s + 2; *p; p++) {
            unsigned d = (*p >= '0' && *p <= '9')   ? (unsigned)(*p - '0')
                         : (*p >= 'a' && *p <= 'f') ? (unsigned)(*p - 'a' + 10)
                         : (*p >= 'A' && *p <= 'F') ? (unsigned)(*p - 'A' + 10)
                                                    : 16;
            if (d > 15 || v > (UINT64_MAX >> 4))
                return perr(ps, n, "%s: '%s' is not a number", what, s);
            v = v << 4 | d;
        }
    } else if (!s || parse_uint64(s, &v) < 0) {
        return perr(ps, n, "%s: '%s' is not a non-negative integer", what, s ? s : "");
    }
    if (v > max)
        return perr(ps, n, "%s: %llu is larger than %llu", what, (unsigned long long)v,
                    (unsigned long long)max);
    *ret = v;
    return 0;
}

/* A boolean: true or false, plain. */
static int get_bool(const struct parse *ps, struct fy_node *map, const char *key, bool *ret)
{
    const char *v = NULL;
    int r = get_str(ps, map, key, &v);
    if (r < 0 || !v)
        return r;
    if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
        return perr(ps, get(map, key), "%s must be true or false", key);
    *ret = strcmp(v, "true") == 0;
    return 0;
}

static int get_u64(const struct parse *ps, struct fy_node *map, const char *key, uint64_t max,
                   uint64_t *ret)
{
    struct fy_node *n = get(map, key);
    return n ? node_u64(ps, n, key, max, ret) : 0;
}

static int get_uint(const struct parse *ps, struct fy_node *map, const char *key, unsigned max,
                    unsigned *ret)
{
    uint64_t v = *ret;
    int r = get_u64(ps, map, key, max, &v);
    if (r == 0)
        *ret = (unsigned)v;
    return r;
}

static const struct {
    const char *name;
    unsigned arch;
} arch_names[] = {
    {"kepler", NVML_DEVICE_ARCH_KEPLER},
    {"maxwell", NVML_DEVICE_ARCH_MAXWELL},
    {"pascal", NVML_DEVICE_ARCH_PASCAL},
    {"volta", NVML_DEVICE_ARCH_VOLTA},
    {"turing", NVML_DEVICE_ARCH_TURING},
    {"ampere", NVML_DEVICE_ARCH_AMPERE},
    {"ada", NVML_DEVICE_ARCH_ADA},
    {"hopper", NVML_DEVICE_ARCH_HOPPER},
    {"blackwell", NVML_DEVICE_ARCH_BLACKWELL},
};

/* An unknown model: every field must be given (name, memory, capability, architecture). */
static int parse_unknown_model(const struct parse *ps, struct fy_node *e, const char *name,
                               struct fake_model *m)
{
    const char *cc = NULL, *arch = NULL;
    unsigned major = 0, minor = 0;
    int r;

    memset(m, 0, sizeof(*m));
    m->name = name;
    m->brand = NVML_BRAND_NVIDIA;
    m->pci_device_id = 0x000010DE;
    r = get_str(ps, e, "compute_capability", &cc);
    if (r == 0)
        r = get_str(ps, e, "architecture", &arch);
    if (r < 0)
        return r;
    if ((!get(e, "memory_mib") && !get(e, "unified_memory")) || !cc || !arch)
        return perr(ps, e,
                    "model '%s' is not in the catalog: give memory_mib (or unified_memory), "
                    "compute_capability and architecture (see docs/fake-nvml.md for the known "
                    "models)",
                    name);
    if (sscanf(cc, "%u.%u", &major, &minor) != 2 || major > 20 || minor > 9)
        return perr(ps, get(e, "compute_capability"),
                    "compute_capability '%s' must look like '8.9'", cc);
    m->cc_major = (int)major;
    m->cc_minor = (int)minor;
    m->arch = NVML_DEVICE_ARCH_UNKNOWN;
    for (size_t i = 0; i < GS_ARRAY_SIZE(arch_names); i++)
        if (strcasecmp(arch, arch_names[i].name) == 0)
            m->arch = arch_names[i].arch;
    if (m->arch == NVML_DEVICE_ARCH_UNKNOWN)
        return perr(ps, get(e, "architecture"), "architecture '%s' is not one of kepler..blackwell",
                    arch);
    r = get_uint(ps, e, "brand", NVML_BRAND_COUNT - 1, &m->brand);
    if (r == 0)
        r = get_uint(ps, e, "pci_device_id", UINT32_MAX, &m->pci_device_id);
    if (r == 0)
        r = get_uint(ps, e, "nvlinks", NVML_NVLINK_MAX_LINKS, &m->nvlinks);
    if (r == 0)
        r = get_uint(ps, e, "multiprocessors", 100000, &m->sms);
    return r;
}

static int parse_processes(const struct parse *ps, struct fy_node *seq, struct fake_gpu *g)
{
    static const char *const keys[] = {"pid", "used_mib", "gi", "ci", "sm_util", NULL};
    struct fy_node *item;
    void *it = NULL;
    int r = want(ps, seq, FYNT_SEQUENCE, "processes");

    while (r == 0 && (item = fy_node_sequence_iterate(seq, &it))) {
        struct fake_process *p = &g->procs[g->n_procs];

        if (g->n_procs >= FAKE_MAX_PROCS)
            return perr(ps, item, "more than %d processes on one GPU", FAKE_MAX_PROCS);
        r = want(ps, item, FYNT_MAPPING, "a process");
        if (r == 0)
            r = check_keys(ps, item, keys, "a process");
        if (r < 0)
            return r;
        if (!get(item, "pid") || !get(item, "used_mib"))
            return perr(ps, item, "a process needs pid and used_mib");
        p->gi_id = p->ci_id = INVALID_GPU_INSTANCE_ID;
        r = get_uint(ps, item, "pid", INT32_MAX, &p->pid);
        if (r == 0)
            r = get_u64(ps, item, "used_mib", 1u << 24, &p->used_mib);
        if (r == 0)
            r = get_uint(ps, item, "gi", FAKE_MAX_GI, &p->gi_id);
        if (r == 0)
            r = get_uint(ps, item, "ci", FAKE_MAX_CI - 1, &p->ci_id);
        if (r == 0)
            r = get_uint(ps, item, "sm_util", 100, &p->sm_util);
        if (r == 0 &&
            (p->gi_id == INVALID_GPU_INSTANCE_ID) != (p->ci_id == INVALID_GPU_INSTANCE_ID))
            r = perr(ps, item, "a process in a MIG device needs both gi and ci");
        g->n_procs++;
    }
    return r;
}

/* Parses mig: into requests; they are applied per GPU by apply_mig(). */
static int parse_mig(const struct parse *ps, struct fy_node *mig, const struct fake_model *m,
                     bool *ret_enabled, struct fake_mig_request *reqs, size_t *n_reqs,
                     struct fy_node **req_nodes)
{
    static const char *const keys[] = {"enabled", "instances", NULL};
    static const char *const ikeys[] = {"profile", "start", NULL};
    struct fy_node *en, *inst, *item;
    const char *s;
    void *it = NULL;
    int r = want(ps, mig, FYNT_MAPPING, "mig");

    if (r == 0)
        r = check_keys(ps, mig, keys, "mig");
    if (r < 0)
        return r;
    en = get(mig, "enabled");
    if (en) {
        r = want(ps, en, FYNT_SCALAR, "enabled");
        if (r < 0)
            return r;
        s = fy_node_get_scalar0(en);
        if (!s || parse_bool(s, ret_enabled) < 0)
            return perr(ps, en, "enabled: '%s' is not true or false", s ? s : "");
    }
    if (m->mem_slices == 0 && *ret_enabled)
        return perr(ps, mig, "model '%s' is not MIG capable", m->name);
    inst = get(mig, "instances");
    if (!inst)
        return 0;
    if (!*ret_enabled)
        return perr(ps, inst, "mig instances given but mig is not enabled");
    r = want(ps, inst, FYNT_SEQUENCE, "instances");
    while (r == 0 && (item = fy_node_sequence_iterate(inst, &it))) {
        const char *name = NULL;
        unsigned start = FAKE_NO_START;

        if (*n_reqs >= FAKE_MAX_GI - 1)
            return perr(ps, item, "more than %d MIG instances on one GPU", FAKE_MAX_GI - 1);
        r = want(ps, item, FYNT_MAPPING, "a MIG instance");
        if (r == 0)
            r = check_keys(ps, item, ikeys, "a MIG instance");
        if (r == 0)
            r = get_str(ps, item, "profile", &name);
        if (r == 0)
            r = get_uint(ps, item, "start", 31, &start);
        if (r < 0)
            return r;
        if (!name || !fake_profile_by_name(m, name))
            return perr(ps, item, "profile '%s' is not a GPU-instance profile of %s",
                        name ? name : "(missing)", m->name);
        reqs[*n_reqs].profile = fake_profile_by_name(m, name);
        reqs[*n_reqs].start = start;
        req_nodes[(*n_reqs)++] = item;
    }
    return r;
}

static int apply_mig(const struct parse *ps, struct fake_gpu *g,
                     const struct fake_mig_request *reqs, size_t n, struct fy_node **nodes)
{
    for (size_t i = 0; i < n; i++) {
        /* The catalog pointer is stable; g->model.profiles is the same table. */
        struct fake_gi *gi = NULL;
        struct fake_ci *ci = NULL;
        nvmlReturn_t rc = fake_gi_create(g, reqs[i].profile, reqs[i].start, &gi);

        if (rc == NVML_SUCCESS)
            rc = fake_ci_create(gi, fake_ci_full_index(gi), FAKE_NO_START, &ci);
        if (rc != NVML_SUCCESS) {
            char at[32] = "";
            if (reqs[i].start != FAKE_NO_START)
                snprintf(at, sizeof(at), " at start %u", reqs[i].start);
            return perr(ps, nodes[i], "cannot create MIG instance %s%s on GPU %u: %s",
                        reqs[i].profile->name, at, g->index, nvmlErrorString(rc));
        }
    }
    for (size_t i = 0; i < g->n_procs; i++) {
        const struct fake_process *p = &g->procs[i];
        const struct fake_gi *gi =
            p->gi_id >= 1 && p->gi_id <= FAKE_MAX_GI ? &g->gis[p->gi_id - 1] : NULL;
        if (p->gi_id != INVALID_GPU_INSTANCE_ID &&
            (!gi || !gi->in_use || !gi->cis[p->ci_id].in_use))
            return error_set(ps->err, -EINVAL,
                             "%s: process %u on GPU %u names MIG device gi %u ci %u, which "
                             "does not exist (instances get ids 1, 2, ... in order)",
                             ps->path, p->pid, g->index, p->gi_id, p->ci_id);
    }
    return 0;
}

/* Fields that describe a model outside the catalog. */
static const char *const model_only_keys[] = {
    "compute_capability", "architecture", "brand", "pci_device_id", "nvlinks", "multiprocessors"};

struct entry_ctx {
    size_t entry;
    struct fake_machine *m;
};

/* fabric: {cluster_uuid: "<uuid>", clique_id: N}: a GPU attached to an NVLink fabric whose
 * registration completed (what nvmlDeviceGetGpuFabricInfo reports on GB200/H100 NVL). */
static int parse_fabric(const struct parse *ps, struct fy_node *f, unsigned char cluster[16],
                        unsigned *clique)
{
    static const char *const keys[] = {"cluster_uuid", "clique_id", NULL};
    const char *u = NULL;
    size_t n = 0;
    int r = want(ps, f, FYNT_MAPPING, "fabric");

    if (r == 0)
        r = check_keys(ps, f, keys, "fabric");
    if (r == 0)
        r = get_str(ps, f, "cluster_uuid", &u);
    if (r == 0)
        r = get_uint(ps, f, "clique_id", 0x7fffffff, clique);
    if (r < 0)
        return r;
    for (const char *c = u; c && *c && n < 32; c++) {
        int v = *c >= '0' && *c <= '9'   ? *c - '0'
                : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
                : *c >= 'A' && *c <= 'F' ? *c - 'A' + 10
                                         : -1;
        if (*c == '-')
            continue;
        if (v < 0)
            break;
        cluster[n / 2] = (unsigned char)(cluster[n / 2] << 4 | v);
        n++;
    }
    if (!u || n != 32 || strlen(u) != 36)
        return perr(ps, get(f, "cluster_uuid") ? get(f, "cluster_uuid") : f,
                    "fabric needs cluster_uuid: a UUID like "
                    "\"3f2f8e1a-5b7c-4d3e-9a1b-2c3d4e5f6a7b\"");
    return 0;
}

/* telemetry: {gpu_util, mem_util, temperature_c, power_w, ... (fake_telemetry_keys)}: what
 * the NVML samplers read on every GPU of the entry. */
static int parse_telemetry(const struct parse *ps, struct fy_node *t, struct fake_telemetry *ret)
{
    const char *keys[32];
    size_t n = 0;
    int r = want(ps, t, FYNT_MAPPING, "telemetry");

    for (; fake_telemetry_keys[n].name && n + 1 < GS_ARRAY_SIZE(keys); n++)
        keys[n] = fake_telemetry_keys[n].name;
    keys[n] = NULL;
    if (r == 0)
        r = check_keys(ps, t, keys, "telemetry");
    *ret = fake_telemetry_defaults;
    for (size_t k = 0; r == 0 && k < n; k++) {
        uint64_t v;
        struct fy_node *node = get(t, keys[k]);
        if (!node)
            continue;
        r = node_u64(ps, node, keys[k], fake_telemetry_keys[k].max, &v);
        if (r == 0)
            (void)fake_telemetry_set(ret, keys[k], v); /* in range: node_u64 checked it */
    }
    return r;
}

static int parse_gpu_entry(const struct parse *ps, struct fy_node *e, struct entry_ctx *ec)
{
    static const char *const keys[] = {"model",
                                       "count",
                                       "memory_mib",
                                       "numa_node",
                                       "processes",
                                       "mig",
                                       "compute_capability",
                                       "architecture",
                                       "brand",
                                       "pci_device_id",
                                       "nvlinks",
                                       "multiprocessors",
                                       "fabric",
                                       "mig_needs_reset",
                                       "unified_memory",
                                       "telemetry",
                                       NULL};
    struct fake_mig_request reqs[FAKE_MAX_GI];
    struct fy_node *req_nodes[FAKE_MAX_GI];
    struct fake_model model;
    const struct fake_model *known;
    const char *name = NULL;
    unsigned count = 1, numa = 0, clique = 0;
    unsigned char cluster[16] = {0};
    bool fabric = false, needs_reset = false, unified = false;
    struct fake_telemetry tele = {0};
    bool has_tele = false;
    size_t n_reqs = 0;
    bool mig_enabled = false;
    int r = want(ps, e, FYNT_MAPPING, "a gpus entry");

    if (r == 0)
        r = check_keys(ps, e, keys, "a gpus entry");
    if (r == 0)
        r = get_str(ps, e, "model", &name);
    if (r < 0)
        return r;
    if (!name || !*name)
        return perr(ps, e, "a gpus entry needs a model");
    if (strlen(name) >= NVML_DEVICE_NAME_V2_BUFFER_SIZE - 16)
        return perr(ps, get(e, "model"), "model name is longer than %d characters",
                    NVML_DEVICE_NAME_V2_BUFFER_SIZE - 17);
    known = fake_catalog_find(name);
    for (size_t i = 0; known && i < GS_ARRAY_SIZE(model_only_keys); i++)
        if (get(e, model_only_keys[i]))
            return perr(ps, get(e, model_only_keys[i]),
                        "'%s' is only for models outside the catalog; '%s' is known "
                        "(only memory_mib may override it)",
                        model_only_keys[i], name);
    if (known)
        model = *known;
    else {
        r = parse_unknown_model(ps, e, name, &model);
        if (r < 0)
            return r;
    }
    r = get_u64(ps, e, "memory_mib", 1u << 24, &model.memory_mib);
    if (r == 0)
        r = get_uint(ps, e, "count", FAKE_MAX_ENTRY_COUNT, &count);
    if (r == 0)
        r = get_uint(ps, e, "numa_node", 1023, &numa);
    if (r == 0 && get(e, "mig"))
        r = parse_mig(ps, get(e, "mig"), &model, &mig_enabled, reqs, &n_reqs, req_nodes);
    if (r == 0 && get(e, "telemetry")) {
        r = parse_telemetry(ps, get(e, "telemetry"), &tele);
        has_tele = r == 0;
    }
    if (r == 0 && get(e, "mig_needs_reset"))
        r = get_bool(ps, e, "mig_needs_reset", &needs_reset);
    if (r == 0 && get(e, "fabric")) {
        r = parse_fabric(ps, get(e, "fabric"), cluster, &clique);
        fabric = r == 0;
    }
    if (r == 0 && get(e, "unified_memory"))
        r = get_bool(ps, e, "unified_memory", &unified);
    if (r < 0)
        return r;
    if (unified && model.mem_slices)
        return perr(ps, get(e, "unified_memory"),
                    "unified_memory: '%s' is MIG capable; unified-memory GPUs (GB10) are not",
                    name);
    if (count == 0 || (model.memory_mib == 0 && !unified))
        return perr(ps, e, "count and memory_mib must be at least 1");
    if (ec->m->n_gpus + count > FAKE_MAX_GPUS)
        return perr(ps, e, "more than %d GPUs in one machine", FAKE_MAX_GPUS);
    for (unsigned k = 0; k < count; k++) {
        struct fake_gpu *g = &ec->m->gpus[ec->m->n_gpus];
        uint64_t a, key[2] = {ec->entry, k};

        memset(g, 0, sizeof(*g));
        g->kind = FAKE_KIND_GPU;
        g->index = (unsigned)ec->m->n_gpus;
        g->model = model;
        str_copy(g->name, name, sizeof(g->name));
        g->model.name = g->name;
        /* Stable across runs and paths: model name, entry index, index in the entry. */
        a = fake_hash(fake_hash(0, name, strlen(name)), key, sizeof(key));
        fake_uuid_format(g->uuid, sizeof(g->uuid), "GPU-", a, fake_hash(a, "gpu", 3));
        g->numa_node = numa;
        g->pci_domain = g->index / 16;
        g->pci_bus = 0x10 + (g->index % 16) * 8;
        for (size_t l = 0; l < NVML_NVLINK_MAX_LINKS; l++)
            g->links[l] = FAKE_LINK_NONE;
        g->mig_current = g->mig_pending = mig_enabled;
        g->fabric = fabric;
        g->mig_needs_reset = needs_reset;
        g->unified_memory = unified;
        g->has_telemetry = has_tele;
        g->tele = tele;
        memcpy(g->fabric_cluster, cluster, sizeof(cluster));
        g->fabric_clique = clique;
        ec->m->n_gpus++;
        if (get(e, "processes")) {
            r = parse_processes(ps, get(e, "processes"), g);
            if (r < 0)
                return r;
        }
        r = apply_mig(ps, g, reqs, n_reqs, req_nodes);
        if (r < 0)
            return r;
    }
    return 0;
}

static unsigned next_free_link(const struct fake_gpu *g)
{
    for (unsigned l = 0; l < g->model.nvlinks; l++)
        if (g->links[l] == FAKE_LINK_NONE)
            return l;
    return FAKE_LINK_NONE;
}

static int parse_topology(const struct parse *ps, struct fy_node *topo, struct fake_machine *m)
{
    static const char *const keys[] = {"nvlink", NULL};
    struct fy_node *nv, *t;
    void *it = NULL;
    int r = want(ps, topo, FYNT_MAPPING, "topology");

    if (r == 0)
        r = check_keys(ps, topo, keys, "topology");
    nv = r == 0 ? get(topo, "nvlink") : NULL;
    if (!nv)
        return r;
    if (fy_node_get_type(nv) == FYNT_SCALAR) {
        if (!str_eq(fy_node_get_scalar0(nv), "all"))
            return perr(ps, nv, "nvlink must be 'all' or a list of [gpu, gpu, links]");
        for (size_t i = 0; i < m->n_gpus; i++)
            for (unsigned l = 0; l < m->gpus[i].model.nvlinks; l++)
                m->gpus[i].links[l] = FAKE_LINK_SWITCH;
        return 0;
    }
    r = want(ps, nv, FYNT_SEQUENCE, "nvlink");
    while (r == 0 && (t = fy_node_sequence_iterate(nv, &it))) {
        uint64_t v[3];

        if (fy_node_get_type(t) != FYNT_SEQUENCE || fy_node_sequence_item_count(t) != 3)
            return perr(ps, t, "an nvlink entry must be [gpu, gpu, links]");
        for (int i = 0; i < 3 && r == 0; i++)
            r = node_u64(ps, fy_node_sequence_get_by_index(t, i), "nvlink entry",
                         i < 2 ? FAKE_MAX_GPUS : NVML_NVLINK_MAX_LINKS, &v[i]);
        if (r < 0)
            return r;
        if (v[0] >= m->n_gpus || v[1] >= m->n_gpus || v[0] == v[1] || v[2] == 0)
            return perr(ps, t,
                        "nvlink [%llu, %llu, %llu]: need two different GPU indexes "
                        "below %zu and at least one link",
                        (unsigned long long)v[0], (unsigned long long)v[1],
                        (unsigned long long)v[2], m->n_gpus);
        for (uint64_t k = 0; k < v[2]; k++) {
            struct fake_gpu *a = &m->gpus[v[0]], *b = &m->gpus[v[1]];
            unsigned la = next_free_link(a), lb = next_free_link(b);
            if (la == FAKE_LINK_NONE || lb == FAKE_LINK_NONE)
                return perr(ps, t,
                            "nvlink [%llu, %llu, %llu]: more links than the GPU has "
                            "(%u on %s)",
                            (unsigned long long)v[0], (unsigned long long)v[1],
                            (unsigned long long)v[2],
                            la == FAKE_LINK_NONE ? a->model.nvlinks : b->model.nvlinks,
                            la == FAKE_LINK_NONE ? a->model.name : b->model.name);
            a->links[la] = b->index;
            b->links[lb] = a->index;
        }
    }
    return r;
}

static int parse_root(const struct parse *ps, struct fy_node *root, struct fake_machine *m)
{
    static const char *const keys[] = {"driver", "cuda", "gpus", "topology", NULL};
    struct fy_node *gpus, *e;
    const char *driver = "570.158.01";
    unsigned cuda = 12080;
    void *it = NULL;
    struct entry_ctx ec = {0, m};
    int r;

    if (!root)
        return error_set(ps->err, -EINVAL, "%s: empty machine description", ps->path);
    r = want(ps, root, FYNT_MAPPING, "the machine description");
    if (r == 0)
        r = check_keys(ps, root, keys, "the machine description");
    if (r == 0)
        r = get_str(ps, root, "driver", &driver);
    if (r == 0)
        r = get_uint(ps, root, "cuda", 99999, &cuda);
    if (r < 0)
        return r;
    if (str_copy(m->driver, driver, sizeof(m->driver)) >= sizeof(m->driver))
        return perr(ps, get(root, "driver"), "driver version is too long");
    m->cuda = (int)cuda;
    gpus = get(root, "gpus");
    if (!gpus)
        return perr(ps, root, "the machine description needs a gpus list");
    r = want(ps, gpus, FYNT_SEQUENCE, "gpus");
    while (r == 0 && (e = fy_node_sequence_iterate(gpus, &it))) {
        r = parse_gpu_entry(ps, e, &ec);
        ec.entry++;
    }
    if (r == 0 && get(root, "topology"))
        r = parse_topology(ps, get(root, "topology"), m);
    return r;
}

/* libfyaml's diagnostics, kept (bounded) instead of printed: the caller reports them. */
struct diag_capture {
    char text[512];
    size_t len;
};

static void diag_capture_fn(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
    struct diag_capture *cap = user;
    (void)diag;
    while (len > 0 && cap->len + 1 < sizeof(cap->text)) {
        cap->text[cap->len++] = *buf == '\n' ? ' ' : *buf;
        buf++;
        len--;
    }
    cap->text[cap->len] = '\0';
}

static int yaml_error(const struct parse *ps, struct diag_capture *cap)
{
    const char *t = cap->text;

    /* Drop the source excerpt's caret line ("  ^") at the end. */
    while (cap->len > 0 && (cap->text[cap->len - 1] == ' ' || cap->text[cap->len - 1] == '^'))
        cap->text[--cap->len] = '\0';

    /* libfyaml names an in-memory input "<memory-@...>": put the file name there. */
    if (*t == '<' && strchr(t, '>'))
        t = strchr(t, '>') + 1;
    if (cap->len > 0 && *t == ':')
        return error_set(ps->err, -EINVAL, "%s%s", ps->path, t);
    if (cap->len > 0)
        return error_set(ps->err, -EINVAL, "%s: not valid YAML: %s", ps->path, t);
    return error_set(ps->err, -EINVAL, "%s: not valid YAML", ps->path);
}

int fake_machine_load(const char *path, struct fake_machine **ret_m, struct error *err)
{
    struct parse ps = {path, err};
    struct fake_machine *m = NULL;
    struct fy_document *doc = NULL;
    struct fy_diag *diag = NULL;
    struct fy_diag_cfg dcfg;
    struct fy_parse_cfg cfg;
    struct diag_capture cap = {.len = 0};
    char *data = NULL;
    size_t len = 0;
    int r;

    r = file_read_all(path, FAKE_MACHINE_MAX_BYTES, &data, &len, err);
    if (r < 0)
        goto out;
    m = calloc(1, sizeof(*m));
    if (m)
        m->gpus = calloc(FAKE_MAX_GPUS, sizeof(*m->gpus));
    if (!m || !m->gpus) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    m->signature = fake_hash(0, data, len);
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = diag_capture_fn;
    dcfg.user = &cap;
    dcfg.colorize = false;
    diag = fy_diag_create(&dcfg);
    memset(&cfg, 0, sizeof(cfg));
    cfg.flags = FYPCF_QUIET | FYPCF_RESOLVE_DOCUMENT;
    cfg.diag = diag;
    doc = fy_document_build_from_string(&cfg, data, len);
    if (!doc) {
        r = yaml_error(&ps, &cap);
        goto out;
    }
    if (fy_document_resolve(doc) != 0) {
        r = yaml_error(&ps, &cap);
        goto out;
    }
    r = parse_root(&ps, fy_document_root(doc), m);
    if (r < 0)
        goto out;
    *ret_m = m;
    m = NULL;
out:
    fy_document_destroy(doc);
    if (diag)
        fy_diag_unref(diag);
    fake_machine_free(m);
    free(data);
    return r;
}

void fake_machine_free(struct fake_machine *m)
{
    if (!m)
        return;
    free(m->gpus);
    free(m);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* labels.c: inventory + model -> GFD's node labels (labels.h). Pure: every input is a
 * parameter, every label a rule of facts §7.3 or one of our documented additions
 * (per-model sets on mixed nodes, per-resource labels for renamed resources). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels/labels.h"

#define KEY_MAX 320
#define PREFIX_MAX 280
#define VALUE_MAX 128

struct builder {
    struct labels_set *set;
    size_t alloc;
    int r; /* first failure; later puts do nothing */
};

static void put(struct builder *b, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void put(struct builder *b, const char *key, const char *fmt, ...)
{
    struct labels_set *s = b->set;
    char raw[VALUE_MAX], value[VALUE_MAX];
    va_list ap;
    char *k, *v;

    if (b->r < 0)
        return;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    /* the API refuses a whole patch for one bad value: none leaves here */
    labels_value_sanitise(raw, value, sizeof(value));
    for (size_t i = 0; i < s->n_labels; i++)
        if (strcmp(s->labels[i].key, key) == 0) {
            v = str_dup(value);
            if (!v) {
                b->r = -ENOMEM;
                return;
            }
            free(s->labels[i].value);
            s->labels[i].value = v;
            return;
        }
    if (s->n_labels == b->alloc) {
        size_t n = b->alloc ? b->alloc * 2 : 64;
        struct labels_label *p = realloc(s->labels, n * sizeof(*p));
        if (!p) {
            b->r = -ENOMEM;
            return;
        }
        s->labels = p;
        b->alloc = n;
    }
    k = str_dup(key);
    v = str_dup(value);
    if (!k || !v) {
        free(k);
        free(v);
        b->r = -ENOMEM;
        return;
    }
    s->labels[s->n_labels++] = (struct labels_label){k, v};
}

/* put() under "<prefix><name>". */
static void putp(struct builder *b, const char *prefix, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void putp(struct builder *b, const char *prefix, const char *name, const char *fmt, ...)
{
    char key[KEY_MAX], value[VALUE_MAX];
    va_list ap;

    snprintf(key, sizeof(key), "%s%s", prefix, name);
    va_start(ap, fmt);
    vsnprintf(value, sizeof(value), fmt, ap);
    va_end(ap);
    put(b, key, "%s", value);
}

void labels_sanitise(const char *in, char *out, size_t size)
{
    size_t n = 0;
    bool space = false;

    if (!size)
        return;
    for (const char *p = in; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (isspace(c)) {
            space = n > 0;
            continue;
        }
        if (!isalnum(c) && c != '-' && c != '_' && c != '.')
            continue;
        if (space && n + 1 < size)
            out[n++] = '-';
        space = false;
        if (n + 1 < size)
            out[n++] = (char)c;
    }
    out[n] = '\0';
}

void labels_value_sanitise(const char *in, char *out, size_t size)
{
    size_t start = 0, n;

    if (!size)
        return;
    labels_sanitise(in, out, size);
    while (out[start] && !isalnum((unsigned char)out[start]))
        start++;
    n = strlen(out + start);
    if (n > LABELS_VALUE_MAX)
        n = LABELS_VALUE_MAX;
    while (n > 0 && !isalnum((unsigned char)out[start + n - 1]))
        n--;
    memmove(out, out + start, n);
    out[n] = '\0';
}

static bool name_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

static bool name_ok(const char *s, size_t len, size_t max)
{
    if (len == 0 || len > max || !isalnum((unsigned char)s[0]) ||
        !isalnum((unsigned char)s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!name_char_ok(s[i]))
            return false;
    return true;
}

bool labels_valid(const char *key, const char *value)
{
    const char *slash = strrchr(key, '/');
    const char *name = slash ? slash + 1 : key;

    if (slash && (slash == key || (size_t)(slash - key) > 253))
        return false;
    if (!name_ok(name, strlen(name), 63))
        return false;
    return !*value || name_ok(value, strlen(value), LABELS_VALUE_MAX);
}

static const char *family(int major, int minor)
{
    switch (major) {
    case 1:
        return "tesla";
    case 2:
        return "fermi";
    case 3:
        return "kepler";
    case 5:
        return "maxwell";
    case 6:
        return "pascal";
    case 7:
        return minor < 5 ? "volta" : "turing";
    case 8:
        return minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
        return "hopper";
    case 10:
    case 12:
        return "blackwell";
    case 13:
        return "rubin";
    default:
        return "undefined";
    }
}

static const char *sharing_name(const struct model_resource *res, unsigned replicas)
{
    if (!res || replicas <= 1)
        return "none";
    return res->mode->name;
}

/* The device serving GPU gpu (mig < 0: the whole GPU) and its resource; NULL when the
 * model does not advertise it. */
static const struct model_device *served(const struct model *m, unsigned gpu, int mig,
                                         const struct model_resource **ret_res)
{
    for (size_t i = 0; i < m->n_resources; i++)
        for (size_t j = 0; j < m->resources[i].n_devices; j++) {
            const struct model_device *d = &m->resources[i].devices[j];
            if (d->gpu_index == gpu && d->mig_index == mig) {
                *ret_res = &m->resources[i];
                return d;
            }
        }
    *ret_res = NULL;
    return NULL;
}

/* NVIDIA appends -SHARED when replicas > 1 and the resource kept its base name. */
static bool shared_suffix(const struct model_resource *res, unsigned replicas, const char *base)
{
    return res && replicas > 1 && strcmp(res->name, base) == 0;
}

/* Whether a resource name's part after "nvidia.com/mig-" names profile, whose '+' NVIDIA
 * writes as '.' (model_mig_resource_name). */
static bool mig_name_is(const char *name, const char *profile)
{
    for (; *name && *profile; name++, profile++)
        if (*name != (*profile == '+' ? '.' : *profile))
            return false;
    return !*name && !*profile;
}

/* GFD's MIG product, <model>-MIG-<profile>[-SHARED], each part sanitised; the profile as
 * NVIDIA's MIG device names it, '+' read as '.' (1g.18gb+me -> 1g.18gb.me). */
static void put_mig_product(struct builder *b, const char *prefix, const char *model,
                            const char *profile, bool shared)
{
    char product[INV_NAME_MAX], dotted[INV_PROFILE_MAX], name[INV_PROFILE_MAX];
    size_t i = 0;

    for (; profile[i] && i + 1 < sizeof(dotted); i++)
        dotted[i] = profile[i] == '+' ? '.' : profile[i];
    dotted[i] = '\0';
    labels_sanitise(model, product, sizeof(product));
    labels_sanitise(dotted, name, sizeof(name));
    putp(b, prefix, "product", "%s-MIG-%s%s", product, name, shared ? "-SHARED" : "");
}

static void mig_attribute_labels(struct builder *b, const char *prefix,
                                 const struct inv_mig_device *md)
{
    putp(b, prefix, "memory", "%llu", (unsigned long long)md->memory_mib);
    putp(b, prefix, "multiprocessors", "%u", md->multiprocessors);
    putp(b, prefix, "slices.gi", "%u", md->gi_slices);
    putp(b, prefix, "slices.ci", "%u", md->ci_slices);
    putp(b, prefix, "engines.copy", "%u", md->copy_engines);
    putp(b, prefix, "engines.decoder", "%u", md->decoders);
    putp(b, prefix, "engines.encoder", "%u", md->encoders);
    putp(b, prefix, "engines.jpeg", "%u", md->jpeg_engines);
    putp(b, prefix, "engines.ofa", "%u", md->ofa_engines);
}

/* The GPUs of one model (same name), in index order. */
struct group {
    const struct inv_gpu *gpus[64];
    size_t n;
};

/* The GPU whose figures GFD labels for a model: the last one with MIG off, else the last
 * one (newGPULabelers keeps one device per name, full GPUs overriding MIG-enabled ones). */
static const struct inv_gpu *gfd_labelled(const struct group *g)
{
    for (size_t i = g->n; i-- > 0;)
        if (!g->gpus[i]->mig_enabled)
            return g->gpus[i];
    return g->gpus[g->n - 1];
}

static void full_gpu_labels(struct builder *b, const struct model *m, const char *prefix,
                            const struct group *g)
{
    const struct inv_gpu *labelled = gfd_labelled(g);
    const struct inv_gpu *first = g->gpus[0];
    const struct model_resource *res = NULL;
    const struct model_device *d = NULL;
    char product[INV_NAME_MAX];
    unsigned replicas = 0;

    for (size_t i = 0; i < g->n && !d; i++)
        if (!g->gpus[i]->mig_enabled)
            d = served(m, g->gpus[i]->index, -1, &res);
    /* MIG-enabled GPUs are not whole-GPU devices under none/mixed: replicas 0 */
    if (d)
        replicas = d->replicas;
    labels_sanitise(first->name, product, sizeof(product));
    putp(b, prefix, "product", "%s%s", product,
         shared_suffix(res, replicas, "nvidia.com/gpu") ? "-SHARED" : "");
    putp(b, prefix, "count", "%zu", g->n);
    putp(b, prefix, "replicas", "%u", replicas);
    putp(b, prefix, "sharing-strategy", "%s", sharing_name(res, replicas));
    /* GFD leaves gpu.memory out when the memory query fails or reads 0 (unified memory:
     * NOT_SUPPORTED on GB10), rather than labelling 0 */
    if (!labelled->memory_unknown && labelled->memory_mib != 0)
        putp(b, prefix, "memory", "%llu", (unsigned long long)labelled->memory_mib);
}

/* GFD's invalid-single labels (facts §4 edge cases): the model of the first MIG-enabled GPU
 * with -MIG-INVALID, and nothing a selector could count on. family/compute stay. */
static void invalid_single_labels(struct builder *b, const char *prefix, const struct group *g)
{
    const struct inv_gpu *named = g->gpus[0];
    char product[INV_NAME_MAX];

    for (size_t i = g->n; i-- > 0;)
        if (g->gpus[i]->mig_enabled)
            named = g->gpus[i];
    labels_sanitise(named->name, product, sizeof(product));
    putp(b, prefix, "product", "%s-MIG-INVALID", product);
    putp(b, prefix, "count", "0");
    putp(b, prefix, "replicas", "0");
    putp(b, prefix, "sharing-strategy", "%s", "");
    putp(b, prefix, "memory", "0");
}

/* Whether single can serve the node, as GFD decides it for the whole node: every GPU in
 * MIG mode, none of them empty, and one MIG profile throughout. */
static bool single_valid(const struct inv_inventory *inv)
{
    const char *profile = NULL;

    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *gpu = &inv->gpus[i];
        if (!gpu->mig_enabled || !gpu->n_migs)
            return false;
        for (size_t k = 0; k < gpu->n_migs; k++) {
            if (profile && strcmp(profile, gpu->migs[k].profile) != 0)
                return false;
            profile = gpu->migs[k].profile;
        }
    }
    return profile != NULL;
}

/* Under a valid single: the GPUs' MIG devices as nvidia.com/gpu (the first one's
 * attributes, all of them counted). */
static void single_mig_labels(struct builder *b, const struct model *m, const char *prefix,
                              const struct group *g)
{
    const struct inv_gpu *parent = g->gpus[0];
    const struct inv_mig_device *md = &parent->migs[0];
    const struct model_resource *res = NULL;
    const struct model_device *d = served(m, parent->index, (int)md->index, &res);
    unsigned replicas = d ? d->replicas : 0;
    size_t count = 0;

    for (size_t i = 0; i < g->n; i++)
        count += g->gpus[i]->n_migs;
    put_mig_product(b, prefix, parent->name, md->profile,
                    shared_suffix(res, replicas, "nvidia.com/gpu"));
    putp(b, prefix, "count", "%zu", count);
    putp(b, prefix, "replicas", "%u", replicas);
    putp(b, prefix, "sharing-strategy", "%s", sharing_name(res, replicas));
    mig_attribute_labels(b, prefix, md);
}

static bool any_mig_enabled(const struct group *g)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->gpus[i]->mig_enabled)
            return true;
    return false;
}

/* One set of nvidia.com/gpu.* style labels under prefix: g's GPUs as the strategy serves
 * them (single: valid says whether it can), family and compute of arch. */
static void group_labels(struct builder *b, const struct model *m, const char *prefix,
                         const struct group *g, const struct inv_gpu *arch, bool valid)
{
    if (m->settings.mig_strategy != CFG_MIG_SINGLE || !any_mig_enabled(g))
        full_gpu_labels(b, m, prefix, g);
    else if (valid)
        single_mig_labels(b, m, prefix, g);
    else
        invalid_single_labels(b, prefix, g);
    putp(b, prefix, "family", "%s", family(arch->cc_major, arch->cc_minor));
    putp(b, prefix, "compute.major", "%d", arch->cc_major);
    putp(b, prefix, "compute.minor", "%d", arch->cc_minor);
}

/* Under mixed: nvidia.com/mig-<profile>.* per profile ('+' becomes '.'), in the order
 * profiles are first met by GPU and MIG index. */
static void mixed_mig_labels(struct builder *b, const struct inv_inventory *inv,
                             const struct model *m)
{
    for (size_t gi = 0; gi < inv->n_gpus; gi++) {
        const struct inv_gpu *gpu = &inv->gpus[gi];
        if (!gpu->mig_enabled)
            continue;
        for (size_t k = 0; k < gpu->n_migs; k++) {
            const struct inv_mig_device *md = &gpu->migs[k];
            const struct model_resource *res = NULL;
            const struct model_device *d;
            char prefix[PREFIX_MAX], key[KEY_MAX], base[KEY_MAX];
            size_t count = 0;
            unsigned replicas;
            int n;

            n = snprintf(prefix, sizeof(prefix), LABELS_PREFIX "mig-%s.", md->profile);
            for (char *p = prefix; *p; p++)
                if (*p == '+')
                    *p = '.';
            snprintf(key, sizeof(key), "%sproduct", prefix);
            if (n <= 0 || labels_get(b->set, key))
                continue;                                        /* profile already labelled */
            snprintf(base, sizeof(base), "%.*s", n - 1, prefix); /* the resource name */
            for (size_t gj = gi; gj < inv->n_gpus; gj++)
                for (size_t kk = 0; kk < inv->gpus[gj].n_migs; kk++)
                    count += inv->gpus[gj].mig_enabled &&
                             strcmp(inv->gpus[gj].migs[kk].profile, md->profile) == 0;
            d = served(m, gpu->index, (int)md->index, &res);
            replicas = d ? d->replicas : 0;
            put_mig_product(b, prefix, gpu->name, md->profile, shared_suffix(res, replicas, base));
            putp(b, prefix, "count", "%zu", count);
            putp(b, prefix, "replicas", "%u", replicas);
            putp(b, prefix, "sharing-strategy", "%s", sharing_name(res, replicas));
            mig_attribute_labels(b, prefix, md);
        }
    }
}

/* The names NVIDIA would advertise without renaming: nvidia.com/gpu, and
 * nvidia.com/mig-<profile> for a profile on this node. */
static bool is_base_name(const struct inv_inventory *inv, const char *name)
{
    if (strcmp(name, "nvidia.com/gpu") == 0)
        return true;
    if (!str_startswith(name, "nvidia.com/mig-"))
        return false;
    for (size_t i = 0; i < inv->n_gpus; i++)
        for (size_t k = 0; k < inv->gpus[i].n_migs; k++)
            if (mig_name_is(name + strlen("nvidia.com/mig-"), inv->gpus[i].migs[k].profile))
                return true;
    return false;
}

/* NVIDIA's README documents nvidia.com/<resource>.replicas for renamed resources; its
 * code never writes them. We do, for every resource advertised under another name. */
static void renamed_resource_labels(struct builder *b, const struct inv_inventory *inv,
                                    const struct model *m)
{
    for (size_t i = 0; i < m->n_resources; i++) {
        const struct model_resource *res = &m->resources[i];
        const struct model_device *d0 = res->n_devices ? &res->devices[0] : NULL;
        char prefix[PREFIX_MAX], key[KEY_MAX];
        size_t physical = 0;

        if (!d0 || is_base_name(inv, res->name) || d0->gpu_index >= inv->n_gpus)
            continue;
        snprintf(prefix, sizeof(prefix), "%s.", res->name);
        snprintf(key, sizeof(key), "%sreplicas", prefix);
        if (!labels_valid(key, "1"))
            continue; /* a name too long for a label key: nothing to say there */
        for (size_t j = 0; j < res->n_devices; j++)
            physical += res->devices[j].replica == 0;
        if (d0->mig_index >= 0)
            put_mig_product(b, prefix, inv->gpus[d0->gpu_index].name, d0->profile, false);
        else
            putp(b, prefix, "product", "%s", inv->gpus[d0->gpu_index].name);
        putp(b, prefix, "count", "%zu", physical);
        putp(b, prefix, "replicas", "%u", res->replicas);
        putp(b, prefix, "sharing-strategy", "%s", sharing_name(res, res->replicas));
    }
}

static int driver_labels(struct builder *b, const struct inv_inventory *inv, struct error *err)
{
    char major[32] = "", minor[32] = "", rev[32] = "";
    int parts = sscanf(inv->driver_version, "%31[0-9].%31[0-9].%31[0-9]", major, minor, rev);
    size_t dots = 0;

    for (const char *p = inv->driver_version; *p; p++)
        dots += *p == '.';
    if (parts < 2 || dots + 1 != (size_t)parts)
        return error_set(err, -EINVAL,
                         "cannot label driver version '%s': expected 2 or 3 "
                         "dot-separated numbers (as GFD does)",
                         inv->driver_version);
    put(b, LABELS_PREFIX "cuda.driver.major", "%s", major);
    put(b, LABELS_PREFIX "cuda.driver.minor", "%s", minor);
    put(b, LABELS_PREFIX "cuda.driver.rev", "%s", rev);
    put(b, LABELS_PREFIX "cuda.driver-version.major", "%s", major);
    put(b, LABELS_PREFIX "cuda.driver-version.minor", "%s", minor);
    put(b, LABELS_PREFIX "cuda.driver-version.revision", "%s", rev);
    put(b, LABELS_PREFIX "cuda.driver-version.full", "%s", inv->driver_version);
    put(b, LABELS_PREFIX "cuda.runtime.major", "%d", inv->cuda_version / 1000);
    put(b, LABELS_PREFIX "cuda.runtime.minor", "%d", inv->cuda_version % 1000 / 10);
    put(b, LABELS_PREFIX "cuda.runtime-version.major", "%d", inv->cuda_version / 1000);
    put(b, LABELS_PREFIX "cuda.runtime-version.minor", "%d", inv->cuda_version % 1000 / 10);
    put(b, LABELS_PREFIX "cuda.runtime-version.full", "%d.%d", inv->cuda_version / 1000,
        inv->cuda_version % 1000 / 10);
    return 0;
}

static const char *gpu_mode(const struct inv_inventory *inv, const uint32_t *pci_class)
{
    uint32_t first;

    if (!pci_class || !inv->n_gpus)
        return "unknown";
    first = pci_class[0];
    for (size_t i = 1; i < inv->n_gpus; i++)
        if (pci_class[i] != first)
            return "unknown";
    return first == 0x0302 ? "compute" : first == 0x0300 ? "graphics" : "unknown";
}

static int node_labels(struct builder *b, const struct inv_inventory *inv, const struct model *m,
                       const struct labels_options *o, struct error *err)
{
    char machine[INV_NAME_MAX];
    bool mig_capable = false, mps = false, mig_on = false;
    int r = driver_labels(b, inv, err);

    if (r < 0)
        return r;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        mig_capable |= inv->gpus[i].mig_capable;
        mig_on |= inv->gpus[i].mig_enabled;
    }
    for (size_t i = 0; i < m->n_resources; i++)
        mps |= m->resources[i].mode->control_daemon;
    if (mps && mig_on)
        return error_set(err, -EINVAL,
                         "cannot label MPS sharing on a node with MIG-enabled "
                         "GPUs: MPS is not supported with MIG (as GFD refuses)");
    labels_sanitise(o->machine_type ? o->machine_type : "", machine, sizeof(machine));
    put(b, LABELS_PREFIX "gpu.machine", "%s", *machine ? machine : "unknown");
    put(b, LABELS_PREFIX "mig.capable", "%s", mig_capable ? "true" : "false");
    put(b, LABELS_PREFIX "mps.capable", "%s", mps ? "true" : "false");
    put(b, LABELS_PREFIX "gpu.mode", "%s", gpu_mode(inv, o->pci_class));
    if (m->settings.mig_strategy != CFG_MIG_NONE)
        put(b, LABELS_PREFIX "mig.strategy", "%s", cfg_mig_strategy_name(m->settings.mig_strategy));
    return 0;
}

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const struct labels_label *)a)->key, ((const struct labels_label *)b)->key);
}

/* GPUs grouped by model name, groups in the order of their first GPU (GPU 0's first). */
static size_t make_groups(const struct inv_inventory *inv, struct group *groups, size_t max)
{
    size_t n = 0;

    for (size_t i = 0; i < inv->n_gpus; i++) {
        size_t k = 0;
        while (k < n && strcmp(groups[k].gpus[0]->name, inv->gpus[i].name) != 0)
            k++;
        if (k == n) {
            if (n == max)
                continue;
            groups[n++].n = 0;
        }
        if (groups[k].n < GS_ARRAY_SIZE(groups[k].gpus))
            groups[k].gpus[groups[k].n++] = &inv->gpus[i];
    }
    return n;
}

/* Every GPU of the node, in index order (up to a group's size). */
static void node_group(const struct inv_inventory *inv, struct group *g)
{
    g->n = 0;
    for (size_t i = 0; i < inv->n_gpus && g->n < GS_ARRAY_SIZE(g->gpus); i++)
        g->gpus[g->n++] = &inv->gpus[i];
}

/* NVIDIA's own nvidia.com/gpu.* keys. GFD lets full GPUs override MIG-enabled ones and
 * picks among models at random; we keep its preference, deterministically: the model of
 * the first GPU by index that is served whole (MIG off), GPU 0's when every GPU has MIG
 * on. Under single with MIG on anywhere, the node's MIG devices as one resource (or the
 * invalid labels), the architecture still of that chosen GPU. groups[0] is the whole
 * node, groups[1..n_groups] the models. */
static void top_labels(struct builder *b, const struct model *m, const struct group *groups,
                       size_t n_groups, bool valid)
{
    const struct group *node = &groups[0], *pick = &groups[1];
    const struct inv_gpu *arch = node->gpus[0];

    for (size_t i = 0; i < node->n; i++)
        if (!node->gpus[i]->mig_enabled) {
            arch = node->gpus[i];
            break;
        }
    for (size_t k = 1; k <= n_groups; k++)
        if (strcmp(groups[k].gpus[0]->name, arch->name) == 0)
            pick = &groups[k];
    if (m->settings.mig_strategy == CFG_MIG_SINGLE && any_mig_enabled(node))
        group_labels(b, m, LABELS_PREFIX "gpu.", node, arch, valid);
    else
        group_labels(b, m, LABELS_PREFIX "gpu.", pick, arch, valid);
}

/* nvidia.com/gpu.clique=<cluster uuid>.<clique id>, as GFD's IMEX labeler: only when every
 * fabric-attached GPU names the same cluster and the same clique (a node whose GPUs
 * disagree gets no label, since a workload could not rely on either). */
static void clique_label(struct builder *b, const struct inv_inventory *inv)
{
    const struct inv_gpu *first = NULL;

    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        if (!g->fabric_cluster[0])
            continue;
        if (!first)
            first = g;
        else if (strcmp(first->fabric_cluster, g->fabric_cluster) != 0 ||
                 first->fabric_clique != g->fabric_clique)
            return;
    }
    if (first)
        put(b, LABELS_PREFIX "gpu.clique", "%s.%u", first->fabric_cluster, first->fabric_clique);
}

int labels_compute(const struct inv_inventory *inv, const struct model *model,
                   const struct labels_options *opts, struct labels_set **ret_set,
                   struct error *err)
{
    static const struct labels_options defaults = {0};
    const struct labels_options *o = opts ? opts : &defaults;
    struct builder b = {0};
    struct group *groups = NULL;
    size_t n_groups;
    int r = 0;

    if (!inv || !model || !ret_set)
        return error_set(err, -EINVAL, "labels_compute: missing inventory or model");
    b.set = calloc(1, sizeof(*b.set));
    groups = calloc(16, sizeof(*groups)); /* [0]: the whole node, then one per model */
    if (!b.set || !groups) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (!o->no_timestamp)
        put(&b, LABELS_PREFIX "gfd.timestamp", "%lld", (long long)o->timestamp);
    put(&b, LABELS_PREFIX "vgpu.present", "%s", o->vgpu_present ? "true" : "false");
    if (o->vgpu_host_driver_version && *o->vgpu_host_driver_version)
        put(&b, LABELS_PREFIX "vgpu.host-driver-version", "%s", o->vgpu_host_driver_version);
    if (o->vgpu_host_driver_branch && *o->vgpu_host_driver_branch)
        put(&b, LABELS_PREFIX "vgpu.host-driver-branch", "%s", o->vgpu_host_driver_branch);
    clique_label(&b, inv);
    if (inv->n_gpus > 0) {
        r = node_labels(&b, inv, model, o, err);
        if (r < 0)
            goto out;
        n_groups = make_groups(inv, groups + 1, 15);
        node_group(inv, &groups[0]);
        top_labels(&b, model, groups, n_groups, single_valid(inv));
        /* mixed-model nodes: every model also under nvidia.com/gpu.<n>. */
        for (size_t k = 1; n_groups > 1 && k <= n_groups; k++) {
            char prefix[64];
            snprintf(prefix, sizeof(prefix), LABELS_PREFIX "gpu.%zu.", k - 1);
            group_labels(&b, model, prefix, &groups[k], groups[k].gpus[0], single_valid(inv));
        }
        if (model->settings.mig_strategy == CFG_MIG_MIXED)
            mixed_mig_labels(&b, inv, model);
        renamed_resource_labels(&b, inv, model);
    }
    if (b.r < 0) {
        r = error_set(err, b.r, "out of memory");
        goto out;
    }
    qsort(b.set->labels, b.set->n_labels, sizeof(*b.set->labels), cmp_label);
    *ret_set = b.set;
    b.set = NULL;
out:
    free(groups);
    labels_set_free(b.set);
    return r;
}

void labels_set_free(struct labels_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n_labels; i++) {
        free(set->labels[i].key);
        free(set->labels[i].value);
    }
    free(set->labels);
    free(set);
}

const char *labels_get(const struct labels_set *set, const char *key)
{
    if (!set)
        return NULL;
    for (size_t i = 0; i < set->n_labels; i++)
        if (strcmp(set->labels[i].key, key) == 0)
            return set->labels[i].value;
    return NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* config.c: mig-parted's config file (facts B.1): version v1, mig-configs: label -> list of
 * {device-filter, devices, mig-enabled, mig-devices}, with mig-parted's rules and messages,
 * positions (file:line:col) on every error, and the lookup of the entry that decides a GPU.
 * A ConfigMap directory (mig-manager mounts its ConfigMap) is read through its config.yaml
 * key, or its only key. */
#include <dirent.h>
#include <errno.h>
#include <libfyaml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mig/config.h"
#include "yaml/yaml.h"

#define MIG_CONFIG_MAX_BYTES (4u * 1024u * 1024u)

struct parse {
    const char *file;
    struct yaml_doc doc; /* the document being read (owned) */
    struct error *err;
};

static unsigned line_of(struct fy_node *n)
{
    return yaml_pos(n).line;
}

static int perr(struct parse *ps, struct fy_node *n, const char *fmt, ...) GS_PRINTF(3, 4);
static int perr(struct parse *ps, struct fy_node *n, const char *fmt, ...)
{
    char msg[ERROR_MSG_MAX];
    struct yaml_pos pos = yaml_pos(n);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!pos.line)
        return error_set(ps->err, -EINVAL, "%s: %s", ps->file, msg);
    return error_set(ps->err, -EINVAL, "%s:%u:%u: %s", ps->file, pos.line, pos.col, msg);
}

/* A scalar's text, owned by the caller (yaml/ decodes single-quoted ones). */
static char *text(struct parse *ps, struct fy_node *n)
{
    const char *s = yaml_text(&ps->doc, n, NULL);

    return s ? str_dup(s) : NULL;
}

static int parse_filter(struct parse *ps, struct fy_node *v, struct mig_config_entry *e)
{
    struct fy_node *items[MIG_CONFIG_MAX_FILTERS];
    size_t n = 0;
    void *it = NULL;

    if (fy_node_get_type(v) == FYNT_SCALAR) {
        items[n++] = v;
    } else if (fy_node_get_type(v) == FYNT_SEQUENCE) {
        for (struct fy_node *i = fy_node_sequence_iterate(v, &it); i;
             i = fy_node_sequence_iterate(v, &it)) {
            if (n == MIG_CONFIG_MAX_FILTERS)
                return perr(ps, i, "more than %d device-filter entries", MIG_CONFIG_MAX_FILTERS);
            items[n++] = i;
        }
    } else {
        return perr(ps, v, "device-filter must be a PCI id or a list of them");
    }
    for (size_t i = 0; i < n; i++) {
        char *s = text(ps, items[i]), *end = NULL;
        unsigned long long id = 0, sub = 0;
        bool ok = s && strncasecmp(s, "0x", 2) == 0;
        if (ok)
            id = strtoull(s, &end, 16);
        if (ok && *end == ':') {
            ok = strncasecmp(end + 1, "0x", 2) == 0;
            if (ok)
                sub = strtoull(end + 1, &end, 16);
        }
        ok = ok && end && !*end && id <= 0xffffffffull && sub <= 0xffffffffull;
        free(s);
        if (!ok)
            return perr(ps, items[i],
                        "device-filter entries are PCI ids like 0x20B010DE (device<<16 | "
                        "vendor), optionally :0xSSSSVVVV");
        e->device_filter[e->n_filter++] = (uint32_t)id;
    }
    return 0;
}

static int parse_devices(struct parse *ps, struct fy_node *v, struct mig_config_entry *e)
{
    void *it = NULL;

    if (fy_node_get_type(v) == FYNT_SCALAR) {
        char *s = text(ps, v);
        bool all = s && strcmp(s, "all") == 0;
        free(s);
        if (!all)
            return perr(ps, v,
                        "invalid string input for 'devices': use \"all\" or a list of "
                        "GPU indexes");
        e->all_devices = true;
        return 0;
    }
    if (fy_node_get_type(v) != FYNT_SEQUENCE)
        return perr(ps, v, "'devices' must be \"all\" or a list of GPU indexes");
    for (struct fy_node *i = fy_node_sequence_iterate(v, &it); i;
         i = fy_node_sequence_iterate(v, &it)) {
        char *s = text(ps, i);
        unsigned idx;
        int r = s && yaml_is_plain(i) ? parse_uint(s, &idx) : -EINVAL;
        free(s);
        if (r < 0 || idx >= 64)
            return perr(ps, i, "'devices' entries are GPU indexes (0-63)");
        e->device_mask |= 1ull << idx;
    }
    return 0;
}

static int parse_mig_devices(struct parse *ps, struct fy_node *v, struct mig_config_entry *e)
{
    void *it = NULL;
    bool any_nonzero = false;

    if (fy_node_get_type(v) != FYNT_MAPPING)
        return perr(ps, v, "'mig-devices' must map profiles to counts, e.g. {\"1g.10gb\": 7}");
    for (struct fy_node_pair *p = fy_node_mapping_iterate(v, &it); p;
         p = fy_node_mapping_iterate(v, &it)) {
        struct mig_config_device *d;
        struct error perr_ = {0};
        char *k = text(ps, fy_node_pair_key(p)), *c = text(ps, fy_node_pair_value(p));
        unsigned count = 0;
        int r = 0;

        if (e->n_devices == MIG_CONFIG_MAX_DEVICES)
            r = perr(ps, fy_node_pair_key(p), "more than %d profiles in one entry",
                     MIG_CONFIG_MAX_DEVICES);
        else if (!k || mig_profile_parse(k, &e->devices[e->n_devices].spec, &perr_) < 0)
            r = perr(ps, fy_node_pair_key(p), "%s", k ? perr_.msg : "a profile must be a string");
        else if (!c || !yaml_is_plain(fy_node_pair_value(p)) || parse_uint(c, &count) < 0)
            r = perr(ps, fy_node_pair_value(p), "count of %s must be a number >= 0", k);
        if (r == 0) {
            d = &e->devices[e->n_devices++];
            str_copy(d->name, k, sizeof(d->name));
            d->count = count;
            any_nonzero |= count > 0;
        }
        free(k);
        free(c);
        if (r < 0)
            return r;
    }
    if (e->n_devices > 0 && !any_nonzero)
        return perr(ps, v, "all counts for all MigProfiles are 0");
    return 0;
}

static int parse_entry(struct parse *ps, struct fy_node *n, struct mig_config_entry *e)
{
    struct fy_node *filter = NULL, *devices = NULL, *enabled = NULL, *migdev = NULL;
    void *it = NULL;
    int r;

    if (fy_node_get_type(n) != FYNT_MAPPING)
        return perr(ps, n, "each mig-configs entry is a mapping with devices and mig-enabled");
    e->line = line_of(n);
    for (struct fy_node_pair *p = fy_node_mapping_iterate(n, &it); p;
         p = fy_node_mapping_iterate(n, &it)) {
        char *k = text(ps, fy_node_pair_key(p));
        struct fy_node *v = fy_node_pair_value(p);
        if (k && strcmp(k, "device-filter") == 0)
            filter = v;
        else if (k && strcmp(k, "devices") == 0)
            devices = v;
        else if (k && strcmp(k, "mig-enabled") == 0)
            enabled = v;
        else if (k && strcmp(k, "mig-devices") == 0)
            migdev = v;
        else {
            r = perr(ps, fy_node_pair_key(p),
                     "unexpected field: %s (device-filter, devices, mig-enabled, mig-devices)",
                     k ? k : "?");
            free(k);
            return r;
        }
        free(k);
    }
    if (!devices)
        return perr(ps, n, "missing required field 'devices'");
    if (!enabled)
        return perr(ps, n, "missing required field 'mig-enabled'");
    r = filter ? parse_filter(ps, filter, e) : 0;
    if (r == 0)
        r = parse_devices(ps, devices, e);
    if (r < 0)
        return r;
    char *b = text(ps, enabled);
    r = b && yaml_is_plain(enabled) && (strcmp(b, "true") == 0 || strcmp(b, "false") == 0) ? 0 : -1;
    e->mig_enabled = b && strcmp(b, "true") == 0;
    free(b);
    if (r < 0)
        return perr(ps, enabled, "'mig-enabled' must be true or false");
    if (e->mig_enabled && !migdev)
        return perr(ps, n, "missing required field 'mig-devices' when 'mig-enabled' is true");
    r = migdev ? parse_mig_devices(ps, migdev, e) : 0;
    if (r < 0)
        return r;
    if (!e->mig_enabled && e->n_devices > 0)
        return perr(ps, migdev, "MIG devices included when 'mig-enabled' is false");
    return 0;
}

/* Parses src into ps->doc (merge keys and aliases resolved, as mig-parted's Go YAML does);
 * a syntax error says where. */
static int load_document(struct parse *ps, const char *src, size_t len)
{
    struct yaml_pos pos;
    char msg[ERROR_MSG_MAX];
    int r = yaml_parse(src, len, YAML_RESOLVE, &ps->doc, NULL, NULL, &pos, msg, sizeof(msg));

    if (r == -ENOMEM)
        return error_set(ps->err, -ENOMEM, "out of memory creating the YAML parser");
    if (r < 0 && pos.line)
        return error_set(ps->err, -EINVAL, "%s:%u:%u: not valid YAML: %s; fix the syntax there",
                         ps->file, pos.line, pos.col, msg);
    if (r < 0)
        return error_set(ps->err, -EINVAL, "%s: not valid YAML", ps->file);
    return 0;
}

/* The top level: version v1 and a non-empty mig-configs mapping (*ret_configs). */
static int parse_top(struct parse *ps, struct fy_node *root, struct fy_node **ret_configs)
{
    struct fy_node *configs = NULL, *version = NULL;
    void *it = NULL;
    char *v;
    int r = 0;

    if (!root || fy_node_get_type(root) != FYNT_MAPPING)
        return error_set(ps->err, -EINVAL, "%s: expected a mapping with version and mig-configs",
                         ps->file);
    for (struct fy_node_pair *p = fy_node_mapping_iterate(root, &it); p && r == 0;
         p = fy_node_mapping_iterate(root, &it)) {
        char *k = text(ps, fy_node_pair_key(p));
        if (k && strcmp(k, "version") == 0)
            version = fy_node_pair_value(p);
        else if (k && strcmp(k, "mig-configs") == 0)
            configs = fy_node_pair_value(p);
        else
            r = perr(ps, fy_node_pair_key(p), "unexpected field: %s", k ? k : "?");
        free(k);
    }
    if (r < 0)
        return r;
    if (!version)
        return error_set(ps->err, -EINVAL, "%s: unable to parse with missing 'version' field",
                         ps->file);
    v = text(ps, version);
    if (!v || strcmp(v, "v1") != 0)
        r = perr(ps, version, "unknown version: %s", v ? v : "?");
    free(v);
    if (r < 0)
        return r;
    if (!configs || fy_node_get_type(configs) != FYNT_MAPPING ||
        fy_node_mapping_item_count(configs) == 0)
        return error_set(ps->err, -EINVAL, "%s: at least one entry in 'mig-configs' is required",
                         ps->file);
    *ret_configs = configs;
    return 0;
}

/* One named layout: its label and a non-empty list of entries. */
static int parse_set(struct parse *ps, struct fy_node_pair *p, struct mig_config_set *set)
{
    struct fy_node *list = fy_node_pair_value(p);
    void *lit = NULL;
    size_t k = 0;
    int r = 0;

    set->label = text(ps, fy_node_pair_key(p));
    set->line = line_of(fy_node_pair_key(p));
    if (!set->label)
        return perr(ps, fy_node_pair_key(p), "a mig-configs label must be a string");
    if (!list || fy_node_get_type(list) != FYNT_SEQUENCE || fy_node_sequence_item_count(list) == 0)
        return perr(ps, fy_node_pair_key(p), "mig-configs '%s' needs a list of at least one entry",
                    set->label);
    set->n = (size_t)fy_node_sequence_item_count(list);
    set->entries = calloc(set->n, sizeof(*set->entries));
    if (!set->entries)
        return error_set(ps->err, -ENOMEM, "out of memory");
    for (struct fy_node *e = fy_node_sequence_iterate(list, &lit); e && r == 0;
         e = fy_node_sequence_iterate(list, &lit))
        r = parse_entry(ps, e, &set->entries[k++]);
    return r;
}

int mig_config_parse(const char *src, size_t len, const char *file, struct mig_config **ret,
                     struct error *err)
{
    struct parse ps = {.file = file ? file : "<config>", .err = err};
    struct fy_node *configs = NULL;
    struct mig_config *c = calloc(1, sizeof(*c));
    void *it = NULL;
    size_t i = 0;
    int r;

    if (!c)
        return error_set(err, -ENOMEM, "out of memory");
    r = load_document(&ps, src, len);
    if (r == 0)
        r = parse_top(&ps, yaml_root(&ps.doc), &configs);
    if (r < 0)
        goto out;
    c->n = (size_t)fy_node_mapping_item_count(configs);
    c->sets = calloc(c->n, sizeof(*c->sets));
    if (!c->sets) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (struct fy_node_pair *p = fy_node_mapping_iterate(configs, &it); p && r == 0;
         p = fy_node_mapping_iterate(configs, &it))
        r = parse_set(&ps, p, &c->sets[i++]);
out:
    yaml_doc_release(&ps.doc);
    if (r < 0) {
        mig_config_free(c);
        return r;
    }
    c->file = str_dup(ps.file);
    *ret = c;
    return 0;
}

/* A ConfigMap mount: config.yaml, else the only key (names starting with '.' are the
 * kubelet's own). */
static int dir_file(const char *dir, char **ret, struct error *err)
{
    struct strbuf p = STRBUF_INIT;
    DIR *d = opendir(dir);
    struct dirent *de;
    char *only = NULL;
    size_t n = 0;

    if (!d)
        return error_set_errno(err, errno, "cannot open %s", dir);
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        n++;
        if (!only || strcmp(de->d_name, "config.yaml") == 0) {
            free(only);
            only = str_dup(de->d_name);
        }
    }
    closedir(d);
    if (!only || (n > 1 && strcmp(only, "config.yaml") != 0)) {
        free(only);
        return error_set(err, -ENOENT,
                         "%s: a ConfigMap directory needs a config.yaml key or exactly one "
                         "key (%zu found)",
                         dir, n);
    }
    (void)strbuf_printf(&p, "%s/%s", dir, only);
    free(only);
    *ret = strbuf_take(&p);
    return *ret ? 0 : error_set(err, -ENOMEM, "out of memory");
}

int mig_config_load(const char *path, struct mig_config **ret, struct error *err)
{
    char *data = NULL, *file = NULL;
    size_t len = 0;
    int r;

    if (!path || !*path)
        return error_set(err, -EINVAL, "no MIG config file given (-f/--config-file)");
    if (strcmp(path, "-") == 0) {
        r = file_read_all("/dev/stdin", MIG_CONFIG_MAX_BYTES, &data, &len, err);
        file = str_dup("<stdin>");
    } else if (path_is_dir(path)) {
        r = dir_file(path, &file, err);
        if (r == 0)
            r = file_read_all(file, MIG_CONFIG_MAX_BYTES, &data, &len, err);
    } else {
        file = str_dup(path);
        r = file_read_all(path, MIG_CONFIG_MAX_BYTES, &data, &len, err);
    }
    if (r == 0)
        r = mig_config_parse(data, len, file, ret, err);
    free(data);
    free(file);
    return r;
}

void mig_config_free(struct mig_config *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->sets[i].label);
        free(c->sets[i].entries);
    }
    free(c->sets);
    free(c->file);
    free(c);
}

const struct mig_config_set *mig_config_find(const struct mig_config *c, const char *label,
                                             struct error *err)
{
    if (!label || !*label) {
        if (c->n == 1)
            return &c->sets[0];
        return error_set(err, -EINVAL, "%s has %zu configs: select one with -c", c->file, c->n),
               NULL;
    }
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->sets[i].label, label) == 0)
            return &c->sets[i];
    struct strbuf names = STRBUF_INIT;
    for (size_t i = 0; i < c->n && i < 40; i++)
        (void)strbuf_printf(&names, "%s%s", i ? ", " : "", c->sets[i].label);
    error_set(err, -ENOENT, "%s has no MIG config '%s'; it has %s", c->file, label,
              strbuf_str(&names));
    strbuf_release(&names);
    return NULL;
}

bool mig_config_entry_selects(const struct mig_config_entry *e, unsigned index, uint32_t pci_id)
{
    bool filter_ok = e->n_filter == 0;
    for (size_t i = 0; i < e->n_filter; i++)
        filter_ok |= e->device_filter[i] == pci_id;
    return filter_ok && (e->all_devices || (index < 64 && (e->device_mask >> index) & 1));
}

const struct mig_config_entry *mig_config_for_gpu(const struct mig_config_set *s, unsigned index,
                                                  uint32_t pci_id)
{
    const struct mig_config_entry *found = NULL;
    for (size_t i = 0; i < s->n; i++)
        if (mig_config_entry_selects(&s->entries[i], index, pci_id))
            found = &s->entries[i]; /* mig-parted applies every match in order: last wins */
    return found;
}

int mig_config_want(const struct mig_config_entry *e, const struct mig_gpu_model *m,
                    struct mig_want *ret, struct error *err)
{
    memset(ret, 0, sizeof(*ret));
    for (size_t i = 0; i < e->n_devices; i++) {
        int r = mig_want_add(m, &e->devices[i].spec, e->devices[i].count, ret, err);
        if (r < 0) {
            error_prefix(err, "%s", e->devices[i].name);
            return r;
        }
    }
    return 0;
}

/* ---- hooks --------------------------------------------------------------------------------- */

static const char *const hook_names[MIG_HOOK_NAMES] = {"apply-start", "pre-apply-mode",
                                                       "pre-apply-config", "apply-exit"};

int mig_hook_index(const char *name)
{
    for (int i = 0; i < MIG_HOOK_NAMES; i++)
        if (strcmp(hook_names[i], name) == 0)
            return i;
    return -1;
}

static int strv_from_seq(struct parse *ps, struct fy_node *v, char ***out, const char *what)
{
    void *it = NULL;
    if (fy_node_get_type(v) != FYNT_SEQUENCE)
        return perr(ps, v, "%s must be a list of strings", what);
    for (struct fy_node *i = fy_node_sequence_iterate(v, &it); i;
         i = fy_node_sequence_iterate(v, &it)) {
        char *t = text(ps, i);
        int r = t ? strv_push(out, t) : perr(ps, i, "%s must be strings", what);
        free(t);
        if (r < 0)
            return r;
    }
    return 0;
}

static int parse_hook(struct parse *ps, struct fy_node *n, struct mig_hook *h)
{
    void *it = NULL;
    int r = 0;

    if (fy_node_get_type(n) != FYNT_MAPPING)
        return perr(ps, n, "a hook is a mapping with command, args, envs, workdir");
    for (struct fy_node_pair *p = fy_node_mapping_iterate(n, &it); p && r == 0;
         p = fy_node_mapping_iterate(n, &it)) {
        char *k = text(ps, fy_node_pair_key(p));
        struct fy_node *v = fy_node_pair_value(p);
        if (k && strcmp(k, "command") == 0) {
            free(h->command);
            h->command = text(ps, v);
            if (!h->command)
                r = perr(ps, v, "command must be a string");
        } else if (k && strcmp(k, "workdir") == 0) {
            free(h->workdir);
            h->workdir = text(ps, v);
        } else if (k && strcmp(k, "args") == 0) {
            r = strv_from_seq(ps, v, &h->args, "args");
        } else if (k && strcmp(k, "envs") == 0) {
            void *eit = NULL;
            if (fy_node_get_type(v) != FYNT_MAPPING)
                r = perr(ps, v, "envs must map names to values");
            for (struct fy_node_pair *e = r == 0 ? fy_node_mapping_iterate(v, &eit) : NULL;
                 e && r == 0; e = fy_node_mapping_iterate(v, &eit)) {
                char *ek = text(ps, fy_node_pair_key(e)), *ev = text(ps, fy_node_pair_value(e));
                struct strbuf kv = STRBUF_INIT;
                r = ek && ev ? strbuf_printf(&kv, "%s=%s", ek, ev)
                             : perr(ps, v, "envs values must be strings");
                if (r == 0)
                    r = strv_push(&h->envs, strbuf_str(&kv));
                strbuf_release(&kv);
                free(ek);
                free(ev);
            }
        } else {
            r = perr(ps, fy_node_pair_key(p), "unexpected hook field: %s", k ? k : "?");
        }
        free(k);
    }
    if (r == 0 && !h->command)
        r = perr(ps, n, "a hook needs a command");
    return r;
}

int mig_hooks_load(const char *path, struct mig_hooks *ret, struct error *err)
{
    struct parse ps = {.file = path, .err = err};
    struct mig_hooks h = {0};
    struct fy_node *root, *hooks;
    char *data = NULL;
    size_t len = 0;
    void *it = NULL;
    int r = file_read_all(path, MIG_CONFIG_MAX_BYTES, &data, &len, err);

    if (r < 0)
        return r;
    root = yaml_parse(data, len, 0, &ps.doc, NULL, NULL, NULL, NULL, 0) == 0 ? yaml_root(&ps.doc)
                                                                             : NULL;
    if (!root || fy_node_get_type(root) != FYNT_MAPPING) {
        r = error_set(err, -EINVAL, "%s: expected version: v1 and hooks:", path);
        goto out;
    }
    hooks = fy_node_mapping_lookup_by_string(root, "hooks", FY_NT);
    if (!hooks || fy_node_get_type(hooks) != FYNT_MAPPING) {
        r = error_set(err, -EINVAL, "%s: no 'hooks' mapping", path);
        goto out;
    }
    for (struct fy_node_pair *p = fy_node_mapping_iterate(hooks, &it); p && r == 0;
         p = fy_node_mapping_iterate(hooks, &it)) {
        char *name = text(&ps, fy_node_pair_key(p));
        int idx = name ? mig_hook_index(name) : -1;
        struct fy_node *list = fy_node_pair_value(p);
        void *lit = NULL;
        if (idx < 0)
            r = perr(&ps, fy_node_pair_key(p),
                     "unknown hook '%s' (apply-start, pre-apply-mode, pre-apply-config, "
                     "apply-exit)",
                     name ? name : "?");
        else if (fy_node_get_type(list) != FYNT_SEQUENCE)
            r = perr(&ps, list, "hook '%s' must be a list", name);
        free(name);
        for (struct fy_node *e = r == 0 ? fy_node_sequence_iterate(list, &lit) : NULL; e && r == 0;
             e = fy_node_sequence_iterate(list, &lit)) {
            struct mig_hook *grown = realloc(h.list[idx], (h.n[idx] + 1) * sizeof(*grown));
            if (!grown) {
                r = error_set(err, -ENOMEM, "out of memory");
                break;
            }
            h.list[idx] = grown;
            memset(&grown[h.n[idx]], 0, sizeof(grown[0]));
            r = parse_hook(&ps, e, &grown[h.n[idx]]);
            h.n[idx]++;
        }
    }
out:
    yaml_doc_release(&ps.doc);
    free(data);
    if (r < 0) {
        mig_hooks_release(&h);
        return r;
    }
    *ret = h;
    return 0;
}

void mig_hooks_release(struct mig_hooks *h)
{
    for (int i = 0; i < MIG_HOOK_NAMES; i++) {
        for (size_t k = 0; k < h->n[i]; k++) {
            free(h->list[i][k].command);
            free(h->list[i][k].workdir);
            strv_free(h->list[i][k].args);
            strv_free(h->list[i][k].envs);
        }
        free(h->list[i]);
    }
    memset(h, 0, sizeof(*h));
}

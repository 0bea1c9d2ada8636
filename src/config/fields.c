/* SPDX-License-Identifier: Apache-2.0 */
/* fields.c: the flags sections of the v1 schema as descriptor tables — each key once, with
 * its type, value table and place in struct cfg_config. Parsing (parse.c), printing
 * (print.c) and flag/env overrides (overrides.c, through each option's config_key) all walk
 * these tables, so a key is spelled in one place and cannot drift between them. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "config/internal.h"

#define F(k, t, member, ...)                                                                       \
    {                                                                                              \
        .key = k, .type = t, .off = offsetof(struct cfg_config, member), __VA_ARGS__               \
    }

static const struct cfg__field plugin_fields[] = {
    F("passDeviceSpecs", CFG__F_BOOL, flags.plugin.pass_device_specs),
    F("deviceListStrategy", CFG__F_LIST_STRATEGIES, flags.plugin.device_list_strategies),
    F("deviceIDStrategy", CFG__F_ENUM, flags.plugin.device_id_strategy,
      .values = cfg__device_id_strategies),
    F("cdiAnnotationPrefix", CFG__F_STR, flags.plugin.cdi_annotation_prefix),
    F("nvidiaCTKPath", CFG__F_STR, flags.plugin.nvidia_ctk_path),
    F("containerDriverRoot", CFG__F_STR, flags.plugin.container_driver_root),
    F("sharedDevicesAllocationPolicy", CFG__F_ENUM, flags.plugin.shared_devices_allocation_policy,
      .values = cfg__alloc_policies),
};

static const struct cfg__field gfd_fields[] = {
    F("oneshot", CFG__F_BOOL, flags.gfd.oneshot),
    F("noTimestamp", CFG__F_BOOL, flags.gfd.no_timestamp),
    F("sleepInterval", CFG__F_DURATION, flags.gfd.sleep_interval_ms),
    /* an empty string is meaningful here: write the labels to stdout */
    F("outputFile", CFG__F_STR, flags.gfd.output_file),
    F("machineTypeFile", CFG__F_STR, flags.gfd.machine_type_file),
};

static const struct cfg__section plugin_section = {"flags.plugin", plugin_fields,
                                                   GS_ARRAY_SIZE(plugin_fields)};
static const struct cfg__section gfd_section = {"flags.gfd", gfd_fields, GS_ARRAY_SIZE(gfd_fields)};

static const struct cfg__field flags_fields[] = {
    F("migStrategy", CFG__F_ENUM, flags.mig_strategy, .values = cfg__mig_strategies,
      .pos_off = offsetof(struct cfg__ctx, pos_mig_strategy) + 1),
    F("failOnInitError", CFG__F_BOOL, flags.fail_on_init_error),
    F("mpsRoot", CFG__F_STR_EMPTY_NULL, flags.mps_root,
      .pos_off = offsetof(struct cfg__ctx, pos_mps_root) + 1),
    F("nvidiaDriverRoot", CFG__F_STR, flags.nvidia_driver_root),
    F("nvidiaDevRoot", CFG__F_STR_EMPTY_NULL, flags.nvidia_dev_root),
    F("gdrcopyEnabled", CFG__F_BOOL, flags.gdrcopy_enabled),
    F("gdsEnabled", CFG__F_BOOL, flags.gds_enabled),
    F("mofedEnabled", CFG__F_BOOL, flags.mofed_enabled),
    F("useNodeFeatureAPI", CFG__F_BOOL, flags.gfd.use_node_feature_api),
    F("deviceDiscoveryStrategy", CFG__F_ENUM, flags.device_discovery_strategy,
      .values = cfg__discovery_strategies),
    F("plugin", CFG__F_SECTION, flags.plugin, .sub = &plugin_section),
    F("gfd", CFG__F_SECTION, flags.gfd, .sub = &gfd_section),
};

const struct cfg__section cfg__flags_section = {"flags", flags_fields, GS_ARRAY_SIZE(flags_fields)};

const char *const *cfg__section_keys(const struct cfg__section *s)
{
    /* walk_map() takes a NULL-terminated key list: one per section, built once */
    static const char *keys[3][CFG__MAX_FIELDS + 1];
    static const struct cfg__section *owner[3];
    for (size_t i = 0; i < 3; i++) {
        if (owner[i] == s)
            return keys[i];
        if (!owner[i]) {
            for (size_t k = 0; k < s->n && k < CFG__MAX_FIELDS; k++)
                keys[i][k] = s->fields[k].key;
            owner[i] = s;
            return keys[i];
        }
    }
    return NULL;
}

/* "flags.plugin.cdiAnnotationPrefix" -> its field, searching the sections below s. */
static const struct cfg__field *find(const struct cfg__section *s, const char *path)
{
    size_t n = strlen(s->path);
    if (strncmp(path, s->path, n) != 0 || path[n] != '.')
        return NULL;
    for (size_t i = 0; i < s->n; i++) {
        const struct cfg__field *f = &s->fields[i];
        if (f->type == CFG__F_SECTION) {
            const struct cfg__field *sub = find(f->sub, path);
            if (sub)
                return sub;
        } else if (strcmp(path + n + 1, f->key) == 0) {
            return f;
        }
    }
    return NULL;
}

const struct cfg__field *cfg__field_find(const char *path)
{
    return path ? find(&cfg__flags_section, path) : NULL;
}

void *cfg__field_ptr(const struct cfg__field *f, struct cfg_config *cfg)
{
    return (char *)cfg + f->off;
}

int cfg__field_set(const struct cfg__field *f, struct cfg_config *cfg, const char *v)
{
    void *p = cfg__field_ptr(f, cfg);
    const char *bad;
    size_t bad_len;
    unsigned bits;
    int64_t ms;
    bool b;
    int i;

    switch (f->type) {
    case CFG__F_BOOL:
        if (parse_bool(v, &b) < 0)
            return -EINVAL;
        *(bool *)p = b;
        return 0;
    case CFG__F_STR:
        return cfg__set_str(p, v) ? 0 : -ENOMEM;
    case CFG__F_STR_EMPTY_NULL:
        return cfg__set_str(p, *v ? v : NULL) ? 0 : -ENOMEM;
    case CFG__F_ENUM:
        i = cfg__lookup(f->values, v);
        if (i < 0)
            return -EINVAL;
        *(int *)p = i; /* the enums are int-sized (checked below) */
        return 0;
    case CFG__F_DURATION:
        if (cfg_duration_parse_ms(v, &ms, NULL) < 0)
            return -EINVAL;
        *(int64_t *)p = ms;
        return 0;
    case CFG__F_LIST_STRATEGIES:
        if (cfg__list_strategies_parse(v, &bits, &bad, &bad_len) < 0)
            return -EINVAL;
        *(unsigned *)p = bits;
        return 0;
    case CFG__F_SECTION:
        break;
    }
    return -EINVAL;
}

_Static_assert(sizeof(enum cfg_mig_strategy) == sizeof(int), "enum fields are stored as int");
_Static_assert(sizeof(enum cfg_device_id_strategy) == sizeof(int), "enum fields as int");
_Static_assert(sizeof(enum cfg_alloc_policy) == sizeof(int), "enum fields as int");
_Static_assert(sizeof(enum cfg_discovery) == sizeof(int), "enum fields as int");

/* SPDX-License-Identifier: Apache-2.0 */
/* overrides.c: NVIDIA's command-line flags and environment variables as one static
 * table, and the overlay of their values on a config (flag > env > file > default).
 * The device-plugin command reuses the table for its own flags. Pure: env vars are read
 * through a caller-given function. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/internal.h"

#define P CFG_BIN_PLUGIN
#define G CFG_BIN_GFD

static const struct cfg_option options[] = {
    {.id = CFG_OPT_MIG_STRATEGY,
     .flags = {"mig-strategy"},
     .envs = {"GFD_MIG_STRATEGY", "MIG_STRATEGY"},
     .config_key = "flags.migStrategy",
     .type = CFG_VAL_ENUM,
     .allowed = cfg__mig_strategies,
     .default_value = "none",
     .binaries = P | G,
     .help = "how MIG devices are exposed"},
    {.id = CFG_OPT_FAIL_ON_INIT_ERROR,
     .flags = {"fail-on-init-error"},
     .envs = {"GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"},
     .config_key = "flags.failOnInitError",
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "true",
     .binaries = P | G,
     .help = "fail when NVML cannot be initialised, instead of idling"},
    {.id = CFG_OPT_DRIVER_ROOT,
     .flags = {"driver-root", "nvidia-driver-root"},
     .envs = {"NVIDIA_DRIVER_ROOT"},
     .config_key = "flags.nvidiaDriverRoot",
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "/",
     .binaries = P,
     .help = "host path of the driver installation"},
    {.id = CFG_OPT_DEV_ROOT,
     .flags = {"dev-root", "nvidia-dev-root"},
     .envs = {"NVIDIA_DEV_ROOT"},
     .config_key = "flags.nvidiaDevRoot",
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "",
     .binaries = P,
     .help = "host path of the device nodes (empty: the driver root)"},
    {.id = CFG_OPT_PASS_DEVICE_SPECS,
     .flags = {"pass-device-specs"},
     .envs = {"PASS_DEVICE_SPECS"},
     .config_key = "flags.plugin.passDeviceSpecs",
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "false",
     .binaries = P,
     .help = "return DeviceSpecs in Allocate (CPUManager compatibility)"},
    {.id = CFG_OPT_DEVICE_LIST_STRATEGY,
     .flags = {"device-list-strategy"},
     .envs = {"DEVICE_LIST_STRATEGY"},
     .config_key = "flags.plugin.deviceListStrategy",
     .type = CFG_VAL_ENUM_LIST,
     .allowed = cfg__list_strategies,
     .default_value = "envvar",
     .binaries = P,
     .help = "how devices are passed to containers (comma-separated)"},
    {.id = CFG_OPT_DEVICE_ID_STRATEGY,
     .flags = {"device-id-strategy"},
     .envs = {"DEVICE_ID_STRATEGY"},
     .config_key = "flags.plugin.deviceIDStrategy",
     .type = CFG_VAL_ENUM,
     .allowed = cfg__device_id_strategies,
     .default_value = "uuid",
     .binaries = P,
     .help = "identify devices by UUID or index"},
    {.id = CFG_OPT_GDRCOPY_ENABLED,
     .flags = {"gdrcopy-enabled"},
     .envs = {"GDRCOPY_ENABLED"},
     .config_key = "flags.gdrcopyEnabled",
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "false",
     .binaries = P,
     .help = "request GDRCopy in containers"},
    {.id = CFG_OPT_GDS_ENABLED,
     .flags = {"gds-enabled"},
     .envs = {"GDS_ENABLED"},
     .config_key = "flags.gdsEnabled",
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "false",
     .binaries = P,
     .help = "request GPUDirect Storage in containers"},
    {.id = CFG_OPT_MOFED_ENABLED,
     .flags = {"mofed-enabled"},
     .envs = {"MOFED_ENABLED"},
     .config_key = "flags.mofedEnabled",
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "false",
     .binaries = P,
     .help = "request MOFED in containers"},
    {.id = CFG_OPT_CDI_ANNOTATION_PREFIX,
     .flags = {"cdi-annotation-prefix"},
     .envs = {"CDI_ANNOTATION_PREFIX"},
     .config_key = "flags.plugin.cdiAnnotationPrefix",
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "cdi.k8s.io/",
     .binaries = P,
     .help = "prefix of the CDI annotation keys"},
    {.id = CFG_OPT_NVIDIA_CDI_HOOK_PATH,
     .flags = {"nvidia-cdi-hook-path", "nvidia-ctk-path"},
     .envs = {"NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH"},
     .config_key = "flags.plugin.nvidiaCTKPath",
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "/usr/bin/nvidia-ctk",
     .binaries = P,
     .help = "hook path written into generated CDI specs"},
    {.id = CFG_OPT_CONTAINER_DRIVER_ROOT,
     .flags = {"driver-root-ctr-path", "container-driver-root"},
     .envs = {"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"},
     .config_key = "flags.plugin.containerDriverRoot",
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "/driver-root",
     .binaries = P | G,
     .help = "where the driver root is mounted in this container"},
    {.id = CFG_OPT_MPS_ROOT,
     .flags = {"mps-root"},
     .envs = {"MPS_ROOT"},
     .config_key = "flags.mpsRoot",
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "",
     .binaries = P,
     .help = "host path for the MPS pipe, log and shm directories"},
    {.id = CFG_OPT_SHARED_DEVICES_ALLOCATION_POLICY,
     .flags = {"shared-devices-allocation-policy"},
     .envs = {"SHARED_DEVICES_ALLOCATION_POLICY"},
     .config_key = "flags.plugin.sharedDevicesAllocationPolicy",
     .type = CFG_VAL_ENUM,
     .allowed = cfg__alloc_policies,
     .default_value = "distributed",
     .binaries = P,
     .help = "spread replicas over GPUs or pack them"},
    {.id = CFG_OPT_DEVICE_DISCOVERY_STRATEGY,
     .flags = {"device-discovery-strategy"},
     .envs = {"DEVICE_DISCOVERY_STRATEGY"},
     .config_key = "flags.deviceDiscoveryStrategy",
     .type = CFG_VAL_ENUM,
     .allowed = cfg__discovery_strategies,
     .default_value = "auto",
     .binaries = P | G,
     .help = "how devices are discovered"},
    {.id = CFG_OPT_IMEX_CHANNEL_IDS,
     .flags = {"imex-channel-ids"},
     .envs = {"IMEX_CHANNEL_IDS"},
     .config_key = "imex.channelIDs",
     .type = CFG_VAL_INT_LIST,
     .allowed = NULL,
     .default_value = "",
     .binaries = P,
     .help = "IMEX channels to inject (only 0)"},
    {.id = CFG_OPT_IMEX_REQUIRED,
     .flags = {"imex-required"},
     .envs = {"IMEX_REQUIRED"},
     .config_key = "imex.required",
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "false",
     .binaries = P,
     .help = "fail when a requested IMEX channel is missing"},
    {.id = CFG_OPT_KUBELET_SOCKET,
     .flags = {"kubelet-socket"},
     .envs = {"KUBELET_SOCKET"},
     .config_key = NULL,
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "/var/lib/kubelet/device-plugins/kubelet.sock",
     .binaries = P,
     .help = "kubelet registration socket (empty: do not register)"},
    {.id = CFG_OPT_CONFIG_FILE,
     .flags = {"config-file"},
     .envs = {"GFD_CONFIG_FILE", "CONFIG_FILE"},
     .config_key = NULL,
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "",
     .binaries = P | G,
     .help = "the config file (YAML or JSON)"},
    {.id = CFG_OPT_CDI_FEATURE_FLAGS,
     .flags = {"cdi-feature-flags"},
     .envs = {"CDI_FEATURE_FLAGS"},
     .config_key = NULL,
     .type = CFG_VAL_STRING_LIST,
     .allowed = NULL,
     .default_value = "",
     .binaries = P,
     .help = "feature flags for CDI spec generation"},
    {.id = CFG_OPT_CDI_DISABLE_HOOKS,
     .flags = {"cdi-disable-hooks"},
     .envs = {"CDI_DISABLE_HOOKS"},
     .config_key = NULL,
     .type = CFG_VAL_STRING_LIST,
     .allowed = NULL,
     .default_value = "",
     .binaries = P,
     .help = "OCI hooks to omit from CDI specs ('all')"},
    {.id = CFG_OPT_GFD_ONESHOT,
     .flags = {"oneshot"},
     .envs = {"GFD_ONESHOT"},
     .config_key = "flags.gfd.oneshot",
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "false",
     .binaries = G,
     .help = "label once and exit"},
    {.id = CFG_OPT_GFD_NO_TIMESTAMP,
     .flags = {"no-timestamp"},
     .envs = {"GFD_NO_TIMESTAMP"},
     .config_key = "flags.gfd.noTimestamp",
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "false",
     .binaries = G,
     .help = "leave out the timestamp label"},
    {.id = CFG_OPT_GFD_SLEEP_INTERVAL,
     .flags = {"sleep-interval"},
     .envs = {"GFD_SLEEP_INTERVAL"},
     .config_key = "flags.gfd.sleepInterval",
     .type = CFG_VAL_DURATION,
     .allowed = NULL,
     .default_value = "60s",
     .binaries = G,
     .help = "time between labelling runs ('infinite' allowed)"},
    {.id = CFG_OPT_GFD_OUTPUT_FILE,
     .flags = {"output-file", "output", "o"},
     .envs = {"GFD_OUTPUT_FILE"},
     .config_key = "flags.gfd.outputFile",
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "/etc/kubernetes/node-feature-discovery/features.d/gfd",
     .binaries = G,
     .help = "labels file"},
    {.id = CFG_OPT_GFD_MACHINE_TYPE_FILE,
     .flags = {"machine-type-file"},
     .envs = {"GFD_MACHINE_TYPE_FILE"},
     .config_key = "flags.gfd.machineTypeFile",
     .type = CFG_VAL_STRING,
     .allowed = NULL,
     .default_value = "/sys/class/dmi/id/product_name",
     .binaries = G,
     .help = "file holding the machine type"},
    {.id = CFG_OPT_USE_NODE_FEATURE_API,
     .flags = {"use-node-feature-api"},
     .envs = {"GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"},
     .config_key = "flags.useNodeFeatureAPI",
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "true",
     .binaries = G,
     .help = "publish labels as a NodeFeature object"},
    {.id = CFG_OPT_STRICT_NVIDIA_SCHEMA,
     .flags = {"strict-nvidia-schema"},
     .envs = {"GPUSLICE_STRICT_NVIDIA_SCHEMA"},
     .config_key = NULL,
     .type = CFG_VAL_BOOL,
     .allowed = NULL,
     .default_value = "false",
     .binaries = P | G,
     .help = "refuse what NVIDIA's plugin would reject or read differently (replicas 1, "
             "resources, rename, devices, memoryLimit, threadPercentage)"},
};

#undef P
#undef G

const struct cfg_option *cfg_options(size_t *ret_n)
{
    *ret_n = GS_ARRAY_SIZE(options);
    return options;
}

/* The GFD_ env names belong to GPU feature discovery only; the plugin ignores them. */
static bool env_applies(const char *env, unsigned binaries)
{
    return !str_startswith(env, "GFD_") || (binaries & CFG_BIN_GFD);
}

const struct cfg_option *cfg_option_find(const char *flag_or_env, unsigned binaries,
                                         bool *ret_is_env)
{
    const char *flag = flag_or_env;

    if (flag[0] == '-')
        flag += flag[1] == '-' ? 2 : 1;
    for (size_t i = 0; i < GS_ARRAY_SIZE(options); i++) {
        const struct cfg_option *o = &options[i];
        if (!(o->binaries & binaries))
            continue;
        for (size_t k = 0; k < GS_ARRAY_SIZE(o->flags) && o->flags[k]; k++)
            if (strcmp(o->flags[k], flag) == 0) {
                if (ret_is_env)
                    *ret_is_env = false;
                return o;
            }
        for (size_t k = 0; flag == flag_or_env && k < GS_ARRAY_SIZE(o->envs) && o->envs[k]; k++)
            if (strcmp(o->envs[k], flag_or_env) == 0 && env_applies(o->envs[k], binaries)) {
                if (ret_is_env)
                    *ret_is_env = true;
                return o;
            }
    }
    return NULL;
}

void cfg_overrides_init(struct cfg_overrides *o, unsigned binaries)
{
    *o = (struct cfg_overrides){.binaries = binaries};
}

void cfg_overrides_release(struct cfg_overrides *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < CFG_OPT__COUNT; i++) {
        free(o->v[i].value);
        free(o->v[i].source);
    }
    cfg_overrides_init(o, o->binaries);
}

static int check_value(const struct cfg_option *opt, const char *value, const char *source,
                       struct error *err)
{
    struct strbuf allowed = STRBUF_INIT;
    const char *bad;
    size_t bad_len;
    unsigned bits;
    bool b;
    int64_t ms;
    int r = 0;

    switch (opt->type) {
    case CFG_VAL_BOOL:
        if (parse_bool(value, &b) < 0)
            r = error_set(err, -EINVAL, "%s: '%s' is not a boolean; use true or false", source,
                          value);
        break;
    case CFG_VAL_ENUM:
        if (cfg__lookup(opt->allowed, value) < 0) {
            cfg__join_allowed(opt->allowed, &allowed);
            r = error_set(err, -EINVAL, "%s: '%s' is not allowed; use one of %s", source, value,
                          strbuf_str(&allowed));
        }
        break;
    case CFG_VAL_ENUM_LIST:
        if (cfg__list_strategies_parse(value, &bits, &bad, &bad_len) < 0) {
            cfg__join_allowed(opt->allowed, &allowed);
            r = error_set(err, -EINVAL, "%s: invalid strategy '%.*s'; use %s (comma-separated)",
                          source, (int)bad_len, bad, strbuf_str(&allowed));
        }
        break;
    case CFG_VAL_DURATION:
        if (cfg_duration_parse_ms(value, &ms, err) < 0) {
            error_prefix(err, "%s", source);
            r = -EINVAL;
        }
        break;
    case CFG_VAL_INT_LIST:
        /* IMEX is the only int list, and only [] or [0] are valid */
        if (*value && strcmp(value, "0") != 0)
            r = error_set(err, -EINVAL,
                          "%s: '%s' is not valid; the IMEX channel IDs must be "
                          "empty or 0",
                          source, value);
        break;
    case CFG_VAL_STRING:
    case CFG_VAL_STRING_LIST:
        break;
    }
    strbuf_release(&allowed);
    return r;
}

int cfg_overrides_set(struct cfg_overrides *o, const char *flag_or_env_name, const char *value,
                      struct error *err)
{
    struct strbuf src = STRBUF_INIT;
    const struct cfg_option *opt;
    struct cfg_override *slot;
    char *v = NULL, *s = NULL;
    bool is_env = false;
    int r;

    opt = cfg_option_find(flag_or_env_name, o->binaries, &is_env);
    if (!opt)
        return error_set(err, -ENOENT, "unknown flag or environment variable '%s'",
                         flag_or_env_name);
    slot = &o->v[opt->id];
    if (is_env && slot->set && slot->from_flag)
        return 0; /* a flag beats an env var */
    if (is_env)
        r = strbuf_puts(&src, flag_or_env_name);
    else
        r = strbuf_printf(&src, "--%s", flag_or_env_name + strspn(flag_or_env_name, "-"));
    if (r < 0)
        return error_set(err, r, "out of memory");
    r = check_value(opt, value, strbuf_str(&src), err);
    if (r < 0)
        goto out;
    v = strdup(value);
    s = strbuf_take(&src);
    if (!v || !s) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    free(slot->value);
    free(slot->source);
    *slot = (struct cfg_override){true, !is_env, v, s};
    v = s = NULL;
out:
    free(v);
    free(s);
    strbuf_release(&src);
    return r;
}

int cfg_overrides_from_env(struct cfg_overrides *o, const char *(*getenv_fn)(const char *),
                           struct error *err)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(options); i++) {
        const struct cfg_option *opt = &options[i];
        if (!(opt->binaries & o->binaries))
            continue;
        for (size_t k = 0; k < GS_ARRAY_SIZE(opt->envs) && opt->envs[k]; k++) {
            const char *v;
            int r;
            if (!env_applies(opt->envs[k], o->binaries))
                continue;
            v = getenv_fn(opt->envs[k]);
            if (!v || !*v)
                continue;
            r = cfg_overrides_set(o, opt->envs[k], v, err);
            if (r < 0)
                return r;
            break; /* first match wins */
        }
    }
    return 0;
}

const char *cfg_overrides_get(const struct cfg_overrides *o, enum cfg_option_id id)
{
    if ((unsigned)id >= CFG_OPT__COUNT || !o->v[id].set)
        return NULL;
    return o->v[id].value;
}

/* An option that overrides a config key sets that key's field through the descriptor table
 * (fields.c); the few others are handled here. Values were checked when they were set. */
static bool apply_one(enum cfg_option_id id, const char *v, struct cfg_config *cfg)
{
    const struct cfg_option *o = &options[id];
    const struct cfg__field *f = cfg__field_find(o->config_key);
    bool b = false;

    if (f)
        return cfg__field_set(f, cfg, v) != -ENOMEM;
    (void)parse_bool(v, &b);
    switch (id) {
    case CFG_OPT_IMEX_CHANNEL_IDS:
        free(cfg->imex.channel_ids);
        cfg->imex.channel_ids = NULL;
        cfg->imex.n_channel_ids = 0;
        if (*v) {
            cfg->imex.channel_ids = calloc(1, sizeof(unsigned));
            if (!cfg->imex.channel_ids)
                return false;
            cfg->imex.n_channel_ids = 1;
        }
        return true;
    case CFG_OPT_IMEX_REQUIRED:
        cfg->imex.required = b;
        return true;
    default: /* command-line only: no config key */
        return true;
    }
}

int cfg_overrides_apply(const struct cfg_overrides *o, struct cfg_config *cfg, struct error *err)
{
    for (size_t i = 0; i < CFG_OPT__COUNT; i++)
        if (o->v[i].set && !apply_one((enum cfg_option_id)i, o->v[i].value, cfg))
            return error_set(err, -ENOMEM, "out of memory applying %s", o->v[i].source);
    return 0;
}

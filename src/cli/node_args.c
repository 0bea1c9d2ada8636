/* SPDX-License-Identifier: Apache-2.0 */
/* node_args.c: the one option parser of the commands that look at this node (labels,
 * feature-discovery, and any command built on cli_node_*): the same names for the same
 * things as the daemon, taken from config/'s option table (every NVIDIA flag and env var,
 * --config-file with --config as an alias), the NVML options, -o and --help. A bad env
 * value is a usage error (exit 2), like a bad flag. Loading config + inventory + model is
 * shared too, so every command sees the node exactly as the daemon would. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define OPT_TABLE_BASE 0x2000 /* + cfg_option_id */

enum {
    OPT_CONFIG = 0x1800,
    OPT_CONFIG_NAME,
    OPT_DEFAULT_CONFIG,
    OPT_FALLBACKS,
};

/* "named,single,empty" (the daemon's --fallback-strategies) into a. */
static int set_fallbacks(struct cli_node_args *a, const char *what, const char *v)
{
    a->n_fallbacks = 0;
    while (*v) {
        size_t len = strcspn(v, ",");
        char word[16];
        if (len == 0 || len >= sizeof(word) || a->n_fallbacks >= GS_ARRAY_SIZE(a->fallbacks))
            return cli_usage_error(a->cmd, "%s: bad list '%s' (named, single, empty)", what, v);
        str_copy(word, v, len + 1);
        if (cfg_fallback_parse(word, &a->fallbacks[a->n_fallbacks]) < 0)
            return cli_usage_error(a->cmd, "%s: unknown strategy '%s' (named, single, empty)", what,
                                   word);
        a->n_fallbacks++;
        v += len + (v[len] == ',');
    }
    a->fallbacks_set = true;
    return -1;
}

static const char *env_get(const char *name)
{
    return getenv(name);
}

int cli_node_init(struct cli_node_args *a, const char *cmd, unsigned binaries)
{
    struct error err = {0};

    memset(a, 0, sizeof(*a));
    a->cmd = cmd;
    cfg_overrides_init(&a->overrides, binaries);
    gpu_nvml_options_from_env(&a->nvml);
    a->default_config = getenv("DEFAULT_CONFIG");
    if (getenv("FALLBACK_STRATEGIES") &&
        set_fallbacks(a, "FALLBACK_STRATEGIES", getenv("FALLBACK_STRATEGIES")) >= 0) {
        cfg_overrides_release(&a->overrides);
        return CLI_EXIT_USAGE;
    }
    if (cfg_overrides_from_env(&a->overrides, env_get, &err) < 0) {
        cfg_overrides_release(&a->overrides);
        return cli_usage_error(cmd, "%s", err.msg);
    }
    return -1;
}

void cli_node_release(struct cli_node_args *a)
{
    free(a->longopts);
    a->longopts = NULL;
    cfg_overrides_release(&a->overrides);
}

/* Our own options first (getopt takes the first exact match), then the command's, then
 * every flag and alias of config/'s table for a->overrides.binaries. */
static int build_longopts(struct cli_node_args *a, const struct option *extra)
{
    static const struct option own[] = {
        {"config", required_argument, NULL, OPT_CONFIG},
        {"config-file", required_argument, NULL, OPT_CONFIG},
        {"config-name", required_argument, NULL, OPT_CONFIG_NAME},
        {"default-config", required_argument, NULL, OPT_DEFAULT_CONFIG},
        {"fallback-strategies", required_argument, NULL, OPT_FALLBACKS},
        {"output", required_argument, NULL, 'o'},
        CLI_NVML_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
    };
    size_t n_table = 0, n_extra = 0, n = 0;
    const struct cfg_option *t = cfg_options(&n_table);

    while (extra && extra[n_extra].name)
        n_extra++;
    a->longopts = calloc(GS_ARRAY_SIZE(own) + n_extra + n_table * 3 + 1, sizeof(*a->longopts));
    if (!a->longopts)
        return -ENOMEM;
    for (size_t i = 0; i < GS_ARRAY_SIZE(own); i++)
        if (!(a->output_is_file && strcmp(own[i].name, "output") == 0))
            a->longopts[n++] = own[i];
    for (size_t i = 0; i < n_extra; i++)
        a->longopts[n++] = extra[i];
    for (size_t i = 0; i < n_table; i++) {
        if (!(t[i].binaries & a->overrides.binaries))
            continue;
        for (size_t k = 0; k < GS_ARRAY_SIZE(t[i].flags) && t[i].flags[k]; k++)
            a->longopts[n++] = (struct option){
                t[i].flags[k], t[i].type == CFG_VAL_BOOL ? optional_argument : required_argument,
                NULL, OPT_TABLE_BASE + (int)t[i].id};
    }
    return 0;
}

static const char *table_flag(int c)
{
    size_t n = 0;
    const struct cfg_option *t = cfg_options(&n);

    for (size_t i = 0; i < n; i++)
        if ((int)t[i].id == c - OPT_TABLE_BASE)
            return t[i].flags[0];
    return NULL;
}

int cli_node_parse(struct cli_node_args *a, int argc, char **argv, const struct option *extra,
                   int (*on_extra)(struct cli_node_args *a, int c, const char *arg, void *ctx),
                   void *ctx, void (*usage)(FILE *f))
{
    struct error err = {0};
    int c, r;

    if (build_longopts(a, extra) < 0) {
        fprintf(stderr, "gpuslice %s: out of memory\n", a->cmd);
        return CLI_EXIT_FAILURE;
    }
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:h", a->longopts, NULL)) != -1) {
        if (cli_nvml_option(c, optarg, &a->nvml)) {
            /* the roots are config too (Allocate's device paths, CDI), as in the daemon */
            const char *flag = c == CLI_OPT_DRIVER_ROOT            ? "driver-root"
                               : c == CLI_OPT_DRIVER_ROOT_CTR_PATH ? "driver-root-ctr-path"
                                                                   : NULL;
            if (flag && cfg_overrides_set(&a->overrides, flag, optarg, &err) < 0)
                return cli_usage_error(a->cmd, "%s", err.msg);
            continue;
        }
        if (c >= OPT_TABLE_BASE) {
            const char *flag = table_flag(c);
            /* a bare boolean flag means true, as Go's flag package reads it */
            if (cfg_overrides_set(&a->overrides, flag, optarg ? optarg : "true", &err) < 0)
                return cli_usage_error(a->cmd, "%s", err.msg);
            continue;
        }
        switch (c) {
        case OPT_CONFIG:
            a->config_path = optarg;
            break;
        case OPT_CONFIG_NAME:
            a->config_name = optarg;
            break;
        case OPT_DEFAULT_CONFIG:
            a->default_config = optarg;
            break;
        case OPT_FALLBACKS:
            r = set_fallbacks(a, "--fallback-strategies", optarg);
            if (r >= 0)
                return r;
            break;
        case 'o':
            if (a->output_is_file) { /* GFD's -o is its output file */
                if (cfg_overrides_set(&a->overrides, "output-file", optarg, &err) < 0)
                    return cli_usage_error(a->cmd, "%s", err.msg);
                break;
            }
            r = cli_output_option(a->cmd, optarg, &a->json);
            if (r >= 0)
                return r;
            break;
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        case ':':
        case '?':
            return cli_getopt_error(a->cmd, c, argv);
        default:
            r = on_extra ? on_extra(a, c, optarg, ctx) : CLI_EXIT_USAGE;
            if (r >= 0)
                return r;
        }
    }
    if (optind < argc)
        return cli_usage_error(a->cmd, "unexpected argument '%s'", argv[optind]);
    if (!a->config_path)
        a->config_path = cfg_overrides_get(&a->overrides, CFG_OPT_CONFIG_FILE);
    if (a->config_path && !*a->config_path)
        a->config_path = NULL;
    return -1;
}

static int load_config(const struct cli_node_args *a, struct cfg_config **ret_cfg, bool print)
{
    static const enum cfg_fallback fallbacks[] = {CFG_FALLBACK_NAMED, CFG_FALLBACK_SINGLE};
    struct cfg_load_options lo = {
        .path = a->config_path,
        .config_name = a->config_name,
        .default_name = a->default_config && *a->default_config ? a->default_config : NULL,
        .fallbacks = a->fallbacks_set ? a->fallbacks : fallbacks,
        .n_fallbacks = a->fallbacks_set ? a->n_fallbacks : GS_ARRAY_SIZE(fallbacks),
        .overrides = &a->overrides,
    };
    struct cfg_diags diags = CFG_DIAGS_INIT;
    struct strbuf sb = STRBUF_INIT;
    struct error err = {0};
    int r;

    r = cfg_load(&lo, ret_cfg, &diags, &err);
    if (print) {
        cfg_diags_format(&diags, CFG_SEV_WARNING, &sb);
        cfg_diags_format(&diags, CFG_SEV_ERROR, &sb);
        fputs(strbuf_str(&sb), stderr);
        if (r < 0)
            fprintf(stderr, "gpuslice %s: %s\n", a->cmd, err.msg);
    }
    strbuf_release(&sb);
    cfg_diags_release(&diags);
    return r;
}

int cli_node_load_config(const struct cli_node_args *a, struct cfg_config **ret_cfg)
{
    return load_config(a, ret_cfg, true);
}

bool cli_node_config_loads(const struct cli_node_args *a)
{
    struct cfg_config *cfg = NULL;
    int r = load_config(a, &cfg, false);

    cfg_free(cfg);
    return r == 0;
}

int cli_node_load(const struct cli_node_args *a, bool keep_valid, bool print_diags,
                  struct cli_node *ret)
{
    struct model_options mo = {.keep_valid = keep_valid};
    struct cli_node n = {0};
    char **warnings = NULL;
    struct error err = {0};
    int r;

    r = cli_node_load_config(a, &n.cfg);
    if (r < 0)
        goto out;
    r = gpu_inventory_open_and_read(&a->nvml, true, &n.inv, &warnings, &err);
    if (r == 0) {
        for (size_t i = 0; warnings[i]; i++)
            log_warn("%s", warnings[i]);
        r = model_build(n.inv, n.cfg, &mo, &n.model, &err);
    }
    if (r < 0) {
        fprintf(stderr, "gpuslice %s: %s\n", a->cmd, err.msg);
        goto out;
    }
    for (size_t i = 0; print_diags && i < n.model->n_diags; i++) /* kept-valid ones carry errors */
        fprintf(stderr, "gpuslice %s: %s: %s\n", a->cmd,
                n.model->diags[i].level == MODEL_DIAG_ERROR ? "error" : "warning",
                n.model->diags[i].message);
    *ret = n;
    memset(&n, 0, sizeof(n));
out:
    strv_free(warnings);
    cli_node_release_node(&n);
    return r;
}

void cli_node_release_node(struct cli_node *n)
{
    model_free(n->model);
    inv_free(n->inv);
    cfg_free(n->cfg);
    memset(n, 0, sizeof(*n));
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_plan.c: `gpuslice plan` — what this node will advertise to the kubelet with a given
 * config, before anything is rolled out: resources, device counts, sharing and memory per
 * replica, with the model's errors and warnings. Only wiring: config from config/, the
 * snapshot from gpu/, the decision and the report from model/. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "config/config.h"
#include "gpu/gpu.h"
#include "model/model.h"

enum {
    OPT_CONFIG = 256,
    OPT_CONFIG_NAME,
    OPT_MIG_STRATEGY,
};

struct plan_args {
    const char *config_path;
    const char *config_name;
    enum model_plan_format format;
    struct gpu_nvml_options nvml;
    struct cfg_overrides overrides;
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: gpuslice plan [options]\n\n"
               "Show what this node will advertise to the kubelet: resources, device counts,\n"
               "sharing, replicas and memory per replica, with errors and warnings. Reads the\n"
               "GPUs through NVML and the same config the device plugin would use (none: the\n"
               "built-in defaults). Exits 1 when the config has errors on this node.\n\n"
               "Options:\n"
               "      --config PATH          config file or ConfigMap directory (env CONFIG_FILE)\n"
               "      --config-name NAME     named config in a directory (else 'default', or the\n"
               "                             only one)\n"
               "      --mig-strategy S       none, single or mixed (env MIG_STRATEGY)\n"
               "  -o, --output FORMAT        text (default) or json\n"
               "      --nvml-library PATH    load this libnvidia-ml.so.1 (env "
               "GPUSLICE_NVML_LIBRARY)\n"
               "      --driver-root PATH     host driver root (env NVIDIA_DRIVER_ROOT; default /)\n"
               "      --driver-root-ctr-path PATH  driver root in this container (default "
               "/driver-root)\n"
               "  -h, --help                 show this help\n");
}

static const char *env_get(const char *name)
{
    return getenv(name);
}

/* Returns -1 to continue, else the exit code. */
static int parse_args(int argc, char **argv, struct plan_args *a)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, OPT_CONFIG},
        {"config-file", required_argument, NULL, OPT_CONFIG},
        {"config-name", required_argument, NULL, OPT_CONFIG_NAME},
        {"mig-strategy", required_argument, NULL, OPT_MIG_STRATEGY},
        {"output", required_argument, NULL, 'o'},
        CLI_NVML_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct error err = {0};
    bool json;
    int c, r;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
        if (cli_nvml_option(c, optarg, &a->nvml))
            continue;
        switch (c) {
        case OPT_CONFIG:
            a->config_path = optarg;
            break;
        case OPT_CONFIG_NAME:
            a->config_name = optarg;
            break;
        case OPT_MIG_STRATEGY:
            if (cfg_overrides_set(&a->overrides, "--mig-strategy", optarg, &err) < 0)
                return cli_usage_error("plan", "%s", err.msg);
            break;
        case 'o':
            r = cli_output_option("plan", optarg, &json);
            if (r >= 0)
                return r;
            a->format = json ? MODEL_PLAN_JSON : MODEL_PLAN_TEXT;
            break;
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        default:
            return cli_getopt_error("plan", c, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("plan", "unexpected argument '%s'", argv[optind]);
    if (!a->config_path)
        a->config_path = cfg_overrides_get(&a->overrides, CFG_OPT_CONFIG_FILE);
    if (a->config_path && !*a->config_path)
        a->config_path = NULL;
    gpu_nvml_options_from_env(&a->nvml);
    return -1;
}

static int load_config(const struct plan_args *a, struct cfg_config **ret_cfg)
{
    static const enum cfg_fallback fallbacks[] = {CFG_FALLBACK_NAMED, CFG_FALLBACK_SINGLE};
    struct cfg_load_options lo = {
        .path = a->config_path,
        .config_name = a->config_name,
        .fallbacks = fallbacks,
        .n_fallbacks = GS_ARRAY_SIZE(fallbacks),
        .overrides = &a->overrides,
    };
    struct cfg_diags diags = CFG_DIAGS_INIT;
    struct strbuf sb = STRBUF_INIT;
    struct error err = {0};
    int r;

    r = cfg_load(&lo, ret_cfg, &diags, &err);
    cfg_diags_format(&diags, CFG_SEV_WARNING, &sb);
    cfg_diags_format(&diags, CFG_SEV_ERROR, &sb);
    fputs(strbuf_str(&sb), stderr);
    if (r < 0)
        fprintf(stderr, "gpuslice plan: %s\n", err.msg);
    strbuf_release(&sb);
    cfg_diags_release(&diags);
    return r;
}

int cmd_plan(int argc, char **argv)
{
    struct plan_args a = {.format = MODEL_PLAN_TEXT};
    struct model_options mo = {.keep_valid = true}; /* show every problem, and what is left */
    struct cfg_config *cfg = NULL;
    struct inv_inventory *inv = NULL;
    struct model *m = NULL;
    char **warnings = NULL;
    char *text = NULL;
    struct error err = {0};
    int rc = CLI_EXIT_FAILURE;

    if (cli_admission_params_requested(argc, argv))
        return cli_plan_admission_params(argc, argv);
    cfg_overrides_init(&a.overrides, CFG_BIN_PLUGIN);
    /* env first: flags set later replace env values */
    if (cfg_overrides_from_env(&a.overrides, env_get, &err) < 0) {
        fprintf(stderr, "gpuslice plan: %s\n", err.msg);
        goto out;
    }
    rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        goto out;
    rc = CLI_EXIT_FAILURE;
    if (load_config(&a, &cfg) < 0)
        goto out;
    if (gpu_inventory_open_and_read(&a.nvml, true, &inv, &warnings, &err) < 0) {
        fprintf(stderr, "gpuslice plan: %s\n", err.msg);
        goto out;
    }
    for (size_t i = 0; warnings[i]; i++)
        log_warn("%s", warnings[i]);
    if (model_build(inv, cfg, &mo, &m, &err) < 0 ||
        model_plan_report(m, inv, a.format, &text, &err) < 0) {
        fprintf(stderr, "gpuslice plan: %s\n", err.msg);
        goto out;
    }
    fputs(text, stdout);
    rc = m->n_errors > 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
out:
    free(text);
    model_free(m);
    strv_free(warnings);
    inv_free(inv);
    cfg_free(cfg);
    cfg_overrides_release(&a.overrides);
    return rc;
}

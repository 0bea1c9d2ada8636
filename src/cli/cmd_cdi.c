/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_cdi.c: `gpuslice cdi generate` — the CDI spec the device plugin writes at start-up
 * with a cdi-* device list strategy, printed or written, so an operator can check what a
 * node's runtime will resolve before switching strategies. Wiring only: the spec is cdi/. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi/cdi.h"
#include "cli/cli.h"

enum { OPT_SPEC_DIR = 0x1a00, OPT_PROC_ROOT };

struct cdi_args {
    const char *spec_dir; /* NULL: print */
    const char *proc_root;
};

static void usage(FILE *f)
{
    fprintf(
        f, "Usage: gpuslice cdi generate [options]\n\n"
           "Print (or write) the CDI spec for kind " CDI_VENDOR "/" CDI_CLASS ": one device\n"
           "per GPU and MIG device, named as Allocate names them under the cdi-annotations\n"
           "and cdi-cri strategies, with the driver's device nodes, libraries and hooks.\n\n"
           "Options:\n"
           "      --cdi-spec-dir DIR      write DIR/" CDI_VENDOR "-" CDI_CLASS ".json\n"
           "                              atomically instead of printing (env CDI_SPEC_DIR)\n"
           "      --proc-root DIR         the driver's /proc, for MIG capability minors\n"
           "                              (env GPUSLICE_PROC_ROOT; default /proc)\n"
           "      --config-file PATH      config file or ConfigMap directory\n"
           "      --driver-root PATH      host driver root, written into host paths\n"
           "      --driver-root-ctr-path P  where that root is seen here (default /driver-root;\n"
           "                              the driver root itself when that does not exist)\n"
           "      --dev-root PATH         host root of the device nodes\n"
           "      --device-id-strategy S  uuid (default) or index: how devices are named\n"
           "      --nvidia-cdi-hook-path P, --cdi-feature-flags L, --cdi-disable-hooks L\n"
           "      --nvml-library PATH     load this libnvidia-ml.so.1 (env GPUSLICE_NVML_LIBRARY)\n"
           "  -h, --help                  show this help\n"
           "docs/cdi.md describes the spec.\n");
}

static int on_option(struct cli_node_args *a, int c, const char *arg, void *ctx)
{
    struct cdi_args *x = ctx;
    (void)a;
    if (c == OPT_SPEC_DIR)
        x->spec_dir = arg;
    else if (c == OPT_PROC_ROOT)
        x->proc_root = arg;
    return -1;
}

int cmd_cdi(int argc, char **argv)
{
    static const struct option opts[] = {
        {"cdi-spec-dir", required_argument, NULL, OPT_SPEC_DIR},
        {"proc-root", required_argument, NULL, OPT_PROC_ROOT},
        {NULL, 0, NULL, 0},
    };
    struct cdi_args x = {.spec_dir = getenv("CDI_SPEC_DIR"),
                         .proc_root = getenv("GPUSLICE_PROC_ROOT")};
    struct cli_node_args a;
    struct cli_node node = {0};
    struct cdi_options o;
    struct error err = {0};
    char *json = NULL, *path = NULL;
    int rc;

    if (argc >= 2 && strcmp(argv[1], "generate") == 0) {
        argc--;
        argv++;
    } else if (argc >= 2 && argv[1][0] != '-') {
        return cli_usage_error("cdi", "unknown subcommand \"%s\" (only: generate)", argv[1]);
    }
    rc = cli_node_init(&a, "cdi", CFG_BIN_PLUGIN);
    if (rc >= 0)
        return rc;
    rc = cli_node_parse(&a, argc, argv, opts, on_option, &x, usage);
    if (rc >= 0)
        goto out;
    rc = CLI_EXIT_FAILURE;
    if (cli_node_load(&a, true, false, &node) < 0)
        goto out;
    if (cdi_options_from_config(
            &o, node.cfg, cfg_overrides_get(&a.overrides, CFG_OPT_CDI_FEATURE_FLAGS),
            cfg_overrides_get(&a.overrides, CFG_OPT_CDI_DISABLE_HOOKS), x.proc_root, &err) < 0) {
        rc = cli_usage_error("cdi", "%s", err.msg);
        goto out;
    }
    if (cdi_spec_build(node.inv, &o, &json, &err) < 0) {
        fprintf(stderr, "gpuslice cdi: %s\n", err.msg);
        goto out;
    }
    if (!x.spec_dir || !*x.spec_dir) {
        printf("%s\n", json);
        rc = CLI_EXIT_OK;
    } else if (cdi_spec_write(x.spec_dir, NULL, json, &path, &err) < 0) {
        fprintf(stderr, "gpuslice cdi: %s\n", err.msg);
    } else {
        fprintf(stderr, "gpuslice cdi: wrote %s\n", path);
        rc = CLI_EXIT_OK;
    }
out:
    free(json);
    free(path);
    cli_node_release_node(&node);
    cli_node_release(&a);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* main.c: the gpuslice binary. Only wiring: picks the subcommand (also from argv[0], so
 * the binary can stand in for nvidia-device-plugin) and hands over. Everything that
 * decides lives in the modules under src/. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"

#ifndef GS_VERSION
#define GS_VERSION "0.0.0"
#endif
#ifndef GS_COMMIT
#define GS_COMMIT "unknown"
#endif

static const struct cli_command commands[] = {
    {"version", "print the version", cmd_version},
    {"config", "validate and show device plugin configs", cmd_config},
    {"inventory", "survey this node's GPUs (NVML)", cmd_inventory},
    {"plan", "show what this node will advertise to the kubelet", cmd_plan},
    {"device-plugin", "serve GPUs to the kubelet (NVIDIA device plugin compatible)",
     cmd_device_plugin},
    {"dra-plugin", "serve GPUs through Kubernetes DRA (NVIDIA gpu-kubelet-plugin compatible)",
     cmd_dra_plugin},
    {"config-manager", "pick the node's config from its label (NVIDIA config-manager)",
     cmd_config_manager},
    {"labels", "print this node's GPU labels", cmd_labels},
    {"feature-discovery", "label the node (NVIDIA gpu-feature-discovery compatible)",
     cmd_feature_discovery},
    {"mig", "partition MIG and plan layouts (nvidia-mig-parted compatible)", cmd_mig},
    {"mps-control-daemon", "run and supervise MPS control daemons", cmd_mps_control_daemon},
    {"mig-manager", "MIG layouts from the node label (the GPU Operator's nvidia-mig-manager)",
     cmd_mig_manager},
    {"compute-domain", "NVIDIA's ComputeDomain programs: not provided, says what to set",
     cmd_compute_domain},
    {"cdi", "write the CDI spec for this node's GPUs", cmd_cdi},
    {"top", "GPUs and the pods using them, live", cmd_top},
};

/* argv[0] names under which the binary stands in for NVIDIA's programs (the image links
 * each to gpuslice), the command each runs with the same flags, and the name NVIDIA's
 * program gives itself in `--version`/`-v` (NULL: NVIDIA's has no version flag). */
static const struct alias {
    const char *argv0;
    const char *command;
    const char *app_name;
    bool subcommands; /* the version flag only before the subcommand (mig-parted) */
} aliases[] = {
    {"nvidia-device-plugin", "device-plugin", "NVIDIA Device Plugin", false},
    {"gpu-kubelet-plugin", "dra-plugin", NULL, false},
    {"config-manager", "config-manager", NULL, false},
    {"gpu-feature-discovery", "feature-discovery", "GPU Feature Discovery", false},
    {"mps-control-daemon", "mps-control-daemon", "NVIDIA MPS Control Daemon", false},
    {"nvidia-mig-parted", "mig", "nvidia-mig-parted", true},
    {"nvidia-mig-manager", "mig-manager", "nvidia-mig-manager", false},
    /* NVIDIA's DRA chart starts these unless resources.computeDomains.enabled=false */
    {"compute-domain-kubelet-plugin", "compute-domain", NULL, false},
    {"compute-domain-controller", "compute-domain", NULL, false},
    {"compute-domain-daemon", "compute-domain", NULL, false},
};

/* NVIDIA's programs (urfave/cli) take --version and -v (Go's flag syntax: one dash or two)
 * anywhere among the program's own flags. */
static bool wants_version(const struct alias *al, int argc, char **argv)
{
    for (int i = 1; al->app_name && i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0 || (al->subcommands && a[0] != '-'))
            return false;
        a += a[0] == '-' && a[1] == '-' ? 2 : a[0] == '-' ? 1 : 0;
        if (a != argv[i] && (strcmp(a, "version") == 0 || strcmp(a, "v") == 0))
            return true;
    }
    return false;
}

/* As urfave/cli prints it from NVIDIA's info.GetVersionString(): "<name> version <v>",
 * then "commit: <c>"; a last line says what answers. */
static int alias_version(const struct alias *al)
{
    printf("%s version %s\ncommit: %s\ngpuslice %s, standing in for %s\n", al->app_name, GS_VERSION,
           GS_COMMIT, GS_VERSION, al->argv0);
    return CLI_EXIT_OK;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: gpuslice <command> [options]\n\n"
               "GPU sharing for Kubernetes: whole GPUs, MIG, time-slicing and MPS.\n\n"
               "Commands:\n");
    for (size_t i = 0; i < GS_ARRAY_SIZE(commands); i++)
        fprintf(f, "  %-18s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-18s %s\n", "help", "show this help, or a command's: gpuslice help <command>");
    fprintf(f, "\nAlso runs as NVIDIA's programs when invoked under their names (argv[0]):\n");
    for (size_t i = 0; i < GS_ARRAY_SIZE(aliases); i++)
        fprintf(f, "  %-30s = gpuslice %s\n", aliases[i].argv0, aliases[i].command);
    fprintf(f, "\nRun 'gpuslice <command> --help' for a command's options.\n");
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "gpuslice %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun 'gpuslice %s --help' for usage.\n", cmd);
    return CLI_EXIT_USAGE;
}

void cli_setup_logging(void)
{
    enum log_level level = LOG_LEVEL_INFO;
    enum log_format format = LOG_FORMAT_KLOG;
    const char *s;

    s = getenv("GPUSLICE_LOG_LEVEL");
    if (s && log_level_parse(s, &level) < 0)
        fprintf(stderr,
                "gpuslice: GPUSLICE_LOG_LEVEL=%s is not error|warn|info|debug, "
                "using info\n",
                s);
    s = getenv("GPUSLICE_LOG_FORMAT");
    if (s && log_format_parse(s, &format) < 0)
        fprintf(stderr, "gpuslice: GPUSLICE_LOG_FORMAT=%s is not text|json, using text\n", s);
    log_setup(level, format, 2);
}

int cmd_version(int argc, char **argv)
{
    (void)argv;
    if (argc > 1)
        return cli_usage_error("version", "unexpected argument '%s'", argv[1]);
    printf("gpuslice %s (commit %s)\n", GS_VERSION, GS_COMMIT);
    return CLI_EXIT_OK;
}

static const struct cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(commands); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static const char *nearest_command(const char *name)
{
    const char *best = NULL;
    unsigned best_d = 3;
    for (size_t i = 0; i < GS_ARRAY_SIZE(commands); i++) {
        unsigned d = str_distance(name, commands[i].name);
        if (d < best_d) {
            best_d = d;
            best = commands[i].name;
        }
    }
    return best;
}

int main(int argc, char **argv)
{
    const struct cli_command *cmd;
    const char *base = strrchr(argv[0], '/');

    base = base ? base + 1 : argv[0];
    cli_setup_logging();

    /* Invoked as one of NVIDIA's binary names: behave as its replacement, same flags. */
    for (size_t i = 0; i < GS_ARRAY_SIZE(aliases); i++) {
        if (strcmp(base, aliases[i].argv0) != 0)
            continue;
        if (wants_version(&aliases[i], argc, argv))
            return alias_version(&aliases[i]);
        cmd = find_command(aliases[i].command);
        if (cmd) {
            /* compute-domain says which of NVIDIA's programs it stands in for */
            argv[0] = (char *)(cmd->run == cmd_compute_domain ? base : aliases[i].command);
            return cmd->run(argc, argv);
        }
    }

    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
        return cmd_version(1, argv + 1);
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        cmd = argc > 2 ? find_command(argv[2]) : NULL;
        if (cmd) {
            char *hargv[] = {argv[2], (char *)"--help", NULL};
            return cmd->run(2, hargv);
        }
        if (argc > 2) {
            fprintf(stderr, "gpuslice: unknown command '%s'\n\n", argv[2]);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        usage(stdout);
        return CLI_EXIT_OK;
    }
    cmd = find_command(argv[1]);
    if (!cmd) {
        const char *hint = nearest_command(argv[1]);
        if (argv[1][0] == '-')
            fprintf(stderr, "gpuslice: unknown option '%s'\n\n", argv[1]);
        else if (hint)
            fprintf(stderr, "gpuslice: unknown command '%s'; did you mean '%s'?\n\n", argv[1],
                    hint);
        else
            fprintf(stderr, "gpuslice: unknown command '%s'\n\n", argv[1]);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return cmd->run(argc - 1, argv + 1);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cli.h: what main.c shares with the subcommand files (cmd_*.c). Each subcommand is
 * `int cmd_<name>(int argc, char **argv)`: argv[0] is the subcommand name, the return
 * value is the process exit code (0 ok, 1 failure, 2 usage error). */
#ifndef GS_CLI_H
#define GS_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "config/config.h"
#include "gpu/gpu.h"
#include "model/model.h"

struct option;

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE 2

struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
};

/* Prints "gpuslice <cmd>: <message>" and a hint to run --help; returns CLI_EXIT_USAGE.
 * For unknown flags, missing arguments and bad values. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets up logging from GPUSLICE_LOG_LEVEL / GPUSLICE_LOG_FORMAT (and --v/--log-format
 * flags handled by the daemon). */
void cli_setup_logging(void);

/* Options every NVML-reading command shares (NVIDIA's names and aliases). Put
 * CLI_NVML_LONGOPTS in a getopt_long table; cli_nvml_option() applies one of them. */
enum {
    CLI_OPT_NVML_LIBRARY = 0x1000,
    CLI_OPT_DRIVER_ROOT,
    CLI_OPT_DRIVER_ROOT_CTR_PATH,
};
#define CLI_NVML_LONGOPTS                                                                          \
    {"nvml-library", required_argument, NULL, CLI_OPT_NVML_LIBRARY},                               \
        {"driver-root", required_argument, NULL, CLI_OPT_DRIVER_ROOT},                             \
        {"nvidia-driver-root", required_argument, NULL, CLI_OPT_DRIVER_ROOT},                      \
        {"driver-root-ctr-path", required_argument, NULL, CLI_OPT_DRIVER_ROOT_CTR_PATH},           \
    {                                                                                              \
        "container-driver-root", required_argument, NULL, CLI_OPT_DRIVER_ROOT_CTR_PATH             \
    }

/* The usage error for what getopt_long returned when it did not recognise an option: ':'
 * (a missing value, with optstring starting with ':') or '?' (unknown). Returns
 * CLI_EXIT_USAGE. Uses optind, so call it right after getopt_long. */
int cli_getopt_error(const char *cmd, int c, char **argv);

/* True when `opt` is one of CLI_NVML_LONGOPTS; its value (borrowed) is stored in nvml. */
bool cli_nvml_option(int opt, const char *arg, struct gpu_nvml_options *nvml);

/* Parses "-o text|json": returns -1 with *ret_json set, or CLI_EXIT_USAGE after printing. */
int cli_output_option(const char *cmd, const char *arg, bool *ret_json);

/* ---- node commands: one option parser (node_args.c) ---------------------------------------
 * Commands that read this node take the daemon's names for the same things: --config-file
 * (alias --config), --config-name, every flag and env var of config/'s option table for
 * `binaries` (CFG_BIN_PLUGIN and/or CFG_BIN_GFD), the NVML options, -o text|json, -h. */
struct cli_node_args {
    const char *cmd;
    const char *config_path; /* borrowed from argv/env; NULL: built-in defaults */
    const char *config_name;
    const char *default_config;     /* --default-config / DEFAULT_CONFIG */
    enum cfg_fallback fallbacks[4]; /* --fallback-strategies / FALLBACK_STRATEGIES */
    size_t n_fallbacks;
    bool fallbacks_set;
    bool json;
    bool output_is_file; /* set before parsing: -o/--output name GFD's output file, not -o json */
    struct gpu_nvml_options nvml;
    struct cfg_overrides overrides;
    struct option *longopts; /* private */
};

/* Reads the env (NVML and the option table). Returns -1 to go on, else an exit code (a bad
 * env value is CLI_EXIT_USAGE, printed). */
int cli_node_init(struct cli_node_args *a, const char *cmd, unsigned binaries);
/* Parses argv. `extra` (NULL-name terminated, may be NULL) adds the command's own options;
 * on_extra handles them and returns -1 to go on or an exit code. Returns -1 to go on, else
 * the exit code (help printed with `usage`, or a usage error). */
int cli_node_parse(struct cli_node_args *a, int argc, char **argv, const struct option *extra,
                   int (*on_extra)(struct cli_node_args *a, int c, const char *arg, void *ctx),
                   void *ctx, void (*usage)(FILE *f));
void cli_node_release(struct cli_node_args *a);

/* The node as the daemon would see it. Owned; cli_node_release_node() frees it. */
struct cli_node {
    struct cfg_config *cfg;
    struct inv_inventory *inv;
    struct model *model;
};
/* Loads the config (diagnostics on stderr), reads NVML, builds the model (its errors and
 * warnings on stderr when print_diags). 0, or <0 after printing the error. */
int cli_node_load(const struct cli_node_args *a, bool keep_valid, bool print_diags,
                  struct cli_node *ret);
int cli_node_load_config(const struct cli_node_args *a, struct cfg_config **ret_cfg);
/* Whether the config loads and validates as the args stand, printing nothing: for a
 * command that supplies a default only when the file lacks a value. */
bool cli_node_config_loads(const struct cli_node_args *a);
void cli_node_release_node(struct cli_node *n);

/* Labels of the loaded node, with the host facts GFD reads (DMI product name from
 * --machine-type-file, PCI class from sysfs, --no-timestamp). Owned result; <0 after
 * printing the error. */
struct labels_set;
int cli_node_labels(const struct cli_node_args *a, const struct cli_node *node,
                    struct labels_set **ret_set);
/* key=value lines (sorted), or a JSON object with -o json. */
int cli_labels_print(const struct labels_set *set, bool json, FILE *f);

/* `plan --size` (sizing.c): replicas from measured memory, with the arithmetic and a config
 * fragment, as text or (json) one JSON object; exit code. metrics: a running daemon's
 * /metrics text whose recorded per-GPU pod peaks are used, or NULL (NVML's processes now).
 * cli_parse_mib reads "4621", "4621MiB", "5GiB". */
int cli_plan_size(const struct cli_node *node, uint64_t per_process_mib, unsigned headroom_pct,
                  const char *metrics, bool json, FILE *out);
int cli_parse_mib(const char *s, uint64_t *ret);

/* A running daemon's /metrics (metrics_client.c). cli_metrics_fetch GETs it from HOST:PORT
 * (owned text); cli_metrics_next reads the next sample with labels from text, returning where
 * to go on (NULL at the end); cli_metrics_label copies one label's value ("" when absent). */
struct cli_metric_sample {
    char name[96];
    char labels[1024]; /* "{a="x",b="y"}" */
    double value;
};
int cli_metrics_fetch(const char *address, char **ret, struct error *err);
const char *cli_metrics_next(const char *text, struct cli_metric_sample *ret);
void cli_metrics_label(const char *labels, const char *k, char *out, size_t size);

/* `plan -o json` (plan_json.c): resources with their devices, errors, warnings. */
int cli_plan_json(const struct model *m, const struct inv_inventory *inv, struct strbuf *out);

int cmd_version(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_inventory(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_device_plugin(int argc, char **argv);
int cmd_dra_plugin(int argc, char **argv);
int cmd_config_manager(int argc, char **argv);
int cmd_labels(int argc, char **argv);
int cmd_feature_discovery(int argc, char **argv);
int cmd_mig(int argc, char **argv);
int cmd_mps_control_daemon(int argc, char **argv);
int cmd_mig_manager(int argc, char **argv);
int cmd_compute_domain(int argc, char **argv);
int cmd_cdi(int argc, char **argv);
int cmd_top(int argc, char **argv);

/* admission.c: `gpuslice plan --admission-params` (the admission policy's parameter
 * ConfigMap); cmd_plan hands its arguments over when the flag is present. */
bool cli_admission_params_requested(int argc, char **argv);
int cli_plan_admission_params(int argc, char **argv);

#endif

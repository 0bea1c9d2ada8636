/* SPDX-License-Identifier: Apache-2.0 */
/* cli.h: what main.c shares with the subcommand files (cmd_*.c). Each subcommand is
 * `int cmd_<name>(int argc, char **argv)`: argv[0] is the subcommand name, the return
 * value is the process exit code (0 ok, 1 failure, 2 usage error). */
#ifndef GS_CLI_H
#define GS_CLI_H

#include <stdio.h>

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

int cmd_version(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_inventory(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_device_plugin(int argc, char **argv);

#endif

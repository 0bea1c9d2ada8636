/* SPDX-License-Identifier: Apache-2.0 */
/* cli_common.c: option handling shared by the subcommands, so that every command spells
 * NVIDIA's NVML-related flags and `-o text|json` the same way. */
#include <getopt.h>
#include <string.h>

#include "cli/cli.h"

bool cli_nvml_option(int opt, const char *arg, struct gpu_nvml_options *nvml)
{
    switch (opt) {
    case CLI_OPT_NVML_LIBRARY:
        nvml->library_path = arg;
        return true;
    case CLI_OPT_DRIVER_ROOT:
        nvml->driver_root = arg;
        return true;
    case CLI_OPT_DRIVER_ROOT_CTR_PATH:
        nvml->driver_root_ctr_path = arg;
        return true;
    default:
        return false;
    }
}

int cli_getopt_error(const char *cmd, int c, char **argv)
{
    if (c == ':')
        return cli_usage_error(cmd, "option '%s' needs a value", argv[optind - 1]);
    return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
}

int cli_output_option(const char *cmd, const char *arg, bool *ret_json)
{
    if (strcmp(arg, "text") == 0) {
        *ret_json = false;
        return -1;
    }
    if (strcmp(arg, "json") == 0) {
        *ret_json = true;
        return -1;
    }
    return cli_usage_error(cmd, "--output must be text or json, not '%s'", arg);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_device_plugin.c: `gpuslice device-plugin` (also `nvidia-device-plugin` by argv[0]) and
 * `gpuslice dra-plugin` (also `gpu-kubelet-plugin`, NVIDIA's DRA kubelet plugin): the same
 * daemon with other options. Only wiring: options and the loop live in daemon/. Exit 0 after
 * a clean stop, 1 when startup fails (the message says what and where), 2 for usage errors. */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "cli/cli.h"
#include "daemon/daemon.h"

static const char *env_get(const char *name)
{
    return getenv(name);
}

typedef int (*parse_fn)(struct daemon_options *o, int argc, char **argv,
                        const char *(*getenv_fn)(const char *), struct error *err);

static int run(const char *name, parse_fn parse, const char *usage, int argc, char **argv)
{
    struct daemon_options o;
    struct error err = {0};
    int rc = CLI_EXIT_FAILURE;

    if (parse(&o, argc, argv, env_get, &err) < 0) {
        rc = cli_usage_error(name, "%s", err.msg);
        goto out;
    }
    if (o.help) {
        fputs(usage, stdout);
        rc = CLI_EXIT_OK;
        goto out;
    }
    log_setup(o.log_level, o.log_format, 2);
    if (daemon_run(&o, &err) < 0) {
        log_error("%s", err.msg);
        goto out;
    }
    rc = CLI_EXIT_OK;
out:
    daemon_options_release(&o);
    return rc;
}

int cmd_device_plugin(int argc, char **argv)
{
    return run("device-plugin", daemon_options_parse, daemon_usage(), argc, argv);
}

int cmd_dra_plugin(int argc, char **argv)
{
    return run("dra-plugin", daemon_dra_options_parse, daemon_dra_usage(), argc, argv);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_dra_plugin.c: `gpuslice dra-plugin` (also `gpu-kubelet-plugin` by argv[0], NVIDIA's
 * DRA kubelet plugin). Only wiring: the options and the DRA feature live in daemon/. Exit 0
 * after a clean stop, 1 when startup fails, 2 for usage errors. */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "cli/cli.h"
#include "daemon/daemon.h"

static const char *env_get(const char *name)
{
    return getenv(name);
}

int cmd_dra_plugin(int argc, char **argv)
{
    struct daemon_options o;
    struct error err = {0};
    int rc = CLI_EXIT_FAILURE;

    if (daemon_dra_options_parse(&o, argc, argv, env_get, &err) < 0) {
        rc = cli_usage_error("dra-plugin", "%s", err.msg);
        goto out;
    }
    if (o.help) {
        fputs(daemon_dra_usage(), stdout);
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

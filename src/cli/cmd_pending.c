/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_pending.c: placeholders for commands whose modules have not landed yet. Each is a
 * weak symbol: the real cmd_<name>.c defines the strong one and replaces it at link time.
 * A placeholder never pretends to work: it says so and exits 1 (NVIDIA's chart runs these
 * names, and a silent success would hide a missing feature). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static int pending(int argc, char **argv, const char *what)
{
    const char *name = argc > 0 ? argv[0] : "?";
    fprintf(stderr, "gpuslice %s: not built yet: %s is not part of this build of gpuslice\n", name,
            what);
    return CLI_EXIT_FAILURE;
}

#define GS_PENDING(fn, what)                                                                       \
    __attribute__((weak)) int fn(int argc, char **argv)                                            \
    {                                                                                              \
        return pending(argc, argv, what);                                                          \
    }

GS_PENDING(cmd_top, "gpuslice top")

/* SPDX-License-Identifier: Apache-2.0 */
/* sharing.c: the sharing modes as descriptor rows (config.h: struct cfg_sharing_mode). The
 * parser, the checks, the model, the labels and the daemon read a mode's rules here rather
 * than testing which mode it is, so a new mode starts as one row (docs/internals/sharing.md).
 * Pure: static data. */
#include <string.h>

#include "config/config.h"

static const struct cfg_sharing_mode modes[] = {
    [CFG_SHARING_NONE] =
        {
            .strategy = CFG_SHARING_NONE,
            .name = "none",
            .title = "no sharing",
            .max_replicas = 1,
            .max_replicas_why = "",
            .on_mig = true,
        },
    [CFG_SHARING_TIME_SLICING] =
        {
            .strategy = CFG_SHARING_TIME_SLICING,
            .name = "time-slicing",
            .title = "time-slicing",
            .config_key = "timeSlicing",
            .precedence = 1,
            .max_replicas = CFG_MAX_REPLICAS,
            .max_replicas_why = "",
            .warn_fail_requests_false = true,
            .on_mig = true,
            .dra_name = "TimeSlicing",
            .dra_config_key = "timeSlicingConfig",
            .dra_time_slice = true,
        },
    /* facts §2.2/§5: NVIDIA keeps mps when both blocks are written; MPS clients need a
     * control daemon, so no MIG, no mixed, an MPS root and at most its client limit. DRA
     * (NVIDIA's driver) does run MPS on MIG devices. */
    [CFG_SHARING_MPS] =
        {
            .strategy = CFG_SHARING_MPS,
            .name = "mps",
            .title = "MPS",
            .config_key = "mps",
            .precedence = 2,
            .max_replicas = CFG_MAX_MPS_REPLICAS,
            .max_replicas_why = " with MPS (its client limit per GPU)",
            .replicas_by_client_limit = true,
            .fail_requests_default = true,
            .client_limits = true,
            .needs_mps_root = true,
            .dra_name = "MPS",
            .dra_config_key = "mpsConfig",
            .dra_config_on_mig = true,
            .control_daemon = true,
            .alloc_env = CFG_SHARING_ENV_MPS,
        },
    /* DRA only: a GPU sold by memory to many claims (KEP-5075 consumable capacity), the
     * limits made real by MPS at prepare. Never MIG (a MIG device is already a fraction with
     * its own memory); no replicas, so the device plugin serves these GPUs whole. */
    [CFG_SHARING_FRACTIONS] =
        {
            .strategy = CFG_SHARING_FRACTIONS,
            .name = "fractions",
            .title = "fractions",
            .config_key = "fractions",
            .precedence = 0, /* NVIDIA's plugin does not know the block: it keeps the other */
            .max_replicas = 1,
            .max_replicas_why = " with fractions (claims ask a GPU for memory through DRA; "
                                "remove replicas)",
            .dra_shareable = true,
        },
};

_Static_assert(GS_ARRAY_SIZE(modes) == CFG_SHARING__N, "one row per sharing mode");

const struct cfg_sharing_mode *cfg_sharing_mode(enum cfg_sharing_strategy s)
{
    return (unsigned)s < CFG_SHARING__N ? &modes[s] : &modes[CFG_SHARING_NONE];
}

bool cfg_sharing_mode_shares(const struct cfg_sharing_mode *m)
{
    return m->strategy != CFG_SHARING_NONE;
}

const struct cfg_sharing_mode *cfg_sharing_mode_by_dra_name(const char *name)
{
    for (size_t i = 0; name && i < GS_ARRAY_SIZE(modes); i++)
        if (modes[i].dra_name && strcmp(modes[i].dra_name, name) == 0)
            return &modes[i];
    return NULL;
}

const char *cfg_sharing_strategy_name(enum cfg_sharing_strategy s)
{
    return cfg_sharing_mode(s)->name;
}

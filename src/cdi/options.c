/* SPDX-License-Identifier: Apache-2.0 */
/* options.c: the CDI options as NVIDIA's plugin derives them from its flags: discovery
 * under the container's view of the driver root (--driver-root-ctr-path when it exists),
 * host paths under --driver-root / --dev-root, names by --device-id-strategy, and the two
 * toolkit lists (--cdi-feature-flags, --cdi-disable-hooks). */
#include <stdio.h>

#include "cdi/cdi.h"
#include "config/config.h"

int cdi_options_from_config(struct cdi_options *o, const struct cfg_config *cfg,
                            const char *feature_flags, const char *disable_hooks,
                            const char *proc_root, struct error *err)
{
    const struct cfg_flags *f = &cfg->flags;
    const char *host_root =
        f->nvidia_driver_root && *f->nvidia_driver_root ? f->nvidia_driver_root : "/";
    const char *ctr = f->plugin.container_driver_root;
    char dev[4096];
    int r;

    *o = (struct cdi_options){0};
    r = cdi_parse_feature_flags(feature_flags, &o->feature_flags, err);
    if (r == 0)
        r = cdi_parse_disabled_hooks(disable_hooks, &o->disabled_hooks, err);
    if (r < 0)
        return r;
    /* inside NVIDIA's container the host driver root is mounted at ctr; run on the host (or
     * in tests) there is no such folder and the driver root is read where it is */
    o->driver_root = ctr && *ctr && path_is_dir(ctr) ? ctr : host_root;
    snprintf(dev, sizeof(dev), "%s/dev", o->driver_root);
    o->dev_root = path_is_dir(dev) ? o->driver_root : "/";
    o->host_driver_root = host_root;
    o->host_dev_root = f->nvidia_dev_root && *f->nvidia_dev_root ? f->nvidia_dev_root : host_root;
    o->proc_root = proc_root;
    o->hook_path = f->plugin.nvidia_ctk_path;
    o->index_names = f->plugin.device_id_strategy == CFG_DEVICE_ID_INDEX;
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cdi.c: keeps the CDI spec in step with what is served when a cdi-annotations or cdi-cri
 * device list strategy is on: written before the first resource is served (a failure stops
 * the start: names that cannot resolve are never advertised) and rewritten whenever a new
 * snapshot changes the devices or the naming; a failure then keeps the last good spec. */
#include <stdlib.h>
#include <string.h>

#include "cdi/cdi.h"
#include "daemon/internal.h"

int daemon__cdi_update(struct daemon *d, const struct dp_snapshot *snap,
                       const struct cfg_config *cfg, bool at_start, struct error *err)
{
    const struct model *m = dp_snapshot_model(snap);
    const struct inv_inventory *inv = dp_snapshot_inventory(snap);
    struct cdi_options o;
    char *json = NULL, *path = NULL;
    int r;

    if (!m || !inv ||
        !(m->settings.device_list_strategies & (CFG_LIST_CDI_ANNOTATIONS | CFG_LIST_CDI_CRI)))
        return 0;
    r = cdi_options_from_config(
        &o, cfg, cfg_overrides_get(&d->o->overrides, CFG_OPT_CDI_FEATURE_FLAGS),
        cfg_overrides_get(&d->o->overrides, CFG_OPT_CDI_DISABLE_HOOKS), d->o->proc_root, err);
    if (r == 0)
        r = cdi_spec_build(inv, &o, &json, err);
    if (r == 0 && d->cdi_json && strcmp(d->cdi_json, json) == 0)
        goto out; /* unchanged: no rewrite, no log */
    if (r == 0)
        r = cdi_spec_write(d->o->cdi_spec_dir, json, &path, err);
    if (r < 0) {
        error_prefix(err, "CDI spec");
        if (!at_start)
            log_error("%s; keeping the last spec written", err->msg);
        goto out;
    }
    log_info("CDI spec written: %s (%zu GPUs)", path, inv->n_gpus);
    free(d->cdi_json);
    d->cdi_json = json;
    json = NULL;
out:
    free(json);
    free(path);
    return r;
}

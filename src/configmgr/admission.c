/* SPDX-License-Identifier: Apache-2.0 */
/* admission.c: the resources the admission policy guards (deployments/kustomize/components/
 * admission): the names a config advertises for shared devices whose requests may not
 * exceed 1 (failRequestsGreaterThanOne, MPS's default), with the advertised name the model
 * gives them (rename, else <name>.shared under renameByDefault, else the name). Pure. */
#include <errno.h>
#include <stdlib.h>

#include "configmgr/configmgr.h"

int cfgmgr_admission_resources(const struct cfg_config *cfg, char ***names, struct error *err)
{
    const struct cfg_sharing *s = &cfg->sharing;
    struct strbuf sb = STRBUF_INIT;
    int r = 0;

    if (!cfg_sharing_mode_shares(cfg_sharing_mode(cfg->sharing_strategy)) ||
        !s->fail_requests_greater_than_one)
        return 0;
    for (size_t i = 0; i < s->n_resources && r >= 0; i++) {
        const struct cfg_replicated_resource *rr = &s->resources[i];
        const char *name = rr->name;

        if (rr->replicas <= 1) /* not shared: a whole device, any count is fine */
            continue;
        strbuf_reset(&sb);
        if (rr->rename)
            name = rr->rename;
        else if (s->rename_by_default) {
            if (strbuf_printf(&sb, "%s.shared", rr->name) < 0) {
                r = -ENOMEM;
                break;
            }
            name = strbuf_str(&sb);
        }
        if (!strv_contains(*names, name))
            r = strv_push(names, name);
    }
    strbuf_release(&sb);
    return r < 0 ? error_set(err, r, "out of memory listing shared resources") : 0;
}

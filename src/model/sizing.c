/* SPDX-License-Identifier: Apache-2.0 */
/* sizing.c: replicas from measured memory (`gpuslice plan --size`): how many copies of the
 * largest process seen fit on a GPU once headroom is set aside. Pure arithmetic, no I/O;
 * the seed's figures (L20 46068 MiB / 4621 MiB -> 8, T4 15360 / 4401 -> 3) are its tests. */
#include <errno.h>

#include "model/model.h"

int model_size_replicas(uint64_t total_mib, uint64_t per_process_mib, unsigned headroom_pct,
                        struct model_sizing *ret)
{
    struct model_sizing s = {0};

    if (total_mib == 0 || per_process_mib == 0 || headroom_pct >= 100)
        return -EINVAL;
    s.total_mib = total_mib;
    s.per_process_mib = per_process_mib;
    s.headroom_pct = headroom_pct;
    s.usable_mib = total_mib * (100 - headroom_pct) / 100;
    s.ratio_x100 = s.usable_mib * 100 / per_process_mib;
    s.replicas = (unsigned)(s.usable_mib / per_process_mib);
    if (s.replicas < 1)
        s.replicas = 1; /* one process that needs more than the usable share still runs alone */
    *ret = s;
    return 0;
}

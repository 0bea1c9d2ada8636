/* SPDX-License-Identifier: Apache-2.0 */
/* want.c: the `--want PROFILE=COUNT,...` text of `gpuslice mig plan` read into a mig_want
 * (mig.h), over the profile grammar (profile.c) and the compute-instance packing (ci.c). Its
 * own file so that plan.c (the placement search) and ci.c (which plans through it) do not
 * call each other. Pure. */
#include <errno.h>
#include <string.h>

#include "mig/mig.h"

int mig_parse_want(const struct mig_gpu_model *m, const char *want, struct mig_want *ret,
                   struct error *err)
{
    char buf[512];

    memset(ret, 0, sizeof(*ret));
    if (!want || !*want)
        return error_set(err, -EINVAL, "--want needs PROFILE=COUNT[,PROFILE=COUNT...]");
    if (strlen(want) >= sizeof(buf))
        return error_set(err, -EINVAL, "--want is too long");
    strcpy(buf, want);
    for (char *tok = buf, *next; tok && *tok; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        char *eq = strchr(tok, '=');
        unsigned n = 1;
        if (eq) {
            *eq = '\0';
            if (parse_uint(eq + 1, &n) < 0 || n > 64)
                return error_set(err, -EINVAL, "--want: '%s' needs a count from 0 to 64", tok);
        }
        struct mig_profile_spec spec;
        int r = mig_profile_parse(tok, &spec, err);
        if (r == 0)
            r = mig_want_add(m, &spec, n, ret, err);
        if (r < 0)
            return r;
    }
    return 0;
}

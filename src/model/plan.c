/* SPDX-License-Identifier: Apache-2.0 */
/* plan.c: the `gpuslice plan` report — what this node will advertise, as a table or JSON,
 * with the model's errors and warnings. The check an operator otherwise makes by rolling
 * out and running `kubectl describe node`. Pure: formats into a string, prints nothing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/internal.h"

#define NAME_COL_MIN 22

static const struct inv_gpu *gpu_by_index(const struct inv_inventory *inv, unsigned index)
{
    for (size_t i = 0; inv && i < inv->n_gpus; i++)
        if (inv->gpus[i].index == index)
            return &inv->gpus[i];
    return NULL;
}

/* Same physical kind: product (and profile) and replica count. */
static bool same_kind(const struct inv_inventory *inv, const struct model_device *a,
                      const struct model_device *b)
{
    const struct inv_gpu *ga = gpu_by_index(inv, a->gpu_index);
    const struct inv_gpu *gb = gpu_by_index(inv, b->gpu_index);

    return strcmp(ga ? ga->name : "", gb ? gb->name : "") == 0 &&
           strcmp(a->profile, b->profile) == 0 && a->memory_mib == b->memory_mib &&
           a->replicas == b->replicas;
}

/* "1 × NVIDIA L20 (46068 MiB, ~5758 MiB per replica)", "1 × NVIDIA GB10 (memory unknown)";
 * kinds joined by "; ". */
int model_resource_gpus_text(const struct model_resource *res, const struct inv_inventory *inv,
                             struct strbuf *sb)
{
    int r = 0;

    for (size_t i = 0; i < res->n_devices && r == 0; i++) {
        const struct model_device *d = &res->devices[i];
        const struct inv_gpu *g = gpu_by_index(inv, d->gpu_index);
        size_t count = 0;
        bool first_of_kind = true;

        if (d->replica != 0)
            continue;
        for (size_t j = 0; j < i && first_of_kind; j++)
            first_of_kind = res->devices[j].replica != 0 || !same_kind(inv, &res->devices[j], d);
        if (!first_of_kind)
            continue;
        for (size_t j = i; j < res->n_devices; j++)
            count += res->devices[j].replica == 0 && same_kind(inv, &res->devices[j], d);
        if (sb->len)
            r = strbuf_puts(sb, "; ");
        if (r == 0 && d->mig_index >= 0)
            r = strbuf_printf(sb, "%zu × MIG %s on %s", count, d->profile, g ? g->name : "GPU");
        else if (r == 0)
            r = strbuf_printf(sb, "%zu × %s", count, g ? g->name : "GPU");
        if (r == 0 && d->memory_unknown) /* unified memory: NVML reports no size */
            r = strbuf_puts(sb, " (memory unknown");
        else if (r == 0)
            r = strbuf_printf(sb, " (%llu MiB", (unsigned long long)d->memory_mib);
        if (r == 0 && d->replicas > 1 && !d->memory_unknown)
            r = strbuf_printf(sb, ", ~%llu MiB per replica",
                              (unsigned long long)(d->memory_mib / d->replicas));
        if (r == 0)
            r = strbuf_putc(sb, ')');
    }
    return r;
}

static unsigned min_replicas(const struct model_resource *res)
{
    unsigned m = res->replicas;

    for (size_t i = 0; i < res->n_devices; i++)
        if (res->devices[i].replicas < m)
            m = res->devices[i].replicas;
    return m;
}

static int plan_text(const struct model *m, const struct inv_inventory *inv, struct strbuf *out)
{
    struct strbuf gpus = STRBUF_INIT, reps = STRBUF_INIT;
    int width = NAME_COL_MIN;
    int r;

    for (size_t i = 0; i < m->n_resources; i++)
        if ((int)strlen(m->resources[i].name) > width)
            width = (int)strlen(m->resources[i].name);
    r = strbuf_printf(out, "%-*s %-8s %-14s %-9s %s\n", width, "RESOURCE", "DEVICES", "SHARING",
                      "REPLICAS", "GPUS");
    for (size_t i = 0; i < m->n_resources && r == 0; i++) {
        const struct model_resource *res = &m->resources[i];
        strbuf_reset(&gpus);
        strbuf_reset(&reps);
        r = model_resource_gpus_text(res, inv, &gpus);
        if (r == 0 && res->mixed_replicas)
            r = strbuf_printf(&reps, "%u-%u", min_replicas(res), res->replicas);
        else if (r == 0)
            r = strbuf_printf(&reps, "%u", res->replicas);
        if (r == 0)
            r = strbuf_printf(out, "%-*s %-8zu %-14s %-9s %s\n", width, res->name, res->n_devices,
                              res->mode->name, strbuf_str(&reps), strbuf_str(&gpus));
    }
    if (r == 0 && m->n_resources == 0)
        r = strbuf_puts(out, "(nothing is advertised)\n");
    for (int lvl = MODEL_DIAG_ERROR; lvl <= MODEL_DIAG_WARNING && r == 0; lvl++)
        for (size_t i = 0; i < m->n_diags && r == 0; i++)
            if ((int)m->diags[i].level == lvl)
                r = strbuf_printf(out, "%s: %s\n", lvl == MODEL_DIAG_ERROR ? "error" : "warning",
                                  m->diags[i].message);
    strbuf_release(&gpus);
    strbuf_release(&reps);
    return r;
}

int model_plan_report(const struct model *m, const struct inv_inventory *inv, char **ret_text,
                      struct error *err)
{
    struct strbuf out = STRBUF_INIT;
    char *s;
    int r;

    if (!m || !ret_text)
        return error_set(err, -EINVAL, "model_plan_report: missing model");
    r = plan_text(m, inv, &out);
    if (r < 0) {
        strbuf_release(&out);
        return error_set(err, r, "cannot format the plan: %s", strerror(-r));
    }
    s = strbuf_take(&out);
    strbuf_release(&out);
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    *ret_text = s;
    return 0;
}

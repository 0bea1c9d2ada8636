/* SPDX-License-Identifier: Apache-2.0 */
/* cdi.c: keeps the CDI specs in step with what is served when a cdi-annotations or cdi-cri
 * device list strategy is on: the gpu spec, and the imex-channel, gdrcopy, gds and mofed
 * specs when those are configured (Allocate names them too). Written before the first
 * resource is served (a failure stops the start: names that cannot resolve are never
 * advertised) and rewritten whenever a new snapshot changes them, before that snapshot is
 * served: a failure then keeps the last good specs and the snapshot they describe, and the
 * change is tried again with backoff, so no name the daemon answers is missing on disk. */
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cdi/cdi.h"
#include "daemon/internal.h"

#define CDI_CLASSES_MAX 5
#define CDI_RETRY_MIN_MS 1000u
#define CDI_RETRY_MAX_MS 30000u

static void cdi_retry_later(struct daemon *d, unsigned what, const char *why,
                            const struct error *err)
{
    if (d->cdi_retry_fd < 0)
        d->cdi_retry_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    d->cdi_retry_what |= what;
    d->cdi_retry_ms = backoff_next_ms(d->cdi_retry_ms, CDI_RETRY_MIN_MS, CDI_RETRY_MAX_MS);
    log_error("%s: %s; serving the current devices (their names are in the last specs "
              "written), trying again in %u ms",
              why, err->msg, d->cdi_retry_ms);
    if (d->cdi_retry_fd >= 0)
        daemon__timer_set(d->cdi_retry_fd, d->cdi_retry_ms, false);
}

static void cdi_retry_done(struct daemon *d)
{
    if (!d->cdi_retry_ms)
        return;
    d->cdi_retry_ms = 0;
    d->cdi_retry_what = 0;
    daemon__timer_set(d->cdi_retry_fd, 0, false);
}

static void cdi_on_retry(struct daemon *d)
{
    unsigned what = d->cdi_retry_what;

    daemon__timer_drain(d->cdi_retry_fd);
    d->cdi_retry_what = 0;
    daemon__apply(d, what, "CDI spec retry");
}

static void cdi_release(struct daemon *d)
{
    if (d->cdi_retry_fd >= 0)
        close(d->cdi_retry_fd);
    d->cdi_retry_fd = -1;
}

static int cdi_update(struct daemon *d, const struct dp_snapshot *snap,
                      const struct cfg_config *cfg, bool at_start, struct error *err)
{
    const struct model *m = dp_snapshot_model(snap);
    const struct inv_inventory *inv = dp_snapshot_inventory(snap);
    const char *classes[CDI_CLASSES_MAX];
    char *json[CDI_CLASSES_MAX] = {0};
    struct strbuf all = STRBUF_INIT;
    struct cdi_options o;
    size_t n = 0;
    int r;

    if (!m || !inv ||
        !(m->settings.device_list_strategies & (CFG_LIST_CDI_ANNOTATIONS | CFG_LIST_CDI_CRI)))
        return 0;
    classes[n++] = CDI_CLASS;
    if (m->settings.n_imex_channel_ids)
        classes[n++] = "imex-channel";
    if (m->settings.gdrcopy_enabled)
        classes[n++] = "gdrcopy";
    if (m->settings.gds_enabled)
        classes[n++] = "gds";
    if (m->settings.mofed_enabled)
        classes[n++] = "mofed";
    r = cdi_options_from_config(
        &o, cfg, cfg_overrides_get(&d->o->overrides, CFG_OPT_CDI_FEATURE_FLAGS),
        cfg_overrides_get(&d->o->overrides, CFG_OPT_CDI_DISABLE_HOOKS), d->o->proc_root, err);
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = i == 0 ? cdi_spec_build(inv, &o, &json[i], err)
                   : cdi_class_spec_build(classes[i], &o, m->settings.imex_channel_ids,
                                          m->settings.n_imex_channel_ids, &json[i], err);
        if (r == 0)
            r = strbuf_printf(&all, "%s\n%s\n", classes[i], json[i]);
    }
    if (r == 0 && d->cdi_json && strcmp(d->cdi_json, strbuf_str(&all)) == 0)
        goto out; /* unchanged: no rewrite, no log */
    for (size_t i = 0; r == 0 && i < n; i++) {
        char *path = NULL;
        r = cdi_spec_write(d->o->cdi_spec_dir, classes[i], json[i], &path, err);
        if (r == 0)
            log_info("CDI spec written: %s", path);
        free(path);
    }
    if (r < 0) {
        error_prefix(err, "CDI spec");
        goto out;
    }
    free(d->cdi_json);
    d->cdi_json = strbuf_take(&all);
out:
    for (size_t i = 0; i < n; i++)
        free(json[i]);
    strbuf_release(&all);
    return r;
}

/* A state whose names cannot be resolved on disk is not served: at start that stops the
 * daemon; later the current state stays and the change is tried again after a backoff. */
static int cdi_prepare(struct daemon *d, const struct dp_snapshot *next,
                       const struct cfg_config *cfg, const struct daemon_change *c,
                       struct error *err)
{
    bool at_start = (c->what & DAEMON_CHANGE_START) != 0;
    int r = cdi_update(d, next, cfg, at_start, err);

    if (r < 0 && !at_start)
        cdi_retry_later(d, c->what & (DAEMON_RELOAD_CONFIG | DAEMON_RELOAD_INVENTORY), c->why, err);
    else if (r == 0)
        cdi_retry_done(d);
    return r;
}

static void cdi_stop(struct daemon *d)
{
    cdi_release(d);
    free(d->cdi_json);
    d->cdi_json = NULL;
}

static int cdi_retry_fd(const struct daemon *d)
{
    return d->cdi_retry_fd;
}

static const struct daemon_source cdi_sources[] = {{cdi_retry_fd, cdi_on_retry}};

const struct daemon_feature daemon__feature_cdi = {
    .name = "cdi",
    .prepare = cdi_prepare,
    .stop = cdi_stop,
    .sources = cdi_sources,
    .n_sources = GS_ARRAY_SIZE(cdi_sources),
};

/* SPDX-License-Identifier: Apache-2.0 */
/* reload.c: the core. Turns the inputs (config, node label, inventory, health marks, who
 * holds what) into one new node state: config + inventory + model in a dp_snapshot. Keeps the
 * last good config on errors; devices taken away while pods hold them (kubelet pod-resources
 * List) stay Unhealthy until released. Every unit's prepare may veto a state (its CDI spec
 * cannot be written); a state served goes to every unit's on_state. Names no feature. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/internal.h"

/* ---- loading ---------------------------------------------------------------------------- */

/* Logs every diagnostic except those at field path `skip` (NULL: none). */
static void log_cfg_diags(const struct cfg_diags *diags, const char *skip)
{
    struct strbuf sb = STRBUF_INIT;
    struct cfg_diags shown = *diags; /* borrows the items it keeps */
    const char *line;

    shown.items = calloc(diags->n_items ? diags->n_items : 1, sizeof(*shown.items));
    if (!shown.items)
        return;
    shown.n_items = 0;
    for (size_t i = 0; i < diags->n_items; i++)
        if (!skip || !diags->items[i].path || strcmp(diags->items[i].path, skip) != 0)
            shown.items[shown.n_items++] = diags->items[i];
    cfg_diags_format(&shown, CFG_SEV_WARNING, &sb);
    cfg_diags_format(&shown, CFG_SEV_ERROR, &sb);
    free(shown.items);
    line = strbuf_str(&sb);
    while (*line) {
        size_t n = strcspn(line, "\n");
        if (n > 0)
            log_warn("config: %.*s", (int)n, line);
        line += n + (line[n] == '\n');
    }
    strbuf_release(&sb);
}

/* The config, by name: --config-name, else the node label (directories only), else
 * --default-config, else the fallbacks. Errors (validation included) go to err. */
static int load_config(struct daemon *d, const char *label, struct cfg_config **ret,
                       struct error *err)
{
    struct cfg_load_options lo = {
        .path = d->o->config_file,
        .config_name = d->o->config_name,
        .default_name = d->o->default_config,
        .fallbacks = d->o->fallbacks,
        .n_fallbacks = d->o->n_fallbacks,
        .overrides = &d->o->overrides,
    };
    struct cfg_diags diags = CFG_DIAGS_INIT;
    struct strbuf summary = STRBUF_INIT;
    int r;

    if (!lo.config_name && d->config_is_dir)
        lo.config_name = label;
    r = cfg_load(&lo, ret, &diags, err);
    for (size_t i = 0; i < diags.n_items; i++) {
        if (!diags.items[i].path || strcmp(diags.items[i].path, CFG_DIAG_NO_CONFIG_NAME) != 0)
            continue;
        if (d->label_pending) /* nothing chose a config *yet*: the label is on its way */
            log_info("config: the node label %s has not been read yet; serving the fallback "
                     "until it arrives",
                     d->o->node_label);
        else
            daemon__kube_event(d, "ConfigNotSelected", diags.items[i].message);
    }
    log_cfg_diags(&diags, d->label_pending ? CFG_DIAG_NO_CONFIG_NAME : NULL);
    if (r == -EINVAL && !err->msg[0])
        error_set(err, r, "invalid config");
    if (r == 0 && cfg_summary(*ret, &summary) == 0)
        log_info("%s", strbuf_str(&summary));
    strbuf_release(&summary);
    cfg_diags_release(&diags);
    return r;
}

/* `strict`: an NVML that cannot be loaded or initialised is an error even when
 * failOnInitError is false. Re-reads use it, so a passing NVML hiccup keeps the devices
 * instead of reporting an empty node and withdrawing everything. */
static int read_inventory(struct daemon *d, const struct cfg_config *cfg, bool strict,
                          struct inv_inventory **ret, struct error *err)
{
    char **warnings = NULL;
    int r;

    r = gpu_inventory_open_and_read(&d->o->nvml, strict || cfg->flags.fail_on_init_error, ret,
                                    &warnings, err);
    for (size_t i = 0; r == 0 && warnings[i]; i++)
        log_warn("%s", warnings[i]);
    strv_free(warnings);
    return r;
}

static int build_model(struct daemon *d, const struct inv_inventory *inv,
                       const struct cfg_config *cfg, bool log_diags, struct model **ret,
                       struct error *err)
{
    struct model_options mo = {.keep_valid = d->o->keep_serving_valid};
    int r;

    r = model_build(inv, cfg, &mo, ret, err);
    if (r < 0 || !log_diags)
        return r;
    for (size_t i = 0; i < (*ret)->n_diags; i++) {
        if ((*ret)->diags[i].level == MODEL_DIAG_ERROR)
            log_error("config error on this node: %s, not serving it (--keep-serving-valid)",
                      (*ret)->diags[i].message);
        else
            log_warn("%s", (*ret)->diags[i].message);
    }
    return 0;
}

/* d->retiring holds "<resource> <id>" of the devices kept for their pods. */
static int retiring_add(char ***strv, const char *resource, const char *id)
{
    struct strbuf key = STRBUF_INIT;
    int r = strbuf_printf(&key, "%s %s", resource, id);
    if (r == 0)
        r = strv_push(strv, strbuf_str(&key));
    strbuf_release(&key);
    return r;
}

bool daemon__retiring_has(const struct daemon *d, const char *resource, const char *id)
{
    size_t n = strlen(resource);
    for (size_t i = 0; d->retiring && d->retiring[i]; i++)
        if (strncmp(d->retiring[i], resource, n) == 0 && d->retiring[i][n] == ' ' &&
            strcmp(d->retiring[i] + n + 1, id) == 0)
            return true;
    return false;
}

/* A new process (a DaemonSet rollout, a restart) keeps the devices pods still hold from the
 * one before, as a live reload does: the ones its model no longer lists (fewer replicas,
 * another config until the node label is read) stay, Unhealthy, until released. Holders
 * unknown: nothing to keep (as NVIDIA's plugin). */
static int keep_held_at_start(struct daemon *d, struct model *m, const struct inv_inventory *inv,
                              struct error *err)
{
    const struct dp_pod_devices *pods;
    bool reachable = false;
    char **done = NULL;
    size_t total = 0;
    int r = 0;

    if (daemon__holders_read_now(d) < 0) {
        daemon__holders_done(d);
        return 0;
    }
    pods = daemon__holders_view(d, &reachable);
    for (size_t i = 0; pods && reachable && r >= 0 && i < pods->n; i++) {
        const char *res = pods->items[i].resource;
        char **ids = NULL;
        if (!res || strv_contains(done, res))
            continue;
        r = strv_push(&done, res);
        for (size_t j = i; r >= 0 && j < pods->n; j++)
            if (pods->items[j].resource && strcmp(pods->items[j].resource, res) == 0)
                r = strv_push(&ids, pods->items[j].id);
        if (r >= 0 && ids)
            r = model_keep_held(m, inv, res, (const char *const *)ids, strv_length(ids), err);
        for (size_t j = 0; r > 0 && ids && ids[j]; j++) {
            const struct model_resource *mr = model_find_resource(m, res);
            const struct model_device *md = mr ? model_resource_find_device(mr, ids[j]) : NULL;
            if (md && !md->healthy && retiring_add(&d->retiring, res, ids[j]) == 0)
                log_info("resource=%s device=%s held by pod %s since an earlier gpuslice: "
                         "kept Unhealthy until released",
                         res, ids[j], dp_pod_devices_holder(pods, res, ids[j]));
        }
        total += r > 0 ? (size_t)r : 0;
        strv_free(ids);
    }
    strv_free(done);
    daemon__holders_done(d);
    if (r < 0)
        return r == -ENOMEM && !err->msg[0] ? error_set(err, r, "out of memory") : r;
    if (total)
        log_info("devices kept Unhealthy for their pods: %zu", total);
    d->n_retiring = total;
    return 0;
}

int daemon__load_initial(struct daemon *d, struct error *err)
{
    struct cfg_config *cfg = NULL;
    struct inv_inventory *inv = NULL;
    struct model *m = NULL;
    int r;

    d->config_is_dir = d->o->config_file && path_is_dir(d->o->config_file);
    r = load_config(d, d->label_value, &cfg, err);
    if (r == -ENOENT && d->label_value && !d->o->config_name && d->config_is_dir) {
        /* a label naming no config: say so, then start with the default and fallbacks */
        log_error("node label %s=%s: %s; starting with the default config instead",
                  d->o->node_label, d->label_value, err->msg);
        daemon__kube_event(d, "ConfigNotFound", err->msg);
        *err = (struct error){0};
        r = load_config(d, NULL, &cfg, err);
    }
    if (r < 0)
        goto out;
    r = read_inventory(d, cfg, false, &inv, err);
    if (r < 0)
        goto out;
    r = build_model(d, inv, cfg, true, &m, err);
    if (r < 0)
        goto out;
    r = keep_held_at_start(d, m, inv, err);
    if (r < 0)
        goto out;
    r = dp_snapshot_new(m, inv, &d->snap, err);
    if (r < 0)
        goto out;
    m = NULL;
    inv = NULL;
    d->cfg = cfg;
    cfg = NULL;
out:
    model_free(m);
    inv_free(inv);
    cfg_free(cfg);
    return r;
}

/* ---- retiring devices held by pods ---------------------------------------------------------- */

/* Adds to m, as Unhealthy, the devices of the served model that m drops while pods hold
 * them (or while nobody can tell). Logs who holds what for newly kept devices, and for
 * every kept one when `verbose` (a config change). */
/* Does m drop a device of the served model that is not retiring already (a new removal)? */
static bool newly_removed(const struct daemon *d, const struct model *m)
{
    const struct model *om = dp_snapshot_model(d->snap);
    for (size_t i = 0; om && i < om->n_resources; i++) {
        const struct model_resource *ores = &om->resources[i];
        const struct model_resource *res = model_find_resource(m, ores->name);
        for (size_t j = 0; j < ores->n_devices; j++)
            if (!(res && model_resource_find_device(res, ores->devices[j].id)) &&
                !daemon__retiring_has(d, ores->name, ores->devices[j].id))
                return true;
    }
    return false;
}

/* Who holds the devices a change removes: the answer just taken, or NULL (kept as they are
 * until a retire check decides; see daemon__apply). */
struct holders_now {
    const struct dp_pod_devices *pods;
    bool reachable, verbose;
};

/* Which of removed (devices of ores the new model drops) stay, as an owned strv, logging
 * who holds the newly kept ones (every one when h->verbose) and the ones released. NULL on
 * ENOMEM. */
static char **held_of(const struct holders_now *h, const struct model_resource *ores,
                      char *const *removed)
{
    char **held = strv_new();

    for (size_t j = 0; held && removed[j]; j++) {
        const struct model_device *od = model_resource_find_device(ores, removed[j]);
        bool was_retiring = od && !od->healthy;
        const char *pod = !h->pods       ? "" /* kept quietly: the retire check decides */
                          : h->reachable ? dp_pod_devices_holder(h->pods, ores->name, removed[j])
                                         : "unknown (pod-resources unreachable)";

        if (!pod) {
            if (was_retiring)
                log_info("resource=%s device=%s released by its pod, removed", ores->name,
                         removed[j]);
            continue;
        }
        if (h->pods && (h->verbose || !was_retiring))
            log_info("resource=%s device=%s held by pod %s: kept Unhealthy until released",
                     ores->name, removed[j], pod);
        if (strv_push(&held, removed[j]) < 0) {
            strv_free(held);
            held = NULL;
        }
    }
    return held;
}

static int retire_held(struct daemon *d, struct model *m, bool verbose, struct error *err)
{
    char **retiring = strv_new();
    const struct model *om = dp_snapshot_model(d->snap);
    struct holders_now h = {.verbose = verbose};
    bool asked = false;
    size_t total = 0;
    int r = 0;

    for (size_t i = 0; i < om->n_resources && r >= 0; i++) {
        const struct model_resource *ores = &om->resources[i];
        char **removed = NULL, **held = NULL;

        r = model_removed_ids(m, ores, &removed, err);
        if (r < 0)
            break;
        if (removed[0] && !asked) {
            asked = true;
            /* NULL only when daemon__apply did not wait for an answer: the devices removed
             * are retiring already (or the holders cannot be read at all), kept as they are
             * until the retire check decides with an answer of its own */
            h.pods = daemon__holders_view(d, &h.reachable);
            /* holders that could not be known are named once they can be */
            h.verbose |= h.pods && h.reachable && d->retire_unknown;
            if (h.pods)
                d->retire_unknown = !h.reachable;
        }
        held = held_of(&h, ores, removed);
        r = held ? model_retire_devices(m, ores, (const char *const *)held, strv_length(held), err)
                 : error_set(err, -ENOMEM, "out of memory");
        for (size_t j = 0; r >= 0 && held[j]; j++)
            if (retiring_add(&retiring, ores->name, held[j]) < 0)
                r = error_set(err, -ENOMEM, "out of memory");
        strv_free(removed);
        strv_free(held);
        total += r > 0 ? (size_t)r : 0;
    }
    if (r < 0) {
        strv_free(retiring);
        return r;
    }
    strv_free(d->retiring);
    d->retiring = retiring;
    if (total != d->n_retiring)
        log_info("devices kept Unhealthy for their pods: %zu", total);
    d->n_retiring = total;
    daemon__timer_set(d->retire_fd, total ? d->o->retire_check_ms : 0, true);
    return 0;
}

/* ---- the new state ---------------------------------------------------------------------- */

/* Serves snap (reference taken over) instead of d->snap: every unit hears of it, in order. */
static void serve_state(struct daemon *d, struct dp_snapshot *snap, const struct daemon_change *c)
{
    d->snap = snap;
    d->reloads++;
    daemon__units_on_state(d, c);
    dp_snapshot_unref((struct dp_snapshot *)c->old);
}

void daemon__health_changed(struct daemon *d, const char *why)
{
    const struct daemon_change c = {.what = DAEMON_CHANGE_HEALTH, .old = d->snap, .why = why};

    daemon__units_on_state(d, &c);
}

static size_t unhealthy_devices(const struct model *m)
{
    size_t n = 0;

    for (size_t i = 0; i < m->n_resources; i++)
        for (size_t j = 0; j < m->resources[i].n_devices; j++)
            n += !m->resources[i].devices[j].healthy;
    return n;
}

/* The units' marks on the first state, before any unit starts (serve registers in its start):
 * what a unit keeps Unhealthy from the first prepare on (an MPS daemon refused at start) is
 * never listed Healthy, not even for a moment. The marks need the prepared units, so the
 * state is built again (same config and inventory, the devices kept for their pods retired
 * into it as they were) and marked; when no unit marks anything, the first state stays. */
static int mark_initial(struct daemon *d, struct error *err)
{
    const struct model *om = dp_snapshot_model(d->snap);
    const struct inv_inventory *inv = dp_snapshot_inventory(d->snap);
    struct inv_inventory *dup = NULL;
    struct dp_snapshot *snap = NULL;
    struct model *m = NULL;
    int r;

    r = build_model(d, inv, d->cfg, false, &m, err);
    for (size_t i = 0; r >= 0 && i < om->n_resources; i++) {
        char **kept = NULL;
        r = model_removed_ids(m, &om->resources[i], &kept, err);
        if (r >= 0)
            r = model_retire_devices(m, &om->resources[i], (const char *const *)kept,
                                     strv_length(kept), err);
        strv_free(kept);
    }
    if (r < 0)
        goto out;
    daemon__units_mark(d, m);
    r = 0;
    if (unhealthy_devices(m) == unhealthy_devices(om))
        goto out; /* nothing marked: the state prepared is the state served */
    dup = inv ? inv_dup(inv) : NULL;
    if (inv && !dup) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    r = dp_snapshot_new(m, dup, &snap, err);
    if (r < 0)
        goto out;
    m = NULL;
    dup = NULL;
    dp_snapshot_unref(d->snap);
    d->snap = snap;
out:
    model_free(m);
    inv_free(dup);
    return r == -ENOMEM && !err->msg[0] ? error_set(err, r, "out of memory") : r;
}

int daemon__prepare_initial(struct daemon *d, struct error *err)
{
    const struct daemon_change c = {.what = DAEMON_CHANGE_START, .why = "start"};
    int r = daemon__units_prepare(d, d->snap, d->cfg, &c, err);

    return r < 0 ? r : mark_initial(d, err);
}

/* Same GPUs and MIG devices (what the health thread watches)? */
static bool inventory_same_devices(const struct inv_inventory *a, const struct inv_inventory *b)
{
    if (!a || !b || a->n_gpus != b->n_gpus)
        return a == b;
    for (size_t i = 0; i < a->n_gpus; i++) {
        const struct inv_gpu *ga = &a->gpus[i], *gb = &b->gpus[i];
        if (strcmp(ga->uuid, gb->uuid) != 0 || ga->n_migs != gb->n_migs)
            return false;
        for (size_t j = 0; j < ga->n_migs; j++)
            if (strcmp(ga->migs[j].uuid, gb->migs[j].uuid) != 0)
                return false;
    }
    return true;
}

/* A config that could not be applied: log "..., keeping last good config", Event, counter. */
static void reload_failed(struct daemon *d, const char *reason, const struct error *err)
{
    d->config_reload_failures++;
    log_error("config reload failed: %s, keeping last good config (failures=%llu)", err->msg,
              d->config_reload_failures);
    daemon__kube_event(d, reason, err->msg);
}

void daemon__apply(struct daemon *d, unsigned what, const char *why)
{
    const struct inv_inventory *cur_inv = dp_snapshot_inventory(d->snap);
    struct cfg_config *cfg = NULL;
    struct inv_inventory *inv = NULL;
    struct model *m = NULL;
    struct dp_snapshot *snap = NULL;
    struct error err = {0};
    bool inv_changed = false;
    int r;

    if (what & DAEMON_RELOAD_CONFIG) {
        r = load_config(d, d->label_value, &cfg, &err);
        if (r < 0) {
            reload_failed(d, r == -ENOENT ? "ConfigNotFound" : "ConfigInvalid", &err);
            goto out;
        }
    }
    if (what & DAEMON_RELOAD_INVENTORY) {
        r = read_inventory(d, cfg ? cfg : d->cfg, cur_inv && cur_inv->n_gpus > 0, &inv, &err);
        if (r < 0) {
            log_error("%s: reading the inventory: %s, keeping the current devices", why, err.msg);
            goto out;
        }
        inv_changed = !inventory_same_devices(inv, cur_inv);
        if (inv_changed)
            log_info("%s: the GPUs or MIG devices changed", why);
    } else if (cur_inv) {
        inv = inv_dup(cur_inv);
        if (!inv) {
            log_error("%s: out of memory, keeping the current devices", why);
            goto out;
        }
    }
    r = build_model(d, inv, cfg ? cfg : d->cfg, cfg || inv_changed, &m, &err);
    if (r < 0) {
        if (cfg)
            reload_failed(d, "ConfigInvalid", &err);
        else
            log_error("%s: %s, keeping the current devices", why, err.msg);
        goto out;
    }
    /* devices this change removes: decided with who holds them now, read off the loop; the
     * change waits for that answer and is made when it comes (daemon__on_holders) */
    if (newly_removed(d, m) && daemon__holders_can_answer(d) && !daemon__holders_current(d)) {
        d->apply_waiting_what |= what;
        d->apply_waiting = true;
        str_copy(d->apply_waiting_why, why, sizeof(d->apply_waiting_why));
        daemon__holders_request(d);
        goto out;
    }
    daemon__units_mark(d, m); /* XIDs, MIG drains, MPS daemons down */
    r = retire_held(d, m, (what & DAEMON_RELOAD_CONFIG) != 0, &err);
    if (r < 0) {
        log_error("%s: %s, keeping the current devices", why, err.msg);
        goto out;
    }
    r = dp_snapshot_new(m, inv, &snap, &err);
    if (r < 0) {
        log_error("%s: %s, keeping the current devices", why, err.msg);
        goto out;
    }
    m = NULL;
    inv = NULL;
    struct daemon_change c = {
        .what = what | (inv_changed ? DAEMON_CHANGE_DEVICES : 0), .old = d->snap, .why = why};
    /* what the new state names must exist before it is served (CDI specs, MPS daemons): a
     * unit that cannot make it keeps the current state and says when it tries again */
    if (daemon__units_prepare(d, snap, cfg ? cfg : d->cfg, &c, &err) < 0) {
        dp_snapshot_unref(snap);
        goto out;
    }
    if (cfg) {
        cfg_free(d->cfg);
        d->cfg = cfg;
        cfg = NULL;
    }
    serve_state(d, snap, &c);
out:
    model_free(m);
    inv_free(inv);
    cfg_free(cfg);
}

void daemon__state_release(struct daemon *d)
{
    dp_snapshot_unref(d->snap);
    d->snap = NULL;
    cfg_free(d->cfg);
    d->cfg = NULL;
    strv_free(d->retiring);
    d->retiring = NULL;
}

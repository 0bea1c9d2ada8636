/* SPDX-License-Identifier: Apache-2.0 */
/* health.c: which XIDs make a GPU unhealthy — NVIDIA's default ignored XIDs and the
 * DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS semantics (facts §6), as a pure policy.
 * The daemon's event thread asks it about every XID event. No I/O, no logging. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "daemon/daemon.h"

static const unsigned long long default_ignored[] = {13, 31, 43, 45, 68, 109};

static bool list_has(const unsigned long long *v, size_t n, unsigned long long x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

static void lower_copy(char *dst, const char *src, size_t size)
{
    size_t i;

    for (i = 0; src[i] && i + 1 < size; i++)
        dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

/* Parses a comma list of XIDs into v (no duplicates). "all" sets *ret_all when given. */
static int parse_list(const char *env_name, const char *s, unsigned long long *v, size_t *n,
                      bool *ret_all, char ***warnings)
{
    const char *p = s;
    struct strbuf w = STRBUF_INIT;
    int r = 0;

    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char tok[32];
        uint64_t x;

        while (len > 0 && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        if (len > 0) {
            str_copy(tok, p, len + 1 < sizeof(tok) ? len + 1 : sizeof(tok));
            strbuf_reset(&w);
            if (ret_all && strcmp(tok, "all") == 0) {
                *ret_all = true;
            } else if (len >= sizeof(tok) || parse_uint64(tok, &x) < 0) {
                r = strbuf_printf(&w, "%s: '%.*s' is not an XID, ignoring", env_name,
                                  (int)(len > 40 ? 40 : len), p);
            } else if (*n >= DAEMON_XID_LIST_MAX) {
                r = strbuf_printf(&w, "%s: more than %d XIDs, ignoring %s", env_name,
                                  DAEMON_XID_LIST_MAX, tok);
            } else if (!list_has(v, *n, x)) {
                v[(*n)++] = x;
            }
            if (r < 0)
                goto out;
            if (w.len > 0) {
                r = strv_push(warnings, strbuf_str(&w));
                if (r < 0)
                    goto out;
            }
        }
        p = end ? end + 1 : NULL;
    }
out:
    strbuf_release(&w);
    return r < 0 ? r : 0;
}

int daemon_xid_policy_init(struct daemon_xid_policy *p, const char *disable, const char *enable,
                           char ***ret_warnings, struct error *err)
{
    struct daemon_xid_policy np = {0};
    char **warnings = strv_new();
    char low[64];
    int r = -ENOMEM;

    if (!warnings)
        goto out;
    r = 0;
    for (size_t i = 0; i < GS_ARRAY_SIZE(default_ignored); i++)
        np.ignored[np.n_ignored++] = default_ignored[i];
    if (disable && *disable) {
        lower_copy(low, disable, sizeof(low));
        /* NVIDIA: "all" alone, or any value containing "xids", turns the checker off */
        if (strcmp(low, "all") == 0 || strstr(low, "xids"))
            np.disabled = true;
        else
            r = parse_list("DP_DISABLE_HEALTHCHECKS", disable, np.ignored, &np.n_ignored, NULL,
                           &warnings);
        if (r < 0)
            goto out;
    }
    if (enable && *enable) {
        lower_copy(low, enable, sizeof(low));
        r = parse_list("DP_ENABLE_HEALTHCHECKS", strcmp(low, "all") == 0 ? "all" : enable,
                       np.enabled, &np.n_enabled, &np.all_enabled, &warnings);
        if (r < 0)
            goto out;
    }
    *p = np;
    *ret_warnings = warnings;
    warnings = NULL;
    r = 0;
out:
    strv_free(warnings);
    if (r < 0)
        error_set(err, r, "health check settings: out of memory");
    return r;
}

bool daemon_xid_is_critical(const struct daemon_xid_policy *p, unsigned long long xid)
{
    if (p->disabled)
        return false;
    if (p->all_enabled || list_has(p->enabled, p->n_enabled, xid))
        return true;
    return !list_has(p->ignored, p->n_ignored, xid);
}

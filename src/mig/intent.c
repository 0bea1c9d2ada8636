/* SPDX-License-Identifier: Apache-2.0 */
/* intent.c: the record a MIG apply leaves while it changes GPUs (apply.h). Written before
 * the first GPU is touched and removed when the apply ends (done, or rolled back), so a
 * record that outlives its process says the apply was killed part way: the GPUs it names may
 * be between layouts. A few "key value" lines, written atomically. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mig/apply.h"

#define INTENT_MAGIC "gpuslice-mig-intent v1"
#define INTENT_MAX_BYTES (64u * 1024u)

const char *mig_intent_path(void)
{
    const char *p = getenv("GPUSLICE_MIG_INTENT_FILE");
    return p && *p ? p : MIG_INTENT_DEFAULT_PATH;
}

int mig_intent_write(const char *path, const struct mig_intent *in, struct error *err)
{
    struct strbuf sb = STRBUF_INIT, dir = STRBUF_INIT;
    const char *slash = strrchr(path, '/');
    int r;

    r = strbuf_printf(&sb, "%s\npid %ld\nstarted %lld\nconfig %s\nselected %s\n", INTENT_MAGIC,
                      in->pid, in->started_s, in->config, in->selected);
    for (size_t i = 0; r == 0 && i < in->n_gpus; i++)
        r = strbuf_printf(&sb, "gpu %u %s\n", in->gpus[i], in->uuids[i]);
    if (r == 0 && slash && slash != path)
        r = strbuf_append(&dir, path, (size_t)(slash - path));
    if (r < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (dir.len)
        r = path_mkdir_p(strbuf_str(&dir), 0755, err);
    if (r == 0)
        r = file_write_atomic(path, sb.buf, sb.len, 0644, err);
out:
    strbuf_release(&sb);
    strbuf_release(&dir);
    return r;
}

/* Parses one "key value" line into in. */
static int parse_line(const char *line, struct mig_intent *in)
{
    const char *sp = strchr(line, ' ');
    const char *v = sp ? sp + 1 : "";
    size_t klen = sp ? (size_t)(sp - line) : strlen(line);
    int64_t n;

    if (klen == 3 && strncmp(line, "pid", 3) == 0)
        return parse_int64(v, &n) < 0 ? -EBADMSG : (in->pid = (long)n, 0);
    if (klen == 7 && strncmp(line, "started", 7) == 0)
        return parse_int64(v, &n) < 0 ? -EBADMSG : (in->started_s = (long long)n, 0);
    if (klen == 6 && strncmp(line, "config", 6) == 0)
        return str_copy(in->config, v, sizeof(in->config)) < sizeof(in->config) ? 0 : -EBADMSG;
    if (klen == 8 && strncmp(line, "selected", 8) == 0)
        return str_copy(in->selected, v, sizeof(in->selected)) < sizeof(in->selected) ? 0
                                                                                      : -EBADMSG;
    if (klen == 3 && strncmp(line, "gpu", 3) == 0) {
        char idx[16] = {0};
        const char *uuid = strchr(v, ' ');
        unsigned g;
        if (!uuid || in->n_gpus >= MIG_NODE_MAX_GPUS || (size_t)(uuid - v) >= sizeof(idx))
            return -EBADMSG;
        memcpy(idx, v, (size_t)(uuid - v));
        if (parse_uint(idx, &g) < 0 ||
            str_copy(in->uuids[in->n_gpus], uuid + 1, sizeof(in->uuids[0])) >= sizeof(in->uuids[0]))
            return -EBADMSG;
        in->gpus[in->n_gpus++] = g;
        return 0;
    }
    return 0; /* keys of later versions */
}

int mig_intent_read(const char *path, struct mig_intent *ret, struct error *err)
{
    struct mig_intent in = {0};
    char *data = NULL, *line, *next;
    size_t len = 0;
    int r;

    r = file_read_all(path, INTENT_MAX_BYTES, &data, &len, err);
    if (r < 0)
        return r;
    if (!str_startswith(data, INTENT_MAGIC "\n")) {
        r = error_set(err, -EBADMSG, "%s: not a MIG apply record", path);
        goto out;
    }
    for (line = data + strlen(INTENT_MAGIC) + 1; r == 0 && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        r = parse_line(line, &in);
    }
    if (r < 0) {
        r = error_set(err, r, "%s: a malformed MIG apply record (remove it)", path);
        goto out;
    }
    *ret = in;
out:
    free(data);
    return r;
}

void mig_intent_clear(const char *path)
{
    (void)unlink(path);
}

bool mig_intent_running(const struct mig_intent *in)
{
    return in->pid > 0 && in->pid != (long)getpid() && kill((pid_t)in->pid, 0) == 0;
}

int mig_intent_describe(const struct mig_intent *in, struct strbuf *out)
{
    char when[64] = "an unknown time";
    time_t t = (time_t)in->started_s;
    struct tm tm;
    int r;

    if (in->started_s > 0 && gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    r = strbuf_printf(out, "an apply of '%s' (%s) by pid %ld, started %s, did not finish: GPU",
                      in->selected, in->config, in->pid, when);
    if (r == 0 && in->n_gpus != 1)
        r = strbuf_putc(out, 's');
    for (size_t i = 0; r == 0 && i < in->n_gpus; i++)
        r = strbuf_printf(out, "%s %u (%s)", i ? "," : "", in->gpus[i], in->uuids[i]);
    if (r == 0)
        r = strbuf_puts(out, " may be between layouts");
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* log.c: one line per event, klog-like ("I1122 03:14:57.123456  42 file.c:12] msg") or
 * JSON. Configured once at startup; the only mutable global in gpuslice. Writes each
 * line with a single write(2) so concurrent threads never interleave within a line. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

static struct {
    enum log_level level;
    enum log_format format;
    int fd;
} log_cfg = {LOG_LEVEL_INFO, LOG_FORMAT_KLOG, 2};

void log_setup(enum log_level level, enum log_format format, int fd)
{
    log_cfg.level = level;
    log_cfg.format = format;
    log_cfg.fd = fd;
}

bool log_enabled(enum log_level level)
{
    return level <= log_cfg.level;
}

int log_level_parse(const char *s, enum log_level *ret)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    unsigned v;

    for (size_t i = 0; i < GS_ARRAY_SIZE(names); i++)
        if (s && strcasecmp(s, names[i]) == 0) {
            *ret = (enum log_level)i;
            return 0;
        }
    if (s && strcasecmp(s, "warning") == 0) {
        *ret = LOG_LEVEL_WARN;
        return 0;
    }
    if (s && parse_uint(s, &v) == 0 && v <= 10) {
        *ret = v >= 4 ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO;
        return 0;
    }
    return -EINVAL;
}

int log_format_parse(const char *s, enum log_format *ret)
{
    if (str_eq(s, "text") || str_eq(s, "klog")) {
        *ret = LOG_FORMAT_KLOG;
        return 0;
    }
    if (str_eq(s, "json")) {
        *ret = LOG_FORMAT_JSON;
        return 0;
    }
    return -EINVAL;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when the bytes are not one. */
static size_t utf8_seq(const unsigned char *s)
{
    size_t n;
    unsigned cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

/* A JSON string body: quotes, backslashes and controls escaped, and bytes that are not
 * UTF-8 (a device name, a path, a peer's text) replaced by U+FFFD, so every line is valid
 * JSON whatever the message holds. `len` bounds s (SIZE_MAX: up to the NUL). */
static void json_escape_into(struct strbuf *sb, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;

    for (size_t i = 0; i < len && p[i];) {
        size_t n = utf8_seq(p + i);
        if (n == 0) {
            strbuf_puts(sb, "\\ufffd");
            i++;
        } else if (n == 1 && (p[i] == '"' || p[i] == '\\')) {
            strbuf_putc(sb, '\\');
            strbuf_putc(sb, (char)p[i++]);
        } else if (n == 1 && p[i] < 0x20) {
            strbuf_printf(sb, "\\u%04x", p[i++]);
        } else {
            for (size_t k = 0; k < n; k++)
                strbuf_putc(sb, (char)p[i++]);
        }
    }
}

/* The key=value context our messages carry ("resource=nvidia.com/gpu device=GPU-..::3
 * xid=79 pod=ns/name reason=..."), repeated as JSON keys so machines need not parse text.
 * The first occurrence of a key wins; values end at a space (a trailing , ; : dropped). */
static void json_fields_into(struct strbuf *sb, const char *msg)
{
    static const char *const keys[] = {"resource", "device", "pod",    "xid",   "reason",
                                       "gpu",      "node",   "config", "socket"};
    bool seen[sizeof(keys) / sizeof(keys[0])] = {false};

    for (const char *p = msg; *p; p++) {
        if (p != msg && p[-1] != ' ')
            continue;
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            size_t kl = strlen(keys[k]), vl;
            const char *v;
            if (seen[k] || strncmp(p, keys[k], kl) != 0 || p[kl] != '=')
                continue;
            v = p + kl + 1;
            vl = strcspn(v, " ");
            while (vl > 0 && strchr(",;:", v[vl - 1]))
                vl--;
            if (vl == 0)
                break;
            seen[k] = true;
            strbuf_printf(sb, ",\"%s\":\"", keys[k]);
            json_escape_into(sb, v, vl);
            strbuf_putc(sb, '"');
            break;
        }
    }
}

void log_emit(enum log_level level, const char *file, int line, const char *fmt, ...)
{
    static const char klog_letter[] = {'E', 'W', 'I', 'I'};
    static const char *const json_level[] = {"error", "warning", "info", "debug"};
    struct strbuf msg = STRBUF_INIT, out = STRBUF_INIT;
    struct timeval tv;
    struct tm tm;
    const char *base = strrchr(file, '/');
    int saved_errno = errno;
    va_list ap;

    base = base ? base + 1 : file;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    va_start(ap, fmt);
    strbuf_vprintf(&msg, fmt, ap);
    va_end(ap);

    if (log_cfg.format == LOG_FORMAT_JSON) {
        char ts[64];
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
        strbuf_printf(&out,
                      "{\"ts\":\"%s.%06ldZ\",\"level\":\"%s\",\"caller\":\"%s:%d\",\"msg\":\"", ts,
                      (long)tv.tv_usec, json_level[level], base, line);
        json_escape_into(&out, strbuf_str(&msg), SIZE_MAX);
        strbuf_putc(&out, '"');
        json_fields_into(&out, strbuf_str(&msg));
        strbuf_puts(&out, "}\n");
    } else {
        strbuf_printf(&out, "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] %s\n", klog_letter[level],
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec,
                      (int)getpid(), base, line, strbuf_str(&msg));
    }
    if (out.buf) {
        ssize_t n = write(log_cfg.fd, out.buf, out.len);
        (void)n; /* nowhere to report a failed log write */
    }
    strbuf_release(&msg);
    strbuf_release(&out);
    errno = saved_errno;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* strbuf.c: a growable string with a hard size cap (curl's dynbuf idea): anything built
 * from user input grows only so far, then fails with -E2BIG instead of eating memory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define STRBUF_DEFAULT_MAX ((size_t)64 << 20)

static int strbuf_grow(struct strbuf *sb, size_t extra)
{
    size_t max = sb->max_len ? sb->max_len : STRBUF_DEFAULT_MAX;
    size_t need, alloc;
    char *p;

    if (extra > max || sb->len > max - extra)
        return -E2BIG;
    need = sb->len + extra + 1;
    if (need <= sb->alloc)
        return 0;
    alloc = sb->alloc ? sb->alloc : 64;
    while (alloc < need)
        alloc *= 2;
    p = realloc(sb->buf, alloc);
    if (!p)
        return -ENOMEM;
    sb->buf = p;
    sb->alloc = alloc;
    return 0;
}

int strbuf_append(struct strbuf *sb, const char *s, size_t n)
{
    int r = strbuf_grow(sb, n);
    if (r < 0)
        return r;
    if (n)
        memcpy(sb->buf + sb->len, s, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
    return 0;
}

int strbuf_puts(struct strbuf *sb, const char *s)
{
    return strbuf_append(sb, s, strlen(s));
}

int strbuf_putc(struct strbuf *sb, char c)
{
    return strbuf_append(sb, &c, 1);
}

int strbuf_vprintf(struct strbuf *sb, const char *fmt, va_list ap)
{
    va_list ap2;
    int n, r;

    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return -EINVAL;
    r = strbuf_grow(sb, (size_t)n);
    if (r < 0)
        return r;
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
    return 0;
}

int strbuf_printf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = strbuf_vprintf(sb, fmt, ap);
    va_end(ap);
    return r;
}

const char *strbuf_str(const struct strbuf *sb)
{
    return sb->buf ? sb->buf : "";
}

char *strbuf_take(struct strbuf *sb)
{
    char *p = sb->buf ? sb->buf : strdup("");
    sb->buf = NULL;
    sb->len = sb->alloc = 0;
    return p;
}

void strbuf_reset(struct strbuf *sb)
{
    sb->len = 0;
    if (sb->buf)
        sb->buf[0] = '\0';
}

void strbuf_release(struct strbuf *sb)
{
    free(sb->buf);
    sb->buf = NULL;
    sb->len = sb->alloc = 0;
}

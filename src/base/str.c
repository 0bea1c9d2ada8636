/* SPDX-License-Identifier: Apache-2.0 */
/* str.c: small string helpers and strict number parsing. Every number that comes from a
 * user (flags, env, config, machine files) goes through parse_*: no atoi, no silent
 * truncation, no trailing garbage. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"

char *str_dup(const char *s)
{
    return s ? strdup(s) : NULL;
}

bool str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

bool str_startswith(const char *s, const char *prefix)
{
    return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_endswith(const char *s, const char *suffix)
{
    size_t ls, lx;
    if (!s)
        return false;
    ls = strlen(s);
    lx = strlen(suffix);
    return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

int str_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t str_copy(char *dst, const char *src, size_t size)
{
    size_t n = strlen(src);
    if (size) {
        size_t c = n < size - 1 ? n : size - 1;
        memcpy(dst, src, c);
        dst[c] = '\0';
    }
    return n;
}

int parse_uint64(const char *s, uint64_t *ret)
{
    uint64_t v = 0;

    if (!s || !*s)
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

int parse_int64(const char *s, int64_t *ret)
{
    uint64_t v;
    bool neg = false;
    int r;

    if (s && (*s == '-' || *s == '+')) {
        neg = *s == '-';
        s++;
    }
    r = parse_uint64(s, &v);
    if (r < 0)
        return r;
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return -ERANGE;
        *ret = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX)
            return -ERANGE;
        *ret = (int64_t)v;
    }
    return 0;
}

int parse_uint(const char *s, unsigned *ret)
{
    uint64_t v;
    int r = parse_uint64(s, &v);
    if (r < 0)
        return r;
    if (v > UINT32_MAX)
        return -ERANGE;
    *ret = (unsigned)v;
    return 0;
}

int parse_bool(const char *s, bool *ret)
{
    static const char *const yes[] = {"true", "1", "yes", "on", "t", "y"};
    static const char *const no[] = {"false", "0", "no", "off", "f", "n"};

    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < GS_ARRAY_SIZE(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *ret = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *ret = false;
            return 0;
        }
    }
    return -EINVAL;
}

bool str_dns_subdomain_valid(const char *s, size_t n)
{
    size_t label_len = 0;

    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (ch == '.') {
            if (label_len == 0 || s[i - 1] == '-')
                return false;
            label_len = 0;
            continue;
        }
        if (!alnum && ch != '-')
            return false;
        if (ch == '-' && label_len == 0)
            return false;
        if (++label_len > 63)
            return false;
    }
    return label_len > 0 && s[n - 1] != '-';
}

unsigned str_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned row[64 + 1];

    /* Hints are for short keys; long strings are simply "far". */
    if (la > 64 || lb > 64)
        return 1000;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned prev = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned cur = row[j];
            unsigned cost = (a[i - 1] | 0x20) == (b[j - 1] | 0x20) ? 0 : 1;
            unsigned best = prev + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

char **strv_new(void)
{
    return calloc(1, sizeof(char *));
}

size_t strv_length(char *const *strv)
{
    size_t n = 0;
    while (strv && strv[n])
        n++;
    return n;
}

int strv_push(char ***strv, const char *s)
{
    size_t n = strv_length(*strv);
    char *copy = strdup(s);
    char **p;

    if (!copy)
        return -ENOMEM;
    p = realloc(*strv, (n + 2) * sizeof(char *));
    if (!p) {
        free(copy);
        return -ENOMEM;
    }
    p[n] = copy;
    p[n + 1] = NULL;
    *strv = p;
    return 0;
}

bool strv_contains(char *const *strv, const char *s)
{
    for (size_t i = 0; strv && strv[i]; i++)
        if (strcmp(strv[i], s) == 0)
            return true;
    return false;
}

void strv_free(char **strv)
{
    for (size_t i = 0; strv && strv[i]; i++)
        free(strv[i]);
    free(strv);
}

char *str_yaml_single_quoted(const char *src, size_t start, size_t end)
{
    struct strbuf sb = STRBUF_INIT;

    for (size_t i = start; i < end; i++) {
        char ch = src[i];
        if (ch == '\'' && i + 1 < end && src[i + 1] == '\'') {
            strbuf_putc(&sb, '\'');
            i++;
        } else if (ch == '\n' || ch == '\r') {
            unsigned breaks = 0;
            while (sb.len > 0 && (sb.buf[sb.len - 1] == ' ' || sb.buf[sb.len - 1] == '\t'))
                sb.buf[--sb.len] = '\0';
            for (; i < end; i++) {
                char w = src[i];
                if (w == '\n')
                    breaks++;
                else if (w != ' ' && w != '\t' && w != '\r')
                    break;
            }
            i--; /* the loop's i++ moves to the first character of the next line */
            if (breaks <= 1)
                strbuf_putc(&sb, ' ');
            for (unsigned k = 1; k < breaks; k++)
                strbuf_putc(&sb, '\n');
        } else {
            strbuf_putc(&sb, ch);
        }
    }
    return strbuf_take(&sb);
}

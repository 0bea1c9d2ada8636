/* SPDX-License-Identifier: Apache-2.0 */
/* profile.c: mig-parted's MIG profile strings (facts B.2, go-nvlib parseMigProfile):
 * "<G>g.<GB>gb" or "<C>c.<G>g.<GB>gb", then optionally "+attr[,attr...]" or "-attr[,...]"
 * with attributes me, me.all, gfx. Parsing is strict so a typo in a layout is caught when
 * the config is read, not when the GPU is half repartitioned. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mig/mig.h"

/* A decimal number at *p (no sign, no leading '+'); advances *p. */
static bool number(const char **p, unsigned *ret)
{
    unsigned long v = 0;
    const char *s = *p;

    if (!isdigit((unsigned char)*s))
        return false;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > 100000)
            return false;
        s++;
    }
    *p = s;
    *ret = (unsigned)v;
    return true;
}

static int cmp_attr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ",me.all,me" after the sign: validated, sorted, written back as "me,me.all". */
static int parse_attrs(const char *in, char sign, char *out, size_t size, const char *whole,
                       struct error *err)
{
    char buf[64];
    char *items[8];
    size_t n = 0;

    if (strlen(in) >= sizeof(buf))
        return error_set(err, -EINVAL, "MIG profile '%s': attributes too long", whole);
    strcpy(buf, in);
    for (char *tok = buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        size_t len = strlen(tok);
        if (len == 0 || isdigit((unsigned char)tok[0]) || tok[0] == '.' || tok[len - 1] == '.')
            return error_set(err, -EINVAL,
                             "MIG profile '%s': attribute '%s' must be letters and digits "
                             "(dots inside), not start with a digit or a dot",
                             whole, tok);
        for (size_t i = 0; i < len; i++)
            if (!isalnum((unsigned char)tok[i]) && tok[i] != '.')
                return error_set(err, -EINVAL, "MIG profile '%s': bad character in '%s'", whole,
                                 tok);
        if (n == sizeof(items) / sizeof(items[0]))
            return error_set(err, -EINVAL, "MIG profile '%s': too many attributes", whole);
        for (size_t i = 0; i < n; i++)
            if (strcmp(items[i], tok) == 0)
                return error_set(err, -EINVAL, "MIG profile '%s': attribute '%s' twice", whole,
                                 tok);
        items[n++] = tok;
    }
    qsort(items, n, sizeof(items[0]), cmp_attr);
    size_t w = 0;
    out[w++] = sign;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(items[i]);
        if (w + len + 2 > size)
            return error_set(err, -EINVAL, "MIG profile '%s': attributes too long", whole);
        if (i)
            out[w++] = ',';
        memcpy(out + w, items[i], len);
        w += len;
    }
    out[w] = '\0';
    return 0;
}

int mig_profile_parse(const char *s, struct mig_profile_spec *ret, struct error *err)
{
    struct mig_profile_spec p = {0};
    const char *c = s;
    unsigned a, b;

    if (!s || !*s)
        return error_set(err, -EINVAL, "empty MIG profile; write e.g. 1g.10gb or 1c.3g.40gb");
    if (strchr(s, '+') && strchr(s, '-'))
        return error_set(err, -EINVAL, "MIG profile '%s': both '+' and '-' attributes", s);
    if (!number(&c, &a))
        goto bad;
    if (*c == 'c') {
        c++;
        if (*c++ != '.' || !number(&c, &b) || *c++ != 'g')
            goto bad;
        p.c = a;
        p.g = b;
    } else if (*c == 'g') {
        c++;
        p.c = p.g = a;
    } else {
        goto bad;
    }
    if (*c++ != '.' || !number(&c, &p.gb) || c[0] != 'g' || c[1] != 'b')
        goto bad;
    c += 2;
    if (p.c == 0 || p.g == 0 || p.gb == 0 || p.c > p.g)
        return error_set(err, -EINVAL,
                         "MIG profile '%s': compute slices, slices and memory must be at "
                         "least 1, and C <= G",
                         s);
    if (*c == '+' || *c == '-') {
        int r = parse_attrs(c + 1, *c, p.attrs, sizeof(p.attrs), s, err);
        if (r < 0)
            return r;
    } else if (*c) {
        goto bad;
    }
    *ret = p;
    return 0;
bad:
    return error_set(err, -EINVAL,
                     "'%s' is not a MIG profile; write <G>g.<GB>gb or <C>c.<G>g.<GB>gb, "
                     "optionally with +me, e.g. 3g.40gb, 1c.3g.40gb, 1g.10gb+me",
                     s);
}

bool mig_profile_matches(const struct mig_profile *p, const struct mig_profile_spec *s)
{
    struct mig_profile_spec ps;

    if (mig_profile_parse(p->name, &ps, NULL) < 0)
        return false;
    /* a catalog profile is the full compute instance of its GPU instance */
    return s->c == s->g && ps.g == s->g && ps.gb == s->gb && strcmp(ps.attrs, s->attrs) == 0;
}

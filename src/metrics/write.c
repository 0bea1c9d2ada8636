/* SPDX-License-Identifier: Apache-2.0 */
/* write.c: the Prometheus text exposition writers every /metrics family goes through
 * (metrics.h): a family's HELP and TYPE lines, escaped label values. Pure. */
#include "metrics/metrics.h"

int metrics_family(struct strbuf *sb, const char *name, const char *type, const char *help)
{
    return strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int metrics_escape(struct strbuf *sb, const char *v)
{
    int r = 0;

    for (; *v && r == 0; v++) {
        if (*v == '\\')
            r = strbuf_puts(sb, "\\\\");
        else if (*v == '"')
            r = strbuf_puts(sb, "\\\"");
        else if (*v == '\n')
            r = strbuf_puts(sb, "\\n");
        else
            r = strbuf_printf(sb, "%c", *v);
    }
    return r;
}

int metrics_sample1(struct strbuf *sb, const char *metric, const char *label, const char *value,
                    const char *extra, unsigned long long v)
{
    int r = strbuf_printf(sb, "%s{%s=\"", metric, label);

    if (r == 0)
        r = metrics_escape(sb, value);
    if (r == 0)
        r = strbuf_printf(sb, "\"%s} %llu\n", extra ? extra : "", v);
    return r;
}

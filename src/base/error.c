/* SPDX-License-Identifier: Apache-2.0 */
/* error.c: the struct error formatter used by every module. A NULL err is allowed
 * everywhere so callers that do not care about the message pay nothing. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"

static void error_truncate_mark(struct error *err, int n)
{
    if (n >= (int)sizeof(err->msg))
        memcpy(err->msg + sizeof(err->msg) - 4, "...", 4);
}

int error_set(struct error *err, int code, const char *fmt, ...)
{
    if (code > 0)
        code = -code;
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        error_truncate_mark(err, n);
        err->code = code;
    }
    return code;
}

int error_set_errno(struct error *err, int errnum, const char *fmt, ...)
{
    int code = errnum > 0 ? -errnum : errnum;

    if (err) {
        char what[ERROR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        int n = snprintf(err->msg, sizeof(err->msg), "%s: %s", what, strerror(-code));
        error_truncate_mark(err, n);
        err->code = code;
    }
    return code;
}

void error_prefix(struct error *err, const char *fmt, ...)
{
    char prefix[ERROR_MSG_MAX];
    char old[ERROR_MSG_MAX];
    va_list ap;

    if (!err)
        return;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    int n = snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
    error_truncate_mark(err, n);
}

void error_clear(struct error *err)
{
    if (!err)
        return;
    err->code = 0;
    err->msg[0] = '\0';
}

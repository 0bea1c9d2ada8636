/* SPDX-License-Identifier: Apache-2.0 */
/* metrics_client.c: reading a running daemon's /metrics, for `top` and `plan --size
 * --metrics-address`: a plain HTTP/1.0 GET (the endpoint is node-local) and the exposition's
 * lines, one sample at a time. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/cli.h"

/* How long the endpoint may stay silent before a read gives up. */
#define METRICS_READ_TIMEOUT_MS 5000

/* GET /metrics over plain HTTP/1.0. */
int cli_metrics_fetch(const char *address, char **ret, struct error *err)
{
    char host[256], *port;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    struct strbuf body = STRBUF_INIT;
    int fd = -1, r = 0;

    str_copy(host, address, sizeof(host));
    port = strrchr(host, ':');
    if (!port)
        return error_set(err, -EINVAL, "%s: give the metrics address as HOST:PORT", address);
    *port++ = '\0';
    if (getaddrinfo(*host ? host : "127.0.0.1", port, &hints, &ai) != 0 || !ai)
        return error_set(err, -EINVAL, "%s: cannot resolve that address", address);
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        r = error_set(err, -errno,
                      "no gpuslice metrics endpoint at %s: %s (is the device plugin running "
                      "with --metrics-address?)",
                      address, strerror(errno));
        goto out;
    }
    static const char req[] = "GET /metrics HTTP/1.0\r\nHost: gpuslice\r\n\r\n";
    if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
        r = error_set(err, -EIO, "%s: cannot send the request", address);
        goto out;
    }
    for (;;) {
        char buf[8192];
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, METRICS_READ_TIMEOUT_MS) <= 0) {
            r = error_set(err, -ETIMEDOUT, "%s: no answer within %d s", address,
                          METRICS_READ_TIMEOUT_MS / 1000);
            goto out;
        }
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        r = strbuf_append(&body, buf, (size_t)n);
        if (r < 0)
            goto out;
    }
    const char *start = strstr(strbuf_str(&body), "\r\n\r\n");
    if (!start || !strstr(strbuf_str(&body), " 200 ")) {
        r = error_set(err, -EIO, "%s: not a metrics answer", address);
        goto out;
    }
    *ret = str_dup(start + 4);
    r = *ret ? 0 : error_set(err, -ENOMEM, "out of memory");
out:
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    strbuf_release(&body);
    return r;
}

/* The value of label k in a "{a="x",b="y"}" block (no escapes in our label values). */
void cli_metrics_label(const char *labels, const char *k, char *out, size_t size)
{
    char key[64];
    snprintf(key, sizeof(key), "%s=\"", k);
    out[0] = '\0';
    for (const char *p = labels; (p = strstr(p, key));) {
        if (p == labels || p[-1] == '{' || p[-1] == ',') {
            p += strlen(key);
            size_t n = strcspn(p, "\"");
            snprintf(out, size, "%.*s", (int)n, p);
            return;
        }
        p += strlen(key);
    }
}

const char *cli_metrics_next(const char *text, struct cli_metric_sample *ret)
{
    for (const char *l = text; l && *l;) {
        const char *end = strchr(l, '\n'), *next = end ? end + 1 : NULL;
        const char *brace = strchr(l, '{');
        const char *close = brace ? strchr(brace, '}') : NULL;
        if (*l != '#' && *l != '\n' && brace && close && (!end || close < end)) {
            snprintf(ret->name, sizeof(ret->name), "%.*s", (int)(brace - l), l);
            snprintf(ret->labels, sizeof(ret->labels), "%.*s", (int)(close - brace + 1), brace);
            ret->value = strtod(close + 1, NULL);
            return next ? next : l + strlen(l);
        }
        l = next;
    }
    return NULL;
}

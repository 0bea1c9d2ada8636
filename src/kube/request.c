/* SPDX-License-Identifier: Apache-2.0 */
/* request.c: kube_request(), one call on any API path — what label writers need beyond the
 * node-label and Event helpers (NodeFeature objects, merge patches of Node labels). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube/internal.h"
#include "kube/kube.h"

int kube_request(struct kube_client *c, const char *method, const char *path, const char *body,
                 const char *content_type, char **ret_body, struct error *err)
{
    struct strbuf url = STRBUF_INIT, resp = STRBUF_INIT;
    struct kube__request rq = {0};
    long status = 0;
    int r;

    if (!c || !method || !path || path[0] != '/')
        return error_set(err, -EINVAL, "kube_request: missing client, method or absolute path");
    r = strbuf_printf(&url, "%s%s", c->auth.server, path);
    if (r < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    rq.method = method;
    rq.url = url.buf;
    rq.body = body;
    rq.content_type = content_type;
    rq.timeout_ms = c->request_timeout_ms;
    r = kube__perform(c, &rq, &resp, &status, err);
    if (r < 0)
        goto out;
    if (ret_body)
        *ret_body = strbuf_take(&resp);
out:
    strbuf_release(&url);
    strbuf_release(&resp);
    return r;
}

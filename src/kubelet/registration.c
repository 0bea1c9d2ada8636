/* SPDX-License-Identifier: Apache-2.0 */
/* registration.c: the client side of /v1beta1.Registration/Register (kubelet facts §1, §2)
 * and the retry backoff the daemon uses when it fails. One call, no retries here: the
 * daemon's loop owns timing. Never logs above debug. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"

int dp_register(const char *kubelet_socket, const char *endpoint, const char *resource_name,
                int timeout_ms, struct error *err)
{
    V1beta1__RegisterRequest rq = V1BETA1__REGISTER_REQUEST__INIT;
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    uint8_t *buf = NULL, *resp = NULL;
    size_t len, resp_len = 0;
    int r;

    o.pre_start_required = 0;
    o.get_preferred_allocation_available = 1;
    rq.version = (char *)DP_API_VERSION;
    rq.endpoint = (char *)endpoint;
    rq.resource_name = (char *)resource_name;
    rq.options = &o; /* kubelets before the dial-back read the options from here */
    len = protobuf_c_message_get_packed_size(&rq.base);
    buf = malloc(len ? len : 1);
    if (!buf)
        return error_set(err, -ENOMEM, "out of memory");
    protobuf_c_message_pack(&rq.base, buf);
    r = rpc_client_call(kubelet_socket, "/v1beta1.Registration/Register", buf, len, timeout_ms,
                        &resp, &resp_len, NULL, err);
    if (r < 0)
        error_prefix(err, "registering %s with %s", resource_name, kubelet_socket);
    free(resp);
    free(buf);
    return r;
}

unsigned dp_backoff_next_ms(unsigned prev_ms)
{
    if (prev_ms < DP_BACKOFF_MIN_MS)
        return DP_BACKOFF_MIN_MS;
    if (prev_ms >= DP_BACKOFF_MAX_MS / 2)
        return DP_BACKOFF_MAX_MS;
    return prev_ms * 2;
}

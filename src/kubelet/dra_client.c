/* SPDX-License-Identifier: Apache-2.0 */
/* dra_client.c: the kubelet's side of DRA plugin registration and DRAPlugin calls (GetInfo,
 * NotifyRegistrationStatus, the service choice, Node(Un)PrepareResources), with the
 * kubelet's checks and error texts. Used by tools/kubelet-sim and the tests; the daemon
 * only serves. One call per function, no retries. Never logs above debug. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dra/v1/api.pb-c.h"
#include "kubelet/internal.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"
#include "pluginregistration/v1/api.pb-c.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest dra_claims_msg;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim dra_claim_msg;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse dra_prep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse dra_unprep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse dra_prep_one;

void kdra_plugin_info_release(struct kdra_plugin_info *i)
{
    if (!i)
        return;
    free(i->type);
    free(i->name);
    free(i->endpoint);
    strv_free(i->supported_versions);
    memset(i, 0, sizeof(*i));
}

int kdra_client_get_info(const char *reg_socket, int timeout_ms, struct kdra_plugin_info *ret,
                         struct error *err)
{
    Pluginregistration__PluginInfo *m = NULL;
    struct kdra_plugin_info info = {0};
    uint8_t *resp = NULL;
    size_t len = 0;
    int r;

    r = rpc_client_call(reg_socket, "/pluginregistration.Registration/GetInfo", NULL, 0, timeout_ms,
                        &resp, &len, NULL, err);
    if (r < 0)
        goto out;
    m = pluginregistration__plugin_info__unpack(NULL, len, resp);
    if (!m) {
        r = error_set(err, -EBADMSG, "GetInfo answer from %s is not a PluginInfo", reg_socket);
        goto out;
    }
    info.type = str_dup(m->type);
    info.name = str_dup(m->name);
    info.endpoint = str_dup(m->endpoint);
    info.supported_versions = strv_new();
    r = info.type && info.name && info.endpoint && info.supported_versions ? 0 : -ENOMEM;
    for (size_t i = 0; r >= 0 && i < m->n_supported_versions; i++)
        r = strv_push(&info.supported_versions, m->supported_versions[i]);
    if (r < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    *ret = info;
    memset(&info, 0, sizeof(info));
out:
    kdra_plugin_info_release(&info);
    pluginregistration__plugin_info__free_unpacked(m, NULL);
    free(resp);
    return r;
}

int kdra_client_notify(const char *reg_socket, bool registered, const char *error, int timeout_ms,
                       struct error *err)
{
    Pluginregistration__RegistrationStatus st = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
    uint8_t *buf = NULL, *resp = NULL;
    size_t len = 0, resp_len = 0;
    int r;

    st.plugin_registered = registered;
    st.error = (char *)(error ? error : "");
    r = kdra__pack(&st.base, &buf, &len);
    if (r < 0)
        return error_set(err, r, "out of memory");
    r = rpc_client_call(reg_socket, "/pluginregistration.Registration/NotifyRegistrationStatus",
                        buf, len, timeout_ms, &resp, &resp_len, NULL, err);
    free(buf);
    free(resp);
    return r;
}

int kdra_pick_api(char *const *supported_versions, bool force_v1beta1, enum kdra_api *ret,
                  struct error *err)
{
    if (!force_v1beta1 && strv_contains(supported_versions, KDRA_VERSION_V1)) {
        *ret = KDRA_API_V1;
        return 0;
    }
    if (strv_contains(supported_versions, KDRA_VERSION_V1BETA1)) {
        *ret = KDRA_API_V1BETA1;
        return 0;
    }
    if (!supported_versions || !supported_versions[0])
        return error_set(err, -ENOTSUP, "empty list of supported versions");
    return error_set(err, -ENOTSUP, "none of the versions supported by the plugin (%s%s) are %s",
                     supported_versions[0], supported_versions[1] ? ", ..." : "",
                     force_v1beta1 ? "[v1beta1.DRAPlugin]" : "[v1.DRAPlugin v1beta1.DRAPlugin]");
}

static int encode_claims(const struct kdra_claim *claims, size_t n, uint8_t **ret, size_t *ret_len)
{
    dra_claims_msg m;
    dra_claim_msg *c = calloc(n ? n : 1, sizeof(*c));
    dra_claim_msg **cp = calloc(n ? n : 1, sizeof(*cp));
    int r = -ENOMEM;

    if (!c || !cp)
        goto out;
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__init(&m);
    for (size_t i = 0; i < n; i++) {
        k8s__io__kubelet__pkg__apis__dra__v1__claim__init(&c[i]);
        c[i].namespace_ = (char *)claims[i].namespace;
        c[i].uid = (char *)claims[i].uid;
        c[i].name = (char *)claims[i].name;
        cp[i] = &c[i];
    }
    m.claims = cp;
    m.n_claims = n;
    r = kdra__pack(&m.base, ret, ret_len);
out:
    free(c);
    free(cp);
    return r;
}

static int copy_prepared(const dra_prep_one *one, struct kdra_result *res)
{
    int r = 0;

    if (one && one->error && one->error[0])
        return kdra_result_set_error(res, "%s", one->error);
    for (size_t j = 0; one && j < one->n_devices && r >= 0; j++) {
        const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device *d = one->devices[j];
        char **rn = d->request_names, **cdi = d->cdi_device_ids;
        /* protobuf-c arrays are not NULL-terminated: copy through bounded lists */
        char **rn_v = calloc(d->n_request_names + 1, sizeof(*rn_v));
        char **cdi_v = calloc(d->n_cdi_device_ids + 1, sizeof(*cdi_v));
        if (rn_v && cdi_v) {
            /* empty repeated fields are NULL: memcpy must not see them */
            for (size_t k = 0; k < d->n_request_names; k++)
                rn_v[k] = rn[k];
            for (size_t k = 0; k < d->n_cdi_device_ids; k++)
                cdi_v[k] = cdi[k];
            r = kdra_result_add_device(res, d->pool_name, d->device_name, (const char *const *)rn_v,
                                       (const char *const *)cdi_v);
        } else {
            r = -ENOMEM;
        }
        if (r >= 0 && d->share_id && d->share_id[0]) {
            res->devices[res->n_devices - 1].share_id = str_dup(d->share_id);
            r = res->devices[res->n_devices - 1].share_id ? 0 : -ENOMEM;
        }
        free(rn_v);
        free(cdi_v);
    }
    return r;
}

/* Matches the answer's map entries to the claims by UID. */
static int decode_answer(bool prepare, const uint8_t *data, size_t len,
                         const struct kdra_claim *claims, size_t n, struct kdra_result *results,
                         struct error *err)
{
    const char *what = prepare ? "NodePrepareResources" : "NodeUnprepareResources";
    dra_prep_resp *p = NULL;
    dra_unprep_resp *u = NULL;
    size_t skipped = 0;
    int r = 0;

    if (prepare)
        p = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__unpack(NULL, len,
                                                                                          data);
    else
        u = k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__unpack(
            NULL, len, data);
    if (!p && !u)
        return error_set(err, -EBADMSG, "%s answer does not decode", what);
    for (size_t i = 0; i < n && r >= 0; i++) {
        bool found = false;
        for (size_t k = 0; p && k < p->n_claims && !found; k++) {
            found = str_eq(p->claims[k]->key, claims[i].uid);
            if (found)
                r = copy_prepared(p->claims[k]->value, &results[i]);
        }
        for (size_t k = 0; u && k < u->n_claims && !found; k++) {
            found = str_eq(u->claims[k]->key, claims[i].uid);
            if (found && u->claims[k]->value && u->claims[k]->value->error &&
                u->claims[k]->value->error[0])
                r = kdra_result_set_error(&results[i], "%s", u->claims[k]->value->error);
        }
        skipped += !found;
    }
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(p, NULL);
    k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(u, NULL);
    if (r < 0)
        return error_set(err, r, "out of memory");
    if (skipped)
        return error_set(err, -EBADMSG, "%s skipped %zu ResourceClaims", what, skipped);
    return 0;
}

int kdra_client_call(const char *socket, enum kdra_api api, bool prepare,
                     const struct kdra_claim *claims, size_t n_claims, int timeout_ms,
                     struct kdra_result *results, struct rpc_status *st, struct error *err)
{
    uint8_t *req = NULL, *resp = NULL;
    size_t len = 0, resp_len = 0;
    int r;

    r = encode_claims(claims, n_claims, &req, &len);
    if (r < 0)
        return error_set(err, r, "out of memory");
    r = rpc_client_call(socket, kdra_method(api, prepare), req, len, timeout_ms, &resp, &resp_len,
                        st, err);
    if (r >= 0)
        r = decode_answer(prepare, resp, resp_len, claims, n_claims, results, err);
    if (r < 0) {
        for (size_t i = 0; i < n_claims; i++)
            kdra_result_release(&results[i]);
    }
    free(req);
    free(resp);
    return r;
}

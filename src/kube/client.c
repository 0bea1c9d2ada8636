/* SPDX-License-Identifier: Apache-2.0 */
/* client.c: the Kubernetes API client over libcurl — resolving the settings (kubeconfig or
 * in-cluster), one request helper (auth headers, TLS from files or in-memory blobs, bounded
 * answers, cancellable through a curl multi handle), reading a node label and posting Events.
 * Library code: returns errors that name the URL, status, API message and a fix; logs only at
 * debug; never prints a token or key. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "kube/curl.h"
#include "kube/internal.h"

/* The longest curl_multi_poll while a request runs. Nothing needs it short: curl shortens it
 * to its own next timeout (CURLOPT_TIMEOUT_MS, keepalives), and whoever cancels also calls
 * curl_multi_wakeup (watch.c, event.c). A quiet watch then sleeps instead of waking each
 * second (it was the dra-plugin's one idle wake-up a second). */
#define KUBE_MULTI_POLL_MS 3600000

#define KUBE_CONNECT_TIMEOUT_MS 5000L
#define KUBE_ERROR_BODY_MAX_BYTES (64u << 10)
#define KUBE_EVENT_MESSAGE_MAX_BYTES 1024

/* ---- client ------------------------------------------------------------------------------ */

static const char *env_or(const char *value, const char *env)
{
    const char *e;

    if (value && *value)
        return value;
    e = getenv(env);
    return e && *e ? e : NULL;
}

/* KUBECONFIG may list several files (kubectl merges them); we take the first that exists. */
static int pick_kubeconfig(const char *list, char **ret)
{
    char **parts = strv_new();
    const char *p = list;
    int r = 0;

    if (!parts)
        return -ENOMEM;
    while (r >= 0 && p) {
        const char *colon = strchr(p, ':');
        char *one = colon ? strndup(p, (size_t)(colon - p)) : strdup(p);
        if (!one) {
            r = -ENOMEM;
            break;
        }
        if (*one)
            r = strv_push(&parts, one);
        free(one);
        p = colon ? colon + 1 : NULL;
    }
    for (size_t i = 0; r >= 0 && parts[i]; i++) {
        if (path_exists(parts[i]) || !parts[i + 1]) {
            *ret = strdup(parts[i]);
            r = *ret ? 0 : -ENOMEM;
            break;
        }
    }
    strv_free(parts);
    return r;
}

static int load_kubeconfig(const char *path, struct kube__auth *ret, struct error *err)
{
    struct kube__auth a = {0};
    char *text = NULL;
    size_t len = 0;
    int r;

    r = file_read_all(path, KUBE__KUBECONFIG_MAX_BYTES, &text, &len, err);
    if (r < 0) {
        error_prefix(err, "kubeconfig");
        return r;
    }
    r = kube__kubeconfig_parse(text, len, path, NULL, &a, err);
    explicit_bzero(text, len); /* it may hold a token or key */
    free(text);
    if (r < 0)
        return r;
    /* Say which file is missing now rather than as a TLS failure on every request. */
    const struct {
        const char *field, *file;
    } files[] = {
        {"certificate-authority", a.ca_file},
        {"client-certificate", a.cert_file},
        {"client-key", a.key_file},
        {"tokenFile", a.token_file},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(files); i++) {
        if (files[i].file && !path_exists(files[i].file)) {
            r = error_set(err, -ENOENT, "kubeconfig %s: %s file \"%s\" does not exist", path,
                          files[i].field, files[i].file);
            kube__auth_release(&a);
            return r;
        }
    }
    *ret = a;
    return 0;
}

int kube_client_new(const struct kube_options *o, struct kube_client **ret, struct error *err)
{
    static const struct kube_options none = {0};
    struct kube_client *c = NULL;
    const char *kc_list, *sa_dir, *override, *s;
    char *kc_path = NULL;
    int r;

    o = o ? o : &none;
    c = calloc(1, sizeof(*c));
    if (!c)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->request_timeout_ms =
        o->request_timeout_ms > 0 ? o->request_timeout_ms : KUBE_DEFAULT_REQUEST_TIMEOUT_MS;
    kc_list = env_or(o->kubeconfig, "KUBECONFIG");
    sa_dir = env_or(o->serviceaccount_dir, "GS_KUBE_SERVICEACCOUNT_DIR");
    sa_dir = sa_dir ? sa_dir : KUBE_SERVICEACCOUNT_DIR;
    override = o->api_server && *o->api_server ? o->api_server : NULL;

    if (kc_list) {
        r = pick_kubeconfig(kc_list, &kc_path);
        if (r >= 0)
            r = load_kubeconfig(kc_path, &c->auth, err);
        if (r < 0 && kc_path && strchr(kc_list, ':'))
            /* kubectl merges every file of the list; say which one we read */
            error_prefix(err,
                         "KUBECONFIG lists several files and gpuslice reads only the first "
                         "that exists, %s (kubectl would merge them; put the cluster, user "
                         "and current-context in that one)",
                         kc_path);
    } else if (getenv("KUBERNETES_SERVICE_HOST") || !override) {
        r = kube__incluster_auth(sa_dir, &c->auth, err);
        if (r == -ENOENT && !override && !getenv("KUBERNETES_SERVICE_HOST"))
            error_set(err, r,
                      "no Kubernetes API configured: give --kubeconfig (or KUBECONFIG), or "
                      "run in a pod with a service account");
    } else {
        r = 0; /* only a server URL: unauthenticated (test servers) */
    }
    if (r < 0)
        goto out;
    if (override) {
        if (!str_startswith(override, "https://") && !str_startswith(override, "http://")) {
            r = error_set(err, -EINVAL, "API server \"%s\" must start with https:// or http://",
                          override);
            goto out;
        }
        free(c->auth.server);
        c->auth.server = strdup(override);
    }
    s = env_or(o->node_name, "NODE_NAME");
    c->node_name = str_dup(s);
    c->event_namespace = KUBE__NODE_EVENT_NAMESPACE;
    if (!c->auth.server || (s && !c->node_name)) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    /* Last: libcurl and its TLS stack are mapped only once an API is actually configured. */
    r = kube__curl_load(&c->curl, err);
    if (r < 0)
        goto out;
    *ret = c;
    c = NULL;
    r = 0;
out:
    free(kc_path);
    kube_client_free(c);
    return r;
}

void kube_client_free(struct kube_client *c)
{
    if (!c)
        return;
    kube__auth_release(&c->auth);
    free(c->node_name);
    free(c->node_uid);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const char *kube_client_node_name(const struct kube_client *c)
{
    return c->node_name;
}

const char *kube_client_server(const struct kube_client *c)
{
    return c->auth.server;
}

void kube__remember_uid(struct kube_client *c, const char *node, const char *uid)
{
    char *copy;

    if (!uid || !str_eq(node, c->node_name))
        return;
    copy = strdup(uid);
    if (!copy)
        return; /* only an Event's involvedObject.uid is missing then */
    pthread_mutex_lock(&c->lock);
    free(c->node_uid);
    c->node_uid = copy;
    pthread_mutex_unlock(&c->lock);
}

/* ---- one request ------------------------------------------------------------------------- */

struct transfer {
    const struct kube_curl *curl;
    const struct kube__request *rq;
    CURL *easy;
    struct strbuf *body;    /* a 2xx answer without on_data */
    struct strbuf err_body; /* a non-2xx answer (bounded) */
    int cb_error;           /* on_data's or the cap's error, 0 = none */
};

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct transfer *t = userdata;
    size_t n = size * nmemb;
    long status = 0;
    int r;

    t->curl->easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status > 299)
        r = strbuf_append(&t->err_body, data, n);
    else if (t->rq->on_data)
        r = t->rq->on_data(data, n, t->rq->userdata);
    else
        r = strbuf_append(t->body, data, n);
    if (r < 0) {
        t->cb_error = r;
        return 0; /* aborts with CURLE_WRITE_ERROR */
    }
    return n;
}

/* The bearer token: re-read from its file on every connection (kubelet rotates service
 * account tokens), or the kubeconfig's static one. *ret owned; NULL when there is none. */
static int read_token(const struct kube__auth *a, char **ret, struct error *err)
{
    char *data = NULL;
    size_t len = 0;
    int r;

    *ret = NULL;
    if (!a->token_file) {
        *ret = str_dup(a->token);
        return !a->token || *ret ? 0 : -ENOMEM;
    }
    r = file_read_all(a->token_file, KUBE__TOKEN_MAX_BYTES, &data, &len, err);
    if (r < 0) {
        error_prefix(err, "service account token");
        return r;
    }
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
        data[--len] = '\0';
    *ret = data;
    return 0;
}

/* A token goes into a header line: control characters would end or split it. */
static bool token_is_printable(const char *t)
{
    for (const unsigned char *p = (const unsigned char *)t; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

static int set_blob(const struct kube_curl *k, CURL *e, CURLoption opt, char *data, size_t len)
{
    struct curl_blob b = {.data = data, .len = len, .flags = CURL_BLOB_COPY};
    return k->easy_setopt(e, opt, &b) == CURLE_OK ? 0 : -ENOTSUP;
}

/* TLS and credentials. The Authorization header is appended to *headers. */
static int setup_auth(struct kube_client *c, CURL *e, struct curl_slist **headers,
                      struct error *err)
{
    const struct kube__auth *a = &c->auth;
    const struct kube_curl *k = c->curl;
    struct strbuf sb = STRBUF_INIT;
    struct curl_slist *h;
    char *token = NULL;
    int r = 0;

    if (a->ca_data)
        r = set_blob(k, e, CURLOPT_CAINFO_BLOB, a->ca_data, a->ca_len);
    else if (a->ca_file)
        k->easy_setopt(e, CURLOPT_CAINFO, a->ca_file);
    if (a->insecure_skip_tls_verify) {
        k->easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        k->easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (r >= 0 && a->cert_data)
        r = set_blob(k, e, CURLOPT_SSLCERT_BLOB, a->cert_data, a->cert_len);
    else if (a->cert_file)
        k->easy_setopt(e, CURLOPT_SSLCERT, a->cert_file);
    if (r >= 0 && a->key_data)
        r = set_blob(k, e, CURLOPT_SSLKEY_BLOB, a->key_data, a->key_len);
    else if (a->key_file)
        k->easy_setopt(e, CURLOPT_SSLKEY, a->key_file);
    if (r < 0)
        return error_set(err, r,
                         "this libcurl cannot take certificates from memory; use "
                         "certificate files in the kubeconfig");
    if (a->username) {
        k->easy_setopt(e, CURLOPT_USERNAME, a->username);
        k->easy_setopt(e, CURLOPT_PASSWORD, a->password ? a->password : "");
    }
    r = read_token(a, &token, err);
    if (r < 0 || !token)
        return r;
    if (!token_is_printable(token)) {
        explicit_bzero(token, strlen(token));
        free(token);
        return error_set(err, -EINVAL, "the bearer token (%s) holds control characters",
                         a->token_file ? a->token_file : "kubeconfig user.token");
    }
    r = strbuf_printf(&sb, "Authorization: Bearer %s", token);
    explicit_bzero(token, strlen(token));
    free(token);
    if (r < 0)
        goto out;
    h = k->slist_append(*headers, sb.buf);
    if (!h) {
        r = -ENOMEM;
        goto out;
    }
    *headers = h;
out:
    if (sb.buf)
        explicit_bzero(sb.buf, sb.len);
    strbuf_release(&sb);
    return r < 0 ? error_set(err, r, "out of memory") : 0;
}

static void free_headers(const struct kube_curl *k, struct curl_slist *headers)
{
    for (struct curl_slist *h = headers; h; h = h->next)
        explicit_bzero(h->data, strlen(h->data)); /* the bearer token */
    k->slist_free_all(headers);
}

/* Runs the transfer on the caller's multi handle so that another thread can interrupt it
 * (curl_multi_wakeup) at once, however quiet the connection. */
static CURLcode run_cancellable(const struct kube_curl *k, CURL *e, struct kube__cancel *cancel,
                                bool *ret_cancelled)
{
    CURLM *m = cancel->multi;
    CURLcode res = CURLE_OK;
    CURLMsg *msg;
    int running = 1, n_msgs;

    *ret_cancelled = false;
    if (k->multi_add_handle(m, e) != CURLM_OK)
        return CURLE_FAILED_INIT;
    while (running) {
        if (atomic_load(&cancel->stop)) {
            *ret_cancelled = true;
            break;
        }
        if (k->multi_perform(m, &running) != CURLM_OK) {
            res = CURLE_FAILED_INIT;
            break;
        }
        if (running)
            k->multi_poll(m, NULL, 0, KUBE_MULTI_POLL_MS, NULL);
    }
    for (msg = k->multi_info_read(m, &n_msgs); msg; msg = k->multi_info_read(m, &n_msgs))
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == e)
            res = msg->data.result;
    k->multi_remove_handle(m, e);
    return res;
}

static int transport_error(const struct kube_curl *k, const char *method, const char *url,
                           CURLcode res, const char *errbuf, struct error *err)
{
    const char *what = errbuf && *errbuf ? errbuf : k->easy_strerror(res);

    switch (res) {
    case CURLE_OPERATION_TIMEDOUT:
        return error_set(err, -ETIMEDOUT, "%s %s: %s; the API server did not answer in time",
                         method, url, what);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER:
        return error_set(err, -EIO,
                         "%s %s: TLS failed: %s; check the certificate-authority (in a pod: the "
                         "service account's ca.crt) and the client certificate",
                         method, url, what);
    default:
        return error_set(err, res == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO,
                         "%s %s: %s; check that the API server is reachable from this node", method,
                         url, what);
    }
}

/* What a 403 refused, from the API's message ("... cannot <verb> resource \"<res>\" in API
 * group \"<group>\" in the namespace \"<ns>\"" or "... at the cluster scope"): the verb,
 * the resource as RBAC names it (<res> or <res>.<group>) and the namespace ("" = cluster
 * scope). false when the message does not say. */
static bool refused(const char *msg, char *verb, size_t verb_size, char *what, size_t what_size,
                    char *ns, size_t ns_size)
{
    const char *p = msg ? strstr(msg, " cannot ") : NULL, *q;
    char res[128] = "", group[128] = "";

    if (!p)
        return false;
    p += strlen(" cannot ");
    q = strchr(p, ' ');
    if (!q || (size_t)(q - p) >= verb_size || !str_startswith(q, " resource \""))
        return false;
    snprintf(verb, verb_size, "%.*s", (int)(q - p), p);
    p = q + strlen(" resource \"");
    q = strchr(p, '"');
    if (!q || (size_t)(q - p) >= sizeof(res))
        return false;
    snprintf(res, sizeof(res), "%.*s", (int)(q - p), p);
    p = strstr(q, " in API group \"");
    if (p) {
        p += strlen(" in API group \"");
        q = strchr(p, '"');
        if (q && (size_t)(q - p) < sizeof(group))
            snprintf(group, sizeof(group), "%.*s", (int)(q - p), p);
    }
    snprintf(what, what_size, "%s%s%s", res, *group ? "." : "", group);
    ns[0] = '\0';
    p = q ? strstr(q, " in the namespace \"") : NULL;
    if (p) {
        p += strlen(" in the namespace \"");
        q = strchr(p, '"');
        if (q && (size_t)(q - p) < ns_size)
            snprintf(ns, ns_size, "%.*s", (int)(q - p), p);
    }
    return true;
}

/* Where the ClusterRole a refused request needs is written down. */
static const char *rbac_doc(const char *what)
{
    return strstr(what, KUBE_DRA_GROUP) ? "deployments/kustomize/components/dra, docs/dra.md"
                                        : "docs/kubernetes-api.md";
}

/* A 404 names an object that does not exist (a NotFound Status with details.name), or a
 * path the server does not serve at all: under /apis/<group>/<version>/ that means the API
 * group (a CustomResourceDefinition) is not installed. The group/version into gv. */
static bool api_not_served(const char *url, const char *body, size_t body_len, char *gv,
                           size_t gv_size)
{
    const char *p = strstr(url, "/apis/"), *q;
    json_t *j = body && body_len ? json_loadb(body, body_len, 0, NULL) : NULL;
    bool named = json_string_value(json_object_get(json_object_get(j, "details"), "name"));

    json_decref(j);
    if (named || !p)
        return false;
    p += strlen("/apis/");
    q = strchr(p, '/');
    q = q ? strchr(q + 1, '/') : NULL;
    snprintf(gv, gv_size, "%.*s", (int)(q ? q - p : (ptrdiff_t)strlen(p)), p);
    return true;
}

/* A short one-line plain-text body ("404 page not found", what kube-apiserver answers for a
 * path nobody serves) as the message when there is no Status; NULL for anything else (HTML,
 * JSON, binary, long). Owned. */
static char *plain_message(const char *body, size_t len)
{
    if (!body)
        return NULL;
    while (len > 0 && (body[len - 1] == '\n' || body[len - 1] == '\r'))
        len--;
    if (len == 0 || len > 100 || body[0] == '<' || body[0] == '{')
        return NULL;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)body[i] < 0x20 || (unsigned char)body[i] > 0x7e)
            return NULL;
    return strndup(body, len);
}

int kube__http_error(const char *method, const char *url, long status, const char *body,
                     size_t body_len, struct error *err)
{
    char *api_msg = kube__status_message(body, body_len);
    char *text = api_msg ? NULL : plain_message(body, body_len);
    const char *msg = api_msg ? api_msg : text ? text : "(no message)";
    char verb[32], what[300], ns[256], gv[256], hint[2048] = "";
    int code = -EIO;

    switch (status) {
    case 401:
        code = -EACCES;
        snprintf(hint, sizeof(hint),
                 "; the credentials were refused (an expired or revoked token, or a client "
                 "certificate the cluster does not trust)");
        break;
    case 403:
        code = -EACCES;
        if (!refused(api_msg, verb, sizeof(verb), what, sizeof(what), ns, sizeof(ns)) ||
            (str_eq(what, "nodes") &&
             (str_eq(verb, "get") || str_eq(verb, "list") || str_eq(verb, "watch"))))
            snprintf(hint, sizeof(hint),
                     "; grant get/list/watch on nodes and create on events to the service "
                     "account (ClusterRole in docs/kubernetes-api.md)");
        else if (*ns)
            snprintf(hint, sizeof(hint),
                     "; the service account may not %s %s in namespace \"%s\": grant \"%s\" on "
                     "\"%s\" there (a Role, or a ClusterRole; %s)",
                     verb, what, ns, verb, what, rbac_doc(what));
        else
            snprintf(hint, sizeof(hint),
                     "; the service account may not %s %s: grant \"%s\" on \"%s\" in its "
                     "ClusterRole (%s)",
                     verb, what, verb, what, rbac_doc(what));
        break;
    case 404:
        if (api_not_served(url, body, body_len, gv, sizeof(gv)) &&
            str_startswith(gv, KUBE_DRA_GROUP "/")) {
            code = -EOPNOTSUPP;
            snprintf(hint, sizeof(hint),
                     "; the API server does not serve %s: Dynamic Resource Allocation is off "
                     "there or that version is not enabled (docs/dra.md)",
                     gv);
            break;
        }
        if (api_not_served(url, body, body_len, gv, sizeof(gv))) {
            code = -EOPNOTSUPP;
            snprintf(hint, sizeof(hint),
                     "; the API server does not serve %s: that API group is not installed "
                     "(its CustomResourceDefinition is missing)",
                     gv);
            break;
        }
        code = -ENOENT;
        if (strstr(url, "/api/v1/nodes/"))
            snprintf(hint, sizeof(hint),
                     "; check the name (NODE_NAME should come from spec.nodeName through the "
                     "downward API)");
        break;
    case 409:
        code = -EEXIST;
        if (strstr(url, "/resourceslices/"))
            snprintf(hint, sizeof(hint),
                     "; the ResourceSlice changed since it was read: list the slices again and "
                     "retry with the new resourceVersion");
        break;
    case 410:
        code = -ESTALE;
        break;
    case 422: /* validation: the message names the field */
        code = -EINVAL;
        break;
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
        code = -EAGAIN;
        snprintf(hint, sizeof(hint),
                 "; the API server is overloaded or failing, retrying later may help");
        break;
    default:
        break;
    }
    error_set(err, code, "%s %s: HTTP %ld: %s%s", method, url, status, msg, hint);
    free(api_msg);
    free(text);
    return code;
}

int kube__perform(struct kube_client *c, const struct kube__request *rq, struct strbuf *response,
                  long *ret_status, struct error *err)
{
    const struct kube_curl *k = c->curl;
    struct transfer t = {.curl = k, .rq = rq, .body = response, .err_body = STRBUF_INIT};
    struct curl_slist *headers = NULL, *h;
    char errbuf[CURL_ERROR_SIZE] = "";
    bool cancelled = false;
    long status = 0;
    CURLcode res;
    CURL *e;
    int r;

    t.err_body.max_len = KUBE_ERROR_BODY_MAX_BYTES;
    *ret_status = 0;
    e = k->easy_init();
    if (!e)
        return error_set(err, -ENOMEM, "%s %s: cannot create a curl handle", rq->method, rq->url);
    t.easy = e;
    h = k->slist_append(NULL, "Accept: application/json");
    if (h && rq->body) {
        char ct[128];
        snprintf(ct, sizeof(ct), "Content-Type: %s",
                 rq->content_type ? rq->content_type : "application/json");
        h = k->slist_append(h, ct);
    }
    if (!h) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    headers = h;
    r = setup_auth(c, e, &headers, err);
    if (r < 0) {
        error_prefix(err, "%s %s", rq->method, rq->url);
        goto out;
    }
    k->easy_setopt(e, CURLOPT_URL, rq->url);
    k->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    k->easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    k->easy_setopt(e, CURLOPT_USERAGENT, "gpuslice");
    k->easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    k->easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    k->easy_setopt(e, CURLOPT_WRITEDATA, &t);
    k->easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, KUBE_CONNECT_TIMEOUT_MS);
    k->easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    k->easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
    k->easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
    k->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
    if (rq->timeout_ms > 0)
        k->easy_setopt(e, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
    if (rq->body)
        k->easy_setopt(e, CURLOPT_POSTFIELDS, rq->body);
    else
        k->easy_setopt(e, CURLOPT_HTTPGET, 1L);
    if (strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "PATCH") == 0 ||
        strcmp(rq->method, "DELETE") == 0)
        k->easy_setopt(e, CURLOPT_CUSTOMREQUEST, rq->method);

    if (rq->cancel)
        res = run_cancellable(k, e, rq->cancel, &cancelled);
    else
        res = k->easy_perform(e);
    k->easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    *ret_status = status;
    if (cancelled) {
        r = error_set(err, -ECANCELED, "%s %s: cancelled", rq->method, rq->url);
    } else if (t.cb_error < 0 && rq->on_data && status >= 200 && status <= 299) {
        r = t.cb_error; /* on_data's own error, described by it */
        error_prefix(err, "%s %s", rq->method, rq->url);
    } else if (t.cb_error < 0) {
        r = error_set(err, t.cb_error, "%s %s: the answer is too large or memory ran out",
                      rq->method, rq->url);
    } else if (res != CURLE_OK) {
        r = transport_error(k, rq->method, rq->url, res, errbuf, err);
    } else if (status < 200 || status > 299) {
        r = kube__http_error(rq->method, rq->url, status, t.err_body.buf, t.err_body.len, err);
    } else {
        r = 0;
    }
out:
    k->easy_cleanup(e);
    free_headers(k, headers);
    strbuf_release(&t.err_body);
    return r;
}

/* ---- node label -------------------------------------------------------------------------- */

const char *kube__node_or_default(const struct kube_client *c, const char *node, struct error *err)
{
    node = node ? node : c->node_name;
    if (!node || !*node)
        error_set(err, -EINVAL,
                  "no node name: set NODE_NAME (from spec.nodeName through the "
                  "downward API)");
    return node && *node ? node : NULL;
}

/* GET the node into *ret (owned by the caller on success). */
static int get_node(struct kube_client *c, const char *node, const char *label_key,
                    struct kube__node_info *ret, struct error *err)
{
    struct strbuf body = STRBUF_INIT;
    struct kube__request rq = {.method = "GET", .timeout_ms = c->request_timeout_ms};
    char *url = NULL;
    long status;
    int r;

    body.max_len = KUBE__BODY_MAX_BYTES;
    r = kube__url_node(c->auth.server, node, &url);
    if (r < 0)
        return error_set(err, r, "out of memory");
    rq.url = url;
    r = kube__perform(c, &rq, &body, &status, err);
    if (r < 0)
        goto out;
    r = kube__node_parse(body.buf ? body.buf : "", body.len, label_key, ret, err);
    if (r < 0) {
        error_prefix(err, "GET %s", url);
        goto out;
    }
    kube__remember_uid(c, node, ret->uid);
out:
    strbuf_release(&body);
    free(url);
    return r;
}

int kube_node_get_label(struct kube_client *c, const char *node, const char *label_key,
                        char **ret_value, struct error *err)
{
    struct kube__node_info info = {0};
    int r;

    node = kube__node_or_default(c, node, err);
    if (!node)
        return -EINVAL;
    if (!label_key || !*label_key)
        return error_set(err, -EINVAL, "no label key to read");
    r = get_node(c, node, label_key, &info, err);
    if (r >= 0) {
        *ret_value = info.label_value;
        info.label_value = NULL;
    }
    kube__node_info_release(&info);
    return r;
}

int kube_node_uid(struct kube_client *c, const char *node, char **ret_uid, struct error *err)
{
    struct kube__node_info info = {0};
    char *uid = NULL;
    int r;

    node = kube__node_or_default(c, node, err);
    if (!node)
        return -EINVAL;
    if (str_eq(node, c->node_name)) {
        pthread_mutex_lock(&c->lock);
        uid = str_dup(c->node_uid);
        pthread_mutex_unlock(&c->lock);
        if (uid) {
            *ret_uid = uid;
            return 0;
        }
    }
    r = get_node(c, node, NULL, &info, err);
    if (r >= 0 && !info.uid)
        r = error_set(err, -EINVAL, "node \"%s\" has no metadata.uid", node);
    if (r >= 0) {
        *ret_uid = info.uid;
        info.uid = NULL;
    }
    kube__node_info_release(&info);
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* dra.c: the DRA kubelet plugin's gRPC side on rpc.h — DRAPlugin in v1 and v1beta1 on
 * <plugins>/<driver>/dra.sock and pluginregistration.Registration on the registrar socket.
 * Requests are checked and decoded here (hostile input stops at this file), handed to the
 * caller's ops as plain structs, and the answers encoded back. Never logs above debug. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "dra/v1/api.pb-c.h"
#include "kubelet/internal.h"
#include "kubelet/kubelet.h"
#include "rpc/rpc.h"
#include "pluginregistration/v1/api.pb-c.h"

/* v1 and v1beta1 share every message except Device.share_id (v1 only, field 5), so one
 * codec, the v1 one, serves both: a v1beta1 answer just never carries field 5. */
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest dra_claims_msg;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse dra_prep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry
    dra_prep_entry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse dra_prep_one;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse dra_unprep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
    dra_unprep_entry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse dra_unprep_one;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device dra_device_msg;

#define M_GET_INFO "/pluginregistration.Registration/GetInfo"
#define M_NOTIFY "/pluginregistration.Registration/NotifyRegistrationStatus"

/* ---- results ------------------------------------------------------------------------------ */

static int strv_copy(const char *const *src, char ***ret)
{
    char **v = strv_new();
    int r = v ? 0 : -ENOMEM;

    for (size_t i = 0; r >= 0 && src && src[i]; i++)
        r = strv_push(&v, src[i]);
    if (r < 0) {
        strv_free(v);
        return -ENOMEM;
    }
    *ret = v;
    return 0;
}

static void device_release(struct kdra_device *d)
{
    strv_free(d->request_names);
    strv_free(d->cdi_device_ids);
    free(d->pool_name);
    free(d->device_name);
    free(d->share_id);
    memset(d, 0, sizeof(*d));
}

int kdra_result_add_device(struct kdra_result *r, const char *pool_name, const char *device_name,
                           const char *const *request_names, const char *const *cdi_device_ids)
{
    struct kdra_device d = {0}, *grown;

    d.pool_name = str_dup(pool_name ? pool_name : "");
    d.device_name = str_dup(device_name ? device_name : "");
    if (!d.pool_name || !d.device_name || strv_copy(request_names, &d.request_names) < 0 ||
        strv_copy(cdi_device_ids, &d.cdi_device_ids) < 0)
        goto fail;
    grown = realloc(r->devices, (r->n_devices + 1) * sizeof(*grown));
    if (!grown)
        goto fail;
    r->devices = grown;
    r->devices[r->n_devices++] = d;
    return 0;
fail:
    device_release(&d);
    return -ENOMEM;
}

int kdra_result_set_error(struct kdra_result *r, const char *fmt, ...)
{
    struct strbuf sb = STRBUF_INIT;
    va_list ap;
    int rr;

    va_start(ap, fmt);
    rr = strbuf_vprintf(&sb, fmt, ap);
    va_end(ap);
    if (rr < 0) {
        strbuf_release(&sb);
        return rr;
    }
    free(r->error);
    r->error = strbuf_take(&sb);
    return r->error ? 0 : -ENOMEM;
}

void kdra_result_release(struct kdra_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_devices; i++)
        device_release(&r->devices[i]);
    free(r->devices);
    free(r->error);
    memset(r, 0, sizeof(*r));
}

void kdra__results_free(struct kdra_result *results, size_t n)
{
    for (size_t i = 0; results && i < n; i++)
        kdra_result_release(&results[i]);
    free(results);
}

const char *kdra_api_name(enum kdra_api api)
{
    return api == KDRA_API_V1BETA1 ? "v1beta1" : "v1";
}

const char *kdra_method(enum kdra_api api, bool prepare)
{
    static const char *const paths[2][2] = {
        {"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
         "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"},
        {"/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
         "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources"},
    };
    return paths[api == KDRA_API_V1BETA1][prepare];
}

/* ---- codec -------------------------------------------------------------------------------- */

int kdra__pack(const ProtobufCMessage *msg, uint8_t **ret, size_t *ret_len)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(n ? n : 1);

    if (!buf)
        return -ENOMEM;
    protobuf_c_message_pack(msg, buf);
    *ret = buf;
    *ret_len = n;
    return 0;
}

static int pack_to(const ProtobufCMessage *msg, struct strbuf *out)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    int r = kdra__pack(msg, &buf, &n);

    if (r == 0)
        r = strbuf_append(out, (const char *)buf, n);
    free(buf);
    return r;
}

bool kdra__name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > KDRA_MAX_NAME_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.' || c == '_';
        if (!ok)
            return false;
    }
    return true;
}

/* Checks one decoded claim list; sets st to INVALID_ARGUMENT with what is wrong. */
static bool claims_valid(const dra_claims_msg *m, struct rpc_status *st)
{
    static const char *const what[] = {"namespace", "uid", "name"};

    if (m->n_claims > KDRA_MAX_CLAIMS) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "%zu claims in one request, at most %d",
                       m->n_claims, KDRA_MAX_CLAIMS);
        return false;
    }
    for (size_t i = 0; i < m->n_claims; i++) {
        const char *f[3] = {m->claims[i]->namespace_, m->claims[i]->uid, m->claims[i]->name};
        for (size_t k = 0; k < 3; k++) {
            if (!kdra__name_ok(f[k])) {
                rpc_status_set(st, RPC_INVALID_ARGUMENT,
                               "claim %zu: invalid %s: want 1..%d characters of "
                               "[A-Za-z0-9._-]",
                               i, what[k], KDRA_MAX_NAME_LEN);
                return false;
            }
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(m->claims[j]->uid, m->claims[i]->uid) == 0) {
                rpc_status_set(st, RPC_INVALID_ARGUMENT, "claim uid %s appears twice",
                               m->claims[i]->uid);
                return false;
            }
        }
    }
    return true;
}

/* Decodes a Node(Un)PrepareResourcesRequest (both are `repeated Claim claims = 1`). On
 * success *ret_msg owns the strings *ret_claims points into; st set on bad input. */
static int claims_decode(const uint8_t *req, size_t len, dra_claims_msg **ret_msg,
                         struct kdra_claim **ret_claims, struct rpc_status *st)
{
    dra_claims_msg *m =
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, len,
                                                                                     req);
    struct kdra_claim *c = NULL;

    if (!m) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "malformed request: not a list of claims");
        return -EINVAL;
    }
    if (!claims_valid(m, st))
        goto fail;
    c = calloc(m->n_claims ? m->n_claims : 1, sizeof(*c));
    if (!c)
        goto fail;
    for (size_t i = 0; i < m->n_claims; i++) {
        c[i].namespace = m->claims[i]->namespace_;
        c[i].uid = m->claims[i]->uid;
        c[i].name = m->claims[i]->name;
    }
    *ret_msg = m;
    *ret_claims = c;
    return 0;
fail:
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(m, NULL);
    return st->code != RPC_OK ? -EINVAL : -ENOMEM;
}

/* The messages of one NodePrepareResourcesResponse, pointing into the results. */
struct prep_msg {
    dra_prep_resp resp;
    dra_prep_entry *entries, **entry_ptrs;
    dra_prep_one *ones;
    dra_device_msg **devs; /* per claim: an array of n_devices */
    dra_device_msg ***dev_ptrs;
    size_t n;
};

static void prep_msg_release(struct prep_msg *m)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->devs)
            free(m->devs[i]);
        if (m->dev_ptrs)
            free(m->dev_ptrs[i]);
    }
    free(m->entries);
    free(m->entry_ptrs);
    free(m->ones);
    free(m->devs);
    free(m->dev_ptrs);
}

static int prep_one_fill(dra_prep_one *one, dra_device_msg **ret_devs, dra_device_msg ***ret_ptrs,
                         const struct kdra_result *res, enum kdra_api api)
{
    size_t n = res->n_devices;
    dra_device_msg *d = calloc(n ? n : 1, sizeof(*d));
    dra_device_msg **p = calloc(n ? n : 1, sizeof(*p));

    *ret_devs = d;
    *ret_ptrs = p;
    if (!d || !p)
        return -ENOMEM;
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(one);
    for (size_t j = 0; j < n && !res->error; j++) {
        const struct kdra_device *kd = &res->devices[j];
        k8s__io__kubelet__pkg__apis__dra__v1__device__init(&d[j]);
        d[j].request_names = kd->request_names;
        d[j].n_request_names = strv_length(kd->request_names);
        d[j].pool_name = kd->pool_name;
        d[j].device_name = kd->device_name;
        d[j].cdi_device_ids = kd->cdi_device_ids;
        d[j].n_cdi_device_ids = strv_length(kd->cdi_device_ids);
        if (api == KDRA_API_V1 && kd->share_id)
            d[j].share_id = kd->share_id;
        p[j] = &d[j];
    }
    if (res->error) {
        one->error = res->error; /* devices are ignored by the kubelet: send none */
    } else {
        one->devices = p;
        one->n_devices = n;
    }
    return 0;
}

static int encode_prepare(enum kdra_api api, const struct kdra_claim *claims,
                          const struct kdra_result *results, size_t n, struct strbuf *out)
{
    struct prep_msg m = {0};
    int r = -ENOMEM;

    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__init(&m.resp);
    m.entries = calloc(n ? n : 1, sizeof(*m.entries));
    m.entry_ptrs = calloc(n ? n : 1, sizeof(*m.entry_ptrs));
    m.ones = calloc(n ? n : 1, sizeof(*m.ones));
    m.devs = calloc(n ? n : 1, sizeof(*m.devs));
    m.dev_ptrs = calloc(n ? n : 1, sizeof(*m.dev_ptrs));
    if (!m.entries || !m.entry_ptrs || !m.ones || !m.devs || !m.dev_ptrs)
        goto out;
    m.n = n;
    for (size_t i = 0; i < n; i++) {
        if (prep_one_fill(&m.ones[i], &m.devs[i], &m.dev_ptrs[i], &results[i], api) < 0)
            goto out;
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(
            &m.entries[i]);
        m.entries[i].key = (char *)claims[i].uid;
        m.entries[i].value = &m.ones[i];
        m.entry_ptrs[i] = &m.entries[i];
    }
    m.resp.claims = m.entry_ptrs;
    m.resp.n_claims = n;
    r = pack_to(&m.resp.base, out);
out:
    prep_msg_release(&m);
    return r;
}

static int encode_unprepare(const struct kdra_claim *claims, const struct kdra_result *results,
                            size_t n, struct strbuf *out)
{
    dra_unprep_resp resp;
    dra_unprep_entry *e = calloc(n ? n : 1, sizeof(*e));
    dra_unprep_entry **ep = calloc(n ? n : 1, sizeof(*ep));
    dra_unprep_one *ones = calloc(n ? n : 1, sizeof(*ones));
    int r = -ENOMEM;

    if (!e || !ep || !ones)
        goto out;
    k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__init(&resp);
    for (size_t i = 0; i < n; i++) {
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(&ones[i]);
        if (results[i].error)
            ones[i].error = results[i].error;
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(
            &e[i]);
        e[i].key = (char *)claims[i].uid;
        e[i].value = &ones[i];
        ep[i] = &e[i];
    }
    resp.claims = ep;
    resp.n_claims = n;
    r = pack_to(&resp.base, out);
out:
    free(e);
    free(ep);
    free(ones);
    return r;
}

/* ---- server ------------------------------------------------------------------------------- */

/* Calls waiting for a worker beyond this are refused UNAVAILABLE (the kubelet retries). */
#define KDRA_MAX_WAITING 256

struct kdra_handler {
    struct kdra_server *srv;
    enum kdra_api api;
};

/* One NodePrepareResources/NodeUnprepareResources call, decoded on the rpc thread and run
 * by a worker. */
struct kdra_job {
    struct kdra_job *next;
    struct kdra_handler *h;
    bool prepare;
    struct rpc_call *call;
    dra_claims_msg *m;
    struct kdra_claim *claims; /* point into m */
    size_t n;
};

/* The workers: up to `max` threads, started as calls come and joined at stop. A job runs
 * once no running job and no job queued before it names one of its claim UIDs: calls on one
 * claim run one after the other in arrival order, calls on other claims side by side. */
struct kdra_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* a job came, one finished, or quit */
    struct kdra_job *queue, *running;
    size_t n_waiting, n_threads, n_idle, max;
    pthread_t threads[KDRA_WORKERS_MAX];
    bool quit;
};

struct kdra_server {
    char *driver_name;
    char *plugin_dir; /* <plugins>/<driver> */
    char *registrar_dir;
    char *socket_path;
    char *reg_path;
    const struct kdra_ops *ops;
    void *ctx;
    struct kdra_handler handlers[2]; /* by enum kdra_api */
    struct rpc_server *dra;
    struct rpc_server *reg;
    bool started;
    struct kdra_pool pool;

    pthread_mutex_t lock; /* reg_state */
    struct kdra_registration reg_state;
};

static void job_free(struct kdra_job *j)
{
    if (!j)
        return;
    free(j->claims);
    if (j->m)
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(j->m,
                                                                                            NULL);
    free(j);
}

/* Calls the op and answers the call. A worker thread. */
static void job_run(struct kdra_job *j)
{
    struct kdra_server *s = j->h->srv;
    struct rpc_status st = {RPC_OK, ""};
    struct strbuf resp = STRBUF_INIT;
    struct kdra_result *results = NULL;
    int r;

    if (rpc_call_cancelled(j->call)) { /* the kubelet gave up (deadline, restart): it retries */
        rpc_call_finish(j->call, NULL, 0, NULL);
        return;
    }
    results = calloc(j->n ? j->n : 1, sizeof(*results));
    log_debug("dra %s api=%s claims=%zu first=%s/%s", j->prepare ? "prepare" : "unprepare",
              kdra_api_name(j->h->api), j->n, j->n ? j->claims[0].namespace : "-",
              j->n ? j->claims[0].name : "-");
    if (!results)
        r = -ENOMEM;
    else if (j->prepare)
        r = s->ops->prepare(s->ctx, j->h->api, j->claims, j->n, results, &st);
    else
        r = s->ops->unprepare(s->ctx, j->h->api, j->claims, j->n, results, &st);
    /* a whole-call failure sends st (or UNKNOWN with strerror's text for a bare errno) */
    if (r >= 0 && st.code == RPC_OK)
        r = j->prepare ? encode_prepare(j->h->api, j->claims, results, j->n, &resp)
                       : encode_unprepare(j->claims, results, j->n, &resp);
    if (r < 0 && st.code == RPC_OK)
        rpc_status_set(&st, RPC_UNKNOWN, "%s", strerror(-r));
    rpc_call_finish(j->call, (const uint8_t *)resp.buf, resp.len, &st);
    strbuf_release(&resp);
    kdra__results_free(results, j->n);
}

static bool jobs_share_claim(const struct kdra_job *a, const struct kdra_job *b)
{
    for (size_t i = 0; i < a->n; i++)
        for (size_t k = 0; k < b->n; k++)
            if (strcmp(a->claims[i].uid, b->claims[k].uid) == 0)
                return true;
    return false;
}

/* The first queued job free to run, taken off the queue; NULL when none. Under the lock. */
static struct kdra_job *pool_take_locked(struct kdra_pool *p)
{
    for (struct kdra_job **jp = &p->queue; *jp; jp = &(*jp)->next) {
        struct kdra_job *j = *jp;
        bool blocked = false;

        for (const struct kdra_job *r = p->running; r && !blocked; r = r->next)
            blocked = jobs_share_claim(j, r);
        for (const struct kdra_job *e = p->queue; e != j && !blocked; e = e->next)
            blocked = jobs_share_claim(j, e);
        if (blocked)
            continue;
        *jp = j->next;
        j->next = p->running;
        p->running = j;
        p->n_waiting--;
        return j;
    }
    return NULL;
}

static void pool_unlink_running_locked(struct kdra_pool *p, struct kdra_job *j)
{
    for (struct kdra_job **jp = &p->running; *jp; jp = &(*jp)->next) {
        if (*jp == j) {
            *jp = j->next;
            return;
        }
    }
}

static void *pool_thread(void *arg)
{
    struct kdra_pool *p = arg;

    pthread_mutex_lock(&p->lock);
    while (!p->quit || p->queue) {
        struct kdra_job *j = pool_take_locked(p);

        if (!j) {
            if (p->quit)
                break; /* what is left waits on a running job of its claim: its worker runs it */
            p->n_idle++;
            pthread_cond_wait(&p->cond, &p->lock);
            p->n_idle--;
            continue;
        }
        pthread_mutex_unlock(&p->lock);
        job_run(j);
        pthread_mutex_lock(&p->lock);
        pool_unlink_running_locked(p, j);
        job_free(j);
        pthread_cond_broadcast(&p->cond); /* jobs of the same claims may run now */
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Queues a decoded call and makes sure a worker will take it (starting one when none is
 * idle and fewer than max run). UNAVAILABLE when stopping or too many calls wait. */
static int pool_submit(struct kdra_pool *p, struct kdra_job *j, struct rpc_status *st)
{
    struct kdra_job **tail;
    int r = 0;

    pthread_mutex_lock(&p->lock);
    if (p->quit) {
        rpc_status_set(st, RPC_UNAVAILABLE, "the DRA plugin is stopping");
        r = -ESHUTDOWN;
        goto out;
    }
    if (p->n_waiting >= KDRA_MAX_WAITING) {
        rpc_status_set(st, RPC_UNAVAILABLE, "%d DRA calls are waiting already; retry later",
                       KDRA_MAX_WAITING);
        r = -EBUSY;
        goto out;
    }
    for (tail = &p->queue; *tail; tail = &(*tail)->next)
        ;
    *tail = j;
    p->n_waiting++;
    if (p->n_idle == 0 && p->n_threads < p->max) {
        r = pthread_create(&p->threads[p->n_threads], NULL, pool_thread, p);
        if (r == 0) {
            pthread_setname_np(p->threads[p->n_threads], "gs-dra-worker");
            p->n_threads++;
        } else if (p->n_threads == 0) { /* nobody would ever run it */
            *tail = NULL;
            p->n_waiting--;
            rpc_status_set(st, RPC_UNAVAILABLE, "cannot start a DRA worker: %s", strerror(r));
            r = -r;
            goto out;
        }
        r = 0;
    }
    pthread_cond_broadcast(&p->cond);
out:
    pthread_mutex_unlock(&p->lock);
    return r;
}

/* Refuses new calls (UNAVAILABLE), lets the calls already queued run (each is a kubelet's
 * request in flight), then joins the workers. Idempotent. */
static void pool_stop(struct kdra_pool *p)
{
    size_t n;

    pthread_mutex_lock(&p->lock);
    p->quit = true;
    n = p->n_threads;
    p->n_threads = 0;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < n; i++)
        pthread_join(p->threads[i], NULL);
}

/* Shared by both DRAPlugin methods, on the rpc thread: decode and check (hostile input stops
 * here, answered at once), then hand the call to a worker. */
static void handle_call(struct kdra_handler *h, bool prepare, struct rpc_call *call,
                        const uint8_t *req, size_t req_len)
{
    struct rpc_status st = {RPC_OK, ""};
    struct kdra_job *j = calloc(1, sizeof(*j));
    int r;

    if (!j) {
        rpc_status_set(&st, RPC_RESOURCE_EXHAUSTED, "out of memory");
        goto fail;
    }
    j->h = h;
    j->prepare = prepare;
    j->call = call;
    r = claims_decode(req, req_len, &j->m, &j->claims, &st);
    if (r < 0 && st.code == RPC_OK)
        rpc_status_set(&st, RPC_RESOURCE_EXHAUSTED, "out of memory");
    if (r < 0)
        goto fail;
    j->n = j->m->n_claims;
    if (pool_submit(&h->srv->pool, j, &st) < 0)
        goto fail;
    return;
fail:
    job_free(j);
    rpc_call_finish(call, NULL, 0, &st);
}

static void h_prepare(void *ctx, struct rpc_call *call, const uint8_t *req, size_t req_len)
{
    handle_call(ctx, true, call, req, req_len);
}

static void h_unprepare(void *ctx, struct rpc_call *call, const uint8_t *req, size_t req_len)
{
    handle_call(ctx, false, call, req, req_len);
}

static int h_get_info(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                      struct rpc_status *st)
{
    struct kdra_server *s = ctx;
    Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    char *versions[] = {KDRA_VERSION_V1, KDRA_VERSION_V1BETA1};
    Pluginregistration__InfoRequest *in =
        pluginregistration__info_request__unpack(NULL, req_len, req);

    if (!in) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "malformed InfoRequest");
        return 0;
    }
    pluginregistration__info_request__free_unpacked(in, NULL);
    info.type = KDRA_PLUGIN_TYPE;
    info.name = s->driver_name;
    info.endpoint = s->socket_path;
    info.supported_versions = versions;
    info.n_supported_versions = GS_ARRAY_SIZE(versions);
    pthread_mutex_lock(&s->lock);
    s->reg_state.n_get_info++;
    pthread_mutex_unlock(&s->lock);
    log_debug("dra GetInfo driver=%s endpoint=%s", s->driver_name, s->socket_path);
    return pack_to(&info.base, resp);
}

static int h_notify(void *ctx, const uint8_t *req, size_t req_len, struct strbuf *resp,
                    struct rpc_status *st)
{
    struct kdra_server *s = ctx;
    Pluginregistration__RegistrationStatusResponse out =
        PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
    Pluginregistration__RegistrationStatus *in =
        pluginregistration__registration_status__unpack(NULL, req_len, req);
    bool registered;
    char error[RPC_STATUS_MSG_MAX];

    if (!in) {
        rpc_status_set(st, RPC_INVALID_ARGUMENT, "malformed RegistrationStatus");
        return 0;
    }
    registered = in->plugin_registered;
    str_copy(error, in->error ? in->error : "", sizeof(error));
    pluginregistration__registration_status__free_unpacked(in, NULL);
    pthread_mutex_lock(&s->lock);
    s->reg_state.is_registered = registered;
    s->reg_state.n_notifications++;
    memcpy(s->reg_state.error, error, sizeof(error));
    pthread_mutex_unlock(&s->lock);
    log_debug("dra registration driver=%s registered=%d error=\"%s\"", s->driver_name, registered,
              error);
    if (s->ops->registration)
        s->ops->registration(s->ctx, registered, error);
    return pack_to(&out.base, resp);
}

static int build_paths(struct kdra_server *s, const struct kdra_server_opts *o, struct error *err)
{
    struct strbuf sb = STRBUF_INIT;
    int r;

    r = strbuf_printf(&sb, "%s/%s", o->plugins_dir, s->driver_name);
    s->plugin_dir = strbuf_take(&sb);
    if (r >= 0)
        r = strbuf_printf(&sb, "%s/%s", s->plugin_dir, KDRA_SOCKET_NAME);
    s->socket_path = strbuf_take(&sb);
    if (r >= 0)
        r = strbuf_printf(&sb, "%s/%s%s", o->registrar_dir, s->driver_name, KDRA_REG_SOCKET_SUFFIX);
    s->reg_path = strbuf_take(&sb);
    s->registrar_dir = str_dup(o->registrar_dir);
    strbuf_release(&sb);
    if (r < 0 || !s->plugin_dir || !s->socket_path || !s->reg_path || !s->registrar_dir)
        return error_set(err, -ENOMEM, "out of memory");
    return 0;
}

static int add_methods(struct kdra_server *s, struct error *err)
{
    int r = 0;

    for (int api = KDRA_API_V1; api <= KDRA_API_V1BETA1 && r >= 0; api++) {
        s->handlers[api].srv = s;
        s->handlers[api].api = (enum kdra_api)api;
        r = rpc_server_add_unary_async(s->dra, kdra_method((enum kdra_api)api, true), h_prepare,
                                       &s->handlers[api], err);
        if (r >= 0)
            r = rpc_server_add_unary_async(s->dra, kdra_method((enum kdra_api)api, false),
                                           h_unprepare, &s->handlers[api], err);
    }
    if (r >= 0)
        r = rpc_server_add_unary(s->reg, M_GET_INFO, h_get_info, s, err);
    if (r >= 0)
        r = rpc_server_add_unary(s->reg, M_NOTIFY, h_notify, s, err);
    return r;
}

int kdra_server_new(const struct kdra_server_opts *opts, struct kdra_server **ret,
                    struct error *err)
{
    struct kdra_server *s = NULL;
    const char *driver = opts->driver_name ? opts->driver_name : KDRA_DRIVER_NAME;
    int r;

    if (!opts->plugins_dir || !opts->registrar_dir || !opts->ops || !opts->ops->prepare ||
        !opts->ops->unprepare)
        return error_set(err, -EINVAL, "DRA plugin: plugins dir, registrar dir and ops needed");
    if (!str_dns_subdomain_valid(driver, strlen(driver)))
        return error_set(err, -EINVAL, "DRA driver name \"%s\" is not a DNS subdomain", driver);
    s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->pool.lock, NULL);
    pthread_cond_init(&s->pool.cond, NULL);
    s->pool.max = opts->workers == 0                 ? KDRA_WORKERS
                  : opts->workers > KDRA_WORKERS_MAX ? KDRA_WORKERS_MAX
                                                     : opts->workers;
    s->ops = opts->ops;
    s->ctx = opts->ctx;
    s->driver_name = str_dup(driver);
    r = s->driver_name ? build_paths(s, opts, err) : error_set(err, -ENOMEM, "out of memory");
    if (r >= 0)
        r = rpc_server_new(s->socket_path, &s->dra, err);
    if (r >= 0)
        r = rpc_server_new(s->reg_path, &s->reg, err);
    if (r >= 0)
        r = add_methods(s, err);
    if (r < 0) {
        error_prefix(err, "DRA plugin %s", driver);
        kdra_server_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

int kdra_server_start(struct kdra_server *s, struct error *err)
{
    int r;

    if (s->started)
        return error_set(err, -EBUSY, "DRA plugin %s already started", s->driver_name);
    r = path_mkdir_p(s->plugin_dir, 0750, err);
    if (r >= 0)
        r = path_mkdir_p(s->registrar_dir, 0750, err);
    /* the kubelet dials the DRA socket right after GetInfo: serve it first */
    if (r >= 0)
        r = rpc_server_start(s->dra, err);
    if (r >= 0)
        r = rpc_server_start(s->reg, err);
    if (r < 0) {
        rpc_server_stop(s->dra);
        error_prefix(err, "serving DRA plugin %s", s->driver_name);
        return r;
    }
    s->started = true;
    return 0;
}

void kdra_server_stop(struct kdra_server *s)
{
    if (!s)
        return;
    if (s->reg)
        rpc_server_stop(s->reg);
    /* the calls already taken are answered (new ones get UNAVAILABLE), then the socket goes */
    pool_stop(&s->pool);
    if (s->dra)
        rpc_server_stop(s->dra);
}

void kdra_server_free(struct kdra_server *s)
{
    if (!s)
        return;
    kdra_server_stop(s);
    rpc_server_free(s->reg);
    rpc_server_free(s->dra);
    pthread_cond_destroy(&s->pool.cond);
    pthread_mutex_destroy(&s->pool.lock);
    pthread_mutex_destroy(&s->lock);
    free(s->driver_name);
    free(s->plugin_dir);
    free(s->registrar_dir);
    free(s->socket_path);
    free(s->reg_path);
    free(s);
}

const char *kdra_server_socket_path(const struct kdra_server *s)
{
    return s->socket_path;
}

const char *kdra_server_registration_path(const struct kdra_server *s)
{
    return s->reg_path;
}

bool kdra_server_sockets_ok(const struct kdra_server *s)
{
    return s->started && rpc_server_socket_is_ours(s->dra) && rpc_server_socket_is_ours(s->reg);
}

void kdra_server_registration(struct kdra_server *s, struct kdra_registration *ret)
{
    pthread_mutex_lock(&s->lock);
    *ret = s->reg_state;
    pthread_mutex_unlock(&s->lock);
}

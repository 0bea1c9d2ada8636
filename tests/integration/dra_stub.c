/* SPDX-License-Identifier: Apache-2.0 */
/* dra_stub: src/kubelet's DRA plugin server (kdra_server) with canned ops, for
 * test_dra_kubelet.py. `dra_stub PLUGINS_DIR REGISTRY_DIR` serves until SIGTERM and prints
 * one JSON line per event on stdout ("ready", registration, prepare, unprepare). Claims named
 * "whole-fail" fail the call (NotFound), "bad*" get a per-claim error. Test code only. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "base/base.h"
#include "kubelet/kubelet.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

/* {"event":E,"api":A,"uids":[...]} */
static void print_call(const char *event, enum kdra_api api, const struct kdra_claim *c, size_t n)
{
    pthread_mutex_lock(&out_lock);
    printf("{\"event\":\"%s\",\"api\":\"%s\",\"uids\":[", event, kdra_api_name(api));
    for (size_t i = 0; i < n; i++)
        printf("%s\"%s\"", i ? "," : "", c[i].uid); /* the server allows no quotes in uids */
    printf("]}\n");
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
}

static int stub_prepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims, size_t n,
                        struct kdra_result *results, struct rpc_status *st)
{
    (void)ctx;
    print_call("prepare", api, claims, n);
    for (size_t i = 0; i < n; i++) {
        struct strbuf cdi = STRBUF_INIT;
        const char *reqs[] = {"gpu", NULL};
        const char *ids[] = {NULL, NULL};
        int r;
        if (strcmp(claims[i].name, "whole-fail") == 0) {
            rpc_status_set(st, RPC_NOT_FOUND, "resourceclaims.resource.k8s.io \"%s\" not found",
                           claims[i].name);
            return -ENOENT;
        }
        if (strncmp(claims[i].name, "bad", 3) == 0) {
            r = kdra_result_set_error(&results[i], "requested device is not allocatable: gpu-7");
            if (r < 0)
                return r;
            continue;
        }
        r = strbuf_printf(&cdi, "k8s.gpu.nvidia.com/claim=%s-gpu-0", claims[i].uid);
        ids[0] = strbuf_str(&cdi);
        if (r >= 0)
            r = kdra_result_add_device(&results[i], "node1", "gpu-0", reqs, ids);
        strbuf_release(&cdi);
        if (r < 0)
            return r;
    }
    return 0;
}

static int stub_unprepare(void *ctx, enum kdra_api api, const struct kdra_claim *claims, size_t n,
                          struct kdra_result *results, struct rpc_status *st)
{
    (void)ctx;
    (void)st;
    print_call("unprepare", api, claims, n);
    for (size_t i = 0; i < n; i++)
        if (strncmp(claims[i].name, "bad", 3) == 0 &&
            kdra_result_set_error(&results[i], "cannot remove the CDI spec") < 0)
            return -ENOMEM;
    return 0;
}

static void stub_registration(void *ctx, bool registered, const char *error)
{
    (void)ctx;
    pthread_mutex_lock(&out_lock);
    /* the kubelet's error texts hold no quotes or backslashes in these tests */
    printf("{\"event\":\"registration\",\"registered\":%s,\"error\":\"%s\"}\n",
           registered ? "true" : "false", error);
    fflush(stdout);
    pthread_mutex_unlock(&out_lock);
}

static const struct kdra_ops ops = {stub_prepare, stub_unprepare, stub_registration};

int main(int argc, char **argv)
{
    struct kdra_server_opts o = {0};
    struct kdra_server *srv = NULL;
    struct error err = {0};
    struct signalfd_siginfo si;
    sigset_t mask;
    int sfd;

    if (argc != 3) {
        fprintf(stderr, "usage: dra_stub PLUGINS_DIR REGISTRY_DIR\n");
        return 2;
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &mask, NULL); /* before the server threads start */
    sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    o.plugins_dir = argv[1];
    o.registrar_dir = argv[2];
    o.ops = &ops;
    if (sfd < 0 || kdra_server_new(&o, &srv, &err) < 0 || kdra_server_start(srv, &err) < 0) {
        fprintf(stderr, "dra_stub: %s\n", err.msg[0] ? err.msg : strerror(errno));
        kdra_server_free(srv);
        return 1;
    }
    printf("{\"event\":\"ready\",\"socket\":\"%s\",\"registration\":\"%s\"}\n",
           kdra_server_socket_path(srv), kdra_server_registration_path(srv));
    fflush(stdout);
    while (read(sfd, &si, sizeof(si)) < 0 && errno == EINTR)
        ;
    kdra_server_free(srv);
    close(sfd);
    return 0;
}

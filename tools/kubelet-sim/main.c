/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim: a kubelet stand-in for device plugins. Options, then either a one-shot
 * check (--wait-resources N / --capacity) or the control loop: one command per stdin line,
 * one answer per command on stdout (text or JSON lines). SIGTERM/SIGINT arrive through a
 * signalfd and end the loop cleanly (kubelet.sock removed). See docs/kubelet-sim.md. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "sim.h"

struct options {
    struct sim_opts sim;
    bool json;
    bool one_shot;
    bool capacity;
    unsigned wait_resources;
    int timeout_ms;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kubelet-sim --dir DIR [options]\n"
            "A kubelet stand-in: serves Registration on DIR/kubelet.sock, dials plugins back,\n"
            "watches ListAndWatch and admits pods like kubelet's device manager; with\n"
            "--plugins-registry also registers DRA drivers and prepares their claims.\n\n"
            "  --dir DIR                    device plugin directory (created if missing)\n"
            "  -o, --output text|json       answer format (json: one object per line)\n"
            "  --rpc-timeout-ms MS          deadline of every call to a plugin (10000)\n"
            "  --pod-resources-socket PATH  also serve pod-resources v1 List there\n"
            "  --wait-resources N           one-shot: wait until N resources list devices\n"
            "  --capacity                   one-shot: print capacity and exit\n"
            "  --timeout-ms MS              one-shot wait limit (10000)\n"
            "  --log-level LEVEL            error|warn|info|debug on stderr (warn)\n"
            "  --plugins-registry DIR       DRA: watch DIR for plugin registration sockets\n"
            "  --dra-v1beta1                DRA: use v1beta1.DRAPlugin even when v1 is offered\n"
            "  -h, --help\n\n%s",
            sim_cmd_help());
}

static int parse_ms(const char *opt, const char *s, int *ret)
{
    unsigned v;

    if (parse_uint(s, &v) < 0 || v == 0 || v > 3600000) {
        fprintf(stderr, "kubelet-sim: invalid %s \"%s\": want milliseconds 1..3600000\n", opt, s);
        return -EINVAL;
    }
    *ret = (int)v;
    return 0;
}

/* getopt codes of the long-only options */
enum {
    O_DIR = 256,
    O_RPC_TIMEOUT,
    O_PODRES,
    O_WAIT,
    O_CAPACITY,
    O_TIMEOUT,
    O_LOG,
    O_REGISTRY,
    O_DRA_V1BETA1
};

static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, O_DIR},
        {"output", required_argument, NULL, 'o'},
        {"rpc-timeout-ms", required_argument, NULL, O_RPC_TIMEOUT},
        {"pod-resources-socket", required_argument, NULL, O_PODRES},
        {"wait-resources", required_argument, NULL, O_WAIT},
        {"capacity", no_argument, NULL, O_CAPACITY},
        {"timeout-ms", required_argument, NULL, O_TIMEOUT},
        {"log-level", required_argument, NULL, O_LOG},
        {"plugins-registry", required_argument, NULL, O_REGISTRY},
        {"dra-v1beta1", no_argument, NULL, O_DRA_V1BETA1},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    enum log_level level = LOG_LEVEL_WARN;
    int c;

    o->sim.rpc_timeout_ms = 10000;
    o->timeout_ms = 10000;
    opterr = 0;
    for (c = getopt_long(argc, argv, "o:h", longopts, NULL); c != -1;
         c = getopt_long(argc, argv, "o:h", longopts, NULL)) {
        switch (c) {
        case O_DIR:
            o->sim.dir = optarg;
            break;
        case 'o':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0) {
                fprintf(stderr, "kubelet-sim: invalid --output \"%s\": want text or json\n",
                        optarg);
                return 2;
            }
            o->json = strcmp(optarg, "json") == 0;
            break;
        case O_RPC_TIMEOUT:
            if (parse_ms("--rpc-timeout-ms", optarg, &o->sim.rpc_timeout_ms) < 0)
                return 2;
            break;
        case O_PODRES:
            o->sim.pod_resources_socket = optarg;
            break;
        case O_WAIT:
            if (parse_uint(optarg, &o->wait_resources) < 0 ||
                o->wait_resources > SIM_MAX_RESOURCES) {
                fprintf(stderr, "kubelet-sim: invalid --wait-resources \"%s\": want 0..%d\n",
                        optarg, SIM_MAX_RESOURCES);
                return 2;
            }
            o->one_shot = true;
            break;
        case O_CAPACITY:
            o->capacity = true;
            o->one_shot = true;
            break;
        case O_TIMEOUT:
            if (parse_ms("--timeout-ms", optarg, &o->timeout_ms) < 0)
                return 2;
            break;
        case O_LOG:
            if (log_level_parse(optarg, &level) < 0) {
                fprintf(stderr, "kubelet-sim: invalid --log-level \"%s\"\n", optarg);
                return 2;
            }
            break;
        case O_REGISTRY:
            o->sim.plugins_registry = optarg;
            break;
        case O_DRA_V1BETA1:
            o->sim.dra_force_v1beta1 = true;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            fprintf(stderr, "kubelet-sim: unknown or incomplete option \"%s\"; see --help\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kubelet-sim: unexpected argument \"%s\"; see --help\n", argv[optind]);
        return 2;
    }
    if (!o->sim.dir) {
        fprintf(stderr, "kubelet-sim: --dir is required (the device plugin directory)\n");
        return 2;
    }
    log_setup(level, LOG_FORMAT_KLOG, STDERR_FILENO);
    return 0;
}

static int answer(struct sim *sim, const char *line, bool json, bool *quit)
{
    struct sim_cmd c = {0};
    struct strbuf out = STRBUF_INIT;
    struct error err = {0};
    int r;

    r = sim_cmd_parse(line, &c, &err);
    if (r == 1)
        return 0;
    if (r < 0)
        sim_format_error(&err, NULL, json, &out);
    else
        r = sim_run(sim, &c, json, &out);
    if (r >= 0 && c.kind == SIM_CMD_QUIT)
        *quit = true;
    fputs(strbuf_str(&out), stdout);
    fflush(stdout);
    sim_cmd_release(&c);
    strbuf_release(&out);
    return r;
}

/* Reads lines from stdin until EOF, "quit" or a signal. Lines longer than SIM_MAX_LINE are
 * answered with an error and skipped. */
static int control_loop(struct sim *sim, bool json, int sfd)
{
    char buf[SIM_MAX_LINE + 2];
    size_t len = 0;
    bool skipping = false, quit = false;
    int failures = 0;

    while (!quit) {
        struct pollfd pfd[2] = {{STDIN_FILENO, POLLIN, 0}, {sfd, POLLIN, 0}};
        ssize_t n;
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (pfd[1].revents)
            return 0; /* SIGTERM/SIGINT */
        n = read(STDIN_FILENO, buf + len, sizeof(buf) - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (len > 0 && !skipping) {
                buf[len] = '\0';
                failures += answer(sim, buf, json, &quit) < 0;
            }
            break;
        }
        len += (size_t)n;
        for (;;) {
            char *nl = memchr(buf, '\n', len);
            if (!nl)
                break;
            *nl = '\0';
            if (!skipping)
                failures += answer(sim, buf, json, &quit) < 0;
            skipping = false;
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len);
            if (quit)
                break;
        }
        if (len >= sizeof(buf) - 1) {
            struct strbuf out = STRBUF_INIT;
            struct error err = {0};
            error_set(&err, -E2BIG, "line too long (at most %d bytes)", SIM_MAX_LINE);
            sim_format_error(&err, NULL, json, &out);
            fputs(strbuf_str(&out), stdout);
            fflush(stdout);
            strbuf_release(&out);
            failures++;
            skipping = true;
            len = 0;
        }
    }
    return failures > 0 ? 1 : 0;
}

static int one_shot(struct sim *sim, const struct options *o)
{
    struct sim_cmd c = {
        .kind = SIM_CMD_WAIT_RESOURCES, .count = o->wait_resources, .timeout_ms = o->timeout_ms};
    struct strbuf out = STRBUF_INIT;
    int r = 0;

    if (o->wait_resources > 0)
        r = sim_run(sim, &c, o->json, &out);
    if (r >= 0 && o->capacity) {
        struct sim_cmd cap = {.kind = SIM_CMD_CAPACITY};
        if (!o->json)
            strbuf_reset(&out);
        r = sim_run(sim, &cap, o->json, &out);
    }
    fputs(strbuf_str(&out), stdout);
    fflush(stdout);
    strbuf_release(&out);
    return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct options o = {0};
    struct sim *sim = NULL;
    struct error err = {0};
    sigset_t mask;
    int sfd = -1, r;

    r = parse_options(argc, argv, &o);
    if (r != 0)
        return r == 1 ? 0 : r;
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &mask, NULL); /* before any thread: they inherit the mask */
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        fprintf(stderr, "kubelet-sim: signalfd: %s\n", strerror(errno));
        return 1;
    }
    r = sim_new(&o.sim, &sim, &err);
    if (r < 0) {
        fprintf(stderr, "kubelet-sim: %s\n", err.msg);
        close(sfd);
        return 1;
    }
    r = o.one_shot ? one_shot(sim, &o) : control_loop(sim, o.json, sfd);
    sim_free(sim);
    close(sfd);
    return r < 0 ? 1 : r;
}

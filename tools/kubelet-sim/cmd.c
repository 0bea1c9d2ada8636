/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim control language: one command per stdin line, parsed into struct sim_cmd.
 * Pure: no I/O. Errors say what was wrong and show the usage of that command. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct cmd_def {
    const char *name;
    enum sim_cmd_kind kind;
    size_t min_args, max_args; /* after the command word */
    const char *usage;
};

static const struct cmd_def cmd_defs[] = {
    {"wait", SIM_CMD_WAIT, 2, 3, "wait <resource> [>=|<=|=]<count> [timeout_ms]"},
    {"wait-resources", SIM_CMD_WAIT_RESOURCES, 1, 2, "wait-resources <n> [timeout_ms]"},
    {"capacity", SIM_CMD_CAPACITY, 0, 0, "capacity"},
    {"devices", SIM_CMD_DEVICES, 1, 1, "devices <resource>"},
    {"admit", SIM_CMD_ADMIT, 2, 1 + SIM_MAX_REQUESTS,
     "admit <pod> <resource>=<n>[@<container>] [...]"},
    {"delete", SIM_CMD_DELETE, 1, 1, "delete <pod>"},
    {"pods", SIM_CMD_PODS, 0, 0, "pods"},
    {"pod", SIM_CMD_POD, 1, 1, "pod <pod>"},
    {"schedule", SIM_CMD_SCHEDULE, 0, 0, "schedule"},
    {"restart", SIM_CMD_RESTART, 0, 1, "restart [timeout_ms]"},
    {"help", SIM_CMD_HELP, 0, 0, "help"},
    {"quit", SIM_CMD_QUIT, 0, 0, "quit"},
    {"dra-wait", SIM_CMD_DRA_WAIT, 1, 2, "dra-wait <driver> [timeout_ms]"},
    {"dra-drivers", SIM_CMD_DRA_DRIVERS, 0, 0, "dra-drivers"},
    {"dra-prepare", SIM_CMD_DRA_PREPARE, 2, 1 + SIM_MAX_CLAIMS,
     "dra-prepare <driver> <namespace>/<name>:<uid> [...]"},
    {"dra-unprepare", SIM_CMD_DRA_UNPREPARE, 2, 1 + SIM_MAX_CLAIMS,
     "dra-unprepare <driver> <namespace>/<name>:<uid> [...]"},
};

const char *sim_cmd_help(void)
{
    return "commands (one per line):\n"
           "  wait <resource> [>=|<=|=]<count> [timeout_ms]  wait for allocatable to match\n"
           "  wait-resources <n> [timeout_ms]     wait until n resources listed devices\n"
           "  capacity                            Capacity/Allocatable per resource\n"
           "  devices <resource>                  the devices, health, holder\n"
           "  admit <pod> <resource>=<n>[@<c>]... admit a pod (containers: @name, default main)\n"
           "  delete <pod>                        delete a pod, freeing its devices\n"
           "  pods                                every pod and its outcome\n"
           "  pod <pod>                           one pod with its Allocate responses\n"
           "  schedule                            retry Pending pods in creation order\n"
           "  restart [timeout_ms]                simulate a kubelet restart\n"
           "  dra-wait <driver> [timeout_ms]      wait until a DRA driver is registered\n"
           "  dra-drivers                         the DRA plugins found in plugins_registry\n"
           "  dra-prepare <driver> <ns>/<name>:<uid>...    NodePrepareResources for claims\n"
           "  dra-unprepare <driver> <ns>/<name>:<uid>...  NodeUnprepareResources\n"
           "  help, quit\n";
}

void sim_cmd_release(struct sim_cmd *c)
{
    if (!c)
        return;
    free(c->name);
    for (size_t i = 0; i < c->n_requests; i++) {
        free(c->requests[i].resource);
        free(c->requests[i].container);
    }
    for (size_t i = 0; i < c->n_claims; i++) {
        free(c->claims[i].namespace);
        free(c->claims[i].name);
        free(c->claims[i].uid);
    }
    memset(c, 0, sizeof(*c));
}

bool sim_cmp_holds(enum sim_cmp cmp, size_t value, unsigned want)
{
    switch (cmp) {
    case SIM_CMP_GE:
        return value >= want;
    case SIM_CMP_LE:
        return value <= want;
    case SIM_CMP_EQ:
        return value == want;
    }
    return false;
}

const char *sim_cmp_str(enum sim_cmp cmp)
{
    return cmp == SIM_CMP_LE ? "<=" : cmp == SIM_CMP_EQ ? "=" : ">=";
}

/* Splits on blanks into at most SIM_MAX_ARGS words (pointers into buf). */
static int split(char *buf, char **argv, size_t *argc, struct error *err)
{
    size_t n = 0;
    char *p = buf;

    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
            p++;
        if (!*p || *p == '#')
            break;
        if (n >= SIM_MAX_ARGS)
            return error_set(err, -EINVAL, "too many words (at most %d)", SIM_MAX_ARGS);
        argv[n++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
            p++;
        if (*p)
            *p++ = '\0';
    }
    *argc = n;
    return 0;
}

/* Names end up in JSON answers and gRPC strings: printable ASCII only, as Kubernetes names
 * and resource names are, and at most 253 bytes (a DNS subdomain). */
static int check_word(const char *w, struct error *err)
{
    size_t n = strlen(w);

    if (n > 253)
        return error_set(err, -EINVAL, "\"%.40s...\" is too long (at most 253 bytes)", w);
    for (size_t i = 0; i < n; i++)
        if (w[i] < 0x21 || w[i] > 0x7e)
            return error_set(err, -EINVAL,
                             "\"%s\" has a character that is not printable "
                             "ASCII at byte %zu",
                             w, i);
    return 0;
}

static int parse_count(const char *s, unsigned *ret, struct error *err)
{
    if (parse_uint(s, ret) < 0 || *ret > SIM_MAX_DEVICES)
        return error_set(err, -EINVAL, "invalid count \"%s\": want 0..%d", s, SIM_MAX_DEVICES);
    return 0;
}

static int parse_timeout(const char *s, int *ret, struct error *err)
{
    unsigned v;

    if (parse_uint(s, &v) < 0 || v > 3600000)
        return error_set(err, -EINVAL, "invalid timeout \"%s\": want milliseconds 0..3600000", s);
    *ret = (int)v;
    return 0;
}

/* <resource>=<count>[@<container>] */
static int parse_request(const char *s, struct sim_request *ret, struct error *err)
{
    const char *eq = strrchr(s, '='), *at = eq ? strchr(eq, '@') : NULL;
    char count[16];
    unsigned n;

    if (!eq || eq == s)
        return error_set(err, -EINVAL,
                         "invalid request \"%s\": want <resource>=<count>[@<container>]", s);
    snprintf(count, sizeof(count), "%.*s", at ? (int)(at - eq - 1) : 15, eq + 1);
    if (parse_uint(count, &n) < 0 || n == 0 || n > SIM_MAX_DEVICES)
        return error_set(err, -EINVAL, "invalid request \"%s\": count must be 1..%d", s,
                         SIM_MAX_DEVICES);
    if (at && !str_dns_subdomain_valid(at + 1, strlen(at + 1)))
        return error_set(err, -EINVAL,
                         "invalid request \"%s\": a container name is a DNS name (a-z, 0-9, -)", s);
    ret->resource = strndup(s, (size_t)(eq - s));
    ret->container = at ? str_dup(at + 1) : NULL;
    if (!ret->resource || (at && !ret->container))
        return error_set(err, -ENOMEM, "out of memory");
    ret->count = n;
    return 0;
}

/* <namespace>/<name>:<uid>; each part non-empty (the plugin checks the rest, as a kubelet
 * would send whatever the API server holds). */
static int parse_claim(const char *s, struct sim_claim *ret, struct error *err)
{
    const char *slash = strchr(s, '/'), *colon = slash ? strchr(slash, ':') : NULL;

    if (!slash || slash == s || !colon || colon == slash + 1 || !colon[1])
        return error_set(err, -EINVAL, "invalid claim \"%s\": want <namespace>/<name>:<uid>", s);
    ret->namespace = strndup(s, (size_t)(slash - s));
    ret->name = strndup(slash + 1, (size_t)(colon - slash - 1));
    ret->uid = str_dup(colon + 1);
    if (!ret->namespace || !ret->name || !ret->uid)
        return error_set(err, -ENOMEM, "out of memory");
    return 0;
}

static int parse_claims(char **argv, size_t argc, struct sim_cmd *c, struct error *err)
{
    for (size_t i = 0; i < argc; i++) {
        int r = parse_claim(argv[i], &c->claims[c->n_claims], err);
        c->n_claims++; /* released with the command either way */
        if (r < 0)
            return r;
    }
    return 0;
}

static int parse_args(const struct cmd_def *d, char **argv, size_t argc, struct sim_cmd *c,
                      struct error *err)
{
    const char *cnt;
    int r;

    switch (d->kind) {
    case SIM_CMD_WAIT:
        cnt = argv[0];
        if (str_startswith(cnt, ">=")) {
            c->cmp = SIM_CMP_GE;
            cnt += 2;
        } else if (str_startswith(cnt, "<=")) {
            c->cmp = SIM_CMP_LE;
            cnt += 2;
        } else if (cnt[0] == '=') {
            c->cmp = SIM_CMP_EQ;
            cnt += 1;
        }
        r = parse_count(cnt, &c->count, err);
        if (r < 0)
            return r;
        return argc > 1 ? parse_timeout(argv[1], &c->timeout_ms, err) : 0;
    case SIM_CMD_WAIT_RESOURCES:
        r = parse_count(argv[0], &c->count, err);
        if (r < 0)
            return r;
        return argc > 1 ? parse_timeout(argv[1], &c->timeout_ms, err) : 0;
    case SIM_CMD_RESTART:
        return argc > 0 ? parse_timeout(argv[0], &c->timeout_ms, err) : 0;
    case SIM_CMD_DRA_WAIT:
        return argc > 0 ? parse_timeout(argv[0], &c->timeout_ms, err) : 0;
    case SIM_CMD_DRA_PREPARE:
    case SIM_CMD_DRA_UNPREPARE:
        return parse_claims(argv, argc, c, err);
    case SIM_CMD_ADMIT:
        for (size_t i = 0; i < argc; i++) {
            struct sim_request *rq = &c->requests[c->n_requests];
            r = parse_request(argv[i], rq, err);
            c->n_requests++; /* released with the command either way */
            if (r < 0)
                return r;
            for (size_t j = 0; j + 1 < c->n_requests; j++)
                if (strcmp(c->requests[j].resource, rq->resource) == 0 &&
                    strcmp(sim_request_container(&c->requests[j]), sim_request_container(rq)) == 0)
                    return error_set(err, -EINVAL,
                                     "resource in \"%s\" requested twice by one container",
                                     argv[i]);
        }
        return 0;
    default:
        return 0;
    }
}

int sim_cmd_parse(const char *line, struct sim_cmd *ret, struct error *err)
{
    struct sim_cmd c = {.timeout_ms = -1};
    char *buf = NULL, *argv[SIM_MAX_ARGS];
    const struct cmd_def *d = NULL;
    size_t argc = 0;
    int r;

    if (strlen(line) > SIM_MAX_LINE)
        return error_set(err, -EINVAL, "line too long (at most %d bytes)", SIM_MAX_LINE);
    buf = strdup(line);
    if (!buf)
        return error_set(err, -ENOMEM, "out of memory");
    r = split(buf, argv, &argc, err);
    if (r < 0)
        goto out;
    if (argc == 0) {
        r = 1;
        goto out;
    }
    for (size_t i = 0; i < GS_ARRAY_SIZE(cmd_defs) && !d; i++)
        if (strcmp(cmd_defs[i].name, argv[0]) == 0)
            d = &cmd_defs[i];
    if (!d) {
        const char *best = NULL;
        unsigned best_d = 3;
        for (size_t i = 0; i < GS_ARRAY_SIZE(cmd_defs); i++) {
            unsigned dist = str_distance(cmd_defs[i].name, argv[0]);
            if (dist < best_d) {
                best_d = dist;
                best = cmd_defs[i].name;
            }
        }
        r = error_set(err, -EINVAL, "unknown command \"%s\"%s%s%s; try \"help\"", argv[0],
                      best ? " (did you mean \"" : "", best ? best : "", best ? "\"?)" : "");
        goto out;
    }
    if (argc - 1 < d->min_args || argc - 1 > d->max_args) {
        r = error_set(err, -EINVAL, "usage: %s", d->usage);
        goto out;
    }
    c.kind = d->kind;
    for (size_t i = 1; i < argc && r >= 0; i++)
        r = check_word(argv[i], err);
    if (r < 0)
        goto out;
    if (d->kind == SIM_CMD_WAIT || d->kind == SIM_CMD_DEVICES || d->kind == SIM_CMD_ADMIT ||
        d->kind == SIM_CMD_DELETE || d->kind == SIM_CMD_POD || d->kind == SIM_CMD_DRA_WAIT ||
        d->kind == SIM_CMD_DRA_PREPARE || d->kind == SIM_CMD_DRA_UNPREPARE) {
        c.name = strdup(argv[1]);
        if (!c.name) {
            r = error_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    r = parse_args(d, argv + 1 + (c.name ? 1 : 0), argc - 1 - (c.name ? 1 : 0), &c, err);
    if (r < 0) {
        error_prefix(err, "%s", d->name);
        goto out;
    }
    *ret = c;
    memset(&c, 0, sizeof(c));
out:
    sim_cmd_release(&c);
    free(buf);
    return r;
}

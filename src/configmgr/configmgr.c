/* SPDX-License-Identifier: Apache-2.0 */
/* configmgr.c: config-manager's options (NVIDIA's flags and env), the choice of config for a
 * label value (config/'s cfg_select_name: the selection the daemon makes from its label)
 * and the atomic CONFIG_FILE_DST symlink. No logging; the CLI reports what is returned. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "configmgr/configmgr.h"

static const char usage_text[] =
    "Usage: gpuslice config-manager [options]\n"
    "       config-manager [options]\n\n"
    "Point CONFIG_FILE_DST at the named config the node's label selects (NVIDIA's\n"
    "config-manager: the init container and sidecar of its Helm chart), signal the device\n"
    "plugin when it changes, and keep watching the label unless --oneshot. An unknown label\n"
    "value keeps the current config, is logged and recorded as a Warning Event on the node\n"
    "(NVIDIA's exits instead). gpuslice's own DaemonSet needs none of this: the device plugin\n"
    "reads the label itself (docs/deploy.md).\n\n"
    "Options (env var in brackets; flag > env > default):\n"
    "      --oneshot                 choose once and exit [ONESHOT]\n"
    "      --kubeconfig PATH         credentials; default in-cluster [KUBECONFIG]\n"
    "      --node-name NAME          this node (required) [NODE_NAME]\n"
    "      --node-label KEY          label naming the config [NODE_LABEL]\n"
    "                                (default nvidia.com/device-plugin.config)\n"
    "      --config-file-srcdir DIR  the mounted ConfigMap of configs (required)\n"
    "                                [CONFIG_FILE_SRCDIR]\n"
    "      --config-file-dst PATH    the symlink to write (required) [CONFIG_FILE_DST]\n"
    "      --default-config NAME     config when the label is unset [DEFAULT_CONFIG]\n"
    "      --fallback-strategies L   then, in order: named, single, empty\n"
    "                                [FALLBACK_STRATEGIES] (default none)\n"
    "      --send-signal BOOL        signal the process on a change (default true)\n"
    "                                [SEND_SIGNAL]\n"
    "      --signal N                signal number or name (default 1, SIGHUP) [SIGNAL]\n"
    "      --process-to-signal NAME  argv[0] of that process (default nvidia-device-plugin;\n"
    "                                /usr/bin/<name> matches <name> too) [PROCESS_TO_SIGNAL]\n"
    "      --kube-api-server URL     API server URL override (tests)\n"
    "                                [GPUSLICE_KUBE_API_SERVER]\n"
    "      --proc-root DIR           where to look for processes (default /proc)\n"
    "                                [GPUSLICE_PROC_ROOT]\n"
    "  -v, --log-level LEVEL         error, warn, info or debug\n"
    "  -h, --help                    show this help\n";

const char *cfgmgr_usage(void)
{
    return usage_text;
}

enum opt_kind { OPT_BOOL, OPT_STRING, OPT_FALLBACKS, OPT_SIGNAL };

struct opt_def {
    const char *flag;
    const char *env; /* NULL: flag only */
    enum opt_kind kind;
    size_t offset; /* into struct cfgmgr_options */
};

#define OFF(f) offsetof(struct cfgmgr_options, f)
static const struct opt_def opt_defs[] = {
    {"oneshot", "ONESHOT", OPT_BOOL, OFF(oneshot)},
    {"kubeconfig", "KUBECONFIG", OPT_STRING, OFF(kubeconfig)},
    {"node-name", "NODE_NAME", OPT_STRING, OFF(node_name)},
    {"node-label", "NODE_LABEL", OPT_STRING, OFF(node_label)},
    {"config-file-srcdir", "CONFIG_FILE_SRCDIR", OPT_STRING, OFF(srcdir)},
    {"config-file-dst", "CONFIG_FILE_DST", OPT_STRING, OFF(dst)},
    {"default-config", "DEFAULT_CONFIG", OPT_STRING, OFF(default_config)},
    {"fallback-strategies", "FALLBACK_STRATEGIES", OPT_FALLBACKS, 0},
    {"send-signal", "SEND_SIGNAL", OPT_BOOL, OFF(send_signal)},
    {"signal", "SIGNAL", OPT_SIGNAL, OFF(signal)},
    {"process-to-signal", "PROCESS_TO_SIGNAL", OPT_STRING, OFF(process)},
    {"kube-api-server", "GPUSLICE_KUBE_API_SERVER", OPT_STRING, OFF(api_server)},
    {"proc-root", "GPUSLICE_PROC_ROOT", OPT_STRING, OFF(proc_root)},
    {"log-level", NULL, OPT_STRING, OFF(log_level)},
};
#undef OFF

/* "named,single,empty"; "" means none. Duplicates are refused. */
static int parse_fallbacks(struct cfgmgr_options *o, const char *what, const char *v,
                           struct error *err)
{
    size_t n = 0;
    const char *p = v;

    while (*p) {
        size_t len = strcspn(p, ",");
        char word[16];
        enum cfg_fallback f;

        if (len == 0 || len >= sizeof(word))
            goto bad;
        memcpy(word, p, len);
        word[len] = '\0';
        if (cfg_fallback_parse(word, &f) < 0 || n == CFGMGR_MAX_FALLBACKS)
            goto bad;
        for (size_t i = 0; i < n; i++)
            if (o->fallbacks[i] == f)
                goto bad;
        o->fallbacks[n++] = f;
        p += len + (p[len] == ',');
    }
    o->n_fallbacks = n;
    return 0;
bad:
    return error_set(err, -EINVAL,
                     "%s '%s' is not a list of fallback strategies; use a comma-separated "
                     "ordered subset of named, single, empty",
                     what, v);
}

static int set_value(struct cfgmgr_options *o, const struct opt_def *d, const char *what,
                     const char *v, struct error *err)
{
    char *field = (char *)o + d->offset;
    int r;

    switch (d->kind) {
    case OPT_BOOL:
        if (parse_bool(v, (bool *)field) < 0)
            return error_set(err, -EINVAL, "%s '%s' is not a boolean; use true or false", what, v);
        return 0;
    case OPT_STRING:
        *(const char **)field = *v ? v : NULL;
        return 0;
    case OPT_FALLBACKS:
        return parse_fallbacks(o, what, v, err);
    case OPT_SIGNAL:
        r = cfgmgr_signal_parse(v, (int *)field);
        if (r < 0)
            return error_set(err, r,
                             "%s '%s' is not a signal; use a number 1-64 or a name "
                             "such as SIGHUP",
                             what, v);
        return 0;
    }
    return -EINVAL;
}

static const struct opt_def *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < GS_ARRAY_SIZE(opt_defs); i++)
        if (strlen(opt_defs[i].flag) == len && strncmp(opt_defs[i].flag, name, len) == 0)
            return &opt_defs[i];
    return NULL;
}

static int parse_flags(struct cfgmgr_options *o, int argc, char **argv, struct error *err)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *name, *eq, *v;
        const struct opt_def *d;
        char what[64];

        if (str_eq(a, "-h") || str_eq(a, "--help")) {
            o->help = true;
            continue;
        }
        if (str_eq(a, "-v")) {
            o->log_level = "debug";
            continue;
        }
        if (a[0] != '-')
            return error_set(err, -EINVAL, "unexpected argument '%s'", a);
        /* urfave/cli, which NVIDIA's uses, takes -flag as well as --flag */
        name = a + 1 + (a[1] == '-');
        eq = strchr(name, '=');
        d = find_flag(name, eq ? (size_t)(eq - name) : strlen(name));
        if (!d)
            return error_set(err, -EINVAL, "unknown option '%s'", a);
        snprintf(what, sizeof(what), "--%s", d->flag);
        if (eq)
            v = eq + 1;
        else if (d->kind == OPT_BOOL)
            v = "true";
        else if (i + 1 < argc)
            v = argv[++i];
        else
            return error_set(err, -EINVAL, "option '%s' needs a value", a);
        if (set_value(o, d, what, v, err) < 0)
            return -EINVAL;
    }
    return 0;
}

int cfgmgr_options_parse(struct cfgmgr_options *o, int argc, char **argv,
                         const char *(*getenv_fn)(const char *), struct error *err)
{
    int r;

    *o = (struct cfgmgr_options){
        .node_label = "nvidia.com/device-plugin.config",
        .send_signal = true,
        .signal = 1,
        .process = CFGMGR_DEFAULT_PROCESS,
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(opt_defs); i++) {
        const char *v = opt_defs[i].env ? getenv_fn(opt_defs[i].env) : NULL;
        char what[64];

        if (!v || !*v) /* the chart renders unset values as "" (SIGNAL, DEFAULT_CONFIG) */
            continue;
        snprintf(what, sizeof(what), "env %s", opt_defs[i].env);
        r = set_value(o, &opt_defs[i], what, v, err);
        if (r < 0)
            return r;
    }
    r = parse_flags(o, argc, argv, err);
    if (r < 0 || o->help)
        return r;
    if (!o->node_name)
        return error_set(err, -EINVAL,
                         "no node name: set NODE_NAME (the chart passes "
                         "spec.nodeName through the downward API) or --node-name");
    if (!o->srcdir)
        return error_set(err, -EINVAL,
                         "no config directory: set CONFIG_FILE_SRCDIR or "
                         "--config-file-srcdir to where the ConfigMap of configs is mounted");
    if (!o->dst)
        return error_set(err, -EINVAL,
                         "no destination: set CONFIG_FILE_DST or "
                         "--config-file-dst to the path the device plugin reads "
                         "(e.g. /config/config.yaml)");
    if (!o->node_label)
        return error_set(err, -EINVAL,
                         "empty NODE_LABEL: name the node label that selects "
                         "the config (default nvidia.com/device-plugin.config)");
    return 0;
}

int cfgmgr_choose(const struct cfgmgr_options *o, const char *label_value, char **ret_target,
                  struct error *err)
{
    struct cfg_load_options lo = {
        .path = o->srcdir,
        .config_name = label_value,
        .default_name = o->default_config,
        .fallbacks = o->fallbacks,
        .n_fallbacks = o->n_fallbacks,
    };
    struct strbuf sb = STRBUF_INIT;
    char *name = NULL;
    int r;

    r = cfg_select_name(o->srcdir, &lo, &name, err);
    if (r < 0)
        return r;
    if (!name) {
        *ret_target = str_dup(CFGMGR_EMPTY_TARGET);
        return *ret_target ? 0 : error_set(err, -ENOMEM, "out of memory");
    }
    r = strbuf_printf(&sb, "%s/%s", o->srcdir, name);
    free(name);
    if (r < 0) {
        strbuf_release(&sb);
        return error_set(err, -ENOMEM, "out of memory");
    }
    *ret_target = strbuf_take(&sb);
    return 0;
}

/* mkdir -p of the directory part of path. */
/* The parent folders of path (not path itself). */
static int make_parent(const char *path, struct error *err)
{
    char *dir = str_dup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    int r = 0;

    if (!dir)
        return error_set(err, -ENOMEM, "out of memory");
    if (slash && slash != dir) {
        *slash = '\0';
        r = path_mkdir_p(dir, 0755, err);
    }
    free(dir);
    return r;
}

int cfgmgr_link_update(const char *dst, const char *target, bool *ret_changed, struct error *err)
{
    char cur[PATH_MAX];
    struct strbuf tmp = STRBUF_INIT;
    ssize_t n;
    int r;

    n = readlink(dst, cur, sizeof(cur) - 1);
    if (n >= 0) {
        cur[n] = '\0';
        if (strcmp(cur, target) == 0) {
            *ret_changed = false;
            return 0;
        }
    }
    r = make_parent(dst, err);
    if (r < 0)
        return r;
    if (strbuf_printf(&tmp, "%s.tmp-%ld", dst, (long)getpid()) < 0) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    (void)unlink(strbuf_str(&tmp)); /* a leftover of a killed run with our pid */
    if (symlink(target, strbuf_str(&tmp)) < 0) {
        r = error_set_errno(err, errno, "creating symlink %s -> %s", strbuf_str(&tmp), target);
        goto out;
    }
    if (rename(strbuf_str(&tmp), dst) < 0) {
        r = error_set(
            err, -errno, "renaming %s to %s: %s%s", strbuf_str(&tmp), dst, strerror(errno),
            errno == EISDIR ? " (CONFIG_FILE_DST is a directory; name a file in it)" : "");
        (void)unlink(strbuf_str(&tmp));
        goto out;
    }
    *ret_changed = true;
out:
    strbuf_release(&tmp);
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_mig.c: `gpuslice mig`, also run as `nvidia-mig-parted`: mig-parted's apply, assert,
 * export, generate-config, checkpoint and restore with its flags, env vars, messages and
 * exit codes (facts B.3-B.5), applying with explicit placements, per-GPU rollback and
 * --dry-run; and `mig plan`, the planner with explanations and stranded capacity. Wiring
 * over mig/ (config, planner, applier) and gpu/ (NVML). docs/mig.md. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gpu/gpu.h"
#include "mig/apply.h"

enum {
    OPT_DRY_RUN = 0x1c00,
    OPT_GPU_MODEL,
    OPT_WANT,
    OPT_GPUS,
};

struct mig_args {
    const char *verb;
    const char *config_file; /* -f apply/assert; output file of generate-config */
    const char *selected;    /* -c */
    const char *hooks_file;  /* -k */
    const char *checkpoint;  /* -f of checkpoint/restore */
    const char *output;      /* -o yaml|json (export, generate-config), text|json (plan) */
    const char *label;       /* -l export */
    const char *gpu_model;   /* plan */
    const char *want;        /* plan */
    unsigned gpus;           /* plan --gpus N (offline) */
    bool skip_reset, mode_only, valid_config, debug, dry_run;
    struct gpu_nvml_options nvml;
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: gpuslice mig COMMAND [options]     (also runs as nvidia-mig-parted)\n\n"
            "Commands (nvidia-mig-parted's, same flags and env vars):\n"
            "  apply            apply a MIG config: -f FILE -c NAME [-k HOOKS] [-m] [-s]\n"
            "                   [--dry-run: print the NVML calls instead of making them]\n"
            "  assert           is a MIG config applied? -f FILE -c NAME [-m] [-a]\n"
            "  export           the current layout as a config: [-o yaml|json] [-l LABEL]\n"
            "  generate-config  configs for this node's GPUs: [-f OUT] [-o yaml|json]\n"
            "  checkpoint       save the layout: -f FILE\n"
            "  restore          put a saved layout back: -f FILE\n"
            "  plan             plan a layout without touching anything:\n"
            "                   [--gpu-model NAME] --want 3g.40gb=1,1g.10gb=3 | -f FILE -c NAME\n"
            "                   [--gpus N] [-o text|json]; without --want: this node's layouts\n"
            "                   and their stranded capacity\n\n"
            "Options:\n"
            "  -f, --config-file FILE     MIG config (env MIG_PARTED_CONFIG_FILE; - = stdin;\n"
            "                             a ConfigMap directory works)\n"
            "  -c, --selected-config NAME (env MIG_PARTED_SELECTED_CONFIG)\n"
            "  -k, --hooks-file FILE      (env MIG_PARTED_HOOKS_FILE)\n"
            "  -m, --mode-only            (env MIG_PARTED_MODE_CHANGE_ONLY)\n"
            "  -s, --skip-reset           (env MIG_PARTED_SKIP_RESET)\n"
            "  -a, --valid-config         assert: only check the config (env\n"
            "                             MIG_PARTED_VALID_CONFIG)\n"
            "  -d, --debug                (env MIG_PARTED_DEBUG)\n"
            "      --nvml-library PATH    (env GPUSLICE_NVML_LIBRARY)\n"
            "  -h, --help\n"
            "Exit status: 0 success, 1 failure, 2 usage error. docs/mig.md.\n");
}

static bool env_bool(const char *name)
{
    const char *v = getenv(name);
    return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "TRUE") == 0);
}

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

static bool known_verb(const char *verb)
{
    static const char *const verbs[] = {"apply",      "assert",  "export", "generate-config",
                                        "checkpoint", "restore", "plan"};
    for (size_t i = 0; i < GS_ARRAY_SIZE(verbs); i++)
        if (strcmp(verbs[i], verb) == 0)
            return true;
    return false;
}

/* mig-parted's environment variables, before the flags. */
static void args_from_env(struct mig_args *a, bool ckpt)
{
    bool gen = strcmp(a->verb, "generate-config") == 0;

    a->config_file = env_or(ckpt  ? "MIG_PARTED_CHECKPOINT_FILE"
                            : gen ? "MIG_PARTED_OUTPUT_FILE"
                                  : "MIG_PARTED_CONFIG_FILE",
                            NULL);
    a->selected = env_or("MIG_PARTED_SELECTED_CONFIG", NULL);
    a->hooks_file = env_or("MIG_PARTED_HOOKS_FILE", NULL);
    a->skip_reset = env_bool("MIG_PARTED_SKIP_RESET");
    a->mode_only = env_bool("MIG_PARTED_MODE_CHANGE_ONLY");
    a->valid_config = env_bool("MIG_PARTED_VALID_CONFIG");
    a->output = env_or("MIG_PARTED_OUTPUT_FORMAT", NULL);
    a->label = env_or("MIG_PARTED_CONFIG_LABEL", "current");
    gpu_nvml_options_from_env(&a->nvml);
}

/* One option c (getopt's answer): -1 to go on, or the exit code to return. */
static int set_option(struct mig_args *a, int c, const char *arg, char **argv)
{
    switch (c) {
    case 'f':
        a->config_file = arg;
        break;
    case 'c':
        a->selected = arg;
        break;
    case 'k':
        a->hooks_file = arg;
        break;
    case 's':
        a->skip_reset = true;
        break;
    case 'm':
        a->mode_only = true;
        break;
    case 'a':
        a->valid_config = true;
        break;
    case 'o':
        a->output = arg;
        break;
    case 'l':
        a->label = arg;
        break;
    case 'd':
        a->debug = true;
        break;
    case OPT_DRY_RUN:
        a->dry_run = true;
        break;
    case OPT_GPU_MODEL:
        a->gpu_model = arg;
        break;
    case OPT_WANT:
        a->want = arg;
        break;
    case OPT_GPUS:
        if (parse_uint(arg, &a->gpus) < 0 || a->gpus == 0 || a->gpus > 64)
            return cli_usage_error("mig", "--gpus takes 1 to 64, not '%s'", arg);
        break;
    case 'h':
        usage(stdout);
        return CLI_EXIT_OK;
    default:
        return cli_getopt_error("mig", c, argv);
    }
    return -1;
}

static int parse(int argc, char **argv, struct mig_args *a)
{
    static const struct option opts[] = {
        {"config-file", required_argument, NULL, 'f'},
        {"checkpoint-file", required_argument, NULL, 'f'},
        {"output-file", required_argument, NULL, 'f'},
        {"selected-config", required_argument, NULL, 'c'},
        {"hooks-file", required_argument, NULL, 'k'},
        {"skip-reset", no_argument, NULL, 's'},
        {"mode-only", no_argument, NULL, 'm'},
        {"valid-config", no_argument, NULL, 'a'},
        {"output-format", required_argument, NULL, 'o'},
        {"output", required_argument, NULL, 'o'},
        {"config-label", required_argument, NULL, 'l'},
        {"debug", no_argument, NULL, 'd'},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"gpu-model", required_argument, NULL, OPT_GPU_MODEL},
        {"want", required_argument, NULL, OPT_WANT},
        {"gpus", required_argument, NULL, OPT_GPUS},
        CLI_NVML_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    a->debug = env_bool("MIG_PARTED_DEBUG");
    /* mig-parted's global -d may come before the command */
    while (argc > 1 && (strcmp(argv[1], "-d") == 0 || strcmp(argv[1], "--debug") == 0)) {
        a->debug = true;
        argc--;
        argv++;
    }
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    a->verb = argv[1];
    if (!known_verb(a->verb))
        return cli_usage_error("mig", "unknown command '%s'", a->verb);
    bool ckpt = strcmp(a->verb, "checkpoint") == 0 || strcmp(a->verb, "restore") == 0;
    args_from_env(a, ckpt);
    opterr = 0;
    optind = 2;
    while ((c = getopt_long(argc, argv, ":f:c:k:smao:l:dh", opts, NULL)) != -1) {
        int r = cli_nvml_option(c, optarg, &a->nvml) ? -1 : set_option(a, c, optarg, argv);
        if (r >= 0)
            return r;
    }
    if (optind < argc)
        return cli_usage_error("mig", "unexpected argument '%s'", argv[optind]);
    if (a->checkpoint == NULL && ckpt)
        a->checkpoint = a->config_file;
    if (a->output && strcmp(a->output, "yaml") != 0 && strcmp(a->output, "json") != 0 &&
        strcmp(a->output, "text") != 0)
        return cli_usage_error("mig", "-o takes yaml, json (or text for plan), not '%s'",
                               a->output);
    if ((strcmp(a->verb, "apply") == 0 || strcmp(a->verb, "assert") == 0) && !a->config_file)
        return cli_usage_error("mig", "%s needs -f/--config-file (or MIG_PARTED_CONFIG_FILE)",
                               a->verb);
    if (ckpt && !a->checkpoint)
        return cli_usage_error("mig", "%s needs -f/--checkpoint-file", a->verb);
    return -1;
}

static int fail(struct error *err)
{
    fprintf(stderr, "gpuslice mig: %s\n", err->msg);
    return CLI_EXIT_FAILURE;
}

static int open_nvml(const struct mig_args *a, struct gpu_nvml **n, struct error *err)
{
    return gpu_nvml_open(&a->nvml, n, err);
}

/* ---- hooks ------------------------------------------------------------------------------ */

static int run_hooks(const struct mig_args *a, const struct mig_hooks *h, const char *name,
                     struct error *err)
{
    int idx = mig_hook_index(name);

    for (size_t k = 0; h && idx >= 0 && k < h->n[idx]; k++) {
        const struct mig_hook *hk = &h->list[idx][k];
        fprintf(stderr, "Running %s hook: %s\n", name, hk->command);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0)
            return error_set_errno(err, errno, "%s hook: fork", name);
        if (pid == 0) {
            /* every flag's env var with its resolved value, then the hook's own (which win) */
            setenv("MIG_PARTED_CONFIG_FILE", a->config_file ? a->config_file : "", 1);
            setenv("MIG_PARTED_SELECTED_CONFIG", a->selected ? a->selected : "", 1);
            setenv("MIG_PARTED_HOOKS_FILE", a->hooks_file ? a->hooks_file : "", 1);
            setenv("MIG_PARTED_SKIP_RESET", a->skip_reset ? "true" : "false", 1);
            setenv("MIG_PARTED_MODE_CHANGE_ONLY", a->mode_only ? "true" : "false", 1);
            setenv("MIG_PARTED_DEBUG", a->debug ? "true" : "false", 1);
            for (size_t e = 0; hk->envs && hk->envs[e]; e++)
                putenv(hk->envs[e]);
            if (hk->workdir && chdir(hk->workdir) < 0)
                _exit(126);
            size_t n = strv_length(hk->args);
            char **argv = calloc(n + 2, sizeof(char *));
            if (!argv)
                _exit(126);
            argv[0] = hk->command;
            for (size_t i = 0; i < n; i++)
                argv[i + 1] = hk->args[i];
            execvp(hk->command, argv);
            _exit(127);
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return error_set(err, -EIO, "%s hook '%s' failed (exit %d)", name, hk->command,
                             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    return 0;
}

/* ---- apply / assert --------------------------------------------------------------------- */

static void print_op(void *ud, const char *line)
{
    (void)ud;
    printf("%s\n", line);
}

static int load_set(const struct mig_args *a, struct mig_config **cfg,
                    const struct mig_config_set **set, struct error *err)
{
    int r = mig_config_load(a->config_file, cfg, err);
    if (r < 0)
        return r;
    *set = mig_config_find(*cfg, a->selected, err);
    return *set ? 0 : -EINVAL;
}

/* An apply killed part way leaves its record (mig/intent.c): the next apply or assert says
 * so on stderr. Returns 1 when one was found (in *ret), 0 when none, -EBUSY when the apply
 * that wrote it still runs. */
static int interrupted_apply(const char *verb, struct mig_intent *ret, struct error *err)
{
    struct strbuf what = STRBUF_INIT;
    struct error rerr = {0};
    int r = mig_intent_read(mig_intent_path(), ret, &rerr);

    if (r == -ENOENT)
        return 0;
    if (r < 0) {
        fprintf(stderr, "gpuslice mig %s: %s\n", verb, rerr.msg);
        return 0;
    }
    (void)mig_intent_describe(ret, &what);
    if (mig_intent_running(ret)) {
        r = error_set(err, -EBUSY,
                      "another MIG apply is in progress (pid %ld, %s): wait for it to finish",
                      ret->pid, mig_intent_path());
        strbuf_release(&what);
        return r;
    }
    fprintf(stderr, "gpuslice mig %s: %s (%s)\n", verb, strbuf_str(&what), mig_intent_path());
    strbuf_release(&what);
    return 1;
}

/* Records the GPUs this apply changes before it touches any; a failure to write it is a
 * warning (an interruption would then go unnoticed), not a reason to refuse the apply. */
static void record_intent(const struct mig_args *a, const struct mig_node *node)
{
    struct mig_intent in = {.pid = (long)getpid(), .started_s = (long long)time(NULL)};
    struct error err = {0};

    str_copy(in.config, a->config_file ? a->config_file : "", sizeof(in.config));
    str_copy(in.selected, a->selected ? a->selected : "", sizeof(in.selected));
    for (size_t i = 0; i < node->n && in.n_gpus < MIG_NODE_MAX_GPUS; i++) {
        const struct mig_gpu_plan *p = &node->gpus[i];
        if (!p->selected || !(p->change_mode || (!a->mode_only && p->change_layout)))
            continue;
        in.gpus[in.n_gpus] = p->index;
        str_copy(in.uuids[in.n_gpus++], p->cur.uuid, sizeof(in.uuids[0]));
    }
    if (mig_intent_write(mig_intent_path(), &in, &err) < 0)
        fprintf(stderr,
                "gpuslice mig apply: cannot record the apply in progress (%s); if it is "
                "interrupted, nothing will say so\n",
                err.msg);
}

static int do_apply(const struct mig_args *a)
{
    struct mig_config *cfg = NULL;
    const struct mig_config_set *set = NULL;
    struct mig_hooks hooks = {0};
    struct gpu_nvml *n = NULL;
    struct mig_node *node = calloc(1, sizeof(*node));
    struct gpu_mig_ops ops = {.dry_run = a->dry_run, .log = a->dry_run ? print_op : NULL};
    struct error err = {0}, exit_err = {0};
    int r = node ? 0 : error_set(&err, -ENOMEM, "out of memory");

    if (r == 0)
        r = load_set(a, &cfg, &set, &err);
    if (r == 0 && a->hooks_file)
        r = mig_hooks_load(a->hooks_file, &hooks, &err);
    if (r == 0)
        r = open_nvml(a, &n, &err);
    if (r == 0 && !a->dry_run)
        r = run_hooks(a, &hooks, "apply-start", &err);
    if (r == 0)
        r = mig_node_plan(n, set, a->mode_only, node, &err);
    if (r == 0 && !mig_node_applied(node, a->mode_only)) {
        bool mode = false, layout = false;
        for (size_t i = 0; i < node->n; i++) {
            mode |= node->gpus[i].selected && node->gpus[i].change_mode;
            layout |= node->gpus[i].selected && node->gpus[i].change_layout;
        }
        struct mig_intent prev;
        bool recorded = false;
        if (!a->dry_run) {
            int ir = interrupted_apply("apply", &prev, &err);
            if (ir < 0)
                r = ir;
            else if (ir > 0)
                fprintf(stderr, "gpuslice mig apply: %s\n",
                        strcmp(prev.selected, a->selected ? a->selected : "") == 0
                            ? "finishing it"
                            : "applying the selected configuration over it");
            if (r == 0) {
                record_intent(a, node);
                recorded = true;
            }
        }
        if (r == 0 && mode && !a->dry_run)
            r = run_hooks(a, &hooks, "pre-apply-mode", &err);
        if (r == 0 && layout && !a->mode_only && !a->dry_run)
            r = run_hooks(a, &hooks, "pre-apply-config", &err);
        for (size_t i = 0; r == 0 && i < node->n; i++) {
            const struct mig_gpu_plan *p = &node->gpus[i];
            if (!p->selected || !(p->change_mode || (!a->mode_only && p->change_layout))) {
                if (a->debug && p->selected)
                    fprintf(stderr, "GPU %u: already in the wanted layout, not touched\n",
                            p->index);
                continue;
            }
            if (a->dry_run)
                printf("# GPU %u (%s): %s\n", p->index, p->cur.uuid,
                       p->enable ? "MIG layout" : "MIG off");
            r = mig_apply_gpu(n, p, a->mode_only, &ops, &err);
            if (r == -EINPROGRESS && a->skip_reset)
                r = 0; /* -s: a pending mode is left for the operator's reset */
        }
        /* done, or the failing GPU restored (err says if not): no longer in between */
        if (recorded)
            mig_intent_clear(mig_intent_path());
    } else if (r == 0 && !a->dry_run) {
        struct mig_intent prev;
        /* already applied: a record left by an apply killed after its last change is stale */
        if (interrupted_apply("apply", &prev, &err) > 0) {
            fprintf(stderr, "gpuslice mig apply: the GPUs are in the selected layout now\n");
            mig_intent_clear(mig_intent_path());
        }
    }
    if (!a->dry_run && run_hooks(a, &hooks, "apply-exit", &exit_err) < 0 && r == 0) {
        err = exit_err;
        r = -EIO;
    }
    if (r == 0)
        printf(a->dry_run ? "MIG configuration would be applied by the calls above\n"
                          : "MIG configuration applied successfully\n");
    gpu_nvml_close(n);
    mig_hooks_release(&hooks);
    mig_config_free(cfg);
    free(node);
    return r < 0 ? fail(&err) : CLI_EXIT_OK;
}

static int do_assert(const struct mig_args *a)
{
    struct mig_config *cfg = NULL;
    const struct mig_config_set *set = NULL;
    struct gpu_nvml *n = NULL;
    struct mig_node *node = calloc(1, sizeof(*node));
    struct error err = {0};
    int r = node ? load_set(a, &cfg, &set, &err) : error_set(&err, -ENOMEM, "out of memory");

    if (r == 0 && a->valid_config) {
        printf("Selected MIG configuration is valid\n");
        goto out;
    }
    if (r == 0)
        r = open_nvml(a, &n, &err);
    if (r == 0)
        r = mig_node_plan(n, set, a->mode_only, node, &err);
    if (r == 0) {
        struct mig_intent prev;
        int ir = interrupted_apply("assert", &prev, &err);
        if (ir < 0)
            r = ir;
        else if (ir > 0 && !mig_node_applied(node, a->mode_only))
            r = error_set(&err, -EINVAL,
                          "assertion failure: selected configuration not currently applied "
                          "(an earlier apply was interrupted: run apply again to finish it)");
    }
    if (r == 0 && !a->mode_only) {
        /* mig-parted: every GPU must be selected by some entry and equal it */
        for (size_t i = 0; i < node->n; i++)
            if (!node->gpus[i].selected && node->gpus[i].cur.capable)
                r = error_set(&err, -EINVAL,
                              "assertion failure: selected configuration not "
                              "currently applied (GPU %zu is not selected by "
                              "any entry)",
                              i);
    }
    if (r == 0 && !mig_node_applied(node, a->mode_only))
        r = error_set(&err, -EINVAL,
                      "assertion failure: selected configuration not currently "
                      "applied");
    if (r == 0)
        printf(a->mode_only ? "Selected MIG mode settings from configuration currently applied\n"
                            : "Selected MIG configuration currently applied\n");
out:
    gpu_nvml_close(n);
    mig_config_free(cfg);
    free(node);
    return r < 0 ? fail(&err) : CLI_EXIT_OK;
}

/* ---- export / generate-config ----------------------------------------------------------- */

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* mig-devices: profile -> count (sub-profiles: 1c.3g.40gb), keys sorted as mig-parted's
 * YAML writes its map, so an export diffs clean against mig-parted's. */
static json_t *mig_devices_json(const struct mig_gpu_model *m, const struct mig_want *w)
{
    json_t *md = json_object(), *sorted = json_object();
    const char *keys[MIG_MAX_PROFILES * MIG_MAX_CI];
    size_t n = 0;
    const char *k;
    json_t *v;

    for (size_t i = 0; m && i < m->n_profiles && i < MIG_MAX_PROFILES; i++) {
        const struct mig_profile *p = &m->profiles[i];
        if (w->counts[i])
            json_object_set_new(md, p->name, json_integer(w->counts[i]));
        for (unsigned c = MIG_MAX_CI - 1; c >= 1; c--)
            if (w->ci[i][c]) {
                char name[48];
                mig_ci_name(p, c, name, sizeof(name));
                json_object_set_new(md, name, json_integer(w->ci[i][c]));
            }
    }
    json_object_foreach(md, k, v)
    {
        if (n < GS_ARRAY_SIZE(keys))
            keys[n++] = k;
    }
    qsort(keys, n, sizeof(*keys), cmp_key);
    for (size_t i = 0; i < n; i++)
        json_object_set(sorted, keys[i], json_object_get(md, keys[i]));
    json_decref(md);
    return sorted;
}

/* A generate-config entry: every GPU of m (its first PCI id as the filter on a node of
 * several models) with MIG on and w. */
static json_t *entry_json(const struct mig_gpu_model *m, const struct mig_want *w, bool with_filter)
{
    json_t *o = json_object();
    if (with_filter) {
        char id[16];
        snprintf(id, sizeof(id), "0x%08X", m->pci_ids[0]);
        json_object_set_new(o, "device-filter", json_pack("[s]", id));
    }
    json_object_set_new(o, "devices", json_string("all"));
    json_object_set_new(o, "mig-enabled", json_true());
    json_object_set_new(o, "mig-devices", mig_devices_json(m, w));
    return o;
}

/* YAML the way mig-parted writes it (2-space indent, profile keys quoted). */
static void yaml_value(FILE *f, json_t *v, int indent, bool in_list);

static void yaml_map(FILE *f, json_t *o, int indent, bool first_inline)
{
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(o, k, v)
    {
        if (!(first && first_inline))
            fprintf(f, "%*s", indent, "");
        first = false;
        bool quote = strchr(k, '.') || strchr(k, '+');
        fprintf(f, quote ? "\"%s\":" : "%s:", k);
        if (json_is_object(v) && json_object_size(v)) {
            fputc('\n', f);
            yaml_map(f, v, indent + 2, false);
        } else if (json_is_array(v) && json_array_size(v) && json_is_object(json_array_get(v, 0))) {
            fputc('\n', f);
            yaml_value(f, v, indent + 2, true);
        } else {
            fputc(' ', f);
            yaml_value(f, v, indent, false);
        }
    }
}

static void yaml_value(FILE *f, json_t *v, int indent, bool in_list)
{
    size_t i;
    json_t *x;
    if (json_is_object(v) && !json_object_size(v)) {
        fprintf(f, "{}\n");
    } else if (json_is_array(v) && in_list) {
        json_array_foreach(v, i, x)
        {
            fprintf(f, "%*s- ", indent, "");
            yaml_map(f, x, indent + 2, true);
        }
    } else if (json_is_array(v)) {
        fputc('[', f);
        json_array_foreach(v, i, x)
        {
            if (json_is_string(x))
                fprintf(f, "%s\"%s\"", i ? ", " : "", json_string_value(x));
            else
                fprintf(f, "%s%lld", i ? ", " : "", (long long)json_integer_value(x));
        }
        fprintf(f, "]\n");
    } else if (json_is_string(v)) {
        /* quoted where YAML would read a number: device-filter: "0x20B010DE" */
        const char *str = json_string_value(v);
        fprintf(f, isdigit((unsigned char)str[0]) ? "\"%s\"\n" : "%s\n", str);
    } else if (json_is_boolean(v)) {
        fprintf(f, "%s\n", json_is_true(v) ? "true" : "false");
    } else if (json_is_integer(v)) {
        fprintf(f, "%lld\n", (long long)json_integer_value(v));
    }
}

static int emit(const struct mig_args *a, json_t *root, const char *path)
{
    FILE *f = path && *path ? fopen(path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "gpuslice mig: cannot write %s: %s\n", path, strerror(errno));
        return CLI_EXIT_FAILURE;
    }
    if (a->output && strcmp(a->output, "json") == 0) {
        json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', f);
    } else {
        yaml_map(f, root, 0, false);
    }
    if (f != stdout)
        fclose(f);
    return CLI_EXIT_OK;
}

static json_t *config_doc(const char *label, json_t *entries)
{
    json_t *configs = json_object();
    json_object_set_new(configs, label, entries);
    return json_pack("{s:s, s:o}", "version", "v1", "mig-configs", configs);
}

/* One entry of an export, merged as mig-parted's mergeMigConfigSpecs does: GPUs with the
 * same mode and mig-devices share it, whatever their model. */
struct export_entry {
    uint32_t filters[MIG_NODE_MAX_GPUS]; /* sorted, distinct */
    size_t n_filters;
    uint64_t devices; /* bit per GPU index */
    bool enabled;
    json_t *md; /* mig-devices, owned; {} with MIG off, as mig-parted writes it */
};

static void filter_add(uint32_t *filters, size_t *n, uint32_t f)
{
    size_t i = 0;
    while (i < *n && filters[i] < f)
        i++;
    if (i < *n && filters[i] == f)
        return;
    memmove(&filters[i + 1], &filters[i], (*n - i) * sizeof(*filters));
    filters[i] = f;
    (*n)++;
}

/* GPUs of a PCI id: mig-parted's dfDevices. */
static uint64_t filter_devices(const struct mig_node *node, uint32_t filter)
{
    uint64_t mask = 0;
    for (size_t i = 0; i < node->n && i < 64; i++)
        if (node->gpus[i].cur.pci_device_id == filter)
            mask |= 1ull << i;
    return mask;
}

/* device-filter: none on a one-model node or a one-entry export, a string for one id, else
 * the list; devices: "all" when the entry has every GPU of its filters. */
static json_t *export_entry_json(const struct mig_node *node, const struct export_entry *e,
                                 bool filters)
{
    json_t *o = json_object(), *devs;
    uint64_t of_filters = 0;
    char id[16];

    for (size_t k = 0; k < e->n_filters; k++)
        of_filters |= filter_devices(node, e->filters[k]);
    if (filters && e->n_filters == 1) {
        snprintf(id, sizeof(id), "0x%08X", e->filters[0]);
        json_object_set_new(o, "device-filter", json_string(id));
    } else if (filters) {
        json_t *list = json_array();
        for (size_t k = 0; k < e->n_filters; k++) {
            snprintf(id, sizeof(id), "0x%08X", e->filters[k]);
            json_array_append_new(list, json_string(id));
        }
        json_object_set_new(o, "device-filter", list);
    }
    if (of_filters == e->devices) {
        devs = json_string("all");
    } else {
        devs = json_array();
        for (unsigned i = 0; i < 64; i++)
            if ((e->devices >> i) & 1)
                json_array_append_new(devs, json_integer(i));
    }
    json_object_set_new(o, "devices", devs);
    json_object_set_new(o, "mig-enabled", json_boolean(e->enabled));
    json_object_set_new(o, "mig-devices", json_incref(e->md));
    return o;
}

static int do_export(const struct mig_args *a)
{
    struct gpu_nvml *n = NULL;
    struct mig_node *node = calloc(1, sizeof(*node));
    struct export_entry *entries = calloc(MIG_NODE_MAX_GPUS, sizeof(*entries));
    uint32_t all_filters[MIG_NODE_MAX_GPUS];
    size_t n_entries = 0, n_all_filters = 0;
    struct error err = {0};
    int r = node && entries ? open_nvml(a, &n, &err) : error_set(&err, -ENOMEM, "out of memory");

    if (r == 0)
        r = mig_node_plan(n, NULL, false, node, &err);
    for (size_t i = 0; r == 0 && i < node->n && i < 64; i++) {
        const struct gpu_mig_state *s = &node->gpus[i].cur;
        const struct mig_gpu_model *m = mig_model_find(s->name);
        struct mig_want want = {0};
        bool enabled = s->capable && s->enabled;
        json_t *md;
        size_t j = 0;

        if (enabled && m && !mig_state_want(m, s, &want))
            fprintf(stderr,
                    "gpuslice mig export: GPU %zu has a GPU instance without compute "
                    "instances; it is left out\n",
                    i);
        md = enabled ? mig_devices_json(m, &want) : json_object();
        while (j < n_entries && !(entries[j].enabled == enabled && json_equal(entries[j].md, md)))
            j++;
        if (j == n_entries)
            entries[n_entries++] = (struct export_entry){.enabled = enabled, .md = md};
        else
            json_decref(md);
        entries[j].devices |= 1ull << i;
        filter_add(entries[j].filters, &entries[j].n_filters, s->pci_device_id);
        filter_add(all_filters, &n_all_filters, s->pci_device_id);
    }
    json_t *list = json_array();
    for (size_t j = 0; r == 0 && j < n_entries; j++)
        json_array_append_new(
            list, export_entry_json(node, &entries[j], n_all_filters > 1 && n_entries > 1));
    json_t *root = config_doc(a->label, list);
    int rc = r < 0 ? fail(&err) : emit(a, root, NULL);
    json_decref(root);
    for (size_t j = 0; j < n_entries; j++)
        json_decref(entries[j].md);
    free(entries);
    gpu_nvml_close(n);
    free(node);
    return rc;
}

/* The plain profile with the most instances for each slice count (1g.10gb over 1g.20gb). */
static const struct mig_profile *plain_for(const struct mig_gpu_model *m, unsigned g)
{
    const struct mig_profile *best = NULL;
    for (size_t i = 0; i < m->n_profiles; i++) {
        const struct mig_profile *p = &m->profiles[i];
        if (p->compute_slices == g && !strchr(p->name, '+') &&
            (!best || p->max_instances > best->max_instances))
            best = p;
    }
    return best;
}

/* A layout generate-config offers, under its config name. */
struct named_want {
    char label[64];
    struct mig_want want;
};

/* What generate-config offers a model: [0] all-balanced (1g:2, 2g:1, 3g:1; 4-slice parts
 * 1g:2, 2g:1), then all-<profile> ('+' as '.') with as many as fit. Returns the count
 * (1 + the model's profiles, at most MIG_MAX_PROFILES + 1). */
static size_t standard_wants(const struct mig_gpu_model *m, struct named_want *out)
{
    const struct mig_profile *p1 = plain_for(m, 1), *p2 = plain_for(m, 2), *p3 = plain_for(m, 3);
    size_t n = 1;

    memset(&out[0], 0, sizeof(out[0]));
    str_copy(out[0].label, "all-balanced", sizeof(out[0].label));
    if (p1)
        out[0].want.counts[p1 - m->profiles] = 2;
    if (p2)
        out[0].want.counts[p2 - m->profiles] = 1;
    if (p3 && m->compute_slices == 7)
        out[0].want.counts[p3 - m->profiles] = 1;
    for (size_t i = 0; i < m->n_profiles && i < MIG_MAX_PROFILES; i++, n++) {
        char *c;
        memset(&out[n], 0, sizeof(out[n]));
        out[n].want.counts[i] = m->profiles[i].max_instances;
        snprintf(out[n].label, sizeof(out[n].label), "all-%s", m->profiles[i].name);
        while ((c = strchr(out[n].label, '+')))
            *c = '.';
    }
    return n;
}

static int do_generate(const struct mig_args *a)
{
    struct gpu_nvml *n = NULL;
    struct mig_node *node = calloc(1, sizeof(*node));
    const struct mig_gpu_model *models[16];
    struct named_want wants[MIG_MAX_PROFILES + 1];
    size_t n_models = 0;
    struct error err = {0};
    int r = node ? open_nvml(a, &n, &err) : error_set(&err, -ENOMEM, "out of memory");

    if (r == 0)
        r = mig_node_plan(n, NULL, false, node, &err);
    for (size_t i = 0; r == 0 && i < node->n; i++) {
        const struct mig_gpu_model *m = mig_model_find(node->gpus[i].cur.name);
        bool seen = false;
        for (size_t k = 0; k < n_models; k++)
            seen |= models[k] == m;
        if (m && !seen && n_models < 16)
            models[n_models++] = m;
    }
    if (r < 0) {
        gpu_nvml_close(n);
        free(node);
        return fail(&err);
    }
    json_t *configs = json_object();
    json_object_set_new(configs, "all-disabled",
                        json_pack("[{s:s,s:b}]", "devices", "all", "mig-enabled", 0));
    json_object_set_new(
        configs, "all-enabled",
        json_pack("[{s:s,s:b,s:{}}]", "devices", "all", "mig-enabled", 1, "mig-devices"));
    bool filter = n_models > 1;
    json_t *balanced = json_array();
    for (size_t k = 0; k < n_models; k++) {
        const struct mig_gpu_model *m = models[k];
        size_t n_wants = standard_wants(m, wants);
        for (size_t i = 0; i < n_wants; i++) {
            json_t *list = i == 0 ? balanced : json_object_get(configs, wants[i].label);
            if (!list) {
                list = json_array();
                json_object_set_new(configs, wants[i].label, list);
            }
            json_array_append_new(list, entry_json(m, &wants[i].want, filter));
        }
    }
    if (n_models)
        json_object_set_new(configs, "all-balanced", balanced);
    else
        json_decref(balanced);
    json_t *root = json_pack("{s:s, s:o}", "version", "v1", "mig-configs", configs);
    int rc = emit(a, root, a->config_file);
    json_decref(root);
    gpu_nvml_close(n);
    free(node);
    return rc;
}

/* ---- checkpoint / restore (mig-parted's JSON) -------------------------------------------- */

static int do_checkpoint(const struct mig_args *a)
{
    struct gpu_nvml *n = NULL;
    struct mig_node *node = calloc(1, sizeof(*node));
    struct error err = {0};
    int r = node ? open_nvml(a, &n, &err) : error_set(&err, -ENOMEM, "out of memory");

    if (r == 0)
        r = mig_node_plan(n, NULL, false, node, &err);
    json_t *devs = json_array();
    for (size_t i = 0; r == 0 && i < node->n; i++) {
        const struct gpu_mig_state *s = &node->gpus[i].cur;
        json_t *gis = json_array();
        if (!s->capable)
            continue;
        for (size_t k = 0; k < s->n_gis; k++) {
            json_t *cis = json_array();
            for (size_t c = 0; c < s->gis[k].n_cis; c++)
                json_array_append_new(cis, json_pack("{s:i,s:i,s:{s:i,s:i}}", "ProfileID",
                                                     s->gis[k].cis[c].profile_id, "EngProfileID",
                                                     s->gis[k].cis[c].eng_profile_id, "Placement",
                                                     "Start", s->gis[k].cis[c].start, "Size",
                                                     s->gis[k].cis[c].size));
            json_array_append_new(gis, json_pack("{s:i,s:{s:i,s:i},s:o}", "ProfileID",
                                                 s->gis[k].profile_id, "Placement", "Start",
                                                 s->gis[k].start, "Size", s->gis[k].size,
                                                 "ComputeInstances", cis));
        }
        json_array_append_new(devs, json_pack("{s:s,s:i,s:o}", "UUID", s->uuid, "MigMode",
                                              s->enabled ? 1 : 0, "GpuInstances", gis));
    }
    json_t *root = json_pack("{s:s,s:{s:o}}", "Version", "v1", "MigState", "Devices", devs);
    char *text = r == 0 ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (r == 0 && !text)
        r = error_set(&err, -ENOMEM, "out of memory");
    if (r == 0)
        r = file_write_atomic(a->checkpoint, text, strlen(text), 0644, &err);
    free(text);
    json_decref(root);
    gpu_nvml_close(n);
    free(node);
    return r < 0 ? fail(&err) : CLI_EXIT_OK;
}

static int do_restore(const struct mig_args *a)
{
    struct gpu_nvml *n = NULL;
    struct mig_node *node = calloc(1, sizeof(*node));
    json_error_t je;
    struct error err = {0};
    json_t *root = json_load_file(a->checkpoint, 0, &je), *devs;
    size_t i;
    json_t *d;
    int r = node ? 0 : error_set(&err, -ENOMEM, "out of memory");

    if (r == 0 && !root)
        r = error_set(&err, -EINVAL, "%s:%d: %s", a->checkpoint, je.line, je.text);
    devs = root ? json_object_get(json_object_get(root, "MigState"), "Devices") : NULL;
    if (r == 0 && (!json_is_array(devs) ||
                   strcmp(json_string_value(json_object_get(root, "Version")) ?: "", "v1") != 0))
        r = error_set(&err, -EINVAL, "%s: not a v1 MIG checkpoint (Version, MigState.Devices)",
                      a->checkpoint);
    if (r == 0)
        r = open_nvml(a, &n, &err);
    if (r == 0)
        r = mig_node_plan(n, NULL, false, node, &err);
    json_array_foreach(r == 0 ? devs : NULL, i, d)
    {
        const char *uuid = json_string_value(json_object_get(d, "UUID"));
        struct gpu_mig_state want = {0};
        size_t k = 0;
        while (k < node->n && !(uuid && strcmp(node->gpus[k].cur.uuid, uuid) == 0))
            k++;
        if (k == node->n) {
            r = error_set(&err, -ENOENT, "%s: GPU %s is not on this node", a->checkpoint,
                          uuid ? uuid : "?");
            break;
        }
        want = node->gpus[k].cur;
        want.enabled = json_integer_value(json_object_get(d, "MigMode")) == 1;
        want.n_gis = 0;
        size_t gi_i;
        json_t *g;
        json_array_foreach(json_object_get(d, "GpuInstances"), gi_i, g)
        {
            struct gpu_mig_gi *gi = &want.gis[want.n_gis];
            json_t *pl = json_object_get(g, "Placement"), *c;
            size_t ci_i;
            if (want.n_gis == GPU_MIG_MAX_GI)
                break;
            *gi = (struct gpu_mig_gi){
                .profile_id = (unsigned)json_integer_value(json_object_get(g, "ProfileID")),
                .start = (unsigned)json_integer_value(json_object_get(pl, "Start")),
                .size = (unsigned)json_integer_value(json_object_get(pl, "Size"))};
            json_array_foreach(json_object_get(g, "ComputeInstances"), ci_i, c)
            {
                json_t *cpl = json_object_get(c, "Placement");
                if (gi->n_cis == GPU_MIG_MAX_CI)
                    break;
                gi->cis[gi->n_cis++] = (struct gpu_mig_ci){
                    .profile_id = (unsigned)json_integer_value(json_object_get(c, "ProfileID")),
                    .eng_profile_id =
                        (unsigned)json_integer_value(json_object_get(c, "EngProfileID")),
                    .start = (unsigned)json_integer_value(json_object_get(cpl, "Start")),
                    .size = (unsigned)json_integer_value(json_object_get(cpl, "Size"))};
            }
            want.n_gis++;
        }
        r = gpu_mig_restore(n, &want, NULL, &err);
        if (r < 0)
            break;
    }
    if (r == 0)
        printf("MIG configuration restored successfully\n");
    json_decref(root);
    gpu_nvml_close(n);
    free(node);
    return r < 0 ? fail(&err) : CLI_EXIT_OK;
}

/* ---- plan -------------------------------------------------------------------------------- */

static json_t *layout_json(const struct mig_gpu_model *m, const struct mig_layout *l)
{
    json_t *items = json_array();
    for (size_t k = 0; k < l->n; k++) {
        const struct mig_placement *it = &l->items[k];
        json_t *o = json_pack("{s:s,s:i,s:i,s:i,s:I}", "profile", it->p->name, "profile_id",
                              it->p->id, "start", it->start, "slices", it->p->slices, "memory_mib",
                              (json_int_t)it->p->memory_mib);
        if (it->n_ci) { /* compute instances smaller than the GPU instance */
            json_t *cis = json_array();
            for (size_t c = 0; c < it->n_ci; c++) {
                char name[48];
                mig_ci_name(it->p, it->ci_size[c], name, sizeof(name));
                json_array_append_new(cis, json_pack("{s:s,s:i,s:i}", "profile", name, "start",
                                                     it->ci_start[c], "slices", it->ci_size[c]));
            }
            json_object_set_new(o, "compute_instances", cis);
        }
        json_array_append_new(items, o);
    }
    struct mig_stranded st;
    mig_layout_stranded(m, l, &st);
    return json_pack("{s:o,s:{s:i,s:i,s:I,s:i,s:i}}", "placements", items, "stranded",
                     "free_slices", st.free_slices, "stranded_slices", st.stranded_slices,
                     "stranded_mib", (json_int_t)st.stranded_mib, "free_compute_slices",
                     st.free_compute, "stranded_compute_slices", st.stranded_compute);
}

static void layout_text(const struct mig_gpu_model *m, const struct mig_layout *l, FILE *f)
{
    struct strbuf d = STRBUF_INIT;
    struct mig_stranded st;
    (void)mig_layout_diagram(m, l, &d);
    fprintf(f, "  %s\n", strbuf_str(&d));
    strbuf_release(&d);
    for (size_t k = 0; k < l->n; k++) {
        const struct mig_placement *it = &l->items[k];
        fprintf(f, "  %-12s id %-3u at memory slice %u (%u slice%s, %u MiB)", it->p->name,
                it->p->id, it->start, it->p->slices, it->p->slices == 1 ? "" : "s",
                it->p->memory_mib);
        for (size_t c = 0; c < it->n_ci; c++) {
            char name[48];
            mig_ci_name(it->p, it->ci_size[c], name, sizeof(name));
            fprintf(f, "%s%s at compute slice %u", c ? ", " : ": ", name, it->ci_start[c]);
        }
        fprintf(f, "\n");
    }
    mig_layout_stranded(m, l, &st);
    fprintf(f,
            "  free: %u memory slice%s, %u compute slice%s; stranded (no profile can use "
            "them): %u memory slice%s (%llu MiB), %u compute slice%s\n",
            st.free_slices, st.free_slices == 1 ? "" : "s", st.free_compute,
            st.free_compute == 1 ? "" : "s", st.stranded_slices, st.stranded_slices == 1 ? "" : "s",
            (unsigned long long)st.stranded_mib, st.stranded_compute,
            st.stranded_compute == 1 ? "" : "s");
}

/* One model, one wanted multiset: the answer as JSON (and text on f when not json). */
static json_t *plan_one(const struct mig_gpu_model *m, const struct mig_want *w, bool json, FILE *f,
                        const char *who)
{
    struct mig_layout l;
    struct strbuf why = STRBUF_INIT;
    unsigned counts[MIG_MAX_PROFILES] = {0};
    int r = mig_plan_want(m, w, &l, &why);

    mig_want_gi_counts(m, w, counts); /* the GPU instances, for the closest layouts */
    json_t *o = json_pack("{s:s,s:s,s:b}", "gpu", who, "model", m->name, "fits", r == 0);

    if (!json)
        fprintf(f, "%s: %s\n", who, m->name);
    if (r == 0) {
        json_t *lj = layout_json(m, &l);
        json_object_update(o, lj);
        json_decref(lj);
        if (!json)
            layout_text(m, &l, f);
    } else {
        struct mig_layout alt[3];
        size_t n_alt = mig_plan_closest(m, counts, alt, 3);
        json_t *alts = json_array();
        json_object_set_new(o, "why", json_string(strbuf_str(&why)));
        if (!json)
            fprintf(f, "  does not fit: %s\n", strbuf_str(&why));
        for (size_t k = 0; k < n_alt; k++) {
            json_array_append_new(alts, layout_json(m, &alt[k]));
            if (!json) {
                fprintf(f, "  closest layout that fits (%zu):\n", k + 1);
                layout_text(m, &alt[k], f);
            }
        }
        json_object_set_new(o, "closest", alts);
    }
    strbuf_release(&why);
    return o;
}

/* MIG off: the layouts the GPU could take, generate-config's (profiles are readable before
 * MIG is enabled, on the hardware as in the catalog). */
static json_t *possible_layouts(const struct mig_gpu_model *m, bool json, FILE *f)
{
    struct named_want wants[MIG_MAX_PROFILES + 1];
    size_t n_wants = standard_wants(m, wants);
    json_t *out = json_array();

    if (!json)
        fprintf(f, "  layouts it could take (mig apply -c NAME with generate-config's file):\n");
    for (size_t i = 0; i < n_wants; i++) {
        struct mig_layout l;
        if (mig_plan_want(m, &wants[i].want, &l, NULL) < 0)
            continue;
        json_t *o = json_pack("{s:s}", "config", wants[i].label), *lj = layout_json(m, &l);
        json_object_update(o, lj);
        json_decref(lj);
        json_array_append_new(out, o);
        if (!json) {
            fprintf(f, "  %s:\n", wants[i].label);
            layout_text(m, &l, f);
        }
    }
    return out;
}

/* The node's current layout per MIG GPU, with its stranded capacity. */
static json_t *current_one(const struct mig_gpu_plan *p, bool json, FILE *f)
{
    struct mig_layout l = {0};
    char who[32];
    snprintf(who, sizeof(who), "GPU %u", p->index);
    for (size_t k = 0; k < p->cur.n_gis && l.n < MIG_MAX_INSTANCES; k++) {
        const struct mig_profile *pr = mig_profile_by_id(p->model, p->cur.gis[k].profile_id);
        if (!pr)
            continue;
        struct mig_placement *it = &l.items[l.n++];
        const struct gpu_mig_gi *g = &p->cur.gis[k];
        *it = (struct mig_placement){.p = pr, .start = g->start};
        bool full = g->n_cis == 1 && g->cis[0].size == pr->compute_slices;
        for (size_t c = 0; !full && c < g->n_cis && it->n_ci < MIG_MAX_CI; c++) {
            it->ci_size[it->n_ci] = g->cis[c].size;
            it->ci_start[it->n_ci++] = g->cis[c].start;
        }
    }
    json_t *o = json_pack("{s:s,s:s,s:b}", "gpu", who, "model", p->model->name, "mig_enabled",
                          p->cur.enabled);
    json_t *lj = layout_json(p->model, &l);
    json_object_update(o, lj);
    json_decref(lj);
    if (!json) {
        fprintf(f, "%s: %s, MIG %s\n", who, p->model->name, p->cur.enabled ? "on" : "off");
        if (p->cur.enabled)
            layout_text(p->model, &l, f);
    }
    if (!p->cur.enabled)
        json_object_set_new(o, "possible", possible_layouts(p->model, json, f));
    return o;
}

/* What `plan` works out for one offline model (--gpu-model): from --want or the entry of
 * -f/-c that selects it. */
static int offline_want(const struct mig_args *a, const struct mig_config_set *set,
                        const struct mig_gpu_model **ret_model, struct mig_want *w,
                        struct error *err)
{
    const struct mig_gpu_model *m = mig_model_find(a->gpu_model);
    int r;

    *w = (struct mig_want){0};
    if (!m) {
        struct strbuf known = STRBUF_INIT;
        for (size_t i = 0; mig_model_get(i); i++)
            (void)strbuf_printf(&known, "%s%s", i ? ", " : "", mig_model_get(i)->name);
        r = error_set(err, -EINVAL, "unknown GPU model '%s'; known: %s", a->gpu_model,
                      strbuf_str(&known));
        strbuf_release(&known);
        return r;
    }
    *ret_model = m;
    if (a->want)
        return mig_parse_want(m, a->want, w, err);
    if (set) {
        const struct mig_config_entry *e = mig_config_for_gpu(set, 0, m->pci_ids[0]);
        return e ? mig_config_want(e, m, w, err)
                 : error_set(err, -EINVAL, "no entry of '%s' selects a %s", set->label, m->name);
    }
    return error_set(err, -EINVAL, "--gpu-model needs --want or -f/-c");
}

/* One GPU of this node: planned (--want, -f/-c) or shown as it is. Adds its JSON to out;
 * *fits cleared when it does not fit. */
static int plan_node_gpu(const struct mig_args *a, const struct mig_config_set *set,
                         struct mig_gpu_plan *p, bool json, json_t *out, bool *fits,
                         struct error *err)
{
    struct mig_want w;
    char who[32];
    int r;

    if (!p->cur.capable)
        return 0;
    p->model = mig_model_find(p->cur.name);
    if (!p->model)
        return 0;
    snprintf(who, sizeof(who), "GPU %u", p->index);
    if (a->want) {
        r = mig_parse_want(p->model, a->want, &w, err);
    } else if (set) {
        const struct mig_config_entry *e = mig_config_for_gpu(set, p->index, p->cur.pci_device_id);
        if (!e)
            return 0;
        if (!e->mig_enabled) {
            if (!json)
                printf("%s: %s, MIG off\n", who, p->model->name);
            return 0;
        }
        r = mig_config_want(e, p->model, &w, err);
    } else {
        json_array_append_new(out, current_one(p, json, stdout));
        return 0;
    }
    if (r == 0) {
        json_t *o = plan_one(p->model, &w, json, stdout, who);
        *fits &= json_is_true(json_object_get(o, "fits"));
        json_array_append_new(out, o);
    }
    return r;
}

static int do_plan(const struct mig_args *a)
{
    bool json = a->output && strcmp(a->output, "json") == 0;
    struct mig_config *cfg = NULL;
    const struct mig_config_set *set = NULL;
    struct gpu_nvml *n = NULL;
    struct mig_node *node = NULL;
    json_t *out = json_array();
    struct error err = {0};
    bool all_fit = true;
    int r = 0;

    if (a->config_file && !a->want)
        r = load_set(a, &cfg, &set, &err);
    if (r == 0 && a->gpu_model) {
        /* offline: the profile tables, no NVML */
        const struct mig_gpu_model *m = NULL;
        struct mig_want w;
        r = offline_want(a, set, &m, &w, &err);
        for (unsigned g = 0; r == 0 && g < (a->gpus ? a->gpus : 1); g++) {
            char who[32];
            snprintf(who, sizeof(who), "GPU %u", g);
            json_t *o = plan_one(m, &w, json, stdout, who);
            all_fit &= json_is_true(json_object_get(o, "fits"));
            json_array_append_new(out, o);
        }
    } else if (r == 0) {
        node = calloc(1, sizeof(*node));
        r = node ? open_nvml(a, &n, &err) : error_set(&err, -ENOMEM, "out of memory");
        if (r == 0)
            r = mig_node_plan(n, NULL, false, node, &err);
        for (size_t i = 0; r == 0 && i < node->n; i++)
            r = plan_node_gpu(a, set, &node->gpus[i], json, out, &all_fit, &err);
    }
    if (r == 0 && json) {
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", text ? text : "[]");
        free(text);
    }
    json_decref(out);
    gpu_nvml_close(n);
    mig_config_free(cfg);
    free(node);
    if (r < 0)
        return fail(&err);
    return all_fit ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int cmd_mig(int argc, char **argv)
{
    struct mig_args a = {0};
    int rc = parse(argc, argv, &a);

    if (rc >= 0)
        return rc;
    if (strcmp(a.verb, "apply") == 0)
        return do_apply(&a);
    if (strcmp(a.verb, "assert") == 0)
        return do_assert(&a);
    if (strcmp(a.verb, "export") == 0)
        return do_export(&a);
    if (strcmp(a.verb, "generate-config") == 0)
        return do_generate(&a);
    if (strcmp(a.verb, "checkpoint") == 0)
        return do_checkpoint(&a);
    if (strcmp(a.verb, "restore") == 0)
        return do_restore(&a);
    return do_plan(&a);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_config.c: `gpuslice config validate|show` — checks a device plugin config (a file
 * or a ConfigMap directory) and prints every problem, or prints the effective config after
 * selection, defaults, env vars and NVIDIA's flags. Wiring only: the config module
 * decides. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/base.h"
#include "cli/cli.h"
#include "config/config.h"

#define MAX_FALLBACKS 3

struct config_args {
    const char *verb;
    const char *path;
    const char *config_name;
    const char *default_name;
    enum cfg_fallback fallbacks[MAX_FALLBACKS];
    size_t n_fallbacks;
    bool fallbacks_given;
    enum cfg_format format;
    struct cfg_overrides overrides;
};

static void usage(FILE *f)
{
    const struct cfg_option *opts;
    size_t n;

    fprintf(f,
            "Usage: gpuslice config validate PATH [options] [NVIDIA flags]\n"
            "       gpuslice config show [PATH] [options] [-o yaml|json] [NVIDIA flags]\n\n"
            "Checks a device plugin config (version: v1, YAML or JSON) or prints the\n"
            "effective one. PATH is a file or a ConfigMap mount directory (one file per key).\n"
            "validate on a directory without a name checks every config in it.\n"
            "show without PATH prints the built-in defaults (plus env vars and flags).\n\n"
            "Options:\n"
            "  --config-name NAME          the named config to use (the node label's value)\n"
            "  --default-config NAME       used when no name is given\n"
            "  --fallback-strategies LIST  comma-separated named,single,empty "
            "(default named,single)\n"
            "  -o, --output yaml|json      output format of show (default yaml)\n"
            "  --nvidia, --strict-nvidia-schema\n"
            "                              also refuse what NVIDIA's device plugin would\n"
            "                              reject or read differently, so the config is safe\n"
            "                              to roll back to it: replicas: 1, resources.gpus/mig,\n"
            "                              rename, devices, MPS memoryLimit/threadPercentage\n"
            "                              (env GPUSLICE_STRICT_NVIDIA_SCHEMA)\n"
            "  -h, --help                  this help\n\n"
            "NVIDIA flags (flag > env var > config file > default):\n");
    opts = cfg_options(&n);
    for (size_t i = 0; i < n; i++) {
        const struct cfg_option *o = &opts[i];
        if (!(o->binaries & CFG_BIN_PLUGIN) || !o->config_key)
            continue;
        fprintf(f, "  --%s", o->flags[0]);
        for (size_t k = 1; k < GS_ARRAY_SIZE(o->flags) && o->flags[k]; k++)
            fprintf(f, ", --%s", o->flags[k]);
        fprintf(f, "  env");
        for (size_t k = 0; k < GS_ARRAY_SIZE(o->envs) && o->envs[k]; k++)
            if (!str_startswith(o->envs[k], "GFD_"))
                fprintf(f, " %s", o->envs[k]);
        fprintf(f, "  config %s (default '%s')\n", o->config_key, o->default_value);
    }
}

static int parse_fallbacks(struct config_args *a, const char *s)
{
    a->n_fallbacks = 0;
    a->fallbacks_given = true;
    for (const char *p = s; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char word[16];

        if (n >= sizeof(word) || a->n_fallbacks >= MAX_FALLBACKS)
            return -EINVAL;
        memcpy(word, p, n);
        word[n] = '\0';
        if (cfg_fallback_parse(word, &a->fallbacks[a->n_fallbacks]) < 0)
            return -EINVAL;
        a->n_fallbacks++;
        p = end ? end + 1 : p + n;
    }
    return 0;
}

/* Returns 0, or an exit code (usage errors already printed). *ret_help is set when --help
 * was given and handled. */
static int parse_args(int argc, char **argv, struct config_args *a, bool *ret_help)
{
    struct error err = {0};

    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i], *eq, *value = NULL;
        char name[64];
        const struct cfg_option *opt;
        bool is_env;

        if (arg[0] != '-' || arg[1] == '\0') {
            if (a->path)
                return cli_usage_error("config", "unexpected argument '%s'", arg);
            a->path = arg;
            continue;
        }
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            *ret_help = true;
            return CLI_EXIT_OK;
        }
        if (!strcmp(arg, "--nvidia")) /* rollback check: --strict-nvidia-schema */
            arg = "--strict-nvidia-schema";
        eq = strchr(arg, '=');
        if (str_copy(name, arg, sizeof(name)) >= sizeof(name))
            return cli_usage_error("config", "unknown option '%.64s'", arg);
        if (eq)
            name[eq - arg] = '\0';
        opt = cfg_option_find(name, CFG_BIN_PLUGIN, &is_env);
        if (opt && is_env)
            opt = NULL;
        if (eq)
            value = eq + 1;
        else if (!(opt && opt->type == CFG_VAL_BOOL)) {
            bool known = opt || !strcmp(name, "--config-name") || !strcmp(name, "-o") ||
                         !strcmp(name, "--output") || !strcmp(name, "--default-config") ||
                         !strcmp(name, "--fallback-strategies");
            if (!known)
                return cli_usage_error("config", "unknown option '%s'", name);
            if (i + 1 >= argc)
                return cli_usage_error("config", "option '%s' needs a value", name);
            value = argv[++i];
        } else {
            value = "true";
        }
        if (!strcmp(name, "--config-name")) {
            a->config_name = value;
        } else if (!strcmp(name, "--default-config")) {
            a->default_name = value;
        } else if (!strcmp(name, "--fallback-strategies")) {
            if (parse_fallbacks(a, value) < 0)
                return cli_usage_error("config",
                                       "--fallback-strategies: '%s' is not a list of "
                                       "named, single, empty",
                                       value);
        } else if (!strcmp(name, "-o") || !strcmp(name, "--output")) {
            if (cfg_format_parse(value, &a->format) < 0)
                return cli_usage_error("config", "%s: '%s' is not yaml or json", name, value);
        } else if (!opt) {
            return cli_usage_error("config", "unknown option '%s'", name);
        } else if (cfg_overrides_set(&a->overrides, name, value, &err) < 0) {
            return cli_usage_error("config", "%s", err.msg);
        }
    }
    return 0;
}

static const char *env_get(const char *name)
{
    return getenv(name);
}

static void print_diags(const struct cfg_diags *diags)
{
    struct strbuf sb = STRBUF_INIT;

    cfg_diags_format(diags, CFG_SEV_WARNING, &sb);
    cfg_diags_format(diags, CFG_SEV_ERROR, &sb);
    fputs(strbuf_str(&sb), stderr);
    strbuf_release(&sb);
}

/* Loads one config and prints its problems. Returns an exit code. */
static int load_one(const struct config_args *a, const char *name, struct cfg_config **ret_cfg)
{
    struct cfg_load_options lo = {
        .path = a->path,
        .config_name = name,
        .default_name = a->default_name,
        .fallbacks = a->fallbacks,
        .n_fallbacks = a->n_fallbacks,
        .overrides = &a->overrides,
    };
    struct cfg_diags diags = CFG_DIAGS_INIT;
    struct error err = {0};
    int r;

    r = cfg_load(&lo, ret_cfg, &diags, &err);
    print_diags(&diags);
    if (r < 0)
        fprintf(stderr, "gpuslice config %s: %s\n", a->verb, err.msg);
    cfg_diags_release(&diags);
    return r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

static int validate_one(const struct config_args *a, const char *name)
{
    struct cfg_config *cfg = NULL;
    struct strbuf sb = STRBUF_INIT;
    int rc = load_one(a, name, &cfg);

    if (rc == CLI_EXIT_OK) {
        cfg_summary(cfg, &sb);
        printf("valid: %s\n", strbuf_str(&sb));
    }
    strbuf_release(&sb);
    cfg_free(cfg);
    return rc;
}

static json_t *diag_json(const struct cfg_diag *d)
{
    return json_pack("{s:s, s:s?, s:i, s:i, s:s?, s:s?, s:s}", "severity",
                     d->severity == CFG_SEV_ERROR ? "error" : "warning", "file", d->file, "line",
                     (int)d->line, "column", (int)d->col, "path", d->path, "value", d->value,
                     "message", d->message ? d->message : "");
}

/* One data key of a ConfigMap manifest: parsed, positions moved into the manifest, printed
 * in order (or added to the JSON report). 0 when valid. */
static int validate_manifest_config(const struct config_args *a,
                                    const struct cfg_manifest_config *c, json_t *report)
{
    struct cfg_diags diags = CFG_DIAGS_INIT;
    struct cfg_config *cfg = NULL;
    struct strbuf sb = STRBUF_INIT;
    struct error err = {0};
    json_t *jd = report ? json_array() : NULL;
    int r;

    if (c->not_a_string)
        r = error_set(&err, -EINVAL,
                      "%s:%u:%u: data.%s: the value is a mapping or a list; "
                      "a ConfigMap holds the config as text (use `%s: |` and indent the YAML "
                      "under it)",
                      a->path, c->line, c->col, c->name, c->name);
    else
        r = cfg_parse_buffer(c->text, c->len, a->path, &a->overrides, &cfg, &diags, &err);
    cfg_manifest_place(c, a->path, &diags);
    cfg_diags_sort(&diags);
    for (size_t i = 0; i < diags.n_items; i++) {
        if (jd) {
            json_array_append_new(jd, diag_json(&diags.items[i]));
            continue;
        }
        strbuf_reset(&sb);
        cfg_diag_format(&diags.items[i], &sb);
        fprintf(stderr, "%s\n", strbuf_str(&sb));
    }
    strbuf_reset(&sb);
    if (r == 0)
        cfg_summary(cfg, &sb);
    if (report) {
        json_t *o =
            json_pack("{s:s, s:b, s:o}", "name", c->name, "valid", r == 0, "diagnostics", jd);
        if (o && r == 0)
            json_object_set_new(o, "summary", json_string(strbuf_str(&sb)));
        else if (o && c->not_a_string)
            json_object_set_new(o, "error", json_string(err.msg));
        json_array_append_new(report, o);
    } else if (r == 0) {
        printf("valid: %s: %s\n", c->name, strbuf_str(&sb));
    } else {
        if (c->not_a_string)
            fprintf(stderr, "%s\n", err.msg);
        printf("invalid: %s: %zu error%s\n", c->name, diags.n_errors + (c->not_a_string),
               diags.n_errors + c->not_a_string == 1 ? "" : "s");
    }
    strbuf_release(&sb);
    cfg_diags_release(&diags);
    cfg_free(cfg);
    return r;
}

/* `validate` on the ConfigMap manifest itself (the file people kubectl apply). Returns -1
 * when the file is not a manifest, else the exit code. */
static int validate_manifest(const struct config_args *a)
{
    struct cfg_manifest m = {0};
    struct error err = {0};
    json_t *report = NULL, *configs = NULL;
    char *data = NULL;
    size_t len = 0;
    int r, rc = CLI_EXIT_OK;

    if (file_read_all(a->path, CFG_MAX_INPUT_BYTES, &data, &len, NULL) < 0)
        return -1; /* the config loader reports why */
    r = cfg_manifest_parse(data, len, &m, &err);
    free(data);
    if (r <= 0) {
        if (r < 0)
            fprintf(stderr, "gpuslice config validate: %s\n", err.msg);
        return r < 0 ? CLI_EXIT_FAILURE : -1;
    }
    if (a->format == CFG_FORMAT_JSON) {
        configs = json_array();
        report =
            json_pack("{s:s, s:s, s:O}", "file", a->path, "kind", "ConfigMap", "configs", configs);
    }
    if (m.n_configs == 0) {
        fprintf(stderr, "gpuslice config validate: %s: the ConfigMap has no data keys\n", a->path);
        rc = CLI_EXIT_FAILURE;
    }
    for (size_t i = 0; i < m.n_configs; i++)
        if (!a->config_name || strcmp(a->config_name, m.configs[i].name) == 0)
            if (validate_manifest_config(a, &m.configs[i], configs) != 0)
                rc = CLI_EXIT_FAILURE;
    if (report) {
        char *text;
        json_object_set_new(report, "valid", json_boolean(rc == CLI_EXIT_OK));
        text = json_dumps(report, JSON_INDENT(2));
        if (text)
            printf("%s\n", text);
        free(text);
    }
    json_decref(configs);
    json_decref(report);
    cfg_manifest_release(&m);
    return rc;
}

static int do_validate(struct config_args *a)
{
    struct error err = {0};
    char **names = NULL;
    int rc = CLI_EXIT_OK;

    if (!a->path)
        return cli_usage_error("config", "validate needs a PATH (a config file or a "
                                         "ConfigMap directory)");
    if (!path_is_dir(a->path)) {
        rc = validate_manifest(a);
        if (rc >= 0)
            return rc;
        rc = CLI_EXIT_OK;
    }
    if (!path_is_dir(a->path) || a->config_name || a->default_name || a->fallbacks_given)
        return validate_one(a, a->config_name);
    /* a whole ConfigMap directory: check every config in it */
    if (cfg_list_names(a->path, &names, &err) < 0) {
        fprintf(stderr, "gpuslice config validate: %s\n", err.msg);
        return CLI_EXIT_FAILURE;
    }
    if (!names[0]) {
        fprintf(stderr, "gpuslice config validate: '%s' holds no configs\n", a->path);
        rc = CLI_EXIT_FAILURE;
    }
    for (size_t i = 0; names[i]; i++)
        if (validate_one(a, names[i]) != CLI_EXIT_OK)
            rc = CLI_EXIT_FAILURE;
    strv_free(names);
    return rc;
}

static int do_show(struct config_args *a)
{
    struct cfg_config *cfg = NULL;
    struct strbuf sb = STRBUF_INIT;
    int rc = load_one(a, a->config_name, &cfg);

    if (rc == CLI_EXIT_OK && cfg_print(cfg, a->format, &sb) < 0) {
        fprintf(stderr, "gpuslice config show: out of memory\n");
        rc = CLI_EXIT_FAILURE;
    }
    if (rc == CLI_EXIT_OK)
        fputs(strbuf_str(&sb), stdout);
    strbuf_release(&sb);
    cfg_free(cfg);
    return rc;
}

int cmd_config(int argc, char **argv)
{
    struct config_args a = {.fallbacks = {CFG_FALLBACK_NAMED, CFG_FALLBACK_SINGLE},
                            .n_fallbacks = 2};
    struct error err = {0};
    bool help = false;
    int rc;

    cfg_overrides_init(&a.overrides, CFG_BIN_PLUGIN);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    a.verb = argv[1];
    if (strcmp(a.verb, "validate") != 0 && strcmp(a.verb, "show") != 0)
        return cli_usage_error("config", "unknown subcommand '%s'; use validate or show", a.verb);
    /* env first: flags set later replace env values, never the other way round */
    if (cfg_overrides_from_env(&a.overrides, env_get, &err) < 0) {
        rc = cli_usage_error("config", "%s", err.msg); /* like a bad flag: exit 2 */
        goto out;
    }
    rc = parse_args(argc, argv, &a, &help);
    if (rc != 0 || help)
        goto out;
    if (!a.path)
        a.path = cfg_overrides_get(&a.overrides, CFG_OPT_CONFIG_FILE);
    if (a.path && !*a.path)
        a.path = NULL;
    rc = strcmp(a.verb, "validate") == 0 ? do_validate(&a) : do_show(&a);
out:
    cfg_overrides_release(&a.overrides);
    return rc;
}

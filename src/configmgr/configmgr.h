/* SPDX-License-Identifier: Apache-2.0 */
/* configmgr.h: NVIDIA's config-manager, the init container and sidecar of its Helm chart:
 * options (NVIDIA's flags and env), the config named by the node label chosen with the
 * daemon's selection (cfg_select_name), CONFIG_FILE_DST made an atomic symlink to it, and
 * the process to signal found by argv[0]. Library code: never logs; the CLI loop
 * (cli/cmd_config_manager.c) talks to the API through kube/ and logs. */
#ifndef GS_CONFIGMGR_H
#define GS_CONFIGMGR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/base.h"
#include "config/config.h"

#define CFGMGR_DEFAULT_PROCESS "nvidia-device-plugin"
#define CFGMGR_EMPTY_TARGET "/dev/null" /* the "empty" fallback: built-in defaults */
#define CFGMGR_MAX_FALLBACKS 3

/* Strings are borrowed from argv or the environment (they outlive the options). */
struct cfgmgr_options {
    bool oneshot;               /* --oneshot, ONESHOT */
    const char *kubeconfig;     /* --kubeconfig, KUBECONFIG; NULL = in-cluster */
    const char *node_name;      /* --node-name, NODE_NAME (required) */
    const char *node_label;     /* --node-label, NODE_LABEL */
    const char *srcdir;         /* --config-file-srcdir, CONFIG_FILE_SRCDIR (required) */
    const char *dst;            /* --config-file-dst, CONFIG_FILE_DST (required) */
    const char *default_config; /* --default-config, DEFAULT_CONFIG; NULL = none */
    enum cfg_fallback fallbacks[CFGMGR_MAX_FALLBACKS]; /* --fallback-strategies */
    size_t n_fallbacks;
    bool send_signal;       /* --send-signal, SEND_SIGNAL (default true) */
    int signal;             /* --signal, SIGNAL (default 1, SIGHUP) */
    const char *process;    /* --process-to-signal, PROCESS_TO_SIGNAL */
    const char *api_server; /* --kube-api-server, GPUSLICE_KUBE_API_SERVER (tests) */
    const char *proc_root;  /* --proc-root, GPUSLICE_PROC_ROOT (tests); default /proc */
    const char *log_level;  /* --log-level / -v */
    bool help;
};

const char *cfgmgr_usage(void);

/* Flags win over env (getenv_fn, e.g. getenv), which wins over the defaults. An empty env
 * value counts as unset, as in NVIDIA's (its chart renders SIGNAL="" for the init container).
 * Checks the required values unless --help was given. -EINVAL with err naming the flag or env var,
 * its value and what is accepted. */
int cfgmgr_options_parse(struct cfgmgr_options *o, int argc, char **argv,
                         const char *(*getenv_fn)(const char *), struct error *err);

/* The symlink target for the node's label value (NULL = no label): <srcdir>/<name> chosen
 * like the daemon does (label > default config > fallbacks), or CFGMGR_EMPTY_TARGET for the
 * "empty" fallback. *ret_target owned. -ENOENT (err lists the available names) when the
 * label or default names no config or no fallback applies; -EINVAL for a bad name. */
int cfgmgr_choose(const struct cfgmgr_options *o, const char *label_value, char **ret_target,
                  struct error *err);

/* Makes `dst` a symlink to `target`: symlink to "<dst>.tmp-<pid>" and rename(2) over dst,
 * so readers see the old or the new link, never none. The parent directory is created when
 * missing. *ret_changed false (and nothing written) when dst already points there. */
int cfgmgr_link_update(const char *dst, const char *target, bool *ret_changed, struct error *err);

/* The first process under proc_root (NULL = "/proc") other than this one whose argv[0]
 * equals `name`; when none does, the first whose argv[0] has the same base name ("/usr/bin/
 * mps-control-daemon" finds "mps-control-daemon" and the other way round). -ESRCH when
 * there is none. */
int cfgmgr_find_process(const char *proc_root, const char *name, pid_t *ret_pid, struct error *err);

/* "1", "SIGHUP" or "HUP" (1..64). -EINVAL otherwise. */
int cfgmgr_signal_parse(const char *s, int *ret);

/* Appends to *names (an owned strv, from strv_new) the resource names `cfg` advertises for
 * shared devices that refuse requests above 1 (failRequestsGreaterThanOne; MPS defaults to
 * it), as the model names them; names already there are not repeated. Only -ENOMEM. */
int cfgmgr_admission_resources(const struct cfg_config *cfg, char ***names, struct error *err);

#endif

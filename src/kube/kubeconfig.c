/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig.c: the connection settings — a kubeconfig's current context (cluster server, CA,
 * TLS options; user token, token file, client certificate and key as files or base64 -data
 * blobs) or the in-cluster service account. Reads files only; no network. Secrets stay in
 * memory and never reach a message. */
#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "kube/internal.h"
#include "yaml/yaml.h"

void kube__auth_release(struct kube__auth *a)
{
    if (!a)
        return;
    free(a->server);
    free(a->ca_file);
    free(a->ca_data);
    if (a->token)
        explicit_bzero(a->token, strlen(a->token));
    free(a->token);
    free(a->token_file);
    free(a->cert_file);
    free(a->cert_data);
    if (a->key_data)
        explicit_bzero(a->key_data, a->key_len);
    free(a->key_data);
    free(a->key_file);
    free(a->username);
    if (a->password)
        explicit_bzero(a->password, strlen(a->password));
    free(a->password);
    free(a->namespace);
    memset(a, 0, sizeof(*a));
}

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int kube__base64_decode(const char *in, size_t in_len, char **ret, size_t *ret_len)
{
    char *out = malloc(in_len / 4 * 3 + 4);
    unsigned acc = 0, bits = 0, n_pad = 0;
    size_t n = 0;

    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < in_len; i++) {
        char c = in[i];
        int v;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            n_pad++;
            continue;
        }
        v = b64_value(c);
        if (v < 0 || n_pad > 0)
            goto bad; /* a character outside the alphabet, or data after padding */
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    /* Leftover bits must be padding zeros; 6 leftover bits means a truncated input. */
    if (bits >= 6 || (acc & ((1u << bits) - 1)) != 0 || n_pad > 2)
        goto bad;
    out[n] = '\0';
    *ret = out;
    *ret_len = n;
    return 0;
bad:
    free(out);
    return -EINVAL;
}

/* ---- kubeconfig -------------------------------------------------------------------------- */

struct kc {
    const char *path;
    const char *dir; /* of path, for relative file names */
    struct error *err;
    struct yaml_doc doc; /* the kubeconfig's document (single-quoted scalars: yaml/) */
};

static int node_line(struct fy_node *n)
{
    return (int)yaml_pos(n).line;
}

/* The scalar at `key` of mapping n, NULL when absent; -EINVAL when present but not a scalar. */
static int get_scalar(struct kc *k, struct fy_node *map, const char *key, const char *where,
                      const char **ret)
{
    struct fy_node *v = yaml_lookup(map, key);
    bool oom = false;

    *ret = NULL;
    if (!v || (fy_node_get_type(v) == FYNT_SCALAR && fy_node_get_scalar0(v) &&
               fy_node_get_scalar0(v)[0] == '\0'))
        return 0;
    if (fy_node_get_type(v) != FYNT_SCALAR || !fy_node_get_scalar0(v))
        return error_set(k->err, -EINVAL, "kubeconfig %s: %s.%s must be a string", k->path, where,
                         key);
    *ret = yaml_text(&k->doc, v, &oom);
    if (oom)
        return error_set(k->err, -ENOMEM, "kubeconfig %s: out of memory", k->path);
    return 0;
}

/* Finds `name` in the sequence `list_key` ("clusters") of entries {name, <item_key>: {...}}. */
static int find_named(struct kc *k, struct fy_node *root, const char *list_key,
                      const char *item_key, const char *name, struct fy_node **ret)
{
    struct fy_node *list = fy_node_mapping_lookup_by_string(root, list_key, FY_NT);
    struct fy_node *it_node;
    void *it = NULL;

    if (list && fy_node_get_type(list) != FYNT_SEQUENCE)
        return error_set(k->err, -EINVAL, "kubeconfig %s: \"%s\" must be a list", k->path,
                         list_key);
    if (!list)
        goto not_found;
    for (it_node = fy_node_sequence_iterate(list, &it); it_node;
         it_node = fy_node_sequence_iterate(list, &it)) {
        const char *n = NULL;
        int r;
        if (fy_node_get_type(it_node) != FYNT_MAPPING)
            continue;
        r = get_scalar(k, it_node, "name", list_key, &n);
        if (r < 0)
            return r;
        if (str_eq(n, name)) {
            struct fy_node *v = fy_node_mapping_lookup_by_string(it_node, item_key, FY_NT);
            if (!v || fy_node_get_type(v) != FYNT_MAPPING)
                return error_set(
                    k->err, -EINVAL, "kubeconfig %s:%d: %s entry \"%s\" has no \"%s\" mapping",
                    k->path, node_line(fy_node_mapping_lookup_by_string(it_node, "name", FY_NT)),
                    list_key, name, item_key);
            *ret = v;
            return 0;
        }
    }
not_found:
    return error_set(k->err, -ENOENT,
                     "kubeconfig %s: no %s entry named \"%s\"; check the context's %.*s "
                     "(kubectl config view)",
                     k->path, list_key, name, (int)strlen(list_key) - 1, list_key);
}

/* A file name as given, or resolved against the kubeconfig's directory when relative. */
static int dup_path(struct kc *k, const char *p, char **ret)
{
    struct strbuf sb = STRBUF_INIT;

    if (!p)
        return 0;
    if (p[0] == '/' || !k->dir) {
        *ret = strdup(p);
        return *ret ? 0 : -ENOMEM;
    }
    if (strbuf_printf(&sb, "%s/%s", k->dir, p) < 0) {
        strbuf_release(&sb);
        return -ENOMEM;
    }
    *ret = strbuf_take(&sb);
    return *ret ? 0 : -ENOMEM;
}

static int dup_str(const char *s, char **ret)
{
    if (!s)
        return 0;
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

/* `<field>` (a file) and `<field>-data` (base64) of one entry: -data wins, like kubectl. */
static int get_file_or_data(struct kc *k, struct fy_node *map, const char *where, const char *field,
                            char **ret_file, char **ret_data, size_t *ret_len)
{
    char key[64];
    const char *file = NULL, *data = NULL;
    int r;

    r = get_scalar(k, map, field, where, &file);
    if (r < 0)
        return r;
    snprintf(key, sizeof(key), "%s-data", field);
    r = get_scalar(k, map, key, where, &data);
    if (r < 0)
        return r;
    if (data) {
        r = kube__base64_decode(data, strlen(data), ret_data, ret_len);
        if (r == -EINVAL)
            return error_set(k->err, r, "kubeconfig %s: %s.%s is not valid base64", k->path, where,
                             key);
        return r;
    }
    return dup_path(k, file, ret_file);
}

static int parse_cluster(struct kc *k, struct fy_node *cl, struct kube__auth *a)
{
    const char *server = NULL, *insecure = NULL;
    int r;

    r = get_scalar(k, cl, "server", "cluster", &server);
    if (r < 0)
        return r;
    if (!server)
        return error_set(k->err, -EINVAL, "kubeconfig %s: the cluster has no \"server\"", k->path);
    if (!str_startswith(server, "https://") && !str_startswith(server, "http://"))
        return error_set(k->err, -EINVAL,
                         "kubeconfig %s:%d: server \"%s\" must start with https:// (or "
                         "http:// for a test server)",
                         k->path, node_line(fy_node_mapping_lookup_by_string(cl, "server", FY_NT)),
                         server);
    r = dup_str(server, &a->server);
    if (r >= 0)
        r = get_scalar(k, cl, "insecure-skip-tls-verify", "cluster", &insecure);
    if (r >= 0 && insecure) {
        r = parse_bool(insecure, &a->insecure_skip_tls_verify);
        if (r < 0)
            return error_set(k->err, r,
                             "kubeconfig %s: insecure-skip-tls-verify \"%s\" is not true/false",
                             k->path, insecure);
    }
    if (r >= 0)
        r = get_file_or_data(k, cl, "cluster", "certificate-authority", &a->ca_file, &a->ca_data,
                             &a->ca_len);
    return r;
}

static int parse_user(struct kc *k, struct fy_node *u, struct kube__auth *a)
{
    static const char *const unsupported[] = {"exec", "auth-provider"};
    const char *token = NULL, *token_file = NULL, *username = NULL, *password = NULL;
    int r;

    for (size_t i = 0; i < GS_ARRAY_SIZE(unsupported); i++)
        if (fy_node_mapping_lookup_by_string(u, unsupported[i], FY_NT))
            return error_set(k->err, -EOPNOTSUPP,
                             "kubeconfig %s: user \"%s\" credentials are not supported; use "
                             "a token, tokenFile or client certificate (the in-cluster service "
                             "account needs none)",
                             k->path, unsupported[i]);
    r = get_scalar(k, u, "token", "user", &token);
    if (r >= 0)
        r = get_scalar(k, u, "tokenFile", "user", &token_file);
    if (r >= 0)
        r = get_scalar(k, u, "username", "user", &username);
    if (r >= 0)
        r = get_scalar(k, u, "password", "user", &password);
    if (r >= 0)
        r = dup_str(token, &a->token);
    if (r >= 0)
        r = dup_path(k, token_file, &a->token_file);
    if (r >= 0)
        r = dup_str(username, &a->username);
    if (r >= 0)
        r = dup_str(password, &a->password);
    if (r >= 0)
        r = get_file_or_data(k, u, "user", "client-certificate", &a->cert_file, &a->cert_data,
                             &a->cert_len);
    if (r >= 0)
        r = get_file_or_data(k, u, "user", "client-key", &a->key_file, &a->key_data, &a->key_len);
    if (r >= 0 && (!a->cert_file && !a->cert_data) != (!a->key_file && !a->key_data))
        r = error_set(k->err, -EINVAL,
                      "kubeconfig %s: the user has a client certificate without a key or a key "
                      "without a certificate; give both",
                      k->path);
    return r;
}

/* Parses the text with libfyaml's messages collected (a library never prints them); a syntax
 * error comes back with its position. *ret_diag (destroy it after the document) is set even
 * on failure. */
static int build_document(struct kc *k, const char *text, size_t len)
{
    struct yaml_pos pos;
    char msg[ERROR_MSG_MAX];
    int r;

    if (memchr(text, '\0', len))
        return error_set(k->err, -EINVAL, "kubeconfig %s: holds a NUL byte; it must be YAML text",
                         k->path);
    r = yaml_parse(text, len, 0, &k->doc, NULL, NULL, &pos, msg, sizeof(msg));
    if (r == -ENOMEM)
        return error_set(k->err, -ENOMEM, "out of memory");
    if (r < 0 && pos.line)
        return error_set(k->err, -EINVAL, "kubeconfig %s:%u:%u: invalid YAML: %s", k->path,
                         pos.line, pos.col, msg);
    if (r < 0)
        return error_set(k->err, -EINVAL, "kubeconfig %s: invalid YAML", k->path);
    return 0;
}

int kube__kubeconfig_parse(const char *text, size_t len, const char *path, const char *context,
                           struct kube__auth *ret, struct error *err)
{
    struct kc k = {.path = path ? path : "<kubeconfig>", .err = err};
    struct kube__auth a = {0};
    struct fy_node *root, *ctx = NULL, *cl = NULL, *user = NULL;
    const char *cluster_name = NULL, *user_name = NULL, *ns = NULL;
    char *path_copy = NULL;
    int r;

    if (path && strchr(path, '/')) {
        path_copy = strdup(path);
        if (!path_copy)
            return -ENOMEM;
        k.dir = dirname(path_copy);
    }
    r = build_document(&k, text, len);
    if (r < 0)
        goto out;
    root = yaml_root(&k.doc);
    if (!root || fy_node_get_type(root) != FYNT_MAPPING) {
        r = error_set(err, -EINVAL,
                      "kubeconfig %s: not a YAML mapping (a kubeconfig file "
                      "starts with apiVersion: v1, kind: Config)",
                      k.path);
        goto out;
    }
    if (!context) {
        r = get_scalar(&k, root, "current-context", "kubeconfig", &context);
        if (r < 0)
            goto out;
        if (!context) {
            r = error_set(err, -EINVAL,
                          "kubeconfig %s: no current-context; set one with kubectl config "
                          "use-context",
                          k.path);
            goto out;
        }
    }
    r = find_named(&k, root, "contexts", "context", context, &ctx);
    if (r >= 0)
        r = get_scalar(&k, ctx, "cluster", "context", &cluster_name);
    if (r >= 0)
        r = get_scalar(&k, ctx, "user", "context", &user_name);
    if (r >= 0)
        r = get_scalar(&k, ctx, "namespace", "context", &ns);
    if (r < 0)
        goto out;
    if (!cluster_name) {
        r = error_set(err, -EINVAL, "kubeconfig %s: context \"%s\" names no cluster", k.path,
                      context);
        goto out;
    }
    r = find_named(&k, root, "clusters", "cluster", cluster_name, &cl);
    if (r >= 0)
        r = parse_cluster(&k, cl, &a);
    if (r >= 0 && user_name) {
        r = find_named(&k, root, "users", "user", user_name, &user);
        if (r >= 0)
            r = parse_user(&k, user, &a);
    }
    if (r >= 0)
        r = dup_str(ns, &a.namespace);
    if (r < 0)
        goto out;
    *ret = a;
    memset(&a, 0, sizeof(a));
out:
    if (r == -ENOMEM)
        error_set(err, r, "kubeconfig %s: out of memory", k.path);
    kube__auth_release(&a);
    yaml_doc_release(&k.doc);
    free(path_copy);
    return r;
}

/* ---- in-cluster -------------------------------------------------------------------------- */

static int join_path(const char *dir, const char *name, char **ret)
{
    struct kc k = {.dir = dir};
    return dup_path(&k, name, ret);
}

int kube__incluster_auth(const char *sa_dir, struct kube__auth *ret, struct error *err)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    struct kube__auth a = {0};
    struct strbuf sb = STRBUF_INIT;
    char *ns = NULL;
    size_t ns_len = 0;
    unsigned port_n;
    int r;

    if (!host || !*host)
        return error_set(err, -ENOENT,
                         "not running in a Kubernetes pod "
                         "(KUBERNETES_SERVICE_HOST is unset)");
    if (!port || !*port)
        port = "443";
    if (parse_uint(port, &port_n) < 0 || port_n == 0 || port_n > 65535)
        return error_set(err, -EINVAL, "KUBERNETES_SERVICE_PORT \"%s\" is not a port", port);
    /* An IPv6 address goes in brackets. */
    r = strbuf_printf(&sb, strchr(host, ':') ? "https://[%s]:%u" : "https://%s:%u", host, port_n);
    if (r < 0)
        goto out;
    a.server = strbuf_take(&sb);
    r = a.server ? 0 : -ENOMEM;
    if (r >= 0)
        r = join_path(sa_dir, "token", &a.token_file);
    if (r >= 0)
        r = join_path(sa_dir, "ca.crt", &a.ca_file);
    if (r < 0)
        goto nomem;
    if (!path_exists(a.token_file)) {
        r = error_set(err, -ENOENT,
                      "no service account token at %s; mount one "
                      "(automountServiceAccountToken: true) or use --kubeconfig",
                      a.token_file);
        goto out;
    }
    r = strbuf_printf(&sb, "%s/namespace", sa_dir);
    if (r < 0)
        goto nomem;
    /* The namespace file is optional: Events then go to "default". */
    r = file_read_all(strbuf_str(&sb), 4096, &ns, &ns_len, NULL);
    if (r >= 0) {
        while (ns_len > 0 && (ns[ns_len - 1] == '\n' || ns[ns_len - 1] == ' '))
            ns[--ns_len] = '\0';
        if (ns_len > 0) {
            a.namespace = ns;
            ns = NULL;
        }
    }
    *ret = a;
    memset(&a, 0, sizeof(a));
    r = 0;
    goto out;
nomem:
    r = error_set(err, -ENOMEM, "out of memory");
out:
    strbuf_release(&sb);
    free(ns);
    kube__auth_release(&a);
    return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* test_kubeconfig.c: src/kube/kubeconfig.c — kubeconfig contexts, files and -data blobs,
 * every refused input with its message, base64, and the in-cluster settings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/internal.h"
#include "tests.h"

/* base64("CA-PEM") = "Q0EtUEVN", base64("CERT") = "Q0VSVA==", base64("KEY!") = "S0VZIQ==" */
static const char kc_full[] = "apiVersion: v1\n"
                              "kind: Config\n"
                              "current-context: prod\n"
                              "clusters:\n"
                              "- name: other\n"
                              "  cluster: {server: https://other:6443}\n"
                              "- name: c1\n"
                              "  cluster:\n"
                              "    server: https://api.example.com:6443\n"
                              "    certificate-authority-data: Q0EtUEVN\n"
                              "contexts:\n"
                              "- name: dev\n"
                              "  context: {cluster: other, user: u2}\n"
                              "- name: prod\n"
                              "  context: {cluster: c1, user: u1, namespace: gpu}\n"
                              "users:\n"
                              "- name: u1\n"
                              "  user:\n"
                              "    client-certificate-data: Q0VSVA==\n"
                              "    client-key-data: |\n"
                              "      S0VZ\n"
                              "      IQ==\n"
                              "- name: u2\n"
                              "  user:\n"
                              "    token: abc.def\n"
                              "    client-certificate: certs/u2.crt\n"
                              "    client-key: /abs/u2.key\n";

static void test_kubeconfig_parse_current_context_with_data_blobs(void **state)
{
    struct kube__auth a = {0};
    struct error err = {0};

    assert_int_equal(
        kube__kubeconfig_parse(kc_full, strlen(kc_full), "/etc/kube/config", NULL, &a, &err), 0);
    assert_string_equal(a.server, "https://api.example.com:6443");
    assert_int_equal(a.ca_len, 6);
    assert_memory_equal(a.ca_data, "CA-PEM", 6);
    assert_null(a.ca_file);
    assert_int_equal(a.cert_len, 4);
    assert_memory_equal(a.cert_data, "CERT", 4);
    assert_int_equal(a.key_len, 4);
    assert_memory_equal(a.key_data, "KEY!", 4);
    assert_null(a.token);
    assert_string_equal(a.namespace, "gpu");
    assert_false(a.insecure_skip_tls_verify);
    kube__auth_release(&a);
}

static void test_kubeconfig_parse_named_context_files_relative_to_kubeconfig(void **state)
{
    struct kube__auth a = {0};

    assert_int_equal(
        kube__kubeconfig_parse(kc_full, strlen(kc_full), "/etc/kube/config", "dev", &a, NULL), 0);
    assert_string_equal(a.server, "https://other:6443");
    assert_string_equal(a.token, "abc.def");
    assert_string_equal(a.cert_file, "/etc/kube/certs/u2.crt");
    assert_string_equal(a.key_file, "/abs/u2.key");
    assert_null(a.namespace);
    kube__auth_release(&a);
}

static void test_kubeconfig_parse_json_insecure_token_file(void **state)
{
    const char *kc = "{\"current-context\":\"x\",\"contexts\":[{\"name\":\"x\",\"context\":"
                     "{\"cluster\":\"c\",\"user\":\"u\"}}],\"clusters\":[{\"name\":\"c\","
                     "\"cluster\":{\"server\":\"http://127.0.0.1:8080/\","
                     "\"insecure-skip-tls-verify\":true,\"certificate-authority\":\"ca.pem\"}}],"
                     "\"users\":[{\"name\":\"u\",\"user\":{\"tokenFile\":\"tok\"}}]}";
    struct kube__auth a = {0};

    assert_int_equal(kube__kubeconfig_parse(kc, strlen(kc), "cfg.json", NULL, &a, NULL), 0);
    assert_string_equal(a.server, "http://127.0.0.1:8080/");
    assert_true(a.insecure_skip_tls_verify);
    assert_string_equal(a.ca_file, "ca.pem"); /* no directory in the path: as given */
    assert_string_equal(a.token_file, "tok");
    kube__auth_release(&a);
}

/* A single-quoted value with a long run of '' (quotes inside): decoded by base/ as in the
 * config parser; libfyaml's own unescaping leaked 4 KiB and dropped a character here. */
static void test_kubeconfig_single_quoted_long_quote_run(void **state)
{
    struct strbuf kc = STRBUF_INIT, want = STRBUF_INIT;
    struct kube__auth a = {0};

    (void)state;
    strbuf_puts(&kc, "apiVersion: v1\ncurrent-context: x\ncontexts:\n- name: x\n  context: "
                     "{cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: "
                     "'http://127.0.0.1:8080'}\nusers:\n- name: u\n  user:\n    token: 'tk");
    strbuf_puts(&want, "tk");
    for (int i = 0; i < 3000; i++) {
        strbuf_puts(&kc, "''x");
        strbuf_puts(&want, "'x");
    }
    strbuf_puts(&kc, "end'\n");
    strbuf_puts(&want, "end");
    assert_int_equal(kube__kubeconfig_parse(kc.buf, kc.len, "/k/config", NULL, &a, NULL), 0);
    assert_string_equal(a.server, "http://127.0.0.1:8080");
    assert_string_equal(a.token, want.buf);
    kube__auth_release(&a);
    strbuf_release(&kc);
    strbuf_release(&want);
}

static void test_kubeconfig_parse_refuses_with_messages(void **state)
{
    static const struct {
        const char *yaml, *want;
        int r;
    } cases[] = {
        {"- a\n- b\n", "not a YAML mapping", -EINVAL},
        {"apiVersion: v1\n", "no current-context", -EINVAL},
        {"current-context: x\n", "no contexts entry named \"x\"", -ENOENT},
        {"current-context: x\ncontexts: 3\n", "\"contexts\" must be a list", -EINVAL},
        {"current-context: x\ncontexts:\n- name: x\n", "has no \"context\" mapping", -EINVAL},
        {"current-context: x\ncontexts:\n- {name: x, context: {user: u}}\n", "names no cluster",
         -EINVAL},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\n",
         "no clusters entry named \"c\"", -ENOENT},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\nclusters:\n"
         "- {name: c, cluster: {}}\n",
         "has no \"server\"", -EINVAL},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\nclusters:\n"
         "- {name: c, cluster: {server: ftp://h}}\n",
         ":5: server \"ftp://h\" must start with https://", -EINVAL},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\nclusters:\n"
         "- {name: c, cluster: {server: [a]}}\n",
         "cluster.server must be a string", -EINVAL},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\nclusters:\n"
         "- {name: c, cluster: {server: 'https://h', insecure-skip-tls-verify: maybe}}\n",
         "insecure-skip-tls-verify \"maybe\"", -EINVAL},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c}}\nclusters:\n"
         "- {name: c, cluster: {server: 'https://h', certificate-authority-data: '!!'}}\n",
         "certificate-authority-data is not valid base64", -EINVAL},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c, user: u}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https://h'}}\n"
         "users:\n- {name: u, user: {exec: {command: aws}}}\n",
         "\"exec\" credentials are not supported", -EOPNOTSUPP},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c, user: u}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https://h'}}\n"
         "users:\n- {name: u, user: {client-certificate: a.crt}}\n",
         "without a key", -EINVAL},
        {"current-context: x\ncontexts:\n- {name: x, context: {cluster: c, user: nobody}}\n"
         "clusters:\n- {name: c, cluster: {server: 'https://h'}}\n",
         "no users entry named \"nobody\"", -ENOENT},
        {"current-context: [x\n", ":2:1: invalid YAML: ", -EINVAL},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        struct kube__auth a = {0};
        struct error err = {0};
        int r = kube__kubeconfig_parse(cases[i].yaml, strlen(cases[i].yaml), "/k/config", NULL, &a,
                                       &err);
        if (r != cases[i].r || !strstr(err.msg, cases[i].want))
            fail_msg("case %zu: r=%d msg=\"%s\", want %d \"%s\"", i, r, err.msg, cases[i].r,
                     cases[i].want);
        assert_true(str_startswith(err.msg, "kubeconfig /k/config"));
        assert_null(a.server); /* nothing written on failure */
    }
}

static void test_kubeconfig_parse_refuses_nul_byte(void **state)
{
    static const char text[] = "current-context: x\0\n";
    struct kube__auth a = {0};
    struct error err = {0};

    assert_int_equal(kube__kubeconfig_parse(text, sizeof(text) - 1, "k", NULL, &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "holds a NUL byte"));
}

static void test_base64_decode_table(void **state)
{
    static const struct {
        const char *in, *out;
        int r;
    } cases[] = {
        {"", "", 0},
        {"Zg==", "f", 0},
        {"Zm8=", "fo", 0},
        {"Zm9v", "foo", 0},
        {"Zm9v\nYmFy", "foobar", 0},
        {"Zm9vYg==", "foob", 0},
        {"Zm9", NULL, -EINVAL},
        {"Z", NULL, -EINVAL},
        {"Zm==", NULL, -EINVAL}, /* non-zero leftover bits */
        {"Zg==Zg==", NULL, -EINVAL},
        {"Zm9v!", NULL, -EINVAL},
        {"Zg===", NULL, -EINVAL},
    };
    for (size_t i = 0; i < GS_ARRAY_SIZE(cases); i++) {
        char *out = NULL;
        size_t len = 0;
        int r = kube__base64_decode(cases[i].in, strlen(cases[i].in), &out, &len);
        if (r != cases[i].r)
            fail_msg("case %zu \"%s\": r=%d", i, cases[i].in, r);
        if (r == 0) {
            assert_int_equal(len, strlen(cases[i].out));
            assert_memory_equal(out, cases[i].out, len);
        }
        free(out);
    }
}

struct sa_dir {
    char path[64];
};

static void make_sa_dir(struct sa_dir *d, bool with_token, const char *ns)
{
    char p[128];

    snprintf(d->path, sizeof(d->path), "/tmp/gs-kube-sa-XXXXXX");
    assert_non_null(mkdtemp(d->path));
    if (with_token) {
        snprintf(p, sizeof(p), "%s/token", d->path);
        assert_int_equal(file_write_atomic(p, "tok\n", 4, 0600, NULL), 0);
    }
    if (ns) {
        snprintf(p, sizeof(p), "%s/namespace", d->path);
        assert_int_equal(file_write_atomic(p, ns, strlen(ns), 0644, NULL), 0);
    }
}

static void remove_sa_dir(struct sa_dir *d)
{
    char p[128];

    snprintf(p, sizeof(p), "%s/token", d->path);
    unlink(p);
    snprintf(p, sizeof(p), "%s/namespace", d->path);
    unlink(p);
    rmdir(d->path);
}

static void test_incluster_auth_from_env_and_dir(void **state)
{
    struct kube__auth a = {0};
    struct error err = {0};
    struct sa_dir d;
    char want[128];

    make_sa_dir(&d, true, "gpu-system\n");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    assert_int_equal(kube__incluster_auth(d.path, &a, &err), 0);
    assert_string_equal(a.server, "https://10.96.0.1:443");
    snprintf(want, sizeof(want), "%s/token", d.path);
    assert_string_equal(a.token_file, want);
    snprintf(want, sizeof(want), "%s/ca.crt", d.path);
    assert_string_equal(a.ca_file, want);
    assert_string_equal(a.namespace, "gpu-system");
    assert_null(a.token); /* read on each connection, never kept */
    kube__auth_release(&a);

    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_int_equal(kube__incluster_auth(d.path, &a, &err), 0);
    assert_string_equal(a.server, "https://[fd00::1]:443");
    kube__auth_release(&a);

    setenv("KUBERNETES_SERVICE_PORT", "99999", 1);
    assert_int_equal(kube__incluster_auth(d.path, &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "KUBERNETES_SERVICE_PORT"));
    remove_sa_dir(&d);

    make_sa_dir(&d, false, NULL);
    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_int_equal(kube__incluster_auth(d.path, &a, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "automountServiceAccountToken"));
    remove_sa_dir(&d);

    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(kube__incluster_auth("/nonexistent", &a, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "KUBERNETES_SERVICE_HOST"));
}

int run_kubeconfig_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kubeconfig_parse_current_context_with_data_blobs),
        cmocka_unit_test(test_kubeconfig_parse_named_context_files_relative_to_kubeconfig),
        cmocka_unit_test(test_kubeconfig_parse_json_insecure_token_file),
        cmocka_unit_test(test_kubeconfig_single_quoted_long_quote_run),
        cmocka_unit_test(test_kubeconfig_parse_refuses_with_messages),
        cmocka_unit_test(test_kubeconfig_parse_refuses_nul_byte),
        cmocka_unit_test(test_base64_decode_table),
        cmocka_unit_test(test_incluster_auth_from_env_and_dir),
    };
    return cmocka_run_group_tests_name("kube_kubeconfig", tests, NULL, NULL);
}

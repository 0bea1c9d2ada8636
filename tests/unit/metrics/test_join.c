/* SPDX-License-Identifier: Apache-2.0 */
/* test_join.c: metrics_pod_usage (src/metrics/join.c), the pod-usage join, as tables:
 * replicas per pod and container, processes to their pod by cgroup, two containers of one
 * pod on one GPU (a pod-level entry), MIG devices held by different pods, host processes,
 * processes /proc cannot show, a pod known by its UID only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "metrics/metrics.h"

#define UID_A "6a1f0c2e-0000-4000-8000-00000000000a"
#define UID_B "6a1f0c2e-0000-4000-8000-00000000000b"
#define CG(uid)                                                                                    \
    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" uid ".slice/"           \
    "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n"
#define CG_A                                                                                       \
    "0::/kubepods/besteffort/pod" UID_A                                                            \
    "/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
#define CG_B                                                                                       \
    "0::/kubepods/besteffort/pod" UID_B                                                            \
    "/fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\n"
#define CG_HOST "0::/system.slice/sshd.service\n"

static const struct metrics_pod_use *find(const struct metrics_usage *u, unsigned gpu,
                                          const char *ns_name, const char *container)
{
    for (size_t i = 0; i < u->n_pods; i++)
        if (u->pods[i].gpu == gpu && strcmp(u->pods[i].ns_name, ns_name) == 0 &&
            strcmp(u->pods[i].container, container) == 0)
            return &u->pods[i];
    return NULL;
}

static void test_replicas_and_processes_per_pod(void **state)
{
    const struct metrics_holding h[] = {
        {"nvidia.com/gpu", "GPU-0::0", 0, "default/a", "app", UID_A},
        {"nvidia.com/gpu", "GPU-0::1", 0, "default/a", "app", UID_A},
        {"nvidia.com/gpu", "GPU-0::2", 0, "ml/b", "main", UID_B},
    };
    const struct metrics_process p[] = {
        {0, 100, 3000ull << 20, 40, CG_A}, {0, 101, 1000ull << 20, -1, CG_A},
        {0, 200, 500ull << 20, 10, CG_B},  {0, 300, 200ull << 20, 5, CG_HOST},
        {1, 400, 100ull << 20, -1, NULL}, /* /proc cannot show it */
    };
    struct metrics_usage u;
    const struct metrics_pod_use *a, *b;

    (void)state;
    assert_int_equal(metrics_pod_usage(h, 3, p, 5, &u, NULL), 0);
    assert_int_equal(u.n_pods, 2);
    a = find(&u, 0, "default/a", "app");
    b = find(&u, 0, "ml/b", "main");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->replicas, 2);
    assert_int_equal(a->bytes, 4000ull << 20); /* both processes of the pod */
    assert_int_equal(a->sm, 40);               /* the unknown one adds nothing */
    assert_string_equal(a->uid, UID_A);
    assert_string_equal(a->resource, "nvidia.com/gpu");
    assert_int_equal(b->replicas, 1);
    assert_int_equal(b->bytes, 500ull << 20);
    assert_int_equal(u.n_host, 1);
    assert_int_equal(u.host[0].pid, 300);
    assert_int_equal(u.host[0].bytes, 200ull << 20);
    assert_int_equal(u.unattributed, 1);
    metrics_usage_release(&u);
}

static void test_two_containers_of_one_pod_on_one_gpu(void **state)
{
    /* the cgroup names containers by id, the kubelet by name: the processes go to one
     * pod-level entry (container ""), the replicas stay per container */
    const struct metrics_holding h[] = {
        {"nvidia.com/gpu", "GPU-0::0", 0, "default/a", "trainer", UID_A},
        {"nvidia.com/gpu", "GPU-0::1", 0, "default/a", "sidecar", UID_A},
    };
    const struct metrics_process p[] = {{0, 100, 2000ull << 20, 30, CG(UID_A)},
                                        {0, 101, 1000ull << 20, 20, CG(UID_A)}};
    struct metrics_usage u;
    const struct metrics_pod_use *pod;

    (void)state;
    assert_int_equal(metrics_pod_usage(h, 2, p, 2, &u, NULL), 0);
    assert_int_equal(u.n_pods, 3);
    assert_int_equal(find(&u, 0, "default/a", "trainer")->replicas, 1);
    assert_int_equal(find(&u, 0, "default/a", "trainer")->bytes, 0);
    assert_int_equal(find(&u, 0, "default/a", "sidecar")->replicas, 1);
    pod = find(&u, 0, "default/a", "");
    assert_non_null(pod);
    assert_int_equal(pod->replicas, 0);
    assert_int_equal(pod->bytes, 3000ull << 20);
    assert_int_equal(pod->sm, 50);
    assert_string_equal(pod->uid, UID_A);
    assert_string_equal(pod->resource, "nvidia.com/gpu");
    metrics_usage_release(&u);
}

static void test_mig_devices_and_uid_only(void **state)
{
    /* two MIG devices of GPU 1 held by two pods; pod-resources did not answer for the GPU 0
     * process's pod (known by its cgroup UID only) */
    const struct metrics_holding h[] = {
        {"nvidia.com/mig-1g.10gb", "MIG-aaa", 1, "default/a", "app", UID_A},
        {"nvidia.com/mig-3g.40gb", "MIG-bbb", 1, "ml/b", "main", NULL},
        {"nvidia.com/gpu", "GPU-0", 0, NULL, NULL, UID_B}, /* no name: not counted */
    };
    const struct metrics_process p[] = {{1, 100, 1000ull << 20, -1, CG_A},
                                        {0, 200, 700ull << 20, -1, CG_B}};
    struct metrics_usage u;
    const struct metrics_pod_use *a, *uid_only;

    (void)state;
    assert_int_equal(metrics_pod_usage(h, 3, p, 2, &u, NULL), 0);
    a = find(&u, 1, "default/a", "app");
    assert_non_null(a);
    assert_string_equal(a->resource, "nvidia.com/mig-1g.10gb");
    assert_int_equal(a->bytes, 1000ull << 20);
    assert_int_equal(find(&u, 1, "ml/b", "main")->replicas, 1);
    assert_int_equal(find(&u, 1, "ml/b", "main")->bytes, 0);
    uid_only = find(&u, 0, "", "");
    assert_non_null(uid_only);
    assert_string_equal(uid_only->uid, UID_B);
    assert_int_equal(uid_only->bytes, 700ull << 20);
    assert_int_equal(uid_only->sm, -1);
    assert_int_equal(u.n_host, 0);
    assert_int_equal(u.unattributed, 0);
    metrics_usage_release(&u);
}

static void test_empty(void **state)
{
    struct metrics_usage u;

    (void)state;
    assert_int_equal(metrics_pod_usage(NULL, 0, NULL, 0, &u, NULL), 0);
    assert_int_equal(u.n_pods + u.n_host + u.unattributed, 0);
    metrics_usage_release(&u);
    metrics_usage_release(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replicas_and_processes_per_pod),
        cmocka_unit_test(test_two_containers_of_one_pod_on_one_gpu),
        cmocka_unit_test(test_mig_devices_and_uid_only),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

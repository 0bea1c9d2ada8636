/* SPDX-License-Identifier: Apache-2.0 */
/* test_cgroup_more.c: metrics_cgroup_pod on the cgroup paths test_metrics.c does not cover —
 * a kubelet nested in a container (kind, k3d), a process in the pod's own cgroup, a systemd
 * driver with the host's first lines empty, lookalikes that are not pods (podman pods, a
 * truncated UID), lines without colons, an output buffer too small for the UID. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "metrics/metrics.h"

#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define UID "6b0c2c57-1c2d-4e5f-8a9b-0123456789ab"
#define UID_ "6b0c2c57_1c2d_4e5f_8a9b_0123456789ab"

static const struct {
    const char *what, *text;
    int in_pod;
    const char *cid;
} cases[] = {
    {"kubelet nested in a kind node container",
     "0::/system.slice/docker-aaaa.scope/kubelet.slice/kubelet-kubepods.slice/"
     "kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" UID_
     ".slice/cri-containerd-" CID ".scope\n",
     1, CID},
    {"a process in the pod cgroup itself (no container)",
     "0::/kubepods.slice/kubepods-pod" UID_ ".slice\n", 1, ""},
    {"cgroupfs, guaranteed QoS", "0::/kubepods/pod" UID "/" CID "\n", 1, CID},
    {"v1 systemd, earlier hierarchies at the root",
     "13:rdma:/\n12:pids:/\n11:memory:/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod" UID_ ".slice/cri-containerd-" CID ".scope\n",
     1, CID},
    {"a podman pod is not a Kubernetes pod", "0::/machine.slice/libpod-pod-1234.scope\n", 0, ""},
    {"a truncated UID", "0::/kubepods/pod6b0c2c57-1c2d/" CID "\n", 0, ""},
    {"root only", "0::/\n", 0, ""},
    {"lines without colons", "garbage\nmore garbage", 0, ""},
};

static void test_more_cgroup_shapes(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char uid[64] = "x", cid[80] = "x";
        int r = metrics_cgroup_pod(cases[i].text, uid, sizeof(uid), cid, sizeof(cid));
        if (r != cases[i].in_pod)
            fail_msg("%s: in pod %d, want %d", cases[i].what, r, cases[i].in_pod);
        if (r == 1 && strcmp(uid, UID) != 0)
            fail_msg("%s: uid '%s'", cases[i].what, uid);
        if (strcmp(cid, cases[i].cid) != 0)
            fail_msg("%s: container '%s', want '%s'", cases[i].what, cid, cases[i].cid);
    }
}

/* A caller's buffers smaller than a UID or container ID: truncated, NUL-terminated. */
static void test_small_buffers(void **state)
{
    char uid[9], cid[5];
    (void)state;
    assert_int_equal(
        metrics_cgroup_pod("0::/kubepods/pod" UID "/" CID "\n", uid, sizeof(uid), cid, sizeof(cid)),
        1);
    assert_string_equal(uid, "6b0c2c57");
    assert_string_equal(cid, "0123");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_more_cgroup_shapes),
        cmocka_unit_test(test_small_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

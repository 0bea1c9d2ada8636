/* SPDX-License-Identifier: Apache-2.0 */
/* test_metrics.c: which pod a GPU process belongs to, from /proc/<pid>/cgroup texts as the
 * kubelet's cgroup drivers and the runtimes write them (v1 and v2, systemd and cgroupfs,
 * containerd, CRI-O, Docker), and the processes that are in no pod. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "metrics/metrics.h"

#define CID "4f6c1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f"
#define UID "6a1f0c2e-1111-4000-8000-000000000001"
#define UID_ "6a1f0c2e_1111_4000_8000_000000000001"

static void test_cgroup_shapes(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int in_pod;
        const char *cid;
    } cases[] = {
        /* v2, systemd driver, containerd */
        {"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
         ".slice/cri-containerd-" CID ".scope\n",
         1, CID},
        /* v2, systemd, CRI-O, guaranteed QoS (no QoS slice) */
        {"0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" CID ".scope\n", 1, CID},
        /* v2, systemd, CRI-O's conmon: the pod, but no container */
        {"0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-conmon-" CID ".scope\n", 1, ""},
        /* v1, cgroupfs driver, containerd: several controllers, one with the path */
        {"12:memory:/kubepods/besteffort/pod" UID "/" CID "\n11:cpu,cpuacct:/kubepods/"
         "besteffort/pod" UID "/" CID "\n1:name=systemd:/\n",
         1, CID},
        /* v1, systemd, Docker */
        {"9:devices:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
         ".slice/docker-" CID ".scope\n",
         1, CID},
        /* v2, cgroupfs, CRI-O */
        {"0::/kubepods/burstable/pod" UID "/crio-" CID "\n", 1, CID},
        /* host processes */
        {"0::/system.slice/nvidia-persistenced.service\n", 0, ""},
        {"0::/user.slice/user-1000.slice/session-3.scope\n", 0, ""},
        {"", 0, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char uid[64], cid[80];
        int r = metrics_cgroup_pod(cases[i].text, uid, sizeof(uid), cid, sizeof(cid));
        if (r != cases[i].in_pod)
            fail_msg("case %zu: in pod %d, want %d", i, r, cases[i].in_pod);
        if (r == 1)
            assert_string_equal(uid, UID);
        assert_string_equal(cid, cases[i].cid);
    }
}

static void test_openmetrics(void **state)
{
    (void)state;
    struct strbuf out = STRBUF_INIT;
    const char *text = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 3\n"
                       "# HELP g_total a gauge named _total stays\n# TYPE g_total gauge\n"
                       "g_total 1\n";
    assert_int_equal(metrics_openmetrics(text, &out), 0);
    assert_string_equal(strbuf_str(&out),
                        "# HELP a A.\n# TYPE a counter\na_total{x=\"1\"} 3\n"
                        "# HELP g_total a gauge named _total stays\n# TYPE g_total gauge\n"
                        "g_total 1\n# EOF\n");
    strbuf_release(&out);
}

/* dcgm-exporter's counters carry no _total: OpenMetrics would need the samples renamed, so
 * they go out untyped under their own names (what dcgm dashboards query). */
static void test_openmetrics_counter_without_total(void **state)
{
    (void)state;
    struct strbuf out = STRBUF_INIT;
    const char *text = "# HELP DCGM_FI_DEV_PCIE_REPLAY_COUNTER Retries.\n"
                       "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter\n"
                       "DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu=\"0\"} 4\n";
    assert_int_equal(metrics_openmetrics(text, &out), 0);
    assert_string_equal(strbuf_str(&out), "# HELP DCGM_FI_DEV_PCIE_REPLAY_COUNTER Retries.\n"
                                          "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER unknown\n"
                                          "DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu=\"0\"} 4\n# EOF\n");
    strbuf_release(&out);
}

static void test_xid_text(void **state)
{
    (void)state;
    assert_string_equal(metrics_xid_text(79), "GPU has fallen off the bus");
    assert_string_equal(metrics_xid_text(48), "Double Bit ECC Error");
    assert_string_equal(metrics_xid_text(0), "");
    assert_string_equal(metrics_xid_text(100000), "");
}

/* The default routes' next hops from /proc/net/route (issue 29: the node's address on the
 * pod network, where the kubelet's probes come from). */
static void test_route_gateways(void **state)
{
    static const char text[] =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
        "eth0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
        "eth1\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
        "eth1\t00000000\t00000000\t0001\t0\t0\t200\t00000000\t0\t0\t0\n"
        "bad line\n";
    uint32_t gw[4];
    struct in_addr a;

    (void)state;
    assert_int_equal(metrics_route_gateways(text, gw, 4), 2);
    a.s_addr = gw[0];
    assert_string_equal(inet_ntoa(a), "172.17.0.1");
    a.s_addr = gw[1];
    assert_string_equal(inet_ntoa(a), "192.168.2.1");
    assert_int_equal(metrics_route_gateways(text, gw, 1), 1);
    assert_int_equal(metrics_route_gateways("", gw, 4), 0);
    assert_int_equal(metrics_route_gateways(NULL, gw, 4), 0);
    assert_int_equal(metrics_route_gateways("Iface only a header", gw, 4), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cgroup_shapes), cmocka_unit_test(test_openmetrics),
        cmocka_unit_test(test_openmetrics_counter_without_total), cmocka_unit_test(test_xid_text),
        cmocka_unit_test(test_route_gateways)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

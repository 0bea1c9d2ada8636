#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_sim_daemon.py: the real `gpuslice device-plugin` on fake machines, driven by
# kubelet-sim — every resource of a MIG-mixed machine registered with exact capacities and
# 0600 sockets, admission outcomes and Allocate responses (envvar and volume-mounts
# strategies, NVIDIA's error for 2 shared GPUs), pod-resources List, a kubelet restart
# (re-registered, timed), an XID through the fake NVML turning a GPU Unhealthy so a new pod
# stays Pending, SIGTERM removing the sockets, and a unified-memory GPU (GB10) served. Reuses the node plumbing of scripts/demo.
# Usage: test_sim_daemon.py SOURCE_DIR BUILD_DIR
import importlib.machinery
import importlib.util
import os
import shutil
import stat
import sys
import tempfile
import time
import unittest

SRC, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
_loader = importlib.machinery.SourceFileLoader("demo", os.path.join(SRC, "scripts/demo"))
_spec = importlib.util.spec_from_loader("demo", _loader)
demo = importlib.util.module_from_spec(_spec)
_loader.exec_module(demo)

GPU = "nvidia.com/gpu"
MACHINES = os.path.join(SRC, "examples/machines")


class DaemonWithSim(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gs-sim-daemon-")
        self.nodes = []

    def tearDown(self):
        problems = []
        for n in self.nodes:
            problems += n.stop()  # both exit 0: no failed command, no sanitizer report
        if problems:
            for n in self.nodes:
                with open(n.log.name) as f:
                    sys.stderr.write("--- %s log ---\n%s" % (n.name, f.read()[-4000:]))
        shutil.rmtree(self.root, ignore_errors=True)
        self.assertEqual(problems, [])

    def node(self, machine, config_name=None, args=(), env=None):
        n = demo.Node("n%d" % len(self.nodes), os.path.join(MACHINES, machine + ".yaml"),
                      config_name, self.root, BUILD,
                      sim_args=["--pod-resources-socket",
                                os.path.join(self.root, "pr%d.sock" % len(self.nodes))])
        self.nodes.append(n)
        config_dir = os.path.join(SRC, "examples/demo/time-slicing-config") if config_name else None
        n.start_plugin(config_dir, args, env)
        return n

    def capacity(self, n):
        return {r["resource"]: (r["capacity"], r["allocatable"])
                for r in n.sim.must("capacity")["resources"]}

    def admit(self, n, pod, count, resource=GPU):
        return n.sim.must("admit %s %s=%d" % (pod, resource, count))["pod"]

    def test_mixed_mig_registers_every_resource(self):
        n = self.node("a100-80gb-all-balanced", args=["--mig-strategy", "mixed"])
        n.sim.must("wait-resources 3 10000", 15)
        want = {"nvidia.com/mig-1g.10gb": 8, "nvidia.com/mig-2g.20gb": 4,
                "nvidia.com/mig-3g.40gb": 4}
        for res, count in want.items():
            n.wait_allocatable(count, res)
        self.assertEqual(self.capacity(n), {r: (c, c) for r, c in want.items()})
        for res in want:
            sock = os.path.join(n.plugin_dir, "nvidia-%s.sock" % res.split("/")[1])
            self.assertTrue(stat.S_ISSOCK(os.stat(sock).st_mode), sock)
            self.assertEqual(stat.S_IMODE(os.stat(sock).st_mode), 0o600, sock)
        pod = self.admit(n, "m1", 2, "nvidia.com/mig-3g.40gb")
        self.assertEqual(pod["phase"], "Running")
        self.assertEqual(len(pod["devices"]["nvidia.com/mig-3g.40gb"]), 2)

    def test_time_slicing_admission_outcomes(self):
        n = self.node("l20-node", "l20")
        n.wait_allocatable(8)
        self.assertEqual(self.capacity(n), {GPU: (8, 8)})
        pod = self.admit(n, "p1", 1)
        self.assertEqual(pod["phase"], "Running")
        dev = pod["devices"][GPU][0]
        self.assertIn("::", dev)  # a replica ID
        detail = n.sim.must("pod p1")["pod"]
        envs = detail["allocate_responses"][0]["envs"]
        self.assertEqual(envs["NVIDIA_VISIBLE_DEVICES"], dev.split("::")[0])
        big = self.admit(n, "big", 2)
        self.assertEqual(big["phase"], "Failed")
        self.assertEqual(big["reason"], "UnexpectedAdmissionError")
        self.assertEqual(big["message"], demo.EXPECTED_2GPU_ERROR)
        for i in range(2, 9):
            self.assertEqual(self.admit(n, "p%d" % i, 1)["phase"], "Running")
        full = self.admit(n, "p9", 1)
        self.assertEqual((full["phase"], full["reason"]), ("Pending", "Insufficient " + GPU))
        n.sim.must("delete p2")
        pods = n.sim.must("schedule")["pods"]
        self.assertEqual([p["phase"] for p in pods if p["name"] == "p9"], ["Running"])

    def test_unified_memory_gpu_served(self):
        """A GB10 (NVML's memory query NOT_SUPPORTED) is served like any GPU, as NVIDIA's
        plugin serves it: registered, admitted, its UUID in the Allocate response."""
        n = self.node("gb10-spark")
        n.wait_allocatable(1)
        self.assertEqual(self.capacity(n), {GPU: (1, 1)})
        pod = self.admit(n, "u1", 1)
        self.assertEqual(pod["phase"], "Running")
        envs = n.sim.must("pod u1")["pod"]["allocate_responses"][0]["envs"]
        self.assertEqual(envs["NVIDIA_VISIBLE_DEVICES"], pod["devices"][GPU][0])
        self.assertTrue(pod["devices"][GPU][0].startswith("GPU-"))

    def test_volume_mounts_strategy(self):
        n = self.node("l20-node", args=["--device-list-strategy", "volume-mounts"])
        n.wait_allocatable(1)
        pod = self.admit(n, "v1", 1)
        uuid = pod["devices"][GPU][0]
        alloc = n.sim.must("pod v1")["pod"]["allocate_responses"][0]
        self.assertEqual(alloc["envs"]["NVIDIA_VISIBLE_DEVICES"],
                         "/var/run/nvidia-container-devices")
        mount = "/dev/null:/var/run/nvidia-container-devices/%s" % uuid
        self.assertTrue([m for m in alloc["mounts"] if m in (mount, mount + ":ro")],
                        alloc["mounts"])

    def test_restart_reregisters_within_a_second(self):
        n = self.node("h100-nvswitch-8")
        n.wait_allocatable(8)
        self.assertEqual(self.admit(n, "p1", 4)["phase"], "Running")
        ans = n.sim.must("restart 10000", 15)
        self.assertLess(ans["took_ms"], 1000, "kubelet restart -> re-registered")
        n.wait_allocatable(8)
        caps = n.sim.must("capacity")["resources"][0]
        self.assertGreaterEqual(caps["registrations"], 2)
        self.assertEqual(caps["allocated"], 4)  # running pods keep their devices
        print("restart -> re-registered in %d ms" % ans["took_ms"], file=sys.stderr)

    def test_xid_makes_gpu_unhealthy(self):
        events = os.path.join(self.root, "events")
        open(events, "w").close()
        n = self.node("h100-nvswitch-8", env={"FAKE_NVML_EVENTS": events})
        n.wait_allocatable(8)
        # The daemon's NVML event set only sees lines appended after it was created, and
        # registration does not wait for the health thread: append until the XID is seen.
        deadline = time.monotonic() + 10
        n.sim_may_fail = True  # the waits that time out make kubelet-sim exit 1
        while True:
            t0 = time.monotonic()
            with open(events, "a") as f:
                f.write("xid 0 79\n")  # GPU has fallen off the bus: critical
            if n.sim.cmd("wait %s =7 300" % GPU)["ok"]:
                break
            self.assertLess(time.monotonic(), deadline, "XID never turned GPU 0 Unhealthy")
        print("XID -> Unhealthy seen by kubelet-sim in %.1f ms" % ((time.monotonic() - t0) * 1e3),
              file=sys.stderr)
        self.assertEqual(self.capacity(n), {GPU: (8, 7)})
        unhealthy = [d for d in n.sim.must("devices " + GPU)["devices"]
                     if d["health"] == "Unhealthy"]
        self.assertEqual(len(unhealthy), 1)
        pod = self.admit(n, "all8", 8)
        self.assertEqual((pod["phase"], pod["reason"]), ("Pending", "Insufficient " + GPU))
        self.assertEqual(self.admit(n, "seven", 7)["phase"], "Running")

    def test_sigterm_removes_sockets(self):
        n = self.node("t4-node")
        n.wait_allocatable(1)
        sock = os.path.join(n.plugin_dir, "nvidia-gpu.sock")
        self.assertTrue(os.path.exists(sock))
        n.stop_plugin()
        self.assertFalse(os.path.exists(sock))
        n.sim.must("wait %s =0 10000" % GPU, 15)  # stream lost: devices unhealthy
        self.assertEqual(self.capacity(n), {GPU: (1, 0)})


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)

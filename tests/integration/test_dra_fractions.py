#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Shares of a GPU by memory (issue 30, KEP-5075 consumable capacity) end to end: claims whose
# results carry a shareID and consumedCapacity, prepared and unprepared through kubelet-sim
# against `gpuslice dra-plugin` on the fake NVML, fake_apiserver.py and fake-mps. One MPS
# control daemon per GPU (started with the first share, its default limit the largest share,
# stopped after the last), each share's limit in its CDI spec, the shareID in the answer;
# every order of prepare and unprepare; concurrent shares; a plugin restart with shares
# prepared; a share whose limit the daemon refuses fails closed; whole-GPU claims unchanged.
# Env: GS_SOURCE_DIR, GS_BINARY_DIR (tests/integration/dra_fractions.cmake).
import itertools
import json
import os
import sys
import socket
import subprocess
import threading
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dra_harness import DRIVER, NODE, DraNode, wait_for  # noqa: E402

SRC = os.environ.get("GS_SOURCE_DIR", "")
BUILD = os.environ.get("GS_BINARY_DIR", "")
SIM = os.path.join(BUILD, "tools/kubelet-sim/kubelet-sim")
GIB = 1024


@unittest.skipUnless(os.path.exists(SIM), "build the stand-ins first")
class DraFractions(DraNode, unittest.TestCase):
    machine = "h100-nvswitch-8"

    def setUp(self):
        self.refuse = os.path.join("/tmp", "gs-fractions-refuse-%d" % os.getpid())
        self.node_up(SRC, BUILD, start=False)
        self.start_plugin()
        self.slice_devices(8)

    def tearDown(self):
        if os.path.exists(self.refuse):
            os.unlink(self.refuse)
        self.assertEqual(self.node_down(), [])

    def env(self):
        env = DraNode.env(self)
        env["FAKE_MPS_REFUSE_LIMITS_FILE"] = self.refuse
        env["GPUSLICE_HOST_PROC"] = self.proc_root
        if getattr(self, "machine_file", None):
            env["FAKE_NVML_MACHINE"] = self.machine_file
        return env

    # ---- helpers --------------------------------------------------------------------------

    def share(self, name, device, gib, compute=None, share_id=None, pod_uid=None):
        """An allocated claim holding a share of device: shareID and consumedCapacity as the
        scheduler's allocator records them; its uid."""
        consumed = {"memory": "%dGi" % gib}
        if compute is not None:
            consumed["computePercent"] = str(compute)
        body = {"metadata": {"name": name, "namespace": "team"},
                "spec": {"devices": {"requests": [
                    {"name": "r0", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                               "capacity": {"requests": consumed}}}]}},
                "status": {"allocation": {"devices": {"results": [
                    {"request": "r0", "driver": DRIVER, "pool": NODE, "device": device,
                     "shareID": share_id or "share-" + name, "consumedCapacity": consumed}]}},
                    "reservedFor": [{"resource": "pods", "name": name + "-pod",
                                     "uid": pod_uid or "pod-uid-" + name}]}}
        code, made = self.http(
            "POST", "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims", body)
        self.assertEqual(code, 201, made)
        return made["metadata"]["uid"]

    def daemon(self, device):
        return os.path.join(self.plugins, DRIVER, "mps", "share-" + self.uuid_of(device))

    def uuid_of(self, name):
        dev = [d for d in self.slices()[0]["spec"]["devices"] if d["name"] == name][0]
        return dev["attributes"]["uuid"]["string"]

    def mps_state(self, device):
        try:
            with open(os.path.join(self.daemon(device), "log", "fake-mps.state")) as f:
                return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        except FileNotFoundError:
            return {}

    def limit_is(self, device, value):
        return wait_for(lambda: self.mps_state(device).get("pinned_mem_limit.0") == value,
                        "the daemon of %s to hold %s" % (device, value))

    def daemon_gone(self, device):
        pipe = os.path.join(self.daemon(device), "pipe")
        wait_for(lambda: not os.path.exists(pipe), "the daemon of %s to stop" % device)

    def spec_text(self, uid):
        with open(self.spec_path(uid)) as f:
            return json.dumps(json.load(f))

    def ok(self, name, uid):
        out = self.prepare(name, uid)
        self.assertIsNone(out["claims"][0]["error"], out)
        return out["claims"][0]

    def unprep(self, name, uid):
        out = self.prepare(name, uid, verb="dra-unprepare")
        self.assertIsNone(out["claims"][0]["error"], out)

    def plan_sold(self):
        """`gpuslice plan --dra --checkpoint` on this node with the fractions example: its
        summary on stderr (what each shareable GPU has sold and has left)."""
        p = subprocess.run(
            [self.gpuslice, "plan", "--dra", "--nvml-library", self.nvml, "--config-file",
             os.path.join(os.environ.get("GS_SOURCE_DIR", "."),
                          "examples/dra/fractions/config.yaml"),
             "--checkpoint", os.path.join(self.plugins, DRIVER, "checkpoint.json")],
            env=self.env(), capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stderr

    def gpu_mib(self, device):
        return int(self.plan_sold().split(device, 1)[1].split("Mi memory")[0].strip())

    # ---- tests ----------------------------------------------------------------------------

    def test_two_shares_one_daemon_limits_and_share_id(self):
        a = self.share("a", "gpu-0", 10)
        b = self.share("b", "gpu-0", 20, compute=25)
        got = self.ok("a", a)
        self.assertEqual(got["devices"][0]["share_id"], "share-a")
        self.limit_is("gpu-0", "%dM" % (10 * GIB))
        self.assertIn("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%dM" % (10 * GIB), self.spec_text(a))
        self.assertIn("CUDA_MPS_PIPE_DIRECTORY=" + os.path.join(self.daemon("gpu-0"), "pipe"),
                      self.spec_text(a))
        pid = self.mps_state("gpu-0")["pid"]
        self.assertEqual(self.ok("b", b)["devices"][0]["share_id"], "share-b")
        # the default limit follows the largest share, in place: the same daemon
        self.limit_is("gpu-0", "%dM" % (20 * GIB))
        self.assertEqual(self.mps_state("gpu-0")["pid"], pid)
        self.assertEqual(self.mps_state("gpu-0")["visible"], self.uuid_of("gpu-0"))
        spec_b = self.spec_text(b)
        self.assertIn("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%dM" % (20 * GIB), spec_b)
        self.assertIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25", spec_b)
        # what the node can still sell, from the running plugin's checkpoint
        sold = self.plan_sold()
        self.assertIn("sold: %dMi in 2 shares (computePercent 25 named); left: %dMi" %
                      (30 * GIB, self.gpu_mib("gpu-0") - 30 * GIB), sold)
        self.unprep("b", b)
        self.limit_is("gpu-0", "%dM" % (10 * GIB))  # back to what the remaining share needs
        self.unprep("a", a)
        self.daemon_gone("gpu-0")
        self.assertFalse(os.path.exists(self.spec_path(a)))

    def test_every_order_of_prepare_and_unprepare(self):
        names = ("x", "y", "z")
        uids = {n: self.share(n, "gpu-1", 10 + 5 * i) for i, n in enumerate(names)}
        for order in itertools.permutations(names):
            for n in names:
                self.ok(n, uids[n])
            self.limit_is("gpu-1", "%dM" % (20 * GIB))
            for k, n in enumerate(order):
                self.unprep(n, uids[n])
                left = [m for m in names if m not in order[:k + 1]]
                if left:
                    want = max(10 + 5 * names.index(m) for m in left)
                    self.limit_is("gpu-1", "%dM" % (want * GIB))
            self.daemon_gone("gpu-1")

    def test_concurrent_shares_of_one_gpu(self):
        uids = {"c%d" % i: self.share("c%d" % i, "gpu-2", 10) for i in range(7)}
        line = "dra-prepare %s %s" % (DRIVER, " ".join(
            "team/%s:%s" % (n, u) for n, u in uids.items()))
        errors = []

        def call(text):
            out = self.sim.cmd(text)
            errors.extend(c["error"] for c in out["claims"] if c["error"])
        t = threading.Thread(target=call, args=(line,))
        t.start()
        t.join(60)
        self.assertEqual(errors, [])
        self.limit_is("gpu-2", "%dM" % (10 * GIB))
        for n, u in uids.items():
            self.assertTrue(os.path.exists(self.spec_path(u)), n)
        out = self.sim.cmd("dra-unprepare %s %s" % (DRIVER, " ".join(
            "team/%s:%s" % (n, u) for n, u in uids.items())))
        self.assertEqual([c["error"] for c in out["claims"] if c["error"]], [])
        self.daemon_gone("gpu-2")

    def test_plugin_restart_finds_its_shares(self):
        a = self.share("ra", "gpu-3", 12)
        b = self.share("rb", "gpu-3", 8)
        self.ok("ra", a)
        self.ok("rb", b)
        self.limit_is("gpu-3", "%dM" % (12 * GIB))
        self.assertEqual(self.stop_plugin(), [])
        self.daemon_gone("gpu-3")  # the plugin's child: it went with the plugin
        self.start_plugin()
        # the GPU's daemon is back with the shares' limit, and a repeat answers the same
        self.limit_is("gpu-3", "%dM" % (12 * GIB))
        self.assertEqual(self.ok("rb", b)["devices"][0]["share_id"], "share-rb")
        self.unprep("ra", a)
        self.limit_is("gpu-3", "%dM" % (8 * GIB))
        self.unprep("rb", b)
        self.daemon_gone("gpu-3")

    def test_share_whose_limit_cannot_be_set_is_refused(self):
        a = self.share("la", "gpu-4", 10)
        b = self.share("lb", "gpu-4", 30)
        self.ok("la", a)
        self.limit_is("gpu-4", "%dM" % (10 * GIB))
        open(self.refuse, "w").close()
        err = self.prepare("lb", b)["claims"][0]["error"]
        self.assertIsNotNone(err)
        self.assertIn("never prepared without its limit in force", err)
        self.assertIn("Invalid memory limit", err)
        self.assertFalse(os.path.exists(self.spec_path(b)))
        self.limit_is("gpu-4", "%dM" % (10 * GIB))  # the first share is left as it was
        os.unlink(self.refuse)
        self.ok("lb", b)  # the kubelet's retry, once the limit holds
        self.limit_is("gpu-4", "%dM" % (30 * GIB))
        self.unprep("la", a)
        self.unprep("lb", b)
        self.daemon_gone("gpu-4")

    def test_first_share_refused_leaves_no_daemon(self):
        open(self.refuse, "w").close()
        a = self.share("fa", "gpu-6", 10)
        err = self.prepare("fa", a)["claims"][0]["error"]
        self.assertIn("does not serve", err)
        self.assertFalse(os.path.exists(self.spec_path(a)))
        self.daemon_gone("gpu-6")

    def test_whole_gpu_claims_unchanged_and_refused_on_shared_gpu(self):
        whole = self.claim("whole", ["gpu-5"])
        got = self.ok("whole", whole)
        self.assertIsNone(got["devices"][0].get("share_id"))
        self.assertNotIn("CUDA_MPS", self.spec_text(whole))
        self.assertFalse(os.path.exists(self.daemon("gpu-5")))
        a = self.share("sa", "gpu-7", 10)
        self.ok("sa", a)
        train = self.claim("train", ["gpu-7"])
        err = self.prepare("train", train)["claims"][0]["error"]
        self.assertIn("held in shares by claim " + a, err)
        self.unprep("sa", a)
        self.ok("train", train)

    def test_share_without_consumed_memory_fails_closed(self):
        body = {"metadata": {"name": "nomem", "namespace": "team"},
                "status": {"allocation": {"devices": {"results": [
                    {"request": "r0", "driver": DRIVER, "pool": NODE, "device": "gpu-0",
                     "shareID": "s-1"}]}}}}
        code, made = self.http(
            "POST", "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims", body)
        self.assertEqual(code, 201, made)
        err = self.prepare("nomem", made["metadata"]["uid"])["claims"][0]["error"]
        self.assertIn("never prepared without its memory limit", err)
        self.assertFalse(os.path.exists(self.daemon("gpu-0")))

    def test_metrics_per_share_and_lost_gpu_event(self):
        """/metrics: each share's consumed memory and what its pod's processes use on the GPU
        (found through their cgroup); an XID on the GPU: a PreparedDeviceLost Event on the
        share's pod naming the share."""
        pod_uid = "0b6f6e4c-3b1e-4a52-9a55-5d8e2c1f7a10"
        self.assertEqual(self.stop_plugin(), [])
        self.machine_file = os.path.join(self.root, "machine.yaml")
        with open(self.machine_file, "w") as f:
            f.write("gpus:\n  - model: NVIDIA H100 80GB HBM3\n    count: 1\n"
                    "    processes: [{pid: 4001, used_mib: 3000}, {pid: 4002, used_mib: 500}]\n"
                    "  - model: NVIDIA H100 80GB HBM3\n    count: 7\n"
                    "topology:\n  nvlink: all\n")
        for pid, cg in ((4001, "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-"
                               "besteffort-pod%s.slice/cri-containerd-%s.scope\n" %
                         (pod_uid.replace("-", "_"), "ab" * 32)),
                        (4002, "0::/system.slice/other.scope\n")):
            os.makedirs(os.path.join(self.proc_root, str(pid)), exist_ok=True)
            with open(os.path.join(self.proc_root, str(pid), "cgroup"), "w") as f:
                f.write(cg)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        self.start_plugin("--metrics-address", "127.0.0.1:%d" % port)
        self.slice_devices(8)
        uid = self.share("mx", "gpu-0", 10, pod_uid=pod_uid)
        self.ok("mx", uid)

        def metrics():
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                return r.read().decode()
        labels = ('namespace="team",claim="mx",claim_uid="%s",pod="mx-pod",device="gpu-0",'
                  'UUID="%s",share="share-mx"' % (uid, self.uuid_of("gpu-0")))
        text = wait_for(lambda: "gpuslice_dra_share_memory_bytes" in metrics() and metrics(),
                        "the share's series")
        self.assertIn("gpuslice_dra_share_memory_bytes{%s} %d" % (labels, 10 << 30), text)
        self.assertIn("gpuslice_dra_share_memory_used_bytes{%s} %d" % (labels, 3000 << 20),
                      text)
        # read live at each scrape (dra-plugin does not re-read the inventory): a process
        # the pod starts later counts
        os.makedirs(os.path.join(self.proc_root, "4003"), exist_ok=True)
        with open(os.path.join(self.proc_root, "4003", "cgroup"), "w") as f:
            f.write("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s"
                    ".slice/cri-containerd-%s.scope\n" % (pod_uid.replace("-", "_"), "cd" * 32))
        with open(self.events, "a") as f:
            f.write("proc 0 4003 1500\n")
        want = "gpuslice_dra_share_memory_used_bytes{%s} %d" % (labels, 4500 << 20)
        wait_for(lambda: want in metrics(), "the new process counted")
        self.xid(0)
        ev = wait_for(lambda: [e for e in self.api_events() if e.get("reason") ==
                               "PreparedDeviceLost"], "the PreparedDeviceLost Event")
        self.assertIn("share share-mx", ev[0]["message"])
        self.assertEqual(ev[0]["involvedObject"]["name"], "mx-pod")

    def api_events(self):
        with self.api.state.cond:
            return list(self.api.state.events)


if __name__ == "__main__":
    unittest.main()

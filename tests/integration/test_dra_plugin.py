#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `gpuslice dra-plugin` end to end (issue 22) on the fake NVML, with kubelet-sim as the
# kubelet's DRA side and fake_apiserver.py as the API server: registration in both gRPC
# versions; the ResourceSlice published with NVIDIA's names, then following a MIG layout
# change and an XID (and back after recovery); prepare → the claim's CDI spec on disk and its
# IDs in the answer; a repeat; a restart between prepare and unprepare; TimeSlicing (the
# stand-in nvidia-smi's record) and MPS (fake-mps's daemon) applied and undone; refusals (a
# device already taken, an unknown device, a UID mismatch, a bad opaque config).
# Env: GS_SOURCE_DIR, GS_BINARY_DIR (tests/integration/dra_plugin.cmake).
import json
import os
import signal
import subprocess
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dra_harness import DRIVER, NODE, WAIT_S, DraNode, wait_for  # noqa: E402

SRC = os.environ.get("GS_SOURCE_DIR", "")
BUILD = os.environ.get("GS_BINARY_DIR", "")
SMI = os.path.join(BUILD, "tools/fake-nvidia-smi/nvidia-smi")
GPUSLICE = os.path.join(BUILD, "gpuslice")
NVML = os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1")
SIM = os.path.join(BUILD, "tools/kubelet-sim/kubelet-sim")


@unittest.skipUnless(os.path.exists(SMI) and os.path.exists(SIM), "build the stand-ins first")
class DraPlugin(DraNode, unittest.TestCase):
    machine = "h100-nvswitch-8"

    def setUp(self):
        self.node_up(SRC, BUILD)

    def tearDown(self):
        self.assertEqual(self.node_down(), [])

    def start_plugin(self, *extra):
        got = DraNode.start_plugin(self, *extra)
        self.assertEqual(got["driver"], DRIVER)
        return got

    # ---- tests --------------------------------------------------------------------------

    def test_slice_has_nvidias_names_and_owner(self):
        names = self.slice_devices(8)
        self.assertEqual(names, ["gpu-%d" % i for i in range(8)])
        s = self.slices()[0]
        self.assertEqual(s["spec"]["nodeName"], NODE)
        self.assertEqual(s["spec"]["pool"]["name"], NODE)
        self.assertEqual(s["metadata"]["ownerReferences"][0]["kind"], "Node")
        attrs = s["spec"]["devices"][0]["attributes"]
        self.assertEqual(attrs["type"], {"string": "gpu"})
        self.assertEqual(attrs["productName"], {"string": "NVIDIA H100 80GB HBM3"})
        self.assertIn("memory", s["spec"]["devices"][0]["capacity"])

    def test_prepare_repeat_restart_unprepare(self):
        self.slice_devices(8)
        uid = self.claim("one", ["gpu-1"])
        out = self.prepare("one", uid)
        self.assertTrue(out.get("ok", True), out)
        dev = out["claims"][0]["devices"][0]
        self.assertEqual(dev["device"], "gpu-1")
        self.assertEqual(dev["cdi_device_ids"], ["k8s.gpu.nvidia.com/claim=%s-gpu-1" % uid])
        with open(self.spec_path(uid)) as f:
            spec = json.load(f)
        self.assertEqual(spec["kind"], "k8s.gpu.nvidia.com/claim")
        self.assertEqual(spec["devices"][0]["name"], "%s-gpu-1" % uid)
        nodes = [n["path"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]]
        self.assertIn("/dev/nvidia1", nodes)
        # the kubelet retries: the same answer, nothing prepared twice
        again = self.prepare("one", uid)
        self.assertEqual(again["claims"][0]["devices"], out["claims"][0]["devices"])
        # a restart between prepare and unprepare: the checkpoint keeps the claim
        self.assertEqual(self.stop_plugin(), [])
        self.start_plugin()
        self.assertEqual(self.prepare("one", uid)["claims"][0]["devices"],
                         out["claims"][0]["devices"])
        un = self.prepare("one", uid, verb="dra-unprepare")
        self.assertIsNone(un["claims"][0]["error"], un)
        self.assertFalse(os.path.exists(self.spec_path(uid)))
        # unpreparing what is not prepared succeeds (the kubelet retries after restarts)
        un = self.prepare("one", uid, verb="dra-unprepare")
        self.assertIsNone(un["claims"][0]["error"], un)

    def test_reboot_forgets_prepared_claims(self):
        """NVIDIA's v0.4.0 records the node's boot in its checkpoint and forgets what was
        prepared in another boot (nothing of it is in place after a reboot); a plain restart
        keeps it (test_prepare_repeat_restart_unprepare)."""
        boot = os.path.join(self.proc_root, "sys", "kernel", "random", "boot_id")
        os.makedirs(os.path.dirname(boot), exist_ok=True)
        with open(boot, "w") as f:
            f.write("11111111-1111-1111-1111-111111111111\n")
        self.assertEqual(self.stop_plugin(), [])  # started before the boot had an id
        self.start_plugin()
        self.slice_devices(8)
        uid = self.claim("rb", ["gpu-4"])
        self.assertIsNone(self.prepare("rb", uid)["claims"][0]["error"])
        self.assertEqual(self.stop_plugin(), [])
        with open(os.path.join(self.plugins, DRIVER, "checkpoint.json")) as f:
            self.assertIn('"nodeBootID":"11111111-1111-1111-1111-111111111111"', f.read())
        with open(boot, "w") as f:
            f.write("22222222-2222-2222-2222-222222222222\n")
        self.start_plugin()
        wait_for(lambda: "1 prepared claim is forgotten" in self.log_text(), "the reboot seen")
        # the GPU is free again: another claim gets it
        other = self.claim("rb2", ["gpu-4"])
        self.assertIsNone(self.prepare("rb2", other)["claims"][0]["error"])

    def test_refusals(self):
        self.slice_devices(8)
        a = self.claim("a", ["gpu-2"])
        self.assertIsNone(self.prepare("a", a)["claims"][0]["error"])
        b = self.claim("b", ["gpu-2"])
        err = self.prepare("b", b)["claims"][0]["error"]
        self.assertIn("already allocated to different claim " + a, err)
        c = self.claim("c", ["gpu-9"])
        self.assertIn("requested device is not allocatable: gpu-9",
                      self.prepare("c", c)["claims"][0]["error"])
        bad = self.claim("d", ["gpu-3"], {"apiVersion": "resource.nvidia.com/v1beta1",
                                          "kind": "GpuConfig", "sharing": {
                                              "strategy": "TimeSlicing", "bogus": 1}})
        self.assertIn("bogus", self.prepare("d", bad)["claims"][0]["error"])
        # a UID the API does not have: the whole call fails
        out = self.prepare("a", "00000000-0000-0000-0000-000000000000")
        self.assertFalse(out["ok"], out)
        self.assertIn("FailedPrecondition", out["error"])
        out = self.prepare("nope", a)
        self.assertFalse(out["ok"], out)
        self.assertIn("NotFound", out["error"])

    def test_time_slicing_applied_and_undone(self):
        self.slice_devices(8)
        cfg = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
               "sharing": {"strategy": "TimeSlicing",
                           "timeSlicingConfig": {"interval": "Long"}}}
        uid = self.claim("ts", ["gpu-4"], cfg)
        out = self.prepare("ts", uid)
        self.assertIsNone(out["claims"][0]["error"], out)
        gpu4 = [d for d in self.slices()[0]["spec"]["devices"] if d["name"] == "gpu-4"][0]
        uuid = gpu4["attributes"]["uuid"]["string"]
        self.assertIn("compute-policy -i %s --set-timeslice 3" % uuid, self.smi_calls())
        self.assertIn("-i %s -c DEFAULT" % uuid, self.smi_calls())
        self.assertIn("%s timeslice=3" % uuid, self.smi_state_now())
        self.prepare("ts", uid, verb="dra-unprepare")
        self.assertEqual(self.smi_calls()[-1], "compute-policy -i %s --set-timeslice 0" % uuid)
        self.assertIn("%s timeslice=0" % uuid, self.smi_state_now())

    def smi_calls(self):
        with open(self.smi_log) as f:
            return f.read().splitlines()

    def smi_state_now(self):
        with open(self.smi_state) as f:
            return f.read()

    def test_mps_daemon_for_the_claim(self):
        self.slice_devices(8)
        cfg = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
               "sharing": {"strategy": "MPS", "mpsConfig": {
                   "defaultActiveThreadPercentage": 50,
                   "defaultPinnedDeviceMemoryLimit": "10Gi"}}}
        uid = self.claim("mps", ["gpu-5"], cfg)
        out = self.prepare("mps", uid)
        self.assertIsNone(out["claims"][0]["error"], out)
        daemon = os.path.join(self.plugins, DRIVER, "mps", "claim-%s-0" % uid)
        wait_for(lambda: os.path.exists(os.path.join(daemon, "pipe")), "the MPS pipe folder")
        # the claim's limits, as the control daemon got them (read back from fake-mps)
        st = wait_for(lambda: self.mps_state(daemon).get("pinned_mem_limit.0") and
                      self.mps_state(daemon), "the MPS daemon's limits")
        self.assertEqual(st["active_thread_percentage"], "50")
        # its CUDA_VISIBLE_DEVICES names the claim's GPU once
        self.assertEqual(st["visible"], self.uuid_of("gpu-5"))
        self.assertEqual(st["pinned_mem_limit.0"], "10240M")
        with open(self.spec_path(uid)) as f:
            spec = json.dumps(json.load(f))
        self.assertIn("CUDA_MPS_PIPE_DIRECTORY=" + os.path.join(daemon, "pipe"), spec)
        self.prepare("mps", uid, verb="dra-unprepare")
        wait_for(lambda: not os.path.exists(os.path.join(daemon, ".started")) or
                 not self.mps_running(daemon), "the MPS daemon to stop")

    def uuid_of(self, name):
        dev = [d for d in self.slices()[0]["spec"]["devices"] if d["name"] == name][0]
        return dev["attributes"]["uuid"]["string"]

    def test_mps_claim_fails_closed_until_its_daemon_serves(self):
        """A control daemon that cannot start: the prepare fails saying why, nothing stays
        running for it; once it can, the kubelet's retry prepares the claim."""
        self.assertEqual(self.stop_plugin(), [])
        self.fake_mps, working = "/bin/false", self.fake_mps
        self.start_plugin()
        self.slice_devices(8)
        cfg = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
               "sharing": {"strategy": "MPS"}}
        uid = self.claim("mpsfail", ["gpu-7"], cfg)
        err = self.prepare("mpsfail", uid)["claims"][0]["error"]
        self.assertIsNotNone(err)
        self.assertIn("claim-%s-0" % uid, err)
        self.assertIn("does not serve", err)
        self.assertFalse(os.path.exists(self.spec_path(uid)))
        self.assertEqual(self.stop_plugin(), [])
        self.fake_mps = working
        self.start_plugin()
        self.assertIsNone(self.prepare("mpsfail", uid)["claims"][0]["error"])
        self.assertTrue(os.path.exists(self.spec_path(uid)))

    def test_admin_access_claim_leaves_sharing_alone(self):
        """An admin-access claim with a sharing config is refused before nvidia-smi runs: the
        sharing of the GPU belongs to the claim that allocated it."""
        self.slice_devices(8)
        ts = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
              "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}
        owner = self.claim("owner", ["gpu-3"], ts)
        self.assertIsNone(self.prepare("owner", owner)["claims"][0]["error"])
        calls = self.smi_calls()
        ts["sharing"]["timeSlicingConfig"]["interval"] = "Short"
        admin = self.claim("watcher", ["gpu-3"], ts, admin=True)
        out = self.prepare("watcher", admin)
        self.assertTrue(out.get("ok", True), out)
        err = out["claims"][0]["error"]
        self.assertIn("ResourceClaim team/watcher", err)
        self.assertIn("adminAccess", err)
        self.assertIn("remove the sharing config", err)
        self.assertEqual(self.smi_calls(), calls)  # the GPU was not touched
        un = self.prepare("watcher", admin, verb="dra-unprepare")
        self.assertIsNone(un["claims"][0]["error"], un)
        self.assertEqual(self.smi_calls(), calls)
        # without a sharing config the admin claim gets the device, and still no nvidia-smi
        plain = self.claim("watcher2", ["gpu-3"], admin=True)
        self.assertIsNone(self.prepare("watcher2", plain)["claims"][0]["error"])
        self.assertEqual(self.smi_calls(), calls)

    def test_config_the_parser_refuses_is_the_claims_error(self):
        """Valid JSON the parser refuses (NUL in a string, an integer past int64) fails that
        claim alone, never the whole call as UNAVAILABLE."""
        self.slice_devices(8)
        good = self.claim("fine", ["gpu-0"])
        for name, cfg in (
                ("nul", {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                         "sharing": {"strategy": "TimeSlicing",
                                     "timeSlicingConfig": {"interval": "Long\u0000"}}}),
                ("big", {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                         "sharing": {"strategy": "MPS", "mpsConfig": {
                             "defaultActiveThreadPercentage": 2 ** 63}}})):
            uid = self.claim(name, ["gpu-1"], cfg)
            out = self.sim.cmd("dra-prepare %s team/%s:%s team/fine:%s" %
                               (DRIVER, name, uid, good))
            self.assertTrue(out.get("ok", True), out)
            self.assertIn("ResourceClaim team/%s" % name, out["claims"][0]["error"])
            self.assertIsNone(out["claims"][1]["error"], out)

    def test_slice_watch_reconnects_after_a_drop(self):
        self.slice_devices(8)
        wait_for(lambda: self.stats()["watches_open"] >= 1, "the slice watch")
        self.http("POST", "/_test/drop")
        wait_for(lambda: self.stats()["watches_open"] >= 1, "the slice watch again")
        name = self.slices()[0]["metadata"]["name"]
        code, _ = self.http("DELETE", "/apis/resource.k8s.io/v1/resourceslices/" + name)
        self.assertEqual(code, 200)
        self.assertEqual(self.slice_devices(8), ["gpu-%d" % i for i in range(8)])

    def stats(self):
        code, body = self.http("GET", "/_test/stats")
        self.assertEqual(code, 200)
        return body

    def test_empty_checkpoint_is_logged(self):
        self.assertEqual(self.stop_plugin(), [])
        path = os.path.join(self.plugins, DRIVER, "checkpoint.json")
        open(path, "w").close()
        self.start_plugin()
        self.assertIn("is empty, taking it as no claims", self.log_text())

    def mps_state(self, daemon):
        try:
            with open(os.path.join(daemon, "log", "fake-mps.state")) as f:
                return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        except FileNotFoundError:
            return {}

    def mps_running(self, daemon):
        try:
            with open(os.path.join(daemon, "log", "fake-mps.state")) as f:
                return "running" in f.read()
        except FileNotFoundError:
            return False

    def test_slice_deleted_by_hand_comes_back(self):
        self.slice_devices(8)
        name = self.slices()[0]["metadata"]["name"]
        code, _ = self.http("DELETE", "/apis/resource.k8s.io/v1/resourceslices/" + name)
        self.assertEqual(code, 200)
        self.assertEqual(self.slice_devices(8), ["gpu-%d" % i for i in range(8)])

    def test_xid_then_recovery_puts_the_device_back(self):
        self.assertEqual(self.stop_plugin(), [])
        self.start_plugin("--health-recovery-after", "1s")
        self.slice_devices(8)
        wait_for(lambda: "health: watching XID events" in self.log_text(), "the health thread")
        self.xid(2, 74)  # critical, recovers with time (not a reset XID)
        self.assertNotIn("gpu-2", self.slice_devices(7))
        self.assertIn("gpu-2", self.slice_devices(8))

    def test_metrics_and_readyz(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        self.assertEqual(self.stop_plugin(), [])
        self.start_plugin("--metrics-address", "127.0.0.1:%d" % port)
        base = "http://127.0.0.1:%d" % port

        def get(path):
            with urllib.request.urlopen(base + path, timeout=5) as r:
                return r.status, r.read().decode()
        self.assertEqual(wait_for(lambda: get("/readyz")[0] == 200 and get("/readyz"),
                                  "/readyz")[0], 200)
        self.slice_devices(8)
        self.assertIn('gpuslice_dra_devices{health="healthy"} 8', get("/metrics")[1])
        uid = self.claim("m", ["gpu-0"])
        self.assertIsNone(self.prepare("m", uid)["claims"][0]["error"])
        self.assertIn("gpuslice_dra_prepared_claims 1", get("/metrics")[1])

    def test_device_plugin_refuses_beside_a_live_dra_plugin(self):
        env = dict(self.env(), KUBELET_REGISTRAR_DIRECTORY_PATH=self.registry)
        p = subprocess.run(
            [GPUSLICE, "device-plugin", "--nvml-library", NVML, "--kubelet-socket", "",
             "--device-plugin-dir", os.path.join(self.root, "dp-other")],
            env=env, capture_output=True, text=True, timeout=WAIT_S)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("one-API rule", p.stderr)
        self.assertIn(os.path.join(self.registry, "gpu.nvidia.com-reg.sock"), p.stderr)

    def test_grpc_health_service_for_nvidias_probes(self):
        """NVIDIA's chart probes --healthcheck-port with the gRPC health protocol (TCP)."""
        import socket
        import grpc
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        self.assertEqual(self.stop_plugin(), [])
        self.start_plugin("--healthcheck-port", str(port))
        with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
            check = ch.unary_unary("/grpc.health.v1.Health/Check",
                                   request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
            # HealthCheckResponse{status: SERVING}: the kubelet accepted the registration
            self.assertEqual(wait_for(lambda: check(b"", timeout=5) == b"\x08\x01",
                                      "SERVING"), True)

    def test_one_api_per_node(self):
        """A live device plugin for nvidia.com resources on the node: dra-plugin refuses."""
        import socket
        self.assertEqual(self.stop_plugin(), [])
        dp = os.path.join(self.root, "device-plugins", "nvidia-gpu.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(srv.close)
        srv.bind(dp)
        srv.listen(1)
        p = subprocess.run(
            [GPUSLICE, "dra-plugin", "--kube-api-server", self.url, "--nvml-library", NVML,
             "--kubelet-plugins-directory-path", self.plugins,
             "--kubelet-registrar-directory-path", self.registry,
             "--device-plugin-dir", os.path.join(self.root, "device-plugins")],
            env=self.env(), capture_output=True, text=True, timeout=WAIT_S)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("one-API rule", p.stderr)
        self.assertIn(dp, p.stderr)

    def test_xid_removes_the_device_and_tells_the_pod(self):
        self.slice_devices(8)
        uid = self.claim("x", ["gpu-6"])
        self.assertIsNone(self.prepare("x", uid)["claims"][0]["error"])
        wait_for(lambda: "health: watching XID events" in self.log_text(),
                 "the health thread")
        # issue 29: the Event was sent once and lost when that POST failed; now retried
        code, _ = self.http("POST", "/_test/fail-events?count=2&code=503")
        self.assertEqual(code, 200)
        self.xid(6, 79)
        names = self.slice_devices(7)
        self.assertNotIn("gpu-6", names)

        def pod_event():
            code, body = self.http("GET", "/_test/events")
            items = body.get("items", []) if code == 200 else []
            return [e for e in items if e.get("reason") == "PreparedDeviceLost"]
        ev = wait_for(pod_event, "an Event on the claim's pod")[0]
        self.assertEqual(ev["involvedObject"]["kind"], "Pod")
        self.assertEqual(ev["involvedObject"]["name"], "x-pod")
        wait_for(lambda: "posting Event PreparedDeviceLost" in self.log_text() and
                 "retrying" in self.log_text(), "the failed tries logged")


class DraPluginV1beta1(DraPlugin):
    """A kubelet that speaks only v1beta1 (Kubernetes 1.32-1.33): the same claims."""
    sim_args = ("--dra-v1beta1",)

    def test_registered_in_v1beta1(self):
        self.assertEqual(self.registered()["api"], "v1beta1")
        uid = self.claim("b1", ["gpu-0"])
        out = self.prepare("b1", uid)
        self.assertEqual(out["api"], "v1beta1")
        self.assertEqual(out["claims"][0]["devices"][0]["cdi_device_ids"],
                         ["k8s.gpu.nvidia.com/claim=%s-gpu-0" % uid])

    # one run of the v1 suite is enough for the rest
    test_refusals = None
    test_time_slicing_applied_and_undone = None
    test_mps_daemon_for_the_claim = None
    test_xid_removes_the_device_and_tells_the_pod = None
    test_xid_then_recovery_puts_the_device_back = None
    test_one_api_per_node = None
    test_grpc_health_service_for_nvidias_probes = None
    test_device_plugin_refuses_beside_a_live_dra_plugin = None
    test_metrics_and_readyz = None
    test_slice_deleted_by_hand_comes_back = None
    test_mps_claim_fails_closed_until_its_daemon_serves = None
    test_admin_access_claim_leaves_sharing_alone = None
    test_config_the_parser_refuses_is_the_claims_error = None
    test_slice_watch_reconnects_after_a_drop = None
    test_empty_checkpoint_is_logged = None
    test_reboot_forgets_prepared_claims = None


class DraPluginMig(DraPlugin):
    """The same plugin on a MIG node: MIG devices with NVIDIA's names."""
    machine = "h20-mig-7x1g"

    def test_slice_has_nvidias_names_and_owner(self):
        names = self.slice_devices()
        self.assertTrue(names and all("-mig-" in n for n in names), names)
        s = self.slices()[0]
        mig = s["spec"]["devices"][0]
        self.assertEqual(mig["attributes"]["type"], {"string": "mig"})
        self.assertIn("parentUUID", mig["attributes"])

    # the GPU-claim tests above are about whole GPUs
    test_prepare_repeat_restart_unprepare = None
    test_reboot_forgets_prepared_claims = None
    test_refusals = None
    test_time_slicing_applied_and_undone = None
    test_mps_daemon_for_the_claim = None
    test_xid_removes_the_device_and_tells_the_pod = None
    test_one_api_per_node = None
    test_grpc_health_service_for_nvidias_probes = None
    test_device_plugin_refuses_beside_a_live_dra_plugin = None
    test_metrics_and_readyz = None
    test_xid_then_recovery_puts_the_device_back = None
    test_slice_deleted_by_hand_comes_back = None
    test_mps_claim_fails_closed_until_its_daemon_serves = None
    test_admin_access_claim_leaves_sharing_alone = None
    test_config_the_parser_refuses_is_the_claims_error = None
    test_slice_watch_reconnects_after_a_drop = None
    test_empty_checkpoint_is_logged = None

    def test_slice_follows_a_mig_layout_change(self):
        """A MIG device destroyed behind the plugin's back (nvidia-smi mig -dci/-dgi): after
        SIGHUP re-reads the inventory the slice has one device fewer."""
        before = self.slice_devices()
        tool = os.path.join(BUILD, "tests/integration/fake_mig_destroy")
        env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(SRC, "examples/machines",
                                                              self.machine + ".yaml"),
                   FAKE_NVML_STATE=self.state)
        subprocess.run([tool, "0", "0"], env=env, check=True, timeout=30)
        self.plugin.send_signal(signal.SIGHUP)
        after = self.slice_devices(len(before) - 1)
        self.assertEqual(len(set(before) - set(after)), 1)

    def test_mig_claim_has_capability_nodes(self):
        names = self.slice_devices()
        uid = self.claim("m", [names[0]])
        out = self.prepare("m", uid)
        self.assertIsNone(out["claims"][0]["error"], out)
        with open(self.spec_path(uid)) as f:
            spec = json.load(f)
        nodes = [n["path"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]]
        self.assertTrue(any(p.startswith("/dev/nvidia-caps/nvidia-cap") for p in nodes), nodes)


if __name__ == "__main__":
    unittest.main()

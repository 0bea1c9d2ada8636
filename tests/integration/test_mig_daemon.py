#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_mig_daemon.py: MIG layouts from the node label in the agent (issue 11 §3), with the
# daemon, kubelet-sim and fake_apiserver.py: nvidia.com/mig.config=all-1g.10gb on an A100
# node serving whole GPUs -> state pending -> success, 7 nvidia.com/mig-1g.10gb per GPU
# served by the same process; a pod holding GPU 1 keeps GPU 1 untouched until it is
# released while GPU 0 is already repartitioned; a drain timeout -> failed with the old
# layout served and healthy; an unknown or impossible layout -> failed with an Event and
# nothing changed.
# Usage: test_mig_daemon.py SOURCE_DIR BUILD_DIR
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_apiserver import FakeApiServer  # noqa: E402
from test_reload_label import control  # noqa: E402
from test_reload_live import GPU, ReloadCase, wait_for  # noqa: E402

SRC = os.path.abspath(sys.argv[1])
NODE = "gpu-node-1"
MIG_LABEL = "nvidia.com/mig.config"
STATE = MIG_STATE = "nvidia.com/mig.config.state"
ONE_G = "nvidia.com/mig-1g.10gb"
DEFAULT = os.path.join(SRC, "examples/mig/config-default.yaml")


class MigDaemon(ReloadCase):
    def setUp(self):
        super().setUp()
        for k in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
            os.environ.pop(k, None)
        self.api = FakeApiServer([NODE])
        self.addCleanup(self.api.down)
        self.machine = os.path.join(self.root, "a100")
        with open(self.machine + ".yaml", "w") as f:
            f.write('driver: "570.158.01"\ncuda: 12080\ngpus:\n'
                    '  - model: NVIDIA A100-SXM4-80GB\n    count: 2\n')

    def set_label(self, key, value):
        control(self.api.control_port, "POST", "/_test/label?key=%s&value=%s" % (key, value))

    def labels(self):
        return control(self.api.control_port, "GET", "/_test/node?node=" + NODE)["metadata"][
            "labels"]

    def events(self):
        return control(self.api.control_port, "GET", "/_test/events")["items"]

    def start(self, args=()):
        return self.node(self.machine, ["--kube-api-server", "http://127.0.0.1:%d" % self.api.port,
                                        "--mig-strategy", "mixed", "--mig-config-file", DEFAULT]
                         + list(args), env={"NODE_NAME": NODE})

    def wait_state(self, want, timeout=10):
        wait_for(lambda: self.labels().get(STATE) == want, timeout, "%s=%s" % (STATE, want))

    def test_label_repartitions_live(self):
        n = self.start(["--metrics-address", "127.0.0.1:0"])
        self.wait_capacity(n, 2, 10)
        pid = n.daemon.pid
        t0 = time.monotonic()
        self.set_label(MIG_LABEL, "all-1g.10gb")
        self.wait_capacity(n, 14, 10, ONE_G)
        took = time.monotonic() - t0
        self.wait_state("success")
        self.assertEqual(n.daemon.pid, pid)
        self.assertEqual(self.metric(n, 'gpuslice_mig_config_state{state="success"}'), 1)
        self.assertEqual(self.metric(n, 'gpuslice_mig_config_state{state="pending"}'), 0)
        # whole GPUs are gone: the kubelet keeps the stopped resource's capacity for its
        # grace period, with nothing allocatable
        self.assertEqual(self.caps(n).get(GPU, {}).get("allocatable", 0), 0)
        self.assertIn("MIG: nvidia.com/mig.config.state=pending", self.log_text(n))
        # the same value again: already applied, nothing touched
        self.set_label(MIG_LABEL, "all-1g.10gb")
        print("label -> 14 x 1g.10gb served in %.0f ms" % (took * 1e3), file=sys.stderr)

    def test_pod_holds_one_gpu_other_goes_first(self):
        n = self.start()
        self.wait_capacity(n, 2, 10)
        pod = n.sim.must("admit holder %s=1" % GPU)["pod"]
        held = pod["devices"][GPU][0]
        self.set_label(MIG_LABEL, "all-1g.10gb")
        # the free GPU is repartitioned; the held one waits, Unhealthy for new pods
        self.wait_capacity(n, 7, 10, ONE_G)
        self.wait_state("pending")
        caps = self.caps(n)
        self.assertEqual(caps[GPU]["capacity"], 1)
        self.assertEqual(caps[GPU]["allocatable"], 0)
        devs = n.sim.must("devices " + GPU)["devices"]
        self.assertEqual([d["id"] for d in devs], [held])
        n.sim.must("delete holder")
        self.wait_capacity(n, 14, 10, ONE_G)
        self.wait_state("success")

    def test_drain_timeout_keeps_old_layout(self):
        n = self.start(["--mig-drain-timeout", "1s"])
        self.wait_capacity(n, 2, 10)
        n.sim.must("admit a %s=1" % GPU)
        n.sim.must("admit b %s=1" % GPU)
        self.set_label(MIG_LABEL, "all-3g.40gb")
        self.wait_state("failed", 10)
        self.wait_capacity(n, 2, 10)  # whole GPUs again, healthy
        self.assertNotIn("nvidia.com/mig-3g.40gb", self.caps(n))
        wait_for(lambda: [e for e in self.events() if e.get("reason") == "MigConfigFailed"], 5,
                 "a MigConfigFailed Event")
        self.assertIn("still held by pods", self.log_text(n))
        # the value that failed is named (it was printed empty: "nvidia.com/mig.config=:")
        self.assertIn("MIG config %s=all-3g.40gb: " % MIG_LABEL, self.log_text(n))

    def test_mode_change_waits_for_reboot(self):
        """A GPU whose MIG mode only changes at the next boot: state rebooting with an Event,
        the whole GPUs stay served; the agent started on the rebooted node finishes the job."""
        with open(self.machine + ".yaml", "a") as f:
            f.write("    mig_needs_reset: true\n")
        n = self.start()
        self.wait_capacity(n, 2, 10)
        self.set_label(MIG_LABEL, "all-1g.10gb")
        self.wait_state("rebooting")
        wait_for(lambda: [e for e in self.events() if e.get("reason") == "MigRebootRequired"], 5,
                 "a MigRebootRequired Event")
        self.wait_capacity(n, 2, 10)  # healthy whole GPUs until the reboot
        args = ["--pod-resources-socket", os.path.join(self.root, "pr0.sock"),
                "--kube-api-server", "http://127.0.0.1:%d" % self.api.port, "--mig-strategy",
                "mixed", "--mig-config-file", DEFAULT]
        n.stop_plugin()
        n.start_plugin(None, args, {"NODE_NAME": NODE, "FAKE_NVML_REBOOT": "1"})  # the node rebooted
        self.wait_capacity(n, 14, 10, ONE_G)
        self.wait_state("success")

    def test_nvidia_operands_paused_during_change(self):
        """NVIDIA's gpu.deploy.* labels that are true are paused while GPUs change (for
        clusters running other NVIDIA operands) and set back to true after; false ones stay."""
        self.set_label("nvidia.com/gpu.deploy.dcgm-exporter", "true")
        self.set_label("nvidia.com/gpu.deploy.gpu-feature-discovery", "false")
        n = self.start()
        self.wait_capacity(n, 2, 10)
        n.sim.must("admit holder %s=1" % GPU)
        self.set_label(MIG_LABEL, "all-3g.40gb")
        wait_for(lambda: self.labels().get("nvidia.com/gpu.deploy.dcgm-exporter") ==
                 "paused-for-mig-change", 10, "dcgm-exporter paused")
        self.assertEqual(self.labels()["nvidia.com/gpu.deploy.gpu-feature-discovery"], "false")
        n.sim.must("delete holder")
        self.wait_state("success")
        wait_for(lambda: self.labels().get("nvidia.com/gpu.deploy.dcgm-exporter") == "true", 10,
                 "dcgm-exporter back to true")

    def test_only_nvidia_managers_operands_paused(self):
        """Issue 27: on a GPU Operator node only what NVIDIA's mig-manager pauses is paused
        (gpu-feature-discovery, dcgm-exporter, dcgm, nvsm, client); the driver, the toolkit,
        the validator, the MIG manager stay, and so does the device-plugin label that
        schedules this (in-plugin) agent's own pod."""
        paused = ["gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm", "client"]
        kept = ["driver", "container-toolkit", "operator-validator", "mig-manager",
                "device-plugin", "sandbox-device-plugin", "node-status-exporter"]
        for op in paused + kept:
            self.set_label("nvidia.com/gpu.deploy." + op, "true")
        n = self.start()
        self.wait_capacity(n, 2, 10)
        n.sim.must("admit holder %s=1" % GPU)
        self.set_label(MIG_LABEL, "all-3g.40gb")
        for op in paused:
            wait_for(lambda: self.labels().get("nvidia.com/gpu.deploy." + op) ==
                     "paused-for-mig-change", 10, op + " paused")
        labels = self.labels()
        self.assertEqual({op: labels["nvidia.com/gpu.deploy." + op] for op in kept},
                         {op: "true" for op in kept})
        n.sim.must("delete holder")
        self.wait_state("success")
        for op in paused:
            wait_for(lambda: self.labels().get("nvidia.com/gpu.deploy." + op) == "true", 10,
                     op + " back to true")
        labels = self.labels()
        self.assertEqual({op: labels["nvidia.com/gpu.deploy." + op] for op in kept},
                         {op: "true" for op in kept})

    def test_node_state_reasserted_after_api_errors(self):
        """Issue 19: the API server answers 500 to every node PATCH during a layout change
        (the state label, the operand labels); once it recovers, the Node shows success and
        the operand labels restored within a few seconds, without another change."""
        self.set_label("nvidia.com/gpu.deploy.dcgm-exporter", "true")
        n = self.start()
        self.wait_capacity(n, 2, 10)
        n.sim.must("admit holder %s=1" % GPU)
        self.set_label(MIG_LABEL, "all-3g.40gb")
        self.wait_state("pending")
        wait_for(lambda: self.labels().get("nvidia.com/gpu.deploy.dcgm-exporter") ==
                 "paused-for-mig-change", 10, "dcgm-exporter paused")
        control(self.api.control_port, "POST", "/_test/fail-patches?on=1")
        n.sim.must("delete holder")
        self.wait_capacity(n, 4, 10, "nvidia.com/mig-3g.40gb")  # the GPUs are in the new layout
        wait_for(lambda: control(self.api.control_port, "GET", "/_test/stats")[
            "failed_patches"] >= 3, 10, "the state and operand PATCHes refused, and retried")
        self.assertEqual(self.labels().get(STATE), "pending")
        self.assertEqual(self.labels().get("nvidia.com/gpu.deploy.dcgm-exporter"),
                         "paused-for-mig-change")
        t0 = time.monotonic()
        control(self.api.control_port, "POST", "/_test/fail-patches?on=0")
        self.wait_state("success", 35)  # the retry period is at most 30 s
        wait_for(lambda: self.labels().get("nvidia.com/gpu.deploy.dcgm-exporter") == "true", 35,
                 "dcgm-exporter back to true")
        print("API back -> node state re-asserted in %.1f s" % (time.monotonic() - t0),
              file=sys.stderr)
        self.assertIn("retrying", self.log_text(n))

    def test_interrupted_cli_apply_reported_at_start(self):
        """Issue 19: a `gpuslice mig apply` killed part way left its record: the agent says
        so at start (log and a MigApplyInterrupted Event), then applies the label's layout."""
        intent = os.path.join(self.root, "mig-apply.intent")
        with open(intent, "w") as f:  # as a killed apply leaves it (pid 1: never ours)
            f.write("gpuslice-mig-intent v1\npid 999999999\nstarted 1764000000\n"
                    "config /etc/mig/config.yaml\nselected all-1g.10gb\ngpu 1 GPU-abc\n")
        self.set_label(MIG_LABEL, "all-1g.10gb")
        n = self.node(self.machine, ["--kube-api-server", "http://127.0.0.1:%d" % self.api.port,
                                     "--mig-strategy", "mixed", "--mig-config-file", DEFAULT],
                      env={"NODE_NAME": NODE, "GPUSLICE_MIG_INTENT_FILE": intent})
        self.wait_capacity(n, 14, 10, ONE_G)
        self.wait_state("success")
        self.assertIn("an apply of 'all-1g.10gb' (/etc/mig/config.yaml) by pid 999999999, "
                      "started 2025-11-24T16:00:00Z, did not finish: GPU 1 (GPU-abc) may be "
                      "between layouts", self.log_text(n))
        wait_for(lambda: [e for e in self.events() if e.get("reason") == "MigApplyInterrupted"],
                 5, "a MigApplyInterrupted Event")

    def test_unknown_or_impossible_layout_fails_and_changes_nothing(self):
        cfg = os.path.join(self.root, "mig.yaml")
        with open(cfg, "w") as f:
            f.write('version: v1\nmig-configs:\n  too-big:\n    - devices: all\n'
                    '      mig-enabled: true\n      mig-devices: {"3g.40gb": 3}\n')
        n = self.start(["--mig-config-file", cfg])
        self.wait_capacity(n, 2, 10)
        self.set_label(MIG_LABEL, "no-such-layout")
        self.wait_state("failed")
        wait_for(lambda: [e for e in self.events() if e.get("reason") == "MigConfigInvalid"], 5,
                 "a MigConfigInvalid Event")
        self.assertIn("has no MIG config 'no-such-layout'; it has too-big", self.log_text(n))
        self.set_label(MIG_STATE, "")
        self.set_label(MIG_LABEL, "too-big")
        wait_for(lambda: "3g.40gb: 3 wanted, at most 2 fit" in self.log_text(n), 10,
                 "the planner's reason in the log")
        self.wait_state("failed")
        self.wait_capacity(n, 2, 10)  # whole GPUs still served, healthy
        self.assertIsNone(n.daemon.poll())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])

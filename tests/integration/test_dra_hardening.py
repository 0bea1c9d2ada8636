#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_dra_hardening.py: issue 29's DRA items that live below the plugin's handlers, end to
# end. Events: src/kube's poster (through kube_event_probe) against fake_apiserver.py failing
# the first POSTs — retried with backoff in order, a 409 after a lost answer counted as posted,
# refusals dropped at once, tries bounded, the queue bounded by dropping the oldest. MIG: a
# claim prepared by `gpuslice dra-plugin` on a host without /dev/nvidia-caps gets character
# device nodes (major from /proc/devices) in its CDI spec. Hostile config: an interval with
# "\u0000" is that claim's error, naming the field, and nothing is run on the GPU.
import json
import os
import shutil
import subprocess
import sys
import threading
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdi_schema  # noqa: E402
import fake_driver_root  # noqa: E402
from dra_harness import NODE, WAIT_S, DraNode  # noqa: E402
from fake_apiserver import FakeApiServer  # noqa: E402

SRC = os.environ.get("GS_SOURCE_DIR", "")
BUILD = os.environ.get("GS_BINARY_DIR", "")
PROBE = os.environ.get("GS_KUBE_EVENT_PROBE", os.path.join(BUILD, "tests/integration/"
                                                                  "kube_event_probe"))
SMI = os.path.join(BUILD, "tools/fake-nvidia-smi/nvidia-smi")
SIM = os.path.join(BUILD, "tools/kubelet-sim/kubelet-sim")
CONFIG_API = "resource.nvidia.com/v1beta1"


class Probe:
    """kube_event_probe: one command per line in, one JSON line out; the poster's failure
    reports collected apart."""

    def __init__(self, url, *opts):
        self.p = subprocess.Popen([PROBE, "--server", url, "--node", NODE] + list(opts),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.cond = threading.Condition()
        self.answers = []
        self.failures = []
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            j = json.loads(line)
            with self.cond:
                (self.failures if "failure" in j else self.answers).append(j)
                self.cond.notify_all()

    def cmd(self, line):
        with self.cond:
            n = len(self.answers)
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.answers) > n, timeout=WAIT_S * 2):
                raise AssertionError("kube_event_probe did not answer %r" % line)
            return self.answers[n]

    def wait_failures(self, n):
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.failures) >= n, timeout=WAIT_S):
                raise AssertionError("%d failure reports, wanted %d" % (len(self.failures), n))
            return list(self.failures)

    def close(self):
        self.p.stdin.close()
        return self.p.wait(timeout=WAIT_S)


@unittest.skipUnless(os.path.exists(PROBE), "build kube_event_probe first")
class EventPoster(unittest.TestCase):
    def setUp(self):
        self.api = FakeApiServer([NODE])
        self.url = "http://127.0.0.1:%d" % self.api.port
        self.probe = None

    def tearDown(self):
        if self.probe:
            self.assertEqual(self.probe.close(), 0)
        self.api.down()

    def control(self, path, method="POST"):
        req = urllib.request.Request("http://127.0.0.1:%d/_test/%s" % (self.api.control_port,
                                                                      path), method=method)
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read() or b"{}")

    def reasons(self):
        return [e["reason"] for e in self.control("events", "GET")["items"]]

    def start(self, *opts):
        self.probe = Probe(self.url, "--retry-min-ms", "20", "--retry-max-ms", "80", *opts)
        return self.probe

    def flush(self):
        self.assertTrue(self.probe.cmd("flush 15000")["drained"])
        return self.probe.cmd("stats")

    def test_failed_posts_are_retried_in_order(self):
        """Issue 29: one failed POST lost a PreparedDeviceLost Event."""
        self.control("fail-events?count=3&code=503")
        p = self.start()
        self.assertEqual(p.cmd("add PreparedDeviceLost team trainer-0 pod-uid")["rc"], 0)
        self.assertEqual(p.cmd("add GPURecovered")["rc"], 0)
        st = self.flush()
        self.assertEqual(self.reasons(), ["PreparedDeviceLost", "GPURecovered"])
        self.assertEqual((st["posted"], st["retries"], st["queued"]), (2, 3, 0))
        fails = p.wait_failures(3)
        self.assertEqual([(f["failure"], f["fate"]) for f in fails],
                         [("PreparedDeviceLost", "retrying")] * 3)
        self.assertIn("HTTP 503", fails[0]["error"])
        ev = self.control("events", "GET")["items"][0]
        self.assertEqual(ev["metadata"]["namespace"], "team")
        self.assertEqual(ev["involvedObject"]["name"], "trainer-0")
        self.assertEqual(self.control("stats", "GET")["failed_events"], 3)

    def test_unreachable_api_server_is_waited_for(self):
        self.api.down()
        p = self.start()
        p.cmd("add MigConfigInvalid")
        p.wait_failures(1)
        self.api.up()
        st = self.flush()
        self.assertEqual(self.reasons(), ["MigConfigInvalid"])
        self.assertEqual(st["posted"], 1)
        self.assertGreaterEqual(st["retries"], 1)

    def test_lost_answer_is_not_posted_twice(self):
        """Stored, but the answer was a 500: the retry (same name) gets 409, counted posted."""
        self.control("fail-events?count=1&code=500&store=1")
        p = self.start()
        p.cmd("add PreparedDeviceLost team trainer-0 pod-uid")
        st = self.flush()
        self.assertEqual(self.reasons(), ["PreparedDeviceLost"])
        self.assertEqual((st["posted"], st["retries"]), (1, 1))

    def test_refusal_is_dropped_at_once(self):
        self.control("fail-events?count=1&code=403")
        p = self.start()
        p.cmd("add First")
        p.cmd("add Second")
        st = self.flush()
        self.assertEqual(self.reasons(), ["Second"])
        self.assertEqual((st["posted"], st["retries"], st["dropped_refused"]), (1, 0, 1))
        self.assertEqual([(f["failure"], f["fate"]) for f in p.wait_failures(1)],
                         [("First", "dropped")])

    def test_tries_are_bounded(self):
        self.control("fail-events?count=100&code=503")
        p = self.start("--tries", "3")
        p.cmd("add Doomed")
        st = self.flush()
        self.assertEqual(self.reasons(), [])
        self.assertEqual((st["posted"], st["retries"], st["dropped_tries"]), (0, 2, 1))
        self.assertEqual([f["fate"] for f in p.wait_failures(3)],
                         ["retrying", "retrying", "dropped"])
        self.assertEqual(self.control("stats", "GET")["failed_events"], 3)

    def test_queue_drops_the_oldest(self):
        """Beyond the bound the oldest goes, and the caller is told which."""
        self.api.down()
        p = self.start("--queue", "2")
        adds = [p.cmd("add E%d" % i) for i in range(1, 6)]
        self.api.up()
        st = self.flush()
        self.assertEqual(self.reasons(), ["E4", "E5"])
        self.assertEqual(st["dropped_full"], 3)
        told = [a["dropped"] for a in adds if a["rc"] == 1] + \
            [f["failure"] for f in p.failures if f["fate"] == "dropped"]
        self.assertEqual(sorted(told), ["E1", "E2", "E3"])


@unittest.skipUnless(os.path.exists(SMI) and os.path.exists(SIM), "build the stand-ins first")
class MigClaimWithoutHostCaps(DraNode, unittest.TestCase):
    """Issue 29: prepare refused a MIG device unless /dev/nvidia-caps/nvidia-cap<N> existed
    on the host; NVIDIA's driver writes them as character devices the runtime creates."""
    machine = "h20-mig-7x1g"

    def setUp(self):
        self.node_up(SRC, BUILD, start=False)
        fake_driver_root.make_proc_devices(self.proc_root)
        shutil.rmtree(os.path.join(self.driver, "dev/nvidia-caps"))
        self.start_plugin()

    def tearDown(self):
        self.assertEqual(self.node_down(), [])

    def test_mig_claim_gets_character_device_nodes(self):
        names = self.slice_devices()
        uid = self.claim("m", [names[0]])
        out = self.prepare("m", uid)
        self.assertIsNone(out["claims"][0]["error"], out)
        with open(self.spec_path(uid)) as f:
            spec = json.load(f)
        self.assertEqual(cdi_schema.problems(spec), [])
        nodes = spec["devices"][0]["containerEdits"]["deviceNodes"]
        caps = [n for n in nodes if n["path"].startswith("/dev/nvidia-caps/nvidia-cap")]
        self.assertEqual(len(caps), 2, nodes)
        for n in caps:
            self.assertEqual((n["type"], n["major"]), ("c", fake_driver_root.CAPS_MAJOR))
            self.assertEqual(n["path"], "/dev/nvidia-caps/nvidia-cap%d" % n["minor"])
            self.assertNotIn("hostPath", n)
        self.assertNotEqual(caps[0]["minor"], caps[1]["minor"])


@unittest.skipUnless(os.path.exists(SMI) and os.path.exists(SIM), "build the stand-ins first")
class HostileConfig(DraNode, unittest.TestCase):
    """Issue 29: "Long\\u0000" failed every claim of the call as UNAVAILABLE (retried for
    ever); it is that claim's error, naming the field, and the GPU is left alone."""
    machine = "h100-nvswitch-8"

    def setUp(self):
        self.node_up(SRC, BUILD)

    def tearDown(self):
        self.assertEqual(self.node_down(), [])

    def test_nul_in_interval_is_the_claims_error(self):
        self.slice_devices(8)
        uid = self.claim("t", ["gpu-0"], config={
            "apiVersion": CONFIG_API, "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing",
                        "timeSlicingConfig": {"interval": "Long\u0000"}}})
        good = self.claim("g", ["gpu-1"])
        out = self.prepare("t", uid)
        err = out["claims"][0]["error"]
        self.assertIn("sharing.timeSlicingConfig.interval", err)
        self.assertIn("NUL character", err)
        self.assertFalse(os.path.exists(self.spec_path(uid)))
        smi = open(self.smi_log).read() if os.path.exists(self.smi_log) else ""
        self.assertNotIn("timeslice", smi)
        # the next claim is not held up by it
        self.assertIsNone(self.prepare("g", good)["claims"][0]["error"])


if __name__ == "__main__":
    unittest.main()

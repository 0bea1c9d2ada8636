#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `gpuslice dra-plugin` runs the DRA units only (issue 29 §2): however many times its
# inventory is read again, it never creates or serves a socket in the device plugins' folder
# (the one-API rule, docs/dra.md) and never logs the device plugin's errors where that folder
# is missing. The inventory interval is made short (INVENTORY_INTERVAL) and the test waits
# for several re-reads, counted by gpuslice_config_reloads_total on /metrics.
# Env: GS_SOURCE_DIR, GS_BINARY_DIR (tests/integration/dra_plugin.cmake).
import os
import re
import socket
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dra_harness import DraNode, wait_for  # noqa: E402

SRC = os.environ.get("GS_SOURCE_DIR", "")
BUILD = os.environ.get("GS_BINARY_DIR", "")
SIM = os.path.join(BUILD, "tools/kubelet-sim/kubelet-sim")
RELOADS = 4  # inventory re-reads to wait for


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(os.path.exists(SIM), "build kubelet-sim first")
class DraUnits(DraNode, unittest.TestCase):

    def setUp(self):
        self.node_up(SRC, BUILD, start=False)
        self.port = free_port()

    def tearDown(self):
        self.assertEqual(self.node_down(), [])

    def env(self):
        env = DraNode.env(self)
        env["INVENTORY_INTERVAL"] = "100ms"
        return env

    def reloads(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port,
                                        timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return 0
        m = re.search(r"^gpuslice_config_reloads_total (\d+)$", text, re.M)
        return int(m.group(1)) if m else 0

    def run_past_inventory_intervals(self, dp_dir):
        self.start_plugin("--metrics-address", "127.0.0.1:%d" % self.port,
                          "--device-plugin-dir", dp_dir)
        self.slice_devices(8)
        wait_for(lambda: self.reloads() >= RELOADS, "%d inventory re-reads" % RELOADS)
        errors = [l for l in self.log_text().splitlines() if l.startswith("E")]
        self.assertEqual(errors, [])

    def test_device_plugins_folder_present_is_left_alone(self):
        dp_dir = os.path.join(self.root, "device-plugins")  # kubelet-sim's: kubelet.sock
        wait_for(lambda: os.path.exists(os.path.join(dp_dir, "kubelet.sock")), "kubelet.sock")
        before = sorted(os.listdir(dp_dir))
        self.run_past_inventory_intervals(dp_dir)
        self.assertEqual(sorted(os.listdir(dp_dir)), before)

    def test_device_plugins_folder_missing_is_not_made(self):
        dp_dir = os.path.join(self.root, "no-device-plugins")
        self.run_past_inventory_intervals(dp_dir)
        self.assertFalse(os.path.exists(dp_dir))


if __name__ == "__main__":
    unittest.main()

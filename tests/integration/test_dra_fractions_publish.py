#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# `gpuslice dra-plugin --config-file examples/dra/fractions/config.yaml` on the fake 8 x H100
# node publishes the slice `gpuslice plan --dra` prints for that config: every H100 shareable
# by memory (allowMultipleAllocations, memory and computePercent with request policies). The
# config is followed live: emptied, the GPUs go back to NVIDIA's plain devices; a config the
# DRA plugin refuses (a timeSlicing block) keeps the last good slice, and one given at start
# stops the plugin with the reason.
# Env: GS_SOURCE_DIR, GS_BINARY_DIR (tests/integration/dra_fractions.cmake).
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dra_harness import NODE, WAIT_S, DraNode, wait_for  # noqa: E402

SRC = os.environ.get("GS_SOURCE_DIR", "")
BUILD = os.environ.get("GS_BINARY_DIR", "")
SIM = os.path.join(BUILD, "tools/kubelet-sim/kubelet-sim")
EXAMPLE = os.path.join(SRC, "examples/dra/fractions/config.yaml")
TIME_SLICING = "version: v1\nsharing:\n  timeSlicing:\n" \
               "    resources: [{name: nvidia.com/gpu, replicas: 2}]\n"


@unittest.skipUnless(os.path.exists(SIM), "build kubelet-sim first")
class DraFractionsPublish(DraNode, unittest.TestCase):

    def setUp(self):
        self.node_up(SRC, BUILD, start=False)
        self.config = os.path.join(self.root, "config.yaml")
        shutil.copy(EXAMPLE, self.config)

    def tearDown(self):
        self.assertEqual(self.node_down(), [])

    def planned(self):
        """The devices `gpuslice plan --dra` prints for the example config on this node."""
        out = subprocess.run(
            [self.gpuslice, "plan", "--dra", "--node-name", NODE, "--nvml-library", self.nvml,
             "--config-file", EXAMPLE],
            env=self.env(), capture_output=True, text=True, timeout=WAIT_S, check=True)
        return json.loads(out.stdout)["spec"]["devices"]

    def published(self, pred):
        def one():
            s = self.slices()
            return s[0]["spec"]["devices"] if len(s) == 1 and pred(s[0]["spec"]["devices"]) \
                else None
        return wait_for(one, "the slice to match")

    def write_config(self, text):
        tmp = self.config + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.config)

    def test_publishes_the_planned_slice_and_follows_the_config(self):
        want = self.planned()
        self.assertEqual(len(want), 8)
        self.assertTrue(all(d["allowMultipleAllocations"] for d in want))
        self.start_plugin("--config-file", self.config)
        got = self.published(lambda devs: devs == want)
        mem = got[0]["capacity"]["memory"]
        self.assertEqual(mem, {"value": "81559Mi", "requestPolicy": {
            "default": "81559Mi", "validRange": {"min": "1Gi", "step": "1Mi"}}})
        self.assertEqual(got[0]["capacity"]["computePercent"]["value"], "100")

        # no sharing block: NVIDIA's plain devices again; the example again: shareable
        self.write_config("version: v1\n")
        plain = self.published(lambda devs: not any("allowMultipleAllocations" in d
                                                    for d in devs))
        self.assertEqual(plain[0]["capacity"], {"memory": {"value": "81559Mi"}})
        shutil.copy(EXAMPLE, self.config + ".tmp")
        os.rename(self.config + ".tmp", self.config)
        self.published(lambda devs: devs == want)

        # a timeSlicing block is the device plugin's: refused, the last good slice stays
        self.write_config(TIME_SLICING)
        wait_for(lambda: "sharing.timeSlicing is the device plugin's" in self.log_text(),
                 "the refusal in the log")
        self.assertEqual(self.slices()[0]["spec"]["devices"], want)
        self.assertIsNone(self.plugin.poll())

    def test_a_config_it_cannot_take_stops_it_at_start(self):
        self.write_config(TIME_SLICING)
        self.spawn_plugin("--config-file", self.config)
        rc = self.plugin.wait(timeout=WAIT_S)
        self.plugin = None
        self.assertNotEqual(rc, 0)
        self.assertIn("sharing.timeSlicing is the device plugin's; under DRA a claim asks for "
                      "time-slicing or MPS with its GpuConfig", self.log_text())
        self.assertEqual(self.slices(), [])


if __name__ == "__main__":
    unittest.main()

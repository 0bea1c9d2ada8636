#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_mps_control_daemon.py: `gpuslice mps-control-daemon` on its own (NVIDIA's split: the
# chart's MPS DaemonSet) with the fake NVML and tools/fake-mps, started as the chart starts it
# (argv[0] mps-control-daemon, env CONFIG_FILE and MPS_ROOT). test_mps.py covers the plugin
# side; this covers the supervision of the standalone command: two resources with different
# limits read back from fake-mps, compute mode, a killed daemon restarted with its limits
# while the other keeps running, a wedged daemon replaced, SIGHUP applying new limits (and a
# broken config keeping the running daemons), SIGTERM leaving no daemon, folder or changed
# compute mode, a missing control binary retried with a clear error.
# Usage: test_mps_control_daemon.py <gpuslice> <libnvidia-ml.so.1> <fake-mps> [-v]
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

GPUSLICE = NVML = FAKE_MPS = None
GPU, HALF = "nvidia.com/gpu", "nvidia.com/gpu-half"

CONFIG = """version: v1
sharing:
  mps:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
        devices: [0]
      - name: nvidia.com/gpu
        rename: nvidia.com/gpu-half
        replicas: 2
        devices: [1]
"""


def wait_for(cond, timeout=10.0):
    """Waits for a condition with a deadline, re-checked every 5 ms."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.005)
    return cond()


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return True


class MpsControlDaemon(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gs-mpsd-")
        self.mps = os.path.join(self.dir, "mps")
        self.cfg = os.path.join(self.dir, "config.yaml")
        with open(self.cfg, "w") as f:
            f.write(CONFIG)
        machine = os.path.join(self.dir, "l20x2.yaml")
        with open(machine, "w") as f:
            f.write("gpus:\n  - model: NVIDIA L20\n    count: 2\n")
        self.nvml_state = os.path.join(self.dir, "nvml.state")
        self.argv0 = os.path.join(self.dir, "mps-control-daemon")
        os.symlink(GPUSLICE, self.argv0)
        self.env = dict(os.environ, FAKE_NVML_MACHINE=machine, FAKE_NVML_STATE=self.nvml_state,
                        GPUSLICE_NVML_LIBRARY=NVML, GPUSLICE_MPS_CONTROL=FAKE_MPS,
                        CONFIG_FILE=self.cfg, MPS_ROOT=self.mps)
        self.proc = None
        self.log = open(os.path.join(self.dir, "daemon.log"), "w+")

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for res in (GPU, HALF):
            pid = self.fake_pid(res)
            if pid and not gone(pid):
                os.kill(pid, signal.SIGKILL)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def daemon_log(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def start(self):
        self.proc = subprocess.Popen([self.argv0, "--mps-probe-interval", "100ms"],
                                     env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        self.assertTrue(wait_for(lambda: os.path.exists(os.path.join(self.mps, ".ready"))),
                        self.daemon_log())

    def fake_state(self, res):
        try:
            with open(os.path.join(self.mps, res, "log/fake-mps.state")) as f:
                return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        except FileNotFoundError:
            return {}

    def fake_pid(self, res):
        st = self.fake_state(res)
        return int(st["pid"]) if "pid" in st else None

    def compute_mode_lines(self):
        try:
            with open(self.nvml_state) as f:
                return [l for l in f.read().splitlines() if l.startswith("cm ")]
        except FileNotFoundError:
            return []

    def uuids(self):
        import json
        out = subprocess.run([GPUSLICE, "inventory", "-o", "json"], env=self.env,
                             capture_output=True, text=True, check=True).stdout
        return [g["uuid"] for g in json.loads(out)["gpus"]]

    def assert_limits(self, res, visible, threads, mem):
        st = self.fake_state(res)
        self.assertEqual(st.get("visible"), visible, st)
        self.assertEqual(st.get("active_thread_percentage"), str(threads), st)
        self.assertEqual(st.get("pinned_mem_limit.0"), mem, st)
        self.assertTrue(os.path.exists(os.path.join(self.mps, res, ".started")))

    def stop_and_check_clean(self):
        pids = [self.fake_pid(r) for r in (GPU, HALF)]
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=10), 0, self.daemon_log())
        for pid in pids:
            self.assertTrue(wait_for(lambda: gone(pid), 5), pid)
        leftovers = [os.path.join(d, f) for d, _, fs in os.walk(self.mps) for f in fs]
        self.assertEqual(leftovers, [], self.daemon_log())
        self.assertEqual(self.compute_mode_lines(), [])

    def test_limits_compute_mode_and_cleanup(self):
        self.start()
        u = self.uuids()
        self.assert_limits(GPU, u[0], 25, "11517M")
        self.assert_limits(HALF, u[1], 50, "23034M")
        self.assertEqual(sorted(self.compute_mode_lines()), ["cm 0 3", "cm 1 3"])
        self.stop_and_check_clean()

    def test_killed_daemon_restarted_with_limits(self):
        self.start()
        u = self.uuids()
        first, other = self.fake_pid(GPU), self.fake_pid(HALF)
        os.kill(first, signal.SIGKILL)
        self.assertTrue(wait_for(lambda: self.fake_pid(GPU) not in (None, first) and
                                 self.fake_state(GPU).get("active_thread_percentage") == "25" and
                                 os.path.exists(os.path.join(self.mps, GPU, ".started"))),
                        self.daemon_log())
        self.assert_limits(GPU, u[0], 25, "11517M")
        self.assertEqual(self.fake_pid(HALF), other)
        self.stop_and_check_clean()

    def test_wedged_daemon_replaced(self):
        self.start()
        first = self.fake_pid(HALF)
        env = dict(self.env, CUDA_MPS_PIPE_DIRECTORY=os.path.join(self.mps, HALF, "pipe"))
        # The fake takes the command and stops answering anyone (its client is dropped).
        subprocess.run([FAKE_MPS], input="fake_hang\n", env=env, capture_output=True,
                       text=True, timeout=10)
        self.assertTrue(wait_for(lambda: self.fake_pid(HALF) not in (None, first), 15),
                        self.daemon_log())
        self.assertTrue(wait_for(lambda: gone(first), 5))
        self.assertTrue(wait_for(lambda: self.fake_state(HALF).get(
            "active_thread_percentage") == "50"), self.daemon_log())
        self.stop_and_check_clean()

    def test_sighup_applies_new_limits_and_keeps_last_good(self):
        self.start()
        with open(self.cfg, "w") as f:
            f.write(CONFIG.replace("replicas: 2", "replicas: 5"))
        first, untouched = self.fake_pid(HALF), self.fake_pid(GPU)
        self.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: self.fake_state(HALF).get(
            "active_thread_percentage") == "20"), self.daemon_log())
        self.assertNotEqual(self.fake_pid(HALF), first)
        self.assertEqual(self.fake_pid(GPU), untouched)
        # A broken config keeps what runs.
        with open(self.cfg, "w") as f:
            f.write("version: v1\nsharing: [\n")
        self.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "config.yaml" in self.daemon_log()), self.daemon_log())
        self.assertIsNone(self.proc.poll())
        self.assertEqual(self.fake_state(HALF).get("active_thread_percentage"), "20")
        self.assertFalse(gone(self.fake_pid(GPU)))
        self.stop_and_check_clean()

    def test_missing_binary_retried_with_clear_error(self):
        self.env["GPUSLICE_MPS_CONTROL"] = os.path.join(self.dir, "no-such-mps-control")
        self.proc = subprocess.Popen([self.argv0], env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.assertTrue(wait_for(lambda: "no-such-mps-control" in self.daemon_log()),
                        self.daemon_log())
        self.assertFalse(os.path.exists(os.path.join(self.mps, ".ready")))
        self.assertIsNone(self.proc.poll())
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=10), 0, self.daemon_log())
        self.assertEqual(self.compute_mode_lines(), [])


if __name__ == "__main__":
    GPUSLICE, NVML, FAKE_MPS = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main()

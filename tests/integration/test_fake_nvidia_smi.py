# SPDX-License-Identifier: Apache-2.0
# test_fake_nvidia_smi.py: the stand-in nvidia-smi run with the exact argv NVIDIA's DRA
# driver (v25.12.0, cmd/gpu-kubelet-plugin/nvlib.go) uses for time-slicing, read back through
# its state file, its log and `compute-policy -l`; refusals (exit 2), unknown ids (exit 6) and
# FAKE_NVIDIA_SMI_FAIL (exit 1). Usage: test_fake_nvidia_smi.py <nvidia-smi> [-v]
import os
import subprocess
import sys
import tempfile
import unittest

SMI = None
GPU0 = "GPU-00000000-0000-0000-0000-000000000000"
GPU1 = "GPU-11111111-1111-1111-1111-111111111111"


class FakeNvidiaSmi(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gs-fake-smi-")
        self.log = os.path.join(self.dir.name, "calls.log")
        self.state = os.path.join(self.dir.name, "smi.state")
        self.env = dict(os.environ, FAKE_NVIDIA_SMI_LOG=self.log,
                        FAKE_NVIDIA_SMI_STATE=self.state)
        self.env.pop("FAKE_NVIDIA_SMI_FAIL", None)
        self.env.pop("FAKE_NVIDIA_SMI_DEVICES", None)

    def tearDown(self):
        self.dir.cleanup()

    def smi(self, *args, **env):
        e = dict(self.env, **env)
        return subprocess.run([SMI, *args], env=e, capture_output=True, text=True, timeout=10)

    def state_lines(self):
        with open(self.state) as f:
            return sorted(f.read().splitlines())

    def log_lines(self):
        with open(self.log) as f:
            return f.read().splitlines()

    def test_nvidia_time_slicing_calls(self):
        # SetTimeSlice: compute mode DEFAULT, then the interval (Long = 3), per GPU uuid
        for uuid in (GPU0, GPU1):
            r = self.smi("-i", uuid, "-c", "DEFAULT")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.smi("compute-policy", "-i", uuid, "--set-timeslice", "3")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("All done.", r.stdout)
        self.assertEqual(self.state_lines(), [
            f"{GPU0} timeslice=3 compute-mode=DEFAULT",
            f"{GPU1} timeslice=3 compute-mode=DEFAULT",
        ])
        self.assertEqual(self.log_lines(), [
            f"-i {GPU0} -c DEFAULT", f"compute-policy -i {GPU0} --set-timeslice 3",
            f"-i {GPU1} -c DEFAULT", f"compute-policy -i {GPU1} --set-timeslice 3",
        ])
        # unprepare goes back to the default interval; MPS sets EXCLUSIVE_PROCESS
        self.assertEqual(self.smi("compute-policy", "-i", GPU0, "--set-timeslice", "0").returncode,
                         0)
        self.assertEqual(self.smi("-i", GPU1, "-c", "EXCLUSIVE_PROCESS").returncode, 0)
        r = self.smi("compute-policy", "-i", f"{GPU0},{GPU1}", "-l")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            f"GPU {GPU0}: timeslice 0, compute mode DEFAULT",
            f"GPU {GPU1}: timeslice 3, compute mode EXCLUSIVE_PROCESS",
        ])

    def test_list_unset_device_shows_defaults(self):
        r = self.smi("compute-policy", "--list", "-i", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "GPU 0: timeslice 0, compute mode DEFAULT\n")

    def test_refuses_other_forms(self):
        for args in (["compute-policy", "-i", GPU0, "--set-timeslice", "4"],
                     ["compute-policy", "-i", GPU0],
                     ["compute-policy", "-i", GPU0, "--set-timeslice", "1", "-l"],
                     ["-i", GPU0, "-c", "EXCLUSIVE_THREAD"],
                     ["-i", GPU0],
                     ["-q"],
                     []):
            r = self.smi(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("Invalid combination of input arguments", r.stderr)
        self.assertFalse(os.path.exists(self.state))
        self.assertEqual(len(self.log_lines()), 7)

    def test_unknown_device(self):
        r = self.smi("-i", "GPU-nope", "-c", "DEFAULT", FAKE_NVIDIA_SMI_DEVICES=f"{GPU0},0")
        self.assertEqual(r.returncode, 6)
        self.assertIn("GPU-nope", r.stderr)
        r = self.smi("-i", "0", "-c", "0", FAKE_NVIDIA_SMI_DEVICES=f"{GPU0},0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.state_lines(), ["0 timeslice=0 compute-mode=DEFAULT"])

    def test_fail_switch(self):
        r = self.smi("compute-policy", "-i", GPU0, "--set-timeslice", "1",
                     FAKE_NVIDIA_SMI_FAIL="1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("FAKE_NVIDIA_SMI_FAIL", r.stderr)
        self.assertFalse(os.path.exists(self.state))
        self.assertEqual(self.log_lines(), [f"compute-policy -i {GPU0} --set-timeslice 1"])


if __name__ == "__main__":
    SMI = sys.argv.pop(1)
    unittest.main()

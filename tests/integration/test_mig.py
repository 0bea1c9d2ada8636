#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_mig.py: `gpuslice mig` (nvidia-mig-parted) against the fake NVML: every default
# layout of mig-parted (examples/mig/config-default.yaml, facts B.7) applied and asserted
# on every MIG-capable model (A100 40/80GB, A30, H100, H200, H20), export round-trips what
# apply made, a layout that does not fit is refused with the planner's reason and changes
# nothing, an NVML failure halfway through an apply restores the GPU's previous layout
# exactly while the other GPUs keep their MIG devices, GPUs already in the wanted layout
# are not touched, --dry-run changes nothing, checkpoint/restore, hooks, `mig plan`.
# Usage: test_mig.py SOURCE_DIR BUILD_DIR
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

SRC, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
GPUSLICE = os.path.join(BUILD, "gpuslice")
NVML = os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1")
DEFAULT = os.path.join(SRC, "examples/mig/config-default.yaml")
MODELS = {  # NVML name -> PCI id the fake reports
    "NVIDIA A100-SXM4-40GB": 0x20B010DE, "NVIDIA A100-SXM4-80GB": 0x20B210DE,
    "NVIDIA A30": 0x20B710DE, "NVIDIA H100 80GB HBM3": 0x233010DE,
    "NVIDIA H200": 0x233510DE, "NVIDIA H20": 0x232910DE,
}


class Mig(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gs-mig-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def machine(self, model, count=2, name="m"):
        path = os.path.join(self.dir, name + ".yaml")
        with open(path, "w") as f:
            f.write('driver: "570.158.01"\ncuda: 12080\ngpus:\n  - model: %s\n    count: %d\n'
                    % (model, count))
        self.env = dict(os.environ, FAKE_NVML_MACHINE=path, GPUSLICE_NVML_LIBRARY=NVML,
                        FAKE_NVML_STATE=os.path.join(self.dir, name + ".state"),
                        GPUSLICE_MIG_INTENT_FILE=os.path.join(self.dir, "mig-apply.intent"))
        for k in list(self.env):
            if k.startswith("MIG_PARTED_") or k == "FAKE_NVML_FAIL":
                del self.env[k]

    def mig(self, *args, env=None, argv0=None):
        e = dict(self.env, **(env or {}))
        cmd = [argv0] if argv0 else [GPUSLICE, "mig"]
        return subprocess.run(cmd + list(args), env=e, capture_output=True, text=True,
                              timeout=60)

    def ok(self, *args, **kw):
        r = self.mig(*args, **kw)
        self.assertEqual(r.returncode, 0, "mig %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
        return r

    def migs(self):
        """MIG device UUIDs per GPU, through the inventory."""
        r = subprocess.run([GPUSLICE, "inventory", "-o", "json"], env=self.env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        inv = json.loads(r.stdout)
        return [sorted(m["uuid"] for m in g["mig"]["devices"]) if g.get("mig") else []
                for g in inv["gpus"]]

    def export(self):
        return yaml.safe_load(self.ok("export").stdout)

    def labels_for(self, pci):
        with open(DEFAULT) as f:
            cfg = yaml.safe_load(f)["mig-configs"]
        out = []
        for label, entries in cfg.items():
            for e in entries:
                filt = e.get("device-filter")
                ids = [int(x, 16) for x in (filt if isinstance(filt, list) else [filt])] \
                    if filt else None
                if ids is None or pci in ids:
                    out.append(label)
                    break
        return out

    def test_every_default_layout_on_every_model(self):
        applied = 0
        for model, pci in MODELS.items():
            self.machine(model, name=model.replace(" ", "_"))
            labels = self.labels_for(pci)
            self.assertGreater(len(labels), 4, model)
            for label in labels:
                self.ok("apply", "-f", DEFAULT, "-c", label)
                self.ok("assert", "-f", DEFAULT, "-c", label)
                # export round-trips what apply made
                exp = os.path.join(self.dir, "export.yaml")
                with open(exp, "w") as f:
                    f.write(self.ok("export").stdout)
                self.ok("assert", "-f", exp, "-c", "current")
                applied += 1
        print("%d layouts applied and asserted" % applied, file=sys.stderr)

    def test_export_shape(self):
        self.machine("NVIDIA A100-SXM4-80GB")
        self.ok("apply", "-f", DEFAULT, "-c", "all-balanced")
        self.assertEqual(self.export(), {"version": "v1", "mig-configs": {"current": [
            {"devices": "all", "mig-enabled": True,
             "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]}})
        j = json.loads(self.ok("export", "-o", "json", "-l", "mine").stdout)
        self.assertIn("mine", j["mig-configs"])

    def test_export_two_models_reads_back_the_applied_config(self):
        """Two MIG models and a T4: export writes what mig-parted writes (issue 20): one
        entry per device-filter with `devices: all`, `mig-devices: {}` where MIG is off,
        profile keys sorted; it reads back equal to the config applied, and asserts."""
        path = os.path.join(self.dir, "two.yaml")
        with open(path, "w") as f:
            f.write('driver: "570.158.01"\ncuda: 12080\ngpus:\n'
                    "  - {model: NVIDIA A100-SXM4-80GB, count: 2}\n"
                    "  - {model: NVIDIA H100 80GB HBM3}\n  - {model: Tesla T4}\n")
        self.env = dict(os.environ, FAKE_NVML_MACHINE=path, GPUSLICE_NVML_LIBRARY=NVML,
                        FAKE_NVML_STATE=os.path.join(self.dir, "two.state"))
        applied = [
            {"device-filter": "0x20B210DE", "devices": "all", "mig-enabled": True,
             "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
            {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True,
             "mig-devices": {"1c.3g.40gb": 3, "3g.40gb": 1}},
            {"device-filter": "0x1EB810DE", "devices": "all", "mig-enabled": False,
             "mig-devices": {}},
        ]
        cfg = os.path.join(self.dir, "cfg.yaml")
        with open(cfg, "w") as f:
            json.dump({"version": "v1", "mig-configs": {"two": applied}}, f)
        self.ok("apply", "-f", cfg, "-c", "two")
        out = self.ok("export").stdout
        self.assertEqual(yaml.safe_load(out)["mig-configs"]["current"], applied)
        self.assertIn('    - device-filter: "0x20B210DE"\n      devices: all\n', out)
        self.assertIn("      mig-enabled: false\n      mig-devices: {}\n", out)
        self.assertIn('        "1c.3g.40gb": 3\n        "3g.40gb": 1\n', out)
        exp = os.path.join(self.dir, "export.yaml")
        with open(exp, "w") as f:
            f.write(out)
        self.ok("assert", "-f", exp, "-c", "current")
        # the same layout on both A100s, another on one of them: lists, as mig-parted
        with open(cfg, "w") as f:
            f.write("version: v1\nmig-configs:\n  split:\n"
                    "    - devices: [0]\n      mig-enabled: true\n"
                    "      mig-devices: {3g.40gb: 2}\n"
                    "    - devices: [1, 2, 3]\n      mig-enabled: false\n")
        self.ok("apply", "-f", cfg, "-c", "split")
        self.assertEqual(self.export()["mig-configs"]["current"], [
            {"device-filter": "0x20B210DE", "devices": [0], "mig-enabled": True,
             "mig-devices": {"3g.40gb": 2}},
            {"device-filter": ["0x1EB810DE", "0x20B210DE", "0x233010DE"], "devices": [1, 2, 3],
             "mig-enabled": False, "mig-devices": {}}])

    def test_compute_instance_sub_profiles(self):
        """1c.3g.40gb x4 + 2c.3g.40gb x1 on A100-80GB: two 3g GPU instances holding those
        compute instances at NVIDIA's CI placements; assert and export round-trip; the MIG
        devices are served as nvidia.com/mig-1c.3g.40gb / mig-2c.3g.40gb with resources.mig
        patterns (without one, NVIDIA's fatal "does not match any resource patterns"); a
        sub-size NVIDIA does not allow is refused before anything changes."""
        self.machine("NVIDIA A100-SXM4-80GB", count=1)
        cfg = os.path.join(self.dir, "ci.yaml")
        with open(cfg, "w") as f:
            f.write("version: v1\nmig-configs:\n  ci:\n  - devices: all\n"
                    "    mig-enabled: true\n"
                    "    mig-devices: {1c.3g.40gb: 4, 2c.3g.40gb: 1}\n"
                    "  bad:\n  - devices: all\n    mig-enabled: true\n"
                    "    mig-devices: {3c.4g.40gb: 1}\n")
        dry = self.ok("apply", "-f", cfg, "-c", "ci", "--dry-run").stdout
        self.assertIn("nvmlGpuInstanceCreateComputeInstanceWithPlacement(GPU 0, new GI, "
                      "2-slice profile, {start 0, size 2})", dry)
        self.ok("apply", "-f", cfg, "-c", "ci")
        self.ok("assert", "-f", cfg, "-c", "ci")
        self.assertEqual(self.export()["mig-configs"]["current"][0]["mig-devices"],
                         {"1c.3g.40gb": 4, "2c.3g.40gb": 1})
        exp = os.path.join(self.dir, "export.yaml")
        with open(exp, "w") as f:
            f.write(self.ok("export").stdout)
        self.ok("assert", "-f", exp, "-c", "current")
        r = subprocess.run([GPUSLICE, "plan", "--mig-strategy", "mixed"],
                           env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("MIG profile '1c.3g.40gb' does not match any resource patterns",
                      r.stdout + r.stderr)
        dp = os.path.join(self.dir, "dp.yaml")
        with open(dp, "w") as f:
            f.write("version: v1\nflags: {migStrategy: mixed}\nresources:\n  mig:\n"
                    "  - {pattern: 1c.3g.40gb, name: mig-1c.3g.40gb}\n"
                    "  - {pattern: 2c.3g.40gb, name: mig-2c.3g.40gb}\n")
        r = subprocess.run([GPUSLICE, "plan", "--config-file", dp, "-o", "json"],
                           env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        res = {x["name"]: len(x["devices"]) for x in json.loads(r.stdout)["resources"]}
        self.assertEqual(res, {"nvidia.com/mig-1c.3g.40gb": 4, "nvidia.com/mig-2c.3g.40gb": 1})
        plan = self.ok("plan").stdout  # this node's layout, compute instances shown
        self.assertIn("1c.3g.40gb at compute slice 2", plan)
        before = self.migs()
        r = self.mig("apply", "-f", cfg, "-c", "bad")
        self.assertEqual(r.returncode, 1)
        self.assertIn("allowed: 1c.4g.40gb, 2c.4g.40gb, 4g.40gb", r.stderr)
        self.assertEqual(self.migs(), before)

    def test_layout_that_does_not_fit_changes_nothing(self):
        self.machine("NVIDIA A100-SXM4-80GB")
        self.ok("apply", "-f", DEFAULT, "-c", "all-1g.10gb")
        before = self.migs()
        bad = os.path.join(self.dir, "bad.yaml")
        with open(bad, "w") as f:
            f.write('version: v1\nmig-configs:\n  three:\n    - devices: all\n'
                    '      mig-enabled: true\n      mig-devices: {"3g.40gb": 3}\n'
                    '  nine:\n    - devices: all\n      mig-enabled: true\n'
                    '      mig-devices: {"4g.40gb": 1, "2g.20gb": 2, "1g.10gb": 1}\n')
        r = self.mig("apply", "-f", bad, "-c", "three")
        self.assertEqual(r.returncode, 1)
        self.assertIn("3g.40gb: 3 wanted, at most 2 fit", r.stderr)
        r = self.mig("apply", "-f", bad, "-c", "nine")
        self.assertIn("memory slices run out", r.stderr)
        self.assertEqual(self.migs(), before)
        r = self.mig("assert", "-f", bad, "-c", "nope")
        self.assertEqual(r.returncode, 1)
        self.assertIn("has no MIG config 'nope'; it has three, nine", r.stderr)

    def test_failure_halfway_restores_previous_layout(self):
        self.machine("NVIDIA A100-SXM4-80GB", count=3)
        self.ok("apply", "-f", DEFAULT, "-c", "all-1g.10gb")
        before, exp_before = self.migs(), self.export()
        # GPU 1's third GPU instance creation fails: GPU 0 has the new layout already, GPU 1
        # goes back to 7x 1g.10gb with the same instances, GPU 2 is not reached (the apply
        # stops at the first failure, as mig-parted does) and keeps its instances
        r = self.mig("apply", "-f", DEFAULT, "-c", "all-balanced",
                     env={"FAKE_NVML_FAIL": "nvmlDeviceCreateGpuInstanceWithPlacement@1#3=23"})
        self.assertEqual(r.returncode, 1)
        self.assertIn("GPU 1: nvmlDeviceCreateGpuInstanceWithPlacement failed", r.stderr)
        self.assertIn("the previous layout was restored (7 GPU instances)", r.stderr)
        after = self.migs()
        self.assertEqual(after[1], before[1])  # the failed GPU: back, same MIG devices
        self.assertEqual(after[2], before[2])
        self.assertNotEqual(after[0], before[0])
        cur = self.export()["mig-configs"]["current"]
        self.assertIn({"devices": [1, 2], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
                      cur)
        self.assertNotEqual(exp_before, self.export())
        # apply again (no fault) finishes the job without touching GPU 0
        self.ok("apply", "-f", DEFAULT, "-c", "all-balanced")
        self.assertEqual(self.migs()[0], after[0])
        self.ok("assert", "-f", DEFAULT, "-c", "all-balanced")

    def test_killed_apply_is_reported_and_finished(self):
        """Issue 19: an apply killed between GPUs (kill -9 as GPU 1 begins) leaves its
        record; assert fails saying so, the next apply reports it and finishes the layout,
        and the record is gone."""
        self.machine("NVIDIA A100-SXM4-80GB", count=3)
        intent = self.env["GPUSLICE_MIG_INTENT_FILE"]
        r = self.mig("apply", "-f", DEFAULT, "-c", "all-1g.10gb",
                     env={"FAKE_NVML_FAIL": "nvmlDeviceCreateGpuInstanceWithPlacement@1#1=9999"})
        self.assertEqual(r.returncode, -9, r.stderr)  # killed mid-way
        self.assertTrue(os.path.exists(intent))
        migs = self.migs()
        self.assertEqual(len(migs[0]), 7)   # done
        self.assertEqual(len(migs[2]), 0)   # not reached
        r = self.mig("assert", "-f", DEFAULT, "-c", "all-1g.10gb")
        self.assertEqual(r.returncode, 1)
        self.assertIn("an apply of 'all-1g.10gb' (%s) by pid" % DEFAULT, r.stderr)
        self.assertIn("GPUs 0 (GPU-", r.stderr)
        self.assertIn("may be between layouts", r.stderr)
        self.assertIn("an earlier apply was interrupted", r.stderr)
        r = self.ok("apply", "-f", DEFAULT, "-c", "all-1g.10gb")
        self.assertIn("did not finish", r.stderr)
        self.assertIn("finishing it", r.stderr)
        self.assertFalse(os.path.exists(intent))
        self.assertEqual([len(m) for m in self.migs()], [7, 7, 7])
        r = self.ok("assert", "-f", DEFAULT, "-c", "all-1g.10gb")
        self.assertNotIn("did not finish", r.stderr)

    def test_only_changed_gpus_touched_and_dry_run(self):
        self.machine("NVIDIA H100 80GB HBM3", count=2)
        self.ok("apply", "-f", DEFAULT, "-c", "all-3g.40gb")
        before = self.migs()
        per_gpu = os.path.join(self.dir, "per-gpu.yaml")
        with open(per_gpu, "w") as f:
            f.write('version: v1\nmig-configs:\n  split:\n'
                    '    - devices: [0]\n      mig-enabled: true\n      mig-devices: {"3g.40gb": 2}\n'
                    '    - devices: [1]\n      mig-enabled: true\n      mig-devices: {"1g.10gb": 7}\n')
        r = self.ok("apply", "-f", per_gpu, "-c", "split", "--dry-run")
        self.assertIn("# GPU 1", r.stdout)
        self.assertNotIn("# GPU 0", r.stdout)
        self.assertIn("nvmlDeviceCreateGpuInstanceWithPlacement(GPU 1, profile 19, {start 6, "
                      "size 1})", r.stdout)
        self.assertEqual(self.migs(), before)  # dry run: nothing changed
        self.ok("apply", "-f", per_gpu, "-c", "split")
        after = self.migs()
        self.assertEqual(after[0], before[0])  # untouched: same MIG devices
        self.assertEqual(len(after[1]), 7)

    def test_checkpoint_restore_and_argv0(self):
        self.machine("NVIDIA A30")
        link = os.path.join(self.dir, "nvidia-mig-parted")
        os.symlink(GPUSLICE, link)
        ck = os.path.join(self.dir, "ck.json")
        self.ok("apply", "-f", DEFAULT, "-c", "all-balanced", argv0=link)
        exp = self.export()
        self.ok("checkpoint", "-f", ck, argv0=link)
        with open(ck) as f:
            state = json.load(f)
        self.assertEqual(state["Version"], "v1")
        self.assertEqual(len(state["MigState"]["Devices"]), 2)
        self.ok("apply", "-f", DEFAULT, "-c", "all-disabled")
        self.assertEqual(self.export()["mig-configs"]["current"][0]["mig-enabled"], False)
        r = self.ok("restore", "-f", ck, env={"MIG_PARTED_DEBUG": "true"})
        self.assertIn("MIG configuration restored successfully", r.stdout)
        self.assertEqual(self.export(), exp)
        r = self.mig("-d", "assert", "-f", DEFAULT, "-c", "all-balanced", "--mode-only")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Selected MIG mode settings from configuration currently applied", r.stdout)
        r = self.mig("assert", "-a", env={"MIG_PARTED_CONFIG_FILE": DEFAULT,
                                          "MIG_PARTED_SELECTED_CONFIG": "all-4g.24gb"})
        self.assertIn("Selected MIG configuration is valid", r.stdout)

    def test_hooks(self):
        self.machine("NVIDIA A100-SXM4-40GB", count=1)
        log = os.path.join(self.dir, "hooks.log")
        hooks = os.path.join(self.dir, "hooks.yaml")
        with open(hooks, "w") as f:
            f.write("version: v1\nhooks:\n")
            for name in ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit"):
                f.write("  %s:\n    - command: /bin/sh\n      args: [\"-c\", \"echo %s "
                        "$MIG_PARTED_SELECTED_CONFIG $MINE >> %s\"]\n      envs: {MINE: x}\n"
                        % (name, name, log))
        self.ok("apply", "-f", DEFAULT, "-c", "all-1g.5gb", "-k", hooks)
        with open(log) as f:
            self.assertEqual(f.read().split("\n"), [
                "apply-start all-1g.5gb x", "pre-apply-mode all-1g.5gb x",
                "pre-apply-config all-1g.5gb x", "apply-exit all-1g.5gb x", ""])
        # a failing hook fails the apply
        with open(hooks, "w") as f:
            f.write("version: v1\nhooks:\n  apply-start:\n    - command: /bin/false\n")
        r = self.mig("apply", "-f", DEFAULT, "-c", "all-7g.40gb", "-k", hooks)
        self.assertEqual(r.returncode, 1)
        self.assertIn("apply-start hook '/bin/false' failed", r.stderr)

    def test_plan(self):
        self.machine("NVIDIA A100-SXM4-80GB", count=1)
        r = subprocess.run([GPUSLICE, "mig", "plan", "--gpu-model", "A100-SXM4-80GB", "--want",
                            "3g.40gb=1,1g.10gb=3", "-o", "json"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        p, = json.loads(r.stdout)
        self.assertTrue(p["fits"])
        self.assertEqual(sorted(x["profile"] for x in p["placements"]),
                         ["1g.10gb", "1g.10gb", "1g.10gb", "3g.40gb"])
        r = subprocess.run([GPUSLICE, "mig", "plan", "--gpu-model", "H100 80GB HBM3", "--want",
                            "3g.40gb=2,1g.10gb=1"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not fit: memory slices run out", r.stdout)
        self.assertIn("closest layout that fits (1)", r.stdout)
        # MIG off: the layouts the GPU could take (profiles are readable with MIG off)
        r = self.ok("plan")
        self.assertIn("GPU 0: NVIDIA A100-SXM4-80GB, MIG off\n", r.stdout)
        self.assertIn("  all-balanced:\n", r.stdout)
        cur, = json.loads(self.ok("plan", "-o", "json").stdout)
        self.assertFalse(cur["mig_enabled"])
        possible = {p["config"]: sorted(x["profile"] for x in p["placements"])
                    for p in cur["possible"]}
        self.assertEqual(possible["all-balanced"], ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"])
        self.assertEqual(possible["all-1g.10gb"], ["1g.10gb"] * 7)
        self.assertEqual(possible["all-7g.80gb"], ["7g.80gb"])
        # this node: its layout and stranded capacity
        self.ok("apply", "-f", DEFAULT, "-c", "all-1g.10gb")
        r = self.ok("plan", "-o", "json")
        cur, = json.loads(r.stdout)
        self.assertEqual(cur["stranded"]["stranded_slices"], 1)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])

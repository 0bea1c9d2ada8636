#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_cdi.py: the CDI spec of the cdi-cri and cdi-annotations strategies, end to end. The
# real `gpuslice device-plugin` on fake machines with a fake driver root (device nodes as
# plain files, the driver's libraries) writes its spec before serving; every CDI name
# kubelet-sim gets from Allocate resolves in that spec; the spec passes the CDI schema
# rules; a live config change that renames devices rewrites it; a node without the driver's
# files refuses to start with a message naming what is missing; unknown CDI feature flags
# are a usage error. `gpuslice cdi generate` prints the same spec.
# Usage: test_cdi.py SOURCE_DIR BUILD_DIR
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

SRC, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdi_schema  # noqa: E402
import fake_driver_root  # noqa: E402

_loader = importlib.machinery.SourceFileLoader("demo", os.path.join(SRC, "scripts/demo"))
_spec = importlib.util.spec_from_loader("demo", _loader)
demo = importlib.util.module_from_spec(_spec)
_loader.exec_module(demo)

MACHINES = os.path.join(SRC, "examples/machines")
GPUSLICE = os.path.join(BUILD, "gpuslice")
NVML = os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1")
VENDOR = "k8s.device-plugin.nvidia.com/gpu="
DRIVER = fake_driver_root.DRIVER
SPEC_NAME = "k8s.device-plugin.nvidia.com-gpu.json"


class Cdi(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gs-cdi-")
        self.driver = os.path.join(self.root, "driver")
        fake_driver_root.make(self.driver)
        self.proc = os.path.join(self.root, "proc")
        os.makedirs(self.proc)
        self.spec_dir = os.path.join(self.root, "cdi")
        self.nodes = []

    def tearDown(self):
        problems = []
        for n in self.nodes:
            problems += n.stop()
        if problems:
            for n in self.nodes:
                with open(n.log.name) as f:
                    sys.stderr.write("--- %s log ---\n%s" % (n.name, f.read()[-4000:]))
        shutil.rmtree(self.root, ignore_errors=True)
        self.assertEqual(problems, [])

    def env(self):
        # the fake NVML keeps the driver's /proc (mig-minors) where the daemon reads it
        return {"FAKE_NVML_PROC_ROOT": self.proc, "GPUSLICE_PROC_ROOT": self.proc,
                "CDI_SPEC_DIR": self.spec_dir}

    def node(self, machine, args=(), config_file=None):
        n = demo.Node("n%d" % len(self.nodes), os.path.join(MACHINES, machine + ".yaml"), None,
                      self.root, BUILD)
        self.nodes.append(n)
        args = ["--driver-root", self.driver] + list(args)
        if config_file:
            args += ["--config-file", config_file]
        n.start_plugin(None, args, self.env())
        return n

    def write_config(self, path, list_strategy, id_strategy):
        """Replaces the config file at once (a rename), as a ConfigMap update does."""
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("version: v1\nflags:\n  plugin:\n    deviceListStrategy: %s\n"
                    "    deviceIDStrategy: %s\n" % (list_strategy, id_strategy))
        os.rename(tmp, path)

    def spec(self):
        with open(os.path.join(self.spec_dir, SPEC_NAME)) as f:
            s = json.load(f)
        self.assertEqual(cdi_schema.problems(s), [])
        return s

    def wait_spec(self, pred, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            try:
                s = self.spec()
                if pred(s):
                    return s
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            if time.monotonic() > deadline:
                self.fail("the CDI spec did not change as expected")
            time.sleep(0.05)

    def names(self, s):
        return {d["name"] for d in s["devices"]}

    def test_cdi_cri_mig_names_resolve(self):
        n = self.node("a100-80gb-all-1g", ["--device-list-strategy", "cdi-cri",
                                           "--mig-strategy", "mixed"])
        res = "nvidia.com/mig-1g.10gb"
        n.wait_allocatable(28, res)
        s = self.spec()
        self.assertEqual(s["kind"], "k8s.device-plugin.nvidia.com/gpu")
        self.assertEqual(len(s["devices"]), 4 + 28 + 1)  # GPUs, MIG devices, all
        pod = n.sim.must("admit m1 %s=3" % res)["pod"]
        self.assertEqual(pod["phase"], "Running")
        alloc = n.sim.must("pod m1")["pod"]["allocate_responses"][0]
        self.assertEqual(len(alloc["cdi_devices"]), 3)
        self.assertEqual(alloc["envs"], {})  # only CDI: the runtime gets all from the spec
        for name in alloc["cdi_devices"]:
            self.assertTrue(name.startswith(VENDOR), name)
            self.assertIn(name[len(VENDOR):], self.names(s))
            dev = [d for d in s["devices"] if d["name"] == name[len(VENDOR):]][0]
            paths = [x["path"] for x in dev["containerEdits"]["deviceNodes"]]
            # the parent GPU and the instance's two capability nodes
            self.assertEqual(len(paths), 3, paths)
            self.assertTrue(paths[1].startswith("/dev/nvidia-caps/nvidia-cap"), paths)
        for m in s["containerEdits"]["mounts"]:
            self.assertTrue(m["hostPath"].startswith(self.driver + "/"), m)
            self.assertEqual(m["hostPath"], self.driver + m["containerPath"])

    def test_index_names_annotations_and_live_rename(self):
        cfg = os.path.join(self.root, "config.yaml")

        def write_cfg(strategy):
            self.write_config(cfg, "cdi-annotations", strategy)

        write_cfg("index")
        n = self.node("h100-nvswitch-8", config_file=cfg)
        n.wait_allocatable(8)
        s = self.spec()
        self.assertEqual(self.names(s), {str(i) for i in range(8)} | {"all"})
        n.sim.must("admit a1 nvidia.com/gpu=2")
        alloc = n.sim.must("pod a1")["pod"]["allocate_responses"][0]
        (key, value), = alloc["annotations"].items()
        self.assertTrue(key.startswith("cdi.k8s.io/nvidia-device-plugin_"), key)
        for name in value.split(","):
            self.assertIn(name[len(VENDOR):], self.names(s))
        # the config now names devices by UUID: the spec follows, same daemon
        pid = n.daemon.pid
        write_cfg("uuid")
        s = self.wait_spec(lambda s: "0" not in self.names(s))
        self.assertEqual(len([x for x in self.names(s) if x.startswith("GPU-")]), 8)
        self.assertEqual(n.daemon.pid, pid)
        self.assertIsNone(n.daemon.poll())

    def test_full_spec_dir_keeps_names_that_resolve(self):
        """Issue 19: with the CDI spec folder full, a config change that renames devices
        cannot be written: the daemon keeps serving the names in the spec on disk (no Allocate
        answers a name the runtime cannot resolve) and writes the new spec, then switches,
        once there is space again, without a signal."""
        cfg = os.path.join(self.root, "config.yaml")

        def write_cfg(strategy):
            self.write_config(cfg, "cdi-cri", strategy)

        os.makedirs(self.spec_dir)
        filler = os.path.join(self.spec_dir, "filler")
        if os.geteuid() == 0:  # a 1 MiB tmpfs, filled up (CI runs as root)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", self.spec_dir],
                           check=True)
            self.addCleanup(subprocess.run, ["umount", "-l", self.spec_dir])
        write_cfg("index")
        n = self.node("h100-nvswitch-8", config_file=cfg)
        n.wait_allocatable(8)
        self.assertIn("0", self.names(self.spec()))
        if os.geteuid() == 0:
            with open(filler, "wb") as f:
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass
        else:  # without root: a folder nobody may write to
            os.chmod(self.spec_dir, 0o555)
        write_cfg("uuid")

        def log():
            with open(n.log.name) as f:
                return f.read()
        deadline = time.monotonic() + 15
        while "trying again in" not in log():
            self.assertLess(time.monotonic(), deadline, "the failed write was not reported")
            time.sleep(0.05)
        for i in range(3):  # pods admitted meanwhile get names the spec on disk resolves
            n.sim.must("admit p%d nvidia.com/gpu=2" % i)
            names = n.sim.must("pod p%d" % i)["pod"]["allocate_responses"][0]["cdi_devices"]
            on_disk = self.names(self.spec())
            for name in names:
                self.assertIn(name[len(VENDOR):], on_disk)
            n.sim.must("delete p%d" % i)
        self.assertNotIn("GPU-", "".join(self.names(self.spec())))
        # space again: rewritten within the retry period (1 s doubling), no SIGHUP
        if os.geteuid() == 0:
            os.unlink(filler)
        else:
            os.chmod(self.spec_dir, 0o755)
        s = self.wait_spec(lambda s: "0" not in self.names(s), 35)
        self.assertEqual(len([x for x in self.names(s) if x.startswith("GPU-")]), 8)
        deadline = time.monotonic() + 10
        while True:  # and the daemon switches to the names it now wrote
            n.sim.must("admit q nvidia.com/gpu=1")
            names = n.sim.must("pod q")["pod"]["allocate_responses"][0]["cdi_devices"]
            n.sim.must("delete q")
            if names[0][len(VENDOR):].startswith("GPU-"):
                break
            self.assertLess(time.monotonic(), deadline, "still the old names: %s" % names)
            time.sleep(0.1)
        self.assertIn(names[0][len(VENDOR):], self.names(s))

    def test_missing_driver_files_refuse_to_start(self):
        empty = os.path.join(self.root, "empty")
        os.makedirs(empty)
        env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, "l20-node.yaml"),
                   FAKE_NVML_STATE=os.path.join(self.root, "st"), **self.env())
        plugin_dir = os.path.join(self.root, "dp")
        r = subprocess.run([GPUSLICE, "device-plugin", "--nvml-library", NVML,
                            "--device-plugin-dir", plugin_dir, "--kubelet-socket", "",
                            "--device-list-strategy", "cdi-cri", "--driver-root", empty],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("device node /dev/nvidia0 not found", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.spec_dir, SPEC_NAME)))
        self.assertEqual([f for f in os.listdir(plugin_dir) if f.endswith(".sock")]
                         if os.path.isdir(plugin_dir) else [], [])
        # the same node with the driver's files but without its libraries
        shutil.rmtree(os.path.join(self.driver, "usr/lib"))
        r = subprocess.run([GPUSLICE, "device-plugin", "--nvml-library", NVML,
                            "--device-plugin-dir", plugin_dir, "--kubelet-socket", "",
                            "--device-list-strategy", "cdi-cri", "--driver-root", self.driver],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no libraries of NVIDIA driver %s" % DRIVER, r.stderr)

    def test_gdrcopy_spec_or_refusal(self):
        args = ["--device-list-strategy", "cdi-cri", "--gdrcopy-enabled"]
        env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, "l20-node.yaml"),
                   FAKE_NVML_STATE=os.path.join(self.root, "st"), **self.env())
        r = subprocess.run([GPUSLICE, "device-plugin", "--nvml-library", NVML, "--kubelet-socket",
                            "", "--device-plugin-dir", os.path.join(self.root, "dp"),
                            "--driver-root", self.driver] + args,
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("gdrcopy is enabled but", r.stderr)
        open(os.path.join(self.driver, "dev/gdrdrv"), "w").close()
        n = self.node("l20-node", args)
        n.wait_allocatable(1)
        n.sim.must("admit g1 nvidia.com/gpu=1")
        names = n.sim.must("pod g1")["pod"]["allocate_responses"][0]["cdi_devices"]
        self.assertIn("k8s.device-plugin.nvidia.com/gdrcopy=all", names)
        with open(os.path.join(self.spec_dir, "k8s.device-plugin.nvidia.com-gdrcopy.json")) as f:
            g = json.load(f)
        self.assertEqual(cdi_schema.problems(g), [])
        self.assertEqual([d["name"] for d in g["devices"]], ["all"])

    def test_unknown_feature_flag_is_a_usage_error(self):
        env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, "l20-node.yaml"))
        for args, envs in ((["--cdi-feature-flags", "foo"], {}),
                           ([], {"CDI_FEATURE_FLAGS": "foo"}),
                           (["--cdi-disable-hooks", "nope"], {})):
            r = subprocess.run([GPUSLICE, "device-plugin", "--nvml-library", NVML] + args,
                               env=dict(env, **envs), capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("unknown CDI", r.stderr)

    def test_generate_command_matches_daemon(self):
        n = self.node("l20-node", ["--device-list-strategy", "cdi-cri"])
        n.wait_allocatable(1)
        daemon_spec = self.spec()
        env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, "l20-node.yaml"),
                   FAKE_NVML_STATE=os.path.join(self.root, "st2"), **self.env())
        env.pop("CDI_SPEC_DIR")
        r = subprocess.run([GPUSLICE, "cdi", "generate", "--nvml-library", NVML,
                            "--driver-root", self.driver], env=env, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), daemon_spec)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])

#!/usr/bin/env python3
"""gpuslice labels against expected label files: every machine in examples/machines x
{no config, time-slicing 4, time-slicing 4 renamed, MIG single, MIG mixed},
compared exactly with tests/data/labels/expected/<machine>--<config>.txt (timestamp off).
`--regenerate` rewrites the expected files (review the diff before committing).
Also: the NFD file and loop of `gpu-feature-discovery` (argv[0] alias)."""
import json
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


def cases():
    """Every machine under every config: a MIG strategy on a node without MIG devices is
    labelled too (GFD reads single there as none, but says mig.strategy)."""
    for m in sorted(os.listdir(MACHINES)):
        if not m.endswith(".yaml"):
            continue
        for c in (None, "ts4", "ts4-renamed", "mig-single", "mig-mixed"):
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
            self.assertGreaterEqual(checked, 50)

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

    def test_gpu_mode_from_pci_class(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, "t4-node.yaml"),
                       FAKE_NVML_STATE=os.path.join(tmp, "state"),
                       GPUSLICE_SYSFS_ROOT=os.path.join(tmp, "sys"))
            inv = json.loads(subprocess.run(
                [GPUSLICE, "inventory", "--nvml-library", NVML, "-o", "json"], env=env,
                capture_output=True, text=True, timeout=60).stdout)
            bus = inv["gpus"][0]["pci"]["bus_id"]
            dev = os.path.join(tmp, "sys", "bus", "pci", "devices", bus[4:].lower())
            os.makedirs(dev)
            with open(os.path.join(dev, "class"), "w") as f:
                f.write("0x030200\n")
            r = subprocess.run([GPUSLICE, "labels", "--nvml-library", NVML], env=env,
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("nvidia.com/gpu.mode=compute\n", r.stdout)

    def vgpu_config(self):
        """256 bytes of PCI config space: the capability list holds a power-management
        capability, then NVIDIA's vendor-specific one with "VF" and a driver record."""
        cfg = bytearray(256)
        cfg[0:2] = b"\xde\x10"
        cfg[0x06] = 0x10  # status: capability list present
        cfg[0x34] = 0x40
        cfg[0x40:0x42] = bytes([0x01, 0x68])  # PM capability, next at 0x68
        cap = bytearray([0x09, 0x00, 0x1b, ord("V"), ord("F"), 0x00, 0x16])
        cap += b"550.54.16".ljust(10, b"\0") + b"r550_40".ljust(10, b"\0")
        cfg[0x68:0x68 + len(cap)] = cap
        return bytes(cfg)

    def test_vgpu_from_pci_config_space(self):
        """vgpu.present was always false: now GFD's scan of the NVIDIA PCI functions'
        vendor-specific capability, with the host driver version and branch."""
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, "t4-node.yaml"),
                       FAKE_NVML_STATE=os.path.join(tmp, "state"),
                       GPUSLICE_SYSFS_ROOT=os.path.join(tmp, "sys"))
            devs = os.path.join(tmp, "sys", "bus", "pci", "devices")
            # a non-NVIDIA device with the same bytes is not looked at
            for name, vendor in (("0000:00:01.0", "0x8086"), ("0000:3b:00.0", "0x10de")):
                os.makedirs(os.path.join(devs, name))
                with open(os.path.join(devs, name, "vendor"), "w") as f:
                    f.write(vendor + "\n")
                with open(os.path.join(devs, name, "config"), "wb") as f:
                    f.write(self.vgpu_config())
            r = subprocess.run([GPUSLICE, "labels", "--nvml-library", NVML], env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("nvidia.com/vgpu.present=true\n", r.stdout)
            self.assertIn("nvidia.com/vgpu.host-driver-version=550.54.16\n", r.stdout)
            self.assertIn("nvidia.com/vgpu.host-driver-branch=r550_40\n", r.stdout)
            # an unprivileged read sees 64 bytes: not a vGPU as far as we can tell, and a
            # warning says why
            with open(os.path.join(devs, "0000:3b:00.0", "config"), "wb") as f:
                f.write(self.vgpu_config()[:64])
            r = subprocess.run([GPUSLICE, "labels", "--nvml-library", NVML], env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertIn("nvidia.com/vgpu.present=false\n", r.stdout)
            self.assertIn("not fully readable", r.stderr)

    def test_clique_from_fabric_info(self):
        """gpu.clique from nvmlDeviceGetGpuFabricInfo (the fake NVML's `fabric:`): one label
        when every fabric-attached GPU agrees, none when they do not."""
        with tempfile.TemporaryDirectory() as tmp:
            def labels(cliques):
                m = os.path.join(tmp, "m.yaml")
                with open(m, "w") as f:
                    f.write('driver: "570.158.01"\ncuda: 12080\ngpus:\n')
                    for c in cliques:
                        f.write("  - model: NVIDIA H100 80GB HBM3\n")
                        if c is not None:
                            f.write('    fabric: {cluster_uuid: "3f2f8e1a-5b7c-4d3e-9a1b-'
                                    '2c3d4e5f6a7b", clique_id: %d}\n' % c)
                env = dict(os.environ, FAKE_NVML_MACHINE=m,
                           FAKE_NVML_STATE=os.path.join(tmp, "state%d" % len(cliques)))
                r = subprocess.run([GPUSLICE, "labels", "--nvml-library", NVML,
                                    "--no-timestamp"], env=env, capture_output=True, text=True,
                                   timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                return dict(l.split("=", 1) for l in r.stdout.splitlines())
            self.assertEqual(labels([7, 7, None])["nvidia.com/gpu.clique"],
                             "3f2f8e1a-5b7c-4d3e-9a1b-2c3d4e5f6a7b.7")
            self.assertNotIn("nvidia.com/gpu.clique", labels([7, 8]))
            self.assertNotIn("nvidia.com/gpu.clique", labels([None]))

    def test_bad_env_is_usage_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, "l20-node.yaml"),
                       FAKE_NVML_STATE=os.path.join(tmp, "state"), MIG_STRATEGY="bogus")
            r = subprocess.run([GPUSLICE, "labels", "--nvml-library", NVML], env=env,
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("MIG_STRATEGY", r.stderr)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_apiserver import FakeApiServer  # noqa: E402


def wait_for(pred, timeout=10.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def read_labels(path):
    try:
        with open(path) as f:
            return dict(l.split("=", 1) for l in f.read().splitlines())
    except FileNotFoundError:
        return None


def gfd(tmp, machine, args, env_extra=None):
    """gpu-feature-discovery (the argv[0] alias) on the fake NVML."""
    link = os.path.join(tmp, "gpu-feature-discovery")
    if not os.path.exists(link):
        os.symlink(os.path.abspath(GPUSLICE), link)
    env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(MACHINES, machine),
               FAKE_NVML_STATE=os.path.join(tmp, "state"))
    env.update(env_extra or {})
    return [link, "--nvml-library", NVML, "--no-timestamp"] + args, env


class FeatureDiscovery(unittest.TestCase):
    def test_oneshot_writes_nfd_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "features.d", "gfd")
            os.makedirs(os.path.dirname(out))
            cmd, env = gfd(tmp, "t4-node.yaml", ["--oneshot", "--use-node-feature-api=false",
                                                "--output-file", out])
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(os.stat(out).st_mode & 0o777, 0o644)
            labels = read_labels(out)
            self.assertEqual(labels["nvidia.com/gpu.product"], "Tesla-T4")
            # NVIDIA's env names work too, and an empty path writes to stdout
            env.update(GFD_ONESHOT="true", GFD_USE_NODE_FEATURE_API="false")
            r = subprocess.run(cmd[:4] + ["--output-file="], env=env, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("nvidia.com/gpu.product=Tesla-T4\n", r.stdout)

    def test_loop_relabels_on_sighup_and_keeps_labels_on_exit(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "gfd")
            cfg = os.path.join(tmp, "config.yaml")
            with open(cfg, "w") as f:
                f.write("version: v1\n")
            cmd, env = gfd(tmp, "l20-node.yaml", ["--use-node-feature-api=false", "-o", out,
                                                 "--sleep-interval", "infinite",
                                                 "--config-file", cfg])
            p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                first = wait_for(lambda: read_labels(out), what="first labels")
                self.assertEqual(first["nvidia.com/gpu.replicas"], "1")
                with open(os.path.join(DATA, "configs", "ts4.yaml")) as src, open(cfg, "w") as f:
                    f.write(src.read())
                p.send_signal(signal.SIGHUP)
                wait_for(lambda: (read_labels(out) or {}).get("nvidia.com/gpu.replicas") == "4",
                         what="relabel after SIGHUP")
                self.assertEqual(read_labels(out)["nvidia.com/gpu.product"], "NVIDIA-L20-SHARED")
            finally:
                p.send_signal(signal.SIGTERM)
                self.assertEqual(p.wait(timeout=10), 0)
                p.stdout.close()
                p.stderr.close()
            # NVIDIA #796: labels stay when the process stops
            self.assertEqual(read_labels(out)["nvidia.com/gpu.replicas"], "4")

    def test_node_feature_created_then_updated(self):
        api = FakeApiServer(["gpu-node-1"])
        try:
            with tempfile.TemporaryDirectory() as tmp:
                cfg = os.path.join(tmp, "config.yaml")
                with open(cfg, "w") as f:
                    f.write("version: v1\n")
                cmd, env = gfd(tmp, "t4-node.yaml",
                               ["--oneshot", "--config-file", cfg,
                                "--api-server", "http://127.0.0.1:%d" % api.port],
                               {"NODE_NAME": "gpu-node-1", "NAMESPACE": "gpu-operator"})
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                key = ("apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-operator/nodefeatures/"
                       "nvidia-features-for-gpu-node-1")
                with api.state.cond:
                    obj = json.loads(json.dumps(api.state.objects[key]))
                self.assertEqual(obj["kind"], "NodeFeature")
                self.assertEqual(obj["metadata"]["labels"],
                                 {"nfd.node.kubernetes.io/node-name": "gpu-node-1"})
                self.assertEqual(obj["spec"]["labels"]["nvidia.com/gpu.replicas"], "1")
                rv1 = obj["metadata"]["resourceVersion"]
                # unchanged labels: no write
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                with api.state.cond:
                    self.assertEqual(api.state.objects[key]["metadata"]["resourceVersion"], rv1)
                    puts = [q for q in api.state.requests if q["method"] == "PUT"]
                self.assertEqual(puts, [])
                # changed config: the same object is updated
                with open(os.path.join(DATA, "configs", "ts4.yaml")) as src, open(cfg, "w") as f:
                    f.write(src.read())
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                with api.state.cond:
                    obj = json.loads(json.dumps(api.state.objects[key]))
                    n = len(api.state.objects)
                self.assertEqual(n, 1)
                self.assertEqual(obj["spec"]["labels"]["nvidia.com/gpu.replicas"], "4")
                self.assertNotEqual(obj["metadata"]["resourceVersion"], rv1)
        finally:
            api.down()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[4:] if a != "--regenerate"])

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_nvidia_chart.py: NVIDIA's Helm chart with only the image swapped (issue 9). Takes the
# containers of the chart as rendered (tests/data/nvidia-chart/*.yaml) and runs our binary
# under each `command` (argv[0]) with their env exactly as rendered, against the fake NVML,
# kubelet-sim and fake_apiserver.py: the plugin registers; the init container (config-manager
# one-shot) links /config/config.yaml to the labelled config; the sidecar repoints it on a
# label change and SIGHUPs the plugin, whose capacity follows; an unknown label keeps the
# config and posts an Event; NVIDIA's /usr/bin/<name> form of PROCESS_TO_SIGNAL is found.
# A pod's filesystem is simulated: each volume is a temp dir and env values under a
# mountPath are rewritten to it. What stands in for the cluster is added to the env and
# said so: GPUSLICE_KUBE_API_SERVER (the in-cluster service account), GPUSLICE_NVML_LIBRARY
# (the driver root), the plugin's --device-plugin-dir (the hostPath mount) and, for the
# sidecars, GPUSLICE_PROC_ROOT: a /proc holding only the pod's processes (what
# shareProcessNamespace shows), so a sidecar never signals another test's process.
# Usage: test_nvidia_chart.py SOURCE_DIR BUILD_DIR
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_apiserver import FakeApiServer  # noqa: E402
from test_reload_live import ConfigMapDir, demo, wait_for  # noqa: E402

SRC, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
DATA = os.path.join(SRC, "tests/data/nvidia-chart")
GPUSLICE = os.path.join(BUILD, "gpuslice")
LABEL = "nvidia.com/device-plugin.config"
NODE = "gpu-node-1"
GPU = "nvidia.com/gpu"
STEP_S = 10


def load(name):
    with open(os.path.join(DATA, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def daemonset(docs, name):
    return [d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == name][0]


def entrypoint():
    """The image's ENTRYPOINT, from the Dockerfile (what a container without command runs)."""
    with open(os.path.join(SRC, "deployments/container/Dockerfile")) as f:
        for line in f:
            if line.startswith("ENTRYPOINT "):
                return json.loads(line[len("ENTRYPOINT "):])
    raise AssertionError("no ENTRYPOINT in the Dockerfile")


def argv0(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().split(b"\0")[0]


def container(pod, name):
    for c in pod.get("initContainers", []) + pod["containers"]:
        if c["name"] == name:
            return c
    raise KeyError(name)


class Pod:
    """One pod's volumes as temp dirs; runs its containers as processes."""

    def __init__(self, root, docs, ds, node_dir):
        self.spec = ds["spec"]["template"]["spec"]
        self.root = root
        self.dirs = {}
        cms = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
        for v in self.spec["volumes"]:
            path = os.path.join(root, "volumes", v["name"])
            if "configMap" in v:
                ConfigMapDir(path, cms[v["configMap"]["name"]])
            elif v.get("hostPath", {}).get("path") == "/var/lib/kubelet/device-plugins":
                path = node_dir  # the node's kubelet directory (kubelet-sim's)
            else:
                os.makedirs(path)
            self.dirs[v["name"]] = path
        self.procs = []

    def mounts(self, c):
        return sorted(((m["mountPath"], self.dirs[m["name"]]) for m in c.get("volumeMounts", [])),
                      key=lambda m: -len(m[0]))

    def path(self, c, p):
        for mount, host in self.mounts(c):
            if p == mount or p.startswith(mount + "/"):
                return host + p[len(mount):]
        return p

    def env(self, c, extra):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        for e in c.get("env", []):
            if "valueFrom" in e:
                field = e["valueFrom"]["fieldRef"]["fieldPath"]
                env[e["name"]] = {"spec.nodeName": NODE,
                                  "metadata.namespace": "nvidia-device-plugin"}[field]
            else:
                v = "" if e.get("value") is None else str(e["value"])
                env[e["name"]] = self.path(c, v) if v.startswith("/") else v
        env.update(extra)
        return env

    def run(self, c, extra_env, args=(), log=None, wait=False):
        # Kubernetes: command replaces the image's ENTRYPOINT, args are appended to it
        argv = list(c.get("command") or entrypoint()) + c.get("args", []) + list(args)
        p = subprocess.Popen(argv, executable=GPUSLICE, env=self.env(c, extra_env),
                             stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        if wait:
            out, _ = p.communicate(timeout=STEP_S)
            return p.returncode, out
        self.procs.append(p)
        return p

    def proc_view(self, procs):
        """The pod's own processes as a /proc for GPUSLICE_PROC_ROOT: what
        shareProcessNamespace shows the sidecar, so it cannot signal another test's
        nvidia-device-plugin running on this machine at the same time."""
        root = os.path.join(self.root, "proc")
        for p in procs:
            os.makedirs(os.path.join(root, str(p.pid)), exist_ok=True)
            with open("/proc/%d/cmdline" % p.pid, "rb") as src, \
                    open(os.path.join(root, str(p.pid), "cmdline"), "wb") as dst:
                dst.write(src.read())
        return root

    def stop(self):
        rcs = []
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            rcs.append(p.returncode)
        return rcs


class ChartCase(unittest.TestCase):
    def setUp(self):
        for k in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
                  "CONFIG_FILE", "NODE_NAME"):
            os.environ.pop(k, None)
        self.root = tempfile.mkdtemp(prefix="gs-chart-")
        self.api = FakeApiServer([NODE])
        self.addCleanup(self.api.down)
        self.node = demo.Node("node", os.path.join(SRC, "examples/machines/l20-node.yaml"),
                              None, self.root, BUILD)
        self.pods = []
        self.log_path = os.path.join(self.root, "pod.log")
        self.log = open(self.log_path, "w")

    def tearDown(self):
        rcs = []
        for p in self.pods:
            rcs += p.stop()
        problems = self.node.stop()
        self.log.close()
        if sys.exc_info()[0] or problems:
            with open(self.log_path) as f:
                sys.stderr.write("--- pod log ---\n" + f.read()[-20000:])
        shutil.rmtree(self.root, ignore_errors=True)
        self.assertEqual(problems, [])
        self.assertTrue(all(rc == 0 for rc in rcs), "a container exited with %s" % rcs)

    def stand_ins(self):
        """What the cluster gives a pod and a test must give explicitly."""
        return {"GPUSLICE_KUBE_API_SERVER": "http://127.0.0.1:%d" % self.api.port,
                "GPUSLICE_NVML_LIBRARY": os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1"),
                "FAKE_NVML_MACHINE": self.node.machine,
                "FAKE_NVML_STATE": os.path.join(self.node.dir, "nvml.state")}

    def pod(self, file, ds_name):
        docs = load(file)
        p = Pod(os.path.join(self.root, "pod%d" % len(self.pods)), docs,
                daemonset(docs, ds_name), self.node.plugin_dir)
        self.pods.append(p)
        return p

    def start_plugin(self, pod):
        c = container(pod.spec, "nvidia-device-plugin-ctr")
        self.assertEqual(c.get("command", entrypoint()), ["nvidia-device-plugin"])
        plugin_dir = pod.path(c, "/var/lib/kubelet/device-plugins")
        return pod.run(c, self.stand_ins(), ["--device-plugin-dir", plugin_dir], self.log)

    def set_label(self, value):
        self.api.state.set_label(NODE, LABEL, value)

    def capacity(self):
        for r in self.node.sim.must("capacity")["resources"]:
            if r["resource"] == GPU:
                return r["capacity"], r["allocatable"]
        return 0, 0

    def wait_capacity(self, n):
        self.wait(lambda: self.capacity() == (n, n), "%s capacity %d" % (GPU, n))

    def wait_allocatable(self, n):
        """NVIDIA's chart does not mount /var/lib/kubelet/pod-resources, so the plugin cannot
        tell whether pods hold the replicas a smaller config drops: it keeps them listed as
        Unhealthy (capacity stays, allocatable follows). docs/deploy.md says so."""
        self.wait(lambda: self.capacity()[1] == n, "%s allocatable %d" % (GPU, n))

    def wait(self, cond, what):
        """wait_for with the pod's log in the failure."""
        try:
            wait_for(cond, STEP_S, what)
        except AssertionError as e:
            raise AssertionError("%s\n--- pod log ---\n%s" % (e, self.log_text()[-6000:]))

    def log_text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()


class DefaultValues(ChartCase):
    def test_plugin_registers_with_chart_defaults(self):
        pod = self.pod("defaults.yaml", "nvdp-nvidia-device-plugin")
        self.assertNotIn("initContainers", pod.spec)
        self.start_plugin(pod)
        self.wait_capacity(1)  # one L20, no sharing: the chart's default
        self.assertIn("nvidia.com/gpu", [r["resource"] for r in
                                         self.node.sim.must("capacity")["resources"]])


class StaticManifest(ChartCase):
    def test_args_only_manifest_runs_the_plugin(self):
        """NVIDIA's static manifests give args and no command: the image's ENTRYPOINT runs."""
        pod = self.pod("static.yaml", "nvidia-device-plugin-daemonset")
        self.assertNotIn("command", pod.spec["containers"][0])
        p = self.start_plugin(pod)
        self.wait_capacity(1)
        self.assertEqual(argv0(p.pid), b"nvidia-device-plugin")


class ConfigMapCase(ChartCase):
    def test_init_sidecar_plugin_follow_the_label(self):
        pod = self.pod("configmap.yaml", "nvdp-nvidia-device-plugin")
        self.assertTrue(pod.spec["shareProcessNamespace"])
        init = container(pod.spec, "nvidia-device-plugin-init")
        sidecar = container(pod.spec, "nvidia-device-plugin-sidecar")
        dst = pod.path(init, "/config/config.yaml")
        srcdir = pod.path(init, "/available-configs")
        self.set_label("l20")

        rc, out = pod.run(init, self.stand_ins(), wait=True)
        self.assertEqual(rc, 0, out)
        self.assertEqual(os.readlink(dst), os.path.join(srcdir, "l20"))

        plugin = self.start_plugin(pod)
        self.wait_capacity(8)
        pod.run(sidecar, dict(self.stand_ins(), GPUSLICE_PROC_ROOT=pod.proc_view([plugin])),
                log=self.log)
        self.wait(lambda: "already points at" in self.log_text(),
                  "the sidecar's first look at the label")
        self.assertNotIn("sent signal", self.log_text())  # nothing changed, nothing sent

        self.set_label("t4")
        self.wait(lambda: os.readlink(dst) == os.path.join(srcdir, "t4"),
                  "the sidecar to repoint %s" % dst)
        self.wait(lambda: "sent signal 1 to pid %d" % plugin.pid in self.log_text(),
                  "SIGHUP to the plugin")
        self.wait_allocatable(3)
        self.assertIn("SIGHUP: reloading", self.log_text())
        self.assertIsNone(plugin.poll())  # the same plugin process

        # NVIDIA's exits here; we keep t4, log it and post an Event on the node
        self.set_label("h100")
        self.wait(lambda: [e for e in self.api.state.events
                          if e.get("reason") == "ConfigNotFound"], "a ConfigNotFound Event")
        self.assertEqual(os.readlink(dst), os.path.join(srcdir, "t4"))
        self.assertIn("keeping the current config", self.log_text())
        self.assertEqual(self.capacity()[1], 3)

        # label removed: DEFAULT_CONFIG=any (2 replicas)
        self.set_label(None)
        self.wait(lambda: os.readlink(dst) == os.path.join(srcdir, "any"),
                  "the default config")
        self.wait_allocatable(2)
        self.assertTrue(all(p.poll() is None for p in pod.procs))

    def test_unknown_label_reported_once_across_reconnects(self):
        pod = self.pod("configmap.yaml", "nvdp-nvidia-device-plugin")
        sidecar = container(pod.spec, "nvidia-device-plugin-sidecar")
        dst = pod.path(sidecar, "/config/config.yaml")
        self.set_label("t4")
        pod.run(sidecar, self.stand_ins(), log=self.log)
        self.wait(lambda: os.path.lexists(dst), "the first link")
        self.set_label("h100")
        not_found = lambda: [e for e in self.api.state.events  # noqa: E731
                             if e.get("reason") == "ConfigNotFound"]
        self.wait(not_found, "a ConfigNotFound Event")
        self.api.down()
        self.wait(lambda: "Kubernetes API unreachable" in self.log_text(), "the watch to notice")
        self.api.up()
        self.wait(lambda: self.log_text().count("Kubernetes API reachable\n") >= 2,
                  "the watch to reconnect")
        self.assertEqual(len(not_found()), 1)  # the same bad value is not reported again
        self.assertEqual(os.path.basename(os.readlink(dst)), "t4")
        self.set_label("l20")  # good again, then bad again: reported again
        self.wait(lambda: os.path.basename(os.readlink(dst)) == "l20", "l20")
        self.set_label("h100")
        self.wait(lambda: len(not_found()) == 2, "the second Event")

    def test_init_with_unknown_label_starts_on_the_default(self):
        pod = self.pod("configmap.yaml", "nvdp-nvidia-device-plugin")
        init = container(pod.spec, "nvidia-device-plugin-init")
        self.set_label("h100")
        rc, out = pod.run(init, self.stand_ins(), wait=True)
        self.assertEqual(rc, 0, out)  # NVIDIA's init container fails: the pod never starts
        self.assertEqual(os.path.basename(os.readlink(pod.path(init, "/config/config.yaml"))),
                         "any")
        self.assertIn("no current config, using the default config instead", out)
        self.assertTrue([e for e in self.api.state.events if e.get("reason") == "ConfigNotFound"])

    def test_mps_sidecar_finds_usr_bin_form(self):
        # NVIDIA's chart signals /usr/bin/mps-control-daemon; its container runs
        # [mps-control-daemon]. A stand-in process with that argv[0] shows the SIGHUP arrives.
        pod = self.pod("configmap.yaml", "nvdp-nvidia-device-plugin-mps-control-daemon")
        sidecar = container(pod.spec, "mps-control-daemon-sidecar")
        ctr = container(pod.spec, "mps-control-daemon-ctr")
        self.assertEqual(ctr["command"], ["mps-control-daemon"])
        self.assertEqual([e["value"] for e in sidecar["env"]
                          if e["name"] == "PROCESS_TO_SIGNAL"], ["/usr/bin/mps-control-daemon"])
        self.set_label("l20")
        stand_in = subprocess.Popen(["mps-control-daemon", "3600"], executable="sleep")
        try:
            # the stand-in's cmdline is read once exec has happened (its argv[0] is ours)
            self.wait(lambda: argv0(stand_in.pid) == b"mps-control-daemon",
                      "the stand-in to start")
            pod.run(sidecar, dict(self.stand_ins(),
                                  GPUSLICE_PROC_ROOT=pod.proc_view([stand_in])), log=self.log)
            self.wait(lambda: os.path.lexists(pod.path(sidecar, "/config/config.yaml")),
                      "the first link")  # nothing was linked before: a change, signalled
            stand_in.wait(timeout=STEP_S)
            self.assertEqual(stand_in.returncode, -signal.SIGHUP)
            self.assertIn("sent signal 1 to pid %d (/usr/bin/mps-control-daemon)" % stand_in.pid,
                          self.log_text())
        finally:
            if stand_in.poll() is None:
                stand_in.kill()
                stand_in.wait()


class ConfigManagerErrors(ChartCase):
    def init(self):
        pod = self.pod("configmap.yaml", "nvdp-nvidia-device-plugin")
        return pod, container(pod.spec, "nvidia-device-plugin-init")

    def test_api_unreachable_fails_the_init_container(self):
        pod, init = self.init()
        self.api.down()
        rc, out = pod.run(init, self.stand_ins(), wait=True)
        self.assertEqual(rc, 1, out)
        self.assertIn("reading node gpu-node-1 label nvidia.com/device-plugin.config", out)
        self.assertIn("check that the API server is reachable", out)
        self.assertFalse(os.path.lexists(pod.path(init, "/config/config.yaml")))

    def test_missing_node_name_is_a_usage_error(self):
        pod, init = self.init()
        env = pod.env(init, self.stand_ins())
        del env["NODE_NAME"]
        r = subprocess.run(["config-manager"], executable=GPUSLICE, env=env,
                           capture_output=True, text=True, timeout=STEP_S)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no node name: set NODE_NAME", r.stderr)

    def test_destination_is_a_directory(self):
        pod, init = self.init()
        self.set_label("l20")
        os.makedirs(pod.path(init, "/config/config.yaml"))
        rc, out = pod.run(init, self.stand_ins(), wait=True)
        self.assertEqual(rc, 1, out)
        self.assertIn("CONFIG_FILE_DST is a directory", out)


class OtherNames(unittest.TestCase):
    def test_every_command_name_exists(self):
        """Each chart command dispatches to a gpuslice command with a working --help."""
        for name in ("nvidia-device-plugin", "config-manager", "gpu-feature-discovery",
                     "mps-control-daemon", "nvidia-mig-parted"):
            r = subprocess.run([name, "--help"], executable=GPUSLICE, capture_output=True,
                               text=True, timeout=STEP_S)
            self.assertNotIn("unknown command", r.stdout + r.stderr, name)
            self.assertEqual(r.returncode, 0, "%s --help: %s" % (name, r.stderr))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)

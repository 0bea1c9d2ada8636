#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# dra_harness.py: one fake DRA node for test_dra_plugin.py and bench/bench_dra.py: a temp
# tree (driver root, plugins, registry, CDI root, fake NVML state and XID events file),
# fake_apiserver.py as the API server, kubelet-sim as the kubelet's DRA side, and
# `gpuslice dra-plugin` started and stopped on them. No assertions of its own beyond
# "this step worked": what to check is the caller's business.
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_driver_root  # noqa: E402
from fake_apiserver import FakeApiServer  # noqa: E402

DRIVER = "gpu.nvidia.com"
NODE = "node-1"
WAIT_S = 15


def wait_for(pred, what, timeout=WAIT_S, interval=0.05):
    """pred()'s first true answer, polling every interval seconds; AssertionError past
    timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(interval)
    raise AssertionError("timed out waiting for " + what)


class Sim:
    """kubelet-sim with its DRA side, one JSON answer per command."""

    def __init__(self, sim, root, registry, *extra):
        self.proc = subprocess.Popen(
            [sim, "--dir", os.path.join(root, "device-plugins"), "--plugins-registry", registry,
             "-o", "json", "--rpc-timeout-ms", "10000"] + list(extra),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def cmd(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=WAIT_S)
        self.proc.stdout.close()
        assert self.proc.returncode in (0, 1), "kubelet-sim exited with %s" % self.proc.returncode


class DraNode:
    """A fake node running `gpuslice dra-plugin`. Mix into a TestCase (call node_up in
    setUp, node_down in tearDown) or use on its own (bench). node_up needs src and build:
    the source tree and the build directory."""

    machine = "h100-nvswitch-8"
    sim_args = ()  # extra kubelet-sim flags (e.g. --dra-v1beta1)

    def node_up(self, src, build, start=True):
        self.build = build
        self.machines = os.path.join(src, "examples/machines")
        self.gpuslice = os.path.join(build, "gpuslice")
        self.nvml = os.path.join(build, "tools/fake-nvml/libnvidia-ml.so.1")
        self.smi = os.path.join(build, "tools/fake-nvidia-smi/nvidia-smi")
        self.fake_mps = os.path.join(build, "tools/fake-mps/nvidia-cuda-mps-control")
        self.root = tempfile.mkdtemp(prefix="gs-dra-")
        self.driver = fake_driver_root.make(os.path.join(self.root, "driver"))
        self.proc_root = os.path.join(self.root, "proc")
        self.plugins = os.path.join(self.root, "plugins")
        self.registry = os.path.join(self.root, "plugins_registry")
        self.cdi = os.path.join(self.root, "cdi")
        for d in (self.proc_root, self.plugins, self.registry, self.cdi):
            os.makedirs(d)
        self.state = os.path.join(self.root, "nvml.state")
        self.events = os.path.join(self.root, "xid-events")
        open(self.events, "w").close()
        self.smi_log = os.path.join(self.root, "smi.log")
        self.smi_state = os.path.join(self.root, "smi.state")
        self.api = FakeApiServer([NODE])
        self.url = "http://127.0.0.1:%d" % self.api.port
        self.plugin = None
        self.log = open(os.path.join(self.root, "plugin.log"), "w+")
        self.sim = Sim(os.path.join(build, "tools/kubelet-sim/kubelet-sim"), self.root,
                       self.registry, *self.sim_args)
        if start:
            self.start_plugin()

    def node_down(self):
        """Stops everything and removes the tree; the problems found (a list of texts). The
        plugin's log goes to stderr when there are any, or with GS_TEST_VERBOSE."""
        problems = []
        if self.plugin:
            problems += self.stop_plugin()
        self.sim.stop()
        self.api.down()
        if problems or os.environ.get("GS_TEST_VERBOSE"):
            self.log.seek(0)
            sys.stderr.write("--- plugin log ---\n" + self.log.read()[-6000:])
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)
        return problems

    # ---- the plugin ---------------------------------------------------------------------

    def env(self):
        env = dict(os.environ,
                   FAKE_NVML_MACHINE=os.path.join(self.machines, self.machine + ".yaml"),
                   FAKE_NVML_STATE=self.state, FAKE_NVML_EVENTS=self.events,
                   FAKE_NVML_PROC_ROOT=self.proc_root, GPUSLICE_PROC_ROOT=self.proc_root,
                   FAKE_NVIDIA_SMI_LOG=self.smi_log, FAKE_NVIDIA_SMI_STATE=self.smi_state,
                   GPUSLICE_MPS_CONTROL=self.fake_mps, NODE_NAME=NODE)
        for k in ("KUBECONFIG", "CDI_ROOT", "NAMESPACE"):
            env.pop(k, None)
        return env

    def spawn_plugin(self, *extra):
        """Starts the plugin without waiting for anything."""
        self.plugin = subprocess.Popen(
            [self.gpuslice, "dra-plugin", "--kube-api-server", self.url,
             "--nvml-library", self.nvml, "--cdi-root", self.cdi,
             "--nvidia-driver-root", self.driver, "--container-driver-root", self.driver,
             "--kubelet-plugins-directory-path", self.plugins,
             "--kubelet-registrar-directory-path", self.registry,
             "--nvidia-smi", self.smi, "--image-name", "ignored", "-v", "4",
             "--device-plugin-dir", os.path.join(self.root, "device-plugins")] + list(extra),
            env=self.env(), stdout=self.log, stderr=subprocess.STDOUT)

    def start_plugin(self, *extra):
        """Starts the plugin and waits until kubelet-sim has it registered; its entry."""
        self.spawn_plugin(*extra)
        return wait_for(lambda: self.registered(), "the plugin to register")

    def registered(self):
        for p in self.sim.cmd("dra-drivers")["plugins"]:
            if p["driver"] == DRIVER and p["registered"] and not p["removed"] and \
                    (self.plugin is None or p.get("registrations", 0) >= 1):
                return p
        return None

    def stop_plugin(self):
        self.plugin.send_signal(signal.SIGTERM)
        rc = self.plugin.wait(timeout=WAIT_S)
        self.plugin = None
        return [] if rc == 0 else ["dra-plugin exited with %s" % rc]

    def xid(self, gpu_index, xid=79):
        """Appends an XID event for the fake NVML to deliver."""
        with open(self.events, "a") as f:
            f.write("xid %d %d\n" % (gpu_index, xid))

    def log_text(self):
        with open(self.log.name) as f:
            return f.read()

    # ---- the API ------------------------------------------------------------------------

    def http(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, method=method, data=data)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def slices(self):
        code, body = self.http("GET", "/apis/resource.k8s.io/v1/resourceslices")
        assert code == 200, "GET resourceslices: %s %s" % (code, body)
        return [s for s in body["items"] if s["spec"]["driver"] == DRIVER]

    def devices_now(self):
        """The one slice's device names, or None while there is not exactly one slice."""
        s = self.slices()
        if len(s) != 1:
            return None
        return [d["name"] for d in s[0]["spec"]["devices"]]

    def slice_devices(self, n=None, interval=0.05):
        """The one slice's device names, waiting for n of them when n is given."""
        def one():
            names = self.devices_now()
            return names if names is not None and (n is None or len(names) == n) else None
        return wait_for(one, "a slice of %s devices" % n, interval=interval)

    def claim(self, name, devices, config=None, ns="team", admin=False):
        """Creates an allocated ResourceClaim for devices (one request each, with
        adminAccess when admin); its uid."""
        results = [{"request": "r%d" % i, "driver": DRIVER, "pool": NODE, "device": d}
                   for i, d in enumerate(devices)]
        for r in results if admin else []:
            r["adminAccess"] = True
        status = {"allocation": {"devices": {"results": results}},
                  "reservedFor": [{"resource": "pods", "name": name + "-pod",
                                   "uid": "pod-uid-" + name}]}
        if config is not None:
            status["allocation"]["devices"]["config"] = [
                {"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": config}}]
        body = {"metadata": {"name": name, "namespace": ns},
                "spec": {"devices": {"requests": [
                    {"name": r["request"], "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                    for r in results]}},
                "status": status}
        code, made = self.http(
            "POST", "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims" % ns, body)
        assert code == 201, "POST resourceclaim %s: %s %s" % (name, code, made)
        return made["metadata"]["uid"]

    def prepare(self, name, uid, ns="team", verb="dra-prepare"):
        """kubelet-sim's answer to `verb` for one claim."""
        return self.sim.cmd("%s %s %s/%s:%s" % (verb, DRIVER, ns, name, uid))

    def spec_path(self, uid):
        return os.path.join(self.cdi, "k8s.gpu.nvidia.com-claim_%s.yaml" % uid)

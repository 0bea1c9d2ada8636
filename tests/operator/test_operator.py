#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_operator.py: the GPU Operator v26.7.0 and NVIDIA's DRA chart v25.12.0 (and v0.4.0,
# kubernetes-sigs/dra-driver-nvidia-gpu) with only the image swapped (issue 27). render.py renders the operand DaemonSets from the Operator's
# released assets and the DRA chart's kubelet plugin from its templates (upstream/,
# SOURCES.md); every container then runs exactly as rendered (command, args with Kubernetes'
# $(VAR) expansion, env with fieldRefs resolved, the scripts its ConfigMaps mount) with
# chroot on the filesystem `scripts/image-rootfs` builds, one private mount namespace per
# container for its volumes, against the fake NVML, kubelet-sim and fake_apiserver.py.
# What stands in for the cluster, and only that, is added and said so:
#   - a pod's filesystem is a hard-linked copy of the rootfs; hostPath volumes are folders
#     of a fake host root; configMap volumes hold the rendered ConfigMaps' data;
#   - the NVIDIA container runtime: containers that see GPUs (NVIDIA_VISIBLE_DEVICES not
#     void) get the driver's libnvidia-ml.so.1 (the fake NVML), nvidia-smi and
#     nvidia-cuda-mps-control (tools/fake-mps) injected, as nvidia-container-runtime does;
#   - the driver: the fake NVML and nvidia-smi under the host's /run/nvidia/driver (the
#     Operator's driver container) and / (a host-installed driver, the DRA chart's default);
#   - the validator: /run/nvidia/validations/{driver,toolkit}-ready written by the test;
#   - the service account: GPUSLICE_KUBE_API_SERVER; FAKE_NVML_* name the fake machine.
# Needs root (chroot, mount namespaces) and apt (the rootfs); exits 77 (skipped) without.
# Usage: test_operator.py SOURCE_DIR BUILD_DIR [unittest args]
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import unittest
import urllib.request


HERE = os.path.dirname(os.path.abspath(__file__))
SRC, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SRC, "tests/integration"))
import dra_harness  # noqa: E402
import render  # noqa: E402
from fake_apiserver import FakeApiServer  # noqa: E402
from test_reload_label import control  # noqa: E402
from test_reload_live import wait_for  # noqa: E402

IMAGE = "localhost/gpuslice:operator-lane"
NVIDIA_VALIDATOR = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.7.0"
NODE = "gpu-node-1"
SIM = os.path.join(BUILD, "tools/kubelet-sim/kubelet-sim")
NVML = os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1")
# the driver's nvidia-smi as the DRA chart's init container runs it (`--version`, clean
# environment): a stand-in that answers and exits 0, as a working driver's does
SMI_STANDIN = "#!/bin/sh\necho 'NVIDIA-SMI (stand-in): 2 GPUs'\nexit 0\n"
MPS = os.path.join(BUILD, "tools/fake-mps/nvidia-cuda-mps-control")
WAIT_S = 30
LIBDIR = "usr/lib/x86_64-linux-gnu"
MACHINE = ('driver: "570.158.01"\ncuda: 12080\ngpus:\n'
           '  - model: NVIDIA A100-SXM4-80GB\n    count: 2\n')
# the Operator's time-slicing guide: this ConfigMap, then devicePlugin.config
# {name: time-slicing-config-all, default: any} in the ClusterPolicy
GUIDE_CONFIG = {"any": "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n"
                       "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"}
MPS_CONFIG = {"mps": "version: v1\nsharing:\n  mps:\n    resources:\n"
                     "    - name: nvidia.com/gpu\n      replicas: 2\n"}


def image_env():
    """The image's ENV (Dockerfile; scripts/image-oci writes the same) and PATH."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    with open(os.path.join(SRC, "deployments/container/Dockerfile")) as f:
        text = f.read().replace("\\\n", " ")
    for line in text.splitlines():
        if line.startswith("ENV "):
            for kv in line[4:].split():
                k, _, v = kv.partition("=")
                env[k] = v
    return env


def expand(s, env):
    """Kubernetes' $(VAR) expansion of command and args ($$ is a literal $)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), s)


def free_port():
    """A TCP port nothing listens on now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path):
    """The body of GET http://127.0.0.1:<port><path> when it answers 200, else None."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=2) as r:
            return r.read().decode() if r.status == 200 else None
    except OSError:
        return None


def Sim(host, *extra):
    """kubelet-sim serving the fake host's kubelet folders, one JSON answer per command."""
    kubelet = os.path.join(host, "var/lib/kubelet")
    return dra_harness.Sim(SIM, kubelet, os.path.join(kubelet, "plugins_registry"), *extra)


class Pod:
    """One pod of a rendered DaemonSet on the fake node: its filesystem, volumes and env."""

    def __init__(self, case, ds, configmaps, name):
        self.case, self.ds, self.name = case, ds, name
        self.spec = ds["spec"]["template"]["spec"]
        self.ns = ds["metadata"]["namespace"]
        self.dir = tempfile.mkdtemp(prefix="pod-", dir=case.work)
        self.volumes = {}
        for v in self.spec.get("volumes", []):
            self.volumes[v["name"]] = self._volume(v, configmaps)
        self.procs = []

    def rootfs(self, c, env):
        """The container's own filesystem: a fresh hard-linked copy of the image's (what one
        container writes there, another never sees), with what nvidia-container-runtime
        injects when the container sees GPUs."""
        root = os.path.join(self.dir, "rootfs-" + c["name"])
        subprocess.run(["cp", "-al", self.case.rootfs, root], check=True)
        if env.get("NVIDIA_VISIBLE_DEVICES", "") not in ("void", "none", ""):
            for src, dst in ((NVML, LIBDIR + "/libnvidia-ml.so.1"),
                             (self.case.smi, "usr/bin/nvidia-smi"),
                             (MPS, "usr/bin/nvidia-cuda-mps-control")):
                os.makedirs(os.path.dirname(os.path.join(root, dst)), exist_ok=True)
                if os.path.lexists(os.path.join(root, dst)):
                    os.unlink(os.path.join(root, dst))  # a hard link into the image
                shutil.copy(src, os.path.join(root, dst))
        return root

    def _volume(self, v, configmaps):
        if "hostPath" in v:
            path = os.path.join(self.case.host, v["hostPath"]["path"].lstrip("/"))
            os.makedirs(path, exist_ok=True)
            return path
        path = os.path.join(self.dir, "vol-" + v["name"])
        os.makedirs(path)
        if "configMap" in v:
            data = configmaps[v["configMap"]["name"]]
            items = v["configMap"].get("items") or [{"key": k, "path": k} for k in data]
            for it in items:
                with open(os.path.join(path, it["path"]), "w") as f:
                    f.write(data[it["key"]])
                os.chmod(os.path.join(path, it["path"]), v["configMap"].get("defaultMode", 0o644))
        return path

    def container(self, name):
        for c in self.spec.get("initContainers", []) + self.spec["containers"]:
            if c["name"] == name:
                return c
        raise KeyError(name)

    def env_of(self, c):
        env = image_env()
        fields = {"spec.nodeName": NODE, "metadata.namespace": self.ns,
                  "metadata.name": self.name}
        for e in c.get("env", []):
            if "valueFrom" in e:
                env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                env[e["name"]] = expand(str(e.get("value", "")), env)
        # stand-ins for the cluster (see the file head)
        env["GPUSLICE_KUBE_API_SERVER"] = "http://127.0.0.1:%d" % self.case.api.port
        env["FAKE_NVML_MACHINE"] = "/fake-nvml/machine.yaml"
        env["FAKE_NVML_STATE"] = "/fake-nvml/state"
        return env

    def start(self, name, log=None):
        """Starts container `name` as rendered; returns the Popen (output in <pod>/<name>.log)."""
        c = self.container(name)
        env = self.env_of(c)
        argv = [expand(a, env) for a in (c.get("command") or []) + (c.get("args") or [])]
        assert argv, "%s: no command (would run the ENTRYPOINT)" % name
        script = ["set -e", 'r="$1"; shift',
                  'mount -t proc proc "$r/proc"', 'mount --rbind /dev "$r/dev"',
                  'mkdir -p "$r/fake-nvml"', 'mount --bind "%s" "$r/fake-nvml"' % self.case.fake]
        for m in c.get("volumeMounts", []):
            src = self.volumes[m["name"]]
            if m.get("subPath"):
                src = os.path.join(src, m["subPath"])
            dst = "$r" + m["mountPath"]
            kind = "touch" if os.path.isfile(src) else "mkdir -p"
            script.append('[ -e "%s" ] || { mkdir -p "$(dirname "%s")"; %s "%s"; }'
                          % (dst, dst, kind, dst))
            script.append('mount --bind "%s" "%s"' % (src, dst))
        script.append('exec chroot "$r" "$@"')
        log = open(os.path.join(self.dir, name + ".log"), "w")
        p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--",
                              "/bin/sh", "-c", "\n".join(script), "sh",
                              self.rootfs(c, env)] + argv,
                             env=env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        log.close()
        p.container = name
        self.procs.append(p)
        return p

    def run(self, name, timeout=WAIT_S):
        """Runs an init container to its end; returns (exit code, output)."""
        p = self.start(name)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(p)
            raise AssertionError("%s still running after %ss: %s" % (name, timeout,
                                                                      self.log(name)))
        return rc, self.log(name)

    def log(self, name):
        with open(os.path.join(self.dir, name + ".log")) as f:
            return f.read()

    def kill(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            os.killpg(p.pid, sig)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def stop(self):
        for p in reversed(self.procs):
            self.kill(p)


class OperatorLane(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gs-operator-")
        cls.rootfs = os.path.join(cls.tmp, "rootfs")
        r = subprocess.run([os.path.join(SRC, "scripts/image-rootfs"), BUILD, cls.rootfs],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 77:
            shutil.rmtree(cls.tmp)
            raise unittest.SkipTest("the rootfs cannot be built here: " + r.stdout.strip())
        assert r.returncode == 0, "scripts/image-rootfs: " + r.stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="case-", dir=self.tmp)
        self.host = os.path.join(self.work, "host")  # the node's filesystem
        self.fake = os.path.join(self.work, "fake-nvml")
        os.makedirs(self.fake)
        with open(os.path.join(self.fake, "machine.yaml"), "w") as f:
            f.write(MACHINE)
        for d in ("run/nvidia/driver/" + LIBDIR, "run/nvidia/driver/usr/bin", LIBDIR,
                  "usr/bin", "run/nvidia/validations", "var/lib/kubelet/device-plugins",
                  "var/lib/kubelet/pod-resources"):
            os.makedirs(os.path.join(self.host, d), exist_ok=True)
        self.smi = os.path.join(self.work, "nvidia-smi")
        with open(self.smi, "w") as f:
            f.write(SMI_STANDIN)
        os.chmod(self.smi, 0o755)
        for root in ("run/nvidia/driver/", ""):  # the Operator's driver, and a host driver
            shutil.copy(NVML, os.path.join(self.host, root + LIBDIR))
            shutil.copy(self.smi, os.path.join(self.host, root + "usr/bin"))
        self.api = FakeApiServer([NODE])
        self.pods, self.sims = [], []

    def tearDown(self):
        for p in self.pods:
            p.stop()
        for s in self.sims:
            s.stop()
        self.api.down()
        if not hasattr(self, "_outcome") or self._failed():
            print("pod logs kept in %s" % self.work, file=sys.stderr)
            for p in self.pods:
                for f in sorted(os.listdir(p.dir)):
                    if f.endswith(".log"):
                        print("---- %s/%s\n%s" % (p.name, f, p.log(f[:-4])[-3000:]),
                              file=sys.stderr)
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    def _failed(self):
        result = self._outcome.result
        return any(t is self for t, _ in result.failures + result.errors)

    # ---- helpers

    def validations(self, driver=True, toolkit=True):
        """What the Operator's validator writes when the driver and the toolkit are ready."""
        v = os.path.join(self.host, "run/nvidia/validations")
        if driver:
            with open(os.path.join(v, "driver-ready"), "w") as f:
                f.write("IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT=/run/nvidia/driver\n"
                        "DRIVER_ROOT_CTR_PATH=/driver-root\nNVIDIA_DEV_ROOT=/run/nvidia/driver\n"
                        "DEV_ROOT_CTR_PATH=/driver-root\n")
        if toolkit:
            open(os.path.join(v, "toolkit-ready"), "w").close()

    def operator(self, config=None):
        img = {"image": IMAGE}
        policy = {"devicePlugin": dict(img), "gfd": dict(img), "migManager": dict(img),
                  "validator": {"image": NVIDIA_VALIDATOR}, "mig": {"strategy": "single"}}
        configmaps = {}
        if config:
            name, data, default = config
            policy["devicePlugin"]["config"] = {"name": name, "default": default}
            configmaps[name] = data
        out = render.render_operator(policy)
        out["configmaps"].update(configmaps)
        return out

    def pod(self, rendered, ds_name):
        p = Pod(self, rendered["daemonsets"][ds_name], rendered["configmaps"],
                ds_name + "-x1b2c")
        self.pods.append(p)
        return p

    def swapped(self, pod):
        """Every container runs our image, except the validator's init containers."""
        for c in pod.spec.get("initContainers", []) + pod.spec["containers"]:
            want = NVIDIA_VALIDATOR if "validation" in c["name"] else IMAGE
            self.assertEqual(c["image"], want, c["name"])

    def init_ok(self, pod, name):
        rc, out = pod.run(name)
        self.assertEqual(rc, 0, "init container %s exited %d: %s" % (name, rc, out))
        return out

    def running(self, pod, p):
        self.assertIsNone(p.poll(), "%s exited %s: %s" % (p.container, p.returncode,
                                                          pod.log(p.container)))

    def labels(self):
        return control(self.api.control_port, "GET", "/_test/node?node=" + NODE)["metadata"][
            "labels"]

    def set_label(self, key, value):
        control(self.api.control_port, "POST", "/_test/label?key=%s&value=%s" % (key, value))

    # ---- the Operator's operands

    def test_device_plugin_with_guide_time_slicing(self):
        """state-device-plugin with devicePlugin.config = the guide's time-slicing ConfigMap:
        toolkit-validation waits for toolkit-ready, config-manager-init picks 'any', the
        plugin starts through the Operator's entrypoint.sh (waits for driver-ready, sources
        it, lsmod) and registers 2 GPUs x 4 replicas; the config-manager sidecar runs."""
        r = self.operator(("time-slicing-config-all", GUIDE_CONFIG, "any"))
        pod = self.pod(r, "nvidia-device-plugin-daemonset")
        self.swapped(pod)
        main = pod.container("nvidia-device-plugin")
        self.assertEqual(main["command"] + main["args"], ["/bin/sh", "-c", "/bin/entrypoint.sh"])
        # toolkit-validation blocks until the validator says the toolkit is ready
        p = pod.start("toolkit-validation")
        wait_for(lambda: "waiting for nvidia container stack" in pod.log("toolkit-validation"),
                 WAIT_S, "toolkit-validation waiting")
        self.validations(driver=False)
        self.assertEqual(p.wait(timeout=WAIT_S), 0, pod.log("toolkit-validation"))
        self.init_ok(pod, "config-manager-init")
        sim = Sim(self.host)
        self.sims.append(sim)
        dp = pod.start("nvidia-device-plugin")
        wait_for(lambda: "waiting for the driver validations" in pod.log("nvidia-device-plugin"),
                 WAIT_S, "the entrypoint waiting for driver-ready")
        self.validations()
        caps = wait_for(lambda: {c["resource"]: c for c in sim.cmd("capacity")["resources"]}
                        .get("nvidia.com/gpu", {}).get("allocatable") == 8 and
                        sim.cmd("capacity"), WAIT_S + 10, "nvidia.com/gpu x 8")
        self.assertIn("Starting nvidia-device-plugin", pod.log("nvidia-device-plugin"))
        self.assertIn("IS_HOST_DRIVER=false", pod.log("nvidia-device-plugin"))  # cat'ed
        devs = sim.cmd("devices nvidia.com/gpu")["devices"]
        self.assertTrue(all(re.fullmatch(r"GPU-[0-9a-f-]+::[0-3]", d["id"]) for d in devs), devs)
        side = pod.start("config-manager")
        wait_for(lambda: "config" in pod.log("config-manager").lower(), WAIT_S,
                 "the config-manager sidecar's first log line")
        self.running(pod, side)
        self.running(pod, dp)
        print("device plugin: %s" % caps, file=sys.stderr)

    def test_gfd_writes_node_feature(self):
        """gpu-feature-discovery as the Operator renders it (NodeFeature API, the guide's
        config): the NodeFeature object carries nvidia.com/gpu.replicas=4 and the product."""
        r = self.operator(("time-slicing-config-all", GUIDE_CONFIG, "any"))
        pod = self.pod(r, "gpu-feature-discovery")
        self.swapped(pod)
        self.validations()
        self.init_ok(pod, "toolkit-validation")
        self.init_ok(pod, "config-manager-init")
        gfd = pod.start("gpu-feature-discovery")

        def node_feature():
            for path, obj in control(self.api.control_port, "GET",
                                     "/_test/objects")["items"].items():
                if "nodefeatures" in path:
                    labels = obj.get("spec", {}).get("labels", {})
                    if labels.get("nvidia.com/gpu.replicas") == "4":
                        return obj
            return None
        nf = wait_for(node_feature, WAIT_S, "a NodeFeature with nvidia.com/gpu.replicas=4")
        labels = nf["spec"]["labels"]
        self.assertEqual(labels["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-80GB-SHARED")
        self.assertEqual(labels["nvidia.com/gpu.count"], "2")
        self.assertEqual(nf["metadata"]["namespace"], render.NAMESPACE)
        self.running(pod, gfd)

    def test_mps_control_daemon_default_root(self):
        """state-mps-control-daemon: neither container passes an MPS root; mount-shm and
        the daemon both take NVIDIA's /mps (the host's /run/nvidia/mps), the daemon starts
        one control daemon for the config's MPS resource and writes .ready."""
        r = self.operator(("mps-config", MPS_CONFIG, "mps"))
        pod = self.pod(r, "nvidia-device-plugin-mps-control-daemon")
        self.swapped(pod)
        for name in ("mps-control-daemon-mounts", "mps-control-daemon-ctr"):
            c = pod.container(name)
            self.assertNotIn("MPS_ROOT", [e["name"] for e in c.get("env", [])])
            self.assertFalse([a for a in c.get("args", []) if "mps-root" in a])
        self.validations()
        self.init_ok(pod, "toolkit-validation")
        self.init_ok(pod, "mps-control-daemon-mounts")
        self.init_ok(pod, "config-manager-init")
        d = pod.start("mps-control-daemon-ctr")
        ready = os.path.join(self.host, "run/nvidia/mps/.ready")
        wait_for(lambda: os.path.exists(ready), WAIT_S, "/mps/.ready on the host")
        self.running(pod, d)
        self.assertNotIn("no MPS root", pod.log("mps-control-daemon-ctr"))

    def test_mig_manager_applies_label(self):
        """state-mig-manager: the Operator's entrypoint.sh execs nvidia-mig-manager with its
        env (no custom config: generated from the hardware, DEFAULT_CONFIG_FILE beside);
        nvidia.com/mig.config=all-1g.10gb -> pending -> success, 14 MIG devices on the
        (fake) GPUs, the device plugin and GFD paused meanwhile and back, the driver,
        toolkit and validator labels untouched."""
        r = self.operator()
        pod = self.pod(r, "nvidia-mig-manager")
        self.swapped(pod)
        kept = ("driver", "container-toolkit", "operator-validator", "mig-manager")
        paused = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter")
        for op in kept + paused:
            self.set_label("nvidia.com/gpu.deploy." + op, "true")
        self.validations()
        self.init_ok(pod, "toolkit-validation")
        sim = Sim(self.host, "--pod-resources-socket",
                  os.path.join(self.host, "var/lib/kubelet/pod-resources/kubelet.sock"))
        self.sims.append(sim)
        mgr = pod.start("nvidia-mig-manager")
        wait_for(lambda: "layouts from" in pod.log("nvidia-mig-manager"), WAIT_S,
                 "nvidia-mig-manager started")
        self.assertIn("Starting nvidia-mig-manager", pod.log("nvidia-mig-manager"))
        seen = set()

        def state():
            labels = self.labels()
            for op in paused:
                if labels.get("nvidia.com/gpu.deploy." + op) == "paused-for-mig-change":
                    seen.add(op)
            return labels.get("nvidia.com/mig.config.state") == "success" and labels
        self.set_label("nvidia.com/mig.config", "all-1g.10gb")
        labels = wait_for(state, WAIT_S, "nvidia.com/mig.config.state=success")
        self.assertEqual(seen, set(paused))
        labels = wait_for(lambda: all(self.labels().get("nvidia.com/gpu.deploy." + op) == "true"
                                      for op in paused) and self.labels(), WAIT_S,
                          "the paused operands back to true")
        for op in kept:
            self.assertEqual(labels["nvidia.com/gpu.deploy." + op], "true", op)
        with open(os.path.join(self.fake, "state")) as f:
            state_text = f.read()
        # the fake NVML's state: 7 GPU instances of profile 19 (1g.10gb on A100-80GB) per GPU
        gis = [line.split() for line in state_text.splitlines() if line.startswith("gi ")]
        self.assertEqual(sorted((g[1], g[3]) for g in gis),
                         sorted((str(i), "19") for i in range(2) for _ in range(7)), state_text)
        self.running(pod, mgr)

    def test_mig_parted_call_forms(self):
        """nvidia-mig-parted as mig-parted v0.15.0 calls it (pkg/mig/reconfigure, in its
        order: assert --valid-config, assert, assert --mode-only, -d apply --mode-only,
        -d assert --mode-only, -d apply), then generate-config (its systemd service's form,
        and how gpuslice's nvidia-mig-manager makes its config), then assert once more: the
        layout is applied."""
        r = self.operator()
        pod = self.pod(r, "nvidia-mig-manager")
        cfg = "/mig-parted-config/config-default.yaml"
        sel = ["-f", cfg, "-c", "all-1g.10gb"]
        forms = [(["assert", "--valid-config"] + sel, 0),
                 (["assert"] + sel, 1),
                 (["assert", "--mode-only"] + sel, 1),
                 (["-d", "apply", "--mode-only"] + sel, 0),
                 (["-d", "assert", "--mode-only"] + sel, 0),
                 (["-d", "apply"] + sel, 0),
                 (["generate-config", "-f", "/tmp/generated.yaml"], 0),
                 (["assert"] + sel, 0)]
        c = pod.container("nvidia-mig-manager")
        for i, (args, want) in enumerate(forms):
            c["command"], c["args"] = ["nvidia-mig-parted"], args
            c["name"] = "form%d" % i
            rc, out = pod.run(c["name"])
            self.assertEqual(rc, want, "nvidia-mig-parted %s: %s" % (" ".join(args), out))

    # ---- NVIDIA's DRA chart

    def dra(self, values, version="25.12.0"):
        repo, _, tag = IMAGE.rpartition(":")
        v = {"image": {"repository": repo, "tag": tag}}
        v.update(values)
        ds = render.render_dra_chart(v, version)[0]
        ds["metadata"]["namespace"] = render.DRA_CHARTS[version][1]
        return {"daemonsets": {"kubelet-plugin": ds}, "configmaps": {}}

    def test_dra_chart_kubelet_plugin(self):
        """The chart with resources.computeDomains.enabled=false: the init container runs our
        kubelet-plugin-prestart.sh (links /driver-root, finds nvidia-smi and libnvidia-ml,
        runs nvidia-smi --version), then the 'gpus' container's bash -c '...
        gpu-kubelet-plugin -v 4' registers with the kubelet, publishes its ResourceSlice and
        SERVES its gRPC health probe (liveness) on the chart's port."""
        r = self.dra({"resources": {"computeDomains": {"enabled": False}}})
        pod, gpus = self.dra_plugin_runs(r)
        self.running(pod, gpus)

    def test_dra_chart_v040_kubelet_plugin(self):
        """The v0.4.0 chart (kubernetes-sigs/dra-driver-nvidia-gpu, renamed
        dra-driver-nvidia-gpu) the same way; its kubeletPlugin.metrics (on by default) sets
        HTTP_ENDPOINT and METRICS_PATH=/metrics on the 'gpus' container: the plugin serves
        /metrics there. gpuHttpEndpoint (:8080 by default) is moved to a free port: the
        lane shares the host's network."""
        port = free_port()
        r = self.dra({"resources": {"computeDomains": {"enabled": False}},
                      "kubeletPlugin": {"metrics": {"gpuHttpEndpoint": ":%d" % port}}},
                     "0.4.0")
        env = {e["name"]: e.get("value") for e in
               r["daemonsets"]["kubelet-plugin"]["spec"]["template"]["spec"]["containers"][0]
               ["env"]}
        self.assertEqual((env["HTTP_ENDPOINT"], env["METRICS_PATH"]), (":%d" % port, "/metrics"))
        pod, gpus = self.dra_plugin_runs(r)
        body = wait_for(lambda: http_get(port, "/metrics"), WAIT_S, "/metrics on :%d" % port)
        self.assertIn("gpuslice_dra_devices", body)
        self.running(pod, gpus)

    def dra_plugin_runs(self, r):
        """The init container, then the 'gpus' container up: registered, its slice
        published, its gRPC health probe SERVING. Returns the pod and the container."""
        pod = self.pod(r, "kubelet-plugin")
        self.assertEqual([c["name"] for c in pod.spec["containers"]], ["gpus"])
        out = self.init_ok(pod, "init-container")
        self.assertIn("create symlink: /driver-root -> /driver-root-parent/", out)
        self.assertIn("/driver-root/usr/bin/nvidia-smi --version", out)
        self.assertIn("nvidia-smi returned 0", out)
        sim = Sim(self.host)
        self.sims.append(sim)
        gpus = pod.start("gpus")
        got = sim.cmd("dra-wait gpu.nvidia.com %d" % (WAIT_S * 1000))
        self.assertTrue(got.get("ok", True), got)
        port = int(pod.env_of(pod.container("gpus"))["HEALTHCHECK_PORT"])
        self.assertEqual(port, 51516)
        wait_for(lambda: self.health(port, "liveness") == "SERVING", WAIT_S,
                 "grpc health liveness SERVING on :%d" % port)
        slices = wait_for(lambda: control(self.api.control_port, "GET", "/_test/dra")
                          .get("resourceslices"), WAIT_S, "a ResourceSlice")
        self.assertEqual([(s["spec"]["driver"], s["spec"]["nodeName"], len(s["spec"]["devices"]))
                          for s in slices], [("gpu.nvidia.com", NODE, 2)])
        return pod, gpus

    def health(self, port, service):
        """grpc.health.v1.Health/Check as the kubelet's grpc probe sends it."""
        import grpc
        req = b"\x0a" + bytes([len(service)]) + service.encode()  # HealthCheckRequest.service
        try:
            with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
                check = ch.unary_unary("/grpc.health.v1.Health/Check",
                                       request_serializer=lambda b: b,
                                       response_deserializer=lambda b: b)
                return "SERVING" if check(req, timeout=2) == b"\x08\x01" else "NOT_SERVING"
        except grpc.RpcError:
            return None

    def test_dra_chart_prestart_explains_missing_driver(self):
        """No driver under nvidiaDriverRoot: the init container keeps waiting and explains
        what to set (the chart value, the Operator's /run/nvidia/driver)."""
        r = self.dra({"nvidiaDriverRoot": "/run/nvidia/driver",
                      "resources": {"computeDomains": {"enabled": False}}})
        shutil.rmtree(os.path.join(self.host, "run/nvidia/driver"))
        pod = self.pod(r, "kubelet-plugin")
        c = pod.container("init-container")
        c["env"].append({"name": "PRESTART_INTERVAL_S", "value": "0.1"})  # the test's pace
        p = pod.start("init-container")
        wait_for(lambda: "Hint: /run/nvidia/driver is where the GPU Operator" in
                 pod.log("init-container"), WAIT_S, "the explanation")
        out = pod.log("init-container")
        self.assertIn("nvidiaDriverRoot", out)
        self.assertIn("nvidia-smi: not found", out)
        self.assertIsNone(p.poll())
        pod.kill(p)
        self.assertEqual(p.returncode, 0, "SIGTERM ends the wait with 0")

    def test_dra_chart_compute_domains_fail_naming_the_value(self):
        """The chart's defaults (computeDomains on): the compute-domains container fails at
        once, naming resources.computeDomains.enabled=false."""
        r = self.dra({})
        pod = self.pod(r, "kubelet-plugin")
        self.assertEqual([c["name"] for c in pod.spec["containers"]], ["compute-domains", "gpus"])
        rc, out = pod.run("compute-domains", timeout=10)
        self.assertEqual(rc, 1, out)
        self.assertIn("compute-domain-kubelet-plugin:", out)
        self.assertIn("resources.computeDomains.enabled=false", out)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIPPED: needs root (chroot, mount namespaces)")
        sys.exit(77)
    for tool in ("chroot", "unshare", "cp"):
        if not shutil.which(tool):
            print("SKIPPED: %s not installed" % tool)
            sys.exit(77)
    if subprocess.run(["unshare", "--mount", "true"]).returncode != 0:
        print("SKIPPED: cannot create a mount namespace here")
        sys.exit(77)
    if os.environ.get("GS_SANITIZE_BUILD", "").lower() in ("on", "1", "true"):
        print("SKIPPED: a sanitizer build: the image carries a release binary")
        sys.exit(77)
    prog = unittest.main(argv=[sys.argv[0]] + sys.argv[3:], exit=False)
    r = prog.result
    if r.testsRun and len(r.skipped) == r.testsRun:
        sys.exit(77)
    sys.exit(0 if r.wasSuccessful() else 1)

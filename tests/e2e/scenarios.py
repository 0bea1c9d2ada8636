#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# scenarios.py BUILD_DIR [NAME...]: the e2e scenarios on the real one-node cluster that
# tests/e2e/cluster started (KUBECONFIG, E2E_RUN). Each overlay is rendered with kubectl
# kustomize as shipped, plus only what this machine needs (e2e_kustomization: the image
# built here, hostNetwork with the API server at 127.0.0.1:6443 since there is no pod
# network or kube-proxy, the fake NVML as the host driver), and applied with kubectl; the
# kinds a 1.20 API server lacks (ValidatingAdmissionPolicy, GA in 1.30) are left out and
# said so. Every check waits on a condition with a deadline and prints its timing.
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

import yaml

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(sys.argv[1])
ONLY = sys.argv[2:]
RUN = os.environ.get("E2E_RUN", "/tmp/gpuslice-e2e")
KUBECONFIG = os.path.join(RUN, "admin.kubeconfig")
os.environ["KUBECONFIG"] = KUBECONFIG
CTR_SOCK = os.path.join(RUN, "containerd", "containerd.sock")
NODE = subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip()
NS = "gpuslice"
METRICS_PORT = 19400  # not NVIDIA's 9400: a shared machine
DRIVER_ROOT = os.path.join(RUN, "driver-root")
FAKE = os.path.join(RUN, "fake-nvml")
BUSYBOX = "gpuslice-e2e/busybox:1"
NOT_IN_1_20 = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

results = []  # (scenario, ok, seconds, detail)


class Fail(Exception):
    pass


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def sh(*args, check=True, input=None, timeout=120):
    r = subprocess.run(list(args), capture_output=True, text=True, input=input, timeout=timeout)
    if check and r.returncode != 0:
        raise Fail("%s: exit %d: %s" % (" ".join(args[:4]), r.returncode,
                                        (r.stderr or r.stdout).strip()[-800:]))
    return r


def kubectl(*args, **kw):
    return sh("kubectl", *args, **kw)


def kjson(*args):
    return json.loads(kubectl(*args, "-o", "json").stdout)


def wait(what, pred, timeout=90.0, interval=0.5):
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        try:
            last = pred()
        except (Fail, KeyError, IndexError, ValueError, OSError) as e:
            last = e
            last_ok = False
        else:
            last_ok = bool(last)
        if last_ok:
            return last, time.monotonic() - t0
        time.sleep(interval)
    raise Fail("%s: not after %.0f s (last: %s)" % (what, timeout, str(last)[:600]))


# ---- the node, its plugin, its pods ------------------------------------------------------

def node():
    return kjson("get", "node", NODE)


def allocatable(res):
    return node()["status"].get("allocatable", {}).get(res)


def label(key, value=None):
    if value is None:
        kubectl("label", "node", NODE, key + "-", check=False)
    else:
        kubectl("label", "node", NODE, "%s=%s" % (key, value), "--overwrite")


def plugin_pod():
    pods = kjson("get", "pods", "-n", NS, "-l",
                 "app.kubernetes.io/name=gpuslice-device-plugin")["items"]
    pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return pods[0] if len(pods) == 1 else None


def plugin_ready():
    p = plugin_pod()
    if not p:
        return None
    st = p["status"].get("containerStatuses", [])
    return p if st and st[0].get("ready") else None


def plugin_logs(since_s=None):
    p = plugin_pod()
    args = ["logs", "-n", NS, p["metadata"]["name"]]
    if since_s:
        args += ["--since=%ds" % since_s]
    return kubectl(*args, check=False).stdout


def metrics():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % METRICS_PORT, timeout=5) as r:
        return r.read().decode()


def workload(name, res, n, selector=None):
    spec = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"e2e": "workload"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX,
                                     "imagePullPolicy": "Never",
                                     "command": ["sleep", "100000"],
                                     "resources": {"limits": {res: str(n)}}}]}}
    if selector:
        spec["spec"]["nodeSelector"] = selector
    kubectl("apply", "-f", "-", input=json.dumps(spec))


def pod(name):
    return kjson("get", "pod", "-n", "default", name)


def running(name):
    return pod(name)["status"].get("phase") == "Running"


def delete_workloads():
    kubectl("delete", "pods", "-n", "default", "-l", "e2e=workload", "--wait=true",
            "--timeout=60s", check=False)


def node_events(reason):
    items = kjson("get", "events", "-n", "default", "--field-selector",
                  "involvedObject.kind=Node,reason=%s" % reason)["items"]
    return [e for e in items if e.get("source", {}).get("component") == "gpuslice"]


# ---- overlays ---------------------------------------------------------------------------

def image_ref():
    with tarfile.open(os.path.join(BUILD, "gpuslice-image.tar")) as t:
        index = json.load(t.extractfile("index.json"))
    return index["manifests"][0]["annotations"]["io.containerd.image.name"]


def e2e_kustomization(overlay, machine, env=None, mps_daemon=False):
    """The overlay as shipped, plus only what this machine needs."""
    d = os.path.join(RUN, "k", overlay)
    os.makedirs(d, exist_ok=True)
    name, tag = image_ref().rsplit(":", 1)
    extra_env = [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                 {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
                 {"name": "GPUSLICE_METRICS_ADDRESS", "value": ":%d" % METRICS_PORT},
                 {"name": "NVIDIA_DRIVER_ROOT", "value": DRIVER_ROOT},
                 {"name": "FAKE_NVML_STATE", "value": "/fake-nvml/state"},
                 {"name": "FAKE_NVML_EVENTS", "value": "/fake-nvml/events"}]
    if machine:
        extra_env.append({"name": "FAKE_NVML_MACHINE", "value": "/fake-nvml/machine.yaml"})
    for k, v in (env or {}).items():
        extra_env.append({"name": k, "value": v})
    smp = {"apiVersion": "apps/v1", "kind": "DaemonSet",
           "metadata": {"name": "gpuslice-device-plugin"},
           "spec": {"template": {"spec": {
               "hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet",
               "containers": [{"name": "device-plugin", "env": extra_env,
                               "volumeMounts": [{"name": "fake-nvml",
                                                 "mountPath": "/fake-nvml"}]}],
               "volumes": [{"name": "driver-root", "hostPath": {"path": DRIVER_ROOT}},
                           {"name": "fake-nvml", "hostPath": {"path": FAKE,
                                                              "type": "Directory"}}]}}}}
    port = [{"op": "replace", "path": "/spec/template/spec/containers/0/ports/0/containerPort",
             "value": METRICS_PORT}]
    patches = [{"patch": json.dumps(smp)},
               {"patch": json.dumps(port),
                "target": {"kind": "DaemonSet", "name": "gpuslice-device-plugin"}}]
    if mps_daemon:  # overlays/mps-split's control daemon: the same, plus the fake MPS
        mps = json.loads(json.dumps(smp))
        mps["metadata"]["name"] = "gpuslice-mps-control-daemon"
        c = mps["spec"]["template"]["spec"]["containers"][0]
        c["name"] = "mps-control-daemon"
        c["env"] = [e for e in c["env"] if e["name"] != "GPUSLICE_METRICS_ADDRESS"] + [
            {"name": "GPUSLICE_MPS_CONTROL", "value": "/fake-nvml/nvidia-cuda-mps-control"}]
        patches.append({"patch": json.dumps(mps)})
    k = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
         "resources": [os.path.relpath(os.path.join(SRC, "deployments/kustomize/overlays",
                                                    overlay), d)],
         "images": [{"name": "registry.example.com/gpuslice", "newName": name,
                     "newTag": tag}],
         "patches": patches}
    with open(os.path.join(d, "kustomization.yaml"), "w") as f:
        json.dump(k, f, indent=1)
    return d


def prepare_driver(machine):
    """The fake NVML where the host driver would be, its machine file and state."""
    lib = os.path.join(DRIVER_ROOT, "usr/lib/x86_64-linux-gnu")
    os.makedirs(lib, exist_ok=True)
    sh("cp", os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1"), lib)
    os.makedirs(FAKE, exist_ok=True)
    for f in ("state", "events", "machine.yaml"):
        if os.path.exists(os.path.join(FAKE, f)):
            os.unlink(os.path.join(FAKE, f))
    open(os.path.join(FAKE, "events"), "w").close()
    # NVIDIA's runtime would inject nvidia-cuda-mps-control: the fake one, for mps-split
    sh("cp", os.path.join(BUILD, "tools/fake-mps/nvidia-cuda-mps-control"), FAKE)
    if machine:
        sh("cp", os.path.join(SRC, "examples/machines", machine),
           os.path.join(FAKE, "machine.yaml"))


def apply_overlay(overlay, machine, env=None, mps_daemon=False):
    prepare_driver(machine)
    d = e2e_kustomization(overlay, machine, env, mps_daemon)
    docs = [x for x in yaml.safe_load_all(kubectl("kustomize", d).stdout) if x]
    left = [x for x in docs if x["kind"] in NOT_IN_1_20]
    docs = [x for x in docs if x["kind"] not in NOT_IN_1_20]
    if left:
        log("  %s: left out (Kubernetes 1.20 has no such kind): %s" % (
            overlay, ", ".join("%s/%s" % (x["kind"], x["metadata"]["name"]) for x in left)))
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    with open(os.path.join(RUN, "k", overlay, "applied.json"), "w") as f:
        f.write(text)
    kubectl("apply", "-f", "-", input=text)
    return docs


def remove_overlay(overlay):
    path = os.path.join(RUN, "k", overlay, "applied.json")
    if os.path.exists(path):
        kubectl("delete", "-f", path, "--wait=true", "--timeout=90s", "--ignore-not-found",
                check=False, timeout=150)
    wait("plugin pods gone", lambda: not kjson("get", "pods", "-n", NS)["items"]
         if kubectl("get", "ns", NS, check=False).returncode == 0 else True, timeout=90)
    for k in ("nvidia.com/device-plugin.config", "nvidia.com/mig.config",
              "nvidia.com/mig.config.state"):
        label(k)
    if overlay in ("mps-split", "mps"):
        delete_workloads()
        if os.path.exists(os.path.join(RUN, "created-run-nvidia")):  # the MPS root's hostPath
            sh("rm", "-rf", "/run/nvidia", check=False)
            os.unlink(os.path.join(RUN, "created-run-nvidia"))


# ---- scenarios ----------------------------------------------------------------------------

def sc_no_gpu_waits_quietly():
    """The base as shipped on a node without a GPU: scheduled without NFD or hand labels,
    Running, never restarted (FAIL_ON_INIT_ERROR=false), no nvidia.com/gpu advertised."""
    apply_overlay("../base", None)
    p, t = wait("plugin Running", lambda: (plugin_pod() or {}).get("status", {}).get(
        "phase") == "Running", timeout=90)
    log("  plugin Running %.1f s after apply (no NFD, no node labels)" % t)
    time.sleep(25)  # two liveness periods: a crash loop would show restarts by now
    p = plugin_pod()
    restarts = p["status"]["containerStatuses"][0]["restartCount"]
    if restarts:
        raise Fail("restarted %d times without a GPU: %s" % (restarts, plugin_logs()[-600:]))
    if allocatable("nvidia.com/gpu") not in (None, "0"):
        raise Fail("advertises nvidia.com/gpu without a GPU")
    ready = p["status"]["containerStatuses"][0].get("ready")
    return "Running, 0 restarts after 25 s, ready=%s, nothing advertised" % ready


def sc_seed():
    """The seed's cluster (overlays/per-node): the node labelled l20 gets 8 replicas; 5 pods
    Running with the GPU's UUID; the 2-GPU request refused with NVIDIA's error."""
    label("nvidia.com/device-plugin.config", "l20")
    apply_overlay("per-node", "l20-node.yaml")
    _, t = wait("nvidia.com/gpu allocatable 8", lambda: allocatable("nvidia.com/gpu") == "8",
                timeout=120)
    log("  allocatable nvidia.com/gpu=8 %.1f s after apply" % t)
    t0 = time.monotonic()
    for i in range(5):
        workload("seed-%d" % i, "nvidia.com/gpu", 1, {"nvidia.com/device-plugin.config": "l20"})
    wait("5 pods Running", lambda: all(running("seed-%d" % i) for i in range(5)), timeout=120)
    log("  5 pods Running in %.1f s" % (time.monotonic() - t0))
    env = kubectl("exec", "-n", "default", "seed-0", "--", "env").stdout
    vis = re.search(r"NVIDIA_VISIBLE_DEVICES=(\S+)", env)
    if not vis or not vis.group(1).startswith("GPU-"):
        raise Fail("seed-0 has no GPU UUID in NVIDIA_VISIBLE_DEVICES: %s" % env[-300:])
    workload("seed-two", "nvidia.com/gpu", 2, {"nvidia.com/device-plugin.config": "l20"})
    p, _ = wait("2-GPU pod refused", lambda: pod("seed-two") if pod("seed-two")["status"].get(
        "phase") == "Failed" else None, timeout=60)
    msg = p["status"].get("message", "")
    if "maximum request size for shared resources is 1" not in msg:
        raise Fail("2-GPU pod: %s %s" % (p["status"].get("reason"), msg))
    kubectl("delete", "pod", "-n", "default", "seed-two", "--wait=false")
    return "8 replicas; 5 pods Running with %s; 2-GPU pod %s: %s" % (
        vis.group(1), p["status"].get("reason"), msg[:120])


def sc_label_pods_shared_metrics():
    """Labels: the plugin labelled the node (node-labels component, shipped RBAC)."""
    n, t = wait("gpu.product label", lambda: node()["metadata"]["labels"].get(
        "nvidia.com/gpu.product") == "NVIDIA-L20-SHARED", timeout=30)
    return "nvidia.com/gpu.product=NVIDIA-L20-SHARED, gpu.replicas=%s" % (
        node()["metadata"]["labels"].get("nvidia.com/gpu.replicas"))


def sc_events():
    """A Node Event reaches the real API server (namespace default) and kubectl shows it."""
    label("nvidia.com/device-plugin.config", "h100")
    evs, t = wait("ConfigNotFound Event", lambda: node_events("ConfigNotFound"), timeout=60)
    ev = evs[-1]
    out = kubectl("get", "events", "-n", "default", "--field-selector",
                  "reason=ConfigNotFound").stdout
    label("nvidia.com/device-plugin.config", "l20")
    if ev["metadata"]["namespace"] != "default" or "h100" not in ev["message"]:
        raise Fail("event: %s" % ev)
    if "ConfigNotFound" not in out:
        raise Fail("kubectl get events does not show it: %s" % out)
    refused = [ln for ln in plugin_logs().splitlines() if "posting Event" in ln]
    if refused:
        raise Fail("the plugin logged refused Events: %s" % refused[-1])
    return "ConfigNotFound in default %.1f s after the label: %s" % (t, ev["message"][:100])


def sc_rbac_as_shipped():
    """The plugin used its own ServiceAccount token (no override) and was never refused."""
    p = plugin_pod()
    logs = plugin_logs()
    if "HTTP 403" in logs or "forbidden" in logs:  # not "403" alone: timestamps have it
        bad = [ln for ln in logs.splitlines() if "HTTP 403" in ln or "forbidden" in ln]
        raise Fail("refused by RBAC: %s" % bad[-1])
    spec = p["spec"]
    if spec.get("serviceAccountName") != "gpuslice" or any(
            e["name"] in ("KUBECONFIG", "GPUSLICE_KUBE_API_SERVER")
            for e in spec["containers"][0]["env"]):
        raise Fail("not the shipped ServiceAccount: %s" % spec.get("serviceAccountName"))
    can = kubectl("auth", "can-i", "patch", "nodes",
                  "--as=system:serviceaccount:gpuslice:gpuslice").stdout.strip()
    cannot = kubectl("auth", "can-i", "delete", "nodes",
                     "--as=system:serviceaccount:gpuslice:gpuslice", check=False).stdout.strip()
    return "label watch, Events and node labels with the gpuslice SA token; " \
           "can-i patch nodes=%s, delete nodes=%s" % (can, cannot)


def sc_per_pod_metrics():
    """A GPU process in seed-0's container (host PID) shows up as that pod's usage."""
    uid = pod("seed-0")["metadata"]["uid"]
    pid = None
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % d) as f:
                cg = f.read()
            with open("/proc/%s/comm" % d) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if (uid in cg or uid.replace("-", "_") in cg) and comm == "sleep":
            pid = int(d)
            break
    if not pid:
        raise Fail("no process of seed-0 found under /proc")
    with open(os.path.join(FAKE, "events"), "a") as f:
        f.write("proc 0 %d 3000 40\n" % pid)
    text, t = wait("pod series", lambda: (lambda m: m if re.search(
        r'gpuslice_pod_gpu_memory_used_bytes\{[^}]*pod="seed-0"[^}]*\} 3145728000', m)
        else None)(metrics()), timeout=60)
    un = re.search(r"^gpuslice_gpu_processes_unattributed (\d+)", text, re.M)
    line = [ln for ln in text.splitlines()
            if ln.startswith("gpuslice_pod_gpu_memory_used_bytes") and "seed-0" in ln][0]
    return "pid %d -> %s (unattributed %s), %.1f s" % (pid, line[:160], un.group(1) if un
                                                        else "?", t)


def sc_kubelet_restart():
    """The kubelet restarts: the plugin re-registers, capacity and running pods stay."""
    def registrations():
        return [ln for ln in plugin_logs().splitlines() if "registered resource=" in ln]

    before = len(registrations())
    pid = open(os.path.join(RUN, "pids", "kubelet")).read().strip()
    t0 = time.monotonic()
    os.kill(int(pid), 15)
    wait("new kubelet", lambda: open(os.path.join(RUN, "pids", "kubelet")).read().strip()
         != pid, timeout=30)
    wait("plugin re-registered", lambda: len(registrations()) > before, timeout=60)
    reg = time.monotonic() - t0
    _, t = wait("allocatable 8 again", lambda: allocatable("nvidia.com/gpu") == "8",
                timeout=90)
    if not all(running("seed-%d" % i) for i in range(5)):
        raise Fail("pods stopped across the kubelet restart")
    return "re-registered %.1f s after the kill (%s); allocatable 8 after %.1f s more; " \
        "5 pods Running" % (reg, registrations()[-1][-90:], t)


def held_replicas(resource):
    """The device IDs the kubelet's checkpoint says running pods hold."""
    path = os.path.join(RUN, "kubelet", "device-plugins", "kubelet_internal_checkpoint")
    with open(path) as f:
        data = json.load(f)["Data"]
    ids = []
    for e in data.get("PodDeviceEntries") or []:
        if e["ResourceName"] != resource:
            continue
        dev = e["DeviceIDs"]
        for v in (dev.values() if isinstance(dev, dict) else [dev]):
            ids += v
    return ids


def sc_rollout_held_devices():
    """A DaemonSet rollout that starts the new plugin on a smaller config (l20 -> t4, 8 -> 3
    replicas) while 5 pods hold replicas: the new process keeps the held ones listed,
    Unhealthy, as the live reload does (issue 18: capacity fell 8 -> 1)."""
    held = held_replicas("nvidia.com/gpu")
    beyond = [i for i in held if int(i.rsplit("::", 1)[1]) >= 3]
    before = plugin_pod()["metadata"]["name"]
    label("nvidia.com/device-plugin.config", "t4")
    kubectl("rollout", "restart", "daemonset/gpuslice-device-plugin", "-n", NS)
    wait("new plugin pod", lambda: (plugin_pod() or {}).get("metadata", {}).get("name")
         not in (None, before) and plugin_ready(), timeout=120)
    want_cap = str(3 + len(beyond))
    try:
        def counts():
            got = (node()["status"]["capacity"].get("nvidia.com/gpu"),
                   allocatable("nvidia.com/gpu"))
            if got != (want_cap, "3"):
                raise Fail("capacity %s, allocatable %s" % got)  # wait() retries, keeps it
            return True

        _, t = wait("capacity %s, allocatable 3 (3 + %d held beyond ::2)" % (
            want_cap, len(beyond)), counts, timeout=40)
        if not all(running("seed-%d" % i) for i in range(5)):
            raise Fail("pods stopped across the rollout")
        return "held %s; after the rollout capacity %s, allocatable 3 (%.1f s)" % (
            ",".join(x.rsplit("::", 1)[1] for x in held), want_cap, t)
    finally:
        label("nvidia.com/device-plugin.config", "l20")
        wait("back to 8 replicas", lambda: allocatable("nvidia.com/gpu") == "8", timeout=60)


def sc_xid_recovery():
    """XID 79 makes the GPU's replicas Unhealthy (allocatable 0); the GPU answering again
    brings them back, with a GPURecovered Event in default."""
    def event(line):
        with open(os.path.join(FAKE, "events"), "a") as f:
            f.write(line + "\n")

    event("xid 0 79")  # fallen off the bus: only a reset brings it back
    _, t1 = wait("allocatable 0 after XID 79", lambda: allocatable("nvidia.com/gpu") == "0",
                 timeout=60)
    # the reset, as the health thread's probe sees it: the GPU lost, then answering again
    event("gpu 0 lost")
    wait("the probe saw the GPU lost", lambda: "lost" in plugin_logs(since_s=60), timeout=30)
    event("gpu 0 back")
    _, t2 = wait("allocatable 8 after recovery", lambda: allocatable("nvidia.com/gpu") == "8",
                 timeout=90)
    evs, _ = wait("GPURecovered Event", lambda: node_events("GPURecovered"), timeout=30)
    return "XID -> allocatable 0 in %.1f s; back -> 8 in %.1f s; Event: %s" % (
        t1, t2, evs[-1]["message"][:100])


def sc_mig_by_label():
    """overlays/mig-by-label: nvidia.com/mig.config=all-1g.10gb on 4 A100s in all-balanced
    -> 28 x nvidia.com/mig-1g.10gb and nvidia.com/mig.config.state=success."""
    apply_overlay("mig-by-label", "a100-80gb-all-balanced.yaml")
    _, t = wait("mig-3g.40gb served", lambda: allocatable("nvidia.com/mig-3g.40gb") == "4",
                timeout=120)
    log("  all-balanced served %.1f s after apply" % t)
    t0 = time.monotonic()
    label("nvidia.com/mig.config", "all-1g.10gb")
    wait("state success", lambda: node()["metadata"]["labels"].get(
        "nvidia.com/mig.config.state") == "success", timeout=120)
    t_state = time.monotonic() - t0
    _, t = wait("28 x mig-1g.10gb", lambda: allocatable("nvidia.com/mig-1g.10gb") == "28",
                timeout=60)
    return "state=success %.1f s after the label; 28 x mig-1g.10gb allocatable %.1f s later" \
        % (t_state, t)


def sc_mps_split():
    """overlays/mps-split: the control daemon DaemonSet lands in gpuslice with the image,
    ServiceAccount and ConfigMap it names, on the plugin's node; the plugin gets its .ready
    and serves nvidia.com/gpu.shared x4; a pod gets the MPS pipe directory."""
    created = not os.path.exists("/run/nvidia")
    docs = apply_overlay("mps-split", "l20-node.yaml", mps_daemon=True)
    if created:
        open(os.path.join(RUN, "created-run-nvidia"), "w").close()
    ds = [d for d in docs if d["kind"] == "DaemonSet"]
    if sorted(d["metadata"]["namespace"] for d in ds) != ["gpuslice", "gpuslice"]:
        raise Fail("DaemonSets in %s" % [d["metadata"]["namespace"] for d in ds])
    _, t = wait("control daemon Running", lambda: [
        p for p in kjson("get", "pods", "-n", NS, "-l",
                         "app.kubernetes.io/name=gpuslice-mps-control-daemon")["items"]
        if p["status"].get("phase") == "Running"], timeout=90)
    _, t2 = wait("nvidia.com/gpu.shared allocatable 4",
                 lambda: allocatable("nvidia.com/gpu.shared") == "4", timeout=120)
    workload("mps-0", "nvidia.com/gpu.shared", 1)
    wait("mps-0 Running", lambda: running("mps-0"), timeout=60)
    env = kubectl("exec", "-n", "default", "mps-0", "--", "env").stdout
    pipe = re.search(r"CUDA_MPS_PIPE_DIRECTORY=(\S+)", env)
    if not pipe:
        raise Fail("no CUDA_MPS_PIPE_DIRECTORY in the pod: %s" % env[-300:])
    return "control daemon Running %.1f s after apply; nvidia.com/gpu.shared=4 %.1f s later; " \
        "pod got CUDA_MPS_PIPE_DIRECTORY=%s" % (t, t2, pipe.group(1))


def sc_mps_internal():
    """overlays/mps: the plugin runs the MPS control daemon itself (privileged, hostPID):
    nvidia.com/gpu.shared x4 and a pod with the MPS pipe directory."""
    created = not os.path.exists("/run/nvidia")
    apply_overlay("mps", "l20-node.yaml",
                  env={"GPUSLICE_MPS_CONTROL": "/fake-nvml/nvidia-cuda-mps-control"})
    if created:
        open(os.path.join(RUN, "created-run-nvidia"), "w").close()
    _, t = wait("nvidia.com/gpu.shared allocatable 4",
                lambda: allocatable("nvidia.com/gpu.shared") == "4", timeout=120)
    workload("mps-1", "nvidia.com/gpu.shared", 1)
    wait("mps-1 Running", lambda: running("mps-1"), timeout=60)
    env = kubectl("exec", "-n", "default", "mps-1", "--", "env").stdout
    if "CUDA_MPS_PIPE_DIRECTORY=" not in env:
        raise Fail("no CUDA_MPS_PIPE_DIRECTORY in the pod")
    sup = [ln for ln in plugin_logs().splitlines() if "MPS" in ln]
    return "nvidia.com/gpu.shared=4 %.1f s after apply; pod has its pipe directory; %s" % (
        t, sup[-1][-100:] if sup else "")


def sa_kubeconfig():
    """A kubeconfig with the gpuslice ServiceAccount's own token (1.20: a token Secret)."""
    sec, _ = wait("the ServiceAccount's token", lambda: kjson(
        "get", "sa", "-n", NS, "gpuslice").get("secrets", [{}])[0].get("name"), timeout=30)
    tok = __import__("base64").b64decode(
        kjson("get", "secret", "-n", NS, sec)["data"]["token"]).decode()
    path = os.path.join(RUN, "sa.kubeconfig")
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "Config",
                   "clusters": [{"name": "e2e", "cluster": {
                       "server": "https://127.0.0.1:6443",
                       "certificate-authority": os.path.join(RUN, "pki", "ca.crt")}}],
                   "users": [{"name": "sa", "user": {"token": tok}}],
                   "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "sa"}}],
                   "current-context": "e2e"}, f)
    return path


def sc_error_hints():
    """Issue 19's errors on the real API server with the shipped base RBAC: NodeFeature mode
    names nodefeatures (not the plugin's rights), a missing NFD API group is said so with
    the file mode as the way out, --labels=node names the refused patch on nodes."""
    docs = [d for d in yaml.safe_load_all(kubectl("kustomize", os.path.join(
        SRC, "deployments/kustomize/base")).stdout) if d and d["kind"] in (
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding")]
    os.makedirs(os.path.join(RUN, "k", "rbac"), exist_ok=True)
    with open(os.path.join(RUN, "k", "rbac", "applied.json"), "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": docs}, f)
    kubectl("apply", "-f", os.path.join(RUN, "k", "rbac", "applied.json"))
    kc = sa_kubeconfig()
    env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(SRC, "examples/machines/l20-node.yaml"),
               FAKE_NVML_STATE=os.path.join(RUN, "hints.state"), NODE_NAME=NODE)
    env.pop("KUBECONFIG", None)
    cfg = os.path.join(RUN, "hints-config.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\n")
    gs = [os.path.join(BUILD, "gpuslice")]
    nvml = ["--nvml-library", os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1"),
            "--config-file", cfg, "--kubeconfig", kc]

    def fd():
        r = subprocess.run(gs + ["feature-discovery", "--oneshot", "--node-name", NODE,
                                 "--namespace", NS] + nvml, env=env, capture_output=True,
                           text=True, timeout=60)
        return r.stderr

    out = []
    err = fd()  # RBAC is checked before the path: a 403 on nodefeatures
    for want in ('cannot get resource "nodefeatures"', 'grant "get" on '
                 '"nodefeatures.nfd.k8s-sigs.io"', "get, create and update on nodefeatures"):
        if want not in err:
            raise Fail("NodeFeature without rights: %r lacks %r" % (err[-400:], want))
    if "get/list/watch on nodes" in err:
        raise Fail("NodeFeature without rights names the plugin's rights: %s" % err[-300:])
    out.append("403 names nodefeatures")
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "e2e-nodefeatures", "namespace": NS},
            "rules": [{"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeatures"],
                       "verbs": ["get", "create", "update"]}]}
    bind = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "e2e-nodefeatures", "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "e2e-nodefeatures"},
            "subjects": [{"kind": "ServiceAccount", "name": "gpuslice", "namespace": NS}]}
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                  "items": [role, bind]}))
    err, _ = wait("the 404 of the missing API group", lambda: (lambda e: e if "HTTP 404" in e
                                                               else None)(fd()), timeout=30)
    for want in ("404 page not found", "does not serve nfd.k8s-sigs.io/v1alpha1",
                 "--labels=nfd-file", "--use-node-feature-api=false"):
        if want not in err:
            raise Fail("NodeFeature without the CRD: %r lacks %r" % (err[-400:], want))
    if "NODE_NAME" in err:
        raise Fail("the missing CRD answered with 'check the name': %s" % err[-300:])
    out.append("404 says the API group is missing")
    dpdir = os.path.join(RUN, "hints-device-plugins")  # never the host's kubelet
    os.makedirs(dpdir, exist_ok=True)
    p = subprocess.Popen(gs + ["device-plugin", "--labels=node", "--pod-resources-socket", "",
                               "--device-plugin-dir", dpdir, "--kubelet-socket", ""] + nvml, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    try:
        lines = []
        for line in p.stdout:
            lines.append(line)
            if "labels" in line and "HTTP" in line:
                break
    finally:
        p.terminate()
        p.wait(timeout=10)
    err = lines[-1] if lines else ""
    for want in ('cannot patch resource "nodes"', 'grant "patch" on "nodes"',
                 "--labels=node needs get and patch on nodes"):
        if want not in err:
            raise Fail("--labels=node without patch: %r lacks %r" % (err[-400:], want))
    out.append("--labels=node names the refused patch on nodes")
    kubectl("delete", "role,rolebinding", "-n", NS, "e2e-nodefeatures", check=False)
    return "; ".join(out)


OPERATOR_NS = "gpu-operator"
# the GPU Operator's time-slicing guide, verbatim: the ConfigMap named in
# ClusterPolicy.spec.devicePlugin.config {name: time-slicing-config-all, default: any}
GUIDE_TIME_SLICING = {"any": "version: v1\nflags:\n  migStrategy: none\nsharing:\n"
                             "  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                             "      replicas: 4\n"}


def operator_device_plugin_ds():
    """The Operator v26.7.0's device-plugin DaemonSet as it renders it (tests/operator/
    render.py) with devicePlugin.config set as the guide does and only the image swapped;
    then what this machine needs: hostNetwork and the API at 127.0.0.1:6443 (no pod network),
    the fake NVML's files, and busybox standing in for NVIDIA's validator image (the
    toolkit-validation init container's `sh -c 'until [ -f ... ]'`; no registry here)."""
    sys.path.insert(0, os.path.join(SRC, "tests/operator"))
    import render
    policy = {"devicePlugin": {"image": image_ref(),
                               "config": {"name": "time-slicing-config-all", "default": "any"}},
              "gfd": {"image": image_ref()}, "migManager": {"image": image_ref()},
              "validator": {"image": BUSYBOX}, "mig": {"strategy": "single"}}
    r = render.render_operator(policy)
    ds = r["daemonsets"]["nvidia-device-plugin-daemonset"]
    spec = ds["spec"]["template"]["spec"]
    spec["hostNetwork"], spec["dnsPolicy"] = True, "ClusterFirstWithHostNet"
    spec["volumes"].append({"name": "fake-nvml", "hostPath": {"path": FAKE, "type": "Directory"}})
    for c in spec["initContainers"] + spec["containers"]:
        c["imagePullPolicy"] = "Never"
        if "validation" in c["name"]:
            continue
        c.setdefault("env", []).extend([
            {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
            {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
            {"name": "FAKE_NVML_MACHINE", "value": "/fake-nvml/machine.yaml"},
            {"name": "FAKE_NVML_STATE", "value": "/fake-nvml/state"},
            {"name": "FAKE_NVML_EVENTS", "value": "/fake-nvml/events"}])
        c.setdefault("volumeMounts", []).append({"name": "fake-nvml", "mountPath": "/fake-nvml"})
    cms = [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": OPERATOR_NS}, "data": data}
           for name, data in (("nvidia-device-plugin-entrypoint",
                               r["configmaps"]["nvidia-device-plugin-entrypoint"]),
                              ("time-slicing-config-all", GUIDE_TIME_SLICING))]
    return ds, cms


def operator_rbac():
    """The Operator's ServiceAccount for the plugin and what config-manager needs (nodes)."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "e2e-nvidia-device-plugin"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"],
                       "verbs": ["get", "list", "watch"]},
                      {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]}
    bind = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "e2e-nvidia-device-plugin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "e2e-nvidia-device-plugin"},
            "subjects": [{"kind": "ServiceAccount", "name": "nvidia-device-plugin",
                          "namespace": OPERATOR_NS}]}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount",
          "metadata": {"name": "nvidia-device-plugin", "namespace": OPERATOR_NS}}
    return [sa, role, bind]


def sc_operator_device_plugin():
    """The GPU Operator's device-plugin DaemonSet, rendered and image-swapped, with the
    guide's time-slicing ConfigMap through devicePlugin.config: it waits for the
    validator's files, starts through the Operator's entrypoint.sh and registers with the
    real kubelet: nvidia.com/gpu allocatable 4 (1 GPU x 4 replicas)."""
    created = not os.path.exists("/run/nvidia")
    if created:
        open(os.path.join(RUN, "created-run-nvidia"), "w").close()
    prepare_driver("l20-node.yaml")
    drv = "/run/nvidia/driver/usr/lib/x86_64-linux-gnu"  # the Operator's driver container
    os.makedirs(drv, exist_ok=True)
    sh("cp", os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1"), drv)
    val = "/run/nvidia/validations"
    os.makedirs(val, exist_ok=True)
    for f in ("toolkit-ready", "driver-ready"):  # what NVIDIA's validator writes
        if os.path.exists(os.path.join(val, f)):
            os.unlink(os.path.join(val, f))
    ds, cms = operator_device_plugin_ds()
    label("nvidia.com/gpu.deploy.device-plugin", "true")
    kubectl("create", "namespace", OPERATOR_NS, check=False)
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                  "items": operator_rbac() + cms + [ds]}))
    t0 = time.monotonic()

    def pod_status():
        items = kjson("get", "pods", "-n", OPERATOR_NS, "-l",
                      "app=nvidia-device-plugin-daemonset")["items"]
        return items[0]["status"] if items else None
    wait("the toolkit-validation init container waiting", lambda: (pod_status() or {}).get(
        "initContainerStatuses", [{}])[0].get("state", {}).get("running"), timeout=90)
    open(os.path.join(val, "toolkit-ready"), "w").close()
    with open(os.path.join(val, "driver-ready"), "w") as f:
        f.write("IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT=/run/nvidia/driver\n"
                "DRIVER_ROOT_CTR_PATH=/driver-root\n")
    _, t = wait("nvidia.com/gpu allocatable 4", lambda: allocatable("nvidia.com/gpu") == "4",
                timeout=150)
    p = kjson("get", "pods", "-n", OPERATOR_NS, "-l", "app=nvidia-device-plugin-daemonset")
    name = p["items"][0]["metadata"]["name"]
    logs = kubectl("logs", "-n", OPERATOR_NS, name, "-c", "nvidia-device-plugin",
                   check=False).stdout
    if "Starting nvidia-device-plugin" not in logs:
        raise Fail("the Operator's entrypoint.sh did not start the plugin: %s" % logs[-400:])
    states = [c["state"] for c in p["items"][0]["status"].get("containerStatuses", [])]
    if not all("running" in st for st in states):
        raise Fail("containers not all running: %s" % states)
    return "nvidia.com/gpu=4 (guide's time-slicing) %.1f s after the validations (%.1f s " \
        "after apply); plugin and config-manager running" % (t, time.monotonic() - t0)


def remove_operator():
    kubectl("delete", "namespace", OPERATOR_NS, "--wait=true", "--timeout=120s",
            check=False, timeout=150)
    kubectl("delete", "clusterrole,clusterrolebinding", "e2e-nvidia-device-plugin",
            check=False)
    label("nvidia.com/gpu.deploy.device-plugin")
    if os.path.exists(os.path.join(RUN, "created-run-nvidia")):
        sh("rm", "-rf", "/run/nvidia", check=False)
        os.unlink(os.path.join(RUN, "created-run-nvidia"))


SCENARIOS = [
    ("error-hints-real-api", sc_error_hints, "rbac"),
    ("no-gpu-waits-quietly", sc_no_gpu_waits_quietly, "../base"),
    ("seed-5-pods-on-8-replicas", sc_seed, None),
    ("node-labels", sc_label_pods_shared_metrics, None),
    ("events-in-default", sc_events, None),
    ("rbac-as-shipped", sc_rbac_as_shipped, None),
    ("per-pod-metrics", sc_per_pod_metrics, None),
    ("kubelet-restart", sc_kubelet_restart, None),
    ("rollout-keeps-held-devices", sc_rollout_held_devices, None),
    ("xid-and-recovery", sc_xid_recovery, "per-node"),
    ("mig-by-label", sc_mig_by_label, "mig-by-label"),
    ("mps-split", sc_mps_split, "mps-split"),
    ("mps-internal", sc_mps_internal, "mps"),
    ("operator-device-plugin", sc_operator_device_plugin, "gpu-operator"),
]


def main():
    sh("ctr", "--address", CTR_SOCK, "-n", "k8s.io", "images", "import",
       os.path.join(BUILD, "gpuslice-image.tar"))
    log("image %s imported" % image_ref())
    t_all = time.monotonic()
    for name, fn, cleanup in SCENARIOS:
        if ONLY and name not in ONLY:
            continue
        log("-- %s: %s" % (name, fn.__doc__.split("\n")[0].strip()))
        t0 = time.monotonic()
        try:
            detail = fn()
            ok = True
        except Exception as e:  # noqa: BLE001 - every failure is reported, the lane goes on
            ok, detail = False, "%s: %s" % (type(e).__name__, e)
        dt = time.monotonic() - t0
        results.append((name, ok, dt, detail))
        log("   %s %s (%.1f s): %s" % ("PASS" if ok else "FAIL", name, dt, detail))
        if cleanup:
            if cleanup == "per-node":
                delete_workloads()
            if cleanup == "gpu-operator":
                remove_operator()
            else:
                remove_overlay(cleanup)
    delete_workloads()
    print("\n== e2e summary (%.0f s)" % (time.monotonic() - t_all))
    for name, ok, dt, detail in results:
        print("%-28s %s %6.1f s  %s" % (name, "PASS" if ok else "FAIL", dt, detail[:150]))
    return 0 if all(ok for _, ok, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())

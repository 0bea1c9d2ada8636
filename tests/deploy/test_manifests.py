#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_manifests.py: renders every kustomize overlay (deployments/kustomize) with
# `kubectl kustomize` (offline) and checks the rendered objects against issue 9 §2-3:
# least-privilege RBAC with every verb justified, one device-plugin DaemonSet without sidecar,
# the downward-API node name, the kubelet/pod-resources/driver-root/ConfigMap mounts, NVIDIA's
# tolerations and affinity, memory sized from the measured RSS, dropped capabilities, probes
# on the metrics port; the per-node overlay is the seed's cluster; the admission policy is
# well formed (a CEL-subset parser) and rejects what it should on sample objects (a CEL-subset
# evaluator, not the API server's CEL); its parameters match `gpuslice plan --admission-params`.
# Issue 18: every reference inside a render resolves (namespace, image, ServiceAccount,
# ConfigMaps); every DaemonSet schedules without NFD's labels and waits quietly without a
# GPU; the sharing overlays see host processes; the policy applies only to shared resources
# (per-node: only to pods that select sharing nodes), CREATE only; the nfd and cdi
# components; overlays/mig-by-label. Issue 22: overlays/dra (components/dra) holds NVIDIA's
# DeviceClasses with their CEL (evaluated on sample devices), the plugin's least-privilege
# ClusterRole, and the DaemonSet as NVIDIA's kubelet plugin (command, env, mounts,
# privilege, only env vars it reads, probes on /healthz and /readyz); the YAML examples of
# docs/dra.md parse and their CEL selects what they say.
# Usage: test_manifests.py SOURCE_DIR BUILD_DIR
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cel_subset  # noqa: E402

SRC, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
KUST = os.path.join(SRC, "deployments/kustomize")
OVERLAYS = ["time-slicing", "per-node", "mps", "mps-split", "mig-mixed", "mig-by-label"]
SHARED = {"time-slicing", "per-node", "mps", "mps-split"}  # shared resources: admission
MPS_INTERNAL = {"mps"}  # our default: the plugin runs the MPS daemons: privileged, as NVIDIA's
PRIVILEGED = {"mps", "mig-by-label"}  # MIG changes need the driver's capability devices
NODE_LABELS = {"per-node"}  # overlays with the node-labels component
NODES_PATCH = {"per-node", "mig-by-label"}  # node labels, or the MIG state label
IMAGE = "registry.example.com/gpuslice:0.1.0"  # base/kustomization.yaml's images:
RSS_MIB = 16.5  # measured with the label watch on (docs/deploy.md, Resources)
NVIDIA_TOLERATIONS = [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                      {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
NFD_AFFINITY_KEYS = {("feature.node.kubernetes.io/pci-10de.present", "true"),
                        ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                        ("nvidia.com/gpu.present", "true")}
KUBECTL = shutil.which("kubectl")


def render(overlay):
    return render_dir(os.path.join(KUST, "overlays", overlay))


def render_dir(path):
    r = subprocess.run([KUBECTL, "kustomize", "--load-restrictor=LoadRestrictionsNone", path],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("kubectl kustomize %s: %s" % (path, r.stderr))
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def render_with_components(*components):
    """The base with components, as a user's overlay would add them."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                            "kind": "Kustomization",
                            "resources": [os.path.relpath(os.path.join(KUST, "base"), tmp)],
                            "components": [os.path.relpath(os.path.join(KUST, "components",
                                                                        c), tmp)
                                           for c in components]}, f)
        return render_dir(tmp)


def mib(q):
    m = re.fullmatch(r"(\d+)(Mi|Gi)", q)
    assert m, "memory %r is not in Mi/Gi" % q
    return int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1)


def one(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or
                                                       d["metadata"]["name"] == name)]
    assert len(found) == 1, "%d %s %s" % (len(found), kind, name or "")
    return found[0]


@unittest.skipIf(not KUBECTL, "kubectl not installed (it renders the kustomize overlays)")
class Rendered(unittest.TestCase):
    """Every overlay rendered once for all the tests (self.docs)."""
    _docs = None

    @classmethod
    def setUpClass(cls):
        if Rendered._docs is None:
            Rendered._docs = {o: render(o) for o in OVERLAYS}
        cls.docs = Rendered._docs


class Overlays(Rendered):

    def plugin(self, o):
        return one(self.docs[o], "DaemonSet", "gpuslice-device-plugin")

    def test_rbac_least_privilege_and_justified(self):
        for o in OVERLAYS:
            role = one(self.docs[o], "ClusterRole", "gpuslice")
            want = [((("",), ("nodes",)), ["get", "list", "watch"]),
                    ((("",), ("events",)), ["create", "patch"])]
            if o in NODES_PATCH:  # node labels or the MIG state label: nodes patch, no more
                want.append(((("",), ("nodes",)), ["patch"]))
            got = [((tuple(r["apiGroups"]), tuple(r["resources"])), sorted(r["verbs"]))
                   for r in role["rules"]]
            self.assertEqual(got, want, o)
            sa = one(self.docs[o], "ServiceAccount", "gpuslice")
            b = one(self.docs[o], "ClusterRoleBinding", "gpuslice")
            self.assertEqual(b["roleRef"]["name"], "gpuslice")
            self.assertEqual(b["subjects"], [{"kind": "ServiceAccount", "name": "gpuslice",
                                              "namespace": sa["metadata"]["namespace"]}])
            self.assertEqual(self.plugin(o)["spec"]["template"]["spec"]["serviceAccountName"],
                             "gpuslice")
            one(self.docs[o], "Namespace", "gpuslice")
        # every verb is named in the comment above its rule
        with open(os.path.join(KUST, "base/rbac.yaml")) as f:
            src = f.read()
        for block in re.findall(r"((?:\s*#.*\n)+)\s*verbs: \[([^\]]*)\]", src):
            for verb in re.findall(r'"(\w+)"', block[1]):
                self.assertRegex(block[0], r"\b%s\b" % verb, "verb %s not justified" % verb)
        self.assertEqual(len(re.findall(r"verbs:", src)), 2)
        for path in ("components/node-labels/rbac.yaml", "overlays/mig-by-label/rbac.yaml"):
            with open(os.path.join(KUST, path)) as f:
                src = f.read()
            blocks = re.findall(r"((?:\s*#.*\n)+)\s*verbs: \[([^\]]*)\]", src)
            self.assertEqual(len(blocks), 1, path)
            self.assertRegex(blocks[0][0], r"\bpatch\b", path)

    def test_node_labels_component(self):
        for o in OVERLAYS:
            env = {e["name"]: e.get("value") for e in
                   self.plugin(o)["spec"]["template"]["spec"]["containers"][0]["env"]}
            self.assertEqual(env.get("GPUSLICE_LABELS"), "node" if o in NODE_LABELS else None, o)
            self.assertEqual(env["NODE_NAME"], None, o)  # from the downward API

    def test_one_daemonset_no_sidecar(self):
        for o in OVERLAYS:
            ds = [d for d in self.docs[o] if d["kind"] == "DaemonSet"]
            plugin = [d for d in ds if "device-plugin" in d["spec"]["template"]["spec"]
                      ["containers"][0]["command"]]
            self.assertEqual(len(plugin), 1, o)
            spec = plugin[0]["spec"]["template"]["spec"]
            self.assertEqual(len(spec["containers"]), 1, o)
            self.assertNotIn("initContainers", spec, o)
            self.assertNotIn("shareProcessNamespace", spec, o)
            self.assertEqual(spec["priorityClassName"], "system-node-critical")
            self.assertEqual(spec["tolerations"], NVIDIA_TOLERATIONS)
            for d in ds:
                self.assertEqual(d["metadata"]["namespace"], "gpuslice")

    def test_container_env_mounts_and_configmap_directory(self):
        for o in OVERLAYS:
            spec = self.plugin(o)["spec"]["template"]["spec"]
            c = spec["containers"][0]
            self.assertEqual(c["command"], ["gpuslice", "device-plugin"])
            env = {e["name"]: e for e in c["env"]}
            self.assertEqual(env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
                             "spec.nodeName")
            vols = {v["name"]: v for v in spec["volumes"]}
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            host = {m["mountPath"]: vols[m["name"]].get("hostPath", {}).get("path")
                    for m in c["volumeMounts"]}
            self.assertEqual(host["/var/lib/kubelet/device-plugins"],
                             "/var/lib/kubelet/device-plugins")
            self.assertFalse(mounts["/var/lib/kubelet/device-plugins"].get("readOnly", False))
            # the one-API rule: the device plugin sees a live DRA plugin's registration socket
            self.assertEqual(host["/var/lib/kubelet/plugins_registry"],
                             "/var/lib/kubelet/plugins_registry")
            self.assertTrue(mounts["/var/lib/kubelet/plugins_registry"]["readOnly"])
            self.assertEqual(host["/var/lib/kubelet/pod-resources"],
                             "/var/lib/kubelet/pod-resources")
            self.assertTrue(mounts["/var/lib/kubelet/pod-resources"]["readOnly"])
            self.assertEqual(env["POD_RESOURCES_SOCKET"]["value"],
                             "/var/lib/kubelet/pod-resources/kubelet.sock")
            # the driver root: host NVIDIA_DRIVER_ROOT at DRIVER_ROOT_CTR_PATH, read-only
            ctr = env["DRIVER_ROOT_CTR_PATH"]["value"]
            self.assertEqual(host[ctr], env["NVIDIA_DRIVER_ROOT"]["value"])
            self.assertTrue(mounts[ctr]["readOnly"])
            # the ConfigMap as a directory (no subPath: kubelet updates it), CONFIG_FILE there
            cfg = mounts[env["CONFIG_FILE"]["value"]]
            self.assertNotIn("subPath", cfg)
            self.assertEqual(vols[cfg["name"]]["configMap"]["name"], "gpuslice-configs")
            cm = one(self.docs[o], "ConfigMap", "gpuslice-configs")
            self.assertTrue(cm["data"])
            with tempfile.TemporaryDirectory() as tmp:  # every config is valid
                for key, text in cm["data"].items():
                    path = os.path.join(tmp, key)
                    with open(path, "w") as f:
                        f.write(text)
                    r = subprocess.run([os.path.join(BUILD, "gpuslice"), "config", "validate",
                                        path], capture_output=True, text=True, timeout=30)
                    self.assertEqual(r.returncode, 0, "%s/%s: %s" % (o, key, r.stderr))

    def test_resources_security_probes(self):
        for o in OVERLAYS:
            c = self.plugin(o)["spec"]["template"]["spec"]["containers"][0]
            req, lim = c["resources"]["requests"], c["resources"]["limits"]
            self.assertGreaterEqual(mib(req["memory"]), RSS_MIB, o)
            self.assertLessEqual(mib(req["memory"]), 4 * RSS_MIB, o)  # sized, not guessed high
            self.assertGreaterEqual(mib(lim["memory"]), 2 * mib(req["memory"]), o)
            self.assertIn("cpu", req)
            sc = c["securityContext"]
            self.assertEqual(sc["capabilities"]["drop"], ["ALL"], o)
            self.assertTrue(sc["readOnlyRootFilesystem"])
            if o in MPS_INTERNAL:  # exactly what NVIDIA's mps-control-daemon container has
                self.assertTrue(sc["privileged"])
                self.assertTrue(self.plugin(o)["spec"]["template"]["spec"]["hostPID"])
                env = {e["name"]: e.get("value") for e in c["env"]}
                self.assertEqual(env["GPUSLICE_MPS_CONTROL_MODE"], "internal")
                self.assertEqual([d for d in self.docs[o] if d["kind"] == "DaemonSet"
                                  and "mps" in d["metadata"]["name"]], [])
            elif o in PRIVILEGED:  # mig-by-label: as NVIDIA's mig-manager
                self.assertTrue(sc["privileged"])
                self.assertNotIn("hostPID", self.plugin(o)["spec"]["template"]["spec"])
            else:
                self.assertFalse(sc["allowPrivilegeEscalation"])
                self.assertNotIn("privileged", sc)
            self.assertEqual(sc["capabilities"].get("add", []),
                             ["SYS_ADMIN"] if o == "mig-mixed" else [], o)
            port = {p["name"]: p["containerPort"] for p in c["ports"]}["metrics"]
            env = {e["name"]: e.get("value") for e in c["env"]}
            self.assertEqual(env["GPUSLICE_METRICS_ADDRESS"], ":%d" % port)
            self.assertEqual(c["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "metrics"})
            self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "metrics"})

    def test_per_node_is_the_seeds_cluster(self):
        docs = self.docs["per-node"]
        cm = one(docs, "ConfigMap", "gpuslice-configs")
        seed = os.path.join(SRC, "examples/demo/time-slicing-config")
        self.assertEqual(sorted(cm["data"]), ["any", "l20", "t4"])
        for key in cm["data"]:
            with open(os.path.join(seed, key)) as f:
                self.assertEqual(yaml.safe_load(cm["data"][key]), yaml.safe_load(f))
        spec = self.plugin("per-node")["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        self.assertEqual(env["DEFAULT_CONFIG"], "any")
        self.assertNotIn("CONFIG_NAME", env)  # the node label picks it, not the manifest
        self.assertNotIn("nodeSelector", spec)  # one DaemonSet for every GPU node
        self.assertEqual(len([d for d in docs if d["kind"] == "DaemonSet"]), 1)


CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding"}


def pod_specs(docs):
    return [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in docs
            if d["kind"] == "DaemonSet"]


class References(Rendered):
    """Every name an object uses resolves inside the same render (issue 18: mps-split's
    second DaemonSet rendered in "default" with image "gpuslice", where its ServiceAccount
    and ConfigMap did not exist)."""

    def test_namespaces_images_accounts_configmaps_resolve(self):
        for o in OVERLAYS:
            docs = self.docs[o]
            have = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"])
                    for d in docs}
            namespaces = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
            for d in docs:
                ns = d["metadata"].get("namespace")
                if d["kind"] in CLUSTER_SCOPED:
                    self.assertIsNone(ns, "%s: %s %s" % (o, d["kind"], d["metadata"]["name"]))
                else:
                    self.assertIn(ns, namespaces, "%s: %s %s" % (o, d["kind"],
                                                                 d["metadata"]["name"]))
            for d in docs:
                if d["kind"] != "DaemonSet":
                    continue
                ns, spec = d["metadata"]["namespace"], d["spec"]["template"]["spec"]
                where = "%s: DaemonSet %s" % (o, d["metadata"]["name"])
                for c in spec["containers"] + spec.get("initContainers", []):
                    self.assertEqual(c["image"], IMAGE, where)
                self.assertIn(("ServiceAccount", ns, spec["serviceAccountName"]), have, where)
                for v in spec["volumes"]:
                    if "configMap" in v:
                        self.assertIn(("ConfigMap", ns, v["configMap"]["name"]), have, where)
                sel = d["spec"]["selector"]["matchLabels"]
                labels = d["spec"]["template"]["metadata"]["labels"]
                self.assertTrue(all(labels.get(k) == v for k, v in sel.items()), where)
            for b in (d for d in docs if d["kind"] == "ClusterRoleBinding"):
                self.assertIn(("ClusterRole", None, b["roleRef"]["name"]), have, o)
                for sub in b["subjects"]:
                    self.assertIn(("ServiceAccount", sub["namespace"], sub["name"]), have, o)
            for b in (d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"):
                ref = b["spec"]["paramRef"]
                self.assertIn(("ConfigMap", ref["namespace"], ref["name"]), have, o)
                self.assertIn(("ValidatingAdmissionPolicy", None, b["spec"]["policyName"]),
                              have, o)

    def test_mps_split_control_daemon_where_the_plugin_runs(self):
        docs = self.docs["mps-split"]
        cd = one(docs, "DaemonSet", "gpuslice-mps-control-daemon")
        spec = cd["spec"]["template"]["spec"]
        self.assertNotIn("nodeSelector", spec)  # nvidia.com/mps.capable: set by nobody
        self.assertEqual(spec["containers"][0]["command"], ["gpuslice", "mps-control-daemon"])
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        self.assertEqual(env["FAIL_ON_INIT_ERROR"], "false")
        plugin = one(docs, "DaemonSet", "gpuslice-device-plugin")["spec"]["template"]["spec"]
        self.assertEqual(spec["tolerations"], plugin["tolerations"])
        penv = {e["name"]: e.get("value") for e in plugin["containers"][0]["env"]}
        self.assertEqual(env["MPS_ROOT"], penv["MPS_ROOT"])


class Scheduling(Rendered):
    """As shipped, the DaemonSets run on a GPU node that has no NFD label and no hand label
    (issue 18: the required affinity wanted labels nothing set, so they ran nowhere), and
    wait quietly on a node without a GPU (FAIL_ON_INIT_ERROR=false, never CrashLoopBackOff)."""

    @staticmethod
    def schedulable_on(spec, node_labels, taints=()):
        for k, v in spec.get("nodeSelector", {}).items():
            if node_labels.get(k) != v:
                return False
        req = spec.get("affinity", {}).get("nodeAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        if req:
            ok = False
            for term in req["nodeSelectorTerms"]:
                ok = ok or all(e["operator"] == "In" and node_labels.get(e["key"]) in e["values"]
                               for e in term.get("matchExpressions", []))
            if not ok:
                return False
        tol = spec.get("tolerations", [])
        for t in taints:
            if not any(x.get("key") == t["key"] and (x.get("effect") in (None, t["effect"]))
                       for x in tol):
                return False
        return True

    def test_runs_without_nfd_and_waits_without_gpu(self):
        bare = {"kubernetes.io/hostname": "gpu-1", "kubernetes.io/os": "linux"}
        for o in OVERLAYS:
            for name, spec in pod_specs(self.docs[o]):
                self.assertTrue(self.schedulable_on(spec, bare), "%s: %s" % (o, name))
                self.assertTrue(self.schedulable_on(spec, bare, [{"key": "nvidia.com/gpu",
                                                                  "effect": "NoSchedule"}]))
                env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
                self.assertEqual(env.get("FAIL_ON_INIT_ERROR"), "false", "%s: %s" % (o, name))

    def test_nfd_component_restores_nfd_selection(self):
        docs = render_with_components("nfd")
        for name, spec in pod_specs(docs):
            terms = spec["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            self.assertEqual({(t["matchExpressions"][0]["key"],
                               t["matchExpressions"][0]["values"][0]) for t in terms},
                             NFD_AFFINITY_KEYS, name)
            self.assertFalse(self.schedulable_on(spec, {"kubernetes.io/os": "linux"}))
            self.assertTrue(self.schedulable_on(
                spec, {"feature.node.kubernetes.io/pci-10de.present": "true"}))
            self.assertEqual(spec["tolerations"], NVIDIA_TOLERATIONS)
        self.assertEqual(len(pod_specs(docs)), 1)


class HostProcesses(Rendered):
    """The sharing overlays attribute GPU processes to pods: the plugin sees host PIDs'
    cgroups, through a read-only host /proc (GPUSLICE_HOST_PROC) or the host PID namespace."""

    def test_sharing_overlays_see_host_processes(self):
        for o in OVERLAYS:
            spec = one(self.docs[o], "DaemonSet", "gpuslice-device-plugin")["spec"]["template"][
                "spec"]
            c = spec["containers"][0]
            env = {e["name"]: e.get("value") for e in c["env"]}
            vols = {v["name"]: v for v in spec["volumes"]}
            host_proc = [m for m in c["volumeMounts"]
                         if vols[m["name"]].get("hostPath", {}).get("path") == "/proc"]
            if o not in SHARED:
                self.assertEqual(host_proc, [], o)
                self.assertNotIn("GPUSLICE_HOST_PROC", env, o)
                continue
            self.assertEqual(len(host_proc), 1, o)
            self.assertTrue(host_proc[0]["readOnly"], o)  # least privilege: read-only
            self.assertEqual(env["GPUSLICE_HOST_PROC"], host_proc[0]["mountPath"], o)
            self.assertNotEqual(host_proc[0]["mountPath"], "/proc", o)
            if o not in MPS_INTERNAL:  # no hostPID just for attribution
                self.assertNotIn("hostPID", spec, o)


class Components(unittest.TestCase):
    @unittest.skipIf(not KUBECTL, "kubectl not installed")
    def test_cdi_mounts_the_cdi_root_writable(self):
        spec = one(render_with_components("cdi"), "DaemonSet")["spec"]["template"]["spec"]
        c = spec["containers"][0]
        vols = {v["name"]: v for v in spec["volumes"]}
        m = [m for m in c["volumeMounts"] if m["mountPath"] == "/var/run/cdi"]
        self.assertEqual(len(m), 1)
        self.assertFalse(m[0].get("readOnly", False))  # the plugin writes its spec there
        self.assertEqual(vols[m[0]["name"]]["hostPath"]["path"], "/var/run/cdi")
        self.assertTrue(c["securityContext"]["readOnlyRootFilesystem"])

    @unittest.skipIf(not KUBECTL, "kubectl not installed")
    def test_pod_attribution_component_alone(self):
        spec = one(render_with_components("pod-attribution"), "DaemonSet")["spec"]["template"][
            "spec"]
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        self.assertEqual(env["GPUSLICE_HOST_PROC"], "/host/proc")


class MigByLabel(Rendered):
    def test_mig_config_file_state_label_and_mounts(self):
        docs = self.docs["mig-by-label"]
        spec = one(docs, "DaemonSet", "gpuslice-device-plugin")["spec"]["template"]["spec"]
        c = spec["containers"][0]
        env = {e["name"]: e.get("value") for e in c["env"]}
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        vols = {v["name"]: v for v in spec["volumes"]}
        mig = mounts[env["MIG_CONFIG_FILE"]]
        self.assertTrue(mig["readOnly"])
        self.assertNotIn("subPath", mig)  # a directory: edits apply live
        cm = one(docs, "ConfigMap", vols[mig["name"]]["configMap"]["name"])
        layouts = yaml.safe_load(cm["data"]["config.yaml"])
        self.assertIn("all-1g.10gb", layouts["mig-configs"])
        self.assertIn("all-disabled", layouts["mig-configs"])
        cfg = yaml.safe_load(one(docs, "ConfigMap", "gpuslice-configs")["data"]["default"])
        self.assertEqual(cfg["flags"]["migStrategy"], "mixed")
        self.assertEqual(env["NVIDIA_MIG_MONITOR_DEVICES"], "all")
        self.assertNotIn("GPUSLICE_LABELS", env)  # the state label needs no label writer
        with tempfile.TemporaryDirectory() as tmp:  # gpuslice itself accepts the layouts
            path = os.path.join(tmp, "config.yaml")
            with open(path, "w") as f:
                f.write(cm["data"]["config.yaml"])
            r = subprocess.run([os.path.join(BUILD, "gpuslice"), "mig", "plan", "-f", tmp,
                                "-c", "all-1g.10gb", "--gpu-model", "NVIDIA A100-SXM4-80GB"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.count("1g.10gb      id 19"), 7, r.stdout)


class Admission(Rendered):
    def policy(self, o):
        return one(self.docs[o], "ValidatingAdmissionPolicy", "gpuslice-shared-requests")

    def test_present_where_shared(self):
        for o in OVERLAYS:
            kinds = {d["kind"] for d in self.docs[o]}
            self.assertEqual("ValidatingAdmissionPolicy" in kinds, o in SHARED, o)

    def test_structure(self):
        for o in SHARED:
            p = self.policy(o)
            b = one(self.docs[o], "ValidatingAdmissionPolicyBinding")
            params = one(self.docs[o], "ConfigMap", "gpuslice-admission-params")
            self.assertEqual(p["apiVersion"], "admissionregistration.k8s.io/v1")
            self.assertEqual(b["apiVersion"], "admissionregistration.k8s.io/v1")
            self.assertNotIn("namespace", p["metadata"])  # cluster-scoped
            self.assertEqual(p["spec"]["paramKind"], {"apiVersion": "v1", "kind": "ConfigMap"})
            self.assertEqual(p["spec"]["failurePolicy"], "Fail")
            res = {(g, r) for rule in p["spec"]["matchConstraints"]["resourceRules"]
                   for g in rule["apiGroups"] for r in rule["resources"]
                   if "CREATE" in rule["operations"]}
            for want in [("", "pods"), ("apps", "deployments"), ("apps", "statefulsets"),
                         ("apps", "daemonsets"), ("batch", "jobs")]:
                self.assertIn(want, res)
            self.assertEqual(b["spec"]["policyName"], p["metadata"]["name"])
            self.assertEqual(b["spec"]["validationActions"], ["Deny"])
            self.assertEqual(b["spec"]["paramRef"]["name"], params["metadata"]["name"])
            self.assertEqual(b["spec"]["paramRef"]["namespace"], params["metadata"]["namespace"])
            self.assertIn(b["spec"]["paramRef"]["parameterNotFoundAction"], ("Allow", "Deny"))
            for v in p["spec"]["variables"]:
                cel_subset.parse(v["expression"])
            for v in p["spec"]["validations"]:
                cel_subset.parse(v["expression"])
                cel_subset.parse(v["messageExpression"])
            names = {v["name"] for v in p["spec"]["variables"]}
            text = yaml.safe_dump(p["spec"])
            self.assertTrue(set(re.findall(r"variables\.(\w+)", text)) <= names)

    def test_params_match_gpuslice(self):
        for o in SHARED:
            r = subprocess.run([os.path.join(BUILD, "gpuslice"), "plan", "--admission-params",
                                "--config", os.path.join(KUST, "overlays", o, "configs")],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            gen = yaml.safe_load(r.stdout)
            cm = one(self.docs[o], "ConfigMap", "gpuslice-admission-params")
            self.assertEqual(cm["data"], gen["data"],
                             "%s: admission-params.yaml is stale; regenerate it with gpuslice "
                             "plan --admission-params (docs/deploy.md)" % o)
        self.assertEqual(one(self.docs["time-slicing"], "ConfigMap",
                             "gpuslice-admission-params")["data"]["resources"],
                         "nvidia.com/gpu.shared")
        self.assertEqual(one(self.docs["per-node"], "ConfigMap",
                             "gpuslice-admission-params")["data"]["resources"], "nvidia.com/gpu")

    def test_behaviour_on_sample_objects(self):
        p = self.policy("time-slicing")
        params = one(self.docs["time-slicing"], "ConfigMap", "gpuslice-admission-params")
        res = "nvidia.com/gpu.shared"

        def ctr(n, where="limits", name="main"):
            return {"name": name, "image": "x", "resources": {where: {res: n}}}

        def pod(*containers, init=()):
            spec = {"containers": list(containers)}
            if init:
                spec["initContainers"] = list(init)
            return {"kind": "Pod", "spec": spec}

        def templ(kind, spec):
            if kind == "CronJob":
                return {"kind": kind, "spec": {"jobTemplate": {"spec": {"template":
                                                                        {"spec": spec}}}}}
            return {"kind": kind, "spec": {"template": {"spec": spec}}}

        run = lambda obj, prm=params: cel_subset.run_policy(p, obj, prm)  # noqa: E731
        self.assertIsNone(run(pod(ctr("1"))))
        self.assertIsNone(run(pod({"name": "cpu", "image": "x"})))
        self.assertIsNone(run(pod({"name": "g", "resources": {"limits": {"nvidia.com/gpu": "4"}}})))
        msg = run(pod(ctr("2")))
        self.assertIn(res, msg)
        self.assertIn("ask for 1", msg)
        self.assertIsNotNone(run(pod(ctr(2))))  # an int quantity too
        self.assertIsNotNone(run(pod(ctr("2", "requests"))))
        self.assertIsNotNone(run(pod(ctr("1"), init=[ctr("3", name="init")])))
        for kind in ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"):
            self.assertIsNotNone(run(templ(kind, pod(ctr("2"))["spec"])), kind)
            self.assertIsNone(run(templ(kind, pod(ctr("1"))["spec"])), kind)
        # empty parameter list: nothing refused
        self.assertIsNone(run(pod(ctr("2")), {"data": {"resources": ""}}))
        self.assertIsNone(run(pod(ctr("2")), {}))

    def test_create_only(self):
        # objects that exist are never blocked from being updated (or their finalizers
        # removed): only creation is checked
        for o in SHARED:
            for rule in self.policy(o)["spec"]["matchConstraints"]["resourceRules"]:
                self.assertEqual(rule["operations"], ["CREATE"], o)

    def test_only_shared_resources(self):
        """Issue 18: per-node refused every pod asking for more than one nvidia.com/gpu,
        cluster-wide (an 8-GPU training job on another node pool). Renamed shared resources
        are refused everywhere; per-node's plain name only for pods that select sharing
        nodes."""
        def pod(res, n, selector=None, kind="Pod"):
            spec = {"containers": [{"name": "c", "image": "x",
                                    "resources": {"limits": {res: n}}}]}
            if selector is not None:
                spec["nodeSelector"] = selector
            if kind == "Pod":
                return {"kind": "Pod", "spec": spec}
            return {"kind": kind, "spec": {"template": {"spec": spec}}}

        for o in SHARED - {"per-node"}:
            p = self.policy(o)
            prm = one(self.docs[o], "ConfigMap", "gpuslice-admission-params")
            shared = prm["data"]["resources"].split(",")
            self.assertNotIn("nvidia.com/gpu", shared, o)  # renamed: whole GPUs untouched
            self.assertIsNone(cel_subset.run_policy(p, pod("nvidia.com/gpu", "8"), prm), o)
            self.assertIsNotNone(cel_subset.run_policy(p, pod(shared[0], "2"), prm), o)
        p = self.policy("per-node")
        prm = one(self.docs["per-node"], "ConfigMap", "gpuslice-admission-params")
        run = lambda obj: cel_subset.run_policy(p, obj, prm)  # noqa: E731
        gpu = "nvidia.com/gpu"
        # whole GPUs elsewhere: an 8-GPU job, with or without a selector of its own pool
        self.assertIsNone(run(pod(gpu, "8")))
        self.assertIsNone(run(pod(gpu, "8", {"node-pool": "training"})))
        self.assertIsNone(run(pod(gpu, "8", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                             "nvidia.com/gpu.replicas": "1"})))
        self.assertIsNone(run(pod(gpu, "8", {"nvidia.com/gpu.sharing-strategy": "none"})))
        # pods that select the sharing nodes: the seed's 2-GPU request is refused
        for sel in ({"nvidia.com/device-plugin.config": "l20"},
                    {"nvidia.com/gpu.product": "NVIDIA-L20-SHARED"},
                    {"nvidia.com/gpu.replicas": "8"},
                    {"nvidia.com/gpu.sharing-strategy": "time-slicing"}):
            msg = run(pod(gpu, "2", sel))
            self.assertIsNotNone(msg, sel)
            self.assertIn(gpu, msg)
            self.assertIsNone(run(pod(gpu, "1", sel)), sel)
            self.assertIsNotNone(run(pod(gpu, "2", sel, kind="Deployment")), sel)

    def test_cel_subset_rejects_malformed(self):
        for bad in ["size(variables.over == 0", "a ? b", "a &&", "'open", "x.", "f(a,,b)"]:
            with self.assertRaises(cel_subset.CelError, msg=bad):
                cel_subset.parse(bad)


def sample_device(kind, memory="80Gi", driver="gpu.nvidia.com", product="NVIDIA H100",
                  shareable=None):
    """A device as DRA's CEL sees it: attributes and capacity by domain, plain values;
    allowMultipleAllocations as the allocator gives it (false when the slice leaves it out)."""
    return {"driver": driver, "allowMultipleAllocations": bool(shareable),
            "attributes": {driver: {"type": kind, "productName": product}},
            "capacity": {driver: {"memory": cel_subset.Quantity(memory)}}}


def selects(expression, device):
    try:
        return bool(cel_subset.evaluate(cel_subset.parse(expression), {"device": device}))
    except cel_subset.Absent:
        return False


FRACTION_CLASS = "gpu-fraction.gpuslice.io"


@unittest.skipIf(not KUBECTL, "kubectl not installed (it renders the kustomize overlays)")
class Dra(unittest.TestCase):
    """overlays/dra: the agent as NVIDIA's DRA kubelet plugin (issue 22, docs/dra.md)."""

    @classmethod
    def setUpClass(cls):
        cls.docs = render("dra")

    def plugin_envs(self):
        """The env vars dra-plugin reads: its flags' (dra_options.c), the two device-plugin
        settings it keeps, NODE_IP (the metrics endpoint's probe slots) and the runtime's."""
        with open(os.path.join(SRC, "src/daemon/dra_options.c")) as f:
            table = f.read().split("dra_flags[] = {")[1].split("};")[0]
        envs = set(re.findall(r'"([A-Z][A-Z0-9_]*)"', table))
        self.assertIn("KUBELET_PLUGINS_DIRECTORY_PATH", envs)
        with open(os.path.join(SRC, "src/metrics/http.c")) as f:
            self.assertIn('"NODE_IP"', f.read())  # read where the probe slots are kept
        return envs | {"FAIL_ON_INIT_ERROR", "POD_RESOURCES_SOCKET", "NVIDIA_VISIBLE_DEVICES",
                       "NODE_IP"}

    def plugin(self):
        return one(self.docs, "DaemonSet", "gpuslice-device-plugin")["spec"]["template"]["spec"]

    def test_device_classes_are_nvidias(self):
        want = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig"}
        classes = [d for d in self.docs if d["kind"] == "DeviceClass"]
        self.assertEqual(sorted(d["metadata"]["name"] for d in classes),
                         sorted(list(want) + [FRACTION_CLASS]))
        classes = [d for d in classes if d["metadata"]["name"] in want]
        for d in classes:
            name = d["metadata"]["name"]
            self.assertEqual(d["apiVersion"], "resource.k8s.io/v1")
            [sel] = d["spec"]["selectors"]
            self.assertEqual(sel["cel"]["expression"],
                             "device.driver == 'gpu.nvidia.com' && "
                             "device.attributes['gpu.nvidia.com'].type == '%s'" % want[name])
            if name == "gpu.nvidia.com":
                self.assertEqual(d["spec"]["extendedResourceName"], "nvidia.com/gpu")
            else:
                self.assertNotIn("extendedResourceName", d["spec"])
            for kind in ("gpu", "mig"):
                self.assertEqual(selects(sel["cel"]["expression"], sample_device(kind)),
                                 kind == want[name], (name, kind))
            self.assertFalse(selects(sel["cel"]["expression"],
                                     sample_device(want[name], driver="other.example.com")))

    def test_fraction_class_selects_shareable_gpus_only(self):
        """gpuslice's class for GPUs sold by memory: whole GPUs of the driver published with
        allowMultipleAllocations (sharing.fractions), never MIG devices or unshareable GPUs;
        the same object as examples/dra/fractions/deviceclass.yaml."""
        d = one(self.docs, "DeviceClass", FRACTION_CLASS)
        self.assertEqual(d["apiVersion"], "resource.k8s.io/v1")
        self.assertNotIn("extendedResourceName", d["spec"])
        [sel] = d["spec"]["selectors"]
        e = sel["cel"]["expression"]
        self.assertTrue(selects(e, sample_device("gpu", shareable=True)))
        self.assertFalse(selects(e, sample_device("gpu", shareable=False)))
        self.assertFalse(selects(e, sample_device("mig", shareable=True)))
        self.assertFalse(selects(e, sample_device("gpu", driver="other.example.com",
                                                  shareable=True)))
        with open(os.path.join(SRC, "examples/dra/fractions/deviceclass.yaml")) as f:
            example = yaml.safe_load(f)
        self.assertEqual(example["metadata"]["name"], FRACTION_CLASS)
        self.assertEqual(example["spec"], d["spec"])

    def test_fractions_example_deploys_the_config(self):
        """examples/dra/fractions: the dra overlay with config.yaml as the plugin's config
        (CONFIG_FILE, the ConfigMap folder mounted read-only), the fraction class, nothing
        dra-plugin does not read."""
        docs = render_dir(os.path.join(SRC, "examples/dra/fractions"))
        ds = one(docs, "DaemonSet", "gpuslice-device-plugin")["spec"]["template"]["spec"]
        [c] = ds["containers"]
        self.assertEqual(c["command"], ["gpuslice", "dra-plugin"])
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["CONFIG_FILE"], "/etc/gpuslice/configs")
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        m = mounts["/etc/gpuslice/configs"]
        self.assertTrue(m["readOnly"])
        vols = {v["name"]: v for v in ds["volumes"]}
        self.assertEqual(vols[m["name"]]["configMap"]["name"], "gpuslice-configs")
        cm = one(docs, "ConfigMap", "gpuslice-configs")
        with open(os.path.join(SRC, "examples/dra/fractions/config.yaml")) as f:
            self.assertEqual(cm["data"], {"default": f.read()})
        one(docs, "DeviceClass", FRACTION_CLASS)
        self.assertEqual(set(env) - self.plugin_envs(), set())

    def test_rbac_least_privilege_and_justified(self):
        role = one(self.docs, "ClusterRole", "gpuslice-dra")
        got = [((tuple(r["apiGroups"]), tuple(r["resources"])), sorted(r["verbs"]))
               for r in role["rules"]]
        self.assertEqual(got, [
            ((("resource.k8s.io",), ("resourceslices",)),
             sorted(["get", "list", "watch", "create", "update", "patch", "delete"])),
            ((("resource.k8s.io",), ("resourceclaims",)), ["get", "list", "watch"]),
            ((("",), ("nodes",)), ["get"]),
            ((("",), ("events",)), ["create", "patch"])])
        sa = one(self.docs, "ServiceAccount", "gpuslice")
        b = one(self.docs, "ClusterRoleBinding", "gpuslice-dra")
        self.assertEqual(b["roleRef"], {"apiGroup": "rbac.authorization.k8s.io",
                                        "kind": "ClusterRole", "name": "gpuslice-dra"})
        self.assertEqual(b["subjects"], [{"kind": "ServiceAccount", "name": "gpuslice",
                                          "namespace": sa["metadata"]["namespace"]}])
        self.assertEqual(self.plugin()["serviceAccountName"], "gpuslice")
        with open(os.path.join(KUST, "components/dra/rbac.yaml")) as f:
            src = f.read()
        blocks = re.findall(r"((?:\s*#.*\n)+)\s*verbs: \[([^\]]*)\]", src)
        self.assertEqual(len(blocks), 4)
        for comment, verbs in blocks:
            for verb in re.findall(r'"(\w+)"', verbs):
                self.assertRegex(comment, r"\b%s\b" % verb, "verb %s not justified" % verb)

    def test_plugin_command_env_mounts_privilege(self):
        spec = self.plugin()
        [c] = spec["containers"]
        self.assertEqual(c["command"], ["gpuslice", "dra-plugin"])
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName")
        self.assertEqual(env["CDI_ROOT"]["value"], "/var/run/cdi")
        self.assertEqual(env["NVIDIA_DRIVER_ROOT"]["value"], "/")
        self.assertEqual(env["DRIVER_ROOT_CTR_PATH"]["value"], "/driver-root")
        self.assertEqual(env["KUBELET_PLUGINS_DIRECTORY_PATH"]["value"], "/var/lib/kubelet/plugins")
        self.assertEqual(env["KUBELET_REGISTRAR_DIRECTORY_PATH"]["value"],
                         "/var/lib/kubelet/plugins_registry")
        vols = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        for path, host, ro in (("/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins", False),
                               ("/var/lib/kubelet/plugins_registry",
                                "/var/lib/kubelet/plugins_registry", False),
                               ("/var/run/cdi", "/var/run/cdi", False),
                               ("/driver-root", "/", True)):
            m = mounts[path]
            self.assertEqual(vols[m["name"]]["hostPath"]["path"], host, path)
            self.assertEqual(m.get("readOnly", False), ro, path)
        self.assertEqual(mounts["/var/lib/kubelet/plugins"]["mountPropagation"], "Bidirectional")
        sc = c["securityContext"]
        self.assertTrue(sc["privileged"])
        # the API server refuses privileged with allowPrivilegeEscalation false
        self.assertTrue(sc["allowPrivilegeEscalation"])
        ns = one(self.docs, "Namespace", "gpuslice")
        self.assertEqual(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
                         "privileged")
        self.assertEqual(len([d for d in self.docs if d["kind"] == "DaemonSet"]), 1)

    def test_plugin_reads_every_env_and_mount(self):
        """Nothing in the DaemonSet that dra-plugin ignores: each env var is one of its flags'
        (dra_options.c), one of the two device-plugin settings it keeps (FAIL_ON_INIT_ERROR,
        POD_RESOURCES_SOCKET for per-pod metrics), NODE_IP (the metrics endpoint keeps probe
        slots for the node's address: src/metrics/http.c) or the runtime's
        NVIDIA_VISIBLE_DEVICES."""
        spec = self.plugin()
        [c] = spec["containers"]
        self.assertEqual({e["name"] for e in c["env"]} - self.plugin_envs(), set())
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        self.assertNotIn("/etc/gpuslice/configs", mounts)  # no ConfigMap: claims configure
        self.assertNotIn("configs", {v["name"] for v in spec["volumes"]})
        # the one-API rule: a live nvidia-*.sock here means the device plugin serves the node
        self.assertTrue(mounts["/var/lib/kubelet/device-plugins"]["readOnly"])

    def test_probes_on_the_metrics_port(self):
        """/healthz (the loop answers) and /readyz (the kubelet accepted the registration) on
        GPUSLICE_METRICS_ADDRESS; liveness outlasts the slowest prepare it can block behind."""
        [c] = self.plugin()["containers"]
        port = {p["name"]: p["containerPort"] for p in c["ports"]}["metrics"]
        env = {e["name"]: e.get("value") for e in c["env"]}
        self.assertEqual(env["GPUSLICE_METRICS_ADDRESS"], ":%d" % port)
        live, ready = c["livenessProbe"], c["readinessProbe"]
        self.assertEqual(live["httpGet"], {"path": "/healthz", "port": "metrics"})
        self.assertEqual(ready["httpGet"], {"path": "/readyz", "port": "metrics"})
        # /healthz waits up to 2 s for the loop (METRICS_HEALTHZ_TIMEOUT_MS)
        self.assertGreater(live["timeoutSeconds"], 2)
        # an 8-GPU TimeSlicing prepare: 2 nvidia-smi calls a GPU, 10 s each at most
        self.assertGreaterEqual(live["periodSeconds"] * live["failureThreshold"], 8 * 2 * 10)

    def test_docs_examples_parse_and_select(self):
        with open(os.path.join(SRC, "docs/dra.md")) as f:
            blocks = re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
        objs = [d for b in blocks for d in yaml.safe_load_all(b) if d]
        kinds = {d["kind"] for d in objs}
        self.assertTrue({"ResourceClaim", "ResourceClaimTemplate", "DeviceClass",
                         "Pod"} <= kinds, kinds)
        for d in objs:
            self.assertIn(d["apiVersion"], ("v1", "apps/v1", "resource.k8s.io/v1"), d)
        exprs = []
        for d in objs:
            spec = d.get("spec", {})
            if d["kind"] == "ResourceClaimTemplate":
                spec = spec["spec"]
            reqs = spec.get("devices", {}).get("requests", []) if d["kind"] != "DeviceClass" \
                else [{"exactly": spec}]
            for r in reqs:
                exprs += [s["cel"]["expression"] for s in r["exactly"].get("selectors", [])]
        forty = [e for e in exprs if "quantity('40Gi')" in e]
        self.assertTrue(forty, exprs)
        for e in forty:
            self.assertTrue(selects(e, sample_device("gpu", "80Gi")), e)
            self.assertTrue(selects(e, sample_device("gpu", "40Gi")), e)
            self.assertFalse(selects(e, sample_device("gpu", "24Gi")), e)
        for e in exprs:
            cel_subset.parse(e)  # well formed


class Dockerfile(unittest.TestCase):
    """docker is not available here: the Dockerfile is checked as text against the files it
    shares with `make image-rootfs` (test_image_rootfs.sh runs what that produces)."""

    def setUp(self):
        ctr = os.path.join(SRC, "deployments/container")
        with open(os.path.join(ctr, "Dockerfile")) as f:
            self.text = f.read()
        self.stages = re.findall(r"^FROM (\S+)", self.text, re.M)

    def test_stages_and_entrypoint(self):
        self.assertEqual(self.stages, ["debian:12", "debian:12-slim"])
        runtime = self.text[self.text.rindex("FROM "):]
        self.assertIn("scripts/install-deps", self.text[:self.text.rindex("FROM ")])
        # NVIDIA's: `command:` replaces it, `args:` alone (static manifests) are appended to it
        self.assertEqual(re.findall(r"^ENTRYPOINT (.*)$", self.text, re.M),
                         ['["nvidia-device-plugin"]'])
        self.assertFalse(re.search(r"^CMD", self.text, re.M))  # args replace CMD: none needed
        self.assertRegex(self.text, r"ENV NVIDIA_VISIBLE_DEVICES=all "
                                    r"NVIDIA_DRIVER_CAPABILITIES=compute,utility")
        # the version in the labels, as make image (scripts/image-oci) writes it
        self.assertRegex(runtime, r"org\.opencontainers\.image\.version=\$VERSION")
        # the runtime stage installs exactly the shared list and links the shared names
        self.assertIn("runtime-packages.txt", runtime)
        self.assertIn("links.txt", runtime)
        self.assertIn("--no-install-recommends", runtime)
        code = [line for line in self.text.splitlines() if not line.lstrip().startswith("#")]
        self.assertFalse([line for line in code if "nvidia-ml" in line or "libnvidia" in line])
        with open(os.path.join(SRC, "scripts/image-rootfs")) as f:
            script = f.read()
        self.assertIn("runtime-packages.txt", script)
        self.assertIn("links.txt", script)

    def test_package_list_has_no_nvml(self):
        with open(os.path.join(SRC, "deployments/container/runtime-packages.txt")) as f:
            pkgs = [line.strip() for line in f if line.strip() and not line.startswith("#")]
        self.assertIn("libc6", pkgs)
        self.assertFalse([p for p in pkgs if "nvidia" in p], pkgs)


if __name__ == "__main__":
    if not KUBECTL:  # CTest reports exit 77 as skipped (SKIP_RETURN_CODE)
        print("SKIPPED: kubectl not installed (it renders the kustomize overlays)")
        sys.exit(77)
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)

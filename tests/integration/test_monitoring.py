#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_monitoring.py: what a Prometheus user takes from deployments/ (issue 20 §2): the
# monitoring component (Service, ServiceMonitor, PrometheusRule, Grafana dashboard) and its
# plain/ scrape annotations render with the base and point at the metrics port; the rules
# pass `promtool check rules` and the cases of tests/deploy/rules_test.yaml; a live /metrics
# (daemon, kubelet-sim, fake NVML: a time-sliced GPU with pods, the health thread) passes
# `promtool check metrics` apart from dcgm-exporter's own naming (camelCase labels,
# counters without _total), and every metric the rules and the dashboard query is in it.
# Parts whose tool (kubectl, promtool) is missing are skipped with the reason.
# Usage: test_monitoring.py SOURCE_DIR BUILD_DIR
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_metrics_pods import CID, UIDS, write_checkpoint  # noqa: E402
from test_reload_live import GPU, ReloadCase, wait_for, write_file  # noqa: E402

SRC = os.path.abspath(sys.argv[1])
COMPONENT = os.path.join(SRC, "deployments/kustomize/components/monitoring")
DASHBOARD = os.path.join(COMPONENT, "dashboards/gpuslice-shared-gpus.json")
RULE_TESTS = os.path.join(SRC, "tests/deploy/rules_test.yaml")
PROMTOOL = shutil.which("promtool")
KUBECTL = shutil.which("kubectl")
UID = UIDS[0]
# dcgm-exporter's names, kept for its dashboards: promtool's lint flags them, nothing else
DCGM_LINT = ("label names should be written in 'snake_case' not 'camelCase'",
             'counter metrics should have "_total" suffix',
             "metric name should not include type 'counter'")


def rules():
    with open(os.path.join(COMPONENT, "prometheusrule.yaml")) as f:
        return yaml.safe_load(f)


def queried_metrics():
    """Metric names the rules and the dashboard query."""
    exprs = [r["expr"] for g in rules()["spec"]["groups"] for r in g["rules"]]
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs += [t["expr"] for p in dash["panels"] for t in p["targets"]]
    names = set()
    for e in exprs:
        e = re.sub(r"\{[^}]*\}|\[[^]]*\]", "", e)  # selectors and ranges
        names |= {w for w in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", e)
                  if w.startswith(("gpuslice_", "DCGM_"))}
    return names


class Component(unittest.TestCase):
    @unittest.skipIf(not KUBECTL, "kubectl not installed (it renders the kustomize component)")
    def test_renders_with_the_base_and_points_at_the_metrics_port(self):
        tmp = tempfile.mkdtemp(prefix="gs-mon-")
        try:
            rel = os.path.relpath(os.path.join(SRC, "deployments/kustomize"), tmp)
            write_file(os.path.join(tmp, "kustomization.yaml"),
                       "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                       "resources:\n- %s/base\ncomponents:\n- %s/components/monitoring\n"
                       "- %s/components/monitoring/plain\n" % (rel, rel, rel))
            r = subprocess.run([KUBECTL, "kustomize", tmp], capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            docs = [d for d in yaml.safe_load_all(r.stdout) if d]
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
        ds = by[("DaemonSet", "gpuslice-device-plugin")]
        pod = ds["spec"]["template"]
        port, = [p for c in pod["spec"]["containers"] for p in c.get("ports", [])
                 if p["name"] == "metrics"]
        svc = by[("Service", "gpuslice-metrics")]
        self.assertEqual(svc["metadata"]["namespace"], ds["metadata"]["namespace"])
        for k, v in svc["spec"]["selector"].items():
            self.assertEqual(pod["metadata"]["labels"][k], v)
        self.assertEqual(svc["spec"]["ports"][0]["targetPort"], "metrics")
        sm = by[("ServiceMonitor", "gpuslice")]
        for k, v in sm["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(svc["metadata"]["labels"][k], v)
        self.assertEqual(sm["spec"]["endpoints"][0]["port"], svc["spec"]["ports"][0]["name"])
        self.assertIn(("PrometheusRule", "gpuslice"), by)
        cm = by[("ConfigMap", "gpuslice-grafana-dashboard")]
        self.assertEqual(cm["metadata"]["labels"]["grafana_dashboard"], "1")
        dash = json.loads(cm["data"]["gpuslice-shared-gpus.json"])
        self.assertEqual(dash["uid"], "gpuslice-shared-gpus")
        ann = pod["metadata"]["annotations"]
        self.assertEqual((ann["prometheus.io/scrape"], ann["prometheus.io/port"],
                          ann["prometheus.io/path"]),
                         ("true", str(port["containerPort"]), "/metrics"))

    def test_dashboard_has_the_shared_gpu_panels(self):
        with open(DASHBOARD) as f:
            dash = json.load(f)
        exprs = " ".join(t["expr"] for p in dash["panels"] for t in p["targets"])
        for name in ("gpuslice_pod_gpu_memory_used_bytes", "gpuslice_pod_gpu_sm_utilization_ratio",
                     "gpuslice_pod_gpu_replicas", "gpuslice_gpu_unhealthy_devices"):
            self.assertIn(name, exprs)
        self.assertEqual(len({p["id"] for p in dash["panels"]}), len(dash["panels"]))


@unittest.skipIf(not PROMTOOL, "promtool not installed (Debian's prometheus package)")
class Rules(unittest.TestCase):
    def test_check_and_test_rules(self):
        tmp = tempfile.mkdtemp(prefix="gs-rules-")
        try:
            with open(os.path.join(tmp, "gpuslice-rules.yaml"), "w") as f:
                yaml.safe_dump(rules()["spec"], f)
            shutil.copy(RULE_TESTS, tmp)
            r = subprocess.run([PROMTOOL, "check", "rules", "gpuslice-rules.yaml"], cwd=tmp,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("SUCCESS: 6 rules found", r.stdout)
            r = subprocess.run([PROMTOOL, "test", "rules", "rules_test.yaml"], cwd=tmp,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class LiveMetrics(ReloadCase):
    def scrape(self):
        """/metrics of a node with a 4-way time-sliced L20, one pod with a process on it,
        the health thread running."""
        machine = os.path.join(self.root, "l20")
        write_file(machine + ".yaml", "gpus:\n  - model: NVIDIA L20\n"
                                      "    processes: [{pid: 4001, used_mib: 4621, sm_util: 30}]\n")
        proc = os.path.join(self.root, "proc")
        os.makedirs(os.path.join(proc, "4001"))
        write_file(os.path.join(proc, "4001", "cgroup"),
                   "0::/kubepods/besteffort/pod%s/%s\n" % (UID, CID))
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                        "      - name: nvidia.com/gpu\n        replicas: 4\n")
        events = os.path.join(self.root, "events")
        write_file(events, "")
        n = self.node(machine, ["--config-file", cfg, "--metrics-address", "127.0.0.1:0",
                                "--metrics-sample-interval", "200ms", "--host-proc", proc],
                      env={"FAKE_NVML_EVENTS": events})
        self.wait_capacity(n, 4, 10)
        pod = n.sim.must("admit p0 %s=1" % GPU)["pod"]
        write_checkpoint(n.plugin_dir, [(UID, "main", GPU, pod["devices"][GPU])])
        wait_for(lambda: "(port " in self.log_text(n), 10, "the metrics port")
        port = int(re.search(r"\(port (\d+)\)", self.log_text(n)).group(1))
        import urllib.request

        def text():
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                return r.read().decode()
        wait_for(lambda: 'pod="p0"' in text() and "gpuslice_xid_errors_total" in text(), 10,
                 "the pod's series and the health thread's")
        return text()

    @unittest.skipIf(not PROMTOOL, "promtool not installed (Debian's prometheus package)")
    def test_promtool_check_metrics_and_every_queried_metric_exists(self):
        text = self.scrape()
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
        problems = [line for line in (r.stdout + r.stderr).splitlines() if line.strip()]
        others = [p for p in problems if not (p.startswith("DCGM_") and p.endswith(DCGM_LINT))]
        self.assertEqual(others, [], "promtool check metrics:\n" + "\n".join(problems))
        self.assertTrue(problems)  # dcgm's camelCase labels are there: the check ran
        families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
        # MPS and MIG families only exist where the daemon runs MPS daemons or MIG config
        missing = queried_metrics() - families - {"gpuslice_mps_daemon_up",
                                                  "gpuslice_mig_config_state"}
        self.assertEqual(missing, set())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# bench_mig_label.py: how long a MIG layout named by the node label takes to reach the
# kubelet (issue 11, target < 2 s, fake NVML, no pods). One daemon on 2 fake A100-80GB with
# kubelet-sim and fake_apiserver.py; nvidia.com/mig.config alternates all-1g.10gb and
# all-3g.40gb, timed from the label change until kubelet-sim lists the new MIG resource at
# full capacity. Prints one JSON line (p50/p95/max over the runs).
# Usage: bench_mig_label.py BUILD_DIR [RUNS]
import os
import shutil
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "bench"))
sys.path.insert(0, os.path.join(SRC, "tests/integration"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
from bench_reload import stats  # noqa: E402  (reads BUILD RUNS from argv too, then sets it)
from fake_apiserver import FakeApiServer  # noqa: E402
from test_reload_live import demo  # noqa: E402

LABEL = "nvidia.com/mig.config"


def allocatable(node, resource):
    for r in node.sim.must("capacity")["resources"]:
        if r["resource"] == resource:
            return r["allocatable"]
    return 0


def main():
    root = tempfile.mkdtemp(prefix="gs-bench-mig-")
    api = FakeApiServer(["bench-node"])
    for k in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        os.environ.pop(k, None)
    node = None
    try:
        machine = os.path.join(root, "a100.yaml")
        with open(machine, "w") as f:
            f.write('gpus:\n  - model: NVIDIA A100-SXM4-80GB\n    count: 2\n')
        node = demo.Node("n0", machine, None, root, BUILD,
                         sim_args=["--pod-resources-socket", os.path.join(root, "pr.sock")])
        node.start_plugin(None, ["--kube-api-server", "http://127.0.0.1:%d" % api.port,
                                 "--pod-resources-socket", os.path.join(root, "pr.sock"),
                                 "--mig-strategy", "mixed", "--mig-config-file",
                                 os.path.join(SRC, "examples/mig/config-default.yaml"),
                                 "--log-level", "warn"], {"NODE_NAME": "bench-node"})
        node.wait_allocatable(2)
        ms = []
        for i in range(RUNS):
            value, res, want = (("all-1g.10gb", "nvidia.com/mig-1g.10gb", 14) if i % 2 == 0
                                else ("all-3g.40gb", "nvidia.com/mig-3g.40gb", 4))
            t0 = time.monotonic()
            api.state.set_label("bench-node", LABEL, value)
            while allocatable(node, res) != want:
                if time.monotonic() - t0 > 20:
                    raise SystemExit("bench_mig_label: %s x%d not served" % (res, want))
                time.sleep(0.005)
            ms.append((time.monotonic() - t0) * 1e3)
        stats("mig_label_to_resources", ms, 2000, {"machine": "2x A100-SXM4-80GB (fake)",
                                                    "pods": 0})
    finally:
        if node:
            node.stop()
        api.down()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

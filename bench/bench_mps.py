#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# bench_mps.py: MPS in the agent (issue 12), fake NVML and fake MPS daemon: (1) a config
# switched from time-slicing to MPS until kubelet-sim lists the MPS replicas (daemons
# started, limits applied; target 500 ms); (2) a control daemon killed until kubelet-sim sees
# the resource Unhealthy (target p50 50 ms). One JSON line per case.
# Usage: bench_mps.py BUILD_DIR [RUNS]
import os
import shutil
import signal
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "bench"))
sys.path.insert(0, os.path.join(SRC, "tests/integration"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
from bench_reload import stats  # noqa: E402  (reads BUILD RUNS from argv too, then sets it)
from test_reload_live import demo, write_file  # noqa: E402

GPU = "nvidia.com/gpu"


def allocatable(node):
    for r in node.sim.must("capacity")["resources"]:
        if r["resource"] == GPU:
            return r["allocatable"]
    return 0


def until(cond, limit_s=10):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > limit_s:
            raise SystemExit("bench_mps: condition not met within %.0f s" % limit_s)
        time.sleep(0.001)
    return (time.monotonic() - t0) * 1e3


def main():
    root = tempfile.mkdtemp(prefix="gs-bench-mps-")
    node = None
    try:
        machine = os.path.join(root, "l20.yaml")
        write_file(machine, "gpus:\n  - model: NVIDIA L20\n    count: 2\n")
        mps_root = os.path.join(root, "mps")
        cfg = os.path.join(root, "config.yaml")
        ts = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n" \
             "      - name: nvidia.com/gpu\n        replicas: 3\n"
        mps = ("version: v1\nflags:\n  mpsRoot: %s\nsharing:\n  mps:\n    resources:\n"
               "      - name: nvidia.com/gpu\n        replicas: 4\n" % mps_root)
        write_file(cfg, ts)
        node = demo.Node("n0", machine, None, root, BUILD,
                         sim_args=["--pod-resources-socket", os.path.join(root, "pr.sock")])
        node.start_plugin(None, ["--config-file", cfg, "--mps-control", "internal",
                                 "--mps-control-binary",
                                 os.path.join(BUILD, "tools/fake-mps/nvidia-cuda-mps-control"),
                                 "--log-level", "warn"], {})
        node.wait_allocatable(6)
        applied, down = [], []
        for _ in range(RUNS):
            write_file(cfg, mps)
            applied.append(until(lambda: allocatable(node) == 8))
            state = os.path.join(mps_root, GPU, "log/fake-mps.state")
            pid = int(dict(l.strip().split("=", 1) for l in open(state) if "=" in l)["pid"])
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            until(lambda: allocatable(node) == 0)
            down.append((time.monotonic() - t0) * 1e3)
            until(lambda: allocatable(node) == 8)
            write_file(cfg, ts)
            until(lambda: allocatable(node) == 6)
        stats("mps_config_to_resources", applied, 500,
              {"machine": "2x L20 (fake)", "daemons": 1, "includes": "config debounce 100 ms"})
        stats("mps_daemon_crash_to_unhealthy", down, 50, {"machine": "2x L20 (fake)"})
    finally:
        if node:
            node.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

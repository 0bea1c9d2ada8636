#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench_dra.py BUILD [SAMPLES] [STARTS]: `gpuslice dra-plugin` (issue 22) on the fake NVML
with kubelet-sim and fake_apiserver.py (tests/integration/dra_harness.py). One JSON line per
figure, each with the conditions it ran under:
  - NodePrepareResources for a claim of 1 GPU and one of 8 GPUs on h100-nvswitch-8: SAMPLES
    fresh claims each (prepare, then unprepare), timed by kubelet-sim's own clock (its
    took_ms, whole milliseconds, truncated) and by the wall clock around the command; plus a
    repeat prepare of an already prepared claim (answered from the checkpoint).
  - Slice publication on h100-nvswitch-8 and h20-mig-7x1g (56 MIG devices), STARTS fresh
    nodes each: from spawning the plugin to its ResourceSlice in the API stand-in, and from
    an XID 79 written to the fake NVML's events file to the slice without that GPU's devices.
    The slice is polled; the poll interval is the resolution.
NVIDIA's k8s-dra-driver-gpu is not measured here (no Go toolchain in CI): no figures of
theirs are given."""
import json
import os
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tests/integration"))
from dra_harness import DraNode, wait_for  # noqa: E402

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
SAMPLES = int(sys.argv[2]) if len(sys.argv) > 2 else 50
STARTS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
POLL_S = 0.005
NVIDIA = ("not measured: NVIDIA's k8s-dra-driver-gpu needs a Go toolchain, which CI lacks; "
          "no comparison figures are given")


def pct(values, p):
    """Nearest-rank percentile of values (p in 0..100)."""
    v = sorted(values)
    return v[max(0, min(len(v) - 1, -(-len(v) * p // 100) - 1))]


def build_type():
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_BUILD_TYPE:"):
                    return line.split("=", 1)[1].strip() or \
                        "RelWithDebInfo (CMakeLists.txt's default)"
    except OSError:
        pass
    return "unknown"


def conditions(machine):
    return {"machine": machine, "build_type": build_type(), "nvml": "fake (tools/fake-nvml)",
            "kubelet": "kubelet-sim, one gRPC call per command",
            "api": "fake_apiserver.py (in-process Python HTTP)", "plugin_log": "-v 4 (debug)",
            "host_cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2),
            "nvidia_driver": NVIDIA}


def emit(line):
    print(json.dumps(line), flush=True)


def timed_prepare(node, name, uid, verb="dra-prepare"):
    """(kubelet-sim's took_ms, wall ms) of one call; SystemExit if it failed."""
    t0 = time.monotonic()
    out = node.prepare(name, uid, verb=verb)
    wall_ms = (time.monotonic() - t0) * 1e3
    if not out.get("ok") or out["claims"][0].get("error"):
        raise SystemExit("bench_dra: %s %s failed: %s" % (verb, name, json.dumps(out)))
    return out["took_ms"], wall_ms


def prepare_figures(name, sim_ms, wall_ms, extra):
    line = {"bench": name, "samples": len(sim_ms),
            "p50_ms": pct(sim_ms, 50), "p99_ms": pct(sim_ms, 99), "max_ms": max(sim_ms),
            "percentile": "nearest rank (p99 is sample %d of %d, sorted)"
                          % (-(-len(sim_ms) * 99 // 100), len(sim_ms)),
            "clock": "kubelet-sim took_ms (whole ms, truncated; from before its gRPC call "
                     "to the answer)",
            "wall_p50_ms": round(pct(wall_ms, 50), 2), "wall_p99_ms": round(pct(wall_ms, 99), 2),
            "wall_clock": "bench's monotonic clock around the kubelet-sim command (adds the "
                          "stdin/stdout round trip)"}
    line.update(extra)
    emit(line)


def bench_prepare():
    machine = "h100-nvswitch-8"
    node = DraNode()
    node.machine = machine
    node.node_up(SRC, BUILD)
    try:
        node.slice_devices(8)
        for n_gpus in (1, 8):
            sim_ms, wall_ms = [], []
            for i in range(SAMPLES):
                devices = ["gpu-%d" % ((i + k) % 8) for k in range(n_gpus)]
                name = "c%d-%d" % (n_gpus, i)
                uid = node.claim(name, devices)
                took, wall = timed_prepare(node, name, uid)
                sim_ms.append(took)
                wall_ms.append(wall)
                timed_prepare(node, name, uid, verb="dra-unprepare")
            extra = conditions(machine)
            extra.update({"claim_gpus": n_gpus, "fresh_claim_each_sample": True,
                          "cycle": "prepare, then unprepare"})
            prepare_figures("dra_prepare_%dgpu" % n_gpus, sim_ms, wall_ms, extra)
        sim_ms, wall_ms = [], []
        uid = node.claim("again", ["gpu-0"])
        timed_prepare(node, "again", uid)
        for i in range(SAMPLES):
            took, wall = timed_prepare(node, "again", uid)
            sim_ms.append(took)
            wall_ms.append(wall)
        timed_prepare(node, "again", uid, verb="dra-unprepare")
        extra = conditions(machine)
        extra.update({"claim_gpus": 1, "cycle": "the same prepared claim prepared again "
                      "(checkpoint hit)"})
        prepare_figures("dra_prepare_repeat_1gpu", sim_ms, wall_ms, extra)
    finally:
        problems = node.node_down()
    if problems:
        raise SystemExit("bench_dra: " + "; ".join(problems))


def of_gpu(names, minor):
    return [n for n in names if n == "gpu-%d" % minor or n.startswith("gpu-%d-mig-" % minor)]


def one_start(machine, gpu):
    """(ms to the slice, ms from the XID to the slice without gpu, devices, devices lost)."""
    node = DraNode()
    node.machine = machine
    node.node_up(SRC, BUILD, start=False)
    try:
        t0 = time.monotonic()
        node.spawn_plugin()
        names = wait_for(node.devices_now, "the ResourceSlice", interval=POLL_S)
        publish_ms = (time.monotonic() - t0) * 1e3
        lost = of_gpu(names, gpu)
        if not lost:
            raise SystemExit("bench_dra: no device of GPU %d in %s" % (gpu, names))
        wait_for(node.registered, "the plugin to register")
        wait_for(lambda: "health: watching XID events" in node.log_text(), "the health thread")
        t0 = time.monotonic()
        node.xid(gpu, 79)
        wait_for(lambda: not of_gpu(node.devices_now() or names, gpu), "the XID in the slice",
                 interval=POLL_S)
        xid_ms = (time.monotonic() - t0) * 1e3
    finally:
        problems = node.node_down()
    if problems:
        raise SystemExit("bench_dra: " + "; ".join(problems))
    return publish_ms, xid_ms, len(names), len(lost)


def bench_publication(machine, gpu=3):
    publish, xid = [], []
    for _ in range(STARTS):
        p, x, n_devices, n_lost = one_start(machine, gpu)
        publish.append(p)
        xid.append(x)
    for name, ms, what in (
            ("dra_slice_publish", publish,
             "spawn of gpuslice dra-plugin to its ResourceSlice in the API stand-in"),
            ("dra_slice_xid", xid,
             "XID 79 on GPU %d written to FAKE_NVML_EVENTS to the slice without its "
             "%d device(s)" % (gpu, n_lost))):
        line = {"bench": name, "starts": len(ms), "p50_ms": round(pct(ms, 50), 1),
                "max_ms": round(max(ms), 1), "measures": what, "slice_devices": n_devices,
                "resolution_ms": POLL_S * 1e3,
                "clock": "bench's monotonic clock, slice polled by GET every %g ms (each GET "
                         "adds its own time)" % (POLL_S * 1e3),
                "fresh_node_each_start": True}
        line.update(conditions(machine))
        emit(line)


def main():
    needed = [os.path.join(BUILD, p) for p in ("gpuslice", "tools/kubelet-sim/kubelet-sim",
                                                "tools/fake-nvml/libnvidia-ml.so.1")]
    missing = [p for p in needed if not os.path.exists(p)]
    if missing:
        emit({"bench": "dra", "skipped": "not built: " + ", ".join(missing),
              "nvidia_driver": NVIDIA})
        return
    for k in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        os.environ.pop(k, None)
    bench_prepare()
    bench_publication("h100-nvswitch-8")
    bench_publication("h20-mig-7x1g")


if __name__ == "__main__":
    main()

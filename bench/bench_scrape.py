#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench_scrape.py BUILD [WINDOW_S]: what /metrics costs on a busy shared node: 8 L20 GPUs
x 16 time-slicing replicas (128 devices), 64 GPU processes each in its own pod (cgroups in a
fake /proc, pod UIDs in a kubelet checkpoint), the fake NVML with telemetry. Measures the
scrape latency over 200 scrapes (p50, p99), the daemon's RSS after them, and the CPU the
sampler costs at the default --metrics-sample-interval (10 s) over an idle window. Targets
(issue 13): p50 < 5 ms, RSS < 12 MiB, sampling < 1 % of one core (dcgm-exporter: 135-512 MiB)."""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
WINDOW = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
LIB = os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1")
GPUS, REPLICAS, PODS = 8, 16, 64


def cpu_ms(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def uuids(env):
    """The fake GPUs' UUIDs, through the fake NVML itself (ctypes)."""
    os.environ.update({k: env[k] for k in ("FAKE_NVML_MACHINE", "FAKE_NVML_STATE")})
    nvml = ctypes.CDLL(LIB)
    assert nvml.nvmlInit_v2() == 0
    out = []
    for i in range(GPUS):
        h = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(96)
        assert nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0
        assert nvml.nvmlDeviceGetUUID(h, buf, 96) == 0
        out.append(buf.value.decode())
    nvml.nvmlShutdown()
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="gs-scrape-")
    try:
        machine = os.path.join(tmp, "machine.yaml")
        with open(machine, "w") as f:
            f.write("gpus:\n")
            for g in range(GPUS):  # pod g*8+k runs pid 5000+g*8+k on GPU g
                f.write("  - model: NVIDIA L20\n    telemetry: {gpu_util: 80, mem_util: 40,"
                        " temperature_c: 60, power_w: 250, sm_clock_mhz: 2000}\n"
                        "    processes:\n")
                for k in range(PODS // GPUS):
                    f.write("      - {pid: %d, used_mib: %d, sm_util: %d}\n" %
                            (5000 + g * 8 + k, 1000 + 37 * k, 5 + k))
        cfg = os.path.join(tmp, "config.yaml")
        with open(cfg, "w") as f:
            f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                    "      - name: nvidia.com/gpu\n        replicas: %d\n" % REPLICAS)
        env = dict(os.environ, FAKE_NVML_MACHINE=machine,
                   FAKE_NVML_STATE=os.path.join(tmp, "state"), NODE_NAME="")
        env.pop("FAKE_NVML_EVENTS", None)
        ids = uuids(env)
        proc = os.path.join(tmp, "proc")
        entries = []
        for g in range(GPUS):
            for k in range(PODS // GPUS):
                i = g * 8 + k
                uid = "6a1f0c2e-1111-4000-8000-%012d" % i
                entries.append({"PodUID": uid, "ContainerName": "app",
                                "ResourceName": "nvidia.com/gpu",
                                "DeviceIDs": {"-1": ["%s::%d" % (ids[g], k)]}})
                os.makedirs(os.path.join(proc, str(5000 + i)))
                with open(os.path.join(proc, str(5000 + i), "cgroup"), "w") as f:
                    f.write("0::/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%064x.scope\n"
                            % (uid.replace("-", "_"), i))
        plugins = os.path.join(tmp, "plugins")
        os.makedirs(plugins)
        with open(os.path.join(plugins, "kubelet_internal_checkpoint"), "w") as f:
            json.dump({"Data": {"PodDeviceEntries": entries, "RegisteredDevices": {}},
                       "Checksum": 1}, f)
        log = open(os.path.join(tmp, "log"), "w")
        p = subprocess.Popen([os.path.join(BUILD, "gpuslice"), "device-plugin", "--nvml-library",
                              LIB, "--device-plugin-dir", plugins, "--kubelet-socket", "",
                              "--config-file", cfg, "--inventory-interval", "0",
                              "--pod-resources-socket", os.path.join(tmp, "none.sock"),
                              "--metrics-address", "127.0.0.1:0", "--host-proc", proc],
                             env=env, stdout=log, stderr=log)
        try:
            port = None
            deadline = time.monotonic() + 20
            while port is None:
                if time.monotonic() > deadline or p.poll() is not None:
                    raise SystemExit("bench_scrape: the daemon did not start")
                with open(log.name) as f:
                    m = re.search(r"\(port (\d+)\)", f.read())
                port = int(m.group(1)) if m else None
                time.sleep(0.05)
            url = "http://127.0.0.1:%d/metrics" % port

            def scrape():
                with urllib.request.urlopen(url, timeout=5) as r:
                    return r.read()
            while scrape().count(b"gpuslice_pod_gpu_memory_used_bytes{") < PODS:
                if time.monotonic() > deadline:
                    raise SystemExit("bench_scrape: no per-pod series")
                time.sleep(0.1)
            body = scrape()
            lat = []
            for _ in range(200):
                t0 = time.perf_counter()
                scrape()
                lat.append((time.perf_counter() - t0) * 1000)
            lat.sort()
            rss = rss_kib(p.pid)
            c0, t0 = cpu_ms(p.pid), time.monotonic()
            time.sleep(WINDOW)  # idle: only the sampler (every 10 s) and NVIDIA-like waits
            c1, dt = cpu_ms(p.pid), time.monotonic() - t0
        finally:
            p.terminate()
            p.wait(timeout=10)
        cpu_pct = (c1 - c0) / dt / 10.0
        p50, p99 = lat[len(lat) // 2], lat[int(len(lat) * 0.99)]
        print(json.dumps({
            "bench": "scrape", "scrape_p50_ms": round(p50, 3), "scrape_p99_ms": round(p99, 3),
            "exposition_bytes": len(body), "rss_mib": round(rss / 1024.0, 2),
            "idle_cpu_percent_of_core": round(cpu_pct, 3), "window_s": round(dt, 1),
            "pass": p50 < 5 and rss < 12 * 1024 and cpu_pct < 1.0,
            "targets": {"scrape_p50_ms": 5, "rss_mib": 12, "cpu_percent_of_core": 1},
            "conditions": {"gpus": GPUS, "replicas": REPLICAS, "pods_with_processes": PODS,
                           "sample_interval": "10s (default)", "kubelet": "none",
                           "pod_names": "checkpoint only (no pod-resources)"}}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

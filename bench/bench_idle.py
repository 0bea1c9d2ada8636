#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench_idle.py BUILD [SECONDS]: what an idle `gpuslice device-plugin` costs: CPU time and
wake-ups (context switches of all its threads) over a window in which nothing happens,
on the fake 8-GPU H100 node with health checks on. NVIDIA's plugin wakes its health loop
every 5 s (nvmlEventSetWait with a 5000 ms timeout): 0.2 wake-ups/s is the bar for our
own threads (main loop, health, labels, metrics); ours waits the same way (it had a 250 ms
tick: 4 wake-ups/s). gRPC core's timer threads wake about
once a second each whatever we do; they are reported apart. The fake NVML is started
without an events file, so its own wait adds no wake-ups."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
WINDOW = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sample(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime, all threads
    own = lib = 0
    for task in glob.glob("/proc/%d/task/*" % pid):
        try:
            with open(task + "/comm") as f:
                name = f.read().strip()
            n = 0
            with open(task + "/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        n += int(line.split()[1])
        except FileNotFoundError:
            continue
        if name == "gpuslice":  # the main loop, health, labels, metrics threads
            own += n
        else:  # gRPC core's timer and executor threads (grpc_global_tim, timer_manager, ...)
            lib += n
    return ticks * 1000.0 / os.sysconf("SC_CLK_TCK"), own, lib


def main():
    tmp = tempfile.mkdtemp(prefix="gs-idle-")
    env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(SRC, "examples/machines/h100-nvswitch-8.yaml"),
               FAKE_NVML_STATE=os.path.join(tmp, "state"), NODE_NAME="")
    env.pop("FAKE_NVML_EVENTS", None)
    p = subprocess.Popen([os.path.join(BUILD, "gpuslice"), "device-plugin", "--nvml-library",
                          os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1"),
                          "--device-plugin-dir", tmp, "--kubelet-socket", "",
                          "--inventory-interval", "0"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(os.path.join(tmp, "nvidia-gpu.sock")):
            if time.monotonic() > deadline or p.poll() is not None:
                raise SystemExit("bench_idle: the daemon did not start")
            time.sleep(0.05)
        time.sleep(1.0)  # let start-up settle
        cpu0, sw0, lib0 = sample(p.pid)
        t0 = time.monotonic()
        time.sleep(WINDOW)  # the point: a window where nothing happens
        cpu1, sw1, lib1 = sample(p.pid)
        dt = time.monotonic() - t0
    finally:
        p.terminate()
        p.wait(timeout=10)
    wakeups = (sw1 - sw0) / dt
    print(json.dumps({"bench": "idle", "window_s": round(dt, 1),
                      "cpu_ms": round(cpu1 - cpu0, 1),
                      "cpu_percent_of_core": round((cpu1 - cpu0) / dt / 10.0, 3),
                      "own_wakeups_per_s": round(wakeups, 2),
                      "grpc_library_wakeups_per_s": round((lib1 - lib0) / dt, 2),
                      "nvidia_health_loop_wakeups_per_s": 0.2,
                      # NVIDIA's loop, started anywhere in the window, wakes at most
                      # floor(window / 5 s) + 1 times in it: the same bar for ours
                      "pass": sw1 - sw0 <= int(dt // 5) + 1,
                      "conditions": {"machine": "h100-nvswitch-8", "health": "on",
                                     "inventory_interval": "0", "kubelet": "none"}}))


if __name__ == "__main__":
    main()

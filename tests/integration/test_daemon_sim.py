#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# test_daemon_sim.py: `gpuslice device-plugin` with tools/kubelet-sim as the kubelet (our
# own C peer on the same rpc layer): capacity, admission outcomes, XID -> Unhealthy ->
# new pods Pending, kubelet restart -> re-registered, SIGTERM -> sockets gone.
# Usage: test_daemon_sim.py <build dir> <source dir>
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BUILD, SRC = sys.argv[1:3]
FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)


class Sim:
    def __init__(self, plugin_dir, log):
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, "tools/kubelet-sim/kubelet-sim"), "--dir", plugin_dir, "-o",
             "json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            bufsize=1)

    def cmd(self, line, timeout_s=20):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            raise RuntimeError("kubelet-sim did not answer %r" % line)
        return json.loads(self.proc.stdout.readline())

    def quit(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(10)


def main():
    tmp = tempfile.mkdtemp(prefix="gs-daemon-sim-")
    plugin_dir = os.path.join(tmp, "device-plugins")  # the daemon creates it if needed
    events = os.path.join(tmp, "events")
    open(events, "w").close()
    cfg = os.path.join(tmp, "config.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n"
                "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n")
    log = open(os.path.join(tmp, "log"), "w")
    sim = Sim(plugin_dir, log)
    env = dict(os.environ, FAKE_NVML_MACHINE=os.path.join(SRC, "examples/machines/pcie-2socket-nvlink-pairs.yaml"),
               FAKE_NVML_STATE=os.path.join(tmp, "state"), FAKE_NVML_EVENTS=events)
    daemon = subprocess.Popen(
        [os.path.join(BUILD, "gpuslice"), "device-plugin", "--nvml-library",
         os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1"), "--device-plugin-dir",
         plugin_dir, "--config-file", cfg, "-v"], env=env, stdout=log, stderr=log)
    try:
        a = sim.cmd("wait nvidia.com/gpu =32 15000")
        check(a.get("ok"), "8 GPUs x 4 replicas: allocatable 32")
        caps = {r["resource"]: r for r in sim.cmd("capacity")["resources"]}
        check(caps.get("nvidia.com/gpu", {}).get("capacity") == 32, "capacity 32")
        a = sim.cmd("admit p1 nvidia.com/gpu=1")
        check(a.get("ok") and "Running" in json.dumps(a), "pod p1 Running")
        a = sim.cmd("admit p2 nvidia.com/gpu=2")
        check("maximum request size for shared resources is 1" in json.dumps(a),
              "pod p2 (2 shared GPUs) rejected with NVIDIA's error")
        # the event set only sees lines appended after it opened: wait for the health thread
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            log.flush()
            with open(os.path.join(tmp, "log")) as f:
                if "health: watching XID events" in f.read():
                    break
            time.sleep(0.005)  # polling a condition, bounded by the deadline
        # every health event of GPU 0..7 -> all 32 unhealthy -> new pods Pending
        with open(events, "a") as f:
            for g in range(8):
                f.write("xid %d 79\n" % g)
        a = sim.cmd("wait nvidia.com/gpu =0 5000")
        check(a.get("ok"), "XID 79 on every GPU: allocatable 0")
        caps = {r["resource"]: r for r in sim.cmd("capacity")["resources"]}
        check(caps["nvidia.com/gpu"]["capacity"] == 32, "capacity stays 32")
        a = sim.cmd("admit p3 nvidia.com/gpu=1")
        check("Pending" in json.dumps(a) and "Insufficient" in json.dumps(a),
              "pod p3 Pending (Insufficient nvidia.com/gpu)")
        # kubelet restart: re-registered, the list comes back (still unhealthy: no recovery)
        t = time.monotonic()
        a = sim.cmd("restart 5000")
        took = time.monotonic() - t
        check(a.get("ok"), "kubelet restart: re-registered (%.0f ms)" % (took * 1000))
        check(took < 1.0, "re-registered within a second")
        check(os.path.exists(os.path.join(plugin_dir, "nvidia-gpu.sock")), "socket recreated")
        caps = {r["resource"]: r for r in sim.cmd("capacity")["resources"]}
        check(caps["nvidia.com/gpu"]["capacity"] == 32, "capacity 32 after restart")
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(20)
        check(rc == 0, "SIGTERM: exit 0 (got %s)" % rc)
        check(not os.path.exists(os.path.join(plugin_dir, "nvidia-gpu.sock")), "socket removed")
        log.flush()
        with open(os.path.join(tmp, "log")) as f:
            text = f.read()
        check("re-registered resource=nvidia.com/gpu" in text, "re-registration logged")
        check("Sanitizer" not in text, "no sanitizer report")
        if FAILED:
            sys.stdout.write(text)
    except Exception:
        log.flush()
        with open(os.path.join(tmp, "log")) as f:
            sys.stdout.write(f.read())
        raise
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        sim.quit()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())

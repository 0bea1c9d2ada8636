#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_reload_live.py: live config changes in one `gpuslice device-plugin` process, with
# kubelet-sim as the kubelet: a config file edited in place, a ConfigMap directory swapped
# the way kubelet does it (`..data` symlink renamed over), an invalid config that leaves
# capacity alone, unchanged resources not registered again, replicas reduced while pods hold
# the high-numbered ones (kept Unhealthy until the pods go), and a MIG layout changed in the
# fake NVML's state picked up on SIGHUP. Every wait is a condition with a deadline.
# Usage: test_reload_live.py SOURCE_DIR BUILD_DIR
import importlib.machinery
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SRC, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
_loader = importlib.machinery.SourceFileLoader("demo", os.path.join(SRC, "scripts/demo"))
_spec = importlib.util.spec_from_loader("demo", _loader)
demo = importlib.util.module_from_spec(_spec)
_loader.exec_module(demo)

GPU = "nvidia.com/gpu"
MACHINES = os.path.join(SRC, "examples/machines")
APPLY_S = 2.0  # issue 6: a change is applied within 2 s


def time_slicing(replicas, name=GPU, rename=False, mig="none"):
    return ("version: v1\nflags:\n  migStrategy: %s\nsharing:\n  timeSlicing:\n"
            "    renameByDefault: %s\n    resources:\n    - name: %s\n      replicas: %d\n"
            % (mig, "true" if rename else "false", name, replicas))


def write_file(path, text):
    """Writes like an editor that saves in place (truncate + write + close)."""
    with open(path, "w") as f:
        f.write(text)


class ConfigMapDir:
    """A ConfigMap volume as kubelet's atomic writer lays it out and updates it:
    <dir>/..<timestamp>/<key> files, <dir>/..data -> ..<timestamp>, <dir>/<key> -> ..data/<key>;
    an update writes a new timestamped dir, points ..data_tmp at it and renames it over ..data."""

    def __init__(self, path, files):
        self.path = path
        self.current = None
        os.makedirs(path)
        self.update(files)

    def update(self, files):
        ts = "..%s_%d" % (time.strftime("%Y_%m_%d_%H_%M_%S"), time.monotonic_ns())
        os.mkdir(os.path.join(self.path, ts))
        for key, text in files.items():
            write_file(os.path.join(self.path, ts, key), text)
        tmp = os.path.join(self.path, "..data_tmp")
        os.symlink(ts, tmp)
        os.rename(tmp, os.path.join(self.path, "..data"))
        for key in files:
            link = os.path.join(self.path, key)
            if not os.path.lexists(link):
                os.symlink(os.path.join("..data", key), link)
        if self.current:
            shutil.rmtree(os.path.join(self.path, self.current))
        self.current = ts


def wait_for(cond, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout_s, what))
        time.sleep(0.02)  # polling interval of the condition, not a fixed wait


class ReloadCase(unittest.TestCase):
    """Nodes (daemon + kubelet-sim) in a temp dir, capacity helpers; no tests of its own
    (test_reload_label.py builds on it)."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gs-reload-")
        self.nodes = []

    def tearDown(self):
        problems = []
        for n in self.nodes:
            problems += n.stop()
        if problems or sys.exc_info()[0]:
            for n in self.nodes:
                with open(n.log.name) as f:
                    sys.stderr.write("--- %s log ---\n%s" % (n.name, f.read()[-20000:]))
        shutil.rmtree(self.root, ignore_errors=True)
        self.assertEqual(problems, [])

    def node(self, machine, args=(), env=None, sim_args=()):
        env = dict(env or {})
        env.setdefault("NODE_NAME", "")  # no node label unless a test sets one up
        i = len(self.nodes)
        n = demo.Node("n%d" % i, os.path.join(MACHINES, machine + ".yaml"), None, self.root,
                      BUILD, sim_args=["--pod-resources-socket",
                                       os.path.join(self.root, "pr%d.sock" % i)] +
                      list(sim_args))
        self.nodes.append(n)
        n.start_plugin(None, ["--pod-resources-socket", os.path.join(self.root, "pr%d.sock" % i),
                              "--retire-check-interval", "200ms"] + list(args), env)
        return n

    def caps(self, n):
        return {r["resource"]: r for r in n.sim.must("capacity")["resources"]}

    def wait_capacity(self, n, want, timeout_s=APPLY_S + 1, resource=GPU):
        """Waits until resource has `want` devices, all healthy; returns the seconds taken."""
        t0 = time.monotonic()
        wait_for(lambda: (self.caps(n).get(resource, {}).get("capacity") == want and
                          self.caps(n)[resource]["allocatable"] == want),
                 timeout_s, "%s capacity %d" % (resource, want))
        return time.monotonic() - t0

    def log_text(self, n):
        with open(n.log.name) as f:
            return f.read()

    def metric(self, n, line_start):
        """The value of the /metrics line starting with line_start (the daemon runs with
        --metrics-address 127.0.0.1:0), or None."""
        import re
        import urllib.request
        port = int(re.search(r"\(port (\d+)\)", self.log_text(n)).group(1))
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(line_start + " "):
                    return float(line.split()[-1])
        return None


class LiveReload(ReloadCase):
    def test_config_file_edit_changes_replicas_same_pid(self):
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, time_slicing(8))
        n = self.node("l20-node", ["--config-file", cfg])
        self.wait_capacity(n, 8, 10)
        pid, regs = n.daemon.pid, self.caps(n)[GPU]["registrations"]
        write_file(cfg, time_slicing(4))
        took = self.wait_capacity(n, 4)
        self.assertLess(took, APPLY_S)
        self.assertEqual(n.daemon.pid, pid)
        self.assertIsNone(n.daemon.poll())
        self.assertEqual(self.caps(n)[GPU]["registrations"], regs)  # new list, same stream
        ids = sorted(d["id"] for d in n.sim.must("devices " + GPU)["devices"])
        self.assertEqual([i.split("::")[1] for i in ids], ["0", "1", "2", "3"])  # stable IDs
        print("config file edit -> capacity 4 in %.0f ms" % (took * 1e3), file=sys.stderr)

    def test_fifo_at_config_path_keeps_serving(self):
        """A FIFO put where the config file was hung the loop in open(2) for ever (issue 14):
        now it is refused with a clear error, the last good config keeps serving, and
        SIGTERM still stops the daemon."""
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, time_slicing(8))
        n = self.node("l20-node", ["--config-file", cfg])
        self.wait_capacity(n, 8, 10)
        tmp = cfg + ".fifo"
        os.mkfifo(tmp)
        os.rename(tmp, cfg)
        wait_for(lambda: "is a FIFO, not a regular file" in self.log_text(n), APPLY_S + 2,
                 "the FIFO refused")
        self.assertIn("keeping last good config", self.log_text(n))
        self.assertEqual(self.caps(n)[GPU]["capacity"], 8)
        write_file(cfg + ".new", time_slicing(4))  # a regular file again applies
        os.rename(cfg + ".new", cfg)
        self.wait_capacity(n, 4)  # tearDown's SIGTERM checks the clean exit

    def test_config_directory_deleted_and_back(self):
        """A deleted config directory was not watched again until SIGHUP: now its parent is
        watched until it is back, and the new config applies by itself."""
        path = os.path.join(self.root, "cm")
        cm = ConfigMapDir(path, {"l20": time_slicing(8)})
        n = self.node("l20-node", ["--config-file", path, "--config-name", "l20"])
        self.wait_capacity(n, 8, 10)
        pid = n.daemon.pid
        shutil.rmtree(path)
        wait_for(lambda: "went away: watching" in self.log_text(n), APPLY_S, "the parent watch")
        self.assertEqual(self.caps(n)[GPU]["capacity"], 8)  # the last good config serves on
        cm = ConfigMapDir(path, {"l20": time_slicing(5)})
        self.wait_capacity(n, 5)
        self.assertEqual(n.daemon.pid, pid)
        self.assertIn("is back: watching it again", self.log_text(n))
        cm.update({"l20": time_slicing(3)})  # and watched again for good
        self.wait_capacity(n, 3)

    def test_configmap_swap_the_kubelet_way(self):
        cm = ConfigMapDir(os.path.join(self.root, "cm"),
                          {"l20": time_slicing(8), "t4": time_slicing(3)})
        n = self.node("l20-node", ["--config-file", cm.path, "--config-name", "l20"])
        self.wait_capacity(n, 8, 10)
        pid, regs = n.daemon.pid, self.caps(n)[GPU]["registrations"]
        cm.update({"l20": time_slicing(6), "t4": time_slicing(3)})
        took = self.wait_capacity(n, 6)
        self.assertLess(took, APPLY_S)
        self.assertEqual(n.daemon.pid, pid)
        self.assertEqual(self.caps(n)[GPU]["registrations"], regs)
        print("ConfigMap ..data swap -> capacity 6 in %.0f ms" % (took * 1e3), file=sys.stderr)

    def test_invalid_config_keeps_last_good(self):
        cm = ConfigMapDir(os.path.join(self.root, "cm"), {"l20": time_slicing(8)})
        n = self.node("l20-node", ["--config-file", cm.path, "--config-name", "l20"])
        self.wait_capacity(n, 8, 10)
        cm.update({"l20": time_slicing(0)})  # replicas 0: invalid
        wait_for(lambda: "keeping last good config" in self.log_text(n), APPLY_S + 1,
                 "the reload error in the log")
        self.assertIn("failures=1", self.log_text(n))
        self.assertEqual((self.caps(n)[GPU]["capacity"], self.caps(n)[GPU]["allocatable"]), (8, 8))
        cm.update({"l20": "version: v1\nsharing: [\n"})  # not even YAML
        wait_for(lambda: "failures=2" in self.log_text(n), APPLY_S + 1, "the second failure")
        self.assertEqual(self.caps(n)[GPU]["capacity"], 8)
        cm.update({"l20": time_slicing(2)})  # a good one afterwards still applies
        self.wait_capacity(n, 2)
        self.assertIsNone(n.daemon.poll())

    def test_unchanged_resources_not_registered_again(self):
        # mixed MIG: three resources; sharing only the 1g ones changes one resource
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, "version: v1\nflags:\n  migStrategy: mixed\n")
        n = self.node("a100-80gb-all-balanced", ["--config-file", cfg])
        n.sim.must("wait-resources 3 10000", 15)
        self.wait_capacity(n, 8, 10, "nvidia.com/mig-1g.10gb")

        def settled():
            # no Register in flight: what kubelet-sim counted is what the daemon logged
            # (a Register that timed out on our side but landed is retried, and counted)
            log = self.log_text(n)
            regs = {r: c["registrations"] for r, c in self.caps(n).items()}
            ok = all(regs[r] == log.count("registered resource=%s " % r) for r in regs)
            return regs if ok else None
        before = wait_for(settled, 10, "registrations to settle")
        write_file(cfg, time_slicing(2, "nvidia.com/mig-1g.10gb", mig="mixed"))
        self.wait_capacity(n, 16, APPLY_S + 1, "nvidia.com/mig-1g.10gb")
        after = self.caps(n)
        self.assertEqual({r: c["registrations"] for r, c in after.items()}, before,
                         self.log_text(n)[-6000:])
        self.assertEqual(after["nvidia.com/mig-2g.20gb"]["capacity"], 4)
        # logged after the new devices went out on ListAndWatch (labels and sampler first)
        wait_for(lambda: "resources unchanged=2 changed=1 added=0 removed=0" in self.log_text(n), APPLY_S,
                 "the reload summary in the log")
        # renamed: a new resource registers, the old one's socket goes away
        write_file(cfg, time_slicing(2, "nvidia.com/mig-1g.10gb", rename=True, mig="mixed"))
        self.wait_capacity(n, 16, APPLY_S + 1, "nvidia.com/mig-1g.10gb.shared")
        wait_for(lambda: not os.path.exists(os.path.join(n.plugin_dir, "nvidia-mig-1g.10gb.sock")),
                 APPLY_S, "the removed resource's socket to go")
        regs = {r: c["registrations"] for r, c in self.caps(n).items()}
        self.assertEqual(regs["nvidia.com/mig-2g.20gb"], before["nvidia.com/mig-2g.20gb"])
        self.assertEqual(regs["nvidia.com/mig-3g.40gb"], before["nvidia.com/mig-3g.40gb"])
        self.assertEqual(regs["nvidia.com/mig-1g.10gb.shared"], 1)
        # logged after the new devices went out on ListAndWatch (labels and sampler first)
        wait_for(lambda: "resources unchanged=2 changed=0 added=1 removed=1" in self.log_text(n), APPLY_S,
                 "the reload summary in the log")

    def test_reduced_replicas_held_by_pods_stay_unhealthy(self):
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, time_slicing(8))
        n = self.node("l20-node", ["--config-file", cfg])
        self.wait_capacity(n, 8, 10)
        regs = self.caps(n)[GPU]["registrations"]
        holder = {}
        for i in range(8):
            pod = n.sim.must("admit p%d %s=1" % (i, GPU))["pod"]
            self.assertEqual(pod["phase"], "Running")
            holder[pod["devices"][GPU][0]] = "p%d" % i
        write_file(cfg, time_slicing(4))
        high = sorted(i for i in holder if int(i.split("::")[1]) >= 4)
        self.assertEqual(len(high), 4)

        def health():
            return {d["id"]: d["health"] for d in n.sim.must("devices " + GPU)["devices"]}
        wait_for(lambda: sorted(i for i, h in health().items() if h == "Unhealthy") == high,
                 APPLY_S + 1, "::4..::7 Unhealthy")
        self.assertEqual(self.caps(n)[GPU]["capacity"], 8)
        # the holders are read off the loop (issue 19): named once pod-resources answers
        for dev in high:
            line = "device=%s held by pod default/%s" % (dev, holder[dev])
            wait_for(lambda line=line: line in self.log_text(n), 5, line)
        # nothing new lands on the held ones: a new pod is Pending (all healthy ones are taken)
        pending = n.sim.must("admit extra %s=1" % GPU)["pod"]
        self.assertEqual(pending["phase"], "Pending")
        n.sim.must("delete extra")
        # the pods go one by one; their devices disappear, the others stay
        n.sim.must("delete %s" % holder[high[0]])
        wait_for(lambda: high[0] not in health(), 3, "the released device to disappear")
        self.assertEqual(sorted(health()), sorted([i for i in holder if i != high[0]]))
        for dev in high[1:]:
            n.sim.must("delete %s" % holder[dev])
        wait_for(lambda: self.caps(n)[GPU]["capacity"] == 4, 3, "capacity 4")
        self.assertEqual(sorted(health().values()), ["Healthy"] * 4)
        self.assertEqual(self.caps(n)[GPU]["registrations"], regs)

    def test_new_process_keeps_devices_pods_hold(self):
        """Issue 18: a rollout (a new gpuslice process) whose config serves fewer replicas
        keeps the replicas running pods hold, Unhealthy, until they are released (before:
        capacity fell 8 -> 1 with 5 pods still holding ::0..::4)."""
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, time_slicing(8))
        n = self.node("l20-node", ["--config-file", cfg])
        self.wait_capacity(n, 8, 10)
        held = {}
        for i in range(5):
            pod = n.sim.must("admit p%d %s=1" % (i, GPU))["pod"]
            held[pod["devices"][GPU][0]] = "p%d" % i
        n.stop_plugin()
        write_file(cfg, "version: v1\n")  # the new process serves the whole GPU only
        pr = os.path.join(self.root, "pr0.sock")
        n.start_plugin(None, ["--pod-resources-socket", pr, "--retire-check-interval", "200ms",
                              "--config-file", cfg], {"NODE_NAME": ""})

        def health():
            return {d["id"]: d["health"] for d in n.sim.must("devices " + GPU)["devices"]}
        wait_for(lambda: len(health()) == 6, 10, "the whole GPU + the 5 held replicas")
        h = health()
        self.assertEqual(sorted(i for i, v in h.items() if v == "Unhealthy"), sorted(held))
        self.assertEqual(self.caps(n)[GPU]["allocatable"], 1)
        for dev, pod in held.items():
            self.assertIn("device=%s held by pod default/%s since an earlier gpuslice" % (dev, pod),
                          self.log_text(n))
        # released one by one: each goes at the next check, the rest stay
        first = sorted(held)[0]
        n.sim.must("delete %s" % held[first])
        wait_for(lambda: first not in health(), 3, "the released replica to go")
        self.assertEqual(len(health()), 5)
        for dev in sorted(held)[1:]:
            n.sim.must("delete %s" % held[dev])
        wait_for(lambda: len(health()) == 1, 3, "only the whole GPU left")
        self.assertEqual(list(health().values()), ["Healthy"])

    def test_pod_resources_unreachable_keeps_devices(self):
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, time_slicing(4))
        n = self.node("l20-node", ["--config-file", cfg, "--pod-resources-socket",
                                   os.path.join(self.root, "nobody.sock")])
        self.wait_capacity(n, 4, 10)
        write_file(cfg, time_slicing(2))
        wait_for(lambda: self.caps(n)[GPU]["allocatable"] == 2, APPLY_S + 1, "allocatable 2")
        self.assertEqual(self.caps(n)[GPU]["capacity"], 4)  # kept: nobody could tell
        self.assertIn("keeping the devices being removed as Unhealthy", self.log_text(n))

    def test_checkpoint_tells_held_devices_without_pod_resources(self):
        """NVIDIA's manifests mount no pod-resources: lowering replicas 8 -> 2 left 6 devices
        Unhealthy for ever, with a warning every 5 s. The kubelet's checkpoint in the
        device-plugin directory says which are held; the warning comes once."""
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, time_slicing(8))
        n = self.node("l20-node", ["--config-file", cfg, "--pod-resources-socket",
                                   os.path.join(self.root, "nobody.sock")])
        self.wait_capacity(n, 8, 10)
        ids = sorted(d["id"] for d in n.sim.must("devices " + GPU)["devices"])
        held = [i for i in ids if i.endswith("::5")]
        self.assertEqual(len(held), 1)
        checkpoint = {"Data": {"PodDeviceEntries": [
            {"PodUID": "6a1f0c2e-0000-4000-8000-000000000001", "ContainerName": "app",
             "ResourceName": GPU, "DeviceIDs": {"-1": held}, "AllocResp": ""}],
            "RegisteredDevices": {GPU: ids}}, "Checksum": 1}
        write_file(os.path.join(n.plugin_dir, "kubelet_internal_checkpoint"),
                   json.dumps(checkpoint))
        write_file(cfg, time_slicing(2))

        def health():
            return {d["id"]: d["health"] for d in n.sim.must("devices " + GPU)["devices"]}
        wait_for(lambda: len(health()) == 3, APPLY_S + 1, "2 devices + the held one")
        self.assertEqual(health()[held[0]], "Unhealthy")
        self.assertEqual(self.caps(n)[GPU]["allocatable"], 2)
        log = self.log_text(n)
        self.assertIn("device=%s held by pod uid 6a1f0c2e" % held[0], log)
        self.assertIn("using the kubelet's checkpoint", log)
        # the pod goes: its entry leaves the checkpoint, the device goes at the next check
        checkpoint["Data"]["PodDeviceEntries"] = []
        write_file(os.path.join(n.plugin_dir, "kubelet_internal_checkpoint"),
                   json.dumps(checkpoint))
        wait_for(lambda: len(health()) == 2, 3, "the released device to disappear")
        self.assertEqual(self.log_text(n).count("using the kubelet's checkpoint"), 1)

    def test_mig_layout_change_after_sighup(self):
        state = os.path.join(self.root, "n0", "nvml.state")
        n = self.node("a100-80gb-all-balanced", ["--mig-strategy", "mixed",
                                                 "--inventory-interval", "0"])
        self.wait_capacity(n, 8, 10, "nvidia.com/mig-1g.10gb")
        pid = n.daemon.pid

        def total():
            return sum(c["capacity"] for c in self.caps(n).values())
        wait_for(lambda: total() == 16, 10, "all three MIG resources listed")
        destroy_first_mig(state, os.path.join(MACHINES, "a100-80gb-all-balanced.yaml"))
        t0 = time.monotonic()
        n.daemon.send_signal(signal.SIGHUP)
        wait_for(lambda: total() == 15, APPLY_S + 1, "one MIG device fewer")
        took = time.monotonic() - t0
        self.assertEqual(n.daemon.pid, pid)
        print("MIG change + SIGHUP -> one device fewer in %.0f ms" % (took * 1e3), file=sys.stderr)

    def test_mig_layout_change_on_inventory_interval(self):
        state = os.path.join(self.root, "n0", "nvml.state")
        n = self.node("a100-80gb-all-balanced", ["--mig-strategy", "mixed",
                                                 "--inventory-interval", "300ms"])
        self.wait_capacity(n, 8, 10, "nvidia.com/mig-1g.10gb")

        def total():
            return sum(c["capacity"] for c in self.caps(n).values())
        wait_for(lambda: total() == 16, 10, "all three MIG resources listed")
        destroy_first_mig(state, os.path.join(MACHINES, "a100-80gb-all-balanced.yaml"))
        wait_for(lambda: total() == 15, APPLY_S + 1, "one MIG device fewer, no signal")
        self.assertIn("inventory interval: the GPUs or MIG devices changed", self.log_text(n))


def destroy_first_mig(state, machine):
    """Destroys the first MIG device of GPU 0 through the fake NVML (tests/integration/
    fake_mig_destroy.c), as nvidia-smi would; the fake writes its state file, which the
    daemon reads on SIGHUP."""
    tool = os.environ.get("GS_FAKE_MIG_DESTROY",
                          os.path.join(BUILD, "tests/integration/fake_mig_destroy"))
    env = dict(os.environ, FAKE_NVML_MACHINE=machine, FAKE_NVML_STATE=state)
    subprocess.run([tool, "0", "0"], env=env, check=True, timeout=30)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)

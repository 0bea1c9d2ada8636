#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_metrics_pods.py: GPU telemetry and per-pod attribution in /metrics (issue 13), with
# the daemon, kubelet-sim and the fake NVML: three pods on three replicas of one L20 with
# different process memory -> three gpuslice_pod_gpu_memory_used_bytes series with the
# right values and labels (processes found through a fake /proc's cgroup files, pods named
# through pod-resources and the kubelet checkpoint); a host process reported as such; the
# dcgm-exporter-compatible series with dcgm's labels; the exposition parses with
# prometheus_client's parser.
# Usage: test_metrics_pods.py SOURCE_DIR BUILD_DIR
import json
import os
import re
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_reload_live import (BUILD, GPU, ReloadCase, time_slicing, wait_for,  # noqa: E402
                              write_file)

UIDS = ["6a1f0c2e-1111-4000-8000-00000000000%d" % i for i in (1, 2, 3)]
CID = "4f6c1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f"
MIB = 1 << 20


def write_checkpoint(plugin_dir, holders):
    """The kubelet's checkpoint: which pod UID's container holds which devices; holders are
    (pod_uid, container, resource, device_ids) tuples."""
    entries = [{"PodUID": uid, "ContainerName": c, "ResourceName": res,
                "DeviceIDs": {"-1": list(ids)}, "AllocResp": ""} for uid, c, res, ids in holders]
    write_file(os.path.join(plugin_dir, "kubelet_internal_checkpoint"), json.dumps(
        {"Data": {"PodDeviceEntries": entries, "RegisteredDevices": {}}, "Checksum": 1}))


class PodMetrics(ReloadCase):
    def test_three_pods_one_gpu_and_a_host_process(self):
        from prometheus_client.parser import text_string_to_metric_families
        machine = os.path.join(self.root, "l20")
        write_file(machine + ".yaml",
                   "gpus:\n  - model: NVIDIA L20\n"
                   "    telemetry: {gpu_util: 87, mem_util: 41, temperature_c: 66, power_w: 245,"
                   " sm_clock_mhz: 2040, ecc_corrected: 3, ecc_uncorrected: 0, enc_util: 12,"
                   " dec_util: 7, memory_temp_c: 51, energy_mj: 123456789012,"
                   " mem_clock_mhz: 9001, pcie_replays: 4, remapped_correctable: 2,"
                   " remapped_uncorrectable: 1, remap_failed: 1, fb_reserved_mib: 620}\n"
                   "    processes:\n"
                   "      - {pid: 4001, used_mib: 4621, sm_util: 30}\n"
                   "      - {pid: 4002, used_mib: 2048, sm_util: 20}\n"
                   "      - {pid: 4003, used_mib: 1024, sm_util: 10}\n"
                   "      - {pid: 4999, used_mib: 300}\n")
        proc = os.path.join(self.root, "proc")
        for pid in (4001, 4002, 4003, 4999):
            os.makedirs(os.path.join(proc, str(pid)))
        for pid, uid in zip((4001, 4002, 4003), UIDS):
            write_file(os.path.join(proc, str(pid), "cgroup"),
                       "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s"
                       ".slice/cri-containerd-%s.scope\n" % (uid.replace("-", "_"), CID))
        write_file(os.path.join(proc, "4999", "cgroup"), "0::/system.slice/nvidia-smi.scope\n")
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                        "      - name: nvidia.com/gpu\n        replicas: 4\n")
        n = self.node(machine, ["--config-file", cfg, "--metrics-address", "127.0.0.1:0",
                                "--metrics-sample-interval", "200ms", "--host-proc", proc])
        self.wait_capacity(n, 4, 10)
        held = {}
        for i in range(3):
            pod = n.sim.must("admit p%d %s=1" % (i, GPU))["pod"]
            held["p%d" % i] = pod["devices"][GPU]
        # the kubelet's checkpoint: which pod UID holds which device
        write_checkpoint(n.plugin_dir, [(UIDS[i], "main", GPU, held["p%d" % i]) for i in range(3)])
        wait_for(lambda: "(port " in self.log_text(n), 10, "the metrics port")
        port = int(re.search(r"\(port (\d+)\)", self.log_text(n)).group(1))

        def scrape():
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                return r.read().decode()

        # a sample taken before the checkpoint was written knows the pods by UID only
        wait_for(lambda: scrape().count("gpuslice_pod_gpu_memory_used_bytes{") == 3 and
                 all('pod="p%d"' % i in scrape() for i in range(3)), 10,
                 "three named pod series")
        text = scrape()
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        mem = {(s.labels["namespace"], s.labels["pod"]): s
               for s in fams["gpuslice_pod_gpu_memory_used_bytes"].samples}
        ns = next(iter(mem))[0]
        self.assertEqual(mem[(ns, "p0")].value, 4621 * MIB)
        self.assertEqual(mem[(ns, "p1")].value, 2048 * MIB)
        self.assertEqual(mem[(ns, "p2")].value, 1024 * MIB)
        s0 = mem[(ns, "p0")]
        self.assertEqual(s0.labels["resource"], GPU)
        self.assertEqual(s0.labels["gpu"], "0")
        self.assertEqual(s0.labels["pod_uid"], UIDS[0])
        # the container that holds the device, as pod-resources names it (kubelet-sim's
        # pods have one container, "main")
        self.assertEqual({p: mem[(ns, p)].labels["container"] for p in ("p0", "p1", "p2")},
                         {"p0": "main", "p1": "main", "p2": "main"})
        sm = {s.labels["pod"]: s.value for s in fams["gpuslice_pod_gpu_sm_utilization_ratio"].samples}
        self.assertEqual(sm, {"p0": 0.3, "p1": 0.2, "p2": 0.1})
        reps = {s.labels["pod"]: s.value for s in fams["gpuslice_pod_gpu_replicas"].samples}
        self.assertEqual(reps, {"p0": 1, "p1": 1, "p2": 1})
        host, = fams["gpuslice_host_gpu_memory_used_bytes"].samples
        self.assertEqual((host.labels["pid"], host.value), ("4999", 300 * MIB))
        # dcgm-exporter's names and labels; a shared GPU carries no pod label
        util, = fams["DCGM_FI_DEV_GPU_UTIL"].samples
        self.assertEqual(util.value, 87)
        for k in ("gpu", "UUID", "device", "modelName", "Hostname", "pci_bus_id"):
            self.assertIn(k, util.labels)
        self.assertEqual(util.labels["modelName"], "NVIDIA L20")
        self.assertEqual(util.labels["device"], "nvidia0")
        self.assertNotIn("pod", util.labels)
        self.assertEqual(fams["DCGM_FI_DEV_GPU_TEMP"].samples[0].value, 66)
        self.assertEqual(fams["DCGM_FI_DEV_POWER_USAGE"].samples[0].value, 245)
        self.assertEqual(fams["DCGM_FI_DEV_SM_CLOCK"].samples[0].value, 2040)
        self.assertEqual(fams["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"].samples[0].value, 3)
        # the reservation is used memory of no process: FB_USED = processes + reserved
        self.assertEqual(fams["DCGM_FI_DEV_FB_USED"].samples[0].value,
                         4621 + 2048 + 1024 + 300 + 620)
        self.assertEqual(fams["DCGM_FI_DEV_FB_RESERVED"].samples[0].value, 620)
        self.assertEqual(util.labels["DCGM_FI_DRIVER_VERSION"], "570.158.01")
        # dcgm-exporter's other default fields from plain NVML reads, with dcgm's types
        want = {"DCGM_FI_DEV_ENC_UTIL": (12, "gauge"), "DCGM_FI_DEV_DEC_UTIL": (7, "gauge"),
                "DCGM_FI_DEV_MEMORY_TEMP": (51, "gauge"),
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": (123456789012, "counter"),
                "DCGM_FI_DEV_MEM_CLOCK": (9001, "gauge"),
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": (4, "counter"),
                "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": (2, "counter"),
                "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (1, "counter"),
                "DCGM_FI_DEV_ROW_REMAP_FAILURE": (1, "gauge"),
                "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": (3, "counter"),
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": (0, "counter")}
        self.assertEqual({k: (fams[k].samples[0].value, fams[k].type) for k in want}, want)
        # an L20 has no NVLink and is no vGPU guest: no series, as dcgm-exporter
        self.assertEqual(fams["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"].samples, [])
        self.assertEqual(fams["DCGM_FI_DEV_VGPU_LICENSE_STATUS"].samples, [])
        self.assertGreater(fams["gpuslice_metrics_samples"].samples[0].value, 0)
        # OpenMetrics when asked for it, parsed by prometheus_client's OpenMetrics parser
        from prometheus_client.openmetrics.parser import \
            text_string_to_metric_families as om_families
        req = urllib.request.Request("http://127.0.0.1:%d/metrics" % port, headers={
            "Accept": "application/openmetrics-text; version=1.0.0"})
        with urllib.request.urlopen(req, timeout=5) as r:
            self.assertTrue(r.headers["Content-Type"].startswith("application/openmetrics-text"))
            om = r.read().decode()
        self.assertTrue(om.endswith("# EOF\n"))
        om_fams = {f.name: f for f in om_families(om)}
        self.assertEqual(om_fams["gpuslice_allocations"].type, "counter")
        # dcgm's counters have no _total: OpenMetrics would rename them, so they go untyped
        self.assertEqual(om_fams["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].type, "unknown")
        self.assertEqual(om_fams["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].samples[0].value,
                         123456789012)
        self.assertIn("gpuslice_pod_gpu_memory_used_bytes", om_fams)
        # gpuslice top: the same, per GPU, with the replicas that fit the largest pod
        import subprocess
        gpuslice = os.path.join(os.path.abspath(sys.argv[2]), "gpuslice")
        r = subprocess.run([gpuslice, "top", "--address", "127.0.0.1:%d" % port, "-o", "json"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        gpu, = json.loads(r.stdout)
        self.assertEqual(gpu["model"], "NVIDIA L20")
        self.assertEqual(gpu["utilization"], 87)
        self.assertEqual(sorted((p["pod"], p["memory_bytes"]) for p in gpu["pods"]),
                         [("p0", 4621 * MIB), ("p1", 2048 * MIB), ("p2", 1024 * MIB)])
        # 46068 MiB x 90% / 4621 MiB = 8.97 -> 8, the seed's figure
        self.assertEqual(gpu["sizing"], {"largest_pod_mib": 4621, "replicas_that_fit": 8})
        r = subprocess.run([gpuslice, "top", "--address", "127.0.0.1:%d" % port, "--once"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("8 replicas of the largest pod (4621 MiB)", r.stdout)
        self.assertIn("p0  4621 MiB  SM 30%", r.stdout)
        r = subprocess.run([gpuslice, "top", "--address", "127.0.0.1:1", "--once"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no gpuslice metrics endpoint at 127.0.0.1:1", r.stderr)

    def test_values_follow_the_gpu_at_run_time(self):
        """Telemetry and processes changed while the daemon runs (fake NVML `telemetry` and
        `proc` lines): the next samples show the new utilization, the pod's new memory and
        SM share, and a host process that exited is gone."""
        machine = os.path.join(self.root, "l20")
        write_file(machine + ".yaml",
                   "gpus:\n  - model: NVIDIA L20\n    processes:\n"
                   "      - {pid: 4001, used_mib: 4621, sm_util: 30}\n"
                   "      - {pid: 4999, used_mib: 300}\n")
        proc = os.path.join(self.root, "proc")
        for pid in (4001, 4999):
            os.makedirs(os.path.join(proc, str(pid)))
        write_file(os.path.join(proc, "4001", "cgroup"),
                   "0::/kubepods/besteffort/pod%s/%s\n" % (UIDS[0], CID))
        write_file(os.path.join(proc, "4999", "cgroup"), "0::/system.slice/nvidia-smi.scope\n")
        events = os.path.join(self.root, "events")
        write_file(events, "")
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                        "      - name: nvidia.com/gpu\n        replicas: 4\n")
        n = self.node(machine, ["--config-file", cfg, "--metrics-address", "127.0.0.1:0",
                                "--metrics-sample-interval", "200ms", "--host-proc", proc],
                      env={"FAKE_NVML_EVENTS": events})
        self.wait_capacity(n, 4, 10)
        pod = n.sim.must("admit p0 %s=1" % GPU)["pod"]
        write_checkpoint(n.plugin_dir, [(UIDS[0], "app", GPU, pod["devices"][GPU])])
        wait_for(lambda: "(port " in self.log_text(n), 10, "the metrics port")
        port = int(re.search(r"\(port (\d+)\)", self.log_text(n)).group(1))

        def values():
            return self.samples(port)

        def pod_value(v, name):
            got = [s.value for s in v.get(name, []) if s.labels.get("pod") == "p0"]
            return got[0] if len(got) == 1 else None

        wait_for(lambda: pod_value(values(), "gpuslice_pod_gpu_memory_used_bytes") == 4621 * MIB,
                 10, "pod p0's first memory sample")
        v = values()
        self.assertEqual(v["DCGM_FI_DEV_GPU_UTIL"][0].value, 30)  # derived: busy
        self.assertEqual(len(v["gpuslice_host_gpu_memory_used_bytes"]), 1)
        self.assertEqual(v["gpuslice_gpu_processes_unattributed"][0].value, 0)
        with open(events, "a") as f:
            # 4777 has no /proc entry (another PID namespace): counted, not called a host one
            f.write("telemetry 0 gpu_util 55\nproc 0 4001 6000 45\nproc 0 4999 exit\n"
                    "proc 0 4777 10\n")
        wait_for(lambda: pod_value(values(), "gpuslice_pod_gpu_memory_used_bytes") == 6000 * MIB,
                 10, "pod p0's new memory")
        v = values()
        self.assertEqual(v["DCGM_FI_DEV_GPU_UTIL"][0].value, 55)
        self.assertEqual(pod_value(v, "gpuslice_pod_gpu_sm_utilization_ratio"), 0.45)
        self.assertEqual(v.get("gpuslice_host_gpu_memory_used_bytes", []), [])
        self.assertEqual(v["gpuslice_gpu_processes_unattributed"][0].value, 1)
        self.assertEqual(v["DCGM_FI_DEV_FB_USED"][0].value, 6010)
        # the pod shrinks: its peak stays recorded, and sizing uses it (46068 MiB x 90 % /
        # 6000 MiB = 6.91 -> 6), from plan --size --from-metrics and from top
        with open(events, "a") as f:
            f.write("proc 0 4001 3000 45\n")
        wait_for(lambda: pod_value(values(), "gpuslice_pod_gpu_memory_used_bytes") == 3000 * MIB,
                 10, "pod p0's smaller memory")
        peak, = values()["gpuslice_gpu_pod_memory_peak_bytes"]
        self.assertEqual((peak.value, peak.labels["pod"], peak.labels["namespace"]),
                         (6000 * MIB, "p0", "default"))
        env = dict(os.environ, FAKE_NVML_MACHINE=machine + ".yaml",
                   FAKE_NVML_STATE=os.path.join(n.dir, "nvml.state"))
        env.pop("FAKE_NVML_EVENTS", None)
        lib = os.path.join(BUILD, "tools/fake-nvml/libnvidia-ml.so.1")
        gs = os.path.join(BUILD, "gpuslice")
        r = subprocess.run([gs, "plan", "--nvml-library", lib, "--size", "--from-metrics",
                            "127.0.0.1:%d" % port], env=env, capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("/ 6000 MiB per process (most one pod used since the daemon started: "
                      "default/p0) = 6.91 -> 6 replicas", r.stdout)
        self.assertIn("replicas: 6", r.stdout)
        r = subprocess.run([gs, "top", "--address", "127.0.0.1:%d" % port, "-o", "json"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        sizing = json.loads(r.stdout)[0]["sizing"]
        self.assertEqual(sizing, {"largest_pod_mib": 6000, "replicas_that_fit": 6})
        r = subprocess.run([gs, "plan", "--nvml-library", lib, "--size", "--from-metrics",
                            "127.0.0.1:1"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no gpuslice metrics endpoint at 127.0.0.1:1", r.stderr)

    def start(self, machine, cfg_text, proc, events):
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, cfg_text)
        n = self.node(machine, ["--config-file", cfg, "--metrics-address", "127.0.0.1:0",
                                "--metrics-sample-interval", "200ms", "--host-proc", proc],
                      env={"FAKE_NVML_EVENTS": events})
        wait_for(lambda: "(port " in self.log_text(n), 10, "the metrics port")
        return n, int(re.search(r"\(port (\d+)\)", self.log_text(n)).group(1))

    @staticmethod
    def samples(port):
        from prometheus_client.parser import text_string_to_metric_families
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for f in text_string_to_metric_families(text):
            for smp in f.samples:
                out.setdefault(smp.name, []).append(smp)
        return out

    def test_pod_with_two_containers(self):
        """A pod whose two containers each hold a replica of one L20 (pod-resources lists
        both): one replicas series per container; its process memory goes to one pod-level
        series (container ""), since the cgroup names a container by id and the kubelet by
        name. A one-container pod on the same GPU keeps its container label."""
        machine = os.path.join(self.root, "l20")
        write_file(machine + ".yaml", "gpus:\n  - model: NVIDIA L20\n")
        proc = os.path.join(self.root, "proc")
        for pid, uid in ((4101, UIDS[0]), (4102, UIDS[1])):
            os.makedirs(os.path.join(proc, str(pid)))
            write_file(os.path.join(proc, str(pid), "cgroup"),
                       "0::/kubepods/burstable/pod%s/%s\n" % (uid, CID))
        events = os.path.join(self.root, "events")
        write_file(events, "")
        n, port = self.start(machine,
                             "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                             "      - name: nvidia.com/gpu\n        replicas: 4\n", proc, events)
        self.wait_capacity(n, 4, 10)
        two = n.sim.must("admit two %s=1@app %s=1@sidecar" % (GPU, GPU))["pod"]
        app, side = two["devices"][GPU + "@app"], two["devices"][GPU + "@sidecar"]
        self.assertEqual(len(set(app) | set(side)), 2, "each container its own replica")
        one = n.sim.must("admit one %s=1" % GPU)["pod"]["devices"][GPU]
        write_checkpoint(n.plugin_dir, [(UIDS[0], "app", GPU, app), (UIDS[0], "sidecar", GPU, side),
                                        (UIDS[1], "main", GPU, one)])
        with open(events, "a") as f:
            f.write("proc 0 4101 3000 20\nproc 0 4102 1000 5\n")

        def mem_by_pod(v):
            return {(x.labels["pod"], x.labels["container"]): x.value
                    for x in v.get("gpuslice_pod_gpu_memory_used_bytes", [])}
        want = {("two", ""): 3000 * MIB, ("one", "main"): 1000 * MIB}
        wait_for(lambda: mem_by_pod(self.samples(port)) == want, 10,
                 "pod-level memory for the two-container pod")
        v = self.samples(port)
        reps = {(x.labels["pod"], x.labels["container"]): x.value
                for x in v["gpuslice_pod_gpu_replicas"]}
        self.assertEqual(reps, {("two", "app"): 1, ("two", "sidecar"): 1, ("one", "main"): 1})
        sm = {(x.labels["pod"], x.labels["container"]): x.value
              for x in v["gpuslice_pod_gpu_sm_utilization_ratio"]}
        self.assertEqual(sm, {("two", ""): 0.2, ("one", "main"): 0.05})
        self.assertNotIn("pod", v["DCGM_FI_DEV_FB_USED"][0].labels)  # two pods share it

    def test_mig_device_held_by_one_pod(self):
        """Mixed MIG on A100-80GB: the framebuffer of every GPU instance has its own dcgm
        series (GPU_I_PROFILE, GPU_I_ID); the one a pod holds carries the pod and container
        and shows the memory of the process running in that MIG device, which is also the
        pod's gpuslice_pod_gpu_memory_used_bytes."""
        proc = os.path.join(self.root, "proc")
        os.makedirs(os.path.join(proc, "5001"))
        write_file(os.path.join(proc, "5001", "cgroup"),
                   "12:memory:/kubepods/besteffort/pod%s/%s\n" % (UIDS[2], CID))
        events = os.path.join(self.root, "events")
        write_file(events, "")
        one_g = "nvidia.com/mig-1g.10gb"
        n, port = self.start("a100-80gb-all-balanced", "version: v1\nflags:\n  migStrategy: mixed\n",
                             proc, events)
        self.wait_capacity(n, 8, 10, one_g)
        mig_uuid, = n.sim.must("admit m0 %s=1" % one_g)["pod"]["devices"][one_g]
        self.assertTrue(mig_uuid.startswith("MIG-"), mig_uuid)
        write_checkpoint(n.plugin_dir, [(UIDS[2], "main", one_g, [mig_uuid])])
        with open(events, "a") as f:
            f.write("proc %s 5001 3000 40\n" % mig_uuid)

        def held(v):
            return [x for x in v.get("DCGM_FI_DEV_FB_USED", [])
                    if "GPU_I_ID" in x.labels and x.labels.get("pod") == "m0"]
        wait_for(lambda: [x.value for x in held(self.samples(port))] == [3000], 10,
                 "the held GPU instance's memory with the pod's labels")
        v = self.samples(port)
        gi, = held(v)
        self.assertEqual(gi.labels["GPU_I_PROFILE"], "1g.10gb")
        self.assertEqual(gi.labels["container"], "main")
        self.assertEqual(gi.labels["namespace"], "default")
        free, = [x for x in v["DCGM_FI_DEV_FB_FREE"]
                 if x.labels.get("GPU_I_ID") == gi.labels["GPU_I_ID"] and
                 x.labels["gpu"] == gi.labels["gpu"]]
        self.assertLess(gi.value + free.value, 12 * 1024)  # the instance's ~10 GB, not 80
        # every GPU instance has its series: 4 GPUs x (2 x 1g + 1 x 2g + 1 x 3g)
        per_gi = [x for x in v["DCGM_FI_DEV_FB_USED"] if "GPU_I_ID" in x.labels]
        self.assertEqual(len(per_gi), 16)
        self.assertEqual(len({(x.labels["gpu"], x.labels["GPU_I_ID"]) for x in per_gi}), 16)
        others = [x for x in per_gi if x is not gi]
        self.assertTrue(all("pod" not in x.labels for x in others))
        mem, = v["gpuslice_pod_gpu_memory_used_bytes"]
        self.assertEqual((mem.labels["pod"], mem.labels["resource"], mem.value),
                         ("m0", one_g, 3000 * MIB))
        self.assertEqual(mem.labels["gpu"], gi.labels["gpu"])
        # a MIG GPU's framebuffer is counted once, per GPU instance, as dcgm-exporter does:
        # no whole-GPU series beside them, so each GPU's series sum to its used memory
        self.assertEqual([x for x in v["DCGM_FI_DEV_FB_USED"] if "GPU_I_ID" not in x.labels], [])
        self.assertEqual([x for x in v["DCGM_FI_DEV_FB_FREE"] if "GPU_I_ID" not in x.labels], [])
        used = {}
        for x in v["DCGM_FI_DEV_FB_USED"]:
            used[x.labels["gpu"]] = used.get(x.labels["gpu"], 0) + x.value
        self.assertEqual(used, {g: (3000 if g == gi.labels["gpu"] else 0)
                                for g in ("0", "1", "2", "3")})
        self.assertEqual(sum(used.values()), 3000)  # sum(DCGM_FI_DEV_FB_USED): once
        # gpuslice top sums the instances' framebuffer into the GPU's
        r = subprocess.run([os.path.join(BUILD, "gpuslice"), "top", "--address",
                            "127.0.0.1:%d" % port, "-o", "json"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        top = {str(g["gpu"]): g for g in json.loads(r.stdout)}
        total = sum(x.value for x in v["DCGM_FI_DEV_FB_USED"] + v["DCGM_FI_DEV_FB_FREE"]
                    if x.labels["gpu"] == gi.labels["gpu"])
        self.assertEqual((top[gi.labels["gpu"]]["memory_used_mib"],
                          top[gi.labels["gpu"]]["memory_total_mib"]), (3000, total))
        self.assertGreater(total, 3 * 10000)  # 2 x 1g + 2g + 3g: not one instance's
        # per-GPU readings stay whole-GPU (a MIG GPU has no utilization, as on hardware)
        self.assertEqual(len(v["DCGM_FI_DEV_GPU_TEMP"]), 4)
        self.assertEqual(v.get("DCGM_FI_DEV_GPU_UTIL", []), [])

    def test_alert_counters_exist_at_zero_and_xids_mark_devices(self):
        """Counters a user alerts on exist at 0 before their first event (increase() over a
        series born at 1 is 0): per-GPU XID counts and the fixed health reasons. After an
        XID 79 on a GPU shared 4 ways, 4 devices are marked (gpuslice_xid_marked_devices
        counts devices, not marks) and dcgm's XID series carries err_code and err_msg."""
        events = os.path.join(self.root, "events")
        write_file(events, "")
        n, port = self.start("l20-node", "version: v1\nsharing:\n  timeSlicing:\n"
                             "    resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n",
                             os.path.join(self.root, "proc"), events)
        self.wait_capacity(n, 4, 10)
        # the per-GPU XID counters come with the health thread, before any XID
        wait_for(lambda: "gpuslice_xid_errors_total" in self.samples(port), 10,
                 "the health thread's counters")
        v = self.samples(port)
        xids = {x.labels["gpu"]: x.value for x in v["gpuslice_xid_errors_total"]}
        self.assertEqual(set(xids.values()), {0})
        self.assertGreaterEqual(len(xids), 1)
        reasons = {x.labels["reason"]: x.value for x in v["gpuslice_health_changes_total"]}
        self.assertEqual(reasons, {"event-wait-failed": 0, "recovered": 0, "reset": 0})
        self.assertEqual(v["gpuslice_xid_marked_devices"][0].value, 0)
        with open(events, "a") as f:
            f.write("xid 0 79\n")
        wait_for(lambda: [x.value for x in self.samples(port)["gpuslice_xid_marked_devices"]]
                 == [4], 10, "4 devices marked by the XID")
        v = self.samples(port)
        self.assertEqual({x.labels["gpu"]: x.value for x in v["gpuslice_xid_errors_total"]
                          if x.labels["gpu"] == "0"}, {"0": 1})
        reasons = {x.labels["reason"]: x.value for x in v["gpuslice_health_changes_total"]}
        self.assertEqual(reasons["xid-79"], 1)
        last, = [x for x in v["DCGM_FI_DEV_XID_ERRORS"] if x.labels["gpu"] == "0"]
        self.assertEqual((last.value, last.labels["err_code"], last.labels["err_msg"]),
                         (79, "79", "GPU has fallen off the bus"))
        self.assertIn("DCGM_FI_DRIVER_VERSION", last.labels)

    def test_allocations_survive_a_kubelet_restart(self):
        """gpuslice_allocations_total only resets with the process: a kubelet restart (the
        plugin's server is started again) keeps the count and goes on from it."""
        events = os.path.join(self.root, "events")
        write_file(events, "")
        n, port = self.start("l20-node", "version: v1\n", os.path.join(self.root, "proc"), events)
        self.wait_capacity(n, 1, 10)

        def allocations():
            return [x.value for x in self.samples(port).get("gpuslice_allocations_total", [])
                    if x.labels["resource"] == GPU]
        self.assertEqual(allocations(), [0])  # at 0 before the first Allocate
        n.sim.must("admit p0 %s=1" % GPU)
        wait_for(lambda: allocations() == [1], 10, "the Allocate counted")
        n.sim.must("delete p0")
        n.sim.must("restart")
        wait_for(lambda: "serving resource=%s again" % GPU in self.log_text(n), 10,
                 "the plugin served again after the kubelet's restart")
        self.wait_capacity(n, 1, 10)
        self.assertEqual(allocations(), [1])
        n.sim.must("admit p1 %s=1" % GPU)
        wait_for(lambda: allocations() == [2], 10, "the next Allocate counted on top")
        # a config that renames the resource stops its server: the counter stays, and goes
        # on from there when the resource is served again
        n.sim.must("delete p1")
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, time_slicing(2, rename=True))
        self.wait_capacity(n, 2, 10, GPU + ".shared")
        self.assertEqual(allocations(), [2])
        write_file(cfg, "version: v1\n")
        self.wait_capacity(n, 1, 10)
        n.sim.must("admit p2 %s=1" % GPU)
        wait_for(lambda: allocations() == [3], 10, "the count going on after the rename back")


if __name__ == "__main__":
    import unittest
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_kube_dra.py: src/kube's resource.k8s.io calls (issue 22) against fake_apiserver.py,
# driven through kube_dra_probe — version discovery v1 → v1beta2 → v1beta1 remembered after
# one answer, a clear "DRA is not enabled" without the group, ResourceSlices listed by driver
# and node, created with generateName and a Node owner, updated with resourceVersion (409 →
# re-list hint), deleted (preconditions, already gone), v1beta1's "basic" shape, the API's
# validation texts passed on, RBAC refusals naming the verb and resource, ResourceClaims
# read, Events about a pod in its namespace; the slice watch (changes seen within a second,
# other drivers' and nodes' slices ignored, re-list after compaction and dropped streams,
# prompt stop). Also the stand-in itself (its validation).
# usage: test_kube_dra.py [-v] PATH/TO/kube_dra_probe
import errno
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_apiserver import FakeApiServer  # noqa: E402

PROBE = None
DRIVER = "gpu.nvidia.com"
NODE = "node-1"
SLICES = "/apis/resource.k8s.io/%s/resourceslices"


def slice_body(node=NODE, driver=DRIVER, devices=None, owner_uid=None):
    body = {"metadata": {"generateName": "%s-%s-" % (node, driver)},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices if devices is not None else [
                         {"name": "gpu-0",
                          "attributes": {"type": {"string": "gpu"},
                                         "uuid": {"string": "GPU-0"},
                                         "cudaComputeCapability": {"version": "9.0.0"}},
                          "capacity": {"memory": {"value": "80Gi"}}}]}}
    if owner_uid:
        body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node",
                                                "name": node, "uid": owner_uid,
                                                "controller": True}]
    return body


class WatchProbe:
    """kube_dra_probe watch DRIVER, its JSON lines collected by a thread."""

    def __init__(self, url, driver=DRIVER):
        self.p = subprocess.Popen([PROBE, "--server", url, "--node", NODE, "watch", driver],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.cond = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            with self.cond:
                self.lines.append(json.loads(line))
                self.cond.notify_all()

    def wait_for(self, pred, timeout=10.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.lines:
                    if pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("timed out; lines so far: %s" % self.lines)
                self.cond.wait(left)

    def slices(self, names, timeout=10.0):
        """The first report of exactly these slice names: from now on, or the latest one
        already printed (the watch may have seen the change before the call)."""
        with self.cond:
            start = len(self.lines)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.lines[start:] + self.lines[:start][-1:]:
                    if e.get("event") == "slices" and \
                            sorted(x["name"] for x in e["slices"]) == sorted(names):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("timed out waiting for %s; lines: %s" %
                                         (names, self.lines))
                self.cond.wait(left)

    def stop(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=30)
        err = self.p.stderr.read()
        self.p.stderr.close()
        self.p.stdout.close()
        return rc, err


class KubeDraTest(unittest.TestCase):
    def setUp(self):
        self.srv = FakeApiServer([NODE, "node-2"])
        self.url = "http://127.0.0.1:%d" % self.srv.port
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.srv.down()
        self.tmp.cleanup()

    def http(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else (
            b"" if method == "POST" else None)
        req = urllib.request.Request(self.url + path, method=method, data=data)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode()

    def control(self, method, path):
        return self.http(method, "/_test/" + path)[1]

    def file(self, obj):
        fd, path = tempfile.mkstemp(dir=self.tmp.name, suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f)
        return path

    def probe(self, *cmds):
        """Runs the commands (lists of words) in one client; their JSON lines."""
        argv = [PROBE, "--server", self.url, "--node", NODE]
        for i, c in enumerate(cmds):
            argv += ([";"] if i else []) + list(c)
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        out = [json.loads(line) for line in p.stdout.splitlines()]
        self.assertEqual(len(out), len(cmds), p.stderr)
        # 1 = a command failed; anything else is a crash or a leak (ASan builds)
        self.assertEqual(p.returncode, 0 if all(o["rc"] == 0 for o in out) else 1, p.stderr)
        return out

    def requests_to(self, prefix):
        return [r for r in self.control("GET", "requests")["items"]
                if r["path"].startswith(prefix)]

    # ---- version discovery ----------------------------------------------------------------

    def test_version_v1_asked_once(self):
        out = self.probe(["version"], ["list", DRIVER], ["version"])
        self.assertEqual([o["rc"] for o in out], [0, 0, 0])
        self.assertEqual(out[0]["version"], "v1")
        self.assertEqual(out[2]["version"], "v1")
        self.assertEqual(len(self.requests_to("/apis/resource.k8s.io/v1")), 2)  # doc + list
        self.assertEqual(len([r for r in self.requests_to("/apis/resource.k8s.io/v1")
                              if r["path"] == "/apis/resource.k8s.io/v1"]), 1)

    def test_version_falls_back_on_404(self):
        for served, want in (("v1beta2,v1beta1", "v1beta2"), ("v1beta1", "v1beta1")):
            self.control("POST", "dra-versions?served=" + served)
            out = self.probe(["version"], ["list", DRIVER])
            self.assertEqual(out[0]["version"], want)
            self.assertEqual(out[1]["rc"], 0, out[1])
        tried = [r["path"] for r in self.requests_to("/apis/resource.k8s.io/")]
        self.assertEqual(tried[:3], ["/apis/resource.k8s.io/v1", "/apis/resource.k8s.io/v1beta2",
                                     "/apis/resource.k8s.io/v1beta2/resourceslices?fieldSelector="
                                     "spec.driver%3Dgpu.nvidia.com%2Cspec.nodeName%3Dnode-1"])

    def test_version_asked_again_when_no_longer_served(self):
        # the list on the version no longer served fails once; the client then asks again
        out = self.probe_switching()
        self.assertEqual([o["rc"] for o in out], [0, -errno.EOPNOTSUPP, 0, 0])
        self.assertEqual((out[0]["version"], out[2]["version"]), ("v1", "v1beta1"))

    def probe_switching(self):
        """One process: version (v1), then v1 is turned off, then list, version, list."""
        self.control("POST", "dra-versions?served=v1,v1beta1")
        p = subprocess.Popen([PROBE, "--server", self.url, "--node", NODE, "version", ";",
                              "wait", ";", "list", DRIVER, ";", "version", ";", "list",
                              DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        first = json.loads(p.stdout.readline())
        self.control("POST", "dra-versions?served=v1beta1")
        out, err = p.communicate("go\n", timeout=60)
        lines = [first] + [json.loads(x) for x in out.splitlines()]
        return [x for x in lines if x["cmd"] != "wait"]

    def test_no_group_says_dra_is_off(self):
        self.control("POST", "dra-versions?served=")
        out = self.probe(["version"], ["list", DRIVER], ["claim", "default", "c"])
        for o in out:
            self.assertEqual(o["rc"], -errno.EOPNOTSUPP, o)
            self.assertIn("does not serve resource.k8s.io (tried v1, v1beta2, v1beta1)",
                          o["error"])
            self.assertIn("Dynamic Resource Allocation is not enabled", o["error"])
            self.assertIn("DynamicResourceAllocation=true", o["error"])
        # the group missing as an aggregated/absent API group answers the same
        self.control("POST", "dra-versions?served=v1,v1beta2,v1beta1")
        self.control("POST", "no-group?group=resource.k8s.io")
        self.assertEqual(self.probe(["version"])[0]["rc"], -errno.EOPNOTSUPP)

    # ---- ResourceSlices -----------------------------------------------------------------

    def test_list_filters_driver_and_node(self):
        for node, driver in ((NODE, DRIVER), ("node-2", DRIVER), (NODE, "other.example.com")):
            code, _ = self.http("POST", SLICES % "v1", slice_body(node, driver))
            self.assertEqual(code, 201)
        out = self.probe(["list", DRIVER], ["list", DRIVER, "node-2"], ["list", "x.example"])
        self.assertEqual([o["n"] for o in out], [1, 1, 0])
        self.assertEqual(out[0]["items"][0]["spec"]["nodeName"], NODE)
        self.assertEqual(out[0]["items"][0]["spec"]["driver"], DRIVER)
        self.assertEqual(out[1]["items"][0]["spec"]["nodeName"], "node-2")
        self.assertEqual(out[2]["items"], [])
        self.assertTrue(int(out[0]["rv"]) > 0)

    def test_create_update_delete_with_owner(self):
        uid = self.probe(["node-uid"])[0]["uid"]
        self.assertEqual(uid, self.control("GET", "node")["metadata"]["uid"])
        out = self.probe(["create", self.file(slice_body(owner_uid=uid))])[0]
        self.assertEqual(out["rc"], 0, out)
        obj = out["object"]
        name, rv = obj["metadata"]["name"], obj["metadata"]["resourceVersion"]
        self.assertTrue(name.startswith("node-1-gpu.nvidia.com-"))
        self.assertEqual(obj["apiVersion"], "resource.k8s.io/v1")
        self.assertEqual(obj["metadata"]["ownerReferences"][0]["uid"], uid)
        # update in place with the resourceVersion read; then a stale one is a conflict
        body = slice_body(owner_uid=uid)
        body["metadata"] = {"name": name, "ownerReferences": obj["metadata"]["ownerReferences"]}
        body["spec"]["pool"]["generation"] = 2
        body["spec"]["devices"].append({"name": "gpu-1", "attributes": {"type": {"string":
                                                                                 "gpu"}}})
        f = self.file(body)
        out = self.probe(["update", name, rv, f], ["update", name, rv, f], ["list", DRIVER])
        self.assertEqual(out[0]["rc"], 0, out[0])
        new_rv = out[0]["object"]["metadata"]["resourceVersion"]
        self.assertNotEqual(new_rv, rv)
        self.assertEqual(out[1]["rc"], -errno.EEXIST)
        self.assertIn("HTTP 409", out[1]["error"])
        self.assertIn("the object has been modified", out[1]["error"])
        self.assertIn("list the slices again and retry", out[1]["error"])
        self.assertEqual(len(out[2]["items"][0]["spec"]["devices"]), 2)
        # delete: a stale precondition refused, then gone, then already gone
        out = self.probe(["delete", name, rv], ["delete", name, new_rv], ["delete", name])
        self.assertEqual([o["rc"] for o in out], [-errno.EEXIST, 0, -errno.ENOENT])
        self.assertIn("Precondition failed", out[0]["error"])
        self.assertEqual(self.control("GET", "dra")["resourceslices"], [])
        methods = [r["method"]
                   for r in self.requests_to("/apis/resource.k8s.io/v1/resourceslices/")]
        self.assertEqual(methods, ["PUT", "PUT", "DELETE", "DELETE", "DELETE"])

    def test_v1beta1_devices_under_basic(self):
        self.control("POST", "dra-versions?served=v1beta1")
        out = self.probe(["create", self.file(slice_body())], ["list", DRIVER])
        self.assertEqual(out[0]["rc"], 0, out[0])
        self.assertEqual(out[0]["object"]["apiVersion"], "resource.k8s.io/v1beta1")
        dev = out[1]["items"][0]["spec"]["devices"][0]
        self.assertEqual(sorted(dev), ["basic", "name"])
        self.assertEqual(dev["basic"]["capacity"]["memory"]["value"], "80Gi")
        stored = self.control("GET", "dra")["resourceslices"][0]["spec"]["devices"][0]
        self.assertEqual(stored["attributes"]["uuid"], {"string": "GPU-0"})
        # the stand-in refuses v1 device fields in a v1beta1 body, as decoding would
        code, st = self.http("POST", SLICES % "v1beta1", slice_body())
        self.assertEqual(code, 422)
        self.assertIn('under "basic"', st["message"])

    def test_validation_errors_passed_on(self):
        attrs = {"a%d" % i: {"int": i} for i in range(33)}
        cases = [
            (slice_body(devices=[{"name": "GPU_0"}]), "spec.devices[0].name: Invalid value"),
            (slice_body(devices=[{"name": "gpu-0", "attributes": attrs}]),
             "the total number of attributes and capacities must not exceed 32"),
            (slice_body(devices=[{"name": "g" * 64}]), "must be no more than 63 characters"),
            (slice_body(driver=""), "spec.driver: Required value"),
            (slice_body(owner_uid="u") | {"metadata": {
                "name": "s", "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                                                  "name": NODE}]}},
             "metadata.ownerReferences[0].uid"),
        ]
        nopool = slice_body()
        del nopool["spec"]["pool"]
        cases.append((nopool, "spec.pool.name: Required value"))
        nonode = slice_body()
        del nonode["spec"]["nodeName"]
        cases.append((nonode, "exactly one of `nodeName`"))
        out = self.probe(*[["create", self.file(b)] for b, _ in cases])
        for o, (_, want) in zip(out, cases):
            self.assertEqual(o["rc"], -errno.EINVAL, o)
            self.assertIn("HTTP 422", o["error"])
            self.assertIn(want, o["error"])
        self.assertEqual(self.control("GET", "dra")["resourceslices"], [])
        # bodies that are not objects never reach the server
        out = self.probe(["create", self.file([1, 2])])
        self.assertEqual(out[0]["rc"], -errno.EINVAL)
        self.assertIn("not a JSON object", out[0]["error"])

    def test_rbac_refusal_names_verb_resource_and_role(self):
        self.control("POST", "deny?verb=create&group=resource.k8s.io&resource=resourceslices")
        out = self.probe(["list", DRIVER], ["create", self.file(slice_body())])
        self.assertEqual(out[0]["rc"], 0)
        self.assertEqual(out[1]["rc"], -errno.EACCES)
        self.assertIn('grant "create" on "resourceslices.resource.k8s.io"', out[1]["error"])
        self.assertIn("components/dra", out[1]["error"])

    # ---- ResourceClaims and Events ------------------------------------------------------

    def test_claim_get_and_missing(self):
        claim = {"metadata": {"name": "gpu-claim", "namespace": "team"},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": "gpu.nvidia.com"}}]}},
                 "status": {"allocation": {"devices": {"results": [
                     {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-0"}]}}}}
        code, made = self.http("POST", "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims",
                               claim)
        self.assertEqual(code, 201)
        out = self.probe(["claim", "team", "gpu-claim"], ["claim", "team", "nope"],
                         ["claim", "other", "gpu-claim"])
        self.assertEqual(out[0]["rc"], 0)
        got = out[0]["object"]
        self.assertEqual(got["metadata"]["uid"], made["metadata"]["uid"])
        self.assertEqual(got["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-0")
        for o in out[1:]:
            self.assertEqual(o["rc"], -errno.ENOENT)
            self.assertIn("not found", o["error"])
        self.assertIn("/namespaces/team/resourceclaims/nope", out[1]["error"])
        # the scheduler's write: status through the subresource
        path = "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims/gpu-claim/status"
        res = {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-1"}
        code, upd = self.http("PUT", path, {"status": {"allocation": {"devices": {
            "results": [res]}}}})
        self.assertEqual(code, 200)
        got = self.probe(["claim", "team", "gpu-claim"])[0]["object"]
        self.assertEqual(got["status"]["allocation"]["devices"]["results"], [res])
        self.assertEqual(got["metadata"]["resourceVersion"], upd["metadata"]["resourceVersion"])

    def test_device_classes_in_the_stand_in(self):
        dc = {"metadata": {"name": "gpu.nvidia.com"},
              "spec": {"selectors": [{"cel": {"expression":
                                              "device.driver == 'gpu.nvidia.com'"}}],
                       "extendedResourceName": "nvidia.com/gpu"}}
        self.assertEqual(self.http("POST", "/apis/resource.k8s.io/v1/deviceclasses", dc)[0], 201)
        self.assertEqual(self.http("POST", "/apis/resource.k8s.io/v1/deviceclasses", dc)[0], 409)
        code, got = self.http("GET", "/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com")
        self.assertEqual((code, got["spec"]["extendedResourceName"]), (200, "nvidia.com/gpu"))
        bad = {"metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {}}]}}
        code, st = self.http("POST", "/apis/resource.k8s.io/v1/deviceclasses", bad)
        self.assertEqual(code, 422)
        self.assertIn("spec.selectors[0].cel.expression: Required value", st["message"])

    def test_pod_event_in_the_pods_namespace(self):
        out = self.probe(["pod-event", "team", "trainer-0", "pod-uid-1", "Warning",
                          "GPULost", "the GPU of claim team/gpu-claim (gpu-0) was lost"],
                         ["pod-event", "team", "p", "", "Info", "R", "m"])
        self.assertEqual(out[0]["rc"], 0, out[0])
        self.assertEqual(out[1]["rc"], -errno.EINVAL)
        ev = self.control("GET", "events")["items"][-1]
        self.assertEqual(ev["metadata"]["namespace"], "team")
        self.assertEqual(ev["involvedObject"], {"apiVersion": "v1", "kind": "Pod",
                                                "namespace": "team", "name": "trainer-0",
                                                "uid": "pod-uid-1"})
        self.assertEqual((ev["type"], ev["reason"]), ("Warning", "GPULost"))
        self.assertEqual(ev["source"], {"component": "gpuslice", "host": NODE})
        # without rights to create Events there, the refusal names the namespace
        self.control("POST", "deny?verb=create&resource=events")
        out = self.probe(["pod-event", "team", "p", "", "Warning", "GPULost", "m"])
        self.assertEqual(out[0]["rc"], -errno.EACCES)
        self.assertIn('may not create events in namespace "team"', out[0]["error"])

    # ---- the slice watch ----------------------------------------------------------------

    def test_watch_follows_own_slices(self):
        w = WatchProbe(self.url)
        try:
            w.wait_for(lambda e: e.get("event") == "slices" and e["known"])
            t0 = time.monotonic()
            code, made = self.http("POST", SLICES % "v1", slice_body())
            self.assertEqual(code, 201)
            name = made["metadata"]["name"]
            e = w.slices([name])
            self.assertLess(time.monotonic() - t0, 1.0)
            # other drivers' and nodes' slices are not ours
            self.http("POST", SLICES % "v1", slice_body("node-2"))
            self.http("POST", SLICES % "v1", slice_body(driver="other.example.com"))
            # an update shows with its devices and new resourceVersion
            body = made
            body["spec"]["devices"].append({"name": "gpu-1"})
            code, upd = self.http("PUT", SLICES % "v1" + "/" + name, body)
            self.assertEqual(code, 200)
            e = w.wait_for(lambda e: e.get("event") == "slices" and e["slices"] and
                           e["slices"][0]["rv"] == upd["metadata"]["resourceVersion"])
            self.assertEqual([d["name"] for d in e["slices"][0]["devices"]], ["gpu-0", "gpu-1"])
            self.assertEqual([x["name"] for x in e["slices"]], [name])
            t0 = time.monotonic()
            self.assertEqual(self.http("DELETE", SLICES % "v1" + "/" + name)[0], 200)
            w.slices([])
            self.assertLess(time.monotonic() - t0, 1.0)
        finally:
            rc, err = w.stop()
        self.assertEqual(rc, 0, err)
        paths = [r["path"] for r in self.requests_to("/apis/resource.k8s.io/v1/resourceslices?")]
        self.assertTrue(any("watch=true" in p for p in paths), paths)

    def test_watch_relists_after_compaction_and_dropped_streams(self):
        w = WatchProbe(self.url)
        try:
            w.wait_for(lambda e: e.get("event") == "slices" and e["known"])
            _, a = self.http("POST", SLICES % "v1", slice_body())
            w.slices([a["metadata"]["name"]])
            # changes made while the stream is down, then a compaction: 410 → a new list
            self.control("POST", "compact")
            self.control("POST", "drop")
            _, b = self.http("POST", SLICES % "v1", slice_body())
            self.control("POST", "compact")
            w.slices([a["metadata"]["name"], b["metadata"]["name"]])
            self.control("POST", "drop")
            self.http("DELETE", SLICES % "v1" + "/" + a["metadata"]["name"])
            w.slices([b["metadata"]["name"]])
            # a bookmark moves the resume point without a change report
            self.control("POST", "bookmark")
        finally:
            rc, err = w.stop()
        self.assertEqual(rc, 0, err)
        lists = [r for r in self.requests_to("/apis/resource.k8s.io/v1/resourceslices?")
                 if "watch=true" not in r["path"]]
        self.assertGreaterEqual(len(lists), 2)

    def test_watch_without_dra_fails_at_start(self):
        self.control("POST", "dra-versions?served=")
        w = WatchProbe(self.url)
        e = w.wait_for(lambda e: e.get("cmd") == "watch")
        self.assertEqual(e["rc"], -errno.EOPNOTSUPP)
        self.assertIn("Dynamic Resource Allocation is not enabled", e["error"])
        rc, _ = w.stop()
        self.assertEqual(rc, 1)

    def test_watch_stops_promptly_while_server_down(self):
        w = WatchProbe(self.url)
        w.wait_for(lambda e: e.get("event") == "slices" and e["known"])
        self.srv.down()
        w.wait_for(lambda e: e.get("event") == "status" and not e["reachable"])
        t0 = time.monotonic()
        rc, err = w.stop()
        self.assertEqual(rc, 0, err)
        self.assertLess(time.monotonic() - t0, 2.0)


if __name__ == "__main__":
    PROBE = sys.argv.pop()
    unittest.main(argv=sys.argv)

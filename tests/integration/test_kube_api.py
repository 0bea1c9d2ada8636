#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_kube_api.py: src/kube against fake_apiserver.py, driven through kube_watch_probe —
# a label change is seen within 1 s, 410 Gone re-lists, the server going down and coming
# back is survived, Events are recorded, kubeconfig and in-cluster auth (token rotation),
# API errors name the URL/status/fix, stop is prompt and no fds leak; HTTPS with a CA and
# client certificates from files and from kubeconfig -data blobs.
# usage: test_kube_api.py [-v] PATH/TO/kube_watch_probe
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_apiserver import FakeApiServer  # noqa: E402

PROBE = None
LABEL = "nvidia.com/device-plugin.config"


def http(port, method, path):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                 data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read() or b"{}")


class Probe:
    """kube_watch_probe ... watch, with its JSON lines collected by a thread."""

    def __init__(self, args, env=None):
        self.p = subprocess.Popen([PROBE] + args + ["watch"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env, text=True)
        self.lines = []
        self.cond = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            with self.cond:
                self.lines.append(json.loads(line))
                self.cond.notify_all()

    def wait_for(self, pred, timeout=10.0, start=0):
        """The first line from index `start` matching pred, and its index."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i in range(start, len(self.lines)):
                    if pred(self.lines[i]):
                        return self.lines[i], i
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("timed out; lines so far: %s" % self.lines)
                self.cond.wait(left)

    def value(self, v, timeout=10.0, start=0):
        return self.wait_for(lambda e: e["event"] == "value" and e["value"] == v, timeout,
                             start)

    def n_fds(self):
        return len(os.listdir("/proc/%d/fd" % self.p.pid))

    def stop(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=30)
        err = self.p.stderr.read()
        self.p.stderr.close()
        self.p.stdout.close()
        return rc, err

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


class KubeApiTest(unittest.TestCase):
    def setUp(self):
        self.srv = FakeApiServer(["node-1"])
        self.srv.state.set_label("node-1", LABEL, "l20")
        self.ctl = self.srv.control_port
        self.url = "http://127.0.0.1:%d" % self.srv.port
        self.probes = []
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        for p in self.probes:
            p.kill()
        self.srv.up()
        self.srv.api.shutdown()
        self.srv.control.shutdown()
        self.tmp.cleanup()

    def probe(self, args=None, env=None):
        p = Probe(args if args is not None else ["--server", self.url, "--node", "node-1"],
                  env)
        self.probes.append(p)
        return p

    def finish(self, p):
        rc, err = p.stop()
        self.assertEqual(rc, 0, err)
        stopped, _ = p.wait_for(lambda e: e["event"] == "stopped")
        self.assertLess(stopped["stop_ms"], 500)
        return p.wait_for(lambda e: e["event"] == "stats")[0]

    def run_probe(self, args, env=None):
        r = subprocess.run([PROBE] + args, capture_output=True, text=True, env=env,
                           timeout=60)
        return r.returncode, [json.loads(x) for x in r.stdout.splitlines()], r.stderr

    def wait_watches_open(self, n, timeout=10.0):
        st = self.srv.state
        with st.cond:
            self.assertTrue(st.cond.wait_for(lambda: st.watches_open >= n, timeout))

    def set_label(self, value):
        q = "key=%s&" % LABEL + ("delete=1" if value is None else "value=" + value)
        return http(self.ctl, "POST", "/_test/label?" + q)

    # ---- watching -----------------------------------------------------------------------

    def test_watch_label_change_seen_within_1s(self):
        p = self.probe()
        _, i = p.value("l20")
        p.wait_for(lambda e: e["event"] == "status" and e["reachable"])
        latencies = []
        for v in ("t4", "a100", "l20"):
            t0 = time.time() * 1000
            self.set_label(v)
            e, i = p.value(v, start=i + 1)
            latencies.append(e["t_ms"] - t0)
        self.set_label(None)
        p.value(None, start=i + 1)
        print("label change -> seen: %s ms" % ["%.1f" % x for x in latencies],
              file=sys.stderr)
        self.assertLess(max(latencies), 1000)
        stats = self.finish(p)
        self.assertEqual(stats["lists"], 1)
        self.assertEqual(stats["failures"], 0)

    def test_watch_gone_relists(self):
        p = self.probe()
        _, i = p.value("l20")
        # A change whose event the watch never gets, then compaction past our
        # resourceVersion: the reconnecting watch gets 410 and only a re-list finds t4.
        http(self.ctl, "POST", "/_test/label?key=%s&value=t4&quiet=1" % LABEL)
        http(self.ctl, "POST", "/_test/compact")
        http(self.ctl, "POST", "/_test/drop")
        p.value("t4", start=i + 1, timeout=5)
        stats = self.finish(p)
        self.assertGreaterEqual(stats["gone"], 1)
        self.assertGreaterEqual(stats["lists"], 2)
        self.assertEqual(stats["failures"], 0)

    def test_watch_always_gone_backs_off(self):
        """A server whose every watch answers 410 at once made the client re-list and
        re-watch without pause (500-2,400 requests/s): now it backs off, and a list between
        two 410s does not reset the backoff."""
        p = self.probe()
        _, i = p.value("l20")
        p.wait_for(lambda e: e["event"] == "status" and e["reachable"])
        http(self.ctl, "POST", "/_test/always-gone")
        http(self.ctl, "POST", "/_test/drop")
        t0 = time.monotonic()
        with self.srv.state.cond:
            n0 = len(self.srv.state.requests)
        time.sleep(3.0)  # a rate over a window, not a wait for a condition
        with self.srv.state.cond:
            n = len(self.srv.state.requests) - n0
        rate = n / (time.monotonic() - t0)
        print("always 410: %d requests in 3 s (%.1f/s)" % (n, rate), file=sys.stderr)
        # 0.5 + 1 + 2 s of backoff fit in 3 s: a handful of list+watch pairs, not thousands
        self.assertLess(n, 20)
        http(self.ctl, "POST", "/_test/always-gone?on=0")
        self.set_label("t4")  # and it recovers once the server behaves
        p.value("t4", start=i + 1, timeout=40)
        self.finish(p)

    def test_watch_node_deleted_and_back(self):
        p = self.probe()
        _, i = p.value("l20")
        http(self.ctl, "POST", "/_test/delete-node")
        _, i = p.value(None, start=i + 1)
        self.set_label("t4")  # re-creates the node (ADDED)
        p.value("t4", start=i + 1)
        self.finish(p)

    def test_watch_bookmark_and_server_timeout(self):
        p = self.probe()
        _, i = p.value("l20")
        http(self.ctl, "POST", "/_test/bookmark")
        http(self.ctl, "POST", "/_test/drop")  # a watch ended by the server side
        self.set_label("t4")
        p.value("t4", start=i + 1)
        stats = self.finish(p)
        self.assertEqual(stats["failures"], 0)
        self.assertEqual(stats["lists"], 1)  # resumed from the resourceVersion

    def test_watch_server_down_and_back(self):
        p = self.probe()
        _, i = p.value("l20")
        p.wait_for(lambda e: e["event"] == "status" and e["reachable"])
        fds = p.n_fds()
        self.srv.down()
        e, j = p.wait_for(lambda e: e["event"] == "status" and not e["reachable"],
                          start=i + 1)
        self.assertIn(self.url, e["error"])
        self.assertIn("reachable", e["error"])
        self.srv.state.set_label("node-1", LABEL, "t4")  # changed while we were away
        time.sleep(0.1)  # let it fail at least once more while down (not a wait)
        t0 = time.time() * 1000
        self.srv.up()
        e, _ = p.wait_for(lambda e: e["event"] == "status" and e["reachable"], start=j + 1)
        p.value("t4", start=j + 1)
        print("API back -> reachable: %.0f ms" % (e["t_ms"] - t0), file=sys.stderr)
        self.assertLess(e["t_ms"] - t0, 3000)  # backoff is still short after 2 s down
        self.assertEqual(p.n_fds(), fds)
        stats = self.finish(p)
        self.assertGreaterEqual(stats["failures"], 1)

    def test_watch_many_reconnects_no_fd_leak(self):
        p = self.probe()
        _, i = p.value("l20")
        fds = p.n_fds()
        for n in range(20):
            self.set_label("v%d" % n)
            _, i = p.value("v%d" % n, start=i + 1)
            http(self.ctl, "POST", "/_test/drop")
        self.set_label("last")
        p.value("last", start=i + 1)
        self.assertEqual(p.n_fds(), fds)
        stats = self.finish(p)
        self.assertGreaterEqual(stats["watches"], 20)

    def test_watch_forbidden_reports_rbac(self):
        http(self.ctl, "POST", "/_test/forbid?on=1")
        p = self.probe()
        e, _ = p.wait_for(lambda e: e["event"] == "status" and not e["reachable"])
        self.assertIn("HTTP 403", e["error"])
        self.assertIn("cannot get resource", e["error"])
        self.assertIn("grant get/list/watch on nodes", e["error"])
        http(self.ctl, "POST", "/_test/forbid?on=0")
        p.value("l20")
        self.finish(p)

    # ---- one-shot requests --------------------------------------------------------------

    def test_get_label(self):
        rc, out, err = self.run_probe(["--server", self.url, "--node", "node-1", "get"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out[0]["value"], "l20")
        rc, out, err = self.run_probe(["--server", self.url, "--node", "node-1", "--label",
                                       "absent.example.com/x", "get"])
        self.assertEqual(rc, 0, err)
        self.assertIsNone(out[0]["value"])

    def test_get_missing_node_names_url_and_fix(self):
        rc, _, err = self.run_probe(["--server", self.url, "--node", "nope", "get"])
        self.assertEqual(rc, 1)
        self.assertIn("GET %s/api/v1/nodes/nope: HTTP 404" % self.url, err)
        self.assertIn('nodes "nope" not found', err)
        self.assertIn("NODE_NAME", err)

    def test_get_unreachable(self):
        self.srv.down()
        rc, _, err = self.run_probe(["--server", self.url, "--node", "node-1", "get"])
        self.assertEqual(rc, 1)
        self.assertIn(self.url, err)
        self.assertIn("reachable", err)

    def test_event_posted(self):
        rc, out, err = self.run_probe(["--server", self.url, "--node", "node-1", "event",
                                       "Warning", "ConfigNotFound",
                                       "no config named \"h100\"; available: l20, t4"])
        self.assertEqual(rc, 0, err)
        evs = http(self.ctl, "GET", "/_test/events")["items"]
        self.assertEqual(len(evs), 1)
        ev = evs[0]
        self.assertEqual(ev["type"], "Warning")
        self.assertEqual(ev["reason"], "ConfigNotFound")
        self.assertEqual(ev["message"], "no config named \"h100\"; available: l20, t4")
        self.assertEqual(ev["involvedObject"]["kind"], "Node")
        self.assertEqual(ev["involvedObject"]["name"], "node-1")
        self.assertEqual(ev["source"]["component"], "gpuslice")
        self.assertEqual(ev["metadata"]["namespace"], "default")
        self.assertTrue(ev["metadata"]["name"].startswith("node-1."))
        self.assertRegex(ev["firstTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

    def test_event_namespace_and_bad_type(self):
        # Events about a Node go to "default" whatever NAMESPACE says (issue 18: a real API
        # server refuses them anywhere else, and so does the fake one, below)
        env = dict(os.environ, NAMESPACE="gpu-operator")
        rc, _, err = self.run_probe(["--server", self.url, "--node", "node-1", "event",
                                     "Normal", "ConfigApplied", "ok"], env=env)
        self.assertEqual(rc, 0, err)
        ev = http(self.ctl, "GET", "/_test/events")["items"][0]
        self.assertEqual(ev["metadata"]["namespace"], "default")
        self.assertNotIn("namespace", ev["involvedObject"])
        rc, _, err = self.run_probe(["--server", self.url, "--node", "node-1", "event",
                                     "Error", "X", "y"])
        self.assertEqual(rc, 1)
        self.assertIn("Normal or Warning", err)

    def post_event(self, ns, involved_ns=None):
        inv = {"apiVersion": "v1", "kind": "Node", "name": "node-1"}
        if involved_ns is not None:
            inv["namespace"] = involved_ns
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "node-1.1", "namespace": ns}, "involvedObject": inv,
              "reason": "R", "message": "m", "type": "Warning"}
        req = urllib.request.Request("%s/api/v1/namespaces/%s/events" % (self.url, ns),
                                     data=json.dumps(ev).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_fake_refuses_node_event_outside_default(self):
        """The stand-in enforces legacyValidateEvent with the real API server's text."""
        code, st = self.post_event("gpuslice")
        self.assertEqual(code, 422)
        self.assertEqual(st["reason"], "Invalid")
        self.assertEqual(st["message"], 'Event "node-1.1" is invalid: involvedObject.namespace: '
                                        'Invalid value: "": does not match event.namespace')
        self.assertEqual(st["details"]["causes"][0]["field"], "involvedObject.namespace")
        code, _ = self.post_event("gpuslice", involved_ns="other")
        self.assertEqual(code, 422)
        self.assertEqual(self.post_event("gpuslice", involved_ns="gpuslice")[0], 201)
        self.assertEqual(self.post_event("default")[0], 201)
        self.assertEqual(len(http(self.ctl, "GET", "/_test/events")["items"]), 2)

    def test_event_refused_names_verb_and_resource(self):
        http(self.ctl, "POST", "/_test/deny?verb=create&resource=events")
        rc, _, err = self.run_probe(["--server", self.url, "--node", "node-1", "event",
                                     "Warning", "ConfigNotFound", "x"])
        self.assertEqual(rc, 1)
        self.assertIn('cannot create resource "events" in API group "" in the namespace '
                      '"default"', err)
        self.assertIn('grant "create" on "events" there', err)

    # ---- label writers: the hints of issue 19 (found with the shipped RBAC) -------------

    def test_node_labels_without_patch_names_the_refused_verb(self):
        http(self.ctl, "POST", "/_test/deny?verb=patch&resource=nodes")
        rc, _, err = self.run_probe(["--server", self.url, "--node", "node-1", "patch-labels",
                                     "nvidia.com/gpu.replicas=8"])
        self.assertEqual(rc, 1)
        self.assertIn("HTTP 403", err)
        self.assertIn('cannot patch resource "nodes"', err)
        self.assertIn('grant "patch" on "nodes"', err)
        self.assertIn("--labels=node", err)
        self.assertNotIn("get/list/watch", err)  # not the device plugin's rights
        http(self.ctl, "POST", "/_test/deny?clear=1")
        rc, _, err = self.run_probe(["--server", self.url, "--node", "node-1", "patch-labels",
                                     "nvidia.com/gpu.replicas=8"])
        self.assertEqual(rc, 0, err)
        node = http(self.ctl, "GET", "/_test/node?node=node-1")
        self.assertEqual(node["metadata"]["labels"]["nvidia.com/gpu.replicas"], "8")

    def test_nodefeature_without_rights_names_nodefeatures(self):
        for verb in ("get", "create"):
            http(self.ctl, "POST", "/_test/deny?clear=1")
            http(self.ctl, "POST", "/_test/deny?verb=%s&group=nfd.k8s-sigs.io"
                                   "&resource=nodefeatures" % verb)
            rc, _, err = self.run_probe(["--server", self.url, "--node", "node-1",
                                         "nodefeature", "gpuslice", "nvidia.com/gpu.count=1"])
            self.assertEqual(rc, 1, verb)
            self.assertIn('cannot %s resource "nodefeatures"' % verb, err)
            self.assertIn('grant "%s" on "nodefeatures.nfd.k8s-sigs.io"' % verb, err)
            self.assertIn("get, create and update on nodefeatures.nfd.k8s-sigs.io in namespace "
                          '"gpuslice"', err)
            self.assertNotIn("get/list/watch on nodes", err)
            self.assertNotIn("create on events", err)

    def test_nodefeature_without_crd_says_the_group_is_missing(self):
        http(self.ctl, "POST", "/_test/no-group?group=nfd.k8s-sigs.io")
        rc, _, err = self.run_probe(["--server", self.url, "--node", "node-1", "nodefeature",
                                     "gpuslice", "nvidia.com/gpu.count=1"])
        self.assertEqual(rc, 1)
        self.assertIn("HTTP 404", err)
        self.assertIn("does not serve nfd.k8s-sigs.io/v1alpha1", err)
        self.assertIn("--labels=nfd-file", err)
        self.assertIn("--use-node-feature-api=false", err)
        self.assertNotIn("NODE_NAME", err)  # not "check the name"
        reqs = [q["method"] for q in http(self.ctl, "GET", "/_test/requests")["items"]
                if "nodefeatures" in q["path"]]
        self.assertEqual(reqs, ["GET"])  # no create attempted into a missing API
        http(self.ctl, "POST", "/_test/no-group?clear=1")
        rc, _, err = self.run_probe(["--server", self.url, "--node", "node-1", "nodefeature",
                                     "gpuslice", "nvidia.com/gpu.count=1"])
        self.assertEqual(rc, 0, err)

    # ---- auth ---------------------------------------------------------------------------

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def kubeconfig(self, token):
        return self.write("kubeconfig", """apiVersion: v1
kind: Config
current-context: test
clusters:
- name: fake
  cluster:
    server: %s
contexts:
- name: test
  context: {cluster: fake, user: probe}
users:
- name: probe
  user:
    token: %s
""" % (self.url, token))

    def test_kubeconfig_token(self):
        self.srv.state.token = "s3cret-token"
        kc = self.kubeconfig("s3cret-token")
        rc, out, err = self.run_probe(["--kubeconfig", kc, "--node", "node-1", "get"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out[0]["value"], "l20")
        reqs = [r for r in http(self.ctl, "GET", "/_test/requests")["items"]
                if not r["path"].startswith("/_test/")]
        self.assertEqual(reqs[-1]["authorization"], "Bearer s3cret-token")
        kc = self.kubeconfig("wrong-token")
        rc, _, err = self.run_probe(["--kubeconfig", kc, "--node", "node-1", "get"])
        self.assertEqual(rc, 1)
        self.assertIn("HTTP 401", err)
        self.assertIn("credentials were refused", err)
        self.assertNotIn("wrong-token", err)

    def test_kubeconfig_env_and_bad_file(self):
        self.srv.state.token = "t"
        env = dict(os.environ, KUBECONFIG=self.kubeconfig("t"), NODE_NAME="node-1")
        rc, out, err = self.run_probe(["get"], env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out[0]["value"], "l20")
        bad = self.write("bad", "apiVersion: v1\nkind: Config\ncurrent-context: nope\n")
        rc, _, err = self.run_probe(["--kubeconfig", bad, "--node", "node-1", "get"])
        self.assertEqual(rc, 1)
        self.assertIn("no contexts entry named \"nope\"", err)
        # several files in KUBECONFIG: the error says which one was read (kubectl merges)
        env = dict(os.environ, KUBECONFIG=bad + ":" + self.kubeconfig("t"), NODE_NAME="node-1")
        rc, _, err = self.run_probe(["get"], env=env)
        self.assertEqual(rc, 1)
        self.assertIn("KUBECONFIG lists several files and gpuslice reads only the first that "
                      "exists, %s" % bad, err)

    def test_incluster_token_reread_on_reconnect(self):
        sa = os.path.join(self.tmp.name, "sa")
        os.mkdir(sa)
        tok = self.write("sa/token", "token-1\n")
        self.write("sa/namespace", "gpu-system")
        self.srv.state.token_file = tok
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
                   KUBERNETES_SERVICE_PORT=str(self.srv.port), NODE_NAME="node-1")
        env.pop("KUBECONFIG", None)
        p = self.probe(["--server", self.url, "--sa-dir", sa], env=env)
        _, i = p.value("l20")
        self.wait_watches_open(1)
        # kubelet rotates the projected token: the next connection must carry the new one.
        self.write("sa/token.new", "token-2\n")
        os.rename(os.path.join(sa, "token.new"), tok)
        http(self.ctl, "POST", "/_test/drop")
        self.set_label("t4")
        p.value("t4", start=i + 1)
        stats = self.finish(p)
        self.assertEqual(stats["failures"], 0, p.lines)
        auths = [r["authorization"] for r in http(self.ctl, "GET", "/_test/requests")["items"]
                 if not r["path"].startswith("/_test/")]
        self.assertEqual(auths[0], "Bearer token-1")
        self.assertEqual(auths[-1], "Bearer token-2")
        rc, _, err = self.run_probe(["--server", self.url, "--sa-dir", sa, "event", "Normal",
                                     "Started", "hello"], env=env)
        self.assertEqual(rc, 0, err)
        ev = http(self.ctl, "GET", "/_test/events")["items"][0]
        # the pod runs in gpu-system; its Events about the Node still go to "default"
        self.assertEqual(ev["metadata"]["namespace"], "default")

    def test_token_with_control_characters_refused(self):
        self.srv.state.token = "t"
        kc = self.kubeconfig('"t\\r\\nX-Injected: 1"')
        rc, _, err = self.run_probe(["--kubeconfig", kc, "--node", "node-1", "get"])
        self.assertEqual(rc, 1)
        self.assertIn("control characters", err)
        self.assertFalse([r for r in http(self.ctl, "GET", "/_test/requests")["items"]
                          if not r["path"].startswith("/_test/")])

    def test_no_configuration(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
        rc, _, err = self.run_probe(["--node", "node-1", "get"], env=env)
        self.assertEqual(rc, 1)
        self.assertIn("no Kubernetes API configured", err)


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all EC P-256."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    for ca in ("ca", "otherca"):
        openssl("req", "-x509", *ec, "-keyout", ca + ".key", "-out", ca + ".pem", "-days", "2",
                "-subj", "/CN=" + ca, cwd=d)
    for name, cn, ext in (("srv", "127.0.0.1", ["-extfile", "san.ext"]),
                          ("client", "system:node:node-1", [])):
        openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj",
                "/CN=" + cn, cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".pem", "-days", "2", *ext, cwd=d)


def b64(path):
    import base64
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


@unittest.skipUnless(shutil.which("openssl"), "needs the openssl command")
class KubeTlsTest(unittest.TestCase):
    """HTTPS with a CA and client certificates, as files and as kubeconfig -data blobs."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.d = self.tmp.name
        make_pki(d)
        self.srv = FakeApiServer(["node-1"], tls=(os.path.join(d, "srv.pem"),
                                                  os.path.join(d, "srv.key"),
                                                  os.path.join(d, "ca.pem")))
        self.srv.state.set_label("node-1", LABEL, "l20")
        self.url = "https://127.0.0.1:%d" % self.srv.port

    def tearDown(self):
        self.srv.api.shutdown()
        self.srv.control.shutdown()
        self.tmp.cleanup()

    def kubeconfig(self, cluster, user):
        path = os.path.join(self.d, "kubeconfig")
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                    "clusters:\n- name: c\n  cluster:\n    server: %s\n%s"
                    "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
                    "users:\n- name: u\n  user:\n%s" % (self.url, cluster, user))
        return path

    def get(self, kc):
        r = subprocess.run([PROBE, "--kubeconfig", kc, "--node", "node-1", "get"],
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout, r.stderr

    def last_cn(self):
        return http(self.srv.control_port, "GET", "/_test/requests")["items"][0]["client_cn"]

    def test_data_blobs(self):
        kc = self.kubeconfig(
            "    certificate-authority-data: %s\n" % b64(os.path.join(self.d, "ca.pem")),
            "    client-certificate-data: %s\n    client-key-data: %s\n" % (
                b64(os.path.join(self.d, "client.pem")),
                b64(os.path.join(self.d, "client.key"))))
        rc, out, err = self.get(kc)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["value"], "l20")
        self.assertEqual(self.last_cn(), "system:node:node-1")

    def test_files_relative_to_kubeconfig(self):
        kc = self.kubeconfig("    certificate-authority: ca.pem\n",
                             "    client-certificate: client.pem\n"
                             "    client-key: client.key\n")
        rc, out, err = self.get(kc)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.last_cn(), "system:node:node-1")

    def test_insecure_skip_tls_verify(self):
        kc = self.kubeconfig("    insecure-skip-tls-verify: true\n",
                             "    client-certificate: client.pem\n"
                             "    client-key: client.key\n")
        rc, _, err = self.get(kc)
        self.assertEqual(rc, 0, err)

    def test_missing_certificate_file_named(self):
        kc = self.kubeconfig("    certificate-authority: ca.pem\n",
                             "    client-certificate: gone.pem\n"
                             "    client-key: client.key\n")
        rc, _, err = self.get(kc)
        self.assertEqual(rc, 1)
        self.assertIn('client-certificate file "%s" does not exist'
                      % os.path.join(self.d, "gone.pem"), err)

    def test_wrong_ca_names_the_fix(self):
        kc = self.kubeconfig("    certificate-authority: otherca.pem\n",
                             "    client-certificate: client.pem\n"
                             "    client-key: client.key\n")
        rc, _, err = self.get(kc)
        self.assertEqual(rc, 1)
        self.assertIn(self.url, err)
        self.assertIn("certificate-authority", err)


if __name__ == "__main__":
    warnings.simplefilter("ignore", ResourceWarning)  # sockets cut by FakeApiServer.down
    rest = sys.argv[1:]
    i = next(n for n, a in enumerate(rest) if not a.startswith("-"))
    PROBE = rest.pop(i)
    unittest.main(argv=[sys.argv[0]] + rest, warnings=False)

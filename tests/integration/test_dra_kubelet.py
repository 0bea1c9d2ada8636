#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# DRA, the kubelet's side: src/kubelet's DRA plugin server with canned ops (dra_stub) driven
# by kubelet-sim (plugin registration in v1 and v1beta1, prepare, repeat, unprepare, a
# whole-call failure, plugin and kubelet restarts, plugins it must refuse) and by grpcio as an
# independent peer calling the v1 and v1beta1 method paths with hand-encoded protobuf.
# Env: GS_DRA_STUB, GS_KUBELET_SIM (set by tests/integration/dra.cmake).
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
from concurrent import futures

import grpc

STUB = os.environ.get("GS_DRA_STUB", "")
SIM = os.environ.get("GS_KUBELET_SIM", "")
DRIVER = "gpu.nvidia.com"
WAIT_S = 10
V1 = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
V1BETA1 = "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
REG = "/pluginregistration.Registration/"


# ---- protobuf by hand (independent of protoc-c and of our codec) ----

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field_bytes(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data


def field_str(num, s):
    return field_bytes(num, s.encode())


def claims_request(claims):
    """Node(Un)PrepareResourcesRequest{claims: [Claim{namespace=1, uid=2, name=3}]}"""
    return b"".join(field_bytes(1, field_str(1, ns) + field_str(2, uid) + field_str(3, name))
                    for ns, uid, name in claims)


def decode(data):
    """{field number: [values]}: varints as int, length-delimited as bytes."""
    out, i = {}, 0
    while i < len(data):
        key, i = read_varint(data, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, i = read_varint(data, i)
        elif wt == 2:
            n, i = read_varint(data, i)
            val, i = data[i:i + n], i + n
        else:
            raise ValueError("unexpected wire type %d" % wt)
        out.setdefault(num, []).append(val)
    return out


def read_varint(data, i):
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def strs(msg, num):
    return [v.decode() for v in msg.get(num, [])]


def prepare_answer(data):
    """NodePrepareResourcesResponse -> {uid: {"error": str, "devices": [dict]}}"""
    out = {}
    for entry in decode(data).get(1, []):
        e = decode(entry)
        uid = strs(e, 1)[0]
        one = decode(e.get(2, [b""])[0])
        devs = []
        for d in one.get(1, []):
            dm = decode(d)
            devs.append({"request_names": strs(dm, 1), "pool": "".join(strs(dm, 2)),
                         "device": "".join(strs(dm, 3)), "cdi": strs(dm, 4),
                         "fields": sorted(dm)})
        out[uid] = {"error": "".join(strs(one, 2)), "devices": devs}
    return out


# ---- processes ----

class Stub:
    """dra_stub: our DRA plugin server with canned answers; its events come on stdout."""

    def __init__(self, root):
        self.plugins = os.path.join(root, "plugins")
        self.registry = os.path.join(root, "plugins_registry")
        self.events = queue.Queue()
        self.proc = subprocess.Popen([STUB, self.plugins, self.registry],
                                     stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        ready = self.wait_event(lambda e: e["event"] == "ready")
        self.socket = ready["socket"]
        self.reg_socket = ready["registration"]

    def _read(self):
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def wait_event(self, pred, timeout=WAIT_S):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("dra_stub: no such event within %ss" % timeout)
            try:
                e = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if pred(e):
                return e

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=WAIT_S)
        self.proc.stdout.close()
        assert self.proc.returncode == 0, "dra_stub exited with %s" % self.proc.returncode


class Sim:
    """kubelet-sim with the DRA side on, one JSON answer per command."""

    def __init__(self, root, registry, *extra):
        self.proc = subprocess.Popen(
            [SIM, "--dir", os.path.join(root, "device-plugins"), "--plugins-registry", registry,
             "-o", "json", "--rpc-timeout-ms", "5000"] + list(extra),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def cmd(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def wait_plugin(self, pred, timeout=WAIT_S):
        """Polls dra-drivers until a plugin matches (the sim's state is the condition)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.cmd("dra-drivers")["plugins"]:
                if pred(p):
                    return p
            time.sleep(0.05)
        raise AssertionError("kubelet-sim: no plugin matched: %s" % self.cmd("dra-drivers"))

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=WAIT_S)
        self.proc.stdout.close()
        # 1: some command failed (the tests send failing ones on purpose); more is a crash
        assert self.proc.returncode in (0, 1), "kubelet-sim exited with %s" % self.proc.returncode


@unittest.skipUnless(STUB and SIM, "GS_DRA_STUB and GS_KUBELET_SIM are needed")
class TestDraKubelet(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gs-dra-")
        self.stub = Stub(self.root)
        self.sims = []

    def tearDown(self):
        try:
            for s in self.sims:
                s.stop()
        finally:
            self.stub.stop()
            shutil.rmtree(self.root, ignore_errors=True)

    def sim(self, *extra):
        s = Sim(self.root, self.stub.registry, *extra)
        self.sims.append(s)
        return s

    def registered_in(self, sim, api):
        a = sim.cmd("dra-wait %s 10000" % DRIVER)
        self.assertTrue(a["ok"], a)
        self.assertEqual(a["api"], api)
        self.assertEqual(a["endpoint"], self.stub.socket)
        e = self.stub.wait_event(lambda e: e["event"] == "registration")
        self.assertTrue(e["registered"], e)

    def test_v1_registration_prepare_repeat_unprepare(self):
        sim = self.sim()
        self.registered_in(sim, "v1")
        line = "dra-prepare %s default/claim-a:uid-a team-b/bad-x:uid-b" % DRIVER
        first = sim.cmd(line)
        self.assertTrue(first["ok"], first)
        self.assertEqual(first["api"], "v1")
        a, b = first["claims"]
        self.assertIsNone(a["error"])
        self.assertEqual(a["devices"], [{"request_names": ["gpu"], "pool": "node1",
                                         "device": "gpu-0", "share_id": None,
                                         "cdi_device_ids": ["k8s.gpu.nvidia.com/claim=uid-a-gpu-0"]}])
        self.assertEqual(b["error"], "requested device is not allocatable: gpu-7")
        self.assertEqual(b["devices"], [])
        e = self.stub.wait_event(lambda e: e["event"] == "prepare")
        self.assertEqual(e, {"event": "prepare", "api": "v1", "uids": ["uid-a", "uid-b"]})
        # the kubelet retries: the same answer again
        again = sim.cmd(line)
        self.assertEqual(again["claims"], first["claims"])
        un = sim.cmd("dra-unprepare %s default/claim-a:uid-a team-b/bad-x:uid-b" % DRIVER)
        self.assertTrue(un["ok"], un)
        self.assertIsNone(un["claims"][0]["error"])
        self.assertEqual(un["claims"][1]["error"], "cannot remove the CDI spec")
        e = self.stub.wait_event(lambda e: e["event"] == "unprepare")
        self.assertEqual(e["api"], "v1")

    def test_v1beta1_when_forced(self):
        sim = self.sim("--dra-v1beta1")
        self.registered_in(sim, "v1beta1")
        a = sim.cmd("dra-prepare %s default/claim-a:uid-a" % DRIVER)
        self.assertTrue(a["ok"], a)
        self.assertEqual(a["api"], "v1beta1")
        self.assertEqual(a["claims"][0]["devices"][0]["cdi_device_ids"],
                         ["k8s.gpu.nvidia.com/claim=uid-a-gpu-0"])
        e = self.stub.wait_event(lambda e: e["event"] == "prepare")
        self.assertEqual(e["api"], "v1beta1")

    def test_whole_call_failure(self):
        sim = self.sim()
        self.registered_in(sim, "v1")
        a = sim.cmd("dra-prepare %s default/claim-a:uid-a default/whole-fail:uid-w" % DRIVER)
        self.assertFalse(a["ok"], a)
        self.assertIn("rpc error: code = NotFound desc = resourceclaims.resource.k8s.io "
                      '"whole-fail" not found', a["error"])
        # the plugin is still serving
        self.assertTrue(sim.cmd("dra-prepare %s default/claim-a:uid-a" % DRIVER)["ok"])

    def test_unknown_driver_and_bad_claim(self):
        sim = self.sim()
        self.registered_in(sim, "v1")
        a = sim.cmd("dra-prepare other.example.com default/c:u")
        self.assertFalse(a["ok"])
        self.assertIn("not registered", a["error"])
        a = sim.cmd("dra-prepare %s no-slash" % DRIVER)
        self.assertFalse(a["ok"])
        self.assertIn("<namespace>/<name>:<uid>", a["error"])
        # a UID the plugin refuses: INVALID_ARGUMENT from the server, before the ops
        a = sim.cmd("dra-prepare %s default/c:bad|uid" % DRIVER)
        self.assertFalse(a["ok"])
        self.assertIn("code = InvalidArgument", a["error"])

    def test_plugin_restart_registers_again(self):
        sim = self.sim()
        self.registered_in(sim, "v1")
        self.stub.stop()  # removes its registration socket: the kubelet deregisters
        sim.wait_plugin(lambda p: p["removed"] and not p["registered"])
        a = sim.cmd("dra-prepare %s default/claim-a:uid-a" % DRIVER)
        self.assertFalse(a["ok"])
        self.stub = Stub(self.root)
        p = sim.wait_plugin(lambda p: p["registered"] and p["registrations"] == 2)
        self.assertEqual(p["driver"], DRIVER)
        self.assertTrue(sim.cmd("dra-prepare %s default/claim-a:uid-a" % DRIVER)["ok"])

    def test_kubelet_restart_registers_again(self):
        sim = self.sim()
        self.registered_in(sim, "v1")
        a = sim.cmd("restart 10000")
        self.assertTrue(a["ok"], a)
        e = self.stub.wait_event(lambda e: e["event"] == "registration")
        self.assertTrue(e["registered"], e)
        p = sim.wait_plugin(lambda p: p["registered"] and p["registrations"] == 2)
        self.assertEqual(p["api"], "v1")
        self.assertTrue(sim.cmd("dra-prepare %s default/claim-a:uid-a" % DRIVER)["ok"])

    def test_sim_refuses_other_plugins(self):
        # plugins the kubelet's DRA handler refuses are told so with NotifyRegistrationStatus
        told = {}
        servers = []
        for name, ptype, versions in (("csi", "CSIPlugin", ["1.0.0"]),
                                      ("old", "DRAPlugin", ["v1alpha3.NodeService"])):
            info = field_str(1, ptype) + field_str(2, name + ".example.com") + b"".join(
                field_str(4, v) for v in versions)

            def notify(req, ctx, name=name):
                told[name] = decode(req)
                return b""

            srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
            srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
                "pluginregistration.Registration",
                {"GetInfo": grpc.unary_unary_rpc_method_handler(lambda req, ctx, i=info: i),
                 "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(notify)}),))
            srv.add_insecure_port("unix:" + os.path.join(self.stub.registry, name + "-reg.sock"))
            srv.start()
            servers.append(srv)
        try:
            sim = self.sim()
            self.registered_in(sim, "v1")
            csi = sim.wait_plugin(lambda p: p["driver"] == "csi.example.com" and p["error"])
            self.assertIn("no handler registered for plugin type: CSIPlugin", csi["error"])
            old = sim.wait_plugin(lambda p: p["driver"] == "old.example.com" and p["error"])
            self.assertIn("v1alpha3.NodeService", old["error"])
            deadline = time.monotonic() + WAIT_S
            while len(told) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            for name in ("csi", "old"):
                self.assertNotIn(1, told[name])  # plugin_registered false (the default)
                self.assertIn(b"plugin validation failed", told[name][2][0])
        finally:
            for srv in servers:
                srv.stop(0)


@unittest.skipUnless(STUB, "GS_DRA_STUB is needed")
class TestDraGrpcPeer(unittest.TestCase):
    """Python grpcio calls our server: the method paths and the bytes are checked here
    without any of our code on the client side."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gs-dra-py-")
        self.stub = Stub(self.root)

    def tearDown(self):
        try:
            self.stub.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def call(self, sock, path, req, authority="localhost"):
        with grpc.insecure_channel("unix:" + sock,
                                   options=[("grpc.default_authority", authority)]) as ch:
            return ch.unary_unary(path)(req, timeout=WAIT_S)

    def test_get_info_and_notify(self):
        info = decode(self.call(self.stub.reg_socket, REG + "GetInfo", b""))
        self.assertEqual(strs(info, 1), ["DRAPlugin"])
        self.assertEqual(strs(info, 2), [DRIVER])
        self.assertEqual(strs(info, 3), [self.stub.socket])
        self.assertEqual(strs(info, 4), ["v1.DRAPlugin", "v1beta1.DRAPlugin"])
        # RegistrationStatus{plugin_registered=1: true}; old kubelets send the path as authority
        self.call(self.stub.reg_socket, REG + "NotifyRegistrationStatus", b"\x08\x01",
                  authority=self.stub.reg_socket)
        e = self.stub.wait_event(lambda e: e["event"] == "registration")
        self.assertEqual(e, {"event": "registration", "registered": True, "error": ""})
        self.call(self.stub.reg_socket, REG + "NotifyRegistrationStatus",
                  field_str(2, "plugin validation failed"))
        e = self.stub.wait_event(lambda e: e["event"] == "registration")
        self.assertEqual(e, {"event": "registration", "registered": False,
                             "error": "plugin validation failed"})

    def test_prepare_unprepare_both_paths(self):
        req = claims_request([("default", "uid-a", "claim-a"), ("default", "uid-b", "bad-b")])
        for base, api in ((V1, "v1"), (V1BETA1, "v1beta1")):
            ans = prepare_answer(self.call(self.stub.socket, base + "NodePrepareResources", req))
            self.assertEqual(sorted(ans), ["uid-a", "uid-b"])
            dev = ans["uid-a"]["devices"][0]
            self.assertEqual(dev["cdi"], ["k8s.gpu.nvidia.com/claim=uid-a-gpu-0"])
            self.assertEqual((dev["pool"], dev["device"], dev["request_names"]),
                             ("node1", "gpu-0", ["gpu"]))
            self.assertEqual(dev["fields"], [1, 2, 3, 4])  # no share_id set: field 5 absent
            self.assertEqual(ans["uid-b"], {"error": "requested device is not allocatable: gpu-7",
                                            "devices": []})
            e = self.stub.wait_event(lambda e: e["event"] == "prepare")
            self.assertEqual(e["api"], api)
            un = decode(self.call(self.stub.socket, base + "NodeUnprepareResources", req))
            entries = {strs(decode(x), 1)[0]: decode(decode(x).get(2, [b""])[0])
                       for x in un.get(1, [])}
            self.assertEqual(sorted(entries), ["uid-a", "uid-b"])
            self.assertEqual(entries["uid-a"], {})
            self.assertEqual(strs(entries["uid-b"], 1), ["cannot remove the CDI spec"])

    def test_failures_are_grpc_statuses(self):
        cases = [
            (V1 + "NodePrepareResources", claims_request([("default", "u", "whole-fail")]),
             grpc.StatusCode.NOT_FOUND, "not found"),
            (V1 + "NodePrepareResources", b"\x0a\xff\xff\xff\xff\x0f",
             grpc.StatusCode.INVALID_ARGUMENT, "malformed"),
            (V1BETA1 + "NodePrepareResources", claims_request([("default", "u", "c")] * 300),
             grpc.StatusCode.INVALID_ARGUMENT, "claims in one request"),
            (V1BETA1 + "NodeUnprepareResources", claims_request([("default", "", "c")]),
             grpc.StatusCode.INVALID_ARGUMENT, "invalid uid"),
            (V1 + "NodePrepareResources",
             claims_request([("default", "u", "c"), ("default", "u", "d")]),
             grpc.StatusCode.INVALID_ARGUMENT, "appears twice"),
            ("/k8s.io.kubelet.pkg.apis.dra.v1alpha4.Node/NodePrepareResources", b"",
             grpc.StatusCode.UNIMPLEMENTED, ""),
        ]
        for path, req, code, text in cases:
            with self.subTest(path=path, code=code):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.call(self.stub.socket, path, req)
                self.assertEqual(cm.exception.code(), code)
                self.assertIn(text, cm.exception.details() or "")
        # still serving after all of that
        ans = prepare_answer(self.call(self.stub.socket, V1 + "NodePrepareResources",
                                       claims_request([("default", "uid-z", "c")])))
        self.assertEqual(ans["uid-z"]["error"], "")


if __name__ == "__main__":
    unittest.main()

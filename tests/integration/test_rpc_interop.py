# SPDX-License-Identifier: Apache-2.0
"""Interop test for src/rpc/rpc.c against an independent gRPC implementation.

Python grpcio (Debian's python3-grpcio) plays the kubelet: it calls the C peer's
DevicePlugin service (rpc_peer serve) and serves Registration for the C peer's Register
call (rpc_peer register). Message bytes are checked against the encoded examples of
shared/facts/kubelet-apis.md §1.5. Run by CTest with GS_RPC_PEER (the C peer) and
GS_PY_PROTO (protoc --python_out of proto/deviceplugin/v1beta1/api.proto) set.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from concurrent import futures

import grpc

sys.path.insert(0, os.environ.get("GS_PY_PROTO", "."))
from deviceplugin.v1beta1 import api_pb2 as pb  # noqa: E402

PEER = os.environ.get("GS_RPC_PEER", "rpc_peer")
DP = "/v1beta1.DevicePlugin/"
WAIT_S = 10

# facts §1.5, byte for byte
LIST_GPU0 = bytes.fromhex("0a14 0a05" + b"GPU-0".hex() + "1207" + b"Healthy".hex() + "1a02 0a00")
REGISTER = bytes.fromhex(
    "0a07" + b"v1beta1".hex() + "1210" + b"example-gpu.sock".hex()
    + "1a0f" + b"example.com/gpu".hex() + "2202 1001")


def raw_unary(channel, method):
    return channel.unary_unary(method)  # no serializers: bytes in, bytes out


class DevicePluginServedByC(unittest.TestCase):
    """Python as the kubelet, calling the C server."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gs-interop-")
        self.sock = os.path.join(self.dir.name, "nvidia-gpu.sock")
        self.peer = subprocess.Popen([PEER, "serve", self.sock], stdout=subprocess.PIPE,
                                     text=True)
        line = self.peer.stdout.readline()  # printed once the server is serving
        self.assertTrue(line.startswith("serving"), line)
        self.channel = self.connect()

    def connect(self, authority="localhost"):
        ch = grpc.insecure_channel("unix:" + self.sock,
                                   options=[("grpc.default_authority", authority)])
        grpc.channel_ready_future(ch).result(timeout=WAIT_S)
        return ch

    def tearDown(self):
        self.channel.close()
        if self.peer.poll() is None:
            self.peer.send_signal(signal.SIGTERM)
        self.peer.wait(timeout=WAIT_S)
        self.peer.stdout.close()
        self.dir.cleanup()

    def test_get_device_plugin_options(self):
        resp = raw_unary(self.channel, DP + "GetDevicePluginOptions")(b"", timeout=WAIT_S)
        self.assertEqual(resp, bytes.fromhex("1001"))
        self.assertTrue(pb.DevicePluginOptions.FromString(resp).get_preferred_allocation_available)

    def test_list_and_watch_bytes_then_update(self):
        stream = self.channel.unary_stream(DP + "ListAndWatch")(b"")
        first = next(stream)
        self.assertEqual(first, LIST_GPU0)
        second = pb.ListAndWatchResponse.FromString(next(stream))
        self.assertEqual([(d.ID, d.health) for d in second.devices],
                         [("GPU-0", "Unhealthy"), ("GPU-1", "Healthy")])
        self.assertEqual(second.devices[0].topology.nodes[0].ID, 0)
        stream.cancel()

    def test_allocate_echoes_device_ids(self):
        req = pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=["GPU-0", "GPU-1"]),
            pb.ContainerAllocateRequest(devices_ids=["GPU-2"])])
        resp = pb.AllocateResponse.FromString(
            raw_unary(self.channel, DP + "Allocate")(req.SerializeToString(), timeout=WAIT_S))
        self.assertEqual([dict(c.envs) for c in resp.container_responses],
                         [{"GS_DEVICES": "GPU-0,GPU-1"}, {"GS_DEVICES": "GPU-2"}])

    def test_allocate_errors_carry_status_and_message(self):
        cases = [
            (pb.AllocateRequest(container_requests=[
                pb.ContainerAllocateRequest(devices_ids=["GPU-0", "bogus"])]).SerializeToString(),
             grpc.StatusCode.INVALID_ARGUMENT, 'unknown device "bogus"'),
            (b"", grpc.StatusCode.INVALID_ARGUMENT, "AllocateRequest has no container requests"),
            (b"\xff\xff\xff", grpc.StatusCode.INVALID_ARGUMENT, "malformed AllocateRequest"),
        ]
        for body, code, details in cases:
            with self.subTest(details=details):
                with self.assertRaises(grpc.RpcError) as ctx:
                    raw_unary(self.channel, DP + "Allocate")(body, timeout=WAIT_S)
                self.assertEqual(ctx.exception.code(), code)
                self.assertEqual(ctx.exception.details(), details)

    def test_oversized_request_rejected_server_keeps_serving(self):
        with self.assertRaises(grpc.RpcError) as ctx:
            raw_unary(self.channel, DP + "Allocate")(b"\0" * (4 * 1024 * 1024 + 1),
                                                     timeout=WAIT_S)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        raw_unary(self.channel, DP + "GetDevicePluginOptions")(b"", timeout=WAIT_S)

    def test_get_preferred_allocation(self):
        req = pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=["GPU-3", "GPU-1", "GPU-2"],
                                                   allocation_size=2)])
        resp = pb.PreferredAllocationResponse.FromString(raw_unary(
            self.channel, DP + "GetPreferredAllocation")(req.SerializeToString(), timeout=WAIT_S))
        self.assertEqual(list(resp.container_responses[0].deviceIDs), ["GPU-3", "GPU-1"])

    def test_pre_start_container_empty_response(self):
        req = pb.PreStartContainerRequest(devices_ids=["GPU-0"]).SerializeToString()
        self.assertEqual(raw_unary(self.channel, DP + "PreStartContainer")(req, timeout=WAIT_S),
                         b"")

    def test_unknown_method_unimplemented(self):
        with self.assertRaises(grpc.RpcError) as ctx:
            raw_unary(self.channel, DP + "Nope")(b"", timeout=WAIT_S)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_path_authority_accepted(self):
        # kubelet <= 1.25 sends the socket path as :authority (facts §5.3).
        ch = self.connect(authority=self.sock)
        self.assertEqual(raw_unary(ch, DP + "GetDevicePluginOptions")(b"", timeout=WAIT_S),
                         bytes.fromhex("1001"))
        ch.close()

    def peer_fds(self):
        return len(os.listdir("/proc/%d/fd" % self.peer.pid))

    def test_many_watch_connects_and_cancels(self):
        fds_before = self.peer_fds()
        for i in range(300):
            ch = grpc.insecure_channel("unix:" + self.sock)
            stream = ch.unary_stream(DP + "ListAndWatch")(b"")
            if i % 2 == 0:
                self.assertEqual(next(stream), LIST_GPU0)
            stream.cancel()
            ch.close()
        self.test_get_device_plugin_options()
        # The server closes every connection the clients dropped (it may take a moment).
        deadline = time.monotonic() + WAIT_S
        while self.peer_fds() > fds_before + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertLessEqual(self.peer_fds(), fds_before + 2)

    def test_sigterm_ends_streams_and_removes_socket(self):
        stream = self.channel.unary_stream(DP + "ListAndWatch")(b"")
        self.assertEqual(next(stream), LIST_GPU0)
        next(stream)
        self.peer.send_signal(signal.SIGTERM)
        with self.assertRaises(grpc.RpcError) as ctx:
            next(stream)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.peer.wait(timeout=WAIT_S), 0)
        self.assertFalse(os.path.exists(self.sock))


class RegistrationServedByPython(unittest.TestCase):
    """Python as the kubelet's Registration service, the C client calling Register."""

    def serve(self, handler):
        self.dir = tempfile.TemporaryDirectory(prefix="gs-interop-")
        self.sock = os.path.join(self.dir.name, "kubelet.sock")
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "v1beta1.Registration", {"Register": grpc.unary_unary_rpc_method_handler(handler)}),))
        server.add_insecure_port("unix:" + self.sock)
        server.start()
        self.addCleanup(self.dir.cleanup)
        self.addCleanup(server.stop, None)

    def run_peer(self, *args):
        return subprocess.run([PEER, *args], capture_output=True, text=True, timeout=WAIT_S * 3)

    def test_register_request_bytes(self):
        seen = []

        def register(request, context):
            seen.append(request)
            return b""  # Empty

        self.serve(register)
        out = self.run_peer("register", self.sock)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("status=0 code=OK", out.stdout)
        self.assertEqual(len(seen), 1)
        self.assertEqual(len(seen[0]), 0x30)
        self.assertEqual(seen[0], REGISTER)

    def test_register_error_passed_through(self):
        def register(request, context):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          'the ResourceName "example.com/gpu" is invalid')

        self.serve(register)
        out = self.run_peer("register", self.sock)
        self.assertEqual(out.returncode, 1)
        self.assertIn('status=3 code=InvalidArgument message=the ResourceName '
                      '"example.com/gpu" is invalid', out.stdout)
        self.assertIn('rpc error: code = InvalidArgument desc = the ResourceName', out.stderr)

    def test_register_nobody_listening(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gs-interop-")
        self.addCleanup(self.dir.cleanup)
        out = self.run_peer("register", os.path.join(self.dir.name, "kubelet.sock"))
        self.assertEqual(out.returncode, 1)
        self.assertIn("code=Unavailable", out.stdout)


class RegisterFrameOnTheWire(unittest.TestCase):
    """A bare HTTP/2 listener (no gRPC library) reads the C client's DATA frames."""

    def test_register_grpc_frame_bytes(self):
        tmp = tempfile.TemporaryDirectory(prefix="gs-interop-")
        self.addCleanup(tmp.cleanup)
        sock_path = os.path.join(tmp.name, "kubelet.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(sock_path)
        lsock.listen(1)
        self.addCleanup(lsock.close)
        peer = subprocess.Popen([PEER, "register", sock_path], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        conn, _ = lsock.accept()
        conn.settimeout(WAIT_S)
        buf = b""

        def need(n):
            nonlocal buf
            while len(buf) < n:
                chunk = conn.recv(65536)
                if not chunk:
                    raise EOFError("client closed early")
                buf += chunk

        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        need(len(preface))
        self.assertEqual(buf[:len(preface)], preface)
        buf = buf[len(preface):]
        conn.sendall(bytes.fromhex("000000 04 00 00000000"))  # our (empty) SETTINGS
        data = b""
        while True:  # frames: 3-byte length, type, flags, 4-byte stream id
            need(9)
            length, ftype, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
            need(9 + length)
            payload, buf = buf[9:9 + length], buf[9 + length:]
            if ftype == 0x4 and not flags & 0x1:
                conn.sendall(bytes.fromhex("000000 04 01 00000000"))  # SETTINGS ACK
            if ftype == 0x0:  # DATA
                data += payload
                if flags & 0x1:  # END_STREAM: the whole request is in
                    break
        conn.close()
        peer.communicate(timeout=WAIT_S * 3)
        # facts §1.5: uncompressed flag, 4-byte big-endian length 0x30, the message
        self.assertEqual(data, bytes.fromhex("00 00000030") + REGISTER)


class ListAndWatchServedByPython(unittest.TestCase):
    """Python as a device plugin streaming lists, the C stream client reading them."""

    def test_c_stream_client_reads_python_stream(self):
        tmp = tempfile.TemporaryDirectory(prefix="gs-interop-")
        self.addCleanup(tmp.cleanup)
        sock = os.path.join(tmp.name, "plugin.sock")

        def watch(request, context):
            yield LIST_GPU0
            yield pb.ListAndWatchResponse().SerializeToString()  # empty list: b""
            context.abort(grpc.StatusCode.ABORTED, "plugin going away")

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "v1beta1.DevicePlugin", {"ListAndWatch": grpc.unary_stream_rpc_method_handler(watch)}),))
        server.add_insecure_port("unix:" + sock)
        server.start()
        self.addCleanup(server.stop, None)
        out = subprocess.run([PEER, "watch", sock, "5"], capture_output=True, text=True,
                             timeout=WAIT_S * 3)
        self.assertEqual(out.stdout.splitlines(), [
            "msg " + LIST_GPU0.hex(),
            "msg ",
            "error status=10 code=Aborted message=plugin going away",
        ])


if __name__ == "__main__":
    unittest.main()

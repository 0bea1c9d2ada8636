#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# test_metrics_http.py: the /metrics endpoint under attack (issue 19). 1,000 idle connections
# and 200 slowloris connections (1 byte/s, never a full request) from 127.0.0.2, reopened as
# soon as the daemon closes them, while the kubelet's probe (/healthz from 127.0.0.1, 1 s
# timeout) is asked every second for 30 s: every probe must succeed, and /metrics must answer
# once the attack stops. Usage: test_metrics_http.py SOURCE_DIR BUILD_DIR
import os
import re
import resource
import socket
import sys
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_reload_live import ReloadCase, wait_for, write_file  # noqa: E402

ATTACKER = "127.0.0.2"
N_IDLE, N_SLOW, PROBE_S = 1000, 200, 30


class Attack:
    """Keeps n connections from ATTACKER open to port, sending one byte a second on each
    when slow (a request that never ends), nothing otherwise; reopens what gets closed."""

    def __init__(self, port, n, slow, source=ATTACKER):
        self.port, self.n, self.slow, self.source = port, n, slow, source
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def connect(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((self.source, 0))
            s.settimeout(0.2)
            s.connect(("127.0.0.1", self.port))
            s.setblocking(False)
            self.opened += 1
            return s
        except OSError:
            s.close()
            return None

    def run(self):
        socks, payload, pos = [], b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096, 0
        while not self.stop.is_set():
            alive = []
            for s in socks:
                try:
                    if self.slow:
                        s.send(payload[pos % len(payload):pos % len(payload) + 1])
                    elif s.recv(1) == b"":
                        raise OSError("closed")
                    alive.append(s)
                except BlockingIOError:
                    alive.append(s)
                except OSError:
                    s.close()
            socks = alive
            pos += 1
            while len(socks) < self.n and not self.stop.is_set():
                s = self.connect()
                if not s:
                    break
                socks.append(s)
            self.stop.wait(1.0)
        for s in socks:
            s.close()


class MetricsEndpointUnderAttack(ReloadCase):
    def endpoint(self, env=None):
        cfg = os.path.join(self.root, "config.yaml")
        write_file(cfg, "version: v1\n")
        n = self.node("l20-node", ["--config-file", cfg, "--metrics-address", "127.0.0.1:0"],
                      env=env)
        wait_for(lambda: re.search(r"\(port (\d+)\)", self.log_text(n)), 10, "the endpoint")
        return int(re.search(r"\(port (\d+)\)", self.log_text(n)).group(1))

    def test_probes_from_the_node_on_the_pod_network(self):
        """Issue 29: in a pod without hostNetwork the kubelet probes from the node's address
        on the pod network, which is not one of the pod's own: 28 pods holding 8 idle
        connections each filled every slot left to others and starved it. The node's address
        as the pod sees it (here NODE_IP, from the downward API's status.hostIP; the default
        route's gateway is the other source, unit-tested) keeps its reserved slots."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
        kubelet = "127.0.0.3"
        port = self.endpoint({"NODE_IP": kubelet})

        def probe():
            s = socket.create_connection(("127.0.0.1", port), timeout=1,
                                         source_address=(kubelet, 0))
            try:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return s.recv(64).split(b" ")[1] == b"200"
            except (OSError, IndexError):
                return False
            finally:
                s.close()

        wait_for(probe, 10, "/healthz from the node's pod-network address")
        pods = [Attack(port, 8, False, "127.0.0.%d" % (10 + i)) for i in range(32)]
        failed = 0
        try:
            wait_for(lambda: sum(a.opened for a in pods) >= 224, 20, "the pods' connections")
            for _ in range(10):
                failed += not probe()
        finally:
            for a in pods:
                a.stop.set()
            for a in pods:
                a.thread.join(10)
        self.assertEqual(failed, 0)

    def test_probes_answer_while_others_misbehave(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
        port = self.endpoint()

        def get(path):
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=1) as r:
                return r.status

        wait_for(lambda: get("/healthz") == 200, 10, "/healthz before the attack")
        attacks = [Attack(port, N_IDLE, False), Attack(port, N_SLOW, True)]
        failed, worst_ms = [], 0.0
        try:
            time.sleep(2)  # the attackers have their connections
            t_end = time.monotonic() + PROBE_S
            while time.monotonic() < t_end:
                t0 = time.monotonic()
                try:
                    status = get("/healthz")
                except OSError as e:
                    status = str(e)
                took = (time.monotonic() - t0) * 1e3
                worst_ms = max(worst_ms, took)
                if status != 200:
                    failed.append(status)
                time.sleep(max(0.0, 1.0 - took / 1e3))
        finally:
            for a in attacks:
                a.stop.set()
            for a in attacks:
                a.thread.join(10)
        print("probes under attack: %d failed, slowest %.0f ms; attacker connections opened: "
              "%d idle, %d slow" % (len(failed), worst_ms, attacks[0].opened, attacks[1].opened),
              file=sys.stderr)
        self.assertEqual(failed, [])
        self.assertGreater(attacks[0].opened + attacks[1].opened, N_IDLE)  # it did attack
        wait_for(lambda: get("/metrics") == 200, 10, "/metrics after the attack")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# scripts/check-graph on scratch trees (issue 28): a tree in the shape docs/internals/daemon.md
# draws passes, and each rule fails on a tree that breaks it: a circle of calls, a unit (or
# the core) calling another unit's function, and src/rpc/ including a header above base/.
# The real tree is checked by `make check`.
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("GS_SOURCE_DIR") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(SRC, "scripts", "check-graph")

FEATURE = "const struct daemon_feature daemon__feature_%s = {.name = \"%s\"};\n"
# the shape: the wiring, the core, a service, two units (one with a thread of its own), rpc
GOOD = {
    "base/str.c": "int str_len(const char *s) { return s ? 1 : 0; }\n",
    "daemon/loop.c": "void daemon__loop_run(void) { }\n",
    "daemon/label.c": "void daemon__kube_event(const char *m) { str_len(m); }\n",
    "daemon/recovery.c": "void recovery_mark(void) { daemon__health_last(); }\n"
                         + FEATURE % ("health", "health"),
    "daemon/health_thread.c": "int daemon__health_last(void) { return str_len(\"\"); }\n",
    "daemon/metrics.c": "void metrics_publish(void) { daemon__sampler_render(); "
                        "daemon__kube_event(\"x\"); }\n" + FEATURE % ("metrics", "metrics"),
    "daemon/sampler.c": "void daemon__sampler_render(void) { daemon__loop_run(); }\n",
    "daemon/dra.c": "void dra_on_state(void) { daemon__dra_publish(); }\n" + FEATURE % ("dra", "dra"),
    "daemon/dra_slice.c": "void daemon__dra_publish(void) { daemon__kube_event(\"s\"); }\n",
    "daemon/daemon.c": "static const struct daemon_feature signals = {0};\n"
                       "int daemon_run(void) { daemon__loop_run(); return 0; }\n",
    "rpc/internal.h": "#include \"base/base.h\"\n",
    "rpc/rpc.c": "#include <nghttp2/nghttp2.h>\n#include \"base/base.h\"\n"
                 "#include \"rpc/rpc.h\"\n#include \"internal.h\"\n"
                 "int rpc_serve(void) { return str_len(\"\"); }\n",
    "rpc/rpc.h": "#include <stddef.h>\n",
    "base/base.h": "#include <stddef.h>\n",
    "cli/main.c": "int main(void) { return daemon_run(); }\n",
}


class CheckGraph(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gs-check-graph-")

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def run_on(self, tree):
        src = os.path.join(self.root, "src")
        shutil.rmtree(src, ignore_errors=True)
        for path, text in tree.items():
            os.makedirs(os.path.dirname(os.path.join(src, path)), exist_ok=True)
            with open(os.path.join(src, path), "w") as f:
                f.write(text)
        r = subprocess.run([sys.executable, SCRIPT, src], capture_output=True, text=True,
                           timeout=60)
        return r.returncode, r.stdout + r.stderr

    def test_the_shape_passes(self):
        rc, out = self.run_on(GOOD)
        self.assertEqual(rc, 0, out)
        self.assertIn("3 daemon units reached only through the loop's table", out)
        self.assertIn("src/rpc/ on base/ only", out)

    def test_without_rpc_the_rpc_rule_waits(self):
        tree = {p: t for p, t in GOOD.items() if not p.startswith("rpc/")}
        rc, out = self.run_on(tree)
        self.assertEqual(rc, 0, out)
        self.assertIn("no src/rpc/ yet", out)

    def test_a_unit_calling_another_units_thread_fails(self):
        """The breach issue 28 named: the sampler (metrics) read the health thread's XID."""
        tree = dict(GOOD)
        tree["daemon/sampler.c"] = ("void daemon__sampler_render(void) { daemon__loop_run(); "
                                    "daemon__health_last(); }\n")
        rc, out = self.run_on(tree)
        self.assertEqual(rc, 1, out)
        self.assertIn("daemon/sampler.c (unit daemon/metrics.c) calls daemon__health_last, "
                      "defined in daemon/health_thread.c of unit daemon/recovery.c", out)

    def test_a_unit_calling_another_unit_fails(self):
        tree = dict(GOOD)
        tree["daemon/dra.c"] = ("void dra_on_state(void) { daemon__dra_publish(); "
                                "recovery_mark(); }\n" + FEATURE % ("dra", "dra"))
        rc, out = self.run_on(tree)
        self.assertEqual(rc, 1, out)
        self.assertIn("daemon/dra.c (unit daemon/dra.c) calls recovery_mark, defined in "
                      "daemon/recovery.c of unit daemon/recovery.c", out)

    def test_the_core_or_a_service_calling_a_unit_fails(self):
        tree = dict(GOOD)
        tree["daemon/label.c"] = ("void daemon__kube_event(const char *m) { str_len(m); "
                                  "daemon__dra_publish(); }\n")
        rc, out = self.run_on(tree)
        self.assertEqual(rc, 1, out)
        self.assertIn("daemon/label.c (no unit) calls daemon__dra_publish, defined in "
                      "daemon/dra_slice.c of unit daemon/dra.c", out)

    def test_rpc_including_above_base_fails(self):
        tree = dict(GOOD)
        tree["rpc/rpc.c"] = GOOD["rpc/rpc.c"] + "#include \"kubelet/kubelet.h\"\n"
        tree["rpc/internal.h"] = "#include \"base/base.h\"\n#include \"model/model.h\"\n"
        rc, out = self.run_on(tree)
        self.assertEqual(rc, 1, out)
        self.assertIn('rpc/rpc.c includes "kubelet/kubelet.h": src/rpc/ includes nothing '
                      'above src/base/', out)
        self.assertIn('rpc/internal.h includes "model/model.h"', out)

    def test_a_circle_of_calls_fails(self):
        tree = dict(GOOD)
        tree["base/str.c"] = "int str_len(const char *s) { daemon__loop_run(); return 0; }\n"
        tree["daemon/loop.c"] = "void daemon__loop_run(void) { str_len(\"\"); }\n"
        rc, out = self.run_on(tree)
        self.assertEqual(rc, 1, out)
        self.assertIn("calls go round in a circle: base/str.c daemon/loop.c", out)


if __name__ == "__main__":
    unittest.main()

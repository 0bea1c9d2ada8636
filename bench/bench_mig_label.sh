#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_mig_label.sh BUILD: runs bench_mig_label.py (node label -> new MIG resources at
# kubelet-sim) for scripts/run-bench.
set -eu
exec /usr/bin/python3 "$(dirname "$0")/bench_mig_label.py" "${1:-build}" 10

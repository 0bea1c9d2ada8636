#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_reload.sh BUILD: runs bench_reload.py (live config and node label changes to new
# capacity seen by kubelet-sim) for scripts/run-bench.
set -eu
exec python3 "$(dirname "$0")/bench_reload.py" "${1:-build}" 20

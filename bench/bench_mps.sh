#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_mps.sh BUILD: runs bench_mps.py (MPS config -> resources, daemon crash -> Unhealthy)
# for scripts/run-bench.
set -eu
exec /usr/bin/python3 "$(dirname "$0")/bench_mps.py" "${1:-build}" 10

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_idle.sh BUILD: the idle daemon's CPU and wake-ups (bench_idle.py) for run-bench.
set -eu
exec python3 "$(dirname "$0")/bench_idle.py" "${1:-build}" 30

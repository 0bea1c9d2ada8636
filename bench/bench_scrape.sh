#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_scrape.sh BUILD: /metrics on a busy 8-GPU shared node (bench_scrape.py) for run-bench.
set -eu
exec python3 "$(dirname "$0")/bench_scrape.py" "${1:-build}" 30

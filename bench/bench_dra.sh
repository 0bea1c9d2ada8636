#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench_dra.sh BUILD: `gpuslice dra-plugin`'s NodePrepareResources and slice publication
# times (bench_dra.py) for run-bench.
set -eu
exec python3 "$(dirname "$0")/bench_dra.py" "${1:-build}" 50 5

#!/bin/sh
# test_cli_unified_memory.sh: the CLI on a unified-memory GPU (examples/machines/gb10-spark:
# NVML's memory query NOT_SUPPORTED, as on a DGX Spark) — inventory shows the memory as
# unknown (JSON null), plan serves it ("memory unknown", time-slicing without a per-replica
# figure), refuses MPS's equal shares until memoryLimit is set, `plan --size` refuses to
# size from memory (exit 1), and labels leave nvidia.com/gpu.memory out as GFD does; an L20
# whose memory query fails another way still fails the read.
# Usage: test_cli_unified_memory.sh GPUSLICE FAKE_LIB MACHINES_DIR
set -u
BIN="$1" LIB="$2" MACHINES="$3"
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs-cli-uma-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
export GPUSLICE_LOG_LEVEL=warn
unset FAKE_NVML_FAIL FAKE_NVML_EVENTS GPUSLICE_NVML_LIBRARY CONFIG_FILE MIG_STRATEGY
export FAKE_NVML_MACHINE="$MACHINES/gb10-spark.yaml" FAKE_NVML_STATE="$tmp/state"

config() { # NAME STRATEGY REPLICAS [memoryLimit]
    {
        printf 'version: v1\nflags:\n  mpsRoot: /run/nvidia/mps\nsharing:\n  %s:\n' "$2"
        printf '    resources:\n    - name: nvidia.com/gpu\n      replicas: %s\n' "$3"
        [ $# -ge 4 ] && printf '      memoryLimit: %s\n' "$4"
    } >"$tmp/$1.yaml"
}

check inventory-text 0 '^0  *NVIDIA GB10  *NVIDIA  *unknown  *12.1  *blackwell' \
    "$BIN" inventory --nvml-library "$LIB"
"$BIN" inventory --nvml-library "$LIB" -o json >"$tmp/inv.json" 2>"$tmp/err"
python3 - "$tmp/inv.json" <<'PY' && ok inventory-json || bad inventory-json "$(cat "$tmp/err")"
import json, sys
d = json.load(open(sys.argv[1]))
g = d["gpus"][0]
assert g["name"] == "NVIDIA GB10" and g["memory_mib"] is None, g
assert g["processes"][0]["used_memory_mib"] == 43, g["processes"]
assert d["warnings"] == [], d["warnings"]
PY

check plan-none 0 '^nvidia.com/gpu  *1  *none  *1  *1 × NVIDIA GB10 (memory unknown)$' \
    "$BIN" plan --nvml-library "$LIB"
config ts4 timeSlicing 4
out=$("$BIN" plan --nvml-library "$LIB" --config "$tmp/ts4.yaml" 2>&1); rc=$?
if [ $rc -ne 0 ]; then
    bad plan-ts4 "exit $rc: $out"
elif ! printf '%s\n' "$out" | grep -q '^nvidia.com/gpu  *4  *time-slicing  *4  *1 × NVIDIA GB10 (memory unknown)$'; then
    bad plan-ts4 "unexpected table: $out"
elif printf '%s\n' "$out" | grep -q 'MiB each'; then
    bad plan-ts4 "a per-replica memory warning: $out"
else
    ok plan-ts4
fi
config mps4 mps 4
check plan-mps-refused 1 'error: nvidia.com/gpu: GPU 0 (NVIDIA GB10, GPU-.*) does not report its memory (unified memory), so MPS cannot give each of its 4 replicas an equal share; set memoryLimit' \
    "$BIN" plan --nvml-library "$LIB" --config "$tmp/mps4.yaml"
config mps4l mps 4 16Gi
check plan-mps-limit 0 'warning: .*memoryLimit 16384 MiB x 4 replicas is applied unchecked' \
    "$BIN" plan --nvml-library "$LIB" --config "$tmp/mps4l.yaml"
check size-refused 1 'GPU 0 NVIDIA GB10: NVML does not report its memory (Not Supported: unified memory), so its replicas cannot be sized from memory' \
    "$BIN" plan --nvml-library "$LIB" --size --per-process-memory 4096MiB
out=$("$BIN" plan --nvml-library "$LIB" --size -o json 2>&1)
if printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["gpus"][0]["status"] == "memory-unknown" and d["configs"] == [], d'; then
    ok size-json
else
    bad size-json "$out"
fi

out=$("$BIN" labels --nvml-library "$LIB" --no-timestamp --config-file "$tmp/ts4.yaml" 2>&1); rc=$?
if [ $rc -ne 0 ]; then
    bad labels "exit $rc: $out"
elif printf '%s\n' "$out" | grep -q '^nvidia.com/gpu.memory='; then
    bad labels "nvidia.com/gpu.memory labelled: $out"
elif ! printf '%s\n' "$out" | grep -q '^nvidia.com/gpu.product=NVIDIA-GB10-SHARED$'; then
    bad labels "no product label: $out"
else
    ok labels
fi

# plan --dra: the GPU is published with no capacity at all, as NVIDIA's v0.4.0 does (3f2a9d48)
out=$("$BIN" plan --dra --node-name n --nvml-library "$LIB" 2>&1); rc=$?
if [ $rc -ne 0 ]; then
    bad dra-no-capacity "exit $rc: $out"
elif printf '%s\n' "$out" | python3 -c '
import json, sys
[d] = json.load(sys.stdin)["spec"]["devices"]
assert sorted(d) == ["attributes", "name"], d
assert d["attributes"]["type"] == {"string": "gpu"}, d
'; then
    ok dra-no-capacity
else
    bad dra-no-capacity "a capacity published: $out"
fi

# only NOT_SUPPORTED means unknown: another error still fails the read
export FAKE_NVML_MACHINE="$MACHINES/l20-node.yaml" FAKE_NVML_STATE="$tmp/l20.state"
check other-error-fails 1 'nvmlDeviceGetMemoryInfo failed for GPU 0 (GPU-.*): Unknown Error' \
    env FAKE_NVML_FAIL=nvmlDeviceGetMemoryInfo=999 "$BIN" inventory --nvml-library "$LIB"
check l20-not-supported 0 '^0  *NVIDIA L20  *.*  *unknown  *8.9' \
    env FAKE_NVML_FAIL=nvmlDeviceGetMemoryInfo=3 "$BIN" inventory --nvml-library "$LIB"
exit $fail

#!/bin/sh
# test_cli_inventory.sh: `gpuslice inventory` against the fake NVML on every example
# machine — text and JSON (parsed by python3 -m json.tool, GPU count checked against
# -o json of the same run) — plus the failure contract: an NVML call failing exits 1 with
# the call, the GPU and NVML's error string; no NVML with --fail-on-init-error=false
# exits 0 with no GPUs. Usage: test_cli_inventory.sh GPUSLICE FAKE_LIB MACHINES_DIR
set -u
BIN="$1" LIB="$2" MACHINES="$3"
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs-cli-inv-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
export GPUSLICE_LOG_LEVEL=warn
unset FAKE_NVML_FAIL FAKE_NVML_EVENTS GPUSLICE_NVML_LIBRARY FAIL_ON_INIT_ERROR


n=0
for m in "$MACHINES"/*.yaml; do
    [ -e "$m" ] || continue
    n=$((n + 1))
    name=$(basename "$m" .yaml)
    export FAKE_NVML_MACHINE="$m" FAKE_NVML_STATE="$tmp/$name.state"
    rm -f "$FAKE_NVML_STATE"
    out=$("$BIN" inventory --nvml-library "$LIB" 2>"$tmp/err"); rc=$?
    if [ $rc -ne 0 ]; then bad "$name text" "exit $rc: $(cat "$tmp/err")"; continue; fi
    printf '%s\n' "$out" | grep -q '^Driver version: ' || bad "$name text" "no driver line"
    printf '%s\n' "$out" | grep -q '^GPU  *NAME' || bad "$name text" "no GPU table"
    "$BIN" inventory --nvml-library "$LIB" -o json >"$tmp/$name.json" 2>"$tmp/err"; rc=$?
    if [ $rc -ne 0 ]; then bad "$name json" "exit $rc: $(cat "$tmp/err")"; continue; fi
    if ! python3 -m json.tool "$tmp/$name.json" >/dev/null; then
        bad "$name json" "does not parse"; continue
    fi
    # Same GPUs in both views, every GPU has a UUID, topology has n*(n-1)/2 pairs.
    rows=$(printf '%s\n' "$out" | grep -c '^[0-9][0-9]* .*GPU-')
    python3 - "$tmp/$name.json" "$rows" <<'PY' || bad "$name json" "content check failed"
import json, sys
d = json.load(open(sys.argv[1]))
n = len(d["gpus"])
assert n > 0 and n == int(sys.argv[2]), (n, sys.argv[2])
# memory_mib is null only where NVML answers Not Supported (unified memory: GB10)
assert all(g["uuid"].startswith("GPU-") and
           (g["memory_mib"] > 0 if g["memory_mib"] is not None else "GB10" in g["name"])
           for g in d["gpus"])
assert len(d["topology"]) == n * (n - 1) // 2
assert d["driver_version"] and d["warnings"] == [], d["warnings"]
for g in d["gpus"]:
    assert g["mig"]["enabled"] or not g["mig"]["devices"]
    for m in g["mig"]["devices"]:
        assert m["uuid"].startswith("MIG-") and "g." in m["profile"], m
PY
    ok "$name"
done
[ $n -gt 0 ] || bad machines "no example machines in $MACHINES"

# The failure contract, on the first machine.
first=$(ls "$MACHINES"/*.yaml | head -n 1)
export FAKE_NVML_MACHINE="$first" FAKE_NVML_STATE="$tmp/fail.state"
out=$(FAKE_NVML_FAIL=nvmlDeviceGetMemoryInfo=999 "$BIN" inventory --nvml-library "$LIB" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q 'nvmlDeviceGetMemoryInfo failed for GPU 0 (GPU-.*): Unknown Error'; then
    ok call-failure
else
    bad call-failure "exit $rc: $out"
fi
out=$(FAKE_NVML_FAIL=nvmlInit_v2=9 "$BIN" inventory --nvml-library "$LIB" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q 'nvmlInit_v2 failed.*Driver Not Loaded'; then
    ok init-failure
else
    bad init-failure "exit $rc: $out"
fi
out=$(FAKE_NVML_FAIL=nvmlInit_v2=9 "$BIN" inventory --nvml-library "$LIB" --fail-on-init-error=false -o json 2>"$tmp/err"); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["gpus"] == [] and "keep running" in d["warnings"][0]' \
    && grep -q 'keep running' "$tmp/err"; then
    ok init-failure-tolerated
else
    bad init-failure-tolerated "exit $rc: $out $(cat "$tmp/err")"
fi
out=$(FAIL_ON_INIT_ERROR=false "$BIN" inventory --nvml-library "$tmp/none/libnvidia-ml.so.1" 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q 'No GPUs found'; then
    ok no-library-tolerated-env
else
    bad no-library-tolerated-env "exit $rc: $out"
fi
out=$("$BIN" inventory --nvml-library "$tmp/none/libnvidia-ml.so.1" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "is not a file"; then
    ok no-library
else
    bad no-library "exit $rc: $out"
fi
# The text view of a MIG machine: its MIG table and NVLink matrix.
if [ -e "$MACHINES/a100-80gb-all-balanced.yaml" ]; then
    out=$(FAKE_NVML_MACHINE="$MACHINES/a100-80gb-all-balanced.yaml" "$BIN" inventory --nvml-library "$LIB" 2>&1); rc=$?
    if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^MIG devices:' \
        && printf '%s\n' "$out" | grep -q '^0  *3  *3g\.40gb  *1  *0  *40192 MiB  *42  *4:4  *MIG-' \
        && printf '%s\n' "$out" | grep -q '^GPU0  *X  *NV4  *NV4  *NV4  *0$'; then
        ok mig-text
    else
        bad mig-text "exit $rc: $out"
    fi
fi
out=$("$BIN" inventory --fail-on-init-error=maybe 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q 'true or false' && ok bad-bool || bad bad-bool "exit $rc: $out"
out=$("$BIN" inventory -o yaml 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q 'text or json' && ok bad-output || bad bad-output "exit $rc: $out"
# one option parser: the device plugin's flags and env vars are accepted, a bad env value
# is a usage error like a bad flag
out=$(FAIL_ON_INIT_ERROR=bogus "$BIN" inventory 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q 'FAIL_ON_INIT_ERROR' && ok bad-env || bad bad-env "exit $rc: $out"
out=$(FAKE_NVML_MACHINE="$MACHINES/l20-node.yaml" "$BIN" inventory --nvml-library "$LIB" --mig-strategy mixed --config-file /dev/null -o json 2>&1); rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -q '"driver_version"' && ok plugin-flags || bad plugin-flags "exit $rc: $out"
out=$(MIG_STRATEGY=bogus "$BIN" config show 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "MIG_STRATEGY" && ok config-bad-env || bad config-bad-env "exit $rc: $out"
out=$("$BIN" inventory --help 2>&1); rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -q -- '--driver-root-ctr-path' && ok help || bad help "exit $rc"
exit $fail

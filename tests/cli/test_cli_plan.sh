#!/bin/sh
# test_cli_plan.sh: `gpuslice plan` against the fake NVML — the seed's L20 node with its
# `l20` config (8 time-sliced replicas, ~5758 MiB each), the T4 node with `t4`, an A100
# all-balanced under `single` (NVIDIA's error, exit 1, valid part still shown), the JSON
# shape, every example machine under `mixed` (JSON parses), usage errors (exit 2), and
# `plan --dra`: the ResourceSlice of the L20 node and of a MIG node, node name from the flag,
# NODE_NAME or the host name.
# Usage: test_cli_plan.sh GPUSLICE FAKE_LIB MACHINES_DIR
set -u
BIN="$1" LIB="$2" MACHINES="$3"
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs-cli-plan-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
export GPUSLICE_LOG_LEVEL=warn
unset FAKE_NVML_FAIL FAKE_NVML_EVENTS GPUSLICE_NVML_LIBRARY CONFIG_FILE MIG_STRATEGY


machine() {
    export FAKE_NVML_MACHINE="$MACHINES/$1.yaml" FAKE_NVML_STATE="$tmp/$1.state"
    rm -f "$FAKE_NVML_STATE"
}

ts_config() { # replicas -> the seed's ConfigMap entry shape
    cat >"$tmp/ts$1.yaml" <<YAML
version: v1
flags:
  migStrategy: none
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: $1
YAML
}

# the seed's L20 node: nvidia.com/gpu 8, ~5758 MiB per replica
machine l20-node
ts_config 8
out=$("$BIN" plan --nvml-library "$LIB" --config "$tmp/ts8.yaml" 2>"$tmp/err"); rc=$?
if [ $rc -ne 0 ]; then
    bad l20 "exit $rc: $(cat "$tmp/err")"
elif printf '%s\n' "$out" | grep -q '^nvidia.com/gpu  *8  *time-slicing  *8  *1 × NVIDIA L20 (46068 MiB, ~5758 MiB per replica)$'; then
    ok l20
else
    bad l20 "unexpected table: $out"
fi

# the seed's T4 node with t4 (3): 3 devices
machine t4-node
ts_config 3
out=$("$BIN" plan --nvml-library "$LIB" --config "$tmp/ts3.yaml" -o json 2>"$tmp/err"); rc=$?
if [ $rc -ne 0 ]; then
    bad t4 "exit $rc: $(cat "$tmp/err")"
else
    printf '%s\n' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d["resources"]
assert [x["name"] for x in r] == ["nvidia.com/gpu"], r
assert r[0]["count"] == 3 and r[0]["replicas"] == 3 and r[0]["sharing"] == "time-slicing"
ids = [x["id"] for x in r[0]["devices"]]
assert all(i.endswith("::%d" % n) for n, i in enumerate(ids)), ids
assert all(x["health"] == "Healthy" for x in r[0]["devices"])
assert d["errors"] == []
assert r[0]["socket"] == "nvidia-gpu.sock" and len(r[0]["devices"]) == 3
assert all(x["gpu"] == 0 and isinstance(x["numa"], list) for x in r[0]["devices"])
assert r[0]["gpus"].startswith("1 × Tesla T4"), r[0]["gpus"]
assert len(d["warnings"]) >= 1, d
' && ok t4 || bad t4 "json content"
fi

# all-balanced under single: NVIDIA refuses; we say why, show the valid part, exit 1
machine a100-80gb-all-balanced
out=$("$BIN" plan --nvml-library "$LIB" --mig-strategy single 2>"$tmp/err"); rc=$?
if [ $rc -ne 1 ]; then
    bad balanced-single "exit $rc, want 1"
elif printf '%s\n' "$out" | grep -q '^error: invalid MIG configuration: more than one MIG device type present on node'; then
    ok balanced-single
else
    bad balanced-single "no error line: $out"
fi

# every example machine under mixed: valid JSON
for m in "$MACHINES"/*.yaml; do
    name=$(basename "$m" .yaml)
    machine "$name"
    "$BIN" plan --nvml-library "$LIB" --mig-strategy mixed -o json >"$tmp/$name.json" 2>"$tmp/err"
    rc=$?
    if [ $rc -gt 1 ]; then bad "$name mixed" "exit $rc: $(cat "$tmp/err")"; continue; fi
    python3 -m json.tool "$tmp/$name.json" >/dev/null && ok "$name mixed json" ||
        bad "$name mixed" "json does not parse"
done

# usage errors
"$BIN" plan --output yaml >/dev/null 2>&1; [ $? -eq 2 ] && ok usage-output || bad usage-output "exit not 2"
"$BIN" plan --mig-strategy half >/dev/null 2>&1; [ $? -eq 2 ] && ok usage-mig || bad usage-mig "exit not 2"
"$BIN" plan --help | grep -q '^Usage: gpuslice plan' && ok help || bad help "no usage"

# replica sizing from measured memory: the seed's L20 (4621 MiB process) -> 8, T4 -> 3
machine l20-node
check size-l20 0 "46068 MiB x (100% - 10%) = 41461 MiB usable / 4621 MiB per process (largest seen: pid 4242) = 8.97 -> 8 replicas" \
    "$BIN" plan --nvml-library "$LIB" --size
check size-l20-fragment 0 "replicas: 8" "$BIN" plan --nvml-library "$LIB" --size
machine t4-node
check size-t4 0 "= 3.14 -> 3 replicas" "$BIN" plan --nvml-library "$LIB" --size
check size-by-hand 0 "15360 MiB x (100% - 20%) = 12288 MiB usable / 4096 MiB per process = 3.00 -> 3" \
    "$BIN" plan --nvml-library "$LIB" --per-process-memory 4GiB --headroom 20%
check size-bad-headroom 2 "give a percentage below 100" "$BIN" plan --nvml-library "$LIB" --size --headroom 150%
# -o json: one JSON object (was the text), the same figures and the config fragment
machine mixed-models
out=$("$BIN" plan --nvml-library "$LIB" --size -o json 2>"$tmp/err"); rc=$?
if [ $rc -ne 1 ]; then
    bad size-json "exit $rc (want 1: GPUs with nothing measured): $(cat "$tmp/err")"
elif printf '%s\n' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["headroom_pct"] == 10, d
st = [g["status"] for g in d["gpus"]]
assert st == ["mig", "no-data", "sized", "sized", "no-data", "no-data"], st
l20 = d["gpus"][2]
assert (l20["total_mib"], l20["usable_mib"], l20["per_process_mib"], l20["ratio"],
        l20["replicas"], l20["source"]) == (46068, 41461, 4621, 8.97, 8, {"pid": 5002}), l20
c, = d["configs"]
assert c["model"] == "NVIDIA L20" and c["replicas"] == 8, c
assert c["config"].endswith("- name: nvidia.com/gpu\n        replicas: 8\n"), c
'; then
    ok size-json
else
    bad size-json "unexpected JSON: $out"
fi
# the metrics endpoint has one name in every command (--metrics-address, as the daemon
# takes it); the old spellings stay as aliases
check metrics-address-plan 1 "gpuslice plan: --metrics-address: no gpuslice metrics endpoint at 127.0.0.1:1" \
    "$BIN" plan --nvml-library "$LIB" --size --metrics-address 127.0.0.1:1
check metrics-address-plan-old 1 "no gpuslice metrics endpoint at 127.0.0.1:1" \
    "$BIN" plan --nvml-library "$LIB" --size --from-metrics 127.0.0.1:1
check metrics-address-top 1 "gpuslice top: no gpuslice metrics endpoint at 127.0.0.1:1" \
    "$BIN" top --metrics-address 127.0.0.1:1 --once
check metrics-address-top-old 1 "no gpuslice metrics endpoint at 127.0.0.1:1" \
    "$BIN" top --address 127.0.0.1:1 --once
check metrics-address-help 0 "--metrics-address HOST:PORT" "$BIN" top --help
machine t4-node
check size-json-by-hand 0 '"source": "per-process-memory"' \
    "$BIN" plan --nvml-library "$LIB" --per-process-memory 4GiB -o json
# the daemon's config selection flags and env vars (one option parser for every command)
CM="$(dirname "$MACHINES")/demo/time-slicing-config"
check default-config 0 "time-slicing   8" env FAKE_NVML_MACHINE="$MACHINES/l20-node.yaml" \
    "$BIN" plan --nvml-library "$LIB" --config-file "$CM" --default-config l20
check default-config-env 0 "time-slicing   3" env FAKE_NVML_MACHINE="$MACHINES/l20-node.yaml" \
    DEFAULT_CONFIG=t4 "$BIN" plan --nvml-library "$LIB" --config "$CM"
check fallbacks-env-bad 2 "FALLBACK_STRATEGIES: unknown strategy 'bogus'" \
    env FALLBACK_STRATEGIES=bogus "$BIN" plan --nvml-library "$LIB"
check fallbacks-none 1 "no config selected" env FAKE_NVML_MACHINE="$MACHINES/l20-node.yaml" \
    "$BIN" plan --nvml-library "$LIB" --config-file "$CM" --fallback-strategies ""

# plan --dra: the ResourceSlice NVIDIA's DRA driver would publish (names, attributes, capacities)
machine l20-node
out=$("$BIN" plan --dra --node-name node-a --nvml-library "$LIB" 2>"$tmp/err"); rc=$?
if [ $rc -ne 0 ]; then
    bad dra-l20 "exit $rc: $(cat "$tmp/err")"
elif printf '%s\n' "$out" | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["apiVersion"] == "resource.k8s.io/v1" and s["kind"] == "ResourceSlice", s
assert s["metadata"] == {"generateName": "node-a-gpu.nvidia.com-"}, s["metadata"]
sp = s["spec"]
assert sp["driver"] == "gpu.nvidia.com" and sp["nodeName"] == "node-a", sp
assert sp["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}, sp["pool"]
d = sp["devices"]
assert [x["name"] for x in d] == ["gpu-0"], d
a = d[0]["attributes"]
assert a["type"] == {"string": "gpu"} and a["productName"] == {"string": "NVIDIA L20"}, a
assert a["brand"] == {"string": "Nvidia"} and a["architecture"] == {"string": "Ada Lovelace"}, a
assert a["cudaComputeCapability"] == {"version": "8.9.0"}, a
assert a["driverVersion"] == {"version": "570.158.1"}, a
assert a["cudaDriverVersion"] == {"version": "12.8.0"}, a
assert a["resource.kubernetes.io/pciBusID"]["string"].startswith("0000:"), a
assert d[0]["capacity"] == {"memory": {"value": "46068Mi"}}, d[0]["capacity"]
'; then
    ok dra-l20
else
    bad dra-l20 "unexpected slice: $out"
fi
machine h20-mig-7x1g
out=$(NODE_NAME=node-b "$BIN" plan --dra --nvml-library "$LIB" 2>"$tmp/err"); rc=$?
if [ $rc -ne 0 ]; then
    bad dra-h20 "exit $rc: $(cat "$tmp/err")"
elif printf '%s\n' "$out" | python3 -c '
import json, sys
s = json.load(sys.stdin)
d = s["spec"]["devices"]
assert s["spec"]["nodeName"] == "node-b", s["spec"]
assert len(d) == 56, len(d)
assert d[0]["name"] == "gpu-0-mig-1g12gb-19-0" and d[6]["name"] == "gpu-0-mig-1g12gb-19-6", d[:7]
assert d[0]["attributes"]["type"] == {"string": "mig"}
assert d[0]["attributes"]["profile"] == {"string": "1g.12gb"}
assert d[6]["capacity"]["memorySlice6"] == {"value": "1"}, d[6]["capacity"]
'; then
    ok dra-h20
else
    bad dra-h20 "unexpected slice: $out"
fi
# the PCIe root from sysfs, as Kubernetes' deviceattribute package resolves it
mkdir -p "$tmp/sys/devices/pci0000:0f/0000:0f:01.0/0000:10:00.0" "$tmp/sys/bus/pci/devices"
ln -s ../../../devices/pci0000:0f/0000:0f:01.0/0000:10:00.0 "$tmp/sys/bus/pci/devices/0000:10:00.0"
machine l20-node
check dra-pcie-root 0 '"resource.kubernetes.io/pcieRoot": {\s*"string": "pci0000:0f"' \
    sh -c "\"\$0\" plan --dra --node-name n --sysfs-root \"\$1\" --nvml-library \"\$2\" | tr -d '\n'" \
    "$BIN" "$tmp/sys" "$LIB"
check dra-hostname 0 "\"nodeName\": \"$(hostname)\"" env -u NODE_NAME \
    "$BIN" plan --dra --nvml-library "$LIB"
check dra-help 0 "--dra" "$BIN" plan --help
# plan --dra with examples/dra/fractions/config.yaml: the H100s shareable by memory (policies
# on the API's grid), a summary of what each can sell on stderr; a config the DRA plugin
# refuses (time-slicing is the claims' GpuConfig there) is refused here too
FRACTIONS="$MACHINES/../dra/fractions/config.yaml"
machine h100-nvswitch-8
out=$("$BIN" plan --dra --node-name n --nvml-library "$LIB" --config-file "$FRACTIONS" \
    2>"$tmp/err"); rc=$?
if [ $rc -ne 0 ]; then
    bad dra-fractions "exit $rc: $(cat "$tmp/err")"
elif printf '%s\n' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)["spec"]["devices"]
assert len(d) == 8, len(d)
for x in d:
    assert x["allowMultipleAllocations"] is True, x
    assert x["capacity"] == {
        "memory": {"value": "81559Mi", "requestPolicy": {"default": "81559Mi",
                   "validRange": {"min": "1Gi", "step": "1Mi"}}},
        "computePercent": {"value": "100", "requestPolicy": {"default": "0",
                           "validRange": {"min": "0", "max": "100", "step": "1"}}}}, x
' && grep -q "gpu-7    81559Mi memory: shares of 1Gi to 81559Mi in 1Mi steps" "$tmp/err"; then
    ok dra-fractions
else
    bad dra-fractions "unexpected slice or summary: $out $(cat "$tmp/err")"
fi
# --checkpoint: what the running plugin has sold (test_dra_fractions reads one with shares);
# an empty checkpoint sells nothing yet, a missing or damaged one is an error naming it
: >"$tmp/empty-cp.json"
check dra-fractions-checkpoint-empty 0 "sold: 0Mi in 0 shares (computePercent 0 named); left: 81559Mi (the whole GPU)" \
    "$BIN" plan --dra --node-name n --nvml-library "$LIB" --config-file "$FRACTIONS" \
    --checkpoint "$tmp/empty-cp.json"
check dra-fractions-checkpoint-missing 1 "--checkpoint $tmp/nope.json: No such file" \
    "$BIN" plan --dra --node-name n --nvml-library "$LIB" --config-file "$FRACTIONS" \
    --checkpoint "$tmp/nope.json"
echo '{"checksum": 1, "v1": {"preparedClaims": {}}}' >"$tmp/bad-cp.json"
check dra-fractions-checkpoint-damaged 1 "checksum mismatch" \
    "$BIN" plan --dra --node-name n --nvml-library "$LIB" --config-file "$FRACTIONS" \
    --checkpoint "$tmp/bad-cp.json"
machine l20-node
check dra-fractions-other-model 0 '"capacity": {"memory": {"value": "46068Mi"}}' \
    sh -c "\"\$0\" plan --dra --node-name n --nvml-library \"\$1\" --config-file \"\$2\" |
        python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[\"spec\"][\"devices\"][0]))'" \
    "$BIN" "$LIB" "$FRACTIONS"
ts_config 2
check dra-refuses-time-slicing 1 "sharing.timeSlicing is the device plugin's; under DRA a claim" \
    "$BIN" plan --dra --node-name n --nvml-library "$LIB" --config-file "$tmp/ts2.yaml"
exit $fail

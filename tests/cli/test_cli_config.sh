#!/bin/sh
# test_cli_config.sh: `gpuslice config validate|show` — exit codes (0 valid, 1 invalid,
# 2 usage), every error printed, summaries, flags/env precedence, ConfigMap directories
# with kubelet's ..data layout and rejected config names; --nvidia, the rollback check.
set -u
BIN="$1"
DATA="$2"
. "$(dirname "$0")/lib.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
V="$DATA/valid" I="$DATA/invalid"
check validate-ok 0 "valid: config '-' ($V/seed000-l20.yaml): migStrategy none, sharing time-slicing: nvidia.com/gpu x8" \
    "$BIN" config validate "$V/seed000-l20.yaml"
check validate-json 0 "nvidia.com/gpu x4" "$BIN" config validate "$V/nvidia-time-slicing.json"
check validate-errors 1 "many-errors.yaml:9:17: sharing.timeSlicing.resources\[0\].replicas: 0 is not a valid replica count" \
    "$BIN" config validate "$I/many-errors.yaml"
check validate-all-errors 1 "many-errors.yaml:10:13: sharing.timeSlicing.resources\[1\].name" \
    "$BIN" config validate "$I/many-errors.yaml"
check validate-count 1 "3 errors in the config" "$BIN" config validate "$I/many-errors.yaml"
check validate-warning 0 "warning: sharing.timeSlicing: unknown key 'failRequestGreaterThanOne'" \
    "$BIN" config validate "$V/ours-typo-warning.yaml"
check mps-needs-root 1 "using MPS requires an MPS root" "$BIN" config validate "$V/nvidia-mps.yaml"
check mps-root-flag 0 "sharing mps" "$BIN" config validate "$V/nvidia-mps.yaml" --mps-root=/run/nvidia/mps
check mps-root-env 0 "sharing mps" env MPS_ROOT=/run/nvidia/mps "$BIN" config validate "$V/nvidia-mps.yaml"
check missing-file 1 "cannot read config" "$BIN" config validate "$TMP/nope.yaml"
check no-path 2 "validate needs a PATH" "$BIN" config validate
check bad-flag 2 "unknown option '--frob'" "$BIN" config validate "$V/seed000-any.yaml" --frob
check bad-flag-value 2 "\-\-mig-strategy: 'bogus' is not allowed" "$BIN" config show --mig-strategy=bogus
# a bad env value is a usage error, like a bad flag (exit 2)
check bad-env-value 2 "MIG_STRATEGY: 'bogus' is not allowed" env MIG_STRATEGY=bogus "$BIN" config show
check bad-output 2 "'xml' is not yaml or json" "$BIN" config show -o xml
check missing-value 2 "needs a value" "$BIN" config show --config-name
check extra-arg 2 "unexpected argument 'b'" "$BIN" config show a b
check bad-verb 2 "unknown subcommand 'check'" "$BIN" config check
check no-verb 2 "Usage: gpuslice config" "$BIN" config
check help 0 "Usage: gpuslice config validate" "$BIN" config --help
check help-validate 0 "\-\-mps-root  env MPS_ROOT" "$BIN" config validate --help
check help-top 0 "Usage: gpuslice config" "$BIN" help config
check show-defaults 0 'migStrategy: "none"' "$BIN" config show
check show-json 0 '"deviceIDStrategy": "uuid"' "$BIN" config show -o json
# precedence: flag > env > file > default
check show-file 0 'replicas: 3' "$BIN" config show "$V/seed000-t4.yaml"
check show-env 0 'migStrategy: "single"' env MIG_STRATEGY=single "$BIN" config show "$V/seed000-t4.yaml"
check show-flag-beats-env 0 'migStrategy: "mixed"' env MIG_STRATEGY=single "$BIN" config show "$V/seed000-t4.yaml" --mig-strategy mixed
check show-alias 0 'nvidiaCTKPath: "/opt/ctk"' env NVIDIA_CTK_PATH=/opt/ctk "$BIN" config show
check show-bool-flag 0 'passDeviceSpecs: true' "$BIN" config show --pass-device-specs
check show-driver-root-alias 0 'nvidiaDriverRoot: "/run/nvidia/driver"' "$BIN" config show --nvidia-driver-root=/run/nvidia/driver
check show-invalid 1 "0 is not a valid replica count" "$BIN" config show "$I/replicas-zero.yaml"

# A ConfigMap mount, as kubelet lays it out.
CM="$TMP/cm"; TS="..2024_01_01_00_00_00.1"
mkdir -p "$CM/$TS"
cp "$V/seed000-any.yaml" "$CM/$TS/any"; cp "$V/seed000-l20.yaml" "$CM/$TS/l20"; cp "$V/seed000-t4.yaml" "$CM/$TS/t4"
ln -s "$TS" "$CM/..data"
for k in any l20 t4; do ln -s "..data/$k" "$CM/$k"; done
check dir-validate-all 0 "valid: config 't4'" "$BIN" config validate "$CM"
check dir-name 0 "valid: config 'l20' ($CM/l20)" "$BIN" config validate "$CM" --config-name l20
check dir-show-name 0 "replicas: 8" "$BIN" config show "$CM" --config-name l20
check dir-unknown 1 "available configs: any, l20, t4" "$BIN" config validate "$CM" --config-name a100
check dir-traversal 1 "config name '../t4' contains '/'" "$BIN" config validate "$CM" --config-name ../t4
check dir-slash 1 "contains '/'" "$BIN" config show "$CM" --config-name a/b
check dir-dotdot 1 "starts with '.' or contains '..'" "$BIN" config show "$CM" --config-name ..data
check dir-no-default 1 "fallbacks (named, single) found none" "$BIN" config show "$CM"
check dir-default-config 0 "replicas: 2" "$BIN" config show "$CM" --default-config any
check dir-empty-fallback 0 'sharing: {}' "$BIN" config show "$CM" --fallback-strategies named,empty
check dir-bad-fallback 2 "is not a list of named, single, empty" "$BIN" config show "$CM" --fallback-strategies nope
# the seed's "is a directory" case: --config-file pointing at the mount works by name
check config-file-dir 0 "replicas: 3" "$BIN" config show --config-file="$CM" --config-name t4
check file-name-mismatch 1 "holds one config named 't4', not 'l20'" "$BIN" config show "$CM/t4" --config-name l20
cp "$I/replicas-zero.yaml" "$CM/$TS/broken"; ln -s "..data/broken" "$CM/broken"
check dir-validate-one-bad 1 "$CM/broken:6:17: sharing.timeSlicing.resources\[0\].replicas" "$BIN" config validate "$CM"
# the ConfigMap manifest people kubectl apply: each data key is a named config, positions in
# the manifest (issue 14: it said "valid ... sharing none" before)
M="$DATA/manifest"
check manifest-keys 1 "valid: l20: config '-': migStrategy none, sharing time-slicing: nvidia.com/gpu x8" \
    "$BIN" config validate "$M/seed-configmap.yaml"
check manifest-position 1 "seed-configmap.yaml:24:23: sharing.timeSlicing.resources\[0\].replicas: 0 is not" \
    "$BIN" config validate "$M/seed-configmap.yaml"
check manifest-invalid-key 1 "invalid: t4: 1 error" "$BIN" config validate "$M/seed-configmap.yaml"
check manifest-one-name 0 "valid: l20" "$BIN" config validate "$M/seed-configmap.yaml" --config-name l20
check manifest-list 1 "list-of-configmaps.yaml:22:24: flags.migStrategy: 'sideways'" \
    "$BIN" config validate "$M/list-of-configmaps.yaml"
check manifest-list-json-value 1 "valid: json: config '-': migStrategy mixed" \
    "$BIN" config validate "$M/list-of-configmaps.yaml"
out=$("$BIN" config validate "$M/seed-configmap.yaml" -o json 2>/dev/null)
if printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); c={x["name"]: x for x in d["configs"]}; assert not d["valid"] and c["l20"]["valid"] and c["t4"]["diagnostics"][0]["line"] == 24, d'; then
    ok manifest-json
else
    bad manifest-json "not the expected JSON report: $out"
fi
# --nvidia (= --strict-nvidia-schema): is the config safe to roll back to NVIDIA's plugin?
# NVIDIA's own examples pass; what NVIDIA refuses or reads differently fails, quoting
# NVIDIA's message where it has one
for f in "$V"/nvidia-*.yaml "$V"/nvidia-*.json; do
    flags=""
    [ -f "$f.flags" ] && flags="--$(cat "$f.flags")"
    check "nvidia-ok-$(basename "$f")" 0 "^valid: " "$BIN" config validate "$f" --nvidia $flags
done
check nvidia-replicas-1 1 'resources\[0\].replicas: NVIDIA.s plugin refuses replicas: 1 ("number of replicas must be >= 2")' \
    "$BIN" config validate "$V/seed002-training.yaml" --nvidia
check nvidia-per-model 1 "resources.gpus\[0\]: NVIDIA's plugin ignores resources.gpus" \
    "$BIN" config validate "$V/ours-per-model.yaml" --strict-nvidia-schema
check nvidia-devices 1 "Customizing the 'devices' field" \
    "$BIN" config validate "$V/ours-devices-split.yaml" --nvidia
check nvidia-rename 1 "NVIDIA's plugin ignores rename" \
    "$BIN" config validate "$V/ours-rename.yaml" --nvidia
check nvidia-mps-limits 1 "memoryLimit is a gpuslice extension" \
    "$BIN" config validate "$V/ours-mps-limits.yaml" --nvidia
check nvidia-env 1 "number of replicas must be >= 2" \
    env GPUSLICE_STRICT_NVIDIA_SCHEMA=true "$BIN" config validate "$V/seed002-training.yaml"
check nvidia-still-ours 0 "valid: " "$BIN" config validate "$V/seed002-training.yaml"
check nvidia-help 0 "--nvidia, --strict-nvidia-schema" "$BIN" config --help
exit $fail

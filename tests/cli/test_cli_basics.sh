#!/bin/sh
# test_cli_basics.sh: the binary's top-level contract — help, version, and exit code 2
# with a clear message for unknown commands and options; under NVIDIA's names (argv[0]),
# NVIDIA's --version/-v.
set -u
BIN="$1"
. "$(dirname "$0")/lib.sh"
check version 0 '^gpuslice [0-9.]* (commit [0-9a-z-]*)$' "$BIN" --version
check version-cmd 0 '^gpuslice [0-9]' "$BIN" version
check help 0 'Usage: gpuslice <command>' "$BIN" help
check no-args 2 'Usage: gpuslice' "$BIN"
check unknown-cmd 2 "unknown command 'frobnicate'" "$BIN" frobnicate
check typo-hint 2 "did you mean 'version'" "$BIN" versoin
check unknown-flag 2 "unknown option '--frob'" "$BIN" --frob
check help-unknown 2 "unknown command 'nope'" "$BIN" help nope
check version-extra 2 "unexpected argument" "$BIN" version extra
# one error prefix: "gpuslice <command>: " (mig said "Error: ")
check error-prefix-mig 1 "^gpuslice mig: cannot open '/nonexistent'" "$BIN" mig apply -f /nonexistent -c x
# under NVIDIA's names, NVIDIA's flags: --version and -v print the version (urfave/cli's
# "<name> version <v>"), exit 0, wherever they stand among the program's flags
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs-cli-basics-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
for n in nvidia-device-plugin gpu-feature-discovery mps-control-daemon nvidia-mig-parted \
    config-manager nvidia-mig-manager compute-domain-kubelet-plugin compute-domain-controller; do
    ln -s "$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")" "$tmp/$n"
done
check dp-version 0 '^NVIDIA Device Plugin version [0-9.]*$' "$tmp/nvidia-device-plugin" --version
check dp-v 0 '^commit: ' "$tmp/nvidia-device-plugin" --mig-strategy none -v
check dp-go-flag 0 'NVIDIA Device Plugin version' "$tmp/nvidia-device-plugin" -version
check gfd-version 0 '^GPU Feature Discovery version ' "$tmp/gpu-feature-discovery" -v
check mps-version 0 '^NVIDIA MPS Control Daemon version ' "$tmp/mps-control-daemon" --version
check mig-version 0 '^nvidia-mig-parted version ' "$tmp/nvidia-mig-parted" -v
# mig-parted's version flag is the program's, not its subcommands'
check mig-sub-v 2 "unknown option '-v'" "$tmp/nvidia-mig-parted" export -v
# NVIDIA's config-manager has no version flag
check cm-no-version 2 "unknown option '--version'" "$tmp/config-manager" --version
# the GPU Operator's MIG manager (mig-parted v0.15.0's flags): NVIDIA's version line, its
# message for an empty node name, urfave/cli's for an unknown flag, both dash styles
check mgr-version 0 '^nvidia-mig-manager version ' "$tmp/nvidia-mig-manager" -version
check mgr-no-node 1 'invalid -n <node-name> flag: must not be empty string' \
    env -u NODE_NAME "$tmp/nvidia-mig-manager"
check mgr-empty-node 1 'must not be empty string' env NODE_NAME= "$tmp/nvidia-mig-manager" -n ""
check mgr-unknown 2 'flag provided but not defined: -bogus' "$tmp/nvidia-mig-manager" --bogus
check mgr-bool 2 'invalid value "maybe" for flag -with-reboot' \
    "$tmp/nvidia-mig-manager" -n x --with-reboot=maybe
check mgr-missing-config 1 'failed to read custom config /nonexistent' \
    "$tmp/nvidia-mig-manager" -n node-1 -f /nonexistent
check mgr-help 0 'nvidia.com/mig.config' "$tmp/nvidia-mig-manager" --help
# NVIDIA's ComputeDomain programs: refused at once, naming the DRA chart value
check cd-plugin 1 '^compute-domain-kubelet-plugin: gpuslice does not provide' \
    "$tmp/compute-domain-kubelet-plugin" -v 4
check cd-controller 1 'resources.computeDomains.enabled=false' "$tmp/compute-domain-controller"
check cd-help 0 'resources.computeDomains.enabled=false' "$tmp/compute-domain-controller" --help
exit $fail

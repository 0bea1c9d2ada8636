#!/bin/sh
# test_cli_basics.sh: the binary's top-level contract — help, version, and exit code 2
# with a clear message for unknown commands and options.
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
exit $fail

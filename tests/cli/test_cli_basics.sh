#!/bin/sh
# test_cli_basics.sh: the binary's top-level contract — help, version, and exit code 2
# with a clear message for unknown commands and options.
set -u
BIN="$1"
fail=0
check() { # check NAME EXPECTED_RC PATTERN CMD...
    name=$1 want=$2 pat=$3; shift 3
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -ne "$want" ]; then echo "FAIL $name: exit $rc, want $want: $out"; fail=1; return; fi
    if ! printf '%s' "$out" | grep -q -- "$pat"; then echo "FAIL $name: no '$pat' in: $out"; fail=1; return; fi
    echo "ok $name"
}
check version 0 '^gpuslice [0-9]' "$BIN" --version
check version-cmd 0 '^gpuslice [0-9]' "$BIN" version
check help 0 'Usage: gpuslice <command>' "$BIN" help
check no-args 2 'Usage: gpuslice' "$BIN"
check unknown-cmd 2 "unknown command 'frobnicate'" "$BIN" frobnicate
check typo-hint 2 "did you mean 'version'" "$BIN" versoin
check unknown-flag 2 "unknown option '--frob'" "$BIN" --frob
check help-unknown 2 "unknown command 'nope'" "$BIN" help nope
check version-extra 2 "unexpected argument" "$BIN" version extra
exit $fail

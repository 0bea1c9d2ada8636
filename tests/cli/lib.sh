# lib.sh: helpers shared by the CLI test scripts (sourced, not run). Each result prints
# one "ok NAME" or "FAIL NAME: why" line; a failure sets fail=1 for the script's exit code.
fail=0
ok() { echo "ok $1"; }
bad() { echo "FAIL $1: $2"; fail=1; }
# check NAME EXPECTED_RC PATTERN CMD...: runs CMD, wants its exit code and PATTERN (grep)
# somewhere in its stdout+stderr.
check() {
    name=$1 want=$2 pat=$3; shift 3
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -ne "$want" ]; then bad "$name" "exit $rc, want $want: $out"; return; fi
    if ! printf '%s' "$out" | grep -q -- "$pat"; then bad "$name" "no '$pat' in: $out"; return; fi
    ok "$name"
}

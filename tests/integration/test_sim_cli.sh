#!/bin/sh
# test_sim_cli.sh: the kubelet-sim program without any plugin — usage errors (exit 2), the
# one-shot mode (--capacity, --wait-resources timing out with a clear error, exit 1), the
# text and JSON control loop (answers, "did you mean", overlong lines, exit status), and
# SIGTERM removing kubelet.sock. Usage: test_sim_cli.sh KUBELET_SIM
set -u
SIM="$1"
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs-sim-cli-XXXXXX") || exit 1
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM

ok() { echo "ok $1"; }
bad() { echo "FAIL $1: $2"; fail=1; }
expect_rc() { # name want got
    if [ "$3" -eq "$2" ]; then ok "$1"; else bad "$1" "exit $3, want $2"; fi
}

"$SIM" >/dev/null 2>"$tmp/err"; expect_rc "no --dir is a usage error" 2 $?
grep -q -- "--dir is required" "$tmp/err" || bad "no --dir message" "$(cat "$tmp/err")"
"$SIM" --dir "$tmp/d" --bogus >/dev/null 2>&1; expect_rc "unknown option" 2 $?
"$SIM" --dir "$tmp/d" -o yaml >/dev/null 2>&1; expect_rc "bad --output" 2 $?
"$SIM" --dir "$tmp/d" --timeout-ms 0 --capacity >/dev/null 2>&1; expect_rc "bad --timeout-ms" 2 $?
"$SIM" --help | grep -q "^usage: kubelet-sim" || bad "--help" "no usage line"

out=$("$SIM" --dir "$tmp/d" --capacity); expect_rc "one-shot capacity" 0 $?
printf '%s\n' "$out" | grep -q "no device plugin registered" || bad "empty capacity" "$out"
[ -S "$tmp/d/kubelet.sock" ] && bad "one-shot cleanup" "kubelet.sock left behind"

out=$("$SIM" --dir "$tmp/d" -o json --wait-resources 1 --timeout-ms 100); expect_rc "one-shot wait times out" 1 $?
printf '%s\n' "$out" | python3 -c '
import json, sys
a = json.loads(sys.stdin.readline())
assert a["ok"] is False and "timed out after 100 ms" in a["error"], a' || bad "one-shot wait json" "$out"

# text loop: every command answered, failures make the exit status 1
out=$(printf 'capacty\ncapacity\nadmit p1 nvidia.com/gpu=1\npods\ndelete p1\ndelete p1\nquit\ncapacity\n' |
      "$SIM" --dir "$tmp/d"); rc=$?
expect_rc "text loop with failures" 1 $rc
printf '%s\n' "$out" | grep -q 'did you mean "capacity"' || bad "did you mean" "$out"
printf '%s\n' "$out" | grep -q '^pod/p1  Pending (Insufficient nvidia.com/gpu)$' || bad "pending pod" "$out"
printf '%s\n' "$out" | grep -q '^error: no pod "p1"$' || bad "delete twice" "$out"
[ "$(printf '%s\n' "$out" | tail -1)" = "bye" ] || bad "quit stops reading" "$out"

# JSON loop: one object per command, an overlong line answered and skipped
long=$(python3 -c 'print("a" * 5000)')
out=$(printf 'capacity\n%s\nadmit p1 x.com/y=2\npod p1\n' "$long" | "$SIM" --dir "$tmp/d" -o json); rc=$?
expect_rc "json loop with a long line" 1 $rc
printf '%s\n' "$out" | python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin]
assert len(lines) == 4, lines
assert lines[0]["ok"] and lines[0]["resources"] == [], lines[0]
assert not lines[1]["ok"] and "too long" in lines[1]["error"], lines[1]
assert lines[2]["pod"]["phase"] == "Pending" and lines[2]["pod"]["reason"] == "Insufficient x.com/y"
assert lines[3]["pod"]["requests"] == {"x.com/y": 2}, lines[3]' || bad "json answers" "$out"

# SIGTERM: clean exit, kubelet.sock removed
mkfifo "$tmp/in"
"$SIM" --dir "$tmp/t" <"$tmp/in" >/dev/null 2>&1 &
pid=$!
exec 3>"$tmp/in"
i=0
while [ ! -S "$tmp/t/kubelet.sock" ] && [ $i -lt 500 ]; do i=$((i + 1)); sleep 0.01; done
[ -S "$tmp/t/kubelet.sock" ] || bad "serving" "no kubelet.sock after 5 s"
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=
exec 3>&-
expect_rc "SIGTERM exits 0" 0 $rc
[ -e "$tmp/t/kubelet.sock" ] && bad "SIGTERM cleanup" "kubelet.sock left behind"

[ $fail -eq 0 ] && echo "all kubelet-sim CLI checks passed"
exit $fail

#!/usr/bin/env bash
# tests/sock/diff_fuzz.sh [SEED...] - random socket calls on a pooled pair
# get the kernel's answers: for each seed sock_diff_check runs without the
# preload (plain TCP, the reference) and with it (a pooled pair); the pair
# must be TCP in the first run and pooled in the second, and every other
# line must match.  No seed given: the fixed seeds of `make test`, or with
# CXLSHIM_TEST_LONG=1 a soak of SOAK_SEEDS (160) seeds drawn from the
# clock (each printed, so a failure can be run again by its seed).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SHIM=${SHIM:-$PWD/$BUILD/libcxlshim.so}
PROG=$BUILD/tests/sock_diff_check
OPS=${SOCK_DIFF_OPS:-120}
TMP=$(mktemp -d /tmp/cxlshim-diff.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# seeds that once told the kernel and the shim apart (see git log), then
# a few more
FIXED="1 2 5 6 7 15 19 43 119 152"
if [ $# -gt 0 ]; then
	seeds="$*"
elif [ "${CXLSHIM_TEST_LONG:-0}" = 1 ]; then
	base=$(date +%s)
	seeds=$(seq "$base" $((base + ${SOAK_SEEDS:-160} - 1)))
else
	seeds=$FIXED
fi

# one SEED: 0 when the answers match
one() {
	local seed=$1
	timeout 60 "$PROG" "$seed" "$OPS" >"$TMP/kernel" 2>"$TMP/kernel.err" ||
		{ echo "FAIL seed $seed: plain run"; cat "$TMP/kernel" "$TMP/kernel.err"; return 1; }
	timeout 60 env LD_PRELOAD="$SHIM" "$PROG" "$seed" "$OPS" >"$TMP/shim" 2>"$TMP/shim.err" ||
		{ echo "FAIL seed $seed: run under the preload"; cat "$TMP/shim" "$TMP/shim.err"; return 1; }
	cat "$TMP/shim.err" # the shim's warnings, if any, for the log
	head -n1 "$TMP/kernel" | grep -qx 'pooled 0' ||
		{ echo "FAIL seed $seed: the plain pair was not TCP"; return 1; }
	head -n1 "$TMP/shim" | grep -qx 'pooled 1' ||
		{ echo "FAIL seed $seed: the pair under the preload was not pooled"; return 1; }
	if ! diff <(tail -n +2 "$TMP/kernel") <(tail -n +2 "$TMP/shim") >"$TMP/diff"; then
		# the calls drawn after the first difference depend on it: show
		# the lines before it and the first few that differ
		local at
		at=$(diff <(tail -n +2 "$TMP/kernel") <(tail -n +2 "$TMP/shim") | head -n1 | grep -o '^[0-9]*')
		echo "FAIL seed $seed: answers differ from line $at (< kernel, > shim); before it:"
		tail -n +2 "$TMP/kernel" | head -n $((at - 1)) | tail -n 12
		head -n 16 "$TMP/diff"
		echo "again: $0 $seed"
		return 1
	fi
	echo "seed $seed: $(($(wc -l <"$TMP/kernel") - 2)) lines alike"
	return 0
}

failed=0
n=0
for s in $seeds; do
	one "$s" || failed=$((failed + 1))
	n=$((n + 1))
done
[ $failed = 0 ] || { echo "FAIL: $failed of $n seeds differ"; exit 1; }
echo "PASS: $n seeds of $OPS calls answered as the kernel answers them"

#!/usr/bin/env bash
# tests/sock/args_diff.sh - bad arguments on a pooled socket get the
# kernel's answers: sock_args_check runs without the preload (plain TCP,
# the reference) and with it (a pooled pair); the pair must be TCP in the
# first run and pooled in the second, and every other line must match,
# the bytes written before the bad calls included.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SHIM=${SHIM:-$PWD/$BUILD/libcxlshim.so}
PROG=$BUILD/tests/sock_args_check
TMP=$(mktemp -d /tmp/cxlshim-args.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

timeout 60 "$PROG" >"$TMP/kernel" 2>"$TMP/kernel.err" ||
	{ echo "FAIL: plain run"; cat "$TMP/kernel" "$TMP/kernel.err"; exit 1; }
timeout 60 env LD_PRELOAD="$SHIM" "$PROG" >"$TMP/shim" 2>"$TMP/shim.err" ||
	{ echo "FAIL: run under the preload"; cat "$TMP/shim" "$TMP/shim.err"; exit 1; }
cat "$TMP/shim.err" # the shim's warnings, if any, for the log
head -n1 "$TMP/kernel" | grep -qx 'pooled 0' || { echo "FAIL: the plain pair was not TCP"; exit 1; }
head -n1 "$TMP/shim" | grep -qx 'pooled 1' || { echo "FAIL: the pair under the preload was not pooled"; exit 1; }
grep -qx 'kept: kept' "$TMP/kernel" || { echo "FAIL: the reference lost the bytes"; exit 1; }
if ! diff <(tail -n +2 "$TMP/kernel") <(tail -n +2 "$TMP/shim"); then
	echo "FAIL: answers differ (< kernel, > shim)"
	exit 1
fi
echo "PASS: $(($(wc -l <"$TMP/kernel") - 2)) calls answered as the kernel answers them"

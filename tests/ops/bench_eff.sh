#!/usr/bin/env bash
# tests/ops/bench_eff.sh - coll_perf's pool efficiency rows where a row's
# pool bytes pass the reference buffers (2 x the size): a Reduce root
# folds (n-1) peers' bytes, an AllReduce rank moves S + 2(n-1)S/n.  The
# references once ran past their buffers there (a crash at 4 ranks one
# run in three).  Each run must finish, verify, and print a row per size.
# At 1 rank a gather has no pool bytes: its percentages of the (0 GB/s)
# bounds are N/A, not 0.0.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for run in "reduce 8" "all_reduce 4" "alltoall 3" "gather 1"; do
	set -- $run
	rc=0
	LD_LIBRARY_PATH=$PWD/$B/emu LD_PRELOAD=$PWD/$B/libcxlshim.so \
		"$B/bench/coll_perf" -C "$1" -N "$2" -b 1M -e 2M -f 2 -p 1 -n 2 -w 1 >"$out" 2>&1 || rc=$?
	[ $rc = 0 ] || { cat "$out"; echo "FAIL: coll_perf -C $1 -N $2 -p 1 exited $rc"; exit 1; }
	tail -3 "$out"
	# a row per table row of 1 MiB or more (sizes round to the rank count)
	want=$(awk '/^ +[0-9]+ / && $1 >= 1048576 { n++ } END { print n + 0 }' "$out")
	rows=$(grep -cE '^# +[0-9]+ +float ' "$out" || true)
	[ "$want" -gt 0 ] && [ "$rows" = "$want" ] ||
		{ cat "$out"; echo "FAIL: $1 at $2 ranks: $rows efficiency rows of $want"; exit 1; }
	grep -q '^# Out of bounds values : 0 OK' "$out" ||
		{ cat "$out"; echo "FAIL: $1 at $2 ranks: wrong values"; exit 1; }
	[ "$2" != 1 ] || ! awk '/^# +[0-9]+ +float / && $9 != "N/A" { bad = 1 } END { exit !bad }' "$out" ||
		{ cat "$out"; echo "FAIL: $1 at 1 rank: a percentage of a 0 bound"; exit 1; }
done
echo "efficiency rows: ok"

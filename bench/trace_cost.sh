#!/usr/bin/env bash
# bench/trace_cost.sh - what tracing costs a collective: the same coll_perf
# job with trace.level off, ops (the default) and stages, alternated
# ROUNDS times in one run, small messages (where a per-op cost shows).
# Prints the median out-of-place time per size and level, and the ratios
# ops/off and stages/off.
#
# usage: bench/trace_cost.sh [ROUNDS] [coll_perf options]   (default:
#        3 rounds, -C all_gather -N 2 -b 4K -e 1M -f 4 -n 200 -w 20)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${1:-3}
shift || true
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(-C all_gather -N 2 -b 4K -e 1M -f 4 -n 200 -w 20)
out=$(mktemp -d /tmp/cxlshim-trace-cost.XXXXXX)
trap 'rm -rf "$out"' EXIT
export LD_LIBRARY_PATH=$PWD/$BUILD/emu CXLSHIM_POOL_PATH=/dev/shm/cxlshim-trace-cost-$$.pool
trap 'rm -rf "$out" "$CXLSHIM_POOL_PATH"' EXIT
for r in $(seq "$ROUNDS"); do
	for level in off ops stages; do
		CXLSHIM_TRACE_LEVEL=$level LD_PRELOAD=$PWD/$BUILD/libcxlshim.so \
			"$BUILD/bench/coll_perf" "${ARGS[@]}" |
			awk '!/^#/ && NF >= 12 { print $1, $6 }' >"$out/$level.$r"
	done
done
echo "coll_perf ${ARGS[*]}, $ROUNDS rounds alternated; median out-of-place time (us)"
printf '%12s %10s %10s %10s %9s %9s\n' bytes off ops stages ops/off stages/off
for size in $(cut -d' ' -f1 "$out/off.1"); do
	med() { cat "$out/$1".* | awk -v s="$size" '$1 == s { print $2 }' | sort -g |
		awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
	a=$(med off) b=$(med ops) c=$(med stages)
	awk -v s="$size" -v a="$a" -v b="$b" -v c="$c" \
		'BEGIN { printf "%12d %10.2f %10.2f %10.2f %9.3f %9.3f\n", s, a, b, c, b / a, c / a }'
done

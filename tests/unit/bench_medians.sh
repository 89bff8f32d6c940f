#!/usr/bin/env bash
# tests/unit/bench_medians.sh - bench/medians.awk and the round order of
# bench/lib.sh on tables whose answers are known: medians of odd and even
# counts, ranges, the best baseline median, per-round ratios paired by
# round (a missing round left out), N/A cells, a side with no runs, the
# pool efficiency medians against both bounds (an N/A in-place cell); the rack
# ping-pong medians of bench/sock_rack.sh (bench/rack_medians.awk).
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$tmp/out"; exit 1; }

# table FILE OUT_BUSBW IN_BUSBW [EFF_OUT% EFF_IN% PIPE_OUT% PIPE_IN%]: one 4 MiB float row
# (and a second 8 MiB row at twice the busbw), nccl-tests layout
table() {
	local f=$1 o=$2 i=$3
	{
		echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
		printf '%12s  %12s  %8s  %6s  %6s  %7s %7s %7s %6s  %7s %7s %7s %6s\n' \
			4194304 524288 float none -1 100.0 1.0 "$o" 0 100.0 1.0 "$i" 0
		printf '%12s  %12s  %8s  %6s  %6s  %7s %7s %7s %6s  %7s %7s %7s %6s\n' \
			8388608 1048576 float none -1 100.0 1.0 \
			"$(awk -v x="$o" 'BEGIN { print (x ~ /^[0-9.]+$/) ? 2 * x : x }')" 0 100.0 1.0 \
			"$(awk -v x="$i" 'BEGIN { print (x ~ /^[0-9.]+$/) ? 2 * x : x }')" 0
		if [ $# -ge 7 ]; then
			echo "#       size      type    root      solo     bound  out-of-place                        in-place                        pipe     out      in"
			printf '# %10s  %8s  %6s  %8s  %8s  %12s  %8s  %6s  %12s  %8s  %6s  %8s  %6s  %6s\n' \
				4194304 float -1 40.00 20.00 5242880 5.00 "$4" 4194304 9.00 "$5" 10.00 "$6" "$7"
		fi
	} >"$f"
}

# shim: 3 rounds, out 4 / 6 / 5 (median 5, range 4-6), in 9 / 7 / 8
table "$tmp/shim.1.txt" 4.00 9.00 20.0 45.0 50.0 80.0
table "$tmp/shim.2.txt" 6.00 7.00 30.0 35.0 70.0 90.0
table "$tmp/shim.3.txt" 5.00 8.00 25.0 40.0 60.0 85.0
# openmpi: rounds 1 and 3 only (2 failed), out 10 / 8 (median 9), in N/A
table "$tmp/openmpi.1.txt" 10.00 N/A
table "$tmp/openmpi.3.txt" 8.00 N/A
# mpich: out 2 / 3 / 4 (median 3), in 2 / 2 / 2
table "$tmp/mpich.1.txt" 2.00 2.00
table "$tmp/mpich.2.txt" 3.00 2.00
table "$tmp/mpich.3.txt" 4.00 2.00

# shellcheck source=bench/lib.sh
. bench/lib.sh
BENCH_OUT=$tmp REPS=3 median_tables "test" shim openmpi mpich nccl >"$tmp/out"

row() { awk -v sec="$1" -v size="$2" '
	/^# out-of-place/ { s = "out" } /^# in-place/ { s = "in" } /pool efficiency/ { s = "eff" }
	s == sec && $1 == size' "$tmp/out"; }
expect() { # SECTION SIZE REGEX WHAT
	row "$1" "$2" | grep -Eq "$3" || fail "$4: $1 $2 does not match /$3/: $(row "$1" "$2")"
}

# out-of-place 4 MiB: shim 5 [4-6], openmpi 9 [8-10], mpich 3 [2-4];
# ratio 5/9 = 0.56; rounds: 1: 4/10, 2: 6/3 (openmpi missing), 3: 5/8
expect out 4194304 ' 5\.00 \[ 4\.00- 6\.00\] +9\.00 \[ 8\.00-10\.00\] +3\.00 \[ 2\.00- 4\.00\]' "out medians"
expect out 4194304 ' 0\.56 +0\.40- 2\.00$' "out ratio of medians and per-round range"
# the second row scales with its values, independent of the first
expect out 8388608 ' 10\.00 \[ 8\.00-12\.00\] +18\.00 \[16\.00-20\.00\]' "second row"
# in-place: openmpi all N/A, best is mpich 2; ratio 8/2 = 4; rounds 4.5, 3.5, 4
expect in 4194304 ' 8\.00 \[ 7\.00- 9\.00\] +N/A +2\.00 \[ 2\.00- 2\.00\] +N/A +4\.00 +3\.50- 4\.50$' "in-place with an N/A side"
# a side with no runs at all: a column of N/A, header count 0
grep -q 'nccl (0)' "$tmp/out" || fail "side without runs missing from the header"
# pool efficiency: out 20/30/25 -> 25 [20-30], in 45/35/40 -> 40 [35-45]
# against the pipe bound: out 50/70/60 -> 60 [50-70], in 80/90/85 -> 85 [80-90]
expect eff 4194304 ' 20\.00 +25\.0 \[ 20\.0- 30\.0\] +40\.0 \[ 35\.0- 45\.0\] +10\.00 +60\.0 \[ 50\.0- 70\.0\] +85\.0 \[ 80\.0- 90\.0\]$' \
	"pool efficiency"

# an in-place cell of N/A (sendrecv has none): pipe in N/A
mkdir "$tmp/pipe"
table "$tmp/pipe/shim.1.txt" 4.00 9.00 20.0 45.0 50.0 N/A
table "$tmp/pipe/shim.2.txt" 6.00 7.00 30.0 35.0 70.0 N/A
table "$tmp/pipe/shim.3.txt" 5.00 8.00 25.0 40.0 60.0 N/A
BENCH_OUT=$tmp/pipe REPS=3 median_tables "test" shim mpich >"$tmp/out"
expect eff 4194304 ' 25\.0 \[ 20\.0- 30\.0\] +40\.0 \[ 35\.0- 45\.0\] +10\.00 +60\.0 \[ 50\.0- 70\.0\] +N/A$' \
	"pool efficiency against the pipe bound"

# even count: two shim rounds, out 4 and 6 -> 5
BENCH_OUT=$tmp REPS=2 median_tables "test" shim mpich >"$tmp/out"
expect out 4194304 ' 5\.00 \[ 4\.00- 6\.00\] +2\.50 \[ 2\.00- 3\.00\] +2\.00 ' "even-count median"

# no rows at all says so instead of printing empty tables
mkdir "$tmp/empty"
BENCH_OUT=$tmp/empty REPS=3 median_tables "test" shim mpich >"$tmp/out"
grep -q 'no result rows' "$tmp/out" || fail "empty input"

# the round order rotates: round 2 starts with the second side
[ "$(rounds_order 1 a b c | tr '\n' ' ')" = "a b c " ] || fail "round 1 order"
[ "$(rounds_order 2 a b c | tr '\n' ' ')" = "b c a " ] || fail "round 2 order"
[ "$(rounds_order 4 a b c | tr '\n' ' ')" = "a b c " ] || fail "round 4 order"

# -R is the scripts' own option: neither coll_perf nor mpi_perf sees it
parse_bench_args CXLSHIM_X=1 -R 5 -C all_gather -N 4 -b 4M -p 1
[ "$REPS" = 5 ] || fail "-R 5 gave REPS=$REPS"
[ "$NRANKS" = 4 ] || fail "-N 4 gave NRANKS=$NRANKS"
[ "${COLL_ARGS[*]}" = "-C all_gather -N 4 -b 4M -p 1" ] || fail "coll_perf args: ${COLL_ARGS[*]}"
[ "${MPI_ARGS[*]}" = "-C all_gather -b 4M" ] || fail "mpi_perf args: ${MPI_ARGS[*]}"
[ "${EXTRA_ENV[*]}" = "CXLSHIM_X=1" ] || fail "extra env: ${EXTRA_ENV[*]}"
BENCH_REPS=2 parse_bench_args -C broadcast
[ "$REPS" = 2 ] || fail "BENCH_REPS=2 gave REPS=$REPS"
if (parse_bench_args -R 0 -C broadcast) 2>/dev/null; then fail "-R 0 accepted"; fi
# bench/rack_medians.awk: sock_rack.sh's rounds, prefixed as rack.sh prints
# them; 64 B: ratios 0.90, 1.30, 1.00 (median 1.00), a busy-poll N/A left out
printf '%s\n' '[b] round 1 size 64 net 100 pool 90 busy 5' \
	'[b] round 2 size 64 net 200 pool 260 busy 4' 'noise round x' \
	'[b] round 3 size 64 net 150 pool 150 busy N/A' \
	'[b] round 1 size 65536 net 1000 pool 300 busy 200' >"$tmp/rack.txt"
awk -f bench/stats.awk -f bench/rack_medians.awk "$tmp/rack.txt" >"$tmp/out"
grep -Eq '^ +64 \| +150\.0 +150\.0 +4\.5 \| 1\.00 \[0\.90-1\.30\] +\| 0\.04 \[0\.02-0\.05\] +\| 3$' \
	"$tmp/out" || fail "rack medians, 64 B"
grep -Eq '^ +65536 \| +1000\.0 +300\.0 +200\.0 \| 0\.30 \[0\.30-0\.30\] +\| 0\.20 \[0\.20-0\.20\] +\| 1$' \
	"$tmp/out" || fail "rack medians, 64 KiB"
echo "bench medians: all checks passed"

#!/usr/bin/env bash
# bench/sock_callgrind.sh - instructions (callgrind Ir) per 64 B round trip
# of sock_perf's ping-pong, client and server, TCP and the pool (no
# busy-poll), counted under valgrind: deterministic up to which reads find
# their bytes already there and which sleep, so load hardly matters.
#
#   bench/sock_callgrind.sh [-L path/libcxlshim.so] [-n N] [-s SIZE] [-k DIR] [-t TOP]
#
# Two runs of N and 2N round trips per side (plus sock_perf's tenth of
# warm-up each); their difference divided by the round trips between them
# leaves the setup (meeting, preload start, exit) out.  "loop" is the
# benchmark's read and write calls with everything under them; "total"
# also holds the client's sort of its latencies.  Then the shim's functions
# per round trip, self and inclusive (callgrind_annotate --inclusive).
# -k keeps the callgrind files in DIR.  bench/README.md, "Shim instructions
# per pooled round trip".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
LIB=build/libcxlshim.so N=2000 SIZE=64 KEEP= TOP=30
while getopts "L:n:s:k:t:" o; do
	case $o in
	L) LIB=$OPTARG ;;
	n) N=$OPTARG ;;
	s) SIZE=$OPTARG ;;
	k) KEEP=$OPTARG ;;
	t) TOP=$OPTARG ;;
	*) exit 2 ;;
	esac
done
command -v valgrind >/dev/null || { echo "SKIP: valgrind not installed"; exit 77; }
make -s build/bench/sock_perf || exit 1
LIB=$(realpath "$LIB") || exit 1
DIR=${KEEP:-$(mktemp -d /tmp/sock_callgrind.XXXXXX)}
[ -n "$KEEP" ] || trap 'rm -rf "$DIR"' EXIT
mkdir -p "$DIR"
POOL=/dev/shm/cxlshim-callgrind-$$.pool
trap 'rm -f $POOL; [ -n "$KEEP" ] || rm -rf "$DIR"' EXIT

# run MODE ITERS: one callgrind file per process in $DIR/MODE-ITERS
run() {
	local out=$DIR/$1-$2 pre=()
	rm -rf "$out" && mkdir -p "$out"
	[ "$1" = pool ] && pre=(LD_PRELOAD="$LIB")
	env "${pre[@]}" CXLSHIM_POOL_PATH=$POOL CXLSHIM_SOCK_BUSY_POLL_US=0 \
		valgrind -q --tool=callgrind --trace-children=yes \
		--callgrind-out-file="$out/cg.%p" \
		build/bench/sock_perf -w pingpong -z "$SIZE" -n "$2" >/dev/null || exit 1
}

# file MODE ITERS SIDE: the callgrind file of the client or the server
file() {
	local f
	for f in "$DIR/$1-$2"/cg.*; do
		if grep -q serve_echo "$f"; then
			[ "$3" = server ] && echo "$f"
		else
			[ "$3" = client ] && echo "$f"
		fi
	done
}

# table A B RT: per function Ir of B minus A over RT round trips
table() {
	local a=$1 b=$2 rt=$3
	for incl in no yes; do
		for f in "$a" "$b"; do
			callgrind_annotate --auto=no --threshold=100 --inclusive=$incl "$f" |
				sed "s|^|$incl $([ "$f" = "$a" ] && echo A || echo B) |"
		done
	done | awk -v rt="$rt" -v top="$TOP" '
	$3 ~ /^[0-9,]+$/ && $4 ~ /^\(/ {
		v = $3; gsub(",", "", v)
		name = $0; sub(/^[^)]*\)  */, "", name)
		if (name ~ /PROGRAM TOTALS/) { tot[$2] = v; next }
		if (name !~ /\]$/) # run in the tree, inclusive lists some twice
			next
		obj = name; sub(/.*\[/, "", obj); sub(/\]$/, "", obj); sub(/.*\//, "", obj)
		sub(/ \[.*$/, "", name); sub(/^.*:/, "", name)
		if (obj !~ /cxlshim/) {
			if (name !~ /^tu_(read|write)_all$/)
				next
			name = name " (benchmark)"
		}
		k = name
		if ($1 == "yes") incl[k] += ($2 == "B" ? v : -v)
		else self[k] += ($2 == "B" ? v : -v)
		seen[k] = 1
	}
	END {
		loop = (incl["tu_read_all (benchmark)"] + incl["tu_write_all (benchmark)"]) / rt
		printf "total %.0f  loop %.0f  Ir per round trip\n", (tot["B"] - tot["A"]) / rt, loop
		for (k in seen)
			if (self[k] / rt >= 2 || self[k] / rt <= -2 || incl[k] / rt >= 2)
				printf "%8.0f %8.0f  %s\n", self[k] / rt, incl[k] / rt, k | "sort -k2,2nr | head -" top
	}'
}

for mode in tcp pool; do
	run $mode "$N"
	run $mode $((2 * N))
done
RT=$((N * 11 / 10)) # sock_perf warms up with a tenth more
for mode in tcp pool; do
	for side in client server; do
		echo "== $mode $side, $SIZE B ($N round trips between the runs)"
		printf "%8s %8s  %s\n" self incl function
		table "$(file $mode "$N" $side)" "$(file $mode $((2 * N)) $side)" $RT
	done
done

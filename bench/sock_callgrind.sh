#!/usr/bin/env bash
# bench/sock_callgrind.sh - instructions (callgrind Ir) per 64 B round trip
# of sock_perf's ping-pong, client and server, TCP and the pool (no
# busy-poll), counted under valgrind: deterministic but for which reads
# find their bytes already there and which sleep.  Each end thinks THINK us
# before it answers (sock_perf -d, default 1000), so that every read sleeps
# as across hosts, whatever the load; -d 0 gives the unpaced mix.
#
#   bench/sock_callgrind.sh [-L lib] [-n N] [-s SIZE] [-d THINK] [-k DIR] [-t TOP]
#
# Two runs of N and 2N round trips per side (plus sock_perf's tenth of
# warm-up each); their difference divided by the round trips between them
# leaves the setup (meeting, preload start, exit) out; it is printed with
# the reads and sleeps (wait_for) per round trip.  "loop" is the
# benchmark's read and write calls with everything under them; "total"
# also holds the client's sort of its latencies.  Then the shim's functions
# per round trip, self and inclusive (callgrind_annotate --inclusive).
# -k keeps the callgrind files in DIR.  bench/README.md, "Shim instructions
# per pooled round trip".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
LIB=build/libcxlshim.so N=1000 SIZE=64 THINK=1000 KEEP= TOP=30
while getopts "L:n:s:d:k:t:" o; do
	case $o in
	L) LIB=$OPTARG ;;
	n) N=$OPTARG ;;
	s) SIZE=$OPTARG ;;
	d) THINK=$OPTARG ;;
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
		build/bench/sock_perf -w pingpong -z "$SIZE" -n "$2" -d "$THINK" >/dev/null || exit 1
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

# table A B RT: per function Ir of B minus A over RT round trips, from
# callgrind_annotate's caller trees: self on a function's own line,
# inclusive the sum of its calls' costs (the caller lines above it); a
# function inlined from a header is listed once per file and added up.
# Listed from / so that paths are whole.
table() {
	local a=$1 b=$2 rt=$3
	for f in "$a" "$b"; do
		(cd / && callgrind_annotate --auto=no --threshold=100 --tree=caller "$f") |
			sed "s|^|$([ "$f" = "$a" ] && echo A || echo B) |"
	done | awk -v rt="$rt" -v top="$TOP" '
	function fname(line, path) {
		sub(/^[^)]*\)  [<*] +/, "", line); sub(/ \(.*$/, "", line); sub(/ \[.*$/, "", line)
		path = line; sub(/:[^:]*$/, "", path); sub(/^.*:/, "", line)
		if (path ~ /\/tests\/sock\/sock_util\.c$/ && line ~ /^tu_(read|write)_all$/)
			return line " (benchmark)"
		return path ~ "/(core|shim|policy)/[^/]*(/[^/]*)?\\.[ch]$" ? line : ""
	}
	{ v = $2; gsub(",", "", v) }
	$0 ~ /PROGRAM TOTALS/ { tot[$1] = v; next }
	NF <= 1 { calls = 0; next }
	$0 ~ /^[^)]*\)  < / { calls += v; next }
	$0 ~ /^[^)]*\)  \* / {
		n = fname($0)
		if (n != "") { self[$1, n] += v; incl[$1, n] += calls; seen[n] = 1 }
		calls = 0
	}
	END {
		r = "tu_read_all (benchmark)"; w = "tu_write_all (benchmark)"
		loop = (incl["B", r] + incl["B", w] - incl["A", r] - incl["A", w]) / rt
		printf "total %.0f  loop %.0f  Ir per round trip\n", (tot["B"] - tot["A"]) / rt, loop
		for (n in seen) {
			s = (self["B", n] - self["A", n]) / rt
			i = (incl["B", n] - incl["A", n]) / rt
			if (s >= 2 || s <= -2 || i >= 2)
				printf "%8.0f %8.0f  %s\n", s, i, n | "sort -k2,2nr -k1,1nr | head -" top
		}
	}'
}

# calls FILE FUNC: how many times the shim's FUNC was called
calls() {
	(cd / && callgrind_annotate --auto=no --threshold=100 --tree=caller "$1") | awk -v fn="$2" '
	/^ *[0-9,]+ .*  < / { c = $0; sub(/.*\(/, "", c); sub(/x\).*/, "", c); gsub(",", "", c); n += c; next }
	/  \*  / { if ($0 ~ ":" fn " \\[") { print n; found = 1; exit } }
	/^ *$/ { n = 0 }
	END { if (!found) print 0 }'
}

# per_rt MODE SIDE FUNC: calls of FUNC per round trip
per_rt() {
	local a b
	a=$(calls "$(file "$1" "$N" "$2")" "$3")
	b=$(calls "$(file "$1" $((2 * N)) "$2")" "$3")
	awk -v a="$a" -v b="$b" -v rt="$RT" 'BEGIN { printf "%.2f", (b - a) / rt }'
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
		[ $mode = pool ] && echo "reads $(per_rt $mode $side cxls_sock_recvv_off)," \
			"sleeps $(per_rt $mode $side wait_for) per round trip"
	done
done

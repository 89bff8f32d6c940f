#!/usr/bin/env bash
# bench/sock_redis_ir.sh - user-space instructions (callgrind Ir) per
# redis request, and the shim's share of them, in redis-server or in
# redis-benchmark, TCP or the pool.  Instructions count where every one is
# emulated (the QEMU TCG guests); unlike wall clock they do not move with
# the load of this shared machine (how often a loop sleeps still does).
#
#   bench/sock_redis_ir.sh [-L lib.so] [-N requests] [-P pipeline] [-c srv|cli] tcp|pool
#
# One process (-c: srv, the default, or cli) runs under callgrind, the
# other natively (both: both under callgrind, the client's Ir counted); both under the preload (pool: the library, default
# build/libcxlshim.so) or neither (tcp).  redis-benchmark -c 50 -t get
# -n N (20000) -P P (1).  The server's counters are zeroed once it
# answers, so its start (mapping the pool) is left out; the client's
# include its start.  Prints Ir in all and per request, the shim's (every
# function of the library) and its functions from 0.5% of the shim's
# Ir up; the callgrind file is kept ($OUT-side-proc.out, OUT default
# /tmp/sock_redis_ir).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
LIB=$PWD/${BUILD:-build}/libcxlshim.so
N=20000
PIPE=1
PROC=srv
while getopts L:N:P:c: o; do
	case $o in
	L) LIB=$(realpath -m "$OPTARG") ;;
	N) N=$OPTARG ;;
	P) PIPE=$OPTARG ;;
	c) PROC=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
side=${1:?tcp or pool}
OUT=${OUT:-/tmp/sock_redis_ir}
for c in redis-server redis-benchmark redis-cli valgrind callgrind_annotate; do
	command -v $c >/dev/null || { echo "sock_redis_ir: $c not installed"; exit 77; }
done
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
POOL=/dev/shm/cxlshim-sockredisir-$$.pool
srv=
trap 'rm -f $POOL; [ -z "$srv" ] || kill $srv 2>/dev/null' EXIT
case $side in
# a meeting window for a peer slowed down 50x by callgrind
pool) PRE=(env LD_PRELOAD="$LIB" CXLSHIM_POOL_PATH="$POOL" CXLSHIM_SOCK_MEET_TIMEOUT_MS=10000) ;;
tcp) PRE=(env -u LD_PRELOAD) ;;
*) exit 2 ;;
esac
[ "$side" = tcp ] || [ -f "$LIB" ] || { echo "sock_redis_ir: no library $LIB"; exit 2; }
file=$OUT-$side-$PROC.out
rm -f "$file" "$file".*
CG=(valgrind --tool=callgrind --trace-children=no --callgrind-out-file="$file")
VS=() VC=()
case $PROC in
srv) VS=("${CG[@]}") ;;
cli) VC=("${CG[@]}") ;;
# both slowed alike, as in the QEMU guests; the client's file counted
both) VS=(valgrind --tool=callgrind --trace-children=no --callgrind-out-file=/dev/null)
	VC=("${CG[@]}") ;;
esac
"${PRE[@]}" "${VS[@]}" redis-server --port "$P" --save '' --appendonly no --bind 127.0.0.1 \
	>/dev/null 2>&1 &
srv=$!
for _ in $(seq 300); do redis-cli -p "$P" ping >/dev/null 2>&1 && break; sleep 0.2; done
[ "$PROC" = srv ] && callgrind_control -z $srv >/dev/null 2>&1
"${PRE[@]}" "${VC[@]}" redis-benchmark -p "$P" -c 50 -n "$N" -P "$PIPE" -t get --csv \
	2>/dev/null | tail -n 1 | cut -d, -f1-2
if [ "$PROC" = srv ]; then
	callgrind_control -d $srv >/dev/null 2>&1
	file=$file.1
fi
redis-cli -p "$P" shutdown nosave >/dev/null 2>&1
wait $srv 2>/dev/null
srv=
callgrind_annotate --inclusive=no --threshold=100 "$file" 2>/dev/null |
	awk -v n="$N" -v side="$side" -v proc="$PROC" -v pipe="$PIPE" '
/PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
/^-+$/ { sep++ }
sep == 6 && /libcxlshim/ {
	ir = $1; gsub(",", "", ir)
	fn = $0; sub(/ \[.*/, "", fn); sub(/.*:/, "", fn); sub(/\..*/, "", fn)
	f[fn] += ir; shim += ir
}
END {
	printf "%s %s -P %s: %.0f Ir/request, shim %.0f (%.1f%%)\n", proc, side, pipe,
	       total / n, shim / n, total ? 100 * shim / total : 0
	for (k in f)
		if (f[k] >= shim / 200)
			printf "  %8.1f  %s\n", f[k] / n, k | "sort -rn"
}'

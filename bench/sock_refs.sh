#!/usr/bin/env bash
# bench/sock_refs.sh - streaming throughput of large writes, three ways in
# one run: TCP loopback, the pool with every byte through the ring
# (sock.ref_min = 0: the pool before buffer classes) and the pool with
# large writes by reference.  The three alternate, N rounds each, and the
# median is printed: on a shared machine a single run moves by 2x.
#
#   bench/sock_refs.sh [-n rounds] [-T ms] [sizes...]   (default 7, 300, 64K 256K 1M 4M)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SHIM=$PWD/$BUILD/libcxlshim.so
PERF=$BUILD/bench/sock_perf
N=7
MS=300
while getopts n:T: o; do
	case $o in
	n) N=$OPTARG ;;
	T) MS=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- 64K 256K 1M 4M
export CXLSHIM_POOL_PATH=${CXLSHIM_POOL_PATH:-/dev/shm/cxlshim-sockrefs-$$.pool}
trap 'rm -f /dev/shm/cxlshim-sockrefs-$$.pool' EXIT

stream() { env "$@" "$PERF" -w stream -z "$size" -n "$MS" | awk '/^RESULT/ { print $2 }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }'; }

echo "# streaming GB/s, median of $N alternating runs of $MS ms, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%7s | %8s %8s %8s | %8s %8s %8s\n' size tcp ring ref ring/tcp ref/tcp ref/ring
for size in "$@"; do
	t=() r=() f=()
	for ((i = 0; i < N; i++)); do
		t+=("$(stream -u LD_PRELOAD)")
		r+=("$(stream LD_PRELOAD="$SHIM" CXLSHIM_SOCK_REF_MIN=0)")
		f+=("$(stream LD_PRELOAD="$SHIM")")
	done
	T=$(median "${t[@]}") R=$(median "${r[@]}") F=$(median "${f[@]}")
	printf '%7s | %8s %8s %8s | %8s %8s %8s\n' "$size" "$T" "$R" "$F" "$(ratio "$T" "$R")" \
		"$(ratio "$T" "$F")" "$(ratio "$R" "$F")"
done

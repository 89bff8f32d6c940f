#!/usr/bin/env bash
# bench/sock_tools.sh - real programs, plain TCP loopback versus the same
# programs under the preload (the pool), in one run, same machine.
#
#   bench/sock_tools.sh [-B busy_poll_us] [-r]
#
# -r: redis-benchmark only (a quick run to repeat).
#
# redis-benchmark GET/SET (50 clients, 100k requests, plain and -P 16):
# requests/s and p99 from its CSV; iperf3 one stream and -P 4; sockperf
# ping-pong (64 B) p50/p99 and throughput (64 KB messages).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SHIM=$PWD/$BUILD/libcxlshim.so
BUSY=0
ONLY_REDIS=0
while getopts B:r o; do
	case $o in
	B) BUSY=$OPTARG ;;
	r) ONLY_REDIS=1 ;;
	*) exit 2 ;;
	esac
done
export CXLSHIM_POOL_PATH=${CXLSHIM_POOL_PATH:-/dev/shm/cxlshim-sockbench-$$.pool}
srv=
trap 'rm -f /dev/shm/cxlshim-sockbench-$$.pool; [ -z "$srv" ] || kill $srv 2>/dev/null' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# mode tcp|pool CMD...
mode() {
	local m=$1
	shift
	if [ "$m" = pool ]; then
		env LD_PRELOAD="$SHIM" CXLSHIM_SOCK_BUSY_POLL_US="$BUSY" "$@"
	else
		env -u LD_PRELOAD "$@"
	fi
}
# serve tcp|pool CMD...: a server in the background, its own pid in srv
serve() {
	local m=$1
	shift
	if [ "$m" = pool ]; then
		env LD_PRELOAD="$SHIM" CXLSHIM_SOCK_BUSY_POLL_US="$BUSY" "$@" >/dev/null 2>&1 &
	else
		env -u LD_PRELOAD "$@" >/dev/null 2>&1 &
	fi
	srv=$!
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }'; }

echo "# real tools: TCP loopback vs the pool (busy-poll ${BUSY} us), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
declare -A R
for m in tcp pool; do
	p=$(port)
	serve $m redis-server --port "$p" --save '' --appendonly no --bind 127.0.0.1
	sleep 0.5
	for pipe in 1 16; do
		while IFS=, read -r test rps avg min p50 p95 p99 max; do
			test=${test//\"/}
			R[$m,redis,$test,$pipe,rps]=${rps//\"/}
			R[$m,redis,$test,$pipe,p99]=${p99//\"/}
		done < <(mode $m redis-benchmark -p "$p" -c 50 -n 100000 -P $pipe -t set,get --csv 2>/dev/null | tail -n +2)
	done
	kill $srv
	wait $srv 2>/dev/null
	[ $ONLY_REDIS = 1 ] && continue
	p=$(port)
	serve $m iperf3 -s -p "$p"
	sleep 0.3
	R[$m,iperf,1]=$(mode $m iperf3 -c 127.0.0.1 -p "$p" -t 2 -J | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))')
	R[$m,iperf,4]=$(mode $m iperf3 -c 127.0.0.1 -p "$p" -t 2 -P 4 -J | python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))')
	kill $srv
	wait $srv 2>/dev/null
	p=$(port)
	serve $m sockperf sr --tcp -i 127.0.0.1 -p "$p"
	sleep 0.5
	out=$(mode $m sockperf pp --tcp -i 127.0.0.1 -p "$p" -t 2 -m 64 2>&1)
	R[$m,spp,50]=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$out")
	R[$m,spp,99]=$(sed -n 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p' <<<"$out")
	out=$(mode $m sockperf tp --tcp -i 127.0.0.1 -p "$p" -t 2 -m 65000 2>&1)
	R[$m,stp]=$(sed -n 's/.*BandWidth is \([0-9.]*\) MBps.*/\1/p' <<<"$out")
	kill $srv
	wait $srv 2>/dev/null
done

printf '%-34s %12s %12s %7s\n' "measurement" "tcp" "pool" "ratio"
for pipe in 1 16; do
	for t in SET GET; do
		a=${R[tcp,redis,$t,$pipe,rps]:-0} b=${R[pool,redis,$t,$pipe,rps]:-0}
		printf '%-34s %12s %12s %7s\n' "redis $t -c 50 -P $pipe req/s" "$a" "$b" "$(ratio "$a" "$b")"
		a=${R[tcp,redis,$t,$pipe,p99]:-0} b=${R[pool,redis,$t,$pipe,p99]:-0}
		printf '%-34s %12s %12s %7s\n' "redis $t -c 50 -P $pipe p99 ms" "$a" "$b" "$(ratio "$a" "$b")"
	done
done
[ $ONLY_REDIS = 1 ] && exit 0
for n in 1 4; do
	a=${R[tcp,iperf,$n]:-0} b=${R[pool,iperf,$n]:-0}
	printf '%-34s %12s %12s %7s\n' "iperf3 -P $n Gbit/s" "$a" "$b" "$(ratio "$a" "$b")"
done
for q in 50 99; do
	a=${R[tcp,spp,$q]:-0} b=${R[pool,spp,$q]:-0}
	printf '%-34s %12s %12s %7s\n' "sockperf pp 64 B p$q us" "$a" "$b" "$(ratio "$a" "$b")"
done
a=${R[tcp,stp]:-0} b=${R[pool,stp]:-0}
printf '%-34s %12s %12s %7s\n' "sockperf tp 65000 B MB/s" "$a" "$b" "$(ratio "$a" "$b")"

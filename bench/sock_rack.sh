#!/usr/bin/env bash
# bench/sock_rack.sh - ping-pong across two QEMU guests (tests/qemu/rack.sh:
# ivshmem BAR as the pool, virtio-net between them): the guests' virtual
# network (no preload) versus the pool (preload), and the pool with
# busy-poll, interleaved in rounds in one boot.  Guest a serves, guest b
# measures.
#
#   bench/sock_rack.sh [-s] [-t] [-r ROUNDS] [path/to/rack.sh]   (default tests/qemu/rack.sh)
#
# -s: the short run (64 B and 64 KiB, 100 and 10 round trips per sample;
# the full one has 4 sizes of 300 and 30).  -r: rounds (default 5): each
# round measures every size on the network, the pool and the pool with
# busy-poll one after the other, so a round's three figures share the
# same minutes; -t measures real tools instead of sock_perf: iperf3 with
# 64 KiB writes for 4 s (Mbit/s) and redis-benchmark -c 50 -n 20000 SET
# and GET, plain and -P 16 (requests/s and p99 ms), each against its own
# server in guest a; -b US: the busy-poll window of the "busy" side (default
# 200 us for ping-pong, 100 for -t); -S N: N vCPUs per guest (rack.sh's
# default 2: two guests then ask 4 vCPUs of this machine's 2 cores); the summary gives per size (or figure) the median of each column and
# of the per-round ratios, with their range.  Under TCG every guest
# instruction is emulated and one sample swings 0.6-1.5x: absolute times
# are far from hardware, the medians of ratios are what to read.  Exit 77
# when guests cannot run.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SIZES="64 1024 65536 1048576" SMALL_N=300 LARGE_N=30 ROUNDS=5 TOOLS=0 BUSY= SMP=()
while [ $# -gt 0 ]; do
	case $1 in
	-b) BUSY=$2; shift 2 ;;
	-S) SMP=(--smp "$2"); shift 2 ;;
	-s) SIZES="64 65536" SMALL_N=100 LARGE_N=10; shift ;;
	-r) ROUNDS=$2; shift 2 ;;
	-t) TOOLS=1; shift ;;
	*) break ;;
	esac
done
RACK=${1:-tests/qemu/rack.sh}
[ -x "$RACK" ] || { echo "SKIP: $RACK not found"; exit 77; }
make -s build/libcxlshim.so build/bench/sock_perf || exit 1
POOL=/dev/shm/cxlshim-sockrack-$$.pool
OUT=$(mktemp)
trap 'rm -f $POOL $OUT' EXIT
# the guests cannot lock across hosts: format the pool here first
CXLSHIM_POOL_PATH=$POOL CXLSHIM_POOL_SIZE=256M LD_PRELOAD=$PWD/build/libcxlshim.so \
	build/bench/sock_perf -w pingpong -z 16 -n 10 >/dev/null 2>&1 || true

A='P=$PWD/build/bench/sock_perf; L=$PWD/build/libcxlshim.so
$P -w echo-server -p 5601 & env LD_PRELOAD=$L $P -w echo-server -p 5602 &
env LD_PRELOAD=$L CXLSHIM_SOCK_BUSY_POLL_US='"${BUSY:-200}"' $P -w echo-server -p 5603 &
while [ ! -e $RACK_DIR/done ]; do sleep 0.2; done'
# one line per round and size: "round R size S net P50 pool P50 busy P50"
B='P=$PWD/build/bench/sock_perf; L=$PWD/build/libcxlshim.so; sleep 2
p50() { "$@" -H $RACK_PEER_IP | cut -d" " -f2; }
for r in $(seq '"$ROUNDS"'); do for s in '"$SIZES"'; do
  n='"$SMALL_N"'; [ $s -ge 65536 ] && n='"$LARGE_N"'
  t=$(p50 $P -w pingpong -z $s -n $n -p 5601)
  p=$(p50 env LD_PRELOAD=$L $P -w pingpong -z $s -n $n -p 5602)
  b=$(p50 env LD_PRELOAD=$L CXLSHIM_SOCK_BUSY_POLL_US='"${BUSY:-200}"' $P -w pingpong -z $s -n $n -p 5603)
  echo "round $r size $s net $t pool $p busy $b"
done; done
touch $RACK_DIR/done'
# -t: the same three sides with iperf3 and redis-server in guest a, one
# line per round and figure, in the shape above ("size" names the figure)
if [ $TOOLS = 1 ]; then
	for t in iperf3 redis-server redis-benchmark; do
		command -v $t >/dev/null || { echo "SKIP: $t not installed (make deps)"; exit 77; }
	done
	A='L=$PWD/build/libcxlshim.so; B="CXLSHIM_SOCK_BUSY_POLL_US='"${BUSY:-100}"'"
R="--save \"\" --appendonly no --protected-mode no"
iperf3 -s -p 5201 >/dev/null 2>&1 & env LD_PRELOAD=$L iperf3 -s -p 5202 >/dev/null 2>&1 &
env LD_PRELOAD=$L $B iperf3 -s -p 5203 >/dev/null 2>&1 &
eval redis-server --port 6379 $R >/dev/null 2>&1 &
eval env LD_PRELOAD=$L redis-server --port 6380 $R >/dev/null 2>&1 &
eval env LD_PRELOAD=$L $B redis-server --port 6381 $R >/dev/null 2>&1 &
while [ ! -e $RACK_DIR/done ]; do sleep 0.2; done'
	# side S: the environment of side S (0 net, 1 pool, 2 busy-poll)
	B='L=$PWD/build/libcxlshim.so; sleep 3
side() { case $1 in 0) echo X=0 ;; 1) echo LD_PRELOAD=$L ;; *) echo LD_PRELOAD=$L CXLSHIM_SOCK_BUSY_POLL_US='"${BUSY:-100}"' ;; esac; }
mbit() { env $(side $1) iperf3 -c $RACK_PEER_IP -p $((5201 + $1)) -l 64K -t 4 -f m | awk "/receiver/ { print \$7 }"; }
# redis S P: "SET rps p99 GET rps p99"
rds() { env $(side $1) redis-benchmark -h $RACK_PEER_IP -p $((6379 + $1)) -c 50 -n 20000 -P $2 -t set,get --csv |
	tr -d \" | awk -F, "NR > 1 { printf \"%s %s %s \", \$1, \$2, \$7 }"; }
for r in $(seq '"$ROUNDS"'); do
  echo "round $r size iperf3-64K-Mbit/s net $(mbit 0) pool $(mbit 1) busy $(mbit 2)"
  for p in 1 16; do
    n=($(rds 0 $p)) o=($(rds 1 $p)) b=($(rds 2 $p))
    echo "round $r size redis-SET-P$p-rps net ${n[1]} pool ${o[1]} busy ${b[1]}"
    echo "round $r size redis-SET-P$p-p99ms net ${n[2]} pool ${o[2]} busy ${b[2]}"
    echo "round $r size redis-GET-P$p-rps net ${n[4]} pool ${o[4]} busy ${b[4]}"
    echo "round $r size redis-GET-P$p-p99ms net ${n[5]} pool ${o[5]} busy ${b[5]}"
  done
done
touch $RACK_DIR/done'
fi
"$RACK" --repo "$PWD" --pool $POOL "${SMP[@]}" --timeout $((120 + (60 + 120 * TOOLS) * ROUNDS)) --a "$A" --b "$B" | tee "$OUT"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || exit "$rc"
if [ $TOOLS = 1 ]; then
	echo "# iperf3 Mbit/s, redis requests/s and p99 ms, median of $ROUNDS rounds;" \
		"ratios: median [range] of per-round ratios (columns headed as for ping-pong)"
else
	echo "# one-way ping-pong p50 in us, median of $ROUNDS rounds; ratios: median [range] of per-round ratios"
fi
awk -f bench/stats.awk -f bench/rack_medians.awk "$OUT"

#!/usr/bin/env bash
# bench/sock_rack.sh - ping-pong across two QEMU guests (tests/qemu/rack.sh:
# ivshmem BAR as the pool, virtio-net between them): the guests' virtual
# network (no preload) versus the pool (preload), and the pool with
# busy-poll, interleaved in rounds in one boot.  Guest a serves, guest b
# measures.
#
#   bench/sock_rack.sh [-s] [-r ROUNDS] [path/to/rack.sh]   (default tests/qemu/rack.sh)
#
# -s: the short run (64 B and 64 KiB, 100 and 10 round trips per sample;
# the full one has 4 sizes of 300 and 30).  -r: rounds (default 5): each
# round measures every size on the network, the pool and the pool with
# busy-poll one after the other, so a round's three figures share the
# same minutes; the summary gives per size the median of each column and
# of the per-round ratios, with their range.  Under TCG every guest
# instruction is emulated and one sample swings 0.6-1.5x: absolute times
# are far from hardware, the medians of ratios are what to read.  Exit 77
# when guests cannot run.
set -uo pipefail
cd "$(dirname "$0")/.."
SIZES="64 1024 65536 1048576" SMALL_N=300 LARGE_N=30 ROUNDS=5
while [ $# -gt 0 ]; do
	case $1 in
	-s) SIZES="64 65536" SMALL_N=100 LARGE_N=10; shift ;;
	-r) ROUNDS=$2; shift 2 ;;
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
env LD_PRELOAD=$L CXLSHIM_SOCK_BUSY_POLL_US=200 $P -w echo-server -p 5603 &
while [ ! -e $RACK_DIR/done ]; do sleep 0.2; done'
# one line per round and size: "round R size S net P50 pool P50 busy P50"
B='P=$PWD/build/bench/sock_perf; L=$PWD/build/libcxlshim.so; sleep 2
p50() { "$@" -H $RACK_PEER_IP | cut -d" " -f2; }
for r in $(seq '"$ROUNDS"'); do for s in '"$SIZES"'; do
  n='"$SMALL_N"'; [ $s -ge 65536 ] && n='"$LARGE_N"'
  t=$(p50 $P -w pingpong -z $s -n $n -p 5601)
  p=$(p50 env LD_PRELOAD=$L $P -w pingpong -z $s -n $n -p 5602)
  b=$(p50 env LD_PRELOAD=$L CXLSHIM_SOCK_BUSY_POLL_US=200 $P -w pingpong -z $s -n $n -p 5603)
  echo "round $r size $s net $t pool $p busy $b"
done; done
touch $RACK_DIR/done'
"$RACK" --repo "$PWD" --pool $POOL --timeout $((120 + 60 * ROUNDS)) --a "$A" --b "$B" | tee "$OUT"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || exit "$rc"
echo "# one-way ping-pong p50 in us, median of $ROUNDS rounds; ratios: median [range] of per-round ratios"
awk -f bench/rack_medians.awk "$OUT"

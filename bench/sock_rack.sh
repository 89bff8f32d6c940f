#!/usr/bin/env bash
# bench/sock_rack.sh - ping-pong across two QEMU guests (tests/qemu/rack.sh:
# ivshmem BAR as the pool, virtio-net between them): the guests' virtual
# network (no preload) versus the pool (preload), and the pool with
# busy-poll, in one run.  Guest a serves, guest b measures.
#
#   bench/sock_rack.sh [-s] [path/to/rack.sh]     (default tests/qemu/rack.sh)
#
# -s: the short run (64 B and 64 KiB, 100 and 10 round trips: about two
# minutes under TCG; the full one, 4 sizes of 300 and 30, outlasts the
# rack's 240 s on a loaded machine).
#
# Under TCG every guest instruction is emulated: absolute times are far from
# hardware, the ratios are what to read.  Exit 77 when guests cannot run.
set -uo pipefail
cd "$(dirname "$0")/.."
SIZES="64 1024 65536 1048576" SMALL_N=300 LARGE_N=30
if [ "${1:-}" = -s ]; then
	SIZES="64 65536" SMALL_N=100 LARGE_N=10
	shift
fi
RACK=${1:-tests/qemu/rack.sh}
[ -x "$RACK" ] || { echo "SKIP: $RACK not found"; exit 77; }
make -s build/libcxlshim.so build/bench/sock_perf || exit 1
POOL=/dev/shm/cxlshim-sockrack-$$.pool
trap 'rm -f $POOL' EXIT
# the guests cannot lock across hosts: format the pool here first
CXLSHIM_POOL_PATH=$POOL CXLSHIM_POOL_SIZE=256M LD_PRELOAD=$PWD/build/libcxlshim.so \
	build/bench/sock_perf -w pingpong -z 16 -n 10 >/dev/null 2>&1 || true

A='P=$PWD/build/bench/sock_perf; L=$PWD/build/libcxlshim.so
$P -w echo-server -p 5601 & env LD_PRELOAD=$L $P -w echo-server -p 5602 &
env LD_PRELOAD=$L CXLSHIM_SOCK_BUSY_POLL_US=200 $P -w echo-server -p 5603 &
while [ ! -e $RACK_DIR/done ]; do sleep 0.2; done'
B='P=$PWD/build/bench/sock_perf; L=$PWD/build/libcxlshim.so; sleep 2
printf "%7s | %9s %9s %9s | %6s %6s\n" size "net p50" "pool p50" "busy p50" ratio busy
for s in '"$SIZES"'; do
  n='"$SMALL_N"'; [ $s -ge 65536 ] && n='"$LARGE_N"'
  t=$($P -w pingpong -z $s -n $n -H $RACK_PEER_IP -p 5601 | cut -d" " -f2)
  p=$(env LD_PRELOAD=$L $P -w pingpong -z $s -n $n -H $RACK_PEER_IP -p 5602 | cut -d" " -f2)
  b=$(env LD_PRELOAD=$L CXLSHIM_SOCK_BUSY_POLL_US=200 $P -w pingpong -z $s -n $n -H $RACK_PEER_IP -p 5603 | cut -d" " -f2)
  printf "%7s | %9s %9s %9s | %6.2f %6.2f\n" $s $t $p $b $(echo "$p / $t" | bc -l) $(echo "$b / $t" | bc -l)
done
touch $RACK_DIR/done'
"$RACK" --repo "$PWD" --pool $POOL --timeout 240 --a "$A" --b "$B"

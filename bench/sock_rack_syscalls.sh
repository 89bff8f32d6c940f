#!/usr/bin/env bash
# bench/sock_rack_syscalls.sh - the system calls of a 64 B ping-pong client
# across the two QEMU guests (tests/qemu/rack.sh), over their network and
# through the pool (no busy-poll): strace -c of sock_perf in guest b, N
# round trips each (default 1000), one table per side.
#
#   bench/sock_rack_syscalls.sh [-n N] [path/to/rack.sh]
#
# What a sleeping reader costs on each side (bench/README.md, "longer
# series").  Exit 77 when guests or strace cannot run.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
N=1000
[ "${1:-}" = -n ] && { N=$2; shift 2; }
RACK=${1:-tests/qemu/rack.sh}
[ -x "$RACK" ] || { echo "SKIP: $RACK not found"; exit 77; }
command -v strace >/dev/null || { echo "SKIP: strace not installed"; exit 77; }
make -s build/libcxlshim.so build/bench/sock_perf || exit 1
POOL=/dev/shm/cxlshim-racksys-$$.pool
trap 'rm -f $POOL' EXIT
# the guests cannot lock across hosts: format the pool here first
CXLSHIM_POOL_PATH=$POOL CXLSHIM_POOL_SIZE=256M LD_PRELOAD=$PWD/build/libcxlshim.so \
	build/bench/sock_perf -w pingpong -z 16 -n 10 >/dev/null 2>&1 || true
A='P=$PWD/build/bench/sock_perf; L=$PWD/build/libcxlshim.so
$P -w echo-server -p 5601 & env LD_PRELOAD=$L $P -w echo-server -p 5602 &
while [ ! -e $RACK_DIR/done ]; do sleep 0.2; done'
B='P=$PWD/build/bench/sock_perf; L=$PWD/build/libcxlshim.so; sleep 2
for side in net:5601 pool:5602; do
  pre=env; [ ${side%:*} = pool ] && pre="env LD_PRELOAD=$L"
  strace -c -o $RACK_DIR/cli.txt $pre $P -w pingpong -z 64 -n '"$N"' -H $RACK_PEER_IP -p ${side#*:} >/dev/null
  echo "${side%:*}: $(awk "\$NF ~ /^(read|write|sendto|recvfrom|ppoll|poll)\$/ { printf \"%s %s  \", \$4, \$NF }" $RACK_DIR/cli.txt)"
done
touch $RACK_DIR/done'
"$RACK" --repo "$PWD" --pool $POOL --timeout 300 --a "$A" --b "$B"

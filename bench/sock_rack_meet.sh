#!/usr/bin/env bash
# bench/sock_rack_meet.sh - how many of redis-benchmark's connections go
# through the pool across the two QEMU guests (tests/qemu/rack.sh), and
# what each run gave: redis-server under the preload in guest a,
# redis-benchmark -c 50 -n 20000 -t set,get (plain and -P 16) under the
# preload and CXLSHIM_DEBUG=INFO in guest b, its log lines counted.  A
# connection whose meeting ends on TCP says why ("..., staying on TCP").
#
#   bench/sock_rack_meet.sh [-r RUNS] [-L lib.so]
#
# One line per run: SET requests/s, p99 ms, GET requests/s, p99 ms, the
# pipelining, then the joins and the TCP decisions by reason.  Exit 77
# when guests cannot run.  -L runs another build of the library (copied
# into build/, the guests see the repository only).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
RUNS=4
LIB=$PWD/build/libcxlshim.so
while getopts r:L: o; do
	case $o in
	r) RUNS=$OPTARG ;;
	L) LIB=$PWD/build/sock_rack_meet-other.so # the guests see the repository only
	   cp "$OPTARG" "$LIB" || exit 2 ;;
	*) exit 2 ;;
	esac
done
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed (make deps)"; exit 77; }
make -s build/libcxlshim.so build/bench/sock_perf || exit 1
POOL=/dev/shm/cxlshim-rackmeet-$$.pool
trap 'rm -f $POOL' EXIT
# the guests cannot lock across hosts: format the pool here first
CXLSHIM_POOL_PATH=$POOL CXLSHIM_POOL_SIZE=256M LD_PRELOAD=$LIB \
	build/bench/sock_perf -w pingpong -z 16 -n 10 >/dev/null 2>&1 || true
A='L='"$LIB"'; R="--save \"\" --appendonly no --protected-mode no"
eval env LD_PRELOAD=$L redis-server --port 6380 $R >/dev/null 2>&1 &
while [ ! -e $RACK_DIR/done ]; do sleep 0.2; done'
B='L='"$LIB"'; sleep 3
for i in $(seq '"$RUNS"'); do for p in 1 16; do
  env LD_PRELOAD=$L CXLSHIM_DEBUG=INFO redis-benchmark -h $RACK_PEER_IP -p 6380 -c 50 -n 20000 \
    -P $p -t set,get --csv 2>/tmp/rb.err | tr -d \" | awk -F, "NR > 1 { printf \"%s %s %s \", \$1, \$2, \$7 }"
  echo "P$p joined $(grep -c "joined, bytes go" /tmp/rb.err) tcp $(grep -c "staying on TCP" /tmp/rb.err):" \
    "$(grep -o "[a-z ,()]*, staying on TCP" /tmp/rb.err | sort | uniq -c | tr -s " \n" " ;")"
done; done
touch $RACK_DIR/done'
tests/qemu/rack.sh --repo "$PWD" --pool $POOL --timeout $((120 + 60 * RUNS)) --a "$A" --b "$B"

#!/usr/bin/env bash
# bench/sock_redis_prof.sh - one redis-benchmark run (50 clients, -P 16)
# (PIPE=1: unpipelined) against redis-server with both under perf, TCP
# or the pool.
#
#   bench/sock_redis_prof.sh tcp|pool [get|set] [stat|record]    (N=requests)
#
# stat: system calls, context switches and CPU time of each process
# (perf stat, $OUT-SIDE-srv.stat and -cli.stat); record: call graphs
# (perf record -g, $OUT-SIDE-srv.data and -cli.data; perf report -i).
# OUT defaults to /tmp/sock_redis_prof.  Under the pool, the server maps
# and formats a fresh pool at startup (before the benchmark starts).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SHIM=$PWD/${BUILD:-build}/libcxlshim.so
side=${1:?tcp or pool}
t=${2:-get}
mode=${3:-stat}
OUT=${OUT:-/tmp/sock_redis_prof}
POOL=/dev/shm/cxlshim-sockredisprof-$$.pool
for c in redis-server redis-benchmark redis-cli perf; do
	command -v $c >/dev/null || { echo "sock_redis_prof: $c not installed"; exit 77; }
done
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
trap 'rm -f $POOL' EXIT
case $side in
pool) PRE=(env LD_PRELOAD="$SHIM" CXLSHIM_POOL_PATH="$POOL") ;;
tcp) PRE=(env -u LD_PRELOAD) ;;
*) exit 2 ;;
esac
if [ "$mode" = record ]; then
	PS=(perf record -F 1999 -g -o "$OUT-$side-srv.data" --)
	PC=(perf record -F 1999 -g -o "$OUT-$side-cli.data" --)
else
	EV=raw_syscalls:sys_enter,context-switches,task-clock
	PS=(perf stat -e $EV -o "$OUT-$side-srv.stat" --)
	PC=(perf stat -e $EV -o "$OUT-$side-cli.stat" --)
fi
"${PRE[@]}" "${PS[@]}" redis-server --port "$P" --save '' --appendonly no --bind 127.0.0.1 \
	>/dev/null 2>&1 &
for _ in $(seq 50); do redis-cli -p "$P" ping >/dev/null 2>&1 && break; sleep 0.1; done
"${PRE[@]}" "${PC[@]}" redis-benchmark -p "$P" -c 50 -n "${N:-1000000}" -P "${PIPE:-16}" -t "$t" --csv \
	2>/dev/null
redis-cli -p "$P" shutdown nosave >/dev/null 2>&1
wait

#!/usr/bin/env bash
# soak.sh SECONDS - 4 ranks run random collectives and 8 clients stream
# checksummed data through pooled sockets to an echo server, while a chaos
# loop SIGKILLs one of those processes every ~2 s and starts a replacement
# (tests/ops/soak.c, soak_sock.c).  Nothing may hang beyond the op
# timeout, every result and every byte must check, and at the end the pool
# must hold as many free communicator and socket records as at the start,
# lend no socket buffer and hold no listener record:
# freed by the survivors, or reclaimed from dead holders by `cxlshim pool
# clean` (what the next job's rendezvous and connections do by
# themselves).
set -euo pipefail
B=${BUILD:-build}
CX=$B/cxlshim
S=${1:-30}
export LD_LIBRARY_PATH=$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-soak-$$.pool
export CXLSHIM_TIMEOUT_OP_MS=2000 CXLSHIM_TIMEOUT_INIT_MS=5000 CXLSHIM_DEBUG=NONE
trap 'rm -f "$CXLSHIM_POOL_PATH"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
free_records() { $CX pool status | sed -n 's/.*communicator slots (\([0-9]*\) in use, \([0-9]*\) free).*/\2/p'; }
free_sockets() { $CX pool status | sed -n 's/^sockets: .* (\([0-9]*\) in use, \([0-9]*\) free).*/\2/p'; }
# the socket region's other holdings: buffers lent, listener records
sockjson() { $CX pool status --json | python3 -c "import json,sys; s=json.load(sys.stdin)['sockets']; print($1)"; }
lent_buffers() { sockjson "sum(c['in_use'] for c in s['buffers'])"; }
listeners() { sockjson "len(s['listeners'])"; }

$CX pool create -s 256M >/dev/null
start=$(free_records)
start_socks=$(free_sockets)
start_bufs=$(lent_buffers)
start_lst=$(listeners)
[ -n "$start" ] && [ -n "$start_socks" ] || fail "pool status: no free counts"
env LD_PRELOAD="$PWD/$B/libcxlshim.so" "$B/tests/soak" 4 "$S" 2000 &
job=$!
# while it runs, the streams must be in the pool, not on TCP
sleep 5
joined=$($CX pool status | grep -c '^  conn slot .* joined ' || true)
echo "connections joined in the pool 5 s in: $joined"
rc=0
wait $job || rc=$?
[ $rc = 0 ] || fail "soak failed ($rc)"
[ "$joined" -ge 4 ] || fail "the socket streams are not on the pool"
after=$(free_records)
echo "free communicator records: $start at the start, $after after the job"
echo "free socket records: $start_socks at the start, $(free_sockets) after the job"
$CX pool status
$CX pool clean
end=$(free_records)
end_socks=$(free_sockets)
echo "free communicator records after pool clean: $end; socket records: $end_socks"
[ "$end" = "$start" ] || fail "the pool lost $((start - end)) communicator records"
[ "$end_socks" = "$start_socks" ] || fail "the pool lost $((start_socks - end_socks)) socket records"
end_bufs=$(lent_buffers)
end_lst=$(listeners)
echo "socket buffers lent: $start_bufs at the start, $end_bufs after pool clean;" \
	"listener records: $start_lst, $end_lst"
[ "$end_bufs" = "$start_bufs" ] || fail "$((end_bufs - start_bufs)) socket buffers still lent"
[ "$end_lst" = "$start_lst" ] || fail "$((end_lst - start_lst)) listener records left"
echo "soak: ok"

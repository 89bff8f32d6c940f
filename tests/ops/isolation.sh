#!/usr/bin/env bash
# isolation.sh - two jobs sharing one pool never see each other's state:
#  - data: two 3-rank jobs of the same shape run at once, each offsetting
#    every value it contributes by its own base and checking every result
#    exactly, so one byte of the other job's data fails it;
#  - communicators: a job stuck in its rendezvous (2 of 3 ranks joined)
#    and a lone process that is rank 2 of a 3-rank communicator of its own
#    unique id: the lone rank times out, the stuck job stays 2 of 3 (the
#    rendezvous is keyed by the job's id, not by its shape); a job hung in
#    a collective is left exactly as it was by a second job that runs
#    meanwhile;
#  - connections: a program exec'd with CXLSHIM_SOCK_FDS naming another
#    job's pooled connection (slot and generation, as `pool status` shows
#    them) on a TCP socket of its own is refused, reads its own bytes, and
#    the other connection's queued bytes stay where they were.
set -euo pipefail
B=${BUILD:-build}
CX=$PWD/$B/cxlshim
SHIM=$PWD/$B/libcxlshim.so
dir=$(mktemp -d /tmp/cxlshim-ops-isolation.XXXXXX)
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-isolation-$$.pool
export CXLSHIM_POOL_SIZE=256M CXLSHIM_TIMEOUT_OP_MS=300000 CXLSHIM_TIMEOUT_INIT_MS=300000
export CXLSHIM_NCCL_FALLBACK=fail
pids=()
cleanup() {
	kill_all
	rm -rf "$dir" "$CXLSHIM_POOL_PATH"
}
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"
stop() { kill_tree "$1"; } # PID: the launcher and its ranks
doctor_until() { # PATTERN
	for _ in $(seq 150); do
		$CX doctor >"$dir/doctor" 2>&1 || true
		grep -q "$1" "$dir/doctor" && return 0
		sleep 0.2
	done
	cat "$dir/doctor"
	fail "doctor never showed '$1'"
}
$CX pool create >/dev/null

echo "== two jobs of the same shape at once, each checking its own data"
$CX run -e -- $B/tests/ops_job traffic 3 8 1000 >"$dir/a" 2>&1 &
a=$!; pids+=($a)
$CX run -e -- $B/tests/ops_job traffic 3 8 2000 >"$dir/b" 2>&1 &
b=$!; pids+=($b)
ra=0; wait $a || ra=$?
rb=0; wait $b || rb=$?
cat "$dir/a" "$dir/b"
[ $ra = 0 ] || fail "job A (base 1000) got wrong data or failed ($ra)"
[ $rb = 0 ] || fail "job B (base 2000) got wrong data or failed ($rb)"
$CX pool status | grep -q "communicator slots (0 in use" || fail "records left behind"

echo "== a rank of another job cannot complete a job's rendezvous"
$CX run -e -- $B/tests/ops_job partial >"$dir/partial" 2>&1 &
p=$!; pids+=($p)
doctor_until "rendezvous incomplete, 2 of 3 ranks joined; missing: 2$"
id=$(sed -n 's/^comm slot [0-9]* (id \([0-9a-f]*\), 3 ranks, joining).*/\1/p' "$dir/doctor")
rc=0
CXLSHIM_TIMEOUT_INIT_MS=2000 $CX run -e -- $B/tests/ops_job lone >"$dir/lone" 2>&1 || rc=$?
cat "$dir/lone"
[ $rc = 0 ] || fail "the lone rank joined a communicator ($rc)"
$CX doctor >"$dir/doctor" 2>&1 || true
cat "$dir/doctor"
grep -q "(id $id, 3 ranks, joining): rendezvous incomplete, 2 of 3 ranks joined; missing: 2$" \
	"$dir/doctor" || fail "the waiting job's rendezvous changed"
[ "$(grep -c "ranks, joining)" "$dir/doctor")" = 1 ] || fail "the lone rank joined some rendezvous"
# the lone rank's own record (failed at its timeout) goes with pool clean
$CX pool clean >/dev/null
$CX doctor >"$dir/doctor" 2>&1 || true
[ "$(grep -c "^comm slot" "$dir/doctor")" = 1 ] && grep -q "(id $id, 3 ranks, joining)" "$dir/doctor" ||
	{ cat "$dir/doctor"; fail "pool clean: only the waiting job's record must stay"; }
stop $p

echo "== a job hung in a collective, another job running meanwhile"
$CX run -e -- $B/tests/ops_job hang 3 >"$dir/hang" 2>&1 &
h=$!; pids+=($h)
doctor_until "has not called op 3"
grep -v "pending for" "$dir/doctor" >"$dir/before"
$CX run -e -- $B/tests/ops_job traffic 3 4 3000 >"$dir/c" 2>&1 || { cat "$dir/c"; fail "job C"; }
$CX doctor 2>&1 | grep -v "pending for" >"$dir/after" || true
diff "$dir/before" "$dir/after" || fail "the hung job's records changed while job C ran"
$CX pool status -v | grep -q "^    rank 2 .* enq 2 " || fail "the hung job's rank 2 enqueued more"
stop $h
$CX pool clean >/dev/null

echo "== a forged CXLSHIM_SOCK_FDS cannot attach to another job's connection"
# job A: a pooled connection with 5000 bytes queued from client to server
for try in 1 2 3; do
	LD_PRELOAD=$SHIM $B/tests/sock_hold server >"$dir/srv" 2>&1 &
	srv=$!; pids+=($srv)
	for _ in $(seq 100); do grep -q '^port ' "$dir/srv" && break; sleep 0.1; done
	port=$(sed -n 's/^port //p' "$dir/srv")
	LD_PRELOAD=$SHIM $B/tests/sock_hold client "$port" 5000 >"$dir/cli" 2>&1 &
	cli=$!; pids+=($cli)
	for _ in $(seq 100); do grep -q '^ready' "$dir/cli" && break; sleep 0.1; done
	$CX pool status --json >"$dir/status.json"
	conn=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); \
		c=[c for c in s['sockets']['connections'] if c['server'].endswith(':$port') \
		and c['state'] == 'joined']; print('%d:%d' % (c[0]['slot'], c[0]['generation']) if c else '')" \
		"$dir/status.json")
	[ -n "$conn" ] && break
	echo "(attempt $try: the two ends stayed on TCP; another pair)"
	kill -KILL $srv $cli; wait $srv $cli 2>/dev/null || true
done
[ -n "$conn" ] || fail "no pooled connection for job A"
# job B: its own server; a TCP socket to it as fd 3, then a program under
# the preload told that fd 3 is A's connection, server end (whose ring
# holds A's 5000 bytes)
LD_PRELOAD=$SHIM $B/tests/sock_hold server >"$dir/srv2" 2>&1 &
srv2=$!; pids+=($srv2)
for _ in $(seq 100); do grep -q '^port ' "$dir/srv2" && break; sleep 0.1; done
port2=$(sed -n 's/^port //p' "$dir/srv2")
CXLSHIM_LOG_LEVEL=info SHIM=$SHIM SPEC="3:$conn:1" timeout 20 bash -c '
	exec 3<>/dev/tcp/127.0.0.1/'"$port2"'
	exec env CXLSHIM_SOCK_FDS="$SPEC" LD_PRELOAD="$SHIM" python3 -c "import os, sys
got = b\"\"
while len(got) < 5:
    got += os.read(3, 5 - len(got))
sys.stdout.write(got.decode(\"latin-1\"))"' >"$dir/forged" 2>"$dir/forged.err" || true
cat "$dir/forged.err"
echo "forged reader got: $(head -c 64 "$dir/forged")"
[ "$(cat "$dir/forged")" = hello ] || fail "the forged fd did not read its own connection's bytes"
grep -q "fd 3: its pooled connection could not be taken over after exec" "$dir/forged.err" ||
	fail "the forged adoption was not refused"
$CX pool status --json >"$dir/status.json"
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); \
	c=[c for c in s['sockets']['connections'] if c['server'].endswith(':$port')]; \
	sys.exit(0 if c and c[0]['fill_c2s'] == 5000 else 1)" "$dir/status.json" ||
	fail "job A's queued bytes moved"
echo "isolation: ok"

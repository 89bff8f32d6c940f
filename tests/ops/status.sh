#!/usr/bin/env bash
# status.sh - `cxlshim pool status` (text and --json) shows what the pool
# holds: a live pooled TCP connection between two processes under the
# preload (tuple, ring fill, holders alive), then the same with its client
# SIGKILLed (holder DEAD); the listener, and once its process is killed
# too, `pool clean` reclaiming connection and listener; a socket buffer
# lent for a write by reference (class, owner, alive, then dead, then
# given back), and one lent to no connection (ORPHAN, reclaimed by `pool
# clean`); a hung NCCL job's communicator,
# and, with a byte of its record damaged in the pool, the record reported
# CORRUPT by status and doctor and reclaimed by `pool clean`.
set -euo pipefail
B=${BUILD:-build}
CX=$PWD/$B/cxlshim
SHIM=$PWD/$B/libcxlshim.so
dir=$(mktemp -d /tmp/cxlshim-ops-status.XXXXXX)
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-status-$$.pool
export CXLSHIM_POOL_SIZE=256M CXLSHIM_TIMEOUT_OP_MS=300000
pids=()
cleanup() {
	kill_all
	rm -rf "$dir" "$CXLSHIM_POOL_PATH"
}
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"
# jq-less JSON checks: python3 (a test dependency already) evaluates EXPR
# with the document as `s`
json() {
	$CX pool status --json >"$dir/status.json"
	python3 -c "import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" \
		"$dir/status.json" || { python3 -m json.tool "$dir/status.json"; fail "json: $1"; }
}
wait_for() { # FILE PATTERN
	for _ in $(seq 100); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	cat "$1"; fail "no '$2' in $1"
}

$CX pool create >/dev/null
# pair BYTES: a server and a client that wrote BYTES, on the pool; sets
# srv, cli and port.  The two ends meet in the pool within
# sock.meet_timeout_ms; on a loaded machine (or under a sanitizer) they may
# miss each other and stay on TCP, which is the socket layer's business,
# not this test's: try a new pair.
pair() {
	for try in 1 2 3; do
		LD_PRELOAD=$SHIM $B/tests/sock_hold server >"$dir/srv" 2>&1 &
		srv=$!; pids+=($srv)
		wait_for "$dir/srv" '^port '
		port=$(sed -n 's/^port //p' "$dir/srv")
		LD_PRELOAD=$SHIM $B/tests/sock_hold client "$port" "$1" >"$dir/cli" 2>&1 &
		cli=$!; pids+=($cli)
		wait_for "$dir/cli" '^ready'
		$CX pool status | grep -q "^  conn slot .* joined .*-> 127.0.0.1:$port," && return
		echo "(attempt $try: the two ends stayed on TCP; another pair)"
		kill -KILL $srv $cli
		wait $srv $cli 2>/dev/null || true
		$CX pool clean >/dev/null
	done
}
echo "== a pooled connection between two processes"
pair 5000
$CX pool status | tee "$dir/status"
grep -Eq "^  listener [0-9]+ +live +127.0.0.1:$port +uid [0-9]+, held by pid $srv alive$" \
	"$dir/status" || fail "the listener and its live holder"
grep -Eq "^  conn slot [0-9]+ +joined +127.0.0.1:[0-9]+ -> 127.0.0.1:$port, ring fill c->s 5000/[0-9]+ s->c 0/" \
	"$dir/status" || fail "the connection, its tuple and ring fill"
grep -q "^      client end: pid $cli alive$" "$dir/status" || fail "client holder alive"
grep -q "^      server end: pid $srv alive$" "$dir/status" || fail "server holder alive"
grep -q "^host memory: pinned host allocations are recorded per process" "$dir/status" ||
	fail "the note on host allocations"
json "s['sockets']['in_use'] == 1 and len(s['sockets']['connections']) == 1"
json "[c['fill_c2s'] for c in s['sockets']['connections']] == [5000]"
json "s['sockets']['connections'][0]['server'] == '127.0.0.1:$port'"
json "s['sockets']['connections'][0]['client_end']['holders'] == [{'pid': $cli, 'alive': True}]"
json "s['sockets']['connections'][0]['server_end']['holders'] == [{'pid': $srv, 'alive': True}]"
json "[l['port'] for l in s['sockets']['listeners']] == [$port]"
json "[l['holders'] for l in s['sockets']['listeners']] == [[{'pid': $srv, 'alive': True}]]"
# 5000 bytes go through the ring: no buffer lent
json "[c['in_use'] for c in s['sockets']['buffers']] == [0, 0, 0]"
json "[c['size'] for c in s['sockets']['buffers']] == [65536, 262144, 1048576]"
json "s['host_allocations']['in_pool'] is False"

echo "== its client SIGKILLed: a dead owner"
kill -KILL $cli
wait $cli 2>/dev/null || true
$CX pool status | tee "$dir/status"
grep -q "^      client end: pid $cli DEAD$" "$dir/status" || fail "dead client holder"
grep -q "^      server end: pid $srv alive$" "$dir/status" || fail "live server holder"
json "s['sockets']['connections'][0]['client_end']['holders'] == [{'pid': $cli, 'alive': False}]"
kill -KILL $srv
wait $srv 2>/dev/null || true
$CX pool status | tee "$dir/status"
grep -Eq "^  listener [0-9]+ +live +127.0.0.1:$port +uid [0-9]+, held by pid $srv DEAD$" \
	"$dir/status" || fail "the listener of a dead process"
$CX pool clean | tee "$dir/clean"
grep -q "reclaimed 1 socket record " "$dir/clean" || fail "the dead connection not reclaimed"
grep -q "reclaimed 1 listener record " "$dir/clean" || fail "the dead listener not reclaimed"
json "s['sockets']['in_use'] == 0"
json "s['sockets']['listeners'] == []"
$CX pool status | grep -q "listener slots (0 in use)" || fail "text: listeners left"

echo "== a write by reference: a pool buffer lent to the connection"
pair 100000
$CX pool status | tee "$dir/status"
slot=$(sed -n "s/^  conn slot \([0-9]*\) .*-> 127.0.0.1:$port,.*/\1/p" "$dir/status")
grep -q "^  buffers of 262144 bytes: 8, 1 lent$" "$dir/status" || fail "the lent buffer's class"
grep -Eq "^    buffer +[0-9]+ +lent to conn slot $slot \(joined\), holder alive$" "$dir/status" ||
	fail "the lent buffer's owner"
json "[c['in_use'] for c in s['sockets']['buffers']] == [0, 1, 0]"
json "[(b['slot'], b['connection'], b['alive']) for b in s['sockets']['buffers'][1]['lent']] == [($slot, True, True)]"
kill -KILL $srv $cli
wait $srv $cli 2>/dev/null || true
$CX pool status | tee "$dir/status"
grep -Eq "^    buffer +[0-9]+ +lent to conn slot $slot \(joined\), holders DEAD$" "$dir/status" ||
	fail "the lent buffer's dead owner"
json "[b['alive'] for b in s['sockets']['buffers'][1]['lent']] == [False]"
$CX pool clean | tee "$dir/clean"
grep -q "reclaimed 1 socket record " "$dir/clean" || fail "the dead connection not reclaimed"
json "[c['in_use'] for c in s['sockets']['buffers']] == [0, 0, 0]"

echo "== a buffer lent to no connection (a record freed without giving it back)"
# buffer 2 of the first class (descriptors are a line each) names slot 0,
# generation 5, which is free
desc=$(python3 -c "import json; s=json.load(open('$dir/status.json')); k=s['sockets']; \
	a=lambda v: (v + 4095) & ~4095; \
	print(s['sock_offset'] + a(k['listener_slots'] * 256 + k['slots'] * 2048) + 2 * k['slots'] * k['ring'] + 2 * 64)")
python3 -c "import sys,mmap,os,struct; f=os.open(sys.argv[1], os.O_RDWR); m=mmap.mmap(f, 0); \
	m[int(sys.argv[2]):int(sys.argv[2]) + 8] = struct.pack('<Q', (5 << 32) | 1); m.close()" \
	"$CXLSHIM_POOL_PATH" "$desc"
$CX pool status | tee "$dir/status"
grep -q "^    buffer 2     ORPHAN: lent to slot 0 generation 5, which no connection holds" \
	"$dir/status" || fail "the orphan buffer"
json "s['sockets']['buffers'][0]['lent'] == [{'index': 2, 'slot': 0, 'generation': 5, 'connection': False, 'alive': False}]"
$CX pool clean | tee "$dir/clean"
grep -q "reclaimed 1 socket buffer lent to no connection" "$dir/clean" || fail "orphan not reclaimed"
json "[c['in_use'] for c in s['sockets']['buffers']] == [0, 0, 0]"

echo "== a communicator record damaged in the pool"
$CX run -e -- $B/tests/ops_job hang 2 >"$dir/job" 2>&1 &
pids+=($!)
wait_for "$dir/job" 'rank 0: two AllGathers done'
for _ in $(seq 100); do
	$CX doctor >"$dir/doctor" 2>&1 || true
	grep -q "has not called op 3" "$dir/doctor" && break
	sleep 0.1
done
json "len(s['comms']) == 1 and s['comms'][0]['corrupt'] is None"
json "[r['alive'] for r in s['comms'][0]['ranks']] == [True, True]"
# offset of the record's `chunk` word (bytes 40..47 of the header), and of
# rank 0's pid (4 bytes into its record, which follows the header)
off=$(python3 -c "import json; s=json.load(open('$dir/status.json')); \
	print(s['comm_offset'] + s['comm_stride'] * s['comms'][0]['slot'])")
hdr=$(python3 -c "import json; print(json.load(open('$dir/status.json'))['comm_header'])")
flip() { # OFFSET: XOR one byte of the pool file with 0x40, in place
	python3 -c "import sys,mmap,os; f=os.open(sys.argv[1], os.O_RDWR); \
		m=mmap.mmap(f, 0); o=int(sys.argv[2]); m[o] ^= 0x40; m.close()" \
		"$CXLSHIM_POOL_PATH" "$1"
}
# the header first: the running ranks do not read it again
flip $((off + 40))
$CX pool status | tee "$dir/status"
grep -q "CORRUPT: record fails its checksum" "$dir/status" || fail "damaged header"
json "s['comms'][0]['corrupt'] == 'record fails its checksum'"
rc=0; $CX doctor >"$dir/doctor" 2>&1 || rc=$?
cat "$dir/doctor"
[ $rc = 3 ] && grep -q "CORRUPT record (record fails its checksum)" "$dir/doctor" ||
	fail "doctor on a damaged header"
flip $((off + 40))
json "s['comms'][0]['corrupt'] is None"
# then rank 0's record: its peer's watchdog no longer trusts it either and
# fails the communicator, so only what says CORRUPT is checked
flip $((off + hdr + 4))
$CX pool status | tee "$dir/status"
grep -q "^    rank 0 .* CORRUPT" "$dir/status" || fail "damaged rank record"
json "s['comms'][0]['corrupt_ranks'] == 1"
rc=0; $CX doctor >"$dir/doctor" 2>&1 || rc=$?
cat "$dir/doctor"
[ $rc = 3 ] && grep -q "CORRUPT rank record of rank 0 (fails its checksum)" "$dir/doctor" ||
	fail "doctor trusts a damaged rank record"
# once its other holder is gone, pool clean reclaims it
kill_tree "${pids[-1]}"
wait "${pids[-1]}" 2>/dev/null || true
$CX pool clean | tee "$dir/clean"
grep -q "reclaimed 1 communicator record " "$dir/clean" || fail "damaged record not reclaimed"
json "len(s['comms']) == 0"
echo "status: ok"

#!/usr/bin/env bash
# claim.sh - socket records of processes that died mid-claim, and listener
# records read while they change (sock_claim.h, sock_listen.c).  A pool of
# one connection record and one listener record, so that a record lost to
# a dead claimer shows at once: the next connection has no other.
#
#   slow      a client parked mid-claim (alive) is never robbed: neither
#             `pool clean` nor another client's sweep takes its record;
#             it then meets its server through the pool
#   killed    the same client SIGKILLed there: status names it DEAD, and
#             the next client's own sweep takes the record back and meets
#             through the pool; again with `pool clean` taking it back
#   listener  a server SIGKILLed while claiming its listener record: the
#             next server takes it over; again with `pool clean`
#   lease     forged claims no sweep of this host can check (claimer of
#             another host, claimer not written): reclaimed only once a
#             lease (CXLSHIM_TEST_CLAIM_LEASE_S) ran out since first seen
#   noslot    the client takes the only slot between the server's look
#             for its record and the server's own claim: the server looks
#             again and joins (it stayed on TCP, and the client waited out
#             its window: a 1-slot table raced so under load)
#   aba       a client reading the listener of port P while it is closed
#             and its record claimed for port Q: the client reads again
#             and stays on TCP at once, instead of waiting for a pool peer
#             that a server without the shim (now on P) never sends; and
#             with P listened again under the shim: it meets in the pool
set -euo pipefail
B=${BUILD:-build}
CX=$PWD/$B/cxlshim
SHIM=$PWD/$B/libcxlshim.so
HELPER=$PWD/$B/tests/sock_claim
dir=$(mktemp -d /tmp/cxlshim-ops-claim.XXXXXX)
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-claim-$$.pool
export CXLSHIM_POOL_SIZE=256M CXLSHIM_SOCK_SLOTS=1 CXLSHIM_SOCK_MEET_TIMEOUT_MS=10000
pids=()
cleanup() {
	exec 3>&- 4>&- 2>/dev/null || true
	kill_all
	rm -rf "$dir" "$CXLSHIM_POOL_PATH"
}
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"
wait_for() { # FILE PATTERN [TENTHS]
	for _ in $(seq "${3:-300}"); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
	cat "$1" 2>/dev/null; fail "no '$2' in $1"
}
status_has() { # PATTERN: within 30 s
	for _ in $(seq 300); do $CX pool status >"$dir/status" && grep -Eq "$1" "$dir/status" &&
		return 0; sleep 0.1; done
	cat "$dir/status"; fail "pool status never showed '$1'"
}
pooled() { grep -q "bytes go through the pool" "$1"; }

# server FD NAME [PORT] [ENV...]: a server under the shim fed by fifo FD;
# sets srv and port
server() {
	local fd=$1 name=$2 p=${3:-0}
	shift 3 || shift $#
	rm -f "$dir/$name.in"
	mkfifo "$dir/$name.in"
	env "$@" CXLSHIM_DEBUG=INFO LD_PRELOAD=$SHIM $HELPER serve "$p" <"$dir/$name.in" \
		>"$dir/$name" 2>&1 &
	srv=$!
	pids+=($srv)
	eval "exec $fd>\"$dir/$name.in\""
	wait_for "$dir/$name" '^port '
	port=$(sed -n 's/^port //p' "$dir/$name")
}
# client NAME PORT [ENV...]: a pinging client under the shim; sets cli
client() {
	local name=$1 p=$2
	shift 2
	env "$@" CXLSHIM_DEBUG=TRACE LD_PRELOAD=$SHIM $HELPER ping "$p" >"$dir/$name" 2>&1 &
	cli=$!
	pids+=($cli)
}
reap() { wait "$1" || fail "$2 failed: $(cat "$dir/$2")"; }

$CX pool create >/dev/null

echo "== slow: a live claimer is never robbed"
server 3 srv 0
client c1 "$port" CXLSHIM_TEST_CLAIM_DELAY_US=3000000 CXLSHIM_TEST_CLAIM_DELAY_AT=record
c1=$cli
status_has "^  conn slot 0 +claiming +by pid $c1 alive"
$CX pool clean >"$dir/clean"
grep -q "reclaimed 0 socket records" "$dir/clean" || { cat "$dir/clean"; fail "pool clean robbed"; }
client c2 "$port"
c2=$cli
wait_for "$dir/c2" "no free socket slot"
status_has "^  conn slot 0 +waiting"
echo accept >&3
echo accept >&3
reap "$c1" c1
reap "$c2" c2
pooled "$dir/c1" || { cat "$dir/c1"; fail "the slow claimer did not get through the pool"; }
pooled "$dir/c2" && fail "the second client took the only record"
echo "ok: pool clean and a sweeping client left the live claim alone; it met in the pool"

echo "== killed: a dead claimer's record comes back"
for how in sweep clean; do
	client dead "$port" CXLSHIM_TEST_CLAIM_DELAY_US=60000000 CXLSHIM_TEST_CLAIM_DELAY_AT=record
	dead=$cli
	status_has "^  conn slot 0 +claiming +by pid $dead alive"
	kill -KILL "$dead"
	wait "$dead" 2>/dev/null || true
	status_has "^  conn slot 0 +claiming +by pid $dead DEAD"
	$CX pool status --json | python3 -c "import json,sys; s=json.load(sys.stdin)
c=s['sockets']['connections'][0]
sys.exit(0 if c['state'] == 'claiming' and c['claimer'] == {'pid': $dead, 'state': 'dead'} else 1)" ||
		fail "json: the dead claimer"
	if [ $how = clean ]; then
		$CX pool clean >"$dir/clean"
		grep -q "reclaimed 1 socket record " "$dir/clean" ||
			{ cat "$dir/clean"; fail "pool clean left the dead claim"; }
		status_has "^sockets: 1 connection slots \(0 in use, 1 free\)"
	fi
	client new "$port"
	new=$cli
	status_has "^  conn slot 0 +waiting"
	echo accept >&3 # the dead client's connection: no record left, TCP
	echo accept >&3
	reap "$new" new
	pooled "$dir/new" || { cat "$dir/new"; fail "$how: the slot was not reused"; }
	echo "ok ($how): the dead claimer's record was reused by a new connection"
done
exec 3>&-
wait "$srv" 2>/dev/null || true

echo "== noslot: the client took the only slot between the server's look and its claim"
# the server looks for the client's record at once and claims 600 ms
# later; the client looks 300 ms after its connect, then claims
server 3 ns 0 CXLSHIM_TEST_CLAIM_DELAY_US=600000 CXLSHIM_TEST_CLAIM_DELAY_AT=meet
echo accept >&3
client nsc "$port" CXLSHIM_TEST_CLAIM_DELAY_US=300000 CXLSHIM_TEST_CLAIM_DELAY_AT=look
nsc=$cli
reap "$nsc" nsc
pooled "$dir/nsc" || { cat "$dir/nsc" "$dir/ns"; fail "the server without a slot did not join"; }
exec 3>&-
wait "$srv" 2>/dev/null || true
$CX pool clean >/dev/null
echo "ok: the server found no slot, looked again and joined the client's record"

echo "== listener: a server killed while claiming its listener record"
for how in takeover clean; do
	CXLSHIM_TEST_CLAIM_DELAY_US=60000000 CXLSHIM_TEST_CLAIM_DELAY_AT=listener \
		LD_PRELOAD=$SHIM $HELPER serve </dev/null >"$dir/dead" 2>&1 &
	dead=$!
	pids+=($dead)
	status_has "^  listener 0 +claiming +by pid $dead alive"
	kill -KILL "$dead"
	wait "$dead" 2>/dev/null || true
	status_has "^  listener 0 +claiming +by pid $dead DEAD"
	if [ $how = clean ]; then
		$CX pool clean >"$dir/clean"
		grep -q "reclaimed 1 listener record " "$dir/clean" ||
			{ cat "$dir/clean"; fail "pool clean left the dead listener claim"; }
	fi
	server 3 srv 0
	status_has "^  listener 0 +live +127.0.0.1:$port "
	client new "$port"
	new=$cli
	echo accept >&3
	reap "$new" new
	pooled "$dir/new" || { cat "$dir/new" "$dir/srv"; fail "$how: no listener advertised"; }
	exec 3>&-
	wait "$srv" 2>/dev/null || true
	echo "ok ($how): the dead server's listener record was taken over"
done

echo "== aba: a listener closed and its record claimed again while a client reads it"
for case in replaced relistened; do
	server 3 old 0
	p=$port
	client aba "$p" CXLSHIM_TEST_CLAIM_DELAY_US=1500000 CXLSHIM_TEST_CLAIM_DELAY_AT=listener-read
	aba=$cli
	wait_for "$dir/aba" "test delay: .* at listener-read"
	echo close >&3
	wait_for "$dir/old" '^closed'
	status_has "listener slots \(0 in use\)"
	if [ $case = replaced ]; then
		server 4 other 0 # takes the record, for another port
		status_has "^  listener 0 +live +127.0.0.1:$port "
		# a server without the shim on P: it never meets in the pool
		mkfifo "$dir/plain.in"
		$HELPER serve "$p" <"$dir/plain.in" >"$dir/plain" 2>&1 &
		pids+=($!)
		exec 5>"$dir/plain.in"
		wait_for "$dir/plain" '^port '
		echo accept >&5
	else
		server 4 again "$p" # the same port, under the shim again
		echo accept >&4
	fi
	reap "$aba" aba
	ms=$(sed -n 's/^pong //p' "$dir/aba")
	if [ $case = replaced ]; then
		pooled "$dir/aba" && fail "pooled with a server without the shim"
		grep -q "taken over while read" "$dir/aba" || { cat "$dir/aba"; fail "no re-read"; }
		# 1.5 s parked; a client that believed the stale read would
		# wait for the 10 s meeting window
		[ "$ms" -lt 6000 ] || fail "the client waited ${ms} ms for a peer that never came"
		exec 5>&-
	else
		pooled "$dir/aba" || { cat "$dir/aba" "$dir/again"; fail "the port listened again was not met"; }
	fi
	exec 3>&- 4>&-
	wait 2>/dev/null || true
	$CX pool clean >/dev/null
	rm -f "$dir"/*.in
	echo "ok ($case): ${ms} ms, $(pooled "$dir/aba" && echo pool || echo TCP)"
done
echo "== lease: claims no sweep here can check"
# forged in the pool: listener 0 claimed by a process of another host
# (tag written, another boot hash), connection record 0 claimed with no
# claimer written yet; with a 1 s lease: the first clean starts it, a
# clean after it reclaims both
$CX pool status --json >"$dir/status.json"
python3 - "$dir/status.json" "$CXLSHIM_POOL_PATH" <<'PY'
import json, mmap, struct, sys
s = json.load(open(sys.argv[1]))
off, nl = s['sock_offset'], s['sockets']['listener_slots']
with open(sys.argv[2], 'r+b') as f:
    m = mmap.mmap(f.fileno(), 0)
    l = off                          # listener 0: sg, claim_gen, boot, holder[0]
    g = (struct.unpack_from('<Q', m, l)[0] >> 32) + 1
    struct.pack_into('<Q', m, l, g << 32 | 1)
    struct.pack_into('<I', m, l + 40, g)
    struct.pack_into('<QIIQ', m, l + 48, 0x5eed, 4242, 0, 1)
    r = off + nl * 256               # connection record 0 (listeners: 256 B each): sg only
    g = (struct.unpack_from('<Q', m, r)[0] >> 32) + 1
    struct.pack_into('<Q', m, r, g << 32 | 1)
PY
status_has "^  listener 0 +claiming +by a process not known yet or of another host"
status_has "^  conn slot 0 +claiming +by a process not known yet or of another host"
CXLSHIM_TEST_CLAIM_LEASE_S=1 $CX pool clean >"$dir/clean"
grep -q "reclaimed 0 socket records" "$dir/clean" && grep -q "reclaimed 0 listener records" \
	"$dir/clean" || { cat "$dir/clean"; fail "a claim reclaimed before its lease"; }
sleep 1.5
CXLSHIM_TEST_CLAIM_LEASE_S=1 $CX pool clean >"$dir/clean"
grep -q "reclaimed 1 socket record " "$dir/clean" && grep -q "reclaimed 1 listener record " \
	"$dir/clean" || { cat "$dir/clean"; fail "claims not reclaimed after the lease"; }
echo "ok: unknown and remote claims reclaimed after the lease, not before"
echo "PASS"

#!/usr/bin/env bash
# tests/sock/netns.sh - two "hosts" on one machine: two network namespaces
# joined by a veth pair, each with its own TCP stack and addresses, sharing
# the pool file.  The server runs in one, the client in the other, both
# under the preload; 8 MiB are echoed and must go through the pool.  Then
# the same with the client outside the preload (must stay TCP).  Exit 77
# when namespaces cannot be made here (not root, no CAP_SYS_ADMIN, no veth).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SHIM=${SHIM:-$PWD/$BUILD/libcxlshim.so}
CHECK=$PWD/$BUILD/tests/sock_check
A=cxls-sock-$$-a
B=cxls-sock-$$-b
PORT=$((20000 + $$ % 20000))

cleanup() {
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
}
trap cleanup EXIT

if ! ip netns add "$A" 2>/dev/null || ! ip netns add "$B" 2>/dev/null; then
	echo "SKIP: cannot create network namespaces here (needs root / CAP_SYS_ADMIN)"
	exit 77
fi
if ! ip link add "v$$a" netns "$A" type veth peer name "v$$b" netns "$B" 2>/dev/null; then
	echo "SKIP: cannot create a veth pair here"
	exit 77
fi
ip -n "$A" addr add 10.231.0.1/24 dev "v$$a"
ip -n "$B" addr add 10.231.0.2/24 dev "v$$b"
ip -n "$A" link set "v$$a" up
ip -n "$B" link set "v$$b" up
ip -n "$A" link set lo up
ip -n "$B" link set lo up

run() { # run EXPECT CLIENT_PRELOAD
	local out
	ip netns exec "$A" env LD_PRELOAD="$SHIM" "$CHECK" net-server 10.231.0.1 "$PORT" &
	local srv=$!
	sleep 0.5
	out=$(ip netns exec "$B" env ${2:+LD_PRELOAD="$SHIM"} SOCK_CHECK_EXPECT="$1" \
		"$CHECK" net-client 10.231.0.1 "$PORT") || { echo "$out"; return 1; }
	echo "client in $B, server in $A: $out"
	wait $srv
}

run pool 1 || { echo "FAIL: both ends under the preload"; exit 1; }
PORT=$((PORT + 1))
run tcp "" || { echo "FAIL: client without the preload"; exit 1; }
echo "PASS"

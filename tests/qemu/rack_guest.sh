#!/usr/bin/env bash
# rack_guest.sh - one guest's half of rack_selftest.sh (RACK_* from rack.sh;
# RACK_UUID: the pool's uuid, RACK_NONCE: this run's).  Memory through the
# BAR, TCP over the wire, the shim's pool code on the BAR, then pooled
# collective jobs (coll_check, reduce_check) whose ranks are split over the
# two guests.
# Ends with "N passed, M failed".
set -u
BUILD=${BUILD:-build}
C=$BUILD/tests/qemu/rack_check
me=$RACK_NAME
passed=0
failed=0

step() {
	local name=$1
	shift
	echo "== $name"
	if "$@"; then
		passed=$((passed + 1))
	else
		echo "FAIL $name (status $?)"
		failed=$((failed + 1))
	fi
}

step "BAR shared with the other guest" "$C" bar "$me" "$GUEST_BAR" "$RACK_NONCE"
step "TCP to the other guest" "$C" tcp "$me" "$RACK_SELF_IP" "$RACK_PEER_IP"
step "core/pool maps the BAR" "$C" pool "$RACK_UUID"
# 4 ranks, 2 per guest; rank 0's guest hands the unique id over in RACK_DIR.
# The other guest may boot seconds later: a generous rendezvous timeout.
first=0
[ "$me" = b ] && first=2
# job NAME PROGRAM ARGS...: ranks first..first+1 of 4 here, through the shim
job() {
	local name=$1
	shift
	step "$name, ranks $first-$((first + 1)) of 4 here" env LAUNCH_RANKS=$first-$((first + 1)) \
		LAUNCH_ID_FILE="$RACK_DIR/unique-id-$name-$RACK_NONCE" \
		CXLSHIM_TIMEOUT_INIT_MS=120000 CXLSHIM_TIMEOUT_OP_MS=60000 \
		LD_LIBRARY_PATH="$PWD/$BUILD/emu" LD_PRELOAD="$PWD/$BUILD/libcxlshim.so" "$@"
}
job coll_check "$BUILD/tests/coll_check" -n 4 -c 1,odd,256K -t int8,float -r 2
job reduce_check "$BUILD/tests/reduce_check" -n 4 -c 1,1000 -t float,bf16 -o sum,avg -r 2
echo "$passed passed, $failed failed"
[ $failed = 0 ]

#!/usr/bin/env bash
# pidns.sh - a live job in another pid namespace (a container's, made
# here with unshare) is never reclaimed from outside it: its pids mean
# other processes here, or none, so `pool clean` on the host saw its ranks
# dead and freed its communicator and listener records.  The ranks show
# as remote, `pool clean` leaves them; the same from inside a namespace
# for a job on the host.  SKIPPED where unshare cannot make a namespace.
set -euo pipefail
B=${BUILD:-build}
CX=$PWD/$B/cxlshim
JOB=$PWD/$B/tests/ops_job
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-pidns-$$.pool
export CXLSHIM_POOL_SIZE=256M CXLSHIM_TIMEOUT_OP_MS=300000
pids=()
cleanup() {
	kill_all
	rm -f "$CXLSHIM_POOL_PATH" "/tmp/cxlshim-ops-pidns-$$.log"
}
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"

NS=(unshare -pf --mount-proc)
[ "$(id -u)" = 0 ] || NS=(unshare -Urpf --mount-proc)
if ! "${NS[@]}" true 2>/dev/null; then
	echo "SKIPPED: ${NS[*]} cannot make a pid namespace here"
	exit 77
fi

# in_use: the communicator slots in use, from `pool status`
in_use() { $CX pool status | sed -n 's/.*communicator slots (\([0-9]*\) in use.*/\1/p'; }

# one JOB_PREFIX...: a hung 3-rank job run under the prefix; `pool clean`
# run under CLEAN_PREFIX must leave its record
one() {
	local what=$1 clean=$2
	shift 2
	$CX pool create >/dev/null
	"$@" "$CX" run -e -- "$JOB" hang 3 >"/tmp/cxlshim-ops-pidns-$$.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 150); do $CX pool status | grep -q 'ranks 3, joined 3' && break; sleep 0.2; done
	$CX pool status | grep -q 'ranks 3, joined 3' ||
		{ cat "/tmp/cxlshim-ops-pidns-$$.log"; fail "$what: the job did not join"; }
	[ "$(in_use)" = 1 ] || fail "$what: $(in_use) slots in use"
	$clean $CX pool clean | grep 'communicator record' || true
	[ "$(in_use)" = 1 ] || fail "$what: pool clean freed the live job's record"
	$clean $CX pool status | grep -q 'joined pid .* remote' ||
		fail "$what: its ranks are not shown remote"
	kill_all
	pids=()
	rm -f "$CXLSHIM_POOL_PATH"
	echo "$what: the live job's record stays"
}

one "job in a namespace, clean on the host" "" "${NS[@]}"
one "job on the host, clean in a namespace" "${NS[*]}"

#!/usr/bin/env bash
# soak.sh SECONDS - 4 ranks run random collectives while a chaos loop
# SIGKILLs one every ~2 s and starts a replacement (tests/ops/soak.c).
# Nothing may hang beyond the op timeout, every result must check, and at
# the end the pool must hold as many free communicator records as at the
# start: freed by the survivors, or reclaimed from dead holders by
# `cxlshim pool clean` (what the next job's rendezvous does by itself).
set -euo pipefail
B=${BUILD:-build}
CX=$B/cxlshim
S=${1:-30}
export LD_LIBRARY_PATH=$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-soak-$$.pool
export CXLSHIM_TIMEOUT_OP_MS=2000 CXLSHIM_TIMEOUT_INIT_MS=5000 CXLSHIM_DEBUG=NONE
trap 'rm -f "$CXLSHIM_POOL_PATH"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
free_records() { $CX pool status | sed -n 's/.*(\([0-9]*\) in use, \([0-9]*\) free).*/\2/p'; }

$CX pool create -s 256M >/dev/null
start=$(free_records)
env LD_PRELOAD="$PWD/$B/libcxlshim.so" "$B/tests/soak" 4 "$S" 2000
after=$(free_records)
echo "free communicator records: $start at the start, $after after the job"
$CX pool status
$CX pool clean
end=$(free_records)
echo "free communicator records after pool clean: $end"
[ "$end" = "$start" ] || fail "the pool lost $((start - end)) communicator records"
echo "soak: ok"

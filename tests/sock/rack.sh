#!/usr/bin/env bash
# tests/sock/rack.sh - the socket echo test across two QEMU guests that
# share an ivshmem BAR as their pool and talk over a virtio-net wire
# (tests/qemu/rack.sh, from the QEMU rack work): the server in guest a, the
# client in guest b, both under the preload; 8 MiB must come back intact
# and through the pool.  Exit 77 when the rack harness is not in the tree
# or guests cannot run here.
#
#   tests/sock/rack.sh [coherent|flush]
#
# flush: the pool is formatted non-coherent (pool.coherence = flush), as a
# CXL memory box without cross-host coherence would be; both guests check
# that their pool is in that mode.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RACK=${RACK:-tests/qemu/rack.sh}
[ -x "$RACK" ] || { echo "SKIP: $RACK not in this tree"; exit 77; }
MODE=${1:-coherent}
POOL=/dev/shm/cxlshim-sock-rack-$MODE-$$.pool
trap 'rm -f $POOL' EXIT
# guests cannot lock the pool across hosts: format it here first
CXLSHIM_POOL_PATH=$POOL CXLSHIM_POOL_SIZE=256M CXLSHIM_POOL_COHERENCE=$MODE \
	LD_PRELOAD=$PWD/$BUILD/libcxlshim.so "$BUILD/tests/sock_check" echo >/dev/null ||
	{ echo "FAIL: formatting the pool"; exit 1; }
RUN="SOCK_CHECK_COHERENCE=$MODE LD_PRELOAD=\$PWD/$BUILD/libcxlshim.so $BUILD/tests/sock_check"
"$RACK" --repo "$PWD" --pool $POOL --timeout 240 \
	--a "$RUN net-server \$RACK_SELF_IP 5555" \
	--b "sleep 3; $RUN net-client \$RACK_PEER_IP 5555"

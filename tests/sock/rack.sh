#!/usr/bin/env bash
# tests/sock/rack.sh - the socket echo test across two QEMU guests that
# share an ivshmem BAR as their pool and talk over a virtio-net wire
# (tests/qemu/rack.sh, from the QEMU rack work): the server in guest a, the
# client in guest b, both under the preload; 8 MiB must come back intact
# and through the pool.  Exit 77 when the rack harness is not in the tree
# or guests cannot run here.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RACK=${RACK:-tests/qemu/rack.sh}
[ -x "$RACK" ] || { echo "SKIP: $RACK not in this tree"; exit 77; }
POOL=/dev/shm/cxlshim-sock-rack-$$.pool
trap 'rm -f $POOL' EXIT
# guests cannot lock the pool across hosts: format it here first
CXLSHIM_POOL_PATH=$POOL CXLSHIM_POOL_SIZE=256M LD_PRELOAD=$PWD/$BUILD/libcxlshim.so \
	"$BUILD/tests/sock_check" echo >/dev/null || { echo "FAIL: formatting the pool"; exit 1; }
"$RACK" --repo "$PWD" --pool $POOL --timeout 240 \
	--a "LD_PRELOAD=\$PWD/$BUILD/libcxlshim.so $BUILD/tests/sock_check net-server \$RACK_SELF_IP 5555" \
	--b "sleep 3; LD_PRELOAD=\$PWD/$BUILD/libcxlshim.so $BUILD/tests/sock_check net-client \$RACK_PEER_IP 5555"

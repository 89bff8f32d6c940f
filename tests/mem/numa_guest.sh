#!/bin/sh
# tests/mem/numa_guest.sh - the placement tests of issue 4 on a machine with
# real NUMA tiers: run INSIDE the QEMU guest (one DRAM node with CPUs, two
# CPU-less nodes standing for two CXL cards), as root, from the repository
# root, on a tree already built on the host (build/libcxlshim.so, build/emu,
# build/tests).  Nothing is compiled here.
#
#   tests/mem/numa_guest.sh            fails unless >= 2 CPU-less nodes exist
#   tests/mem/numa_guest.sh --any      also accepts a single-node machine
#
# Prints the topology, each program's checks, then "numa_guest: PASS" or
# "numa_guest: FAIL (...)"; the exit status says the same.
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
export LD_LIBRARY_PATH=$PWD/$BUILD/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SHIM=$PWD/$BUILD/libcxlshim.so
failed=""

for f in "$SHIM" "$BUILD/tests/numa_check" "$BUILD/tests/hostmem_check" "$BUILD/tests/mem_topo"; do
	[ -e "$f" ] || { echo "numa_guest: FAIL (missing $f: build on the host first)"; exit 1; }
done

echo "== kernel $(uname -r), nodes: $(cat /sys/devices/system/node/has_memory) with memory," \
	"$(cat /sys/devices/system/node/has_cpu) with CPUs"
"$BUILD/tests/mem_topo"
cpuless=0
for d in /sys/devices/system/node/node[0-9]*; do
	[ -z "$(tr -d '\n' <"$d/cpulist")" ] && cpuless=$((cpuless + 1))
done
if [ "$cpuless" -lt 2 ] && [ "$1" != "--any" ]; then
	echo "numa_guest: FAIL (need 2 CPU-less memory nodes, found $cpuless)"
	exit 1
fi

run() {
	name=$1
	shift
	echo "== $name"
	if timeout 300 env LD_PRELOAD="$SHIM" "$@" 2>&1; then :; else
		failed="$failed $name"
	fi
}

run "placement (every rule type, spill, free, full node, register)" "$BUILD/tests/numa_check"
run "entry points + async copies" "$BUILD/tests/hostmem_check" api
run "bad arguments" "$BUILD/tests/hostmem_check" badargs
run "threads + fork" "$BUILD/tests/hostmem_check" threads

if [ -n "$failed" ]; then
	echo "numa_guest: FAIL ($failed )"
	exit 1
fi
echo "numa_guest: PASS"

#!/usr/bin/env bash
# numa_selftest.sh - the NUMA test machine is real: boots the default guest
# (node 0 with the CPUs, CPU-less nodes 1 and 2 for two CXL cards) with each
# node's memory in a file of its own, runs mempolicy_check in it (mbind,
# move_pages, MPOL_MF_MOVE against the guest kernel), then looks in those
# files from the host for the pages mempolicy_check wrote: a page the guest
# kernel says is on node 2 must physically be in node 2's memory.
# Ends with "N passed, M failed"; exit 77 when guests cannot run here.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
CHECK=$BUILD/tests/qemu/mempolicy_check
PAGES=2048 # mempolicy_check's buffers: 8 MiB of 4 KiB pages

MEM=$(mktemp -d /dev/shm/cxlshim-qemu-numa-XXXXXX) || exit 1
trap 'rm -rf "$MEM"' EXIT
TOKEN=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')

tests/qemu/guest.sh --mem-path "$MEM" -- "$CHECK" -k "$TOKEN"
rc=$?
[ $rc = 77 ] && exit 77
passed=0
failed=0
if [ $rc = 0 ]; then
	passed=1
else
	echo "FAIL mempolicy_check in the guest: status $rc"
	failed=1
fi

echo "== pages found in each node's memory file (host side)"
declare -A found
for node in 0 1 2; do
	read -r -a counts < <("$CHECK" -f "$MEM/node$node" -k "$TOKEN")
	for k in 1 2 3 4; do
		found[$k,$node]=${counts[$((k - 1))]:-none}
	done
	echo "node $node: patterns 1..4: ${counts[*]}"
done
# expect PATTERN NODE PAGES: distinct pages of PATTERN in node NODE's memory
# (0: it never was there; stale copies on a node where it was are fine)
expect() {
	if [ "${found[$1,$2]}" = "$3" ]; then
		passed=$((passed + 1))
	else
		echo "FAIL pattern $1 in node $2's memory: ${found[$1,$2]} pages, want $3"
		failed=$((failed + 1))
	fi
}
expect 1 1 $PAGES # bound to node 1 before the first touch
expect 1 0 0
expect 1 2 0
expect 2 2 $PAGES # bound to node 2
expect 2 0 0
expect 2 1 0
expect 3 2 $PAGES # touched on node 0, migrated by mbind(MPOL_MF_MOVE)
expect 4 1 $PAGES # moved from node 2 to node 1 by move_pages
echo "$passed passed, $failed failed"
[ $failed = 0 ]

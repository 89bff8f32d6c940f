#!/bin/sh
# run.sh - runs the CUDA emulation test programs given as arguments and
# prints the overall "N passed, M failed". A program that crashes or hangs
# (120 s) counts as one failure on top of its own report.
# The suite checks the defaults, whatever the caller's environment says.
unset CUDAEMU_DEVICES CUDAEMU_SPIN_US CUDAEMU_MEM_MB CUDAEMU_CHECK_PTRS CUDAEMU_STATS \
	CUDAEMU_LATE_US CUDAEMU_YIELD_US CUDAEMU_SERIAL_HOST_FNS CUDAEMU_SLICE_MS \
	CUDAEMU_CONNECTIONS CUDAEMU_QUEUE_DEPTH
passed=0
failed=0
for t in "$@"; do
	echo "== $t"
	out=$(timeout 120 "$t" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	last=$(printf '%s\n' "$out" | tail -n 1)
	p=$(printf '%s\n' "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
	f=$(printf '%s\n' "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
	if [ -z "$p" ]; then
		echo "FAIL - $t exited with status $rc without a summary"
		p=0
		f=1
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL - $t exited with status $rc"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

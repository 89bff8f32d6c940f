#!/usr/bin/env bash
# tests/sanitize.sh - run by `make test-sanitize` after sanitize-build:
#   1. ASan + UBSan: every step of tests/run.sh on build-asan/
#   2. TSan: the steps with threads that race if anything does (abort from
#      another thread, nonblocking init, watchdog against enqueue, stream
#      host functions stamping traces, replay start nodes) on build-tsan/,
#      whose CUDA emulation is instrumented too: TSan sees the streams'
#      ordering
#   3. valgrind memcheck: the cxlshim command and emulated NCCL runs of
#      the normal build
# Any report fails the run: the sanitizers abort on their first finding.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
rc=0

echo "=== ASan + UBSan (build-asan)"
# The preloaded library carries the ASan runtime into programs that are not
# instrumented (sh, python3, mpirun): do not insist it comes first there.
# Leaks are not findings here: the test programs keep their device buffers.
ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
CFLAGS="$ASAN_CFLAGS" SANITIZE="-fsanitize=address,undefined" BUILD=build-asan \
	CXLSHIM_TEST_ONLY='^(unit|api|coll: [1-4] ranks, counts|reduce: [1-3] ranks|variant|host waits|replays: 600|non-coherent|two jobs|ops|sock: (large writes|by reference|sleepers|stress|corrupt|longjmp$|longjmp-close|fork-epoll))' \
	tests/run.sh || rc=1

echo "=== TSan (build-tsan)"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0 \
CFLAGS="$TSAN_CFLAGS" SANITIZE="-fsanitize=thread" BUILD=build-tsan \
	CXLSHIM_TEST_ONLY='^(unit: (pool|crew)|api: (nonblocking|abort|rank SIGKILLed|ops on different|ncclCommInitAll|3 ranks of one process|two communicators|one thread splits|split and shrink of a nonblocking|a captured group|each rank called)|coll: 3 ranks, counts|reduce: 2 ranks|host waits|replays: 600|ops: (doctor|trace)|mem: (4 threads|8 threads))' \
	tests/run.sh || rc=1

echo "=== valgrind memcheck ($BUILD)"
if ! command -v valgrind >/dev/null; then
	echo "SKIP: valgrind not installed (make deps)"
else
	P=/dev/shm/cxlshim-valgrind-$$.pool
	trap 'rm -f $P' EXIT
	vg() { valgrind -q --error-exitcode=99 --trace-children=yes --child-silent-after-fork=no "$@"; }
	export LD_LIBRARY_PATH=$PWD/$BUILD/emu CXLSHIM_POOL_PATH=$P CXLSHIM_POOL_SIZE=128M
	for t in \
		"$BUILD/cxlshim pool create -p $P -s 128M" \
		"$BUILD/cxlshim pool status -p $P -v" \
		"$BUILD/cxlshim doctor -p $P" \
		"$BUILD/cxlshim policy check conf/cxlshim.conf" \
		"$BUILD/tests/test_policy" \
		"env LD_PRELOAD=$PWD/$BUILD/libcxlshim.so $BUILD/tests/coll_check -n 2 -c 1,odd -t int8,float -C allgather,broadcast" \
		"env LD_PRELOAD=$PWD/$BUILD/libcxlshim.so $BUILD/tests/reduce_check -n 2 -c 7 -t float -o sum" \
		"env LD_PRELOAD=$PWD/$BUILD/libcxlshim.so $BUILD/tests/api_check abort"; do
		if vg $t >/tmp/cxlshim-valgrind-$$.log 2>&1; then
			echo "valgrind: $t: clean"
		else
			echo "valgrind: $t: FAILED"
			tail -40 /tmp/cxlshim-valgrind-$$.log
			rc=1
		fi
	done
	rm -f /tmp/cxlshim-valgrind-$$.log
fi
[ $rc = 0 ] && echo "test-sanitize: no findings" || echo "test-sanitize: FINDINGS (above)"
exit $rc

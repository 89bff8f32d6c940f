# tests/qemu/steps.sh - the test machines' steps, written once for the two
# suites that run them: tests/qemu/run.sh (make test-qemu) and tests/run.sh
# (make test).  Sourced; each suite brings its own step() and $BUILD.
# shellcheck shell=bash

qemu_steps() {
	step "qemu: NUMA guest: mempolicy, placement seen from host" tests/qemu/numa_selftest.sh
	step "qemu: NUMA guest, CXL nodes onlined movable: pin trap" \
		tests/qemu/guest.sh --movable -- "$BUILD/tests/qemu/mempolicy_check" -m
	step "qemu: guest clock on the TSC (GUEST_CLOCK=tsc) keeps true time" \
		tests/qemu/clock_selftest.sh
	step "qemu: two-guest rack: BAR, TCP, pool, collectives" tests/qemu/rack_selftest.sh
	step "rack in two network namespaces (no QEMU)" tests/qemu/rack_selftest.sh --netns
	if [ -f tests/mem/numa_guest.sh ]; then
		step "qemu: tests/mem/numa_guest.sh in the NUMA guest" \
			tests/qemu/guest.sh -- sh tests/mem/numa_guest.sh
	fi
}

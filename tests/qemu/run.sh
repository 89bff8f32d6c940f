#!/usr/bin/env bash
# tests/qemu/run.sh - the test machines' suite (make test-qemu; tests/run.sh
# runs the same steps, written once in tests/qemu/steps.sh): the NUMA guest
# self-test, the TSC clock self-test, the two-guest rack self-test (and the
# same between two network namespaces of this host) and, when the tree has
# it, tests/mem/numa_guest.sh inside the NUMA guest.  One step at a time: guests are TCG and the machine has two cores.
# Ends with "N passed, M failed, K skipped"; a step that cannot run here
# prints "SKIPPED: <reason>" and counts as skipped.
set -uo pipefail
cd "$(dirname "$0")/../.."
export BUILD=${BUILD:-build}
LOGS=$BUILD/tests/logs/qemu
mkdir -p "$LOGS"

tests/qemu/guest.sh --check # each step that needs a guest skips itself

passed=0
failed=0
skipped=0
failures=()

step() {
	local name=$1 log start rc
	shift
	log=$LOGS/$(echo "$name" | tr ' /=,:' '_____').log
	start=$(date +%s%N)
	"$@" >"$log" 2>&1
	rc=$?
	printf '%-58s %s %6dms\n' "$name" "$(case $rc in 0) echo PASS ;; 77) echo SKIP ;;
		*) echo FAIL ;; esac)" $((($(date +%s%N) - start) / 1000000))
	# the boot lines say how long the guests took to come up
	grep -h '^\(\[.\] \)\{0,1\}guest.sh: ' "$log" | sed 's/^/    /'
	case $rc in
	0) passed=$((passed + 1)) ;;
	77) skipped=$((skipped + 1)); grep -m1 SKIPPED "$log" | sed 's/^/    /' ;;
	*)
		failed=$((failed + 1))
		failures+=("$name")
		tail -n 30 "$log" | sed 's/^/    | /'
		;;
	esac
}

# shellcheck source=tests/qemu/steps.sh
. tests/qemu/steps.sh
qemu_steps

if [ $failed -gt 0 ]; then
	echo "failed steps:"
	printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed = 0 ]

# tests/ops/lib.sh - what the operability scripts share (sourced, bash).

fail() { echo "FAIL: $*"; exit 1; }

# gone PID...: true once none of them runs (exited, or a zombie)
gone() {
	local p
	for p; do
		[ -r "/proc/$p/stat" ] && [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" != Z ] &&
			return 1
	done
	return 0
}

# kill_tree PID: SIGKILLs a launcher and its ranks (its children, not the
# script's) and waits until they are gone: `pool clean` and the library's
# sweeps reclaim only what dead processes left, and a killed process takes
# a while to exit on a loaded machine.
kill_tree() {
	local pids
	# ps fails when there are no children; under set -e that would end
	# the script
	pids="$(ps -o pid= --ppid "$1" 2>/dev/null || true) $1"
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	for _ in $(seq 200); do
		# shellcheck disable=SC2086
		gone $pids && return 0
		sleep 0.05
	done
}

# kill_all: kill_tree for every process in the script's `pids` array, then
# reaps what is left of the script's own children
kill_all() {
	local p
	for p in "${pids[@]}"; do
		kill_tree "$p"
	done
	wait 2>/dev/null || true
}

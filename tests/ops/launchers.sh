#!/usr/bin/env bash
# launchers.sh - `cxlshim run` under the launchers it names, each starting
# a real multi-process NCCL job through the pool (tests/ops/launcher_job.c:
# one process per rank, rank and size from the launcher's variables,
# AllGather, Broadcast and AllReduce checked, their bytes counted in the
# pool):
#
#   launchers.sh job       the job's own contract: no launcher, a rank
#                          outside the job, no preload, a stale id, no rank 0;
#                          nested runs list the library once
#   launchers.sh mpirun    mpirun.openmpi -np 2 and -np 3 cxlshim run -- job
#   launchers.sh srun      a one-node Slurm (munge, slurmctld, slurmd; all
#                          under a temporary directory, stopped at the end):
#                          srun -n 2, srun -O -n 3 (more tasks than CPUs),
#                          and cxlshim run -- srun -n 2
#   launchers.sh torchrun  torchrun --nproc_per_node 2 cxlshim run -- job,
#                          and cxlshim run -- torchrun ... job (the workers
#                          inherit the preload), 3 workers
#
# After each job the pool must hold no communicator.
# LD_LIBRARY_PATH is cleared: the emulated CUDA comes from `cxlshim run -e`
# alone, and every process checks that libcxlshim.so is loaded.  A launcher
# that is not installed or whose daemons cannot start here exits 77 with
# the reason; once it runs, every rank must pass.  KEEP=1 keeps the
# temporary directory (the daemons' logs).
set -euo pipefail
B=${BUILD:-build}
CX=$PWD/$B/cxlshim
JOB=$PWD/$B/tests/launcher_job
mode=${1:-}
dir=$(mktemp -d /tmp/cxlshim-ops-launchers.XXXXXX)
# only what this script sets decides (run.sh exports pool settings)
unset $(env | sed -n 's/^\(CXLSHIM_[A-Z_]*\)=.*/\1/p') LD_LIBRARY_PATH LD_PRELOAD
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-launchers-$$.pool CXLSHIM_POOL_SIZE=256M
# a rank that misses the rendezvous fails instead of trying the real NCCL
export CXLSHIM_NCCL_FALLBACK=fail CXLSHIM_TIMEOUT_INIT_MS=30000 CXLSHIM_TIMEOUT_OP_MS=30000
export OMP_NUM_THREADS=1 # torchrun's warning otherwise
cleanup() {
	# || true: a daemon already gone must not stop the others' stop
	! declare -F slurm_node_stop >/dev/null || slurm_node_stop || true
	[ -n "${KEEP:-}" ] || rm -rf "$dir" "$CXLSHIM_POOL_PATH"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
fail() {
	echo "FAIL: $*"
	exit 1
}
skip() {
	echo "SKIPPED: $*"
	exit 77
}
fresh() { # a directory for one job's id
	mktemp -d "$dir/job.XXXXXX"
}
printf '[pool]\nsize = 256M\n[timeout]\nop_ms = 30000\n' >"$dir/job.conf"

# run NRANKS LAUNCHER NAME CMD...: CMD must exit 0 within 60 s and print
# one ok line for each rank 0..NRANKS-1 of LAUNCHER
run() {
	local want=$1 launcher=$2 name=$3 rc=0 r
	shift 3
	echo "== $name"
	timeout -k 5 60 "$@" >"$dir/out" 2>&1 || rc=$?
	cat "$dir/out"
	[ $rc = 0 ] || fail "$name: exit $rc"
	for ((r = 0; r < want; r++)); do
		grep -q "^launcher_job: $launcher rank $r/$want local [0-9]* pid [0-9]*: ok, 3 pool ops" \
			"$dir/out" || fail "$name: no ok line from rank $r of $want"
	done
	[ "$(grep -c '^launcher_job: ' "$dir/out")" = "$want" ] || fail "$name: not $want ranks"
	# every rank destroyed its communicator: the pool holds none
	"$CX" pool status -p "$CXLSHIM_POOL_PATH" --json >"$dir/status" ||
		fail "$name: pool status: $(cat "$dir/status")"
	python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["comms_in_use"])' \
		"$dir/status" || fail "$name: communicators left in the pool: $(cat "$dir/status")"
}

# expect STATUS PATTERN CMD...: exit STATUS, PATTERN in the output
expect() {
	local want=$1 pat=$2 rc=0
	shift 2
	timeout -k 5 60 "$@" >"$dir/out" 2>&1 || rc=$?
	[ $rc = "$want" ] && grep -q -- "$pat" "$dir/out" ||
		{ cat "$dir/out"; fail "'$*': exit $rc (want $want), want '$pat'"; }
}

job_contract() {
	local d

	expect 2 "no launcher environment" "$CX" run -e -- "$JOB" "$(fresh)"
	expect 2 "usage" env RANK=0 WORLD_SIZE=1 "$CX" run -e -- "$JOB"
	expect 2 "RANK=2 WORLD_SIZE=2 is not a rank" env RANK=2 WORLD_SIZE=2 \
		"$CX" run -e -- "$JOB" "$(fresh)"
	expect 2 "SLURM_PROCID=x" env SLURM_PROCID=x SLURM_NTASKS=2 \
		"$CX" run -e -- "$JOB" "$(fresh)"
	expect 1 "libcxlshim.so is not loaded" env LD_LIBRARY_PATH="$B/emu" RANK=0 WORLD_SIZE=1 \
		"$JOB" "$(fresh)"
	d=$(fresh)
	expect 0 "torchrun rank 0/1 local 0 pid [0-9]*: ok" env RANK=0 WORLD_SIZE=1 \
		"$CX" run -e -- "$JOB" "$d"
	expect 1 "left by an earlier job" env RANK=0 WORLD_SIZE=1 "$CX" run -e -- "$JOB" "$d"
	expect 1 "rank 1: no id in .* after 1 s" env SLURM_PROCID=1 SLURM_NTASKS=2 \
		"$CX" run -e -- "$JOB" "$(fresh)" 1
	# a run nested in another (wrapping the launcher and the job) lists
	# the library and the emulation once each
	expect 0 "^$PWD/$B/libcxlshim.so|$PWD/$B/emu$" "$CX" run -e -- "$CX" run -e -- \
		sh -c 'echo "$LD_PRELOAD|$LD_LIBRARY_PATH"'
	echo "launcher_job: ok"
}

launch_mpirun() {
	local mpi=(mpirun.openmpi --allow-run-as-root --oversubscribe)

	command -v mpirun.openmpi >/dev/null || skip "mpirun.openmpi is not installed (make deps)"
	timeout 60 "${mpi[@]}" -np 2 true >"$dir/out" 2>&1 ||
		skip "mpirun.openmpi cannot start 2 processes here: $(tail -n 1 "$dir/out")"
	run 2 mpirun "mpirun -np 2" "${mpi[@]}" -np 2 "$CX" run -e -c "$dir/job.conf" -- \
		"$JOB" "$(fresh)"
	run 3 mpirun "mpirun -np 3" "${mpi[@]}" -np 3 "$CX" run -e -- "$JOB" "$(fresh)"
}

launch_srun() {
	local tool traces

	for tool in munged slurmctld slurmd srun sinfo scontrol scancel; do
		command -v $tool >/dev/null || skip "$tool is not installed (make deps)"
	done
	[ "$(id -u)" = 0 ] || skip "slurmd runs jobs as root only in this test (uid $(id -u))"
	. tests/ops/slurm_node.sh
	slurm_node_start "$dir/slurm" 2>"$dir/why" || skip "one-node Slurm: $(tail -n 1 "$dir/why")"
	sinfo
	run 2 srun "srun -n 2" srun -n 2 "$CX" run -e -c "$dir/job.conf" -t "$dir/traces" -- \
		"$JOB" "$(fresh)"
	# each rank wrote its trace at exit, as -t asks, and they make one timeline
	traces=("$dir"/traces/*.trace)
	[ ${#traces[@]} = 2 ] && "$CX" trace -o "$dir/timeline.json" "${traces[@]}" >"$dir/out" &&
		[ "$(grep -cE '^(AllGather|Broadcast|AllReduce) +2 ' "$dir/out")" = 3 ] ||
		fail "srun -n 2: traces: $(ls "$dir/traces"; cat "$dir/out")"
	run 3 srun "srun -O -n 3 (3 tasks on $(getconf _NPROCESSORS_ONLN) CPUs)" \
		srun -O -n 3 "$CX" run -e -- "$JOB" "$(fresh)"
	run 2 srun "cxlshim run -- srun -n 2" "$CX" run -e -- srun -n 2 "$JOB" "$(fresh)"
}

launch_torchrun() {
	local bin tr

	# Debian's (make deps) before any other on PATH, e.g. a pyenv shim
	bin=$(command -v /usr/bin/torchrun torchrun | head -n 1) || true
	[ -n "$bin" ] || skip "torchrun is not installed (make deps: python3-torch)"
	# Debian's torch 1.13 under Python 3.11 cannot parse its own default
	# --redirects/--tee of 0 (enum.Flag no longer iterates NONE): 2 (stderr)
	# works, and torchrun copies the workers' stderr to its own too.
	tr=("$bin" --standalone --monitor_interval 1 --redirects 2 --tee 2 --log_dir "$dir/torchrun")
	timeout 60 "${tr[@]}" --nproc_per_node 1 --no_python true >"$dir/out" 2>&1 ||
		skip "torchrun cannot start a worker here: $(tail -n 1 "$dir/out")"
	run 2 torchrun "torchrun --nproc_per_node 2 cxlshim run -- job" \
		"${tr[@]}" --nproc_per_node 2 --no_python "$CX" run -e -c "$dir/job.conf" -- \
		"$JOB" "$(fresh)"
	run 3 torchrun "cxlshim run -- torchrun --nproc_per_node 3 job" \
		"$CX" run -e -- "${tr[@]}" --nproc_per_node 3 --no_python "$JOB" "$(fresh)"
}

case $mode in
job) job_contract ;;
mpirun) launch_mpirun ;;
srun) launch_srun ;;
torchrun) launch_torchrun ;;
*)
	echo "usage: launchers.sh job|mpirun|srun|torchrun" >&2
	exit 2
	;;
esac
echo "launchers $mode: ok"

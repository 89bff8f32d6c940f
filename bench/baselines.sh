#!/usr/bin/env bash
# bench/baselines.sh - the shim against the MPI baselines, in one run.
#
# Runs coll_perf under the preload (CPU emulation of CUDA when there is no
# GPU), mpi_perf under Open MPI and mpi_perf under MPICH with the same
# collective, rank count, sizes and datatypes, in R rounds (the order of
# the three rotating from round to round), prints every table and, per row,
# each side's median busbw and range over the rounds and the ratio of
# medians: shim / max(Open MPI, MPICH), with the lowest and highest ratio
# of a single round.  On a shared machine one run of each proves nothing:
# the same run twice differs by up to 2x at 4-8 MiB.
#
# usage: bench/baselines.sh [VAR=value ...] [-R rounds] [coll_perf options]
#   VAR=value   extra environment for the shim run only, e.g.
#               CXLSHIM_INTERLEAVE=0 to show the effect of a policy switch
#   -R rounds   rounds of the three runs (default BENCH_REPS, else 3)
#   options     as coll_perf (-C -N -b -e -f -n -w -c -d -r ...); the MPI
#               runs get the same ones minus -N/-p/-T/-g/-t, and -np N
# env: BUILD (build), BENCH_OUT (where outputs are saved: SIDE.ROUND.txt and
#      compare.txt), BENCH_TIMEOUT (s, per run), BENCH_REPS,
#      OMPI_RUN_ARGS, MPICH_RUN_ARGS, MPIRUN_OPENMPI, MPIRUN_MPICH,
#      CXLSHIM_BENCH_GPU=0|1 (override GPU detection)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

case ${1:-} in -h|--help) sed -n '2,23p' "$0"; exit 0 ;; esac

parse_bench_args "$@"
need_coll_perf
need_shim
init_out_dir baselines

note "ranks: $NRANKS  rounds: $REPS  coll_perf args: ${COLL_ARGS[*]:-(defaults)}"
if [ ${#EXTRA_ENV[@]} -gt 0 ]; then
    note "extra env for the shim run: ${EXTRA_ENV[*]}"
fi
if env | grep -q '^CXLSHIM_'; then
    note "CXLSHIM_* in the environment: $(env | grep '^CXLSHIM_' | tr '\n' ' ')"
fi
have_gpu || note "no GPU: the shim runs on the CPU emulation of CUDA ($EMU_DIR)"
note "outputs saved in $BENCH_OUT"

status=0
declare -A skip=()
# one run of SIDE in round R; an MPI that is not installed is skipped (status
# 3) once and not tried again
run_side() {
    local side=$1 r=$2 rc=0
    [ -z "${skip[$side]:-}" ] || return 0
    case $side in
        shim) run_shim "shim.$r" "${COLL_ARGS[@]}" || rc=$? ;;
        # the MPI runs get the coll_perf options minus those only coll_perf takes
        openmpi) run_openmpi "openmpi.$r" "${MPI_ARGS[@]}" || rc=$? ;;
        mpich) run_mpich "mpich.$r" "${MPI_ARGS[@]}" || rc=$? ;;
    esac
    if [ $rc -eq 3 ] && [ "$side" != shim ]; then
        skip[$side]=1
    elif [ $rc -ne 0 ]; then
        status=1
    fi
}

for ((r = 1; r <= REPS; r++)); do
    for side in $(rounds_order "$r" shim openmpi mpich); do
        load=$(cut -d' ' -f1-3 /proc/loadavg)
        echo "# ==== round $r/$REPS: $side  (load average $load)"
        echo "$r $side $load" >>"$BENCH_OUT/load.txt"
        run_side "$side" "$r"
    done
done

median_tables "shim busbw / max(Open MPI, MPICH) busbw, $REPS rounds  (> 1: shim faster)" \
    shim openmpi mpich | tee "$BENCH_OUT/compare.txt"
[ $status -eq 0 ] || note "at least one run failed (see above)"
exit $status

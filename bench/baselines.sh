#!/usr/bin/env bash
# bench/baselines.sh - the shim against the MPI baselines, in one run.
#
# Runs coll_perf under the preload (CPU emulation of CUDA when there is no
# GPU), then mpi_perf under Open MPI and under MPICH with the same collective,
# rank count, sizes and datatypes, prints the three tables and a comparison
# per row: shim busbw / max(Open MPI, MPICH) busbw.
#
# usage: bench/baselines.sh [VAR=value ...] [coll_perf options]
#   VAR=value   extra environment for the shim run only, e.g.
#               CXLSHIM_INTERLEAVE=0 to show the effect of a policy switch
#   options     as coll_perf (-C -N -b -e -f -n -w -c -d -r ...); the MPI
#               runs get the same ones minus -N/-p/-T/-g/-t, and -np N
# env: BUILD (build), BENCH_OUT (where outputs are saved), BENCH_TIMEOUT (s),
#      OMPI_RUN_ARGS, MPICH_RUN_ARGS, MPIRUN_OPENMPI, MPIRUN_MPICH,
#      CXLSHIM_BENCH_GPU=0|1 (override GPU detection)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

case ${1:-} in -h|--help) sed -n '2,16p' "$0"; exit 0 ;; esac

parse_bench_args "$@"
need_coll_perf
need_shim
init_out_dir baselines

note "ranks: $NRANKS  coll_perf args: ${COLL_ARGS[*]:-(defaults)}"
if [ ${#EXTRA_ENV[@]} -gt 0 ]; then
    note "extra env for the shim run: ${EXTRA_ENV[*]}"
fi
if env | grep -q '^CXLSHIM_'; then
    note "CXLSHIM_* in the environment: $(env | grep '^CXLSHIM_' | tr '\n' ' ')"
fi
have_gpu || note "no GPU: the shim runs on the CPU emulation of CUDA ($EMU_DIR)"
note "outputs saved in $BENCH_OUT"

status=0
run_shim shim "${COLL_ARGS[@]}" || status=1
# The MPI runs get the coll_perf options minus the ones only coll_perf takes.
rc=0; run_openmpi openmpi "${MPI_ARGS[@]}" || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 3 ] || status=1
rc=0; run_mpich mpich "${MPI_ARGS[@]}" || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 3 ] || status=1

compare_tables "shim busbw / max(Open MPI, MPICH) busbw  (> 1: shim faster)" \
    shim "$BENCH_OUT/shim.txt" bestMPI "$BENCH_OUT/openmpi.txt" "$BENCH_OUT/mpich.txt" |
    tee "$BENCH_OUT/compare.txt"
[ $status -eq 0 ] || note "at least one run failed (see above)"
exit $status

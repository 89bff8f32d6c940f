#!/usr/bin/env bash
# bench/ab.sh - the same coll_perf job with and without the preload.
#
# With a GPU: A = coll_perf under LD_PRELOAD=build/libcxlshim.so (real CUDA),
# B = the same binary on stock NCCL, in R rounds (A B, B A, A B, ...), then
# per row the median busbw and range of each and the ratio of medians A / B.
# Stock NCCL refuses two ranks on one GPU, so B needs -N <= number of GPUs.
# Without a GPU stock NCCL cannot run; the baseline is then MPI (Open MPI and
# MPICH on host memory) and this script hands over to bench/baselines.sh.
#
# usage: bench/ab.sh [VAR=value ...] [-R rounds] [coll_perf options]
#   VAR=value   extra environment for the shim run only (CXLSHIM_* overrides)
#   -R rounds   rounds of the two runs (default BENCH_REPS, else 3)
# env: as baselines.sh (BUILD, BENCH_OUT, BENCH_TIMEOUT, BENCH_REPS,
#      CXLSHIM_BENCH_GPU)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

case ${1:-} in -h|--help) sed -n '2,16p' "$0"; exit 0 ;; esac

if ! have_gpu; then
    note "no GPU here: stock NCCL cannot run, so the baseline is MPI instead"
    note "running bench/baselines.sh with the same arguments"
    exec bench/baselines.sh "$@"
fi

parse_bench_args "$@"
need_coll_perf
need_shim
init_out_dir ab
ngpu=$(gpu_count)
if [ "$ngpu" -lt "$NRANKS" ]; then
    note "warning: $NRANKS ranks on $ngpu GPU(s); stock NCCL refuses two ranks on one GPU"
fi
note "ranks: $NRANKS  rounds: $REPS  coll_perf args: ${COLL_ARGS[*]:-(defaults)}"
[ ${#EXTRA_ENV[@]} -eq 0 ] || note "extra env for the shim run: ${EXTRA_ENV[*]}"
note "outputs saved in $BENCH_OUT"

status=0
for ((r = 1; r <= REPS; r++)); do
    for side in $(rounds_order "$r" shim nccl); do
        load=$(cut -d' ' -f1-3 /proc/loadavg)
        echo "# ==== round $r/$REPS: $side  (load average $load)"
        echo "$r $side $load" >>"$BENCH_OUT/load.txt"
        if [ "$side" = shim ]; then
            run_shim "shim.$r" "${COLL_ARGS[@]}" || status=1
        else
            # Stock NCCL: no preload, the real libcudart through coll_perf's RUNPATH.
            run_logged "nccl.$r" env -u LD_PRELOAD "$COLL_PERF" "${COLL_ARGS[@]}" || status=1
        fi
    done
done

median_tables "shim busbw / stock NCCL busbw, $REPS rounds  (> 1: shim faster)" \
    shim nccl | tee "$BENCH_OUT/compare.txt"
[ $status -eq 0 ] || note "at least one run failed (see above)"
exit $status

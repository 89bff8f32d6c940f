#!/usr/bin/env bash
# bench/graph_ab.sh - the same coll_perf job in CUDA-graph mode (-G) and
# eager, and optionally in graph mode on another build of the library.
#
# Sides, in R rounds (rotated each round): graph = coll_perf -G LAUNCHES
# under build/libcxlshim.so, eager = the same without -G, and with
# BASE_LIB=path (a libcxlshim.so of another commit, its own pool file)
# base = -G under that library.  Then per row the median busbw and range of
# each side and the ratio of graph's median to the best other side's.
# Without a GPU it runs on the CPU emulation (build/emu).
#
# usage: bench/graph_ab.sh [VAR=value ...] [-R rounds] [coll_perf options]
#   -G is added by the script (GRAPH_LAUNCHES, default 5); every other
#   option goes to coll_perf as given
# env: BASE_LIB, GRAPH_LAUNCHES, and as baselines.sh (BUILD, BENCH_OUT,
#      BENCH_TIMEOUT, BENCH_REPS)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

case ${1:-} in -h|--help) sed -n '2,17p' "$0"; exit 0 ;; esac

parse_bench_args "$@"
need_coll_perf
need_shim
init_out_dir graph
launches=${GRAPH_LAUNCHES:-5}
sides=(graph eager)
if [ -n "${BASE_LIB:-}" ]; then
    [ -f "$BASE_LIB" ] || die "BASE_LIB $BASE_LIB: no such file"
    sides+=(base)
fi
note "ranks: $NRANKS  rounds: $REPS  -G $launches  coll_perf args: ${COLL_ARGS[*]:-(defaults)}"
note "outputs saved in $BENCH_OUT"

status=0
for ((r = 1; r <= REPS; r++)); do
    for side in $(rounds_order "$r" "${sides[@]}"); do
        load=$(cut -d' ' -f1-3 /proc/loadavg)
        echo "# ==== round $r/$REPS: $side  (load average $load)"
        echo "$r $side $load" >>"$BENCH_OUT/load.txt"
        case $side in
        graph) run_shim "graph.$r" "${COLL_ARGS[@]}" -G "$launches" || status=1 ;;
        eager) run_shim "eager.$r" "${COLL_ARGS[@]}" || status=1 ;;
        base)
            # a pool of its own: another commit may have another pool format
            SHIM_LIB=$BASE_LIB CXLSHIM_POOL_PATH=${CXLSHIM_POOL_PATH:-/dev/shm/cxlshim.pool}.base \
                run_shim "base.$r" "${COLL_ARGS[@]}" -G "$launches" || status=1
            rm -f "${CXLSHIM_POOL_PATH:-/dev/shm/cxlshim.pool}.base"
            ;;
        esac
    done
done

median_tables "graph busbw / best other side's busbw, $REPS rounds  (> 1: graph mode faster)" \
    "${sides[@]}" | tee "$BENCH_OUT/compare.txt"
[ $status -eq 0 ] || note "at least one run failed (see above)"
exit $status

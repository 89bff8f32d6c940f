# shellcheck shell=bash
# bench/lib.sh - helpers shared by ab.sh and baselines.sh (sourced, not run).
#
# Conventions: scripts cd to the repository root, binaries live in
# $BUILD/bench (BUILD defaults to "build"), every run's output is saved under
# $BENCH_OUT (default $BUILD/bench/results/<time>-<tag>) and echoed.

BUILD=${BUILD:-build}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900}
COLL_PERF=$BUILD/bench/coll_perf
SHIM_LIB=$BUILD/libcxlshim.so
EMU_DIR=$BUILD/emu
MPIRUN_OPENMPI=${MPIRUN_OPENMPI:-mpirun.openmpi}
MPIRUN_MPICH=${MPIRUN_MPICH:-mpirun.mpich}
# Open MPI refuses root without --allow-run-as-root; --oversubscribe lets more
# ranks than cores start; self,vader is the shared-memory transport (no
# network needed in a container).
OMPI_RUN_ARGS=${OMPI_RUN_ARGS:---allow-run-as-root --oversubscribe --mca btl self,vader}
MPICH_RUN_ARGS=${MPICH_RUN_ARGS:-}

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
note() { echo "# $(basename "$0"): $*"; }

# Splits "$@" into EXTRA_ENV (leading VAR=value words, applied to the shim run
# only), REPS (-R n: rounds of runs, default $BENCH_REPS or 3; the scripts'
# own option, passed to neither benchmark), COLL_ARGS (everything else, for
# coll_perf), MPI_ARGS (COLL_ARGS minus the options mpi_perf does not take)
# and NRANKS (from -N, default 2).
parse_bench_args() {
    # shellcheck disable=SC2034 # read by the sourcing script
    EXTRA_ENV=()
    MPI_ARGS=()
    COLL_ARGS=()
    NRANKS=2
    REPS=${BENCH_REPS:-3}
    while [ $# -gt 0 ] && [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
        EXTRA_ENV+=("$1")
        shift
    done
    while [ $# -gt 0 ]; do
        case $1 in
            -R) REPS=${2:?-R needs a value}; shift 2; continue ;;
            -R*) REPS=${1#-R}; shift; continue ;;
        esac
        COLL_ARGS+=("$1")
        case $1 in
            -N|--nranks) NRANKS=${2:?-N needs a value}; COLL_ARGS+=("$2"); shift 2 ;;
            -N*) NRANKS=${1#-N}; shift ;;
            --nranks=*) NRANKS=${1#--nranks=}; shift ;;
            -p|-T|-g|-t|--pool|--timeout|--ngpus|--nthreads)
                COLL_ARGS+=("${2:?$1 needs a value}"); shift 2 ;;
            -p*|-T*|-g*|-t*|--pool=*|--timeout=*|--ngpus=*|--nthreads=*) shift ;;
            *) MPI_ARGS+=("$1"); shift ;;
        esac
    done
    if ! [[ $NRANKS =~ ^[0-9]+$ ]] || [ "$NRANKS" -lt 1 ]; then
        die "bad rank count '$NRANKS'"
    fi
    if ! [[ $REPS =~ ^[0-9]+$ ]] || [ "$REPS" -lt 1 ]; then
        die "bad repetition count '$REPS' (-R)"
    fi
}

# True when a usable NVIDIA GPU is present (override: CXLSHIM_BENCH_GPU=0|1).
have_gpu() {
    case ${CXLSHIM_BENCH_GPU:-auto} in
        0) return 1 ;;
        1) return 0 ;;
    esac
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

gpu_count() { nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true; }

need_coll_perf() {
    [ -x "$COLL_PERF" ] || die "$COLL_PERF missing: build it with 'make bench-build'"
}

need_shim() {
    [ -f "$SHIM_LIB" ] || die "$SHIM_LIB missing: build it with 'make'"
    if ! have_gpu; then
        [ -e "$EMU_DIR/libcudart.so.13" ] || [ -e "$EMU_DIR/libcudart.so" ] ||
            die "no GPU and no CUDA emulator in $EMU_DIR: build it with 'make'"
    fi
}

init_out_dir() {
    local tag=$1
    BENCH_OUT=${BENCH_OUT:-$BUILD/bench/results/$(date +%Y%m%d-%H%M%S)-$tag}
    mkdir -p "$BENCH_OUT"
}

# run_logged NAME CMD... : runs CMD with a timeout, output to $BENCH_OUT/NAME.txt
# and to the terminal; returns CMD's status without tripping set -e.
run_logged() {
    local name=$1; shift
    local rc=0
    echo "# ---- $name: $*"
    timeout -k 10 "$BENCH_TIMEOUT" "$@" > "$BENCH_OUT/$name.txt" 2>&1 || rc=$?
    cat "$BENCH_OUT/$name.txt"
    if [ $rc -ne 0 ]; then
        echo "# ---- $name FAILED (status $rc)"
        [ $rc -eq 124 ] && echo "# ---- $name hit the ${BENCH_TIMEOUT}s timeout (BENCH_TIMEOUT)"
    fi
    return $rc
}

# The shim side: coll_perf under the preload; with no GPU the CPU emulation
# of CUDA comes first on the library path.
run_shim() {
    local name=$1; shift
    local env=(LD_PRELOAD="$SHIM_LIB${LD_PRELOAD:+:$LD_PRELOAD}")
    have_gpu || env+=(LD_LIBRARY_PATH="$EMU_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    run_logged "$name" env "${env[@]}" "${EXTRA_ENV[@]}" "$COLL_PERF" "$@"
}

# mpi_ready LABEL BIN MPIRUN PACKAGES : whether an MPI baseline can run
# here; notes why it is skipped when not.
mpi_ready() {
    local label=$1 bin=$2 mpirun=$3 packages=$4
    [ -x "$bin" ] || { note "skipping $label: $bin missing (apt-get install $packages; make bench-build)"; return 1; }
    command -v "$mpirun" >/dev/null || { note "skipping $label: $mpirun not found"; return 1; }
}

run_openmpi() {
    local name=$1; shift
    local bin=$BUILD/bench/mpi_perf_openmpi
    mpi_ready "Open MPI" "$bin" "$MPIRUN_OPENMPI" "openmpi-bin libopenmpi-dev" || return 3
    # shellcheck disable=SC2086 # word splitting of the run args is intended
    run_logged "$name" "$MPIRUN_OPENMPI" $OMPI_RUN_ARGS -np "$NRANKS" "$bin" "$@"
}

run_mpich() {
    local name=$1; shift
    local bin=$BUILD/bench/mpi_perf_mpich
    mpi_ready "MPICH" "$bin" "$MPIRUN_MPICH" "mpich libmpich-dev" || return 3
    # shellcheck disable=SC2086
    run_logged "$name" "$MPIRUN_MPICH" $MPICH_RUN_ARGS -n "$NRANKS" "$bin" "$@"
}

# rounds_order ROUND SIDE... : the sides rotated by ROUND-1, so that over
# the rounds each side runs first, second, ... as often (a load burst that
# lasts a few runs then hits every side alike).
rounds_order() {
    local round=$1; shift
    local sides=("$@") i n=$#
    for ((i = 0; i < n; i++)); do
        echo "${sides[((round - 1 + i) % n)]}"
    done
}

# median_tables TITLE SIDE... : per-row medians over the rounds of each
# SIDE's saved outputs ($BENCH_OUT/SIDE.ROUND.txt, ROUND = 1..$REPS),
# first side against the best of the others (bench/medians.awk).
median_tables() {
    local title=$1; shift
    local args=() side r
    for side in "$@"; do
        args+=("side=$side")
        for ((r = 1; r <= REPS; r++)); do
            [ -s "$BENCH_OUT/$side.$r.txt" ] && args+=("r=$r" "$BENCH_OUT/$side.$r.txt")
        done
    done
    awk -v sides="$*" -v title="$title" -f bench/stats.awk -f bench/medians.awk "${args[@]}"
    [ -s "$BENCH_OUT/load.txt" ] &&
        awk '{ l = l " " $3 } END { print "# 1-minute load average before each run:" l }' \
            "$BENCH_OUT/load.txt"
    return 0
}

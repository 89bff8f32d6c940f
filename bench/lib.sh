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
# only), COLL_ARGS (everything else, for coll_perf), MPI_ARGS (COLL_ARGS minus
# the options mpi_perf does not take) and NRANKS (from -N, default 2).
parse_bench_args() {
    # shellcheck disable=SC2034 # read by the sourcing script
    EXTRA_ENV=()
    MPI_ARGS=()
    NRANKS=2
    while [ $# -gt 0 ] && [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
        EXTRA_ENV+=("$1")
        shift
    done
    # shellcheck disable=SC2034
    COLL_ARGS=("$@")
    while [ $# -gt 0 ]; do
        case $1 in
            -N|--nranks) NRANKS=${2:?-N needs a value}; shift 2 ;;
            -N*) NRANKS=${1#-N}; shift ;;
            --nranks=*) NRANKS=${1#--nranks=}; shift ;;
            -p|-T|-g|-t|--pool|--timeout|--ngpus|--nthreads) shift 2 ;;
            -p*|-T*|-g*|-t*|--pool=*|--timeout=*|--ngpus=*|--nthreads=*) shift ;;
            *) MPI_ARGS+=("$1"); shift ;;
        esac
    done
    if ! [[ $NRANKS =~ ^[0-9]+$ ]] || [ "$NRANKS" -lt 1 ]; then
        die "bad rank count '$NRANKS'"
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

run_openmpi() {
    local name=$1; shift
    local bin=$BUILD/bench/mpi_perf_openmpi
    [ -x "$bin" ] || { note "skipping Open MPI: $bin missing (apt-get install openmpi-bin libopenmpi-dev; make bench-build)"; return 3; }
    command -v "$MPIRUN_OPENMPI" >/dev/null || { note "skipping Open MPI: $MPIRUN_OPENMPI not found"; return 3; }
    # shellcheck disable=SC2086 # word splitting of the run args is intended
    run_logged "$name" "$MPIRUN_OPENMPI" $OMPI_RUN_ARGS -np "$NRANKS" "$bin" "$@"
}

run_mpich() {
    local name=$1; shift
    local bin=$BUILD/bench/mpi_perf_mpich
    [ -x "$bin" ] || { note "skipping MPICH: $bin missing (apt-get install mpich libmpich-dev; make bench-build)"; return 3; }
    command -v "$MPIRUN_MPICH" >/dev/null || { note "skipping MPICH: $MPIRUN_MPICH not found"; return 3; }
    # shellcheck disable=SC2086
    run_logged "$name" "$MPIRUN_MPICH" $MPICH_RUN_ARGS -n "$NRANKS" "$bin" "$@"
}

# compare_tables TITLE NUM_LABEL NUM_FILE DEN_LABEL DEN_FILE... :
# per row (size, type, redop, root) prints busbw of NUM_FILE, the best busbw
# among the DEN_FILEs, and their ratio, for out-of-place and in-place.
# Rows are the data lines of the nccl-tests table (not starting with '#').
# A busbw that is not a number (N/A: the in-place columns of a collective
# without an in-place variant, alltoall) counts as absent and prints N/A.
compare_tables() {
    local title=$1 nlabel=$2 nfile=$3 dlabel=$4; shift 4
    local dens=()
    local f
    for f in "$@"; do [ -s "$f" ] && dens+=("$f"); done
    if [ ! -s "$nfile" ] || [ ${#dens[@]} -eq 0 ]; then
        echo "# $title: not enough results to compare"
        return 0
    fi
    echo "#"
    echo "# $title"
    awk -v nfile="$nfile" -v nlabel="$nlabel" -v dlabel="$dlabel" '
        function isrow() { return $0 !~ /^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ }
        function isnum(v) { return v ~ /^[0-9]+(\.[0-9]*)?$/ }
        # keeps the larger of a stored busbw and v; absent ones stay absent
        function best(arr, k, v) { if (isnum(v) && (!(k in arr) || v + 0 > arr[k])) arr[k] = v + 0 }
        FILENAME == nfile { if (isrow()) { k = $1 " " $3 " " $4 " " $5;
                            if (!(k in seen)) order[n++] = k; seen[k] = 1;
                            if (isnum($8)) nout[k] = $8 + 0; if (isnum($12)) nin[k] = $12 + 0 } next }
        isrow() { k = $1 " " $3 " " $4 " " $5; best(dout, k, $8); best(din, k, $12) }
        function bw(arr, k) { return (k in arr) ? sprintf("%12.2f", arr[k]) : sprintf("%12s", "N/A") }
        function ratio(a, b, k) { return ((k in a) && (k in b) && b[k] > 0) ? sprintf("%7.2f", a[k] / b[k]) : "      -" }
        END {
            printf "#       size      type   redop    root  %12s %12s   ratio  %12s %12s   ratio\n", \
                   nlabel " out", dlabel " out", nlabel " in", dlabel " in"
            printf "#        (B)                              %12s %12s          %12s %12s\n", \
                   "(GB/s)", "(GB/s)", "(GB/s)", "(GB/s)"
            for (i = 0; i < n; i++) {
                k = order[i]; split(k, f, " ")
                printf "%12s  %8s  %6s  %6s  %s %s %s  %s %s %s\n", f[1], f[2], f[3], f[4], \
                       bw(nout, k), bw(dout, k), ratio(nout, dout, k), bw(nin, k), bw(din, k), ratio(nin, din, k)
            }
        }' "$nfile" "${dens[@]}"
}

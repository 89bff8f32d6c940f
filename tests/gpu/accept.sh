#!/usr/bin/env bash
# tests/gpu/accept.sh - the "where a GPU is available" acceptance items of
# issues 2, 3 and 4, on one machine with an NVIDIA GPU, in under 10 minutes
# (`make test-gpu`):
#
#   pool   the pooled collective, reduction, API, send/receive and
#          ProcessGroupNCCL tests on the real driver, several processes
#          on GPU 0 (issues 2, 3)
#   nccl-tests  every *_perf binary under the preload, MPI ranks on
#          GPU 0 with NCCL_TESTS_DEVICE=0 (without an MPI: threads, one
#          GPU each, where there are enough GPUs), checked (-c 1),
#          eager and CUDA-graph (-G) mode, 0 wrong (issues 2, 3)
#   pinned cudaMemcpyAsync bandwidth of a shim-placed pinned buffer
#          against cudaHostAlloc's own, same node (issue 4); also the
#          GPU <-> pinned host figure the pool's bandwidth is compared with
#   torch  torchrun, 2 ranks on cuda:0, DDP and FSDP2 under the preload,
#          losses against a one-process reference (issue 3; pin_memory()
#          and non_blocking copies: issue 4)
#
# Usage: tests/gpu/accept.sh [-o DIR] [--nccl-tests SRC] [--quick] [--emulate]
#                            [--budget SECONDS] [--only ITEMS]
#
#   -o DIR        everything goes there (default build/gpu-accept): logs/,
#                 summary.txt, env.txt
#   --nccl-tests SRC  a checkout of NVIDIA/nccl-tests (not a Debian
#                 package; nothing is downloaded): built here with
#                 $CUDA_HOME and the real NCCL, MPI=1 when an MPI is
#                 found, else threads.  Also NCCL_TESTS_SRC.  Without it,
#                 *_perf binaries found on PATH are used as they are.
#   --quick       fewer sizes and ranks
#   --budget SECONDS  end within this many seconds (a lent machine's
#                 time is counted): each run's own limit is cut to what is
#                 left, and runs that find nothing left are recorded SKIP
#   --only ITEMS  a comma list of pool, pinned, nccl-tests, torch (default:
#                 all); NCCL_TESTS_BINS (e.g. "all_gather broadcast")
#                 and NCCL_TESTS_ARGS narrow the nccl-tests runs;
#                 ACCEPT_POOL_SIZE sets the pool's size (default 1G);
#                 ACCEPT_CONNECTIONS sets CUDA_DEVICE_MAX_CONNECTIONS
#                 (default 32; 1 is Megatron-LM's one queue per context);
#                 CXLSHIM_* policy settings in the environment reach
#                 every rank (e.g. CXLSHIM_CCCL_CHUNK_SIZE=2M)
#   --emulate     no GPU needed: the parts the CPU emulation can run
#                 (pool tests, pinned copies) on build/emu, to check the
#                 script itself; nccl-tests and PyTorch are skipped, saying
#                 why, and bandwidths are the CPU's
#
# Without a GPU (and without --emulate) it prints why it skipped and exits
# 0.  Otherwise it ends with the summary and exits 1 when an item failed.
# Environment: CUDA_HOME (/usr/local/cuda), NCCL_HOME (the real NCCL: lib/
# and include/; default: the one PyTorch's wheels bring, else CUDA_HOME),
# CXLSHIM_ACCEPT_PREBUILT=1 (use the build/ that is there, e.g. one carried
# from a Debian machine, instead of building), NCCL_TESTS_RANKS (ranks per
# nccl-tests run: 4, 2 with --quick), NCCL_TESTS_MPI_HOME (an MPI whose
# include/mpi.h and mpirun to use).  tests/gpu/lent.sh carries all of it
# to a lent machine that has no Debian packages.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
BUILD=${BUILD:-build}
OUT=$BUILD/gpu-accept
NCCL_TESTS_SRC=${NCCL_TESTS_SRC:-}
QUICK=0
EMULATE=0
BUDGET=0
ONLY=pool,pinned,nccl-tests,torch

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
	case $1 in
	-o) OUT=$2; shift ;;
	--nccl-tests) NCCL_TESTS_SRC=$2; shift ;;
	--quick) QUICK=1 ;;
	--emulate) EMULATE=1 ;;
	--budget) BUDGET=$2; shift ;;
	--only) ONLY=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "accept.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
mkdir -p "$OUT/logs" || exit 1
OUT=$(cd "$OUT" && pwd)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
fails=0

note() { echo "gpu-accept: $*"; }

# limit SECONDS: the time a run may take, cut to what --budget leaves
# (0: nothing is left).  The budget counts from CXLSHIM_ACCEPT_START
# (lent.sh sets it before it unpacks), else from now; each run may take 5
# s more than its limit (timeout -k 5).
DEADLINE=$((${CXLSHIM_ACCEPT_START:-$(date +%s)} + BUDGET))
limit() {
	local left=$((DEADLINE - $(date +%s) - 5))
	if [ "$BUDGET" = 0 ] || [ "$left" -ge "$1" ]; then
		echo "$1"
	elif [ "$left" -ge 10 ]; then
		echo "$left"
	else
		echo 0
	fi
}

# ended ITEM RC WANTED GIVEN LOG START: records how a run ended; one that
# timed out because --budget cut its limit is SKIP, not FAIL
ended() {
	local item=$1 rc=$2 wanted=$3 given=$4 log=$5 start=$6
	if [ "$rc" = 0 ]; then
		record "$item" PASS "$(($(date +%s) - start)) s"
	elif [ "$rc" = 124 ] && [ "$given" -lt "$wanted" ]; then
		record "$item" SKIP "cut by --budget $BUDGET after $given s, logs/$(basename "$log")"
	else
		record "$item" FAIL "exit $rc$([ "$rc" = 124 ] && echo ' (timed out)'), logs/$(basename "$log")"
	fi
}

# record ITEM STATUS DETAIL: one summary line (PASS, FAIL, SKIP, INFO)
record() {
	printf '%-40s %-4s %s\n' "$1" "$2" "${3:-}" | tee -a "$SUMMARY"
	[ "$2" != FAIL ] || fails=$((fails + 1))
}

# Why this machine cannot run the GPU items, or nothing.
no_gpu_reason() {
	if ! command -v nvidia-smi >/dev/null 2>&1; then
		echo "nvidia-smi not found (no NVIDIA driver)"
	elif ! nvidia-smi -L >/dev/null 2>&1; then
		echo "nvidia-smi -L failed: $(nvidia-smi -L 2>&1 | head -n 1)"
	elif ! nvidia-smi -L | grep -q '^GPU '; then
		echo "nvidia-smi lists no GPU"
	fi
}

if [ $EMULATE = 0 ]; then
	why=$(no_gpu_reason)
	if [ -n "$why" ]; then
		note "SKIPPED: no GPU here: $why."
		note "run it on a machine with an NVIDIA GPU; --emulate checks the script on the CPU emulation"
		record "gpu acceptance" SKIP "$why"
		exit 0
	fi
fi

# ---- where the real CUDA and NCCL are ---------------------------------------

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
site_dirs() { python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null; }
# first file named $1 under the Python packages' nvidia/ folders
in_wheels() {
	local d
	for d in $(site_dirs); do
		[ -d "$d/nvidia" ] && find "$d/nvidia" -name "$1" -print -quit 2>/dev/null
	done | head -n 1
}
first_dir_of() {
	local f
	for f in "$@"; do
		[ -n "$f" ] && [ -e "$f" ] && { dirname "$f"; return; }
	done
}

if [ -z "${NCCL_HOME:-}" ]; then
	lib=$(first_dir_of "$(in_wheels libnccl.so.2)" "$CUDA_HOME/lib64/libnccl.so.2" \
		"$CUDA_HOME/lib/libnccl.so.2")
	NCCL_LIB=${lib:-$CUDA_HOME/lib64}
	inc=$(first_dir_of "$(in_wheels nccl.h)" "$CUDA_HOME/include/nccl.h")
	NCCL_INC=${inc:-$CUDA_HOME/include}
else
	NCCL_LIB=$NCCL_HOME/lib
	NCCL_INC=$NCCL_HOME/include
fi
# Wheels ship libnccl.so.2 without the libnccl.so that -lnccl needs: a
# folder of links in the output stands in for NCCL_HOME at link time.
NCCL_LINK=$OUT/nccl-home
mkdir -p "$NCCL_LINK/lib"
ln -sfn "$NCCL_INC" "$NCCL_LINK/include"
ln -sf "$NCCL_LIB/libnccl.so.2" "$NCCL_LINK/lib/libnccl.so"
ln -sf "$NCCL_LIB/libnccl.so.2" "$NCCL_LINK/lib/libnccl.so.2"
CUDART_DIR=$(first_dir_of "$CUDA_HOME/lib64/libcudart.so.13" "$CUDA_HOME/lib/libcudart.so.13" \
	"$(in_wheels libcudart.so.13)")
CUDART_DIR=${CUDART_DIR:-$CUDA_HOME/lib64}

if [ $EMULATE = 1 ]; then
	RUN_LIBS=$ROOT/$BUILD/emu
	MODE="CPU emulation ($BUILD/emu)"
else
	RUN_LIBS=$NCCL_LIB:$CUDART_DIR
	MODE="real CUDA"
fi
SHIM=$ROOT/$BUILD/libcxlshim.so

{
	echo "mode: $MODE"
	echo "date: $(date -u +%FT%TZ)  host: $(uname -n)  kernel: $(uname -r)"
	echo "CUDA_HOME=$CUDA_HOME  NCCL_LIB=$NCCL_LIB  NCCL_INC=$NCCL_INC  cudart: $CUDART_DIR"
	command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi
	command -v nvcc >/dev/null 2>&1 && nvcc --version
	[ -x "$CUDA_HOME/bin/nvcc" ] && "$CUDA_HOME/bin/nvcc" --version
	python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
		"nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None)' 2>&1
	nproc
	uptime
} >"$OUT/env.txt" 2>&1
note "$MODE; output in $OUT"

# ---- build ------------------------------------------------------------------

TESTS="coll_check reduce_check api_check p2p_check pg_check pinned_bw"
build() {
	local targets=("$BUILD/libcxlshim.so") t
	for t in $TESTS; do targets+=("$BUILD/tests/$t"); done
	make -j"$(nproc)" CUDA_HOME="$CUDA_HOME" CUDA_LIB="$NCCL_LINK/lib" \
		CFLAGS="-O2 -g -I$NCCL_INC" "${targets[@]}"
}
if [ "${CXLSHIM_ACCEPT_PREBUILT:-0}" = 1 ]; then
	note "using the build in $BUILD as it is"
elif ! build >"$OUT/logs/build.log" 2>&1; then
	record build FAIL "see logs/build.log (libnuma-dev and libinih-dev are needed, nccl.h in $NCCL_INC)"
	tail -n 20 "$OUT/logs/build.log"
	exit 1
fi
if ! grep -q . "$BUILD/kernels/fold.fatbin" 2>/dev/null && [ $EMULATE = 0 ]; then
	record build FAIL "built without nvcc: no GPU reduction kernels"
else
	record build PASS "$(basename "$BUILD")/libcxlshim.so and the test programs"
fi

# ---- the runs ---------------------------------------------------------------

POOL=/dev/shm/cxlshim-gpu-accept-$$.pool
trap 'rm -f /dev/shm/cxlshim-gpu-accept-$$*.pool' EXIT
# Every rank process of a test uses GPU 0; a process with several ranks
# (nccl-tests threads) has two work streams per rank waiting on doorbells,
# and streams beyond the device's connections share hardware queues, where
# a wait would hold up unrelated work: as many connections as CUDA allows.
run_env=(LD_LIBRARY_PATH="$RUN_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	CXLSHIM_POOL_PATH="$POOL" CXLSHIM_POOL_SIZE="${ACCEPT_POOL_SIZE:-1G}" CXLSHIM_CONF="$ROOT/tests/gpu/gpu.conf"
	CXLSHIM_TIMEOUT_OP_MS=30000 CUDA_DEVICE_MAX_CONNECTIONS="${ACCEPT_CONNECTIONS:-32}" NCCL_TESTS_DEVICE=0)

# step ITEM NAME SECONDS CMD...: one program under the preload, logged
step() {
	local item=$1 name=$2 secs=$3 log rc start given
	shift 3
	log=$OUT/logs/$item-$(echo "$name" | tr -c 'A-Za-z0-9._-' _).log
	given=$(limit "$secs")
	if [ "$given" = 0 ]; then
		record "$item: $name" SKIP "out of time (--budget $BUDGET)"
		return 0
	fi
	start=$(date +%s)
	env "${run_env[@]}" LD_PRELOAD="$SHIM" timeout -k 5 "$given" "$@" >"$log" 2>&1
	rc=$?
	ended "$item: $name" $rc "$secs" "$given" "$log" "$start"
	return $rc
}

T=$BUILD/tests
pool_tests() {
	if [ $QUICK = 1 ]; then
		step pool "allgather/bcast/...: 2 ranks" 120 "$T/coll_check" -n 2 -c 0,1,odd,1M -t int8,float,bf16
		step pool "reductions: 2 ranks" 120 "$T/reduce_check" -n 2 -c 0,1,7,1000 -t float,bf16,int32
	else
		step pool "allgather/bcast/...: 2 ranks, 64M" 180 "$T/coll_check" -n 2 -c 0,1,odd,1M,64M
		step pool "allgather/bcast/...: 4 ranks" 180 "$T/coll_check" -n 4 -c 0,1,odd,1M
		step pool "allgather/bcast/...: 8 ranks" 180 "$T/coll_check" -n 8 -c odd,1M -t float,int8
		step pool "reductions (GPU kernels): 2 ranks" 180 "$T/reduce_check" -n 2 -c 0,1,7,1000
		# four processes time-slice one GPU: each op costs milliseconds
		# (165 s for five types and every op on an H200), so fewer here
		step pool "reductions (GPU kernels): 4 ranks" 180 "$T/reduce_check" -n 4 -c 7,100000 \
			-t float,bf16,e4m3 -o sum,avg,premulsum-dev
	fi
	step pool "bad arguments" 60 "$T/api_check" badargs
	step pool "nonblocking init" 60 "$T/api_check" nonblocking
	step pool "ops on several streams" 60 "$T/api_check" streams
	step pool "CUDA graph replays" 120 "$T/api_check" graph
	# send/receive replays meet their peers alone: a pipeline captured
	# outside groups, ranks that captured nothing exchanging beside a
	# pair's replays, collectives and pipelines in one graph, a pair
	# group against a collective (ncclInvalidUsage)
	# shellcheck disable=SC2016
	step pool "CUDA graph replays: pipelines, pairs beside others, mixed graphs" 120 bash -c \
		'for c in graphpipe graphpipe4 graphmix-pingpong graphmix-bystander graphmix-mixed \
			graphmix-mixedb graphkind; do CXLSHIM_TIMEOUT_OP_MS=10000 "$0" $c || exit 1; done' \
		"$T/api_check"
	# captured sends and receives on slot flags (pool format 18, 64-bit
	# stream waits): sends whose receives the peer replays later or groups
	# otherwise, replays matched in run order, an abort ending stuck
	# replays, a dead peer, random sizes to every rank, split children
	# (not graphallp2p: ncclCommInitAll wants a GPU per rank)
	# shellcheck disable=SC2016
	step pool "CUDA graph replays: captured sends and receives on slot flags" 150 bash -c \
		'for c in graphsendsend graphsepgrp graphorder3 graphtwographs graphreplays-counts \
			graphreplays-split graphstuck graphdead graphreleased graphfuzz graphfuzz4 \
			graphsplitp2p; do CXLSHIM_TIMEOUT_OP_MS=5000 "$0" $c || exit 1; done' \
		"$T/api_check"
	# captured collectives on slot flags (pool format 19): every
	# collective in one graph, 2 and 4 ranks, in place too, 20 replays;
	# the same collectives grouped in graphs differently per rank; a peer
	# killed mid-replay; replays after an abort and the peer's destroy
	# shellcheck disable=SC2016
	step pool "CUDA graph replays: captured collectives on slot flags" 150 bash -c \
		'for c in graphcolls graphcolls4 graphcollsi4 graphgrouped graphgrouped4 \
			graphdeadcoll graphreleasedc graphtwice4; do CXLSHIM_TIMEOUT_OP_MS=5000 "$0" $c || exit 1; done' \
		"$T/api_check"
	# communicator calls: splits (nonblocking too), shrink, revoke, abort
	# during a split, the device API teams, group ordering and failures,
	# 64-bit PreMulSum ($0 is the program, for the inner shell to expand).
	# (splitnb1 runs in its own step below)
	# shellcheck disable=SC2016
	step pool "communicators: split, shrink, revoke, abort, groups" 120 bash -c \
		'for c in split splitnb shrink revoke revokesplit splitabort devapi \
			grouporder grouperr groupmeet groupmixcap premulsum64; do "$0" $c || exit 1; done' "$T/api_check"
	# captured groups: each open capture's own stream pair, communicators
	# called in other orders per rank, 20 replays; eager use during a capture;
	# an invalidated capture stream; a capture ended before its group's end.
	# Not groupmeet2 (a call's stream destroyed before the group's end):
	# the emulation refuses a destroyed handle, the driver dereferences it
	# (an H200 faulted in cuStreamGetCaptureInfo), as it would under NCCL
	# shellcheck disable=SC2016
	step pool "captured groups: orders, replays, mixed, ended" 180 bash -c \
		'for c in groupcapture groupcapmix groupcapstreams groupcapend; do
			CXLSHIM_TIMEOUT_OP_MS=10000 "$0" $c || exit 1; done' "$T/api_check"
	# several ranks of one process on the GPU: each rank's doorbell waits
	# submitted after the rings they wait for (core/coll/order.h); splitnb1
	# timed out on an H200 before that
	# shellcheck disable=SC2016
	step pool "ranks of one process on one GPU in groups: InitRank, split children" 120 \
		bash -c 'for c in onegpu splitnb1; do CXLSHIM_TIMEOUT_OP_MS=10000 \
			CXLSHIM_TIMEOUT_INIT_MS=5000 "$0" $c || exit 1; done' "$T/api_check"
	# one queue per context, as Megatron-LM sets it: every rank submits a
	# group's communicators in one order (core/nccl/group.c)
	# shellcheck disable=SC2016
	step pool "one queue per context (CUDA_DEVICE_MAX_CONNECTIONS=1): group orders, collectives, captured collectives" 150 \
		bash -c 'export CUDA_DEVICE_MAX_CONNECTIONS=1 CXLSHIM_TIMEOUT_OP_MS=10000
			"$0" collorder 2 && "$1" -n 2 -c 1,odd,1M -t int8,float &&
			"$2" graphcolls4 && "$2" graphtwice' "$T/p2p_check" "$T/coll_check" "$T/api_check"
	step pool "send/receive alltoallv, 4 ranks" 120 "$T/p2p_check" alltoallv 4
	step pool "ProcessGroupNCCL usage, 4 ranks" 120 "$T/pg_check" 4
}

# pinned_bw plain and under the preload; placed memory must reach 95% of
# cudaHostAlloc's bandwidth both ways (CPU figures on the emulation).
pinned() {
	local plain shim log=$OUT/logs/pinned.log p_h p_d s_h s_d placed secs
	secs=$(limit 60)
	if [ "$secs" -lt 60 ]; then
		record "pinned: shim vs cudaHostAlloc" SKIP "out of time (--budget $BUDGET)"
		return
	fi
	secs=$((secs / 2))
	{
		env "${run_env[@]}" timeout -k 5 "$secs" "$T/pinned_bw" 256 20
		env "${run_env[@]}" LD_PRELOAD="$SHIM" timeout -k 5 "$secs" "$T/pinned_bw" 256 20
	} >"$log" 2>&1
	plain=$(grep -m1 '^pinned_bw:' "$log")
	shim=$(grep '^pinned_bw:' "$log" | sed -n 2p)
	if [ -z "$plain" ] || [ -z "$shim" ]; then
		record "pinned: shim vs cudaHostAlloc" FAIL "logs/pinned.log"
		return
	fi
	read -r p_h p_d < <(echo "$plain" | awk '{print $5, $8}')
	read -r s_h s_d placed < <(echo "$shim" | awk '{print $5, $8, $11}')
	local detail="cudaHostAlloc h2d $p_h d2h $p_d GB/s; shim-placed h2d $s_h d2h $s_d GB/s"
	if [ "${placed:-0}" -lt 1 ]; then
		record "pinned: shim vs cudaHostAlloc" FAIL "the shim placed nothing: $detail"
	elif [ $EMULATE = 1 ]; then
		record "pinned: shim vs cudaHostAlloc" INFO "$detail (CPU emulation: not judged)"
	elif awk -v a="$s_h" -v b="$p_h" -v c="$s_d" -v d="$p_d" \
		'BEGIN { exit !(a >= 0.95 * b && c >= 0.95 * d) }'; then
		record "pinned: shim vs cudaHostAlloc" PASS "$detail"
	else
		record "pinned: shim vs cudaHostAlloc" FAIL "below 95%: $detail"
	fi
}

# ---- nccl-tests ---------------------------------------------------------------

# the collectives of issue 2 first, then what PyTorch needs, then the rest
NT_FIRST="all_gather broadcast all_reduce"
NT_REST="reduce_scatter reduce alltoall alltoallv gather scatter sendrecv hypercube"
NT_DIR=
NT_MPI=0

# nt_prepare: find or build the nccl-tests binaries (NT_DIR, NT_MPI);
# false, with the reason recorded, when there are none
nt_prepare() {
	local bdir=$OUT/nccl-tests-build mpi=0 mpi_home=${NCCL_TESTS_MPI_HOME:-} gpus built=0
	if [ $EMULATE = 1 ]; then
		record nccl-tests SKIP "needs a GPU (NCCL's own kernels check the results)"
		return 1
	fi
	if [ -z "$mpi_home" ] && command -v mpicc >/dev/null 2>&1; then
		mpi_home=$(dirname "$(dirname "$(command -v mpicc)")")
	fi
	[ -n "$mpi_home" ] && [ -f "$mpi_home/include/mpi.h" ] && command -v mpirun >/dev/null 2>&1 && mpi=1
	if [ -z "$NCCL_TESTS_SRC" ] && command -v all_gather_perf >/dev/null 2>&1; then
		# binaries already installed on the machine: use them as they are
		bdir=$(dirname "$(command -v all_gather_perf)")
		ldd "$bdir/all_gather_perf" 2>/dev/null | grep -q libmpi || mpi=0
		built=1
	elif [ -z "$NCCL_TESTS_SRC" ]; then
		record nccl-tests SKIP "no source: pass --nccl-tests SRC (a NVIDIA/nccl-tests checkout), or put built *_perf binaries on PATH"
		return 1
	fi
	# threads: nccl-tests gives thread i device NCCL_TESTS_DEVICE + i, so
	# thread ranks cannot share one GPU as MPI ranks do (nvidia-smi counts
	# every GPU, CUDA_VISIBLE_DEVICES or not: at worst runs that fail)
	gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
	if [ $mpi = 0 ] && [ "$gpus" -lt "$(nt_ranks)" ]; then
		record nccl-tests SKIP "no MPI, and ranks as threads need one GPU each ($(nt_ranks) ranks, $gpus GPU(s))"
		return 1
	fi
	if [ $built = 0 ] && ! make -C "$NCCL_TESTS_SRC" -j"$(nproc)" MPI=$mpi ${mpi_home:+MPI_HOME="$mpi_home"} \
		CUDA_HOME="$CUDA_HOME" NCCL_HOME="$NCCL_LINK" BUILDDIR="$bdir" \
		NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$OUT/logs/nccl-tests-build.log" 2>&1; then
		record nccl-tests FAIL "build failed: logs/nccl-tests-build.log"
		return 1
	fi
	NT_DIR=$bdir
	NT_MPI=$mpi
	record nccl-tests INFO "$([ $mpi = 1 ] && echo "MPI ranks ($(mpirun --version 2>&1 | head -n 1))" || echo threads) from $bdir"
}

# nt_ranks: ranks per nccl-tests run
nt_ranks() {
	local n=2
	[ $QUICK = 1 ] || n=4
	echo "${NCCL_TESTS_RANKS:-$n}"
}

# nccl_tests BINS: each *_perf of BINS, eager and in CUDA-graph mode
nccl_tests() {
	local n b args
	[ -n "$NT_DIR" ] || return 0
	n=$(nt_ranks)
	read -r -a args <<<"${NCCL_TESTS_ARGS:--b 8 -e 64M -f 8 -w 2 -n 5 -c 1}"
	for b in $1; do
		if [ ! -x "$NT_DIR/${b}_perf" ]; then
			record "nccl-tests: $b" FAIL "no ${b}_perf in $NT_DIR"
			continue
		fi
		nt_run "$b" "$NT_MPI" "$n" "$NT_DIR/${b}_perf" "${args[@]}"
		nt_run "$b -G" "$NT_MPI" "$n" "$NT_DIR/${b}_perf" "${args[@]}" -G 5
	done
}

# nt_run NAME MPI N BIN ARGS...: one nccl-tests binary, N ranks on GPU 0
nt_run() {
	local name=$1 mpi=$2 n=$3 log avg last secs start
	shift 3
	log=$OUT/logs/nccl-tests-$(echo "$name" | tr -c 'A-Za-z0-9._-' _).log
	start=$(date +%s)
	secs=$(limit 120)
	if [ "$secs" = 0 ]; then
		record "nccl-tests: $name" SKIP "out of time (--budget $BUDGET)"
		return
	fi
	if [ "$mpi" = 1 ]; then
		local fwd=(-x LD_PRELOAD="$SHIM") v
		mpirun --version 2>&1 | grep -q 'Open MPI' && fwd+=(--allow-run-as-root --oversubscribe)
		# the caller's policy settings too (CXLSHIM_CCCL_CHUNK_SIZE=2M, ...)
		for v in $(compgen -e | grep '^CXLSHIM_'); do fwd+=(-x "$v"); done
		env "${run_env[@]}" timeout -k 5 "$secs" mpirun -np "$n" "${fwd[@]}" \
			-x LD_LIBRARY_PATH -x CXLSHIM_POOL_PATH -x CXLSHIM_POOL_SIZE -x CXLSHIM_CONF \
			-x CUDA_DEVICE_MAX_CONNECTIONS -x NCCL_TESTS_DEVICE "$@" >"$log" 2>&1
	else
		# threads: several ranks of one communicator in one process
		env "${run_env[@]}" LD_PRELOAD="$SHIM" timeout -k 5 "$secs" "$@" -t "$n" -g 1 >"$log" 2>&1
	fi
	local rc=$?
	avg=$(sed -n 's/.*Avg bus bandwidth *: *\([0-9.]*\).*/\1/p' "$log")
	# the table's largest size
	last=$(awk '$1 ~ /^[0-9]+$/ && NF >= 12 { l = $1 " B: busbw " $8 " out of place, " $12 " in place" }
		END { print l }' "$log")
	if [ $rc = 0 ] && grep -q 'Out of bounds values : 0 OK' "$log"; then
		record "nccl-tests: $name" PASS "avg busbw ${avg:-?} GB/s; ${last:-}"
	elif [ $rc = 0 ]; then
		record "nccl-tests: $name" FAIL "no '0 OK' line, logs/$(basename "$log")"
	else
		ended "nccl-tests: $name" $rc 120 "$secs" "$log" "$start"
	fi
}

# ---- PyTorch -----------------------------------------------------------------

torch_runs() {
	local py=$ROOT/tests/gpu/train.py mode log why secs
	if [ $EMULATE = 1 ]; then
		record torch SKIP "needs a GPU (the CPU emulation runs no PyTorch kernels)"
		return
	fi
	why=$(python3 -c 'import torch
assert torch.cuda.is_available(), "torch sees no GPU"
from torch.distributed.fsdp import fully_shard' 2>&1 | tail -n 1)
	if [ -n "$why" ]; then
		record torch SKIP "python3 cannot run it: $why"
		return
	fi
	secs=$(limit 120)
	if [ "$secs" = 0 ]; then
		record torch SKIP "out of time (--budget $BUDGET)"
		return
	fi
	if ! env "${run_env[@]}" timeout -k 5 "$secs" python3 "$py" ref "$OUT/loss-ref.json" \
		>"$OUT/logs/torch-ref.log" 2>&1; then
		record "torch: reference" FAIL "logs/torch-ref.log"
		return
	fi
	for mode in ddp fsdp split; do
		log=$OUT/logs/torch-$mode.log
		# split: PyTorch's nonblocking communicators, new_group() by ncclCommSplit
		local nb=0
		[ $mode = split ] && nb=1
		secs=$(limit 180)
		if [ "$secs" = 0 ]; then
			record "torch: $mode, 2 ranks on cuda:0" SKIP "out of time (--budget $BUDGET)"
			continue
		fi
		env "${run_env[@]}" LD_PRELOAD="$SHIM" CXLSHIM_DEBUG=INFO \
			TORCH_NCCL_USE_COMM_NONBLOCKING=$nb timeout -k 5 "$secs" \
			python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
			--redirects 3 --tee 3 "$py" "$mode" "$OUT/loss-$mode.json" >"$log" 2>&1
		local rc=$?
		if [ $rc != 0 ]; then
			record "torch: $mode, 2 ranks on cuda:0" FAIL "exit $rc, logs/$(basename "$log")"
			continue
		fi
		if ! grep -q 'ready: pool slot' "$log"; then
			record "torch: $mode, 2 ranks on cuda:0" FAIL "no pool communicator in the log"
			continue
		fi
		if [ $mode = split ] && ! grep -q 'split [0-9]*: color' "$log"; then
			record "torch: $mode, 2 ranks on cuda:0" FAIL "no ncclCommSplit in the log"
			continue
		fi
		if python3 - "$OUT/loss-ref.json" "$OUT/loss-$mode.json" >>"$log" 2>&1 <<'EOF'; then
import json, sys
ref = json.load(open(sys.argv[1]))["losses"]
got = json.load(open(sys.argv[2]))["losses"]
worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(ref, got))
print("losses", got, "reference", ref, "worst relative difference", worst)
sys.exit(0 if len(ref) == len(got) and worst <= 1e-4 else 1)
EOF
			record "torch: $mode, 2 ranks on cuda:0" PASS "$(tail -n 1 "$log" | sed 's/.*worst/worst/')"
		else
			record "torch: $mode, 2 ranks on cuda:0" FAIL "losses differ: logs/$(basename "$log")"
		fi
	done
}

# wanted ITEM: --only names it
wanted() { [[ ,$ONLY, == *,$1,* ]]; }

wanted pool && pool_tests
wanted pinned && pinned
if wanted nccl-tests && nt_prepare; then
	if [ -n "${NCCL_TESTS_BINS:-}" ]; then
		nccl_tests "$NCCL_TESTS_BINS"
	else
		nccl_tests "$NT_FIRST"
	fi
fi
wanted torch && torch_runs
[ -n "${NCCL_TESTS_BINS:-}" ] || nccl_tests "$NT_REST"

echo
note "summary ($MODE), also in $SUMMARY:"
cat "$SUMMARY"
if [ $fails -gt 0 ]; then
	note "$fails item(s) FAILED"
	exit 1
fi
note "no item failed"

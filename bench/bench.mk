# bench/bench.mk - benchmark targets; included by the top-level Makefile.
#
#   make bench-build   build/bench/coll_perf and the MPI baselines that can be
#                      built here (mpi_perf_openmpi, mpi_perf_mpich)
#   make bench         bench-build, then bench/baselines.sh for all_gather and
#                      broadcast at 2 and 4 ranks, 4 MiB .. 64 MiB
#   make bench-more    the same for gather, scatter, alltoall, reduce,
#                      all_reduce and reduce_scatter at 4 ranks, sendrecv
#                      (a ring, as nccl-tests) at 2 and 4 ranks (reductions:
#                      sum on float, the defaults)
#
# Which libcudart coll_perf gets at run time: it is linked against the CUDA
# emulator's libcudart ($(BUILD)/emu, so the emulator must exist first:
# $(EMU_LIBS)) and carries a RUNPATH (not RPATH: --enable-new-dtags) of
# $(CUDA_LIB). LD_LIBRARY_PATH is searched before RUNPATH, so
# LD_LIBRARY_PATH=$(BUILD)/emu selects the emulator; without it the real
# libcudart.so.13 and libnccl.so.2 in $(CUDA_LIB) are used. Linking against
# the emulator rather than the real library also keeps the binary free of the
# real library's symbol versions, which the emulator need not define.

CC ?= gcc
CUDA_INC ?= /usr/local/cuda/include
CUDA_LIB ?= /usr/local/cuda/lib
BUILD ?= build
MPICC_OPENMPI ?= mpicc.openmpi
MPICC_MPICH ?= mpicc.mpich

BENCH_CFLAGS ?= -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra
BENCH_SIZES ?= -b 4M -e 64M -f 2
BENCH_DIR := $(BUILD)/bench
# where the emulator fragment puts its libraries (EMU_OUT), else the default
BENCH_EMU_DIR ?= $(if $(EMU_OUT),$(EMU_OUT),$(BUILD)/emu)

COLL_PERF_SRCS := bench/coll_perf.c bench/bench_util.c tests/common/launch.c
COLL_PERF_HDRS := bench/bench_util.h tests/common/launch.h
MPI_PERF_SRCS := bench/mpi_perf.c bench/bench_util.c

BENCH_HAVE_OPENMPI := $(shell command -v $(MPICC_OPENMPI) 2>/dev/null)
BENCH_HAVE_MPICH := $(shell command -v $(MPICC_MPICH) 2>/dev/null)

BENCH_BINS := $(BENCH_DIR)/coll_perf
ifneq ($(BENCH_HAVE_OPENMPI),)
BENCH_BINS += $(BENCH_DIR)/mpi_perf_openmpi
endif
ifneq ($(BENCH_HAVE_MPICH),)
BENCH_BINS += $(BENCH_DIR)/mpi_perf_mpich
endif

$(BENCH_DIR)/coll_perf: $(COLL_PERF_SRCS) $(COLL_PERF_HDRS) $(EMU_LIBS)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $(SANITIZE) -I$(CUDA_INC) -Ibench -Itests/common -o $@ $(COLL_PERF_SRCS) \
	    -L$(BENCH_EMU_DIR) -Wl,-rpath-link,$(BENCH_EMU_DIR) -lcudart \
	    -L$(CUDA_LIB) -lnccl -Wl,--enable-new-dtags -Wl,-rpath,$(CUDA_LIB)

# tests/ops/trace.sh traces a run of it; $(SANITIZE): under make
# test-sanitize it must carry the sanitizer's runtime itself (TSan's
# pthread_create must be the one libnccl's threads are made by)
test-build: $(BENCH_DIR)/coll_perf

# one thread's groups over several ranks of one communicator
$(BENCH_DIR)/group_perf: bench/group_perf.c $(EMU_LIBS)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -I$(CUDA_INC) -o $@ bench/group_perf.c \
	    -L$(BENCH_EMU_DIR) -Wl,-rpath-link,$(BENCH_EMU_DIR) -lcudart \
	    -L$(CUDA_LIB) -lnccl -Wl,--enable-new-dtags -Wl,-rpath,$(CUDA_LIB)

bench-build: $(BENCH_DIR)/group_perf

$(BENCH_DIR)/mpi_perf_openmpi: $(MPI_PERF_SRCS) bench/bench_util.h
	@mkdir -p $(@D)
	$(MPICC_OPENMPI) $(BENCH_CFLAGS) -Ibench -o $@ $(MPI_PERF_SRCS)

$(BENCH_DIR)/mpi_perf_mpich: $(MPI_PERF_SRCS) bench/bench_util.h
	@mkdir -p $(@D)
	$(MPICC_MPICH) $(BENCH_CFLAGS) -Ibench -o $@ $(MPI_PERF_SRCS)

.PHONY: bench-build bench bench-more bench-mpi-check bench-switches

bench-build: $(BENCH_BINS) bench-mpi-check

bench-mpi-check:
ifeq ($(BENCH_HAVE_OPENMPI),)
	@echo "bench: $(MPICC_OPENMPI) not found, mpi_perf_openmpi not built (apt-get install openmpi-bin libopenmpi-dev)"
endif
ifeq ($(BENCH_HAVE_MPICH),)
	@echo "bench: $(MPICC_MPICH) not found, mpi_perf_mpich not built (apt-get install mpich libmpich-dev)"
endif
	@true

bench: bench-build $(BUILD)/libcxlshim.so
	BUILD=$(BUILD) bench/baselines.sh -C all_gather -N 2 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C all_gather -N 4 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C broadcast -N 2 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C broadcast -N 4 $(BENCH_SIZES) -p 1

# The collectives beyond the issue's two, 4 ranks (root 0 for gather,
# scatter and reduce; alltoall in place is sendbuff == recvbuff, as
# nccl-tests runs it; the reductions run sum on float, -o and -d default).
bench-more: bench-build $(BUILD)/libcxlshim.so
	BUILD=$(BUILD) bench/baselines.sh -C gather -N 4 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C scatter -N 4 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C alltoall -N 4 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C reduce -N 4 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C all_reduce -N 4 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C reduce_scatter -N 4 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C sendrecv -N 2 $(BENCH_SIZES) -p 1
	BUILD=$(BUILD) bench/baselines.sh -C sendrecv -N 4 $(BENCH_SIZES) -p 1

# The effect of each CCCL technique (bench/switches.sh), 4 ranks.
bench-switches: bench-build $(BUILD)/libcxlshim.so
	BUILD=$(BUILD) bench/switches.sh -C all_gather -N 4
	BUILD=$(BUILD) bench/switches.sh -C broadcast -N 4

# Pinned host memory placement (issue 4): allocation overhead of the shim
# versus the plain call, and a CPU Adam step over policy-placed buffers
# versus naive interleave.  Run under the preload with the emulated CUDA.
$(BENCH_DIR)/mem_perf: bench/mem_perf.c include/cxlshim.h $(EMU_LIBS)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -I$(CUDA_INC) -o $@ bench/mem_perf.c \
	    -L$(BENCH_EMU_DIR) -Wl,-rpath-link,$(BENCH_EMU_DIR) -lcudart -ldl -lm

bench-build: $(BENCH_DIR)/mem_perf

# The CPU reduction alone (core/coll/arith.c), per type and operator, against
# memcpy in the same run.
$(BENCH_DIR)/fold_perf: bench/fold_perf.c $(BUILD)/obj/core/coll/arith.o \
		$(BUILD)/obj/core/coll/minifloat.o $(BUILD)/obj/core/coll/minifloat_x86.o
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -I$(CUDA_INC) -Icore/coll -o $@ $(filter %.c %.o,$^)

bench-build: $(BENCH_DIR)/fold_perf

.PHONY: bench-fold
bench-fold: $(BENCH_DIR)/fold_perf
	$(BENCH_DIR)/fold_perf

.PHONY: bench-mem
bench-mem: $(BENCH_DIR)/mem_perf $(BUILD)/libcxlshim.so
	LD_LIBRARY_PATH=$(BUILD)/emu LD_PRELOAD=$(BUILD)/libcxlshim.so $(BENCH_DIR)/mem_perf
# PNG charts of every result folder (bench/plot.sh, gnuplot-nox).
.PHONY: plots
plots:
	@dirs=$$(ls -d $(BUILD)/bench/results/*/ 2>/dev/null); \
	if [ -z "$$dirs" ]; then echo "plots: no results under $(BUILD)/bench/results (make bench)"; \
	else bench/plot.sh $$dirs; fi
# Sockets through the pool (issue 5): sock_perf (ping-pong percentiles and
# streaming, 16 B .. 1 MiB, TCP loopback vs pool vs pool + busy-poll, one
# run) and the real tools (redis-benchmark, iperf3, sockperf) A/B.
# whole reads and writes: the socket tests' (tests/sock/sock_util.c)
$(BENCH_DIR)/sock_perf: bench/sock_perf.c tests/sock/sock_util.c tests/sock/sock_util.h
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -Itests/sock -o $@ $(filter %.c,$^)

# One connection after another to a server holding many fds (sock_churn.sh -F)
$(BENCH_DIR)/sock_accept: bench/sock_accept.c tests/sock/sock_util.c tests/sock/sock_util.h
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -Itests/sock -o $@ $(filter %.c,$^)
bench-build: $(BENCH_DIR)/sock_accept
test-build: $(BENCH_DIR)/sock_accept

# splice(2) between a pipe and a socket, both ways (TCP without the
# preload, the pool under it)
$(BENCH_DIR)/splice_perf: bench/splice_perf.c tests/sock/sock_util.c tests/sock/sock_util.h
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -Itests/sock -o $@ $(filter %.c,$^) -pthread
bench-build: $(BENCH_DIR)/splice_perf

.PHONY: bench-sock
bench-sock: $(BENCH_DIR)/sock_perf $(BUILD)/libcxlshim.so
	$(BENCH_DIR)/sock_perf -L $(BUILD)/libcxlshim.so -b 16 -e 1M -f 4 -B 200
	BUILD=$(BUILD) bench/sock_tools.sh
	BUILD=$(BUILD) bench/sock_tools.sh -B 200

# Large writes by reference (buffer classes) vs the ring vs TCP, medians.
# redis-benchmark, TCP vs the pool in interleaved rounds, medians of the
# per-round ratios (bench/sock_redis.sh; -O lib.so adds another build)
.PHONY: bench-sock-redis
bench-sock-redis: $(BUILD)/libcxlshim.so
	BUILD=$(BUILD) bench/sock_redis.sh -n 7

.PHONY: bench-sock-refs
bench-sock-refs: $(BENCH_DIR)/sock_perf $(BUILD)/libcxlshim.so
	$(BENCH_DIR)/sock_perf -L $(BUILD)/libcxlshim.so -b 64K -e 4M -f 4 -B 200 -R
	BUILD=$(BUILD) bench/sock_refs.sh

# The epoll path alone, for callgrind (bench/sock_epoll_ir.sh)
$(BENCH_DIR)/sock_epoll_ir: bench/sock_epoll_ir.c tests/sock/sock_util.c tests/sock/sock_util.h
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -Itests/sock -o $@ $(filter %.c,$^) -pthread

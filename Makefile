# cxlshim - run NCCL collectives, pinned memory and TCP through a CXL pool.
#
#   make            build build/libcxlshim.so (+ CUDA CPU emulation)
#   make deps       install the Debian packages the build and tests need (root)
#   make test       build and run every test (what CI runs)
#   make demo       4-rank NCCL job through the shim, nccl-tests style table
#   make bench      benchmarks against Open MPI and MPICH

CC       ?= gcc
BUILD    ?= build
CUDA_HOME ?= /usr/local/cuda
CUDA_INC ?= $(CUDA_HOME)/include
CUDA_LIB ?= $(CUDA_HOME)/lib
CFLAGS   ?= -O2 -g
# Every source folder is on the include path: headers are named after what
# they hold, not after where they live.
SRC_DIRS := include shim policy $(shell find core -type d | sort)
override CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -fPIC -pthread -I$(CUDA_INC) $(SRC_DIRS:%=-I%)
# include/cxlshim.h: the public header for programs that can change
LDLIBS_SHIM = -ldl -lnuma -linih -lm -pthread $(SANITIZE)

# Debian packages: build (libnuma, libinih), baselines (Open MPI, MPICH).
DEB_PKGS = build-essential libnuma-dev libinih-dev \
           openmpi-bin libopenmpi-dev mpich libmpich-dev
# Test machines (tests/qemu): TCG guests booting Debian's own kernel, with the
# host's root shared read-only; installed without recommends (no GUI, no OVMF).
QEMU_DEB_PKGS = qemu-system-x86 linux-image-amd64 busybox-static cpio kmod xz-utils \
                iproute2 numactl ndctl daxctl
# Operability tests and tools: trace schema check (python3), fuzzers
# (clang + libFuzzer runtime), valgrind runs, bench plots (gnuplot).
DEB_PKGS += python3 clang libclang-rt-14-dev valgrind gnuplot-nox
# the trace timeline validated against a JSON schema (tests/ops/trace.sh)
DEB_PKGS += python3-jsonschema
# tests/gpu/accept.sh is checked by shellcheck in `make test`
DEB_PKGS += shellcheck
# Real programs the socket tests and benchmarks run under the preload.
DEB_PKGS += iperf3 sockperf redis-server redis-tools socat curl
# Where the time goes in the socket benchmarks (bench/sock_redis_prof.sh:
# perf; bench/sock_rack_syscalls.sh: strace, also inside the guests).
DEB_PKGS += linux-perf strace
# The launchers `cxlshim run` is tested under (tests/ops/launchers.sh):
# Slurm for one node (slurmctld, slurmd, srun; munge authenticates them)
# and PyTorch's CPU build for torchrun; without recommends, as the guests.
# python3-torch is most of it: 167 packages, 147 MB of .debs, 607 MiB
# installed, 2 min to install on a 2-core VM.  `make deps
# LAUNCH_DEB_PKGS="slurmctld slurmd slurm-client munge"` leaves it out (the
# torchrun test then skips, saying so).
LAUNCH_DEB_PKGS = slurmctld slurmd slurm-client munge python3-torch

SHIM_SRC   = $(wildcard shim/*.c)
CORE_SRC   = $(shell find core -name '*.c' | sort)
POLICY_SRC = $(wildcard policy/*.c)
LIB_SRC    = $(SHIM_SRC) $(CORE_SRC) $(POLICY_SRC)
# the GPU reduction kernels' image, data only (see the nvcc rule below)
FOLD_IMAGE_OBJ = $(BUILD)/obj/core/coll/kernels/fold_fatbin.o
LIB_OBJ    = $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(FOLD_IMAGE_OBJ)
LIB        = $(BUILD)/libcxlshim.so

.PHONY: all deps check-deps test test-long test-build demo bench clean
all: check-deps $(LIB) $(EMU_LIBS)

-include emu/cuda/emu.mk
include tests/tests.mk
-include tools/tools.mk
-include bench/bench.mk
# EMU_LIBS is only known once emu.mk is in: the `all` line above saw it empty,
# so `make` did not rebuild the emulation after a change to emu/cuda
all: $(EMU_LIBS)

# Headers we cannot build without; say exactly how to get them.
check-deps:
	@missing=""; \
	for h in $(CUDA_INC)/cuda.h $(CUDA_INC)/nccl.h /usr/include/ini.h /usr/include/numa.h; do \
	  [ -f $$h ] || missing="$$missing $$h"; done; \
	if [ -n "$$missing" ]; then \
	  echo "cxlshim: missing$$missing"; \
	  echo "  Debian packages: sudo make deps   (apt-get install -y $(DEB_PKGS))"; \
	  echo "  cuda.h and nccl.h: CUDA toolkit + NCCL headers under CUDA_HOME=$(CUDA_HOME)"; \
	  exit 1; fi

deps:
	@if [ "$$(id -u)" != 0 ]; then echo "make deps installs Debian packages: run it as root"; exit 1; fi
	@need=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || need="$$need $$p"; done; \
	if [ -n "$$need" ]; then \
	  echo "installing:$$need"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null; \
	else echo "all Debian packages present"; fi
	@need=""; for p in $(QEMU_DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || need="$$need $$p"; done; \
	if [ -n "$$need" ]; then \
	  echo "installing (test machines):$$need"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends $$need >/dev/null; fi
	@need=""; for p in $(LAUNCH_DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || need="$$need $$p"; done; \
	if [ -n "$$need" ]; then \
	  echo "installing (launchers):$$need"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends $$need >/dev/null; fi

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB_OBJ): CFLAGS += -fvisibility=hidden

# shim/cuda_dlsym.c hands every lookup it does not answer to the real dlsym
# by a tail call, so that glibc still sees the caller's return address
# (RTLD_NEXT): always optimised into a jump, never instrumented.
$(BUILD)/obj/shim/cuda_dlsym.o: override CFLAGS += -O2 -foptimize-sibling-calls -fno-sanitize=all

# The GPU reduction kernels (core/coll/kernels/fold.cu): compiled by nvcc
# when the CUDA toolkit has one, embedded in the library and loaded through
# the driver API (core/coll/fold_gpu.c).  Without nvcc the image is empty
# and reductions on GPU memory are refused with that reason (the CPU
# emulation folds on the CPU either way).  --fmad=false: a PreMulSum
# product is rounded before it is added, as on the CPU.  fold.ptx is for
# the tests (kernel names, no fused multiply-add).
NVCC      ?= $(firstword $(wildcard $(CUDA_HOME)/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_80,code=compute_80
NVCC_FLAGS = -O3 --fmad=false -Icore/coll -Icore/coll/kernels
FOLD_SRC   = core/coll/kernels/fold.cu core/coll/kernels/fold_abi.h \
             core/coll/minifloat_bits.h core/coll/red_kind.h

$(BUILD)/kernels/fold.fatbin: $(FOLD_SRC)
	@mkdir -p $(@D)
ifneq ($(NVCC),)
	$(NVCC) $(NVCC_FLAGS) -fatbin $(NVCC_ARCH) -o $@ $<
	$(NVCC) $(NVCC_FLAGS) -ptx -arch=compute_80 -o $(@:.fatbin=.ptx) $<
else
	@echo "nvcc not found: no GPU reduction kernels in the library (GPU reductions go to NCCL)"
	@: > $@; rm -f $(@:.fatbin=.ptx)
endif

$(FOLD_IMAGE_OBJ): core/coll/kernels/fold_fatbin.S \
		$(BUILD)/kernels/fold.fatbin
	@mkdir -p $(@D)
	$(CC) -c -Wa,-I$(BUILD)/kernels $< -o $@

# The CPU reductions are loops the compiler must vectorise; no contraction,
# so a PreMulSum product is rounded before it is added, as on the GPU; no
# trapping math, so the small-float conversions select instead of branching
# (nothing here reads the floating-point exception flags).
$(BUILD)/obj/core/coll/arith.o $(BUILD)/obj/core/coll/minifloat.o: CFLAGS += -O3 -ffp-contract=off -fno-trapping-math

$(LIB): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libcxlshim.so -Wl,--no-undefined -o $@ $^ $(LDLIBS_SHIM)

-include $(LIB_OBJ:.o=.d)

clean:
	rm -rf $(BUILD)

# The emulated CUDA stands in when this machine has no NVIDIA GPU.
HAVE_GPU := $(shell [ -e /dev/nvidia0 ] && echo 1)
DEMO_ENV  = $(if $(HAVE_GPU),,LD_LIBRARY_PATH=$(BUILD)/emu) LD_PRELOAD=$(BUILD)/libcxlshim.so

demo:
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) -s deps; fi
	@$(MAKE) -s all bench-build
	@echo "== 4-rank NCCL job through libcxlshim.so ($(if $(HAVE_GPU),GPU,emulated CUDA)), pool $${CXLSHIM_POOL_PATH:-/dev/shm/cxlshim-$$(id -u).pool}"
	@# a pool left by another release of cxlshim is replaced if no process uses it
	@$(BUILD)/cxlshim pool status >/dev/null 2>&1 || ! [ -e "$${CXLSHIM_POOL_PATH:-/dev/shm/cxlshim-$$(id -u).pool}" ] || \
		$(BUILD)/cxlshim pool create --replace || true
	$(DEMO_ENV) $(BUILD)/bench/coll_perf -C all_gather -N 4 -b 1M -e 64M -f 4
	$(DEMO_ENV) $(BUILD)/bench/coll_perf -C broadcast -N 4 -b 1M -e 64M -f 4 -r 0

# emu/cuda/emu.mk - CPU emulation of the CUDA driver and runtime libraries.
#
# Builds build/emu/libcuda.so.1 and build/emu/libcudart.so.13 (plus the
# unversioned .so links) for machines without a GPU: put build/emu first in
# LD_LIBRARY_PATH. Included by the top-level Makefile, or used alone from the
# repository root:
#
#	make -f emu/cuda/emu.mk            # the libraries
#	make -f emu/cuda/emu.mk test-emu   # the libraries, the tests, a run
#
# Every variable is EMU_-prefixed so the fragment can be included anywhere.

EMU_MK := $(lastword $(MAKEFILE_LIST))
EMU_SAVED_GOAL := $(.DEFAULT_GOAL)

CC ?= gcc
CFLAGS ?= -std=c11 -O2 -g -Wall -Wextra -fPIC -D_GNU_SOURCE
CUDA_INC ?= /usr/local/cuda/include

EMU_SRC := emu/cuda
EMU_OUT := build/emu
EMU_OBJ := $(EMU_OUT)/obj
EMU_TEST_SRC := tests/emu
EMU_TEST_OUT := $(EMU_OUT)/tests

# -fPIC, default visibility (the version scripts decide what is exported)
# and the CUDA headers are needed whatever CFLAGS the includer uses.
EMU_CFLAGS := $(filter-out -fPIC -D_GNU_SOURCE -fvisibility=%,$(CFLAGS)) \
	-fPIC -D_GNU_SOURCE -fvisibility=default -I$(CUDA_INC)

EMU_DRV_NAMES := init errors handle device context memory copy stream hwqueue barrier late op \
	event memop capture graph legacy procaddr vmm stats
EMU_RT_NAMES := runtime rt_device rt_memory rt_stream rt_error rt_entry

EMU_DRV_OBJS := $(EMU_DRV_NAMES:%=$(EMU_OBJ)/%.o)
EMU_RT_OBJS := $(EMU_RT_NAMES:%=$(EMU_OBJ)/%.o)
EMU_HDRS := $(EMU_SRC)/emu.h $(EMU_SRC)/runtime.h

EMU_LIBCUDA := $(EMU_OUT)/libcuda.so.1
EMU_LIBCUDART := $(EMU_OUT)/libcudart.so.13
EMU_LIBS := $(EMU_LIBCUDA) $(EMU_OUT)/libcuda.so \
	$(EMU_LIBCUDART) $(EMU_OUT)/libcudart.so

EMU_TEST_NAMES := test_stream test_memop test_graph test_memory test_runtime \
	test_strict test_vmm test_stats test_late test_hwqueue
EMU_TESTS := $(EMU_TEST_NAMES:%=$(EMU_TEST_OUT)/%)

.PHONY: emu test-emu clean-emu

emu: $(EMU_LIBS)

$(EMU_OBJ):
	mkdir -p $@

$(EMU_TEST_OUT):
	mkdir -p $@

$(EMU_DRV_OBJS) $(EMU_RT_OBJS): $(EMU_OBJ)/%.o: $(EMU_SRC)/%.c $(EMU_HDRS) | $(EMU_OBJ)
	$(CC) $(EMU_CFLAGS) -c $< -o $@

$(EMU_LIBCUDA): $(EMU_DRV_OBJS) $(EMU_SRC)/aliases.ld $(EMU_SRC)/libcuda.map
	$(CC) -shared -o $@ $(EMU_DRV_OBJS) $(EMU_SRC)/aliases.ld \
		-Wl,-soname,libcuda.so.1 \
		-Wl,--version-script=$(EMU_SRC)/libcuda.map \
		-Wl,--no-undefined -pthread $(LDFLAGS)

$(EMU_OUT)/libcuda.so: $(EMU_LIBCUDA)
	ln -sf libcuda.so.1 $@

# The runtime finds the emulated driver next to itself.
$(EMU_LIBCUDART): $(EMU_RT_OBJS) $(EMU_LIBCUDA) $(EMU_SRC)/rt_aliases.ld \
		$(EMU_SRC)/libcudart.map
	$(CC) -shared -o $@ $(EMU_RT_OBJS) $(EMU_SRC)/rt_aliases.ld \
		-Wl,-soname,libcudart.so.13 \
		-Wl,--version-script=$(EMU_SRC)/libcudart.map \
		-Wl,--no-undefined -L$(EMU_OUT) -l:libcuda.so.1 \
		-Wl,-rpath,'$$ORIGIN' -pthread $(LDFLAGS)

$(EMU_OUT)/libcudart.so: $(EMU_LIBCUDART)
	ln -sf libcudart.so.13 $@

# DT_RPATH, not RUNPATH: the tests exercise the emulation even where
# LD_LIBRARY_PATH points at a real driver.
$(EMU_TEST_OUT)/%: $(EMU_TEST_SRC)/%.c $(EMU_TEST_SRC)/check.h $(EMU_LIBS) | $(EMU_TEST_OUT)
	$(CC) $(EMU_CFLAGS) -o $@ $< -L$(EMU_OUT) -l:libcudart.so.13 \
		-l:libcuda.so.1 -Wl,--disable-new-dtags \
		-Wl,-rpath,'$$ORIGIN/..' -pthread $(LDFLAGS)

test-emu: $(EMU_TESTS)
	@$(EMU_TEST_SRC)/run.sh $(EMU_TESTS)

clean-emu:
	rm -rf $(EMU_OUT)

# When included, do not steal the includer's default goal.
ifneq ($(firstword $(MAKEFILE_LIST)),$(EMU_MK))
.DEFAULT_GOAL := $(EMU_SAVED_GOAL)
endif

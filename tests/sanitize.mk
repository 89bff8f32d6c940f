# tests/sanitize.mk - make test-sanitize: the library, the command and the
# tests built with ASan + UBSan (build-asan/) run all of tests/run.sh, built
# with TSan (build-tsan/) the multi-threaded steps, and valgrind runs a few
# emulated jobs of the normal build (tests/sanitize.sh).  The CUDA emulation
# (the "GPU") stays uninstrumented in build/emu, linked into both.

ASAN_CFLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	      -fno-sanitize-recover=undefined
# -Wno-tsan: TSan does not model the fences of coherence.h and op_desc.c
# (GCC says so once per use); the atomics around them it does model.
TSAN_CFLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=thread -Wno-tsan

.PHONY: test-sanitize sanitize-build
# ASan links the normal build's emulator; TSan gets an instrumented one of
# its own (build-tsan/emu), so that it sees how the emulated streams order
# host functions and copies against the threads that enqueued them.
# coll_perf: the ops steps run a benchmark job (tools.sh, the trace schema).
# The command by its path: tools.mk, which names it CXLSHIM_CMD, is read
# after this file, and a prerequisite list is expanded where it is read
# (valgrind's steps found no build/cxlshim in a fresh clone).
SAN_TARGETS = $(LIB) $(BUILD)/cxlshim $(UNIT_TESTS) $(NCCL_TESTS) $(OPS_TESTS) $(SOCK_TESTS) \
	      $(BUILD)/bench/coll_perf $(BUILD)/tests/hostmem_check

sanitize-build: $(EMU_LIBS) $(SAN_TARGETS)
	@mkdir -p build-asan && ln -sfn ../$(EMU_OUT) build-asan/emu
	@[ ! -L build-tsan/emu ] || rm build-tsan/emu
	$(MAKE) BUILD=build-asan CFLAGS="$(ASAN_CFLAGS)" SANITIZE="-fsanitize=address,undefined" \
		$(subst $(BUILD)/,build-asan/,$(SAN_TARGETS))
	$(MAKE) BUILD=build-tsan EMU_OUT=build-tsan/emu CFLAGS="$(TSAN_CFLAGS)" \
		SANITIZE="-fsanitize=thread" LDFLAGS="-fsanitize=thread" build-tsan/emu/libcuda.so.1 build-tsan/emu/libcuda.so \
		build-tsan/emu/libcudart.so.13 build-tsan/emu/libcudart.so \
		$(subst $(BUILD)/,build-tsan/,$(SAN_TARGETS))

test-sanitize: sanitize-build
	BUILD=$(BUILD) ASAN_CFLAGS="$(ASAN_CFLAGS)" TSAN_CFLAGS="$(TSAN_CFLAGS)" tests/sanitize.sh

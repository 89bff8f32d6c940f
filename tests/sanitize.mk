# tests/sanitize.mk - make test-sanitize: the library, the command and the
# tests built with ASan + UBSan (build-asan/) run all of tests/run.sh, built
# with TSan (build-tsan/) the multi-threaded steps, and valgrind runs a few
# emulated jobs of the normal build (tests/sanitize.sh).  The CUDA emulation
# (the "GPU") stays uninstrumented in build/emu, linked into both.

ASAN_CFLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	      -fno-sanitize-recover=undefined
TSAN_CFLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=thread

.PHONY: test-sanitize sanitize-build
sanitize-build: $(EMU_LIBS) $(LIB) $(CXLSHIM_CMD) $(UNIT_TESTS) $(NCCL_TESTS) $(OPS_TESTS)
	@for b in asan tsan; do mkdir -p build-$$b && ln -sfn ../$(EMU_OUT) build-$$b/emu; done
	$(MAKE) BUILD=build-asan CFLAGS="$(ASAN_CFLAGS)" SANITIZE="-fsanitize=address,undefined" \
		$(subst $(BUILD)/,build-asan/,$(LIB) $(CXLSHIM_CMD) $(UNIT_TESTS) $(NCCL_TESTS) $(OPS_TESTS))
	$(MAKE) BUILD=build-tsan CFLAGS="$(TSAN_CFLAGS)" SANITIZE="-fsanitize=thread" \
		$(subst $(BUILD)/,build-tsan/,$(LIB) $(CXLSHIM_CMD) $(UNIT_TESTS) $(NCCL_TESTS) $(OPS_TESTS))

test-sanitize: sanitize-build
	BUILD=$(BUILD) ASAN_CFLAGS="$(ASAN_CFLAGS)" TSAN_CFLAGS="$(TSAN_CFLAGS)" tests/sanitize.sh

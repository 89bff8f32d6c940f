# tests/tests.mk - unit tests (core objects linked in directly) and
# multi-process NCCL programs run under the preload with emulated CUDA.

TEST_CFLAGS = $(CFLAGS) -I$(CUDA_INC)
UNIT_TESTS  = $(BUILD)/tests/test_policy $(BUILD)/tests/test_layout $(BUILD)/tests/test_pool
NCCL_TESTS  = $(BUILD)/tests/coll_check $(BUILD)/tests/api_check $(BUILD)/tests/reduce_check
CORE_OBJ    = $(filter $(BUILD)/obj/core/% $(BUILD)/obj/policy/%,$(LIB_OBJ))

# NCCL programs link the real libnccl (RUNPATH, so the preload and
# LD_LIBRARY_PATH still decide) and the emulated cudart from build/emu.
NCCL_PROG_LDFLAGS = -L$(BUILD)/emu -L$(CUDA_LIB) -Wl,--enable-new-dtags,-rpath,$(CUDA_LIB)
NCCL_PROG_LIBS    = -lnccl -lcudart -lm -pthread

# Socket tests: real processes and sockets under the preload; they link the
# core to look into the pool (records, rings) from the outside.
SOCK_TESTS  = $(BUILD)/tests/sock_check

$(BUILD)/tests/sock_check: tests/sock/sock_check.c tests/sock/sock_util.c $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -Itests/sock -o $@ $^ $(LDLIBS_SHIM)

$(BUILD)/tests/test_%: tests/unit/test_%.c $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $^ $(LDLIBS_SHIM)

$(BUILD)/tests/%: tests/coll/%.c tests/common/launch.c $(EMU_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -o $@ $(filter %.c,$^) $(NCCL_PROG_LDFLAGS) $(NCCL_PROG_LIBS)

test-build: $(LIB) $(EMU_LIBS) $(UNIT_TESTS) $(NCCL_TESTS) $(SOCK_TESTS)

test: test-build
	BUILD=$(BUILD) tests/run.sh

test-long: test-build
	BUILD=$(BUILD) CXLSHIM_TEST_LONG=1 tests/run.sh

# tests/fuzz/fuzz.mk - libFuzzer targets, built with clang into build-fuzz/
# with ASan and UBSan.  Every tests/fuzz/fuzz_NAME.c is a target, seeded
# from tests/fuzz/corpus/NAME/ (a new parser adds a file and a folder, e.g.
# the socket handshake: fuzz_handshake.c + corpus/handshake/).
#
#   make fuzz-build        build every target
#   make test-fuzz         run each for FUZZ_SECONDS (10; make test-long: 60)

FUZZ_CC      ?= clang
BUILD_FUZZ   ?= build-fuzz
FUZZ_SECONDS ?= 10
FUZZ_CFLAGS  = -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -pthread -fno-omit-frame-pointer \
	       -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
	       -I$(CUDA_INC) $(SRC_DIRS:%=-I%) -Itools/cxlshim
FUZZ_TARGETS = $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
# the library's core and policy, and the tool's pool reader
FUZZ_LIB_SRC = $(CORE_SRC) $(POLICY_SRC) tools/cxlshim/snapshot.c tools/cxlshim/snap_sock.c \
	       tools/cxlshim/snap_buf.c \
	       tools/cxlshim/doctor.c tools/cxlshim/doctor_cycle.c \
	       tools/cxlshim/names.c
FUZZ_LIB_OBJ = $(FUZZ_LIB_SRC:%.c=$(BUILD_FUZZ)/obj/%.o) $(FOLD_IMAGE_OBJ)
# clang with a libFuzzer runtime, or nothing to build
FUZZ_OK := $(shell printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' | \
	     $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null && echo 1)

$(BUILD_FUZZ)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD_FUZZ)/fuzz_%: $(BUILD_FUZZ)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ -ldl -lnuma -linih -lm -pthread

# the targets' own objects are not intermediate files to delete
.SECONDARY: $(FUZZ_TARGETS:%=$(BUILD_FUZZ)/obj/tests/fuzz/fuzz_%.o) $(FUZZ_LIB_OBJ)

.PHONY: fuzz-build test-fuzz
ifeq ($(FUZZ_OK),1)
fuzz-build: $(FUZZ_TARGETS:%=$(BUILD_FUZZ)/fuzz_%)
else
fuzz-build:
	@echo "fuzz: $(FUZZ_CC) with a libFuzzer runtime not found (make deps): fuzzers not built"
endif

test-build: fuzz-build

test-fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do BUILD_FUZZ=$(BUILD_FUZZ) tests/fuzz/run.sh $$t $(FUZZ_SECONDS) || exit 1; done

-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_TARGETS:%=$(BUILD_FUZZ)/obj/tests/fuzz/fuzz_%.d)

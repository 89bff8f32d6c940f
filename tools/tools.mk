# tools/tools.mk - the `cxlshim` command; included by the top-level Makefile.
# It links the library's core and policy objects statically, like the unit
# tests, so it formats, validates and reclaims pools with the same code.

CXLSHIM_CMD = $(BUILD)/cxlshim
TOOL_SRC    = $(wildcard tools/cxlshim/*.c)
TOOL_OBJ    = $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_CORE   = $(filter $(BUILD)/obj/core/% $(BUILD)/obj/policy/%,$(LIB_OBJ))

$(TOOL_OBJ): CFLAGS += -Itools/cxlshim

$(CXLSHIM_CMD): $(TOOL_OBJ) $(TOOL_CORE)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS_SHIM)

all: $(CXLSHIM_CMD)
test-build: $(CXLSHIM_CMD)

-include $(TOOL_OBJ:.o=.d)

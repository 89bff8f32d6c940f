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

# make install [PREFIX=/usr/local] [DESTDIR=]: the library, the command,
# its man page, the example policies, and the CUDA CPU emulation (for
# `cxlshim run -e` on machines without a GPU), and include/cxlshim.h (the
# optional tagging and statistics calls; everything else is NCCL's and
# CUDA's own interface).
PREFIX  ?= /usr/local
DESTDIR ?=
INSTALL_LIB = $(DESTDIR)$(PREFIX)/lib

.PHONY: install uninstall
install: all
	install -d $(INSTALL_LIB)/cxlshim/emu $(DESTDIR)$(PREFIX)/bin \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/cxlshim/conf \
		$(DESTDIR)$(PREFIX)/include
	install -m 644 include/cxlshim.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(LIB) $(INSTALL_LIB)/
	install -m 755 $(CXLSHIM_CMD) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 tools/cxlshim/cxlshim.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 conf/*.conf $(DESTDIR)$(PREFIX)/share/cxlshim/conf/
	cp -P $(EMU_LIBS) $(INSTALL_LIB)/cxlshim/emu/

uninstall:
	rm -f $(INSTALL_LIB)/libcxlshim.so $(DESTDIR)$(PREFIX)/bin/cxlshim \
		$(DESTDIR)$(PREFIX)/include/cxlshim.h \
		$(DESTDIR)$(PREFIX)/share/man/man1/cxlshim.1
	rm -rf $(INSTALL_LIB)/cxlshim $(DESTDIR)$(PREFIX)/share/cxlshim

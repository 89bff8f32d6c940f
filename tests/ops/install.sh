#!/usr/bin/env bash
# install.sh - `make install DESTDIR=... PREFIX=...` puts the library, the
# command, its man page, the policies and the CUDA emulation in place, and
# the installed command finds the installed library on its own.
set -euo pipefail
B=${BUILD:-build}
dest=$(mktemp -d /tmp/cxlshim-ops-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
make -s BUILD="$B" install DESTDIR="$dest" PREFIX=/opt/cxlshim >/dev/null
R=$dest/opt/cxlshim
for f in lib/libcxlshim.so bin/cxlshim share/man/man1/cxlshim.1 share/cxlshim/conf/cxlshim.conf \
	lib/cxlshim/emu/libcuda.so.1 lib/cxlshim/emu/libcudart.so.13; do
	[ -e "$R/$f" ] || fail "$f not installed"
done
out=$(env -u LD_LIBRARY_PATH "$R/bin/cxlshim" run -n -e)
grep -q "^LD_PRELOAD=$R/bin/../lib/libcxlshim.so$" <<<"$out" || fail "installed run: $out"
grep -q "^LD_LIBRARY_PATH=$R/bin/../lib/cxlshim/emu$" <<<"$out" || fail "installed emu: $out"
if command -v man >/dev/null; then
	man -l "$R/share/man/man1/cxlshim.1" 2>/dev/null | grep -q "cxlshim doctor" || fail "man page"
fi
make -s BUILD="$B" uninstall DESTDIR="$dest" PREFIX=/opt/cxlshim
[ -z "$(find "$R" -type f)" ] || fail "uninstall left: $(find "$R" -type f)"
echo "install: ok"

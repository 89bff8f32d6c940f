#!/usr/bin/env bash
# tests/sock/stdio_progs.sh - programs that write sockets through stdio,
# under the preload on both ends: glibc's stdio hands its bytes to the
# kernel past the shim, so these must stay on TCP (sock.programs denies
# bash and git by default) and work exactly as without the preload.
#
#   bash's /dev/tcp: `echo >&3` (stdio) and `read -u 3` against a line
#                    echo server in Python (which is pooled elsewhere)
#   git daemon + git clone git://, protocols 0 and 2 (upload-pack writes
#                    its ref advertisement with fwrite + fflush)
# Exit 77 when git is missing.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SHIM=${SHIM:-$PWD/$BUILD/libcxlshim.so}
TMP=$(mktemp -d /tmp/cxlshim-stdio.XXXXXX)
POOL=/dev/shm/cxlshim-stdio-$$.pool
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP" "$POOL"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
pre() { env LD_PRELOAD="$SHIM" CXLSHIM_POOL_PATH="$POOL" CXLSHIM_DEBUG=INFO \
	CXLSHIM_LOG_FILE="$TMP/shim.log" "$@"; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "== bash /dev/tcp against a line echo server"
p=$(port)
pre python3 -c '
import socket, sys
l = socket.create_server(("127.0.0.1", int(sys.argv[1])))
c, _ = l.accept(); f = c.makefile("rwb")
for line in f:
    f.write(b"echo: " + line); f.flush()' "$p" &
sleep 0.5
pre timeout 20 bash -c '
exec 3<>/dev/tcp/127.0.0.1/'"$p"'
for i in 1 2 3; do
	echo "hello $i" >&3
	read -t 5 -r -u 3 ans || exit 1
	[ "$ans" = "echo: hello $i" ] || exit 2
done' || fail "bash /dev/tcp: no echo ($?)"
grep -q "joined" "$TMP/shim.log" && fail "bash's connection went through the pool"
echo "three lines echoed, over TCP"

command -v git >/dev/null || { echo "SKIP: git not installed"; exit 77; }
git init -q "$TMP/repo" && (cd "$TMP/repo" && echo hi >a && git add a &&
	git -c user.email=a@b -c user.name=n commit -qm init) || fail "git init"
for v in 0 2; do
	echo "== git daemon + git clone, protocol $v"
	p=$(port)
	pre timeout 30 git daemon --reuseaddr --listen=127.0.0.1 --port="$p" \
		--base-path="$TMP" --export-all "$TMP" 2>>"$TMP/daemon.err" &
	d=$!
	for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done
	pre timeout 20 git -c protocol.version=$v clone -q "git://127.0.0.1:$p/repo" "$TMP/clone$v" ||
		fail "git clone, protocol $v ($?)"
	[ "$(cat "$TMP/clone$v/a")" = hi ] || fail "git clone, protocol $v: wrong content"
	kill $d; wait $d 2>/dev/null
	echo "cloned"
done
grep -q "joined" "$TMP/shim.log" && fail "a stdio program's connection went through the pool"
echo "stdio programs: ok"

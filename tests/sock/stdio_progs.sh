#!/usr/bin/env bash
# tests/sock/stdio_progs.sh - programs that use sockets through stdio,
# under the preload on both ends with the default policy: glibc's stdio
# reads and writes past the shim, so their streams over pooled sockets
# are the shim's (core/sock/sock_stdio.c); each must go through the pool
# and work exactly as without the preload.
#
#   bash's /dev/tcp: `echo >&3` (stdout redirected onto the socket) and
#                    `read -u 3` against a line echo server in Python
#   socat EXEC:'tr a-z A-Z',nofork and SYSTEM:script,nofork (sh execs sed): a stdio filter
#                    exec'd onto the accepted connection, 200 KB through
#   the same filter with its stderr on the connection and CXLSHIM_DEBUG=INFO:
#                    the shim's log lines must not go into it
#   git daemon + git clone git://, protocols 0 and 2 (the daemon execs
#                    upload-pack onto the connection, which writes its ref
#                    advertisement with fwrite + fflush)
# Exit 77 when git is missing (socat is in the project's packages).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SHIM=${SHIM:-$PWD/$BUILD/libcxlshim.so}
TMP=$(mktemp -d /tmp/cxlshim-stdio.XXXXXX)
POOL=/dev/shm/cxlshim-stdio-$$.pool
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP" "$POOL"' EXIT
# shellcheck source=tests/sock/lib.sh
. tests/sock/lib.sh
pre() { env LD_PRELOAD="$SHIM" CXLSHIM_POOL_PATH="$POOL" CXLSHIM_DEBUG=INFO \
	CXLSHIM_LOG_FILE="$TMP/shim.log" "$@"; }

echo "== bash /dev/tcp against a line echo server"
p=$(port)
pre python3 -c '
import socket, sys
l = socket.create_server(("127.0.0.1", int(sys.argv[1])))
l.settimeout(30)  # never outlive a client that did not come
c, _ = l.accept(); c.settimeout(30); f = c.makefile("rwb")
for line in f:
    f.write(b"echo: " + line); f.flush()' "$p" &
wait_listening "$p"
pre timeout 20 bash -c '
exec 3<>/dev/tcp/127.0.0.1/'"$p"'
for i in 1 2 3; do
	echo "hello $i" >&3
	read -t 5 -r -u 3 ans || exit 1
	[ "$ans" = "echo: hello $i" ] || exit 2
done' || fail "bash /dev/tcp: no echo ($?)"
joined() { grep -c "joined" "$TMP/shim.log"; }
[ "$(joined)" -ge 1 ] || fail "bash's connection did not go through the pool"
echo "three lines echoed, through the pool"

head -c 150000 /dev/urandom | base64 >"$TMP/text"
printf '#!/bin/sh\nexec sed "s/[a-z]/\\U&/g"\n' >"$TMP/up.sh" && chmod +x "$TMP/up.sh"
for filter in "EXEC:tr a-z A-Z,nofork" "SYSTEM:$TMP/up.sh,nofork"; do
	echo "== socat TCP-LISTEN $filter"
	before=$(joined)
	p=$(port)
	pre timeout 30 socat TCP-LISTEN:"$p",bind=127.0.0.1,reuseaddr "$filter" 2>>"$TMP/socat.err" &
	d=$!
	wait_listening "$p"
	pre timeout 20 socat -t 10 - TCP:127.0.0.1:"$p" <"$TMP/text" >"$TMP/out" ||
		fail "socat $filter: client ($?)"
	wait $d 2>/dev/null
	tr a-z A-Z <"$TMP/text" | cmp -s - "$TMP/out" ||
		fail "socat $filter: $(wc -c <"$TMP/out") bytes back, not the text in capitals"
	[ "$(joined)" -gt "$before" ] || fail "socat $filter: not through the pool"
	echo "150 KB through the filter and back"
done

echo "== socat EXEC:tr,nofork,stderr with the shim logging to stderr (the connection)"
p=$(port)
env LD_PRELOAD="$SHIM" CXLSHIM_POOL_PATH="$POOL" CXLSHIM_DEBUG=INFO timeout 30 \
	socat TCP-LISTEN:"$p",bind=127.0.0.1,reuseaddr "EXEC:tr a-z A-Z,nofork,stderr" 2>/dev/null &
d=$!
wait_listening "$p"
pre timeout 20 socat -t 10 - TCP:127.0.0.1:"$p" <"$TMP/text" >"$TMP/out" || fail "stderr: client ($?)"
wait $d 2>/dev/null
tr a-z A-Z <"$TMP/text" | cmp -s - "$TMP/out" ||
	fail "stderr: the shim's log lines went into the connection: $(head -c 300 "$TMP/out" | head -3)"
echo "no log line in the connection"

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
	before=$(joined)
	pre timeout 20 git -c protocol.version=$v clone -q "git://127.0.0.1:$p/repo" "$TMP/clone$v" ||
		fail "git clone, protocol $v ($?)"
	[ "$(joined)" -gt "$before" ] || fail "git clone, protocol $v: not through the pool"
	[ "$(cat "$TMP/clone$v/a")" = hi ] || fail "git clone, protocol $v: wrong content"
	kill $d; wait $d 2>/dev/null
	echo "cloned"
done
echo "stdio programs: ok"

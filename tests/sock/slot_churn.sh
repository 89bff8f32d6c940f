#!/usr/bin/env bash
# tests/sock/slot_churn.sh - a server under the preload whose clients are
# not: their connections stay on TCP and must not keep records of the
# pool's table, or after it is full (128 slots) no connection is pooled.
#
#   client first  150 clients send a line first (HTTP, redis): the server
#                 end sees TCP bytes before any peer joined and frees its
#                 record at once: none left afterwards
#   server first  150 clients wait for the server's greeting (SSH, SMTP):
#                 each server end waits out its meeting window and leaves
#                 its record ABANDONED for a late peer; a claim that finds
#                 the table full frees those older than a second
# After each, a client under the preload must still go through the pool.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
SHIM=${SHIM:-$PWD/$BUILD/libcxlshim.so}
TMP=$(mktemp -d /tmp/cxlshim-churn.XXXXXX)
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-churn-$$.pool
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP" "$CXLSHIM_POOL_PATH"' EXIT
# shellcheck source=tests/sock/lib.sh
. tests/sock/lib.sh
in_use() { "$BUILD/cxlshim" pool status | sed -n 's/.*connection slots (\([0-9]*\) in use.*/\1/p'; }

cat >"$TMP/server.py" <<'EOF'
import socket, sys
port, first = int(sys.argv[1]), sys.argv[2]
l = socket.create_server(("127.0.0.1", port))
while True:
    c, _ = l.accept()
    if first == "server":
        c.sendall(b"hello\n")
    else:
        c.recv(64)
        c.sendall(b"ok\n")
    c.close()
EOF
cat >"$TMP/clients.py" <<'EOF'
import socket, sys
port, first, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    if first == "client":
        s.sendall(b"x\n")
    if not s.recv(64):
        sys.exit("no answer")
    s.close()
EOF

for first in client server; do
	echo "== $first speaks first: 150 clients without the shim"
	p=$(port)
	env LD_PRELOAD="$SHIM" CXLSHIM_SOCK_MEET_TIMEOUT_MS=100 python3 "$TMP/server.py" "$p" "$first" &
	srv=$!
	wait_listening "$p"
	timeout 120 python3 "$TMP/clients.py" "$p" "$first" 150 || fail "$first first: clients"
	n=$(in_use)
	echo "records in use after them: $n"
	if [ "$first" = client ]; then
		[ "$n" -le 2 ] || fail "client first: $n records left by connections that stayed on TCP"
	else
		[ "$n" -lt 128 ] || fail "server first: the table stayed full"
	fi
	env LD_PRELOAD="$SHIM" CXLSHIM_DEBUG=INFO CXLSHIM_LOG_FILE="$TMP/last.log" \
		timeout 20 python3 "$TMP/clients.py" "$p" "$first" 1 || fail "$first first: last client"
	grep -q "joined, bytes go through the pool" "$TMP/last.log" ||
		fail "$first first: a client under the shim stayed on TCP: $(cat "$TMP/last.log")"
	echo "a client under the shim still goes through the pool"
	kill $srv; wait $srv 2>/dev/null
	rm -f "$TMP/last.log"
done
echo "slot churn: ok"

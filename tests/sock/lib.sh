# tests/sock/lib.sh - what the socket scripts share (sourced, bash).
# shellcheck shell=bash

fail() { echo "FAIL: $*"; exit 1; }

# A free port: bind to 0 and read it back.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# listening PORT: a listener on 127.0.0.1:PORT, seen without connecting
# (a server that serves one connection must not get a probe)
listening() { grep -q "^ *[0-9]*: [0-9A-F]*:$(printf '%04X' "$1") [0-9A-F]*:0000 0A" /proc/net/tcp; }

# wait_listening PORT: up to 5 s for it
wait_listening() {
	for _ in $(seq 50); do listening "$1" && return 0; sleep 0.1; done
	return 1
}

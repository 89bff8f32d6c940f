#!/usr/bin/env bash
# bench/sock_churn.sh - connection churn through chained event loops:
# new connections a second, plain TCP loopback versus the pool, in
# interleaved rounds, with the median of the per-round ratios.
#
#   bench/sock_churn.sh [-n rounds] [-N connections] [-H] [-F fds] [-L lib.so]
#
# A round runs each side once, the sides taking turns going first:
#  - chain: build/tests/sock_chain_check, a client loop keeping 50
#    connections open (one 64 B request, a 4 KiB answer, then closed)
#    through a proxy loop to a server loop, all three nonblocking epoll
#    loops that also read or write at once as ab and haproxy do;
#  - with -H, when ab, haproxy and nginx are installed (not project
#    dependencies): ab -c 50 without keep-alive through haproxy (mode tcp)
#    to nginx (a 1 KiB file), every process under the preload on the pool
#    side.  Run as root, nginx's workers serve as nobody: haproxy's
#    connections to them are denied the pool (another uid) and stay on TCP;
#  - with -H, as root: ab -c 1 without keep-alive straight to such an
#    nginx ("denied"): every connection is denied, so the pool side
#    measures what a denial costs (sock_denial.h) against plain TCP.
#  - with -F FDS, "accept": build/bench/sock_accept, one blocking
#    connection after another (one byte there and back) to a server that
#    holds FDS other fds, as one with thousands of clients does;
# -L runs the pool side under another build of the library (e.g. the
# previous commit's).  The pool side runs on a fresh pool per round.  A run that does not end
# in 120 s is killed and reported as a hang (none may hang).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
SHIM=$PWD/$BUILD/libcxlshim.so
CHAIN=$PWD/$BUILD/tests/sock_chain_check
ACCEPT=$PWD/$BUILD/bench/sock_accept
ROUNDS=5
CONNS=20000
HTTP=0
FDS=
while getopts n:N:HF:L: o; do
	case $o in
	F) FDS=$OPTARG ;;
	L) SHIM=$(realpath "$OPTARG") ;;
	n) ROUNDS=$OPTARG ;;
	N) CONNS=$OPTARG ;;
	H) HTTP=1 ;;
	*) exit 2 ;;
	esac
done
[ -f "$SHIM" ] && [ -x "$CHAIN" ] && [ -x "$ACCEPT" ] || { echo "sock_churn: build first (make test-build)"; exit 2; }
if [ "$HTTP" = 1 ]; then
	for t in ab haproxy nginx; do
		command -v $t >/dev/null || { echo "sock_churn: -H needs $t (not installed)"; exit 77; }
	done
fi
TMP=$(mktemp -d /tmp/sock_churn.XXXXXX)
POOL=/dev/shm/cxlshim-sockchurn-$$.pool
trap 'pkill -P $$ 2>/dev/null; rm -rf "$TMP" "$POOL"' EXIT

# on SIDE CMD...: CMD under the preload (pool) or without (tcp).  It
# execs: called only in a subshell (`&`, `$(...)`), so that a server's $!
# is the server itself, which `kill` stops.
on() {
	local side=$1
	shift
	if [ "$side" = pool ]; then
		exec env LD_PRELOAD="$SHIM" CXLSHIM_POOL_PATH="$POOL" "$@"
	else
		exec env -u LD_PRELOAD "$@"
	fi
}

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# chain SIDE: connections a second (or "hang").
chain() {
	local out
	out=$( (on "$1" timeout 120 "$CHAIN" "$CONNS") ) || { echo hang; return; }
	sed -n 's/.*s, \([0-9]*\) a second.*/\1/p' <<<"$out" | head -1
}

# nginx_conf PORT: a 1 KiB file served on PORT, workers as nobody when root.
nginx_conf() {
	mkdir -p "$TMP/www" "$TMP/ngx/logs"
	head -c 1024 /dev/urandom >"$TMP/www/f"
	cat >"$TMP/ngx.conf" <<EOF
daemon off; master_process on; worker_processes 2; pid $TMP/ngx/nginx.pid;
error_log $TMP/ngx/logs/error.log; events { worker_connections 1024; }
http { access_log off; client_body_temp_path $TMP/ngx/cbt; proxy_temp_path $TMP/ngx/pt;
  fastcgi_temp_path $TMP/ngx/ft; uwsgi_temp_path $TMP/ngx/ut; scgi_temp_path $TMP/ngx/st;
  server { listen 127.0.0.1:$1; root $TMP/www; } }
EOF
}

# http SIDE: ab's requests a second through haproxy to nginx (or "hang").
http() {
	local side=$1 np hp rate
	np=$(port)
	hp=$(port)
	nginx_conf "$np"
	cat >"$TMP/hap.cfg" <<EOF
global
  maxconn 2000
defaults
  mode tcp
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe
  bind 127.0.0.1:$hp
  default_backend be
backend be
  server n1 127.0.0.1:$np
EOF
	# the servers' output away from $(...), which would wait for them
	(on "$side" nginx -c "$TMP/ngx.conf" -p "$TMP/ngx") >/dev/null 2>&1 &
	local ngx=$!
	(on "$side" haproxy -db -f "$TMP/hap.cfg") >/dev/null 2>&1 &
	local hap=$!
	sleep 1
	rate=$( (on "$side" timeout 120 ab -q -c 50 -n "$CONNS" "http://127.0.0.1:$hp/f") 2>/dev/null |
		sed -n 's/^Requests per second: *\([0-9]*\).*/\1/p')
	kill "$hap" 2>/dev/null
	kill -QUIT "$ngx" 2>/dev/null
	wait "$hap" "$ngx" 2>/dev/null
	echo "${rate:-hang}"
}

# denied SIDE: ab -c 1 straight to nginx's workers (nobody), requests a
# second (or "hang").
denied() {
	local side=$1 np rate
	np=$(port)
	nginx_conf "$np"
	(on "$side" nginx -c "$TMP/ngx.conf" -p "$TMP/ngx") >/dev/null 2>&1 &
	local ngx=$!
	sleep 1
	rate=$( (on "$side" timeout 120 ab -q -c 1 -n $((CONNS / 4)) "http://127.0.0.1:$np/f") 2>/dev/null |
		sed -n 's/^Requests per second: *\([0-9]*\).*/\1/p')
	kill -QUIT "$ngx" 2>/dev/null
	wait "$ngx" 2>/dev/null
	echo "${rate:-hang}"
}

# accept SIDE: sock_accept's connections a second (or "hang").
accept() {
	local out
	out=$( (on "$1" timeout 120 "$ACCEPT" "$FDS" "$CONNS") ) || { echo hang; return; }
	sed -n 's/.*s, \([0-9]*\) a second.*/\1/p' <<<"$out" | head -1
}

# round KIND: one run per side, the order alternating with the round.
report() {
	local kind=$1 r=$2 first=$3 second=$4 a b
	a=$($kind "$first")
	b=$($kind "$second")
	[ "$first" = tcp ] && echo "$kind round $r: tcp $a pool $b" || echo "$kind round $r: tcp $b pool $a"
}

kinds=(chain)
[ -n "$FDS" ] && kinds=(accept)
[ "$HTTP" = 1 ] && kinds+=(http)
[ "$HTTP" = 1 ] && [ "$(id -u)" = 0 ] && kinds+=(denied)
for ((r = 1; r <= ROUNDS; r++)); do
	for k in "${kinds[@]}"; do
		rm -f "$POOL"
		if ((r % 2)); then report "$k" $r tcp pool; else report "$k" $r pool tcp; fi
	done
done | tee "$TMP/rounds"
for k in "${kinds[@]}"; do
	awk -v k="$k" 'BEGIN { n = 0 } $1 == k && $5 != "hang" && $7 != "hang" { t[n] = $5; p[n] = $7; q[n++] = $7 / $5 }
		$1 == k && ($5 == "hang" || $7 == "hang") { h++ }
		function med(a, n,   i, j, x) { for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
			if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x } return n % 2 ? a[int(n / 2)] : (a[n / 2 - 1] + a[n / 2]) / 2 }
		END { if (!n) { print k ": no round ended"; exit }
			printf "%s: %d rounds, connections/s median tcp %.0f pool %.0f, pool/tcp median %.2f (range %.2f-%.2f)%s\n",
				k, n, med(t, n), med(p, n), med(q, n), q[0], q[n - 1], h ? ", " h " hangs" : "" }' "$TMP/rounds"
done

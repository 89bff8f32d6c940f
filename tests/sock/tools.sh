#!/usr/bin/env bash
# tests/sock/tools.sh TOOL - real programs under the preload on both ends,
# over 127.0.0.1.  Each tool's own success criteria plus: the shim's log
# must say that connections went through the pool (pooled=N lines), and
# transfers are compared by checksum.  Exit 77 when the tool is missing.
#
#   iperf3   default, -R, -P 4, --bidir
#   redis    redis-benchmark GET/SET, 50 clients, plain and pipelined (-P 16)
#   sockperf ping-pong and throughput
#   socat    a file through socat on both ends, sha256 compared
#   curl     a file from python's http.server, sha256 compared
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SHIM=${SHIM:-$PWD/$BUILD/libcxlshim.so}
TOOL=$1
TMP=$(mktemp -d /tmp/cxlshim-sock-tools.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
[ -n "${KEEP_LOGS:-}" ] && trap "cp $TMP/*.log $TMP/*.out ${KEEP_DIR:-/tmp/sock-keep}/ 2>/dev/null; cleanup" EXIT

need() {
	command -v "$1" >/dev/null || { echo "SKIP: $1 not installed (make deps)"; exit 77; }
}

# shellcheck source=tests/sock/lib.sh
. tests/sock/lib.sh

# under_shim LOG CMD...: run with the preload, decisions logged to LOG
under_shim() {
	local log=$1
	shift
	env LD_PRELOAD="$SHIM" CXLSHIM_DEBUG=INFO CXLSHIM_LOG_FILE="$log" "$@"
}

# serve LOG CMD...: the same in the background; its pid (the program's
# own, env execs it) goes to PIDS so that cleanup really stops it
serve() {
	local log=$1
	shift
	env LD_PRELOAD="$SHIM" CXLSHIM_DEBUG=INFO CXLSHIM_LOG_FILE="$log" "$@" &
	PIDS+=($!)
}

# wait_port PORT: until a socket listens on PORT (the kernel's table, not
# a probe connection: one-shot servers would take the probe for their
# client), 30 s at most (a loaded machine)
wait_port() {
	local hex
	hex=$(printf ':%04X ' "$1")
	for _ in $(seq 600); do
		awk -v p="$hex" '$4 == "0A" && index($2 " ", p) { f = 1 } END { exit !f }' \
			/proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
		sleep 0.05
	done
	echo "nothing listens on $1"
	return 1
}

# pooled LOG MIN: at least MIN connections joined in the pool
pooled() {
	local n
	n=$(grep -c 'bytes go through the pool' "$1" 2>/dev/null)
	echo "pooled=$n (want >= $2) in $(basename "$1")"
	[ "${n:-0}" -ge "$2" ]
}

run_iperf3() {
	need iperf3
	local p mode
	p=$(port)
	for mode in "" "-R" "-P 4" "--bidir"; do
		serve "$TMP/srv.log" iperf3 -s -1 -p "$p" >"$TMP/srv.out" 2>&1
		wait_port "$p" || fail "iperf3 server did not start"
		# shellcheck disable=SC2086
		under_shim "$TMP/cli.log" timeout 60 iperf3 -c 127.0.0.1 -p "$p" -t 1 $mode \
			>"$TMP/cli.out" 2>&1 || { cat "$TMP/cli.out"; fail "iperf3 $mode"; }
		wait "${PIDS[-1]}" || { cat "$TMP/srv.out"; fail "iperf3 server $mode"; }
		grep -E 'sender|receiver' "$TMP/cli.out" | sed "s/^/iperf3 ${mode:-(default)}: /"
	done
	pooled "$TMP/cli.log" 10 || fail "iperf3 connections were not pooled"
}

run_redis() {
	need redis-server
	need redis-benchmark
	local p
	p=$(port)
	serve "$TMP/srv.log" redis-server --port "$p" --save '' --appendonly no \
		--bind 127.0.0.1 >"$TMP/srv.out" 2>&1
	wait_port "$p" || fail "redis-server did not start"
	under_shim "$TMP/cli.log" timeout 120 redis-benchmark -p "$p" -c 50 -n 20000 -t set,get \
		-q >"$TMP/b1.out" 2>&1 || { cat "$TMP/b1.out"; fail "redis-benchmark"; }
	under_shim "$TMP/cli.log" timeout 120 redis-benchmark -p "$p" -c 50 -n 50000 -P 16 \
		-t set,get -q >"$TMP/b2.out" 2>&1 || { cat "$TMP/b2.out"; fail "redis-benchmark -P 16"; }
	tr '\r' '\n' <"$TMP/b1.out" | grep -E '^(SET|GET): [0-9.]+ req' | sed 's/^/50 clients: /'
	tr '\r' '\n' <"$TMP/b2.out" | grep -E '^(SET|GET): [0-9.]+ req' |
		sed 's/^/50 clients, -P 16: /'
	[ "$(cat "$TMP/b1.out" "$TMP/b2.out" | tr '\r' '\n' |
		grep -cE '^(SET|GET): [0-9.]+ requests per second')" = 4 ] ||
		fail "redis-benchmark did not finish its four runs"
	# a value written and read back through the pool
	under_shim "$TMP/cli.log" redis-cli -p "$p" set cxlshim-key hello-pool >/dev/null
	[ "$(under_shim "$TMP/cli.log" redis-cli -p "$p" get cxlshim-key)" = hello-pool ] ||
		fail "redis GET returned the wrong value"
	pooled "$TMP/srv.log" 100 || fail "redis connections were not pooled"
}

run_sockperf() {
	need sockperf
	local p
	p=$(port)
	serve "$TMP/srv.log" sockperf sr --tcp -i 127.0.0.1 -p "$p" >"$TMP/srv.out" 2>&1
	wait_port "$p" || fail "sockperf server did not start"
	under_shim "$TMP/cli.log" timeout 60 sockperf pp --tcp -i 127.0.0.1 -p "$p" -t 1 -m 64 \
		>"$TMP/pp.out" 2>&1 || { cat "$TMP/pp.out"; fail "sockperf ping-pong"; }
	under_shim "$TMP/cli.log" timeout 60 sockperf tp --tcp -i 127.0.0.1 -p "$p" -t 1 -m 65000 \
		>"$TMP/tp.out" 2>&1 || { cat "$TMP/tp.out"; fail "sockperf throughput"; }
	grep -E 'avg-latency|percentile 50.000|percentile 99.000' "$TMP/pp.out" | sed 's/^/ping-pong: /'
	grep -E 'BandWidth|Summary: Message Rate' "$TMP/tp.out" | sed 's/^/throughput: /'
	grep -q 'avg-latency' "$TMP/pp.out" || fail "no ping-pong result"
	pooled "$TMP/cli.log" 2 || fail "sockperf connections were not pooled"
}

run_socat() {
	need socat
	local p
	p=$(port)
	head -c 50000000 /dev/urandom >"$TMP/in"
	serve "$TMP/srv.log" timeout 60 socat -u TCP-LISTEN:"$p",bind=127.0.0.1,reuseaddr \
		CREATE:"$TMP/out"
	wait_port "$p" || fail "socat did not listen"
	under_shim "$TMP/cli.log" timeout 60 socat -u FILE:"$TMP/in" TCP:127.0.0.1:"$p" ||
		fail "socat client"
	wait "${PIDS[-1]}" || fail "socat server"
	sha256sum "$TMP/in" "$TMP/out" | sed "s|$TMP/||"
	[ "$(sha256sum <"$TMP/in")" = "$(sha256sum <"$TMP/out")" ] || fail "checksums differ"
	pooled "$TMP/cli.log" 1 || fail "the socat transfer was not pooled"
}

run_curl() {
	need curl
	need python3
	local p
	p=$(port)
	mkdir "$TMP/www"
	head -c 30000000 /dev/urandom >"$TMP/www/blob"
	serve "$TMP/srv.log" python3 -m http.server "$p" --bind 127.0.0.1 \
		--directory "$TMP/www" >"$TMP/srv.out" 2>&1
	wait_port "$p" || fail "http.server did not start"
	under_shim "$TMP/cli.log" timeout 60 curl -sS -o "$TMP/got" "http://127.0.0.1:$p/blob" ||
		fail "curl"
	sha256sum "$TMP/www/blob" "$TMP/got" | sed "s|$TMP/||"
	[ "$(sha256sum <"$TMP/www/blob")" = "$(sha256sum <"$TMP/got")" ] || fail "checksums differ"
	pooled "$TMP/cli.log" 1 || fail "the HTTP transfer was not pooled"
}

case $TOOL in
iperf3 | redis | sockperf | socat | curl) "run_$TOOL" ;;
*) echo "usage: $0 iperf3|redis|sockperf|socat|curl"; exit 2 ;;
esac
echo "PASS: $TOOL"

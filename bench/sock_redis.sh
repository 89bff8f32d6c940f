#!/usr/bin/env bash
# bench/sock_redis.sh - redis-benchmark against redis-server, plain TCP
# loopback versus the pool, in interleaved rounds, with the median of the
# per-round ratios.
#
#   bench/sock_redis.sh [-n rounds] [-N requests] [-B busy_poll_us] [-O lib.so]
#
# One round runs redis-benchmark (50 clients, SET and GET, not pipelined
# and -P 16) against a fresh redis-server once per side: TCP (no preload)
# and the pool (build/libcxlshim.so on both ends), and with -O the same
# under another build of the library ("other", e.g. the previous commit).
# The sides take turns going first.  On this shared 2-core machine a
# single run's p99 moves by 2-5x with the load, so a ratio is taken
# within a round (the sides a few seconds apart) and the summary gives
# the median and range of those ratios over the rounds, never a best run.
# Every redis-benchmark run has a watchdog: one that does not finish in
# 60 s is killed and reported as a hang (none may hang).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
SHIM=$PWD/$BUILD/libcxlshim.so
ROUNDS=5
REQS=100000
BUSY=0
OTHER=
while getopts n:N:B:O: o; do
	case $o in
	n) ROUNDS=$OPTARG ;;
	N) REQS=$OPTARG ;;
	B) BUSY=$OPTARG ;;
	O) OTHER=$(realpath "$OPTARG") ;;
	*) exit 2 ;;
	esac
done
for t in redis-server redis-benchmark; do
	command -v $t >/dev/null || { echo "sock_redis: $t not installed (make deps)"; exit 77; }
done
[ -f "$SHIM" ] || { echo "sock_redis: $SHIM missing (make)"; exit 2; }
TMP=$(mktemp -d /tmp/sock_redis.XXXXXX)
POOLS="/dev/shm/cxlshim-sockredis-$$"
srv=
trap 'rm -rf "$TMP"; rm -f "$POOLS"-*.pool; [ -z "$srv" ] || kill $srv 2>/dev/null' EXIT
SIDES=(tcp pool)
[ -n "$OTHER" ] && SIDES+=(other)

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# run SIDE CMD...: CMD as that side runs it (a pool per side and round).
# Only ever called in a subshell (`&` or `$(...)`): it execs, so that the
# background server's $! is redis-server itself, which `kill $srv` stops
# (a server left behind would keep the caller's descriptors, and locks).
run() {
	local side=$1
	shift
	case $side in
	tcp) exec env -u LD_PRELOAD "$@" ;;
	pool) exec env LD_PRELOAD="$SHIM" CXLSHIM_SOCK_BUSY_POLL_US="$BUSY" \
		CXLSHIM_POOL_PATH="$POOLS-$side.pool" "$@" ;;
	other) exec env LD_PRELOAD="$OTHER" CXLSHIM_SOCK_BUSY_POLL_US="$BUSY" \
		CXLSHIM_POOL_PATH="$POOLS-$side.pool" "$@" ;;
	esac
}

# one_side ROUND SIDE: appends "round side test pipe rps p99" lines
one_side() {
	local r=$1 side=$2 p pipe out
	rm -f "$POOLS-$side.pool"
	p=$(port)
	run "$side" redis-server --port "$p" --save '' --appendonly no --bind 127.0.0.1 \
		>/dev/null 2>&1 &
	srv=$!
	for _ in $(seq 50); do
		redis-cli -p "$p" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	for pipe in 1 16; do
		out=$(run "$side" timeout 60 redis-benchmark -p "$p" -c 50 -n "$REQS" -P $pipe \
			-t set,get --csv 2>/dev/null)
		if [ $? = 124 ]; then
			echo "$r $side HANG $pipe 0 0" >>"$TMP/runs"
			continue
		fi
		tail -n +2 <<<"$out" | tr -d '"' | while IFS=, read -r test rps _ _ _ _ p99 _; do
			echo "$r $side $test $pipe $rps $p99"
		done >>"$TMP/runs"
	done
	kill $srv
	wait $srv 2>/dev/null
	srv=
}

echo "# redis-benchmark -c 50 -n $REQS, SET/GET, -P 1 and 16: ${SIDES[*]}, $ROUNDS rounds" \
	"(busy-poll ${BUSY} us), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$TMP/runs"
for r in $(seq "$ROUNDS"); do
	# the sides take turns going first
	n=${#SIDES[@]}
	for i in $(seq 0 $((n - 1))); do
		one_side "$r" "${SIDES[$(((i + r) % n))]}"
	done
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
grep -q HANG "$TMP/runs" && echo "# HANGS: $(grep -c HANG "$TMP/runs") redis-benchmark runs did not finish in 60 s:" &&
	grep HANG "$TMP/runs"

# per round and measurement: ratio of each side to tcp; then the medians
awk -v sides="${SIDES[*]}" '
function median(list,    n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++)
		for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	if (n == 0) return "-"
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function range(list,    n, a, i, lo, hi) {
	n = split(list, a, " ")
	lo = hi = a[1]
	for (i = 2; i <= n; i++) { if (a[i] + 0 < lo + 0) lo = a[i]; if (a[i] + 0 > hi + 0) hi = a[i] }
	return sprintf("%.2f-%.2f", lo, hi)
}
{ v[$1, $2, $3, $4, "rps"] = $5; v[$1, $2, $3, $4, "p99"] = $6; rounds[$1] = 1 }
END {
	ns = split(sides, S, " ")
	nk = split("SET 1,GET 1,SET 16,GET 16", K, ",")
	printf "%-5s %-4s %-3s", "round", "test", "-P"
	for (k = 2; k <= ns; k++)
		printf " | %9s %9s %6s %7s %7s %6s", "tcp rps", S[k] " rps", "ratio", "tcp p99", S[k] " p99", "ratio"
	printf "\n"
	for (r in rounds) nr++
	for (r = 1; r <= nr; r++)
		for (j = 1; j <= nk; j++) {
			key = K[j]
			split(key, tp, " ")
			printf "%-5s %-4s %-3s", r, tp[1], tp[2]
			for (k = 2; k <= ns; k++) {
				a = v[r, "tcp", tp[1], tp[2], "rps"]; b = v[r, S[k], tp[1], tp[2], "rps"]
				c = v[r, "tcp", tp[1], tp[2], "p99"]; d = v[r, S[k], tp[1], tp[2], "p99"]
				q = a > 0 && b > 0 ? sprintf("%.2f", b / a) : "-"
				w = c > 0 && d > 0 ? sprintf("%.2f", d / c) : "-"
				printf " | %9s %9s %6s %7s %7s %6s", a, b, q, c, d, w
				if (q != "-") R[S[k], key, "rps"] = R[S[k], key, "rps"] " " q
				if (w != "-") R[S[k], key, "p99"] = R[S[k], key, "p99"] " " w
			}
			printf "\n"
		}
	printf "\nmedian of the per-round ratios (range), %d rounds:\n", nr
	for (k = 2; k <= ns; k++)
		for (j = 1; j <= nk; j++) {
			key = K[j]
			split(key, tp, " ")
			printf "%-5s %-3s -P %-2s  req/s %s/tcp %5.2f (%s)   p99 %s/tcp %5.2f (%s)\n", S[k], tp[1], tp[2],
			       S[k], median(R[S[k], key, "rps"]), range(R[S[k], key, "rps"]),
			       S[k], median(R[S[k], key, "p99"]), range(R[S[k], key, "p99"])
		}
}' "$TMP/runs"

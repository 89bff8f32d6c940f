#!/usr/bin/env bash
# bench/sock_epoll_ir.sh - instructions (callgrind Ir) of the epoll path
# of an event loop over 50 pooled connections, per iteration of
# bench/sock_epoll_ir.c (ready1: one of 50 ready; idle: a whole sleep
# but the kernel's wait; ctl: EPOLL_CTL_DEL + ADD), counted inside
# epoll_wait and epoll_ctl only, as the difference of a 1000- and a
# 3000-iteration run (the connections' setup cancels out).
#
#   bench/sock_epoll_ir.sh [-L lib.so] [-c conns]   (tcp: -L tcp)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
LIB=$PWD/${BUILD:-build}/libcxlshim.so
C=50
while getopts L:c: o; do
	case $o in
	L) [ "$OPTARG" = tcp ] && LIB=tcp || LIB=$(realpath -m "$OPTARG") ;;
	c) C=$OPTARG ;;
	*) exit 2 ;;
	esac
done
[ "$LIB" = tcp ] || [ -f "$LIB" ] || { echo "sock_epoll_ir: no library $LIB"; exit 2; }
command -v valgrind >/dev/null || { echo "sock_epoll_ir: valgrind not installed"; exit 77; }
make -s "${BUILD:-build}/bench/sock_epoll_ir" || exit 2
POOL=/dev/shm/cxlshim-sockepollir-$$.pool
OUT=$(mktemp -d /tmp/sock_epoll_ir.XXXXXX)
trap 'rm -rf "$OUT" $POOL' EXIT
ir() { # MODE K: Ir inside epoll_wait/epoll_ctl
	local pre=(env -u LD_PRELOAD)
	[ "$LIB" = tcp ] || pre=(env LD_PRELOAD="$LIB" CXLSHIM_POOL_PATH=$POOL)
	rm -f $POOL
	"${pre[@]}" valgrind --tool=callgrind --callgrind-out-file="$OUT/cg" \
		--toggle-collect='epoll_wait' --toggle-collect='epoll_ctl' \
		"${BUILD:-build}/bench/sock_epoll_ir" -c "$C" -k "$2" "$1" >"$OUT/log" 2>&1 ||
		{ cat "$OUT/log" >&2; exit 1; }
	grep -q ", pool$" "$OUT/log" || [ "$LIB" = tcp ] || { echo "$1: not pooled" >&2; exit 1; }
	callgrind_annotate "$OUT/cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
echo "# Ir per iteration inside epoll_wait + epoll_ctl, $C connections, $(basename "$(dirname "$LIB")")/$(basename "$LIB")"
for m in ready1 idle ctl; do
	a=$(ir $m 1000) b=$(ir $m 3000)
	echo "$m $(((b - a) / 2000))"
done

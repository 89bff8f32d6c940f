#!/usr/bin/env bash
# rack.sh - a two-host rack on one machine: boots guests a and b (each as
# tests/qemu/guest.sh does) that share one memory file through ivshmem-plain
# as their CXL pool and are linked by a virtio-net wire; runs one shell
# command in each and exits 0 when both exit 0.
#
#   tests/qemu/rack.sh [OPTIONS] --a 'COMMAND' --b 'COMMAND'
#
# Each command runs under bash in the repository, as root, with:
#   RACK_NAME         a or b (also the guest's hostname)
#   RACK_SELF_IP      10.0.0.1 for a, 10.0.0.2 for b (eth0, /24)
#   RACK_PEER_IP      the other guest's address
#   RACK_DIR          a host folder both guests see read-write at this path
#                     (the place to hand files across, e.g. a unique id)
#   GUEST_BAR, CXLSHIM_POOL_PATH
#                     the pool's BAR: /sys/bus/pci/devices/0000:00:10.0/resource2
#
# Options:
#   --pool FILE        the pool: an existing file, blank or formatted (the
#                      guests' flock does not cross hosts: which shim
#                      formats a blank pool is decided in the pool itself,
#                      tests/ops/format_race.sh).  Default: a
#                      new blank file in /dev/shm of --pool-size, removed after
#   --pool-size SIZE   power of two, as ivshmem wants (default 256M)
#   --repo DIR, --mem SIZE, --smp N, --timeout S, --env NAME=VALUE, --debug
#                      as for guest.sh, for both guests (default --mem 1G)
#
#   --netns            no QEMU: a and b are process trees on this host in two
#                      network namespaces joined by a veth pair (same
#                      addresses); the pool file itself is GUEST_BAR and
#                      CXLSHIM_POOL_PATH.  Needs root (CAP_NET_ADMIN)
#
# The wire is two unix datagram sockets in RACK_DIR (QEMU's dgram netdev),
# or the veth pair: nothing is bound on the host's own network.  Output
# lines carry "[a] "/"[b] ".  Exit 77 (+ "SKIPPED: why") when the chosen
# kind of rack cannot run here.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CMD_A=
CMD_B=
POOL=
POOL_SIZE=256M
GUEST_OPTS=()
NETNS=0
REPO=$(cd "$HERE/../.." && pwd)
TIMEOUT=300
ENVS=()

usage() {
	sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--a) CMD_A=$2; shift 2 ;;
	--b) CMD_B=$2; shift 2 ;;
	--pool) POOL=$2; shift 2 ;;
	--pool-size) POOL_SIZE=$2; shift 2 ;;
	--repo) REPO=$(cd "$2" && pwd) || exit 2; GUEST_OPTS+=("$1" "$2"); shift 2 ;;
	--timeout) TIMEOUT=$2; GUEST_OPTS+=("$1" "$2"); shift 2 ;;
	--env) ENVS+=("$2"); GUEST_OPTS+=("$1" "$2"); shift 2 ;;
	--mem | --smp) GUEST_OPTS+=("$1" "$2"); shift 2 ;;
	--netns) NETNS=1; shift ;;
	--debug) GUEST_OPTS+=("$1"); shift ;;
	*) usage ;;
	esac
done
[ -n "$CMD_A" ] && [ -n "$CMD_B" ] || usage
if [ $NETNS = 0 ]; then
	"$HERE/guest.sh" --check >/dev/null || { "$HERE/guest.sh" --check; exit 77; }
elif ! command -v ip >/dev/null; then
	echo "SKIPPED: no ip (iproute2) for network namespaces"
	exit 77
fi

RACK=$(mktemp -d /tmp/cxlshim-rack-XXXXXX) || exit 125
OWN_POOL=
PIDS=()
NAMESPACES=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	[ -n "$OWN_POOL" ] && rm -f "$OWN_POOL"
	for p in "${NAMESPACES[@]}"; do
		ip netns del "$p" 2>/dev/null
	done
	rm -rf "$RACK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "$POOL" ]; then
	POOL=$(mktemp /dev/shm/cxlshim-rack-XXXXXX.pool) || exit 125
	OWN_POOL=$POOL
	fallocate -l "$POOL_SIZE" "$POOL" || exit 125
fi

# guest NAME SELF PEER PEERNAME COMMAND: one guest in the background, lines
# tagged
guest_qemu() {
	"$HERE/guest.sh" --name "$1" --mem 1G --numa none "${GUEST_OPTS[@]}" \
		--share "$RACK" --ivshmem "$POOL" --link "$RACK/$1.sock,$RACK/$4.sock" \
		--ip "$2/24" --env RACK_NAME="$1" --env RACK_SELF_IP="$2" \
		--env RACK_PEER_IP="$3" --env RACK_DIR="$RACK" \
		-- bash -c "$5" > >(sed -u "s/^/[$1] /") 2>&1 &
	PIDS+=($!)
}
# the same without QEMU: a process tree in the side's network namespace
guest_netns() {
	local ns=${NAMESPACES[$([ "$1" = a ] && echo 0 || echo 1)]} e
	local -a envs=(RACK_NAME="$1" RACK_SELF_IP="$2" RACK_PEER_IP="$3" RACK_DIR="$RACK"
		GUEST_BAR="$POOL" CXLSHIM_POOL_PATH="$POOL")
	for e in "${ENVS[@]}"; do
		envs+=("$e")
	done
	(cd "$REPO" && exec timeout -k 5 "$TIMEOUT" ip netns exec "$ns" env "${envs[@]}" \
		bash -c "$5") > >(sed -u "s/^/[$1] /") 2>&1 &
	PIDS+=($!)
}

# two namespaces and a veth pair between them: the wire of the netns rack
netns_up() {
	local tag=cxq$$ i name ip
	NAMESPACES=("$tag-a" "$tag-b")
	for i in 0 1; do
		if ! ip netns add "${NAMESPACES[$i]}" 2>"$RACK/netns.err"; then
			NAMESPACES=("${NAMESPACES[@]:0:$i}")
			echo "SKIPPED: cannot create network namespaces: $(head -n1 "$RACK/netns.err")"
			exit 77
		fi
	done
	ip link add "$tag-a" netns "${NAMESPACES[0]}" type veth \
		peer name "$tag-b" netns "${NAMESPACES[1]}" || exit 125
	for i in 0 1; do
		name=$tag-$([ $i = 0 ] && echo a || echo b)
		ip=10.0.0.$((i + 1))
		ip -n "${NAMESPACES[$i]}" link set lo up &&
			ip -n "${NAMESPACES[$i]}" addr add "$ip/24" dev "$name" &&
			ip -n "${NAMESPACES[$i]}" link set "$name" up || exit 125
	done
}

if [ $NETNS = 1 ]; then
	netns_up
	guest=guest_netns
else
	guest=guest_qemu
fi
$guest a 10.0.0.1 10.0.0.2 b "$CMD_A"
$guest b 10.0.0.2 10.0.0.1 a "$CMD_B"
wait "${PIDS[0]}"
rc_a=$?
wait "${PIDS[1]}"
rc_b=$?
PIDS=()
sleep 0.2 # the tagging seds flush their last lines
echo "rack.sh: a exited $rc_a, b exited $rc_b"
[ $rc_a = 0 ] && [ $rc_b = 0 ] && exit 0
[ $rc_a = 77 ] && [ $rc_b = 77 ] && exit 77
[ $rc_a != 0 ] && exit $rc_a
exit $rc_b

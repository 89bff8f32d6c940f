#!/bin/bash
# stage2.sh - PID 1 of the guest once the host's root is mounted (the host's
# own bash, read through 9p).  Sets up the network and finds the ivshmem
# BAR, runs the job in the repository, records its exit status in the run
# folder (guest.sh reads it there) and powers the guest off.
RUN=/run/cxlshim
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
stty -onlcr 2>/dev/null # plain \n on the serial console

say() { echo "guest ${GUEST_NAME:-}: $*"; }

finish() {
	echo "$1" >$RUN/status
	exec /bin/busybox poweroff -f # reboot(2) at once: PID 1 never returns
}

# GUEST_* settings and the job's environment, written by guest.sh
. $RUN/env
read -r up _ </proc/uptime
echo "$up" >$RUN/booted
hostname "${GUEST_NAME:-guest}"
ip link set lo up
if [ -n "${GUEST_IP:-}" ]; then
	if ! modprobe virtio_net || ! ip addr add "$GUEST_IP" dev eth0 ||
		! ip link set eth0 up; then
		say "network setup failed"
		finish 125
	fi
fi
# --movable: the CPU-less nodes' memory is legacy pmem (memmap=); make
# each region a devdax device and online it as system RAM, ZONE_MOVABLE by
# daxctl's default, as an administrator onlines a CXL expander.
if [ -n "${GUEST_MOVABLE:-}" ]; then
	for m in nd_e820 nd_pmem dax_pmem device_dax kmem; do
		modprobe $m >/dev/null 2>&1 # ndctl's modprobe hook: key messages
	done
	for ns in /sys/bus/nd/devices/namespace*.0; do
		ndctl create-namespace -f -e "${ns##*/}" --mode=devdax >/dev/null 2>&1 ||
			say "ndctl create-namespace ${ns##*/} failed"
	done
	daxctl reconfigure-device --mode=system-ram all >/dev/null 2>&1 ||
		say "daxctl reconfigure-device failed"
fi
# ivshmem-plain is PCI 1af4:1110; its BAR 2 is the shared memory.
# (builtins only: every program started costs a 9p lookup under TCG)
for d in /sys/bus/pci/devices/*; do
	read -r vendor <"$d/vendor"
	read -r device <"$d/device"
	if [ "$vendor" = 0x1af4 ] && [ "$device" = 0x1110 ]; then
		export GUEST_BAR=$d/resource2
	fi
done
cd "$GUEST_REPO" || finish 125
# a subshell: whatever the job does (exit, exec), PID 1 survives it
(eval "exec $(cat $RUN/cmd)")
finish $?

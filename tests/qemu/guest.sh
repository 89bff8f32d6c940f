#!/usr/bin/env bash
# guest.sh - boot one TCG guest of Debian's kernel and run COMMAND in it as
# root; exits with COMMAND's status.
#
#   tests/qemu/guest.sh [OPTIONS] -- COMMAND...
#   tests/qemu/guest.sh --check      can guests run here? (exit 0, or 77 + why)
#
# The guest sees the host's root file system read-only through virtio-9p
# (so the host's libraries and tools work unchanged), the repository
# read-write at the same absolute path (COMMAND runs there), and fresh
# tmpfs on /tmp, /dev/shm, /run, /var/tmp and /root.  The initramfs is made
# per run from busybox-static and the guest kernel's 9p modules.
#
# Options:
#   --repo DIR         repository shared read-write (default: this checkout)
#   --ro               the repository read-only, like the rest of the root
#   --numa SPEC|none   NUMA nodes, SIZE[:CPUS] each, comma separated; nodes
#                      without CPUs stand for CXL cards (default
#                      1G:0-1,512M,512M).  none: one node of --mem
#   --mem SIZE         memory with --numa none (default 1G)
#   --smp N            vCPUs (default: as many as SPEC names, else 2)
#   --movable          CPU-less nodes come up the way CXL expanders do
#                      under daxctl: their memory is a devdax device first,
#                      then onlined as system RAM in ZONE_MOVABLE (so a
#                      long-term pin migrates pages off them)
#   --mem-path DIR     back node N's memory with the file DIR/nodeN
#                      (share=on, left there for the caller to inspect)
#   --share DIR        another host folder shared read-write at the same path
#   --ivshmem FILE     FILE as an ivshmem-plain PCI device (00:10.0); its BAR
#                      is the job's $GUEST_BAR and $CXLSHIM_POOL_PATH
#                      (/sys/bus/pci/devices/0000:00:10.0/resource2)
#   --link LOCAL,PEER  virtio-net over unix datagram sockets LOCAL -> PEER
#   --ip ADDR/PREFIX   the guest's address on that link
#   --env NAME=VALUE   set in the job's environment (CXLSHIM_* and LAUNCH_*
#                      of the caller's environment are passed on anyway)
#   --name NAME        hostname of the guest (default guest)
#   --timeout S        kill the guest after S seconds, exit 124 (default 300)
#   --debug            kernel messages on the console, run folder kept
#
# Environment: QEMU (the emulator), GUEST_KERNEL (a /boot/vmlinuz-VERSION),
# GUEST_PVH=0 (boot the bzImage, not its decompressed ELF), GUEST_APPEND
# (more kernel command line), GUEST_CLOCK=tsc (the guest keeps time with
# the TSC at the host's stated frequency instead of the HPET: cheap clock
# reads, for benchmarks; the host must keep time with a known-frequency TSC).
#
# Exit status: COMMAND's, 124 on timeout, 125 when the guest did not boot or
# did not report a status, 77 when guests cannot run here (with the reason).
set -uo pipefail

# The host TSC's frequency in kHz, where the host itself keeps time with a
# constant TSC whose frequency the CPU states (then "cpu MHz" is that).
host_tsc_khz() {
	grep -q '^tsc$' /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null &&
		grep -m1 '^flags' /proc/cpuinfo | grep -q constant_tsc &&
		grep -m1 '^flags' /proc/cpuinfo | grep -q tsc_known_freq &&
		awk -F: '/^cpu MHz/ { printf "%d\n", $2 * 1000; exit }' /proc/cpuinfo
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATH=$PATH:/usr/sbin:/sbin # modprobe, for users whose PATH lacks them
QEMU=${QEMU:-qemu-system-x86_64}
REPO=$(cd "$HERE/../.." && pwd)
NUMA=1G:0-1,512M,512M
MEM=1G
SMP=
MEM_PATH=
SHARES=()
IVSHMEM=
LINK=
IP=
ENVS=()
NAME=guest
TIMEOUT=300
DEBUG=0
CHECK=0
RO=0
MOVABLE=0

usage() {
	sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

die() {
	echo "guest.sh: $*" >&2
	exit 125
}

# --- can guests run here? ---------------------------------------------------

# The newest installed Debian kernel that has its 9p modules next to it.
find_kernel() {
	local k v
	if [ -n "${GUEST_KERNEL:-}" ]; then
		echo "$GUEST_KERNEL"
		return
	fi
	for k in $(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -rV); do
		v=${k#/boot/vmlinuz-}
		if [ -e "/lib/modules/$v/kernel/fs/9p/9p.ko" ] ||
			[ -e "/lib/modules/$v/kernel/fs/9p/9p.ko.xz" ]; then
			echo "$k"
			return
		fi
	done
}

# Prints why guests cannot run here, nothing when they can.
why_not() {
	local k
	command -v "$QEMU" >/dev/null || { echo "$QEMU not installed (make deps)"; return; }
	k=$(find_kernel)
	[ -n "$k" ] || { echo "no Debian kernel with 9p modules under /boot (make deps)"; return; }
	[ -e "$k" ] || { echo "no kernel $k"; return; }
	[ -r "$k" ] || { echo "$k is not readable by $(id -un) (run as root)"; return; }
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 ||
		{ echo "no static /bin/busybox (make deps: busybox-static)"; return; }
	command -v cpio >/dev/null || { echo "cpio not installed (make deps)"; return; }
	command -v modprobe >/dev/null || { echo "modprobe not installed (make deps: kmod)"; return; }
}

# --- arguments --------------------------------------------------------------

while [ $# -gt 0 ]; do
	case $1 in
	--repo) REPO=$(cd "$2" && pwd) || die "no such folder: $2"; shift 2 ;;
	--numa) NUMA=$2; shift 2 ;;
	--mem) MEM=$2; shift 2 ;;
	--smp) SMP=$2; shift 2 ;;
	--mem-path) MEM_PATH=$(cd "$2" && pwd) || die "no such folder: $2"; shift 2 ;;
	--share) SHARES+=("$(cd "$2" && pwd)") || die "no such folder: $2"; shift 2 ;;
	--ivshmem) IVSHMEM=$2; shift 2 ;;
	--link) LINK=$2; shift 2 ;;
	--ip) IP=$2; shift 2 ;;
	--env) ENVS+=("$2"); shift 2 ;;
	--name) NAME=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--ro) RO=1; shift ;;
	--movable) MOVABLE=1; shift ;;
	--debug) DEBUG=1; shift ;;
	--check) CHECK=1; shift ;;
	--) shift; break ;;
	*) usage ;;
	esac
done

reason=$(why_not)
if [ -n "$reason" ]; then
	echo "SKIPPED: $reason"
	exit 77
fi
KERNEL=$(find_kernel)
KVER=${KERNEL#/boot/vmlinuz-}
if [ $MOVABLE = 1 ] && ! { command -v daxctl && command -v ndctl; } >/dev/null; then
	echo "SKIPPED: --movable needs ndctl and daxctl (make deps)"
	exit 77
fi
if [ $CHECK = 1 ]; then
	echo "guests can run: $($QEMU --version | head -n1), kernel $KVER, TCG"
	exit 0
fi
[ $# -gt 0 ] || usage

# --- the machine ------------------------------------------------------------

# SIZE (K/M/G suffix, or MiB) in MiB
mib() {
	local n=${1%[KkMmGg]} u=${1: -1}
	[[ $n =~ ^[0-9]+$ ]] || die "bad size: $1"
	case $u in
	G | g) echo $((n * 1024)) ;;
	K | k) echo $((n / 1024)) ;;
	*) echo "$n" ;;
	esac
}

# -numa options for SPEC; nodes with CPUs stand for DRAM, nodes without for
# CXL cards: 10 local, 20 DRAM<->CXL and DRAM<->DRAM, 30 CXL<->CXL (two hops).
QARGS=()
TOTAL=0
numa_args() {
	local -a nodes
	local i j size cpus maxcpu=-1 d
	IFS=, read -r -a nodes <<<"$NUMA"
	for i in "${!nodes[@]}"; do
		size=$(mib "${nodes[$i]%%:*}")
		cpus=
		[[ ${nodes[$i]} == *:* ]] && cpus=${nodes[$i]#*:}
		if [ -n "$MEM_PATH" ]; then
			QARGS+=(-object "memory-backend-file,id=m$i,size=${size}M,mem-path=$MEM_PATH/node$i,share=on")
		else
			QARGS+=(-object "memory-backend-ram,id=m$i,size=${size}M")
		fi
		QARGS+=(-numa "node,nodeid=$i,memdev=m$i${cpus:+,cpus=$cpus}")
		# --movable: the whole node as legacy pmem, for ndctl and daxctl
		# (the pc machine puts RAM below 4 GiB in node order up to 3 GiB)
		[ $MOVABLE = 1 ] && [ -z "$cpus" ] && MEMMAP+=" memmap=${size}M!$((TOTAL))M"
		[ -n "$cpus" ] && [ "${cpus##*-}" -gt $maxcpu ] && maxcpu=${cpus##*-}
		has_cpu[$i]=${cpus:+1}
		TOTAL=$((TOTAL + size))
	done
	[ $MOVABLE = 0 ] || [ $TOTAL -le 3072 ] || die "--movable: at most 3G of memory in all"
	for i in "${!nodes[@]}"; do
		for ((j = i + 1; j < ${#nodes[@]}; j++)); do
			d=20
			[ -z "${has_cpu[$i]}" ] && [ -z "${has_cpu[$j]}" ] && d=30
			QARGS+=(-numa "dist,src=$i,dst=$j,val=$d")
		done
	done
	[ $maxcpu -ge 0 ] || die "--numa $NUMA: no node has CPUs"
	SMP=${SMP:-$((maxcpu + 1))}
}

declare -a has_cpu
MEMMAP=
if [ "$NUMA" = none ]; then
	TOTAL=$(mib "$MEM")
	SMP=${SMP:-2}
else
	numa_args
fi

RUN=$(mktemp -d /tmp/cxlshim-qemu-XXXXXX) || die "mktemp failed"
QPID=
cleanup() {
	if [ -n "$QPID" ]; then
		kill "$QPID" 2>/dev/null
		wait "$QPID" 2>/dev/null
	fi
	if [ $DEBUG = 1 ]; then
		echo "guest.sh: run folder kept: $RUN" >&2
	else
		rm -rf "$RUN"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# initramfs: busybox, the 9p modules in load order, init.sh
make_initrd() {
	local d=$RUN/initrd m
	mkdir -p "$d"/{bin,dev,proc,sys,newroot} || return 1
	cp /bin/busybox "$d/bin/busybox" && cp "$HERE/init.sh" "$d/init" || return 1
	chmod +x "$d/init"
	: >"$d/modules"
	for m in $(modprobe -S "$KVER" -a --show-depends 9p 9pnet_virtio virtio_pci |
		awk '$1 == "insmod" && !seen[$2]++ { print $2 }'); do
		mkdir -p "$d$(dirname "$m")" && cp "$m" "$d$m" || return 1
		echo "$m" >>"$d/modules"
	done
	(cd "$d" && find . | cpio -o -H newc --quiet) >"$RUN/initrd.cpio"
}
make_initrd || die "cannot build the initramfs in $RUN"

# The kernel's own decompressor takes 3.5 s under TCG; xz on the host takes
# 0.8 s once: boot the uncompressed ELF through its PVH entry point instead.
vmlinux() {
	local cache=/tmp/cxlshim-qemu-cache-$(id -u) off tmp
	local out=$cache/vmlinux-$KVER-$(stat -c %Y "$KERNEL")
	if [ ! -s "$out" ]; then
		mkdir -p "$cache" || return 1
		off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$KERNEL" | head -n1 | cut -d: -f1)
		[ -n "$off" ] || return 1
		tmp=$(mktemp "$out.XXXXXX") || return 1
		# xz stops at the end of the stream: tail's SIGPIPE is no error
		if ! { tail -c +$((off + 1)) "$KERNEL" || :; } |
			xz -dc --single-stream >"$tmp" 2>/dev/null; then
			rm -f "$tmp"
			return 1
		fi
		mv "$tmp" "$out"
	fi
	echo "$out"
}
BOOT=$KERNEL
[ "${GUEST_PVH:-1}" = 0 ] || BOOT=$(vmlinux) || BOOT=$KERNEL

# what stage2.sh needs: the job, its environment, the shares
BAR=/sys/bus/pci/devices/0000:00:10.0/resource2
printf '%q ' "$@" >"$RUN/cmd"
cp "$HERE/stage2.sh" "$RUN/stage2.sh"
{
	printf 'export GUEST_REPO=%q GUEST_NAME=%q GUEST_IP=%q GUEST_MOVABLE=%q\n' "$REPO" \
		"$NAME" "$IP" "${MEMMAP:+1}"
	while IFS= read -r v; do
		printf 'export %s=%q\n' "$v" "${!v}"
	done < <(compgen -v | grep -E '^(CXLSHIM|LAUNCH)_')
	# the shim's pool is the BAR, whatever the caller's environment said
	[ -n "$IVSHMEM" ] && printf 'export CXLSHIM_POOL_PATH=%q\n' "$BAR"
	for e in "${ENVS[@]}"; do
		[[ $e == *=* ]] || die "--env $e: want NAME=VALUE"
		printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
	done
} >"$RUN/env"

# 9p exports: the host's root read-only, then read-write folders
P9=security_model=none,multidevs=remap
QARGS+=(-fsdev "local,id=root,path=/,$P9,readonly=on"
	-device "virtio-9p-pci,fsdev=root,mount_tag=hostroot"
	-fsdev "local,id=run,path=$RUN,$P9"
	-device "virtio-9p-pci,fsdev=run,mount_tag=run")
: >"$RUN/mounts"
i=0
[ $RO = 1 ] || SHARES=("$REPO" "${SHARES[@]}")
for dir in "${SHARES[@]}"; do
	QARGS+=(-fsdev "local,id=s$i,path=$dir,$P9" -device "virtio-9p-pci,fsdev=s$i,mount_tag=s$i")
	echo "s$i $dir" >>"$RUN/mounts"
	i=$((i + 1))
done

if [ -n "$IVSHMEM" ]; then
	[ -f "$IVSHMEM" ] || die "--ivshmem $IVSHMEM: no such file"
	QARGS+=(-object "memory-backend-file,id=pool,size=$(stat -c %s "$IVSHMEM"),mem-path=$IVSHMEM,share=on"
		-device ivshmem-plain,memdev=pool,addr=10.0)
fi
if [ -n "$LINK" ]; then
	QARGS+=(-netdev "dgram,id=n0,local.type=unix,local.path=${LINK%%,*},remote.type=unix,remote.path=${LINK#*,}"
		-device "virtio-net-pci,netdev=n0,mac=52:54:00:$(printf '%02x:%02x:%02x' $((RANDOM % 256)) $((RANDOM % 256)) $((RANDOM % 256)))")
fi

# The guest clock: HPET, not the TSC.  TCG's TSC is the host's, and a
# guest calibrating it while the host is busy got it 30 times too fast.
# But every HPET read is an emulated MMIO exit (tens of microseconds), so
# benchmarks may ask for GUEST_CLOCK=tsc: the TSC at the host's frequency,
# given (tsc_early_khz), not calibrated; only where the host's own clock
# is a TSC of known constant frequency.  No lockup detector either: a
# vCPU thread the host does not run for a while is no bug in the guest.
CLOCK="clocksource=hpet tsc=unstable"
if [ "${GUEST_CLOCK:-hpet}" = tsc ]; then
	khz=$(host_tsc_khz) || die "GUEST_CLOCK=tsc: the host's clock is no TSC of known frequency"
	CLOCK="clocksource=tsc tsc=reliable tsc_early_khz=$khz"
fi
CMDLINE="console=ttyS0 panic=-1 mitigations=off $CLOCK nowatchdog"
[ $DEBUG = 1 ] || CMDLINE+=" quiet loglevel=1"
CMDLINE+="$MEMMAP ${GUEST_APPEND:-}"

start=$(date +%s%N)
# KVM hangs on these machines: TCG, multi-threaded.
timeout -k 5 "$TIMEOUT" "$QEMU" -name "$NAME" -machine pc -bios qboot.rom -accel tcg,thread=multi -cpu max \
	-smp "$SMP" -m "${TOTAL}M" -nodefaults -no-user-config -display none -no-reboot \
	-chardev stdio,id=con,signal=off -serial chardev:con \
	-kernel "$BOOT" -initrd "$RUN/initrd.cpio" -append "$CMDLINE" \
	"${QARGS[@]}" </dev/null > >(if [ $DEBUG = 1 ]; then cat; else
		# the one kernel line left under loglevel=1 (KERN_EMERG)
		sed -u '/^\[ *[0-9.]*\] reboot: Power down/d'; fi) &
QPID=$!
wait $QPID
qrc=$?
QPID=
took=$((($(date +%s%N) - start) / 1000000))
if [ $qrc = 124 ]; then
	echo "guest.sh: $NAME: timeout after ${TIMEOUT}s, guest killed" >&2
	exit 124
fi
if [ ! -s "$RUN/status" ]; then
	echo "guest.sh: $NAME: no exit status from the guest (qemu exit $qrc; --debug shows the boot)" >&2
	exit 125
fi
rc=$(cat "$RUN/status")
echo "guest.sh: $NAME: job started $(cat "$RUN/booted" 2>/dev/null)s after boot (guest clock)," \
	"$((took / 1000)).$((took % 1000 / 100))s in all, status $rc" >&2
exit "$rc"

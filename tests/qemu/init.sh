#!/bin/busybox sh
# init.sh - /init of the guest's initramfs (busybox, static).
#
# Loads the 9p modules of the guest kernel (listed in /modules, in
# dependency order, by guest.sh), mounts the host's root read-only at
# /newroot, gives it writable /tmp, /dev/shm, /run, /var/tmp and /root,
# mounts this run's folder and the shares it lists, then hands over to
# stage2.sh inside that root.  Any failure powers the guest off at once:
# guest.sh then reports a boot failure instead of waiting for its timeout.
/bin/busybox --install -s /bin
export PATH=/bin

die() {
	echo "guest init: $*"
	poweroff -f
}

mount -t proc proc /proc || die "cannot mount /proc"
mount -t sysfs sys /sys || die "cannot mount /sys"
mount -t devtmpfs dev /dev || die "cannot mount /dev"
for m in $(cat /modules); do
	insmod "$m" || die "insmod $m failed"
done

# msize: bigger 9p messages, fewer round trips through the emulated virtio.
P9="trans=virtio,version=9p2000.L,msize=262144"
mount -t 9p -o "$P9,ro,cache=loose" hostroot /newroot ||
	die "cannot mount the host's root (9p tag hostroot)"
for d in dev proc sys; do
	mount --move /$d /newroot/$d || die "cannot move /$d"
done
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t devpts devpts /newroot/dev/pts
for d in tmp dev/shm run var/tmp root; do
	mount -t tmpfs -o mode=1777 tmpfs /newroot/$d || die "cannot mount tmpfs on /$d"
done
mkdir -p /newroot/run/cxlshim
mount -t 9p -o "$P9,cache=mmap" run /newroot/run/cxlshim ||
	die "cannot mount this run's folder (9p tag run)"
# "TAG PATH" lines: folders of the host shared read-write at the same path.
while read -r tag path; do
	[ -n "$tag" ] || continue
	mkdir -p "/newroot$path" 2>/dev/null # under /tmp, say
	mount -t 9p -o "$P9,cache=mmap" "$tag" "/newroot$path" ||
		die "cannot mount $path (9p tag $tag)"
done </newroot/run/cxlshim/mounts

exec switch_root /newroot /bin/bash /run/cxlshim/stage2.sh

#!/usr/bin/env bash
# clock_selftest.sh - GUEST_CLOCK=tsc keeps true time: boots a guest on the
# TSC at the host's stated frequency (guest.sh), checks that it runs on
# that clock, and that over a 5 s sleep the guest's clock and the host's
# agree (within what the stamps' trips to the host take; a guest that
# calibrated its TSC itself under load once ran 30 times fast).  Exit 77 when guests cannot run here or the host's
# clock is no TSC of known frequency.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
if ! grep -q '^tsc$' /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null ||
	! grep -m1 '^flags' /proc/cpuinfo | grep -q tsc_known_freq; then
	echo "SKIPPED: the host's clock is no TSC of known frequency"
	exit 77
fi
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
# the host's clock around the guest's sleep: the guest stamps the shared
# repository's file system, whose times are the host's
STAMP=build/.clock_selftest.$$
GUEST_CLOCK=tsc tests/qemu/guest.sh --numa none --timeout 120 -- bash -c "
	cat /sys/devices/system/clocksource/clocksource0/current_clocksource
	touch $STAMP.a; a=\$(date +%s%N); sleep 5; b=\$(date +%s%N); touch $STAMP.b
	echo guest_ms \$(((b - a) / 1000000))" >"$OUT" 2>&1
rc=$?
cat "$OUT"
[ $rc = 77 ] && exit 77
a=$(stat -c %.3Y "$STAMP.a" 2>/dev/null) b=$(stat -c %.3Y "$STAMP.b" 2>/dev/null)
rm -f "$STAMP.a" "$STAMP.b"
guest_ms=$(awk '/^guest_ms/ { print $2 }' "$OUT")
[ $rc = 0 ] && [ -n "$a" ] && [ -n "$b" ] && [ -n "$guest_ms" ] ||
	{ echo "FAIL: the guest did not report (status $rc)"; exit 1; }
grep -qx tsc "$OUT" || { echo "FAIL: the guest's clocksource is not the TSC"; exit 1; }
host_ms=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%d", (b - a) * 1000 }')
echo "sleep 5: guest clock $guest_ms ms, host clock $host_ms ms"
# the guest's interval lies inside the host's: it can only be shorter, by
# the two stamps' trips through 9p (which a loaded host can stretch)
awk -v g="$guest_ms" -v h="$host_ms" 'BEGIN { exit !(h > 0 && g >= 0.6 * h && g <= 1.1 * h) }' ||
	{ echo "FAIL: the guest's clock and the host's disagree"; exit 1; }
echo "guest clock on the TSC: true time"

#!/usr/bin/env bash
# format_race_guest.sh - one host's half of format_race.sh (RACK_* from
# tests/qemu/rack.sh).  ROUNDS times: both hosts meet at a barrier in
# RACK_DIR, open the blank pool at once (flush pool, no flock: only the
# in-pool claim decides), and publish what they got; each then checks
# that exactly one of the two formatted and both see the same uuid.  Host
# a blanks the pool again between rounds.
set -u
BUILD=${BUILD:-build}
C=$BUILD/tests/claim_check
me=$RACK_NAME
peer=$([ "$me" = a ] && echo b || echo a)
D=$RACK_DIR/format-race-$RACE_NONCE
export CXLSHIM_POOL_COHERENCE=flush CXLSHIM_POOL_FLOCK=0 CXLSHIM_DEBUG=NONE
# both read the blank claim before either writes one, whatever the skew
# of the barrier between two kernels
export CXLSHIM_TEST_CLAIM_DELAY_US=${RACE_DELAY_US:-300000}
mkdir -p "$D"
# meet NAME: waits until the other host reached NAME too (60 s at most)
meet() {
	touch "$D/$1-$me"
	for _ in $(seq 6000); do
		[ -e "$D/$1-$peer" ] && return 0
		sleep 0.01
	done
	echo "FAIL: host $peer never reached $1"
	exit 1
}
bad=0
for r in $(seq "${RACE_ROUNDS:-3}"); do
	meet start-$r
	"$C" open >"$D/res-$r-$me.tmp" 2>&1 || { cat "$D/res-$r-$me.tmp"; bad=1; }
	mv "$D/res-$r-$me.tmp" "$D/res-$r-$me"
	meet done-$r
	cat "$D/res-$r-a" "$D/res-$r-b" | sed "s/^/round $r: /"
	n=$(cat "$D/res-$r-a" "$D/res-$r-b" | grep -c '^formatted 1 ')
	u=$(cat "$D/res-$r-a" "$D/res-$r-b" | sed -n 's/^formatted [01] uuid //p' | sort -u | wc -l)
	if [ "$n" != 1 ] || [ "$u" != 1 ]; then
		echo "FAIL round $r: $n hosts formatted (want 1), $u distinct uuids (want 1)"
		bad=1
	fi
	meet checked-$r
	[ "$me" = a ] && "$C" blank
	meet blank-$r
done
[ $bad = 0 ] && echo "format race: ok on host $me"
exit $bad

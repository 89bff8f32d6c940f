#!/usr/bin/env bash
# format_race.sh - two hosts (QEMU guests sharing one ivshmem BAR as the
# pool, each with its own kernel, so no flock between them) open one blank
# pool at the same instant, ROUNDS times: the in-pool claim must let
# exactly one format it and the other attach to that format
# (format_race_guest.sh).  Where guests cannot run, the two halves run in
# two network namespaces of this host instead (flock is off either way);
# exit 77 when neither can.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
NONCE=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
race() {
	tests/qemu/rack.sh "$@" --env BUILD="$BUILD" --env RACE_NONCE="$NONCE" \
		--env RACE_ROUNDS="${RACE_ROUNDS:-4}" \
		--a tests/ops/format_race_guest.sh --b tests/ops/format_race_guest.sh
}
race
rc=$?
if [ $rc = 77 ]; then
	echo "(QEMU guests cannot run here: two network namespaces of this host instead)"
	race --netns
	rc=$?
fi
exit $rc

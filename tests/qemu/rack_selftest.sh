#!/usr/bin/env bash
# rack_selftest.sh - the two-host rack works: formats a pool file on the
# host (once, up front, as an administrator would format a shared CXL
# device), boots guests a and b on it with rack.sh and runs rack_guest.sh in
# both.  Exit 0 when both halves pass, 77 when guests cannot run here.
#
#   tests/qemu/rack_selftest.sh [--netns]
# --netns: the same halves in two network namespaces of this host instead
# of two guests (rack.sh --netns), where QEMU cannot run.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}

POOL=$(mktemp /dev/shm/cxlshim-qemu-rack-XXXXXX.pool) || exit 1
trap 'rm -f "$POOL"' EXIT
fallocate -l 256M "$POOL" || exit 1
UUID=$("$BUILD/tests/qemu/rack_check" format "$POOL") || exit 1
NONCE=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
echo "pool $POOL formatted on the host, uuid $UUID"
tests/qemu/rack.sh "$@" --pool "$POOL" --env RACK_UUID="$UUID" --env RACK_NONCE="$NONCE" \
	--env BUILD="$BUILD" --a tests/qemu/rack_guest.sh --b tests/qemu/rack_guest.sh

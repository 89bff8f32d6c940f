#!/usr/bin/env bash
# security.sh - the pool file is owner-only whatever the umask, group-shared
# only when the policy says 0660, and a second user can neither read it nor
# run a job on it, nor plant a pool file of their own for us to use.
# Second users are made with setpriv (no account needed), so this needs root.
set -euo pipefail
B=${BUILD:-build}
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "SKIP: needs root and setpriv to act as a second user"
	exit 77
fi
U1=60001 U2=60003 G=60002 # users and a group that exist nowhere else
as() { local u=$1; shift; setpriv --reuid=$u --regid=$u --clear-groups -- "$@"; }
as_member() { local u=$1; shift; setpriv --reuid=$u --regid=$u --groups=$G -- "$@"; }

# a copy of the programs that the other users may execute
dir=$(mktemp -d /tmp/cxlshim-ops-sec.XXXXXX)
P=/dev/shm/cxlshim-ops-sec-$$
trap 'rm -rf "$dir" $P*' EXIT
chmod 755 "$dir"
mkdir "$dir/emu"
cp "$B/cxlshim" "$B/libcxlshim.so" "$B/tests/ops_job" "$dir/"
cp -a "$B"/emu/*.so* "$dir/emu/"
chmod -R a+rX "$dir"
CX=$dir/cxlshim

echo "== owner-only by default, whatever the umask"
(umask 000 && $CX pool create -p $P.a -s 128M >/dev/null)
[ "$(stat -c %a $P.a)" = 600 ] || fail "umask 000: mode $(stat -c %a $P.a)"
(umask 077 && $CX pool create -p $P.g -s 128M -m 0660 >/dev/null)
[ "$(stat -c %a $P.g)" = 660 ] || fail "umask 077, pool.mode 0660: mode $(stat -c %a $P.g)"
chmod 604 $P.a
$CX pool clean -p $P.a >/dev/null
[ "$(stat -c %a $P.a)" = 600 ] || fail "a pool file open to others is not tightened on open"
$CX policy check /dev/null >/dev/null
CXLSHIM_POOL_MODE=0666 $CX policy check /dev/null >/dev/null 2>&1 && fail "pool.mode 0666 accepted"

echo "== a second user can neither read nor use the pool"
as $U1 cat $P.a >/dev/null 2>&1 && fail "uid $U1 read the pool"
as $U1 $CX pool status -p $P.a >"$dir/out" 2>&1 && fail "uid $U1 got the pool status"
grep -q "Permission denied" "$dir/out" || fail "status: $(cat "$dir/out")"
rc=0
as $U1 env CXLSHIM_POOL_PATH=$P.a LD_LIBRARY_PATH="$dir/emu" LD_PRELOAD="$dir/libcxlshim.so" \
	CXLSHIM_NCCL_FALLBACK=fail "$dir/ops_job" traffic 2 1 >"$dir/out" 2>&1 || rc=$?
[ $rc != 0 ] || fail "uid $U1 ran a job on the pool"
grep -q "pool $P.a: open: Permission denied" "$dir/out" || fail "job: $(tail -3 "$dir/out")"
$CX pool status -p $P.a | grep -q "(0 in use, 16 free)" || fail "the pool changed"

echo "== a pool file planted by another user is refused"
as $U1 sh -c "umask 000; : > $P.planted"
[ "$(stat -c %u $P.planted)" = $U1 ] || fail "could not plant"
$CX pool create -p $P.planted -s 128M >"$dir/out" 2>&1 && fail "used a planted pool file"
grep -q "belongs to uid $U1 and pool.mode 0600 shares with nobody: refused" "$dir/out" ||
	fail "planted: $(cat "$dir/out")"
CXLSHIM_POOL_MODE=0660 $CX pool create -p $P.planted -s 128M >"$dir/out" 2>&1 &&
	fail "used a planted world-writable pool file"

echo "== group sharing: members of the file's group may run jobs on it"
chgrp $G $P.g
as_member $U1 env CXLSHIM_POOL_PATH=$P.g CXLSHIM_POOL_MODE=0660 LD_LIBRARY_PATH="$dir/emu" \
	LD_PRELOAD="$dir/libcxlshim.so" CXLSHIM_NCCL_FALLBACK=fail "$dir/ops_job" traffic 2 2 ||
	fail "a member of group $G could not run a job on a 0660 pool"
rc=0
as $U2 env CXLSHIM_POOL_PATH=$P.g CXLSHIM_POOL_MODE=0660 LD_LIBRARY_PATH="$dir/emu" \
	LD_PRELOAD="$dir/libcxlshim.so" CXLSHIM_NCCL_FALLBACK=fail "$dir/ops_job" traffic 2 1 \
	>"$dir/out" 2>&1 || rc=$?
[ $rc != 0 ] && grep -q "Permission denied" "$dir/out" || fail "a non-member used the pool"
echo "security: ok"

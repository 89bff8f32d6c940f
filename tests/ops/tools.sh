#!/usr/bin/env bash
# tools.sh - the `cxlshim` command's contract: every subcommand refuses bad
# arguments with exit 2 and missing or foreign files with exit 1 (never a
# crash), `policy check` reports file:line: key, `run` sets the environment
# alone (also under mpirun), and `pool status` reads a pool read-only.
set -euo pipefail
B=${BUILD:-build}
CX=$PWD/$B/cxlshim
dir=$(mktemp -d /tmp/cxlshim-ops-tools.XXXXXX)
P=/dev/shm/cxlshim-ops-tools-$$.pool
trap 'rm -rf "$dir" $P' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# only what each check sets decides (run.sh exports pool settings)
unset $(env | sed -n 's/^\(CXLSHIM_[A-Z_]*\)=.*/\1/p')
# expect STATUS CMD...: exit status STATUS, and no signal
expect() {
	local want=$1 rc=0
	shift
	"$@" >"$dir/out" 2>&1 || rc=$?
	[ $rc = "$want" ] || { cat "$dir/out"; fail "'$*': exit $rc, want $want"; }
}

echo "== bad arguments"
expect 2 $CX
expect 2 $CX frobnicate
expect 0 $CX --help
for sub in run pool policy trace doctor topo; do
	expect 0 $CX $sub --help
done
expect 2 $CX run
expect 2 $CX run --bogus -- true
expect 2 $CX pool
expect 2 $CX pool explode
expect 2 $CX pool status extra-arg
expect 2 $CX policy
expect 2 $CX policy lint x
expect 2 $CX trace
expect 2 $CX doctor extra
expect 2 $CX topo extra
expect 0 $CX topo
grep -q '^memory nodes:' "$dir/out" && grep -q '^pool: ' "$dir/out" ||
	{ cat "$dir/out"; fail "topo prints the nodes and the pool"; }
expect 1 $CX pool status -p /nonexistent/pool
expect 1 $CX doctor -p /nonexistent/pool
expect 1 $CX pool clean -p /nonexistent/pool
expect 1 $CX trace /nonexistent.trace
head -c 100000 /dev/urandom >"$dir/junk"
expect 1 $CX pool status -p "$dir/junk"
grep -q "not a cxlshim pool" "$dir/out" || fail "junk pool: $(cat "$dir/out")"
expect 1 $CX doctor -p "$dir/junk"
expect 1 $CX trace "$dir/junk"
expect 1 $CX pool status -p /dev/null
expect 1 $CX pool create -p /nonexistent/dir/pool -s 128M
expect 2 $CX pool create -p $P -s 1K
grep -q "bad option value (.*-s is CXLSHIM_POOL_SIZE" "$dir/out" || fail "-s 1K: $(cat "$dir/out")"
expect 2 $CX pool status -p $P -s 1G
expect 2 $CX pool clean -p $P -m 0660
expect 2 $CX pool create -p $P --json
[ ! -e $P ] || fail "a failed create left $P behind"

echo "== policy check"
printf '[pool]\nsize = 2G\n[nccl]\ncollectives = allgather, broadcast\n' >"$dir/good.conf"
expect 0 env CXLSHIM_CCCL_CHUNKS=4 $CX policy check "$dir/good.conf"
grep -q "^size = 2147483648" "$dir/out" && grep -q "^collectives = allgather,broadcast" "$dir/out" &&
	grep -q "^chunks = 4" "$dir/out" && grep -q "environment: CXLSHIM_CCCL_CHUNKS=4" "$dir/out" ||
	fail "effective policy: $(cat "$dir/out")"
printf '[pool]\nsize = 2G\n\n[cccl]\nchunkz = 3\n' >"$dir/bad.conf"
expect 1 $CX policy check "$dir/bad.conf"
grep -q "bad.conf:5: cccl.chunkz: unknown key" "$dir/out" || fail "bad key: $(cat "$dir/out")"
expect 1 env CXLSHIM_TIMEOUT_OP_MS=soon $CX policy check "$dir/good.conf"
grep -q "CXLSHIM_TIMEOUT_OP_MS: bad value" "$dir/out" || fail "bad env: $(cat "$dir/out")"
expect 1 $CX policy check /nonexistent.conf
# a directory opens but does not read: not an empty policy
expect 1 $CX policy check "$dir"
grep -q "cxlshim: $dir: Is a directory" "$dir/out" || fail "directory: $(cat "$dir/out")"
# a line is read whole or refused: libinih cut it at 199 characters
printf '[rule.a]\nplace = dram\n; %0300d place = cxl\n' 0 >"$dir/long.conf"
expect 0 $CX policy check "$dir/long.conf"
grep -q "^place = dram" "$dir/out" || fail "long comment: $(cat "$dir/out")"
printf '[pool]\n;%01100d\n' 0 >"$dir/long.conf"
expect 1 $CX policy check "$dir/long.conf"
grep -q "long.conf:2: line longer than 1023 characters$" "$dir/out" ||
	fail "long line: $(cat "$dir/out")"
printf '[rule.a]\nplace = cxl\n[rule.a]\nsize = 4K\n' >"$dir/dup.conf"
expect 1 $CX policy check "$dir/dup.conf"
grep -q "dup.conf:3: section \[rule.a\] repeated (first at line 1)$" "$dir/out" ||
	fail "repeated section: $(cat "$dir/out")"

echo "== run sets the environment and execs"
expect 0 $CX run -c "$dir/good.conf" -d INFO -- sh -c 'echo "$LD_PRELOAD|$CXLSHIM_CONF|$CXLSHIM_DEBUG"'
grep -q "^$PWD/$B/libcxlshim.so|$dir/good.conf|INFO$" "$dir/out" || fail "run env: $(cat "$dir/out")"
expect 0 env LD_PRELOAD=libfoo.so $CX run -- sh -c 'echo "$LD_PRELOAD"'
grep -q "^$PWD/$B/libcxlshim.so:libfoo.so$" "$dir/out" || fail "preload list: $(cat "$dir/out")"
expect 1 $CX run -c "$dir/bad.conf" -- true
expect 127 $CX run -- /nonexistent/program
expect 1 env CXLSHIM_LIB=/nonexistent.so $CX run -- true
expect 0 $CX run -n -e -t "$dir/tr" -s
grep -q "^LD_LIBRARY_PATH=$PWD/$B/emu" "$dir/out" && grep -q "^CXLSHIM_TRACE_LEVEL=stages" "$dir/out" &&
	grep -q "^CXLSHIM_TRACE_FILE=$dir/tr/%h-%p.trace" "$dir/out" || fail "dry run: $(cat "$dir/out")"
if command -v mpirun.openmpi >/dev/null; then
	expect 0 mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 \
		$CX run -c "$dir/good.conf" -- sh -c 'echo "rank $OMPI_COMM_WORLD_RANK $LD_PRELOAD"'
	[ "$(grep -c "^rank [01] $PWD/$B/libcxlshim.so$" "$dir/out")" = 2 ] ||
		fail "under mpirun: $(cat "$dir/out")"
else
	echo "(mpirun.openmpi not installed: launcher check skipped)"
fi

echo "== pool create, status, clean"
expect 0 $CX pool create -p $P -s 128M -d 2 --max-comms 4 --max-ranks 8
expect 1 $CX pool create -p $P -s 128M
expect 0 $CX pool status -p $P -v
grep -q "2 devices .* 4 communicator slots (0 in use, 4 free), up to 8 ranks" "$dir/out" ||
	fail "status: $(cat "$dir/out")"
expect 0 $CX pool status -p $P --json
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); \
	sys.exit(0 if s['comms'] == [] and s['comm_slots'] == 4 and s['max_ranks'] == 8 and \
		s['sockets']['in_use'] == 0 and s['version'] >= 5 else 1)" "$dir/out" ||
	fail "status --json: $(cat "$dir/out")"
expect 0 $CX pool clean -p $P
grep -q "reclaimed 0 " "$dir/out" || fail "clean: $(cat "$dir/out")"
expect 0 $CX doctor -p $P

echo "== a pool of another release: refused with the fix, replaced when unused"
ver=$($CX pool status -p $P --json | python3 -c "import json,sys; print(json.load(sys.stdin)['version'])")
# the superblock: magic (8 bytes), then the format version (4, little-endian)
python3 -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.seek(8); f.write(struct.pack('<I', int(sys.argv[2]) - 1))" \
	$P "$ver"
expect 1 $CX pool status -p $P
grep -q "pool format version $((ver - 1)), this cxlshim uses version $ver .*pool create --replace" \
	"$dir/out" || fail "old version: $(cat "$dir/out")"
CXLSHIM_POOL_PATH=$P CXLSHIM_DEBUG=WARN LD_PRELOAD=$PWD/$B/libcxlshim.so \
	LD_LIBRARY_PATH=$PWD/$B/emu $B/bench/coll_perf -N 1 -b 4K -e 4K >"$dir/out" 2>&1 || true
grep -q "WARN pool $P: pool format version $((ver - 1)), this cxlshim uses version $ver" \
	"$dir/out" || fail "a job's warning: $(cat "$dir/out")"
expect 1 $CX pool create -p $P
# held open, then only mapped (descriptor closed): not replaced
(exec 9<$P; sleep 30) &
holder=$!
expect 1 $CX pool create -p $P --replace
grep -q "in use by pid .*$holder" "$dir/out" || fail "open file replaced: $(cat "$dir/out")"
kill $holder; wait $holder 2>/dev/null || true
# (libc's mmap: Python's mmap module would keep a descriptor of its own)
python3 -c "import ctypes,os,sys,time; libc=ctypes.CDLL(None); libc.mmap.restype=ctypes.c_void_p; \
	libc.mmap.argtypes=[ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, \
	ctypes.c_long]; fd=os.open(sys.argv[1], os.O_RDONLY); p=libc.mmap(None, 4096, 1, 1, fd, 0); \
	os.close(fd); assert p not in (None, ctypes.c_void_p(-1).value); \
	print('mapped', flush=True); time.sleep(30)" $P >"$dir/mapper" &
holder=$!
for _ in $(seq 100); do grep -q mapped "$dir/mapper" && break; sleep 0.1; done
expect 1 $CX pool create -p $P --replace
grep -q "in use by pid .*$holder" "$dir/out" || fail "mapped file replaced: $(cat "$dir/out")"
kill $holder; wait $holder 2>/dev/null || true
expect 0 $CX pool create -p $P -s 128M --replace
grep -q "removed the old $P" "$dir/out" || fail "replace: $(cat "$dir/out")"
expect 0 $CX pool status -p $P
expect 2 $CX pool create -p $P --replace extra-arg
expect 1 $CX pool create -p /dev/null --replace
grep -q "not a regular file" "$dir/out" || fail "device replaced: $(cat "$dir/out")"

echo "== pool clean leaves the file as it is; two creates at once"
rm -f $P
expect 0 $CX pool create -p $P -s 128M -m 0660
expect 0 $CX pool clean -p $P
[ "$(stat -c %a $P)" = 660 ] || fail "pool clean changed the mode to $(stat -c %a $P)"
rm -f $P
: >$P
expect 1 $CX pool clean -p $P
[ "$(stat -c %s $P)" = 0 ] || fail "pool clean sized a blank file: $(stat -c %s $P)"
truncate -s 64M $P
expect 1 $CX pool clean -p $P
[ "$(od -An -tx8 -N8 $P | tr -d ' ')" = 0000000000000000 ] || fail "pool clean formatted a blank file"
for round in 1 2 3 4 5; do
	rm -f $P
	# one cannot format (4 devices of 16M hold no 1024 slots), one can
	$CX pool create -p $P -s 64M -d 4 --max-comms 1024 >"$dir/a" 2>&1 &
	a=$!
	$CX pool create -p $P -s 128M -d 1 --max-comms 4 >"$dir/b" 2>&1 &
	b=$!
	wait $a || true
	wait $b || true
	n=$(cat "$dir/a" "$dir/b" | grep -c '^created' || true)
	[ "$n" -le 1 ] || fail "round $round: both creates said created"
	if [ "$n" = 1 ]; then
		[ -s $P ] || fail "round $round: a create said created, the file is gone"
		expect 0 $CX pool status -p $P
	fi
done
rm -f $P
echo "== --replace replaces pool files only; an option wins over a bad variable"
echo notes >"$dir/notes"
expect 1 $CX pool create -p "$dir/notes" --replace
grep -q "is not a cxlshim pool" "$dir/out" || fail "a plain file replaced: $(cat "$dir/out")"
[ "$(cat "$dir/notes")" = notes ] || fail "the plain file changed"
CXLSHIM_POOL_SIZE=lots expect 0 $CX pool create -p $P -s 128M
rm -f $P
echo "tools: ok"

#!/usr/bin/env bash
# doctor.sh - a job hangs on purpose: of 3 ranks, rank 2 never calls the
# AllReduce the others wait in.  `cxlshim doctor` must name rank 2 and the
# AllReduce; a trace is written on demand (trace.signal) while the job
# hangs and by every rank killed with SIGTERM; once the ranks are dead,
# doctor says so and `cxlshim pool clean` reclaims their record.
# A second job hangs across communicators: its rank 2 misses an AllReduce
# on A because it waits in an AllGather on B that B's other rank never
# calls; doctor must follow the chain and name B's AllGather.
# Two more jobs deadlock across two communicators called in opposite
# orders, once waiting after each call and once on one stream (each
# rank's second op queued behind its first): doctor must name the cycle.
# The same calls on two streams are no deadlock: doctor must name the two
# ranks that never called (one queue per stream, not per process); and a
# process driving two ranks on two devices has a queue for each.  Last, a
# Send and a Recv that their peer never matches: doctor names the
# channels and the rank that did not call its half.
set -euo pipefail
B=${BUILD:-build}
CX=$B/cxlshim
dir=$(mktemp -d /tmp/cxlshim-ops-doctor.XXXXXX)
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-doctor-$$.pool
export CXLSHIM_TIMEOUT_OP_MS=300000 CXLSHIM_TRACE_SIGNAL=12
job=
cleanup() {
	[ -z "$job" ] || kill_tree "$job"
	rm -rf "$dir" "$CXLSHIM_POOL_PATH"
}
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"

# stop_job: the job and its ranks gone, then what they left reclaimed
stop_job() {
	kill_tree "$job"
	job=
	$CX pool clean >/dev/null
}
# watch WHAT CHECK...: runs doctor (its report in $dir/doctor.out, its exit
# status in rc) until the command CHECK... succeeds, for up to 30 s; shows
# the last report, and fails with WHAT when CHECK never succeeded
watch() {
	local what=$1
	shift
	for _ in $(seq 150); do
		rc=0
		$CX doctor >"$dir/doctor.out" 2>&1 || rc=$?
		"$@" && break
		sleep 0.2
	done
	cat "$dir/doctor.out"
	"$@" || fail "$what"
}
# seen PATTERN: doctor's last report has a line matching PATTERN
seen() { grep -q "$1" "$dir/doctor.out"; }
# seen_n N PATTERN: ... exactly N of them
seen_n() { [ "$(grep -c "$2" "$dir/doctor.out")" = "$1" ]; }

$CX run -e -t "$dir" -- "$B/tests/ops_job" hang 3 >"$dir/job.log" 2>&1 &
job=$!
watch "doctor never saw the hang" seen "has not called op 3"
[ $rc = 3 ] || fail "doctor exit status $rc, want 3 (something is stuck)"
grep -q "op 3 AllReduce(count 4096, float32, sum) not complete" "$dir/doctor.out" ||
	fail "the stuck collective is not named"
grep -q "waiting in op 3: rank 0, rank 1$" "$dir/doctor.out" || fail "waiting ranks"
grep -q "rank 2 (pid [0-9]*, alive) has not called op 3 (it enqueued 2 ops)" "$dir/doctor.out" ||
	fail "the missing rank is not named"
grep -q "first cause: op 3 AllReduce.* rank 2 (pid [0-9]*) has not called it$" "$dir/doctor.out" ||
	fail "no first cause"

ranks=$(ps -o pid= --ppid "$job")
[ "$(echo $ranks | wc -w)" = 3 ] || fail "expected 3 rank processes, got: $ranks"
# on demand: rank processes write their trace and go on
for p in $ranks; do kill -USR2 "$p"; done
for _ in $(seq 50); do [ "$(ls "$dir"/*.trace 2>/dev/null | wc -l)" = 3 ] && break; sleep 0.1; done
[ "$(ls "$dir"/*.trace | wc -l)" = 3 ] || fail "no trace on SIGUSR2"
rm -f "$dir"/*.trace
kill -0 $ranks || fail "a rank died of the on-demand dump"

# fatal signal: every rank writes its trace on the way out
kill -TERM $ranks
wait "$job" || true
job=
ls -l "$dir"/*.trace
[ "$(ls "$dir"/*.trace | wc -l)" = 3 ] || fail "a rank killed by SIGTERM left no trace"
$CX trace "$dir"/*.trace | tee "$dir/summary"
grep -Eq "^AllGather +6 " "$dir/summary" || fail "6 AllGathers (2 per rank) in the traces"
grep -Eq "^AllReduce +2 .* 2$" "$dir/summary" || fail "2 AllReduces, both incomplete"

# the job is dead now: its ranks are reported dead, then reclaimed
rc=0
$CX doctor >"$dir/doctor.out" 2>&1 || rc=$?
cat "$dir/doctor.out"
[ $rc = 3 ] && grep -q "is DEAD" "$dir/doctor.out" || fail "dead ranks not reported"
$CX pool clean | tee "$dir/clean.out"
grep -q "reclaimed 1 communicator record " "$dir/clean.out" || fail "clean did not reclaim"
$CX doctor | grep -q "nothing is stuck" || fail "pool not clean after pool clean"

echo "== a hang across two communicators"
$CX run -e -- "$B/tests/ops_job" chain >"$dir/chain.log" 2>&1 &
job=$!
# both communicators must be set up before the chain shows: until then
# doctor rightly sees a plain hang on one of them
chained() { seen "^first cause" && [ "$(grep -c "^comm slot" "$dir/doctor.out")" -ge 2 ]; }
watch "doctor never saw the chained hang" chained
grep -q "rank 2 (pid [0-9]*, alive) has not called op 1: it waits in op 1 AllGather(count 4096, float32) of comm slot" \
	"$dir/doctor.out" || fail "the rank busy on another communicator is not followed"
grep -q "^first cause: op 1 AllGather(count 4096, float32) on comm slot [0-9]*: rank 1 (pid [0-9]*) has not called it$" \
	"$dir/doctor.out" || fail "the first cause is not B's AllGather"
[ "$(grep -c "^first cause" "$dir/doctor.out")" = 1 ] || fail "more than one first cause"
stop_job

for mode in cycle cycle1; do
	echo "== a wait cycle across two communicators ($mode)"
	$CX run -e -- "$B/tests/ops_job" $mode >"$dir/$mode.log" 2>&1 &
	job=$!
	watch "$mode: doctor never named the cycle" seen "^cycle:"
	[ $rc = 3 ] || fail "$mode: doctor exit status $rc, want 3"
	# rank 0 in A's AllReduce -> rank 1 in B's AllGather -> back
	a=$(sed -n 's/^cycle: rank0@slot\([0-9]*\)#1 -> .*/\1/p' "$dir/doctor.out")
	b=$(sed -n 's/^cycle: rank0@slot[0-9]*#1 -> rank1@slot\([0-9]*\)#1 -> rank0@slot[0-9]*#1$/\1/p' \
		"$dir/doctor.out")
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] ||
		fail "$mode: cycle not rank0@A#1 -> rank1@B#1 -> rank0@A#1"
	grep -q "^  rank 0 (pid [0-9]*) in op 1 AllReduce(count 4096, float32, sum) of comm slot $a waits for its rank 1 (pid [0-9]*), which is in op 1 AllGather(count 4096, float32) of comm slot $b$" \
		"$dir/doctor.out" || fail "$mode: first hop"
	grep -q "^  rank 1 (pid [0-9]*) in op 1 AllGather(count 4096, float32) of comm slot $b waits for its rank 0 (pid [0-9]*), which is in op 1 AllReduce(count 4096, float32, sum) of comm slot $a$" \
		"$dir/doctor.out" || fail "$mode: second hop"
	[ "$(grep -c "^cycle:" "$dir/doctor.out")" = 1 ] || fail "$mode: one cycle, printed once"
	grep -q "^first cause: the wait cycle above" "$dir/doctor.out" || fail "$mode: first cause"
	if [ $mode = cycle1 ]; then
		grep -q "rank 0 (pid [0-9]*, alive) called op 1, queued behind its active op 1 AllReduce" \
			"$dir/doctor.out" || fail "$mode: the op pending behind the active one"
	fi
	stop_job
done
# both_hangs LINE: two first causes, and LINE twice as a whole line
both_hangs() { seen_n 2 "^first cause: op 1 " && [ "$(grep -cx "$1" "$dir/doctor.out")" = 2 ]; }
# run_job MODE LINE: starts ops_job MODE and waits until doctor's report
# has two first causes and LINE twice (every op of the job enqueued)
run_job() {
	$CX run -e -- "$B/tests/ops_job" "$1" >"$dir/$1.log" 2>&1 &
	job=$!
	watch "$1: doctor never saw both hangs" both_hangs "$2"
	[ $rc = 3 ] || fail "$1: doctor exit status $rc, want 3"
}

echo "== several queues per process: two streams, two communicators"
# ranks 0 and 1 each have A's AllReduce and B's AllGather in flight, on two
# streams in opposite orders: both are in both ops (no cycle), and the ops
# wait for rank 2 of A and rank 3 (B's rank 2), who never call them
run_job streams "  waiting in op 1: rank 0, rank 1"
grep -q "^cycle:" "$dir/doctor.out" && fail "streams: a wait cycle across two streams"
grep -q "queued behind" "$dir/doctor.out" && fail "streams: an op queued behind another stream's"
grep -q "^first cause: op 1 AllReduce(count 4096, float32, sum) on comm slot [0-9]*: rank 2 (pid [0-9]*) has not called it$" \
	"$dir/doctor.out" || fail "streams: A's first cause"
grep -q "^first cause: op 1 AllGather(count 4096, float32) on comm slot [0-9]*: rank 2 (pid [0-9]*) has not called it$" \
	"$dir/doctor.out" || fail "streams: B's first cause"
grep -q "^first cause: the wait cycle" "$dir/doctor.out" && fail "streams: a cycle as first cause"
stop_job

echo "== several ranks per process: two devices, two communicators"
# one process is rank 0 of A (device 0) and of B (device 1); B's AllGather,
# enqueued after A's AllReduce, waits in its op on its own device's stream
run_job multi "  waiting in op 1: rank 0"
grep -q "queued behind" "$dir/doctor.out" && fail "multi: an op queued behind another device's"
[ "$(grep -c "^first cause: op 1 .*: rank 1 (pid [0-9]*) has not called it$" "$dir/doctor.out")" = 2 ] ||
	fail "multi: the two first causes"
stop_job

echo "== send/receive: a Send and a Recv nobody matches"
# rank 0 sends to rank 1, rank 2 receives from rank 1; rank 1 calls neither
$CX run -e -- "$B/tests/ops_job" p2p >"$dir/p2p.log" 2>&1 &
job=$!
# both channels, and the Send staged whole (a loaded machine may show the
# channels before rank 0 copied its bytes in)
p2p_seen() { seen_n 2 "^  send/receive " && seen "^  send/receive rank 0 -> .* 16384 of 16384 bytes sent"; }
watch "p2p: doctor never saw the two channels, the Send staged" p2p_seen
[ $rc = 3 ] || fail "p2p: doctor exit status $rc, want 3"
# the Send fits the channel's staging: all of it sent, none received
grep -q "^  send/receive rank 0 -> rank 1: rank 0 posted message 1, rank 1 (pid [0-9]*, alive) has not called its Recv (it posted 0); message 1: 16384 of 16384 bytes sent, 0 received$" \
	"$dir/doctor.out" || fail "p2p: the Send without its Recv"
grep -q "^  send/receive rank 1 -> rank 2: rank 2 posted message 1, rank 1 (pid [0-9]*, alive) has not called its Send (it posted 0); message 1: 0 of 16384 bytes sent, 0 received$" \
	"$dir/doctor.out" || fail "p2p: the Recv without its Send"
grep -q "^first cause: send/receive on comm slot [0-9]*: rank 1 (pid [0-9]*) has not called Recv from rank 0, rank 1 (pid [0-9]*) has not called Send to rank 2$" \
	"$dir/doctor.out" || fail "p2p: first cause"
stop_job

echo "== send/receive groups: a ring where rank 1 never posts its Recv"
# rank 0's group waits in its Send to rank 1 (what the channel stages of
# it is sent, none received); its Recv from rank 2 is done, and so are
# the groups of ranks 1 and 2
$CX run -e -- "$B/tests/ops_job" p2pgroup >"$dir/p2pg.log" 2>&1 &
job=$!
groups_through() {
	[ "$(grep -c "group done" "$dir/p2pg.log")" = 2 ] &&
		seen "^  rank 0 .*Recv from rank 2 message 1: 9437184 of 9437184 bytes received: done"
}
watch "p2pgroup: doctor never saw rank 0's Recv done (and ranks 1, 2 through)" groups_through
[ $rc = 3 ] || fail "p2pgroup: doctor exit status $rc, want 3"
grep -q "^  send/receive rank 0 -> rank 1: rank 0 posted message 1, rank 1 (pid [0-9]*, alive) has not called its Recv (it posted 0); message 1: [1-9][0-9]* of 9437184 bytes sent, 0 received$" \
	"$dir/doctor.out" || fail "p2pgroup: the Send without its Recv"
[ "$(grep -c "^  send/receive " "$dir/doctor.out")" = 1 ] || fail "p2pgroup: one channel waits"
grep -q "^  rank 0 (pid [0-9]*, alive) send/receive: Send to rank 1 message 1: [1-9][0-9]* of 9437184 bytes sent, 0 received by rank 1: WAITING; Recv from rank 2 message 1: 9437184 of 9437184 bytes received: done$" \
	"$dir/doctor.out" || fail "p2pgroup: rank 0's group"
grep -q "^  rank 1 (pid [0-9]*, alive) send/receive: Send to rank 2 message 1: 9437184 of 9437184 bytes sent, 9437184 received by rank 2: done$" \
	"$dir/doctor.out" || fail "p2pgroup: rank 1's group (no Recv posted)"
grep -q "^first cause: send/receive on comm slot [0-9]*: rank 1 (pid [0-9]*) has not called Recv from rank 0$" \
	"$dir/doctor.out" || fail "p2pgroup: first cause"
stop_job
echo "doctor: ok"

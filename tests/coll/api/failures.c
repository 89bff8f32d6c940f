/* failures.c - what a failure does to a communicator: a rank killed
 * mid-collective (kill), an enqueue blocked on a full stream queue
 * (enqblocked), ncclCommAbort from another thread, also during an enqueue
 * (abort, abortenq), ncclCommRevoke then a shrink or a split (revoke,
 * revokesplit), and ranks that disagree on an operation's arguments
 * (argcount, argroot, argcoll).  Failures of captured work are in
 * graph_fail.c.
 */

#include "api.h"

/* ---- failures --------------------------------------------------------- */

/* The victim: joins, does one good collective, then dies with the second
 * one half enqueued. */
static void victim(int rank, int n, const ncclUniqueId *id)
{
	ncclComm_t comm;
	cudaStream_t s;
	char *send, *recv;

	cudaSetDevice(test_device(rank));
	cudaStreamCreate(&s);
	if (ncclCommInitRank(&comm, n, *id, rank) != ncclSuccess)
		_exit(3);
	if (!allgather_ok(comm, s, rank, n, 4096))
		_exit(4);
	launch_barrier();
	send = dev_alloc(64 * MIB, 1);
	recv = dev_alloc(64 * MIB * (size_t)n, 0);
	ncclAllGather(send, recv, 64 * MIB, ncclInt8, comm, s);
	usleep(20000);
	raise(SIGKILL);
}

int case_kill(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	cudaStream_t s;
	ncclResult_t e = ncclSuccess;
	char *send, *recv;
	double took;

	(void)arg;
	if (rank == n - 1) {
		pid_t pid = fork();
		int st;

		if (pid == 0)
			victim(rank, n, id);
		waitpid(pid, &st, 0);
		return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 1;
	}
	comm = join(rank, n, id, &s);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "first collective");
	launch_barrier();
	send = dev_alloc(64 * MIB, 1);
	recv = dev_alloc(64 * MIB * (size_t)n, 0);
	/* the death is reported by this call when the watchdog already saw
	 * it, otherwise by ncclCommGetAsyncError while the call is pending */
	e = ncclAllGather(send, recv, 64 * MIB, ncclInt8, comm, s);
	CHECK(e == ncclSuccess || e == ncclRemoteError, "enqueue: %d", e);
	took = e == ncclSuccess ? wait_error(comm, &e, 20) : 0;
	CHECK(took >= 0 && e == ncclRemoteError, "peer death reported: %d after %.2fs", e, took);
	CHECK(ncclAllGather(send, recv, 16, ncclInt8, comm, s) != ncclSuccess,
	      "a failed communicator refuses new work");
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream drained after the abort");
	return CHECK_SUMMARY();
}

/* An enqueue that blocks in the driver, its stream's queue full behind a
 * doorbell wait (run with CUDAEMU_QUEUE_DEPTH=4, as a GPU's bounded queue,
 * and a short CXLSHIM_TIMEOUT_OP_MS): rank 0's large AllGather, which
 * rank 1 never joins ("never") or which it cannot join, having died
 * ("dead").  The operation is not counted before its enqueue ends, and
 * the watchdog took the communicator for idle: neither the timeout nor
 * the dead peer was noticed and the call never returned. */
int case_enqueue_blocked(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *how = arg;
	size_t bytes = 16 * MIB;
	ncclResult_t r, e = ncclSuccess;
	ncclComm_t comm;
	cudaStream_t s;
	char *buf;
	double t0;

	comm = join(rank, n, id, &s);
	buf = dev_alloc(bytes * (size_t)n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "first collective");
	launch_barrier();
	if (rank == 1) {
		if (!strcmp(how, "dead"))
			_exit(0); /* dies without a word, its communicator joined */
		CHECK(wait_error(comm, &e, 30) >= 0 && e == ncclRemoteError,
		      "%s: the peer's timeout seen: %d", how, e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
		return CHECK_SUMMARY();
	}
	usleep(100000);
	t0 = now_s();
	r = ncclAllGather(buf, buf, bytes, ncclInt8, comm, s);
	CHECK(now_s() - t0 < 30, "%s: the blocked enqueue returned after %.2fs", how, now_s() - t0);
	CHECK(r == ncclSuccess || r == ncclSystemError || r == ncclRemoteError, "%s: call %d", how,
	      r);
	CHECK(wait_error(comm, &e, 30) >= 0 &&
		      e == (!strcmp(how, "dead") ? ncclRemoteError : ncclSystemError),
	      "%s: error %d", how, e);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "%s: the stream drained", how);
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	return CHECK_SUMMARY();
}

/* Rank 0 enqueues a collective rank 1 never joins; another thread aborts. */
int case_abort(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm;
	cudaStream_t s;
	pthread_t t;
	struct aborter a;
	char *buf;
	double t0;

	(void)arg;
	comm = join(rank, n, id, &s);
	buf = dev_alloc(MIB * (size_t)n, 0);
	if (rank == 0) {
		a.comm = comm;
		a.delay_ms = 300;
		CHECK(ncclAllGather(buf, buf, MIB, ncclInt8, comm, s) == ncclSuccess, "enqueue");
		t0 = now_s();
		pthread_create(&t, NULL, abort_later, &a);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "stream sync returns");
		CHECK(now_s() - t0 < 10, "unblocked by the abort after %.2fs", now_s() - t0);
		pthread_join(t, NULL);
	} else {
		ncclResult_t e = ncclSuccess;

		/* the peer sees the abort as a remote error */
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after remote abort");
	}
	return CHECK_SUMMARY();
}

/* The enqueue that rank 0's main thread makes while its other thread
 * aborts: a collective, or a send/receive group. */
static ncclResult_t enqueue_one(ncclComm_t comm, cudaStream_t s, int rank, const char *what,
				char *send, char *recv)
{
	ncclResult_t r, r2;

	if (!strcmp(what, "coll"))
		return ncclAllGather(send, recv, MIB, ncclInt8, comm, s);
	ncclGroupStart();
	r = ncclSend(send, MIB, ncclInt8, 1 - rank, comm, s);
	r2 = ncclRecv(recv, MIB, ncclInt8, 1 - rank, comm, s);
	if (r == ncclSuccess)
		r = r2;
	r2 = ncclGroupEnd();
	return r != ncclSuccess ? r : r2;
}

struct enq_aborter {
	ncclComm_t comm;
	double took;            /* how long ncclCommAbort took */
	ncclResult_t r;
};

static void *abort_during_enqueue(void *arg)
{
	struct enq_aborter *a = arg;

	double t0;

	usleep(200 * 1000); /* the main thread is held in its enqueue by now */
	t0 = now_s();
	a->r = ncclCommAbort(a->comm);
	a->took = now_s() - t0;
	return NULL;
}

/* ncclCommAbort from another thread while the main thread is inside an
 * enqueue on the same communicator (PyTorch's watchdog does this).  On
 * rank 0 CXLSHIM_TEST_ENQUEUE_PAUSE_MS holds the enqueue at its start
 * until the abort began, then 300 ms more: the abort must not give the
 * pool record back before the enqueue left (it would queue work against
 * a record the next communicator may own), so it takes those 300 ms, and
 * the enqueue must see the abort and fail instead of enqueueing.  The pool has one communicator
 * slot (tests/run.sh): the next communicator gets the same record, so
 * it must have been given back, and only once. */
int case_abort_enqueue(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *what = arg;
	struct enq_aborter a = { 0 };
	ncclComm_t comm, next;
	cudaStream_t s;
	pthread_t t;
	ncclResult_t r, e = ncclSuccess;
	char *send, *recv;
	double t0;

	if (rank == 0)
		setenv("CXLSHIM_TEST_ENQUEUE_PAUSE_MS", "300", 1);
	comm = join(rank, n, id, &s);
	unsetenv("CXLSHIM_TEST_ENQUEUE_PAUSE_MS");
	send = dev_alloc(MIB, 'a' + rank);
	recv = dev_alloc(MIB * (size_t)n, 0);
	if (rank == 0) {
		a.comm = comm;
		t0 = now_s();
		pthread_create(&t, NULL, abort_during_enqueue, &a);
		r = enqueue_one(comm, s, rank, what, send, recv);
		pthread_join(t, NULL);
		CHECK(r == ncclRemoteError, "the enqueue saw the abort and failed: %d", r);
		CHECK(a.r == ncclSuccess, "abort: %d", a.r);
		CHECK(a.took >= 0.29, "the abort returned after %.3fs, before the held enqueue left",
		      a.took);
		CHECK(now_s() - t0 < 5, "the abort released the held enqueue (%.2fs)", now_s() - t0);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream drains");
	} else {
		r = enqueue_one(comm, s, rank, what, send, recv);
		CHECK(r == ncclSuccess || r == ncclRemoteError, "peer's enqueue: %d", r);
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the peer's stream drains");
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after remote abort");
	}
	/* both gave the record back: the same id makes a new communicator in
	 * the pool's only slot */
	launch_barrier();
	CHECK(ncclCommInitRank(&next, n, *id, rank) == ncclSuccess,
	      "the next communicator gets the record");
	CHECK(ncclCommDestroy(comm) == ncclInvalidArgument, "the aborted handle stays dead");
	CHECK(allgather_ok(next, s, rank, n, MIB), "the next communicator works");
	CHECK(ncclCommDestroy(next) == ncclSuccess, "destroy the next one");
	cudaFree(send);
	cudaFree(recv);
	return CHECK_SUMMARY();
}

/* ---- revoke ------------------------------------------------------------- */

/* Rank 2 stops taking part; ranks 0 and 1 revoke their communicator while
 * an AllGather waits for it, see it quiesce, shrink it to the two of them
 * and carry on. */
int case_revoke(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclComm_t comm, small = NULL;
	cudaStream_t s;
	ncclResult_t e = ncclSuccess;
	int gone = 2, count = 0;
	char *buf;
	double t0;

	(void)arg;
	comm = join(rank, n, id, &s);
	buf = dev_alloc(MIB * (size_t)n, 0);
	if (rank == gone) {
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "revoke seen: %d", e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
		return CHECK_SUMMARY();
	}
	CHECK(ncclAllGather(buf + rank * MIB, buf, MIB, ncclInt8, comm, s) == ncclSuccess, "enqueue");
	usleep(200000);
	CHECK(ncclCommRevoke(comm, 1) == ncclInvalidArgument, "flags must be 0");
	t0 = now_s();
	CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the waiting stream is released");
	do
		ncclCommGetAsyncError(comm, &e);
	while (e == ncclInProgress && now_s() - t0 < 10);
	CHECK(e == ncclSuccess, "quiescent after revoke: %d", e);
	/* as NCCL 2.28: new work is misuse, and a revoke is a finalize */
	CHECK(ncclAllGather(buf, buf, 16, ncclInt8, comm, s) == ncclInvalidUsage, "no new work");
	CHECK(ncclSend(buf, 16, ncclInt8, 0, comm, s) == ncclInvalidUsage, "no send either");
	CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclInvalidArgument, "not twice");
	CHECK(ncclCommFinalize(comm) == ncclInvalidArgument, "no finalize after revoke");
	CHECK(ncclCommShrink(comm, &gone, 1, &small, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess,
	      "shrink the revoked communicator");
	CHECK(small && ncclCommCount(small, &count) == ncclSuccess && count == 2, "2 ranks left");
	CHECK(small && allgather_ok(small, s, rank, 2, MIB), "the shrunk communicator works");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy the revoked one");
	if (small)
		CHECK(ncclCommDestroy(small) == ncclSuccess, "destroy the shrunk one");
	return CHECK_SUMMARY();
}

/* Both ranks revoke their communicator (rank 0 with an AllGather waiting
 * for rank 1), see it quiesce, and split it: nccl.h lets destroy, split
 * and shrink follow a revoke. */
/* Polls comm until it leaves ncclInProgress (10 s at most). */
static ncclResult_t settle(ncclComm_t comm)
{
	ncclResult_t e = ncclInProgress;
	double t0 = now_s();

	do
		ncclCommGetAsyncError(comm, &e);
	while (e == ncclInProgress && now_s() - t0 < 10);
	return e;
}

/* arg "nb": a nonblocking communicator, whose split runs in the
 * background. */
int case_revoke_split(int rank, int n, const ncclUniqueId *id, void *arg)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	int nb = arg && !strcmp(arg, "nb");
	ncclComm_t comm = NULL, kid = NULL;
	cudaStream_t s;
	ncclResult_t r;
	int v = -1;
	char *buf;

	cudaSetDevice(test_device(rank));
	cudaStreamCreate(&s);
	cfg.blocking = !nb;
	r = ncclCommInitRankConfig(&comm, n, *id, rank, &cfg);
	CHECK((r == ncclSuccess || (nb && r == ncclInProgress)) && settle(comm) == ncclSuccess,
	      "init: %d", r);
	buf = dev_alloc(MIB * (size_t)n, 0);
	if (rank == 0)
		CHECK(ncclAllGather(buf, buf, MIB, ncclInt8, comm, s) == ncclSuccess, "enqueue");
	launch_barrier();
	CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream is released");
	CHECK(settle(comm) == ncclSuccess, "quiescent after revoke");
	r = ncclCommSplit(comm, 0, -rank, &kid, NULL);
	CHECK(r == (nb ? ncclInProgress : ncclSuccess), "split the revoked one: %d", r);
	CHECK(kid && settle(kid) == ncclSuccess && settle(comm) == ncclSuccess, "split done");
	CHECK(kid && ncclCommCount(kid, &v) == ncclSuccess && v == n, "split size %d", v);
	CHECK(kid && allgather_ok(kid, s, n - 1 - rank, n, MIB), "the split works");
	if (kid)
		CHECK(ncclCommDestroy(kid) == ncclSuccess, "destroy the split");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy the revoked one");
	cudaFree(buf);
	return CHECK_SUMMARY();
}

/* ---- mismatched calls --------------------------------------------------- */

/* Rank 1 disagrees with the others about operation 2 (AllGather count,
 * Broadcast root or the collective itself, by `arg`): every rank must see
 * ncclInvalidUsage, from the call or asynchronously, and no stream may hang.
 * Operation 1 is a good AllGather, so the check runs on a working
 * communicator. */
int case_argmismatch(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *what = arg;
	ncclComm_t comm;
	cudaStream_t s;
	ncclResult_t r, e = ncclSuccess;
	char *buf;
	double took;
	int odd = rank == 1;

	comm = join(rank, n, id, &s);
	buf = dev_alloc(4 * MIB * (size_t)n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "operation 1 agrees");
	/* a mismatch fails the communicator at once, in-flight operations
	 * included: nobody starts operation 2 before everyone checked 1 */
	launch_barrier();
	if (rank == 0)
		usleep(100000); /* both orders of arrival: rank 0 comes last */
	if (!strcmp(what, "count"))
		r = ncclAllGather(buf + rank * MIB, buf, odd ? MIB / 2 : MIB, ncclInt8, comm, s);
	else if (!strcmp(what, "root"))
		r = ncclBroadcast(buf, buf, MIB, ncclFloat, odd, comm, s);
	else
		r = odd ? ncclBroadcast(buf, buf, MIB, ncclInt8, 0, comm, s) :
			  ncclAllGather(buf + rank * MIB, buf, MIB, ncclInt8, comm, s);
	CHECK(r == ncclSuccess || r == ncclInvalidUsage, "%s: call returned %d", what, r);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "%s: the stream completes", what);
	took = r == ncclSuccess ? wait_error(comm, &e, 10) : 0;
	if (r == ncclInvalidUsage)
		ncclCommGetAsyncError(comm, &e);
	CHECK(took >= 0 && e == ncclInvalidUsage, "%s: rank %d async error %d after %.2fs", what,
	      rank, e, took);
	CHECK(ncclAllGather(buf + rank * MIB, buf, MIB, ncclInt8, comm, s) != ncclSuccess,
	      "%s: a failed communicator refuses further work", what);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after the mismatch");
	cudaFree(buf);
	return CHECK_SUMMARY();
}

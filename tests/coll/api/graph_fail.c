/* graph_fail.c - captured work when something goes wrong: an abort while
 * a replay waits for its peer (graphabort, graphpairabort*, graphstuck),
 * ranks that replay different calls (graphcount, graphkind), a peer that
 * died (graphdead*), and replays launched after the communicators were
 * aborted or destroyed (graphreleased*).
 */

#include "api.h"

/* Rank 0 replays a captured AllGather alone, its stream waiting for rank
 * 1's slot flags, and another thread aborts: the abort returns, the
 * stream completes, and replays after the abort complete too.  Rank 1
 * sees the remote error, replays as well (the failed flags let its waits
 * pass) and destroys. */
int case_graph_abort(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 4096;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *send = dev_alloc(bytes, rank + 1), *recv = dev_alloc(bytes * n, 0);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	ncclResult_t e = ncclSuccess;
	double t0;

	(void)arg;
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclAllGather(send, recv, bytes, ncclInt8, comm, s) == ncclSuccess, "captured");
	exec = end_and_replay(s, &g, 2);
	launch_barrier();
	if (rank == 0) {
		struct aborter a = { comm, 300 };
		pthread_t t;

		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch alone");
		t0 = now_s();
		pthread_create(&t, NULL, abort_later, &a);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync after the abort");
		pthread_join(t, NULL);
		CHECK(now_s() - t0 < 3, "abort and stream done after %.2fs", now_s() - t0);
		t0 = now_s();
		for (int it = 0; it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after abort", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the abort");
		CHECK(now_s() - t0 < 3, "replays after the abort done in %.2fs", now_s() - t0);
	} else {
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		t0 = now_s();
		for (int it = 0; it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after failure", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the failure");
		CHECK(now_s() - t0 < 3, "replays after the failure done in %.2fs", now_s() - t0);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after remote abort");
	}
	launch_barrier();
	graph_free(exec, g);
	return CHECK_SUMMARY();
}

/* Rank 1 captured another call than the others (an AllGather of half the
 * count, or a send/receive group with rank 0, whose replay meets nobody
 * while the others wait for it in their AllGather's): the capture cannot
 * tell, the first replay must.  Every rank gets an asynchronous error
 * within the timeout (ncclInvalidUsage where the replays compare their
 * calls: "count"), the replay's stream completes (no hang), and the
 * communicator refuses further work. */
int case_graph_mismatch(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *what = arg;
	size_t bytes = MIB + 4096;
	char *send, *recv;
	ncclResult_t e = ncclSuccess;
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	double took;

	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	send = dev_alloc(bytes, 0);
	recv = dev_alloc(bytes * n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	if (rank != 1) {
		CHECK(ncclAllGather(send, recv, bytes, ncclInt8, comm, s) == ncclSuccess, "captured");
	} else if (!strcmp(what, "count")) {
		CHECK(ncclAllGather(send, recv, bytes / 2, ncclInt8, comm, s) == ncclSuccess,
		      "captured, half the count");
	} else {
		CHECK(ncclGroupStart() == ncclSuccess, "group");
		CHECK(ncclSend(send, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "send to 0");
		CHECK(ncclRecv(recv, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "recv from 0");
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	}
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "%s: the replay's stream completes", what);
	took = wait_error(comm, &e, 10);
	CHECK(took >= 0 && (strcmp(what, "count") ? e != ncclSuccess : e == ncclInvalidUsage),
	      "%s: rank %d async error %d after %.2fs", what, rank, e, took);
	CHECK(ncclAllGather(send, recv, bytes, ncclInt8, comm, s) != ncclSuccess,
	      "%s: a failed communicator refuses further work", what);
	graph_free(exec, graph);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after the mismatch");
	return CHECK_SUMMARY();
}

/* Synchronizes s, whose replay waits for a peer that does not come,
 * through an abort: by another thread of ours after delay_ms (self), or
 * by a peer, which this rank's async error then tells. */
static int sync_through_abort(ncclComm_t comm, cudaStream_t s, int self, int delay_ms)
{
	ncclResult_t e = ncclSuccess;
	int ok;

	if (self) {
		struct aborter ab = { comm, delay_ms };
		pthread_t t;

		pthread_create(&t, NULL, abort_later, &ab);
		ok = cudaStreamSynchronize(s) == cudaSuccess;
		pthread_join(t, NULL);
		return ok;
	}
	ok = cudaStreamSynchronize(s) == cudaSuccess;
	return ok && wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError;
}

/* Both ranks capture a send larger than the captured slots hold, then the
 * receive: NCCL hangs there too (each send waits for the other's
 * receive).  An abort from another thread must end both replays: the
 * failed communicator's slot flags let every wait pass for good, also
 * the waits of replays launched after it. */
int case_graph_stuck(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 64 * MIB;
	char *a = dev_alloc(bytes, 0), *b = dev_alloc(bytes, 0);
	cudaGraphExec_t exec = NULL;
	cudaGraph_t graph = NULL;
	ncclComm_t comm;
	cudaStream_t s;
	double t0;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclSend(a, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "send");
	CHECK(ncclRecv(b, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "recv");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch");
	usleep(500000);
	CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "rank %d: the replay waits", rank);
	t0 = now_s();
	CHECK(sync_through_abort(comm, s, rank == 0, 0), "rank %d: the abort ends the replay", rank);
	CHECK(now_s() - t0 < 3, "rank %d: stream done %.2fs after the abort", rank, now_s() - t0);
	t0 = now_s();
	for (int it = 0; it < 3; it++)
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after the abort", it);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the abort");
	CHECK(now_s() - t0 < 3, "replays after the abort done in %.2fs", now_s() - t0);
	if (rank == 1)
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after the remote abort");
	launch_barrier();
	graph_free(exec, graph);
	return CHECK_SUMMARY();
}

/* Rank 0 replays a send/receive pair with rank 1 alone, its stream
 * waiting for a slot rank 1 never fills, and is aborted: by another thread of its
 * own (arg NULL) or by rank 2, which captured nothing (arg "2").  The
 * stream completes, later replays complete, the others see the error. */
int case_graph_pair_abort(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 4096;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *a = dev_alloc(bytes, rank + 1), *b = dev_alloc(bytes, 0);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	ncclResult_t e = ncclSuccess;
	int aborter = arg ? atoi(arg) : 0;
	double t0;

	if (rank < 2) {
		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		if (rank == 0)
			CHECK(ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "send");
		CHECK(ncclRecv(b, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "recv");
		if (rank == 1)
			CHECK(ncclSend(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "send");
		exec = end_and_replay(s, &g, 2);
	}
	launch_barrier();
	if (rank == 0) {
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch alone");
		t0 = now_s();
		CHECK(sync_through_abort(comm, s, aborter == 0, 300), "the abort ends the replay");
		CHECK(now_s() - t0 < 3, "abort and stream done after %.2fs", now_s() - t0);
		t0 = now_s();
		for (int it = 0; it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after abort", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the abort");
		CHECK(now_s() - t0 < 3, "replays after the abort done in %.2fs", now_s() - t0);
	} else if (rank == aborter) {
		usleep(300000);
		CHECK(ncclCommAbort(comm) == ncclSuccess, "abort from bystander");
	} else {
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		t0 = now_s();
		for (int it = 0; exec && it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after failure", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync replays after the failure");
		CHECK(now_s() - t0 < 3, "replays after the failure done in %.2fs", now_s() - t0);
	}
	/* Rank 0's replays after its own abort pass the flags because rank
	 * 1's failed communicator lives: on a device that waits on the state
	 * word alone only a live failed communicator fails them again (once
	 * none is left, such replays wait for ever: api_check graphreleased).
	 * So rank 1 destroys after rank 0 replayed, not while it may. */
	launch_barrier();
	if (rank != aborter)
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after the failure");
	launch_barrier();
	graph_free(exec, g);
	return CHECK_SUMMARY();
}

/* Rank 1 (a child process) replays a captured send once
 * and dies; rank 0 then replays its captured receive, which waits for a
 * send that never comes.  The death must be reported (ncclRemoteError by
 * ncclCommGetAsyncError), as for an eager receive (case_kill). */
int case_graph_dead(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 8192;
	ncclResult_t e = ncclSuccess;
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	cudaStream_t s;
	ncclComm_t comm;
	char *buf;
	double took;

	(void)arg;
	if (rank == 1) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			comm = join(rank, n, id, &s);
			buf = dev_alloc(bytes, 1);
			cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
			ncclSend(buf, bytes, ncclInt8, 0, comm, s);
			cudaStreamEndCapture(s, &g);
			cudaGraphInstantiate(&exec, g, 0);
			cudaGraphLaunch(exec, s);
			cudaStreamSynchronize(s);
			raise(SIGKILL);
		}
		waitpid(pid, &st, 0);
		launch_barrier();
		return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 1;
	}
	comm = join(rank, n, id, &s);
	buf = dev_alloc(bytes, 0);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclRecv(buf, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "recv");
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess,
	      "first replay");
	launch_barrier();
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "replay after the peer died");
	took = wait_error(comm, &e, 20);
	CHECK(took >= 0 && e == ncclRemoteError, "peer death reported: %d after %.2fs", e, took);
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream drained after the abort");
	graph_free(exec, g);
	return CHECK_SUMMARY();
}

/* As graphdead, with a message of many more chunks than the channel has
 * captured slots (4 MiB): after the death is reported and ncclCommAbort
 * returns, the replay in flight drains.  On a device without 64-bit
 * stream waits the failure is the flag's state word, which the replay's
 * own writes (EMPTY after each chunk) take back: with the communicator
 * released and the peer dead nobody failed it again, and the stream
 * waited for ever at its first reused slot (CUDAEMU_NO_MEMOPS64=1).
 * arg "coll": a captured Reduce of as many bytes instead, which waits for
 * the dead rank at every chunk of its slot flags (gcoll.h). */
int case_graph_dead_big(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 4 * MIB;
	ncclResult_t e = ncclSuccess;
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	cudaStream_t s;
	ncclComm_t comm;
	char *buf;
	double took;

	if (rank == 1) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			comm = join(rank, n, id, &s);
			raise(SIGKILL);
		}
		waitpid(pid, &st, 0);
		launch_barrier();
		return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : 1;
	}
	comm = join(rank, n, id, &s);
	buf = dev_alloc(bytes, 0);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	if (arg) /* a collective that waits for the dead rank at every chunk */
		CHECK(ncclReduce(buf, buf, bytes / 4, ncclFloat32, ncclSum, 0, comm, s) ==
		      ncclSuccess, "Reduce");
	else
		CHECK(ncclRecv(buf, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "recv");
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	launch_barrier();
	CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "replay after the peer died");
	took = wait_error(comm, &e, 20);
	CHECK(took >= 0 && e == ncclRemoteError, "peer death reported: %d after %.2fs", e, took);
	CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	drains_or_leave(s, 10, "the replay in flight, after the abort,");
	graph_free(exec, g);
	return CHECK_SUMMARY();
}

/* A send/receive pair captured by both ranks and replayed twice; rank 0
 * aborts, rank 1 sees the failure and destroys its communicator; then
 * rank 0 launches the graph three times more.  The failed flags must let
 * these replays through ("also in later replays", README), as they do
 * with 64-bit waits.  On a device that waits on the state word alone the
 * first replay's own writes take the failure back, and with neither
 * communicator left no watchdog sets it again: the second replay waits
 * for ever (CUDAEMU_NO_MEMOPS64=1).  arg "coll": an AllGather and a
 * Broadcast of many captured slots each instead. */
int case_graph_replay_released(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 4096;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *a = dev_alloc(bytes, rank + 1), *b = dev_alloc(bytes, 0);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	ncclResult_t e = ncclSuccess;
	char *big = arg ? dev_alloc(2 * MIB, rank + 1) : NULL;
	char *all = arg ? dev_alloc(4 * MIB, 0) : NULL;

	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	if (arg) { /* collectives of several captured slots */
		CHECK(ncclAllGather(big, all, 2 * MIB, ncclInt8, comm, s) == ncclSuccess,
		      "AllGather");
		CHECK(ncclBroadcast(big, big, 2 * MIB, ncclInt8, 0, comm, s) == ncclSuccess,
		      "Broadcast");
	} else {
		CHECK(ncclGroupStart() == ncclSuccess, "group");
		CHECK(ncclSend(a, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "send");
		CHECK(ncclRecv(b, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess, "recv");
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	}
	exec = end_and_replay(s, &g, 2);
	launch_barrier();
	if (rank == 0) {
		CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
	} else {
		CHECK(wait_error(comm, &e, 20) >= 0 && e == ncclRemoteError, "remote abort: %d", e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	}
	launch_barrier();
	if (rank == 0) {
		for (int it = 0; it < 3; it++)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d after the abort", it);
		drains_or_leave(s, 10, "the replays after the abort");
	}
	graph_free(exec, g);
	return CHECK_SUMMARY();
}

/* graph_p2p.c - captured sends and receives: a pipeline outside groups
 * (graphpipe), mixed with collectives (graphmix-*), receives the peer
 * replays later or groups otherwise (graphsendsend, graphsepgrp,
 * graphorder3, graphtwographs), a pool too small for captured channels
 * (graphnoroom), the n-th send matching the n-th receive across graphs
 * (graphreplays-*), sizes around the captured chunk (graphfuzz*), and
 * split children's exchanges (graphsplitp2p).
 */

#include "api.h"

/* A pipeline captured outside groups, as a pipeline-parallel step does:
 * rank 0 sends to 1, rank 1 receives from 0 and sends on to 2 (two
 * captures), rank 2 receives.  Each replay's send/receive meets its peer
 * alone (replay.h), so the ranks need not capture as many of them; before,
 * every replay met the whole communicator and the first one timed out.
 * Each replay carries new bytes end to end, and eager AllGathers run
 * between replays. */
#define PIPE_REPLAYS 20

int case_graph_pipe(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = MIB + 4096 + 7;
	char *buf, *host = malloc(bytes);
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	int bad = -1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	buf = dev_alloc(bytes, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	if (rank > 0)
		CHECK(ncclRecv(buf, bytes, ncclInt8, rank - 1, comm, s) == ncclSuccess, "captured recv");
	if (rank < n - 1)
		CHECK(ncclSend(buf, bytes, ncclInt8, rank + 1, comm, s) == ncclSuccess, "captured send");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	for (int it = 0; it < PIPE_REPLAYS; it++) {
		int v = (it * 3 + 1) & 0xff;

		if (rank == 0)
			cudaMemsetAsync(buf, v, bytes, s);
		else
			cudaMemsetAsync(buf, 0xee, bytes, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		cudaMemcpy(host, buf, bytes, cudaMemcpyDeviceToHost);
		for (size_t i = 0; bad < 0 && i < bytes; i++)
			if ((unsigned char)host[i] != v)
				bad = it;
		if (it % 5 == 2)
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager op after replay %d",
			      it);
	}
	CHECK(bad < 0, "rank %d: replay %d carried wrong bytes", rank, bad);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "eager op after the replays");
	graph_free(exec, graph);
	cudaFree(buf);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Graphs that mix collectives and send/receive groups (mode): "pingpong"
 * (2 ranks: rank 0 sends then receives, rank 1 receives then sends back,
 * outside groups), "bystander" (the same on ranks 0 and 1 while rank 2,
 * which captured nothing, exchanges eagerly with rank 1 right behind each
 * replay), "mixed" (AllGather, a pipeline outside groups, Broadcast),
 * "mixedb" (the pipeline, AllGather, a ring group), "grpcoll" (a group
 * holding a ring's send and receive and an AllGather), "self" (a group
 * sending to itself and to a peer).  Eager sends or AllGathers are queued
 * right behind every replay, no host sync; MIX_SLOW=rank delays that
 * rank's launches. */
#define MIX_REPLAYS 40

static int capture_pipe(char *buf, size_t bytes, int rank, int n, ncclComm_t comm, cudaStream_t s)
{
	int ok = 1;

	if (rank > 0)
		ok &= ncclRecv(buf, bytes, ncclInt8, rank - 1, comm, s) == ncclSuccess;
	if (rank < n - 1)
		ok &= ncclSend(buf, bytes, ncclInt8, rank + 1, comm, s) == ncclSuccess;
	return ok;
}

int case_graph_mix(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *mode = arg;
	size_t bytes = MIB + 4096 + 7;
	char *a, *b, *e, *x, *y, *host = malloc(bytes * n);
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec = NULL;
	int bad = -1, captures = 1, slow = getenv("MIX_SLOW") ? atoi(getenv("MIX_SLOW")) : -1;

	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	a = dev_alloc(bytes, 0);
	b = dev_alloc(bytes, 0);
	e = dev_alloc(bytes, 0);
	x = dev_alloc(bytes, 0);
	y = dev_alloc(bytes * n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	if (!strcmp(mode, "bystander") && rank == 2)
		captures = 0;
	if (captures) {
		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		if (!strcmp(mode, "pingpong") || !strcmp(mode, "bystander")) {
			if (rank == 0) {
				CHECK(ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "send");
				CHECK(ncclRecv(b, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "recv");
			} else {
				CHECK(ncclRecv(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "recv");
				CHECK(ncclSend(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "send");
			}
		} else if (!strcmp(mode, "mixed")) {
			CHECK(ncclAllGather(x, y, bytes, ncclInt8, comm, s) == ncclSuccess, "ag");
			CHECK(capture_pipe(a, bytes, rank, n, comm, s), "pipe");
			CHECK(ncclBroadcast(x, x, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "bc");
		} else if (!strcmp(mode, "mixedb")) {
			CHECK(capture_pipe(a, bytes, rank, n, comm, s), "pipe");
			CHECK(ncclAllGather(x, y, bytes, ncclInt8, comm, s) == ncclSuccess, "ag");
			CHECK(ncclGroupStart() == ncclSuccess, "group");
			CHECK(ncclSend(x, bytes, ncclInt8, (rank + 1) % n, comm, s) == ncclSuccess, "s");
			CHECK(ncclRecv(b, bytes, ncclInt8, (rank + n - 1) % n, comm, s) == ncclSuccess,
			      "r");
			CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		} else if (!strcmp(mode, "grpcoll")) {
			CHECK(capture_pipe(a, bytes, rank, n, comm, s), "pipe");
			CHECK(ncclGroupStart() == ncclSuccess, "group");
			CHECK(ncclSend(x, bytes, ncclInt8, (rank + 1) % n, comm, s) == ncclSuccess, "s");
			CHECK(ncclAllGather(x, y, bytes, ncclInt8, comm, s) == ncclSuccess, "ag");
			CHECK(ncclRecv(b, bytes, ncclInt8, (rank + n - 1) % n, comm, s) == ncclSuccess,
			      "r");
			CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		} else if (!strcmp(mode, "self")) {
			if (rank == 0) {
				CHECK(ncclGroupStart() == ncclSuccess, "group");
				CHECK(ncclSend(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "s0");
				CHECK(ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "r0");
				CHECK(ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "s1");
				CHECK(ncclGroupEnd() == ncclSuccess, "group end");
			} else {
				CHECK(ncclRecv(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "r");
			}
		}
		CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
		CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	}
	for (int it = 0; it < MIX_REPLAYS; it++) {
		int v = (it * 3 + 1) & 0xff, w = v ^ 0x55;

		cudaMemsetAsync(a, rank == 0 ? v : 0xee, bytes, s);
		cudaMemsetAsync(b, 0xee, bytes, s);
		cudaMemsetAsync(x, 'A' + rank + it % 40, bytes, s);
		if (rank == slow && it % 3 == 0)
			usleep(20000);
		if (exec)
			CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		/* eager work right behind the replay, no host sync */
		if (!strcmp(mode, "bystander")) {
			cudaMemsetAsync(e, rank == 2 ? w : 0xee, bytes, s);
			if (rank == 2)
				CHECK(ncclSend(e, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "eager s");
			else if (rank == 1)
				CHECK(ncclRecv(e, bytes, ncclInt8, 2, comm, s) == ncclSuccess, "eager r");
		} else if (it % 2) {
			cudaMemsetAsync(e, rank != 1 ? w : 0xee, bytes, s);
			if (rank == 0)
				CHECK(ncclSend(e, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "eager s");
			else if (rank == 1)
				CHECK(ncclRecv(e, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "eager r");
		} else {
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager ag after %d", it);
			cudaMemsetAsync(e, w, bytes, s);
		}
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (bad >= 0)
			continue;
		if ((strcmp(mode, "bystander") || rank > 0) && !fill_is(e, bytes, w, host))
			bad = it, fprintf(stderr, "rank %d it %d: eager bytes\n", rank, it);
		if (!strcmp(mode, "pingpong") || (!strcmp(mode, "bystander") && rank < 2)) {
			if (!fill_is(rank == 0 ? b : a, bytes, v, host))
				bad = it;
		} else if (!strcmp(mode, "self")) {
			if (!fill_is(rank == 0 ? b : a, bytes, v, host))
				bad = it;
		} else if (!strcmp(mode, "mixed") || !strcmp(mode, "mixedb") ||
			   !strcmp(mode, "grpcoll")) {
			if (!fill_is(a, bytes, v, host))
				bad = it, fprintf(stderr, "rank %d it %d: pipe\n", rank, it);
			for (int r = 0; r < n; r++)
				if (bad < 0 && !fill_is(y + r * bytes, bytes, 'A' + r + it % 40, host))
					bad = it, fprintf(stderr, "rank %d it %d: ag\n", rank, it);
			if (bad < 0 && !strcmp(mode, "mixed") &&
			    !fill_is(x, bytes, 'A' + 1 + it % 40, host))
				bad = it, fprintf(stderr, "rank %d it %d: bc\n", rank, it);
			if (bad < 0 && strcmp(mode, "mixed") &&
			    !fill_is(b, bytes, 'A' + (rank + n - 1) % n + it % 40, host))
				bad = it, fprintf(stderr, "rank %d it %d: ring\n", rank, it);
		}
	}
	CHECK(bad < 0, "%s rank %d: replay %d gave wrong results", mode, rank, bad);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "eager op after the replays");
	if (exec) {
		graph_free(exec, graph);
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Captured sends whose receives the peer replays later or groups
 * otherwise, which NCCL runs (its sends complete into its buffers):
 * "sendsend" (both ranks send, then receive, outside groups), "sepgrp"
 * (rank 0 captures two sends to 1, rank 1 one group of both receives),
 * "order3" (a send before an AllGather on rank 0, its receive after it
 * on rank 1: the send must fit the channel's captured slots, as NCCL's
 * must fit its buffers), "twographs" (rank 0's send and receive in two graphs,
 * rank 1's receive and send in one).  Before the slots had flags of their
 * own, each replay met its peer's replay of the same position, and these
 * failed at the op timeout.  Each replay carries new bytes; eager sends
 * and AllGathers run between replays. */
#define LATER_REPLAYS 30

static int capture_later(const char *mode, int rank, int n, ncclComm_t comm, cudaStream_t s,
			 char *a, char *b, char *y, size_t bytes, int part)
{
	int ok = 1;

	if (!strcmp(mode, "sendsend")) {
		ok &= ncclSend(a, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess;
		ok &= ncclRecv(b, bytes, ncclInt8, 1 - rank, comm, s) == ncclSuccess;
	} else if (!strcmp(mode, "sepgrp") && rank == 0) {
		ok &= ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
		ok &= ncclSend(a + bytes, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
	} else if (!strcmp(mode, "sepgrp")) {
		ok &= ncclGroupStart() == ncclSuccess;
		ok &= ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
		ok &= ncclRecv(b + bytes, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
		ok &= ncclGroupEnd() == ncclSuccess;
	} else if (!strcmp(mode, "order3")) {
		if (rank == 0)
			ok &= ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
		ok &= ncclAllGather(a, y, bytes, ncclInt8, comm, s) == ncclSuccess;
		if (rank == 1)
			ok &= ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
	} else if (!strcmp(mode, "twographs") && rank == 0) {
		if (part == 0)
			ok &= ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
		else
			ok &= ncclRecv(b, bytes, ncclInt8, 1, comm, s) == ncclSuccess;
	} else if (!strcmp(mode, "twographs") && part == 0) {
		ok &= ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
		ok &= ncclSend(a, bytes, ncclInt8, 0, comm, s) == ncclSuccess;
	}
	(void)n;
	return ok;
}

/* What rank `rank` holds in b after replay `it`: the peer's a. */
static int later_ok(const char *mode, int rank, int n, int it, const char *b, const char *y,
		    size_t bytes, char *host)
{
	int peer = 1 - rank;
	int ok = 1;

	if (!strcmp(mode, "sepgrp")) {
		if (rank == 1)
			ok = fill_is(b, bytes, 'a' + it % 20, host) &&
			     fill_is(b + bytes, bytes, 'A' + it % 20, host);
	} else if (!strcmp(mode, "order3")) {
		for (int r = 0; ok && r < n; r++)
			ok = fill_is(y + r * bytes, bytes, 'a' + r + it % 20, host);
		if (ok && rank == 1)
			ok = fill_is(b, bytes, 'a' + it % 20, host);
	} else {
		ok = fill_is(b, bytes, 'a' + peer + it % 20, host);
	}
	return ok;
}

int case_graph_later(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *mode = arg;
	/* sends that complete before their receives must fit the channel's
	 * captured slots: 4 x 44 KiB at 3 ranks in tests/run.sh's 256 MiB pool */
	size_t bytes = strcmp(mode, "order3") && strcmp(mode, "sendsend") ? MIB + 4096 + 7 :
									   128 * 1024 + 7;
	char *a = dev_alloc(2 * bytes, 0), *b = dev_alloc(2 * bytes, 0), *e = dev_alloc(bytes, 0);
	char *y, *host = malloc(bytes * n);
	int graphs = !strcmp(mode, "twographs") && rank == 0 ? 2 : 1, bad = -1;
	cudaGraphExec_t exec[2] = { NULL, NULL };
	cudaGraph_t graph[2] = { NULL, NULL };
	ncclComm_t comm;
	cudaStream_t s;

	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	y = dev_alloc(bytes * n, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	for (int g = 0; g < graphs; g++) {
		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture %d", g);
		CHECK(capture_later(mode, rank, n, comm, s, a, b, y, bytes, g), "%s: captured calls",
		      mode);
		CHECK(cudaStreamEndCapture(s, &graph[g]) == cudaSuccess, "end capture %d", g);
		CHECK(cudaGraphInstantiate(&exec[g], graph[g], 0) == cudaSuccess, "instantiate %d", g);
	}
	for (int it = 0; it < LATER_REPLAYS; it++) {
		cudaMemsetAsync(a, 'a' + rank + it % 20, bytes, s);
		cudaMemsetAsync(a + bytes, 'A' + rank + it % 20, bytes, s);
		cudaMemsetAsync(b, 0xee, 2 * bytes, s);
		for (int g = 0; g < graphs; g++)
			CHECK(cudaGraphLaunch(exec[g], s) == cudaSuccess, "launch %d.%d", it, g);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (bad < 0 && !later_ok(mode, rank, n, it, b, y, bytes, host))
			bad = it;
		/* eager traffic on the same channels between replays */
		if (it % 3 == 1) {
			cudaMemsetAsync(e, rank == 0 ? 0x5a : 0xee, bytes, s);
			if (rank < 2)
				CHECK((rank == 0 ? ncclSend(e, bytes, ncclInt8, 1, comm, s) :
						   ncclRecv(e, bytes, ncclInt8, 0, comm, s)) ==
					      ncclSuccess, "eager send/recv after %d", it);
			CHECK(cudaStreamSynchronize(s) == cudaSuccess, "eager sync %d", it);
			CHECK(rank > 1 || fill_is(e, bytes, 0x5a, host), "eager bytes after %d", it);
		} else if (it % 3 == 2) {
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager ag after %d", it);
		}
	}
	CHECK(bad < 0, "%s rank %d: replay %d gave wrong results", mode, rank, bad);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "eager op after the replays");
	for (int g = 0; g < graphs; g++) {
		graph_free(exec[g], graph[g]);
	}
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Many ranks in a small pool (24 in 256 MiB): the lane holds eager
 * channels but no captured ones.  Eager sends and receives work; a
 * captured group is refused with ncclInvalidUsage, nothing enqueued, and
 * the communicator stays usable. */
int case_graph_noroom(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = 1000;
	char *a = dev_alloc(bytes, 'a' + rank % 20), *b = dev_alloc(bytes, 0);
	char *host = malloc(bytes);
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;
	cudaGraph_t graph = NULL;
	ncclResult_t r;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);

	(void)arg;
	CHECK(ncclGroupStart() == ncclSuccess && ncclSend(a, bytes, ncclInt8, next, comm, s) ==
		      ncclSuccess && ncclRecv(b, bytes, ncclInt8, prev, comm, s) == ncclSuccess &&
		      ncclGroupEnd() == ncclSuccess,
	      "eager ring");
	CHECK(fill_is(b, bytes, 'a' + prev % 20, host), "eager ring: the bytes of rank %d", prev);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	ncclGroupStart();
	ncclSend(a, bytes, ncclInt8, next, comm, s);
	ncclRecv(b, bytes, ncclInt8, prev, comm, s);
	r = ncclGroupEnd();
	CHECK(r == ncclInvalidUsage, "captured ring refused: %d", r);
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	if (graph)
		cudaGraphDestroy(graph);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "the communicator still works");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* The n-th send of a channel matches its n-th receive in
 * execution order, as NCCL's do, also when the ranks put them in graphs
 * differently: "counts": rank 0 captures one send and replays it twice
 * per step, rank 1 captures both receives in one graph replayed once;
 * "split": rank 0 captures its two sends in two graphs, rank 1 one
 * receive replayed twice.  Each step must complete within 10 s with the
 * bytes of each send in order; a stuck step aborts (so the case ends). */
int case_graph_replays(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *mode = arg;
	size_t bytes = 8192;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *a = dev_alloc(bytes, 0), *b = dev_alloc(2 * bytes, 0), *host = malloc(bytes);
	cudaGraph_t g[2] = { NULL, NULL };
	cudaGraphExec_t exec[2] = { NULL, NULL };
	int graphs = !strcmp(mode, "split") && rank == 0 ? 2 : 1, stuck = 0, bad = -1;

	(void)n;
	for (int k = 0; k < graphs; k++) {
		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		if (rank == 0) {
			CHECK(ncclSend(a, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "send");
		} else {
			CHECK(ncclRecv(b, bytes, ncclInt8, 0, comm, s) == ncclSuccess, "recv");
			if (!strcmp(mode, "counts"))
				CHECK(ncclRecv(b + bytes, bytes, ncclInt8, 0, comm, s) == ncclSuccess,
				      "recv 2");
		}
		CHECK(cudaStreamEndCapture(s, &g[k]) == cudaSuccess, "end capture");
		CHECK(cudaGraphInstantiate(&exec[k], g[k], 0) == cudaSuccess, "instantiate");
	}
	for (int it = 0; it < 5 && !stuck; it++) {
		double t0;

		if (rank == 0) {
			for (int j = 0; j < 2; j++) {
				cudaMemsetAsync(a, 'a' + 2 * it + j, bytes, s);
				cudaGraphLaunch(exec[graphs == 2 ? j : 0], s);
			}
		} else {
			cudaMemsetAsync(b, 0xee, 2 * bytes, s);
			for (int j = 0; j < (!strcmp(mode, "counts") ? 1 : 2); j++) {
				cudaGraphLaunch(exec[0], s);
				if (strcmp(mode, "counts") && j == 0)
					cudaMemcpyAsync(b + bytes, b, bytes, cudaMemcpyDeviceToDevice, s);
			}
		}
		t0 = now_s();
		while (cudaStreamQuery(s) == cudaErrorNotReady && now_s() - t0 < 10)
			usleep(1000);
		if (cudaStreamQuery(s) == cudaErrorNotReady) {
			stuck = 1;
			break;
		}
		if (rank == 1 && bad < 0) {
			/* "split": b + bytes holds the first receive, b the second */
			int first = !strcmp(mode, "counts") ? 0 : 1;

			if (!fill_is(b + first * bytes, bytes, 'a' + 2 * it, host) ||
			    !fill_is(b + (1 - first) * bytes, bytes, 'a' + 2 * it + 1, host))
				bad = it;
		}
	}
	CHECK(!stuck, "%s rank %d: a step did not complete in 10 s", mode, rank);
	CHECK(bad < 0, "%s rank %d: step %d received other bytes", mode, rank, bad);
	if (stuck) {
		CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
		cudaStreamSynchronize(s);
	} else {
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	}
	for (int k = 0; k < graphs; k++) {
		graph_free(exec[k], g[k]);
	}
	free(host);
	return CHECK_SUMMARY();
}

/* Every rank captures one group that sends FUZZ_MSGS messages to every
 * rank (itself included) and receives as many from each, of sizes around
 * the captured chunk (45056 at 3 ranks in a 256 MiB pool: 0, 1, one
 * chunk less, exactly 1, 2, 4 (every slot) and 5 chunks, one more), and
 * replays it FUZZ_REPLAYS times with new bytes, checked each time. */
#define FUZZ_MSGS 3
#define FUZZ_REPLAYS 8

static const size_t fuzz_sizes[] = { 0, 1, 45055, 45056, 45057, 90112, 180224, 180225,
				     225280, 4096, 1 << 20 };
#define FUZZ_NS (sizeof(fuzz_sizes) / sizeof(fuzz_sizes[0]))

static size_t fuzz_size(int src, int dst, int m, int salt)
{
	return fuzz_sizes[(size_t)(src * 7 + dst * 3 + m * 5 + salt) % FUZZ_NS];
}

static int fuzz_val(int src, int dst, int m, int it)
{
	int v = (1 + src * 31 + dst * 7 + m * 3 + it * 11) & 0xff;

	return v == 0xee ? 0x11 : v;
}

int case_graph_fuzz(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const char *a = arg ? arg : "0";
	enum cudaStreamCaptureMode mode = a[0] == 'g' ? cudaStreamCaptureModeGlobal :
				     a[0] == 'r' ? cudaStreamCaptureModeRelaxed :
						   cudaStreamCaptureModeThreadLocal;
	int salt = atoi(a[0] == 'g' || a[0] == 'r' ? a + 1 : a);
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *sb[16][FUZZ_MSGS], *rb[16][FUZZ_MSGS], *host = malloc(1 << 20);
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	int bad = -1;

	for (int p = 0; p < n; p++)
		for (int m = 0; m < FUZZ_MSGS; m++) {
			sb[p][m] = dev_alloc(fuzz_size(rank, p, m, salt) + 1, 0);
			rb[p][m] = dev_alloc(fuzz_size(p, rank, m, salt) + 1, 0);
		}
	CHECK(cudaStreamBeginCapture(s, mode) == cudaSuccess, "capture");
	CHECK(ncclGroupStart() == ncclSuccess, "group");
	for (int p = 0; p < n; p++)
		for (int m = 0; m < FUZZ_MSGS; m++) {
			CHECK(ncclSend(sb[p][m], fuzz_size(rank, p, m, salt), ncclInt8, p, comm, s) ==
				      ncclSuccess, "send");
			CHECK(ncclRecv(rb[p][m], fuzz_size(p, rank, m, salt), ncclInt8, p, comm, s) ==
				      ncclSuccess, "recv");
		}
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; exec && it < FUZZ_REPLAYS; it++) {
		for (int p = 0; p < n; p++)
			for (int m = 0; m < FUZZ_MSGS; m++) {
				cudaMemsetAsync(sb[p][m], fuzz_val(rank, p, m, it),
						fuzz_size(rank, p, m, salt), s);
				cudaMemsetAsync(rb[p][m], 0xee, fuzz_size(p, rank, m, salt), s);
			}
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		drains_or_leave(s, 20, "a replay");
		for (int p = 0; bad < 0 && p < n; p++)
			for (int m = 0; bad < 0 && m < FUZZ_MSGS; m++)
				if (!fill_is(rb[p][m], fuzz_size(p, rank, m, salt),
					     fuzz_val(p, rank, m, it), host)) {
					bad = it;
					fprintf(stderr, "rank %d replay %d: from %d msg %d (%zu bytes) wrong\n",
						rank, it, p, m, fuzz_size(p, rank, m, salt));
				}
	}
	CHECK(bad < 0, "rank %d: replay %d received wrong bytes", rank, bad);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op after the replays");
	graph_free(exec, g);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Split children (colors rank % 2 of 4 ranks) capture a send/receive
 * exchange each; parent AllGathers and a parent captured exchange run
 * between the children's replays. */
int case_graph_split_p2p(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const size_t B = 300 * 1024 + 3;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s), kid = NULL;
	char *a = dev_alloc(B, 0), *b = dev_alloc(B, 0), *pa = dev_alloc(B, 0),
	     *pb = dev_alloc(B, 0), *host = malloc(B);
	cudaGraph_t g[2] = { NULL, NULL };
	cudaGraphExec_t exec[2] = { NULL, NULL };
	int kr = -1, kn = 0, bad = -1, pp = rank ^ 1;

	(void)arg;
	CHECK(ncclCommSplit(comm, rank % 2, rank, &kid, NULL) == ncclSuccess, "split");
	CHECK(ncclCommUserRank(kid, &kr) == ncclSuccess && ncclCommCount(kid, &kn) == ncclSuccess,
	      "child rank");
	for (int k = 0; k < 2; k++) {
		ncclComm_t c = k ? comm : kid;
		int peer = k ? pp : 1 - kr;

		CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
		      "capture");
		CHECK(ncclGroupStart() == ncclSuccess, "group");
		CHECK(ncclSend(k ? pa : a, B, ncclInt8, peer, c, s) == ncclSuccess, "send");
		CHECK(ncclRecv(k ? pb : b, B, ncclInt8, peer, c, s) == ncclSuccess, "recv");
		CHECK(ncclGroupEnd() == ncclSuccess, "group end");
		CHECK(cudaStreamEndCapture(s, &g[k]) == cudaSuccess, "end capture");
		CHECK(cudaGraphInstantiate(&exec[k], g[k], 0) == cudaSuccess, "instantiate");
	}
	for (int it = 0; it < 10; it++) {
		cudaMemsetAsync(a, 1 + rank + it, B, s);
		cudaMemsetAsync(pa, 101 + rank + it, B, s);
		CHECK(cudaGraphLaunch(exec[0], s) == cudaSuccess, "launch child");
		CHECK(cudaGraphLaunch(exec[1], s) == cudaSuccess, "launch parent");
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
		/* child peer 1 - kr is parent rank (1 - kr) * 2 + rank % 2 */
		if (bad < 0 && (!fill_is(b, B, 1 + (1 - kr) * 2 + rank % 2 + it, host) ||
				!fill_is(pb, B, 101 + pp + it, host)))
			bad = it;
		CHECK(allgather_ok(comm, s, rank, n, 4096 * 3 + 1), "parent ag %d", it);
		CHECK(allgather_ok(kid, s, kr, kn, 4096 * 3 + 1), "child ag %d", it);
	}
	CHECK(bad < 0, "rank %d: replay %d received wrong bytes", rank, bad);
	for (int k = 0; k < 2; k++)
		graph_free(exec[k], g[k]);
	CHECK(ncclCommDestroy(kid) == ncclSuccess, "destroy child");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

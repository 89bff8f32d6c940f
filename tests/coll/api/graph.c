/* graph.c - CUDA graphs, the basics: an AllGather, a Broadcast and a
 * send/receive ring captured and replayed 100 times with new inputs and
 * eager collectives between (graph), and 600 captured operations on one
 * communicator (graphmany).  The other graph_*.c files hold the rest:
 * captured sends and receives, collectives, failures, and one thread's
 * captures for several ranks.
 */

#include "api.h"

/* ---- CUDA graphs --------------------------------------------------------- */

/* Captured AllGather, Broadcast and a send/receive ring, replayed
 * REPLAYS times with new inputs each time and eager collectives in
 * between: every replay must give that replay's results. */
#define REPLAYS 100

static int graph_results_ok(const char *send, const char *recv, const char *ring, size_t bytes,
			    int rank, int n, int it, char *host)
{
	int ok = cudaMemcpy(host, recv, bytes * n, cudaMemcpyDeviceToHost) == cudaSuccess;

	for (size_t i = 0; ok && i < bytes * n; i++)
		ok = host[i] == (char)('A' + (int)(i / bytes) + it % 40);
	ok = ok && cudaMemcpy(host, send, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
	for (size_t i = 0; ok && i < bytes; i++)
		ok = host[i] == (char)('A' + 1 + it % 40); /* rank 1's, broadcast in place */
	ok = ok && cudaMemcpy(host, ring, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
	for (size_t i = 0; ok && i < bytes; i++)
		ok = host[i] == (char)('A' + 1 + it % 40); /* rank 1's bytes, passed on */
	(void)rank;
	return ok;
}

int case_graph(int rank, int n, const ncclUniqueId *id, void *arg)
{
	size_t bytes = MIB + 4096;
	char *send, *recv, *ring, *host = malloc(bytes * n);
	int next = (rank + 1) % n, prev = (rank + n - 1) % n, bad = -1;
	ncclComm_t comm;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;

	(void)arg;
	(void)prev;
	cudaSetDevice(test_device(rank));
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	send = dev_alloc(bytes, 0);
	recv = dev_alloc(bytes * n, 0);
	ring = dev_alloc(bytes, 0);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op before the capture");
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	CHECK(ncclAllGather(send, recv, bytes, ncclInt8, comm, s) == ncclSuccess, "captured op");
	CHECK(ncclBroadcast(send, send, bytes, ncclInt8, 1, comm, s) == ncclSuccess, "captured bcast");
	/* after the broadcast every rank's send holds rank 1's bytes: the ring
	 * passes them on */
	CHECK(ncclGroupStart() == ncclSuccess, "group");
	CHECK(ncclSend(send, bytes, ncclInt8, next, comm, s) == ncclSuccess, "captured send");
	CHECK(ncclRecv(ring, bytes, ncclInt8, prev, comm, s) == ncclSuccess, "captured recv");
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
	cudaMemcpy(host, recv, bytes * n, cudaMemcpyDeviceToHost);
	CHECK(host[0] == 0 && host[bytes * n - 1] == 0, "nothing ran during capture");
	CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
	CHECK(allgather_ok(comm, s, rank, n, 5000), "eager op between capture and first launch");
	for (int it = 0; it < REPLAYS; it++) {
		cudaMemsetAsync(send, 'A' + rank + it % 40, bytes, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		/* an eager op queued right behind the replay, no host sync */
		if (it % 10 == 4)
			CHECK(allgather_ok(comm, s, rank, n, 2 * MIB + 1), "eager op right after "
			      "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (bad < 0 && !graph_results_ok(send, recv, ring, bytes, rank, n, it, host))
			bad = it;
		if (it % 10 == 9)
			CHECK(allgather_ok(comm, s, rank, n, 3 * 4096 + 1), "eager op after replay %d",
			      it);
	}
	CHECK(bad < 0, "replay %d gave wrong results", bad);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "eager op after the replays");
	graph_free(exec, graph);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(host);
	return CHECK_SUMMARY();
}

/* Many captured operations on one communicator (more than a page of the
 * gate words replays had until session 33 held, 512): a chain of ncclMax
 * AllReduces, each reading the one before, replayed with new inputs.
 * Its many slot-flag waits a replay must not each wait out a sleep of
 * the emulation's stream wait (50 ms: a replay of 1200 such waits took
 * 60 s, and the case timed out). */
#define MANY_OPS 600

int case_graph_many(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { B = 64 };
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	char *chain = dev_alloc((size_t)B * (MANY_OPS + 1), 0), host[B];
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	int bad = -1;

	(void)arg;
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	for (int k = 0; k < MANY_OPS; k++)
		if (ncclAllReduce(chain + k * B, chain + (k + 1) * B, B, ncclInt8, ncclMax, comm, s) !=
		    ncclSuccess) {
			CHECK(0, "captured AllReduce %d", k);
			break;
		}
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; exec && it < 3 && bad < 0; it++) {
		cudaMemsetAsync(chain, 0, (size_t)B * (MANY_OPS + 1), s);
		cudaMemsetAsync(chain, 10 * it + rank + 1, B, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		cudaMemcpy(host, chain + (size_t)MANY_OPS * B, B, cudaMemcpyDeviceToHost);
		for (int b = 0; b < B; b++)
			if (host[b] != (char)(10 * it + n))
				bad = it;
	}
	CHECK(bad < 0, "replay %d: the chain's end is wrong", bad);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "eager op after the replays");
	graph_free(exec, g);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

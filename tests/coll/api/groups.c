/* groups.c - ncclGroupStart and ncclGroupEnd: a group's collectives start
 * at its end, and ncclGroupSimulateEnd's estimates (grouporder); a call
 * that fails inside a group (grouperr*); groups whose streams cannot meet
 * or mix captured and uncaptured ones (groupmeet*, groupmixcap); and
 * captured groups, held to their end, communicators in any order
 * (groupcapture, groupcapmix, groupcapstreams, groupcapend).
 */

#include "api.h"

/* ---- a group's collectives start at its end ----------------------------- */

static void CUDART_CB nap(void *ms)
{
	usleep((useconds_t)(uintptr_t)ms * 1000);
}

/* The estimate of a simulated group of calls on comm (SIM_*). */
enum { SIM_AR = 1, SIM_AG = 2, SIM_P2P = 4 };

static float simulate(ncclComm_t comm, unsigned what, float *in, float *out, float *all,
		      size_t n, int rank, int nranks, cudaStream_t s)
{
	ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
	int peer = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;

	ncclGroupStart();
	if (what & SIM_AR)
		ncclAllReduce(in, out, n, ncclFloat, ncclSum, comm, s);
	if (what & SIM_AG)
		ncclAllGather(in, all, n, ncclFloat, comm, s);
	if (what & SIM_P2P) {
		ncclSend(in, n, ncclFloat, peer, comm, s);
		ncclRecv(out, n, ncclFloat, from, comm, s);
	}
	if (ncclGroupSimulateEnd(&sim) != ncclSuccess)
		return -2;
	return sim.estimatedTime;
}

/* ncclGroupSimulateEnd's estimate (core/coll/estimate.c): the pool's time
 * for what the group held, summed over its calls, growing with their
 * sizes; none for a group that held nothing (the real library's
 * NCCL_UNDEF_FLOAT, or 0 without one). */
static void check_estimates(ncclComm_t comm, float *in, float *out, float *all, size_t n,
			   float both, int rank, int nranks, cudaStream_t s)
{
	float ar = simulate(comm, SIM_AR, in, out, all, n, rank, nranks, s);
	float ag = simulate(comm, SIM_AG, in, out, all, n, rank, nranks, s);
	float half = simulate(comm, SIM_AR, in, out, all, n / 2, rank, nranks, s);
	float p2p = simulate(comm, SIM_P2P, in, out, all, n, rank, nranks, s);
	float none = simulate(comm, 0, in, out, all, n, rank, nranks, s);

	CHECK(ar > 0 && ag > 0 && p2p > 0, "estimates: AllReduce %g, AllGather %g, send/recv %g us",
	      ar, ag, p2p);
	CHECK(fabsf(both - (ar + ag)) <= 1e-3f * both, "a group's estimate is its calls' sum: "
	      "%g against %g + %g", both, ar, ag);
	CHECK(half > 0 && half < ar, "half the message, less time: %g against %g", half, ar);
	CHECK(none <= 0, "an empty simulated group: %g (NCCL_UNDEF_FLOAT or 0)", none);
}

/* NCCL enqueues a group's operations at ncclGroupEnd: what the caller puts
 * on their streams between a call and the end runs first.  Here each
 * rank's input is rewritten after the calls, behind a 50 ms host function
 * so that a collective that started early reads the old input, on two
 * user streams (AllReduce on one, AllGather on the other; the group ends
 * once both streams got there).  A PreMulSum operator destroyed inside the
 * group, after the call that names it, still scales it (NCCL resolves the
 * operator at the call).  Then a simulated group (ncclGroupSimulateEnd),
 * which runs nothing: its AllReduce leaves the output as it was, and the
 * communicator goes on with the next collective in step. */
int case_group_order(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { N = 4096 };
	float h[N], *in = (float *)dev_alloc(N * sizeof(float), 0);
	float *sum = (float *)dev_alloc(N * sizeof(float), 0);
	float *all = (float *)dev_alloc((size_t)N * n * sizeof(float), 0);
	cudaStream_t s, t;
	ncclComm_t comm = join(rank, n, id, &s);
	ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
	float three = 3.0f;
	ncclRedOp_t pms;
	int bad = 0;

	(void)arg;
	cudaStreamCreate(&t);
	for (int i = 0; i < N; i++)
		h[i] = 1;
	cudaMemcpyAsync(in, h, sizeof(h), cudaMemcpyHostToDevice, s);
	cudaStreamSynchronize(s);
	for (int i = 0; i < N; i++)
		h[i] = (float)(rank + 2);
	CHECK(ncclGroupStart() == ncclSuccess, "group");
	CHECK(ncclAllReduce(in, sum, N, ncclFloat, ncclSum, comm, s) == ncclSuccess, "AllReduce");
	CHECK(ncclAllGather(in, all, N, ncclFloat, comm, t) == ncclSuccess, "AllGather");
	cudaLaunchHostFunc(s, nap, (void *)(uintptr_t)50);
	cudaMemcpyAsync(in, h, sizeof(h), cudaMemcpyHostToDevice, s);
	cudaLaunchHostFunc(t, nap, (void *)(uintptr_t)50);
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	cudaStreamSynchronize(s);
	cudaStreamSynchronize(t);
	cudaMemcpy(h, sum, sizeof(h), cudaMemcpyDeviceToHost);
	for (int i = N - 1; i >= 0; i--)
		if (h[i] != (float)(n * (n + 3)) / 2) /* sum of rank + 2 */
			bad = i + 1;
	CHECK(!bad, "AllReduce read the input from before the group's end ([%d] = %g)",
	      bad - 1, bad ? h[bad - 1] : 0.0f);
	for (int p = 0; p < n; p++) {
		cudaMemcpy(h, all + (size_t)p * N, sizeof(h), cudaMemcpyDeviceToHost);
		CHECK(h[0] == (float)(p + 2) && h[N - 1] == (float)(p + 2),
		      "AllGather slice %d: %g, want %d", p, h[0], p + 2);
	}
	CHECK(ncclRedOpCreatePreMulSum(&pms, &three, ncclFloat, ncclScalarHostImmediate, comm) ==
	      ncclSuccess, "PreMulSum");
	CHECK(ncclGroupStart() == ncclSuccess, "group with a PreMulSum");
	CHECK(ncclAllReduce(in, sum, N, ncclFloat, pms, comm, s) == ncclSuccess, "AllReduce");
	CHECK(ncclRedOpDestroy(pms, comm) == ncclSuccess, "destroyed before the group's end");
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	cudaStreamSynchronize(s);
	cudaMemcpy(h, sum, sizeof(h), cudaMemcpyDeviceToHost);
	CHECK(h[0] == 3.0f * (float)(n * (n + 3)) / 2 && h[N - 1] == h[0],
	      "PreMulSum AllReduce: %g, want %g", h[0], 3.0 * (n * (n + 3)) / 2);
	cudaMemset(sum, 0, N * sizeof(float));
	cudaDeviceSynchronize();
	CHECK(ncclGroupStart() == ncclSuccess, "group to simulate");
	CHECK(ncclAllReduce(in, sum, N, ncclFloat, ncclSum, comm, s) == ncclSuccess, "AllReduce");
	CHECK(ncclAllGather(in, all, N, ncclFloat, comm, t) == ncclSuccess, "AllGather");
	CHECK(ncclGroupSimulateEnd(&sim) == ncclSuccess, "simulated end");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess && cudaStreamSynchronize(t) == cudaSuccess,
	      "the streams complete");
	CHECK(all_bytes((const char *)sum, N * sizeof(float), 0),
	      "the simulated group's AllReduce wrote its output");
	check_estimates(comm, in, sum, all, N, sim.estimatedTime, rank, n, s);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "a collective after the simulated group");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaStreamDestroy(t);
	return CHECK_SUMMARY();
}

/* ---- a failed call inside a group ---------------------------------------- */

/* A send to and a receive from the other rank and an AllGather in a
 * group; `bad`: one more call, which fails its argument check.  Returns
 * what ncclGroupEnd returned. */
static ncclResult_t group_with(ncclComm_t comm, cudaStream_t s, int rank, int bad, char *send,
			       char *recv, char *all)
{
	int peer = 1 - rank;

	ncclGroupStart();
	CHECK(ncclAllGather(send, all, 4096, ncclInt8, comm, s) == ncclSuccess, "AllGather");
	CHECK(ncclSend(send, 4096, ncclInt8, peer, comm, s) == ncclSuccess, "send");
	CHECK(ncclRecv(recv, 4096, ncclInt8, peer, comm, s) == ncclSuccess, "receive");
	if (bad)
		CHECK(ncclAllGather(send, all, 4096, (ncclDataType_t)99, comm, s) ==
			      ncclInvalidArgument, "bad datatype refused");
	return ncclGroupEnd();
}

/* NCCL (group.cc) records the error of a call that fails inside a group
 * and, at the outermost ncclGroupEnd, drops the group's operations and
 * returns that error; the communicator stays usable.  2 ranks; "all":
 * both make the bad call, so both drop the AllGather and the send/receive
 * pair and go on;
 * "one": only rank 1 does, and rank 0, whose receive never comes, is
 * released by the operation timeout instead of hanging. */
int case_group_error(int rank, int n, const ncclUniqueId *id, void *arg)
{
	int every = !strcmp(arg, "all"), peer = 1 - rank;
	char *send = dev_alloc(4096, 'a' + rank), *recv = dev_alloc(4096, 0);
	char *all = dev_alloc(4096 * (size_t)n, 0);
	ncclResult_t r, e = ncclSuccess;
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);

	r = group_with(comm, s, rank, every || rank == 1, send, recv, all);
	CHECK(r == (every || rank == 1 ? ncclInvalidArgument : ncclSuccess),
	      "rank %d: group end returned %d", rank, r);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream completes");
	if (!every) {
		/* rank 0 waits for a receive that was dropped */
		CHECK(wait_error(comm, &e, 30) >= 0, "rank %d: the communicator fails: %d", rank, e);
		CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
		return CHECK_SUMMARY();
	}
	CHECK(all_bytes(recv, 4096, 0), "the failed group's receive was dropped");
	CHECK(all_bytes(all, 4096 * (size_t)n, 0), "and its AllGather");
	/* errors of an inner group come out at the outermost end, once */
	ncclGroupStart();
	ncclGroupStart();
	CHECK(ncclSend(send, 4096, ncclInt8, n, comm, s) == ncclInvalidArgument, "bad peer");
	CHECK(ncclGroupEnd() == ncclSuccess, "inner group end");
	CHECK(ncclGroupEnd() == ncclInvalidArgument, "outer group end");
	/* a NULL communicator inside a group fails its end as well */
	ncclGroupStart();
	CHECK(ncclAllGather(send, all, 4096, ncclInt8, NULL, s) == ncclInvalidArgument,
	      "NULL communicator");
	CHECK(ncclGroupEnd() == ncclInvalidArgument, "its group's end");
	CHECK(group_with(comm, s, rank, 0, send, recv, all) == ncclSuccess, "a good group after");
	CHECK(cudaStreamSynchronize(s) == cudaSuccess && all_bytes(recv, 4096, 'a' + peer),
	      "its receive delivered");
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess,
	      "the communicator is healthy: %d", e);
	CHECK(allgather_ok(comm, s, rank, n, MIB), "and works");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaFree(send);
	cudaFree(recv);
	cudaFree(all);
	return CHECK_SUMMARY();
}

/* ---- a group whose streams cannot meet, captured and uncaptured calls ---- */

/* Two AllReduces held on two streams; rank 0 starts capturing the first
 * stream before the end (ncclInvalidUsage: the call was not made for a
 * graph), or destroys the second (the end cannot make the first wait for
 * it).  Neither may run on rank 0 then, or rank 1 would pair its
 * AllReduce n with rank 0's n + 1: the communicator fails on both ranks,
 * and nothing hangs.  The destroyed stream is for the emulation only:
 * CUDA leaves using a destroyed stream undefined, and the driver faults
 * (tests/gpu/accept.sh runs the capture variant). */
int case_group_meet_fail(int rank, int n, const ncclUniqueId *id, void *arg)
{
	char *a = dev_alloc(4096, 1), *b = dev_alloc(4096, 0);
	char *c = dev_alloc(4096, 2), *d = dev_alloc(4096, 0);
	ncclResult_t r, e = ncclSuccess;
	cudaGraph_t g = NULL;
	cudaStream_t s, t;
	ncclComm_t comm = join(rank, n, id, &s);

	int destroy = arg != NULL;

	cudaStreamCreate(&t);
	ncclGroupStart();
	/* rank 1 may come to its calls after rank 0 failed the communicator */
	r = ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s);
	CHECK(r == ncclSuccess || (rank && r == ncclRemoteError), "AllReduce: %d", r);
	r = ncclAllReduce(c, d, 4096, ncclInt8, ncclSum, comm, t);
	CHECK(r == ncclSuccess || (rank && r == ncclRemoteError), "AllReduce 2: %d", r);
	if (rank == 0 && destroy)
		cudaStreamDestroy(t);
	else if (rank == 0)
		cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
	r = ncclGroupEnd();
	if (rank == 0) {
		CHECK(r == (destroy ? ncclUnhandledCudaError : ncclInvalidUsage),
		      "rank 0: group end returned %d", r);
		if (!destroy)
			cudaStreamEndCapture(s, &g);
		if (g)
			cudaGraphDestroy(g);
		CHECK(all_bytes(b, 4096, 0) && all_bytes(d, 4096, 0), "rank 0 ran nothing");
	}
	CHECK(wait_error(comm, &e, 20) >= 0 && e != ncclSuccess,
	      "rank %d: the communicator fails: %d", rank, e);
	cudaGetLastError();
	if (rank == 0 && destroy)
		t = s;
	CHECK(cudaStreamSynchronize(t) == cudaSuccess, "rank %d: its streams complete", rank);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	if (t != s)
		cudaStreamDestroy(t);
	return CHECK_SUMMARY();
}

/* As NCCL: within a group the streams given to one communicator are all
 * uncaptured or all captured by the same graph; the call that mixes them
 * is refused, and fails the group.  The communicator stays usable. */
int case_group_mixed_capture(int rank, int n, const ncclUniqueId *id, void *arg)
{
	char *a = dev_alloc(4096, 1), *b = dev_alloc(4096, 0);
	cudaGraph_t g = NULL;
	cudaStream_t s, t;
	ncclComm_t comm = join(rank, n, id, &s);

	(void)arg;
	cudaStreamCreate(&t);
	ncclGroupStart();
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s) == ncclSuccess, "AllReduce");
	CHECK(cudaStreamBeginCapture(t, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture");
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, t) == ncclInvalidUsage,
	      "a captured call after an uncaptured one is refused");
	CHECK(ncclGroupEnd() == ncclInvalidUsage, "and fails the group");
	CHECK(cudaStreamEndCapture(t, &g) == cudaSuccess, "end capture");
	cudaGraphDestroy(g);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess && all_bytes(b, 4096, 0),
	      "the group's AllReduce was dropped");
	ncclGroupStart();
	CHECK(cudaStreamBeginCapture(t, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture");
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, t) == ncclSuccess,
	      "captured AllReduce");
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s) == ncclInvalidUsage,
	      "an uncaptured call after a captured one is refused");
	CHECK(ncclGroupEnd() == ncclInvalidUsage, "and fails the group");
	CHECK(cudaStreamEndCapture(t, &g) == cudaSuccess, "end capture");
	cudaGraphDestroy(g);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "the communicator works after");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaStreamDestroy(t);
	return CHECK_SUMMARY();
}

/* ---- a captured group: held to its end, communicators in any order ----- */

#define CAP_REPLAYS 20
#define CAP_BYTES 4096

/* What rank r feeds buffer k at replay `it`, and the int8 sum over n ranks. */
static int cap_byte(int r, int k, int it)
{
	return (r * 7 + k * 3 + it) % 50;
}

static unsigned char cap_sum(int n, int k, int it)
{
	int sum = 0;

	for (int r = 0; r < n; r++)
		sum += cap_byte(r, k, it);
	return (unsigned char)sum;
}

static int cap_sums_ok(char *const out[3], int n, int it)
{
	unsigned char host[CAP_BYTES];

	for (int k = 0; k < 3; k++) {
		if (cudaMemcpy(host, out[k], CAP_BYTES, cudaMemcpyDeviceToHost) != cudaSuccess)
			return 0;
		for (int i = 0; i < CAP_BYTES; i++)
			if (host[i] != (it < 0 ? 0 : cap_sum(n, k, it)))
				return 0;
	}
	return 1;
}

/* One captured group: AllReduces on two communicators, which even ranks
 * call in one order and odd ranks in the other, plus a second AllReduce
 * of the first communicator on a second captured stream.  As with NCCL,
 * they run at the group's end, each communicator's on its own streams:
 * recorded in call order on one stream, the replays deadlocked (each
 * rank waited on the communicator its peers had not reached).  Replayed
 * with new inputs each time. */
int case_group_capture(int rank, int n, const ncclUniqueId *id, void *arg)
{
	cudaStream_t s, t;
	ncclComm_t a = join(rank, n, id, &s), b = NULL;
	char *in[3], *out[3];
	cudaGraph_t g = NULL;
	cudaGraphExec_t exec = NULL;
	cudaEvent_t fork, back;
	int bad = -1;

	(void)arg;
	CHECK(ncclCommSplit(a, 0, rank, &b, NULL) == ncclSuccess && b, "split");
	cudaStreamCreate(&t);
	cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
	cudaEventCreateWithFlags(&back, cudaEventDisableTiming);
	for (int k = 0; k < 3; k++) {
		in[k] = dev_alloc(CAP_BYTES, 0);
		out[k] = dev_alloc(CAP_BYTES, 0);
	}
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	cudaEventRecord(fork, s);
	cudaStreamWaitEvent(t, fork, 0);
	CHECK(ncclGroupStart() == ncclSuccess, "group start");
	for (int i = 0; i < 2; i++) {
		int k = (i + rank) % 2; /* buffer k goes with communicator k */

		CHECK(ncclAllReduce(in[k], out[k], CAP_BYTES, ncclInt8, ncclSum, k ? b : a, s) ==
			      ncclSuccess, "AllReduce on communicator %d", k);
	}
	CHECK(ncclAllReduce(in[2], out[2], CAP_BYTES, ncclInt8, ncclSum, a, t) == ncclSuccess,
	      "AllReduce on the second stream");
	CHECK(ncclGroupEnd() == ncclSuccess, "group end");
	cudaEventRecord(back, t);
	cudaStreamWaitEvent(s, back, 0);
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	CHECK(cap_sums_ok(out, n, -1), "nothing ran during the capture");
	CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; exec && it < CAP_REPLAYS && bad < 0; it++) {
		for (int k = 0; k < 3; k++)
			cudaMemsetAsync(in[k], cap_byte(rank, k, it), CAP_BYTES, s);
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", it);
		CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", it);
		if (!cap_sums_ok(out, n, it))
			bad = it;
	}
	CHECK(bad < 0, "replay %d gave wrong sums", bad);
	CHECK(allgather_ok(a, s, rank, n, 4096) && allgather_ok(b, t, rank, n, 4096),
	      "both communicators work after the replays");
	graph_free(exec, g);
	CHECK(ncclCommDestroy(b) == ncclSuccess && ncclCommDestroy(a) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

/* A communicator used eagerly while a capture of its calls is open (NCCL
 * allows it): a captured group's AllReduce and send/receive, then an
 * eager group's on another stream, which rank 1 makes after its capture
 * ended and rank 0 before.  The captured work ran on streams that joined
 * the capture until it ends: the eager group must not wait on them (it
 * failed, and broke the application's capture).  Then the graph replays. */
int case_group_capture_mixed(int rank, int n, const ncclUniqueId *id, void *arg)
{
	char *a = dev_alloc(4096, 1), *b = dev_alloc(4096, 0), *c = dev_alloc(4096, 0);
	char *ring = dev_alloc(4096, 0), *eager_ring = dev_alloc(4096, 0);
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;
	cudaGraphExec_t exec = NULL;
	cudaGraph_t g = NULL;
	cudaStream_t s, t;
	ncclComm_t comm = join(rank, n, id, &s);

	(void)arg;
	cudaStreamCreate(&t);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture");
	ncclGroupStart();
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s) == ncclSuccess, "captured");
	CHECK(ncclSend(a, 4096, ncclInt8, next, comm, s) == ncclSuccess &&
		      ncclRecv(ring, 4096, ncclInt8, prev, comm, s) == ncclSuccess, "captured p2p");
	CHECK(ncclGroupEnd() == ncclSuccess, "captured group");
	if (rank == 1)
		CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "rank 1 ends its capture");
	ncclGroupStart();
	CHECK(ncclAllReduce(a, c, 4096, ncclInt8, ncclSum, comm, t) == ncclSuccess, "eager");
	CHECK(ncclSend(a, 4096, ncclInt8, next, comm, t) == ncclSuccess &&
		      ncclRecv(eager_ring, 4096, ncclInt8, prev, comm, t) == ncclSuccess, "eager p2p");
	CHECK(ncclGroupEnd() == ncclSuccess, "eager group, the capture open on rank 0");
	CHECK(cudaStreamSynchronize(t) == cudaSuccess && all_bytes_on(c, 4096, n, t) &&
		      all_bytes_on(eager_ring, 4096, 1, t), "the eager group's results");
	if (rank == 0)
		CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "rank 0 ends its capture");
	CHECK(all_bytes(b, 4096, 0) && all_bytes(ring, 4096, 0), "nothing captured ran");
	CHECK(g && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
	for (int it = 0; exec && it < 3; it++)
		CHECK(cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) ==
			      cudaSuccess && all_bytes(b, 4096, n) && all_bytes(ring, 4096, 1),
		      "replay %d", it);
	graph_free(exec, g);
	CHECK(allgather_ok(comm, t, rank, n, 4096), "the communicator works after");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	cudaStreamDestroy(t);
	return CHECK_SUMMARY();
}

/* A capture invalidated (by a wait on an event from outside it) but not
 * ended holds its streams still: another capture on the communicator must
 * get other ones (it took them for idle, CUDA refused to merge the two
 * captures, and the communicator failed).  Then 65 captures open at once:
 * past the communicator's 64 pairs the call fails, the communicator does
 * not. */
int case_group_capture_streams(int rank, int n, const ncclUniqueId *id, void *arg)
{
	enum { K = 65 };
	char *a = dev_alloc(4096, 1), *b = dev_alloc(4096, 0), *b2 = dev_alloc(4096, 0);
	cudaStream_t s, s2, u, *st = calloc(K, sizeof(*st));
	cudaGraph_t g = NULL, g2 = NULL, *gs = calloc(K, sizeof(*gs));
	cudaGraphExec_t x = NULL;
	ncclComm_t comm = join(rank, n, id, &s);
	ncclResult_t e = ncclSuccess;
	cudaEvent_t ev;
	int made = 0;

	(void)arg;
	cudaStreamCreate(&s2);
	cudaStreamCreate(&u);
	cudaEventCreate(&ev);
	cudaEventRecord(ev, u);
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture 1");
	ncclGroupStart();
	CHECK(ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, s) == ncclSuccess, "AllReduce 1");
	CHECK(ncclGroupEnd() == ncclSuccess, "group 1");
	cudaStreamWaitEvent(s, ev, 0); /* invalidates capture 1 */
	CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed) == cudaSuccess, "capture 2");
	ncclGroupStart();
	CHECK(ncclAllReduce(a, b2, 4096, ncclInt8, ncclSum, comm, s2) == ncclSuccess, "AllReduce 2");
	CHECK(ncclGroupEnd() == ncclSuccess, "group 2, in a valid capture");
	CHECK(cudaStreamEndCapture(s2, &g2) == cudaSuccess, "end capture 2");
	CHECK(cudaStreamEndCapture(s, &g) != cudaSuccess, "capture 1 was invalidated");
	cudaGetLastError();
	CHECK(g2 && cudaGraphInstantiate(&x, g2, 0) == cudaSuccess && cudaGraphLaunch(x, s2) ==
		      cudaSuccess && cudaStreamSynchronize(s2) == cudaSuccess &&
		      all_bytes(b2, 4096, n), "capture 2 replays");
	for (int i = 0; i < K && st && gs; i++) {
		ncclResult_t r;

		cudaStreamCreate(&st[i]);
		cudaStreamBeginCapture(st[i], cudaStreamCaptureModeRelaxed);
		ncclGroupStart();
		r = ncclAllReduce(a, b, 4096, ncclInt8, ncclSum, comm, st[i]);
		r = ncclGroupEnd() ? ncclSystemError : r;
		made += r == ncclSuccess;
	}
	for (int i = 0; i < K && st && gs; i++) {
		cudaStreamEndCapture(st[i], &gs[i]);
		if (gs[i])
			cudaGraphDestroy(gs[i]);
		cudaStreamDestroy(st[i]);
	}
	cudaGetLastError();
	CHECK(made == K - 1, "%d of %d captures open at once took a collective", made, K);
	CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess,
	      "the communicator did not fail: %d", e);
	graph_free(x, g2);
	CHECK(allgather_ok(comm, s, rank, n, 4096), "the communicator works after");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	free(st);
	free(gs);
	return CHECK_SUMMARY();
}

/* A capture that ends between a call and the group's end: the call was
 * made for the graph, which no longer takes work.  ncclInvalidUsage, and
 * the communicator fails (a peer that captured it would otherwise pair
 * its next operation with this one); nothing runs, nothing hangs.  (The
 * rank that fails it second may find it failed at its call or its end.) */
int case_group_capture_ended(int rank, int n, const ncclUniqueId *id, void *arg)
{
	char *x = dev_alloc(4096, 1), *y = dev_alloc(4096, 0);
	cudaStream_t s;
	ncclComm_t comm = join(rank, n, id, &s);
	cudaGraph_t g = NULL;
	ncclResult_t e = ncclSuccess, r;

	(void)arg;
	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
	ncclGroupStart();
	r = ncclAllReduce(x, y, 4096, ncclInt8, ncclSum, comm, s);
	CHECK(r == ncclSuccess || r == ncclRemoteError, "AllReduce: %d", r);
	CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
	r = ncclGroupEnd();
	CHECK(r == ncclInvalidUsage || r == ncclRemoteError, "the group's end refuses it: %d", r);
	CHECK(wait_error(comm, &e, 20) >= 0 && e != ncclSuccess, "the communicator fails: %d", e);
	CHECK(cudaStreamSynchronize(s) == cudaSuccess && all_bytes(y, 4096, 0), "nothing ran");
	if (g)
		cudaGraphDestroy(g);
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	return CHECK_SUMMARY();
}

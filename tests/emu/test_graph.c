/* test_graph.c - stream capture of a fork/join pattern with memops and
 * copies, replayed many times, and the capture error cases. */
#include "check.h"

#include <stdatomic.h>
#include <string.h>

#define N 1024
#define REPLAYS 100

static atomic_int host_calls;

static void count_call(void *arg)
{
	(void)arg;
	atomic_fetch_add(&host_calls, 1);
}

static CUdeviceptr dp(void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

struct bufs {
	uint32_t *src, *dst_b, *dst_c;	/* pinned host */
	CUdeviceptr a, b, c, d;		/* device */
	uint32_t *flag;			/* pinned, cross-branch handshake */
};

/*
 *   s0: H2D src->a, record fork
 *   s1: wait fork, WAIT flag == 1, D2D a->b, record j1
 *   s2: wait fork, D2D a->c, WRITE flag = 1, memset d, record j2
 *   s0: wait j1, wait j2, host func, D2H b->dst_b, D2H c->dst_c
 *
 * s1's wait node is captured before s2's write node: a sequential replay
 * would hang, the branches must run concurrently.
 */
static CUresult capture(CUstream s0, CUstream s1, CUstream s2,
			struct bufs *bf, CUgraph *graph)
{
	CUevent fork, j1, j2;
	CUstreamCaptureStatus st;
	cuuint64_t id = 0;

	cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING);
	cuEventCreate(&j1, CU_EVENT_DISABLE_TIMING);
	cuEventCreate(&j2, CU_EVENT_DISABLE_TIMING);

	CHECK_CU(cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_GLOBAL),
		 CUDA_SUCCESS);
	CHECK(cuStreamIsCapturing(s1, &st) == CUDA_SUCCESS &&
	      st == CU_STREAM_CAPTURE_STATUS_NONE, "s1 not capturing yet");
	cuMemcpyHtoDAsync(bf->a, bf->src, N * 4, s0);
	cuEventRecord(fork, s0);
	CHECK_CU(cuStreamWaitEvent(s1, fork, 0), CUDA_SUCCESS);
	CHECK_CU(cuStreamWaitEvent(s2, fork, 0), CUDA_SUCCESS);
	CHECK(cuStreamIsCapturing(s1, &st) == CUDA_SUCCESS &&
	      st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "s1 joined the capture");

	cuStreamWaitValue32(s1, dp(bf->flag), 1, CU_STREAM_WAIT_VALUE_EQ);
	cuMemcpyDtoDAsync(bf->b, bf->a, N * 4, s1);
	cuEventRecord(j1, s1);

	cuMemcpyDtoDAsync(bf->c, bf->a, N * 4, s2);
	cuStreamWriteValue32(s2, dp(bf->flag), 1, 0);
	cuMemsetD32Async(bf->d, 0xd00d, N, s2);
	cuEventRecord(j2, s2);

	cuStreamWaitEvent(s0, j1, 0);
	cuStreamWaitEvent(s0, j2, 0);
	CHECK_CU(cuLaunchHostFunc(s0, count_call, NULL), CUDA_SUCCESS);
	cuMemcpyDtoHAsync(bf->dst_b, bf->b, N * 4, s0);
	cuMemcpyDtoHAsync(bf->dst_c, bf->c, N * 4, s0);

	CHECK(cuStreamGetCaptureInfo(s2, &st, &id, NULL, NULL, NULL, NULL) ==
	      CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id,
	      "capture info of a forked stream");
	CHECK(atomic_load(&host_calls) == 0 && bf->dst_b[0] == 0,
	      "nothing ran during capture");
	CHECK_CU(cuStreamEndCapture(s0, graph), CUDA_SUCCESS);
	CHECK(cuStreamIsCapturing(s2, &st) == CUDA_SUCCESS &&
	      st == CU_STREAM_CAPTURE_STATUS_NONE, "capture over for s2");
	cuEventDestroy(fork);
	cuEventDestroy(j1);
	cuEventDestroy(j2);
	return CUDA_SUCCESS;
}

static int replay_ok(const struct bufs *bf, uint32_t seed)
{
	const uint32_t *d = (const uint32_t *)(uintptr_t)bf->d;
	int i;

	for (i = 0; i < N; i++)
		if (bf->dst_b[i] != seed + (uint32_t)i ||
		    bf->dst_c[i] != seed + (uint32_t)i || d[i] != 0xd00d)
			return 0;
	return *bf->flag == 1;
}

static void test_fork_join(CUstream s0, CUstream s1, CUstream s2,
			   CUstream other)
{
	struct bufs bf;
	CUgraph graph = NULL;
	CUgraphExec exec = NULL;
	int r, good = 0, i;

	cuMemHostAlloc((void **)&bf.src, N * 4, 0);
	cuMemHostAlloc((void **)&bf.dst_b, N * 4, 0);
	cuMemHostAlloc((void **)&bf.dst_c, N * 4, 0);
	cuMemHostAlloc((void **)&bf.flag, 64, 0);
	cuMemAlloc(&bf.a, N * 4);
	cuMemAlloc(&bf.b, N * 4);
	cuMemAlloc(&bf.c, N * 4);
	cuMemAlloc(&bf.d, N * 4);
	memset(bf.dst_b, 0, N * 4);

	capture(s0, s1, s2, &bf, &graph);
	CHECK_CU(cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
	/* The exec is a copy: the graph can go right away. */
	CHECK_CU(cuGraphDestroy(graph), CUDA_SUCCESS);

	for (r = 0; r < REPLAYS; r++) {
		uint32_t seed = (uint32_t)r * 100000u;

		for (i = 0; i < N; i++)
			bf.src[i] = seed + (uint32_t)i;
		*bf.flag = 0;
		memset(bf.dst_b, 0, N * 4);
		memset(bf.dst_c, 0, N * 4);
		/* on the launch stream: a plain memset of device memory may
		 * still run after the (non-blocking) stream read it */
		cuMemsetD32Async(bf.d, 0, N, r % 2 ? other : s0);
		if (cuGraphLaunch(exec, r % 2 ? other : s0) != CUDA_SUCCESS)
			continue;
		cuStreamSynchronize(r % 2 ? other : s0);
		good += replay_ok(&bf, seed);
	}
	CHECK(good == REPLAYS, "%d/%d replays produced the right data",
	      good, REPLAYS);
	CHECK(atomic_load(&host_calls) == REPLAYS,
	      "host func node ran once per replay (%d)",
	      atomic_load(&host_calls));

	/* Back-to-back launches queue behind each other; the handshake
	 * flag is reset in stream order between them. */
	*bf.flag = 0;
	for (r = 0; r < 10; r++) {
		cuGraphLaunch(exec, s0);
		cuStreamWriteValue32(s0, dp(bf.flag), 0, 0);
	}
	CHECK_CU(cuStreamSynchronize(s0), CUDA_SUCCESS);
	CHECK(atomic_load(&host_calls) == REPLAYS + 10,
	      "10 queued launches all ran");

	CHECK_CU(cuGraphExecDestroy(exec), CUDA_SUCCESS);
	CHECK_CU(cuGraphLaunch(exec, s0), CUDA_ERROR_INVALID_VALUE);
	cuMemFree(bf.a);
	cuMemFree(bf.b);
	cuMemFree(bf.c);
	cuMemFree(bf.d);
	cuMemFreeHost(bf.src);
	cuMemFreeHost(bf.dst_b);
	cuMemFreeHost(bf.dst_c);
	cuMemFreeHost(bf.flag);
}

static void slow(void *arg)
{
	sleep_ms(50);
	atomic_store((atomic_int *)arg, 1);
}

static void test_lifetime(CUstream s)
{
	atomic_int done = 0;
	CUgraph g;
	CUgraphExec exec;

	cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
	cuLaunchHostFunc(s, slow, &done);
	cuStreamEndCapture(s, &g);
	cuGraphInstantiate(&exec, g, 0);
	cuGraphLaunch(exec, s);
	CHECK_CU(cuGraphExecDestroy(exec), CUDA_SUCCESS);
	CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(atomic_load(&done) == 1, "exec destroyed while queued still ran");
}

static void test_errors(CUstream s0, CUstream s1)
{
	CUevent ev, outside;
	CUgraph g = (CUgraph)0x1;
	CUstreamCaptureStatus st;
	uint32_t *flag;

	cuEventCreate(&ev, 0);
	cuEventCreate(&outside, 0);
	cuMemHostAlloc((void **)&flag, 64, 0);

	CHECK_CU(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
		 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_CU(cuStreamEndCapture(s0, &g), CUDA_ERROR_ILLEGAL_STATE);
	CHECK_CU(cuStreamBeginCapture(s0, (CUstreamCaptureMode)7),
		 CUDA_ERROR_INVALID_VALUE);

	/* A fork that never joins back. */
	cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_GLOBAL);
	CHECK_CU(cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_GLOBAL),
		 CUDA_ERROR_ILLEGAL_STATE);
	cuEventRecord(ev, s0);
	cuStreamWaitEvent(s1, ev, 0);
	cuStreamWriteValue32(s1, dp(flag), 1, 0);
	CHECK_CU(cuStreamEndCapture(s1, &g),
		 CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
	CHECK_CU(cuStreamEndCapture(s0, &g),
		 CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
	CHECK(g == NULL, "no graph from an unjoined capture");
	CHECK(cuStreamIsCapturing(s1, &st) == CUDA_SUCCESS &&
	      st == CU_STREAM_CAPTURE_STATUS_NONE, "forked stream released");

	/* Synchronizing a capturing stream invalidates the capture. */
	cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_GLOBAL);
	CHECK_CU(cuStreamSynchronize(s0),
		 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK(cuStreamIsCapturing(s0, &st) == CUDA_SUCCESS &&
	      st == CU_STREAM_CAPTURE_STATUS_INVALIDATED, "capture invalidated");
	CHECK_CU(cuStreamWriteValue32(s0, dp(flag), 1, 0),
		 CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CHECK_CU(cuStreamEndCapture(s0, &g),
		 CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

	/* Depending on uncaptured work needs the external flag. */
	cuEventRecord(outside, s1);
	cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_GLOBAL);
	CHECK_CU(cuStreamWaitEvent(s0, outside, 0),
		 CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
	cuStreamEndCapture(s0, &g);
	cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_GLOBAL);
	CHECK_CU(cuStreamWaitEvent(s0, outside, CU_EVENT_WAIT_EXTERNAL),
		 CUDA_SUCCESS);
	CHECK_CU(cuEventRecordWithFlags(ev, s0, CU_EVENT_RECORD_EXTERNAL),
		 CUDA_SUCCESS);
	CHECK_CU(cuStreamEndCapture(s0, &g), CUDA_SUCCESS);
	CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
	CHECK_CU(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuEventRecordWithFlags(ev, s0, CU_EVENT_RECORD_EXTERNAL),
		 CUDA_ERROR_INVALID_VALUE);

	cuStreamSynchronize(s0);
	cuStreamSynchronize(s1);
	cuEventDestroy(ev);
	cuEventDestroy(outside);
	cuMemFreeHost(flag);
}

int main(void)
{
	CUcontext ctx;
	CUstream s0, s1, s2, other;

	check_watchdog(60);

	cuInit(0);
	cuDevicePrimaryCtxRetain(&ctx, 0);
	cuCtxSetCurrent(ctx);
	cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&other, CU_STREAM_NON_BLOCKING);

	test_fork_join(s0, s1, s2, other);
	test_lifetime(s1);
	test_errors(s0, s1);

	cuStreamDestroy(s0);
	cuStreamDestroy(s1);
	cuStreamDestroy(s2);
	cuStreamDestroy(other);
	return check_done();
}

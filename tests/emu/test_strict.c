/* test_strict.c - the emulation refuses what the CUDA driver documents as
 * forbidden, so that a caller doing it fails in CI and not first on a GPU:
 *
 * - CUDA calls from a host function or stream callback (cuLaunchHostFunc:
 *   "must not make any CUDA API calls ... may result in
 *   CUDA_ERROR_NOT_PERMITTED");
 * - "potentially unsafe" calls (allocation, registration, context
 *   synchronisation) during a capture that forbids them: the caller's own
 *   non-relaxed capture, or any thread's global capture while the caller's
 *   mode is global (cuStreamBeginCapture, cuThreadExchangeStreamCaptureMode);
 *   the call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the capture
 *   ends invalidated;
 * - work on the legacy stream while a blocking stream of its context
 *   captures: it would depend on the capture, so the driver refuses it
 *   (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) and the capture ends invalidated
 *   (seen on an H200: a test's cudaMemcpy broke its capture);
 * - an event recorded on a stream of another context than the one current
 *   at its creation ("hEvent and hStream must be from the same context",
 *   cuEventRecord: CUDA_ERROR_INVALID_HANDLE); a wait may cross contexts;
 * - with CUDAEMU_SERIAL_HOST_FNS=1, host functions of independent streams
 *   run one at a time ("may be serialized").
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>

/* ---- CUDA calls inside host functions ---- */

struct inside {
	CUstream other;
	CUresult query, alloc, sync;
};

static void host_calls_cuda(void *arg)
{
	struct inside *in = arg;
	CUdeviceptr d = 0;

	in->query = cuStreamQuery(in->other);
	in->alloc = cuMemAlloc(&d, 256);
	in->sync = cuCtxSynchronize();
	if (in->alloc == CUDA_SUCCESS)
		cuMemFree(d);
}

static void CUDA_CB callback_calls_cuda(CUstream st, CUresult status, void *arg)
{
	(void)st;
	(void)status;
	host_calls_cuda(arg);
}

static void test_host_fn_calls(CUstream a, CUstream b)
{
	struct inside fn = { .other = b }, cb = { .other = b };
	CUdeviceptr d = 0;

	CHECK_CU(cuLaunchHostFunc(a, host_calls_cuda, &fn), CUDA_SUCCESS);
	CHECK_CU(cuStreamSynchronize(a), CUDA_SUCCESS);
	CHECK(fn.query == CUDA_ERROR_NOT_PERMITTED, "cuStreamQuery in a host function: %s",
	      cu_name(fn.query));
	CHECK(fn.alloc == CUDA_ERROR_NOT_PERMITTED, "cuMemAlloc in a host function: %s",
	      cu_name(fn.alloc));
	CHECK(fn.sync == CUDA_ERROR_NOT_PERMITTED, "cuCtxSynchronize in a host function: %s",
	      cu_name(fn.sync));

	CHECK_CU(cuStreamAddCallback(a, callback_calls_cuda, &cb, 0), CUDA_SUCCESS);
	CHECK_CU(cuStreamSynchronize(a), CUDA_SUCCESS);
	CHECK(cb.query == CUDA_ERROR_NOT_PERMITTED && cb.alloc == CUDA_ERROR_NOT_PERMITTED,
	      "CUDA calls in a stream callback: %s, %s", cu_name(cb.query), cu_name(cb.alloc));

	/* the worker thread is itself again afterwards */
	CHECK_CU(cuMemAlloc(&d, 256), CUDA_SUCCESS);
	CHECK_CU(cuMemFree(d), CUDA_SUCCESS);
	CHECK_CU(cuStreamQuery(a), CUDA_SUCCESS);
}

/* ---- capture modes ---- */

struct other_thread {
	CUcontext ctx;
	CUstreamCaptureMode mode;
	CUresult alloc, reg, sync;
};

static void *unsafe_calls(void *arg)
{
	struct other_thread *t = arg;
	CUstreamCaptureMode mode = t->mode;
	static char page[4096] __attribute__((aligned(4096)));
	CUdeviceptr d = 0;

	cuCtxSetCurrent(t->ctx);
	cuThreadExchangeStreamCaptureMode(&mode);
	t->alloc = cuMemAlloc(&d, 256);
	if (t->alloc == CUDA_SUCCESS)
		cuMemFree(d);
	t->reg = cuMemHostRegister(page, sizeof(page), CU_MEMHOSTREGISTER_DEVICEMAP);
	if (t->reg == CUDA_SUCCESS)
		cuMemHostUnregister(page);
	t->sync = cuCtxSynchronize();
	return NULL;
}

/* Captures one memset on s in `mode` while another thread, in
 * `thread_mode`, allocates, registers and synchronises; returns what
 * cuStreamEndCapture said and fills *t. */
static CUresult capture_around(CUcontext ctx, CUstream s, CUdeviceptr buf,
			       CUstreamCaptureMode mode, CUstreamCaptureMode thread_mode,
			       struct other_thread *t)
{
	pthread_t th;
	CUgraph g = NULL;
	CUresult r;

	*t = (struct other_thread){ .ctx = ctx, .mode = thread_mode };
	CHECK_CU(cuStreamBeginCapture(s, mode), CUDA_SUCCESS);
	cuMemsetD8Async(buf, 1, 16, s);
	pthread_create(&th, NULL, unsafe_calls, t);
	pthread_join(th, NULL);
	r = cuStreamEndCapture(s, &g);
	if (g)
		cuGraphDestroy(g);
	return r;
}

/* A capture in `mode` during which this thread allocates and frees: allowed
 * (relaxed capture, or a thread that made itself relaxed), so the capture
 * stays intact. */
static void capture_allocating(CUstream s, CUdeviceptr buf, CUstreamCaptureMode mode)
{
	CUdeviceptr d;
	CUgraph g;

	CHECK_CU(cuStreamBeginCapture(s, mode), CUDA_SUCCESS);
	cuMemsetD8Async(buf, 1, 16, s);
	CHECK_CU(cuMemAlloc(&d, 256), CUDA_SUCCESS);
	CHECK_CU(cuMemFree(d), CUDA_SUCCESS);
	CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
	cuGraphDestroy(g);
}

static void test_capture_modes(CUcontext ctx, CUstream s)
{
	struct other_thread t;
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	CUdeviceptr buf, d = 0;
	CUgraph g = NULL;
	CUresult r;

	CHECK_CU(cuMemAlloc(&buf, 64), CUDA_SUCCESS);

	r = capture_around(ctx, s, buf, CU_STREAM_CAPTURE_MODE_GLOBAL,
			   CU_STREAM_CAPTURE_MODE_GLOBAL, &t);
	CHECK(t.alloc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
	      t.reg == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
	      t.sync == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
	      "global capture: another thread's alloc/register/sync refused (%s, %s, %s)",
	      cu_name(t.alloc), cu_name(t.reg), cu_name(t.sync));
	CHECK(r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
	      "global capture: invalidated by them (%s)", cu_name(r));

	r = capture_around(ctx, s, buf, CU_STREAM_CAPTURE_MODE_GLOBAL,
			   CU_STREAM_CAPTURE_MODE_RELAXED, &t);
	CHECK(t.alloc == CUDA_SUCCESS && t.reg == CUDA_SUCCESS,
	      "global capture: a relaxed thread may allocate and register (%s, %s)",
	      cu_name(t.alloc), cu_name(t.reg));
	CHECK(r == CUDA_SUCCESS, "global capture: intact after a relaxed thread (%s)",
	      cu_name(r));

	r = capture_around(ctx, s, buf, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
			   CU_STREAM_CAPTURE_MODE_GLOBAL, &t);
	CHECK(t.alloc == CUDA_SUCCESS && t.reg == CUDA_SUCCESS,
	      "thread-local capture: other threads unaffected (%s, %s)", cu_name(t.alloc),
	      cu_name(t.reg));
	CHECK(r == CUDA_SUCCESS, "thread-local capture: intact (%s)", cu_name(r));

	/* the capturing thread itself */
	CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
	CHECK_CU(cuMemAlloc(&d, 256), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

	capture_allocating(s, buf, CU_STREAM_CAPTURE_MODE_RELAXED);

	/* a thread that made itself relaxed may, even in its own capture */
	CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
	CHECK(mode == CU_STREAM_CAPTURE_MODE_GLOBAL, "a thread starts in global mode (%d)",
	      (int)mode);
	capture_allocating(s, buf, CU_STREAM_CAPTURE_MODE_GLOBAL);
	CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
	CHECK(mode == CU_STREAM_CAPTURE_MODE_RELAXED, "exchange returns the previous mode (%d)",
	      (int)mode);

	/* bad arguments */
	CHECK_CU(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE);
	mode = (CUstreamCaptureMode)7;
	CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode), CUDA_ERROR_INVALID_VALUE);

	/* and nothing is refused once no capture is left */
	CHECK_CU(cuMemAlloc(&d, 256), CUDA_SUCCESS);
	CHECK_CU(cuMemFree(d), CUDA_SUCCESS);
	CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK_CU(cuMemFree(buf), CUDA_SUCCESS);
}

/* ---- the legacy stream during a blocking stream's capture ---- */

static void test_legacy_during_capture(CUstream nonblocking)
{
	CUstream blocking;
	CUdeviceptr d;
	CUgraph g = NULL;
	char host[64];

	CHECK_CU(cuMemAlloc(&d, sizeof(host)), CUDA_SUCCESS);
	CHECK_CU(cuStreamCreate(&blocking, CU_STREAM_DEFAULT), CUDA_SUCCESS);

	/* a blocking stream captures: a synchronous copy (legacy stream) and
	 * an async one on the legacy stream are refused, the capture broken */
	CHECK_CU(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
	CHECK_CU(cuMemcpyDtoH(host, d, sizeof(host)), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
	CHECK_CU(cuMemsetD8Async(d, 1, sizeof(host), CU_STREAM_LEGACY),
		 CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
	CHECK_CU(cuStreamEndCapture(blocking, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

	/* a copy on another stream is no business of the capture's */
	CHECK_CU(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
	CHECK_CU(cuMemcpyDtoHAsync(host, d, sizeof(host), nonblocking), CUDA_SUCCESS);
	CHECK_CU(cuStreamSynchronize(nonblocking), CUDA_SUCCESS);
	CHECK_CU(cuStreamEndCapture(blocking, &g), CUDA_SUCCESS);
	CHECK(g != NULL, "the capture ends intact");
	if (g)
		cuGraphDestroy(g);

	/* a non-blocking stream's capture: the legacy stream does not wait
	 * for it, so it is free to use */
	CHECK_CU(cuStreamBeginCapture(nonblocking, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
	CHECK_CU(cuMemcpyDtoH(host, d, sizeof(host)), CUDA_SUCCESS);
	g = NULL;
	CHECK_CU(cuStreamEndCapture(nonblocking, &g), CUDA_SUCCESS);
	if (g)
		cuGraphDestroy(g);

	/* and again once no capture is left */
	CHECK_CU(cuMemcpyDtoH(host, d, sizeof(host)), CUDA_SUCCESS);
	CHECK_CU(cuStreamDestroy(blocking), CUDA_SUCCESS);
	CHECK_CU(cuMemFree(d), CUDA_SUCCESS);
}

/* ---- an event and the streams of another context ---- */

static void test_event_contexts(CUcontext ctx0)
{
	CUcontext ctx1;
	CUdevice dev1;
	CUstream s0, s1;
	CUevent ev0;

	CHECK_CU(cuDeviceGet(&dev1, 1), CUDA_SUCCESS);
	CHECK_CU(cuDevicePrimaryCtxRetain(&ctx1, dev1), CUDA_SUCCESS);
	CHECK_CU(cuCtxSetCurrent(ctx1), CUDA_SUCCESS);
	CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	CHECK_CU(cuCtxSetCurrent(ctx0), CUDA_SUCCESS);
	CHECK_CU(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
	CHECK_CU(cuEventCreate(&ev0, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);

	CHECK_CU(cuEventRecord(ev0, s1), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuCtxSetCurrent(ctx1), CUDA_SUCCESS);
	CHECK_CU(cuEventRecord(ev0, s1), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuEventRecord(ev0, NULL), CUDA_ERROR_INVALID_HANDLE);
	/* its own context's stream, whichever is current; a wait crosses */
	CHECK_CU(cuEventRecord(ev0, s0), CUDA_SUCCESS);
	CHECK_CU(cuStreamWaitEvent(s1, ev0, 0), CUDA_SUCCESS);
	CHECK_CU(cuStreamSynchronize(s1), CUDA_SUCCESS);

	CHECK_CU(cuCtxSetCurrent(ctx0), CUDA_SUCCESS);
	CHECK_CU(cuEventDestroy(ev0), CUDA_SUCCESS);
	CHECK_CU(cuStreamDestroy(s0), CUDA_SUCCESS);
	CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
	CHECK_CU(cuDevicePrimaryCtxRelease(dev1), CUDA_SUCCESS);
}

/* ---- serialised host functions (child process: set before cuInit) ---- */

static atomic_int running, overlapped;

static void busy_host_fn(void *arg)
{
	(void)arg;
	if (atomic_fetch_add(&running, 1) > 0)
		atomic_store(&overlapped, 1);
	sleep_ms(20);
	atomic_fetch_sub(&running, 1);
}

/* Host functions on n streams: 1 when two of them ever ran at once. */
static int host_fns_overlap(int n)
{
	CUcontext ctx;
	CUstream s[4];

	if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
	    cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
		return -1;
	for (int i = 0; i < n; i++)
		cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING);
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < n; i++)
			cuLaunchHostFunc(s[i], busy_host_fn, NULL);
	cuCtxSynchronize();
	return atomic_load(&overlapped);
}

/* In a child, so that the setting is read by its own cuInit. */
static int overlap_in_child(const char *serial)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (serial)
			setenv("CUDAEMU_SERIAL_HOST_FNS", serial, 1);
		_exit(host_fns_overlap(4) == 1 ? 1 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void test_serial_host_fns(void)
{
	CHECK(overlap_in_child("1") == 0,
	      "CUDAEMU_SERIAL_HOST_FNS=1: host functions of 4 streams never overlap");
	CHECK(overlap_in_child(NULL) == 1, "default: host functions of 4 streams overlap");
}

int main(void)
{
	CUcontext ctx;
	CUstream a, b;

	check_watchdog(60);
	/* before this process initialises CUDA: the children fork clean */
	test_serial_host_fns();

	CHECK_CU(cuInit(0), CUDA_SUCCESS);
	cuDevicePrimaryCtxRetain(&ctx, 0);
	cuCtxSetCurrent(ctx);
	cuStreamCreate(&a, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&b, CU_STREAM_NON_BLOCKING);

	test_host_fn_calls(a, b);
	test_capture_modes(ctx, a);
	test_legacy_during_capture(a);
	test_event_contexts(ctx);

	CHECK_CU(cuStreamDestroy(a), CUDA_SUCCESS);
	CHECK_CU(cuStreamDestroy(b), CUDA_SUCCESS);
	return check_done();
}

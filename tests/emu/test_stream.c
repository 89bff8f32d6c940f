/* test_stream.c - streams and events of the emulated driver: asynchrony,
 * FIFO order, cross-stream ordering through events, contexts. */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_int flag;

static void sleep_then_set(void *arg)
{
	sleep_ms((int)(intptr_t)arg);
	atomic_store(&flag, 1);
}

static void test_async(CUstream s)
{
	double t0, t1;

	atomic_store(&flag, 0);
	t0 = now_ms();
	CHECK_CU(cuLaunchHostFunc(s, sleep_then_set, (void *)(intptr_t)200),
		 CUDA_SUCCESS);
	t1 = now_ms();
	CHECK(t1 - t0 < 50, "enqueue returns at once (%.1f ms)", t1 - t0);
	CHECK(atomic_load(&flag) == 0, "host func not run on the caller");
	CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
	CHECK(atomic_load(&flag) == 1 && now_ms() - t0 >= 190,
	      "synchronize waits for the host func (%.1f ms)", now_ms() - t0);
	CHECK_CU(cuStreamQuery(s), CUDA_SUCCESS);
}

#define NORDER 2000
static int order[NORDER];
static atomic_int norder;

static void append(void *arg)
{
	order[atomic_fetch_add(&norder, 1)] = (int)(intptr_t)arg;
}

static void test_fifo(CUstream s)
{
	CUdeviceptr a, b, c;
	int ok = 1, i;
	uint32_t host[256], out[256];

	atomic_store(&norder, 0);
	for (i = 0; i < NORDER; i++)
		cuLaunchHostFunc(s, append, (void *)(intptr_t)i);
	cuStreamSynchronize(s);
	for (i = 0; i < NORDER; i++)
		ok &= order[i] == i;
	CHECK(ok && atomic_load(&norder) == NORDER,
	      "%d host funcs ran in FIFO order", NORDER);

	/* A chain of copies is only right if each waits for the previous. */
	for (i = 0; i < 256; i++)
		host[i] = 0xabc00000u + (uint32_t)i;
	cuMemAlloc(&a, sizeof(host));
	cuMemAlloc(&b, sizeof(host));
	cuMemAlloc(&c, sizeof(host));
	cuMemsetD32Async(c, 0, 256, s);
	cuLaunchHostFunc(s, sleep_then_set, (void *)(intptr_t)20);
	cuMemcpyHtoDAsync(a, host, sizeof(host), s);
	cuMemcpyDtoDAsync(b, a, sizeof(host), s);
	cuMemcpyDtoDAsync(c, b, sizeof(host), s);
	cuMemsetD32Async(a, 7, 256, s);
	cuMemcpyDtoHAsync(out, c, sizeof(out), s);
	cuStreamSynchronize(s);
	CHECK(!memcmp(out, host, sizeof(out)), "copy chain in stream order");
	cuMemcpyDtoH(out, a, sizeof(out));
	CHECK(out[0] == 7 && out[255] == 7, "memsetD32 after the copies");
	cuMemFree(a);
	cuMemFree(b);
	cuMemFree(c);
}

static atomic_int seen;

static void read_flag(void *arg)
{
	(void)arg;
	atomic_store(&seen, atomic_load(&flag) ? 1 : -1);
}

static void test_events(CUstream a, CUstream b)
{
	CUevent ev, never, t0, t1;
	CUstream c;
	float ms = 0;

	cuEventCreate(&ev, CU_EVENT_DEFAULT);
	cuEventCreate(&never, CU_EVENT_DISABLE_TIMING);
	cuEventCreate(&t0, CU_EVENT_DEFAULT);
	cuEventCreate(&t1, CU_EVENT_DEFAULT);

	CHECK_CU(cuEventQuery(ev), CUDA_SUCCESS);	/* never recorded */
	atomic_store(&flag, 0);
	atomic_store(&seen, 0);
	cuEventRecord(t0, a);
	cuLaunchHostFunc(a, sleep_then_set, (void *)(intptr_t)100);
	CHECK_CU(cuEventRecord(ev, a), CUDA_SUCCESS);
	cuEventRecord(t1, a);
	CHECK_CU(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
	CHECK_CU(cuStreamWaitEvent(b, ev, 0), CUDA_SUCCESS);
	cuLaunchHostFunc(b, read_flag, NULL);
	cuStreamSynchronize(b);
	CHECK(atomic_load(&seen) == 1,
	      "stream b ran after the event recorded on a");
	CHECK_CU(cuEventSynchronize(ev), CUDA_SUCCESS);
	CHECK_CU(cuEventQuery(ev), CUDA_SUCCESS);
	cuEventSynchronize(t1);
	CHECK_CU(cuEventElapsedTime(&ms, t0, t1), CUDA_SUCCESS);
	CHECK(ms >= 95 && ms < 1000, "elapsed time %.1f ms ~ 100 ms", ms);
	CHECK_CU(cuEventElapsedTime(&ms, never, t1),
		 CUDA_ERROR_INVALID_HANDLE);

	/* Waiting on a never-recorded event is a no-op. */
	atomic_store(&seen, 0);
	CHECK_CU(cuStreamWaitEvent(b, never, 0), CUDA_SUCCESS);
	cuLaunchHostFunc(b, read_flag, NULL);
	CHECK_CU(cuStreamSynchronize(b), CUDA_SUCCESS);
	CHECK(atomic_load(&seen) != 0, "wait on unrecorded event is a no-op");

	/* A wait targets the record issued before it, not a later one. */
	atomic_store(&flag, 0);
	cuEventRecord(ev, a);
	cuStreamWaitEvent(b, ev, 0);
	cuLaunchHostFunc(a, sleep_then_set, (void *)(intptr_t)300);
	cuEventRecord(ev, a);
	atomic_store(&seen, 0);
	cuLaunchHostFunc(b, read_flag, NULL);
	cuStreamSynchronize(b);
	CHECK(atomic_load(&seen) == -1,
	      "wait is not held up by a later record of the event");
	cuStreamSynchronize(a);

	/* ... nor released by a later record on another stream that ran
	 * first: it waits for its own */
	cuStreamCreate(&c, CU_STREAM_NON_BLOCKING);
	atomic_store(&flag, 0);
	atomic_store(&seen, 0);
	cuLaunchHostFunc(a, sleep_then_set, (void *)(intptr_t)200);
	cuEventRecord(ev, a);
	cuStreamWaitEvent(b, ev, 0);
	cuEventRecord(ev, c);
	cuStreamSynchronize(c);
	CHECK_CU(cuEventQuery(ev), CUDA_SUCCESS); /* the latest record ran */
	cuLaunchHostFunc(b, read_flag, NULL);
	cuStreamSynchronize(b);
	CHECK(atomic_load(&seen) == 1,
	      "wait released by a later record of the event on another stream");
	cuStreamSynchronize(a);
	cuStreamDestroy(c);

	/* Destroying an event with a record pending is legal. */
	cuLaunchHostFunc(a, sleep_then_set, (void *)(intptr_t)20);
	cuEventRecord(ev, a);
	CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
	CHECK_CU(cuStreamSynchronize(a), CUDA_SUCCESS);
	CHECK_CU(cuEventQuery(ev), CUDA_ERROR_INVALID_HANDLE);
	cuEventDestroy(never);
	cuEventDestroy(t0);
	cuEventDestroy(t1);
}

static CUstream cb_stream;
static CUresult cb_status = CUDA_ERROR_UNKNOWN;

static void callback(CUstream s, CUresult status, void *arg)
{
	cb_stream = s;
	cb_status = status;
	*(int *)arg = 42;
}

static void test_callback(CUstream s)
{
	int v = 0;

	CHECK_CU(cuStreamAddCallback(s, callback, &v, 0), CUDA_SUCCESS);
	cuStreamSynchronize(s);
	CHECK(v == 42 && cb_stream == s && cb_status == CUDA_SUCCESS,
	      "stream callback gets stream and status");
	CHECK_CU(cuStreamAddCallback(s, callback, &v, 1),
		 CUDA_ERROR_INVALID_VALUE);
}

struct worker_arg {
	CUcontext ctx;
	atomic_int *count;
};

static void bump(void *arg)
{
	sleep_ms(1);
	atomic_fetch_add((atomic_int *)arg, 1);
}

static void *enqueue_thread(void *p)
{
	struct worker_arg *w = p;
	CUstream s;
	int i;

	cuCtxSetCurrent(w->ctx);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	for (i = 0; i < 50; i++)
		cuLaunchHostFunc(s, bump, w->count);
	/* Destroyed with work pending: the work still completes. */
	cuStreamDestroy(s);
	return NULL;
}

static void test_threads(CUcontext ctx)
{
	pthread_t t[4];
	struct worker_arg w;
	atomic_int count = 0;
	int i;

	w.ctx = ctx;
	w.count = &count;
	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, enqueue_thread, &w);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(atomic_load(&count) < 200, "destroyed streams still busy");
	CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
	CHECK(atomic_load(&count) == 200,
	      "cuCtxSynchronize waits for all streams (%d/200)",
	      atomic_load(&count));
}

static void test_contexts(void)
{
	CUcontext p0, p1, again, cur, created;
	CUdevice dev;
	unsigned flags;
	int active;

	CHECK_CU(cuDevicePrimaryCtxRetain(&p0, 0), CUDA_SUCCESS);
	CHECK_CU(cuDevicePrimaryCtxRetain(&p1, 1), CUDA_SUCCESS);
	CHECK_CU(cuDevicePrimaryCtxRetain(&again, 1), CUDA_SUCCESS);
	CHECK(p0 != p1 && p1 == again, "one primary context per device");
	cuCtxSetCurrent(p1);
	CHECK(cuCtxGetDevice(&dev) == CUDA_SUCCESS && dev == 1,
	      "current context is on device 1");
	CHECK_CU(cuCtxPushCurrent(p0), CUDA_SUCCESS);
	cuCtxGetCurrent(&cur);
	CHECK(cur == p0, "push makes p0 current");
	CHECK(cuCtxPopCurrent(&cur) == CUDA_SUCCESS && cur == p0,
	      "pop returns p0");
	cuCtxGetCurrent(&cur);
	CHECK(cur == p1, "p1 current again after pop");
	CHECK_CU(cuDevicePrimaryCtxGetState(1, &flags, &active), CUDA_SUCCESS);
	CHECK(active == 1, "primary context of device 1 active");
	cuDevicePrimaryCtxRelease(1);
	cuDevicePrimaryCtxRelease(1);
	cuDevicePrimaryCtxGetState(1, &flags, &active);
	CHECK(active == 0, "inactive after the last release");
	CHECK_CU(cuDevicePrimaryCtxRelease(1), CUDA_ERROR_INVALID_CONTEXT);

	CHECK_CU(cuCtxCreate(&created, NULL, 0, 2), CUDA_SUCCESS);
	cuCtxGetCurrent(&cur);
	CHECK(cur == created, "cuCtxCreate pushes the new context");
	CHECK_CU(cuCtxDestroy(created), CUDA_SUCCESS);
	cuCtxGetCurrent(&cur);
	CHECK(cur == p1, "destroy pops it");
	CHECK_CU(cuCtxPushCurrent(created), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cuCtxDestroy(created), CUDA_ERROR_INVALID_CONTEXT);
	cuCtxSetCurrent(p0);
}

int main(void)
{
	CUcontext ctx;
	CUstream a, b;

	check_watchdog(60);

	CHECK_CU(cuInit(0), CUDA_SUCCESS);
	cuDevicePrimaryCtxRetain(&ctx, 0);
	cuCtxSetCurrent(ctx);
	cuStreamCreate(&a, CU_STREAM_NON_BLOCKING);
	cuStreamCreate(&b, CU_STREAM_NON_BLOCKING);

	test_async(a);
	test_async(NULL);
	test_fifo(a);
	test_fifo(NULL);
	test_events(a, b);
	test_events(b, NULL);
	test_callback(a);
	test_threads(ctx);
	test_contexts();

	CHECK_CU(cuStreamDestroy(a), CUDA_SUCCESS);
	CHECK_CU(cuStreamDestroy(b), CUDA_SUCCESS);
	CHECK_CU(cuStreamSynchronize(a), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuStreamDestroy(a), CUDA_ERROR_INVALID_HANDLE);
	return check_done();
}

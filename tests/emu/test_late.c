/* test_late.c - CUDA's "API synchronization behavior" and the legacy
 * default stream's barrier: a synchronous copy from pageable memory to the
 * device, a device-to-device copy and a memset of device memory may finish
 * after the call returned, so a non-blocking stream that reads the memory
 * without synchronising sees the old contents (the emulation holds such an
 * op back, CUDAEMU_LATE_US); the legacy stream and blocking streams wait for
 * each other's earlier work, non-blocking streams do not.
 *
 * The lateness is set to 10 s here, so "old contents" is deterministic;
 * the checks that need another setting run in a child forked before CUDA
 * is initialised (the setting is read once, by cuInit).
 */
#include "check.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define N 4096

static char *dev;		/* the device buffer under test */
static char *dev2;		/* another, for device-to-device copies */
static cudaStream_t nb;		/* non-blocking: no barrier */
static char back[N];
static int got;		/* what read_nb saw, for the messages */

/* dev's first byte as a non-blocking stream reads it, unsynchronised with
 * the legacy stream. */
static int read_nb(cudaStream_t s)
{
	back[0] = -1;
	if (cudaMemcpyAsync(back, dev, N, cudaMemcpyDeviceToHost, s) ||
	    cudaStreamSynchronize(s))
		return -2;
	return back[0];
}

/* Sets dev to `value` and makes that visible everywhere. */
static void reset(int value)
{
	cudaMemset(dev, value, N);
	cudaDeviceSynchronize();
}

static void test_pageable_upload(void)
{
	char *host = malloc(N);

	memset(host, 7, N);
	reset(1);
	CHECK_RT(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice), cudaSuccess);
	got = read_nb(nb);
	CHECK(got == 1, "(a) pageable upload, unsynchronised "
	      "non-blocking reader: old contents (%d)", got);
	CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
	got = read_nb(nb);
	CHECK(got == 7, "(b) after cudaDeviceSynchronize: new (%d)", got);

	reset(1);
	CHECK_RT(cudaMemcpy(dev, host, N, cudaMemcpyDefault), cudaSuccess);
	got = read_nb(nb);
	CHECK(got == 1, "(a) cudaMemcpyDefault from pageable memory "
	      "too: old (%d)", got);
	CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
	got = read_nb(nb);
	CHECK(got == 7, "(b) after cuStreamSynchronize(NULL): new (%d)", got);

	reset(1);
	CHECK_CU(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dev, host, N),
		 CUDA_SUCCESS);
	got = read_nb(nb);
	CHECK(got == 1, "(a) cuMemcpyHtoD: old (%d)", got);
	CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
	got = read_nb(nb);
	CHECK(got == 7, "(b) after cuCtxSynchronize: new (%d)", got);
	free(host);
}

static void test_blocking_reader(void)
{
	char host[N];
	cudaStream_t b;

	memset(host, 8, N);
	CHECK_RT(cudaStreamCreate(&b), cudaSuccess);
	reset(1);
	CHECK_RT(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice), cudaSuccess);
	got = read_nb(b);
	CHECK(got == 8, "(c) blocking reader: the barrier orders it "
	      "after the upload (%d)", got);
	CHECK_RT(cudaStreamDestroy(b), cudaSuccess);
}

static void test_event_and_sync_copy(void)
{
	char host[N], out[N];
	cudaEvent_t ev;

	memset(host, 9, N);
	reset(1);
	CHECK_RT(cudaEventCreate(&ev), cudaSuccess);
	CHECK_RT(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice), cudaSuccess);
	CHECK_RT(cudaEventRecord(ev, 0), cudaSuccess);
	CHECK_RT(cudaStreamWaitEvent(nb, ev, 0), cudaSuccess);
	got = read_nb(nb);
	CHECK(got == 9, "reader waits on an event recorded after the "
	      "upload: new (%d)", got);
	CHECK_RT(cudaEventDestroy(ev), cudaSuccess);

	memset(host, 10, N);
	CHECK_RT(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice), cudaSuccess);
	CHECK_RT(cudaMemcpy(out, dev, N, cudaMemcpyDeviceToHost), cudaSuccess);
	CHECK(out[0] == 10 && out[N - 1] == 10, "a download is ordered after "
	      "the upload and waited for (%d)", out[0]);
}

static void test_pinned_upload(void)
{
	char *pinned = NULL;

	CHECK_RT(cudaMallocHost((void **)&pinned, N), cudaSuccess);
	if (!pinned)
		return;
	memset(pinned, 11, N);
	reset(1);
	CHECK_RT(cudaMemcpy(dev, pinned, N, cudaMemcpyHostToDevice),
		 cudaSuccess);
	got = read_nb(nb);
	CHECK(got == 11, "(d) pinned upload is synchronous (%d)", got);
	CHECK_RT(cudaFreeHost(pinned), cudaSuccess);
}

static void test_memset_and_dtod(void)
{
	reset(1);
	CHECK_RT(cudaMemset(dev, 12, N), cudaSuccess);
	got = read_nb(nb);
	CHECK(got == 1, "(e) memset, unsynchronised reader: old (%d)", got);
	CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
	got = read_nb(nb);
	CHECK(got == 12, "(e) memset, after a sync: new (%d)", got);

	CHECK_RT(cudaMemset(dev2, 13, N), cudaSuccess);
	CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
	CHECK_RT(cudaMemcpy(dev, dev2, N, cudaMemcpyDeviceToDevice),
		 cudaSuccess);
	got = read_nb(nb);
	CHECK(got == 12, "device-to-device copy, unsynchronised "
	      "reader: old (%d)", got);
	CHECK_RT(cudaStreamSynchronize(0), cudaSuccess);
	got = read_nb(nb);
	CHECK(got == 13, "device-to-device copy, after a sync: new "
	      "(%d)", got);
}

static void test_snapshot(void)
{
	char host[N], out[N];

	reset(1);
	memset(host, 14, N);
	CHECK_RT(cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice), cudaSuccess);
	memset(host, 15, N);	/* reused at once, as CUDA allows */
	CHECK_RT(cudaMemcpy(out, dev, N, cudaMemcpyDeviceToHost), cudaSuccess);
	CHECK(out[0] == 14 && out[N - 1] == 14, "(f) the device gets the "
	      "source as it was at the call (%d)", out[0]);
}

/* ---- (g) the barrier in both directions ---- */

static char order[8];
static unsigned norder;

static void mark(void *arg)
{
	order[norder++] = (char)(uintptr_t)arg;
}

static void test_barrier(void)
{
	volatile uint32_t *flag = NULL;
	CUdeviceptr dflag;
	cudaStream_t b;

	CHECK_RT(cudaHostAlloc((void **)&flag, 64, cudaHostAllocMapped),
		 cudaSuccess);
	if (!flag)
		return;
	dflag = (CUdeviceptr)(uintptr_t)flag;
	CHECK_RT(cudaStreamCreate(&b), cudaSuccess);

	/* a blocking stream held by a value wait holds the legacy stream */
	*flag = 0;
	norder = 0;
	memset(order, 0, sizeof(order));
	CHECK_CU(cuStreamWaitValue32(b, dflag, 1, CU_STREAM_WAIT_VALUE_EQ),
		 CUDA_SUCCESS);
	CHECK_RT(cudaLaunchHostFunc(b, mark, (void *)'b'), cudaSuccess);
	CHECK_RT(cudaLaunchHostFunc(0, mark, (void *)'L'), cudaSuccess);
	CHECK_RT(cudaLaunchHostFunc(nb, mark, (void *)'n'), cudaSuccess);
	CHECK_RT(cudaStreamSynchronize(nb), cudaSuccess);
	sleep_ms(100);
	CHECK(!strcmp(order, "n"), "(g) legacy work waits for earlier work of "
	      "a blocking stream, a non-blocking stream does not (\"%s\")",
	      order);
	__atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
	CHECK_RT(cudaStreamSynchronize(0), cudaSuccess);
	CHECK(!strcmp(order, "nbL"), "(g) then in order (\"%s\")", order);

	/* and the other way: legacy work held holds a blocking stream */
	*flag = 0;
	norder = 0;
	memset(order, 0, sizeof(order));
	CHECK_CU(cuStreamWaitValue32(NULL, dflag, 1, CU_STREAM_WAIT_VALUE_EQ),
		 CUDA_SUCCESS);
	CHECK_RT(cudaLaunchHostFunc(0, mark, (void *)'L'), cudaSuccess);
	CHECK_RT(cudaLaunchHostFunc(b, mark, (void *)'b'), cudaSuccess);
	CHECK_RT(cudaLaunchHostFunc(nb, mark, (void *)'n'), cudaSuccess);
	CHECK_RT(cudaStreamSynchronize(nb), cudaSuccess);
	sleep_ms(100);
	CHECK(!strcmp(order, "n"), "(g) blocking-stream work waits for earlier "
	      "legacy work (\"%s\")", order);
	__atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
	CHECK_RT(cudaStreamSynchronize(b), cudaSuccess);
	CHECK(!strcmp(order, "nLb"), "(g) then in order (\"%s\")", order);

	/* blocking streams do not wait for each other */
	{
		cudaStream_t b2;

		*flag = 0;
		norder = 0;
		memset(order, 0, sizeof(order));
		CHECK_RT(cudaStreamCreateWithFlags(&b2, cudaStreamDefault),
			 cudaSuccess);
		CHECK_CU(cuStreamWaitValue32(b, dflag, 1,
					     CU_STREAM_WAIT_VALUE_EQ),
			 CUDA_SUCCESS);
		CHECK_RT(cudaLaunchHostFunc(b2, mark, (void *)'2'),
			 cudaSuccess);
		CHECK_RT(cudaStreamSynchronize(b2), cudaSuccess);
		CHECK(!strcmp(order, "2"), "two blocking streams stay "
		      "independent (\"%s\")", order);
		__atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
		CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
		CHECK_RT(cudaStreamDestroy(b2), cudaSuccess);
	}
	CHECK_RT(cudaStreamDestroy(b), cudaSuccess);
	CHECK_RT(cudaFreeHost((void *)flag), cudaSuccess);
}

/* Late ops must not outlive what they write to, nor hang teardown. */
static void test_teardown(void)
{
	char host[N];
	CUcontext ctx, prev;
	CUdeviceptr d;
	char *tmp = NULL;

	memset(host, 16, N);
	CHECK_RT(cudaMalloc((void **)&tmp, N), cudaSuccess);
	CHECK_RT(cudaMemcpy(tmp, host, N, cudaMemcpyHostToDevice), cudaSuccess);
	CHECK_RT(cudaFree(tmp), cudaSuccess);
	CHECK(1, "cudaFree right after a pageable upload");

	CHECK_CU(cuCtxGetCurrent(&prev), CUDA_SUCCESS);
	CHECK_CU(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
	CHECK_CU(cuMemAlloc(&d, N), CUDA_SUCCESS);
	CHECK_CU(cuMemcpyHtoD(d, host, N), CUDA_SUCCESS);
	CHECK_CU(cuMemsetD32(d, 5, N / 4), CUDA_SUCCESS);
	double t0 = now_ms();
	CHECK_CU(cuCtxDestroy(ctx), CUDA_SUCCESS);
	CHECK(now_ms() - t0 < 2000, "cuCtxDestroy with late ops queued "
	      "returns promptly (%.1f ms)", now_ms() - t0);
	CHECK_CU(cuCtxSetCurrent(prev), CUDA_SUCCESS);
}

/* ---- children: other settings of CUDAEMU_LATE_US ---- */

/* 0: everything the caller checks in the child passed. */
static int child_sync(void)
{
	char host[N];

	memset(host, 20, N);
	reset(1);
	if (cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice) ||
	    read_nb(nb) != 20)
		return 1;
	if (cudaMemset(dev, 21, N) || read_nb(nb) != 21)
		return 2;
	return 0;
}

static int child_deadline(void)
{
	char host[N];

	memset(host, 22, N);
	reset(1);
	if (cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice) ||
	    read_nb(nb) != 1)
		return 1;
	sleep_ms(300);	/* 30 ms late at most: done by now */
	return read_nb(nb) == 22 ? 0 : 2;
}

static int child_exit(void)
{
	char host[N];

	memset(host, 23, N);
	/* exits with a late op held for 10 s: at once, not 10 s later */
	return cudaMemcpy(dev, host, N, cudaMemcpyHostToDevice) ? 1 : 0;
}

static void setup(void)
{
	cudaMalloc((void **)&dev, N);
	cudaMalloc((void **)&dev2, N);
	cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
}

static void run_child(const char *late_us, int (*fn)(void), const char *what,
		      double max_ms)
{
	double t0 = now_ms();
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		setenv("CUDAEMU_LATE_US", late_us, 1);
		setup();
		_exit(dev && dev2 && nb ? fn() : 99);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	      now_ms() - t0 < max_ms, "%s (status %d, %.0f ms)", what,
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1, now_ms() - t0);
}

static void run_exit_child(void)
{
	double t0 = now_ms();
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		setenv("CUDAEMU_LATE_US", "10000000", 1);
		setup();
		exit(child_exit());	/* exit(), so destructors run */
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	      now_ms() - t0 < 3000, "a program that exits without "
	      "synchronising exits promptly (status %d, %.0f ms)",
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1, now_ms() - t0);
}

int main(void)
{
	check_watchdog(60);

	/* before CUDA is initialised in this process: fork is safe */
	run_child("0", child_sync, "(h) CUDAEMU_LATE_US=0: pageable upload and "
		  "memset are synchronous", 10000);
	run_child("30000", child_deadline, "CUDAEMU_LATE_US=30000: an "
		  "unsynchronised upload lands after its delay", 10000);
	run_exit_child();

	setenv("CUDAEMU_LATE_US", "10000000", 1);
	setup();
	CHECK(dev && dev2 && nb, "set-up");
	test_pageable_upload();
	test_blocking_reader();
	test_event_and_sync_copy();
	test_pinned_upload();
	test_memset_and_dtod();
	test_snapshot();
	test_barrier();
	test_teardown();
	CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
	return check_done();
}

/* test_runtime.c - the emulated runtime on top of the emulated driver:
 * lazy set-up, current device, shared handles, error reporting. */
#include "check.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void *lazy_thread(void *arg)
{
	void *p = NULL;
	int dev = -1;

	(void)arg;
	/* No cudaSetDevice on this thread: device 0, set up on demand. */
	if (cudaMalloc(&p, 64) != cudaSuccess || cudaGetDevice(&dev) != cudaSuccess)
		return (void *)1;
	cudaFree(p);
	return (void *)(intptr_t)(dev == 0 ? 0 : 1);
}

static void test_devices(void)
{
	struct cudaDeviceProp prop;
	CUcontext cur = NULL, primary;
	pthread_t t;
	void *ret = (void *)1;
	char bus[32];
	int n = 0, dev = -1, v = 0;

	CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n > 3,
	      "%d devices", n);
	CHECK_RT(cudaSetDevice(3), cudaSuccess);
	CHECK(cudaGetDevice(&dev) == cudaSuccess && dev == 3, "device 3");
	cuCtxGetCurrent(&cur);
	cuDevicePrimaryCtxRetain(&primary, 3);
	CHECK(cur == primary, "cudaSetDevice made the primary context current");
	cuDevicePrimaryCtxRelease(3);
	CHECK_RT(cudaSetDevice(n), cudaErrorInvalidDevice);
	CHECK_RT(cudaGetDeviceProperties(&prop, 2), cudaSuccess);
	CHECK(prop.totalGlobalMem > 0 && prop.name[0] && prop.pciBusID > 0 &&
	      prop.canUseHostPointerForRegisteredMem == 1,
	      "properties of device 2: %s, bus %d", prop.name, prop.pciBusID);
	CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrPciBusId, 2) ==
	      cudaSuccess && v == prop.pciBusID, "PCI bus attribute");
	CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), 2) == cudaSuccess &&
	      strlen(bus) == 12, "PCI bus id %s", bus);
	CHECK(cudaDriverGetVersion(&v) == cudaSuccess && v == 13000,
	      "driver version");
	CHECK(cudaRuntimeGetVersion(&v) == cudaSuccess && v == CUDART_VERSION,
	      "runtime version");
	pthread_create(&t, NULL, lazy_thread, NULL);
	pthread_join(t, &ret);
	CHECK(ret == NULL, "a fresh thread lazily uses device 0");
}

static void test_memory(cudaStream_t s)
{
	char host[256], back[256];
	struct cudaPointerAttributes a;
	void *d = NULL, *h = NULL, *dh = NULL;
	size_t free_b = 0, total = 0;
	int local, i;

	for (i = 0; i < 256; i++)
		host[i] = (char)i;
	CHECK_RT(cudaMalloc(&d, sizeof(host)), cudaSuccess);
	CHECK_RT(cudaMemcpy(d, host, sizeof(host), cudaMemcpyHostToDevice),
		 cudaSuccess);
	CHECK_RT(cudaMemset((char *)d + 128, 0x5a, 128), cudaSuccess);
	/* s is non-blocking, and a pageable upload and a device memset may
	 * complete after they returned: order them before reading back */
	CHECK_RT(cudaStreamSynchronize(NULL), cudaSuccess);
	CHECK_RT(cudaMemcpyAsync(back, d, sizeof(back), cudaMemcpyDefault, s),
		 cudaSuccess);
	CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
	CHECK(!memcmp(back, host, 128) && back[200] == 0x5a,
	      "copy and memset round trip");
	CHECK(cudaPointerGetAttributes(&a, (char *)d + 5) == cudaSuccess &&
	      a.type == cudaMemoryTypeDevice && a.device == 3,
	      "device pointer attributes");
	CHECK(cudaPointerGetAttributes(&a, &local) == cudaSuccess &&
	      a.type == cudaMemoryTypeUnregistered && a.hostPointer == &local,
	      "unregistered pointer attributes");
	CHECK_RT(cudaHostAlloc(&h, 4096, cudaHostAllocMapped), cudaSuccess);
	CHECK(cudaHostGetDevicePointer(&dh, h, 0) == cudaSuccess && dh == h,
	      "mapped host pointer");
	CHECK(cudaPointerGetAttributes(&a, h) == cudaSuccess &&
	      a.type == cudaMemoryTypeHost, "host pointer attributes");
	CHECK_RT(cudaFreeHost(h), cudaSuccess);
	CHECK_RT(cudaHostRegister(host, sizeof(host), cudaHostRegisterDefault),
		 cudaSuccess);
	CHECK_RT(cudaHostRegister(host, sizeof(host), cudaHostRegisterDefault),
		 cudaErrorHostMemoryAlreadyRegistered);
	CHECK_RT(cudaHostUnregister(host), cudaSuccess);
	CHECK_RT(cudaHostUnregister(host), cudaErrorHostMemoryNotRegistered);
	CHECK(cudaMemGetInfo(&free_b, &total) == cudaSuccess && free_b < total,
	      "memory info");
	CHECK_RT(cudaMemcpy(back, d, 4, (enum cudaMemcpyKind)9),
		 cudaErrorInvalidMemcpyDirection);
	CHECK_RT(cudaFree(d), cudaSuccess);
	CHECK_RT(cudaFree(NULL), cudaSuccess);
	CHECK(cudaMalloc(&d, 0) == cudaSuccess && d == NULL, "cudaMalloc(0)");
	CHECK_RT(cudaMallocHost(&h, 64), cudaSuccess);
	cudaFreeHost(h);
}

static void test_errors(void)
{
	int x;

	cudaGetLastError();
	CHECK_RT(cudaFree(&x), cudaErrorInvalidValue);
	CHECK_RT(cudaPeekAtLastError(), cudaErrorInvalidValue);
	CHECK_RT(cudaGetLastError(), cudaErrorInvalidValue);
	CHECK_RT(cudaGetLastError(), cudaSuccess);
	CHECK(!strcmp(cudaGetErrorName(cudaErrorInvalidValue),
		      "cudaErrorInvalidValue"), "error name");
	CHECK(strlen(cudaGetErrorString(cudaErrorNotReady)) > 0,
	      "error string \"%s\"", cudaGetErrorString(cudaErrorNotReady));
	CHECK_RT(cudaStreamSynchronize((cudaStream_t)&x),
		 cudaErrorInvalidResourceHandle);
}

static void sleeper(void *arg)
{
	sleep_ms(50);
	*(int *)arg = 1;
}

/* Runtime and driver calls on the same handles. */
static void test_mixing(cudaStream_t s)
{
	cudaEvent_t ev, t0;
	uint32_t *flag;
	int done = 0;
	float ms = 0;

	cudaEventCreate(&ev);
	cudaEventCreateWithFlags(&t0, cudaEventDefault);
	cudaHostAlloc((void **)&flag, 64, cudaHostAllocMapped);
	*flag = 0;
	cudaGetLastError();
	cudaEventRecord(t0, s);
	CHECK_RT(cudaLaunchHostFunc(s, sleeper, &done), cudaSuccess);
	CHECK_CU(cuStreamWriteValue32(s, (CUdeviceptr)(uintptr_t)flag, 5, 0),
		 CUDA_SUCCESS);
	CHECK_RT(cudaEventRecord(ev, s), cudaSuccess);
	CHECK_CU(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
	CHECK_RT(cudaEventQuery(ev), cudaErrorNotReady);
	CHECK_RT(cudaGetLastError(), cudaSuccess);
	CHECK_RT(cudaEventSynchronize(ev), cudaSuccess);
	CHECK(done == 1 && *flag == 5, "driver memop ordered in runtime stream");
	CHECK(cudaEventElapsedTime(&ms, t0, ev) == cudaSuccess && ms >= 45,
	      "elapsed %.1f ms", ms);
	CHECK_RT(cudaStreamQuery(s), cudaSuccess);
	cudaEventDestroy(ev);
	cudaEventDestroy(t0);
	cudaFreeHost(flag);
}

static void add_one(void *arg)
{
	(*(int *)arg)++;
}

static void test_graph(cudaStream_t s)
{
	cudaStream_t side;
	cudaEvent_t fork, join;
	cudaGraph_t g;
	cudaGraphExec_t exec;
	enum cudaStreamCaptureStatus st;
	int count = 0, i;

	cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
	cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
	cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
	CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
		 cudaSuccess);
	CHECK(cudaStreamIsCapturing(s, &st) == cudaSuccess &&
	      st == cudaStreamCaptureStatusActive, "runtime capture active");
	cudaLaunchHostFunc(s, add_one, &count);
	cudaEventRecord(fork, s);
	cudaStreamWaitEvent(side, fork, 0);
	cudaLaunchHostFunc(side, add_one, &count);
	cudaEventRecord(join, side);
	cudaStreamWaitEvent(s, join, 0);
	CHECK_RT(cudaStreamEndCapture(s, &g), cudaSuccess);
	CHECK_RT(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
	for (i = 0; i < 10; i++)
		cudaGraphLaunch(exec, s);
	CHECK_RT(cudaStreamSynchronize(s), cudaSuccess);
	CHECK(count == 20, "graph replayed 10 times (%d host calls)", count);
	CHECK_RT(cudaGraphExecDestroy(exec), cudaSuccess);
	CHECK_RT(cudaGraphDestroy(g), cudaSuccess);
	cudaEventDestroy(fork);
	cudaEventDestroy(join);
	cudaStreamDestroy(side);
}

int main(void)
{
	cudaStream_t s;
	int prio_s = 0;

	check_watchdog(60);

	test_devices();
	CHECK_RT(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -1),
		 cudaSuccess);
	CHECK(cuStreamGetPriority(s, &prio_s) == CUDA_SUCCESS && prio_s == -1,
	      "runtime stream is a driver stream");
	test_memory(s);
	test_errors();
	test_mixing(s);
	test_graph(s);
	CHECK_RT(cudaDeviceSynchronize(), cudaSuccess);
	CHECK_RT(cudaStreamDestroy(s), cudaSuccess);
	CHECK_RT(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
	CHECK_RT(cudaDeviceReset(), cudaSuccess);
	return check_done();
}

/* cuda_drv.c - resolve the driver API from libcuda.so.1 once. */
#include "cuda_drv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "log.h"

struct entry {
	const char *name;
	size_t off;
	int optional;
};

#define E(field, sym) { sym, offsetof(struct cxls_cuda, field), 0 }
#define OPT(field, sym) { sym, offsetof(struct cxls_cuda, field), 1 }

/* Versioned names: the ABI cuda.h 13 maps the plain names to. */
static const struct entry entries[] = {
	E(Init, "cuInit"),
	E(GetErrorString, "cuGetErrorString"),
	E(CtxGetCurrent, "cuCtxGetCurrent"),
	E(CtxSetCurrent, "cuCtxSetCurrent"),
	E(CtxPushCurrent, "cuCtxPushCurrent_v2"),
	E(CtxPopCurrent, "cuCtxPopCurrent_v2"),
	E(CtxGetDevice, "cuCtxGetDevice"),
	E(DeviceGet, "cuDeviceGet"),
	OPT(DeviceGetAttribute, "cuDeviceGetAttribute"),
	E(DeviceGetName, "cuDeviceGetName"),
	E(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	E(MemAlloc, "cuMemAlloc_v2"),
	E(MemFree, "cuMemFree_v2"),
	E(MemHostRegister, "cuMemHostRegister_v2"),
	E(MemHostUnregister, "cuMemHostUnregister"),
	E(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
	E(PointerGetAttribute, "cuPointerGetAttribute"),
	E(MemcpyAsync, "cuMemcpyAsync"),
	E(StreamCreate, "cuStreamCreate"),
	E(StreamDestroy, "cuStreamDestroy_v2"),
	E(StreamQuery, "cuStreamQuery"),
	E(StreamSynchronize, "cuStreamSynchronize"),
	E(StreamWaitEvent, "cuStreamWaitEvent"),
	E(StreamWriteValue32, "cuStreamWriteValue32_v2"),
	E(StreamWaitValue32, "cuStreamWaitValue32_v2"),
	E(StreamWaitValue64, "cuStreamWaitValue64_v2"),
	E(StreamGetCaptureInfo, "cuStreamGetCaptureInfo"), /* the first ABI: status, id */
	E(LaunchHostFunc, "cuLaunchHostFunc"),
	E(EventCreate, "cuEventCreate"),
	E(EventRecord, "cuEventRecord"),
	E(EventQuery, "cuEventQuery"),
	E(EventDestroy, "cuEventDestroy_v2"),
	E(StreamGetCtx, "cuStreamGetCtx"),
	E(ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode"),
	OPT(ModuleLoadData, "cuModuleLoadData"),
	OPT(ModuleGetFunction, "cuModuleGetFunction"),
	OPT(ModuleUnload, "cuModuleUnload"),
	OPT(LaunchKernel, "cuLaunchKernel"),
};

static struct cxls_cuda table;
static const struct cxls_cuda *loaded;
static int emulated; /* fixed at load: the driver does not change */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The CPU emulation names its devices so (emu/cuda/device.c). */
static int is_emulator(void)
{
	char name[64] = "";
	CUdevice dev;

	return table.DeviceGet(&dev, 0) == CUDA_SUCCESS &&
	       table.DeviceGetName(name, sizeof(name), dev) == CUDA_SUCCESS &&
	       !strncmp(name, "CUDA CPU emulator", 17);
}

static void load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		CXLS_WARN("cannot load libcuda.so.1 (%s): pool collectives disabled", dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		void *f = dlsym(h, entries[i].name);

		if (!f && entries[i].optional)
			continue;
		if (!f) {
			CXLS_WARN("libcuda.so.1 lacks %s: pool collectives disabled", entries[i].name);
			return;
		}
		*(void **)((char *)&table + entries[i].off) = f;
	}
	if (table.Init(0) != CUDA_SUCCESS) {
		CXLS_WARN("cuInit failed: pool collectives disabled");
		return;
	}
	emulated = is_emulator();
	loaded = &table;
}

const struct cxls_cuda *cxls_cuda(void)
{
	pthread_once(&once, load);
	return loaded;
}

int cxls_cuda_emulated(void)
{
	return cxls_cuda() && emulated;
}

int cxls_cuda_wait64(const struct cxls_cuda *cu, CUdevice dev)
{
	int v = 0;

	return cu->DeviceGetAttribute &&
	       cu->DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev) ==
		       CUDA_SUCCESS &&
	       v;
}

const char *cxls_cuda_strerror(CUresult r)
{
	const char *s = NULL;

	if (loaded && loaded->GetErrorString(r, &s) == CUDA_SUCCESS && s)
		return s;
	return "unknown CUDA error";
}

int cxls_cuda_ctx_enter(const struct cxls_cuda *cu, CUcontext ctx)
{
	CUcontext cur = NULL;

	if (cu->CtxGetCurrent(&cur) != CUDA_SUCCESS)
		return -1;
	if (cur == ctx)
		return 0;
	return cu->CtxPushCurrent(ctx) == CUDA_SUCCESS ? 1 : -1;
}

void cxls_cuda_ctx_leave(const struct cxls_cuda *cu, int entered)
{
	CUcontext popped;

	if (entered > 0)
		cu->CtxPopCurrent(&popped);
}

CUstreamCaptureMode cxls_cuda_capture_relax(const struct cxls_cuda *cu)
{
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;

	if (cu->ThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS)
		return CU_STREAM_CAPTURE_MODE_RELAXED; /* nothing to give back */
	return mode;
}

void cxls_cuda_capture_restore(const struct cxls_cuda *cu, CUstreamCaptureMode mode)
{
	if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
		cu->ThreadExchangeStreamCaptureMode(&mode);
}

/* test_memory.c - memory, pointer attributes, devices, entry points, and
 * argument checking (wrong arguments return CUDA's error, never crash). */
#include "check.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static CUdeviceptr dp(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

static void test_before_init(void)
{
	CUdeviceptr p;
	CUcontext ctx;
	int n, v = 0;
	const char *s;

	CHECK_CU(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(cuCtxGetCurrent(&ctx), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(cuStreamSynchronize(NULL), CUDA_ERROR_NOT_INITIALIZED);
	CHECK(cuDriverGetVersion(&v) == CUDA_SUCCESS && v == 13000,
	      "driver version %d before cuInit", v);
	CHECK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s) == CUDA_SUCCESS &&
	      !strcmp(s, "CUDA_ERROR_INVALID_VALUE"), "error name");
	CHECK_CU(cuGetErrorString((CUresult)12345, &s),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

/* An attribute of device 0, or -1000 if the call fails. */
static int attr(CUdevice_attribute a)
{
	int v;

	return cuDeviceGetAttribute(&v, a, 0) == CUDA_SUCCESS ? v : -1000;
}

static void test_devices(void)
{
	char name[64], bus0[16], bus1[16];
	CUuuid u0, u1;
	size_t total;
	int n = 0, v;
	CUdevice d;

	const char *env = getenv("CUDAEMU_DEVICES");
	int want = env ? atoi(env) : 8;

	CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == want,
	      "%d devices, CUDAEMU_DEVICES or 8 (%d)", n, want);
	CHECK_CU(cuDeviceGet(&d, n), CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuDeviceGetName(name, sizeof(name), 3) == CUDA_SUCCESS &&
	      strlen(name) > 0, "device name \"%s\"", name);
	cuDeviceGetPCIBusId(bus0, sizeof(bus0), 0);
	cuDeviceGetPCIBusId(bus1, sizeof(bus1), 1);
	CHECK(strcmp(bus0, bus1) != 0, "PCI bus ids %s / %s differ", bus0,
	      bus1);
	cuDeviceGetUuid(&u0, 0);
	cuDeviceGetUuid(&u1, 1);
	CHECK(memcmp(&u0, &u1, sizeof(u0)) != 0, "UUIDs differ");
	CHECK(cuDeviceTotalMem(&total, 0) == CUDA_SUCCESS && total > 0,
	      "total memory %zu", total);
	CHECK(attr(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM)
	      == 1, "host pointer usable for registered memory");
	CHECK(attr(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS) == 1,
	      "64-bit stream memops supported");
	CHECK(attr(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR) == 1,
	      "wait NOR supported");
	CHECK(attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) == 1,
	      "unified addressing");
	cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1);
	CHECK(attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) != v,
	      "PCI bus attribute differs per device");
	CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0),
		 CUDA_ERROR_INVALID_VALUE);
}

static void test_no_context(void)
{
	CUdeviceptr p;
	CUstream s;
	CUcontext ctx;

	CHECK_CU(cuMemAlloc(&p, 64), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cuCtxPopCurrent(&ctx), CUDA_ERROR_INVALID_CONTEXT);
	CHECK(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx == NULL,
	      "no current context");
}

static void test_device_memory(CUcontext ctx)
{
	CUdeviceptr p, base = 0;
	CUcontext c = NULL;
	size_t size = 0, free0, free1, total;
	unsigned int type = 0, managed = 7;
	int ord = -1;
	void *host = (void *)1;
	CUpointer_attribute which[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
		CU_POINTER_ATTRIBUTE_RANGE_SIZE,
	};
	void *data[] = { &type, &c, &ord, &managed, &base, &size };

	cuMemGetInfo(&free0, &total);
	CHECK_CU(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
	CHECK(p % 256 == 0, "allocation 256-byte aligned");
	cuMemGetInfo(&free1, &total);
	CHECK(free1 < free0 && free1 <= total, "free memory went down");
	CHECK_CU(cuPointerGetAttributes(6, which, data, p + 100), CUDA_SUCCESS);
	CHECK(type == CU_MEMORYTYPE_DEVICE && c == ctx && ord == 0 &&
	      managed == 0 && base == p && size >= 1000,
	      "attributes of an interior device pointer");
	CHECK_CU(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER,
				       p), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuMemGetAddressRange(&base, &size, p + 999) == CUDA_SUCCESS &&
	      base == p, "address range from the last byte");
	CHECK_CU(cuMemFree(p + 256), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
	CHECK_CU(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
	CHECK_CU(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAlloc(NULL, 64), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAlloc(&p, total + 1), CUDA_ERROR_OUT_OF_MEMORY);
}

static void test_host_memory(void)
{
	CUdeviceptr d = 0, got = 0;
	unsigned int type = 0, flags = 0;
	void *h, *hp = NULL;

	CHECK_CU(cuMemHostAlloc(&h, 100, CU_MEMHOSTALLOC_DEVICEMAP),
		 CUDA_SUCCESS);
	CHECK(cuMemHostGetDevicePointer(&d, h, 0) == CUDA_SUCCESS &&
	      d == dp(h), "device pointer of mapped memory is the host pointer");
	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				    dp(h)) == CUDA_SUCCESS &&
	      type == CU_MEMORYTYPE_HOST, "pinned memory is host memory");
	CHECK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER,
				    dp(h)) == CUDA_SUCCESS && hp == h,
	      "host pointer attribute");
	CHECK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
				    dp(h) + 8) == CUDA_SUCCESS &&
	      got == dp(h) + 8, "device pointer attribute");
	CHECK(cuMemHostGetFlags(&flags, h) == CUDA_SUCCESS &&
	      flags == CU_MEMHOSTALLOC_DEVICEMAP, "host alloc flags");
	CHECK_CU(cuMemHostGetDevicePointer(&d, h, 1), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemHostAlloc(&h, 100, 0x80), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemFreeHost((char *)h + 1), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemFreeHost(h), CUDA_SUCCESS);
}

static void test_registered(CUstream s)
{
	const size_t len = 1 << 20;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned int type = 0;
	CUdeviceptr d = 0, base = 0;
	size_t size = 0;
	uint32_t v = 0;

	CHECK_CU(cuMemHostRegister(m, len, CU_MEMHOSTREGISTER_DEVICEMAP |
				   CU_MEMHOSTREGISTER_PORTABLE), CUDA_SUCCESS);
	CHECK(cuMemHostGetDevicePointer(&d, m + 4096, 0) == CUDA_SUCCESS &&
	      d == dp(m + 4096), "registered: device pointer == host pointer");
	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				    dp(m + 10)) == CUDA_SUCCESS &&
	      type == CU_MEMORYTYPE_HOST, "registered memory is host memory");
	cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
			      dp(m + 10));
	cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dp(m + 10));
	CHECK(base == dp(m) && size == len, "registered range");
	CHECK_CU(cuMemHostRegister(m + 4096, 4096, 0),
		 CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CHECK_CU(cuMemHostRegister(m - 4096, 8192, 0),
		 CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CHECK_CU(cuMemHostRegister(m, len, 0x100), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemHostRegister(NULL, len, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuStreamWriteValue32(s, dp(m + len - 4), 9, 0), CUDA_SUCCESS);
	cuStreamSynchronize(s);
	memcpy(&v, m + len - 4, 4);
	CHECK(v == 9, "stream write into registered memory");
	CHECK_CU(cuMemsetD8Async(dp(m + len - 2), 1, 4, s),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemHostUnregister(m + 4096),
		 CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CHECK_CU(cuMemHostUnregister(m), CUDA_SUCCESS);
	CHECK_CU(cuMemHostUnregister(m), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       dp(m)), CUDA_ERROR_INVALID_VALUE);
	munmap(m, len);
}

static void test_unknown_pointer(void)
{
	int local = 0;
	unsigned int type = 99;
	CUcontext c = (CUcontext)1;
	CUpointer_attribute which[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					CU_POINTER_ATTRIBUTE_CONTEXT };
	void *data[] = { &type, &c };

	CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       dp(&local)), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuPointerGetAttributes(2, which, data, dp(&local)) ==
	      CUDA_SUCCESS && type == 0 && c == NULL,
	      "plural attributes of an unknown pointer are zero");
	CHECK_CU(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       dp(&local)), CUDA_ERROR_INVALID_VALUE);
}

static void test_copies(void)
{
	CUdeviceptr d;
	char host[64] = "hello", back[64] = "";
	int local = 0;

	cuMemAlloc(&d, sizeof(host));
	CHECK_CU(cuMemcpyHtoD(d, host, sizeof(host)), CUDA_SUCCESS);
	CHECK_CU(cuMemcpyDtoH(back, d, sizeof(back)), CUDA_SUCCESS);
	CHECK(!strcmp(back, "hello"), "synchronous round trip");
	CHECK_CU(cuMemcpyHtoD(dp(&local), host, 4), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemcpyDtoH(back, d, sizeof(host) + 512),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemcpy(dp(back), dp(host), 6), CUDA_SUCCESS);
	CHECK_CU(cuMemcpyHtoD(0, host, 4), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemsetD32(d + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemcpyHtoD(d, host, 0), CUDA_SUCCESS);
	cuMemFree(d);
}

static void test_bad_handles(void)
{
	CUstream s;
	CUevent e;
	unsigned int flags;

	cuStreamCreate(&s, 0);
	cuStreamDestroy(s);
	cuEventCreate(&e, 0);
	cuEventDestroy(e);
	CHECK_CU(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuStreamGetFlags(s, &flags), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuEventRecord(e, NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuEventSynchronize(e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuStreamWaitEvent(NULL, e, 0), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuStreamSynchronize((CUstream)&flags),
		 CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuStreamCreate(&s, 0x10), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuEventCreate(&e, CU_EVENT_INTERPROCESS),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuLaunchHostFunc(NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuStreamGetFlags(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
}

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*begin_v1_fn)(CUstream);

static void test_entry_points(CUstream s)
{
	CUdriverProcAddressQueryResult st;
	CUdeviceptr p = 0;
	void *fn = NULL, *lib;
	CUstreamCaptureStatus cs;
	CUgraph g;

	CHECK(cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &st) ==
	      CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS &&
	      fn == (void *)cuMemAlloc_v2, "cuGetProcAddress(cuMemAlloc)");
	if (fn && ((alloc_fn)fn)(&p, 64) == CUDA_SUCCESS)
		cuMemFree(p);
	CHECK(cuGetProcAddress("cuStreamBeginCapture", &fn, 10000, 0, &st) ==
	      CUDA_SUCCESS && fn != (void *)cuStreamBeginCapture_v2,
	      "old version gets the old signature");
	if (fn) {
		((begin_v1_fn)fn)(s);
		CHECK(cuStreamIsCapturing(s, &cs) == CUDA_SUCCESS &&
		      cs == CU_STREAM_CAPTURE_STATUS_ACTIVE,
		      "legacy cuStreamBeginCapture works");
		cuStreamEndCapture(s, &g);
		cuGraphDestroy(g);
	}
	CHECK(cuGetProcAddress("cuLaunchKernel", &fn, 13000, 0, &st) ==
	      CUDA_ERROR_NOT_FOUND && fn == NULL &&
	      st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
	      "unemulated symbol not found");
	CHECK(cuGetProcAddress("cuLaunchHostFunc", &fn, 9000, 0, &st) ==
	      CUDA_ERROR_NOT_FOUND &&
	      st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
	      "version not sufficient");
	CHECK_CU(cuGetProcAddress(NULL, &fn, 13000, 0, NULL),
		 CUDA_ERROR_INVALID_VALUE);

	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK(lib && dlsym(lib, "cuMemAlloc") == dlsym(lib, "cuMemAlloc_v2") &&
	      dlsym(lib, "cuStreamWaitValue32") ==
	      dlsym(lib, "cuStreamWaitValue32_v2") &&
	      dlsym(lib, "cuCtxCreate_v4") != NULL,
	      "dlsym finds versioned and unversioned names");
	CHECK(lib && dlsym(lib, "emu_stream_submit") == NULL,
	      "internal symbols are not exported");
	if (lib)
		dlclose(lib);
}

int main(void)
{
	CUcontext ctx;
	CUstream s;

	check_watchdog(60);

	test_before_init();
	CHECK_CU(cuInit(0), CUDA_SUCCESS);
	test_devices();
	test_no_context();
	cuDevicePrimaryCtxRetain(&ctx, 0);
	cuCtxSetCurrent(ctx);
	cuStreamCreate(&s, 0);
	test_device_memory(ctx);
	test_host_memory();
	test_registered(s);
	test_unknown_pointer();
	test_copies();
	test_bad_handles();
	test_entry_points(s);
	cuStreamDestroy(s);
	return check_done();
}

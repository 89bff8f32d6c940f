/* cuda_host_real.c - find the real runtime and driver host-memory calls. */
#include "cuda_host_real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "log.h"

static struct cxls_real_cudart rt;
static struct cxls_real_cuda drv;
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

/* Frameworks dlopen libcudart RTLD_LOCAL (Python extensions): RTLD_NEXT
 * does not see it there, but a NOLOAD handle does. */
static void *find_cudart(const char *probe)
{
	static const char *const names[] = { "libcudart.so.13", "libcudart.so.12",
					     "libcudart.so.11.0", "libcudart.so" };

	if (dlsym(RTLD_NEXT, probe))
		return RTLD_NEXT;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);

		if (h)
			return h;
	}
	return NULL;
}

#define SYM(h, tab, field, name) (tab.field = (__typeof__(tab.field))dlsym(h, name))

static void load_rt(void)
{
	void *h = find_cudart("cudaHostAlloc");

	if (!h) {
		CXLS_WARN("no CUDA runtime in the process to forward pinned-memory calls to");
		return;
	}
	SYM(h, rt, MallocHost, "cudaMallocHost");
	SYM(h, rt, HostAlloc, "cudaHostAlloc");
	SYM(h, rt, FreeHost, "cudaFreeHost");
	SYM(h, rt, HostRegister, "cudaHostRegister");
	SYM(h, rt, HostUnregister, "cudaHostUnregister");
	SYM(h, rt, HostGetDevicePointer, "cudaHostGetDevicePointer");
	SYM(h, rt, GetDriverEntryPoint, "cudaGetDriverEntryPoint");
	SYM(h, rt, GetDriverEntryPointByVersion, "cudaGetDriverEntryPointByVersion");
}

static void load_drv(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		CXLS_WARN("cannot load libcuda.so.1 (%s): driver pinned-memory calls fail",
			  dlerror());
		return;
	}
	SYM(h, drv, MemAllocHost, "cuMemAllocHost");
	SYM(h, drv, MemAllocHost_v2, "cuMemAllocHost_v2");
	SYM(h, drv, MemHostAlloc, "cuMemHostAlloc");
	SYM(h, drv, MemFreeHost, "cuMemFreeHost");
	SYM(h, drv, MemHostRegister, "cuMemHostRegister");
	SYM(h, drv, MemHostRegister_v2, "cuMemHostRegister_v2");
	SYM(h, drv, MemHostUnregister, "cuMemHostUnregister");
	SYM(h, drv, GetProcAddress, "cuGetProcAddress");
	SYM(h, drv, GetProcAddress_v2, "cuGetProcAddress_v2");
}

const struct cxls_real_cudart *cxls_real_cudart(void)
{
	pthread_once(&rt_once, load_rt);
	return &rt;
}

const struct cxls_real_cuda *cxls_real_cuda(void)
{
	pthread_once(&drv_once, load_drv);
	return &drv;
}

/* cuda_host_real.c - find the real runtime and driver host-memory calls. */
#include "cuda_host_real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include "log.h"

static struct cxls_real_cudart rt;
static _Atomic(const struct cxls_real_cuda *) drv;
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;

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
	SYM(h, rt, HostGetFlags, "cudaHostGetFlags");
	SYM(h, rt, GetDriverEntryPoint, "cudaGetDriverEntryPoint");
	SYM(h, rt, GetDriverEntryPointByVersion, "cudaGetDriverEntryPointByVersion");
}

/* Fills d from libcuda.so.1; an empty table when there is none. */
static void load_drv(struct cxls_real_cuda *d)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		CXLS_WARN("cannot load libcuda.so.1 (%s): driver pinned-memory calls fail",
			  dlerror());
		return;
	}
	SYM(h, (*d), MemAllocHost, "cuMemAllocHost");
	SYM(h, (*d), MemAllocHost_v2, "cuMemAllocHost_v2");
	SYM(h, (*d), MemHostAlloc, "cuMemHostAlloc");
	SYM(h, (*d), MemFreeHost, "cuMemFreeHost");
	SYM(h, (*d), MemHostRegister, "cuMemHostRegister");
	SYM(h, (*d), MemHostRegister_v2, "cuMemHostRegister_v2");
	SYM(h, (*d), MemHostUnregister, "cuMemHostUnregister");
	SYM(h, (*d), MemHostGetFlags, "cuMemHostGetFlags");
	SYM(h, (*d), CtxGetDevice, "cuCtxGetDevice");
	SYM(h, (*d), DeviceGetPCIBusId, "cuDeviceGetPCIBusId");
	SYM(h, (*d), GetProcAddress, "cuGetProcAddress");
	SYM(h, (*d), GetProcAddress_v2, "cuGetProcAddress_v2");
}

const struct cxls_real_cudart *cxls_real_cudart(void)
{
	pthread_once(&rt_once, load_rt);
	return &rt;
}

/* No once-lock: this runs from dlsym (cuda_dlsym.c), possibly inside a
 * library constructor that holds the dynamic linker's lock, while another
 * thread that got here first would wait for that lock inside
 * pthread_once.  Racers each build a table; the first one published
 * wins, the others free theirs. */
const struct cxls_real_cuda *cxls_real_cuda(void)
{
	static const struct cxls_real_cuda empty;
	const struct cxls_real_cuda *d = atomic_load_explicit(&drv, memory_order_acquire);
	struct cxls_real_cuda *mine;

	if (d)
		return d;
	mine = calloc(1, sizeof(*mine));
	if (!mine)
		return &empty;
	load_drv(mine);
	d = NULL;
	if (!atomic_compare_exchange_strong_explicit(&drv, &d, mine, memory_order_acq_rel,
						     memory_order_acquire)) {
		free(mine);
		return d;
	}
	return mine;
}

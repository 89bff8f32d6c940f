/* mem_alloc.c - device memory handed out by ncclMemAlloc in our stead. */
#include "mem_alloc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_drv.h"
#include "log.h"

struct block {
	void *ptr;
	struct block *next;
};

/* Process-wide by nature: ncclMemFree may come from any thread. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct block *blocks;

/* With no context current yet (ncclMemAlloc as a process's first CUDA
 * call), NCCL's cudaMalloc would make device 0's primary context current:
 * so do we, for the call only (cxls_cuda_ctx_leave after). */
static int ensure_context(const struct cxls_cuda *cu)
{
	CUcontext cur = NULL, primary;
	CUdevice dev;

	if (cu->CtxGetCurrent(&cur) == CUDA_SUCCESS && cur)
		return 0;
	if (cu->DeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cu->DevicePrimaryCtxRetain(&primary, dev) != CUDA_SUCCESS)
		return -1;
	return cxls_cuda_ctx_enter(cu, primary);
}

static CUresult mem_alloc(const struct cxls_cuda *cu, CUdeviceptr *d, size_t size)
{
	int entered = ensure_context(cu);
	CUresult r = cu->MemAlloc(d, size);

	cxls_cuda_ctx_leave(cu, entered);
	return r;
}

ncclResult_t cxls_mem_alloc(void **ptr, size_t size)
{
	const struct cxls_cuda *cu = cxls_cuda();
	struct block *b = malloc(sizeof(*b));
	CUdeviceptr d = 0;
	CUresult r;

	if (!b)
		return ncclSystemError;
	if (!cu || (r = mem_alloc(cu, &d, size)) != CUDA_SUCCESS) {
		CXLS_WARN("ncclMemAlloc(%zu): %s", size,
			  cu ? cxls_cuda_strerror(r) : "no CUDA driver");
		free(b);
		return ncclUnhandledCudaError;
	}
	b->ptr = (void *)(uintptr_t)d;
	pthread_mutex_lock(&lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&lock);
	*ptr = b->ptr;
	return ncclSuccess;
}

ncclResult_t cxls_mem_free(void *ptr)
{
	const struct cxls_cuda *cu = cxls_cuda();
	struct block **pp, *b = NULL;
	int entered;
	CUresult r;

	pthread_mutex_lock(&lock);
	for (pp = &blocks; *pp; pp = &(*pp)->next)
		if ((*pp)->ptr == ptr) {
			b = *pp;
			*pp = b->next;
			break;
		}
	pthread_mutex_unlock(&lock);
	if (!b)
		return ncclInvalidArgument;
	free(b);
	if (!cu)
		return ncclUnhandledCudaError;
	entered = ensure_context(cu);
	r = cu->MemFree((CUdeviceptr)(uintptr_t)ptr);
	cxls_cuda_ctx_leave(cu, entered);
	return r == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

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

ncclResult_t cxls_mem_alloc(void **ptr, size_t size)
{
	const struct cxls_cuda *cu = cxls_cuda();
	struct block *b = malloc(sizeof(*b));
	CUdeviceptr d = 0;
	CUresult r;

	if (!b)
		return ncclSystemError;
	if (!cu || (r = cu->MemAlloc(&d, size)) != CUDA_SUCCESS) {
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
	return cu && cu->MemFree((CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS ?
		       ncclSuccess : ncclUnhandledCudaError;
}

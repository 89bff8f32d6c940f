/* rt_memory.c - runtime allocation, copies, memsets, pointer attributes. */
#include "runtime.h"

#include <stdbool.h>
#include <stdint.h>

static CUdeviceptr dptr(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	cudaError_t err = rt_enter();
	CUdeviceptr p;

	if (err != cudaSuccess)
		return rt_ret(err);
	if (!devPtr)
		return rt_ret(cudaErrorInvalidValue);
	/* cudaMalloc(0) succeeds with a NULL pointer, unlike cuMemAlloc. */
	if (!size) {
		*devPtr = NULL;
		return cudaSuccess;
	}
	err = rt_ret_cu(cuMemAlloc_v2(&p, size));
	if (err == cudaSuccess)
		*devPtr = (void *)(uintptr_t)p;
	return err;
}

cudaError_t cudaFree(void *devPtr)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	if (!devPtr)
		return cudaSuccess;
	return rt_ret_cu(cuMemFree_v2(dptr(devPtr)));
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	/* cudaHostAlloc* and CU_MEMHOSTALLOC_* flags are the same bits. */
	return rt_ret_cu(cuMemHostAlloc(pHost, size, flags));
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuMemAllocHost_v2(ptr, size));
}

cudaError_t cudaFreeHost(void *ptr)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuMemFreeHost(ptr));
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuMemHostRegister_v2(ptr, size, flags));
}

cudaError_t cudaHostUnregister(void *ptr)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuMemHostUnregister(ptr));
}

cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost,
				     unsigned int flags)
{
	cudaError_t err = rt_enter();
	CUdeviceptr p;

	if (err != cudaSuccess)
		return rt_ret(err);
	if (!pDevice)
		return rt_ret(cudaErrorInvalidValue);
	err = rt_ret_cu(cuMemHostGetDevicePointer_v2(&p, pHost, flags));
	if (err == cudaSuccess)
		*pDevice = (void *)(uintptr_t)p;
	return err;
}

/* The flags the buffer was allocated or registered with, as recorded:
 * what cudaHostGetFlags reports on a GPU too (write-combined or not). */
cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuMemHostGetFlags(pFlags, pHost));
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuMemGetInfo_v2(free, total));
}

/* The driver call for a direction: the device sides get checked. */
static CUresult copy(void *dst, const void *src, size_t count,
		     enum cudaMemcpyKind kind, CUstream stream, bool async)
{
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return async ? cuMemcpyHtoDAsync_v2(dptr(dst), src, count, stream) :
		       cuMemcpyHtoD_v2(dptr(dst), src, count);
	case cudaMemcpyDeviceToHost:
		return async ? cuMemcpyDtoHAsync_v2(dst, dptr(src), count, stream) :
		       cuMemcpyDtoH_v2(dst, dptr(src), count);
	case cudaMemcpyDeviceToDevice:
		return async ?
		       cuMemcpyDtoDAsync_v2(dptr(dst), dptr(src), count, stream) :
		       cuMemcpyDtoD_v2(dptr(dst), dptr(src), count);
	case cudaMemcpyHostToHost:
	case cudaMemcpyDefault:
		return async ? cuMemcpyAsync(dptr(dst), dptr(src), count, stream) :
		       cuMemcpy(dptr(dst), dptr(src), count);
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static bool kind_ok(enum cudaMemcpyKind kind)
{
	return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
		       enum cudaMemcpyKind kind)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	if (!kind_ok(kind))
		return rt_ret(cudaErrorInvalidMemcpyDirection);
	return rt_ret_cu(copy(dst, src, count, kind, NULL, false));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
			    enum cudaMemcpyKind kind, cudaStream_t stream)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	if (!kind_ok(kind))
		return rt_ret(cudaErrorInvalidMemcpyDirection);
	return rt_ret_cu(copy(dst, src, count, kind, stream, true));
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuMemsetD8_v2(dptr(devPtr), (unsigned char)value,
				       count));
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
			    cudaStream_t stream)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuMemsetD8Async(dptr(devPtr), (unsigned char)value,
					 count, stream));
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
				     const void *ptr)
{
	CUpointer_attribute which[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
		CU_POINTER_ATTRIBUTE_HOST_POINTER,
	};
	unsigned int type = 0;
	int device = -2;
	CUdeviceptr dev_ptr = 0;
	void *host_ptr = NULL;
	void *data[] = { &type, &device, &dev_ptr, &host_ptr };
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	if (!attributes)
		return rt_ret(cudaErrorInvalidValue);
	err = rt_ret_cu(cuPointerGetAttributes(4, which, data, dptr(ptr)));
	if (err != cudaSuccess)
		return err;
	/* Memory CUDA does not know reads as unregistered host memory. */
	attributes->type = type == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice :
			   type == CU_MEMORYTYPE_HOST ? cudaMemoryTypeHost :
			   cudaMemoryTypeUnregistered;
	attributes->device = type ? device : -2;
	attributes->devicePointer = (void *)(uintptr_t)dev_ptr;
	attributes->hostPointer = type ? host_ptr : (void *)ptr;
	return cudaSuccess;
}

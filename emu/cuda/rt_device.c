/* rt_device.c - device properties and attributes for the runtime. */
#include "runtime.h"

#include <string.h>

static int attr(CUdevice_attribute a, int dev)
{
	int v = 0;

	cuDeviceGetAttribute(&v, a, dev);
	return v;
}

/* The fields a host program plausibly reads; the rest stay zero. */
static void fill_props(struct cudaDeviceProp *p, int dev)
{
	CUuuid uuid;
	size_t total = 0;

	memset(p, 0, sizeof(*p));
	cuDeviceGetName(p->name, sizeof(p->name), dev);
	if (cuDeviceGetUuid_v2(&uuid, dev) == CUDA_SUCCESS)
		memcpy(p->uuid.bytes, uuid.bytes, sizeof(p->uuid.bytes));
	cuDeviceTotalMem_v2(&total, dev);
	p->totalGlobalMem = total;
	p->sharedMemPerBlock =
		(size_t)attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev);
	p->regsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, dev);
	p->warpSize = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev);
	p->memPitch = (size_t)attr(CU_DEVICE_ATTRIBUTE_MAX_PITCH, dev);
	p->maxThreadsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev);
	p->maxThreadsDim[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, dev);
	p->maxThreadsDim[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, dev);
	p->maxThreadsDim[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, dev);
	p->maxGridSize[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, dev);
	p->maxGridSize[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, dev);
	p->maxGridSize[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, dev);
	p->totalConstMem =
		(size_t)attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, dev);
	p->major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
	p->minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
	p->textureAlignment =
		(size_t)attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, dev);
	p->multiProcessorCount =
		attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
	p->canMapHostMemory = attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, dev);
	p->concurrentKernels = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, dev);
	p->pciBusID = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev);
	p->pciDeviceID = attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev);
	p->pciDomainID = attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev);
	p->asyncEngineCount = attr(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, dev);
	p->unifiedAddressing = attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev);
	p->memoryBusWidth =
		attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev);
	p->l2CacheSize = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
	p->maxThreadsPerMultiProcessor =
		attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev);
	p->streamPrioritiesSupported =
		attr(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, dev);
	p->multiGpuBoardGroupID =
		attr(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID, dev);
	p->hostNativeAtomicSupported =
		attr(CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, dev);
	p->canUseHostPointerForRegisteredMem = attr(
		CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, dev);
	p->hostRegisterSupported =
		attr(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, dev);
	p->hostRegisterReadOnlySupported =
		attr(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, dev);
	p->deviceNumaId = attr(CU_DEVICE_ATTRIBUTE_NUMA_ID, dev);
	p->hostNumaId = attr(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	cudaError_t err = rt_check_device(device);

	if (err != cudaSuccess)
		return rt_ret(err);
	if (!prop)
		return rt_ret(cudaErrorInvalidValue);
	fill_props(prop, device);
	return cudaSuccess;
}

/* Runtime and driver attribute enumerators share their values. */
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
				   int device)
{
	cudaError_t err = rt_check_device(device);

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuDeviceGetAttribute(value, (CUdevice_attribute)attr,
					      device));
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
	cudaError_t err = rt_check_device(device);

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuDeviceGetPCIBusId(pciBusId, len, device));
}

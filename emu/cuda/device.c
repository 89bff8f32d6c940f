/* device.c - the emulated devices: count, identity and attributes.
 *
 * All CUDAEMU_DEVICES devices are the same host. What differs per ordinal is
 * identity (name suffix, PCI bus id, UUID), which is what callers use to tell
 * devices apart. Identity is deterministic so that several processes agree on
 * it, as they would for real GPUs.
 */
#include "emu.h"

#include <stdio.h>
#include <string.h>

#define ATTR(name, value) [CU_DEVICE_ATTRIBUTE_##name] = (value)

/* Attributes not listed are 0, i.e. "not supported". Values are those of a
 * modest discrete GPU; what matters is that the host-side features the shim
 * relies on (mapped / registered host memory, stream memory operations,
 * unified addressing) read as supported. */
static const int attr_values[CU_DEVICE_ATTRIBUTE_MAX] = {
	ATTR(MAX_THREADS_PER_BLOCK, 1024),
	ATTR(MAX_BLOCK_DIM_X, 1024),
	ATTR(MAX_BLOCK_DIM_Y, 1024),
	ATTR(MAX_BLOCK_DIM_Z, 64),
	ATTR(MAX_GRID_DIM_X, 2147483647),
	ATTR(MAX_GRID_DIM_Y, 65535),
	ATTR(MAX_GRID_DIM_Z, 65535),
	ATTR(MAX_SHARED_MEMORY_PER_BLOCK, 49152),
	ATTR(TOTAL_CONSTANT_MEMORY, 65536),
	ATTR(WARP_SIZE, 32),
	ATTR(MAX_PITCH, 2147483647),
	ATTR(MAX_REGISTERS_PER_BLOCK, 65536),
	ATTR(CLOCK_RATE, 1000000),
	ATTR(TEXTURE_ALIGNMENT, 512),
	ATTR(GPU_OVERLAP, 1),
	ATTR(MULTIPROCESSOR_COUNT, 1),
	ATTR(CAN_MAP_HOST_MEMORY, 1),
	ATTR(COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT),
	ATTR(CONCURRENT_KERNELS, 1),
	ATTR(MEMORY_CLOCK_RATE, 1000000),
	ATTR(GLOBAL_MEMORY_BUS_WIDTH, 64),
	ATTR(L2_CACHE_SIZE, 1 << 20),
	ATTR(MAX_THREADS_PER_MULTIPROCESSOR, 2048),
	ATTR(ASYNC_ENGINE_COUNT, 2),
	ATTR(UNIFIED_ADDRESSING, 1),
	ATTR(TEXTURE_PITCH_ALIGNMENT, 32),
	ATTR(COMPUTE_CAPABILITY_MAJOR, 8),
	ATTR(COMPUTE_CAPABILITY_MINOR, 0),
	ATTR(STREAM_PRIORITIES_SUPPORTED, 1),
	ATTR(GLOBAL_L1_CACHE_SUPPORTED, 1),
	ATTR(LOCAL_L1_CACHE_SUPPORTED, 1),
	ATTR(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 167936),
	ATTR(MAX_REGISTERS_PER_MULTIPROCESSOR, 65536),
	ATTR(HOST_NATIVE_ATOMIC_SUPPORTED, 1),
	ATTR(COMPUTE_PREEMPTION_SUPPORTED, 1),
	ATTR(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1),
	ATTR(CAN_USE_STREAM_MEM_OPS_V1, 1),
	ATTR(CAN_USE_64_BIT_STREAM_MEM_OPS_V1, 1),
	ATTR(CAN_USE_STREAM_WAIT_VALUE_NOR_V1, 1),
	ATTR(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 166912),
	ATTR(CAN_FLUSH_REMOTE_WRITES, 1),
	ATTR(HOST_REGISTER_SUPPORTED, 1),
	ATTR(MAX_BLOCKS_PER_MULTIPROCESSOR, 32),
	ATTR(READ_ONLY_HOST_REGISTER_SUPPORTED, 1),
	ATTR(CAN_USE_64_BIT_STREAM_MEM_OPS, 1),
	ATTR(CAN_USE_STREAM_WAIT_VALUE_NOR, 1),
	ATTR(NUMA_ID, -1),
	ATTR(HOST_NUMA_ID, -1),
	ATTR(ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED, 0),
};

#undef ATTR

CUresult emu_check_device(CUdevice dev)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (dev < 0 || dev >= emu_config.ndevices)
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = emu_config.ndevices;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= emu_config.ndevices)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult res = emu_check_device(dev);

	if (res != CUDA_SUCCESS)
		return res;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "CUDA CPU emulator #%d", dev);
	return CUDA_SUCCESS;
}

/* Distinct per device, stable across processes. */
static int pci_bus(CUdevice dev)
{
	return 0x10 + dev;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
			      CUdevice dev)
{
	CUresult res = emu_check_device(dev);

	if (res != CUDA_SUCCESS)
		return res;
	if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		*pi = pci_bus(dev);
		break;
	case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
		*pi = dev;
		break;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
	case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1:
		*pi = !emu_config.no_memops64;
		break;
	default:
		*pi = attr_values[attrib];
	}
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CUresult res = emu_check_device(dev);

	if (res != CUDA_SUCCESS)
		return res;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = emu_config.mem_bytes;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	static const char tag[12] = "cxlshim-emu";
	CUresult res = emu_check_device(dev);

	if (res != CUDA_SUCCESS)
		return res;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(uuid->bytes, tag, sizeof(tag));
	uuid->bytes[12] = 0;
	uuid->bytes[13] = 0;
	uuid->bytes[14] = (char)(dev >> 8);
	uuid->bytes[15] = (char)dev;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	CUresult res = emu_check_device(dev);

	if (res != CUDA_SUCCESS)
		return res;
	/* CUDA documents 13 bytes as enough: "0000:00:00.0" plus NUL. */
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", pci_bus(dev));
	return CUDA_SUCCESS;
}

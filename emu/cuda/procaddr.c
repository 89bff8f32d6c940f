/* procaddr.c - cuGetProcAddress: every exported entry point by base name.
 *
 * A caller asks for a base name ("cuMemAlloc") and the CUDA version it was
 * built against; it gets the newest variant introduced at or before that
 * version, so an old caller keeps the signature it was compiled for. Compiled
 * in cuda.h's internal mode so that the legacy declarations are visible.
 * The per-thread-default-stream flag returns the same functions (see
 * aliases.ld).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct proc {
	const char *name;
	int version;	/* CUDA version that introduced this variant */
	void *fn;
};

#define P(name, version, fn) { name, version, (void *)(fn) }

static const struct proc procs[] = {
	P("cuInit", 2000, cuInit),
	P("cuDriverGetVersion", 2020, cuDriverGetVersion),
	P("cuGetErrorString", 6000, cuGetErrorString),
	P("cuGetErrorName", 6000, cuGetErrorName),
	P("cuGetProcAddress", 11030, cuGetProcAddress),
	P("cuGetProcAddress", 12000, cuGetProcAddress_v2),

	P("cuDeviceGet", 2000, cuDeviceGet),
	P("cuDeviceGetCount", 2000, cuDeviceGetCount),
	P("cuDeviceGetName", 2000, cuDeviceGetName),
	P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
	P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
	P("cuDeviceGetUuid", 9020, cuDeviceGetUuid_v2),
	P("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
	P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
	P("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease_v2),
	P("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),

	P("cuCtxCreate", 2000, cuCtxCreate),
	P("cuCtxCreate", 3020, cuCtxCreate_v2),
	P("cuCtxCreate", 11040, cuCtxCreate_v3),
	P("cuCtxCreate", 12050, cuCtxCreate_v4),
	P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
	P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
	P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
	P("cuCtxGetDevice", 2000, cuCtxGetDevice),
	P("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
	P("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
	P("cuCtxSynchronize", 2000, cuCtxSynchronize),

	P("cuMemAlloc", 3020, cuMemAlloc_v2),
	P("cuMemFree", 3020, cuMemFree_v2),
	P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
	P("cuMemHostAlloc", 2020, cuMemHostAlloc),
	P("cuMemFreeHost", 2000, cuMemFreeHost),
	P("cuMemHostRegister", 4000, cuMemHostRegister_v2),
	P("cuMemHostUnregister", 4000, cuMemHostUnregister),
	P("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
	P("cuMemHostGetFlags", 2030, cuMemHostGetFlags),
	P("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
	P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
	P("cuMemAddressReserve", 10020, cuMemAddressReserve),
	P("cuMemAddressFree", 10020, cuMemAddressFree),
	P("cuMemCreate", 10020, cuMemCreate),
	P("cuMemRelease", 10020, cuMemRelease),
	P("cuMemMap", 10020, cuMemMap),
	P("cuMemUnmap", 10020, cuMemUnmap),
	P("cuMemSetAccess", 10020, cuMemSetAccess),
	P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
	P("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
	P("cuPointerGetAttributes", 7000, cuPointerGetAttributes),

	P("cuMemcpy", 4000, cuMemcpy),
	P("cuMemcpyAsync", 4000, cuMemcpyAsync),
	P("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
	P("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
	P("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2),
	P("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2),
	P("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2),
	P("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2),
	P("cuMemsetD8", 3020, cuMemsetD8_v2),
	P("cuMemsetD16", 3020, cuMemsetD16_v2),
	P("cuMemsetD32", 3020, cuMemsetD32_v2),
	P("cuMemsetD8Async", 3020, cuMemsetD8Async),
	P("cuMemsetD16Async", 3020, cuMemsetD16Async),
	P("cuMemsetD32Async", 3020, cuMemsetD32Async),

	P("cuStreamCreate", 2000, cuStreamCreate),
	P("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
	P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
	P("cuStreamSynchronize", 2000, cuStreamSynchronize),
	P("cuStreamQuery", 2000, cuStreamQuery),
	P("cuStreamWaitEvent", 3020, cuStreamWaitEvent),
	P("cuStreamGetFlags", 5050, cuStreamGetFlags),
	P("cuStreamGetPriority", 5050, cuStreamGetPriority),
	P("cuStreamGetCtx", 9020, cuStreamGetCtx),
	P("cuStreamGetCtx", 12050, cuStreamGetCtx_v2),
	P("cuStreamGetDevice", 12080, cuStreamGetDevice),
	P("cuStreamAddCallback", 5000, cuStreamAddCallback),
	P("cuLaunchHostFunc", 10000, cuLaunchHostFunc),

	P("cuStreamWaitValue32", 8000, cuStreamWaitValue32_v2),
	P("cuStreamWriteValue32", 8000, cuStreamWriteValue32_v2),
	P("cuStreamWaitValue64", 9000, cuStreamWaitValue64_v2),
	P("cuStreamWriteValue64", 9000, cuStreamWriteValue64_v2),
	P("cuStreamBatchMemOp", 8000, cuStreamBatchMemOp_v2),

	P("cuEventCreate", 2000, cuEventCreate),
	P("cuEventRecord", 2000, cuEventRecord),
	P("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags),
	P("cuEventQuery", 2000, cuEventQuery),
	P("cuEventSynchronize", 2000, cuEventSynchronize),
	P("cuEventDestroy", 4000, cuEventDestroy_v2),
	P("cuEventElapsedTime", 2000, cuEventElapsedTime_v2),

	P("cuStreamBeginCapture", 10000, cuStreamBeginCapture),
	P("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
	P("cuStreamEndCapture", 10000, cuStreamEndCapture),
	P("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
	P("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
	P("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo),
	P("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2),
	P("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3),
	P("cuGraphInstantiate", 10000, cuGraphInstantiate),
	P("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
	P("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
	P("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
	P("cuGraphLaunch", 10000, cuGraphLaunch),
	P("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
	P("cuGraphDestroy", 10000, cuGraphDestroy),
};

#undef P

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
			     cuuint64_t flags,
			     CUdriverProcAddressQueryResult *symbolStatus)
{
	const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM |
				 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	const struct proc *best = NULL;
	bool named = false;
	size_t i;

	/* Usable before cuInit: it is how loaders find cuInit. */
	if (!symbol || !pfn || (flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].name, symbol))
			continue;
		named = true;
		if (procs[i].version <= cudaVersion &&
		    (!best || procs[i].version > best->version))
			best = &procs[i];
	}
	*pfn = best ? best->fn : NULL;
	if (symbolStatus)
		*symbolStatus = best ? CU_GET_PROC_ADDRESS_SUCCESS :
				named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT :
				CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* rt_entry.c - cudaGetDriverEntryPoint[ByVersion]: driver entry points
 * through the runtime, answered by cuGetProcAddress_v2 (the flag values of
 * the two APIs are the same bits, and so are the three query results). */
#include "runtime.h"

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
					     unsigned int cudaVersion,
					     unsigned long long flags,
					     enum cudaDriverEntryPointQueryResult *driverStatus)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult res;

	if (!symbol || !funcPtr)
		return rt_ret(cudaErrorInvalidValue);
	res = cuGetProcAddress_v2(symbol, funcPtr, (int)cudaVersion, flags, &st);
	if (driverStatus)
		*driverStatus = (enum cudaDriverEntryPointQueryResult)st;
	/* a symbol that is not there is a status, not an error */
	if (res == CUDA_ERROR_NOT_FOUND)
		return cudaSuccess;
	return rt_ret_cu(res);
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
				    unsigned long long flags,
				    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION, flags,
						driverStatus);
}

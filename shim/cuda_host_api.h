/* cuda_host_api.h - what the interposed pinned-memory entry points offer
 * the rest of the shim (cuda_dlsym.c).
 */
#ifndef CXLSHIM_SHIM_CUDA_HOST_API_H
#define CXLSHIM_SHIM_CUDA_HOST_API_H

/* If *pfn is one of the driver's host-memory entry points or its
 * cuGetProcAddress[_v2], replaces it by the shim's wrapper of the same
 * ABI and returns 1; otherwise leaves it and returns 0. */
int cxls_cuda_host_swap(void **pfn);

#endif

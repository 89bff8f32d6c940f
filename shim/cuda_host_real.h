/* cuda_host_real.h - the real CUDA host-memory entry points behind the
 * interposed ones: the runtime's from the next object (RTLD_NEXT) or an
 * already loaded libcudart, the driver's from libcuda.so.1 itself (a
 * handle lookup starts at that library, so it never finds the shim).
 */
#ifndef CXLSHIM_SHIM_CUDA_HOST_REAL_H
#define CXLSHIM_SHIM_CUDA_HOST_REAL_H

#include <cuda.h>
#include <cuda_runtime_api.h>

struct cxls_real_cudart {
	cudaError_t (*MallocHost)(void **, size_t);
	cudaError_t (*HostAlloc)(void **, size_t, unsigned int);
	cudaError_t (*FreeHost)(void *);
	cudaError_t (*HostRegister)(void *, size_t, unsigned int);
	cudaError_t (*HostUnregister)(void *);
	cudaError_t (*HostGetDevicePointer)(void **, void *, unsigned int);
	cudaError_t (*HostGetFlags)(unsigned int *, void *);
	cudaError_t (*GetDriverEntryPoint)(const char *, void **, unsigned long long,
					   enum cudaDriverEntryPointQueryResult *);
	cudaError_t (*GetDriverEntryPointByVersion)(const char *, void **, unsigned int,
						    unsigned long long,
						    enum cudaDriverEntryPointQueryResult *);
};

struct cxls_real_cuda {
	CUresult (*MemAllocHost)(void **, unsigned int); /* pre-3.2 ABI */
	CUresult (*MemAllocHost_v2)(void **, size_t);
	CUresult (*MemHostAlloc)(void **, size_t, unsigned int);
	CUresult (*MemFreeHost)(void *);
	CUresult (*MemHostRegister)(void *, size_t, unsigned int);
	CUresult (*MemHostRegister_v2)(void *, size_t, unsigned int);
	CUresult (*MemHostUnregister)(void *);
	CUresult (*MemHostGetFlags)(unsigned int *, void *);
	CUresult (*CtxGetDevice)(CUdevice *);
	CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*GetProcAddress)(const char *, void **, int, cuuint64_t);
	CUresult (*GetProcAddress_v2)(const char *, void **, int, cuuint64_t,
				      CUdriverProcAddressQueryResult *);
};

/* Never NULL; an entry is NULL when no real library provides it. */
const struct cxls_real_cudart *cxls_real_cudart(void);
const struct cxls_real_cuda *cxls_real_cuda(void);

#endif

/* cuda_drv.h - the CUDA driver entry points the core uses.
 *
 * Reached through libcuda.so.1 (the real driver, or the CPU emulation in
 * emu/cuda when LD_LIBRARY_PATH points there), never through a second copy
 * of libcudart.  Resolved once, on first use.
 */
#ifndef CXLSHIM_CORE_CUDA_DRV_H
#define CXLSHIM_CORE_CUDA_DRV_H

#include <cuda.h>

struct cxls_cuda {
	CUresult (*Init)(unsigned int);
	CUresult (*GetErrorString)(CUresult, const char **);
	CUresult (*CtxGetCurrent)(CUcontext *);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*CtxPushCurrent)(CUcontext);
	CUresult (*CtxPopCurrent)(CUcontext *);
	CUresult (*CtxGetDevice)(CUdevice *);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemHostRegister)(void *, size_t, unsigned int);
	CUresult (*MemHostUnregister)(void *);
	CUresult (*MemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned int);
	CUresult (*PointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
	CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*StreamCreate)(CUstream *, unsigned int);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*StreamQuery)(CUstream);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned int);
	CUresult (*StreamWriteValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
	CUresult (*StreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
	CUresult (*StreamWaitValue64)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
	CUresult (*StreamGetCaptureInfo)(CUstream, CUstreamCaptureStatus *, cuuint64_t *);
	CUresult (*LaunchHostFunc)(CUstream, CUhostFn, void *);
	CUresult (*EventCreate)(CUevent *, unsigned int);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventQuery)(CUevent);
	CUresult (*EventDestroy)(CUevent);
	CUresult (*StreamGetCtx)(CUstream, CUcontext *);
	CUresult (*ThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *);
	/* optional (NULL where the driver lacks them, as the CPU emulation
	 * does): the GPU reduction kernels */
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*ModuleUnload)(CUmodule);
	CUresult (*LaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
				 unsigned int, unsigned int, unsigned int, unsigned int, CUstream,
				 void **, void **);
};

/* NULL when libcuda.so.1 or one of the entry points is missing (logged). */
const struct cxls_cuda *cxls_cuda(void);
const char *cxls_cuda_strerror(CUresult r);
/* 1 when the driver is the CPU emulation (emu/cuda): device memory is
 * host memory there, so the CPU may compute on it. */
int cxls_cuda_emulated(void);
/* 1 when dev's streams can wait on 64-bit words (cuStreamWaitValue64). */
int cxls_cuda_wait64(const struct cxls_cuda *cu, CUdevice dev);

/* Around the shim's own "potentially unsafe" calls (registering memory,
 * loading a module) that may run while the application captures a CUDA
 * graph in global mode, from its thread or ours: the calling thread
 * relaxed, as NCCL does around its allocations, so that the call neither
 * fails nor invalidates the application's capture.  Returns the mode to
 * give back to cxls_cuda_capture_restore. */
CUstreamCaptureMode cxls_cuda_capture_relax(const struct cxls_cuda *cu);
void cxls_cuda_capture_restore(const struct cxls_cuda *cu, CUstreamCaptureMode mode);

/* Makes ctx current for the calls that follow, unless it is already (one
 * thread may drive several devices, and CUDA records events and launches
 * kernels only in the stream's own context).  1: pushed, give it to
 * cxls_cuda_ctx_leave; 0: it was current; -1: it could not be made so. */
int cxls_cuda_ctx_enter(const struct cxls_cuda *cu, CUcontext ctx);
void cxls_cuda_ctx_leave(const struct cxls_cuda *cu, int entered);

#endif

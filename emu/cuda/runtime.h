/* runtime.h - internals of the emulated CUDA runtime (libcudart.so.13).
 *
 * The runtime is a thin layer over the emulated driver: the C handle types
 * are shared (cudaStream_t is CUstream, cudaEvent_t is CUevent, ...), so it
 * only converts arguments and error codes and keeps the per-thread runtime
 * state: the current device and the last error.
 */
#ifndef CXLSHIM_EMU_CUDA_RUNTIME_H
#define CXLSHIM_EMU_CUDA_RUNTIME_H

#include <cuda.h>
#include <cuda_runtime_api.h>

/* Records err as the thread's last error (unless it is cudaSuccess) and
 * returns it; every API function returns through this. */
cudaError_t rt_ret(cudaError_t err);
/* rt_ret of the runtime code for a driver result. */
cudaError_t rt_ret_cu(CUresult res);
cudaError_t rt_from_cu(CUresult res);

/* Initialises the driver and makes the thread's current device's primary
 * context current, the lazy set-up every runtime call starts with. */
cudaError_t rt_enter(void);
/* rt_enter, for a call that names a device explicitly. */
cudaError_t rt_check_device(int device);

#endif

/* runtime.c - runtime set-up: the current device, versions, device-wide
 * synchronisation.
 *
 * Like libcudart, the runtime uses whatever driver context is current on the
 * thread; when there is none it makes the primary context of the thread's
 * current device (device 0 unless cudaSetDevice said otherwise) current.
 * Primary contexts are retained once per process and never released, which
 * is also what libcudart does until cudaDeviceReset.
 */
#include "runtime.h"

#include <pthread.h>
#include <stdbool.h>

#define RT_MAX_DEVICES 64

static _Thread_local int current_device = -1;

static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[RT_MAX_DEVICES];

static CUresult primary_ctx(int device, CUcontext *out)
{
	CUresult res = CUDA_SUCCESS;

	if (device < 0 || device >= RT_MAX_DEVICES)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&primary_lock);
	if (!primary[device])
		res = cuDevicePrimaryCtxRetain(&primary[device], device);
	*out = primary[device];
	pthread_mutex_unlock(&primary_lock);
	return res;
}

static CUresult make_current(int device)
{
	CUcontext ctx;
	CUresult res = primary_ctx(device, &ctx);

	if (res == CUDA_SUCCESS)
		res = cuCtxSetCurrent(ctx);
	return res;
}

cudaError_t rt_enter(void)
{
	CUcontext cur;
	CUresult res = cuInit(0);

	if (res == CUDA_SUCCESS)
		res = cuCtxGetCurrent(&cur);
	if (res == CUDA_SUCCESS && !cur)
		res = make_current(current_device < 0 ? 0 : current_device);
	return rt_from_cu(res);
}

cudaError_t rt_check_device(int device)
{
	int count;
	CUresult res = cuInit(0);

	if (res == CUDA_SUCCESS)
		res = cuDeviceGetCount(&count);
	if (res != CUDA_SUCCESS)
		return rt_from_cu(res);
	return device >= 0 && device < count ? cudaSuccess :
	       cudaErrorInvalidDevice;
}

cudaError_t cudaGetDeviceCount(int *count)
{
	CUresult res = cuInit(0);

	if (!count)
		return rt_ret(cudaErrorInvalidValue);
	if (res == CUDA_ERROR_NO_DEVICE) {
		*count = 0;
		return rt_ret(cudaErrorNoDevice);
	}
	if (res == CUDA_SUCCESS)
		res = cuDeviceGetCount(count);
	return rt_ret_cu(res);
}

cudaError_t cudaSetDevice(int device)
{
	cudaError_t err = rt_check_device(device);

	if (err != cudaSuccess)
		return rt_ret(err);
	err = rt_from_cu(make_current(device));
	if (err == cudaSuccess)
		current_device = device;
	return rt_ret(err);
}

cudaError_t cudaGetDevice(int *device)
{
	cudaError_t err;
	CUdevice dev;

	if (!device)
		return rt_ret(cudaErrorInvalidValue);
	err = rt_enter();
	if (err != cudaSuccess)
		return rt_ret(err);
	err = rt_from_cu(cuCtxGetDevice(&dev));
	if (err == cudaSuccess)
		*device = dev;
	return rt_ret(err);
}

cudaError_t cudaDeviceSynchronize(void)
{
	cudaError_t err = rt_enter();

	if (err != cudaSuccess)
		return rt_ret(err);
	return rt_ret_cu(cuCtxSynchronize());
}

/* Only waits for outstanding work: allocations and streams survive, which
 * callers that reset between tests do not notice. */
cudaError_t cudaDeviceReset(void)
{
	return cudaDeviceSynchronize();
}

cudaError_t cudaDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return rt_ret(cudaErrorInvalidValue);
	return rt_ret_cu(cuDriverGetVersion(driverVersion));
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return rt_ret(cudaErrorInvalidValue);
	*runtimeVersion = CUDART_VERSION;
	return cudaSuccess;
}

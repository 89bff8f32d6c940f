/* device.h - which CUDA device a test rank uses, and making sure its
 * inputs have landed before a collective reads them.
 *
 * Several ranks run on one host: the emulation has 8 devices, a real
 * machine often one GPU that carries every rank.
 *
 * A synchronous cudaMemcpy from pageable host memory returns once the data
 * is staged, before it reaches the device, and cudaMemset is asynchronous
 * (CUDA's "API synchronization behavior"); both run on the legacy default
 * stream, which a cudaStreamNonBlocking stream does not wait for.  A test
 * that fills buffers that way and then enqueues a collective on such a
 * stream must synchronise the device in between, as applications must.
 */
#ifndef CXLSHIM_TESTS_DEVICE_H
#define CXLSHIM_TESTS_DEVICE_H

#include <cuda_runtime_api.h>

static inline int test_device(int rank)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1)
		return 0;
	return rank % n;
}

static inline cudaError_t test_upload(void *dev, const void *host, size_t bytes)
{
	cudaError_t e = cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);

	return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

static inline cudaError_t test_memset(void *dev, int value, size_t bytes)
{
	cudaError_t e = cudaMemset(dev, value, bytes);

	return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

#endif

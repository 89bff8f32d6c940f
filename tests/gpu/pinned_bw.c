/* pinned_bw.c - cudaMemcpyAsync bandwidth between the GPU and a pinned
 * host buffer from cudaHostAlloc, host to device and device to host.
 *
 *	pinned_bw [MiB] [iterations]
 *
 * The same program runs with and without LD_PRELOAD=libcxlshim.so: under
 * the preload a [rule] places the buffer (mmap, mbind, populate,
 * cudaHostRegister) and the figures compare placed memory with the
 * driver's own pinned memory (issue 4: "the same cudaMemcpyAsync bandwidth
 * as cudaHostAlloc buffers on the same node").  Prints one line:
 *
 *	pinned_bw: bytes N h2d X GB/s d2h Y GB/s placed P
 *
 * placed: buffers the shim placed (cxlshim_mem_stats, 0 without it).  The
 * copies are checked: the bytes that come back are the bytes sent.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cxlshim.h"

#define CUDA(call)                                                                  \
	do {                                                                        \
		cudaError_t e_ = (call);                                            \
		if (e_ != cudaSuccess) {                                            \
			fprintf(stderr, "pinned_bw: %s: %s\n", #call,               \
				cudaGetErrorString(e_));                            \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

/* GB/s of `iters` copies of `bytes` each, timed by events on the stream. */
static double copy_rate(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
			int iters, cudaStream_t st)
{
	cudaEvent_t a, b;
	float ms = 0;

	CUDA(cudaEventCreate(&a));
	CUDA(cudaEventCreate(&b));
	CUDA(cudaMemcpyAsync(dst, src, bytes, kind, st)); /* warm-up */
	CUDA(cudaEventRecord(a, st));
	for (int i = 0; i < iters; i++)
		CUDA(cudaMemcpyAsync(dst, src, bytes, kind, st));
	CUDA(cudaEventRecord(b, st));
	CUDA(cudaEventSynchronize(b));
	CUDA(cudaEventElapsedTime(&ms, a, b));
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return ms > 0 ? (double)bytes * iters / (ms * 1e6) : 0;
}

static unsigned long long placed(void)
{
	struct cxlshim_mem_stats s;

	if (!cxlshim_mem_stats || cxlshim_mem_stats("dram", &s))
		return 0;
	return s.allocs;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
	int iters = argc > 2 ? atoi(argv[2]) : 20;
	size_t bytes = mib << 20;
	unsigned char *host, *back;
	void *dev;
	cudaStream_t st;
	double h2d, d2h;

	if (!mib || iters < 1) {
		fprintf(stderr, "usage: pinned_bw [MiB] [iterations]\n");
		return 2;
	}
	CUDA(cudaSetDevice(0));
	CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CUDA(cudaHostAlloc((void **)&host, bytes, cudaHostAllocDefault));
	back = malloc(bytes);
	if (!back)
		return 1;
	CUDA(cudaMalloc(&dev, bytes));
	for (size_t i = 0; i < bytes; i++)
		host[i] = (unsigned char)(i * 131 + 7);
	memcpy(back, host, bytes);

	h2d = copy_rate(dev, host, bytes, cudaMemcpyHostToDevice, iters, st);
	memset(host, 0, bytes);
	d2h = copy_rate(host, dev, bytes, cudaMemcpyDeviceToHost, iters, st);
	if (memcmp(host, back, bytes)) {
		fprintf(stderr, "pinned_bw: the bytes that came back differ\n");
		return 1;
	}
	printf("pinned_bw: bytes %zu h2d %.2f GB/s d2h %.2f GB/s placed %llu\n", bytes, h2d, d2h,
	       placed());
	CUDA(cudaFreeHost(host));
	CUDA(cudaFree(dev));
	free(back);
	return 0;
}

/* expandable.c - PyTorch's expandable segments: collective buffers in
 * memory mapped with the driver's virtual memory calls, across the seam of
 * two mappings and past the last one (expandable).
 */

#include "api.h"

/* ---- PyTorch's expandable segments ------------------------------------- */

/* The driver's virtual memory calls, found the way PyTorch finds them
 * (dlopen of libcuda, no link-time dependency). */
struct vmm {
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*free)(CUdeviceptr, size_t);
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			   unsigned long long);
	CUresult (*release)(CUmemGenericAllocationHandle);
	CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			unsigned long long);
	CUresult (*unmap)(CUdeviceptr, size_t);
	CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
};

static int vmm_load(struct vmm *v)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	memset(v, 0, sizeof(*v));
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return -1;
	*(void **)&v->reserve = dlsym(h, "cuMemAddressReserve");
	*(void **)&v->free = dlsym(h, "cuMemAddressFree");
	*(void **)&v->create = dlsym(h, "cuMemCreate");
	*(void **)&v->release = dlsym(h, "cuMemRelease");
	*(void **)&v->map = dlsym(h, "cuMemMap");
	*(void **)&v->unmap = dlsym(h, "cuMemUnmap");
	*(void **)&v->access = dlsym(h, "cuMemSetAccess");
	return v->reserve && v->free && v->create && v->release && v->map && v->unmap &&
			       v->access ? 0 : -1;
}

#define SEG (2u * MIB)

/* A segment of `nseg` allocations of SEG bytes mapped side by side on
 * device `dev`, as expandable segments grow one. */
static CUdeviceptr segment(const struct vmm *v, int dev, int nseg,
			   CUmemGenericAllocationHandle *h)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, dev } };
	CUmemAccessDesc acc = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, dev },
				.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUdeviceptr base = 0;

	if (v->reserve(&base, (size_t)(nseg + 1) * SEG, 0, 0, 0) != CUDA_SUCCESS)
		return 0;
	for (int i = 0; i < nseg; i++)
		if (v->create(&h[i], SEG, &prop, 0) != CUDA_SUCCESS ||
		    v->map(base + (CUdeviceptr)i * SEG, SEG, 0, h[i], 0) != CUDA_SUCCESS)
			return 0;
	return v->access(base, (size_t)nseg * SEG, &acc, 1) == CUDA_SUCCESS ? base : 0;
}

static void segment_free(const struct vmm *v, CUdeviceptr base, int nseg,
			 CUmemGenericAllocationHandle *h)
{
	v->unmap(base, (size_t)nseg * SEG);
	for (int i = 0; i < nseg; i++)
		v->release(h[i]);
	v->free(base, (size_t)(nseg + 1) * SEG);
}

/* Buffers that straddle two mappings are one buffer (in place, so the
 * send slice straddles too); one that runs past the last mapping into
 * reserved but unmapped space is refused. */
int case_expandable(int rank, int n, const ncclUniqueId *id, void *arg)
{
	const size_t bytes = MIB + 4096; /* n x bytes from mid-mapping: crosses a seam */
	CUmemGenericAllocationHandle h[3];
	char *recv, *host = malloc(bytes * n);
	struct vmm v;
	ncclComm_t comm;
	cudaStream_t s;
	CUdeviceptr base;
	int ok = 1;

	(void)arg;
	cudaSetDevice(test_device(rank));
	cudaFree(NULL); /* the primary context, as PyTorch makes it */
	cudaStreamCreate(&s);
	base = vmm_load(&v) ? 0 : segment(&v, rank, 3, h);
	CHECK(base, "a segment of 3 mappings (the driver's virtual memory calls)");
	if (!base)
		return CHECK_SUMMARY();
	CHECK(ncclCommInitRank(&comm, n, *id, rank) == ncclSuccess, "init");
	recv = (char *)(uintptr_t)(base + SEG - MIB / 2);
	test_memset(recv + rank * bytes, 'a' + rank, bytes);
	CHECK(ncclAllGather(recv + rank * bytes, recv, bytes, ncclInt8, comm, s) == ncclSuccess &&
		      cudaStreamSynchronize(s) == cudaSuccess,
	      "in-place AllGather across a seam");
	CHECK(cudaMemcpy(host, recv, bytes * n, cudaMemcpyDeviceToHost) == cudaSuccess, "read back");
	for (size_t i = 0; ok && i < bytes * n; i++)
		ok = host[i] == 'a' + (int)(i / bytes);
	CHECK(ok, "every rank's slice, bit-exact");
	/* from the middle of the last mapping, past its end */
	recv = (char *)(uintptr_t)(base + 3 * SEG - MIB);
	CHECK(ncclAllGather(recv, recv, bytes, ncclInt8, comm, s) == ncclInvalidArgument,
	      "past the last mapping: refused");
	CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
	segment_free(&v, base, 3, h);
	free(host);
	return CHECK_SUMMARY();
}

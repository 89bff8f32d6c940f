/* test_vmm.c - virtual memory management as PyTorch's expandable segments
 * use it: one reservation, allocations mapped side by side, copies that
 * straddle two mappings, each mapping its own address range; and every
 * call given wrong arguments. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define G (2u << 20)

static CUmemAllocationProp prop(int dev)
{
	CUmemAllocationProp p;

	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = dev;
	return p;
}

static CUresult set_access(CUdeviceptr p, size_t n)
{
	CUmemAccessDesc d = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
			      .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

	return cuMemSetAccess(p, n, &d, 1);
}

static void test_bad_args(void)
{
	CUmemAllocationProp p = prop(0), bad = prop(99);
	CUmemGenericAllocationHandle h;
	CUdeviceptr r;
	size_t g = 0;

	CHECK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
		      CUDA_SUCCESS && g == G, "granularity %zu", g);
	CHECK_CU(cuMemGetAllocationGranularity(NULL, &p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemGetAllocationGranularity(&g, &bad, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemCreate(&h, G + 4096, &p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemCreate(&h, 0, &p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemCreate(NULL, G, &p, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemCreate(&h, G, &bad, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAddressReserve(&r, G + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAddressReserve(NULL, G, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAddressReserve(&r, G, 3 * G, 0, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemRelease((CUmemGenericAllocationHandle)12345), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemAddressFree((CUdeviceptr)G, G), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemUnmap((CUdeviceptr)G, G), CUDA_ERROR_INVALID_VALUE);
}

/* Two allocations side by side in one reservation: one buffer to copies,
 * two address ranges to pointer queries. */
static void test_side_by_side(void)
{
	CUmemAllocationProp p = prop(0);
	CUmemGenericAllocationHandle h[2];
	CUdeviceptr r, start = 0;
	size_t size = 0, n = G;
	unsigned char *in = malloc(n), *out = malloc(n);
	unsigned type = 0;

	for (size_t i = 0; i < n; i++)
		in[i] = (unsigned char)(i * 7 + 3);
	CHECK_CU(cuMemAddressReserve(&r, 4 * G, 0, 0, 0), CUDA_SUCCESS);
	CHECK(r % G == 0, "reservation aligned to the granularity");
	CHECK_CU(cuMemCreate(&h[0], G, &p, 0), CUDA_SUCCESS);
	CHECK_CU(cuMemCreate(&h[1], G, &p, 0), CUDA_SUCCESS);
	CHECK_CU(cuMemMap(r, G, 0, h[0], 0), CUDA_SUCCESS);
	CHECK_CU(cuMemMap(r + G, G, 0, h[1], 0), CUDA_SUCCESS);
	CHECK_CU(cuMemMap(r + G, G, 0, h[0], 0), CUDA_ERROR_ALREADY_MAPPED);
	CHECK_CU(cuMemMap(r + 4 * G, G, 0, h[0], 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemMap(r + 2 * G, G, G, h[0], 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemMap(r + 4096, G, 0, h[0], 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(set_access(r, 2 * G), CUDA_SUCCESS);
	CHECK_CU(set_access(r, 3 * G), CUDA_ERROR_INVALID_VALUE);

	/* a copy across the seam, and back */
	CHECK_CU(cuMemcpyHtoD(r + G / 2, in, n), CUDA_SUCCESS);
	memset(out, 0, n);
	CHECK_CU(cuMemcpyDtoH(out, r + G / 2, n), CUDA_SUCCESS);
	CHECK(!memcmp(in, out, n), "bytes across two mappings");
	CHECK_CU(cuMemcpyHtoD(r + G + G / 2, in, n), CUDA_ERROR_INVALID_VALUE);

	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, r + G + 8) ==
		      CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE, "device memory");
	CHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, r + G + 8) ==
		      CUDA_SUCCESS && start == r + G, "each mapping its own range (start)");
	CHECK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, r + 8) ==
		      CUDA_SUCCESS && size == G, "each mapping its own range (size %zu)", size);

	/* released while mapped: the memory lives until unmapped */
	CHECK_CU(cuMemRelease(h[0]), CUDA_SUCCESS);
	CHECK_CU(cuMemRelease(h[0]), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemcpyDtoH(out, r + G / 2, n), CUDA_SUCCESS);
	CHECK(!memcmp(in, out, n), "released memory still mapped");
	CHECK_CU(cuMemAddressFree(r, 4 * G), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemUnmap(r + G / 2, G), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuMemUnmap(r, 2 * G), CUDA_SUCCESS);
	CHECK_CU(cuMemcpyDtoH(out, r, 16), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, r) ==
		      CUDA_ERROR_INVALID_VALUE, "unmapped: no CUDA pointer");

	/* the same allocation mapped again shows what it held */
	CHECK_CU(cuMemMap(r + 3 * G, G, 0, h[1], 0), CUDA_SUCCESS);
	CHECK_CU(cuMemcpyDtoH(out, r + 3 * G, G / 2), CUDA_SUCCESS);
	CHECK(!memcmp(in + G / 2, out, G / 2), "an allocation keeps its bytes across mappings");
	CHECK_CU(cuMemUnmap(r + 3 * G, G), CUDA_SUCCESS);
	CHECK_CU(cuMemRelease(h[1]), CUDA_SUCCESS);
	CHECK_CU(cuMemAddressFree(r, 4 * G), CUDA_SUCCESS);
	free(in);
	free(out);
}

int main(void)
{
	CUcontext ctx;

	check_watchdog(60);
	CHECK_CU(cuInit(0), CUDA_SUCCESS);
	cuDevicePrimaryCtxRetain(&ctx, 0);
	cuCtxSetCurrent(ctx);
	test_bad_args();
	test_side_by_side();
	return check_done();
}

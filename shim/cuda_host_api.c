/* cuda_host_api.c - the CUDA pinned host memory API as a preloaded
 * application sees it: runtime (cudaMallocHost, cudaHostAlloc, cudaFreeHost,
 * cudaHostRegister, cudaHostUnregister, cudaHostGetDevicePointer,
 * cudaHostGetFlags) and driver (cuMemAllocHost[_v2], cuMemHostAlloc,
 * cuMemFreeHost, cuMemHostRegister[_v2], cuMemHostUnregister,
 * cuMemHostGetFlags), plus the ways a program obtains driver entry points
 * without the dynamic linker: cuGetProcAddress[_v2] and
 * cudaGetDriverEntryPoint[ByVersion] hand out these wrappers instead of the
 * driver's own functions, and so does dlsym on a handle of libcuda
 * (cuda_dlsym.c), the way statically linked cudart finds cuGetProcAddress.
 *
 * Thin entry points: the core decides (core/mem/hostmem.c); what it does
 * not claim reaches the real function untouched.  The runtime implements
 * its calls with driver calls, which come back here: a thread-local depth
 * lets those through unchanged, so one request is placed once.  Exported
 * names are given with asm labels because cuda.h maps several of them to
 * their _v2 names with macros.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "cuda_host_api.h"
#include "cuda_host_real.h"
#include "hostmem.h"
#include "log.h"
#include "mem_rules.h"

#define EXPORT __attribute__((visibility("default")))
#define ENTRY(ret, cname, sym, params) \
	EXPORT ret cname params __asm__(sym); \
	ret cname params

/* > 0 while this thread is inside a real CUDA call made by the shim. */
static _Thread_local int depth;

/* ---- flags: both APIs use the same bits for these ---- */

#define ALLOC_FLAGS (cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined)
#define REGISTER_FLAGS (cudaHostRegisterPortable | cudaHostRegisterMapped | \
			cudaHostRegisterIoMemory | cudaHostRegisterReadOnly)

static unsigned alloc_memf(unsigned flags)
{
	return (flags & cudaHostAllocPortable ? CXLS_MEMF_PORTABLE : 0) |
	       (flags & cudaHostAllocMapped ? CXLS_MEMF_MAPPED : 0) |
	       (flags & cudaHostAllocWriteCombined ? CXLS_MEMF_WRITECOMBINED : 0);
}

static unsigned register_memf(unsigned flags)
{
	return (flags & cudaHostRegisterPortable ? CXLS_MEMF_PORTABLE : 0) |
	       (flags & cudaHostRegisterMapped ? CXLS_MEMF_MAPPED : 0) |
	       (flags & cudaHostRegisterIoMemory ? CXLS_MEMF_IOMEMORY : 0) |
	       (flags & cudaHostRegisterReadOnly ? CXLS_MEMF_READONLY : 0);
}

static unsigned alloc_flags(unsigned memf)
{
	return (memf & CXLS_MEMF_PORTABLE ? cudaHostAllocPortable : 0) |
	       (memf & CXLS_MEMF_MAPPED ? cudaHostAllocMapped : 0) |
	       (memf & CXLS_MEMF_WRITECOMBINED ? cudaHostAllocWriteCombined : 0);
}

static unsigned register_flags(unsigned memf)
{
	return (memf & CXLS_MEMF_PORTABLE ? cudaHostRegisterPortable : 0) |
	       (memf & CXLS_MEMF_MAPPED ? cudaHostRegisterMapped : 0);
}

/* ---- how the core registers memory, per API ---- */

static int rt_reg(void *p, size_t len, unsigned memf)
{
	const struct cxls_real_cudart *r = cxls_real_cudart();
	cudaError_t e;

	if (!r->HostRegister)
		return cudaErrorInitializationError;
	depth++;
	e = r->HostRegister(p, len, register_flags(memf));
	depth--;
	return e;
}

static int rt_unreg(void *p)
{
	const struct cxls_real_cudart *r = cxls_real_cudart();
	cudaError_t e;

	if (!r->HostUnregister)
		return cudaErrorInitializationError;
	depth++;
	e = r->HostUnregister(p);
	depth--;
	return e;
}

static int drv_reg(void *p, size_t len, unsigned memf)
{
	const struct cxls_real_cuda *d = cxls_real_cuda();

	if (!d->MemHostRegister_v2)
		return CUDA_ERROR_NOT_INITIALIZED;
	return d->MemHostRegister_v2(p, len, register_flags(memf));
}

static int drv_unreg(void *p)
{
	const struct cxls_real_cuda *d = cxls_real_cuda();

	return d->MemHostUnregister ? d->MemHostUnregister(p) : CUDA_ERROR_NOT_INITIALIZED;
}

/* Where "dram" puts this thread's buffers: next to its current device. */
static int device_pci(char *buf, int len)
{
	const struct cxls_real_cuda *d = cxls_real_cuda();
	CUdevice dev;

	if (!d->CtxGetDevice || !d->DeviceGetPCIBusId || d->CtxGetDevice(&dev) != CUDA_SUCCESS ||
	    d->DeviceGetPCIBusId(buf, len, dev) != CUDA_SUCCESS)
		return -1;
	return 0;
}

static const struct cxls_hostmem_ops rt_ops = {
	.api = "cudaHostAlloc",
	.reg = rt_reg,
	.unreg = rt_unreg,
	.device_pci = device_pci,
	.nomem = cudaErrorMemoryAllocation,
	.notreg = cudaErrorHostMemoryNotRegistered,
};
static const struct cxls_hostmem_ops drv_ops = {
	.api = "cuMemHostAlloc",
	.reg = drv_reg,
	.unreg = drv_unreg,
	.device_pci = device_pci,
	.nomem = CUDA_ERROR_OUT_OF_MEMORY,
	.notreg = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
};

/* ---- forwarding: one WARN when the real call refuses an application's
 * request (null pointer, size 0, double free, foreign pointer, ...) ---- */

static cudaError_t rt_done(const char *fn, const void *p, size_t n, cudaError_t e)
{
	if (e != cudaSuccess && !depth)
		CXLS_WARN("%s(%p, %zu): CUDA runtime error %d", fn, p, n, (int)e);
	return e;
}

static CUresult drv_done(const char *fn, const void *p, size_t n, CUresult e)
{
	if (e != CUDA_SUCCESS && !depth)
		CXLS_WARN("%s(%p, %zu): CUDA error %d", fn, p, n, (int)e);
	return e;
}

/* Forwards to the real runtime's `field`; p and n only label the WARN. */
#define RT_CALL(field, p, n, ...)                                                  \
	do {                                                                       \
		const struct cxls_real_cudart *r_ = cxls_real_cudart();            \
		cudaError_t e_;                                                    \
		if (!r_->field)                                                    \
			return cudaErrorInitializationError;                       \
		depth++;                                                           \
		e_ = r_->field(__VA_ARGS__);                                       \
		depth--;                                                           \
		return rt_done("cuda" #field, p, n, e_);                           \
	} while (0)

/* ---- runtime ---- */

static cudaError_t rt_alloc(void **p, size_t size, unsigned flags, const void *caller,
			    int plain_mallochost)
{
	const struct cxls_real_cudart *r = cxls_real_cudart();
	cudaError_t e;
	int rc;

	if (!depth && p && !(flags & ~ALLOC_FLAGS) &&
	    cxls_hostmem_alloc(size, plain_mallochost ? CXLS_MEMF_PORTABLE | CXLS_MEMF_MAPPED :
							alloc_memf(flags),
			       caller, &rt_ops, p, &rc) == CXLS_HM_DONE)
		return rt_done(plain_mallochost ? "cudaMallocHost" : "cudaHostAlloc", p, size, rc);
	if (plain_mallochost ? !r->MallocHost : !r->HostAlloc)
		return cudaErrorInitializationError;
	depth++;
	e = plain_mallochost ? r->MallocHost(p, size) : r->HostAlloc(p, size, flags);
	depth--;
	return rt_done(plain_mallochost ? "cudaMallocHost" : "cudaHostAlloc", p, size, e);
}

ENTRY(cudaError_t, shim_cudaMallocHost, "cudaMallocHost", (void **ptr, size_t size))
{
	return rt_alloc(ptr, size, 0, __builtin_return_address(0), 1);
}

ENTRY(cudaError_t, shim_cudaHostAlloc, "cudaHostAlloc", (void **pHost, size_t size,
							unsigned int flags))
{
	return rt_alloc(pHost, size, flags, __builtin_return_address(0), 0);
}

ENTRY(cudaError_t, shim_cudaFreeHost, "cudaFreeHost", (void *ptr))
{
	int rc;

	if (!depth && cxls_hostmem_free(ptr, &rt_ops, &rc) == CXLS_HM_DONE)
		return rc;
	RT_CALL(FreeHost, ptr, 0, ptr);
}

ENTRY(cudaError_t, shim_cudaHostRegister, "cudaHostRegister", (void *ptr, size_t size,
							      unsigned int flags))
{
	int rc;

	if (!depth && !(flags & ~REGISTER_FLAGS) &&
	    cxls_hostmem_register(ptr, size, register_memf(flags), __builtin_return_address(0),
				  &rt_ops, &rc) == CXLS_HM_DONE)
		return rt_done("cudaHostRegister", ptr, size, rc);
	RT_CALL(HostRegister, ptr, size, ptr, size, flags);
}

ENTRY(cudaError_t, shim_cudaHostUnregister, "cudaHostUnregister", (void *ptr))
{
	int rc;

	if (!depth && cxls_hostmem_unregister(ptr, &rt_ops, &rc) == CXLS_HM_DONE)
		return rt_done("cudaHostUnregister", ptr, 0, rc);
	RT_CALL(HostUnregister, ptr, 0, ptr);
}

/* Registered with DEVICEMAP, the shim's buffers have a device address
 * the runtime knows: nothing to translate, only to forward. */
ENTRY(cudaError_t, shim_cudaHostGetDevicePointer, "cudaHostGetDevicePointer", (void **pDevice, void *pHost, unsigned int flags))
{
	RT_CALL(HostGetDevicePointer, pHost, 0, pDevice, pHost, flags);
}

/* The shim's buffers are registered memory to CUDA, which reports flags
 * only for its own allocations: the flags the application asked for are
 * answered here, for any address inside the buffer, as CUDA does. */
ENTRY(cudaError_t, shim_cudaHostGetFlags, "cudaHostGetFlags", (unsigned int *pFlags, void *pHost))
{
	unsigned memf;

	if (!depth && pFlags && cxls_hostmem_flags(pHost, &memf) == CXLS_HM_DONE) {
		*pFlags = alloc_flags(memf);
		return cudaSuccess;
	}
	RT_CALL(HostGetFlags, pHost, 0, pFlags, pHost);
}

/* ---- driver ---- */

static CUresult drv_alloc(const char *fn, void **pp, size_t size, unsigned flags,
			  const void *caller)
{
	const struct cxls_real_cuda *d = cxls_real_cuda();
	CUresult e;
	int rc;

	if (!depth && pp && !(flags & ~ALLOC_FLAGS) &&
	    cxls_hostmem_alloc(size, alloc_memf(flags), caller, &drv_ops, pp, &rc) == CXLS_HM_DONE)
		return drv_done(fn, pp, size, rc);
	if (!d->MemHostAlloc)
		return CUDA_ERROR_NOT_INITIALIZED;
	e = d->MemHostAlloc(pp, size, flags);
	return drv_done(fn, pp, size, e);
}

ENTRY(CUresult, shim_cuMemHostAlloc, "cuMemHostAlloc", (void **pp, size_t bytesize,
						       unsigned int Flags))
{
	return drv_alloc("cuMemHostAlloc", pp, bytesize, Flags, __builtin_return_address(0));
}

/* cuMemAllocHost memory is portable and mapped under unified addressing. */
ENTRY(CUresult, shim_cuMemAllocHost_v2, "cuMemAllocHost_v2", (void **pp, size_t bytesize))
{
	return drv_alloc("cuMemAllocHost", pp, bytesize,
			 CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP,
			 __builtin_return_address(0));
}

/* The pre-3.2 ABI took a 32-bit size. */
ENTRY(CUresult, shim_cuMemAllocHost, "cuMemAllocHost", (void **pp, unsigned int bytesize))
{
	return drv_alloc("cuMemAllocHost", pp, bytesize,
			 CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP,
			 __builtin_return_address(0));
}

ENTRY(CUresult, shim_cuMemFreeHost, "cuMemFreeHost", (void *p))
{
	const struct cxls_real_cuda *d = cxls_real_cuda();
	int rc;

	if (!depth && cxls_hostmem_free(p, &drv_ops, &rc) == CXLS_HM_DONE)
		return rc;
	if (!d->MemFreeHost)
		return CUDA_ERROR_NOT_INITIALIZED;
	return drv_done("cuMemFreeHost", p, 0, d->MemFreeHost(p));
}

static CUresult drv_register(void *p, size_t size, unsigned flags, const void *caller)
{
	const struct cxls_real_cuda *d = cxls_real_cuda();
	int rc;

	if (!depth && !(flags & ~REGISTER_FLAGS) &&
	    cxls_hostmem_register(p, size, register_memf(flags), caller, &drv_ops, &rc) ==
		    CXLS_HM_DONE)
		return drv_done("cuMemHostRegister", p, size, rc);
	if (!d->MemHostRegister_v2)
		return CUDA_ERROR_NOT_INITIALIZED;
	return drv_done("cuMemHostRegister", p, size, d->MemHostRegister_v2(p, size, flags));
}

ENTRY(CUresult, shim_cuMemHostRegister_v2, "cuMemHostRegister_v2", (void *p, size_t bytesize,
								   unsigned int Flags))
{
	return drv_register(p, bytesize, Flags, __builtin_return_address(0));
}

ENTRY(CUresult, shim_cuMemHostRegister, "cuMemHostRegister", (void *p, size_t bytesize,
							     unsigned int Flags))
{
	return drv_register(p, bytesize, Flags, __builtin_return_address(0));
}

ENTRY(CUresult, shim_cuMemHostUnregister, "cuMemHostUnregister", (void *p))
{
	const struct cxls_real_cuda *d = cxls_real_cuda();
	int rc;

	if (!depth && cxls_hostmem_unregister(p, &drv_ops, &rc) == CXLS_HM_DONE)
		return drv_done("cuMemHostUnregister", p, 0, rc);
	if (!d->MemHostUnregister)
		return CUDA_ERROR_NOT_INITIALIZED;
	return drv_done("cuMemHostUnregister", p, 0, d->MemHostUnregister(p));
}

ENTRY(CUresult, shim_cuMemHostGetFlags, "cuMemHostGetFlags", (unsigned int *pFlags, void *p))
{
	const struct cxls_real_cuda *d = cxls_real_cuda();
	unsigned memf;

	if (!depth && pFlags && cxls_hostmem_flags(p, &memf) == CXLS_HM_DONE) {
		*pFlags = alloc_flags(memf); /* CU_MEMHOSTALLOC_*: the same bits */
		return CUDA_SUCCESS;
	}
	if (!d->MemHostGetFlags)
		return CUDA_ERROR_NOT_INITIALIZED;
	return drv_done("cuMemHostGetFlags", p, 0, d->MemHostGetFlags(pFlags, p));
}

/* ---- entry points handed out at run time ---- */

EXPORT CUresult shim_cuGetProcAddress(const char *, void **, int, cuuint64_t)
	__asm__("cuGetProcAddress");
EXPORT CUresult shim_cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
					 CUdriverProcAddressQueryResult *)
	__asm__("cuGetProcAddress_v2");

/* The driver's function -> ours, for what the driver just handed out.
 * Compared by address, so the variant (v1 or _v2 ABI) is the one the
 * caller asked for. */
int cxls_cuda_host_swap(void **pfn)
{
	const struct cxls_real_cuda *d = cxls_real_cuda();
	const struct {
		void *real, *ours;
	} map[] = {
		{ (void *)d->MemAllocHost_v2, (void *)shim_cuMemAllocHost_v2 },
		{ (void *)d->MemAllocHost, (void *)shim_cuMemAllocHost },
		{ (void *)d->MemHostAlloc, (void *)shim_cuMemHostAlloc },
		{ (void *)d->MemFreeHost, (void *)shim_cuMemFreeHost },
		{ (void *)d->MemHostRegister_v2, (void *)shim_cuMemHostRegister_v2 },
		{ (void *)d->MemHostRegister, (void *)shim_cuMemHostRegister },
		{ (void *)d->MemHostUnregister, (void *)shim_cuMemHostUnregister },
		{ (void *)d->MemHostGetFlags, (void *)shim_cuMemHostGetFlags },
		{ (void *)d->GetProcAddress_v2, (void *)shim_cuGetProcAddress_v2 },
		{ (void *)d->GetProcAddress, (void *)shim_cuGetProcAddress },
	};

	if (!pfn || !*pfn)
		return 0;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (map[i].real && *pfn == map[i].real) {
			*pfn = map[i].ours;
			return 1;
		}
	}
	return 0;
}

ENTRY(CUresult, shim_cuGetProcAddress_v2, "cuGetProcAddress_v2", (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
	CUdriverProcAddressQueryResult *symbolStatus))
{
	const struct cxls_real_cuda *d = cxls_real_cuda();
	CUresult e;

	if (!d->GetProcAddress_v2)
		return CUDA_ERROR_NOT_INITIALIZED;
	e = d->GetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (e == CUDA_SUCCESS && !depth)
		cxls_cuda_host_swap(pfn);
	return e;
}

EXPORT __typeof__(shim_cuGetProcAddress_v2) shim_cuGetProcAddress_v2_ptsz
	__asm__("cuGetProcAddress_v2_ptsz") __attribute__((alias("cuGetProcAddress_v2")));

/* The CUDA 11.3 signature, without the status. */
ENTRY(CUresult, shim_cuGetProcAddress, "cuGetProcAddress", (const char *symbol, void **pfn,
							   int cudaVersion, cuuint64_t flags))
{
	const struct cxls_real_cuda *d = cxls_real_cuda();
	CUresult e;

	if (!d->GetProcAddress)
		return CUDA_ERROR_NOT_INITIALIZED;
	e = d->GetProcAddress(symbol, pfn, cudaVersion, flags);
	if (e == CUDA_SUCCESS && !depth)
		cxls_cuda_host_swap(pfn);
	return e;
}

ENTRY(cudaError_t, shim_cudaGetDriverEntryPoint, "cudaGetDriverEntryPoint", (const char *symbol, void **funcPtr, unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus))
{
	const struct cxls_real_cudart *r = cxls_real_cudart();
	cudaError_t e;

	if (!r->GetDriverEntryPoint)
		return cudaErrorInitializationError;
	depth++;
	e = r->GetDriverEntryPoint(symbol, funcPtr, flags, driverStatus);
	depth--;
	if (e == cudaSuccess && !depth)
		cxls_cuda_host_swap(funcPtr);
	return e;
}

ENTRY(cudaError_t, shim_cudaGetDriverEntryPointByVersion, "cudaGetDriverEntryPointByVersion", (const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
	enum cudaDriverEntryPointQueryResult *driverStatus))
{
	const struct cxls_real_cudart *r = cxls_real_cudart();
	cudaError_t e;

	if (!r->GetDriverEntryPointByVersion)
		return cudaErrorInitializationError;
	depth++;
	e = r->GetDriverEntryPointByVersion(symbol, funcPtr, cudaVersion, flags, driverStatus);
	depth--;
	if (e == cudaSuccess && !depth)
		cxls_cuda_host_swap(funcPtr);
	return e;
}

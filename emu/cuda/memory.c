/* memory.c - "device" memory, pinned and registered host memory, pointer
 * attributes.
 *
 * Device memory is host memory from posix_memalign (256-byte aligned like
 * cudaMalloc). Every allocation and registration is a range in one table,
 * sorted by base address, so pointer attributes and the device-accessibility
 * checks of the copy and memop paths are a binary search. The device pointer
 * of mapped or registered host memory is the host pointer itself, which is
 * what CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM promises.
 *
 * Freeing does not wait for queued work that still uses the memory: as with
 * CUDA's asynchronous work, that is the caller's bug, and here it shows up
 * under AddressSanitizer or valgrind instead of being hidden.
 */
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define HOST_ALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | \
			  CU_MEMHOSTALLOC_DEVICEMAP | \
			  CU_MEMHOSTALLOC_WRITECOMBINED)
#define HOST_REGISTER_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | \
			     CU_MEMHOSTREGISTER_DEVICEMAP | \
			     CU_MEMHOSTREGISTER_IOMEMORY | \
			     CU_MEMHOSTREGISTER_READ_ONLY)

static pthread_rwlock_t mem_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct emu_range *ranges;	/* sorted by base, disjoint */
static size_t nranges, cap_ranges;
static unsigned long long next_buffer_id = 1;
static size_t used_bytes[EMU_MAX_DEVICES];

/* ---- the range table (mem_lock held) ---- */

/* Index of the first range with base > addr. */
static size_t upper_bound(uintptr_t addr)
{
	size_t lo = 0, hi = nranges, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ranges[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct emu_range *lookup(uintptr_t addr)
{
	size_t i = upper_bound(addr);

	if (i == 0)
		return NULL;
	if (addr - ranges[i - 1].base >= ranges[i - 1].size)
		return NULL;
	return &ranges[i - 1];
}

static bool overlaps(uintptr_t base, size_t size)
{
	size_t i = upper_bound(base);

	if (i > 0 && base - ranges[i - 1].base < ranges[i - 1].size)
		return true;
	return i < nranges && ranges[i].base - base < size;
}

static CUresult insert(struct emu_range *r)
{
	struct emu_range *p;
	size_t i;

	if (overlaps(r->base, r->size))
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	if (nranges == cap_ranges) {
		size_t ncap = cap_ranges ? cap_ranges * 2 : 64;

		p = realloc(ranges, ncap * sizeof(*p));
		if (!p)
			return CUDA_ERROR_OUT_OF_MEMORY;
		ranges = p;
		cap_ranges = ncap;
	}
	i = upper_bound(r->base);
	memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof(*ranges));
	r->id = next_buffer_id++;
	ranges[i] = *r;
	nranges++;
	return CUDA_SUCCESS;
}

/* Removes the range starting exactly at base, of that kind. */
static bool remove_at(uintptr_t base, enum emu_mem_kind kind,
		      struct emu_range *out)
{
	struct emu_range *r = lookup(base);
	size_t i;

	if (!r || r->base != base || r->kind != kind)
		return false;
	*out = *r;
	i = (size_t)(r - ranges);
	memmove(&ranges[i], &ranges[i + 1],
		(nranges - i - 1) * sizeof(*ranges));
	nranges--;
	return true;
}

bool emu_mem_find(uintptr_t addr, struct emu_range *out)
{
	struct emu_range *r;

	pthread_rwlock_rdlock(&mem_lock);
	r = lookup(addr);
	if (r)
		*out = *r;
	pthread_rwlock_unlock(&mem_lock);
	return r != NULL;
}

/* Ranges that touch read as one: the pieces cuMemMap put side by side
 * in one reservation are one buffer to a copy, as on a GPU. */
CUresult emu_mem_check_access(uintptr_t addr, size_t bytes)
{
	struct emu_range r;

	if (!emu_config.check_ptrs)
		return CUDA_SUCCESS;
	while (emu_mem_find(addr, &r)) {
		size_t left = r.size - (addr - r.base);

		if (bytes <= left)
			return CUDA_SUCCESS;
		addr += left;
		bytes -= left;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult emu_mem_add(struct emu_range *r)
{
	CUresult res;

	pthread_rwlock_wrlock(&mem_lock);
	res = insert(r);
	pthread_rwlock_unlock(&mem_lock);
	return res;
}

bool emu_mem_remove(uintptr_t base, enum emu_mem_kind kind, struct emu_range *out)
{
	bool found;

	pthread_rwlock_wrlock(&mem_lock);
	found = remove_at(base, kind, out);
	pthread_rwlock_unlock(&mem_lock);
	return found;
}

/* ---- allocation ---- */

static size_t round_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

/* Page-locked host memory as the driver makes it: its own mapping, every
 * page present when the call returns (the driver pins them), so the cost
 * of an allocation is what it is on a GPU machine. */
static void *host_pages(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (madvise(p, bytes, MADV_POPULATE_WRITE) && errno != EINVAL) {
		munmap(p, bytes);
		return NULL;
	}
	return p;
}

static void free_pages_or_block(const struct emu_range *r)
{
	if (r->kind == EMU_MEM_HOST)
		munmap((void *)r->base, r->size);
	else
		free((void *)r->base);
}

/* Allocates, records and returns in *out a range of `kind` in the current
 * context. */
static CUresult mem_alloc(size_t bytes, enum emu_mem_kind kind,
			  unsigned int flags, size_t align, void **out)
{
	struct emu_range r = { .kind = kind, .flags = flags };
	struct CUctx_st *ctx;
	CUresult res = emu_ctx_current(&ctx);
	void *p = NULL;

	if (res != CUDA_SUCCESS)
		return res;
	r.dev = ctx->dev;
	r.ctx = ctx;
	emu_ctx_put(ctx);
	if (bytes == 0 || bytes > SIZE_MAX - align)
		return CUDA_ERROR_INVALID_VALUE;
	r.size = round_up(bytes, align);
	/* populating takes a while: not under the table lock */
	if (kind == EMU_MEM_HOST && !(p = host_pages(r.size)))
		return CUDA_ERROR_OUT_OF_MEMORY;

	pthread_rwlock_wrlock(&mem_lock);
	/* Device memory is budgeted per device, so cuMemGetInfo moves and
	 * an oversubscribing caller gets CUDA_ERROR_OUT_OF_MEMORY. */
	if (kind == EMU_MEM_DEVICE &&
	    r.size > emu_config.mem_bytes - used_bytes[r.dev]) {
		res = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if (kind != EMU_MEM_HOST && posix_memalign(&p, align, r.size))
		p = NULL;
	if (!p) {
		res = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	r.base = (uintptr_t)p;
	res = insert(&r);
	if (res != CUDA_SUCCESS) {
		free_pages_or_block(&r);
		goto out;
	}
	if (kind == EMU_MEM_DEVICE)
		used_bytes[r.dev] += r.size;
	*out = p;
out:
	pthread_rwlock_unlock(&mem_lock);
	return res;
}

static CUresult mem_free(uintptr_t base, enum emu_mem_kind kind)
{
	struct emu_range r;
	bool found;

	pthread_rwlock_wrlock(&mem_lock);
	found = remove_at(base, kind, &r);
	if (found && kind == EMU_MEM_DEVICE)
		used_bytes[r.dev] -= r.size;
	pthread_rwlock_unlock(&mem_lock);
	if (!found)
		return CUDA_ERROR_INVALID_VALUE;
	free_pages_or_block(&r);
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	CUresult res = emu_check_init();
	void *p;

	if (res != CUDA_SUCCESS)
		return res;
	if ((res = emu_capture_unsafe_call()) != CUDA_SUCCESS)
		return res;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	res = mem_alloc(bytesize, EMU_MEM_DEVICE, 0, EMU_ALLOC_ALIGN, &p);
	if (res == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return res;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if ((res = emu_capture_unsafe_call()) != CUDA_SUCCESS)
		return res;
	if (!dptr)
		return CUDA_SUCCESS;
	/* A late copy or memset (stream.c) may still be due to write the
	 * block: the caller did nothing wrong, CUDA's free waits for it. */
	emu_late_flush();
	return mem_free((uintptr_t)dptr, EMU_MEM_DEVICE);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if ((res = emu_capture_unsafe_call()) != CUDA_SUCCESS)
		return res;
	if (!pp || (Flags & ~(unsigned)HOST_ALLOC_FLAGS))
		return CUDA_ERROR_INVALID_VALUE;
	return mem_alloc(bytesize, EMU_MEM_HOST, Flags,
			 (size_t)sysconf(_SC_PAGESIZE), pp);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	/* With unified addressing, page-locked memory is mapped and
	 * portable anyway; report it that way. */
	return cuMemHostAlloc(pp, bytesize, CU_MEMHOSTALLOC_PORTABLE |
			      CU_MEMHOSTALLOC_DEVICEMAP);
}

CUresult cuMemFreeHost(void *p)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if ((res = emu_capture_unsafe_call()) != CUDA_SUCCESS)
		return res;
	if (!p)
		return CUDA_SUCCESS;
	return mem_free((uintptr_t)p, EMU_MEM_HOST);
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	struct emu_range r = { .kind = EMU_MEM_REGISTERED, .flags = Flags };
	struct CUctx_st *ctx;
	CUresult res = emu_ctx_current(&ctx);

	if (res != CUDA_SUCCESS)
		return res;
	if ((res = emu_capture_unsafe_call()) != CUDA_SUCCESS)
		return res;
	r.dev = ctx->dev;
	r.ctx = ctx;
	emu_ctx_put(ctx);
	if (!p || !bytesize || (Flags & ~(unsigned)HOST_REGISTER_FLAGS) ||
	    bytesize > UINTPTR_MAX - (uintptr_t)p)
		return CUDA_ERROR_INVALID_VALUE;
	r.base = (uintptr_t)p;
	r.size = bytesize;
	pthread_rwlock_wrlock(&mem_lock);
	res = insert(&r);
	pthread_rwlock_unlock(&mem_lock);
	return res;
}

CUresult cuMemHostUnregister(void *p)
{
	struct emu_range r;
	CUresult res = emu_check_init();
	bool found;

	if (res != CUDA_SUCCESS)
		return res;
	if ((res = emu_capture_unsafe_call()) != CUDA_SUCCESS)
		return res;
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_rwlock_wrlock(&mem_lock);
	found = remove_at((uintptr_t)p, EMU_MEM_REGISTERED, &r);
	pthread_rwlock_unlock(&mem_lock);
	return found ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p,
				      unsigned int Flags)
{
	struct emu_range r;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!pdptr || !p || Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!emu_mem_find((uintptr_t)p, &r) || emu_mem_is_device(r.kind))
		return CUDA_ERROR_INVALID_VALUE;
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	struct emu_range r;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!pFlags || !p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!emu_mem_find((uintptr_t)p, &r) || emu_mem_is_device(r.kind))
		return CUDA_ERROR_INVALID_VALUE;
	*pFlags = r.flags;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
				 CUdeviceptr dptr)
{
	struct emu_range r;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!emu_mem_find((uintptr_t)dptr, &r))
		return CUDA_ERROR_NOT_FOUND;
	/* Both outputs are optional. */
	if (pbase)
		*pbase = (CUdeviceptr)r.base;
	if (psize)
		*psize = r.size;
	return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	struct CUctx_st *ctx;
	CUresult res = emu_ctx_current(&ctx);
	CUdevice dev;

	if (res != CUDA_SUCCESS)
		return res;
	dev = ctx->dev;
	emu_ctx_put(ctx);
	if (!free_bytes || !total)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_rwlock_rdlock(&mem_lock);
	*free_bytes = emu_config.mem_bytes - used_bytes[dev];
	pthread_rwlock_unlock(&mem_lock);
	*total = emu_config.mem_bytes;
	return CUDA_SUCCESS;
}

/* ---- pointer attributes ---- */

/* Writes one attribute of the range r (NULL: not a CUDA pointer) for ptr.
 * Returns CUDA_ERROR_INVALID_VALUE for attributes we do not model and, when
 * `strict`, for unknown pointers (cuPointerGetAttribute); otherwise unknown
 * pointers read as zero / NULL (cuPointerGetAttributes). */
static CUresult attr_one(CUpointer_attribute attr, void *data,
			 const struct emu_range *r, CUdeviceptr ptr,
			 bool strict)
{
	bool dev = r && emu_mem_is_device(r->kind);

	if (!r && strict)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = r ? r->ctx : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = !r ? 0 : dev ? CU_MEMORYTYPE_DEVICE :
					CU_MEMORYTYPE_HOST;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = r ? ptr : 0;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		/* Device memory is not host accessible in CUDA's model. */
		if (dev && strict)
			return CUDA_ERROR_INVALID_VALUE;
		*(void **)data = r && !dev ? (void *)(uintptr_t)ptr : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
		*(unsigned int *)data = r != NULL;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = r ? r->id : 0;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		*(unsigned int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = r ? r->dev : -2;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = r ? (CUdeviceptr)r->base : 0;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = r ? r->size : 0;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(unsigned int *)data = r != NULL;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
			       CUdeviceptr ptr)
{
	struct emu_range r;
	CUresult res = emu_check_init();
	bool known;

	if (res != CUDA_SUCCESS)
		return res;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	known = emu_mem_find((uintptr_t)ptr, &r);
	return attr_one(attribute, data, known ? &r : NULL, ptr, true);
}

CUresult cuPointerGetAttributes(unsigned int numAttributes,
				CUpointer_attribute *attributes, void **data,
				CUdeviceptr ptr)
{
	struct emu_range r;
	CUresult res = emu_check_init();
	unsigned int i;
	bool known;

	if (res != CUDA_SUCCESS)
		return res;
	if (!numAttributes || !attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < numAttributes; i++)
		if (!data[i])
			return CUDA_ERROR_INVALID_VALUE;
	known = emu_mem_find((uintptr_t)ptr, &r);
	for (i = 0; i < numAttributes && res == CUDA_SUCCESS; i++)
		res = attr_one(attributes[i], data[i], known ? &r : NULL, ptr,
			       false);
	return res;
}

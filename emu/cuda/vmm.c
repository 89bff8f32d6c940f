/* vmm.c - the virtual memory management API: reserve an address range,
 * create physical allocations, map them into the range side by side.
 *
 * PyTorch's expandable segments grow one reservation by mapping more
 * allocations after the last, so a tensor can straddle two mappings; the
 * driver reports each mapping as its own address range.  Here a
 * reservation is a PROT_NONE anonymous mapping, an allocation is a memfd
 * (so one allocation can be mapped more than once, as on a GPU), and each
 * cuMemMap is a MAP_FIXED mapping of it that enters the range table as
 * EMU_MEM_MAPPED; copies across mappings that touch are checked as one
 * buffer (memory.c).  Access flags are accepted but not enforced: the
 * memory is readable and writable once mapped.
 */
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GRANULE (2u << 20) /* what an H100 reports, minimum and recommended */

struct vmm_alloc {
	struct vmm_alloc *next;
	int fd;
	size_t size;
	CUdevice dev;
	unsigned maps;   /* live mappings: released memory lives while mapped */
	bool released;
};

struct vmm_resv {
	struct vmm_resv *next;
	uintptr_t base;
	size_t size;
};

struct vmm_map {
	struct vmm_map *next;
	uintptr_t base;
	size_t size;
	struct vmm_alloc *a;
};

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vmm_alloc *allocs;
static struct vmm_resv *resvs;
static struct vmm_map *maps;

static bool granular(uintptr_t v)
{
	return v % GRANULE == 0;
}

/* vmm_lock held for all of these */

static struct vmm_alloc *find_alloc(CUmemGenericAllocationHandle h)
{
	for (struct vmm_alloc *a = allocs; a; a = a->next)
		if ((CUmemGenericAllocationHandle)(uintptr_t)a == h && !a->released)
			return a;
	return NULL;
}

static struct vmm_resv *find_resv(uintptr_t base, size_t size)
{
	for (struct vmm_resv *r = resvs; r; r = r->next)
		if (base >= r->base && size <= r->size && base - r->base <= r->size - size)
			return r;
	return NULL;
}

static bool any_map_in(uintptr_t base, size_t size)
{
	for (struct vmm_map *m = maps; m; m = m->next)
		if (m->base < base + size && base < m->base + m->size)
			return true;
	return false;
}

static void drop_alloc(struct vmm_alloc *a)
{
	struct vmm_alloc **pp = &allocs;

	if (!a->released || a->maps)
		return;
	while (*pp != a)
		pp = &(*pp)->next;
	*pp = a->next;
	close(a->fd);
	free(a);
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    prop->location.id < 0 || prop->location.id >= emu_config.ndevices)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
				       CUmemAllocationGranularity_flags option)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!granularity || check_prop(prop) ||
	    (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
	     option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = GRANULE;
	return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags)
{
	struct vmm_resv *r;
	uint8_t *p, *base;
	size_t align = alignment ? alignment : GRANULE;
	CUresult res = emu_check_init();

	(void)addr; /* a hint only */
	if (res != CUDA_SUCCESS)
		return res;
	if (!ptr || !size || !granular(size) || flags || (align & (align - 1)) ||
	    size > SIZE_MAX / 2 - align)
		return CUDA_ERROR_INVALID_VALUE;
	/* over-reserve, then trim to the alignment */
	p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	base = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	if (base > p)
		munmap(p, (size_t)(base - p));
	if (base + size < p + size + align)
		munmap(base + size, (size_t)(p + size + align - (base + size)));
	r = calloc(1, sizeof(*r));
	if (!r) {
		munmap(base, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r->base = (uintptr_t)base;
	r->size = size;
	pthread_mutex_lock(&vmm_lock);
	r->next = resvs;
	resvs = r;
	pthread_mutex_unlock(&vmm_lock);
	*ptr = (CUdeviceptr)r->base;
	return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct vmm_resv **pp, *r = NULL;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	pthread_mutex_lock(&vmm_lock);
	for (pp = &resvs; *pp; pp = &(*pp)->next)
		if ((*pp)->base == (uintptr_t)ptr && (*pp)->size == size)
			break;
	/* a reservation with mappings left in it is the caller's error */
	if (*pp && !any_map_in((*pp)->base, (*pp)->size)) {
		r = *pp;
		*pp = r->next;
	}
	pthread_mutex_unlock(&vmm_lock);
	if (!r)
		return CUDA_ERROR_INVALID_VALUE;
	munmap((void *)r->base, r->size);
	free(r);
	return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct vmm_alloc *a;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!handle || !size || !granular(size) || flags || check_prop(prop))
		return CUDA_ERROR_INVALID_VALUE;
	a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->fd = memfd_create("cuda-emu-vmm", MFD_CLOEXEC);
	if (a->fd < 0 || ftruncate(a->fd, (off_t)size)) {
		if (a->fd >= 0)
			close(a->fd);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->size = size;
	a->dev = prop->location.id;
	pthread_mutex_lock(&vmm_lock);
	a->next = allocs;
	allocs = a;
	pthread_mutex_unlock(&vmm_lock);
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return CUDA_SUCCESS;
}

/* The memory goes when the last mapping does. */
CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct vmm_alloc *a;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	pthread_mutex_lock(&vmm_lock);
	a = find_alloc(handle);
	if (a) {
		a->released = true;
		drop_alloc(a);
	}
	pthread_mutex_unlock(&vmm_lock);
	return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult map_locked(uintptr_t base, size_t size, size_t offset, struct vmm_alloc *a)
{
	struct emu_range r = { .base = base, .size = size, .kind = EMU_MEM_MAPPED, .dev = a->dev };
	struct vmm_map *m = calloc(1, sizeof(*m));
	struct CUctx_st *ctx;
	CUresult res;

	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (emu_ctx_current(&ctx) == CUDA_SUCCESS) {
		r.ctx = ctx;
		emu_ctx_put(ctx);
	}
	if (mmap((void *)base, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd,
		 (off_t)offset) == MAP_FAILED) {
		free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	res = emu_mem_add(&r);
	if (res != CUDA_SUCCESS) {
		mmap((void *)base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		free(m);
		return res;
	}
	*m = (struct vmm_map){ maps, base, size, a };
	maps = m;
	a->maps++;
	return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags)
{
	uintptr_t base = (uintptr_t)ptr;
	struct vmm_alloc *a;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!size || flags || !granular(base) || !granular(size) || !granular(offset))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&vmm_lock);
	a = find_alloc(handle);
	if (!a || offset > a->size || size > a->size - offset || !find_resv(base, size))
		res = CUDA_ERROR_INVALID_VALUE;
	else if (any_map_in(base, size))
		res = CUDA_ERROR_ALREADY_MAPPED;
	else
		res = map_locked(base, size, offset, a);
	pthread_mutex_unlock(&vmm_lock);
	return res;
}

/* Every byte of [ptr, ptr + size) must be mapped, by whole mappings. */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	uintptr_t base = (uintptr_t)ptr, end = base + size;
	struct vmm_map **pp, *m;
	size_t covered = 0;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!size || end < base)
		return CUDA_ERROR_INVALID_VALUE;
	emu_late_flush();	/* a late copy may still write there */
	pthread_mutex_lock(&vmm_lock);
	for (m = maps; m; m = m->next) {
		if (m->base >= base && m->base + m->size <= end)
			covered += m->size;
		else if (m->base < end && base < m->base + m->size)
			covered = SIZE_MAX; /* cuts a mapping */
		if (covered == SIZE_MAX)
			break;
	}
	if (covered != size) {
		pthread_mutex_unlock(&vmm_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (pp = &maps; (m = *pp);) {
		struct emu_range r;

		if (m->base < base || m->base >= end) {
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		emu_mem_remove(m->base, EMU_MEM_MAPPED, &r);
		/* back to reserved address space */
		mmap((void *)m->base, m->size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
		m->a->maps--;
		drop_alloc(m->a);
		free(m);
	}
	pthread_mutex_unlock(&vmm_lock);
	return CUDA_SUCCESS;
}

/* Accepted for mapped ranges; access is not enforced (see the top). */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!size || !desc || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++)
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    desc[i].location.id < 0 || desc[i].location.id >= emu_config.ndevices)
			return CUDA_ERROR_INVALID_DEVICE;
	return emu_mem_check_access((uintptr_t)ptr, size);
}

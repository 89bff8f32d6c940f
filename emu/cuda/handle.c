/* handle.c - reference counts and the set of live handles.
 *
 * CUDA returns CUDA_ERROR_INVALID_HANDLE for a destroyed stream or event
 * instead of crashing, so every handle a caller passes in is looked up here
 * before it is dereferenced. The set is an open-addressing hash table of
 * pointers with tombstones, under a reader/writer lock: lookups are far more
 * frequent than creations.
 */
#include "emu.h"

#include <stdlib.h>

#define TOMBSTONE ((struct emu_obj *)1)

static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct emu_obj **slots;
static size_t nslots;		/* power of two */
static size_t nused;		/* live entries plus tombstones */

void emu_obj_init(struct emu_obj *obj, enum emu_kind kind,
		  void (*release)(struct emu_obj *obj))
{
	obj->kind = kind;
	atomic_init(&obj->refs, 1);
	obj->release = release;
}

void emu_obj_get(struct emu_obj *obj)
{
	atomic_fetch_add_explicit(&obj->refs, 1, memory_order_relaxed);
}

void emu_obj_put(struct emu_obj *obj)
{
	if (atomic_fetch_sub_explicit(&obj->refs, 1, memory_order_acq_rel) == 1)
		obj->release(obj);
}

static size_t hash_ptr(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t)x;
}

/* Slot holding p, or the first free slot of its probe sequence. */
static size_t probe(struct emu_obj **tab, size_t n, const void *p,
		    bool for_insert)
{
	size_t i = hash_ptr(p) & (n - 1);
	size_t first_free = SIZE_MAX;

	for (;; i = (i + 1) & (n - 1)) {
		if (tab[i] == p)
			return i;
		if (tab[i] == TOMBSTONE && first_free == SIZE_MAX)
			first_free = i;
		if (!tab[i])
			break;
	}
	if (for_insert && first_free != SIZE_MAX)
		return first_free;
	return i;
}

static int grow(void)
{
	size_t n = nslots ? nslots * 2 : 64;
	struct emu_obj **tab = calloc(n, sizeof(*tab));
	size_t i, live = 0;

	if (!tab)
		return -1;
	for (i = 0; i < nslots; i++) {
		if (!slots[i] || slots[i] == TOMBSTONE)
			continue;
		tab[probe(tab, n, slots[i], true)] = slots[i];
		live++;
	}
	free(slots);
	slots = tab;
	nslots = n;
	nused = live;
	return 0;
}

CUresult emu_handle_publish(struct emu_obj *obj)
{
	CUresult res = CUDA_SUCCESS;
	size_t i;

	pthread_rwlock_wrlock(&reg_lock);
	/* Keep the load under 1/2 so probe sequences stay short. */
	if ((nused + 1) * 2 > nslots && grow() < 0) {
		res = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	i = probe(slots, nslots, obj, true);
	if (!slots[i])
		nused++;
	slots[i] = obj;
out:
	pthread_rwlock_unlock(&reg_lock);
	return res;
}

bool emu_handle_retire(const void *handle, enum emu_kind kind)
{
	bool found = false;
	size_t i;

	if (!handle)
		return false;
	pthread_rwlock_wrlock(&reg_lock);
	if (!nslots)
		goto out;
	i = probe(slots, nslots, handle, false);
	if (slots[i] == handle && slots[i]->kind == kind) {
		slots[i] = TOMBSTONE;
		found = true;
	}
out:
	pthread_rwlock_unlock(&reg_lock);
	return found;
}

struct emu_obj *emu_handle_get(const void *handle, enum emu_kind kind)
{
	struct emu_obj *obj = NULL;
	size_t i;

	if (!handle)
		return NULL;
	pthread_rwlock_rdlock(&reg_lock);
	if (!nslots)
		goto out;
	i = probe(slots, nslots, handle, false);
	if (slots[i] == handle && slots[i]->kind == kind) {
		obj = slots[i];
		/* Taken under the lock so a concurrent retire + put cannot
		 * free the object between the lookup and the get. */
		emu_obj_get(obj);
	}
out:
	pthread_rwlock_unlock(&reg_lock);
	return obj;
}

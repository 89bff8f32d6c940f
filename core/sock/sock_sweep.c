/* sock_sweep.c - listener records and buffers of the dead (sock_sweep.h). */
#include "sock_sweep.h"

#include <string.h>

#include "log.h"
#include "pool.h"
#include "sock_holder.h"
#include "sock_meet.h"

int cxls_listener_sweep(const struct cxls_sock_region *r)
{
	int freed = 0;

	for (uint32_t i = 0; i < r->nlisteners; i++) {
		struct cxls_sock_listener *l = &r->listeners[i];
		uint64_t sg = atomic_load(&l->sg);

		/* the same rule as a new listener's take-over (sock_listen.c),
		 * under the generation seen: a record closed and claimed
		 * again since is not freed */
		if (cxls_listener_stale(l, sg))
			freed += atomic_compare_exchange_strong(
				&l->sg, &sg, CXLS_SG(CXLS_SG_GEN(sg), CXLS_LST_FREE));
	}
	if (freed)
		CXLS_INFO("listener sweep: %d records of dead processes freed", freed);
	return freed;
}

/* 1 when the record at owner's slot still is owner's connection. */
static int owner_exists(const struct cxls_sock_region *r, uint64_t owner)
{
	uint32_t slot = (uint32_t)owner - 1, gen = (uint32_t)(owner >> 32);
	uint64_t sg;

	if ((uint32_t)owner == 0 || slot >= r->nslots)
		return 0;
	sg = atomic_load(&cxls_sock_rec(r, slot)->sg);
	return CXLS_SG_STATE(sg) != CXLS_SK_FREE && CXLS_SG_GEN(sg) == gen;
}

/* A writer lends a buffer only while its record is in use, and a freed
 * record's buffers are given back right after it is freed: a buffer
 * whose record is gone is either an orphan or given back this instant,
 * and giving it back twice is one compare-and-swap that fails. */
int cxls_buf_sweep_orphans(const struct cxls_sock_region *r)
{
	const struct cxls_sock_bufs *b = &r->bufs;
	int freed = 0;

	for (int k = 0; k < b->n; k++)
		for (uint32_t i = 0; i < b->cls[k].count; i++) {
			uint64_t owner = atomic_load(&b->cls[k].desc[i].owner);

			if (owner && !owner_exists(r, owner))
				freed += atomic_compare_exchange_strong(&b->cls[k].desc[i].owner,
									&owner, 0);
		}
	if (freed)
		CXLS_INFO("buffer sweep: %d socket buffers lent to no connection given back", freed);
	return freed;
}

void cxls_sock_region_of(struct cxls_sock_region *r, struct cxls_pool *pool,
			 const struct cxls_config *cfg)
{
	const struct cxls_super *sb = &pool->geo;
	uint8_t *base = cxls_pool_at(pool, sb->sock_offset);

	memset(r, 0, sizeof(*r));
	r->pool = pool;
	r->cfg = cfg;
	r->nlisteners = sb->sock_listeners;
	r->nslots = sb->sock_slots;
	r->ring_size = sb->sock_ring;
	r->listeners = (struct cxls_sock_listener *)base;
	r->recs = base + (uint64_t)sb->sock_listeners * CXLS_SOCK_LISTENER_SIZE;
	r->rings = base + cxls_sock_rings_off(sb->sock_listeners, sb->sock_slots);
	cxls_bufs_map(&r->bufs, base, sb);
}

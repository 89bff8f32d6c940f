/* sock_region.c - find the socket region in the process's pool, once. */
#include "sock_region.h"

#include <pthread.h>

#include "log.h"
#include "runtime.h"
#include "sock_meet.h"

static struct cxls_sock_region region;
static const struct cxls_sock_region *active;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	const struct cxls_runtime *rt = cxls_runtime();
	struct cxls_pool *pool;
	const struct cxls_super *sb;

	if (!rt->cfg_ok || !rt->cfg.sock_enable)
		return;
	pool = cxls_runtime_pool();
	if (!pool)
		return;
	/* the copy validated when the pool was opened, never the live
	 * superblock: another process may have rewritten that since, and
	 * every pointer below comes from these numbers */
	sb = &pool->geo;
	if (!sb->sock_slots) {
		CXLS_INFO("pool %s has no socket region: TCP stays TCP", pool->path);
		return;
	}
	region.pool = pool;
	region.cfg = &rt->cfg;
	region.rules = &rt->sock_rules;
	region.nlisteners = sb->sock_listeners;
	region.nslots = sb->sock_slots;
	region.ring_size = sb->sock_ring;
	region.listeners = cxls_pool_at(pool, sb->sock_offset);
	region.recs = (uint8_t *)region.listeners +
		      (uint64_t)sb->sock_listeners * CXLS_SOCK_LISTENER_SIZE;
	region.rings = (uint8_t *)cxls_pool_at(pool, sb->sock_offset) +
		       cxls_sock_rings_off(sb->sock_listeners, sb->sock_slots);
	cxls_bufs_map(&region.bufs, cxls_pool_at(pool, sb->sock_offset), sb);
	active = &region;
	/* connections whose processes all died with them open (nobody
	 * closed them) hold records and buffers until a sweep: one now */
	cxls_sock_sweep(&region);
	CXLS_INFO("sockets through pool %s: %u slots, rings of %llu bytes, %u buffers in %d "
		  "classes for writes from %llu bytes", pool->path, region.nslots,
		  (unsigned long long)region.ring_size, (unsigned)cxls_sock_nbufs(sb->sock_buf_count),
		  region.bufs.n, (unsigned long long)rt->cfg.sock_ref_min);
}

const struct cxls_sock_region *cxls_sock_region(void)
{
	pthread_once(&once, load);
	return active;
}

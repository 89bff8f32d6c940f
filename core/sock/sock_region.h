/* sock_region.h - this process's view of the pool's socket region. */
#ifndef CXLSHIM_CORE_SOCK_REGION_H
#define CXLSHIM_CORE_SOCK_REGION_H

#include <stdint.h>

#include "sock_buf.h"
#include "sock_format.h"

struct cxls_pool;
struct cxls_config;
struct cxls_sock_rules;

struct cxls_sock_region {
	struct cxls_pool *pool;
	struct cxls_sock_listener *listeners;
	uint8_t *recs;
	uint8_t *rings;
	uint32_t nlisteners;
	uint32_t nslots;
	uint64_t ring_size;
	struct cxls_sock_bufs bufs;  /* buffer classes for writes by reference */
	const struct cxls_config *cfg;
	const struct cxls_sock_rules *rules;
};

/* The region of the process's pool, or NULL when the policy disables
 * sockets or the pool has no socket region: everything stays on TCP. */
const struct cxls_sock_region *cxls_sock_region(void);

static inline struct cxls_sock_rec *cxls_sock_rec(const struct cxls_sock_region *r,
						  uint32_t slot)
{
	return (struct cxls_sock_rec *)(r->recs + (uint64_t)slot * CXLS_SOCK_REC_SIZE);
}

/* Ring dir of slot: its place follows from the slot number only. */
static inline uint8_t *cxls_sock_ring_data(const struct cxls_sock_region *r, uint32_t slot,
					   int dir)
{
	return r->rings + ((uint64_t)slot * 2 + (uint64_t)dir) * r->ring_size;
}

#endif

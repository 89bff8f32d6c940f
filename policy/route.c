/* route.c - which collectives run on the pool.
 *
 * A collective goes to the pool when its kind is in nccl.collectives and
 * both its message size and the communicator size are inside the policy's
 * ranges; everything else goes to the real NCCL.
 */
#include "config.h"

int cxls_route_to_pool(const struct cxls_config *cfg, unsigned coll_bit,
		       uint64_t bytes, int nranks)
{
	if (!cfg->nccl_enable || !(cfg->nccl_collectives & coll_bit))
		return 0;
	if (bytes < cfg->nccl_min_bytes || bytes > cfg->nccl_max_bytes)
		return 0;
	if (nranks < 1 || (uint32_t)nranks < cfg->nccl_min_ranks ||
	    (uint32_t)nranks > cfg->nccl_max_ranks)
		return 0;
	return 1;
}

int cxls_route_needs_nccl(const struct cxls_config *cfg)
{
	return cfg->nccl_collectives != CXLS_COLL_ALL || cfg->nccl_min_bytes > 0 ||
	       cfg->nccl_max_bytes != UINT64_MAX;
}

/* route.c - which collectives run on the pool.
 *
 * A collective goes to the pool when its kind is in nccl.collectives and
 * both its message size and the communicator size are inside the policy's
 * ranges; everything else goes to the real NCCL.
 */
#include "config.h"

void cxls_route_rules(const struct cxls_config *cfg, struct cxls_route *out)
{
	*out = (struct cxls_route){
		.colls = cfg->nccl_enable ? cfg->nccl_collectives : 0,
		.min_ranks = cfg->nccl_min_ranks,
		.max_ranks = cfg->nccl_max_ranks,
		.min_bytes = cfg->nccl_min_bytes,
		.max_bytes = cfg->nccl_max_bytes,
	};
}

int cxls_route_pool(const struct cxls_route *r, unsigned coll_bit, uint64_t bytes, int nranks)
{
	if (!(r->colls & coll_bit))
		return 0;
	if (bytes < r->min_bytes || bytes > r->max_bytes)
		return 0;
	if (nranks < 1 || (uint32_t)nranks < r->min_ranks || (uint32_t)nranks > r->max_ranks)
		return 0;
	return 1;
}

int cxls_route_to_pool(const struct cxls_config *cfg, unsigned coll_bit,
		       uint64_t bytes, int nranks)
{
	struct cxls_route r;

	cxls_route_rules(cfg, &r);
	return cxls_route_pool(&r, coll_bit, bytes, nranks);
}

int cxls_route_needs_nccl(const struct cxls_config *cfg)
{
	return cfg->nccl_collectives != CXLS_COLL_ALL || cfg->nccl_min_bytes > 0 ||
	       cfg->nccl_max_bytes != UINT64_MAX;
}

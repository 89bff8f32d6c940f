/* estimate.c - the pool's time model for ncclGroupSimulateEnd. */
#include "estimate.h"

#include "runtime.h"

/* Rounds of `chunk` bytes, at least one, at the policy's round cost,
 * plus the bytes at its bandwidth. */
static double model_us(uint64_t bytes, uint64_t chunk)
{
	const struct cxls_config *cfg = &cxls_runtime()->cfg;
	uint64_t rounds = chunk ? (bytes + chunk - 1) / chunk : 1;

	if (!rounds)
		rounds = 1;
	return (double)rounds * cfg->nccl_sim_round_ns / 1e3 +
	       (double)bytes / (double)cfg->nccl_sim_bw * 1e6;
}

/* What the busiest rank writes into and reads out of the pool for a
 * collective whose rank-slice is s bytes (the schemes in each file's
 * header comment).  Alone, a rank only copies its slice. */
static uint64_t busiest_bytes(enum cxls_op_kind kind, uint64_t s, uint64_t n)
{
	if (n <= 1)
		return s;
	switch (kind) {
	case CXLS_OP_ALLGATHER:         /* its slice in, every other out */
		return n * s;
	case CXLS_OP_BROADCAST:         /* the root in, each reader out */
		return s;
	case CXLS_OP_GATHER:            /* the root reads every peer's */
	case CXLS_OP_SCATTER:           /* the root writes every peer's */
	case CXLS_OP_REDUCE:            /* the root folds every peer's */
		return (n - 1) * s;
	case CXLS_OP_ALLTOALL:          /* a slice per peer each way */
	case CXLS_OP_REDUCESCATTER:
		return 2 * (n - 1) * s;
	case CXLS_OP_ALLREDUCE:         /* s is the message: (n-1)/n of it
					 * each way to reduce, then its own
					 * reduced slice out and the others in */
		return (3 * (n - 1) + 1) * s / n;
	case CXLS_OP_ALLREDUCE_DIRECT:  /* its message out, all n in */
		return (n + 1) * s;
	default:
		return s;
	}
}

double cxls_coll_estimate_us(const struct cxls_comm *c, const struct cxls_coll *k)
{
	return model_us(busiest_bytes(k->kind, k->bytes, (uint64_t)c->nranks), c->lay.chunk);
}

double cxls_p2p_estimate_us(const struct cxls_comm *c, size_t bytes)
{
	return model_us(bytes, c->lay.p2p_chunk);
}

/* allgather.c - AllGather through the pool (N-to-N).
 *
 * Round k: every rank publishes chunk k of its slice into its own staging
 * slot (devices of its own, CCCL equation 4); then it fetches chunk k of
 * every peer, in the order rank+1, rank+2, ... so that concurrent readers
 * hit different devices, and acknowledges the round.  With overlap,
 * publishing runs on the write stream and fetching on the read stream, so
 * chunk k+1 is written while chunk k is read.  Without it, both run on one
 * stream, publishing one chunk ahead (put 0, put 1, get 0, put 2, get 1,
 * ...): a peer's chunk k is out while we write chunk k+1, so fetching it
 * seldom waits.
 */
#include "coll.h"

#include "log.h"

/* Publishes chunk k of our slice. */
static int put_k(struct cxls_op *op, const char *send, uint32_t k)
{
	size_t off = cxls_op_off(op, k);

	if (k >= op->rounds)
		return 0;
	return cxls_op_wait_consumed(op, k, op->depth, -1) ||
	       cxls_op_put(op, k, cxls_op_slot(op, op->c->rank, k), send + off,
			   cxls_op_len(op, k), -1);
}

/* Chunks published ahead of the one fetched: one, where the staging depth
 * lets a rank write round k+1 before its peers acknowledged round k. */
static uint32_t lead(const struct cxls_op *op)
{
	return op->depth > 1 ? 1 : 0;
}

static ncclResult_t enqueue(struct cxls_comm *c, const struct cxls_coll *k)
{
	const char *send = k->send;
	struct cxls_op op;
	ncclResult_t r;

	if ((r = cxls_op_begin(&op, c, k, k->bytes, 1)))
		return r;
	/* out of place, our own slice goes straight to its place */
	if (cxls_op_local_copy(&op, (char *)k->recv + (size_t)c->rank * k->bytes, send, k->bytes))
		return cxls_op_abandon(&op);
	for (uint32_t i = 0; i < lead(&op); i++)
		if (put_k(&op, send, i))
			return cxls_op_abandon(&op);
	for (uint32_t i = 0; i < op.rounds; i++)
		if (put_k(&op, send, i + lead(&op)) || cxls_op_get_all(&op, i, k->recv))
			return cxls_op_abandon(&op);
	CXLS_TRACE("AllGather %zu bytes/rank, %u rounds from round %u", k->bytes, op.rounds,
		   op.g0);
	return cxls_op_end(&op);
}

ncclResult_t cxls_allgather(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t sendcount, ncclDataType_t type, CUstream stream)
{
	size_t bytes;
	ncclResult_t r;

	if ((r = cxls_op_check_count(c, "AllGather", type, sendcount, c->nranks, &bytes)) ||
	    (r = cxls_op_check_buf(c, sendbuff, bytes, "AllGather sendbuff")) ||
	    (r = cxls_op_check_buf(c, recvbuff, bytes * (size_t)c->nranks, "AllGather recvbuff")) ||
	    (r = cxls_op_check_alias(c, "AllGather", sendbuff, bytes, 0, recvbuff,
				     bytes * (size_t)c->nranks, (size_t)c->rank * bytes)))
		return r;
	if (!bytes)
		return ncclSuccess;
	return cxls_coll_submit(c, &(struct cxls_coll){ .enqueue = enqueue, .kind = CXLS_OP_ALLGATHER,
							.send = sendbuff,
							.recv = recvbuff, .count = sendcount,
							.bytes = bytes, .type = type, .root = -1,
							.stream = stream });
}

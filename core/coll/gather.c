/* gather.c - Gather through the pool (N-to-1).
 *
 * Every rank but the root publishes chunk k of its slice into its own
 * staging slots (N-to-N placement, so publishers write different devices);
 * the root fetches chunk k of every peer, starting after itself so that
 * its reads rotate over the devices, and acknowledges the round.
 */
#include "coll.h"

#include "log.h"

static int collect(struct cxls_op *op, char *recv)
{
	for (uint32_t k = 0; k < op->rounds; k++)
		if (cxls_op_get_all(op, k, recv))
			return -1;
	return 0;
}

static ncclResult_t enqueue(struct cxls_comm *c, const struct cxls_coll *k)
{
	struct cxls_op op;
	ncclResult_t r;
	int rc;

	if ((r = cxls_op_begin(&op, c, k, k->bytes, 1)))
		return r;
	if (c->rank == k->root)
		rc = cxls_op_local_copy(&op, (char *)k->recv + (size_t)k->root * k->bytes, k->send,
					k->bytes) ||
		     collect(&op, k->recv);
	else
		rc = cxls_op_publish_all(&op, k->send, k->root);
	if (rc)
		return cxls_op_abandon(&op);
	CXLS_TRACE("Gather %zu bytes/rank to root %d, %u rounds from round %u", k->bytes, k->root,
		   op.rounds, op.g0);
	return cxls_op_end(&op);
}

ncclResult_t cxls_gather(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			 size_t count, ncclDataType_t type, int root, CUstream stream)
{
	size_t bytes;
	ncclResult_t r;

	if ((r = cxls_op_check_count(c, "Gather", type, count, c->nranks, &bytes)) ||
	    (r = cxls_op_check_root(c, "Gather", root)) ||
	    (r = cxls_op_check_buf(c, sendbuff, bytes, "Gather sendbuff")) ||
	    (c->rank == root &&
	     ((r = cxls_op_check_buf(c, recvbuff, bytes * (size_t)c->nranks, "Gather recvbuff")) ||
	      (r = cxls_op_check_alias(c, "Gather", sendbuff, bytes, 0, recvbuff,
				       bytes * (size_t)c->nranks, (size_t)root * bytes)))))
		return r;
	if (!bytes)
		return ncclSuccess;
	return cxls_coll_submit(c, &(struct cxls_coll){ .enqueue = enqueue, .kind = CXLS_OP_GATHER,
							.send = sendbuff,
							.recv = recvbuff, .count = count,
							.bytes = bytes, .type = type, .root = root,
							.stream = stream });
}

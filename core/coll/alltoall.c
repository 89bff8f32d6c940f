/* alltoall.c - AlltoAll through the pool (N-to-N).
 *
 * Round t pairs every rank with the peer at distance o = 1 + t % (N-1):
 * rank r publishes chunk t / (N-1) of its slice for rank r+o into its own
 * staging slot and fetches the same chunk of rank r-o's slice for r, which
 * r-o published in the same round.  Every rank writes its own devices and
 * reads a different peer's, and each slot has exactly one reader.
 */
#include "coll.h"

#include "log.h"

static int round_t(struct cxls_op *op, const char *send, char *recv, uint32_t t)
{
	uint32_t k = t / (uint32_t)(op->c->nranks - 1);
	int to = cxls_op_pair(op, t, 1), from = cxls_op_pair(op, t, -1);
	size_t off = cxls_op_off(op, k), len = cxls_op_len(op, k);

	if (cxls_op_pair_put(op, t, send + (size_t)to * op->bytes + off, len) ||
	    cxls_op_get(op, t, from, cxls_op_slot(op, from, t),
			recv + (size_t)from * op->bytes + off, len))
		return -1;
	return cxls_op_ack(op, t);
}

/* The two buffers must not overlap: every slice of sendbuff is still
 * needed after the rank's own slice of recvbuff was written. */
static int overlap(const void *a, const void *b, size_t len)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return x < y + len && y < x + len;
}

ncclResult_t cxls_alltoall(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			   size_t count, ncclDataType_t type, CUstream stream)
{
	size_t bytes, total;
	struct cxls_op op;
	ncclResult_t r;

	if ((r = cxls_op_check_count(c, "AlltoAll", type, count, c->nranks, &bytes)))
		return r;
	total = bytes * (size_t)c->nranks;
	if ((r = cxls_op_check_buf(c, sendbuff, total, "AlltoAll sendbuff")) ||
	    (r = cxls_op_check_buf(c, recvbuff, total, "AlltoAll recvbuff")))
		return r;
	if (!bytes)
		return ncclSuccess;
	if (overlap(sendbuff, recvbuff, total)) {
		cxls_comm_set_error(c, "AlltoAll: sendbuff and recvbuff overlap");
		return ncclInvalidArgument;
	}
	if ((r = cxls_op_begin(&op, c, stream,
				 &(struct cxls_call){ CXLS_OP_ALLTOALL, count, type, 0, -1 }, bytes,
				 (uint32_t)c->nranks - 1)))
		return r;
	for (uint32_t t = 0; t < op.rounds; t++)
		if (round_t(&op, sendbuff, recvbuff, t))
			return cxls_op_abandon(&op);
	if (cxls_op_local_copy(&op, (char *)recvbuff + (size_t)c->rank * bytes,
			       (const char *)sendbuff + (size_t)c->rank * bytes, bytes))
		return cxls_op_abandon(&op);
	CXLS_TRACE("AlltoAll %zu bytes/pair, %u rounds from round %u", bytes, op.rounds, op.g0);
	return cxls_op_end(&op);
}

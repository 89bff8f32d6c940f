/* alltoall.c - AlltoAll through the pool (N-to-N).
 *
 * Round t pairs every rank with the peer at distance o = 1 + t % (N-1):
 * rank r publishes chunk t / (N-1) of its slice for rank r+o into its own
 * staging slot and fetches the same chunk of rank r-o's slice for r, which
 * r-o published in the same round.  Every rank writes its own devices and
 * reads a different peer's, and each slot has exactly one reader.  In
 * place, a chunk's rounds are all published before any is fetched
 * (chunk_in_place()).
 */
#include "coll.h"

#include "log.h"
#include "stage.h"

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

/* In place (sendbuff == recvbuff), the block received from a peer lands
 * where the block for that peer was.  So every block of chunk k is
 * published before any of chunk k is received: the reads wait until our
 * own publications of the chunk have left (our doorbell), and a chunk's
 * N-1 rounds are in flight at once, which needs as many staging slots
 * (acknowledgements stay in round order).  Ranks that are not in place
 * interleave as usual; the rounds match either way. */
static int chunk_in_place(struct cxls_op *op, char *buf, uint32_t k)
{
	struct cxls_comm *c = op->c;
	uint32_t n1 = (uint32_t)c->nranks - 1, t0 = k * n1;
	size_t off = cxls_op_off(op, k), len = cxls_op_len(op, k);

	for (uint32_t t = t0; t < t0 + n1; t++)
		if (cxls_op_pair_put(op, t, buf + (size_t)cxls_op_pair(op, t, 1) * op->bytes + off,
				     len))
			return -1;
	if (cxls_stage_wait(&c->st, op->rs, &c->view.pub[c->rank], op->g0 + t0 + n1))
		return -1;
	for (uint32_t t = t0; t < t0 + n1; t++) {
		int from = cxls_op_pair(op, t, -1);

		if (cxls_op_get(op, t, from, cxls_op_slot(op, from, t),
				buf + (size_t)from * op->bytes + off, len) ||
		    cxls_op_ack(op, t))
			return -1;
	}
	return 0;
}

/* Buffers that overlap other than exactly (in place) would have blocks
 * overwritten before they are sent whatever the order. */
static int overlap(const void *a, const void *b, size_t len)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return a != b && x < y + len && y < x + len;
}

static int run(struct cxls_op *op, const char *send, char *recv)
{
	uint32_t n1 = (uint32_t)op->c->nranks - 1;

	if (send == recv) {
		for (uint32_t k = 0; k < op->cpr; k++)
			if (chunk_in_place(op, recv, k))
				return -1;
		return 0;
	}
	for (uint32_t t = 0; t < op->cpr * n1; t++)
		if (round_t(op, send, recv, t))
			return -1;
	return cxls_op_local_copy(op, recv + (size_t)op->c->rank * op->bytes,
				  send + (size_t)op->c->rank * op->bytes, op->bytes);
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
		cxls_comm_set_error(c, "AlltoAll: sendbuff and recvbuff overlap (other than in place)");
		return ncclInvalidArgument;
	}
	if (sendbuff == recvbuff && c->lay.slots < (uint32_t)c->nranks - 1) {
		cxls_comm_set_error(c, "AlltoAll in place on the pool needs %d staging chunks, the "
				       "pool has %u: raise cccl.chunks or route AlltoAll to NCCL",
				    c->nranks - 1, c->lay.slots);
		return ncclInvalidUsage;
	}
	if ((r = cxls_op_begin(&op, c, stream,
				 &(struct cxls_call){ CXLS_OP_ALLTOALL, count, type, 0, -1 }, bytes,
				 (uint32_t)c->nranks - 1)))
		return r;
	if (run(&op, sendbuff, recvbuff))
		return cxls_op_abandon(&op);
	CXLS_TRACE("AlltoAll %zu bytes/pair, %u rounds from round %u", bytes, op.rounds, op.g0);
	return cxls_op_end(&op);
}

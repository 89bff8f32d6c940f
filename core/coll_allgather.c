/* coll_allgather.c - AllGather through the pool (N-to-N).
 *
 * Round k: every rank publishes chunk k of its slice into its own staging
 * slot (devices of its own, CCCL equation 4) and rings pub[rank] = g+1;
 * then it fetches chunk k of every peer, in the order rank+1, rank+2, ...
 * so that concurrent readers hit different devices, and rings
 * ack[rank] = g+1.  With overlap, publishing runs on the write stream and
 * fetching on the read stream, so chunk k+1 is written while chunk k is
 * read.
 */
#include "coll.h"

#include "log.h"
#include "stage.h"

static int publish(struct cxls_op *op, const char *send, uint32_t k)
{
	struct cxls_comm *c = op->c;
	const struct cxls_stage *s = &c->st;
	uint32_t g = op->g0 + k;
	uint8_t *slot = c->pool->base + cxls_layout_n2n(&c->lay, (uint32_t)c->rank,
							g % c->lay.slots);
	size_t len = cxls_op_len(op, k);
	CUdeviceptr src = (CUdeviceptr)(uintptr_t)(send + cxls_op_off(op, k));

	uint32_t dev = cxls_layout_device(&c->lay, (uint64_t)(slot - c->pool->base));

	if (cxls_op_wait_consumed(op, op->ws, k, c->lay.slots, c->rank) ||
	    cxls_stage_pool_copy(s, op->ws, s->rec_w, cxls_stage_dev(s, slot), src, len, dev) ||
	    cxls_stage_flush(s, op->ws, slot, len) ||
	    cxls_stage_ring(s, op->ws, &c->view.pub[c->rank], g + 1))
		return -1;
	return 0;
}

static int fetch(struct cxls_op *op, char *recv, uint32_t k)
{
	struct cxls_comm *c = op->c;
	const struct cxls_stage *s = &c->st;
	uint32_t g = op->g0 + k;
	size_t len = cxls_op_len(op, k);

	for (int i = 1; i < c->nranks; i++) {
		int peer = (c->rank + i) % c->nranks;
		uint8_t *slot = c->pool->base + cxls_layout_n2n(&c->lay, (uint32_t)peer,
								g % c->lay.slots);
		CUdeviceptr dst = (CUdeviceptr)(uintptr_t)(recv + (size_t)peer * op->bytes +
							  cxls_op_off(op, k));

		uint32_t dev = cxls_layout_device(&c->lay, (uint64_t)(slot - c->pool->base));

		if (cxls_stage_wait(s, op->rs, &c->view.pub[peer], g + 1) ||
		    cxls_stage_flush(s, op->rs, slot, len) ||
		    cxls_stage_pool_copy(s, op->rs, s->rec_r, dst, cxls_stage_dev(s, slot), len, dev))
			return -1;
	}
	return cxls_stage_ring(s, op->rs, &c->view.ack[c->rank], g + 1);
}

ncclResult_t cxls_allgather(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t sendcount, ncclDataType_t type, CUstream stream)
{
	size_t esize = cxls_type_size(type), bytes;
	char *own;
	struct cxls_op op;
	ncclResult_t r;

	if (!esize) {
		cxls_comm_set_error(c, "AllGather: invalid datatype %d", (int)type);
		return ncclInvalidArgument;
	}
	if (sendcount > SIZE_MAX / esize / (size_t)c->nranks) {
		cxls_comm_set_error(c, "AllGather: count %zu overflows", sendcount);
		return ncclInvalidArgument;
	}
	bytes = sendcount * esize;
	if ((r = cxls_op_check_buf(c, sendbuff, bytes, "AllGather sendbuff")) ||
	    (r = cxls_op_check_buf(c, recvbuff, bytes * (size_t)c->nranks, "AllGather recvbuff")))
		return r;
	if (!bytes)
		return ncclSuccess;
	if ((r = cxls_op_begin(&op, c, stream, bytes)))
		return r;
	own = (char *)recvbuff + (size_t)c->rank * bytes;
	for (uint32_t k = 0; k < op.rounds; k++)
		if (publish(&op, sendbuff, k) || fetch(&op, recvbuff, k))
			return cxls_op_abandon(&op);
	/* Out of place, our own slice goes straight to its place, last on the
	 * write stream: publishing first lets the peers start earlier. */
	if (cxls_stage_copy(&c->st, op.ws, (CUdeviceptr)(uintptr_t)own,
			    (CUdeviceptr)(uintptr_t)sendbuff, bytes))
		return cxls_op_abandon(&op);
	CXLS_TRACE("AllGather %zu bytes/rank, %u rounds from round %u", bytes, op.rounds, op.g0);
	return cxls_op_end(&op);
}

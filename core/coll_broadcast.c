/* coll_broadcast.c - Broadcast through the pool (1-to-N).
 *
 * The root publishes chunk k into staging slot g % depth, spread over all
 * devices (CCCL equations 1-3), and rings pub[root] = g+1.  Readers fetch
 * in groups of up to ND chunks, each reader starting at a different chunk
 * of the group so that concurrent readers hit different devices, and ring
 * ack[rank] after each group.
 */
#include "coll.h"

#include "log.h"
#include "stage.h"

static uint8_t *bslot(const struct cxls_op *op, uint32_t k)
{
	const struct cxls_comm *c = op->c;

	return c->pool->base + cxls_layout_1n(&c->lay, (op->g0 + k) % c->lay.bcast_slots);
}

static int root_publish(struct cxls_op *op, const char *send)
{
	struct cxls_comm *c = op->c;
	const struct cxls_stage *s = &c->st;

	for (uint32_t k = 0; k < op->rounds; k++) {
		uint8_t *slot = bslot(op, k);
		size_t len = cxls_op_len(op, k);
		CUdeviceptr src = (CUdeviceptr)(uintptr_t)(send + cxls_op_off(op, k));

		uint32_t dev = cxls_layout_device(&c->lay, (uint64_t)(slot - c->pool->base));

		if (cxls_op_wait_consumed(op, op->ws, k, c->lay.bcast_slots, c->rank) ||
		    cxls_stage_pool_copy(s, op->ws, s->rec_w, cxls_stage_dev(s, slot), src, len,
					 dev) ||
		    cxls_stage_flush(s, op->ws, slot, len) ||
		    cxls_stage_ring(s, op->ws, &c->view.pub[c->rank], op->g0 + k + 1))
			return -1;
	}
	/* The root consumes nothing, but peers' next op may reuse the window
	 * once every rank acknowledged: only after the last publish. */
	return cxls_stage_ring(s, op->ws, &c->view.ack[c->rank], op->g0 + op->rounds);
}

/* Group size: ND chunks with interleaving (one per device), at most half
 * the staging depth so the root can keep publishing meanwhile, and at most
 * an eighth of the message: waiting for a whole group before reading
 * costs pipeline depth that short messages cannot spare. */
static uint32_t group_size(const struct cxls_op *op)
{
	const struct cxls_comm *c = op->c;
	uint32_t g = c->lay.interleave ? c->lay.ndev : 1;
	uint32_t half = c->lay.bcast_slots / 2 ? c->lay.bcast_slots / 2 : 1;
	uint32_t eighth = op->rounds / 8 ? op->rounds / 8 : 1;

	g = g < half ? g : half;
	return g < eighth ? g : eighth;
}

static int reader_fetch(struct cxls_op *op, char *recv, int root)
{
	struct cxls_comm *c = op->c;
	const struct cxls_stage *s = &c->st;
	uint32_t gs = group_size(op);

	for (uint32_t k0 = 0; k0 < op->rounds; k0 += gs) {
		uint32_t n = op->rounds - k0 < gs ? op->rounds - k0 : gs;

		if (cxls_stage_wait(s, op->rs, &c->view.pub[root], op->g0 + k0 + n))
			return -1;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t k = k0 + (i + (uint32_t)c->rank) % n;
			uint8_t *slot = bslot(op, k);
			size_t len = cxls_op_len(op, k);
			CUdeviceptr dst = (CUdeviceptr)(uintptr_t)(recv + cxls_op_off(op, k));

			uint32_t dev = cxls_layout_device(&c->lay, (uint64_t)(slot - c->pool->base));

			if (cxls_stage_flush(s, op->rs, slot, len) ||
			    cxls_stage_pool_copy(s, op->rs, s->rec_r, dst, cxls_stage_dev(s, slot),
						 len, dev))
				return -1;
		}
		if (cxls_stage_ring(s, op->rs, &c->view.ack[c->rank], op->g0 + k0 + n))
			return -1;
	}
	/* Published nothing: say so, so that our publish doorbell keeps up
	 * with the rounds and never lags 2^31 behind (wrap-around). */
	return cxls_stage_ring(s, op->ws, &c->view.pub[c->rank], op->g0 + op->rounds);
}

ncclResult_t cxls_broadcast(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t count, ncclDataType_t type, int root, CUstream stream)
{
	size_t esize = cxls_type_size(type), bytes;
	struct cxls_op op;
	ncclResult_t r;
	int rc;

	if (!esize) {
		cxls_comm_set_error(c, "Broadcast: invalid datatype %d", (int)type);
		return ncclInvalidArgument;
	}
	if (root < 0 || root >= c->nranks) {
		cxls_comm_set_error(c, "Broadcast: root %d out of range [0,%d)", root, c->nranks);
		return ncclInvalidArgument;
	}
	if (count > SIZE_MAX / esize) {
		cxls_comm_set_error(c, "Broadcast: count %zu overflows", count);
		return ncclInvalidArgument;
	}
	bytes = count * esize;
	if ((c->rank == root && (r = cxls_op_check_buf(c, sendbuff, bytes, "Broadcast sendbuff"))) ||
	    (r = cxls_op_check_buf(c, recvbuff, bytes, "Broadcast recvbuff")))
		return r;
	if (!bytes)
		return ncclSuccess;
	if ((r = cxls_op_begin(&op, c, stream, bytes)))
		return r;
	if (c->rank == root)
		/* publish first, so readers start early; then our own copy */
		rc = root_publish(&op, sendbuff) ||
		     cxls_stage_copy(&c->st, op.ws, (CUdeviceptr)(uintptr_t)recvbuff,
				     (CUdeviceptr)(uintptr_t)sendbuff, bytes);
	else
		rc = reader_fetch(&op, recvbuff, root);
	if (rc)
		return cxls_op_abandon(&op);
	CXLS_TRACE("Broadcast %zu bytes from root %d, %u rounds from round %u", bytes, root,
		   op.rounds, op.g0);
	return cxls_op_end(&op);
}

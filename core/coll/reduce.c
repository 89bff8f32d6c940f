/* reduce.c - Reduce through the pool (N-to-1).
 *
 * Every rank but the root publishes its data chunk by chunk, as for
 * Gather; the root folds each peer's chunk straight out of the pool into
 * its result, in the order root, root+1, root+2, ... (a fixed order, so
 * floating results do not depend on timing).
 */
#include "coll.h"

#include "log.h"
#include "redop.h"

static int fold_all(struct cxls_op *op, const char *send, char *recv, ncclDataType_t t,
		    const struct cxls_redop *rop)
{
	struct cxls_comm *c = op->c;
	size_t es = cxls_type_size(t);

	if (c->nranks == 1)
		return cxls_op_fold_init(op, recv, send, op->bytes / es, t, rop, 1);
	if (cxls_op_own_begin(op, recv, send, op->bytes / es, t, rop))
		return -1;
	for (uint32_t k = 0; k < op->rounds; k++) {
		size_t off = cxls_op_off(op, k), n = cxls_op_len(op, k) / es;

		for (int i = 1; i < c->nranks; i++) {
			int peer = (c->rank + i) % c->nranks, last = i == c->nranks - 1;
			uint8_t *slot = cxls_op_slot(op, peer, k);

			if (cxls_op_fold_own(op, k, peer, slot, recv + off, i == 1 ? send + off : NULL,
					     n, t, rop, last))
				return -1;
		}
		if (cxls_op_ack(op, k))
			return -1;
	}
	return 0;
}

static ncclResult_t enqueue(struct cxls_comm *c, const struct cxls_coll *k)
{
	struct cxls_op op;
	ncclResult_t r;
	int rc;

	if ((r = cxls_op_begin(&op, c, k, k->bytes, 1)))
		return r;
	op.scale = &k->rop;
	op.type = k->type;
	rc = c->rank == k->root ? fold_all(&op, k->send, k->recv, k->type, &k->rop) :
				  cxls_op_publish_all(&op, k->send, k->root);
	if (rc)
		return cxls_op_abandon(&op);
	CXLS_TRACE("Reduce %zu bytes to root %d, %u rounds from round %u", k->bytes, k->root,
		   op.rounds, op.g0);
	return cxls_op_end(&op);
}

ncclResult_t cxls_reduce(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			 size_t count, ncclDataType_t type, ncclRedOp_t redop, int root,
			 CUstream stream)
{
	struct cxls_redop rop;
	size_t bytes;
	ncclResult_t r;

	if ((r = cxls_op_check_count(c, "Reduce", type, count, 1, &bytes)) ||
	    (r = cxls_op_check_root(c, "Reduce", root)) ||
	    (r = cxls_redop_resolve(c, redop, type, &rop)) ||
	    (r = cxls_op_check_reducible(c, "Reduce")) ||
	    (r = cxls_op_check_buf(c, sendbuff, bytes, "Reduce sendbuff")) ||
	    (c->rank == root && (r = cxls_op_check_buf(c, recvbuff, bytes, "Reduce recvbuff"))))
		return r;
	if (!bytes)
		return ncclSuccess;
	return cxls_coll_submit(c, &(struct cxls_coll){ .enqueue = enqueue, .kind = CXLS_OP_REDUCE,
							.send = sendbuff,
							.recv = recvbuff, .count = count,
							.bytes = bytes, .type = type,
							.redop = redop, .rop = rop, .root = root,
							.stream = stream });
}

/* reducescatter.c - ReduceScatter through the pool (N-to-N).
 *
 * The AlltoAll pattern with a reduction at the receiver: in round t rank r
 * publishes chunk t / (N-1) of the slice that rank r+o owns (o = 1 +
 * t % (N-1)) and folds the same chunk of its own slice, published by rank
 * r-o, into its result.  Each rank reads (N-1)/N of the message once: the
 * pool carries every byte once in and once out.  Fold order per slice:
 * r, r-1, r-2, ...
 */
#include "coll.h"

#include "log.h"
#include "redop.h"

/* Round t, publishing: chunk k of the slice of the rank ahead. */
static int put_t(struct cxls_op *op, const char *send, uint32_t t)
{
	uint32_t k = t / (uint32_t)(op->c->nranks - 1);

	return cxls_op_pair_put(op, t, send + (size_t)cxls_op_pair(op, t, 1) * op->bytes +
					       cxls_op_off(op, k),
				cxls_op_len(op, k));
}

/* Round t, folding: the same chunk of our slice, from the rank behind;
 * own: our slice of sendbuff, folded in at the chunk's first round. */
static int fold_t(struct cxls_op *op, const char *own, char *recv, uint32_t t,
		  ncclDataType_t type, const struct cxls_redop *rop)
{
	struct cxls_comm *c = op->c;
	uint32_t k = t / (uint32_t)(c->nranks - 1);
	int from = cxls_op_pair(op, t, -1);
	int first = t % (uint32_t)(c->nranks - 1) == 0, last = from == (c->rank + 1) % c->nranks;
	size_t off = cxls_op_off(op, k), len = cxls_op_len(op, k);

	if (cxls_op_fold_own(op, t, from, cxls_op_slot(op, from, t), recv + off,
			     first ? own + off : NULL, len / cxls_type_size(type), type, rop, last))
		return -1;
	return cxls_op_ack(op, t);
}

/* Rounds in order, each published as far ahead as cxls_op_lead allows. */
static int run(struct cxls_op *op, const char *send, const char *own, char *recv,
	       ncclDataType_t type, const struct cxls_redop *rop)
{
	uint32_t put = 0;

	for (uint32_t t = 0; t < op->rounds; t++) {
		for (; put < op->rounds && put <= t + cxls_op_lead(op, put); put++)
			if (put_t(op, send, put))
				return -1;
		if (fold_t(op, own, recv, t, type, rop))
			return -1;
	}
	return 0;
}

static ncclResult_t enqueue(struct cxls_comm *c, const struct cxls_coll *k)
{
	const char *own = (const char *)k->send + (size_t)c->rank * k->bytes;
	struct cxls_op op;
	ncclResult_t r;

	if ((r = cxls_op_begin(&op, c, k, k->bytes, (uint32_t)c->nranks - 1)))
		return r;
	op.scale = &k->rop;
	op.type = k->type;
	if (c->nranks == 1 ?
		    cxls_op_fold_init(&op, k->recv, own, k->count, k->type, &k->rop, 1) :
		    cxls_op_own_begin(&op, k->recv, own, k->count, k->type, &k->rop))
		return cxls_op_abandon(&op);
	if (run(&op, k->send, own, k->recv, k->type, &k->rop))
		return cxls_op_abandon(&op);
	CXLS_TRACE("ReduceScatter %zu bytes/rank, %u rounds from round %u", k->bytes, op.rounds,
		   op.g0);
	return cxls_op_end(&op);
}

ncclResult_t cxls_reducescatter(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
				size_t recvcount, ncclDataType_t type, ncclRedOp_t redop,
				CUstream stream)
{
	struct cxls_redop rop;
	size_t bytes;
	ncclResult_t r;

	if ((r = cxls_op_check_count(c, "ReduceScatter", type, recvcount, c->nranks, &bytes)) ||
	    (r = cxls_redop_resolve(c, redop, type, &rop)) ||
	    (r = cxls_op_check_reducible(c, "ReduceScatter")) ||
	    (r = cxls_op_check_buf(c, sendbuff, bytes * (size_t)c->nranks,
				   "ReduceScatter sendbuff")) ||
	    (r = cxls_op_check_buf(c, recvbuff, bytes, "ReduceScatter recvbuff")))
		return r;
	if (!bytes)
		return ncclSuccess;
	return cxls_coll_submit(c, &(struct cxls_coll){ .enqueue = enqueue, .kind = CXLS_OP_REDUCESCATTER,
							.send = sendbuff,
							.recv = recvbuff, .count = recvcount,
							.bytes = bytes, .type = type,
							.redop = redop, .rop = rop, .root = -1,
							.stream = stream });
}

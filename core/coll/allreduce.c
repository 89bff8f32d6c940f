/* allreduce.c - AllReduce through the pool as ReduceScatter +
 * AllGather (better than CCCL's direct scheme, where every rank reads
 * every peer's whole buffer: here each byte crosses the pool twice).
 * The direct scheme stays selectable by size (nccl.allreduce_direct_max):
 * every rank publishes its whole buffer and folds all N of them, its own
 * from the pool too, in rank order 0, 1, ..., so every rank computes the
 * same bits, at N reads of the message per rank.
 *
 * The message is cut in N slices of ceil(count/N) elements (the last ones
 * shorter or empty).  Phase 1, rounds [0, T1): the ReduceScatter pattern;
 * rank r folds slice r.  Phase 2, rounds [T1, T1 + cpr): rank r publishes
 * chunk k of its reduced slice, once its own acknowledgement says the
 * fold of that chunk is done, and fetches chunk k of every other slice.
 * Publishing runs ahead of consuming (run()), so the phases overlap.
 * Every rank gets the same bits: each slice is reduced once, by its owner,
 * in the order owner, owner-1, owner-2, ...
 */
#include "coll.h"

#include "log.h"
#include "runtime.h"
#include "redop.h"
#include "stage.h"

struct ar {
	struct cxls_op op;
	const char *send;
	char *recv;
	size_t count, q, es;   /* elements, elements per slice, element size */
	ncclDataType_t type;
	struct cxls_redop rop;
};

/* Byte offset and length of chunk k of slice i (possibly empty). */
static size_t slice_off(const struct ar *a, int i, uint32_t k)
{
	return (size_t)i * a->q * a->es + cxls_op_off(&a->op, k);
}

static size_t slice_len(const struct ar *a, int i, uint32_t k)
{
	size_t start = (size_t)i * a->q + cxls_op_off(&a->op, k) / a->es;
	size_t end = (size_t)(i + 1) * a->q, len = cxls_op_len(&a->op, k);

	if (end > a->count)
		end = a->count;
	if (start >= end)
		return 0;
	return (end - start) * a->es < len ? (end - start) * a->es : len;
}

/* Phase 1, round t: publish chunk k of the slice that the rank ahead
 * owns. */
static int reduce_put(struct ar *a, uint32_t t)
{
	struct cxls_op *op = &a->op;
	uint32_t k = t / (uint32_t)(op->c->nranks - 1);
	int to = cxls_op_pair(op, t, 1);

	return cxls_op_pair_put(op, t, a->send + slice_off(a, to, k), slice_len(a, to, k));
}

/* Phase 1, round t: fold the chunk the rank behind published for us. */
static int reduce_fold(struct ar *a, uint32_t t)
{
	struct cxls_op *op = &a->op;
	struct cxls_comm *c = op->c;
	uint32_t k = t / (uint32_t)(c->nranks - 1);
	int from = cxls_op_pair(op, t, -1), me = c->rank, last = from == (me + 1) % c->nranks;
	size_t off = slice_off(a, me, k), n = slice_len(a, me, k) / a->es;
	uint8_t *slot = cxls_op_slot(op, from, t);

	/* the chunk's first round folds our own input in too */
	if (cxls_op_fold_own(op, t, from, slot, a->recv + off,
			     t % (uint32_t)(c->nranks - 1) == 0 ? a->send + off : NULL, n, a->type,
			     &a->rop, last))
		return -1;
	return cxls_op_ack(op, t);
}

/* Phase-1 round after which chunk k of our slice is fully reduced. */
static uint32_t folded_at(const struct ar *a, uint32_t k)
{
	uint32_t n1 = (uint32_t)a->op.c->nranks - 1;

	return k * n1 + n1 - 1;
}

/* Phase 2, round t1 + k: publish chunk k of our reduced slice, once our
 * own acknowledgement says its fold is done (the read stream's, with
 * overlap; on one stream it is already behind us). */
static int gather_put(struct ar *a, uint32_t k, uint32_t t1)
{
	struct cxls_op *op = &a->op;
	struct cxls_comm *c = op->c;
	uint32_t t = t1 + k;
	int me = c->rank;

	if (cxls_op_wait_bell(op, op->ws, &c->view.ack[me], me, op->g0 + folded_at(a, k) + 1) ||
	    cxls_op_wait_consumed(op, t, op->depth, -1))
		return -1;
	return cxls_op_put(op, t, cxls_op_slot(op, me, t), a->recv + slice_off(a, me, k),
			   slice_len(a, me, k), -1);
}

/* Phase 2, round t1 + k: fetch chunk k of every other slice. */
static int gather_get(struct ar *a, uint32_t k, uint32_t t1)
{
	struct cxls_op *op = &a->op;
	struct cxls_comm *c = op->c;
	uint32_t t = t1 + k;

	for (int i = 1; i < c->nranks; i++) {
		int p = (c->rank + i) % c->nranks;

		if (cxls_op_get(op, t, p, cxls_op_slot(op, p, t), a->recv + slice_off(a, p, k),
				slice_len(a, p, k)))
			return -1;
	}
	return cxls_op_ack(op, t);
}

static int direct_round(struct ar *a, uint32_t k)
{
	struct cxls_op *op = &a->op;
	struct cxls_comm *c = op->c;
	size_t off = cxls_op_off(op, k), n = cxls_op_len(op, k) / a->es;
	char *dst = a->recv + off;
	uint32_t depth = op->depth;

	/* we read our own slot too: our fold of what it held must be done
	 * before it is reused; and in place, our input must be in the slot
	 * before the first fold overwrites it */
	if (cxls_op_wait_consumed(op, k, depth, -1) ||
	    (k >= depth && cxls_op_wait_bell(op, op->ws, &c->view.ack[c->rank], c->rank,
					     op->g0 + k - depth + 1)) ||
	    cxls_op_put(op, k, cxls_op_slot(op, c->rank, k), a->send + off, n * a->es, -1) ||
	    cxls_op_wait_bell(op, op->rs, &c->view.pub[c->rank], c->rank, op->g0 + k + 1) ||
	    cxls_op_fold_first(op, k, 0, cxls_op_slot(op, 0, k), dst, n, a->type, &a->rop,
			       c->nranks == 1))
		return -1;
	for (int i = 1; i < c->nranks; i++)
		if (cxls_op_fold(op, k, i, cxls_op_slot(op, i, k), dst, n, a->type, &a->rop,
				 i == c->nranks - 1))
			return -1;
	return cxls_op_ack(op, k);
}

static int run_direct(struct ar *a)
{
	a->op.scale = &a->rop; /* inputs are published scaled */
	a->op.type = a->type;
	for (uint32_t k = 0; k < a->op.rounds; k++)
		if (direct_round(a, k))
			return -1;
	return 0;
}

static int put_round(struct ar *a, uint32_t t, uint32_t t1)
{
	a->op.scale = t < t1 ? &a->rop : NULL; /* inputs go out scaled, results not */
	return t < t1 ? reduce_put(a, t) : gather_put(a, t - t1, t1);
}

static int use_round(struct ar *a, uint32_t t, uint32_t t1)
{
	return t < t1 ? reduce_fold(a, t) : gather_get(a, t - t1, t1);
}

/* Round p may be published once what it publishes is enqueued: phase-1
 * inputs always; a reduced chunk once the round that finishes its fold
 * (before `used`, the first round not yet consumed). */
static int can_put(const struct ar *a, uint32_t p, uint32_t t1, uint32_t used)
{
	return p < t1 || folded_at(a, p - t1) < used;
}

/* Phase 1, rounds [0, t1): the ReduceScatter pattern; phase 2, rounds
 * [t1, t1 + cpr): the AllGather of the reduced slices.  Both run as one
 * sequence: round p is published as soon as the lead and its data allow,
 * so a reduced chunk goes out while later chunks are still being folded,
 * and the phases meet at no barrier.  Puts and uses each go in round
 * order (the doorbells count rounds). */
static int run(struct ar *a)
{
	struct cxls_comm *c = a->op.c;
	uint32_t t1 = a->op.cpr * (uint32_t)(c->nranks - 1);
	uint32_t rounds = a->op.rounds, put = 0;
	size_t own = (size_t)c->rank * a->q;
	size_t own_n = own < a->count ? (a->count - own < a->q ? a->count - own : a->q) : 0;

	a->op.type = a->type;
	/* alone, the result is our input (x scalar); else folds make it */
	if (c->nranks == 1 ?
		    cxls_op_fold_init(&a->op, a->recv, a->send, a->count, a->type, &a->rop, 1) :
		    cxls_op_own_begin(&a->op, a->recv + own * a->es, a->send + own * a->es, own_n,
				      a->type, &a->rop))
		return -1;
	for (uint32_t t = 0; t < rounds; t++) {
		for (; put < rounds && put <= t + cxls_op_lead(&a->op, put) &&
		       can_put(a, put, t1, t);
		     put++)
			if (put_round(a, put, t1))
				return -1;
		if (use_round(a, t, t1))
			return -1;
	}
	return 0;
}

static ncclResult_t enqueue(struct cxls_comm *c, const struct cxls_coll *k)
{
	struct ar a = { .send = k->send, .recv = k->recv, .count = k->count, .type = k->type,
			.rop = k->rop, .es = cxls_type_size(k->type) };
	int direct = k->kind == CXLS_OP_ALLREDUCE_DIRECT;
	ncclResult_t r;

	a.q = (k->count + (size_t)c->nranks - 1) / (size_t)c->nranks;
	if (direct)
		r = cxls_op_begin(&a.op, c, k, k->bytes, 1);
	else
		r = cxls_op_begin(&a.op, c, k, a.q * a.es,
				  c->nranks > 1 ? (uint32_t)c->nranks : 0);
	if (r)
		return r;
	if (direct ? run_direct(&a) : run(&a))
		return cxls_op_abandon(&a.op);
	CXLS_TRACE("AllReduce %zu bytes (%s), %u rounds from round %u", k->bytes,
		   direct ? "direct" : "ReduceScatter + AllGather", a.op.rounds, a.op.g0);
	return cxls_op_end(&a.op);
}

ncclResult_t cxls_allreduce(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t count, ncclDataType_t type, ncclRedOp_t redop, CUstream stream)
{
	enum cxls_op_kind kind;
	struct cxls_redop rop;
	size_t bytes;
	ncclResult_t r;

	if ((r = cxls_op_check_count(c, "AllReduce", type, count, 1, &bytes)) ||
	    (r = cxls_redop_resolve(c, redop, type, &rop)) ||
	    (r = cxls_op_check_reducible(c, "AllReduce")) ||
	    (r = cxls_op_check_buf(c, sendbuff, bytes, "AllReduce sendbuff")) ||
	    (r = cxls_op_check_buf(c, recvbuff, bytes, "AllReduce recvbuff")))
		return r;
	if (!bytes)
		return ncclSuccess;
	/* every rank must pick the same scheme: the policy is the job's */
	kind = bytes <= cxls_runtime()->cfg.nccl_allreduce_direct_max ? CXLS_OP_ALLREDUCE_DIRECT :
									CXLS_OP_ALLREDUCE;
	return cxls_coll_submit(c, &(struct cxls_coll){ .enqueue = enqueue, .kind = kind,
							.send = sendbuff,
							.recv = recvbuff, .count = count,
							.bytes = bytes, .type = type,
							.redop = redop, .rop = rop, .root = -1,
							.stream = stream });
}

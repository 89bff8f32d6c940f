/* alltoall.c - AlltoAll through the pool (N-to-N).
 *
 * Ranks exchange in pairs, one pair per rank and round, as in a round-robin
 * tournament: in round t, rank r and its partner p each publish chunk
 * t / R of their slice for the other into their own staging slot, then
 * fetch the other's.  Every rank writes its own devices and reads a
 * different peer's, and each slot has exactly one reader.  R rounds give
 * every pair once: N-1 when N is even, N when it is odd (each rank then
 * sits out one round of the R).
 *
 * Pairs, rather than publishing for r+o while fetching from r-o, make the
 * exchange work in place (sendbuff == recvbuff, which nccl-tests runs):
 * the block fetched from p lands where the block for p was, and that block
 * was published in the same round, so the fetch only has to wait for our
 * own publication to leave.
 */
#include "coll.h"

#include "log.h"
#include "stage.h"

static uint32_t rounds_per_chunk(int n)
{
	if (n == 1)
		return 0; /* only the local copy */
	return (uint32_t)(n % 2 ? n : n - 1);
}

/* The partner of `rank` in round i of a chunk's R rounds; itself when it
 * sits the round out.  Ranks 0..M-1 (M = R, odd) pair up as i - x and
 * i + x around the circle of M; the one of them left over (2r = 2i mod M)
 * pairs with rank N-1 when N is even (so N-1 is never on the circle). */
static int partner(int rank, int n, uint32_t i)
{
	int m = (int)rounds_per_chunk(n), p;

	if (n % 2 == 0 && rank == n - 1)
		return (int)i;
	p = ((2 * (int)i - rank) % m + m) % m;
	if (p != rank)
		return p;
	return n % 2 == 0 ? n - 1 : rank;
}

static int round_partner(const struct cxls_op *op, uint32_t t)
{
	int n = op->c->nranks;

	return partner(op->c->rank, n, t % rounds_per_chunk(n));
}

/* Where round t's block for (and from) its partner p lies in a buffer. */
static size_t block_at(const struct cxls_op *op, int p, uint32_t t)
{
	return (size_t)p * op->bytes + cxls_op_off(op, t / rounds_per_chunk(op->c->nranks));
}

static size_t block_len(const struct cxls_op *op, uint32_t t)
{
	return cxls_op_len(op, t / rounds_per_chunk(op->c->nranks));
}

/* Round t, publishing: our block for the partner.  A round sat out still
 * rings both doorbells for it (here and in get_t), so that peers waiting
 * for "every rank acknowledged round g" (cxls_op_wait_consumed) are not
 * left waiting on a round nobody reads.  (Its slot is left as it is; the
 * wait for its last reader, made before this, stands for the next
 * writer.) */
static int put_t(struct cxls_op *op, const char *send, uint32_t t)
{
	struct cxls_comm *c = op->c;
	uint32_t depth = op->depth;
	int p = round_partner(op, t);

	/* our slot of round t held round t - depth, read by that round's
	 * partner (no one when we sat it out: then the wait made at that
	 * round covers what it held before) */
	if (cxls_op_wait_consumed(op, t, depth, t >= depth ? round_partner(op, t - depth) : -1))
		return -1;
	if (p == c->rank)
		return cxls_op_ring(op, op->ws, &c->view.pub[c->rank], op->g0 + t + 1);
	return cxls_op_put(op, t, cxls_op_slot(op, c->rank, t), send + block_at(op, p, t),
			   block_len(op, t), p);
}

/* Round t, fetching: the partner's block for us. */
static int get_t(struct cxls_op *op, const char *send, char *recv, uint32_t t)
{
	struct cxls_comm *c = op->c;
	int p = round_partner(op, t);

	if (p == c->rank)
		return cxls_op_ack(op, t);
	/* in place the fetch overwrites what round t's put reads: after it
	 * left (on one stream it is behind us already) */
	if (send == recv && op->rs != op->ws &&
	    cxls_op_wait_bell(op, op->rs, &c->view.pub[c->rank], c->rank, op->g0 + t + 1))
		return -1;
	if (cxls_op_get(op, t, p, cxls_op_slot(op, p, t), recv + block_at(op, p, t),
			block_len(op, t)))
		return -1;
	return cxls_op_ack(op, t);
}

/* Rounds in order, each published as far ahead as cxls_op_lead allows. */
static int run(struct cxls_op *op, const char *send, char *recv)
{
	uint32_t put = 0;

	for (uint32_t t = 0; t < op->rounds; t++) {
		for (; put < op->rounds && put <= t + cxls_op_lead(op, put); put++)
			if (put_t(op, send, put))
				return -1;
		if (get_t(op, send, recv, t))
			return -1;
	}
	return 0;
}

static ncclResult_t enqueue(struct cxls_comm *c, const struct cxls_coll *k)
{
	size_t own = (size_t)c->rank * k->bytes;
	struct cxls_op op;
	ncclResult_t r;

	if ((r = cxls_op_begin(&op, c, k, k->bytes, rounds_per_chunk(c->nranks))))
		return r;
	if (cxls_op_local_copy(&op, (char *)k->recv + own, (const char *)k->send + own,
			       k->bytes))
		return cxls_op_abandon(&op);
	if (run(&op, k->send, k->recv))
		return cxls_op_abandon(&op);
	CXLS_TRACE("AlltoAll %zu bytes/pair, %u rounds from round %u", k->bytes, op.rounds,
		   op.g0);
	return cxls_op_end(&op);
}

ncclResult_t cxls_alltoall(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			   size_t count, ncclDataType_t type, CUstream stream)
{
	size_t bytes, total;
	ncclResult_t r;

	if ((r = cxls_op_check_count(c, "AlltoAll", type, count, c->nranks, &bytes)))
		return r;
	total = bytes * (size_t)c->nranks;
	if ((r = cxls_op_check_buf(c, sendbuff, total, "AlltoAll sendbuff")) ||
	    (r = cxls_op_check_buf(c, recvbuff, total, "AlltoAll recvbuff")) ||
	    (r = cxls_op_check_alias(c, "AlltoAll", sendbuff, total, 0, recvbuff, total, 0)))
		return r;
	if (!bytes)
		return ncclSuccess;
	return cxls_coll_submit(c, &(struct cxls_coll){ .enqueue = enqueue, .kind = CXLS_OP_ALLTOALL,
							.send = sendbuff,
							.recv = recvbuff, .count = count,
							.bytes = bytes, .type = type, .root = -1,
							.stream = stream });
}

/* scatter.c - Scatter through the pool (1-to-N).
 *
 * The root publishes the destinations' slices one after the other, chunk
 * by chunk (round t carries chunk t mod C of the slice for rank t / C, C
 * chunks a slice), into the 1-to-N staging slots spread over all devices.
 * Each receiver fetches only its own rounds and acknowledges them; a slot
 * is reused once the one rank that read it is done.
 *
 * The root's writes bound the op; a receiver only has to keep up with
 * them.  Slice after slice, a receiver copies chunk k while the root
 * writes chunk k + 1 and finds it ready when done: it sleeps once, until
 * its slice begins, and one receiver at a time copies beside the root.
 * Taking the destinations in turn instead made every receiver wait N - 1
 * rounds for each of its chunks, asleep, and every publication a wake-up
 * that took a core from the root (4 ranks on 2 cores).
 */
#include "coll.h"

#include "log.h"

static int dest_of(const struct cxls_op *op, uint32_t t)
{
	return (int)(t / op->cpr);
}

static int root_publish(struct cxls_op *op, const char *send)
{
	struct cxls_comm *c = op->c;
	uint32_t depth = op->depth;

	for (uint32_t t = 0; t < op->rounds; t++) {
		int dest = dest_of(op, t);
		uint32_t k = t % op->cpr;
		/* the slot's last reader, `depth` rounds ago */
		int consumer = t >= depth ? dest_of(op, t - depth) : -1;

		if (cxls_op_wait_consumed(op, t, depth, consumer))
			return -1;
		if (dest == c->rank)
			continue; /* our own slice is copied locally */
		if (cxls_op_put(op, t, cxls_op_slot_1n(op, t),
				send + (size_t)dest * op->bytes + cxls_op_off(op, k),
				cxls_op_len(op, k), dest))
			return -1;
	}
	return 0;
}

static int receive(struct cxls_op *op, char *recv, int root)
{
	struct cxls_comm *c = op->c;

	for (uint32_t k = 0; k < op->cpr; k++) {
		uint32_t t = (uint32_t)c->rank * op->cpr + k;

		if (cxls_op_get(op, t, root, cxls_op_slot_1n(op, t), recv + cxls_op_off(op, k),
				cxls_op_len(op, k)) ||
		    cxls_op_ack(op, t))
			return -1;
	}
	return 0;
}

static ncclResult_t enqueue(struct cxls_comm *c, const struct cxls_coll *k)
{
	struct cxls_op op;
	ncclResult_t r;
	int rc;

	if ((r = cxls_op_begin(&op, c, k, k->bytes, (uint32_t)c->nranks)))
		return r;
	if (c->rank == k->root)
		rc = cxls_op_local_copy(&op, k->recv,
					(const char *)k->send + (size_t)k->root * k->bytes,
					k->bytes) ||
		     root_publish(&op, k->send);
	else
		rc = receive(&op, k->recv, k->root);
	if (rc)
		return cxls_op_abandon(&op);
	CXLS_TRACE("Scatter %zu bytes/rank from root %d, %u rounds from round %u", k->bytes,
		   k->root, op.rounds, op.g0);
	return cxls_op_end(&op);
}

ncclResult_t cxls_scatter(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			  size_t count, ncclDataType_t type, int root, CUstream stream)
{
	size_t bytes;
	ncclResult_t r;

	if ((r = cxls_op_check_count(c, "Scatter", type, count, c->nranks, &bytes)) ||
	    (r = cxls_op_check_root(c, "Scatter", root)) ||
	    (c->rank == root &&
	     (r = cxls_op_check_buf(c, sendbuff, bytes * (size_t)c->nranks, "Scatter sendbuff"))) ||
	    (r = cxls_op_check_buf(c, recvbuff, bytes, "Scatter recvbuff")) ||
	    (c->rank == root &&
	     (r = cxls_op_check_alias(c, "Scatter", sendbuff, bytes * (size_t)c->nranks,
				      (size_t)root * bytes, recvbuff, bytes, 0))))
		return r;
	if (!bytes)
		return ncclSuccess;
	return cxls_coll_submit(c, &(struct cxls_coll){ .enqueue = enqueue, .kind = CXLS_OP_SCATTER,
							.send = sendbuff,
							.recv = recvbuff, .count = count,
							.bytes = bytes, .type = type, .root = root,
							.stream = stream });
}

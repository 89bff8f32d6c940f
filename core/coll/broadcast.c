/* broadcast.c - Broadcast through the pool (1-to-N).
 *
 * The root publishes chunk k into staging slot g % depth, spread over all
 * devices (CCCL equations 1-3).  Readers fetch in groups of up to ND
 * chunks, each reader starting at a different chunk of the group so that
 * concurrent readers hit different devices, and acknowledge each group.
 */
#include "coll.h"

#include "log.h"

/* Out of place, the root's own copy comes first (cxls_op_local_copy). */
static int root_publish(struct cxls_op *op, const char *send, char *recv)
{
	if (cxls_op_local_copy(op, recv, send, op->bytes))
		return -1;
	for (uint32_t k = 0; k < op->rounds; k++)
		if (cxls_op_wait_consumed(op, k, op->depth, -1) ||
		    cxls_op_put(op, k, cxls_op_slot_1n(op, k), send + cxls_op_off(op, k),
				cxls_op_len(op, k), -1))
			return -1;
	return 0;
}

/* Group size: ND chunks with interleaving (one per device), at most half
 * the staging depth so the root can keep publishing meanwhile, and at most
 * an eighth of the message: waiting for a whole group before reading
 * costs pipeline depth that short messages cannot spare. */
static uint32_t group_size(const struct cxls_op *op)
{
	const struct cxls_comm *c = op->c;
	uint32_t g = c->lay.interleave ? c->lay.ndev : 1;
	uint32_t half = op->depth / 2 ? op->depth / 2 : 1;
	uint32_t eighth = op->rounds / 8 ? op->rounds / 8 : 1;

	g = g < half ? g : half;
	return g < eighth ? g : eighth;
}

static int reader_fetch(struct cxls_op *op, char *recv, int root)
{
	uint32_t gs = group_size(op);

	for (uint32_t k0 = 0; k0 < op->rounds; k0 += gs) {
		uint32_t n = op->rounds - k0 < gs ? op->rounds - k0 : gs;

		for (uint32_t i = 0; i < n; i++) {
			/* waiting for the group's last chunk covers the others */
			uint32_t k = k0 + (i + (uint32_t)op->c->rank) % n;

			if (cxls_op_get(op, k0 + n - 1, root, cxls_op_slot_1n(op, k),
					recv + cxls_op_off(op, k), cxls_op_len(op, k)))
				return -1;
		}
		if (cxls_op_ack(op, k0 + n - 1))
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
	if (c->rank == k->root)
		rc = root_publish(&op, k->send, k->recv);
	else
		rc = reader_fetch(&op, k->recv, k->root);
	if (rc)
		return cxls_op_abandon(&op);
	CXLS_TRACE("Broadcast %zu bytes from root %d, %u rounds from round %u", k->bytes, k->root,
		   op.rounds, op.g0);
	return cxls_op_end(&op);
}

ncclResult_t cxls_broadcast(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t count, ncclDataType_t type, int root, CUstream stream)
{
	size_t bytes;
	ncclResult_t r;

	if ((r = cxls_op_check_count(c, "Broadcast", type, count, 1, &bytes)) ||
	    (r = cxls_op_check_root(c, "Broadcast", root)) ||
	    (c->rank == root && (r = cxls_op_check_buf(c, sendbuff, bytes, "Broadcast sendbuff"))) ||
	    (r = cxls_op_check_buf(c, recvbuff, bytes, "Broadcast recvbuff")) ||
	    (c->rank == root &&
	     (r = cxls_op_check_alias(c, "Broadcast", sendbuff, bytes, 0, recvbuff, bytes, 0))))
		return r;
	if (!bytes)
		return ncclSuccess;
	return cxls_coll_submit(c, &(struct cxls_coll){ .enqueue = enqueue, .kind = CXLS_OP_BROADCAST,
							.send = sendbuff,
							.recv = recvbuff, .count = count,
							.bytes = bytes, .type = type, .root = root,
							.stream = stream });
}

/* p2p_match.c - send and receive sizes compared through the pool. */
#include "p2p_match.h"

#include "coherence.h"
#include "comm.h"
#include "seq_record.h"

enum { RECV = 0, SEND = 1 };

/* The ring where `side` of the channel src -> dst posts. */
static struct cxls_p2p_msg *ring_of(const struct cxls_comm *c, int side, int src, int dst)
{
	size_t i = (size_t)src * c->view.max_ranks + (size_t)dst;

	return side == SEND ? &c->view.p2p_smsg[i] : &c->view.p2p_rmsg[i];
}

/* This rank's ring for its direction `side` with peer, and the other
 * side's ring of the same channel. */
static struct cxls_p2p_msg *mine(const struct cxls_comm *c, int side, int peer)
{
	return side == SEND ? ring_of(c, SEND, c->rank, peer) : ring_of(c, RECV, peer, c->rank);
}

static struct cxls_p2p_msg *theirs(const struct cxls_comm *c, int side, int peer)
{
	return side == SEND ? ring_of(c, RECV, c->rank, peer) : ring_of(c, SEND, peer, c->rank);
}

static void post(struct cxls_comm *c, struct cxls_p2p_msg *r, uint32_t seq, uint64_t bytes,
		 uint32_t chunk0)
{
	__typeof__(r->m[0]) *e = &r->m[(seq - 1) % CXLS_P2P_MSG_RING];

	seq_record_open(&e->seq);
	atomic_store_explicit(&e->bytes, bytes, memory_order_relaxed);
	atomic_store_explicit(&e->chunk0, chunk0, memory_order_relaxed);
	seq_record_close(&e->seq, seq);
	cxls_publish(c->pool->flush_mode, r, sizeof(*r));
}

/* Message seq of ring r: 1 read, 0 not posted yet (or being written), -1
 * overwritten by a later one. */
static int peek(struct cxls_comm *c, struct cxls_p2p_msg *r, uint32_t seq, uint64_t *bytes,
		uint32_t *chunk0)
{
	__typeof__(r->m[0]) *e = &r->m[(seq - 1) % CXLS_P2P_MSG_RING];
	int got;

	cxls_refresh(c->pool->flush_mode, r, sizeof(*r));
	if ((got = seq_record_begin(&e->seq, seq)) != 1)
		return got;
	*bytes = atomic_load_explicit(&e->bytes, memory_order_relaxed);
	*chunk0 = atomic_load_explicit(&e->chunk0, memory_order_relaxed);
	return seq_record_end(&e->seq, seq);
}

/* 1: the other side posted message seq with the same size at the same
 * channel chunk (or is too far ahead to tell), 0: not posted yet, -1: a
 * different size, or a different start, which an earlier message of
 * another size left behind when the ring no longer held it (a group of
 * more than CXLS_P2P_MSG_RING messages to one peer): failed. */
static int compare(struct cxls_comm *c, int side, int peer, uint32_t seq, uint64_t bytes,
		   uint32_t chunk0)
{
	uint64_t other;
	uint32_t other0;
	int got = peek(c, theirs(c, side, peer), seq, &other, &other0);

	if (got <= 0)
		return got < 0 ? 1 : 0;
	if (other == bytes && other0 == chunk0)
		return 1;
	if (other != bytes)
		cxls_comm_set_error(c, "message %u %s rank %d: %llu bytes here, %llu bytes there: "
				       "failing the communicator on every rank",
				    seq, side == SEND ? "sent to" : "received from", peer,
				    (unsigned long long)bytes, (unsigned long long)other);
	else
		cxls_comm_set_error(c, "message %u %s rank %d starts at channel chunk %u here, %u "
				       "there (an earlier message's sizes differed): failing the "
				       "communicator on every rank",
				    seq, side == SEND ? "sent to" : "received from", peer, chunk0,
				    other0);
	cxls_comm_fail(c, CXLS_ABORT_MISMATCH, ncclInvalidUsage);
	return -1;
}

/* The channel chunk where ops[i] starts: the chunks before this group
 * (p2p.c advances them when the group is enqueued), then those of the
 * group's earlier messages to or from the same peer, in call order as
 * p2p.c cuts them. */
static uint32_t chunk0_of(const struct cxls_comm *c, const struct cxls_p2p *ops, int i)
{
	int side = ops[i].send, peer = ops[i].peer;
	uint64_t chunk = c->lay.p2p_chunk;
	uint32_t k = atomic_load(side ? &c->p2p_sent[peer] : &c->p2p_recvd[peer]);

	for (int j = 0; j < i; j++)
		if (ops[j].send == side && ops[j].peer == peer)
			k += (uint32_t)((ops[j].bytes + chunk - 1) / chunk);
	return k;
}

ncclResult_t cxls_p2p_match_post(struct cxls_comm *c, const struct cxls_p2p *ops, int n)
{
	int bad = 0;

	for (int i = 0; i < n && !bad; i++) {
		int side = ops[i].send ? SEND : RECV, peer = ops[i].peer;
		uint32_t seq, chunk0;

		/* an empty message moves nothing through the channel (and NCCL
		 * pairs nothing for it): only real ones are numbered */
		if (peer == c->rank || !ops[i].bytes)
			continue;
		chunk0 = chunk0_of(c, ops, i);
		seq = atomic_fetch_add(&c->p2p_msgs[side][peer], 1) + 1;
		post(c, mine(c, side, peer), seq, ops[i].bytes, chunk0);
		bad = compare(c, side, peer, seq, ops[i].bytes, chunk0) < 0;
	}
	return bad ? ncclInvalidUsage : ncclSuccess;
}

/* Our posts that the other side had not matched yet, oldest first; the
 * ones our ring no longer holds are past checking. */
static int verify_channel(struct cxls_comm *c, int side, int peer)
{
	uint32_t posted = atomic_load(&c->p2p_msgs[side][peer]);
	uint32_t *ok = &c->p2p_msgs_ok[side][peer];
	uint64_t bytes;
	uint32_t chunk0;

	if (posted - *ok > CXLS_P2P_MSG_RING)
		*ok = posted - CXLS_P2P_MSG_RING;
	while (*ok != posted) {
		int r;

		if (peek(c, mine(c, side, peer), *ok + 1, &bytes, &chunk0) != 1)
			return 0;
		r = compare(c, side, peer, *ok + 1, bytes, chunk0);
		if (r <= 0)
			return r;
		(*ok)++;
	}
	return 0;
}

void cxls_p2p_match_verify(struct cxls_comm *c)
{
	for (int peer = 0; peer < c->nranks; peer++)
		if (peer != c->rank &&
		    (verify_channel(c, SEND, peer) < 0 || verify_channel(c, RECV, peer) < 0))
			return;
}

/* p2p.c - send/receive groups through per-pair channels in the pool. */
#include "p2p.h"

#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "log.h"
#include "order.h"
#include "p2p_match.h"
#include "stage.h"

/* Where one direction of one channel stands while a group is enqueued:
 * the group's messages to (or from) that peer, cut into chunks. */
struct lane_cursor {
	int peer;
	int send;
	uint32_t seq0;          /* eager: channel chunks before this group */
	uint32_t chunks;        /* chunks of this group */
	const struct cxls_p2p *ops;
	int n;                  /* the group's ops, filtered by peer/direction */
	int msg;                /* cursor: current message ... */
	size_t off;             /* ... and offset in it */
};

ncclResult_t cxls_p2p_check(struct cxls_comm *c, int send, const void *buf, size_t count,
			    ncclDataType_t type, int peer, struct cxls_p2p *p)
{
	const char *fn = send ? "Send" : "Recv";
	size_t bytes;
	ncclResult_t r;

	if (peer < 0 || peer >= c->nranks) {
		cxls_comm_set_error(c, "%s: peer %d out of range [0,%d)", fn, peer, c->nranks);
		return ncclInvalidArgument;
	}
	if ((r = cxls_op_check_count(c, fn, type, count, 1, &bytes)) ||
	    (r = cxls_op_check_buf(c, buf, bytes, send ? "Send sendbuff" : "Recv recvbuff")))
		return r;
	if (!c->lay.p2p_slots) {
		cxls_comm_set_error(c, "%s: the pool lane has no room for %d x %d point-to-point "
				       "channels (raise pool.size or lower pool.max_comms)",
				    fn, c->nranks, c->nranks);
		return ncclInvalidUsage;
	}
	p->send = send;
	p->peer = peer;
	p->buf = (char *)buf;
	p->bytes = bytes;
	return ncclSuccess;
}

/* seq counts in 32 bits and wraps; p2p_slots is 4, 2 or 1 (layout.c), a
 * divisor of 2^32, so the slot sequence runs on unbroken across the wrap
 * (the collectives' depths need not divide it: comm.h round).  Captured
 * sends have slots of their own (gp2p_, as many or fewer, smaller). */
static uint8_t *slot_of(const struct cxls_p2p_batch *b, int src, int dst, uint32_t seq)
{
	const struct cxls_layout *l = &b->c->lay;
	uint64_t off = b->capturing ?
		cxls_layout_gp2p(l, (uint32_t)src, (uint32_t)dst, seq % l->gp2p_slots) :
		cxls_layout_p2p(l, (uint32_t)src, (uint32_t)dst, seq % l->p2p_slots);

	return b->c->pool->base + off;
}

static size_t chunk_of(const struct cxls_p2p_batch *b)
{
	return b->capturing ? b->c->lay.gp2p_chunk : b->c->lay.p2p_chunk;
}

static struct cxls_flag *flag_of(struct cxls_comm *c, int src, int dst, uint32_t seq)
{
	return &cxls_p2p_flag(&c->view, src, dst)->slot[seq % c->lay.gp2p_slots];
}

/* The next chunk of the cursor's messages: where, and how long.  Its
 * slot: eager, the channel's chunk count (k: this group's chunks so
 * far); captured, its place in its message, so that every message starts
 * at the channel's first captured slot.  A graph freezes slots, and the
 * peer may have put the same messages in other graphs (two captured as
 * one, one replayed twice): only a slot that does not depend on where a
 * message was captured matches in the order the messages run, as NCCL's
 * do.  (So a captured message waits for the receive of the one before it
 * to begin: a rank's second send to a peer that sends to it first does
 * not complete before the peer receives.) */
static size_t next_chunk(const struct cxls_p2p_batch *b, struct lane_cursor *l, uint32_t k,
			 char **buf, uint32_t *seq)
{
	size_t chunk = chunk_of(b);

	for (; l->msg < l->n; l->msg++, l->off = 0) {
		const struct cxls_p2p *p = &l->ops[l->msg];
		size_t len;

		if (p->peer != l->peer || p->send != l->send || l->off >= p->bytes)
			continue;
		len = p->bytes - l->off < chunk ? p->bytes - l->off : chunk;
		*buf = p->buf + l->off;
		*seq = b->capturing ? (uint32_t)(l->off / chunk) : l->seq0 + k;
		l->off += len;
		return len;
	}
	return 0;
}

/* An eager group's ring, and its wait for owner's doorbell, ordered for
 * the ranks of this process (order.h); captured groups use flags. */
static int ring(const struct cxls_p2p_batch *b, CUstream st, struct cxls_bell *bell, uint32_t v)
{
	if (cxls_stage_ring(&b->c->st, st, bell, v))
		return -1;
	cxls_order_queued(b->c, bell, v);
	return 0;
}

static int wait_bell(const struct cxls_p2p_batch *b, CUstream st, struct cxls_bell *bell,
		     int owner, uint32_t v)
{
	cxls_order_await(b->c, owner, bell, v);
	return cxls_stage_wait(&b->c->st, st, bell, v);
}

/* The hand-offs of channel slot seq between sender and receiver.  Eager:
 * the channel's doorbells count chunks, so the sender waits until the
 * peer consumed what the slot held (chunk seq - slots; doorbells compare
 * cyclically, so for the channel's first chunks the wait passes at once).
 * Captured: a graph freezes its values, which must then hold at every
 * replay, so the slot's flag goes EMPTY -> FULL -> EMPTY instead, and a
 * replay needs no barrier with its peer: a send completes into free
 * slots whether or not the receive is replayed yet, as NCCL's does into
 * its buffers. */
static int wait_slot_empty(const struct cxls_p2p_batch *b, CUstream st, int peer, uint32_t seq)
{
	struct cxls_comm *c = b->c;

	if (b->capturing)
		return cxls_stage_flag_wait(&c->st, st, flag_of(c, c->rank, peer, seq),
					    CXLS_FLAG_EMPTY);
	return wait_bell(b, st, cxls_p2p_ack(&c->view, c->rank, peer), peer,
			 seq - c->lay.p2p_slots + 1);
}

static int post_slot_full(const struct cxls_p2p_batch *b, CUstream st, int peer, uint32_t seq)
{
	struct cxls_comm *c = b->c;

	if (b->capturing)
		return cxls_stage_flag_set(&c->st, st, &flag_of(c, c->rank, peer, seq)->state,
					   CXLS_FLAG_FULL);
	return ring(b, st, cxls_p2p_pub(&c->view, c->rank, peer), seq + 1);
}

static int wait_slot_full(const struct cxls_p2p_batch *b, CUstream st, int peer, uint32_t seq)
{
	struct cxls_comm *c = b->c;

	if (b->capturing)
		return cxls_stage_flag_wait(&c->st, st, flag_of(c, peer, c->rank, seq),
					    CXLS_FLAG_FULL);
	return wait_bell(b, st, cxls_p2p_pub(&c->view, peer, c->rank), peer, seq + 1);
}

static int post_slot_empty(const struct cxls_p2p_batch *b, CUstream st, int peer, uint32_t seq)
{
	struct cxls_comm *c = b->c;

	if (b->capturing)
		return cxls_stage_flag_set(&c->st, st, &flag_of(c, peer, c->rank, seq)->state,
					   CXLS_FLAG_EMPTY);
	return ring(b, st, cxls_p2p_ack(&c->view, peer, c->rank), seq + 1);
}

static int send_chunk(const struct cxls_p2p_batch *b, CUstream st, struct lane_cursor *l,
		      uint32_t k)
{
	struct cxls_comm *c = b->c;
	const struct cxls_stage *s = &c->st;
	char *src = NULL;
	uint32_t seq = 0;
	size_t len = next_chunk(b, l, k, &src, &seq);
	uint8_t *slot = slot_of(b, c->rank, l->peer, seq);

	if (wait_slot_empty(b, st, l->peer, seq) ||
	    cxls_stage_pool_copy(s, st, s->rec_w, cxls_stage_dev(s, slot), cxls_dptr(src), len,
				 cxls_op_slot_device(c, slot)) ||
	    cxls_stage_flush(s, st, slot, len))
		return -1;
	cxls_comm_count_io(c, len, 0);
	return post_slot_full(b, st, l->peer, seq);
}

static int recv_chunk(const struct cxls_p2p_batch *b, CUstream st, struct lane_cursor *l,
		      uint32_t k)
{
	struct cxls_comm *c = b->c;
	const struct cxls_stage *s = &c->st;
	char *dst = NULL;
	uint32_t seq = 0;
	size_t len = next_chunk(b, l, k, &dst, &seq);
	uint8_t *slot = slot_of(b, l->peer, c->rank, seq);

	if (wait_slot_full(b, st, l->peer, seq) ||
	    cxls_stage_flush(s, st, slot, len) ||
	    cxls_stage_pool_copy(s, st, s->rec_r, cxls_dptr(dst), cxls_stage_dev(s, slot), len,
				 cxls_op_slot_device(c, slot)))
		return -1;
	cxls_comm_count_io(c, 0, len);
	return post_slot_empty(b, st, l->peer, seq);
}

static uint32_t chunks_of(const struct cxls_p2p *ops, int n, int peer, int send, size_t chunk)
{
	uint32_t k = 0;

	for (int i = 0; i < n; i++)
		if (ops[i].peer == peer && ops[i].send == send)
			k += (uint32_t)((ops[i].bytes + chunk - 1) / chunk);
	return k;
}

/* A rank's sends to itself are its receives from itself, in order: local
 * copies.  Checked before anything is enqueued (pairs of equal size), done
 * with the group. */
static int self_pair(const struct cxls_p2p *ops, int n, int me, int *si, int *ri)
{
	while (*si < n && !(ops[*si].send && ops[*si].peer == me))
		(*si)++;
	while (*ri < n && !(!ops[*ri].send && ops[*ri].peer == me))
		(*ri)++;
	if (*si == n && *ri == n)
		return 0;
	if (*si == n || *ri == n || ops[*si].bytes != ops[*ri].bytes)
		return -1;
	return 1;
}

static int self_check(struct cxls_comm *c, const struct cxls_p2p *ops, int n)
{
	int si = 0, ri = 0, rc;

	while ((rc = self_pair(ops, n, c->rank, &si, &ri)) > 0) {
		si++;
		ri++;
	}
	if (rc < 0)
		cxls_comm_set_error(c, "a send to self needs a receive from self of the same size "
				       "in the same group");
	return rc;
}

static int self_copies(struct cxls_comm *c, CUstream st, const struct cxls_p2p *ops, int n)
{
	int si = 0, ri = 0;

	while (self_pair(ops, n, c->rank, &si, &ri) > 0) {
		if (cxls_stage_copy(&c->st, st, cxls_dptr(ops[ri].buf), cxls_dptr(ops[si].buf),
				    ops[si].bytes))
			return -1;
		si++;
		ri++;
	}
	return 0;
}

/* The chunks enqueued so far on the channel to (send) or from a peer. */
static _Atomic uint32_t *channel_count(struct cxls_comm *c, int send, int peer)
{
	return send ? &c->p2p_sent[peer] : &c->p2p_recvd[peer];
}

/* One cursor per peer and direction the group uses; returns how many. */
static int make_cursors(struct cxls_p2p_batch *b)
{
	struct cxls_comm *c = b->c;
	const struct cxls_p2p *ops = b->ops;
	struct lane_cursor *cur = b->cur;
	uint32_t *rounds = &b->rounds;
	int m = 0, n = b->n;

	*rounds = 0;
	/* peers in ring order from this rank, so that ranks start on
	 * different channels */
	for (int d = 1; d < c->nranks; d++) {
		int peer = (c->rank + d) % c->nranks;

		for (int send = 1; send >= 0; send--) {
			uint32_t k = chunks_of(ops, n, peer, send, chunk_of(b));

			if (!k)
				continue;
			cur[m] = (struct lane_cursor){
				.peer = peer, .send = send, .chunks = k, .ops = ops, .n = n,
				.seq0 = atomic_load(channel_count(c, send, peer)),
			};
			*rounds = k > *rounds ? k : *rounds;
			m++;
		}
	}
	return m;
}

/* A captured lane's busy mark (pool_format.h: struct cxls_flag_line). */
static int set_busy(const struct cxls_p2p_batch *b, CUstream st, const struct lane_cursor *l,
		    int on)
{
	struct cxls_comm *c = b->c;
	struct cxls_flag_line *f = l->send ? cxls_p2p_flag(&c->view, c->rank, l->peer) :
					     cxls_p2p_flag(&c->view, l->peer, c->rank);

	return cxls_stage_flag_set(&c->st, st, &f->busy[!l->send], (uint32_t)on);
}

/* Chunk k of a lane; a captured lane's busy mark goes up before its first
 * chunk and down after its last. */
static int lane_chunk(const struct cxls_p2p_batch *b, struct lane_cursor *l, uint32_t k)
{
	CUstream st = l->send ? b->pr.ws : b->pr.rs;

	if (k >= l->chunks)
		return 0;
	return (b->capturing && k == 0 && set_busy(b, st, l, 1)) ||
	       (l->send ? send_chunk(b, st, l, k) : recv_chunk(b, st, l, k)) ||
	       (b->capturing && k == l->chunks - 1 && set_busy(b, st, l, 0));
}

static int enqueue_rounds(const struct cxls_p2p_batch *b)
{
	struct lane_cursor *cur = b->cur;

	for (uint32_t k = 0; k < b->rounds; k++) {
		for (int i = 0; i < b->m; i++)
			if (cur[i].send && lane_chunk(b, &cur[i], k))
				return -1;
		for (int i = 0; i < b->m; i++)
			if (!cur[i].send && lane_chunk(b, &cur[i], k))
				return -1;
	}
	return 0;
}

/* The group's chunks join their channels' sequences (a capture's do not:
 * its slots are placed by message). */
static void advance_channels(struct cxls_p2p_batch *b)
{
	for (int i = 0; i < b->m && !b->capturing; i++)
		atomic_fetch_add(channel_count(b->c, b->cur[i].send, b->cur[i].peer),
				 b->cur[i].chunks);
}

/* Work enqueued half way cannot be matched by the peers any more: count
 * it as enqueued (so that unblocking raises the doorbells past it) and
 * fail the communicator. */
static ncclResult_t abandon(struct cxls_p2p_batch *b)
{
	struct cxls_comm *c = b->c;

	advance_channels(b);
	free(b->cur);
	b->cur = NULL;
	cxls_comm_set_error(c, "enqueueing a send/receive group failed half way: aborting");
	cxls_comm_fail(c, CXLS_ABORT_TIMEOUT, ncclUnhandledCudaError);
	cxls_comm_enq_leave(c);
	return ncclUnhandledCudaError;
}

/* The captured channels are smaller than the eager ones (layout.h): with
 * many ranks a lane may hold eager channels only.  Sends to self need
 * none. */
static int captured_room(struct cxls_comm *c, const struct cxls_p2p *ops, int n)
{
	if (c->lay.gp2p_slots)
		return 1;
	for (int i = 0; i < n; i++)
		if (ops[i].peer != c->rank) {
			cxls_comm_set_error(c, "the pool lane has no room for %d x %d captured "
					       "point-to-point channels (raise pool.size or lower "
					       "pool.max_comms)", c->nranks, c->nranks);
			return 0;
		}
	return 1;
}

ncclResult_t cxls_p2p_begin(struct cxls_p2p_batch *b, struct cxls_comm *c,
			    const struct cxls_p2p *ops, int n, CUstream stream)
{
	const struct cxls_stage *s = &c->st;
	uint64_t cap;
	ncclResult_t r;

	*b = (struct cxls_p2p_batch){ .c = c, .ops = ops, .n = n, .stream = stream };
	/* nothing of the group reaches a peer unless all of it can */
	if (self_check(c, ops, n))
		return ncclInvalidUsage;
	if ((r = cxls_comm_enq_enter(c)))
		return r;
	b->cur = calloc((size_t)2 * (size_t)c->nranks, sizeof(*b->cur));
	if (!b->cur) {
		r = ncclSystemError;
		goto fail;
	}
	cap = cxls_stage_capture(s, stream);
	b->capturing = cap != 0;
	if ((b->capturing && !captured_room(c, ops, n)) ||
	    (!b->capturing && cxls_p2p_match_post(c, ops, n))) {
		r = ncclInvalidUsage;
		goto fail;
	}
	if (b->capturing)
		atomic_store(&c->p2p_captured, 1);
	b->m = make_cursors(b);
	if (cxls_stage_pair(&c->st, cap, &b->pr)) {
		cxls_comm_set_error(c, "no work streams for another capture of this communicator");
		r = ncclSystemError;
		goto fail;
	}
	if (cxls_stage_fork(s, &b->pr, stream, b->capturing, 1))
		return abandon(b);
	return ncclSuccess;
fail:
	free(b->cur);
	b->cur = NULL;
	cxls_comm_enq_leave(c);
	return r;
}

ncclResult_t cxls_p2p_enqueue(struct cxls_p2p_batch *b)
{
	if (self_copies(b->c, b->pr.ws, b->ops, b->n) ||
	    enqueue_rounds(b))
		return abandon(b);
	return ncclSuccess;
}

ncclResult_t cxls_p2p_end(struct cxls_p2p_batch *b)
{
	struct cxls_comm *c = b->c;
	const struct cxls_stage *s = &c->st;
	uint32_t done = atomic_load(&c->p2p_ops) + 1;

	/* a replay is not counted as done: its frozen count would go below
	 * the live one */
	if (cxls_stage_join(s, &b->pr, b->stream, 1) ||
	    (!b->capturing && ring(b, b->stream, &c->view.p2p_done[c->rank], done)) ||
	    cxls_stage_mark_done(s, b->stream, b->capturing))
		return abandon(b);
	advance_channels(b);
	if (!b->capturing)
		atomic_store(&c->p2p_ops, done);
	CXLS_TRACE("p2p group of %d ops, %d channels, %u rounds", b->n, b->m, b->rounds);
	free(b->cur);
	b->cur = NULL;
	/* counted: a release's drain waits for it from now on */
	cxls_comm_enq_leave(c);
	return ncclSuccess;
}

ncclResult_t cxls_p2p_run(struct cxls_comm *c, const struct cxls_p2p *ops, int n,
			  CUstream stream)
{
	struct cxls_p2p_batch b;
	ncclResult_t r;

	if ((r = cxls_p2p_begin(&b, c, ops, n, stream)) || (r = cxls_p2p_enqueue(&b)))
		return r;
	return cxls_p2p_end(&b);
}

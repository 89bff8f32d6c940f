/* common.c - argument checks, op bracketing and flow control shared
 * by every pooled collective. */
#include "coll.h"

#include <stdint.h>
#include <stdlib.h>

#include "group.h"
#include "log.h"
#include "order.h"
#include "replay.h"
#include "stage.h"
#include "trace_coll.h"

/* The range of device-accessible memory holding dp: 0, or -1 when none. */
static int mem_range(const struct cxls_cuda *cu, CUdeviceptr dp, CUdeviceptr *start, size_t *size)
{
	unsigned int type = 0;

	if (cu->PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp) != CUDA_SUCCESS ||
	    cu->PointerGetAttribute(start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dp) !=
		    CUDA_SUCCESS ||
	    cu->PointerGetAttribute(size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dp) != CUDA_SUCCESS)
		return -1;
	return 0;
}

/* The buffer must be memory the device can reach.  It may straddle
 * ranges that touch: PyTorch's expandable segments map allocations side
 * by side in one reservation, and the driver reports each mapping as its
 * own range.  (At most MAX_RANGES of them, to bound the walk.) */
#define MAX_RANGES 4096

ncclResult_t cxls_op_check_buf(struct cxls_comm *c, const void *p, size_t bytes,
			       const char *what)
{
	CUdeviceptr dp = (CUdeviceptr)(uintptr_t)p, at = dp, start = 0;
	size_t size = 0, left = bytes;

	if (!bytes)
		return ncclSuccess;
	if (!p) {
		cxls_comm_set_error(c, "%s is NULL", what);
		return ncclInvalidArgument;
	}
	if (mem_range(c->st.cu, dp, &start, &size)) {
		cxls_comm_set_error(c, "%s %p is not device-accessible memory", what, p);
		return ncclInvalidArgument;
	}
	for (int n = 0; n < MAX_RANGES; n++) {
		if (at < start || at - start >= size)
			break; /* an answer that does not hold `at` */
		if (left <= size - (at - start))
			return ncclSuccess;
		left -= size - (at - start);
		at = start + size;
		if (mem_range(c->st.cu, at, &start, &size))
			break;
	}
	cxls_comm_set_error(c, "%s %p + %zu bytes overruns its allocation", what, p, bytes);
	return ncclInvalidArgument;
}

/* Bytes per round: the policy's chunk for large messages; smaller ones are
 * cut in at least the communicator's least rounds (down to MIN_CHUNK) so that
 * publishing and fetching still overlap.  Depends only on the message size
 * and the communicator's settings, which every rank shares (the descriptor
 * check compares the rounds), so every rank derives the same rounds. */
#define MIN_CHUNK (64u << 10)

static size_t op_chunk(const struct cxls_comm *c, size_t bytes, int captured)
{
	/* the communicator's least rounds (comm.c: min_rounds) */
	size_t chunk = (bytes / c->st.min_rounds + 4095) & ~(size_t)4095;
	size_t most = captured ? c->lay.gcoll_chunk : c->lay.chunk;

	if (chunk < MIN_CHUNK)
		chunk = MIN_CHUNK;
	return chunk < most ? chunk : most;
}

/* Context current for the enqueue, fork onto the work streams. */
ncclResult_t cxls_op_check_count(struct cxls_comm *c, const char *coll, ncclDataType_t type,
				 size_t count, int slices, size_t *bytes)
{
	size_t esize = cxls_type_size(type);

	if (!esize) {
		cxls_comm_set_error(c, "%s: invalid datatype %d", coll, (int)type);
		return ncclInvalidArgument;
	}
	if (count > SIZE_MAX / esize / (size_t)slices) {
		cxls_comm_set_error(c, "%s: count %zu overflows", coll, count);
		return ncclInvalidArgument;
	}
	*bytes = count * esize;
	return ncclSuccess;
}

ncclResult_t cxls_op_check_root(struct cxls_comm *c, const char *coll, int root)
{
	if (root >= 0 && root < c->nranks)
		return ncclSuccess;
	cxls_comm_set_error(c, "%s: root %d out of range [0,%d)", coll, root, c->nranks);
	return ncclInvalidArgument;
}

ncclResult_t cxls_op_check_alias(struct cxls_comm *c, const char *coll, const void *send,
				 size_t sbytes, size_t s_off, const void *recv, size_t rbytes,
				 size_t r_off)
{
	uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;

	if (s + s_off == r + r_off || s >= r + rbytes || r >= s + sbytes)
		return ncclSuccess;
	cxls_comm_set_error(c, "%s: sendbuff and recvbuff overlap (other than in place)", coll);
	return ncclInvalidArgument;
}

/* Broadcast and Scatter stage in the 1-to-N slots, the others in each
 * rank's own. */
static enum cxls_staging staging_of(enum cxls_op_kind kind)
{
	return kind == CXLS_OP_BROADCAST || kind == CXLS_OP_SCATTER ? CXLS_STAGING_1N :
								      CXLS_STAGING_N2N;
}

/* Gather, Scatter and Reduce, whose root moves most of the bytes, use
 * every slot; the others keep to the window (layout.c: window_slots). */
static uint32_t depth_of(const struct cxls_comm *c, enum cxls_op_kind kind)
{
	int rooted = kind == CXLS_OP_GATHER || kind == CXLS_OP_SCATTER || kind == CXLS_OP_REDUCE;

	if (staging_of(kind) == CXLS_STAGING_1N)
		return rooted ? c->lay.bcast_slots : c->lay.win_bcast_slots;
	return rooted ? c->lay.slots : c->lay.win_slots;
}

ncclResult_t cxls_coll_submit(struct cxls_comm *c, const struct cxls_coll *k)
{
	ncclResult_t r;
	int entered;

	if (cxls_group_depth())
		return cxls_group_hold(c, k);
	entered = cxls_comm_ctx_enter(c);
	r = k->enqueue(c, k);
	cxls_comm_ctx_leave(c, entered);
	return r;
}

ncclResult_t cxls_op_begin(struct cxls_op *op, struct cxls_comm *c, const struct cxls_coll *k,
			   size_t bytes, uint32_t slices)
{
	const struct cxls_call call = { k->kind, k->count, k->type, (int)k->redop, k->root };
	CUstream stream = k->stream, from;
	const struct cxls_stage *s = &c->st;
	uint64_t cap = cxls_stage_capture(s, stream);
	ncclResult_t r;

	if ((r = cxls_comm_enq_enter(c)))
		return r;
	op->c = c;
	op->scale = NULL;
	op->trace = 0;
	op->user = stream;
	op->capturing = cap != 0;
	op->root = k->root;
	op->deferred = k->held;
	if (op->capturing && !c->lay.gcoll_slots) {
		cxls_comm_set_error(c, "no staging slots for captured collectives at %d ranks in "
				       "this pool: use a bigger pool, or run this collective outside "
				       "a graph capture",
				    c->nranks);
		r = ncclInvalidUsage;
		goto fail;
	}
	if (cxls_stage_pair(&c->st, cap, &op->pr)) {
		/* nothing enqueued, and a capture moves no live sequence */
		cxls_comm_set_error(c, "no work streams for another capture of this communicator");
		r = ncclSystemError;
		goto fail;
	}
	op->ws = s->overlap || op->deferred ? op->pr.ws : stream;
	op->rs = s->overlap ? op->pr.rs : op->ws;
	op->s0 = op->capturing ? 0 : atomic_load(&c->round);
	op->g0 = (uint32_t)op->s0;
	op->bytes = bytes;
	op->chunk = op_chunk(c, bytes, op->capturing);
	op->cpr = (uint32_t)((bytes + op->chunk - 1) / op->chunk);
	op->rounds = op->cpr * slices;
	op->replay = NULL;
	op->staging = staging_of(call.kind);
	op->depth = op->capturing ? c->lay.gcoll_slots : depth_of(c, call.kind);
	op->same_staging = !op->capturing && atomic_load(&c->last_staging) == op->staging &&
			   atomic_load(&c->last_depth) == op->depth;
	/* a held op starts on the write stream, behind the user stream: a
	 * captured op's first nodes go there, before either work stream
	 * starts, so that one communicator's waits never hold another's
	 * branch of the group (group.h) */
	from = op->deferred ? op->pr.ws : stream;
	if (op->deferred && cxls_stage_follow(s, from, stream))
		return cxls_op_abandon(op);
	if (op->capturing && !(op->replay = cxls_replay_begin(c, from, &call, op->rounds))) {
		r = ncclSystemError;
		goto fail;
	}
	/* descriptors describe the live sequence, which captures do not
	 * extend (replay.h) */
	if (!op->capturing && (r = cxls_desc_post(c, &call, op->rounds, stream)))
		goto fail;
	if (op->capturing)
		atomic_store(&c->coll_captured, 1); /* before its flags are used */
	/* the read stream only when it is used (overlap): a held op without
	 * it runs on the write stream, which follow() put behind the user
	 * stream, and would leave the read stream in a capture unjoined */
	if ((op->capturing && (cxls_gcoll_busy(op, from, 1) ||
			   (s->overlap && cxls_gcoll_bells_reset(op, from)))) ||
	    cxls_stage_fork(s, &op->pr, from, op->capturing, s->overlap))
		return cxls_op_abandon(op);
	cxls_trace_op_begin(op, &call);
	return ncclSuccess;
fail:
	cxls_comm_enq_leave(c);
	return r;
}

/* Join back; then, in stream order: this rank is done reading and writing
 * every slot of the op (final publish and acknowledge, which also keep the
 * doorbells of ranks that published or consumed nothing in step with the
 * rounds), and one more collective is complete.  A captured op touches no
 * shared doorbell (only its own two, which the next one sets back to 0):
 * its flags are all back to EMPTY once its readers are done, and its
 * busy mark goes down. */
ncclResult_t cxls_op_end(struct cxls_op *op)
{
	struct cxls_comm *c = op->c;
	const struct cxls_stage *s = &c->st;
	uint32_t ops = atomic_load(&c->ops) + 1, last = op->g0 + op->rounds;
	/* a deferred op ends on the write stream; the group joins it */
	CUstream tail = op->deferred ? op->ws : op->user;

	cxls_trace_op_streams(op);
	if (cxls_stage_join(s, &op->pr, tail, s->overlap) ||
	    (op->capturing ? cxls_gcoll_busy(op, tail, 0) :
			 cxls_op_ring(op, tail, &c->view.pub[c->rank], last) ||
				 cxls_op_ring(op, tail, &c->view.ack[c->rank], last) ||
				 cxls_op_ring(op, tail, &c->view.done[c->rank], ops)) ||
	    cxls_stage_mark_done(s, tail, op->capturing) ||
	    (op->deferred && cxls_group_defer_join(c, op->user, op->pr.ws)))
		return cxls_op_abandon(op);
	if (!op->capturing) { /* a capture moves no live sequence (replay.h) */
		atomic_store(&c->round, op->s0 + op->rounds);
		atomic_store(&c->ops, ops);
		atomic_store(&c->last_staging, op->staging);
		atomic_store(&c->last_depth, op->depth);
		atomic_fetch_add(&c->view.ranks[c->rank].ops_enqueued, 1);
		cxls_trace_op_end(op);
	}
	/* counted: a release's drain waits for it from now on */
	cxls_comm_enq_leave(c);
	return ncclSuccess;
}

/* (A captured op abandoned after its busy mark went up leaves the mark
 * up in any replay of that capture: the communicator failed anyway, and
 * its destroy then keeps the record until the process exits.) */
ncclResult_t cxls_op_abandon(struct cxls_op *op)
{
	cxls_comm_set_error(op->c, "enqueueing a collective failed half way: aborting");
	cxls_comm_fail(op->c, CXLS_ABORT_TIMEOUT, ncclUnhandledCudaError);
	cxls_comm_enq_leave(op->c);
	return ncclUnhandledCudaError;
}

int cxls_op_wait_consumed(struct cxls_op *op, uint32_t k, uint32_t depth, int consumer)
{
	struct cxls_comm *c = op->c;
	uint32_t target;

	if (op->capturing)
		return 0; /* cxls_op_put waits for the slot's own flags */
	/* Within the first `depth` rounds only the previous ops' data can be in
	 * the slots, placed by any rank: once, at round 0, wait until every rank
	 * acknowledged it (acknowledgements count every round a rank is done
	 * with, cxls_op_end's final one included).  After an op in the other
	 * staging slots, which lie over the same blocks in another order, or
	 * in the same ones at another depth (coll.h), that is all of it.
	 * After one in the same slots at the same depth, the slot of round g
	 * held round g - depth: an op of fewer rounds than the depth waits
	 * only for the rounds its slots held, so its first chunks go out
	 * while the peers still read the previous op's last ones and the
	 * ranks do not meet at every op boundary.  One of as many rounds or
	 * more waits at each of its first `depth` rounds for the round its
	 * slot held, for the same reason: (the other kind of slots were all
	 * read before the previous op of this kind published anything, by
	 * this same rule at its own start). */
	if (op->same_staging && op->rounds >= depth && k < depth) {
		target = op->g0 + k - depth + 1;
		consumer = -1;
	} else if (k == 0) {
		target = op->g0;
		if (op->same_staging && op->rounds < depth)
			target -= depth - op->rounds;
		consumer = -1;
	} else if (k >= depth) {
		target = op->g0 + k - depth + 1;
	} else {
		return 0;
	}
	if (consumer >= 0)
		return consumer == c->rank ? 0 :
			cxls_op_wait_bell(op, op->ws, &c->view.ack[consumer], consumer, target);
	for (int j = 0; j < c->nranks; j++)
		if (j != c->rank && cxls_op_wait_bell(op, op->ws, &c->view.ack[j], j, target))
			return -1;
	return 0;
}

/* A captured op rings and waits on doorbells only between its own two
 * streams (allreduce.c: a reduced chunk is published once our own fold of
 * it is done): on the rank's own ones that count from 0 in each op
 * (gcoll.h), or on one stream not at all.  Returns the doorbell to use,
 * or NULL when there is nothing to do; *bad when b is a peer's. */
static struct cxls_bell *captured_bell(struct cxls_op *op, struct cxls_bell *b, int *bad)
{
	struct cxls_bell *own;

	*bad = 0;
	if (!op->c->st.overlap)
		return NULL; /* one stream orders it */
	if (!(own = cxls_gcoll_own_bell(op, b))) {
		CXLS_WARN("comm %p: a captured collective waits on a peer's doorbell",
			  (void *)op->c);
		*bad = 1;
	}
	return own;
}

int cxls_op_ring(struct cxls_op *op, CUstream st, struct cxls_bell *b, uint32_t v)
{
	int bad;

	if (op->capturing) {
		b = captured_bell(op, b, &bad);
		return bad ? -1 : b ? cxls_stage_ring(&op->c->st, st, b, v) : 0;
	}
	if (cxls_stage_ring(&op->c->st, st, b, v))
		return -1;
	cxls_order_queued(op->c, b, v);
	return 0;
}

int cxls_op_wait_bell(struct cxls_op *op, CUstream st, struct cxls_bell *b, int owner, uint32_t v)
{
	int bad;

	if (op->capturing) {
		b = captured_bell(op, b, &bad);
		return bad ? -1 : b ? cxls_stage_wait(&op->c->st, st, b, v) : 0;
	}
	if (owner != op->c->rank)
		cxls_order_await(op->c, owner, b, v);
	return cxls_stage_wait(&op->c->st, st, b, v);
}

int cxls_op_put(struct cxls_op *op, uint32_t k, uint8_t *slot, const char *src, size_t len,
		int reader)
{
	struct cxls_comm *c = op->c;
	const struct cxls_stage *s = &c->st;
	int scaled = op->scale && op->scale->kind == CXLS_RED_PREMULSUM;

	if (op->capturing && cxls_gcoll_wait_free(op, slot))
		return -1;
	if (scaled ? cxls_op_scale_put(op, slot, src, len) :
		     cxls_stage_pool_copy(s, op->ws, s->rec_w, cxls_stage_dev(s, slot), cxls_dptr(src),
					  len, cxls_op_slot_device(c, slot)))
		return -1;
	if (cxls_stage_flush(s, op->ws, slot, len))
		return -1;
	cxls_comm_count_io(c, len, 0);
	if (op->capturing && cxls_gcoll_post(op, slot, reader))
		return -1;
	return cxls_op_ring(op, op->ws, &c->view.pub[c->rank], op->g0 + k + 1);
}

int cxls_op_await(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, size_t len)
{
	struct cxls_comm *c = op->c;
	const struct cxls_stage *s = &c->st;

	if ((op->capturing ? cxls_gcoll_wait_full(op, peer, slot) :
			 cxls_op_wait_bell(op, op->rs, &c->view.pub[peer], peer, op->g0 + k + 1)) ||
	    cxls_stage_flush(s, op->rs, slot, len))
		return -1;
	cxls_comm_count_io(c, 0, len);
	return 0;
}

int cxls_op_get(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, char *dst, size_t len)
{
	const struct cxls_stage *s = &op->c->st;

	if (cxls_op_await(op, k, peer, slot, len) ||
	    cxls_stage_pool_copy(s, op->rs, s->rec_r, cxls_dptr(dst), cxls_stage_dev(s, slot), len,
				 cxls_op_slot_device(op->c, slot)))
		return -1;
	return cxls_op_read_done(op, peer, slot);
}

int cxls_op_read_done(struct cxls_op *op, int peer, uint8_t *slot)
{
	return op->capturing ? cxls_gcoll_release(op, peer, slot) : 0;
}

int cxls_op_publish_all(struct cxls_op *op, const char *send, int consumer)
{
	for (uint32_t k = 0; k < op->rounds; k++)
		if (cxls_op_wait_consumed(op, k, op->depth, consumer) ||
		    cxls_op_put(op, k, cxls_op_slot(op, op->c->rank, k), send + cxls_op_off(op, k),
				cxls_op_len(op, k), consumer))
			return -1;
	return 0;
}

int cxls_op_pair_put(struct cxls_op *op, uint32_t t, const char *src, size_t len)
{
	uint32_t depth = op->depth;
	int consumer = t >= depth ? cxls_op_pair(op, t - depth, 1) : -1;

	if (cxls_op_wait_consumed(op, t, depth, consumer))
		return -1;
	return cxls_op_put(op, t, cxls_op_slot(op, op->c->rank, t), src, len,
			   cxls_op_pair(op, t, 1));
}

int cxls_op_get_all(struct cxls_op *op, uint32_t k, char *recv)
{
	struct cxls_comm *c = op->c;

	for (int i = 1; i < c->nranks; i++) {
		int peer = (c->rank + i) % c->nranks;

		if (cxls_op_get(op, k, peer, cxls_op_slot(op, peer, k),
				recv + (size_t)peer * op->bytes + cxls_op_off(op, k),
				cxls_op_len(op, k)))
			return -1;
	}
	return cxls_op_ack(op, k);
}

int cxls_op_ack(struct cxls_op *op, uint32_t k)
{
	struct cxls_comm *c = op->c;

	/* (captured: each read gave its slot back, cxls_op_read_done; this
	 * only tells our write stream how far the reads are) */
	return cxls_op_ring(op, op->rs, &c->view.ack[c->rank], op->g0 + k + 1);
}

uint32_t cxls_op_lead(const struct cxls_op *op, uint32_t p)
{
	if (p < op->depth)
		return op->depth - 1;
	return op->depth > 1 ? 1 : 0;
}

int cxls_op_local_copy(struct cxls_op *op, char *dst, const char *src, size_t len)
{
	return cxls_stage_copy(&op->c->st, op->rs, cxls_dptr(dst), cxls_dptr(src), len);
}

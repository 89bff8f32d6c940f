/* coll.h - pooled collectives (copy in, doorbell, copy out).
 *
 * Each call validates its arguments like NCCL, enqueues everything on the
 * caller's stream (fanned out to the communicator's write and read streams
 * when overlap is on) and returns without waiting for peers.
 */
#ifndef CXLSHIM_CORE_COLL_H
#define CXLSHIM_CORE_COLL_H

#include <nccl.h>

#include "comm.h"
#include "arith.h"
#include "gcoll.h"
#include "op_desc.h"


ncclResult_t cxls_allgather(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t sendcount, ncclDataType_t type, CUstream stream);
ncclResult_t cxls_broadcast(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t count, ncclDataType_t type, int root, CUstream stream);
ncclResult_t cxls_gather(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			 size_t count, ncclDataType_t type, int root, CUstream stream);
ncclResult_t cxls_scatter(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			  size_t count, ncclDataType_t type, int root, CUstream stream);
ncclResult_t cxls_reduce(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			 size_t count, ncclDataType_t type, ncclRedOp_t redop, int root,
			 CUstream stream);
ncclResult_t cxls_reducescatter(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
				size_t recvcount, ncclDataType_t type, ncclRedOp_t redop,
				CUstream stream);
ncclResult_t cxls_allreduce(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t count, ncclDataType_t type, ncclRedOp_t redop, CUstream stream);
ncclResult_t cxls_alltoall(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			   size_t count, ncclDataType_t type, CUstream stream);

/* One collective call whose arguments passed its checks, and what
 * enqueues it.  A call inside a group is held as this until the group's
 * outermost end (group.h), where NCCL enqueues a group's operations: what
 * the caller puts on its streams before that end runs first, and a
 * simulated end (ncclGroupSimulateEnd) runs nothing.  The reduction
 * operator is resolved at the call, as NCCL does: a PreMulSum operator
 * may be destroyed as soon as the call that names it returns. */
struct cxls_coll {
	ncclResult_t (*enqueue)(struct cxls_comm *c, const struct cxls_coll *k);
	enum cxls_op_kind kind; /* the descriptor's (AllReduce's scheme chosen
				 * at the call) */
	const void *send;
	void *recv;
	size_t count;           /* as the call gave it */
	size_t bytes;           /* of one rank-slice, from the checks */
	ncclDataType_t type;
	ncclRedOp_t redop;      /* as called, for the descriptor; 0 without */
	struct cxls_redop rop;  /* ... and resolved */
	int root;               /* -1 without a root */
	CUstream stream;
	int held;               /* enqueued at a group's end */
};

/* Enqueues the call now, or holds it until the end of the open group
 * (on a stream being captured too: the graph records it at the end). */
ncclResult_t cxls_coll_submit(struct cxls_comm *c, const struct cxls_coll *k);

/* Which staging slots an op writes: each rank's own (N-to-N) or the
 * shared 1-to-N ones, which lie over the same blocks (layout.c). */
enum cxls_staging {
	CXLS_STAGING_NONE = 0,
	CXLS_STAGING_N2N,
	CXLS_STAGING_1N,
};

/* Shared by the collectives (common.c). */
struct cxls_op {
	struct cxls_comm *c;
	CUstream user, ws, rs;  /* ws == rs == user without overlap */
	struct cxls_pair pr;    /* the work streams ws and rs come from */
	uint64_t s0;            /* first round of this op (comm.h: round) */
	uint32_t g0;            /* its low 32 bits, as doorbells count */
	uint32_t rounds;        /* all rounds of the op */
	enum cxls_staging staging;
	/* staging slots it cycles through: round g uses slot g % depth, g
	 * unwrapped (layout.h: all of them, or those of the window) */
	uint32_t depth;
	/* the previous op staged in the same slots at the same depth: round g
	 * reuses the slot of round g - depth, so this op need not wait for
	 * all of it */
	int same_staging;
	uint32_t cpr;           /* rounds (chunks) per slice */
	size_t bytes;           /* bytes per rank-slice */
	size_t chunk;           /* bytes per round, <= the layout's block */
	/* the user stream is being captured: the op stages in slots of its
	 * own that hand off with flags, not doorbells, and its two streams
	 * (overlap) wait on each other on doorbells of the rank's own
	 * (gcoll.h); replay holds its start node's record (replay.h) */
	int capturing;
	struct cxls_replay *replay;
	int root;               /* the call's, -1 without */
	/* enqueued at a group's end: the work runs on the communicator's own
	 * streams and the user stream waits for it after the group's last
	 * operation (group.h), so that the group's communicators progress
	 * together whatever order each rank called them in */
	int deferred;
	/* PreMulSum: every rank scales its own input as it publishes it (the
	 * scalar may differ per rank), so readers only add */
	const struct cxls_redop *scale;
	ncclDataType_t type;
	uint64_t trace;         /* trace record handle (core/trace), 0: none */
};

ncclResult_t cxls_op_check_buf(struct cxls_comm *c, const void *p, size_t bytes,
			       const char *what);
/* Valid datatype, and count x size x slices fits in size_t; *bytes is the
 * bytes of one slice (count elements). */
ncclResult_t cxls_op_check_count(struct cxls_comm *c, const char *coll, ncclDataType_t type,
				 size_t count, int slices, size_t *bytes);
ncclResult_t cxls_op_check_root(struct cxls_comm *c, const char *coll, int root);
/* send (sbytes) and recv (rbytes) either do not overlap or are in place:
 * send + s_off == recv + r_off, NCCL's one aliasing.  Any other overlap
 * would have bytes overwritten before they are read, in some order of the
 * streams: ncclInvalidArgument. */
ncclResult_t cxls_op_check_alias(struct cxls_comm *c, const char *coll, const void *send,
				 size_t sbytes, size_t s_off, const void *recv, size_t rbytes,
				 size_t r_off);
/* `bytes` per slice; the op runs `slices` x ceil(bytes / chunk) rounds.
 * Posts the call's descriptor first (kind, count, type, operator and root
 * as k holds them): ncclInvalidUsage when a peer called something else as
 * this operation. */
ncclResult_t cxls_op_begin(struct cxls_op *op, struct cxls_comm *c, const struct cxls_coll *k,
			   size_t bytes, uint32_t slices);
ncclResult_t cxls_op_end(struct cxls_op *op);
/* Enqueueing failed half way: the ranks can no longer agree on rounds. */
ncclResult_t cxls_op_abandon(struct cxls_op *op);
/* Flow control, on the write stream: before writing round k into a slot
 * reused every `depth` rounds, wait until the rank that consumed what the
 * slot held (`consumer`, or every other rank when -1) acknowledged it.
 * Round 0 waits for every rank to be done with the previous op.  (A
 * captured op waits in cxls_op_put instead, on the slot's flags.) */
int cxls_op_wait_consumed(struct cxls_op *op, uint32_t k, uint32_t depth, int consumer);
/* A doorbell ring and a wait for owner's doorbell, on stream st, in an
 * order the GPU cannot deadlock on when owner is a rank of this process
 * on the same context (order.h).  A captured op may only name its own
 * publish and acknowledge doorbells: it rings and waits on its own
 * stand-ins for them (gcoll.h), or with one stream not at all. */
int cxls_op_ring(struct cxls_op *op, CUstream st, struct cxls_bell *b, uint32_t v);
int cxls_op_wait_bell(struct cxls_op *op, CUstream st, struct cxls_bell *b, int owner, uint32_t v);
/* Round k's data: write stream copies src into the slot and rings our
 * publish doorbell; the read stream waits for peer's, copies out and
 * (cxls_op_ack) acknowledges the round.  `reader`: the rank that reads
 * this content of the slot, -1 when every peer does (a captured op marks
 * the slot FULL for them, gcoll.h).  `peer` of a get is the slot's
 * owner (the root for the 1-to-N slots). */
int cxls_op_put(struct cxls_op *op, uint32_t k, uint8_t *slot, const char *src, size_t len,
		int reader);
int cxls_op_get(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, char *dst, size_t len);
/* Its first half, for a reader other than a copy (a fold): on the read
 * stream, wait for peer's round k and make the slot's len bytes visible;
 * and after the read, cxls_op_read_done (a captured op gives the slot
 * back to its owner there; an eager one acknowledges whole rounds). */
int cxls_op_await(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, size_t len);
int cxls_op_read_done(struct cxls_op *op, int peer, uint8_t *slot);
int cxls_op_ack(struct cxls_op *op, uint32_t k);
/* Reductions (fold.c: a host function on the CPU under the emulation,
 * where device memory is host memory; a GPU kernel otherwise).  fold_init: dst = src (x scalar),
 * on the read stream; fold: wait for peer's round k, then dst = dst op
 * slot, and when `last` finish it (integer avg). */
int cxls_op_fold_init(struct cxls_op *op, void *dst, const void *src, size_t n,
		      ncclDataType_t t, const struct cxls_redop *rop, int last);
int cxls_op_fold(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, void *dst, size_t n,
		 ncclDataType_t t, const struct cxls_redop *rop, int last);
/* The same, with peer's slot as the first contribution: dst = slot. */
int cxls_op_fold_first(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, void *dst,
		       size_t n, ncclDataType_t t, const struct cxls_redop *rop, int last);
/* The same with this rank's own input first, for a chunk's first fold:
 * dst = own (x scalar) op slot (own may be dst: in place); own NULL: a
 * later fold, as cxls_op_fold.  Under the emulation one pass over dst
 * where a copy of own and then a fold make two; cxls_op_own_begin, over
 * the whole of dst and own, must come first (on a GPU it makes the copy). */
int cxls_op_own_begin(struct cxls_op *op, void *dst, const void *own, size_t n,
		      ncclDataType_t t, const struct cxls_redop *rop);
int cxls_op_fold_own(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, void *dst,
		     const void *own, size_t n, ncclDataType_t t, const struct cxls_redop *rop,
		     int last);
/* PreMulSum's put: slot = src x scalar, on the write stream. */
int cxls_op_scale_put(struct cxls_op *op, uint8_t *slot, const char *src, size_t len);
/* The pool reduces where the CPU can reach device memory or the GPU
 * kernels are loaded. */
ncclResult_t cxls_op_check_reducible(struct cxls_comm *c, const char *coll);

/* The rank's own part of an out-of-place op, copied device to device
 * (none when dst == src, in place).  Callers issue it right after
 * cxls_op_begin, first on the read stream: there it runs before any
 * doorbell wait.  On a GPU shared by several processes a copy queued
 * behind doorbell waits came about 2 ms (a time slice?) late every time:
 * issued per chunk behind them, it made out-of-place AllGather 3 to 12
 * times slower than in place on an H100 (bench/README "Own slices first"). */
int cxls_op_local_copy(struct cxls_op *op, char *dst, const char *src, size_t len);

/* How far round p may be published ahead of the round being consumed
 * (AllReduce, ReduceScatter, AlltoAll).  Each consumed round waits for a
 * peer's publish; when each rank publishes only after its previous use, as
 * a round-by-round loop does, every wait is a hand-off to a peer that,
 * with more ranks than cores, is often not running, and a wake-up on a
 * shared CPU costs hundreds of microseconds.  The first `depth` rounds
 * reuse slots of the previous op only, so they go out at once, and a rank
 * then waits only for peers that have merely started the op (the whole of
 * an op that fits the slots).  A later round reuses the slot of round
 * p - depth of this op, whose reader must have used it: one round ahead,
 * the ranks may drift depth - 1 rounds apart before that wait blocks;
 * further ahead it blocks at each small drift, and measured slower on
 * large messages (bench/README.md, branch coll8).  At most depth - 1: the
 * reader's use of round p - depth must be enqueued before our publish of
 * round p, or the ranks would deadlock. */
uint32_t cxls_op_lead(const struct cxls_op *op, uint32_t p);

/* Pairwise rounds (ReduceScatter, AllReduce): round t pairs each
 * rank with the one at distance 1 + t % (N-1), ahead (sign 1, the rank we
 * write for) or behind (sign -1, the rank we read from). */
static inline int cxls_op_pair(const struct cxls_op *op, uint32_t t, int sign)
{
	int n = op->c->nranks, o = 1 + (int)(t % (uint32_t)(n - 1));

	return (op->c->rank + sign * o + n) % n;
}

/* Pairwise round t: once the reader of what our slot held `depth` rounds
 * ago is done with it, publish `len` bytes of src for the rank ahead. */
int cxls_op_pair_put(struct cxls_op *op, uint32_t t, const char *src, size_t len);
/* Round k of a gather: chunk k of every peer's slice into recv (slices of
 * op->bytes, peers in the order rank+1, rank+2, ...), then acknowledge. */
int cxls_op_get_all(struct cxls_op *op, uint32_t k, char *recv);

/* Publishes every chunk of `send` into this rank's N-to-N slots, read by
 * `consumer` (Gather and Reduce: the root). */
int cxls_op_publish_all(struct cxls_op *op, const char *send, int consumer);

/* A pointer the driver takes as device address (unified addressing). */
static inline CUdeviceptr cxls_dptr(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

/* The emulated device a staging slot lies on (for the bandwidth model). */
static inline uint32_t cxls_op_slot_device(const struct cxls_comm *c, const uint8_t *slot)
{
	return cxls_layout_device(&c->lay, (uint64_t)(slot - c->pool->base));
}

/* Staging slots of round k: a rank's own (N-to-N) or the shared 1-to-N. */
static inline uint8_t *cxls_op_slot(const struct cxls_op *op, int rank, uint32_t k)
{
	const struct cxls_comm *c = op->c;

	if (op->capturing)
		return cxls_gcoll_slot(op, rank, k);
	return c->pool->base +
	       cxls_layout_n2n(&c->lay, (uint32_t)rank, (uint32_t)((op->s0 + k) % op->depth));
}

/* (A captured op has no shared slots: the root stages in its own.) */
static inline uint8_t *cxls_op_slot_1n(const struct cxls_op *op, uint32_t k)
{
	const struct cxls_comm *c = op->c;

	if (op->capturing)
		return cxls_gcoll_slot(op, op->root, k);
	return c->pool->base + cxls_layout_1n(&c->lay, (uint32_t)((op->s0 + k) % op->depth));
}
static inline size_t cxls_op_off(const struct cxls_op *op, uint32_t k)
{
	return (size_t)k * op->chunk;
}

static inline size_t cxls_op_len(const struct cxls_op *op, uint32_t k)
{
	size_t left = op->bytes - cxls_op_off(op, k);

	return left < op->chunk ? left : op->chunk;
}

#endif

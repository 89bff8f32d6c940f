/* p2p.h - ncclSend/ncclRecv through the pool.
 *
 * Every ordered pair of ranks has a channel: p2p_slots staging slots in
 * the pool (layout.h) and two doorbells counting the chunks the sender
 * published and the receiver consumed (pool_format.h).  The n-th send from
 * A to B matches the n-th receive on B from A, as in NCCL.
 *
 * Sends and receives captured in a CUDA graph use slots of their own,
 * each with a flag that goes EMPTY -> FULL -> EMPTY (flag.h) instead of
 * counting, so that the values the graph froze hold at every replay
 * without moving any doorbell: a replay meets nobody, and a captured send
 * completes into free slots before its receive is replayed, as NCCL's
 * does into its buffers (both ranks send, then receive).  Every captured
 * message starts at the channel's first slot, so the captured sends and
 * receives of a channel match in the order they run, however the two
 * ranks put them in graphs; the two kinds never mix: an eager send
 * matches an eager receive.
 *
 * A group of sends and receives on one communicator runs in lockstep
 * rounds: round k moves chunk k of every channel the group uses, sends
 * before receives.  An eager send in round k waits only for what its peer
 * consumed in round k - p2p_slots, so whatever order the calls were made
 * in, and however large the messages are, no two ranks wait for each
 * other (a captured message waits for the one before it on the channel
 * to be received from its first slot on: p2p.c next_chunk()).
 */
#ifndef CXLSHIM_CORE_P2P_H
#define CXLSHIM_CORE_P2P_H

#include <nccl.h>

#include "comm.h"

struct lane_cursor;

struct cxls_p2p {
	int send;               /* 1: ncclSend, 0: ncclRecv */
	int peer;
	char *buf;
	size_t bytes;
};

/* Checks one call's arguments and fills *p. */
ncclResult_t cxls_p2p_check(struct cxls_comm *c, int send, const void *buf, size_t count,
			    ncclDataType_t type, int peer, struct cxls_p2p *p);

/* A group's sends and receives on one communicator.  Sends run on the
 * communicator's write stream and receives on its read stream, forked from
 * the caller's stream: a rank's sends never wait behind its receives or
 * the other way round, whatever its peers' grouping.  A group that spans
 * several communicators begins all of them before enqueueing any and ends
 * them after (group.c), so that they progress together. */
struct cxls_p2p_batch {
	struct cxls_comm *c;
	const struct cxls_p2p *ops;
	int n;
	CUstream stream;
	struct cxls_pair pr;    /* the work streams (stage.h: cxls_stage_pair) */
	int capturing;
	struct lane_cursor *cur; /* one per peer and direction */
	int m;
	uint32_t rounds;
};

/* Checks the group (ncclInvalidUsage: unmatched sends to self, nothing
 * enqueued) and forks the work streams from `stream`. */
ncclResult_t cxls_p2p_begin(struct cxls_p2p_batch *b, struct cxls_comm *c,
			    const struct cxls_p2p *ops, int n, CUstream stream);
/* The copies and doorbells, in call order per peer and direction. */
ncclResult_t cxls_p2p_enqueue(struct cxls_p2p_batch *b);
/* Joins back into `stream` and marks the group done.  After a failure of
 * enqueue or end the communicator has failed and b holds nothing. */
ncclResult_t cxls_p2p_end(struct cxls_p2p_batch *b);
/* All three, for one group on one communicator. */
ncclResult_t cxls_p2p_run(struct cxls_comm *c, const struct cxls_p2p *ops, int n,
			  CUstream stream);

#endif

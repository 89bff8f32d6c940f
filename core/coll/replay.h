/* replay.h - pooled operations captured in a CUDA graph, replayed any
 * number of times.
 *
 * A captured operation's doorbell values are frozen in the graph (memops
 * carry constants), while the doorbells themselves keep counting.  So each
 * replay of a captured operation runs between two host nodes that move
 * this rank's doorbells back to the values they had at capture and, at the
 * end, forward again to where the live sequence stands:
 *
 *   start: barrier (every rank finished what came before: nobody still
 *          waits on our doorbells), save them, set them to the captured
 *          base, barrier (nobody sees a value from before the reset);
 *   end:   barrier (every rank finished the operation), restore them,
 *          barrier (nobody sees a replay value above the live sequence).
 *
 * The barriers block, so they do not run in host nodes, which CUDA may
 * run one at a time per process: the start and end are gates (gate.h),
 * whose jobs run on the communicator's gate thread while the stream waits
 * on a word in memory.  So a captured group that put several
 * communicators' operations in parallel branches (group.h), or a process
 * that drives several ranks of one communicator, replays without one
 * barrier waiting behind another.  A barrier gives up after the op
 * timeout and fails the communicator.
 *
 * A capture does not advance the live sequence (the host's round and op
 * counters), so eager operations enqueued after a capture, before
 * or between its replays, find the doorbells where they expect them.  The
 * barriers count up forever on a doorbell per rank (pool_format.h:
 * graph[]), and every rank runs the same collective replays in the same
 * order, as NCCL requires, so their counts agree.  The first barrier of a
 * start also compares what each rank replays (op_desc.h): a rank
 * replaying another call fails the communicator with ncclInvalidUsage on
 * every rank, and the doorbells of a failed communicator stay raised, so
 * the replay completes instead of hanging.
 *
 * Captured sends and receives need none of this: their slots hand off
 * with flags whose values do not count up (p2p.h).
 */
#ifndef CXLSHIM_CORE_REPLAY_H
#define CXLSHIM_CORE_REPLAY_H

#include "comm.h"
#include "op_desc.h"

struct cxls_replay;

/* At capture, before the operation's first stream work: snapshots the
 * doorbell bases and enqueues the start node; `call` and `rounds` are what
 * every rank must replay there.  NULL on failure. */
struct cxls_replay *cxls_replay_begin(struct cxls_comm *c, CUstream st,
				      const struct cxls_call *call, uint32_t rounds);
/* After the operation's final doorbells: enqueues the end node. */
int cxls_replay_end(struct cxls_replay *r, CUstream st);
/* Zeroed memory that a host node of the captured operation uses at every
 * replay: it lives as long as the replay record (NULL when out of
 * memory). */
void *cxls_replay_hold(struct cxls_replay *r, size_t size);
/* Stops the gate thread (at abort, whose graphs may still replay: their
 * jobs then run inline, and pass at once on the failed communicator). */
void cxls_replay_stop(struct cxls_comm *c);
/* Stops the gate thread and frees a communicator's replay records (at
 * destroy). */
void cxls_replay_free_all(struct cxls_comm *c);

#endif

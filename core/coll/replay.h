/* replay.h - pooled collectives captured in a CUDA graph, replayed any
 * number of times.
 *
 * A graph freezes the values of its stream memory operations, while the
 * communicator's doorbells keep counting.  So a captured collective does
 * not use them: it stages in slots of its own whose flags go EMPTY ->
 * FULL -> EMPTY (gcoll.h), which hold at every replay, and a replay
 * meets no one on the host.  Its graph holds one host node, at the
 * start, which runs at every replay and does not block:
 *
 *   - it numbers this rank's collective replays and posts the captured
 *     call under that number (op_desc.h).  Every rank replays the same
 *     collectives in the same order, as NCCL requires, so a rank that
 *     replays another call (count, type, operator, root) fails the
 *     communicator with ncclInvalidUsage on every rank; the flags of a
 *     failed communicator let every wait pass, so the replay completes
 *     instead of hanging;
 *   - the count tells the watchdog that captured work progresses: a
 *     rank busy in a captured collective (its busy mark, gcoll.h)
 *     whose replays stop starting for the op timeout fails the
 *     communicator (a peer that replays something else entirely, or
 *     nothing).
 *
 * Captured sends and receives have no host node (p2p.h).
 */
#ifndef CXLSHIM_CORE_REPLAY_H
#define CXLSHIM_CORE_REPLAY_H

#include "comm.h"
#include "op_desc.h"

struct cxls_replay;

/* At capture, before the collective's first stream work: enqueues its
 * start node on st; `call` and `rounds` are what every rank must replay
 * there.  NULL on failure. */
struct cxls_replay *cxls_replay_begin(struct cxls_comm *c, CUstream st,
				      const struct cxls_call *call, uint32_t rounds);
/* Zeroed memory that a host node of the captured collective uses at
 * every replay: it lives as long as the replay record (NULL when out of
 * memory). */
void *cxls_replay_hold(struct cxls_replay *r, size_t size);
/* Frees a communicator's replay records (at destroy: graphs that replay
 * its collectives die with it). */
void cxls_replay_free_all(struct cxls_comm *c);

#endif

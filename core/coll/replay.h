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
 * The barriers run in host nodes.  CUDA may serialise host functions of
 * one process, so a process that drives several ranks of one communicator
 * and replays graphs of them can deadlock on a real GPU (the emulation runs
 * one host worker per stream); one rank per process, as PyTorch runs, is
 * fine.  A barrier gives up after the op timeout and fails the
 * communicator.
 *
 * A capture does not advance the live sequence (the host's round, op and
 * channel counters), so eager operations enqueued after a capture, before
 * or between its replays, find the doorbells where they expect them.  The
 * barriers count up forever on a doorbell per rank (pool_format.h:
 * graph[]), and every rank runs the same replays in the same order, as
 * NCCL requires, so their counts agree.  Captured operations are not
 * compared across ranks (op_desc.h): the live sequence numbers them.
 */
#ifndef CXLSHIM_CORE_REPLAY_H
#define CXLSHIM_CORE_REPLAY_H

#include "comm.h"

struct cxls_replay;

/* At capture, before the operation's first stream work: snapshots the
 * doorbell bases and enqueues the start node.  NULL on failure. */
struct cxls_replay *cxls_replay_begin(struct cxls_comm *c, CUstream st);
/* After the operation's final doorbells: enqueues the end node. */
int cxls_replay_end(struct cxls_replay *r, CUstream st);
/* Frees a communicator's replay records (at destroy). */
void cxls_replay_free_all(struct cxls_comm *c);

#endif

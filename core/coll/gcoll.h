/* gcoll.h - how a captured collective hands its staging slots over.
 *
 * Eager collectives count rounds on doorbells, which a CUDA graph would
 * freeze at their capture-time values.  A captured collective stages in
 * slots of its own instead (layout.h: gcoll_, GCOLL_SLOTS per rank), and
 * every (slot, reader) pair has a flag (pool_format.h: gcoll_flag) that
 * goes EMPTY -> FULL -> EMPTY, so each replay leaves them as it found
 * them:
 *
 *   writer, before writing its slot:  wait until every peer's flag of
 *                                     the slot is EMPTY (all its readers
 *                                     are done with what it held, in this
 *                                     collective or an earlier one);
 *          after writing it:          set FULL for the ranks that read
 *                                     this content (all peers, or one);
 *   reader, before reading a slot:    wait until its flag is FULL;
 *          after reading it:          set it EMPTY.
 *
 * Only the slot's owner ever writes it, so a rank's own stream order
 * keeps its writes and FULL marks in sequence.  Each captured collective
 * starts at its rank's first slot, and slot j of the owner takes round
 * k with k % slots == j: every rank derives the same slots from the
 * rounds, and collectives match in the order they run, however the ranks
 * put them in graphs.
 *
 * With overlap, a captured collective runs on the rank's write and read
 * streams, as an eager one does: on a GPU that several processes share,
 * a wait on the only stream of a context holds all its work until the
 * peers' contexts had their turn (an H200 ran AllReduce -G seven times
 * slower on one stream).  The algorithms' waits between the two streams
 * (a reduced chunk goes out once our own fold of it is done) then use two
 * doorbells of the rank's own (pool_format.h: gcoll_bell), published and
 * consumed rounds of this op: its first node sets both back to 0 before
 * either stream starts, so every replay counts from 0 again.  Without
 * overlap it runs on one stream, which orders those waits already.
 *
 * The rank's busy mark (its own line, owner == reader) is up while its
 * stream is inside a captured collective: the watchdog fails the
 * communicator when a peer dies meanwhile, or when no replay starts for
 * the op timeout while it stays up (replay.h), and a destroy waits while
 * it is up (comm.c).
 */
#ifndef CXLSHIM_CORE_GCOLL_H
#define CXLSHIM_CORE_GCOLL_H

#include <stdint.h>

#include "cuda_drv.h"

struct cxls_bell;
struct cxls_op;

/* The owner's captured staging slot of round k. */
uint8_t *cxls_gcoll_slot(const struct cxls_op *op, int owner, uint32_t k);
/* Writer side, on the op's stream: before writing our `slot`, wait until
 * every peer emptied it; after, mark it FULL for `reader` (-1: every
 * peer). */
int cxls_gcoll_wait_free(const struct cxls_op *op, const uint8_t *slot);
int cxls_gcoll_post(const struct cxls_op *op, const uint8_t *slot, int reader);
/* Reader side: wait for owner's `slot` to be FULL for us, and give it
 * back once read.  Our own slot has no flag for us: where an algorithm
 * reads it back, our write of it is ordered by the stream, or with two
 * streams by its waits on our own doorbells (cxls_gcoll_own_bell).  -1
 * also for a slot that is not one of owner's (a bug: refused). */
int cxls_gcoll_wait_full(const struct cxls_op *op, int owner, const uint8_t *slot);
int cxls_gcoll_release(const struct cxls_op *op, int owner, const uint8_t *slot);
/* The rank's busy mark, up (1) or down (0), on stream st (where the op
 * forks and joins). */
int cxls_gcoll_busy(const struct cxls_op *op, CUstream st, int on);
/* The rank's own doorbell that stands for its live `b` (publish or
 * acknowledge) in a captured op; NULL for any other. */
struct cxls_bell *cxls_gcoll_own_bell(const struct cxls_op *op, const struct cxls_bell *b);
/* Both back to 0 on stream st, before the op's streams fork from it. */
int cxls_gcoll_bells_reset(const struct cxls_op *op, CUstream st);

#endif

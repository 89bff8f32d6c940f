/* order.h - submission order among the ranks that one thread's group
 * drives on one CUDA context.
 *
 * A GPU may run the work of a context's streams in the order it was
 * submitted, whatever stream it came from (its hardware queues are fewer
 * than the streams; cuStreamWaitValue32: "improper use of this API may
 * deadlock the application ... the scheduler [may] serialize them in an
 * improper order").  A doorbell wait submitted before the ring that ends
 * it then holds that ring up for good.  Between processes this cannot
 * happen (each has its own context), nor between a rank's own streams
 * (each rank submits its rings before its own waits on them).  It can
 * between ranks of one communicator that one thread drives on one context
 * (ncclCommInitRank for each in a group, a split's children): a group's
 * end then enqueues each communicator of the group on a thread of its own
 * (group.c; crew.h keeps those threads between groups), and before submitting a wait on a doorbell of such a rank a
 * thread waits until that rank's thread submitted the ring.  Each doorbell
 * line carries that value (struct cxls_bell: queued).
 *
 * Ranks that threads of their own drive outside groups are not ordered:
 * holding an application thread inside an NCCL call until another calls
 * could deadlock a program that meets its threads in between.
 */
#ifndef CXLSHIM_CORE_COLL_ORDER_H
#define CXLSHIM_CORE_COLL_ORDER_H

#include <stdint.h>

#include "comm.h"

/* Two communicators of a group's end: 0 unless they are ranks of one
 * communicator.  On one context, returns 2: each then waits for the
 * other's rings before submitting its waits on them, until
 * cxls_order_clear, and their parts need threads of their own.  On two,
 * 1: large parts need threads too (a driver blocks a submit while the
 * stream's queue is full, and a thread blocked on rank 0's queue would
 * never submit what rank 1 owes it). */
int cxls_order_pair(struct cxls_comm *c, struct cxls_comm *d);
void cxls_order_clear(struct cxls_comm *c);
/* c's part of the group's end (or of one of its phases: collectives,
 * then sends and receives) is over: its peers stop waiting for rings it
 * did not submit, until cxls_order_begin(c) starts its next phase. */
void cxls_order_done(struct cxls_comm *c);
void cxls_order_begin(struct cxls_comm *c);
/* c submitted a ring of b to v (not in a capture: captured work rings no
 * shared doorbell, gcoll.h and p2p.h). */
void cxls_order_queued(struct cxls_comm *c, struct cxls_bell *b, uint32_t v);
/* Before c submits a wait for owner's doorbell b to reach v: returns once
 * owner submitted that ring if c waits for owner's rings (or b reached v,
 * c was aborted, owner's part is over, or the operation timeout passed:
 * then a warning, and owner is not waited for again). */
void cxls_order_await(struct cxls_comm *c, int owner, struct cxls_bell *b, uint32_t v);

#endif

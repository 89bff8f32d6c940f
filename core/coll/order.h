/* order.h - submission order among the ranks of one process on one CUDA
 * context.
 *
 * A GPU may run the work of a context's streams in the order it was
 * submitted, whatever stream it came from (its hardware queues are fewer
 * than the streams; cuStreamWaitValue32: "improper use of this API may
 * deadlock the application ... the scheduler [may] serialize them in an
 * improper order").  A rank's doorbell wait submitted before the write
 * that ends it then holds up that write for good.  Between processes this
 * cannot happen (each has its own context), nor between a rank's own
 * streams (each rank submits its writes before its own waits on them).
 * It can between two ranks that one process drives on one context
 * (ncclCommInitAll on one GPU, one thread per rank, split children): so
 * before submitting a wait on such a peer's doorbell, the rank waits on
 * the host until the peer has submitted the write it waits for.  Each
 * doorbell line carries that value (struct cxls_bell: queued).  The
 * ranks' submissions must then come from different threads: a group's
 * end gives each such communicator its own (group.c); a rank whose
 * handle the calling thread made is not waited for (that thread, outside
 * a group, has yet to make the call).
 */
#ifndef CXLSHIM_CORE_COLL_ORDER_H
#define CXLSHIM_CORE_COLL_ORDER_H

#include <stdint.h>

#include "comm.h"

/* Finds the ranks of c's communicator that this process drives on c's
 * context (c->order_local); returns how many. */
int cxls_order_scan(struct cxls_comm *c);
/* c submitted a ring of b to v (not in a capture: a graph's rings are
 * submitted when it is launched, replay.h). */
void cxls_order_queued(struct cxls_comm *c, struct cxls_bell *b, uint32_t v);
/* Before c submits a wait for owner's doorbell b to reach v: returns once
 * owner submitted that ring when owner is such a rank (or b reached v,
 * or c was aborted, or the operation timeout passed: then a warning). */
void cxls_order_await(struct cxls_comm *c, int owner, struct cxls_bell *b, uint32_t v);

#endif

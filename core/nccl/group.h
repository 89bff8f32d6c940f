/* group.h - ncclGroupStart/ncclGroupEnd for pool communicators.
 *
 * Groups nest per thread; work is held until the outermost end.  Pool
 * collectives never block the calling thread, so they are enqueued when
 * called, in call order, but on their communicator's own streams: the
 * user stream waits for them only at the end, so one communicator's
 * collective never waits behind another's (ranks may call the group's
 * communicators in any order, as with NCCL).  They start behind a gate,
 * a doorbell of this rank that the end rings on a user stream once every
 * user stream of the communicator's calls reached it: as with NCCL, which
 * enqueues a group's operations at its end, what the caller put on those
 * streams between a call and the end runs first.  (A simulated end opens
 * the gates too: the collectives are enqueued already, and every rank
 * must run them to stay in step.)  What waits for the end is:
 *   - sends and receives, run per communicator as one lockstep group
 *     (p2p.h), communicators in key order so that every rank enqueues them
 *     in the same order whatever order the calls came in;
 *   - blocking communicator inits made inside the group (several ranks of
 *     one thread, as ncclCommInitAll and PyTorch do): they rendezvous in
 *     the background and the end waits for all of them;
 *   - splits (comm_split.h), for the same reason: each published its part
 *     when called, the end exchanges them and inits the children as
 *     above.
 */
#ifndef CXLSHIM_CORE_GROUP_H
#define CXLSHIM_CORE_GROUP_H

#include <nccl.h>

#include "p2p.h"

void cxls_group_start(void);
/* ncclInvalidUsage when no group is open on this thread. */
ncclResult_t cxls_group_end(void);
/* Ends the group without running what it holds (ncclGroupSimulateEnd). */
ncclResult_t cxls_group_discard(void);
int cxls_group_depth(void);
/* Returns r; inside a group an error also fails the group, as NCCL's
 * ncclGroupError: the outermost end drops the sends and receives and
 * returns the last such error (see cxls_group_end). */
ncclResult_t cxls_group_check(ncclResult_t r);

/* Inside a group: queue; outside: a group of one, run now. */
ncclResult_t cxls_group_p2p(struct cxls_comm *c, const struct cxls_p2p *p, CUstream stream);
/* A blocking init made inside a group, now running nonblocking: the
 * outermost end waits for it and makes it blocking again. */
ncclResult_t cxls_group_add_init(struct cxls_comm *c);
/* A split whose part is published: the outermost end finishes it
 * (cxls_comm_split_end). */
ncclResult_t cxls_group_add_split(struct cxls_comm *c, uint32_t n, int color, int key,
				  ncclComm_t *newcomm, int blocking);
/* A collective enqueued inside a group on c's streams: at the end, `user`
 * waits for c's last operation.  0, or -1 when out of memory. */
int cxls_group_defer_join(struct cxls_comm *c, CUstream user);

#endif

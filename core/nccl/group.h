/* group.h - ncclGroupStart/ncclGroupEnd for pool communicators.
 *
 * Groups nest per thread; work is held until the outermost end, where
 * NCCL enqueues a group's operations, so what the caller put on its
 * streams between a call and the end runs first, and a simulated end
 * (ncclGroupSimulateEnd) runs nothing.  Each call is checked when made
 * (its errors fail the group, cxls_group_check).  At the end:
 *   - splits (comm_split.h), then blocking communicator inits made inside
 *     the group (several ranks of one thread, as ncclCommInitAll and
 *     PyTorch do): they rendezvous in the background and the end waits
 *     for all of them, so the group's operations may use them;
 *   - the collectives, in call order, each on its communicator's own
 *     streams, the user streams joining them afterwards: one
 *     communicator's collective never waits behind another's, so ranks
 *     may call the group's communicators in any order, as with NCCL.
 *     Captured calls too: their graph then holds a branch per
 *     communicator, and its replays cannot deadlock either (they meet
 *     no one on the host: gcoll.h);
 *   - sends and receives, run per communicator as one lockstep group
 *     (p2p.h), communicators in key order so that every rank enqueues them
 *     in the same order whatever order the calls came in.
 */
#ifndef CXLSHIM_CORE_GROUP_H
#define CXLSHIM_CORE_GROUP_H

#include <nccl.h>

#include "p2p.h"

struct cxls_coll;

void cxls_group_start(void);
/* ncclInvalidUsage when no group is open on this thread. */
ncclResult_t cxls_group_end(void);
/* Ends the group without running what it holds (ncclGroupSimulateEnd);
 * at the outermost end, adds the pool's estimate of it to *us (estimate.h;
 * us may be NULL). */
ncclResult_t cxls_group_discard(double *us);
int cxls_group_depth(void);
/* Returns r; inside a group an error also fails the group, as NCCL's
 * ncclGroupError: the outermost end drops the sends and receives and
 * returns the last such error (see cxls_group_end). */
ncclResult_t cxls_group_check(ncclResult_t r);

/* A checked collective (coll.h), enqueued at the outermost end; as NCCL,
 * ncclInvalidUsage when c's other calls in the group were on streams
 * captured by another graph, or not captured where this one is. */
ncclResult_t cxls_group_hold(struct cxls_comm *c, const struct cxls_coll *k);
/* Inside a group: queue; outside: a group of one, run now. */
ncclResult_t cxls_group_p2p(struct cxls_comm *c, const struct cxls_p2p *p, CUstream stream);
/* A blocking init made inside a group, now running nonblocking: the
 * outermost end waits for it and makes it blocking again. */
ncclResult_t cxls_group_add_init(struct cxls_comm *c);
/* A split whose part is published: the outermost end finishes it
 * (cxls_comm_split_end). */
ncclResult_t cxls_group_add_split(struct cxls_comm *c, uint32_t n, int color, int key,
				  ncclComm_t *newcomm, int blocking);
/* A held collective, enqueued at the end on c's streams: `user` waits for
 * c's last operation after the group's, on `tail`.  0, or -1 when out of
 * memory. */
int cxls_group_defer_join(struct cxls_comm *c, CUstream user, CUstream tail);

#endif

/* p2p.h - ncclSend/ncclRecv through the pool.
 *
 * Every ordered pair of ranks has a channel: p2p_slots staging slots in
 * the pool (layout.h) and two doorbells counting the chunks the sender
 * published and the receiver consumed (pool_format.h).  The n-th send from
 * A to B matches the n-th receive on B from A, as in NCCL.
 *
 * A group of sends and receives on one communicator runs in lockstep
 * rounds: round k moves chunk k of every channel the group uses, sends
 * before receives.  A send in round k waits only for what its peer
 * consumed in round k - p2p_slots, so whatever order the calls were made
 * in, and however large the messages are, no two ranks wait for each
 * other.
 */
#ifndef CXLSHIM_CORE_P2P_H
#define CXLSHIM_CORE_P2P_H

#include <nccl.h>

#include "comm.h"

struct cxls_p2p {
	int send;               /* 1: ncclSend, 0: ncclRecv */
	int peer;
	char *buf;
	size_t bytes;
};

/* Checks one call's arguments and fills *p. */
ncclResult_t cxls_p2p_check(struct cxls_comm *c, int send, const void *buf, size_t count,
			    ncclDataType_t type, int peer, struct cxls_p2p *p);

/* Enqueues the group's sends and receives on `stream`, in call order per
 * peer and direction. */
ncclResult_t cxls_p2p_run(struct cxls_comm *c, const struct cxls_p2p *ops, int n,
			  CUstream stream);

#endif

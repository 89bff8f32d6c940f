/* op_desc.h - what each rank enqueued, and the check that every rank of a
 * communicator called the same collective with the same arguments.
 *
 * A rank posts the descriptor of its n-th operation in the pool when it
 * enqueues it (pool_format.h: struct cxls_op_desc).  The caller that comes
 * second compares at once and gets ncclInvalidUsage; the one that came
 * first learns it from its watchdog within a tick.  Either way the
 * communicator fails on every rank with ncclInvalidUsage, and its
 * doorbells are raised so that no stream waits for rounds that a
 * mismatched peer will never publish.
 */
#ifndef CXLSHIM_CORE_OP_DESC_H
#define CXLSHIM_CORE_OP_DESC_H

#include <cuda.h>
#include <nccl.h>
#include <stddef.h>

#include "pool_format.h"

struct cxls_comm;

/* The arguments every rank must agree on. */
struct cxls_call {
	enum cxls_op_kind kind;
	size_t count;
	ncclDataType_t type;
	int redop;               /* ncclRedOp_t, or 0 without a reduction */
	int root;                /* -1 without a root */
};

const char *cxls_op_kind_name(enum cxls_op_kind kind);

/* Posts this rank's descriptor for its next operation (number ops + 1,
 * `rounds` doorbell rounds, enqueued on `stream`) and compares it with the
 * peers that already posted theirs.  ncclInvalidUsage (communicator
 * failed) on a mismatch. */
ncclResult_t cxls_desc_post(struct cxls_comm *c, const struct cxls_call *call, uint32_t rounds,
			    CUstream stream);

/* Replays of captured collectives (replay.h), which the live sequence
 * does not number: at the start of its n-th collective replay a rank
 * posts the call that collective was captured from under number n and
 * compares it with the peers' n-th, as they appear (the watchdog goes
 * on comparing: cxls_desc_verify).  A mismatch fails the communicator
 * with ncclInvalidUsage.  Does not block (a host node calls it). */
void cxls_desc_post_replay(struct cxls_comm *c, const struct cxls_call *call, uint32_t rounds,
			   uint32_t n);

/* The queue an op on `stream` of c's device joins (pool_format.h). */
uint64_t cxls_queue_id(const struct cxls_comm *c, CUstream stream);

/* Watchdog: compares the descriptors of operations this rank enqueued,
 * and of collectives it replayed, with the peers' as they appear; fails
 * the communicator on a mismatch. */
void cxls_desc_verify(struct cxls_comm *c);

#endif

/* coll.h - pooled collectives (copy in, doorbell, copy out).
 *
 * Each call validates its arguments like NCCL, enqueues everything on the
 * caller's stream (fanned out to the communicator's write and read streams
 * when overlap is on) and returns without waiting for peers.
 */
#ifndef CXLSHIM_CORE_COLL_H
#define CXLSHIM_CORE_COLL_H

#include <nccl.h>

#include "comm.h"

/* Bytes per element of a datatype, 0 if invalid. */
size_t cxls_type_size(ncclDataType_t t);

ncclResult_t cxls_allgather(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t sendcount, ncclDataType_t type, CUstream stream);
ncclResult_t cxls_broadcast(struct cxls_comm *c, const void *sendbuff, void *recvbuff,
			    size_t count, ncclDataType_t type, int root, CUstream stream);

/* Shared by the collectives (coll_common.c). */
struct cxls_op {
	struct cxls_comm *c;
	CUstream user, ws, rs;  /* ws == rs == user without overlap */
	uint32_t g0;            /* first round of this op */
	uint32_t rounds;
	size_t bytes;           /* bytes per rank-slice */
	size_t chunk;           /* bytes per round, <= the layout's block */
	int capturing;          /* the user stream is being captured */
};

ncclResult_t cxls_op_check_buf(struct cxls_comm *c, const void *p, size_t bytes,
			       const char *what);
ncclResult_t cxls_op_begin(struct cxls_op *op, struct cxls_comm *c, CUstream stream,
			   size_t bytes);
ncclResult_t cxls_op_end(struct cxls_op *op);
/* Enqueueing failed half way: the ranks can no longer agree on rounds. */
ncclResult_t cxls_op_abandon(struct cxls_op *op);
/* Flow control: before writing round g into a slot reused every `depth`
 * rounds, wait until every other rank has consumed what the slot held. */
int cxls_op_wait_consumed(struct cxls_op *op, CUstream st, uint32_t k, uint32_t depth,
			  int skip_rank);
static inline size_t cxls_op_off(const struct cxls_op *op, uint32_t k)
{
	return (size_t)k * op->chunk;
}

static inline size_t cxls_op_len(const struct cxls_op *op, uint32_t k)
{
	size_t left = op->bytes - cxls_op_off(op, k);

	return left < op->chunk ? left : op->chunk;
}

#endif

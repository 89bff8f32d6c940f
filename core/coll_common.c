/* coll_common.c - argument checks, op bracketing and flow control shared
 * by every pooled collective. */
#include "coll.h"

#include <stdint.h>

#include "log.h"
#include "stage.h"

size_t cxls_type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2:
		return 1;
	case ncclFloat16: case ncclBfloat16:
		return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32:
		return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64:
		return 8;
	default:
		return 0;
	}
}

/* The buffer must be memory the device can reach, in one allocation. */
ncclResult_t cxls_op_check_buf(struct cxls_comm *c, const void *p, size_t bytes,
			       const char *what)
{
	const struct cxls_cuda *cu = c->st.cu;
	CUdeviceptr start = 0;
	size_t size = 0;
	unsigned int type = 0;
	CUdeviceptr dp = (CUdeviceptr)(uintptr_t)p;

	if (!bytes)
		return ncclSuccess;
	if (!p) {
		cxls_comm_set_error(c, "%s is NULL", what);
		return ncclInvalidArgument;
	}
	if (cu->PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp) != CUDA_SUCCESS ||
	    cu->PointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dp) !=
		    CUDA_SUCCESS ||
	    cu->PointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dp) != CUDA_SUCCESS) {
		cxls_comm_set_error(c, "%s %p is not device-accessible memory", what, p);
		return ncclInvalidArgument;
	}
	if (dp - start > size || bytes > size - (dp - start)) {
		cxls_comm_set_error(c, "%s %p + %zu bytes overruns its allocation", what, p, bytes);
		return ncclInvalidArgument;
	}
	return ncclSuccess;
}

/* Bytes per round: the policy's chunk for large messages; smaller ones are
 * cut in at least MIN_ROUNDS pieces (down to MIN_CHUNK) so that publishing
 * and fetching still overlap.  Depends only on the message size, so every
 * rank derives the same rounds. */
#define MIN_ROUNDS 8
#define MIN_CHUNK (64u << 10)

static size_t op_chunk(const struct cxls_comm *c, size_t bytes)
{
	size_t chunk = (bytes / MIN_ROUNDS + 4095) & ~(size_t)4095;

	if (chunk < MIN_CHUNK)
		chunk = MIN_CHUNK;
	return chunk < c->lay.chunk ? chunk : c->lay.chunk;
}

/* Context current for the enqueue, fork onto the work streams. */
ncclResult_t cxls_op_begin(struct cxls_op *op, struct cxls_comm *c, CUstream stream,
			   size_t bytes)
{
	const struct cxls_stage *s = &c->st;
	CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;

	op->c = c;
	op->user = stream;
	op->ws = s->overlap ? s->ws : stream;
	op->rs = s->overlap ? s->rs : stream;
	op->g0 = atomic_load(&c->round);
	op->bytes = bytes;
	op->chunk = op_chunk(c, bytes);
	op->rounds = (uint32_t)((bytes + op->chunk - 1) / op->chunk);
	op->capturing = s->cu->StreamIsCapturing(stream, &cap) == CUDA_SUCCESS &&
			cap == CU_STREAM_CAPTURE_STATUS_ACTIVE;
	if (op->capturing)
		CXLS_INFO("pooled collective captured in a graph: it replays with the same "
			  "doorbell values, so replay the graph once per capture");
	if (cxls_stage_fork(s, stream, op->capturing))
		return cxls_op_abandon(op);
	return ncclSuccess;
}

/* Join back, count the op as done in stream order, advance the rounds. */
ncclResult_t cxls_op_end(struct cxls_op *op)
{
	struct cxls_comm *c = op->c;
	uint32_t ops = atomic_load(&c->ops) + 1;

	if (cxls_stage_join(&c->st, op->user, op->capturing) ||
	    cxls_stage_ring(&c->st, op->user, &c->view.done[c->rank], ops))
		return cxls_op_abandon(op);
	atomic_store(&c->round, op->g0 + op->rounds);
	atomic_store(&c->ops, ops);
	atomic_fetch_add(&c->view.ranks[c->rank].ops_enqueued, 1);
	return ncclSuccess;
}

ncclResult_t cxls_op_abandon(struct cxls_op *op)
{
	cxls_comm_set_error(op->c, "enqueueing a collective failed half way: aborting");
	cxls_comm_fail(op->c, CXLS_ABORT_TIMEOUT, ncclUnhandledCudaError);
	return ncclUnhandledCudaError;
}

int cxls_op_wait_consumed(struct cxls_op *op, CUstream st, uint32_t k, uint32_t depth,
			  int skip_rank)
{
	struct cxls_comm *c = op->c;
	uint32_t target;

	/* Within the first `depth` rounds only the previous ops' data can be in
	 * the slots (their layout may differ): wait for all of it once. */
	if (k == 0)
		target = op->g0;
	else if (k >= depth)
		target = op->g0 + k - depth + 1;
	else
		return 0;
	for (int j = 0; j < c->nranks; j++)
		if (j != skip_rank && cxls_stage_wait(&c->st, st, &c->view.ack[j], target))
			return -1;
	return 0;
}

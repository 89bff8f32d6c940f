/* trace_coll.c - trace records of pooled collectives.
 *
 * Stream stamps are host functions whose one-pointer payload is the
 * record handle and the stage (no allocation, nothing to free when a
 * stream is torn down).  They are skipped while a stream is being
 * captured: a graph replays them with a record that is long gone.
 */
#include "trace_coll.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "coll.h"
#include "log.h"
#include "proc_id.h"
#include "trace.h"

#define STAGE_SHIFT 56

uint64_t cxls_trace_comm_id(const struct cxls_comm *c)
{
	return cxls_hash64(c->key, sizeof(c->key));
}

static uint32_t thread_id(void)
{
	static _Thread_local uint32_t tid;

	if (!tid)
		tid = (uint32_t)syscall(SYS_gettid);
	return tid;
}

static void stamp_fn(void *data)
{
	uint64_t x = (uint64_t)(uintptr_t)data;

	cxls_trace_stamp(x & ((1ull << STAGE_SHIFT) - 1), (enum cxls_trace_stage)(x >> STAGE_SHIFT));
}

/* A failed launch only loses a time stamp: never fail the op for it. */
static void stream_stamp(struct cxls_op *op, CUstream st, enum cxls_trace_stage stage)
{
	const struct cxls_cuda *cu = op->c->st.cu;
	uint64_t x = op->trace | ((uint64_t)stage << STAGE_SHIFT);

	if (cu->LaunchHostFunc(st, stamp_fn, (void *)(uintptr_t)x) != CUDA_SUCCESS)
		CXLS_TRACE("trace: cannot stamp stage %d of op %llu", (int)stage,
			   (unsigned long long)op->trace);
}

static int stream_stamps(const struct cxls_op *op)
{
	return op->trace && !op->capturing && cxls_trace_level() >= CXLS_TRACE_STAGES &&
	       op->trace < (1ull << STAGE_SHIFT);
}

void cxls_trace_op_begin(struct cxls_op *op, const struct cxls_call *call)
{
	struct cxls_comm *c = op->c;
	struct cxls_trace_rec r = {
		.comm = cxls_trace_comm_id(c),
		.seq = atomic_load(&c->ops) + 1,
		.kind = (uint32_t)call->kind,
		.rank = (uint32_t)c->rank,
		.nranks = (uint32_t)c->nranks,
		.root = call->root,
		.type = (uint32_t)call->type,
		.redop = (uint32_t)call->redop,
		.slot = c->view.slot,
		.count = call->count,
		.bytes = op->bytes,
		.rounds = op->rounds,
		.flags = op->capturing ? CXLS_TRACE_F_CAPTURED : 0,
		.tid = thread_id(),
	};

	op->trace = cxls_trace_begin(&r);
	if (stream_stamps(op))
		stream_stamp(op, op->ws, CXLS_TS_START);
}

void cxls_trace_op_streams(struct cxls_op *op)
{
	if (!stream_stamps(op))
		return;
	stream_stamp(op, op->ws, CXLS_TS_PUBLISHED);
	stream_stamp(op, op->rs, CXLS_TS_FETCHED);
}

void cxls_trace_op_end(struct cxls_op *op)
{
	cxls_trace_stamp(op->trace, CXLS_TS_ENQUEUED);
	if (stream_stamps(op))
		stream_stamp(op, op->user, CXLS_TS_DONE);
}

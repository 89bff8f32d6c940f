/* fold.c - reductions on the stream: a peer's slot folded into a result,
 * in stream order after the wait for that peer's doorbell.
 *
 * Where the CPU can reach device memory (the emulation) a fold is a host
 * function running arith.c's loops; on a GPU it is a kernel of
 * kernels/fold.cu (fold_gpu.c).
 */
#include "coll.h"

#include <stdlib.h>

#include "fold_gpu.h"
#include "replay.h"
#include "stage.h"

/* What a host function needs to run one fold.  An eager op's is freed by
 * the function; a captured op's runs again at every replay of the graph,
 * so it lives with the op's replay record instead. */
struct fold {
	void *dst;
	const void *own; /* dst = own (x scalar) op src; NULL: init or step */
	const void *src;
	size_t n;
	ncclDataType_t type;
	struct cxls_redop op;
	int init, last;
	int held;        /* owned by a replay record: not freed here */
};

static void run_fold(void *arg)
{
	struct fold *f = arg;

	if (f->own)
		cxls_reduce_first(f->dst, f->own, f->src, f->n, f->type, &f->op);
	else if (f->init)
		cxls_reduce_init(f->dst, f->src, f->n, f->type, &f->op);
	else
		cxls_reduce_step(f->dst, f->src, f->n, f->type, &f->op);
	if (f->last)
		cxls_reduce_finish(f->dst, f->n, f->type, &f->op);
	if (!f->held)
		free(f);
}

static int enqueue_host(struct cxls_op *op, CUstream st, const struct fold *proto)
{
	const struct cxls_stage *s = &op->c->st;
	struct fold *f = op->replay ? cxls_replay_hold(op->replay, sizeof(*f)) :
				      malloc(sizeof(*f));

	if (!f)
		return -1;
	*f = *proto;
	f->held = op->replay != NULL;
	if (s->cu->LaunchHostFunc(st, run_fold, f) != CUDA_SUCCESS) {
		if (!f->held)
			free(f);
		return -1;
	}
	return 0;
}

/* One fold on stream st: dst = src (x scalar) when init, else dst = dst op
 * src.  dst_dev and src_dev are the device addresses (a pool slot's differs
 * from its host address). */
static int enqueue_fold(struct cxls_op *op, CUstream st, void *dst, CUdeviceptr dst_dev,
			const void *src, CUdeviceptr src_dev, size_t n, ncclDataType_t t,
			const struct cxls_redop *rop, int init, int last)
{
	const struct cxls_stage *s = &op->c->st;

	if (!n)
		return 0;
	if (!cxls_cuda_emulated())
		return cxls_fold_gpu(s->cu, st, dst_dev, src_dev, n, t, rop, init, last);
	return enqueue_host(op, st,
			    &(struct fold){ .dst = dst, .src = src, .n = n, .type = t, .op = *rop,
					    .init = init, .last = last });
}

/* How a peer's slot is folded in: the peer scaled its input when it
 * published it, so PreMulSum adds what is there. */
static struct cxls_redop slot_op(const struct cxls_redop *rop)
{
	struct cxls_redop add = *rop;

	if (add.kind == CXLS_RED_PREMULSUM)
		add.kind = CXLS_RED_SUM;
	return add;
}

int cxls_op_scale_put(struct cxls_op *op, uint8_t *slot, const char *src, size_t len)
{
	const struct cxls_stage *s = &op->c->st;

	return enqueue_fold(op, op->ws, slot, cxls_stage_dev(s, slot), src, cxls_dptr(src),
			    len / cxls_type_size(op->type), op->type, op->scale, 1, 0);
}

int cxls_op_fold_init(struct cxls_op *op, void *dst, const void *src, size_t n,
		      ncclDataType_t t, const struct cxls_redop *rop, int last)
{
	return enqueue_fold(op, op->rs, dst, cxls_dptr(dst), src, cxls_dptr(src), n, t, rop, 1,
			    last);
}

static int fold_slot(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, void *dst, size_t n,
		     ncclDataType_t t, const struct cxls_redop *rop, int init, int last)
{
	struct cxls_redop add = slot_op(rop);

	if (cxls_op_await(op, k, peer, slot, n * cxls_type_size(t)) ||
	    enqueue_fold(op, op->rs, dst, cxls_dptr(dst), slot, cxls_stage_dev(&op->c->st, slot), n,
			 t, &add, init, last))
		return -1;
	return cxls_op_read_done(op, peer, slot);
}

int cxls_op_fold(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, void *dst, size_t n,
		 ncclDataType_t t, const struct cxls_redop *rop, int last)
{
	return fold_slot(op, k, peer, slot, dst, n, t, rop, 0, last);
}

int cxls_op_fold_first(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, void *dst,
		       size_t n, ncclDataType_t t, const struct cxls_redop *rop, int last)
{
	return fold_slot(op, k, peer, slot, dst, n, t, rop, 1, last);
}

/* The GPU keeps the whole copy ahead of the op, as measured on the H200:
 * one copy (or scaling kernel) on its engines, where one per chunk would
 * be R operations, each of which may wait for its turn when processes
 * share the GPU (our unverified reading of AllGather's 3x slower out of
 * place there, which copies once per chunk: bench/README "On a real GPU"). */
int cxls_op_own_begin(struct cxls_op *op, void *dst, const void *own, size_t n,
		      ncclDataType_t t, const struct cxls_redop *rop)
{
	if (cxls_cuda_emulated())
		return 0; /* each chunk's first fold reads own */
	return cxls_op_fold_init(op, dst, own, n, t, rop, 0);
}

/* On the CPU one loop: reading own and the slot and writing dst once is
 * what an out-of-place fold must cost (a copy of own first made it a pass
 * more).  On the GPU dst already holds own (cxls_op_own_begin). */
int cxls_op_fold_own(struct cxls_op *op, uint32_t k, int peer, uint8_t *slot, void *dst,
		     const void *own, size_t n, ncclDataType_t t, const struct cxls_redop *rop,
		     int last)
{
	if (!own || !cxls_cuda_emulated())
		return fold_slot(op, k, peer, slot, dst, n, t, rop, 0, last);
	if (cxls_op_await(op, k, peer, slot, n * cxls_type_size(t)) ||
	    (n && enqueue_host(op, op->rs,
			       &(struct fold){ .dst = dst, .own = own, .src = slot, .n = n,
					       .type = t, .op = *rop, .last = last })))
		return -1;
	return cxls_op_read_done(op, peer, slot);
}

ncclResult_t cxls_op_check_reducible(struct cxls_comm *c, const char *coll)
{
	char why[192];

	if (cxls_cuda_emulated() || !cxls_fold_gpu_ready(c->st.cu, why, sizeof(why)))
		return ncclSuccess;
	cxls_comm_set_error(c, "%s on the pool needs the GPU reduction kernels: %s; route it to "
			       "NCCL with nccl.collectives", coll, why);
	return ncclInvalidUsage;
}

/* stream.c - streams: FIFO queues drained by one worker thread each.
 *
 * Enqueueing never runs the operation on the caller's thread, so a caller
 * that forgets to synchronise sees stale data in tests instead of getting
 * lucky. The worker is started on first use (never from a constructor) and is
 * detached; it holds a reference on the stream and drops it after the stream
 * was retired and its queue drained, so cuStreamDestroy returns at once while
 * queued work still completes, as in CUDA.
 *
 * Before an op joins the queue it may get barrier ops ahead of it (the
 * legacy stream's implicit barrier, barrier.c), and a "late" op is held at
 * the head of the queue until something orders after it (late.c).
 */
#include "emu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PRIORITY_LEAST		0
#define PRIORITY_GREATEST	(-5)

static void stream_release(struct emu_obj *obj)
{
	struct CUstream_st *s = (struct CUstream_st *)obj;

	/* First, under the list lock: a legacy submit may be looking at s. */
	if (emu_stream_blocking(s))
		emu_barrier_unlink(s);

	pthread_cond_destroy(&s->done);
	pthread_cond_destroy(&s->work);
	pthread_mutex_destroy(&s->lock);
	emu_deps_free(&s->deps);
	free(s->info_nodes);
	free(s->info_edges);
	/* The default stream does not pin its context: the context owns it. */
	if (!s->is_null)
		emu_ctx_put(s->ctx);
	free(s);
}

/* Timed waits (a late op's deadline, the exit flush) use CLOCK_MONOTONIC. */
static void init_cond(pthread_cond_t *cond)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
}

CUresult emu_stream_new(struct CUctx_st *ctx, unsigned int flags,
			int priority, bool is_null, struct CUstream_st **out)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));
	CUresult res;

	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	emu_obj_init(&s->obj, EMU_KIND_STREAM, stream_release);
	s->ctx = ctx;
	s->flags = flags;
	s->priority = priority;
	s->is_null = is_null;
	s->hwq = emu_hwq_assign(ctx->hwqs);
	pthread_mutex_init(&s->lock, NULL);
	init_cond(&s->work);
	init_cond(&s->done);
	atomic_init(&s->capturing, false);
	s->stats = emu_stats_new();
	if (is_null) {
		*out = s;
		return CUDA_SUCCESS;
	}
	emu_obj_get(&ctx->obj);
	if (emu_stream_blocking(s))
		emu_barrier_link(s);
	res = emu_handle_publish(&s->obj);
	if (res != CUDA_SUCCESS) {
		emu_obj_put(&s->obj);
		return res;
	}
	*out = s;
	return CUDA_SUCCESS;
}

/* Called with s->lock held; returns with it held, the queue not empty or
 * the stream retired.  With stats: how long the worker slept, and whether
 * the op that woke it waits on a hand-off. */
static bool wait_for_work(struct CUstream_st *s)
{
	uint64_t t0 = 0;

	if (s->head || s->retired)
		return false;
	if (s->stats) {
		/* sampled as the worker goes idle: it may not run again */
		emu_stats_sched(s->stats);
		t0 = emu_now_ns();
	}
	while (!s->head && !s->retired)
		pthread_cond_wait(&s->work, &s->lock);
	if (s->stats)
		s->stats->idle_ns += emu_now_ns() - t0;
	return true;
}

static void run_counted(struct CUstream_st *s, struct emu_qop *q, bool woken)
{
	struct emu_stats *st = s->stats;
	uint64_t t0;

	if (!st) {
		emu_op_run(&q->op);
		return;
	}
	t0 = emu_now_ns();
	if (woken) {
		st->handoffs++;
		st->handoff_ns += t0 - q->t_submit;
	}
	emu_op_run(&q->op);
	emu_stats_op(st, &q->op, t0, emu_now_ns());
}

/* Called with s->lock held, after an op completed.  A synchronizer sleeps
 * until the ops submitted before it called are done: waking it after every
 * op only to let it sleep again cost a context switch per op, taken from the
 * threads doing the work. */
static void wake_synchronizers(struct CUstream_st *s)
{
	if (s->sync_waiters && s->completed >= s->sync_at) {
		s->sync_at = UINT64_MAX;	/* the woken re-arm it */
		pthread_cond_broadcast(&s->done);
	}
}

/* Called with s->lock held, q the head of the queue and late: sleeps until
 * something orders after q (an op behind it, a kick) or its time is up. */
static void hold_late(struct CUstream_st *s, struct emu_qop *q)
{
	struct timespec due = emu_ns_to_ts(q->t_late +
				       (uint64_t)emu_config.late_us * 1000u);

	while (!q->next && q->seq > s->kick_seq && !s->retired)
		if (pthread_cond_timedwait(&s->work, &s->lock, &due) ==
		    ETIMEDOUT)
			break;
	/* the hand-off statistics count from here, not from the submit */
	if (s->stats)
		q->t_submit = emu_now_ns();
}

static void *worker_main(void *arg)
{
	struct CUstream_st *s = arg;
	struct emu_qop *q;
	bool woken, late;

	emu_stats_self = s->stats;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		woken = wait_for_work(s);
		q = s->head;
		if (!q)
			break;	/* retired and drained */
		late = q->late;
		if (late)
			hold_late(s, q);	/* only the worker pops: q stays */
		s->head = q->next;
		if (!s->head)
			s->tail = NULL;
		if (q->ticket) {
			/* its queue's turn: the stream lock is not held
			 * while waiting for it, submitters need it */
			pthread_mutex_unlock(&s->lock);
			emu_hwq_enter(s->hwq, q->ticket, &q->op);
			pthread_mutex_lock(&s->lock);
		}
		if (q->op.kind == EMU_OP_EVENT_RECORD) {
			/* an event record does no work: it completes and fires
			 * under the stream lock, so that a stream query or
			 * synchronize and an event query agree, as in CUDA */
			s->completed++;
			run_counted(s, q, woken);
			emu_op_release(&q->op);
			free(q);
			wake_synchronizers(s);
		} else {
			pthread_mutex_unlock(&s->lock);
			run_counted(s, q, woken);
			if (q->ticket)
				emu_hwq_leave(s->hwq, q->ticket, &q->op);
			emu_op_release(&q->op);
			free(q);
			pthread_mutex_lock(&s->lock);
			s->completed++;
			wake_synchronizers(s);
		}
		pthread_mutex_unlock(&s->lock);
		if (late)
			emu_late_ran();
		/* Outside the stream lock: this may drop the last reference on
		 * the context, whose release retires its default stream. */
		emu_ctx_op_end(s->ctx);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	emu_obj_put(&s->obj);
	return NULL;
}

/* Called with s->lock held. */
static int start_worker(struct CUstream_st *s)
{
	pthread_attr_t attr;
	pthread_t tid;
	int err;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	emu_obj_get(&s->obj);
	err = pthread_create(&tid, &attr, worker_main, s);
	pthread_attr_destroy(&attr);
	if (err) {
		/* Cannot be the last reference: the caller holds one. */
		atomic_fetch_sub(&s->obj.refs, 1);
		return -1;
	}
	s->worker_started = true;
	return 0;
}

/* ---- queue entries ---- */

struct emu_qop *emu_qop_new(const struct emu_op *op)
{
	struct emu_qop *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->op = *op;
	emu_op_hold(&q->op);
	return q;
}

static void qop_free(struct emu_qop *q)
{
	emu_op_release(&q->op);
	free(q);
}

void emu_qops_free(struct emu_qop *q)
{
	struct emu_qop *next;

	for (; q; q = next) {
		next = q->next;
		qop_free(q);
	}
}

/* ---- late ops: held until kicked ---- */

/* Called with s->lock held: late ops up to seq run now. */
static void kick_locked(struct CUstream_st *s, uint64_t seq)
{
	if (seq > s->kick_seq) {
		s->kick_seq = seq;
		pthread_cond_signal(&s->work);
	}
}

void emu_stream_kick(struct CUstream_st *s)
{
	pthread_mutex_lock(&s->lock);
	kick_locked(s, s->submitted);
	pthread_mutex_unlock(&s->lock);
}

/* ---- submission ---- */

/* Called with s->lock held: appends q, numbering it (and, under the
 * same lock, so that the stream's tickets follow its order, taking its
 * place in the hardware queue). */
static void enqueue(struct CUstream_st *s, struct emu_qop *q)
{
	q->seq = ++s->submitted;
	if (s->hwq && !q->late)
		q->ticket = emu_hwq_ticket(s->hwq);
	if (s->tail)
		s->tail->next = q;
	else
		s->head = q;
	s->tail = q;
}

static bool wait_locked(struct CUstream_st *s, uint64_t target,
			const struct timespec *deadline);

/* Called with s->lock held, before an op and the chain ahead of it join
 * the queue: with CUDAEMU_QUEUE_DEPTH, the caller blocks until they fit
 * (or the queue is empty), as a driver blocks a launch while the stream's
 * queue is full.  The lock is dropped while waiting: look again after. */
static void make_room(struct CUstream_st *s, const struct emu_qop *chain)
{
	uint64_t n = 1, depth = emu_config.queue_depth;

	for (; chain; chain = chain->next)
		n++;
	while (depth && s->submitted > s->completed &&
	       s->submitted - s->completed + n > depth)
		wait_locked(s, s->submitted + n > depth ? s->submitted + n - depth : s->submitted,
			    NULL);
}

static CUresult submit(struct CUstream_st *s, const struct emu_op *op,
		       bool late, bool snapshot)
{
	struct emu_qop *q, *chain, *w, *unused = NULL;
	uint64_t legacy_seq, t = 0;
	unsigned nops = 1;
	CUresult res;

	if (atomic_load_explicit(&s->capturing, memory_order_acquire) &&
	    emu_capture_op(s, op, &res))
		return res;
	if (s->is_null && emu_capture_implicit(s))
		return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;

	q = emu_qop_new(op);
	if (!q)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if ((snapshot && emu_late_snapshot(q) < 0) ||
	    (late && emu_late_register(s) < 0) ||
	    emu_barrier_ops(s, &chain, &legacy_seq) < 0) {
		qop_free(q);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (s->stats)
		t = emu_now_ns();
	q->t_submit = t;
	q->late = late;
	q->t_late = late ? emu_now_ns() : 0;
	for (w = chain; w; w = w->next, nops++)
		w->t_submit = t;
	while (nops--)
		emu_ctx_op_begin(s->ctx);

	pthread_mutex_lock(&s->lock);
	if (!s->worker_started && start_worker(s) < 0)
		goto fail;
	if (!s->is_null && chain) {
		/* a blocking stream: FIFO order makes one barrier per piece
		 * of legacy work enough */
		if (legacy_seq > s->legacy_waited)
			s->legacy_waited = legacy_seq;
		else
			unused = chain, chain = NULL;
	}
	make_room(s, chain);
	while ((w = chain)) {
		chain = w->next;
		w->next = NULL;
		enqueue(s, w);
	}
	enqueue(s, q);
	if (late) {
		s->late_last = q->seq;
		emu_late_queued();
	}
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->lock);
	if (unused) {
		qop_free(unused);
		emu_ctx_op_end(s->ctx);
	}
	return CUDA_SUCCESS;

fail:
	pthread_mutex_unlock(&s->lock);
	for (w = chain, nops = 1; w; w = w->next)
		nops++;
	emu_qops_free(chain);
	qop_free(q);
	while (nops--)
		emu_ctx_op_end(s->ctx);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult emu_stream_submit(struct CUstream_st *s, const struct emu_op *op)
{
	return submit(s, op, false, false);
}

CUresult emu_stream_submit_late(struct CUstream_st *s, const struct emu_op *op,
				bool snapshot)
{
	return submit(s, op, true, snapshot);
}

/* ---- waiting ---- */

/* Called with s->lock held: waits until the first `target` ops of s
 * completed, or (with a deadline) until then; false if it timed out. */
static bool wait_locked(struct CUstream_st *s, uint64_t target,
			const struct timespec *deadline)
{
	int err = 0;

	if (s->completed < target)
		kick_locked(s, target);	/* a held late op is waited for */
	while (s->completed < target && err != ETIMEDOUT) {
		if (!s->sync_waiters || target < s->sync_at)
			s->sync_at = target;
		s->sync_waiters++;
		if (deadline)
			err = pthread_cond_timedwait(&s->done, &s->lock,
						     deadline);
		else
			pthread_cond_wait(&s->done, &s->lock);
		s->sync_waiters--;
	}
	return s->completed >= target;
}

void emu_stream_wait_seq(struct CUstream_st *s, uint64_t seq)
{
	pthread_mutex_lock(&s->lock);
	wait_locked(s, seq, NULL);
	pthread_mutex_unlock(&s->lock);
}

bool emu_stream_wait_late(struct CUstream_st *s, const struct timespec *deadline)
{
	bool done;

	pthread_mutex_lock(&s->lock);
	done = wait_locked(s, s->late_last, deadline);
	pthread_mutex_unlock(&s->lock);
	return done;
}

void emu_stream_wait(struct CUstream_st *s)
{
	pthread_mutex_lock(&s->lock);
	wait_locked(s, s->submitted, NULL);
	pthread_mutex_unlock(&s->lock);
}

void emu_stream_retire(struct CUstream_st *s)
{
	pthread_mutex_lock(&s->lock);
	s->retired = true;
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->lock);
	emu_obj_put(&s->obj);
}

CUresult emu_stream_get(CUstream handle, struct CUstream_st **out)
{
	struct CUctx_st *ctx;
	struct emu_obj *obj;
	CUresult res;

	if (!handle || handle == CU_STREAM_LEGACY ||
	    handle == CU_STREAM_PER_THREAD) {
		res = emu_ctx_current(&ctx);
		if (res != CUDA_SUCCESS)
			return res;
		/* The context reference is kept until emu_stream_put: the
		 * default stream does not hold one of its own. */
		emu_obj_get(&ctx->null_stream->obj);
		*out = ctx->null_stream;
		return CUDA_SUCCESS;
	}
	res = emu_check_init();
	if (res != CUDA_SUCCESS)
		return res;
	obj = emu_handle_get(handle, EMU_KIND_STREAM);
	if (!obj)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = (struct CUstream_st *)obj;
	return CUDA_SUCCESS;
}

void emu_stream_put(struct CUstream_st *s)
{
	struct CUctx_st *ctx = s->is_null ? s->ctx : NULL;

	emu_obj_put(&s->obj);
	if (ctx)
		emu_ctx_put(ctx);
}

/* ---- API ---- */

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags,
				    int priority)
{
	struct CUstream_st *s;
	struct CUctx_st *ctx;
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	res = emu_ctx_current(&ctx);
	if (res != CUDA_SUCCESS)
		return res;
	/* Out-of-range priorities are clamped, as CUDA does. */
	if (priority > PRIORITY_LEAST)
		priority = PRIORITY_LEAST;
	if (priority < PRIORITY_GREATEST)
		priority = PRIORITY_GREATEST;
	res = emu_stream_new(ctx, flags, priority, false, &s);
	emu_ctx_put(ctx);
	if (res == CUDA_SUCCESS)
		*phStream = s;
	return res;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return cuStreamCreateWithPriority(phStream, Flags, PRIORITY_LEAST);
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
	CUresult res = emu_check_init();
	struct emu_obj *obj;

	if (res != CUDA_SUCCESS)
		return res;
	obj = emu_handle_get(hStream, EMU_KIND_STREAM);
	if (!obj)
		return CUDA_ERROR_INVALID_HANDLE;
	if (emu_handle_retire(hStream, EMU_KIND_STREAM)) {
		emu_capture_leave(hStream);
		emu_stream_retire(hStream);
	}
	emu_obj_put(obj);
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (emu_capture_forbid(s))
		res = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	else
		emu_stream_wait(s);
	emu_stream_put(s);
	return res;
}

CUresult cuStreamQuery(CUstream hStream)
{
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (emu_capture_forbid(s)) {
		res = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	} else {
		pthread_mutex_lock(&s->lock);
		if (s->completed != s->submitted)
			res = CUDA_ERROR_NOT_READY;
		pthread_mutex_unlock(&s->lock);
	}
	emu_stream_put(s);
	return res;
}

CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (flags)
		*flags = s->flags;
	else
		res = CUDA_ERROR_INVALID_VALUE;
	emu_stream_put(s);
	return res;
}

CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (priority)
		*priority = s->priority;
	else
		res = CUDA_ERROR_INVALID_VALUE;
	emu_stream_put(s);
	return res;
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (pctx)
		*pctx = s->ctx;
	else
		res = CUDA_ERROR_INVALID_VALUE;
	emu_stream_put(s);
	return res;
}

CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx,
			   CUgreenCtx *pGreenCtx)
{
	CUresult res = cuStreamGetCtx(hStream, pCtx);

	if (res != CUDA_SUCCESS)
		return res;
	if (!pGreenCtx)
		return CUDA_ERROR_INVALID_VALUE;
	*pGreenCtx = NULL;	/* green contexts are not emulated */
	return CUDA_SUCCESS;
}

CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (device)
		*device = s->ctx->dev;
	else
		res = CUDA_ERROR_INVALID_VALUE;
	emu_stream_put(s);
	return res;
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	struct emu_op op = { .kind = EMU_OP_HOST_FN };
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (!fn) {
		res = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	op.u.host.fn = fn;
	op.u.host.arg = userData;
	res = emu_stream_submit(s, &op);
out:
	emu_stream_put(s);
	return res;
}

CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
			     void *userData, unsigned int flags)
{
	struct emu_op op = { .kind = EMU_OP_CALLBACK };
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (!callback || flags != 0) {
		res = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	/* CUDA does not allow legacy callbacks in a graph. */
	if (emu_capture_forbid(s)) {
		res = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		goto out;
	}
	op.u.callback.fn = callback;
	op.u.callback.stream = hStream;
	op.u.callback.arg = userData;
	res = emu_stream_submit(s, &op);
out:
	emu_stream_put(s);
	return res;
}

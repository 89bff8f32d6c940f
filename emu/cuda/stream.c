/* stream.c - streams: FIFO queues drained by one worker thread each.
 *
 * Enqueueing never runs the operation on the caller's thread, so a caller
 * that forgets to synchronise sees stale data in tests instead of getting
 * lucky. The worker is started on first use (never from a constructor) and is
 * detached; it holds a reference on the stream and drops it after the stream
 * was retired and its queue drained, so cuStreamDestroy returns at once while
 * queued work still completes, as in CUDA.
 *
 * Not emulated: the legacy default stream's implicit synchronisation with
 * other blocking streams. Every context has one default stream, used for
 * NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD alike, ordered only with
 * itself; callers that rely on the implicit barrier must use events.
 */
#include "emu.h"

#include <stdlib.h>

#define PRIORITY_LEAST		0
#define PRIORITY_GREATEST	(-5)

static void stream_release(struct emu_obj *obj)
{
	struct CUstream_st *s = (struct CUstream_st *)obj;

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
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->work, NULL);
	pthread_cond_init(&s->done, NULL);
	atomic_init(&s->capturing, false);
	s->stats = emu_stats_new();
	if (is_null) {
		*out = s;
		return CUDA_SUCCESS;
	}
	emu_obj_get(&ctx->obj);
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

static void *worker_main(void *arg)
{
	struct CUstream_st *s = arg;
	struct emu_qop *q;
	bool woken;

	emu_stats_self = s->stats;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		woken = wait_for_work(s);
		q = s->head;
		if (!q)
			break;	/* retired and drained */
		s->head = q->next;
		if (!s->head)
			s->tail = NULL;
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
			emu_op_release(&q->op);
			free(q);
			pthread_mutex_lock(&s->lock);
			s->completed++;
			wake_synchronizers(s);
		}
		pthread_mutex_unlock(&s->lock);
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

CUresult emu_stream_submit(struct CUstream_st *s, const struct emu_op *op)
{
	struct emu_qop *q;
	CUresult res;

	if (atomic_load_explicit(&s->capturing, memory_order_acquire) &&
	    emu_capture_op(s, op, &res))
		return res;

	q = malloc(sizeof(*q));
	if (!q)
		return CUDA_ERROR_OUT_OF_MEMORY;
	q->next = NULL;
	q->op = *op;
	q->t_submit = s->stats ? emu_now_ns() : 0;
	emu_op_hold(&q->op);
	emu_ctx_op_begin(s->ctx);

	pthread_mutex_lock(&s->lock);
	if (!s->worker_started && start_worker(s) < 0)
		goto fail;
	if (s->tail)
		s->tail->next = q;
	else
		s->head = q;
	s->tail = q;
	s->submitted++;
	pthread_cond_signal(&s->work);
	pthread_mutex_unlock(&s->lock);
	return CUDA_SUCCESS;

fail:
	pthread_mutex_unlock(&s->lock);
	emu_ctx_op_end(s->ctx);
	emu_op_release(&q->op);
	free(q);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

void emu_stream_wait(struct CUstream_st *s)
{
	uint64_t target;

	pthread_mutex_lock(&s->lock);
	target = s->submitted;
	while (s->completed < target) {
		if (!s->sync_waiters || target < s->sync_at)
			s->sync_at = target;
		s->sync_waiters++;
		pthread_cond_wait(&s->done, &s->lock);
		s->sync_waiters--;
	}
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

/* event.c - events as sequence numbers of records, and those not run yet.
 *
 * cuEventRecord takes the next sequence number and enqueues an op that marks
 * it complete (with a timestamp). A query or synchronize looks at the
 * latest record issued before the call; cuStreamWaitEvent enqueues an op
 * that waits for that same record, so it is unaffected by later records of
 * the event, even one on another stream that completes first. An event
 * never recorded has sequence 0, already complete: CUDA treats waiting on
 * it as a no-op, and so do we.
 */
#include "emu.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | \
		     CU_EVENT_INTERPROCESS)

static void event_release(struct emu_obj *obj)
{
	struct CUevent_st *ev = (struct CUevent_st *)obj;

	emu_deps_free(&ev->cap_deps);
	free(ev->pending);
	pthread_cond_destroy(&ev->cond);
	pthread_mutex_destroy(&ev->lock);
	free(ev);
}

void emu_event_get(struct CUevent_st *ev)
{
	emu_obj_get(&ev->obj);
}

void emu_event_put(struct CUevent_st *ev)
{
	emu_obj_put(&ev->obj);
}

uint64_t emu_event_next_seq(struct CUevent_st *ev)
{
	uint64_t seq = 0;

	pthread_mutex_lock(&ev->lock);
	if (ev->n_pending == ev->cap_pending) {
		size_t cap = ev->cap_pending ? 2 * ev->cap_pending : 4;
		uint64_t *p = realloc(ev->pending, cap * sizeof(*p));

		if (!p)
			goto out;
		ev->pending = p;
		ev->cap_pending = cap;
	}
	seq = ++ev->recorded;
	ev->pending[ev->n_pending++] = seq;
out:
	pthread_mutex_unlock(&ev->lock);
	return seq;
}

/* With ev->lock held. */
static void stamp(struct CUevent_st *ev, uint64_t seq)
{
	if (seq > ev->stamp_seq) {
		ev->stamp_seq = seq;
		clock_gettime(CLOCK_MONOTONIC, &ev->stamp);
	}
	pthread_cond_broadcast(&ev->cond);
}

void emu_event_record_now(struct CUevent_st *ev)
{
	pthread_mutex_lock(&ev->lock);
	stamp(ev, ++ev->recorded);
	pthread_mutex_unlock(&ev->lock);
}

void emu_event_complete(struct CUevent_st *ev, uint64_t seq)
{
	pthread_mutex_lock(&ev->lock);
	for (size_t i = 0; i < ev->n_pending; i++) {
		if (ev->pending[i] != seq)
			continue;
		memmove(&ev->pending[i], &ev->pending[i + 1],
			(ev->n_pending - i - 1) * sizeof(*ev->pending));
		ev->n_pending--;
		break;
	}
	stamp(ev, seq);
	pthread_mutex_unlock(&ev->lock);
}

/* With ev->lock held: record seq (issued) has run. */
static bool seq_done(const struct CUevent_st *ev, uint64_t seq)
{
	for (size_t i = 0; i < ev->n_pending && ev->pending[i] <= seq; i++)
		if (ev->pending[i] == seq)
			return false;
	return true;
}

/* seq 0: whatever was recorded last, when we look. */
void emu_event_wait_seq(struct CUevent_st *ev, uint64_t seq)
{
	pthread_mutex_lock(&ev->lock);
	if (!seq)
		seq = ev->recorded;
	while (!seq_done(ev, seq))
		pthread_cond_wait(&ev->cond, &ev->lock);
	pthread_mutex_unlock(&ev->lock);
}

static CUresult event_get(CUevent handle, struct CUevent_st **out)
{
	CUresult res = emu_check_init();
	struct emu_obj *obj;

	if (res != CUDA_SUCCESS)
		return res;
	obj = emu_handle_get(handle, EMU_KIND_EVENT);
	if (!obj)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = (struct CUevent_st *)obj;
	return CUDA_SUCCESS;
}

/* Both handles of a call that puts an event on a stream; event_stream_put
 * drops them. */
static CUresult event_stream_get(CUevent hEvent, CUstream hStream,
				 struct CUevent_st **ev, struct CUstream_st **s)
{
	CUresult res = event_get(hEvent, ev);

	if (res != CUDA_SUCCESS)
		return res;
	res = emu_stream_get(hStream, s);
	if (res != CUDA_SUCCESS)
		emu_event_put(*ev);
	return res;
}

static void event_stream_put(struct CUevent_st *ev, struct CUstream_st *s)
{
	emu_stream_put(s);
	emu_event_put(ev);
}

typedef bool capture_fn(struct CUstream_st *s, struct CUevent_st *ev,
			unsigned flags, CUresult *res);

/* cuEventRecordWithFlags and cuStreamWaitEvent each take one flag,
 * `external`, that only means something while s is being captured; there
 * capture() takes the call over.  True when the call ends here, with its
 * result in *res; false when it goes on to the stream. */
static bool event_call_done(struct CUstream_st *s, struct CUevent_st *ev,
			    unsigned flags, unsigned external,
			    capture_fn *capture, CUresult *res)
{
	if (flags & ~external) {
		*res = CUDA_ERROR_INVALID_VALUE;
		return true;
	}
	if (capture(s, ev, flags, res))
		return true;
	if (flags) {
		*res = CUDA_ERROR_INVALID_VALUE;
		return true;
	}
	return false;
}

/* ---- API ---- */

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	struct CUctx_st *ctx;
	struct CUevent_st *ev;
	CUresult res = emu_ctx_current(&ctx);

	if (res != CUDA_SUCCESS)
		return res;
	emu_ctx_put(ctx);	/* only compared later (ev->ctx) */
	if (!phEvent || (Flags & ~(unsigned)EVENT_FLAGS))
		return CUDA_ERROR_INVALID_VALUE;
	if ((Flags & CU_EVENT_INTERPROCESS) &&
	    !(Flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_VALUE;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	emu_obj_init(&ev->obj, EMU_KIND_EVENT, event_release);
	ev->flags = Flags;
	ev->ctx = ctx;
	pthread_mutex_init(&ev->lock, NULL);
	pthread_cond_init(&ev->cond, NULL);
	atomic_init(&ev->in_capture, false);
	res = emu_handle_publish(&ev->obj);
	if (res != CUDA_SUCCESS) {
		emu_obj_put(&ev->obj);
		return res;
	}
	*phEvent = ev;
	return CUDA_SUCCESS;
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream,
				unsigned int flags)
{
	struct emu_op op = { .kind = EMU_OP_EVENT_RECORD };
	struct CUevent_st *ev;
	struct CUstream_st *s;
	CUresult res = event_stream_get(hEvent, hStream, &ev, &s);

	if (res != CUDA_SUCCESS)
		return res;
	/* "hEvent and hStream must be from the same context" (cuEventRecord);
	 * a wait may cross contexts */
	if (ev->ctx != s->ctx) {
		res = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	if (event_call_done(s, ev, flags, CU_EVENT_RECORD_EXTERNAL,
			    emu_capture_record, &res))
		goto out;
	emu_capture_forget_event(ev);
	op.u.event.event = ev;
	op.u.event.seq = emu_event_next_seq(ev);
	if (!op.u.event.seq) {
		res = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	res = emu_stream_submit(s, &op);
	/* Never leave a sequence number that nothing will complete. */
	if (res != CUDA_SUCCESS)
		emu_event_complete(ev, op.u.event.seq);
out:
	event_stream_put(ev, s);
	return res;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return cuEventRecordWithFlags(hEvent, hStream, 0);
}

CUresult cuEventQuery(CUevent hEvent)
{
	struct CUevent_st *ev;
	CUresult res = event_get(hEvent, &ev);

	if (res != CUDA_SUCCESS)
		return res;
	pthread_mutex_lock(&ev->lock);
	if (!seq_done(ev, ev->recorded))
		res = CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&ev->lock);
	emu_event_put(ev);
	return res;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
	struct CUevent_st *ev;
	CUresult res = event_get(hEvent, &ev);

	if (res != CUDA_SUCCESS)
		return res;
	emu_event_wait_seq(ev, 0);
	emu_event_put(ev);
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
	CUresult res = emu_check_init();

	if (res != CUDA_SUCCESS)
		return res;
	/* Queued records and waits hold their own references: destroying
	 * an event with work pending is legal and that work still runs. */
	if (!emu_handle_retire(hEvent, EMU_KIND_EVENT))
		return CUDA_ERROR_INVALID_HANDLE;
	emu_event_put(hEvent);
	return CUDA_SUCCESS;
}

/* Fills *ns with the completion time of ev's latest record. */
static CUresult event_stamp(struct CUevent_st *ev, struct timespec *ts)
{
	CUresult res = CUDA_SUCCESS;

	pthread_mutex_lock(&ev->lock);
	if (ev->flags & CU_EVENT_DISABLE_TIMING || !ev->recorded)
		res = CUDA_ERROR_INVALID_HANDLE;
	else if (!seq_done(ev, ev->recorded))
		res = CUDA_ERROR_NOT_READY;
	else
		*ts = ev->stamp;
	pthread_mutex_unlock(&ev->lock);
	return res;
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart,
			       CUevent hEnd)
{
	struct CUevent_st *start, *end = NULL;
	struct timespec t0, t1;
	CUresult res = event_get(hStart, &start);

	if (res != CUDA_SUCCESS)
		return res;
	res = event_get(hEnd, &end);
	if (res != CUDA_SUCCESS)
		goto out;
	if (!pMilliseconds) {
		res = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	res = event_stamp(start, &t0);
	if (res == CUDA_SUCCESS)
		res = event_stamp(end, &t1);
	if (res == CUDA_SUCCESS)
		*pMilliseconds = (float)((double)(t1.tv_sec - t0.tv_sec) * 1e3 +
					 (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
out:
	if (end)
		emu_event_put(end);
	emu_event_put(start);
	return res;
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
			   unsigned int Flags)
{
	struct emu_op op = { .kind = EMU_OP_EVENT_WAIT };
	struct CUevent_st *ev;
	struct CUstream_st *s;
	CUresult res = event_stream_get(hEvent, hStream, &ev, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (event_call_done(s, ev, Flags, CU_EVENT_WAIT_EXTERNAL,
			    emu_capture_wait, &res))
		goto out;
	pthread_mutex_lock(&ev->lock);
	op.u.event.seq = ev->recorded;
	pthread_mutex_unlock(&ev->lock);
	op.u.event.event = ev;
	/* Never recorded: nothing to wait for. */
	if (op.u.event.seq)
		res = emu_stream_submit(s, &op);
out:
	event_stream_put(ev, s);
	return res;
}

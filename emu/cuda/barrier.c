/* barrier.c - the legacy default stream's implicit barrier with blocking
 * streams.
 *
 * It is emulated in stream order, never by blocking the caller: an op
 * submitted to the legacy stream is preceded in its queue by a barrier op
 * (EMU_OP_STREAM_WAIT) for each blocking stream of the context that has
 * work not yet complete, and an op submitted to a blocking stream by one
 * for the legacy stream's work.  Each barrier waits only for ops submitted
 * before its own op was, so the waits form no cycle. Non-blocking streams take no part. Every context has one
 * default stream, used for NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD
 * alike (so the per-thread stream is the legacy one, see README.md).
 */
#include "emu.h"

bool emu_stream_blocking(const struct CUstream_st *s)
{
	return !s->is_null && !(s->flags & CU_STREAM_NON_BLOCKING);
}

/* ---- the context's list of blocking streams ---- */

void emu_barrier_link(struct CUstream_st *s)
{
	struct CUctx_st *ctx = s->ctx;

	pthread_mutex_lock(&ctx->streams_lock);
	s->ctx_prev = NULL;
	s->ctx_next = ctx->blocking;
	if (ctx->blocking)
		ctx->blocking->ctx_prev = s;
	ctx->blocking = s;
	pthread_mutex_unlock(&ctx->streams_lock);
}

void emu_barrier_unlink(struct CUstream_st *s)
{
	struct CUctx_st *ctx = s->ctx;

	pthread_mutex_lock(&ctx->streams_lock);
	if (s->ctx_prev)
		s->ctx_prev->ctx_next = s->ctx_next;
	else if (ctx->blocking == s)
		ctx->blocking = s->ctx_next;
	if (s->ctx_next)
		s->ctx_next->ctx_prev = s->ctx_prev;
	s->ctx_prev = s->ctx_next = NULL;
	pthread_mutex_unlock(&ctx->streams_lock);
}

/* ---- barrier ops ---- */

/* A barrier op: wait until the first seq ops of w completed. Takes a
 * reference on w, so the caller must know w cannot be freed meanwhile. */
static struct emu_qop *barrier_new(struct CUstream_st *w, uint64_t seq)
{
	struct emu_op op = { .kind = EMU_OP_STREAM_WAIT };

	op.u.stream_wait.stream = w;
	op.u.stream_wait.seq = seq;
	return emu_qop_new(&op);
}

/* For an op submitted to the legacy stream s: a barrier op for every
 * blocking stream of the context with work submitted and not complete,
 * chained in *chain. -1 when out of memory. */
static int legacy_barriers(struct CUstream_st *s, struct emu_qop **chain)
{
	struct CUctx_st *ctx = s->ctx;
	struct emu_qop *w;
	struct CUstream_st *b;
	int err = 0;

	*chain = NULL;
	pthread_mutex_lock(&ctx->streams_lock);
	for (b = ctx->blocking; b && !err; b = b->ctx_next) {
		pthread_mutex_lock(&b->lock);
		/* Work pending means b's worker still holds its reference, so
		 * taking one here cannot revive a stream being freed. */
		if (b->completed < b->submitted) {
			w = barrier_new(b, b->submitted);
			if (w) {
				w->next = *chain;
				*chain = w;
			} else {
				err = -1;
			}
		}
		pthread_mutex_unlock(&b->lock);
	}
	pthread_mutex_unlock(&ctx->streams_lock);
	if (err) {
		emu_qops_free(*chain);
		*chain = NULL;
	}
	return err;
}

/* For an op submitted to a blocking stream: the legacy stream's
 * `submitted` if it has work not complete, else 0. */
static uint64_t legacy_busy(struct CUstream_st *legacy)
{
	uint64_t seq;

	pthread_mutex_lock(&legacy->lock);
	seq = legacy->completed < legacy->submitted ? legacy->submitted : 0;
	pthread_mutex_unlock(&legacy->lock);
	return seq;
}

/* The barrier ops an op submitted to s must follow, in *chain; *legacy_seq
 * says which legacy work a blocking stream's barrier waits for. */
int emu_barrier_ops(struct CUstream_st *s, struct emu_qop **chain,
		    uint64_t *legacy_seq)
{
	struct CUstream_st *legacy = s->ctx->null_stream;

	*chain = NULL;
	*legacy_seq = 0;
	if (s->is_null)
		return legacy_barriers(s, chain);
	if (!emu_stream_blocking(s))
		return 0;
	*legacy_seq = legacy_busy(legacy);
	if (!*legacy_seq || *legacy_seq <= s->legacy_waited)
		return 0;	/* racy read: re-checked under s->lock */
	/* s pins its context, which owns the legacy stream */
	*chain = barrier_new(legacy, *legacy_seq);
	return *chain ? 0 : -1;
}

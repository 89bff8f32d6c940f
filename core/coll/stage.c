/* stage.c - enqueue pool copies, doorbells, slot flags and flushes on
 * CUDA streams. */
#include "stage.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>

#include "coherence.h"
#include "devmodel.h"
#include "flag.h"
#include "log.h"
#include "runtime.h"

/* Host functions get one pointer of payload.  Packing the line number of
 * a doorbell (or flag line) and the value into it needs no allocation, so a captured graph
 * can replay it any number of times.  Pools up to 256 GiB fit. */
static void *pack(const struct cxls_stage *s, const void *p, uint32_t v)
{
	uint64_t line = (uint64_t)((const uint8_t *)p - s->host_base) / CXLS_LINE;

	return (void *)(uintptr_t)((line << 32) | v);
}

static void *unpack(void *data, uint32_t *v)
{
	uint64_t x = (uint64_t)(uintptr_t)data;
	struct cxls_pool *pool = cxls_runtime_pool();

	*v = (uint32_t)x;
	return pool->base + (x >> 32) * CXLS_LINE;
}

static void wait_cfg(struct cxls_wait_cfg *w)
{
	const struct cxls_runtime *rt = cxls_runtime();

	w->flush = rt->pool->flush_mode;
	w->spin_us = rt->cfg.wait_spin_us;
	w->sleep_max_us = rt->cfg.wait_sleep_max_us;
}

static void host_ring(void *data)
{
	uint32_t v;
	struct cxls_bell *b = unpack(data, &v);

	cxls_bell_ring(b, v, cxls_runtime_pool()->flush_mode);
}

static void host_wait(void *data)
{
	struct cxls_wait_cfg w;
	uint32_t v;
	struct cxls_bell *b = unpack(data, &v);

	wait_cfg(&w);
	cxls_bell_wait(b, v, &w);
}

/* A host function on a word of a flag line: the line, which 32-bit word
 * of it (bits 8..11 of the value) and the value (bits 0..7). */
static void *pack_word(const struct cxls_stage *s, _Atomic uint32_t *w, uint32_t v)
{
	uint32_t i = (uint32_t)(((uintptr_t)w % CXLS_LINE) / sizeof(*w));

	assert(v < 256);
	return pack(s, w, i << 8 | v);
}

static _Atomic uint32_t *unpack_word(void *data, uint32_t *v)
{
	uint32_t x;
	_Atomic uint32_t *line = unpack(data, &x);

	*v = x & 0xff;
	return line + (x >> 8);
}

static void host_word_set(void *data)
{
	uint32_t v;
	_Atomic uint32_t *w = unpack_word(data, &v);

	cxls_flag_set_word(w, v, cxls_runtime_pool()->flush_mode);
}

_Static_assert(offsetof(struct cxls_flag, state) == 0, "a flag starts with its state word");

/* the word packed is a flag's state, so the flag's own address */
static void host_flag_wait(void *data)
{
	struct cxls_wait_cfg cfg;
	uint32_t state;
	struct cxls_flag *f = (struct cxls_flag *)unpack_word(data, &state);

	wait_cfg(&cfg);
	cxls_flag_wait(f, state, &cfg);
}

static void host_flush(void *data)
{
	uint32_t lines;
	void *p = unpack(data, &lines);

	cxls_flush_lines(p, (size_t)lines * CXLS_LINE);
}

static int check(const struct cxls_stage *s, CUresult r, const char *what)
{
	(void)s;
	if (r == CUDA_SUCCESS)
		return 0;
	CXLS_WARN("%s failed: %s", what, cxls_cuda_strerror(r));
	return -1;
}

int cxls_stage_copy(const struct cxls_stage *s, CUstream st, CUdeviceptr dst,
		    CUdeviceptr src, size_t bytes)
{
	if (!bytes || dst == src)
		return 0;
	return check(s, s->cu->MemcpyAsync(dst, src, bytes, st), "cuMemcpyAsync");
}

int cxls_stage_pool_copy(const struct cxls_stage *s, CUstream st, int rec, CUdeviceptr dst,
			 CUdeviceptr src, size_t bytes, uint32_t dev)
{
	if (s->model && cxls_devmodel_begin(s, st, rec, dev, bytes))
		return -1;
	if (cxls_stage_copy(s, st, dst, src, bytes))
		return -1;
	if (s->model && cxls_devmodel_end(s, st, rec))
		return -1;
	return 0;
}

int cxls_stage_ring(const struct cxls_stage *s, CUstream st, struct cxls_bell *b, uint32_t v)
{
	if (s->host_wait)
		return check(s, s->cu->LaunchHostFunc(st, host_ring, pack(s, b, v)),
			     "cuLaunchHostFunc(ring)");
	return check(s, s->cu->StreamWriteValue32(st, cxls_stage_dev(s, &b->seq), v, 0),
		     "cuStreamWriteValue32");
}

int cxls_stage_wait(const struct cxls_stage *s, CUstream st, struct cxls_bell *b, uint32_t v)
{
	if (s->host_wait)
		return check(s, s->cu->LaunchHostFunc(st, host_wait, pack(s, b, v)),
			     "cuLaunchHostFunc(wait)");
	return check(s, s->cu->StreamWaitValue32(st, cxls_stage_dev(s, &b->seq), v,
						 CU_STREAM_WAIT_VALUE_GEQ),
		     "cuStreamWaitValue32");
}

int cxls_stage_flag_set(const struct cxls_stage *s, CUstream st, _Atomic uint32_t *w, uint32_t v)
{
	if (s->host_wait)
		return check(s, s->cu->LaunchHostFunc(st, host_word_set, pack_word(s, w, v)),
			     "cuLaunchHostFunc(flag)");
	return check(s, s->cu->StreamWriteValue32(st, cxls_stage_dev(s, w), v, 0),
		     "cuStreamWriteValue32");
}

int cxls_stage_flag_wait(const struct cxls_stage *s, CUstream st, struct cxls_flag *f,
			 uint32_t state)
{
	if (s->host_wait)
		return check(s, s->cu->LaunchHostFunc(st, host_flag_wait, pack_word(s, &f->state, state)),
			     "cuLaunchHostFunc(flag wait)");
	if (!s->wait64)
		return check(s, s->cu->StreamWaitValue32(st, cxls_stage_dev(s, &f->state), state,
							 CU_STREAM_WAIT_VALUE_AND),
			     "cuStreamWaitValue32");
	return check(s, s->cu->StreamWaitValue64(st, cxls_stage_dev(s, f), cxls_flag_mask(state),
						 CU_STREAM_WAIT_VALUE_AND),
		     "cuStreamWaitValue64");
}

int cxls_stage_flush(const struct cxls_stage *s, CUstream st, const void *p, size_t bytes)
{
	uint64_t lines = (bytes + CXLS_LINE - 1) / CXLS_LINE;

	if (!s->flush || !bytes)
		return 0;
	return check(s, s->cu->LaunchHostFunc(st, host_flush, pack(s, p, (uint32_t)lines)),
		     "cuLaunchHostFunc(flush)");
}

static int wait_event(const struct cxls_stage *s, CUstream st, CUevent ev)
{
	return check(s, s->cu->StreamWaitEvent(st, ev, 0), "cuStreamWaitEvent");
}

/* st's capture status and the capture's id (never 0); a stream CUDA
 * cannot answer for counts as in an invalidated capture (usable by no
 * one). */
static CUstreamCaptureStatus capture_of(const struct cxls_stage *s, CUstream st, uint64_t *id)
{
	CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
	cuuint64_t raw = 0;

	if (s->cu->StreamGetCaptureInfo(st, &cap, &raw) != CUDA_SUCCESS)
		return CU_STREAM_CAPTURE_STATUS_INVALIDATED;
	*id = raw ? raw : UINT64_MAX;
	return cap;
}

uint64_t cxls_stage_capture(const struct cxls_stage *s, CUstream st)
{
	uint64_t id = 0;

	return capture_of(s, st, &id) == CU_STREAM_CAPTURE_STATUS_ACTIVE ? id : 0;
}

/* At most this many graphs captured at once with a communicator's work
 * (a call past it fails, the communicator does not). */
#define MAX_CAPTURE_PAIRS 64

static int pair_new(struct cxls_stage *s, struct cxls_pair *out)
{
	struct cxls_pair *grown, p = { NULL, NULL };
	CUstreamCaptureMode mode;
	int bad;

	if (s->ncap == MAX_CAPTURE_PAIRS)
		return -1;
	grown = realloc(s->cap, (size_t)(s->ncap + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	s->cap = grown;
	/* the application may capture in global mode from this thread */
	mode = cxls_cuda_capture_relax(s->cu);
	bad = check(s, s->cu->StreamCreate(&p.ws, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
	      check(s, s->cu->StreamCreate(&p.rs, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	cxls_cuda_capture_restore(s->cu, mode);
	if (bad) {
		if (p.ws)
			s->cu->StreamDestroy(p.ws);
		return -1;
	}
	s->cap[s->ncap++] = p;
	*out = p;
	return 0;
}

int cxls_stage_pair(struct cxls_stage *s, uint64_t cap, struct cxls_pair *out)
{
	int idle = -1;

	if (!cap) {
		*out = s->work;
		return 0;
	}
	for (int i = 0; i < s->ncap; i++) {
		uint64_t id = 0;
		CUstreamCaptureStatus st = capture_of(s, s->cap[i].ws, &id);

		if (st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id == cap) {
			*out = s->cap[i];
			return 0;
		}
		/* an invalidated capture holds its streams until it ends too */
		if (st == CU_STREAM_CAPTURE_STATUS_NONE && idle < 0)
			idle = i;
	}
	if (idle >= 0) {
		*out = s->cap[idle];
		return 0;
	}
	return pair_new(s, out);
}

void cxls_stage_pairs_free(struct cxls_stage *s)
{
	for (int i = 0; i < s->ncap; i++) {
		s->cu->StreamDestroy(s->cap[i].ws);
		s->cu->StreamDestroy(s->cap[i].rs);
	}
	free(s->cap);
	s->cap = NULL;
	s->ncap = 0;
}

int cxls_stage_fork(const struct cxls_stage *s, const struct cxls_pair *pr, CUstream user,
		    int capturing, int split)
{
	if (!split)
		return capturing ? 0 : wait_event(s, user, s->ev_done);
	if (check(s, s->cu->EventRecord(s->ev_fork, user), "cuEventRecord") ||
	    wait_event(s, pr->ws, s->ev_fork) || wait_event(s, pr->rs, s->ev_fork))
		return -1;
	if (!capturing &&
	    (wait_event(s, pr->ws, s->ev_done) || wait_event(s, pr->rs, s->ev_done)))
		return -1;
	return 0;
}

int cxls_stage_follow(const struct cxls_stage *s, CUstream to, CUstream from)
{
	return check(s, s->cu->EventRecord(s->ev_fork, from), "cuEventRecord") ||
	       wait_event(s, to, s->ev_fork) ? -1 : 0;
}

int cxls_stage_join(const struct cxls_stage *s, const struct cxls_pair *pr, CUstream user,
		    int split)
{
	if (split &&
	    (check(s, s->cu->EventRecord(s->ev_wjoin, pr->ws), "cuEventRecord") ||
	     check(s, s->cu->EventRecord(s->ev_rjoin, pr->rs), "cuEventRecord") ||
	     wait_event(s, user, s->ev_wjoin) || wait_event(s, user, s->ev_rjoin)))
		return -1;
	return 0;
}

int cxls_stage_mark_done(const struct cxls_stage *s, CUstream user, int capturing)
{
	if (capturing)
		return 0;
	return check(s, s->cu->EventRecord(s->ev_done, user), "cuEventRecord");
}

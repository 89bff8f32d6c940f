/* capture.c - stream capture into a graph.
 *
 * A capture session owns the graph being built and the list of streams
 * taking part. Each of those streams carries its dependency set: the nodes
 * the next op captured on it will depend on. Capturing an op adds a node
 * depending on that set and makes the set {new node}. Recording an event on
 * a capturing stream copies the stream's set into the event; a stream that
 * then waits on the event joins the session (fork) or merges the set into
 * its own (join). Nodes remember which stream ("lane") produced them, so the
 * executor can run the branches of a fork concurrently (graph.c).
 *
 * Everything here runs under one process-wide lock: capture is set-up work,
 * not a fast path. Events refer to a session by id, never by pointer, so an
 * event recorded in a finished capture is simply stale.
 *
 * Capture modes: a "potentially unsafe" call (emu_capture_unsafe_call:
 * allocation, registration, context synchronisation) fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures that
 * forbid it: the caller's own capture unless it is relaxed, and, while the
 * caller's mode (cuThreadExchangeStreamCaptureMode) is global, every other
 * thread's global capture.  That is cuStreamBeginCapture's contract; the
 * driver has the same freedom to refuse, so a library that calls cuMemAlloc
 * on its own thread while the application captures fails here as on a GPU.
 */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

struct emu_capture {
	struct emu_capture *next;	/* in the list of live sessions */
	uint64_t id;
	CUstreamCaptureMode mode;
	pthread_t thread;		/* that began it */
	bool invalidated;
	struct CUgraph_st *graph;
	struct CUstream_st *origin;
	size_t nstreams, cap;
	struct CUstream_st **streams;	/* lane i is streams[i] */
};

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_capture *sessions;
static atomic_uint nsessions;	/* lock-free "no capture at all" check */
static uint64_t next_id = 1;

/* The calling thread's capture interaction mode. */
static _Thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* ---- dependency sets ---- */

int emu_deps_add(struct emu_deps *d, uint32_t idx)
{
	uint32_t *p;
	size_t i;

	for (i = 0; i < d->n; i++)
		if (d->idx[i] == idx)
			return 0;
	if (d->n == d->cap) {
		p = realloc(d->idx, (d->cap ? d->cap * 2 : 4) * sizeof(*p));
		if (!p)
			return -1;
		d->idx = p;
		d->cap = d->cap ? d->cap * 2 : 4;
	}
	d->idx[d->n++] = idx;
	return 0;
}

int emu_deps_set(struct emu_deps *d, const struct emu_deps *src)
{
	size_t i;

	d->n = 0;
	for (i = 0; i < src->n; i++)
		if (emu_deps_add(d, src->idx[i]) < 0)
			return -1;
	return 0;
}

void emu_deps_free(struct emu_deps *d)
{
	free(d->idx);
	memset(d, 0, sizeof(*d));
}

/* ---- sessions (cap_lock held) ---- */

static struct emu_capture *session_find(uint64_t id)
{
	struct emu_capture *c;

	for (c = sessions; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

static int session_join(struct emu_capture *c, struct CUstream_st *s)
{
	struct CUstream_st **p;

	if (c->nstreams == c->cap) {
		p = realloc(c->streams, (c->cap ? c->cap * 2 : 4) * sizeof(*p));
		if (!p)
			return -1;
		c->streams = p;
		c->cap = c->cap ? c->cap * 2 : 4;
	}
	s->lane = (unsigned)c->nstreams;
	c->streams[c->nstreams++] = s;
	s->cap = c;
	s->deps.n = 0;
	atomic_store(&s->capturing, true);
	return 0;
}

static void stream_detach(struct CUstream_st *s)
{
	s->cap = NULL;
	s->deps.n = 0;
	atomic_store(&s->capturing, false);
}

/* Ends a session: every stream leaves it, the session is freed. */
static void session_end(struct emu_capture *c)
{
	struct emu_capture **pp;
	size_t i;

	for (i = 0; i < c->nstreams; i++)
		if (c->streams[i])
			stream_detach(c->streams[i]);
	for (pp = &sessions; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			atomic_fetch_sub(&nsessions, 1);
			break;
		}
	if (c->graph)
		emu_graph_put(c->graph);
	free(c->streams);
	free(c);
}

/* Appends op as a node after s's dependency set. */
static CUresult session_add(struct CUstream_st *s, const struct emu_op *op)
{
	struct emu_capture *c = s->cap;
	uint32_t idx;

	if (c->invalidated)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (emu_graph_add(c->graph, op, s->lane, &s->deps, &idx) !=
	    CUDA_SUCCESS)
		goto fail;
	s->deps.n = 0;
	if (emu_deps_add(&s->deps, idx) < 0)
		goto fail;
	return CUDA_SUCCESS;

fail:
	c->invalidated = true;
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---- hooks for the enqueue paths ---- */

bool emu_capture_op(struct CUstream_st *s, const struct emu_op *op,
		    CUresult *res)
{
	bool captured = false;

	pthread_mutex_lock(&cap_lock);
	if (s->cap) {
		*res = session_add(s, op);
		captured = true;
	}
	pthread_mutex_unlock(&cap_lock);
	return captured;
}

bool emu_capture_record(struct CUstream_st *s, struct CUevent_st *ev,
			unsigned flags, CUresult *res)
{
	struct emu_op op = { .kind = EMU_OP_EVENT_RECORD };
	bool captured = false;

	if (!atomic_load(&s->capturing))
		return false;
	pthread_mutex_lock(&cap_lock);
	if (!s->cap)
		goto out;
	captured = true;
	*res = CUDA_SUCCESS;
	if (s->cap->invalidated) {
		*res = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		goto out;
	}
	/* External records become a node that records ev on each replay. */
	if (flags & CU_EVENT_RECORD_EXTERNAL) {
		op.u.event.event = ev;
		*res = session_add(s, &op);
		if (*res != CUDA_SUCCESS)
			goto out;
	}
	if (emu_deps_set(&ev->cap_deps, &s->deps) < 0) {
		s->cap->invalidated = true;
		*res = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	ev->cap_id = s->cap->id;
	atomic_store(&ev->in_capture, true);
out:
	pthread_mutex_unlock(&cap_lock);
	return captured;
}

/* Merges the event's captured dependency set into s's set. */
static CUresult join_deps(struct CUstream_st *s, const struct emu_deps *d)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		if (emu_deps_add(&s->deps, d->idx[i]) < 0) {
			s->cap->invalidated = true;
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	return CUDA_SUCCESS;
}

static CUresult wait_captured(struct CUstream_st *s, struct CUevent_st *ev,
			      struct emu_capture *c)
{
	if (!s->cap) {
		/* Fork: s joins the capture, after the recorded nodes. */
		if (s->is_null)
			return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
		if (session_join(c, s) < 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
		return join_deps(s, &ev->cap_deps);
	}
	if (s->cap != c)
		return CUDA_ERROR_STREAM_CAPTURE_MERGE;
	if (c->invalidated)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	return join_deps(s, &ev->cap_deps);
}

static CUresult wait_external(struct CUstream_st *s, struct CUevent_st *ev,
			      unsigned flags)
{
	struct emu_op op = { .kind = EMU_OP_EVENT_WAIT };

	/* A dependency on work outside the capture must be asked for
	 * explicitly; otherwise CUDA invalidates the capture. */
	if (!(flags & CU_EVENT_WAIT_EXTERNAL)) {
		s->cap->invalidated = true;
		return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
	}
	op.u.event.event = ev;
	op.u.event.seq = 0;	/* the latest record when the node runs */
	return session_add(s, &op);
}

bool emu_capture_wait(struct CUstream_st *s, struct CUevent_st *ev,
		      unsigned flags, CUresult *res)
{
	struct emu_capture *c = NULL;
	bool captured = false;

	if (!atomic_load(&s->capturing) && !atomic_load(&ev->in_capture))
		return false;
	pthread_mutex_lock(&cap_lock);
	if (atomic_load(&ev->in_capture))
		c = session_find(ev->cap_id);
	if (c) {
		*res = wait_captured(s, ev, c);
		captured = true;
	} else if (s->cap) {
		*res = wait_external(s, ev, flags);
		captured = true;
	}
	pthread_mutex_unlock(&cap_lock);
	return captured;
}

void emu_capture_forget_event(struct CUevent_st *ev)
{
	if (!atomic_load(&ev->in_capture))
		return;
	pthread_mutex_lock(&cap_lock);
	atomic_store(&ev->in_capture, false);
	ev->cap_id = 0;
	ev->cap_deps.n = 0;
	pthread_mutex_unlock(&cap_lock);
}

bool emu_capture_forbid(struct CUstream_st *s)
{
	bool capturing;

	if (!atomic_load(&s->capturing))
		return false;
	pthread_mutex_lock(&cap_lock);
	capturing = s->cap != NULL;
	if (capturing)
		s->cap->invalidated = true;
	pthread_mutex_unlock(&cap_lock);
	return capturing;
}

bool emu_capture_implicit(struct CUstream_st *legacy)
{
	struct CUctx_st *ctx = legacy->ctx;
	struct CUstream_st *b;
	bool hit = false;

	pthread_mutex_lock(&cap_lock);
	pthread_mutex_lock(&ctx->streams_lock);
	for (b = ctx->blocking; b; b = b->ctx_next)
		if (b->cap) {
			b->cap->invalidated = true;
			hit = true;
		}
	pthread_mutex_unlock(&ctx->streams_lock);
	pthread_mutex_unlock(&cap_lock);
	return hit;
}

void emu_capture_leave(struct CUstream_st *s)
{
	struct emu_capture *c;

	if (!atomic_load(&s->capturing))
		return;
	pthread_mutex_lock(&cap_lock);
	c = s->cap;
	if (c) {
		c->invalidated = true;
		c->streams[s->lane] = NULL;
		if (c->origin == s)
			c->origin = NULL;
		stream_detach(s);
	}
	pthread_mutex_unlock(&cap_lock);
}

/* ---- end of capture ---- */

/* True when every other stream's pending work flows into the origin's
 * dependency set, i.e. each fork was joined back before the end. */
static bool all_joined(struct emu_capture *c)
{
	struct CUgraph_st *g = c->graph;
	struct CUstream_st *t;
	bool *reach, ok = true;
	size_t i, k;

	reach = calloc(g->n ? g->n : 1, sizeof(*reach));
	if (!reach)
		return false;
	for (i = 0; i < c->origin->deps.n; i++)
		reach[c->origin->deps.idx[i]] = true;
	/* Dependencies point to earlier nodes: one backward sweep marks
	 * every ancestor. */
	for (i = g->n; i-- > 0;)
		if (reach[i])
			for (k = 0; k < g->nodes[i].ndeps; k++)
				reach[g->nodes[i].deps[k]] = true;
	for (i = 0; i < c->nstreams && ok; i++) {
		t = c->streams[i];
		if (!t || t == c->origin)
			continue;
		for (k = 0; k < t->deps.n; k++)
			if (!reach[t->deps.idx[k]])
				ok = false;
	}
	free(reach);
	return ok;
}

static CUresult end_capture(struct CUstream_st *s, CUgraph *phGraph)
{
	struct emu_capture *c = s->cap;

	if (!c)
		return CUDA_ERROR_ILLEGAL_STATE;
	if (c->origin != s)
		return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
	if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
	    !pthread_equal(c->thread, pthread_self()))
		return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
	if (!c->invalidated && !all_joined(c)) {
		session_end(c);
		return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
	}
	if (c->invalidated) {
		session_end(c);
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	if (emu_graph_publish(c->graph) != CUDA_SUCCESS) {
		session_end(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*phGraph = c->graph;
	c->graph = NULL;	/* handed to the caller */
	session_end(c);
	return CUDA_SUCCESS;
}

/* ---- capture modes ---- */

/* Whether capture c forbids the calling thread's unsafe calls. */
static bool forbids(const struct emu_capture *c)
{
	if (pthread_equal(c->thread, pthread_self()))
		return c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
	return c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
	       thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

CUresult emu_capture_unsafe_call(void)
{
	CUresult res = CUDA_SUCCESS;
	struct emu_capture *c;

	if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED || !atomic_load(&nsessions))
		return CUDA_SUCCESS;
	pthread_mutex_lock(&cap_lock);
	for (c = sessions; c; c = c->next)
		if (forbids(c)) {
			c->invalidated = true;
			res = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
	pthread_mutex_unlock(&cap_lock);
	return res;
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	CUresult res = emu_check_init();
	CUstreamCaptureMode old = thread_mode;

	if (res != CUDA_SUCCESS)
		return res;
	if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
		      *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
		      *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
		return CUDA_ERROR_INVALID_VALUE;
	thread_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

/* ---- API ---- */

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	struct emu_capture *c = NULL;
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
	    mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
	    mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
		res = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	/* The legacy default stream cannot be captured. */
	if (s->is_null) {
		res = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		goto out;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		res = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	res = emu_graph_new(&c->graph);
	if (res != CUDA_SUCCESS)
		goto out;
	c->mode = mode;
	c->thread = pthread_self();
	c->origin = s;

	pthread_mutex_lock(&cap_lock);
	if (s->cap) {
		res = CUDA_ERROR_ILLEGAL_STATE;
	} else if (session_join(c, s) < 0) {
		res = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		c->id = next_id++;
		c->next = sessions;
		sessions = c;
		atomic_fetch_add(&nsessions, 1);
		c = NULL;
	}
	pthread_mutex_unlock(&cap_lock);
out:
	if (c) {
		if (c->graph)
			emu_graph_put(c->graph);
		free(c->streams);
		free(c);
	}
	emu_stream_put(s);
	return res;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	struct CUstream_st *s;
	CUresult res;

	res = emu_stream_get(hStream, &s);
	if (res != CUDA_SUCCESS)
		return res;
	if (!phGraph) {
		res = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	*phGraph = NULL;
	pthread_mutex_lock(&cap_lock);
	res = end_capture(s, phGraph);
	pthread_mutex_unlock(&cap_lock);
out:
	emu_stream_put(s);
	return res;
}

static CUstreamCaptureStatus capture_status(struct CUstream_st *s)
{
	if (!s->cap)
		return CU_STREAM_CAPTURE_STATUS_NONE;
	return s->cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED :
	       CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

CUresult cuStreamIsCapturing(CUstream hStream,
			     CUstreamCaptureStatus *captureStatus)
{
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);

	if (res != CUDA_SUCCESS)
		return res;
	if (captureStatus) {
		pthread_mutex_lock(&cap_lock);
		*captureStatus = capture_status(s);
		pthread_mutex_unlock(&cap_lock);
	} else {
		res = CUDA_ERROR_INVALID_VALUE;
	}
	emu_stream_put(s);
	return res;
}

/* Node handles handed out are opaque: index + 1, never dereferenced. */
static CUresult fill_info_deps(struct CUstream_st *s, size_t n)
{
	CUgraphNode *nodes = calloc(n ? n : 1, sizeof(*nodes));
	CUgraphEdgeData *edges = calloc(n ? n : 1, sizeof(*edges));
	size_t i;

	if (!nodes || !edges) {
		free(nodes);
		free(edges);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (i = 0; i < n; i++)
		nodes[i] = (CUgraphNode)(uintptr_t)(s->deps.idx[i] + 1);
	free(s->info_nodes);
	free(s->info_edges);
	s->info_nodes = nodes;
	s->info_edges = edges;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_v3(CUstream hStream,
				   CUstreamCaptureStatus *captureStatus_out,
				   cuuint64_t *id_out, CUgraph *graph_out,
				   const CUgraphNode **dependencies_out,
				   const CUgraphEdgeData **edgeData_out,
				   size_t *numDependencies_out)
{
	struct CUstream_st *s;
	CUresult res = emu_stream_get(hStream, &s);
	CUstreamCaptureStatus st;
	size_t n;

	if (res != CUDA_SUCCESS)
		return res;
	if (!captureStatus_out) {
		res = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	pthread_mutex_lock(&cap_lock);
	st = capture_status(s);
	*captureStatus_out = st;
	n = st == CU_STREAM_CAPTURE_STATUS_NONE ? 0 : s->deps.n;
	if (st != CU_STREAM_CAPTURE_STATUS_NONE) {
		if (id_out)
			*id_out = s->cap->id;
		if (graph_out)
			*graph_out = s->cap->graph;
	}
	if (dependencies_out || edgeData_out)
		res = fill_info_deps(s, n);
	if (res == CUDA_SUCCESS && dependencies_out)
		*dependencies_out = n ? s->info_nodes : NULL;
	if (res == CUDA_SUCCESS && edgeData_out)
		*edgeData_out = n ? s->info_edges : NULL;
	if (numDependencies_out)
		*numDependencies_out = n;
	pthread_mutex_unlock(&cap_lock);
out:
	emu_stream_put(s);
	return res;
}

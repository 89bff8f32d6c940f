/* group.c - per-thread group state and its execution at the outermost end. */
#include "group.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "comm.h"
#include "comm_split.h"
#include "crew.h"
#include "estimate.h"
#include "log.h"
#include "order.h"
#include "stage.h"

/* A user stream that waits, at the end, for a communicator's work, which
 * ended on `tail`. */
struct join {
	struct cxls_comm *c;
	CUstream user, tail;
};

struct held_coll {
	struct cxls_comm *c;
	struct cxls_coll k;
	uint64_t capture;       /* its stream's at the call (stage.h), 0: none */
	size_t order;           /* call order, for a stable sort */
};

struct queued_p2p {
	struct cxls_comm *c;
	struct cxls_p2p p;
	CUstream stream;
	size_t order;           /* call order, for a stable sort */
};

enum split_state { SPLIT_QUEUED, SPLIT_PUBLISHED, SPLIT_DONE };

struct split {
	struct cxls_comm *c;
	uint32_t n;
	int color, key;
	ncclComm_t *newcomm;
	int blocking;           /* the child's */
	enum split_state state;
};

/* One per thread, as in NCCL: a group belongs to the thread that opened
 * it. */
struct group {
	int depth;
	struct held_coll *colls;
	size_t n_coll, cap_coll;
	struct queued_p2p *p2p;
	size_t n_p2p, cap_p2p;
	struct cxls_comm **inits;
	size_t n_init, cap_init;
	struct split *splits;
	size_t n_split, cap_split;
	struct join *joins;
	size_t n_join, cap_join;
	ncclResult_t err;       /* the last call that failed in the group */
};

static _Thread_local struct group grp;

/* A group's end may run each communicator's part on a thread of its own
 * (run_parallel); they add to the group's joins under this lock. */
static pthread_mutex_t joins_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local struct group *joins_to;

int cxls_group_depth(void)
{
	return grp.depth;
}

void cxls_group_start(void)
{
	grp.depth++;
}

ncclResult_t cxls_group_check(ncclResult_t r)
{
	if (grp.depth && r != ncclSuccess && r != ncclInProgress)
		grp.err = r;
	return r;
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	size_t ncap = *cap ? *cap * 2 : 16;
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*arr, ncap * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Stream `to` goes on once `from` reached this point.  The event is made
 * in from's context: one thread may drive ranks on several devices, and
 * the group end may find another device's context current, where CUDA
 * would refuse to record it on `from`. */
static int stream_after(const struct cxls_cuda *cu, CUstream to, CUstream from)
{
	CUcontext ctx = NULL;
	CUevent ev;
	int bad, entered;

	if (to == from)
		return 0;
	if (cu->StreamGetCtx(from, &ctx) != CUDA_SUCCESS ||
	    (entered = cxls_cuda_ctx_enter(cu, ctx)) < 0)
		return -1;
	bad = cu->EventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS;
	if (!bad) {
		bad = cu->EventRecord(ev, from) != CUDA_SUCCESS ||
		      cu->StreamWaitEvent(to, ev, 0) != CUDA_SUCCESS;
		cu->EventDestroy(ev);
	}
	cxls_cuda_ctx_leave(cu, entered);
	return bad ? -1 : 0;
}

static void reset(void)
{
	free(grp.colls);
	free(grp.p2p);
	free(grp.inits);
	free(grp.splits);
	free(grp.joins);
	memset(&grp, 0, sizeof(grp));
}

/* As NCCL: the streams given to one communicator within a group are all
 * uncaptured or all captured by the same graph, which is what lets its
 * calls run on its own streams, one after the other. */
static ncclResult_t same_capture(struct cxls_comm *c, uint64_t capture)
{
	for (size_t i = 0; i < grp.n_coll; i++)
		if (grp.colls[i].c == c && grp.colls[i].capture != capture) {
			cxls_comm_set_error(c, "streams given to a communicator within a group "
					       "must be all uncaptured or all captured by the "
					       "same graph");
			return ncclInvalidUsage;
		}
	return ncclSuccess;
}

ncclResult_t cxls_group_hold(struct cxls_comm *c, const struct cxls_coll *k)
{
	uint64_t capture = cxls_stage_capture(&c->st, k->stream);
	struct held_coll *h;
	ncclResult_t r;

	if ((r = same_capture(c, capture)))
		return r;
	if (grow((void **)&grp.colls, &grp.cap_coll, grp.n_coll, sizeof(*grp.colls))) {
		cxls_comm_set_error(c, "ncclGroupStart: out of memory holding a collective");
		return ncclSystemError;
	}
	h = &grp.colls[grp.n_coll];
	h->order = grp.n_coll++;
	h->c = c;
	h->k = *k;
	h->k.held = 1;
	h->capture = capture;
	return ncclSuccess;
}

ncclResult_t cxls_group_p2p(struct cxls_comm *c, const struct cxls_p2p *p, CUstream stream)
{
	struct queued_p2p *q;

	if (!grp.depth) {
		int entered = cxls_comm_ctx_enter(c);
		ncclResult_t r = cxls_p2p_run(c, p, 1, stream);

		cxls_comm_ctx_leave(c, entered);
		return r;
	}
	if (grow((void **)&grp.p2p, &grp.cap_p2p, grp.n_p2p, sizeof(*grp.p2p)))
		return ncclSystemError;
	q = &grp.p2p[grp.n_p2p];
	q->c = c;
	q->p = *p;
	q->stream = stream;
	q->order = grp.n_p2p++;
	return ncclSuccess;
}

ncclResult_t cxls_group_add_init(struct cxls_comm *c)
{
	if (grow((void **)&grp.inits, &grp.cap_init, grp.n_init, sizeof(*grp.inits)))
		return ncclSystemError;
	grp.inits[grp.n_init++] = c;
	return ncclSuccess;
}

ncclResult_t cxls_group_add_split(struct cxls_comm *c, uint32_t n, int color, int key,
				  ncclComm_t *newcomm, int blocking)
{
	if (grow((void **)&grp.splits, &grp.cap_split, grp.n_split, sizeof(*grp.splits))) {
		cxls_comm_set_error(c, "ncclCommSplit: out of memory: split %u abandoned", n);
		return ncclSystemError;
	}
	grp.splits[grp.n_split++] =
		(struct split){ c, n, color, key, newcomm, blocking, SPLIT_QUEUED };
	return ncclSuccess;
}

int cxls_group_defer_join(struct cxls_comm *c, CUstream user, CUstream tail)
{
	struct group *g = joins_to ? joins_to : &grp;
	int rc = 0;

	pthread_mutex_lock(&joins_lock);
	for (size_t i = 0; i < g->n_join; i++)
		if (g->joins[i].c == c && g->joins[i].user == user)
			goto out;
	rc = grow((void **)&g->joins, &g->cap_join, g->n_join, sizeof(*g->joins));
	if (!rc)
		g->joins[g->n_join++] = (struct join){ c, user, tail };
out:
	pthread_mutex_unlock(&joins_lock);
	return rc;
}

/* The group's result so far and one more part's: the first error, else
 * ncclInProgress when a nonblocking child is still under way. */
static ncclResult_t merge(ncclResult_t ret, ncclResult_t r)
{
	if (ret != ncclSuccess && ret != ncclInProgress)
		return ret;
	return r == ncclSuccess ? ret : r;
}


/* Before a communicator's first collective of the group, its user stream
 * waits for the other user streams of that communicator's collectives,
 * as NCCL's launch stream waits for every stream of the group: all of
 * them start after everything the caller put on any of those streams
 * before ncclGroupEnd (later ones follow the first on the
 * communicator's streams). */
static int streams_meet(size_t first)
{
	struct cxls_comm *c = grp.colls[first].c;
	CUstream main = grp.colls[first].k.stream;

	for (size_t j = first + 1; j < grp.n_coll; j++)
		if (grp.colls[j].c == c && stream_after(c->st.cu, main, grp.colls[j].k.stream))
			return -1;
	return 0;
}

/* Whether each stream of a communicator's calls is still in the capture
 * it was in at its call: a capture that began or ended in between would
 * record the call on this rank, or run it at once, where the peers did
 * the other. */
static int captures_held(size_t first)
{
	struct cxls_comm *c = grp.colls[first].c;

	for (size_t j = first; j < grp.n_coll; j++)
		if (grp.colls[j].c == c &&
		    cxls_stage_capture(&c->st, grp.colls[j].k.stream) != grp.colls[j].capture)
			return 0;
	return 1;
}

/* Before a communicator's first collective of the group; none of its
 * calls may run when this fails: the peers would pair them one operation
 * off, so failing it tells them, and raises the doorbells they wait on. */
static ncclResult_t comm_ready(size_t first)
{
	struct cxls_comm *c = grp.colls[first].c;

	if (!captures_held(first)) {
		cxls_comm_set_error(c, "ncclGroupEnd: a stream's capture began or ended after "
				       "its call: the communicator's calls cannot run");
		cxls_comm_fail(c, CXLS_ABORT_TIMEOUT, ncclInvalidUsage);
		return ncclInvalidUsage;
	}
	if (streams_meet(first)) {
		cxls_comm_set_error(c, "ncclGroupEnd: cannot join the group's streams");
		cxls_comm_fail(c, CXLS_ABORT_TIMEOUT, ncclUnhandledCudaError);
		return ncclUnhandledCudaError;
	}
	return ncclSuccess;
}

static int first_of_comm(size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (grp.colls[j].c == grp.colls[i].c)
			return 0;
	return 1;
}

/* The group's collectives, in call order, each on its communicator's own
 * streams, forked from its user stream here (run_joins brings the user
 * streams back): no communicator's work waits behind another's.  Before
 * the sends and receives, as NCCL orders them. */
static ncclResult_t run_colls(const struct cxls_comm *only)
{
	ncclResult_t ret = ncclSuccess;

	for (size_t i = 0; i < grp.n_coll; i++) {
		struct held_coll *h = &grp.colls[i];
		ncclResult_t r;
		int entered;

		if (only && h->c != only)
			continue;
		if (h->c->magic != CXLS_COMM_MAGIC) {
			CXLS_WARN("ncclGroupEnd: communicator %p was destroyed inside the group: "
				  "its collective is dropped", (void *)h->c);
			ret = merge(ret, ncclInvalidUsage);
			continue;
		}
		if (!cxls_comm_usable(h->c, &r)) {
			ret = merge(ret, r);
			continue;
		}
		entered = cxls_comm_ctx_enter(h->c);
		if (!first_of_comm(i) || (r = comm_ready(i)) == ncclSuccess)
			r = h->k.enqueue(h->c, &h->k);
		cxls_comm_ctx_leave(h->c, entered);
		ret = merge(ret, r);
	}
	return ret;
}

/* Each user stream waits for the last operation of its communicators,
 * which ended on their write streams (in a capture too: the capture
 * cannot end before its streams joined back; the group's calls of one
 * communicator are all in the one capture, or all eager, so one pair). */
static ncclResult_t run_joins(void)
{
	ncclResult_t ret = ncclSuccess;

	for (size_t i = 0; i < grp.n_join; i++) {
		struct cxls_comm *c = grp.joins[i].c;

		if (c->magic != CXLS_COMM_MAGIC)
			continue; /* destroyed inside the group: nothing to wait for */
		if (stream_after(c->st.cu, grp.joins[i].user, grp.joins[i].tail)) {
			cxls_comm_set_error(c, "ncclGroupEnd: the user stream cannot wait for "
					       "the group's collectives");
			ret = ncclUnhandledCudaError;
		}
	}
	return ret;
}

/* Communicators by job key, the same on every rank; 0 for ranks of one
 * communicator. */
static int key_cmp(const struct cxls_comm *c, const struct cxls_comm *d)
{
	if (c->key[0] != d->key[0])
		return c->key[0] < d->key[0] ? -1 : 1;
	if (c->key[1] != d->key[1])
		return c->key[1] < d->key[1] ? -1 : 1;
	return 0;
}

/* The same, ranks of one communicator in this process by address. */
static int comm_cmp(const struct cxls_comm *c, const struct cxls_comm *d)
{
	int r = key_cmp(c, d);

	return r || c == d ? r : (c < d ? -1 : 1);
}

/* Sends and receives by communicator, calls in order. */
static int by_comm(const void *a, const void *b)
{
	const struct queued_p2p *x = a, *y = b;
	int r = comm_cmp(x->c, y->c);

	return r ? r : (x->order < y->order ? -1 : x->order > y->order);
}

/* Collectives likewise. */
static int by_comm_coll(const void *a, const void *b)
{
	const struct held_coll *x = a, *y = b;
	int r = comm_cmp(x->c, y->c);

	return r ? r : (x->order < y->order ? -1 : x->order > y->order);
}

/* The group's calls on one communicator may name several streams: the
 * first one runs the group after the others reach it, and they continue
 * after it is done. */
static int streams_join(struct cxls_comm *c, const struct queued_p2p *q, size_t n, int after)
{
	CUstream main = q[0].stream;

	for (size_t i = 1; i < n; i++)
		if (after ? stream_after(c->st.cu, q[i].stream, main) :
			    stream_after(c->st.cu, main, q[i].stream))
			return -1;
	return 0;
}

/* One communicator's part of the group: its calls q[0..n), their copy as
 * p2p ops, and the batch that runs them. */
struct part {
	struct queued_p2p *q;
	size_t n;
	struct cxls_p2p *ops;
	struct cxls_p2p_batch b;
	ncclResult_t r;         /* the first error; parts in error are skipped */
};

/* Where the group's collectives of c ended (its work streams), or NULL. */
static CUstream colls_tail(const struct cxls_comm *c)
{
	const struct group *g = joins_to ? joins_to : &grp;
	CUstream tail = NULL;

	pthread_mutex_lock(&joins_lock);
	for (size_t i = 0; i < g->n_join && !tail; i++)
		if (g->joins[i].c == c)
			tail = g->joins[i].tail;
	pthread_mutex_unlock(&joins_lock);
	return tail;
}

/* The sends and receives of c start after c's collectives of the group,
 * wherever those ran, as NCCL orders a group's work: in a capture nothing
 * else orders them (eager, the done event does). */
static void part_begin(struct part *pt)
{
	struct cxls_comm *c = pt->q[0].c;
	CUstream tail = colls_tail(c);

	if (!cxls_comm_usable(c, &pt->r))
		return;
	pt->ops = malloc(pt->n * sizeof(*pt->ops));
	if (!pt->ops) {
		pt->r = ncclSystemError;
		return;
	}
	for (size_t i = 0; i < pt->n; i++)
		pt->ops[i] = pt->q[i].p;
	if ((tail && stream_after(c->st.cu, pt->q[0].stream, tail)) ||
	    streams_join(c, pt->q, pt->n, 0)) {
		/* the peers run theirs: failing it tells them */
		cxls_comm_set_error(c, "ncclGroupEnd: cannot join the group's streams");
		cxls_comm_fail(c, CXLS_ABORT_TIMEOUT, ncclUnhandledCudaError);
		pt->r = ncclUnhandledCudaError;
	} else {
		pt->r = cxls_p2p_begin(&pt->b, c, pt->ops, (int)pt->n, pt->q[0].stream);
	}
}

/* The group's sends and receives as one part per communicator (by job
 * key, the same order on every rank); NULL when there are none, or out of
 * memory (*np then says how many there should have been). */
static struct part *make_parts(size_t *np)
{
	struct part *parts;

	*np = grp.n_p2p;
	if (!grp.n_p2p || !(parts = calloc(grp.n_p2p, sizeof(*parts))))
		return NULL;
	qsort(grp.p2p, grp.n_p2p, sizeof(*grp.p2p), by_comm);
	*np = 0;
	for (size_t i = 0, j; i < grp.n_p2p; i = j, (*np)++) {
		for (j = i; j < grp.n_p2p && grp.p2p[j].c == grp.p2p[i].c; j++)
			;
		parts[*np].q = &grp.p2p[i];
		parts[*np].n = j - i;
	}
	return parts;
}

static void part_enqueue(struct part *pt)
{
	int entered;

	if (pt->r != ncclSuccess)
		return;
	entered = cxls_comm_ctx_enter(pt->q[0].c);
	pt->r = cxls_p2p_enqueue(&pt->b);
	cxls_comm_ctx_leave(pt->q[0].c, entered);
}

/* Ends the part and brings its streams back; returns its result. */
static ncclResult_t part_end(struct part *pt)
{
	int entered = cxls_comm_ctx_enter(pt->q[0].c);

	if (pt->r == ncclSuccess)
		pt->r = cxls_p2p_end(&pt->b);
	if (pt->r == ncclSuccess && streams_join(pt->q[0].c, pt->q, pt->n, 1))
		pt->r = ncclUnhandledCudaError;
	cxls_comm_ctx_leave(pt->q[0].c, entered);
	free(pt->ops);
	pt->ops = NULL;
	return pt->r;
}

static void part_start(struct part *pt)
{
	int entered = cxls_comm_ctx_enter(pt->q[0].c);

	part_begin(pt);
	cxls_comm_ctx_leave(pt->q[0].c, entered);
}

/* Every communicator's work is forked before any is enqueued, and joined
 * after all are: a rank never finishes one communicator's part before
 * starting another's, so no order of the peers' groups can deadlock. */
static ncclResult_t run_p2p(struct part *parts, size_t np)
{
	ncclResult_t ret = ncclSuccess, r;

	for (size_t k = 0; k < np; k++)
		part_start(&parts[k]);
	for (size_t k = 0; k < np; k++)
		part_enqueue(&parts[k]);
	for (size_t k = 0; k < np; k++)
		if ((r = part_end(&parts[k])) != ncclSuccess && ret == ncclSuccess)
			ret = r;
	return ret;
}

/* One communicator's part of the group's end on a thread of its own (a
 * crew thread, crew.h, or this one), one phase at a time: its
 * collectives in call order, then, once every communicator's are
 * enqueued, its sends and receives (forked and joined on this thread,
 * all before and after all, as run_p2p does). */
enum phase { PHASE_COLLS, PHASE_P2P };

struct worker {
	struct group *group;
	struct cxls_comm *c;
	struct part *part;      /* NULL: none */
	enum phase phase;
	int busy;               /* has something to enqueue in this phase */
	struct cxls_crew_member *crew; /* NULL: this thread */
	ncclResult_t r;         /* over both phases */
};

static int has_colls(const struct cxls_comm *c)
{
	for (size_t i = 0; i < grp.n_coll; i++)
		if (grp.colls[i].c == c)
			return 1;
	return 0;
}

/* Whether w has anything to enqueue in its phase. */
static int has_work(const struct worker *w)
{
	return w->phase == PHASE_COLLS ? has_colls(w->c) : w->part != NULL;
}

/* w's phase, on this thread; its log lines name w's rank meanwhile.  Its
 * peers stop waiting for its rings at the end (order.h). */
static void run_worker(struct worker *w)
{
	int was = cxls_log_rank();

	if (w->c->magic == CXLS_COMM_MAGIC)
		cxls_log_set_rank(cxls_comm_known_rank(w->c));
	if (w->phase == PHASE_COLLS)
		w->r = merge(w->r, run_colls(w->c));
	else if (w->part)
		part_enqueue(w->part); /* started and ended by run_parallel */
	cxls_order_done(w->c);
	cxls_log_set_rank(was);
}

static void worker_main(void *arg)
{
	struct worker *w = arg;

	/* the group's calls, as the parent holds them (written before the
	 * threads started, read only); its joins go to the parent's group */
	grp.colls = w->group->colls;
	grp.n_coll = w->group->n_coll;
	joins_to = w->group;
	run_worker(w);
	joins_to = NULL;
	memset(&grp, 0, sizeof(grp));
}

/* The group's communicators, each once, with its part. */
static size_t make_workers(struct worker *w, struct part *parts, size_t np)
{
	size_t n = 0, k;

	for (size_t i = 0; i < grp.n_coll; i++) {
		for (k = 0; k < n && w[k].c != grp.colls[i].c; k++)
			;
		if (k == n)
			w[n++] = (struct worker){ .group = &grp, .c = grp.colls[i].c };
	}
	for (size_t p = 0; p < np; p++) {
		for (k = 0; k < n && w[k].c != parts[p].q[0].c; k++)
			;
		if (k == n)
			w[n++] = (struct worker){ .group = &grp, .c = parts[p].q[0].c };
		w[k].part = &parts[p];
	}
	return n;
}

/* Whether the group must run on this thread, unordered (order.h): a
 * call being captured (a capture submits nothing until its graph is
 * launched, and the streams' capture mode is this thread's), or one on
 * the per-thread default stream, which is this thread's own. */
static int needs_this_thread(const struct part *parts, size_t np)
{
	for (size_t i = 0; i < grp.n_coll; i++)
		if (grp.colls[i].capture || grp.colls[i].k.stream == CU_STREAM_PER_THREAD)
			return 1;
	for (size_t p = 0; p < np; p++)
		for (size_t i = 0; i < parts[p].n; i++)
			if (parts[p].q[i].stream == CU_STREAM_PER_THREAD ||
			    (parts[p].q[i].c->magic == CXLS_COMM_MAGIC &&
			     cxls_stage_capture(&parts[p].q[i].c->st, parts[p].q[i].stream)))
				return 1;
	return 0;
}

/* Pairs the ranks of one communicator among the group's communicators
 * (order.h); returns the highest cxls_order_pair answer. */
static int pair_local_ranks(struct worker *w, size_t n)
{
	int most = 0, r;

	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (w[i].c->magic == CXLS_COMM_MAGIC && w[j].c->magic == CXLS_COMM_MAGIC &&
			    (r = cxls_order_pair(w[i].c, w[j].c)) > most)
				most = r;
	return most;
}

/* Rounds past which a communicator's part of the group might fill a
 * stream's queue (a round is a few stream operations; drivers do not
 * document their depth, and launches blocked at about a thousand). */
#define QUEUE_ROUNDS 64

/* Whether some communicator's part runs more rounds than that, roughly:
 * its collectives' bytes over all ranks, its sends' and receives'. */
static int parts_large(const struct worker *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct cxls_comm *c = w[i].c;
		uint64_t rounds = 0;

		if (c->magic != CXLS_COMM_MAGIC)
			continue;
		for (size_t k = 0; c->lay.chunk && k < grp.n_coll; k++)
			if (grp.colls[k].c == c)
				rounds += 1 + grp.colls[k].k.bytes * (uint64_t)c->nranks /
						      c->lay.chunk;
		for (size_t k = 0; c->lay.p2p_chunk && w[i].part && k < w[i].part->n; k++)
			rounds += 1 + w[i].part->q[k].p.bytes / c->lay.p2p_chunk;
		if (rounds > QUEUE_ROUNDS)
			return 1;
	}
	return 0;
}

static void unpair(struct worker *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (w[i].c->magic == CXLS_COMM_MAGIC)
			cxls_order_clear(w[i].c);
}

/* One phase of w[0..n), ranks of one communicator, each on its own
 * thread: the first with work on this one, the others on the crew's, all
 * hired before any starts.  One that gets no crew thread runs here too;
 * then none waits for another's rings (one would wait for a part this
 * thread has yet to enqueue), and this thread's run one after the other. */
static void run_batch(struct worker *w, size_t n, enum phase ph)
{
	struct cxls_crew_wait done = CXLS_CREW_WAIT_INIT;
	size_t failed = 0, here = n;

	for (size_t i = 0; i < n; i++) {
		w[i].phase = ph;
		w[i].busy = has_work(&w[i]);
		w[i].crew = NULL;
		cxls_order_begin(w[i].c);
	}
	for (size_t i = 0; i < n; i++)
		if (!w[i].busy)
			cxls_order_done(w[i].c); /* nothing of it to wait for */
		else if (here == n)
			here = i;
	for (size_t i = here + 1; i < n; i++)
		if (w[i].busy)
			failed += !(w[i].crew = cxls_crew_hire());
	if (failed) {
		CXLS_WARN("ncclGroupEnd: no thread for each communicator: this process's ranks "
			  "are enqueued one after the other, which a GPU may hang on");
		unpair(w, n);
	}
	for (size_t i = 0; i < n; i++)
		if (w[i].crew)
			cxls_crew_run(w[i].crew, worker_main, &w[i], &done);
	for (size_t i = here; i < n; i++)
		if (!w[i].crew && w[i].busy)
			run_worker(&w[i]);
	cxls_crew_wait(&done);
}

static int by_worker_comm(const void *a, const void *b)
{
	return comm_cmp(((const struct worker *)a)->c, ((const struct worker *)b)->c);
}

/* The group's communicators in job-key order, as on every rank (run_ops),
 * one phase after the other: the ranks of one communicator in parallel,
 * communicators one after the other. */
static ncclResult_t run_parallel(struct worker *w, size_t n)
{
	ncclResult_t ret = ncclSuccess;

	qsort(w, n, sizeof(*w), by_worker_comm);
	for (enum phase ph = PHASE_COLLS; ph <= PHASE_P2P; ph++) {
		for (size_t i = 0; ph == PHASE_P2P && i < n; i++)
			if (w[i].part)
				part_start(w[i].part);
		for (size_t i = 0, j; i < n; i = j) {
			for (j = i + 1; j < n && !key_cmp(w[i].c, w[j].c); j++)
				;
			run_batch(&w[i], j - i, ph);
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (w[i].part)
			w[i].r = merge(w[i].r, part_end(w[i].part));
		ret = merge(ret, w[i].r);
	}
	return ret;
}

/* The group's collectives, then its sends and receives, in one order on
 * every rank; on a thread per communicator when the group holds ranks of
 * one communicator on one context, or large parts of several ranks of
 * one communicator (order.h). */
static ncclResult_t run_ops(void)
{
	size_t np = 0, n = 0;
	struct part *parts = make_parts(&np);
	struct worker *w = NULL;
	ncclResult_t r;
	int pair = 0;

	/* A GPU may serve a context's streams in submission order (with
	 * CUDA_DEVICE_MAX_CONNECTIONS=1, as Megatron-LM sets it): two ranks
	 * that submit two communicators' operations in opposite orders would
	 * each wait for the other's second.  NCCL completes a group whatever
	 * its call order, so every rank submits the communicators in one
	 * order; a communicator's own calls keep theirs. */
	if (grp.n_coll > 1)
		qsort(grp.colls, grp.n_coll, sizeof(*grp.colls), by_comm_coll);
	if (np && !parts) {
		r = run_colls(NULL);
		return merge(r, ncclSystemError);
	}
	if (grp.n_coll + np > 1 && (w = calloc(grp.n_coll + np, sizeof(*w))))
		n = make_workers(w, parts, np);
	/* pairing first: it only compares pointers, where the capture check
	 * asks the driver, and most groups have no pair */
	if (n > 1 && (pair = pair_local_ranks(w, n)) && (pair == 2 || parts_large(w, n)) &&
	    !needs_this_thread(parts, np)) {
		r = run_parallel(w, n);
		unpair(w, n);
	} else {
		unpair(w, n); /* paired, but to run here: no waits on this thread */
		/* two statements: the collectives first, on every rank */
		r = run_colls(NULL);
		r = merge(r, run_p2p(parts, np));
	}
	free(w);
	free(parts);
	return r;
}

/* Whether an earlier split of the group on the same communicator is still
 * to be exchanged. */
static int split_behind(size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (grp.splits[j].c == grp.splits[i].c && grp.splits[j].state != SPLIT_DONE)
			return 1;
	return 0;
}

/* One split per communicator: publishes this rank's part of each
 * communicator's first pending split, so that no exchange then waits for
 * a part this thread has still to publish (one thread may split several
 * ranks of a parent), then exchanges them.  Returns 0 when none was left. */
static int split_round(ncclResult_t *ret)
{
	int any = 0;

	for (size_t i = 0; i < grp.n_split; i++) {
		struct split *sp = &grp.splits[i];

		if (sp->state != SPLIT_QUEUED || split_behind(i))
			continue;
		sp->state = SPLIT_PUBLISHED;
		if (sp->c->magic == CXLS_COMM_MAGIC) /* else destroyed inside the group */
			cxls_comm_split_publish(sp->c, sp->n, sp->color, sp->key);
		any = 1;
	}
	for (size_t i = 0; i < grp.n_split; i++) {
		struct split *sp = &grp.splits[i];

		if (sp->state != SPLIT_PUBLISHED)
			continue;
		sp->state = SPLIT_DONE;
		if (sp->c->magic == CXLS_COMM_MAGIC)
			*ret = merge(*ret, cxls_comm_split_end(sp->c, sp->n, sp->color, sp->key,
							       sp->newcomm, sp->blocking));
	}
	return any;
}

/* A nonblocking parent's splits run in the background, in call order
 * (each in its turn, comm_split.c), and the end returns ncclInProgress,
 * as NCCL's nonblocking group does. */
static ncclResult_t launch_splits(void)
{
	ncclResult_t ret = ncclSuccess;

	for (size_t i = 0; i < grp.n_split; i++) {
		struct split *sp = &grp.splits[i];

		if (sp->c->magic != CXLS_COMM_MAGIC || sp->c->blocking)
			continue; /* a rounds' split, or destroyed in the group */
		sp->state = SPLIT_DONE;
		ret = merge(ret, cxls_comm_split_async(sp->c, sp->n, sp->color, sp->key,
						       sp->newcomm, sp->blocking));
	}
	return ret;
}

/* In rounds, a communicator's splits one after the other: its record holds
 * two splits' parts (split n in slot n mod 2), so a rank may publish split
 * n + 2 only once every rank read split n, which its exchange of split
 * n + 1 ensures (each rank publishes n + 1 only after it read n), as for
 * splits outside a group.  Publishing them all at the call let a rank done
 * with its group publish a later split over one a slow rank had yet to
 * read (api_check splitgroup2). */
static ncclResult_t run_splits(void)
{
	ncclResult_t ret = launch_splits();

	while (split_round(&ret))
		;
	return ret;
}

/* Inits made blocking by the application finish before the group ends. */
static ncclResult_t wait_inits(void)
{
	struct timespec nap = { 0, 500000 };
	ncclResult_t ret = ncclSuccess;

	for (size_t i = 0; i < grp.n_init; i++) {
		struct cxls_comm *c = grp.inits[i];
		ncclResult_t e;

		while (cxls_comm_async_error(c, &e) == ncclSuccess && e == ncclInProgress)
			nanosleep(&nap, NULL);
		c->blocking = 1;
		if (e != ncclSuccess && ret == ncclSuccess)
			ret = e;
	}
	return ret;
}

/* A call of the group failed (cxls_group_check): NCCL drops the whole
 * group and returns the error at its end.  The collectives, sends and
 * receives wait here, so they are dropped; on every rank that made the
 * failing call, so no operation pairs with another that came later.  A
 * rank that did not waits for them until its watchdog's operation
 * timeout.  What was started when called cannot be dropped without
 * leaving the peers waiting: the splits and inits (published) still
 * finish. */
ncclResult_t cxls_group_end(void)
{
	ncclResult_t err = grp.err, r, r2 = ncclSuccess, r3;
	int cancel;

	if (!grp.depth) {
		CXLS_WARN("ncclGroupEnd without ncclGroupStart");
		return ncclInvalidUsage;
	}
	if (--grp.depth)
		return ncclSuccess;
	/* Not cancelled half way: the crew's threads use this stack until
	 * they are done, and an operation cancelled between its start and
	 * its end would hold its communicator's enqueue count for good
	 * (ncclCommDestroy would wait for ever); a write of a warning or a
	 * full stream queue are cancellation points in between. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	/* splits, then inits (theirs too): the group's operations may use
	 * those communicators */
	r = run_splits();
	r = merge(r, wait_inits());
	if (err == ncclSuccess) {
		r2 = run_ops();
	}
	r3 = run_joins();
	reset();
	pthread_setcancelstate(cancel, NULL);
	return merge(err, merge(merge(r, r2), r3));
}

/* One handle's part of a simulated group (held_us()). */
struct part_time {
	struct cxls_comm *c;
	double us;
};

/* Adds us to c's entry of t[0..*n), a new one for a handle not there. */
static void add_time(struct part_time *t, size_t *n, struct cxls_comm *c, double us)
{
	size_t k;

	for (k = 0; k < *n && t[k].c != c; k++)
		;
	if (k == *n)
		t[(*n)++] = (struct part_time){ c, 0 };
	t[k].us += us;
}

static int by_time_comm(const void *a, const void *b)
{
	return comm_cmp(((const struct part_time *)a)->c, ((const struct part_time *)b)->c);
}

/* The pool's time for what the group holds (estimate.h), or 0 (no
 * memory): each handle's calls one after the other; ranks of one
 * communicator that this thread drives run its calls together (the
 * slowest counts); communicators add up, as they share the pool. */
static double held_us(void)
{
	struct part_time *t = malloc((grp.n_coll + grp.n_p2p) * sizeof(*t) + 1);
	size_t n = 0;
	double total = 0;

	if (!t)
		return 0;
	for (size_t i = 0; i < grp.n_coll; i++)
		if (grp.colls[i].c->magic == CXLS_COMM_MAGIC)
			add_time(t, &n, grp.colls[i].c,
				 cxls_coll_estimate_us(grp.colls[i].c, &grp.colls[i].k));
	for (size_t i = 0; i < grp.n_p2p; i++)
		if (grp.p2p[i].c->magic == CXLS_COMM_MAGIC)
			add_time(t, &n, grp.p2p[i].c,
				 cxls_p2p_estimate_us(grp.p2p[i].c, grp.p2p[i].p.bytes));
	qsort(t, n, sizeof(*t), by_time_comm);
	for (size_t i = 0, j; i < n; i = j) {
		double most = t[i].us;

		for (j = i + 1; j < n && !key_cmp(t[i].c, t[j].c); j++)
			most = t[j].us > most ? t[j].us : most;
		total += most;
	}
	free(t);
	return total;
}

ncclResult_t cxls_group_discard(double *us)
{
	ncclResult_t err = grp.err, r;

	if (!grp.depth)
		return ncclInvalidUsage;
	if (--grp.depth)
		return ncclSuccess;
	/* the collectives, sends and receives are dropped; communicators
	 * created or split in the group still finish (the peers' parts are
	 * under way) */
	r = run_splits();
	r = merge(r, wait_inits());
	if (us)
		*us += held_us();
	reset();
	return merge(err, r);
}

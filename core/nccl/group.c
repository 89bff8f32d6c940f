/* group.c - per-thread group state and its execution at the outermost end. */
#include "group.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "comm.h"
#include "comm_split.h"
#include "log.h"
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
	h = &grp.colls[grp.n_coll++];
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
	for (size_t i = 0; i < grp.n_join; i++)
		if (grp.joins[i].c == c && grp.joins[i].user == user)
			return 0;
	if (grow((void **)&grp.joins, &grp.cap_join, grp.n_join, sizeof(*grp.joins)))
		return -1;
	grp.joins[grp.n_join++] = (struct join){ c, user, tail };
	return 0;
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
static ncclResult_t run_colls(void)
{
	ncclResult_t ret = ncclSuccess;

	for (size_t i = 0; i < grp.n_coll; i++) {
		struct held_coll *h = &grp.colls[i];
		ncclResult_t r;
		int entered;

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

/* Communicators by job key (the same on every rank), calls in order. */
static int by_comm(const void *a, const void *b)
{
	const struct queued_p2p *x = a, *y = b;

	if (x->c != y->c) {
		if (x->c->key[0] != y->c->key[0])
			return x->c->key[0] < y->c->key[0] ? -1 : 1;
		if (x->c->key[1] != y->c->key[1])
			return x->c->key[1] < y->c->key[1] ? -1 : 1;
		return x->c < y->c ? -1 : 1;
	}
	return x->order < y->order ? -1 : x->order > y->order;
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
	for (size_t i = 0; i < grp.n_join; i++)
		if (grp.joins[i].c == c)
			return grp.joins[i].tail;
	return NULL;
}

/* The sends and receives of c start after c's collectives of the group,
 * wherever those ran: in a capture nothing else orders them (eager, the
 * done event does), and their replays' barriers would interleave. */
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

/* Every communicator's work is forked before any is enqueued, and joined
 * after all are: a rank never finishes one communicator's part before
 * starting another's, so no order of the peers' groups can deadlock. */
static ncclResult_t run_p2p(void)
{
	ncclResult_t ret = ncclSuccess;
	struct part *parts;
	size_t np = 0;
	int entered;

	if (!grp.n_p2p)
		return ncclSuccess;
	parts = calloc(grp.n_p2p, sizeof(*parts));
	if (!parts)
		return ncclSystemError;
	qsort(grp.p2p, grp.n_p2p, sizeof(*grp.p2p), by_comm);
	for (size_t i = 0, j; i < grp.n_p2p; i = j, np++) {
		for (j = i; j < grp.n_p2p && grp.p2p[j].c == grp.p2p[i].c; j++)
			;
		parts[np].q = &grp.p2p[i];
		parts[np].n = j - i;
		entered = cxls_comm_ctx_enter(parts[np].q[0].c);
		part_begin(&parts[np]);
		cxls_comm_ctx_leave(parts[np].q[0].c, entered);
	}
	for (size_t k = 0; k < np; k++)
		if (parts[k].r == ncclSuccess) {
			entered = cxls_comm_ctx_enter(parts[k].q[0].c);
			parts[k].r = cxls_p2p_enqueue(&parts[k].b);
			cxls_comm_ctx_leave(parts[k].q[0].c, entered);
		}
	for (size_t k = 0; k < np; k++) {
		entered = cxls_comm_ctx_enter(parts[k].q[0].c);
		if (parts[k].r == ncclSuccess)
			parts[k].r = cxls_p2p_end(&parts[k].b);
		if (parts[k].r == ncclSuccess &&
		    streams_join(parts[k].q[0].c, parts[k].q, parts[k].n, 1))
			parts[k].r = ncclUnhandledCudaError;
		cxls_comm_ctx_leave(parts[k].q[0].c, entered);
		if (parts[k].r != ncclSuccess && ret == ncclSuccess)
			ret = parts[k].r;
		free(parts[k].ops);
	}
	free(parts);
	return ret;
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

	if (!grp.depth) {
		CXLS_WARN("ncclGroupEnd without ncclGroupStart");
		return ncclInvalidUsage;
	}
	if (--grp.depth)
		return ncclSuccess;
	/* splits, then inits (theirs too): the group's operations may use
	 * those communicators */
	r = run_splits();
	r = merge(r, wait_inits());
	if (err == ncclSuccess) {
		r2 = run_colls();
		r2 = merge(r2, run_p2p()); /* after: every rank in one order */
	}
	r3 = run_joins();
	reset();
	return merge(err, merge(merge(r, r2), r3));
}

ncclResult_t cxls_group_discard(void)
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
	reset();
	return merge(err, r);
}

/* comm_split.c - ncclCommSplit and ncclCommShrink of pool communicators.
 *
 * Split: every rank of the parent publishes (color, key) in its rank
 * record and waits until every peer published the same split; each then
 * computes its new rank and size, and the members of a color meet in the
 * pool under a key derived from the parent's key, the split number and
 * the color.  Shrink needs no exchange (the excluded ranks may be dead):
 * ranks keep their order, and the survivors meet under a key derived from
 * the parent's key and the shrink number.  Shrinks have a count of their
 * own: the excluded ranks make none, and a split number that only the
 * survivors advanced would part them from those ranks at the parent's
 * next split.
 *
 * A nonblocking parent's split runs in the background, as NCCL's does
 * (which decides by the parent's config): the call, or the end of the
 * group it was made in, returns ncclInProgress at once; the exchange runs
 * in the child's init thread before its rendezvous (a NOCOLOR rank, which
 * gets no child, in a thread of its own), and the parent reports
 * ncclInProgress until the child is ready, refusing further splits and
 * attribute queries meanwhile, as NCCL's ncclCommEnsureReady.  So one
 * thread may split several ranks of a parent one after the other.
 */
#include "comm_split.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coherence.h"
#include "group.h"
#include "lib_thread.h"
#include "log.h"
#include "proc_id.h"
#include "runtime.h"
#include "uid.h"

/* A split in the background: split n of parent, its turn among the
 * parent's background splits (await_turn), what the child's config says. */
struct cxls_split_job {
	struct cxls_comm *parent;
	uint32_t n, ticket;
	int color, key, blocking;
};

/* Split n takes the record slot of split n - 2, which every rank must
 * have read: each rank publishes a split only after it read the one
 * before, so a rank that read n - 1 knows that all read n - 2.  Splits
 * on the calling thread read before they return; background ones (a
 * group may hold several of one parent) wait here for those launched
 * before them (ticket: how many were launched before), and a split made
 * on the calling thread of a nonblocking parent (a launch that failed)
 * waits for all of them.  Each ends in a bounded time (its exchange has
 * a deadline), so only the parent's release stops a wait.  (A blocking
 * parent's splits never run in the background: nothing to wait for.) */
static int await_turn(struct cxls_comm *c, uint32_t ticket)
{
	struct timespec nap = { 0, 50000 };

	while ((int32_t)(atomic_load(&c->async_splits_read) - ticket) < 0) {
		if (atomic_load(&c->releasing))
			return -1;
		nanosleep(&nap, NULL);
	}
	return 0;
}

/* Publishes our (color, key) for split n. */
static void publish(struct cxls_comm *c, uint32_t n, int color, int key)
{
	struct cxls_rank_rec *me = &c->view.ranks[c->rank];
	int flush = c->pool->flush_mode;

	me->split_color[n % 2] = color;
	me->split_key[n % 2] = key;
	cxls_publish(flush, me, sizeof(*me));
	atomic_store(&me->split_seq, n);
	cxls_publish(flush, me, sizeof(*me));
}

/* Waits until every rank published split n and reads what they did. */
static int gather(struct cxls_comm *c, uint32_t n, int32_t *colors, int32_t *keys)
{
	uint64_t deadline = cxls_now_ns() + (uint64_t)cxls_runtime()->cfg.timeout_init_ms * 1000000ull;
	struct timespec nap = { 0, 50000 };
	int flush = c->pool->flush_mode;

	for (int r = 0; r < c->nranks; r++) {
		struct cxls_rank_rec *p = &c->view.ranks[r];

		for (;;) {
			cxls_refresh(flush, p, sizeof(*p));
			if ((int32_t)(atomic_load(&p->split_seq) - n) >= 0)
				break;
			if (cxls_now_ns() > deadline || atomic_load(&c->releasing) ||
			    cxls_comm_rank_alive(&c->view, (uint32_t)r) == 0)
				return -1;
			nanosleep(&nap, NULL);
		}
		colors[r] = p->split_color[n % 2];
		keys[r] = p->split_key[n % 2];
	}
	return 0;
}

/* A child's key: a deterministic function of what every member knows. */
static void child_key(const struct cxls_comm *c, uint32_t n, int color, uint64_t out[2])
{
	uint64_t in[4] = { c->key[0], c->key[1], n, (uint64_t)(uint32_t)color };

	out[0] = cxls_hash64(in, sizeof(in));
	in[3] ^= 0x5a5a5a5a5a5a5a5aull;
	out[1] = cxls_hash64(in, sizeof(in));
}

/* The child's rank and size are known here, or (job) once its init
 * thread ran the exchange. */
static ncclResult_t make_child(struct cxls_comm *c, uint32_t n, int color, int nranks,
			       int rank, int blocking, struct cxls_split_job *job,
			       ncclComm_t *newcomm)
{
	struct cxls_uid u;
	/* the parent's routing rules, which every member follows already */
	struct cxls_init_args a = {
		.nranks = nranks, .rank = rank, .blocking = blocking, .uid = &u,
		.route = &c->route, .parent_aborted = &c->user_aborted, .split = job,
	};
	struct cxls_comm *child = NULL;
	ncclResult_t r;
	int use_real;

	memset(&u, 0, sizeof(u));
	memcpy(u.pool_uuid, c->pool->geo.uuid, sizeof(u.pool_uuid));
	child_key(c, n, color, u.key);
	c->st.cu->CtxSetCurrent(c->ctx);
	r = cxls_comm_init(&child, &a, &use_real);
	if (r == ncclSuccess || r == ncclInProgress)
		*newcomm = (ncclComm_t)child;
	return r;
}

/* A split or shrink counts itself in c->splitting while it reads the
 * record, unless a destroy or abort began (comm.h: releasing). */
static int split_enter(struct cxls_comm *c)
{
	atomic_fetch_add(&c->splitting, 1);
	if (!atomic_load(&c->releasing))
		return 0;
	atomic_fetch_sub(&c->splitting, 1);
	cxls_comm_set_error(c, "split or shrink of a communicator being destroyed or aborted");
	return -1;
}

static void split_leave(struct cxls_comm *c)
{
	atomic_fetch_sub(&c->splitting, 1);
}

/* Split n after our part of it was published: the exchange, and our rank
 * and size among our color.  Only logs (it may run in the background,
 * where the application's thread may be writing last_error). */
static int place(struct cxls_comm *c, uint32_t n, int color, int key, int *nranks, int *rank)
{
	int32_t colors[CXLS_MAX_RANKS], keys[CXLS_MAX_RANKS];

	if (gather(c, n, colors, keys)) {
		CXLS_WARN("ncclCommSplit: %s split %u of comm %p",
			  atomic_load(&c->releasing) ? "the communicator was aborted or destroyed during" :
						       "not every rank joined",
			  n, (void *)c);
		return -1;
	}
	*nranks = *rank = 0;
	if (color == NCCL_SPLIT_NOCOLOR) {
		CXLS_INFO("comm %p split %u: color NOCOLOR: no communicator", (void *)c, n);
		return 0;
	}
	/* new rank: order by key, then by parent rank, among our color */
	for (int r = 0; r < c->nranks; r++) {
		if (colors[r] != color)
			continue;
		++*nranks;
		if (keys[r] < key || (keys[r] == key && r < c->rank))
			++*rank;
	}
	CXLS_INFO("comm %p split %u: color %d key %d -> rank %d of %d", (void *)c, n, color, key,
		  *rank, *nranks);
	return 0;
}

/* A child made blocking to be ready when the call returns keeps the mode
 * its config asked for (its own children inherit it). */
static void set_mode(ncclComm_t child, int blocking)
{
	if (child)
		((struct cxls_comm *)child)->blocking = blocking;
}

static ncclResult_t exchange(struct cxls_comm *c, uint32_t n, int color, int key,
			     ncclComm_t *newcomm, int blocking)
{
	int nranks, rank;

	if (place(c, n, color, key, &nranks, &rank)) {
		cxls_comm_set_error(c, "ncclCommSplit: split %u failed", n);
		return ncclSystemError;
	}
	if (color == NCCL_SPLIT_NOCOLOR)
		return ncclSuccess;
	return make_child(c, n, color, nranks, rank, blocking, NULL, newcomm);
}

/* Split n (counted in c->splitting, which this ends) on the calling
 * thread, once every background split before it read its exchange.  The
 * child is ready when it returns (a blocking parent's split, as NCCL's),
 * whatever mode its config gives it. */
static ncclResult_t split_here(struct cxls_comm *c, uint32_t n, int color, int key,
			       ncclComm_t *newcomm, int blocking)
{
	ncclResult_t r = ncclInvalidUsage;

	if (await_turn(c, c->async_splits) == 0) {
		publish(c, n, color, key);
		r = exchange(c, n, color, key, newcomm, 1);
		set_mode(*newcomm, blocking);
	} else {
		cxls_comm_set_error(c, "ncclCommSplit: the communicator is being destroyed");
	}
	split_leave(c);
	return r;
}

/* ---- in the background ------------------------------------------------------- */

/* The job's turn, part and exchange; the exchange runs to its end even
 * when the child is released meanwhile, so that the next split may take
 * this one's slot (await_turn).  Then the next one's turn. */
static int job_place(struct cxls_split_job *j, int *nranks, int *rank)
{
	struct cxls_comm *c = j->parent;
	int rc = -1;

	/* after a failed exchange some rank may not have read its split:
	 * its slot is not free, so no later split publishes */
	if (await_turn(c, j->ticket) == 0 && !atomic_load(&c->splits_broken)) {
		publish(c, j->n, j->color, j->key);
		rc = place(c, j->n, j->color, j->key, nranks, rank);
		if (rc)
			atomic_store(&c->splits_broken, 1);
	}
	atomic_fetch_add(&c->async_splits_read, 1);
	split_leave(c);
	return rc;
}

/* The job ended with r: the parent is in progress no more, and fails with
 * it, as NCCL's parent takes its job's result (unless the child was
 * released by the application meanwhile). */
static void job_end(struct cxls_split_job *j, ncclResult_t r, int released)
{
	int ok = ncclSuccess;

	if (r != ncclSuccess && !released)
		atomic_compare_exchange_strong(&j->parent->async_err, &ok, r);
	atomic_fetch_sub(&j->parent->splits_pending, 1);
	free(j);
}

int cxls_comm_split_place(struct cxls_comm *child)
{
	int nranks, rank;

	if (job_place(child->split, &nranks, &rank))
		return -1;
	child->nranks = nranks;
	child->rank = rank;
	return 0;
}

void cxls_comm_split_job_end(struct cxls_comm *child, ncclResult_t r)
{
	job_end(child->split, r, atomic_load(&child->releasing));
	child->split = NULL;
}

static void *nocolor_thread(void *arg)
{
	struct cxls_split_job *j = arg;
	int nranks, rank;

	job_end(j, job_place(j, &nranks, &rank) ? ncclSystemError : ncclSuccess, 0);
	return NULL;
}

/* Starts the job's thread: the child's init thread, which runs the
 * exchange before the rendezvous (rank and size are the exchange's to
 * tell), or for a NOCOLOR rank a thread of its own.  ncclInProgress
 * when it runs (and owns the job). */
static ncclResult_t launch(struct cxls_comm *c, struct cxls_split_job *j, ncclComm_t *newcomm)
{
	pthread_attr_t attr;
	pthread_t t;
	ncclResult_t r;
	int rc;

	if (j->color != NCCL_SPLIT_NOCOLOR) {
		int blocking = j->blocking; /* the job is the thread's once it runs */

		r = make_child(c, j->n, j->color, 0, 0, 0, j, newcomm);
		if (r == ncclInProgress)
			set_mode(*newcomm, blocking);
		return r;
	}
	if (pthread_attr_init(&attr))
		return ncclSystemError;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = cxls_thread_start(&t, &attr, nocolor_thread, j);
	pthread_attr_destroy(&attr);
	return rc ? ncclSystemError : ncclInProgress;
}

ncclResult_t cxls_comm_split_async(struct cxls_comm *c, uint32_t n, int color, int key,
				   ncclComm_t *newcomm, int blocking)
{
	struct cxls_split_job *j;
	ncclResult_t r = ncclSystemError;

	if (split_enter(c))
		return ncclInvalidUsage;
	j = malloc(sizeof(*j));
	if (j) {
		*j = (struct cxls_split_job){ .parent = c, .n = n, .ticket = c->async_splits,
					      .color = color, .key = key, .blocking = blocking };
		/* counted before the thread may end */
		c->async_splits++;
		atomic_fetch_add(&c->splits_pending, 1);
		r = launch(c, j, newcomm);
		if (r == ncclInProgress)
			return r;
		/* no thread took the ticket, and no later one was given out */
		c->async_splits--;
		atomic_fetch_sub(&c->splits_pending, 1);
		free(j);
	}
	/* every rank's split numbers must stay in step: exchange here */
	CXLS_WARN("ncclCommSplit: split %u could not start in the background (error %d): "
		  "exchanging on the calling thread", n, (int)r);
	return split_here(c, n, color, key, newcomm, blocking);
}

/* ---- entry points ------------------------------------------------------------ */

int cxls_comm_split_busy(struct cxls_comm *c)
{
	return atomic_load(&c->splits_pending) != 0;
}

ncclResult_t cxls_comm_split(struct cxls_comm *c, int color, int key, ncclComm_t *newcomm,
			     int blocking)
{
	uint32_t n;

	/* bad arguments are refused before the split counts: every rank's
	 * split numbers must stay in step */
	if (!newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) {
		cxls_comm_set_error(c, "ncclCommSplit: invalid arguments (color %d)", color);
		return ncclInvalidArgument;
	}
	if (cxls_comm_split_busy(c)) {
		cxls_comm_set_error(c, "ncclCommSplit: the communicator's previous split is still "
				       "in progress");
		return ncclInvalidArgument;
	}
	n = ++c->splits;
	*newcomm = NULL;
	/* inside a group the split waits for its end, as with NCCL: one thread
	 * may split several ranks of the parent, whose parts it has not
	 * published yet */
	if (cxls_group_depth() > 0)
		return cxls_group_add_split(c, n, color, key, newcomm, blocking);
	if (!c->blocking)
		return cxls_comm_split_async(c, n, color, key, newcomm, blocking);
	if (split_enter(c))
		return ncclInvalidUsage;
	return split_here(c, n, color, key, newcomm, blocking);
}

void cxls_comm_split_publish(struct cxls_comm *c, uint32_t n, int color, int key)
{
	if (split_enter(c))
		return; /* being released: its exchange fails the same way */
	publish(c, n, color, key);
	split_leave(c);
}

/* A blocking parent's split at its group's end: a blocking child joins
 * the group's inits, which the end waits for; a nonblocking one is left
 * in progress. */
ncclResult_t cxls_comm_split_end(struct cxls_comm *c, uint32_t n, int color, int key,
				 ncclComm_t *newcomm, int blocking)
{
	ncclResult_t r;

	if (split_enter(c))
		return ncclInvalidUsage;
	r = exchange(c, n, color, key, newcomm, 0);
	split_leave(c);
	if (r != ncclInProgress || !blocking)
		return r;
	return cxls_group_add_init((struct cxls_comm *)*newcomm);
}

ncclResult_t cxls_comm_shrink(struct cxls_comm *c, const int *exclude, int nexclude,
			      ncclComm_t *newcomm, int blocking, int abort_parent)
{
	ncclResult_t r;
	int below = 0, in_group;

	/* NCCL 2.28 refuses a NULL list and a count below 1 alike: a shrink
	 * that excludes nobody is no shrink */
	if (!newcomm || !exclude || nexclude < 1 || nexclude >= c->nranks) {
		cxls_comm_set_error(c, "ncclCommShrink: invalid arguments");
		return ncclInvalidArgument;
	}
	for (int i = 0; i < nexclude; i++) {
		if (exclude[i] < 0 || exclude[i] >= c->nranks || exclude[i] == c->rank) {
			cxls_comm_set_error(c, "ncclCommShrink: cannot exclude rank %d", exclude[i]);
			return ncclInvalidArgument;
		}
		for (int j = 0; j < i; j++)
			if (exclude[j] == exclude[i]) {
				cxls_comm_set_error(c, "ncclCommShrink: rank %d listed twice",
						    exclude[i]);
				return ncclInvalidArgument;
			}
		below += exclude[i] < c->rank;
	}
	*newcomm = NULL;
	if (split_enter(c))
		return ncclInvalidUsage;
	if (abort_parent) /* NCCL_SHRINK_ABORT: the parent's work ends first */
		cxls_comm_fail(c, CXLS_ABORT_USER, ncclRemoteError);
	/* inside a group the child's rendezvous runs in the background and a
	 * blocking one completes at the group's end, as with NCCL: one thread
	 * may shrink several ranks of the parent */
	in_group = cxls_group_depth() > 0;
	/* color -2: no split's color, so no split's key */
	r = make_child(c, ++c->shrinks, -2, c->nranks - nexclude, c->rank - below,
		       blocking && !in_group, NULL, newcomm);
	if (in_group && blocking && r == ncclInProgress)
		r = cxls_group_add_init((struct cxls_comm *)*newcomm);
	split_leave(c);
	return r;
}

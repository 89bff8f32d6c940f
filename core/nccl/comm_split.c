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
 */
#include "comm_split.h"

#include <string.h>
#include <time.h>

#include "coherence.h"
#include "group.h"
#include "log.h"
#include "proc_id.h"
#include "runtime.h"
#include "uid.h"

/* Publishes our (color, key) for split number n. */
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

static ncclResult_t make_child(struct cxls_comm *c, uint32_t n, int color, int nranks,
			       int rank, int blocking, ncclComm_t *newcomm)
{
	struct cxls_uid u;
	/* the parent's routing rules, which every member follows already */
	struct cxls_init_args a = {
		.nranks = nranks, .rank = rank, .blocking = blocking, .uid = &u,
		.route = &c->route, .parent_aborted = &c->user_aborted,
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

/* Split n after our part of it was published: the exchange, then the
 * child. */
static ncclResult_t exchange(struct cxls_comm *c, uint32_t n, int color, int key,
			     ncclComm_t *newcomm, int blocking)
{
	int32_t colors[1024], keys[1024];
	int nranks = 0, rank = 0;

	if (gather(c, n, colors, keys)) {
		cxls_comm_set_error(c, "ncclCommSplit: %s split %u",
				    atomic_load(&c->releasing) ? "the communicator was aborted or "
								 "destroyed during" :
								 "not every rank joined",
				    n);
		return ncclSystemError;
	}
	if (color == NCCL_SPLIT_NOCOLOR)
		return ncclSuccess;
	/* new rank: order by key, then by parent rank, among our color */
	for (int r = 0; r < c->nranks; r++) {
		if (colors[r] != color)
			continue;
		nranks++;
		if (keys[r] < key || (keys[r] == key && r < c->rank))
			rank++;
	}
	CXLS_INFO("comm %p split %u: color %d key %d -> rank %d of %d", (void *)c, n, color, key,
		  rank, nranks);
	return make_child(c, n, color, nranks, rank, blocking, newcomm);
}

static ncclResult_t finish(struct cxls_comm *c, uint32_t n, int color, int key,
			   ncclComm_t *newcomm, int blocking)
{
	ncclResult_t r;

	if (split_enter(c))
		return ncclInvalidUsage;
	r = exchange(c, n, color, key, newcomm, blocking);
	split_leave(c);
	return r;
}

ncclResult_t cxls_comm_split(struct cxls_comm *c, int color, int key, ncclComm_t *newcomm,
			     int blocking)
{
	ncclResult_t r;
	uint32_t n;

	/* bad arguments are refused before the split counts: every rank's
	 * split numbers must stay in step */
	if (!newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) {
		cxls_comm_set_error(c, "ncclCommSplit: invalid arguments (color %d)", color);
		return ncclInvalidArgument;
	}
	n = ++c->splits;
	*newcomm = NULL;
	/* inside a group the split waits for its end, as with NCCL: one thread
	 * may split several ranks of the parent, whose parts it has not
	 * published yet */
	if (cxls_group_depth() > 0)
		return cxls_group_add_split(c, n, color, key, newcomm, blocking);
	if (split_enter(c))
		return ncclInvalidUsage;
	publish(c, n, color, key);
	r = exchange(c, n, color, key, newcomm, blocking);
	split_leave(c);
	return r;
}

void cxls_comm_split_publish(struct cxls_comm *c, uint32_t n, int color, int key)
{
	if (split_enter(c))
		return; /* being released: its exchange fails the same way */
	publish(c, n, color, key);
	split_leave(c);
}

/* A blocking child joins the group's inits, which the end waits for; a
 * nonblocking one is left in progress, as a nonblocking group's end. */
ncclResult_t cxls_comm_split_end(struct cxls_comm *c, uint32_t n, int color, int key,
				 ncclComm_t *newcomm, int blocking)
{
	ncclResult_t r = finish(c, n, color, key, newcomm, 0);

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
		       blocking && !in_group, newcomm);
	if (in_group && blocking && r == ncclInProgress)
		r = cxls_group_add_init((struct cxls_comm *)*newcomm);
	split_leave(c);
	return r;
}

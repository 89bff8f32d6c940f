/* sock_epoll_nest.c - sets nested in sets: the children a set notes, and
 * the walk over every set below one.
 *
 * An epoll fd added to a set is a child of it (sock_epoll_ctl.c notes
 * it).  Its pooled members make it ready, which the kernel sees only once
 * they are armed and a doorbell rings; so a wait on a set looks at, and
 * arms, the pooled members of every set below it, at any depth: the
 * kernel nests sets up to EP_MAX_NESTS (4) below the one waited on and
 * refuses loops (ELOOP).  The walk is bounded all the same, by depth and
 * by a list of the sets it has been through (a set reached by two paths
 * is visited once), and no note is made that would close a loop, however
 * long: the shim's notes may lag the kernel's (another process's
 * EPOLL_CTL_DEL on a set shared across fork), so their paths may be
 * longer than the kernel's, and a loop among them would have two threads
 * waiting on two of its sets lock them in opposite orders.
 *
 * Locks: a walk holds the set it starts from and locks each set below
 * while it is there, always downwards, which cannot close a cycle while
 * the notes have none.  The loop check, though, runs for a set the
 * caller holds and looks below the set being noted in it, which with
 * notes that lag the kernel may be above the caller's: it takes no
 * set's lock.  The notes' shape (which set each child entry names) is
 * changed under the set's lock and shape_lock, and the check reads it
 * under shape_lock alone, so check and note are one step (two threads
 * noting A in B and B in A cannot both pass).  shape_lock is the
 * innermost of the shim's locks: none is taken under it.
 */
#include "sock_epoll_int.h"

#include <stdlib.h>

/* Sets one walk remembers, so that a set reached by two paths is visited
 * once; past them (4 levels of EP_CHILDREN are up to 4680 sets) the walk
 * goes on without, bounded by depth and EP_CHILDREN: a set may then be
 * visited twice, which costs time, where one skipped would lose its
 * wake-ups */
#define WALK_SETS 128

/* Error-checking, as the sets' locks: a thread that holds it when a
 * signal handler of its closes an epoll fd goes on instead of waiting
 * for itself (a note is then refused, a drop made unlocked). */
static pthread_mutex_t shape_lock = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static uint64_t shape_walks; /* a loop check's mark; under shape_lock */

static int reaches(struct epset *from, const struct epset *to);

int cxls_ep_child_index(const struct epset *s, int fd)
{
	int i;

	for (i = 0; i < s->nchild && s->child[i].fd != fd; i++)
		;
	return i;
}

int cxls_ep_child_note(struct epset *s, int i, const struct ep_child *ch)
{
	struct epset *was = NULL;

	if (pthread_mutex_lock(&shape_lock))
		return -1;
	if (i == s->nchild && (s->nchild == EP_CHILDREN || reaches(ch->set, s))) {
		pthread_mutex_unlock(&shape_lock);
		return -1;
	}
	cxls_ep_set_hold(ch->set);
	if (i == s->nchild)
		s->nchild++;
	else
		was = s->child[i].set;
	s->child[i] = *ch;
	pthread_mutex_unlock(&shape_lock);
	if (was) /* its last reference may drop its own notes */
		cxls_ep_set_put(was);
	return 0;
}

void cxls_ep_child_drop(struct epset *s, int i)
{
	struct epset *in = s->child[i].set;
	int locked = !pthread_mutex_lock(&shape_lock);

	s->child[i] = s->child[--s->nchild];
	if (locked)
		pthread_mutex_unlock(&shape_lock);
	cxls_ep_set_put(in);
}

void cxls_ep_nest_forked(void)
{
	cxls_ep_lock_init(&shape_lock);
}

struct walk {
	cxls_ep_nest_fn fn;
	void *arg;
	int n;
	const struct epset *seen[WALK_SETS];
};

/* Whether the walk went through in already. */
static int seen(const struct walk *w, const struct epset *in)
{
	for (int i = 0; i < w->n; i++)
		if (w->seen[i] == in)
			return 1;
	return 0;
}

int cxls_ep_child_passes(const struct ep_child *ch)
{
	return (ch->events & EPOLLIN) && !ch->disabled;
}

static int walk_below(struct walk *w, struct epset *s, int depth)
{
	int rc = CXLS_NEST_ON;

	for (int i = 0; i < s->nchild && rc != CXLS_NEST_STOP; i++) {
		struct ep_child *ch = &s->child[i];

		if (!cxls_ep_child_passes(ch) || seen(w, ch->set) ||
		    pthread_mutex_lock(&ch->set->lock)) /* EDEADLK: a loop */
			continue;
		rc = w->fn(ch, w->arg);
		/* a set pruned here may be reached by a note that passes */
		if (rc != CXLS_NEST_PRUNE && w->n < WALK_SETS)
			w->seen[w->n++] = ch->set;
		if (rc == CXLS_NEST_ON && depth < EP_NEST_DEPTH)
			rc = walk_below(w, ch->set, depth + 1);
		pthread_mutex_unlock(&ch->set->lock);
	}
	return rc;
}

int cxls_ep_nest_each(struct epset *s, cxls_ep_nest_fn fn, void *arg)
{
	struct walk w = { .fn = fn, .arg = arg, .n = 1, .seen = { s } };

	return walk_below(&w, s, 1) == CXLS_NEST_STOP;
}

struct on_sets {
	cxls_ep_set_fn fn;
	void *arg;
};

static int on_set(struct ep_child *ch, void *arg)
{
	struct on_sets *o = arg;

	o->fn(ch->set, o->arg);
	return CXLS_NEST_ON;
}

void cxls_ep_nest_sets(struct epset *s, cxls_ep_set_fn fn, void *arg)
{
	struct on_sets o = { fn, arg };

	fn(s, arg);
	cxls_ep_nest_each(s, on_set, &o);
}

/* Puts in on the loop check's stack, grown as needed; -1 when memory is
 * short. */
static int push(struct epset ***stack, size_t *n, size_t *cap, struct epset *in)
{
	if (*n == *cap) {
		size_t more = *cap ? 2 * *cap : 64;
		struct epset **grown = realloc(*stack, more * sizeof(*grown));

		if (!grown)
			return -1;
		*stack = grown;
		*cap = more;
	}
	(*stack)[(*n)++] = in;
	return 0;
}

/* Whether set `to` is `from` or below it by any note, at any depth:
 * noting `from` in `to` would close a loop.  Notes that lag the kernel's
 * can make paths longer than it allows, so no depth bounds this walk;
 * the notes have no loop (each was checked so), and a mark visits every
 * set once.  shape_lock held; no set's lock. */
static int reaches(struct epset *from, const struct epset *to)
{
	struct epset **stack = NULL;
	size_t n = 0, cap = 0;
	uint64_t mark = ++shape_walks;
	int found = from == to;

	from->shape_mark = mark;
	if (push(&stack, &n, &cap, from))
		found = 1; /* cannot tell: say the worst */
	while (n && !found) {
		struct epset *s = stack[--n];

		for (int i = 0; i < s->nchild && !found; i++) {
			struct epset *in = s->child[i].set;

			if (in == to || (in->shape_mark != mark && push(&stack, &n, &cap, in)))
				found = 1; /* a loop, or memory short: the worst */
			in->shape_mark = mark;
		}
	}
	free(stack);
	return found;
}

/* sock_epoll_nest.c - sets nested in sets: the children a set notes, and
 * the walk over every set below one.
 *
 * An epoll fd added to a set is a child of it (sock_epoll_ctl.c notes
 * it).  Its pooled members make it ready, which the kernel sees only once
 * they are armed and a doorbell rings; so a wait on a set looks at, and
 * arms, the pooled members of every set below it, at any depth: the
 * kernel nests sets up to EP_MAX_NESTS (4) below the one waited on and
 * refuses loops (ELOOP).  The walk is bounded all the same, by depth and
 * by a list of the sets it has been through, since the shim's notes of
 * children may lag the kernel's (a set nested beyond EP_CHILDREN).
 */
#include "sock_epoll_int.h"

/* Sets one walk goes through (4 levels of EP_CHILDREN could be more;
 * what is beyond is the kernel's alone, as a set nested past
 * EP_CHILDREN is) */
#define WALK_SETS 64

int cxls_ep_child_index(const struct epset *s, int fd)
{
	int i;

	for (i = 0; i < s->nchild && s->child[i].fd != fd; i++)
		;
	return i;
}

int cxls_ep_child_note(struct epset *s, int i, const struct ep_child *ch)
{
	if (i == s->nchild && s->nchild == EP_CHILDREN)
		return -1;
	cxls_ep_set_hold(ch->set);
	if (i == s->nchild)
		s->nchild++;
	else
		cxls_ep_set_put(s->child[i].set);
	s->child[i] = *ch;
	return 0;
}

void cxls_ep_child_drop(struct epset *s, int i)
{
	struct epset *in = s->child[i].set;

	s->child[i] = s->child[--s->nchild];
	cxls_ep_set_put(in);
}

int cxls_ep_nest_lock(struct epset *in, int depth)
{
	/* error-checking locks: a loop in stale notes says EDEADLK */
	return depth > EP_NEST_DEPTH || pthread_mutex_lock(&in->lock) ? -1 : 0;
}

struct walk {
	cxls_ep_nest_fn fn;
	void *arg;
	int n;
	const struct epset *seen[WALK_SETS];
};

/* Whether the walk went through in already; else it now has. */
static int seen(struct walk *w, const struct epset *in)
{
	for (int i = 0; i < w->n; i++)
		if (w->seen[i] == in)
			return 1;
	if (w->n == WALK_SETS)
		return 1;
	w->seen[w->n++] = in;
	return 0;
}

static int walk_below(struct walk *w, struct epset *s, int depth)
{
	int rc = 0;

	for (int i = 0; i < s->nchild && !rc; i++) {
		struct ep_child *ch = &s->child[i];

		if (seen(w, ch->set) || cxls_ep_nest_lock(ch->set, depth))
			continue;
		rc = w->fn(ch->set, ch->fd, w->arg);
		if (!rc)
			rc = walk_below(w, ch->set, depth + 1);
		pthread_mutex_unlock(&ch->set->lock);
	}
	return rc;
}

int cxls_ep_nest_each(struct epset *s, cxls_ep_nest_fn fn, void *arg)
{
	struct walk w = { .fn = fn, .arg = arg, .n = 1, .seen = { s } };

	return walk_below(&w, s, 1);
}

/* sock_epoll_ready.c - what a set's pooled fds report, from their rings.
 *
 * The kernel cannot tell when a ring has bytes or room, so every
 * epoll_wait looks at the rings itself, in the application's terms: level
 * or edge triggered, one-shot, busy-polling when asked.  It runs for every
 * item at every look, so it is kept small.
 */
#include "sock_epoll_int.h"

#include <sched.h>

#include "proc_id.h"
#include "sock_ref.h"
#include "sock_sys.h"

static short poll_bits(uint32_t ev)
{
	return (short)((ev & (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLRDNORM |
			      EPOLLWRNORM)) & 0xffff);
}

/* Whether reading is over (the peer's FIN or RST, our SHUT_RD): its
 * coming is an edge of EPOLLIN with no new byte, as the kernel's wake-up
 * at a FIN reports EPOLLIN. */
static int end_of(struct cxls_sconn *c)
{
	return cxls_chan_shut_rd(c) || cxls_chan_read_state(c) != CXLS_RD_OPEN;
}

/* Edge triggering: ev when something changed since the last report (new
 * bytes, the end of reading, room freed, an event not reported then),
 * else 0.  An edge reports every event ready now, as the kernel polls the
 * item whole at an edge (new bytes on a writable socket: EPOLLIN |
 * EPOLLOUT), not only the one whose cause changed. */
static uint32_t edge_only(const struct ep_item *it, uint32_t ev)
{
	uint64_t prod = cxls_stream_produced(&it->c->rx), cons = atomic_load(&it->c->tx.hdr->cons);

	if (ev & ~it->last)
		return ev;
	if ((ev & EPOLLIN) && (prod != it->seen_prod || end_of(it->c) != it->seen_end))
		return ev;
	if ((ev & EPOLLOUT) && cons != it->seen_cons)
		return ev;
	return 0;
}

/* The item's report now, honouring edge triggering and one-shot; armed
 * for the sleep whose token arm is (0: only look).  Runs for every item
 * at every look (event loops: every epoll_wait), so kept small enough to
 * be inlined. */
static inline uint32_t item_ready(struct ep_item *it, uint64_t arm)
{
	struct cxls_sconn *c = it->c;
	uint32_t ev;

	if (it->disabled || it->quiet || it->parked || atomic_load(&c->mode) != CXLS_SC_POOL)
		return 0;
	if (it->gone) /* no doorbell of its reaches this set: never armed */
		arm = 0;
	ev = (uint16_t)(arm ? cxls_chan_arm(c, poll_bits(it->events), arm)
			    : cxls_chan_events(c, poll_bits(it->events)));
	/* Armed and idle: its peer rings a doorbell before anything changes,
	 * so the next scans skip it (the cache lines it would cost are the
	 * peer's) until the kernel reports that doorbell. */
	if (arm && !ev)
		it->quiet = 1;
	if (!(it->events & EPOLLET) || !ev)
		return ev;
	return edge_only(it, ev);
}

/* Notes a report: what edge triggering compares against next time, and
 * a one-shot spent. */
static void reported(struct ep_item *it, uint32_t ev)
{
	it->last = ev;
	it->seen_prod = cxls_stream_produced(&it->c->rx);
	it->seen_cons = atomic_load(&it->c->tx.hdr->cons);
	if (it->events & EPOLLET)
		it->seen_end = end_of(it->c);
	if (it->events & EPOLLONESHOT)
		it->disabled = 1;
}

/* Appends ready items to out (at most max - n); returns the new n.  arm:
 * 0 only looks, else arms idle items for the sleep with that token (all
 * the items one sleep arms share it: the peer rings once for them all). */
int cxls_ep_collect(struct epset *s, struct epoll_event *out, int n, int max, uint64_t arm)
{
	int start = s->n ? s->next % s->n : 0;

	for (int i = 0; i < s->n && n < max; i++) {
		int k = (start + i) % s->n;
		struct ep_item *it = &s->items[k];
		uint32_t ev = item_ready(it, arm);

		/* about to be reported: the peer may be gone (cxls_chan_look) */
		if (!it->gone && (ev ? cxls_chan_look(it->c, it->fd) :
				       !it->disabled && !it->parked &&
					       cxls_chan_look_idle(it->c, it->fd)))
			ev = item_ready(it, arm);
		if (!ev)
			continue;
		reported(it, ev);
		out[n].events = ev;
		out[n].data = it->data;
		if (++n == max)
			s->next = k + 1;
	}
	return n;
}

/* What the pooled members of a set have seen so far, of what they watch:
 * bytes in and reading over (EPOLLIN, EPOLLRDHUP), room made (EPOLLOUT).
 * The kernel wakes an outer edge-triggered set at each of these, ready
 * members or not, and for nothing a member does not watch (a one shot
 * spent, a deleted one); a mark that moved is such an edge. */
static void add_marks(struct epset *in, void *mark)
{
	uint64_t *m = mark;

	for (int j = 0; j < in->n; j++) {
		const struct ep_item *it = &in->items[j];
		struct cxls_sconn *c = it->c;

		/* a connect or a meeting under way has no rings yet */
		if (it->disabled || it->parked || it->gone ||
		    atomic_load(&c->mode) != CXLS_SC_POOL)
			continue;
		if (it->events & (EPOLLIN | EPOLLRDHUP))
			*m += cxls_stream_produced(&c->rx) + ((uint64_t)end_of(c) << 40);
		if (it->events & EPOLLOUT)
			*m += atomic_load(&c->tx.hdr->cons);
	}
}

/* The mark of set in (locked) and of the sets below it. */
static uint64_t child_mark(struct epset *in)
{
	uint64_t m = 0;

	cxls_ep_nest_sets(in, add_marks, &m);
	return m;
}

/* A one shot the shim reported is spent in the kernel too (its flags
 * left, as the kernel leaves a fired one): else the kernel reported it
 * again at the next doorbell below it.  s's epoll fd: kfd. */
static void spend_in_kernel(const struct epset *s, const struct ep_child *ch)
{
	struct epoll_event e = { .events = ch->events & (EPOLLONESHOT | EPOLLET), .data = ch->data };

	if (s->kfd >= 0)
		sys_epoll_ctl(s->kfd, EPOLL_CTL_MOD, ch->fd, &e);
}

/* Whether the outer registration lets a ready inner set be reported now
 * (it passes, cxls_ep_child_passes()): edge-triggered only on an edge. */
static int child_reports(const struct epset *s, struct ep_child *ch, uint64_t mark)
{
	if ((ch->events & EPOLLET) && mark == ch->mark)
		return 0;
	ch->mark = mark;
	ch->disabled = (ch->events & EPOLLONESHOT) != 0;
	if (ch->disabled)
		spend_in_kernel(s, ch);
	return 1;
}

void cxls_ep_child_woke(struct ep_child *ch, struct sleeping *z)
{
	if (pthread_mutex_lock(&ch->set->lock))
		return;
	if (ch->events & EPOLLET)
		ch->mark = child_mark(ch->set);
	cxls_ep_sleeping_rang_set(ch->set, z);
	pthread_mutex_unlock(&ch->set->lock);
	if (ch->events & EPOLLONESHOT)
		ch->disabled = 1;
}

/* Whether a pooled member of in is ready (a look: nothing armed). */
static int any_ready(struct epset *in)
{
	for (int j = 0; j < in->n; j++)
		if (item_ready(&in->items[j], 0))
			return 1;
	return 0;
}

static int arm_below(struct ep_child *ch, void *arm)
{
	for (int j = 0; j < ch->set->n; j++)
		item_ready(&ch->set->items[j], *(uint64_t *)arm);
	return CXLS_NEST_ON;
}

/* A set below makes the one that notes it ready when a pooled member of
 * it is, or of a set below it in turn; through an edge-triggered note
 * only when something changed since that set's own wait last reported
 * it (else the kernel's outer sets would not wake either). */
static int ready_below(struct ep_child *ch, void *arg)
{
	(void)arg;
	if ((ch->events & EPOLLET) && child_mark(ch->set) == ch->mark)
		return CXLS_NEST_PRUNE;
	return any_ready(ch->set) ? CXLS_NEST_STOP : CXLS_NEST_ON;
}

/* Whether set `in` (locked) has a pooled member ready, its own or one of
 * a set below it (cxls_ep_nest_each()).  Only a look: nothing is armed
 * (cxls_ep_collect_all() arms) nor reported (that is the sets' own
 * epoll_waits' to do). */
static int members_ready(struct epset *in)
{
	return any_ready(in) || cxls_ep_nest_each(in, ready_below, NULL);
}

int cxls_sock_epoll_polled_ready(struct epset *in)
{
	int ready;

	pthread_mutex_lock(&in->lock);
	/* the poller sleeps on no member's doorbell: every member is looked
	 * at, quiet or not (a doorbell another thread read leaves it quiet) */
	cxls_ep_unquiet(in);
	ready = members_ready(in);
	pthread_mutex_unlock(&in->lock);
	return ready;
}

/* Nested sets whose pooled members are ready, reported as the inner epoll
 * fd (EPOLLIN). */
static int collect_children(struct epset *s, struct epoll_event *out, int n, int max)
{
	for (int i = 0; i < s->nchild && n < max; i++) {
		struct ep_child *ch = &s->child[i];
		uint64_t mark;
		int ready;

		if (!cxls_ep_child_passes(ch) ||
		    pthread_mutex_lock(&ch->set->lock)) /* EDEADLK: held here */
			continue;
		ready = members_ready(ch->set);
		mark = ready && (ch->events & EPOLLET) ? child_mark(ch->set) : 0;
		pthread_mutex_unlock(&ch->set->lock);
		if (ready && child_reports(s, ch, mark)) {
			out[n].events = EPOLLIN;
			out[n].data = ch->data;
			n++;
		}
	}
	return n;
}

/* Everything ready in s and its children, into out after its first n
 * (at most max in all).  arm: as in cxls_ep_collect(); below s, exactly
 * the members cxls_ep_sleep_set() counted the sleep in on are armed (the
 * same walk), before the children are looked at. */
int cxls_ep_collect_all(struct epset *s, struct epoll_event *out, int n, int max, uint64_t arm)
{
	n = cxls_ep_collect(s, out, n, max, arm);
	if (arm)
		cxls_ep_nest_each(s, arm_below, &arm);
	return collect_children(s, out, n, max);
}

/* Spins on the set's own items for the longest busy-poll window among
 * them (policy sock.busy_poll_us); what became ready, or 0. */
int cxls_ep_busy(struct epset *s, struct epoll_event *out, int max)
{
	uint32_t us = 0;
	uint64_t end;
	int n = 0;

	for (int i = 0; i < s->n; i++)
		if (s->items[i].c->busy_us > us)
			us = s->items[i].c->busy_us;
	if (!us)
		return 0;
	end = cxls_now_ns() + (uint64_t)us * 1000;
	do {
		n = cxls_ep_collect(s, out, 0, max, 0);
		if (!n)
			sched_yield(); /* the peer may be waiting for this core */
	} while (!n && cxls_now_ns() < end);
	return n;
}

/* sock_epoll_wait.c - epoll_wait through a set the shim follows.
 *
 * Rounds of: look at the rings, spin if busy-poll says so, arm, then
 * sleep in the kernel on the doorbells and the plain fds together, and
 * sort what the kernel said (the shim's tags from the application's own
 * events).  Connects in flight and meetings under way are converted here
 * when they settle.
 */
#include "sock_epoll_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#include "proc_id.h"
#include "sock_meet.h"
#include "sock_sigwin.h"
#include "sock_sys.h"

/* A connect in flight or a meeting under way reported kev (its connect
 * finished, the peer's doorbell or its bytes came), or its meeting window
 * closed (kev 0): one look, never a wait (an event loop waiting for one peer
 * holds up all the others, which may hold up that peer in turn: ab, haproxy
 * and nginx in a chain).  Pooled, or still meeting: the doorbell registration
 * (the joining peer rings once), nothing for the application yet (its rings
 * say, cxls_ep_collect()); still connecting, or plain TCP from now on (the
 * registration the application's, the item dropped): kev in *out for the
 * application.  1 when *out holds an event.  Only for an item not pooled yet:
 * a pooled one has no event for the application here, and the plain branch
 * would give its registration away (repool()). */
static int convert(int epfd, struct epset *s, struct ep_item *it, uint32_t kev,
		   struct epoll_event *out)
{
	int mode = cxls_sock_look(it->fd);
	struct epoll_event e;

	if (mode == CXLS_SC_POOL || mode == CXLS_SC_PENDING) {
		if (!it->kpooled) {
			e = cxls_ep_tagged(it->fd, it->c, it->events);
			cxls_ep_kernel_has(it, &e,
					   sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e) == 0);
		}
		return 0;
	}
	out->events = kev & (it->events | EPOLLERR | EPOLLHUP);
	out->data = it->data;
	/* a one-shot reported here is spent, as the kernel's (tagged) is */
	if (out->events && (it->events & EPOLLONESHOT))
		it->disabled = 1;
	if (mode == CXLS_SC_CONNECTING)
		return out->events != 0;
	/* plain TCP from now on: the kernel reports it as the app asked
	 * (nothing, once the application deleted it) */
	if (it->parked) {
		sys_epoll_ctl(epfd, EPOLL_CTL_DEL, it->fd, NULL);
		cxls_ep_drop_item(s, it);
		return 0;
	}
	if (it->disabled) {
		/* a spent one-shot: the kernel's registration is left spent;
		 * the application's EPOLL_CTL_MOD, to the kernel now, re-arms
		 * it (a MOD here gave it a second event unasked) */
		cxls_ep_drop_item(s, it);
		return out->events != 0;
	}
	e.events = it->events;
	e.data = it->data;
	sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e);
	cxls_ep_drop_item(s, it);
	return out->events != 0;
}

/* The earlier of two times, 0 meaning none. */
static uint64_t sooner(uint64_t a, uint64_t b)
{
	return !a || (b && b < a) ? b : a;
}

/* Item i of s, a meeting under way or one a call on its fd ended with
 * plain TCP (its kernel registration still the doorbells'), looked at if
 * its time came: when it is to be looked at next (0: never, it is
 * decided), and *dropped when it left s (the last item took place i). */
static uint64_t look_item(int epfd, struct epset *s, int i, uint64_t now, int *dropped)
{
	struct ep_item *it = &s->items[i];
	struct epoll_event ev;
	int n = s->n;

	*dropped = 0;
	if (atomic_load(&it->c->mode) == CXLS_SC_PENDING && it->look_at > now)
		return it->look_at;
	convert(epfd, s, it, 0, &ev);
	if (s->n < n) {
		*dropped = 1;
		return 0;
	}
	if (atomic_load(&it->c->mode) != CXLS_SC_PENDING)
		return 0;
	return it->look_at = cxls_sock_next_look(it->c, now);
}

static uint64_t own_meetings_due(int epfd, struct epset *s)
{
	uint64_t now = 0, next = 0;
	int dropped;

	for (int i = 0; i < s->n; i++) {
		int mode = atomic_load(&s->items[i].c->mode);

		if (s->items[i].gone || (mode != CXLS_SC_PENDING && mode != CXLS_SC_TCP))
			continue;
		if (!now)
			now = cxls_now_ns();
		next = sooner(next, look_item(epfd, s, i, now, &dropped));
		i -= dropped;
	}
	return next;
}

static int nested_meetings_due(struct ep_child *ch, void *next)
{
	*(uint64_t *)next = sooner(*(uint64_t *)next, own_meetings_due(ch->fd, ch->set));
	return CXLS_NEST_ON;
}

/* Meetings under way in s and the sets below it are looked at when their
 * time comes (convert(), cxls_sock_next_look(): a joining peer rings, a
 * refusing one, a peer that never came or another thread of ours that
 * settles it do not), and items whose meeting a call on their fd ended
 * with plain TCP get the application's registration; the nearest look
 * to come, 0 when none.  s locked. */
static uint64_t meetings_due(int epfd, struct epset *s)
{
	uint64_t next = own_meetings_due(epfd, s);

	cxls_ep_nest_each(s, nested_meetings_due, &next);
	return next;
}

/* A pooled item whose kernel registration is still its connect's
 * (registered while connecting, pooled by a read or write since): that
 * one reports EPOLLOUT for ever, the doorbell one does not.  Made for the
 * item's own connection and only while fd still names it in the fd table:
 * after a dup and a close of the item's fd (or a connect(AF_UNSPEC)) the
 * number names no followed socket or another one, cxls_sock_use() would
 * say NULL and convert() took that for plain TCP, writing the event
 * through its NULL out and dropping the item under the caller. */
static void repool(int epfd, struct ep_item *it)
{
	struct cxls_sconn *now = cxls_fdtab_get(it->fd);
	struct epoll_event e;

	if (now == it->c) {
		e = cxls_ep_tagged(it->fd, it->c, it->events);
		cxls_ep_kernel_has(it, &e, sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e) == 0);
	}
	if (now)
		cxls_sconn_put(now);
}

/* A tagged event of a pooled item: doorbells, or FIN/RST.  What the
 * application sees comes from the rings (cxls_ep_collect()), not from this
 * event: the item is no longer quiet, and its doorbells are left for
 * cxls_ep_wake_set() when this thread slept counted (z), else read here. */
static void doorbell_event(int epfd, struct ep_item *it, struct sleeping *z)
{
	it->quiet = 0;
	if (!it->kpooled && !it->disabled && !it->parked)
		repool(epfd, it);
	if (it->parked) /* nobody sleeps on it here: read them */
		cxls_chan_drain(it->c, it->fd);
	else if (z)
		cxls_ep_sleeping_rang(z, it->fd);
	else
		cxls_chan_drain(it->c, it->fd);
	if (!it->kedge && cxls_chan_tcp_ended(it->c)) {
		struct epoll_event e = cxls_ep_tagged(it->fd, it->c, it->events);

		it->kedge = sys_epoll_ctl(epfd, EPOLL_CTL_MOD, it->fd, &e) == 0;
	}
}

/* The nested set noted with data d in s, or NULL (the application's
 * data: two registrations may share it, the first is taken). */
static struct ep_child *child_of(struct epset *s, uint64_t d)
{
	for (int k = 0; k < s->nchild; k++)
		if (s->child[k].data.u64 == d)
			return &s->child[k];
	return NULL;
}

/* Sorts the kernel's answer in place (m events): the application's own
 * registrations stay, the shim's tags go, a connect in flight's becoming
 * the application's event (convert()).  How many stay; s locked. */
static int sort_kernel(int epfd, struct epset *s, struct epoll_event *ev, int m,
		       struct sleeping *z)
{
	int keep = 0;

	for (int i = 0; i < m; i++) {
		struct ep_item *it;
		uint64_t d = ev[i].data.u64;

		if ((d & TAG_MASK) != TAG) {
			struct ep_child *ch = child_of(s, d);

			if (ch)
				cxls_ep_child_woke(ch, z);
			ev[keep++] = ev[i];
			continue;
		}
		it = cxls_ep_find_item(s, (int)(uint32_t)d);
		if (!it)
			continue; /* removed while the kernel reported it */
		if (atomic_load(&it->c->mode) == CXLS_SC_POOL)
			doorbell_event(epfd, it, z);
		else if (convert(epfd, s, it, ev[i].events, &ev[keep]))
			keep++;
	}
	return keep;
}

/* Is ev the shim's report of a nested set (collect_children())? */
static int child_report(struct epset *s, const struct epoll_event *ev)
{
	return child_of(s, ev->data.u64) != NULL;
}

/* A nested set reported in ev[0..n) and again in ev[n..n+m) (by the
 * shim, then the kernel; or, when the kernel went first, the other way
 * round): keep the first.  How many of the second part stay. */
static int drop_reported_children(struct epset *s, struct epoll_event *ev, int n, int m)
{
	int keep = n;

	for (int i = n; i < n + m; i++) {
		int dup = 0;

		for (int j = 0; j < n && !dup; j++)
			dup = ev[i].data.u64 == ev[j].data.u64 && child_report(s, &ev[j]);
		if (!dup)
			ev[keep++] = ev[i];
	}
	return keep - n;
}

/* One epoll_wait through the set.  s is locked throughout, except while
 * the kernel sleeps; z lives across rounds (its array is reused). */
struct ep_wait {
	struct epset *s;
	struct epoll_event *ev;
	int max;
	int timeout_ms;
	uint64_t deadline; /* timeout_ms > 0: cxls_now_ns() at which it ends */
	uint64_t meet_due; /* the nearest look at a meeting to come, or 0 */
	const sigset_t *mask;
	struct sleeping *z; /* the sockets this round sleeps on */
	struct cxls_sigwin sig; /* signals between the sleeps (sock_sigwin.h) */
};

/* A doorbell swallowed by another process holding the same socket would
 * leave an item quiet for ever: every 64th wait looks at them all. */
static void unquiet_now_and_then(struct epset *s)
{
	if ((++s->calls & 63) == 0)
		for (int i = 0; i < s->n; i++)
			s->items[i].quiet = 0;
}

/* Nothing was ready: counts this thread as a sleeper of every pooled socket
 * of the set and its children (cxls_ep_sleep_set()), then arms them under one
 * fresh token and looks again (the store-then-check half of the doorbell
 * handshake).  What is ready now goes to ev. */
static int arm(struct ep_wait *w)
{
	uint64_t tok = cxls_chan_token(); /* fresh for every sleep */

	cxls_ep_sleep_set(w->s, w->z);
	return cxls_ep_collect_all(w->s, w->ev, 0, w->max, tok);
}

/* A gone item wakes no sleep (fd_closing()): a sleep with one looks at
 * the rings this often. */
#define GONE_LOOK_MS 10

/* How long the kernel may sleep: what is left of the timeout, and one
 * slice at most while counted as a sleeper (sock_chan.h). */
static int sleep_ms(const struct ep_wait *w)
{
	int ms = w->timeout_ms < 0 ? -1 : 0;

	if (w->timeout_ms > 0) {
		uint64_t now = cxls_now_ns();

		ms = now >= w->deadline ? 0 : (int)((w->deadline - now + 999999) / 1000000);
	}
	if (w->z->n) {
		int slice = cxls_ep_sleeping_slice_ms(w->z);

		if (ms < 0 || ms > slice)
			ms = slice;
	}
	if (w->z->gone && (ms < 0 || ms > GONE_LOOK_MS))
		ms = GONE_LOOK_MS;
	if (w->meet_due) {
		uint64_t now = cxls_now_ns();
		int due = now >= w->meet_due ? 0 : (int)((w->meet_due - now + 999999) / 1000000);

		if (ms < 0 || ms > due)
			ms = due;
	}
	return ms;
}

/* The kernel's part: plain fds, doorbells, connects in flight, written
 * after the n events found so far.  Never holds the set while asleep:
 * other threads may change it, or close its fd (then the set's copy of
 * it is slept on, kfd).  The kernel's count, or -1 with errno. */
static int kernel_wait(struct ep_wait *w, int n, int ms, const sigset_t *mask)
{
	int m, err, kfd = w->s->kfd;

	if (n >= w->max) {
		w->s->kernel_owed = 1;
		return 0;
	}
	pthread_mutex_unlock(&w->s->lock);
	m = sys_epoll_pwait(kfd, w->ev + n, w->max - n, ms, mask);
	err = errno;
	pthread_mutex_lock(&w->s->lock);
	/* closed between our look at kfd and the kernel: nothing yet, the
	 * next round sleeps on the copy */
	if (m < 0 && err == EBADF && w->s->kfd != kfd && w->s->kfd >= 0)
		m = 0;
	errno = err;
	return m;
}

/* After the kernel returned m events behind the n found before it: sorts
 * them, gives the sleeper entries back (armed: this round counted itself
 * in cxls_ep_sleep_set()), and when nothing came of it all looks at the items
 * once more (a doorbell makes its item ready in the rings, not in ev).
 * How many events in all. */
static int collect_woken(struct ep_wait *w, int n, int m, int armed)
{
	struct epset *s = w->s;

	m = sort_kernel(s->kfd, s, w->ev + n, m, armed ? w->z : NULL);
	if (armed) {
		if (cxls_ep_wake_set(w->z) && !m && !n)
			sched_yield(); /* their doorbells are other sleepers' to read */
		cxls_ep_unquiet(s); /* awake: requests withdrawn (sock_chan.c) */
	}
	n += drop_reported_children(s, w->ev, n, m);
	if (!n)
		n = cxls_ep_collect(s, w->ev, 0, w->max, 0);
	return n;
}

/* The last wait gave every slot to pooled items: this one asks the
 * kernel first, without waiting (sort_kernel() reads the doorbells among
 * its events).  What it reported for the application; *asked set. */
static int kernel_first(struct ep_wait *w, int *asked)
{
	int m;

	if (!w->s->kernel_owed)
		return 0;
	w->s->kernel_owed = 0;
	*asked = 1;
	m = kernel_wait(w, 0, 0, w->mask);
	return m > 0 ? sort_kernel(w->s->kfd, w->s, w->ev, m, NULL) : 0;
}

/* One round: look (the kernel first when it is owed a turn); on the first
 * round spin if busy-poll says so; arm; then the kernel (asleep only when
 * nothing was found, not again when it was just asked); then what woke
 * it.  Events (> 0), none yet (0), or -1 with errno. */
static int wait_round(struct ep_wait *w, int round)
{
	int n, k, m, armed = 0, asked = 0;

	w->meet_due = meetings_due(w->s->kfd, w->s);
	k = round == 0 ? kernel_first(w, &asked) : 0;
	n = cxls_ep_collect_all(w->s, w->ev, k, w->max, 0);
	/* a nested set the kernel reported first goes once */
	n = k + drop_reported_children(w->s, w->ev, k, n - k);
	if (!n && round == 0)
		n = cxls_ep_busy(w->s, w->ev, w->max);
	if (!n) {
		cxls_sigwin_sleep(&w->sig);
		n = arm(w);
		armed = 1;
	}
	if (asked && n)
		m = 0;
	else if (n) /* a look: signals come in as the call's mask says */
		m = kernel_wait(w, n, 0, w->mask);
	else
		m = kernel_wait(w, 0, sleep_ms(w), cxls_sigwin_mask(&w->sig, w->mask));
	if (m < 0) {
		int err = errno;

		if (armed)
			cxls_ep_wake_set(w->z);
		errno = err;
		return n ? n : -1;
	}
	return collect_woken(w, n, m, armed);
}

/* Rounds until events or the timeout.  epoll_wait is a cancellation
 * point, but the kernel waits here are raw system calls, which a deferred
 * cancel does not interrupt: a pending one acts between rounds (within a
 * wait slice), where the set is locked and no socket asleep; wait_end
 * gives back what the wait holds. */
static int wait_rounds(struct ep_wait *w)
{
	int n;

	for (int round = 0;; round++) {
		pthread_testcancel();
		n = wait_round(w, round);
		if (n || w->timeout_ms == 0 || (w->timeout_ms > 0 && cxls_now_ns() >= w->deadline))
			return n;
	}
}

/* Also a cancelled thread's cleanup: its signal mask goes back first,
 * before the application's own cleanups run.  The last waiter of a set
 * whose fd was closed under it lets its items go. */
static void wait_end(void *arg)
{
	struct ep_wait *w = arg;
	int last = --w->s->waiters == 0 && w->s->closed;

	cxls_sigwin_end(&w->sig);
	cxls_ep_set_unlock(w->s);
	cxls_ep_sleeping_fini(w->z);
	if (last)
		cxls_ep_orphans_sweep();
}

int cxls_sock_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout_ms,
			 const sigset_t *mask)
{
	struct sleeping z; /* not zeroed: its array is written before it is read */
	struct ep_wait w = { NULL, ev, max, timeout_ms, 0, 0, mask, &z, CXLS_SIGWIN_INIT };
	volatile int n; /* for setjmp's sake: a cancelled thread never reads it */
	int err;

	if (max <= 0)
		return -2;
	w.s = cxls_ep_set_lock(epfd, 0);
	if (!w.s)
		return -2;
	if (!w.s->n && !w.s->nchild) {
		cxls_ep_set_unlock(w.s);
		return -2;
	}
	cxls_ep_sleeping_init(&z);
	w.s->waiters++; /* a close of epfd keeps the epoll file for us */
	if (timeout_ms > 0)
		w.deadline = cxls_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	unquiet_now_and_then(w.s);
	pthread_cleanup_push(wait_end, &w);
	n = wait_rounds(&w);
	pthread_cleanup_pop(0);
	err = errno;
	wait_end(&w);
	errno = err;
	return n;
}

/* Whether fd's registration in epfd is edge-triggered already, as the
 * kernel says (/proc/self/fdinfo): a MOD queues the ready file again, so
 * one made at every event would report it for ever. */
static int kernel_edge(int epfd, int fd)
{
	struct cxls_ep_kregs k = CXLS_EP_KREGS_INIT;
	int edge = 0;

	cxls_ep_kregs_load(&k, epfd);
	for (int i = 0; i < k.n; i++)
		if (k.v[i].tfd == fd)
			edge = (k.v[i].events & EPOLLET) != 0;
	cxls_ep_kregs_free(&k);
	return edge;
}

/* A tag in a set this process does not follow: the shim's registration
 * of a pooled socket in an epoll file inherited across exec (the earlier
 * image's items went with its memory; a process forked from it may
 * still wake by the registration, which therefore stays).  No event for
 * the application, which never registered it.  When fd names that
 * socket here, its doorbells are read, as a wait that did not sleep on
 * it reads them (doorbell_event()), and once its FIN or RST came the
 * registration is made edge-triggered, as any process's next look at it
 * would: else their lasting readiness woke every wait on the file again
 * and again (2 s of CPU in a 2 s wait). */
static void foreign_tag(int epfd, int fd)
{
	struct cxls_sconn *c = cxls_fdtab_get(fd);
	struct epoll_event e;

	if (c && atomic_load(&c->mode) == CXLS_SC_POOL) {
		cxls_chan_drain(c, fd);
		if (cxls_chan_tcp_ended(c) && !kernel_edge(epfd, fd)) {
			e = cxls_ep_tagged(fd, c, 0);
			sys_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &e);
		}
	}
	if (c)
		cxls_sconn_put(c);
}

/* The kernel's m events on epfd, which this process follows no set of,
 * without the shim's tags (foreign_tag()); how many stay. */
static int drop_foreign_tags(int epfd, struct epoll_event *ev, int m)
{
	int keep = 0;

	for (int i = 0; i < m; i++) {
		uint64_t d = ev[i].data.u64;

		if ((d & TAG_MASK) == TAG)
			foreign_tag(epfd, (int)(uint32_t)d);
		else
			ev[keep++] = ev[i];
	}
	return keep;
}

/* The kernel's n events on epfd sorted: through its set, when this
 * process follows one, else without the shim's tags. */
static int sort_waited(int epfd, struct epoll_event *ev, int n)
{
	struct epset *s = atomic_load(&cxls_ep_any_set) ? cxls_ep_set_lock(epfd, 0) : NULL;
	int m;

	if (!s)
		return drop_foreign_tags(epfd, ev, n);
	m = sort_kernel(epfd, s, ev, n, NULL);
	cxls_ep_set_unlock(s);
	return m;
}

/* After a real epoll_wait on a set without followed fds: a connect in
 * another thread may have taken its registrations over meanwhile
 * (cxls_sock_epoll_adopt), and the kernel reported the shim's tags, also
 * in a set this image never followed (an epoll fd inherited across exec,
 * foreign_tag()). */
int cxls_sock_epoll_waited(int epfd, struct epoll_event *ev, int max, int timeout_ms,
			   const sigset_t *mask, int n)
{
	uint64_t deadline = 0;
	int m;

	if (n <= 0)
		return n;
	if (timeout_ms > 0)
		deadline = cxls_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		m = sort_waited(epfd, ev, n);
		if (m)
			return m;
		/* only tags: wait again, through the set now, for what is left
		 * of the timeout (a tag that stays, one no item of this
		 * process answers, made it a wait for ever) */
		if (timeout_ms == 0)
			return 0;
		if (timeout_ms > 0) {
			uint64_t now = cxls_now_ns();

			if (now >= deadline)
				return 0;
			timeout_ms = (int)((deadline - now + 999999) / 1000000);
		}
		n = cxls_sock_epoll_wait(epfd, ev, max, timeout_ms, mask);
		if (n != -2)
			return n;
		n = sys_epoll_pwait(epfd, ev, max, timeout_ms, mask);
		if (n <= 0)
			return n;
	}
}

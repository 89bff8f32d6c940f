/* sock_poll.c - poll, ppoll, select and pselect over sets that hold
 * pooled connections.
 *
 * A pooled fd is ready when its rings say so, not when its TCP socket
 * does: the rings are checked first; when nothing is ready every pooled fd
 * is armed (its peer will ring a doorbell) and the real ppoll sleeps on the
 * TCP sockets for POLLIN, doorbells and FIN/RST included, together with
 * the plain fds of the call.  A socket whose meeting with its peer is under
 * way is not ready until it is decided (nothing can be read or written
 * before): the kernel watches its TCP socket for POLLIN, where the peer's
 * doorbell comes when it joins (or its bytes, when it stays on TCP), and
 * the sleep ends by the meeting's window at the latest; a poll never waits
 * for one meeting while its other fds may be ready.  An epoll fd whose set
 * holds pooled sockets (an event loop embedded in another one's poll) is
 * readable when the kernel says so or one of those is ready; they are not
 * armed (their doorbells are the set's epoll_wait's to read), so a sleep
 * looks at them again every CXLS_SOCK_POLLED_SET_MS.
 */
#include "sock.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "proc_id.h"
#include "sock_chan.h"
#include "sock_kept.h"
#include "sock_meet.h"
#include "sock_sigwin.h"
#include "sock_sys.h"

struct pset {
	struct pollfd *fds;
	nfds_t n;
	struct cxls_sconn **conns; /* pooled fds */
	struct cxls_sconn **meet;  /* fds whose meeting is under way */
	uint64_t *look_at;         /* ... looked at again then */
	struct pollfd *real;
	struct cxls_sleep *z;  /* this thread's sleeper entry of each pooled fd */
	struct epset **sets;   /* epoll fds whose sets hold pooled fds */
	int npooled;
	struct cxls_sigwin *w; /* the call's signal window, while it runs */
};

/* An epoll fd's bits from its pooled members, to add to the kernel's. */
static short set_revents(struct pset *s, nfds_t i)
{
	short in = s->fds[i].events & (POLLIN | POLLRDNORM);

	return in && cxls_sock_epoll_polled_ready(s->sets[i]) ? in : 0;
}

static int ready_pooled(struct pset *s)
{
	int ready = 0;

	for (nfds_t i = 0; i < s->n; i++) {
		if (s->sets[i]) {
			s->fds[i].revents = set_revents(s, i);
			ready += s->fds[i].revents != 0;
		}
		if (!s->conns[i])
			continue;
		s->fds[i].revents = cxls_chan_events(s->conns[i], s->fds[i].events);
		/* about to be reported: the peer may be gone (as cxls_ep_collect) */
		if (s->fds[i].revents ? cxls_chan_look(s->conns[i], s->fds[i].fd) :
					cxls_chan_look_idle(s->conns[i], s->fds[i].fd))
			s->fds[i].revents = cxls_chan_events(s->conns[i], s->fds[i].events);
		ready += s->fds[i].revents != 0;
	}
	return ready;
}

/* Arms every pooled fd for one sleep: under one token, since any of
 * them waking this thread makes it look at all (real_round). */
static int arm_pooled(struct pset *s)
{
	uint64_t tok = cxls_chan_token();
	int ready = 0;

	for (nfds_t i = 0; i < s->n; i++) {
		if (s->sets[i]) {
			s->fds[i].revents = set_revents(s, i);
			ready += s->fds[i].revents != 0;
		}
		if (!s->conns[i])
			continue;
		s->fds[i].revents = cxls_chan_arm(s->conns[i], s->fds[i].events, tok);
		ready += s->fds[i].revents != 0;
	}
	return ready;
}

static int busy_pooled(struct pset *s)
{
	uint32_t us = 0;
	uint64_t end;

	for (nfds_t i = 0; i < s->n; i++)
		if (s->conns[i] && s->conns[i]->busy_us > us)
			us = s->conns[i]->busy_us;
	if (!us || s->npooled != (int)s->n)
		return 0; /* plain fds in the set cannot be spun on */
	end = cxls_now_ns() + (uint64_t)us * 1000;
	do {
		if (ready_pooled(s))
			return 1;
		sched_yield(); /* the peer may be waiting for this core */
	} while (cxls_now_ns() < end);
	return 0;
}

/* This thread is about to sleep on every pooled socket of the set. */
static void sleep_pooled(struct pset *s)
{
	for (nfds_t i = 0; i < s->n; i++)
		if (s->conns[i])
			cxls_chan_sleep(s->conns[i], &s->z[i]);
}

/* The kernel's poll bits of a plain fd now. */
static short plain_revents(const struct pollfd *p)
{
	struct pollfd q = { p->fd, p->events, 0 };

	return sys_poll(&q, 1, 0) > 0 ? q.revents : 0;
}

/* Looks at the meeting of entry i (its TCP socket stirred, or its window
 * closed): decided, it is a pooled or a plain fd from now on, with its
 * bits now.  Whether it is ready. */
static int meeting_look(struct pset *s, nfds_t i)
{
	int again;
	struct cxls_sconn *c = cxls_sock_use_io(s->fds[i].fd, 1, &again);

	if (again)
		return 0;
	cxls_sconn_put(s->meet[i]);
	s->meet[i] = NULL;
	s->conns[i] = c;
	if (c)
		cxls_kept_call_in(c);
	s->npooled += c != NULL;
	s->fds[i].revents = c ? cxls_chan_events(c, s->fds[i].events) : plain_revents(&s->fds[i]);
	return s->fds[i].revents != 0;
}

/* Meetings the kernel stirred, or whose time to look came (a refusing
 * peer rings nothing: cxls_sock_next_look()): looked at. */
static int meetings(struct pset *s, int r)
{
	uint64_t now = cxls_now_ns();
	int ready = 0;

	for (nfds_t i = 0; i < s->n; i++) {
		if (!s->meet[i] || ((r <= 0 || !s->real[i].revents) && now < s->look_at[i]))
			continue;
		ready += meeting_look(s, i);
		if (s->meet[i])
			s->look_at[i] = cxls_sock_next_look(s->meet[i], now);
	}
	return ready;
}

/* One real ppoll; pooled fds wait for doorbells (POLLIN) only, and so do
 * those still meeting their peer.  counted: sleep_pooled() counted this
 * thread as a sleeper of each pooled one. */
static int real_round(struct pset *s, const struct timespec *ts, const sigset_t *mask,
		      int counted)
{
	int r, err, ready = 0, others = 0;

	for (nfds_t i = 0; i < s->n; i++) {
		s->real[i] = s->fds[i];
		if (s->conns[i])
			s->real[i].events = atomic_load(&s->conns[i]->tcp_eof) ? 0 : POLLIN;
		else if (s->meet[i])
			s->real[i].events = POLLIN;
	}
	r = sys_ppoll(s->real, s->n, ts, mask);
	err = errno;
	for (nfds_t i = 0; i < s->n; i++) {
		struct cxls_sconn *c = s->conns[i];
		/* closed by another thread during the call: POLLNVAL, as the
		 * kernel's poll says once awake (its doorbells are the kept
		 * copy's to read, sock_kept.h) */
		int nval = r > 0 && (s->real[i].revents & POLLNVAL);
		int rang = r > 0 && s->real[i].revents && !nval, fd;

		if (s->meet[i]) {
			s->fds[i].revents = 0;
			continue;
		}
		if (!c) {
			s->fds[i].revents = s->real[i].revents;
			if (s->sets[i])
				s->fds[i].revents |= set_revents(s, i);
			ready += s->fds[i].revents != 0;
			continue;
		}
		fd = nval ? atomic_load(&c->kept_fd) : s->fds[i].fd;
		if (counted)
			others += !cxls_chan_woke(c, fd, rang, &s->z[i]);
		else if (rang)
			cxls_chan_drain(c, fd);
		s->fds[i].revents = nval ? POLLNVAL : cxls_chan_events(c, s->fds[i].events);
		ready += s->fds[i].revents != 0;
	}
	if (r < 0) {
		errno = err;
		return -1;
	}
	ready += meetings(s, r);
	if (!ready && others)
		sched_yield(); /* their doorbells are other sleepers' to read */
	return ready;
}

static void ts_left(struct timespec *left, uint64_t deadline)
{
	uint64_t now = cxls_now_ns(), ns = deadline > now ? deadline - now : 0;

	left->tv_sec = (time_t)(ns / 1000000000ull);
	left->tv_nsec = (long)(ns % 1000000000ull);
}

/* A counted sleep lasts one slice at most (sock_chan.h): *left is what to
 * give the kernel. */
static const struct timespec *slice(const struct pset *s, struct timespec *left,
				    const struct timespec *timeout, uint64_t deadline)
{
	int ms = CXLS_CHAN_SLICE_MS;
	uint64_t now = cxls_now_ns();

	for (nfds_t i = 0; i < s->n; i++) {
		if (s->conns[i] && s->z[i].slice_ms < ms)
			ms = s->z[i].slice_ms;
		if (s->sets[i] && CXLS_SOCK_POLLED_SET_MS < ms)
			ms = CXLS_SOCK_POLLED_SET_MS;
		if (s->meet[i]) { /* its next look: nothing rings for that */
			uint64_t d = s->look_at[i];
			int due = d <= now ? 0 : (int)((d - now + 999999) / 1000000);

			ms = due < ms ? due : ms;
		}
	}
	if (timeout)
		ts_left(left, deadline);
	if (!timeout || left->tv_sec || left->tv_nsec / 1000000 >= ms) {
		left->tv_sec = 0;
		left->tv_nsec = ms * 1000000L;
	}
	return left;
}

/* w: the call's signal window (sock_sigwin.h); mask: the call's own. */
static int run(struct pset *s, const struct timespec *timeout, const sigset_t *mask,
	       struct cxls_sigwin *w)
{
	struct timespec zero = { 0, 0 }, left;
	uint64_t deadline = 0;
	int r;

	if (timeout)
		deadline = cxls_now_ns() + (uint64_t)timeout->tv_sec * 1000000000ull +
			   (uint64_t)timeout->tv_nsec;
	for (int round = 0;; round++) {
		/* a cancellation point, whose raw waits a deferred cancel does
		 * not interrupt: a pending one acts here, every slice, where
		 * no sleeper entry is held (pset_free gives back the rest) */
		pthread_testcancel();
		if (ready_pooled(s) || (round == 0 && busy_pooled(s)))
			return s->npooled == (int)s->n ? ready_pooled(s)
						       : real_round(s, &zero, mask, 0);
		cxls_sigwin_sleep(w);
		sleep_pooled(s);
		if (arm_pooled(s))
			return real_round(s, &zero, mask, 1);
		r = real_round(s, slice(s, &left, timeout, deadline), cxls_sigwin_mask(w, mask), 1);
		if (r != 0 || (timeout && cxls_now_ns() >= deadline))
			return r;
	}
}

/* Gives back what cxls_sock_ppoll took, the connections and the arrays,
 * also for a thread cancelled in run(). */
static void pset_free(void *arg)
{
	struct pset *s = arg;

	for (nfds_t i = 0; s->conns && i < s->n; i++)
		if (s->conns[i]) {
			cxls_kept_call_out(s->conns[i]);
			cxls_sock_done(s->conns[i]);
		}
	for (nfds_t i = 0; s->meet && i < s->n; i++)
		if (s->meet[i])
			cxls_sconn_put(s->meet[i]);
	for (nfds_t i = 0; s->sets && i < s->n; i++)
		if (s->sets[i])
			cxls_sock_epoll_polled_done(s->sets[i]);
	free(s->sets);
	free(s->conns);
	free(s->meet);
	free(s->look_at);
	free(s->real);
	free(s->z);
}

/* run(), with the set given back if the thread is cancelled in it (r is
 * volatile only for setjmp's sake: a cancelled thread never reads it). */
static void cancelled(void *arg)
{
	struct pset *s = arg;

	cxls_sigwin_end(s->w); /* before the application's cleanups */
	pset_free(s);
}

static int run_cancellable(struct pset *s, const struct timespec *timeout, const sigset_t *mask)
{
	struct cxls_sigwin w = CXLS_SIGWIN_INIT;
	volatile int r;

	s->w = &w;
	pthread_cleanup_push(cancelled, s);
	r = run(s, timeout, mask, &w);
	pthread_cleanup_pop(0);
	cxls_sigwin_end(&w);
	return r;
}

int cxls_sock_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
		    const sigset_t *mask)
{
	struct pset s = { fds, n, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL };
	int r = -2, nmeet = 0, nsets = 0;

	if (cxls_fdtab_empty() || n == 0)
		return -2;
	s.conns = calloc(n, sizeof(*s.conns));
	s.meet = calloc(n, sizeof(*s.meet));
	s.look_at = calloc(n, sizeof(*s.look_at));
	s.real = calloc(n, sizeof(*s.real));
	s.z = calloc(n, sizeof(*s.z));
	s.sets = calloc(n, sizeof(*s.sets));
	if (s.conns && s.meet && s.look_at && s.real && s.z && s.sets) {
		for (nfds_t i = 0; i < n; i++) {
			int again = 0;

			if (fds[i].fd >= 0)
				s.conns[i] = cxls_sock_use_io(fds[i].fd, 1, &again);
			if (s.conns[i]) /* a close meanwhile keeps it, as the kernel's poll */
				cxls_kept_call_in(s.conns[i]);
			if (again)
				s.meet[i] = cxls_fdtab_get(fds[i].fd);
			if (s.meet[i])
				s.look_at[i] = cxls_sock_next_look(s.meet[i], cxls_now_ns());
			else if (!s.conns[i] && fds[i].fd >= 0)
				s.sets[i] = cxls_sock_epoll_polled(fds[i].fd);
			s.npooled += s.conns[i] != NULL;
			nmeet += s.meet[i] != NULL;
			nsets += s.sets[i] != NULL;
		}
		if (s.npooled || nmeet || nsets)
			r = run_cancellable(&s, timeout, mask);
	}
	pset_free(&s);
	return r;
}

/* fd_set bits by hand: the kernel's select takes sets of nfds bits, as
 * many as the process may have fds (an application allocates sets past
 * FD_SETSIZE for them), where glibc's FD_ISSET stops at FD_SETSIZE. */
#define SET_BITS (8 * sizeof(unsigned long))

static int bit_isset(const fd_set *set, int fd)
{
	const unsigned long *w = (const unsigned long *)(const void *)set;

	return set && (w[fd / SET_BITS] >> (fd % SET_BITS)) & 1;
}

static void bit_clr(fd_set *set, int fd)
{
	unsigned long *w = (unsigned long *)(void *)set;

	w[fd / SET_BITS] &= ~(1ul << (fd % SET_BITS));
}

/* Whether any fd the sets name is a pooled socket or an epoll set that
 * holds some. */
static int sets_pooled(int nfds, const fd_set *rd, const fd_set *wr)
{
	for (int fd = 0; fd < nfds; fd++)
		if (bit_isset(rd, fd) || bit_isset(wr, fd)) {
			struct cxls_sconn *c = cxls_fdtab_get(fd);
			struct epset *set = c ? NULL : cxls_sock_epoll_polled(fd);

			if (c) {
				cxls_sconn_put(c);
				return 1;
			}
			if (set) {
				cxls_sock_epoll_polled_done(set);
				return 1;
			}
		}
	return 0;
}

/* A set's bit for fd stays only if revents has one of `keep`. */
static int keep_bit(fd_set *set, int fd, short re, short keep)
{
	if (!bit_isset(set, fd))
		return 0;
	if (re & keep)
		return 1;
	bit_clr(set, fd);
	return 0;
}

/* select over poll: the bits mean what the kernel's select means. */
int cxls_sock_pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
		      const struct timespec *timeout, const sigset_t *mask)
{
	struct pollfd *p;
	nfds_t n = 0;
	int r, count = 0, max;

	if (cxls_fdtab_empty() || nfds <= 0)
		return -2;
	/* past FD_SETSIZE (sets allocated larger), as far as the kernel reads;
	 * not knowing how far, the kernel's select (which sees no pooled fd) */
	if (nfds > FD_SETSIZE) {
		/* the fd table's size: the kernel's select reads no bit past
		 * it, whatever nfds says (a program may pass getdtablesize()
		 * with sets of FD_SETSIZE bits) */
		if ((max = (int)cxls_proc_status("FDSize")) <= 0)
			return -2;
		if (nfds > max)
			nfds = max;
	}
	if (!sets_pooled(nfds, rd, wr))
		return -2;
	p = calloc((size_t)nfds, sizeof(*p));
	if (!p)
		return -2;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = (bit_isset(rd, fd) ? POLLIN : 0) | (bit_isset(wr, fd) ? POLLOUT : 0) |
			   (bit_isset(ex, fd) ? POLLPRI : 0);
		if (ev)
			p[n++] = (struct pollfd){ fd, ev, 0 };
	}
	pthread_cleanup_push(free, p); /* a cancel in the wait */
	r = cxls_sock_ppoll(p, n, timeout, mask);
	if (r == -2)
		r = sys_ppoll(p, n, timeout, mask);
	pthread_cleanup_pop(0);
	if (r < 0) {
		free(p);
		return -1;
	}
	for (nfds_t i = 0; i < n; i++) {
		int fd = p[i].fd;
		short re = p[i].revents;

		if (re & POLLNVAL) {
			free(p);
			errno = EBADF;
			return -1;
		}
		count += keep_bit(rd, fd, re, POLLIN | POLLHUP | POLLERR);
		count += keep_bit(wr, fd, re, POLLOUT | POLLERR);
		count += keep_bit(ex, fd, re, POLLPRI);
	}
	free(p);
	return count;
}

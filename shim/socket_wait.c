/* socket_wait.c - every call that waits for fds: poll, ppoll, select,
 * pselect, epoll.  The core answers when a pooled fd is involved (-2
 * otherwise: the real call).  Arguments the kernel refuses go to the real
 * call whatever the fds are, so the application gets the kernel's own
 * error and the core only ever sees arguments it can read. */
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sock.h"
#include "socket_real.h"

static int bad_timespec(const struct timespec *t)
{
	return t && (t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000L);
}

static int bad_pollfds(const struct pollfd *fds, nfds_t n)
{
	return n && !fds;
}

/* select(2) folds tv_usec past a second into tv_sec; negatives are EINVAL. */
static int bad_timeval(const struct timeval *tv)
{
	return tv && (tv->tv_sec < 0 || tv->tv_usec < 0);
}

/* epoll_wait(2): EINVAL for max <= 0 or past what the kernel can return. */
static int bad_max(int max)
{
	return max <= 0 || (size_t)max > INT_MAX / sizeof(struct epoll_event);
}

/* No array: the kernel faults once it has an event to copy, but a pooled
 * fd's events are not the kernel's, so the answer is EFAULT at once, after
 * the kernel's own checks of epfd by a call that cannot block (an event it
 * fails to copy stays ready). */
static int no_events(int epfd, int max)
{
	int r = (int)syscall(SYS_epoll_pwait, epfd, NULL, max, 0, NULL, 0);

	if (r >= 0) {
		errno = EFAULT;
		r = -1;
	}
	return r;
}

/* epoll_pwait2's timeout in the milliseconds of the core's wait, rounded up
 * and capped (a cap of 24 days, where -1 would mean forever). */
static int timespec_ms(const struct timespec *ts)
{
	if (!ts)
		return -1;
	if (ts->tv_sec >= INT_MAX / 1000 - 1)
		return INT_MAX;
	return (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000);
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
	int r = bad_pollfds(fds, n) ? -2 : cxls_sock_ppoll(fds, n, timeout < 0 ? NULL : &ts, NULL);

	return r != -2 ? r : REAL(poll)(fds, n, timeout);
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	int r = bad_pollfds(fds, n) || bad_timespec(ts) ? -2 : cxls_sock_ppoll(fds, n, ts, mask);

	return r != -2 ? r : REAL(ppoll)(fds, n, ts, mask);
}

EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		return REAL(__poll_chk)(fds, n, timeout, fdslen); /* aborts */
	return poll(fds, n, timeout);
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Linux's select(2) leaves in tv the time not slept (0 after a timeout),
 * which loops that retry after EINTR count on; pselect and ppoll keep
 * theirs (glibc passes the kernel a copy). */
static void time_left(struct timeval *tv, uint64_t deadline)
{
	uint64_t now = mono_ns(), left = now < deadline ? deadline - now : 0;

	tv->tv_sec = (time_t)(left / 1000000000ull);
	tv->tv_usec = (suseconds_t)(left % 1000000000ull / 1000);
}

EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	struct timespec ts;
	uint64_t deadline = 0;
	int r, err;

	if (bad_timeval(tv))
		return REAL(select)(nfds, rd, wr, ex, tv);
	if (tv) {
		ts.tv_sec = tv->tv_sec + tv->tv_usec / 1000000;
		ts.tv_nsec = tv->tv_usec % 1000000 * 1000;
		/* past a year, as good as forever: tv stays as it was */
		if (ts.tv_sec < 365 * 86400)
			deadline = mono_ns() + (uint64_t)ts.tv_sec * 1000000000ull +
				   (uint64_t)ts.tv_nsec;
	}
	r = cxls_sock_pselect(nfds, rd, wr, ex, tv ? &ts : NULL, NULL);
	if (r == -2)
		return REAL(select)(nfds, rd, wr, ex, tv);
	err = errno;
	if (deadline)
		time_left(tv, deadline);
	errno = err;
	return r;
}

EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts,
		   const sigset_t *mask)
{
	int r = bad_timespec(ts) ? -2 : cxls_sock_pselect(nfds, rd, wr, ex, ts, mask);

	return r != -2 ? r : REAL(pselect)(nfds, rd, wr, ex, ts, mask);
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int r = cxls_sock_epoll_ctl(epfd, op, fd, ev);

	return r != -2 ? r : REAL(epoll_ctl)(epfd, op, fd, ev);
}

EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	int r;

	if (bad_max(max))
		return REAL(epoll_wait)(epfd, ev, max, timeout);
	if (!ev)
		return no_events(epfd, max);
	r = cxls_sock_epoll_wait(epfd, ev, max, timeout, NULL);
	if (r != -2)
		return r;
	r = REAL(epoll_wait)(epfd, ev, max, timeout);
	return cxls_sock_epoll_waited(epfd, ev, max, timeout, NULL, r);
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
		       const sigset_t *mask)
{
	int r;

	if (bad_max(max))
		return REAL(epoll_pwait)(epfd, ev, max, timeout, mask);
	if (!ev)
		return no_events(epfd, max);
	r = cxls_sock_epoll_wait(epfd, ev, max, timeout, mask);
	if (r != -2)
		return r;
	r = REAL(epoll_pwait)(epfd, ev, max, timeout, mask);
	return cxls_sock_epoll_waited(epfd, ev, max, timeout, mask, r);
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
			const sigset_t *mask)
{
	int ms = timespec_ms(ts), r;

	if (bad_max(max) || bad_timespec(ts))
		return REAL(epoll_pwait2)(epfd, ev, max, ts, mask);
	if (!ev)
		return no_events(epfd, max);
	r = cxls_sock_epoll_wait(epfd, ev, max, ms, mask);
	if (r != -2)
		return r;
	r = REAL(epoll_pwait2)(epfd, ev, max, ts, mask);
	return cxls_sock_epoll_waited(epfd, ev, max, ms, mask, r);
}

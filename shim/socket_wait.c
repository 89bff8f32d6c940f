/* socket_wait.c - every call that waits for fds: poll, ppoll, select,
 * pselect, epoll.  The core answers when a pooled fd is involved (-2
 * otherwise: the real call). */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "sock.h"
#include "socket_real.h"

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
	int r = cxls_sock_ppoll(fds, n, timeout < 0 ? NULL : &ts, NULL);

	return r != -2 ? r : REAL(poll)(fds, n, timeout);
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	int r = cxls_sock_ppoll(fds, n, ts, mask);

	return r != -2 ? r : REAL(ppoll)(fds, n, ts, mask);
}

EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		return REAL(__poll_chk)(fds, n, timeout, fdslen); /* aborts */
	return poll(fds, n, timeout);
}

EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	struct timespec ts;
	int r;

	if (tv) {
		ts.tv_sec = tv->tv_sec;
		ts.tv_nsec = tv->tv_usec * 1000;
	}
	r = cxls_sock_pselect(nfds, rd, wr, ex, tv ? &ts : NULL, NULL);
	return r != -2 ? r : REAL(select)(nfds, rd, wr, ex, tv);
}

EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts,
		   const sigset_t *mask)
{
	int r = cxls_sock_pselect(nfds, rd, wr, ex, ts, mask);

	return r != -2 ? r : REAL(pselect)(nfds, rd, wr, ex, ts, mask);
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int r = cxls_sock_epoll_ctl(epfd, op, fd, ev);

	return r != -2 ? r : REAL(epoll_ctl)(epfd, op, fd, ev);
}

EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	int r = cxls_sock_epoll_wait(epfd, ev, max, timeout, NULL);

	if (r != -2)
		return r;
	r = REAL(epoll_wait)(epfd, ev, max, timeout);
	return cxls_sock_epoll_waited(epfd, ev, max, timeout, NULL, r);
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
		       const sigset_t *mask)
{
	int r = cxls_sock_epoll_wait(epfd, ev, max, timeout, mask);

	if (r != -2)
		return r;
	r = REAL(epoll_pwait)(epfd, ev, max, timeout, mask);
	return cxls_sock_epoll_waited(epfd, ev, max, timeout, mask, r);
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
			const sigset_t *mask)
{
	int ms = -1, r;

	if (ts)
		ms = (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000);
	r = cxls_sock_epoll_wait(epfd, ev, max, ms, mask);
	if (r != -2)
		return r;
	r = REAL(epoll_pwait2)(epfd, ev, max, ts, mask);
	return cxls_sock_epoll_waited(epfd, ev, max, ms, mask, r);
}

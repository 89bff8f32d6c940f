/* sock_sys.h - the kernel calls the socket core makes for itself.
 *
 * The library's own read, send, poll, ... may be interposed on the libc
 * symbols, so the core talks to the kernel directly: these never re-enter
 * the shim, and their EINTR and timeout behaviour is the kernel's.
 */
#ifndef CXLSHIM_CORE_SOCK_SYS_H
#define CXLSHIM_CORE_SOCK_SYS_H

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline ssize_t sys_recv(int fd, void *buf, size_t len, int flags)
{
	return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static inline ssize_t sys_send(int fd, const void *buf, size_t len, int flags)
{
	return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

/* timeout_ms < 0: forever */
static inline int sys_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000 };

	return (int)syscall(SYS_ppoll, fds, n, timeout_ms < 0 ? NULL : &ts, NULL, 0);
}

static inline int sys_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			    const sigset_t *mask)
{
	return (int)syscall(SYS_ppoll, fds, n, ts, mask, mask ? _NSIG / 8 : 0);
}

static inline int sys_epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout_ms,
				  const sigset_t *mask)
{
	return (int)syscall(SYS_epoll_pwait, epfd, ev, max, timeout_ms, mask,
			    mask ? _NSIG / 8 : 0);
}

static inline int sys_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	return (int)syscall(SYS_epoll_ctl, epfd, op, fd, ev);
}

static inline int sys_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return (int)syscall(SYS_getsockopt, fd, level, name, val, len);
}

static inline int sys_getsockname(int fd, struct sockaddr *sa, socklen_t *len)
{
	return (int)syscall(SYS_getsockname, fd, sa, len);
}

static inline int sys_getpeername(int fd, struct sockaddr *sa, socklen_t *len)
{
	return (int)syscall(SYS_getpeername, fd, sa, len);
}

#endif

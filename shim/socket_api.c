/* socket_api.c - the calls that create, copy, configure and close sockets.
 *
 * Each one makes the real call first where the kernel decides (and only
 * then tells the core), so a failure is the kernel's own.  In a child of
 * vfork they are the kernel's alone: the shim's records of fds belong to
 * the parent, whose memory the child runs in (sock_vfork.h).
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <errno.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "log.h"
#include "proc_id.h"
#include "sock.h"
#include "sock_calls.h"
#include "sock_fdlist.h"
#include "sock_private_fd.h"
#include "sock_vfork.h"
#include "socket_real.h"

static int inet(const struct sockaddr *sa)
{
	return sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	int listens, r, err;

	if (cxls_sock_borrowed())
		return REAL(connect)(fd, sa, len);
	listens = inet(sa) && len >= sizeof(struct sockaddr_in) &&
		  (sa->sa_family == AF_INET || len >= sizeof(struct sockaddr_in6)) &&
		  cxls_sock_connecting(fd, sa);
	r = REAL(connect)(fd, sa, len);
	err = errno;
	/* EINTR: the handshake goes on in the kernel, as EINPROGRESS; the
	 * retry that finds it done must not be taken for a query */
	if (listens && (r == 0 || err == EINPROGRESS || err == EINTR)) {
		cxls_sock_connected(fd, r, err, listens);
		errno = err;
	} else if (r == 0 && sa && sa->sa_family == AF_UNSPEC) {
		cxls_sock_disconnecting(fd);
		errno = err;
	}
	return r;
}

EXPORT int socket(int domain, int type, int protocol)
{
	int fd = REAL(socket)(domain, type, protocol), err = errno;

	if (fd >= 0 && !cxls_sock_borrowed()) {
		cxls_sock_created(fd, domain, type);
		errno = err;
	}
	return fd;
}

static int accepted(int lfd, int fd)
{
	int err = errno;

	if (fd >= 0 && !cxls_sock_borrowed()) {
		cxls_sock_accepted(lfd, fd);
		errno = err;
	}
	return fd;
}

EXPORT int accept(int fd, struct sockaddr *sa, socklen_t *len)
{
	return accepted(fd, REAL(accept)(fd, sa, len));
}

EXPORT int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	return accepted(fd, REAL(accept4)(fd, sa, len, flags));
}

EXPORT int listen(int fd, int backlog)
{
	int early, r, err;

	if (cxls_sock_borrowed())
		return REAL(listen)(fd, backlog);
	early = cxls_sock_listen_early(fd);
	r = REAL(listen)(fd, backlog);
	err = errno;
	if (r == 0 && !early)
		cxls_sock_listening(fd);
	else if (r != 0 && early)
		cxls_sock_listen_failed(fd);
	errno = err;
	return r;
}

/* From the application's level, in every call that may close a socket:
 * calls this thread left by a longjmp end before the close decides
 * whether one is in flight (sock_calls.h). */
#define REAP_LEFT_CALLS() cxls_calls_reap(__builtin_frame_address(0))

EXPORT int close(int fd)
{
	if (cxls_private_is(fd)) {
		errno = EBADF; /* not the application's: the shim's own */
		return -1;
	}
	if (fd >= 0 && !cxls_sock_borrowed()) {
		REAP_LEFT_CALLS();
		cxls_sock_closing(fd);
	}
	return REAL(close)(fd);
}

static int forget_open(int fd, void *arg)
{
	(void)arg;
	cxls_sock_closing(fd);
	return 0;
}

/* Before the real call: every fd open from lo to hi is about to close.
 * The kernel says which are open; without /proc the numbers up to the
 * file limit are tried, each a lookup in the shim's tables. */
static void closing_range(unsigned lo, unsigned hi)
{
	long max;

	if (cxls_sock_borrowed() || !cxls_fd_each(0, lo, hi, forget_open, NULL))
		return;
	max = sysconf(_SC_OPEN_MAX);
	if (max <= 0 || max > 1 << 20)
		max = 1 << 20;
	for (unsigned fd = lo; fd <= hi && fd < (unsigned long)max; fd++)
		cxls_sock_closing((int)fd);
}

#define PRIVATE_MAX 64

/* close_range over [first, last] but the shim's private fds, which calls
 * in flight still use (sock_private_fd.h): in pieces around them.  Those
 * are close-on-exec already. */
static int close_around(unsigned first, unsigned last, int flags)
{
	int priv[PRIVATE_MAX], n = cxls_private_in(first, last, priv, PRIVATE_MAX);
	unsigned lo = first;

	for (int i = 0; i < n; i++) {
		if ((unsigned)priv[i] > lo && REAL(close_range)(lo, (unsigned)priv[i] - 1, flags))
			return -1;
		lo = (unsigned)priv[i] + 1;
	}
	return lo > last ? 0 : REAL(close_range)(lo, last, flags);
}

/* The kernel's checks first (unknown flags, first > last: EINVAL, nothing
 * closed); CLOSE_RANGE_CLOEXEC closes nothing now, and exec looks at
 * FD_CLOEXEC itself. */
/* With CLOSE_RANGE_UNSHARE a thread that shares its fd table (the
 * process has others) closes the range in a copy of it, its own: the
 * others keep the fds, and the shim goes on following them. */
EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	if ((flags & ~(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) || first > last ||
	    ((flags & CLOSE_RANGE_UNSHARE) && cxls_proc_status("Threads") != 1))
		return REAL(close_range)(first, last, flags);
	if (!(flags & CLOSE_RANGE_CLOEXEC)) {
		REAP_LEFT_CALLS();
		closing_range(first, last);
	}
	return close_around(first, last, flags);
}

EXPORT void closefrom(int lo)
{
	unsigned first = lo < 0 ? 0 : (unsigned)lo;
	int priv;

	REAP_LEFT_CALLS();
	closing_range(first, ~0u);
	/* glibc's own way (it has fallbacks) unless a private fd is there */
	if (!cxls_private_in(first, ~0u, &priv, 1) || close_around(first, ~0u, 0))
		REAL(closefrom)(lo);
}

/* A pooled connection TCP would have closed (reset, or both FINs sent):
 * ENOTCONN, as inet_shutdown says it for TCP_CLOSE, after marking the
 * shutdown all the same. */
EXPORT int shutdown(int fd, int how)
{
	int closed = 0, r;

	if (cxls_sock_borrowed())
		return REAL(shutdown)(fd, how);
	if (how == SHUT_RD || how == SHUT_WR || how == SHUT_RDWR)
		closed = cxls_sock_shutdown(fd, how);
	r = REAL(shutdown)(fd, how);
	if (r == 0 && closed) {
		errno = ENOTCONN;
		return -1;
	}
	return r;
}

EXPORT int dup(int fd)
{
	int r = REAL(dup)(fd), err = errno;

	if (r >= 0 && !cxls_sock_borrowed()) {
		cxls_sock_duped(fd, r);
		errno = err;
	}
	return r;
}

/* newfd is about to be closed by the kernel, if oldfd is valid. */
static void replacing(int oldfd, int newfd)
{
	if (oldfd != newfd && !cxls_sock_borrowed() && newfd >= 0 && REAL(fcntl)(oldfd, F_GETFD) >= 0)
		cxls_sock_closing(newfd);
}

EXPORT int dup2(int oldfd, int newfd)
{
	int r;

	REAP_LEFT_CALLS();
	replacing(oldfd, newfd);
	r = REAL(dup2)(oldfd, newfd);
	if (r >= 0 && !cxls_sock_borrowed())
		cxls_sock_duped(oldfd, newfd);
	return r;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	int r;

	if (oldfd != newfd) {
		REAP_LEFT_CALLS();
		replacing(oldfd, newfd);
	}
	r = REAL(dup3)(oldfd, newfd, flags);
	if (r >= 0 && !cxls_sock_borrowed())
		cxls_sock_duped(oldfd, newfd);
	return r;
}

static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	int r = real(fd, cmd, arg), err = errno;

	if (r < 0 || cxls_sock_borrowed())
		return r;
	if (cmd == F_SETFL)
		cxls_sock_set_nonblock(fd, ((long)arg & O_NONBLOCK) != 0);
	else if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		cxls_sock_duped(fd, r);
	errno = err;
	return r;
}

/* Every fcntl argument is an int, a long or a pointer: one register. */
EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(REAL(fcntl), fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(REAL(fcntl64), fd, cmd, arg);
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	struct cxls_sconn *c;
	va_list ap;
	void *arg;
	int r;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if ((req == FIONREAD || req == TIOCOUTQ) && (c = cxls_sock_use(fd))) {
		int n = req == FIONREAD ? cxls_sock_unread(c) : cxls_sock_unsent(c);

		cxls_sock_done(c);
		if (!arg) {
			errno = EFAULT;
			return -1;
		}
		*(int *)arg = n;
		return 0;
	}
	r = REAL(ioctl)(fd, req, arg);
	if (r == 0 && req == FIONBIO && arg)
		cxls_sock_set_nonblock(fd, *(int *)arg != 0);
	return r;
}

EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	unsigned l = len;
	int r, err;

	if (level == IPPROTO_TCP && val && len >= sizeof(int) &&
	    cxls_sock_tcp_option(fd, name, (void *)val, &l, 1))
		return 0;
	r = REAL(setsockopt)(fd, level, name, val, len);
	err = errno;

	if (r == 0 && val) {
		if (level == SOL_SOCKET && name == SO_PEEK_OFF) /* an int: the kernel took it */
			cxls_sock_peek_off_set(fd, *(const int *)val);
		else
			cxls_sock_option(fd, level, name, val, len);
		errno = err;
	}
	return r;
}

/* SO_ERROR is how a nonblocking connect reports its end: meet there.  On
 * a pooled socket it is also one of the places a reset is reported. */
EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct cxls_sconn *c;
	unsigned l;
	int r, err, again;

	if (level == IPPROTO_TCP && val && len && *len >= sizeof(int) &&
	    cxls_sock_tcp_option(fd, name, val, &l, 0)) {
		*len = l;
		return 0;
	}
	l = len ? *len : 0;
	if (level == SOL_SOCKET && val && len && cxls_sock_rcvtimeo_hidden(fd, name, val, &l)) {
		*len = l;
		return 0;
	}
	r = REAL(getsockopt)(fd, level, name, val, len);
	err = errno;
	if (r == 0 && level == SOL_SOCKET && name == SO_PEEK_OFF && val && len) {
		cxls_sock_peek_off_get(fd, val, *len);
		errno = err;
	}
	/* a poll loop asks right after its connect is done: a meeting
	 * under way is not waited for (the kernel's 0 is the answer) */
	if (r == 0 && level == SOL_SOCKET && name == SO_ERROR && val && len &&
	    *len >= sizeof(int) && (c = cxls_sock_use_io(fd, 1, &again))) {
		cxls_sock_so_error(c, fd, val);
		cxls_sock_done(c);
		errno = err;
	}
	return r;
}

/* A seccomp filter may refuse the calls a pooled socket makes beside the
 * application's reads and writes (the doorbells' sendto and recvfrom,
 * SO_RCVTIMEO), and a refused call usually kills the process: sshd's
 * pre-authentication child did so on its first doorbell.  Nothing can
 * take its connections back to TCP now; say why it may die.  (sshd is
 * denied by the default sock.programs.) */
EXPORT int prctl(int option, ...)
{
	static void *slot;
	int (*real)(int, unsigned long, unsigned long, unsigned long, unsigned long) =
		(int (*)(int, unsigned long, unsigned long, unsigned long, unsigned long))
			cxls_real_sym("prctl", &slot);
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_SECCOMP && a[0] == SECCOMP_MODE_FILTER && !cxls_fdtab_empty())
		CXLS_WARN("entering a seccomp sandbox with sockets on the pool: if the filter "
			  "refuses sendto, recvfrom or setsockopt, the kernel ends this process at "
			  "its next doorbell; deny %s in sock.programs",
			  program_invocation_short_name);
	return real(option, a[0], a[1], a[2], a[3]);
}

/* socket_io.c - every call that moves bytes on a socket.
 *
 * A plain fd costs one table check.  A pooled fd goes to the core's
 * recvv/sendv; the calls that also move bytes between files (sendfile,
 * splice) copy through a bounce buffer on the pooled side.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sock.h"
#include "socket_real.h"

#define BOUNCE (64u << 10)

/* One call on a pooled fd: the core moves the bytes, then the fd is
 * released (cxls_sock_use took it). */
static ssize_t pool_recvv(struct cxls_sconn *c, int fd, const struct iovec *iov, int cnt,
			  int flags)
{
	ssize_t r = cxls_sock_recvv(c, fd, iov, cnt, flags);

	cxls_sock_done(c);
	return r;
}

static ssize_t pool_sendv(struct cxls_sconn *c, int fd, const struct iovec *iov, int cnt,
			  int flags)
{
	ssize_t r = cxls_sock_sendv(c, fd, iov, cnt, flags);

	cxls_sock_done(c);
	return r;
}

static ssize_t pool_recv(struct cxls_sconn *c, int fd, void *buf, size_t n, int flags)
{
	struct iovec iov = { buf, n };

	return pool_recvv(c, fd, &iov, 1, flags);
}

static ssize_t pool_send(struct cxls_sconn *c, int fd, const void *buf, size_t n, int flags)
{
	struct iovec iov = { (void *)buf, n };

	return pool_sendv(c, fd, &iov, 1, flags);
}

/* A NULL msghdr on a pooled fd: what the kernel says. */
static ssize_t pool_efault(struct cxls_sconn *c)
{
	cxls_sock_done(c);
	errno = EFAULT;
	return -1;
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	return c ? pool_recv(c, fd, buf, n, 0) : REAL(read)(fd, buf, n);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	return c ? pool_send(c, fd, buf, n, 0) : REAL(write)(fd, buf, n);
}

EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	return c ? pool_recv(c, fd, buf, n, flags) : REAL(recv)(fd, buf, n, flags);
}

EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	return c ? pool_send(c, fd, buf, n, flags) : REAL(send)(fd, buf, n, flags);
}

/* A connected TCP socket ignores the address, and reports none. */
EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *sa,
			socklen_t *len)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	if (!c)
		return REAL(recvfrom)(fd, buf, n, flags, sa, len);
	if (sa && len)
		*len = 0;
	return pool_recv(c, fd, buf, n, flags);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *sa,
		      socklen_t len)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	return c ? pool_send(c, fd, buf, n, flags) : REAL(sendto)(fd, buf, n, flags, sa, len);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	return c ? pool_recvv(c, fd, iov, cnt, 0) : REAL(readv)(fd, iov, cnt);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	return c ? pool_sendv(c, fd, iov, cnt, 0) : REAL(writev)(fd, iov, cnt);
}

static ssize_t msg_recv(struct cxls_sconn *c, int fd, struct msghdr *m, int flags)
{
	ssize_t r = cxls_sock_recvv(c, fd, m->msg_iov, (int)m->msg_iovlen, flags);

	if (r >= 0) {
		m->msg_namelen = 0;
		m->msg_controllen = 0;
		m->msg_flags = 0;
	}
	return r;
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct cxls_sconn *c = cxls_sock_use(fd);
	ssize_t r;

	if (!c)
		return REAL(recvmsg)(fd, m, flags);
	if (!m)
		return pool_efault(c);
	r = msg_recv(c, fd, m, flags);
	cxls_sock_done(c);
	return r;
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct cxls_sconn *c = cxls_sock_use(fd);

	if (!c)
		return REAL(sendmsg)(fd, m, flags);
	if (!m)
		return pool_efault(c);
	return pool_sendv(c, fd, m->msg_iov, (int)m->msg_iovlen, flags);
}

EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	struct cxls_sconn *c = cxls_sock_use(fd);
	unsigned int i;

	if (!c)
		return REAL(sendmmsg)(fd, v, n, flags);
	for (i = 0; i < n; i++) {
		ssize_t r = cxls_sock_sendv(c, fd, v[i].msg_hdr.msg_iov,
					    (int)v[i].msg_hdr.msg_iovlen, flags);
		if (r < 0)
			break;
		v[i].msg_len = (unsigned int)r;
	}
	cxls_sock_done(c);
	return i ? (int)i : -1;
}

/* The timeout is only checked between messages, as the kernel does. */
EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags,
		    struct timespec *timeout)
{
	struct cxls_sconn *c = cxls_sock_use(fd);
	unsigned int i;

	if (!c)
		return REAL(recvmmsg)(fd, v, n, flags, timeout);
	for (i = 0; i < n; i++) {
		ssize_t r = msg_recv(c, fd, &v[i].msg_hdr, flags & ~MSG_WAITFORONE);

		if (r < 0)
			break;
		v[i].msg_len = (unsigned int)r;
		if (r == 0)
			break;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
	}
	cxls_sock_done(c);
	return i ? (int)i : -1;
}

/* file -> pooled socket through a bounce buffer */
static ssize_t sendfile_pool(struct cxls_sconn *c, int out, int in, off_t *off, size_t count)
{
	char *buf = malloc(BOUNCE);
	size_t done = 0;
	ssize_t r = 0;

	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	while (done < count) {
		size_t want = count - done < BOUNCE ? count - done : BOUNCE;
		struct iovec iov;

		r = off ? pread(in, buf, want, *off) : REAL(read)(in, buf, want);
		if (r <= 0)
			break;
		iov.iov_base = buf;
		iov.iov_len = (size_t)r;
		r = cxls_sock_sendv(c, out, &iov, 1, 0);
		if (r <= 0)
			break;
		if (off)
			*off += r;
		else if (r < (ssize_t)iov.iov_len)
			lseek(in, r - (ssize_t)iov.iov_len, SEEK_CUR);
		done += (size_t)r;
		if (r < (ssize_t)iov.iov_len)
			break;
	}
	free(buf);
	return done ? (ssize_t)done : r;
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct cxls_sconn *c = cxls_sock_use(out);
	ssize_t r;

	if (!c)
		return REAL(sendfile)(out, in, off, count);
	r = sendfile_pool(c, out, in, off, count);
	cxls_sock_done(c);
	return r;
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	struct cxls_sconn *c = cxls_sock_use(out);
	ssize_t r;

	if (!c)
		return REAL(sendfile64)(out, in, off, count);
	r = sendfile_pool(c, out, in, off, count);
	cxls_sock_done(c);
	return r;
}

/* pipe <-> pooled socket: peek, write what the pipe takes, consume that. */
static ssize_t splice_pool(int in, struct cxls_sconn *cin, int out, struct cxls_sconn *cout,
			   size_t len, unsigned int flags)
{
	size_t want = len < BOUNCE ? len : BOUNCE;
	char *buf = malloc(want ? want : 1);
	struct iovec iov = { buf, want };
	int nb = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
	ssize_t r;

	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	if (cout) {
		r = REAL(read)(in, buf, want);
		if (r > 0) {
			iov.iov_len = (size_t)r;
			r = cxls_sock_sendv(cout, out, &iov, 1, nb);
		}
	} else {
		r = cxls_sock_recvv(cin, in, &iov, 1, MSG_PEEK | nb);
		if (r > 0)
			r = REAL(write)(out, buf, (size_t)r);
		if (r > 0) {
			iov.iov_len = (size_t)r;
			r = cxls_sock_recvv(cin, in, &iov, 1, MSG_DONTWAIT);
		}
	}
	free(buf);
	return r;
}

EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		      unsigned int flags)
{
	struct cxls_sconn *cin = cxls_sock_use(in), *cout = cin ? NULL : cxls_sock_use(out);
	ssize_t r;

	if (!cin && !cout)
		return REAL(splice)(in, off_in, out, off_out, len, flags);
	if ((cin && off_in) || (cout && off_out)) {
		errno = ESPIPE;
		r = -1;
	} else {
		r = splice_pool(in, cin, out, cout, len, flags);
	}
	cxls_sock_done(cin ? cin : cout);
	return r;
}

/* _FORTIFY_SOURCE entry points: check the buffer the way glibc does. */
EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		return REAL(__read_chk)(fd, buf, n, buflen); /* aborts */
	return read(fd, buf, n);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		return REAL(__recv_chk)(fd, buf, n, buflen, flags);
	return recv(fd, buf, n, flags);
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
			      struct sockaddr *sa, socklen_t *len)
{
	if (n > buflen)
		return REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, sa, len);
	return recvfrom(fd, buf, n, flags, sa, len);
}
